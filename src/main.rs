//! The `conform` command line: `run`, `parse`, `formats`, `bench`.

mod bench;
mod cost;
mod fuzzing;

use clap::{Args, Parser, Subcommand};
use conform::backends::AnyBackend;
use conform::backends::adapter;
use conform::backends::builtin::capture_panics;
use conform::formats;
use conform::harness::chunking::{ChunkingParams, Strategy};
use conform::harness::classify::CaseContext;
use conform::harness::corpus::{self, LoadOptions};
use conform::harness::format_checks;
use conform::harness::invariants::Compare;
use conform::harness::known::KnownFailures;
use conform::harness::report::{self, Shard};
use conform::harness::run::{CaseReport, RunConfig};
use conform::harness::select::{Choice, Selection, select_cuts};
use conform::harness::session::{self, RunPlan};
use conform::harness::tokens::Tokenizer;
use conform::outputs::matrix;
use conform::outputs::table::{self, Colour};
use conform::outputs::{engines, html, report_dir};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Exit code: every expectation and invariant held.
pub(crate) const EXIT_OK: u8 = 0;
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
    Formats {
        /// Also list every option of every format, with its default and its reason.
        #[arg(long)]
        options: bool,
    },
    /// Measure parser throughput (whole and in small chunks) against serde_json.
    Bench(bench::BenchArgs),
    /// Time an adapter's engine parser on a large-argument call per format, one token per
    /// delta, beside conform's own parser (specs/engines.md §4).
    EngineCost(cost::CostArgs),
    /// Write the engines matrix page (README.md and index.html) from the directory
    /// `scripts/engines` filled (specs/engines.md).
    EnginesReport {
        /// The directory holding manifest.json [default: reports/engines].
        #[arg(default_value = "reports/engines")]
        dir: PathBuf,
        /// Corpus directories the reports' cases come from, read to classify failures.
        #[arg(long, default_value = "corpus/")]
        corpus: Vec<String>,
    },
    #[command(flatten)]
    Fuzzing(fuzzing::FuzzCommand),
    /// Check the format-level invariants (cdata_split, type_inference) of the built-in parsers.
    SelfCheck {
        /// Only this format [default: every format that declares such checks].
        #[arg(long)]
        format: Option<String>,
        /// The parser checked: `builtin` or `cmd:COMMAND` (an adapter).
        #[arg(long, default_value = "builtin")]
        parser: String,
        /// Seconds an adapter may take to answer one replay.
        #[arg(long, default_value = "10", value_parser = seconds)]
        timeout: Duration,
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
    /// Comma-separated strategies [default: all]: whole, bytes, chars, two_cut, markers, random,
    /// tokens, bursts, recorded.
    #[arg(long, value_delimiter = ',')]
    strategies: Option<Vec<String>>,
    #[command(flatten)]
    tokens: TokenArgs,
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
    #[arg(long, default_value = "10", value_parser = seconds)]
    timeout: Duration,
    /// What is compared besides calls, text and error-versus-no-error: comma-separated
    /// `warnings`, `ids`, `error_kinds`, or `all` / `none` [default: all for builtin, none for
    /// an adapter] (specs/adapter.md §6).
    #[arg(long, value_parser = Compare::parse)]
    compare: Option<Compare>,
    /// Most seconds one case may take: replays not started by then are listed, not failed.
    #[arg(long, value_parser = seconds)]
    case_budget: Option<Duration>,
    /// Seconds an adapter copy may take to start and answer the hello (every restart too).
    #[arg(long, value_parser = seconds, default_value = "60")]
    start_timeout: Duration,
    /// Set an option of a built-in parser, `FORMAT.NAME=true|false` (repeatable; overrides
    /// the corpus directories' conform.toml; `conform formats --options` lists them).
    #[arg(long = "option", value_name = "FORMAT.NAME=BOOL")]
    options: Vec<String>,
}

/// The tokenizer and bursts of the token-aligned strategies.
#[derive(Args)]
struct TokenArgs {
    /// Tokenizer of `tokens`/`bursts`: a tiktoken ranks file or a Hugging Face tokenizer.json
    /// (with the `hf-tokenizers` feature) [default: o200k_base, built in].
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// Number of seeded `bursts` groupings per case.
    #[arg(long, default_value_t = 4)]
    bursts: usize,
    /// Most tokens per delta in `bursts`.
    #[arg(long, default_value_t = 8)]
    burst_max_tokens: usize,
}

