//! The `conform` command line: `run`, `parse`, `formats`, `bench`.

mod bench;
mod fuzzing;

use clap::{Args, Parser, Subcommand};
use conform::event::ParseResult;
use conform::formats;
use conform::harness::chunking::{ChunkingParams, Cuts, Strategy};
use conform::harness::corpus::{self, LoadOptions};
use conform::harness::replay::{Builtin, capture_panics, events_of};
use conform::harness::run::{CaseReport, RunConfig, run_cases_on};
use conform::harness::{format_checks, judged};
use conform::outputs::adapter::{self, AnyBackend, ParserRun};
use conform::outputs::known::KnownFailures;
use conform::outputs::matrix;
use conform::outputs::report::{self, Report, Shard};
use conform::outputs::table::{self, Colour};
use conform::outputs::{html, report_dir};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Exit code: every expectation and invariant held.
const EXIT_OK: u8 = 0;
/// Exit code: failures (or regressions).
const EXIT_FAIL: u8 = 1;
/// Exit code: usage or corpus errors.
const EXIT_USAGE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "conform",
    version,
    about = "Finds the bugs in LLM tool-call parsers: replays transcripts under every chunking and checks invariants."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay corpora under every chunking and check every invariant.
    Run(RunArgs),
    /// Parse one transcript (optionally cut at given offsets) and print events and result as JSON.
    Parse(ParseArgs),
    /// List the formats conform knows.
    Formats,
    /// Measure parser throughput (whole and in small chunks) against serde_json.
    Bench(bench::BenchArgs),
    #[command(flatten)]
    Fuzzing(fuzzing::FuzzCommand),
    /// Check the format-level invariants (cdata_split, type_inference) of the built-in parsers.
    SelfCheck {
        /// Only this format [default: every format that declares such checks].
        #[arg(long)]
        format: Option<String>,
    },
    /// Compare, merge and render saved reports.
    #[command(subcommand)]
    Report(ReportCommand),
}

#[derive(Subcommand)]
enum ReportCommand {
    /// Compare two reports case by case and per format (exit 1 on regressions).
    Diff {
        /// The earlier report.json.
        old: PathBuf,
        /// The later report.json.
        new: PathBuf,
    },
    /// Merge shard reports into the report an unsharded run would write.
    Merge {
        /// The shard reports.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Where to write the merged report.json.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Write report.md and junit.xml (and report.json) for a saved report into a directory.
    Render {
        /// The report.json.
        report: PathBuf,
        /// The directory to write into.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Write a self-contained HTML page (rates over time, current failures) to DIR/index.html.
    Html {
        /// report.json files, or directories searched for report.json files (a history).
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// The directory to write index.html into.
        #[arg(short, long)]
        output: PathBuf,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Corpus directories, files or glob patterns [default: corpus/].
    paths: Vec<String>,
    /// Treat every file as this format instead of using directory names.
    #[arg(long)]
    format: Option<String>,
    /// Master seed of every seeded chunking.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Number of random groupings per case.
    #[arg(long, default_value_t = 8, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1 << 20))]
    seeds: usize,
    /// Largest chunk size of random groupings, in bytes.
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 30))]
    max_chunk: usize,
    /// Most single-cut replays per transcript (sampled evenly beyond it).
    #[arg(long, default_value_t = 512, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1 << 24))]
    two_cut_cap: usize,
    /// Comma-separated strategies [default: all]: whole, bytes, chars, two_cut, markers, random.
    #[arg(long, value_delimiter = ',')]
    strategies: Option<Vec<String>>,
    /// The parser judged: `builtin` or `cmd:COMMAND` (an adapter, see specs/adapter.md);
    /// repeat to compare several [default: builtin].
    #[arg(long = "parser", value_name = "PARSER")]
    parsers: Vec<String>,
    /// Write report.json, report.md and junit.xml into this directory.
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// Compare with a saved report: pass→fail cases and rate drops are regressions (exit 1).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Rewrite the --baseline file with this run's results (the only way it changes).
    #[arg(long, requires = "baseline")]
    update_baseline: bool,
    /// Files of known failures [default: KNOWN_FAILURES in each corpus directory given].
    #[arg(long)]
    known_failures: Vec<PathBuf>,
    /// Replay only shard K of N (1-based), split by a stable hash of the case id.
    #[arg(long)]
    shard: Option<String>,
    /// Print only the table and failures: no progress bar, no closing note.
    #[arg(long, short)]
    quiet: bool,
    /// Child processes per adapter [default: number of cores].
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    jobs: Option<usize>,
    /// Seconds an adapter may take to answer one replay (up to a day).
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    timeout: f64,
}