impl TokenArgs {
    /// The --tokenizer, loaded once for the whole run.
    fn load(&self) -> Result<Option<Arc<Tokenizer>>, String> {
        let loaded = self.tokenizer.as_deref().map(Tokenizer::load).transpose()?;
        Ok(loaded.map(Arc::new))
    }
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
    #[arg(long, conflicts_with_all = ["recorded", "strategy"])]
    cuts: Option<String>,
    /// Replay the case's recorded deltas (its `.deltas.json` sidecar).
    #[arg(long, conflicts_with = "strategy")]
    recorded: bool,
    /// Replay one chunking of this strategy, made as `conform run` makes it.
    #[arg(long)]
    strategy: Option<String>,
    /// Which chunking of --strategy, from 0.
    #[arg(long, default_value_t = 0, requires = "strategy")]
    chunking: usize,
    /// Attach token ids to --cuts or --recorded (every cut must be a token boundary).
    #[arg(long)]
    token_ids: bool,
    /// Master seed of the seeded strategies.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    tokens: TokenArgs,
    /// Print only the folded result, not every event.
    #[arg(long)]
    result_only: bool,
    /// The parser: `builtin` or `cmd:COMMAND`, as for `conform run` (an adapter's events are
    /// folded as they arrive: the result and any delta-contract breach are printed).
    #[arg(long, default_value = "builtin")]
    parser: String,
    /// Seconds an adapter may take to answer.
    #[arg(long, default_value = "10", value_parser = seconds)]
    timeout: Duration,
    /// Set an option of a built-in parser, `FORMAT.NAME=true|false` (repeatable; overrides
    /// the corpus directory's conform.toml; `conform formats --options` lists them).
    #[arg(long = "option", value_name = "FORMAT.NAME=BOOL")]
    options: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A panic outside a replay is a bug: its message is printed even once the replay hook
    // (which keeps messages for the replay's report) is installed.
    let code = std::panic::catch_unwind(|| match cli.command {
        Command::Run(a) => cmd_run(a),
        Command::Parse(a) => cmd_parse(a),
        Command::Formats { options } => cmd_formats(options),
        Command::Bench(a) => bench::run(a),
        Command::EngineCost(a) => cost::run(a),
        Command::EnginesReport { dir, corpus } => cmd_engines_report(&dir, &corpus),
        Command::Fuzzing(c) => fuzzing::run(c),
        Command::Report(c) => cmd_report(c),
        Command::SelfCheck {
            format,
            parser,
            timeout,
        } => cmd_self_check(format.as_deref(), &parser, timeout),
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

pub(crate) fn usage_error(msg: impl std::fmt::Display) -> u8 {
    eprintln!("error: {msg}");
    EXIT_USAGE
}

/// `conform engines-report DIR`: README.md and index.html of the engines matrix.
fn cmd_engines_report(dir: &Path, corpus_paths: &[String]) -> u8 {
    let m = match engines::load(dir) {
        Ok(m) => m,
        Err(e) => return usage_error(e),
    };
    let corpus = corpus::load(corpus_paths, &LoadOptions::default());
    let by_id: std::collections::HashMap<&str, &corpus::Case> =
        corpus.cases.iter().map(|c| (c.id.as_str(), c)).collect();
    let contexts = std::sync::Mutex::new(std::collections::HashMap::new());
    let context = |c: &report::CaseOut| {
        let mut cache = contexts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .entry(c.id.clone())
            .or_insert_with(|| match by_id.get(c.id.as_str()) {
                Some(case) => CaseContext::of(case),
                None => CaseContext::of_format(&c.format),
            })
            .clone()
    };
    let pages = engines::pages(&m, &context);
    let footer = format!(
        "Written by conform {} from {} (specs/engines.md).",
        env!("CARGO_PKG_VERSION"),
        dir.join("manifest.json").display()
    );
    let mut files = vec![
        (dir.join("README.md"), engines::markdown(&pages.markdown)),
        (
            dir.join("index.html"),
            engines::html_page(&pages.html, &footer),
        ),
    ];
    for (name, blocks) in &pages.failures {
        files.push((
            dir.join(name).join("FAILURES.md"),
            engines::markdown(blocks),
        ));
    }
    for (path, text) in files {
        if let Err(e) = report_dir::write_atomic(&path, text.as_bytes()) {
            return usage_error(e);
        }
    }
    eprintln!(
        "wrote {} and {}",
        dir.join("README.md").display(),
        dir.join("index.html").display()
    );
    EXIT_OK
}

fn cmd_formats(options: bool) -> u8 {
    for f in formats::REGISTRY {
        let render = if f.render.is_some() {
            ""
        } else {
            " (no renderer)"
        };
        out!("{:<14} {}{render}", f.id, f.summary);
        if options {
            for o in f.options.list() {
                out!("    {}.{} = {}", f.id, o.name, o.default);
                out!("        {}", o.reason);
            }
        }
    }
    EXIT_OK
}

fn cmd_run(a: RunArgs) -> u8 {
    let strategies = match &a.strategies {
        None => Strategy::DEFAULT.to_vec(),
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
    let tokenizer = match a.tokens.load() {
        Ok(t) => t,
        Err(e) => return usage_error(e),
    };
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
    let mut adapter_opts = adapter_options(a.jobs, a.timeout);
    adapter_opts.start_timeout = a.start_timeout;
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
        Some(p) if p.exists() => match report_dir::read(p) {
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
    let options = match formats::registry::from_assignments(&a.options) {
        Ok(o) => o,
        Err(e) => return usage_error(e),
    };
    let plan = RunPlan {
        paths,
        load: LoadOptions {
            format: a.format.clone(),
            options,
        },
        cfg: RunConfig {
            strategies,
            params: ChunkingParams {
                seed: a.seed,
                random_groupings: a.seeds,
                random_max_chunk: a.max_chunk,
                two_cut_cap: a.two_cut_cap,
                bursts: a.tokens.bursts,
                burst_max_tokens: a.tokens.burst_max_tokens,
            },
            compare: a.compare,
            case_budget: a.case_budget,
            tokenizer,
            ..RunConfig::default()
        },
        parsers: specs,
        adapter: adapter_opts,
        known,
        baseline,
        shard,
    };
    let show_progress =
        !a.quiet && std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
    let progress = Progress::new(show_progress);
    let started = Instant::now();
    let run = match session::execute(&plan, &progress) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let rep = &run.report;
    let parser_runs = &run.parser_runs;
    let matrix = (parser_runs.len() > 1).then(|| {
        let pairs: Vec<(String, Vec<CaseReport>)> = parser_runs
            .iter()
            .map(|r| (r.name.clone(), r.reports.clone()))
            .collect();
        matrix::matrix(&pairs)
    });
    let colour = Colour::detect(std::io::stdout().is_terminal());
    let mut out = Stdout;
    let _ = write!(out, "{}", table::corpus_errors(&run.corpus_errors));
    if let Some(c) = &rep.comparison {
        let _ = write!(out, "{}", table::comparison(c, colour));
    }
    let headed = rep.runs.len() > 1 || rep.runs.iter().any(|r| r.parser != "builtin");
    for (run, pr) in rep.runs.iter().zip(parser_runs) {
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
        for id in plan.known.unseen(&run.parser, &seen) {
            if plan.shard.is_none() {
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
        && let Err(e) = report_dir::write_reports(dir, rep, matrix.as_ref())
    {
        return usage_error(e);
    }
    if a.update_baseline
        && let Some(p) = &a.baseline
    {
        if let Err(e) = report_dir::write_atomic(p, rep.stable().to_json().as_bytes()) {
            return usage_error(e);
        }
        eprintln!("baseline {} updated", p.display());
    }
    if let Some(why) = &run.judged_nothing {
        eprintln!("error: {why}");
    }
    if !a.quiet {
        eprintln!(
            "{} case(s), {} replay(s), seed {}, in {:.2?}",
            run.cases,
            rep.runs.iter().map(|r| r.totals.replays).sum::<usize>(),
            a.seed,
            started.elapsed()
        );
        // Options change verdicts: a run under non-default ones says so.
        let with_options = rep
            .runs
            .iter()
            .flat_map(|r| &r.cases)
            .filter(|c| !c.options.is_empty())
            .count();
        if with_options > 0 {
            let set: std::collections::BTreeSet<String> = rep
                .runs
                .iter()
                .flat_map(|r| &r.cases)
                .flat_map(|c| {
                    c.options
                        .iter()
                        .map(|(n, v)| format!("{}.{n}={v}", c.format))
                })
                .collect();
            eprintln!(
                "{with_options} case(s) judged under options other than the defaults: {}",
                set.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
    if let Some(why) = &run.judged_nothing {
        eprintln!("error: {why}");
    }
    run.exit_code()
}

/// A number of seconds, as clap's value parser: positive, finite and at most a day (a deadline
/// must not overflow).
pub(crate) fn seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(t) if t > 0.0 && t <= 86_400.0 => Ok(Duration::from_secs_f64(t)),
        Ok(_) => Err("must be a number of seconds above 0 and at most 86400 (a day)".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Adapter options from the command line's `--jobs` and `--timeout`.
fn adapter_options(jobs: Option<usize>, timeout: Duration) -> adapter::AdapterOptions {
    let mut opts = adapter::AdapterOptions {
        timeout,
        ..adapter::AdapterOptions::default()
    };
    if let Some(j) = jobs {
        opts.jobs = j;
    }
    opts
}

fn cmd_self_check(only: Option<&str>, parser: &str, timeout: Duration) -> u8 {
    if let Some(f) = only
        && formats::by_id(f).is_none()
    {
        return usage_error(format!(
            "unknown format {f:?} (known: {})",
            corpus::known_formats()
        ));
    }
    let backend = match AnyBackend::start(parser, &adapter_options(None, timeout)) {
        Ok(b) => b,
        Err(e) => return usage_error(e),
    };
    capture_panics();
    let mut failed = false;
    for f in formats::REGISTRY
        .iter()
        .filter(|f| only.is_none_or(|o| o == f.id) && backend.backend().supports(f.id))
    {
        for r in format_checks::check_format(f, backend.backend()) {
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

/// A progress bar on stderr that appears only once a parser's run has taken more than a second.
struct Progress {
    enabled: bool,
    bar: std::sync::Mutex<Option<(ProgressBar, Instant)>>,
    shown: AtomicBool,
}

impl Progress {
    fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            bar: std::sync::Mutex::new(None),
            shown: AtomicBool::new(false),
        }
    }
}

impl session::Progress for Progress {
    fn start(&self, parser: &str, cases: usize) {
        if !self.enabled {
            return;
        }
        let b = ProgressBar::with_draw_target(Some(cases as u64), ProgressDrawTarget::hidden());
        b.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} cases {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b.set_prefix(parser.to_string());
        self.shown.store(false, Ordering::Relaxed);
        if let Ok(mut slot) = self.bar.lock() {
            *slot = Some((b, Instant::now()));
        }
    }

    fn tick(&self) {
        let Ok(slot) = self.bar.lock() else { return };
        if let Some((b, started)) = slot.as_ref() {
            b.inc(1);
            if started.elapsed() > Duration::from_secs(1)
                && !self.shown.swap(true, Ordering::Relaxed)
            {
                b.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
    }

    fn done(&self) {
        if let Ok(mut slot) = self.bar.lock()
            && let Some((b, _)) = slot.take()
        {
            b.finish_and_clear();
        }
    }
}

/// `conform report …`: work on saved reports.
fn cmd_report(c: ReportCommand) -> u8 {
    match c {
        ReportCommand::Diff { old, new } => {
            let (old, new) = match (report_dir::read(&old), report_dir::read(&new)) {
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
                match report_dir::read(p) {
                    Ok(r) => parts.push(r),
                    Err(e) => return usage_error(e),
                }
            }
            match report::merge(&parts) {
                Ok(m) => match report_dir::write_atomic(&output, m.to_json().as_bytes()) {
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
        } => match report_dir::read(&path) {
            Ok(r) => match report_dir::write_reports(&output, &r, None) {
                Ok(()) => EXIT_OK,
                Err(e) => usage_error(e),
            },
            Err(e) => usage_error(e),
        },
        ReportCommand::Html { reports, output } => {
            let written = html::collect(&reports).and_then(|history| {
                report_dir::write_atomic(
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
    let options = match formats::registry::from_assignments(&a.options) {
        Ok(o) => o,
        Err(e) => return usage_error(e),
    };
    let corpus = corpus::load(
        std::slice::from_ref(&a.file),
        &LoadOptions {
            format: a.format.clone(),
            options,
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
    let choice = match (&a.strategy, a.recorded, a.cuts.as_deref()) {
        (Some(s), _, _) => match s.parse::<Strategy>() {
            Ok(strategy) => Choice::Strategy {
                strategy,
                index: a.chunking,
            },
            Err(e) => return usage_error(e),
        },
        (None, true, _) => Choice::Recorded,
        (None, false, cuts) => match cuts.map(parse_cuts).transpose() {
            Ok(c) => Choice::Cuts(c.unwrap_or_default()),
            Err(e) => return usage_error(e),
        },
    };
    let tokenizer = match a.tokens.load() {
        Ok(t) => t,
        Err(e) => return usage_error(e),
    };
    let selection = Selection {
        choice,
        params: ChunkingParams {
            seed: a.seed,
            bursts: a.tokens.bursts,
            burst_max_tokens: a.tokens.burst_max_tokens,
            ..ChunkingParams::default()
        },
        tokenizer,
        token_ids: a.token_ids,
    };
    let Some(format) = formats::by_id(case.format) else {
        return usage_error(format!("unknown format {}", case.format));
    };
    let cuts = match select_cuts(case, format, &selection) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    if let Err(e) = adapter::parse_parser_spec(&a.parser) {
        return usage_error(e);
    }
    let opts = adapter_options(None, a.timeout);
    match session::parse_one(case, &a.parser, &opts, &cuts, !a.result_only) {
        Ok((doc, ok)) => {
            out!(
                "{}",
                serde_json::to_string_pretty(&doc).unwrap_or_else(|e| e.to_string())
            );
            if ok { EXIT_OK } else { EXIT_FAIL }
        }
        Err(e) => usage_error(e),
    }
}