#[derive(Args)]
struct ParseArgs {
    /// The transcript file (`.txt`, `.jsonl` with --line, or `.session.json`).
    file: String,
    /// The format [default: from the directory name].
    #[arg(long)]
    format: Option<String>,
    /// The line id, for a `.jsonl` file.
    #[arg(long)]
    line: Option<String>,
    /// Cut offsets, comma-separated; for a session one list per turn separated by `/`.
    #[arg(long)]
    cuts: Option<String>,
    /// Print only the folded result, not every event.
    #[arg(long)]
    result_only: bool,
}

/// A number of seconds for `--timeout`: positive, finite and at most a day (a `Duration`
/// deadline must not overflow).
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t > 0.0 && t <= 86_400.0 => Ok(t),
        Ok(_) => Err("must be a number of seconds above 0 and at most 86400 (a day)".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A panic outside a replay is a bug: its message is printed even once the replay hook
    // (which keeps messages for the replay's report) is installed.
    let code = std::panic::catch_unwind(|| match cli.command {
        Command::Run(a) => cmd_run(a),
        Command::Parse(a) => cmd_parse(a),
        Command::Formats => cmd_formats(),
        Command::Bench(a) => bench::run(a),
        Command::Fuzzing(c) => fuzzing::run(c),
        Command::Report(c) => cmd_report(c),
        Command::SelfCheck { format } => cmd_self_check(format.as_deref()),
    })
    .unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        eprintln!("error: conform panicked (a bug; please report it): {msg}");
        101
    });
    // Output that did not reach stdout (a full disk, a closed pipe) fails the command.
    let flushed = std::io::stdout().flush();
    match STDOUT_ERROR
        .get()
        .map(|e| e.to_string())
        .or(flushed.err().map(|e| e.to_string()))
    {
        Some(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            ExitCode::from(EXIT_USAGE)
        }
        None => ExitCode::from(code),
    }
}

/// The first error writing to stdout.
static STDOUT_ERROR: std::sync::OnceLock<std::io::Error> = std::sync::OnceLock::new();

/// Stdout that remembers its first write error, so `main` can fail the command.
struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = std::io::stdout().lock().write(buf);
        if let Err(e) = &r {
            let _ = STDOUT_ERROR.set(std::io::Error::new(e.kind(), e.to_string()));
        }
        r
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = std::io::stdout().lock().flush();
        if let Err(e) = &r {
            let _ = STDOUT_ERROR.set(std::io::Error::new(e.kind(), e.to_string()));
        }
        r
    }
}

/// Prints to stdout; a failed write fails the command at exit instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = writeln!(Stdout, $($arg)*);
    }};
}

fn usage_error(msg: impl std::fmt::Display) -> u8 {
    eprintln!("error: {msg}");
    EXIT_USAGE
}

fn cmd_formats() -> u8 {
    for f in formats::REGISTRY {
        let render = if f.render.is_some() {
            ""
        } else {
            " (no renderer)"
        };
        out!("{:<14} {}{render}", f.id, f.summary);
    }
    EXIT_OK
}

fn cmd_run(a: RunArgs) -> u8 {
    let strategies = match &a.strategies {
        None => Strategy::ALL.to_vec(),
        Some(list) => {
            let mut out = Vec::new();
            for s in list {
                match s.parse::<Strategy>() {
                    Ok(st) => out.push(st),
                    Err(e) => return usage_error(e),
                }
            }
            out
        }
    };
    if let Some(f) = &a.format
        && formats::by_id(f).is_none()
    {
        return usage_error(format!(
            "unknown format {f:?} (known: {})",
            corpus::known_formats()
        ));
    }
    let shard = match a.shard.as_deref().map(Shard::parse).transpose() {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    let specs = if a.parsers.is_empty() {
        vec!["builtin".to_string()]
    } else {
        a.parsers.clone()
    };
    for spec in &specs {
        if let Err(e) = adapter::parse_parser_spec(spec) {
            return usage_error(e);
        }
    }
    let mut adapter_opts = adapter::AdapterOptions::default();
    if let Some(j) = a.jobs {
        adapter_opts.jobs = j;
    }
    adapter_opts.timeout = Duration::from_secs_f64(a.timeout);
    let paths = if a.paths.is_empty() {
        vec!["corpus/".to_string()]
    } else {
        a.paths.clone()
    };
    let mut known = KnownFailures::default();
    let known_files: Vec<PathBuf> = if a.known_failures.is_empty() {
        paths
            .iter()
            .map(|p| Path::new(p).join(corpus::KNOWN_FAILURES_FILE))
            .filter(|p| p.is_file())
            .collect()
    } else {
        a.known_failures.clone()
    };
    for f in &known_files {
        match KnownFailures::load(f) {
            Ok(k) => known.extend(k),
            Err(e) => return usage_error(e),
        }
    }
    let baseline = match &a.baseline {
        Some(p) if p.exists() => match Report::read(p) {
            Ok(r) => Some(r),
            Err(e) => return usage_error(e),
        },
        Some(p) if !a.update_baseline => {
            return usage_error(format!(
                "{}: no such baseline (create it with --update-baseline)",
                p.display()
            ));
        }
        _ => None,
    };

    if let Some(dir) = &a.report_dir
        && let Err(e) = report_dir::prepare(dir)
    {
        return usage_error(e);
    }
    let started = Instant::now();
    let mut corpus = corpus::load(
        &paths,
        &LoadOptions {
            format: a.format.clone(),
        },
    );
    // Format-level invariants (cdata_split, type_inference) of the formats in the corpus,
    // decided before sharding so that shards split them like cases.
    let formats_seen: BTreeSet<&str> = corpus.cases.iter().map(|c| c.format).collect();
    let loaded = corpus.cases.len();
    if let Some(s) = shard {
        corpus.cases.retain(|c| s.contains(&c.id));
    }
    let checked: Vec<(&'static formats::Format, String, String)> = formats::REGISTRY
        .iter()
        .filter(|f| formats_seen.contains(f.id))
        .flat_map(|f| {
            format_checks::declared(f)
                .into_iter()
                .map(move |(id, m)| (*f, id, m))
        })
        .filter(|(_, id, _)| shard.is_none_or(|s| s.contains(id)))
        .collect();
    let digests = report::case_digests(
        &corpus.cases,
        checked.iter().map(|(_, id, m)| (id.as_str(), m.as_str())),
    );
    let cfg = RunConfig {
        strategies: strategies.clone(),
        params: ChunkingParams {
            seed: a.seed,
            random_groupings: a.seeds,
            random_max_chunk: a.max_chunk,
            two_cut_cap: a.two_cut_cap,
        },
        ..RunConfig::default()
    };
    capture_panics();
    let show_progress =
        !a.quiet && std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
    let mut runs = Vec::new();
    let mut per_case_seconds = BTreeMap::new();
    let mut parser_runs: Vec<ParserRun> = Vec::new();
    for spec in &specs {
        // Each adapter is stopped before the next one starts.
        let backend = match AnyBackend::start(spec, &adapter_opts) {
            Ok(b) => b,
            Err(e) => return usage_error(e),
        };
        let progress = Progress::new(show_progress, corpus.cases.len(), spec);
        let mut reports = run_cases_on(&corpus.cases, backend.backend(), &cfg, &|| progress.tick());
        let mut done: BTreeSet<&str> = BTreeSet::new();
        for (f, _, _) in &checked {
            if done.insert(f.id) && backend.backend().supports(f.id) {
                reports.extend(
                    format_checks::check_format(f, backend.backend())
                        .into_iter()
                        .filter(|r| checked.iter().any(|(_, id, _)| *id == r.id)),
                );
            }
        }
        progress.done();
        per_case_seconds.insert(
            spec.clone(),
            reports
                .iter()
                .map(|r| (r.id.clone(), r.elapsed.as_secs_f64()))
                .collect(),
        );
        runs.push(report::build_run(spec, &digests, &reports, &known));
        parser_runs.push(ParserRun::new(spec, &backend, reports));
    }
    let matrix = (parser_runs.len() > 1).then(|| {
        let pairs: Vec<(String, Vec<CaseReport>)> = parser_runs
            .iter()
            .map(|r| (r.name.clone(), r.reports.clone()))
            .collect();
        matrix::matrix(&pairs)
    });
    let mut rep = Report {
        schema_version: report::SCHEMA_VERSION,
        tool: report::Tool {
            name: "conform".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        seed: a.seed,
        strategies: strategies.iter().map(|s| s.as_str().to_string()).collect(),
        chunking: (&cfg.params).into(),
        shard,
        corpus: report::corpus_info(&digests, &corpus.errors),
        runs,
        comparison: None,
        timings: None,
    };
    rep.comparison = baseline.as_ref().map(|b| report::compare(b, &rep));
    rep.timings = Some(report::Timings {
        generated_at: report::now_rfc3339(),
        total_seconds: started.elapsed().as_secs_f64(),
        per_case_seconds,
    });

    let colour = Colour::detect(std::io::stdout().is_terminal());
    let mut out = Stdout;
    let _ = write!(out, "{}", table::corpus_errors(&corpus.errors));
    if let Some(c) = &rep.comparison {
        let _ = write!(out, "{}", table::comparison(c, colour));
    }
    let headed = rep.runs.len() > 1 || rep.runs.iter().any(|r| r.parser != "builtin");
    for (run, pr) in rep.runs.iter().zip(&parser_runs) {
        if headed {
            let _ = writeln!(out, "parser: {}", run.parser);
        }
        let _ = writeln!(out, "{}", table::format_table(run, colour));
        let _ = write!(out, "{}", table::failures(run, colour));
        if pr.results_only() {
            let _ = writeln!(
                out,
                "delta_contract: not applicable (the parser reports only final results)"
            );
        }
        if !a.quiet && pr.stderr_bytes > 0 {
            eprintln!(
                "{}: {} byte(s) on stderr; the last lines:\n{}",
                pr.name,
                pr.stderr_bytes,
                last_lines(&pr.stderr_tail, 10)
            );
        }
        let seen: Vec<&str> = run.cases.iter().map(|c| c.id.as_str()).collect();
        for id in known.unseen(&run.parser, &seen) {
            if shard.is_none() {
                let _ = writeln!(
                    out,
                    "note: known failure {id} of {} was not replayed",
                    run.parser
                );
            }
        }
    }
    if let Some(m) = &matrix {
        let _ = write!(out, "{}", matrix::render(m, colour));
    }
    if let Some(dir) = &a.report_dir
        && let Err(e) = write_reports(dir, &rep, matrix.as_ref())
    {
        return usage_error(e);
    }
    if a.update_baseline
        && let Some(p) = &a.baseline
    {
        if let Err(e) = report::write_atomic(p, rep.stable().to_json().as_bytes()) {
            return usage_error(e);
        }
        eprintln!("baseline {} updated", p.display());
    }
    if !a.quiet {
        eprintln!(
            "{} case(s), {} replay(s), seed {}, in {:.2?}",
            corpus.cases.len(),
            rep.runs.iter().map(|r| r.totals.replays).sum::<usize>(),
            a.seed,
            started.elapsed()
        );
    }
    let judged: Vec<(&str, usize)> = rep
        .runs
        .iter()
        .map(|r| (r.parser.as_str(), r.cases.len()))
        .collect();
    if let Some(why) = judged::nothing_judged(&paths, loaded, a.shard.as_deref(), &judged) {
        eprintln!("error: {why}");
        EXIT_USAGE
    } else if !corpus.errors.is_empty() {
        EXIT_USAGE
    } else if rep.has_failures() {
        EXIT_FAIL
    } else {
        EXIT_OK
    }
}

fn cmd_self_check(only: Option<&str>) -> u8 {
    if let Some(f) = only
        && formats::by_id(f).is_none()
    {
        return usage_error(format!(
            "unknown format {f:?} (known: {})",
            corpus::known_formats()
        ));
    }
    capture_panics();
    let mut failed = false;
    for f in formats::REGISTRY
        .iter()
        .filter(|f| only.is_none_or(|o| o == f.id))
    {
        for r in format_checks::check_format(f, &Builtin) {
            out!(
                "{:<28} {:<5} {} replay(s)",
                r.id,
                r.status.as_str(),
                r.replays
            );
            for v in &r.violations {
                failed = true;
                out!("  {}: {} (cuts {:?})", v.invariant, v.message, v.cuts);
            }
        }
    }
    if failed { EXIT_FAIL } else { EXIT_OK }
}

/// The last `n` lines of `s`.
fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Writes report.json, report.md and junit.xml as one set.
fn write_reports(dir: &Path, rep: &Report, matrix: Option<&matrix::Matrix>) -> Result<(), String> {
    report_dir::write_reports(dir, rep, matrix)
}

/// A progress bar on stderr that appears only once a run has taken more than a second.
struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: AtomicBool,
}

impl Progress {
    fn new(enabled: bool, len: usize, parser: &str) -> Progress {
        let bar = enabled.then(|| {
            let b = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::hidden());
            b.set_style(
                ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} cases {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b.set_prefix(parser.to_string());
            b
        });
        Progress {
            bar,
            started: Instant::now(),
            shown: AtomicBool::new(false),
        }
    }

    fn tick(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
            if self.started.elapsed() > Duration::from_secs(1)
                && !self.shown.swap(true, Ordering::Relaxed)
            {
                b.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
    }

    fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// `conform report …`: work on saved reports.
fn cmd_report(c: ReportCommand) -> u8 {
    match c {
        ReportCommand::Diff { old, new } => {
            let (old, new) = match (Report::read(&old), Report::read(&new)) {
                (Ok(o), Ok(n)) => (o, n),
                (Err(e), _) | (_, Err(e)) => return usage_error(e),
            };
            let c = report::compare(&old, &new);
            let colour = Colour::detect(std::io::stdout().is_terminal());
            let text = table::comparison(&c, colour);
            if text.is_empty() {
                out!("no differences in case statuses or rates");
            } else {
                let _ = write!(Stdout, "{text}");
            }
            if c.regressions.is_empty() {
                EXIT_OK
            } else {
                EXIT_FAIL
            }
        }
        ReportCommand::Merge { reports, output } => {
            let mut parts = Vec::new();
            for p in &reports {
                match Report::read(p) {
                    Ok(r) => parts.push(r),
                    Err(e) => return usage_error(e),
                }
            }
            match report::merge(&parts) {
                Ok(m) => match report::write_atomic(&output, m.to_json().as_bytes()) {
                    Ok(()) => {
                        eprintln!(
                            "merged {} report(s) into {} ({} case(s))",
                            parts.len(),
                            output.display(),
                            m.corpus.cases
                        );
                        EXIT_OK
                    }
                    Err(e) => usage_error(e),
                },
                Err(e) => usage_error(e),
            }
        }
        ReportCommand::Render {
            report: path,
            output,
        } => match Report::read(&path) {
            Ok(r) => match write_reports(&output, &r, None) {
                Ok(()) => EXIT_OK,
                Err(e) => usage_error(e),
            },
            Err(e) => usage_error(e),
        },
        ReportCommand::Html { reports, output } => {
            let written = html::collect(&reports).and_then(|history| {
                report::write_atomic(
                    &output.join("index.html"),
                    html::render(&history).as_bytes(),
                )
                .map(|()| history.len())
            });
            match written {
                Ok(n) => {
                    eprintln!(
                        "wrote {} from {n} report(s)",
                        output.join("index.html").display()
                    );
                    EXIT_OK
                }
                Err(e) => usage_error(e),
            }
        }
    }
}

fn parse_cuts(spec: &str) -> Result<Vec<Vec<usize>>, String> {
    spec.split('/')
        .map(|turn| {
            turn.split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    s.trim()
                        .parse::<usize>()
                        .map_err(|_| format!("invalid cut offset {s:?}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|mut v| {
                    v.sort_unstable();
                    v.dedup();
                    v
                })
        })
        .collect()
}

fn cmd_parse(a: ParseArgs) -> u8 {
    let corpus = corpus::load(
        std::slice::from_ref(&a.file),
        &LoadOptions {
            format: a.format.clone(),
        },
    );
    if let Some(e) = corpus.errors.first() {
        return usage_error(e);
    }
    let case = match (&a.line, corpus.cases.as_slice()) {
        (None, [one]) => one,
        (Some(id), cases) => match cases.iter().find(|c| c.line_id.as_deref() == Some(id)) {
            Some(c) => c,
            None => return usage_error(format!("no line with id {id:?} in {}", a.file)),
        },
        (None, []) => return usage_error(format!("{} holds no case", a.file)),
        (None, _) => {
            return usage_error(format!(
                "{} holds several cases: choose one with --line",
                a.file
            ));
        }
    };
    let cuts = match a.cuts.as_deref().map(parse_cuts).transpose() {
        Ok(c) => c.unwrap_or_default(),
        Err(e) => return usage_error(e),
    };
    if cuts.len() > case.turns.len() {
        return usage_error(format!(
            "{} cut lists for {} turn(s)",
            cuts.len(),
            case.turns.len()
        ));
    }
    let format = formats::by_id(case.format).expect("loaded cases name registered formats");
    let mut parser = (format.new_parser)(&case.tools);
    let mut turns = Vec::new();
    for (t, data) in case.turns.iter().enumerate() {
        let c = cuts.get(t).cloned().unwrap_or_default();
        if let Some(bad) = c.iter().find(|&&o| o == 0 || o >= data.len()) {
            return usage_error(format!(
                "cut offset {bad} is outside 1..{} of turn {}",
                data.len(),
                t + 1
            ));
        }
        let events = events_of(parser.as_mut(), data, &Cuts::At(c.clone()));
        let result = ParseResult::fold(&events);
        let mut v = json!({"cuts": c, "result": result});
        if !a.result_only {
            v["events"] = serde_json::to_value(&events).unwrap_or_default();
        }
        turns.push(v);
    }
    let doc = if turns.len() == 1 {
        let mut one = turns.pop().unwrap_or_default();
        one["format"] = json!(case.format);
        one["case"] = json!(case.id);
        one
    } else {
        json!({"format": case.format, "case": case.id, "turns": turns})
    };
    out!(
        "{}",
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| e.to_string())
    );
    EXIT_OK
}
