//! `conform run`: replay corpora under every chunking through one or more parsers, print the
//! tables and failures, write the report set and the baseline.

use super::{
    MAX_GROUPINGS, Stdout, TokenArgs, adapter_options, count, last_lines, seconds, usage_error,
};
use clap::Args;
use conform::backends::adapter;
use conform::formats;
use conform::harness::chunking::{ChunkingParams, Strategy};
use conform::harness::corpus::{self, LoadOptions};
use conform::harness::invariants::Compare;
use conform::harness::known::KnownFailures;
use conform::harness::report::Shard;
use conform::harness::run::{CaseReport, RunConfig};
use conform::harness::session::{self, RunPlan};
use conform::outputs::matrix;
use conform::outputs::report_dir;
use conform::outputs::table::{self, Colour};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Args)]
pub(crate) struct RunArgs {
    /// Corpus directories, files or glob patterns [default: corpus/].
    paths: Vec<String>,
    /// Treat every file as this format instead of using directory names.
    #[arg(long)]
    format: Option<String>,
    /// Master seed of every seeded chunking.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Number of random groupings per case.
    #[arg(long, default_value_t = 8, value_parser = count(0, MAX_GROUPINGS))]
    seeds: usize,
    /// Largest chunk size of random groupings, in bytes.
    #[arg(long, default_value_t = 16, value_parser = count(1, 1 << 30))]
    max_chunk: usize,
    /// Most single-cut replays per transcript (sampled evenly beyond it).
    #[arg(long, default_value_t = 512, value_parser = count(0, 1 << 24))]
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
    #[arg(long, value_parser = count(1, 1024))]
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
    /// Set a request mode of every case, `KEY=VALUE` (repeatable; overrides the cases' and
    /// the directories' `[request]`): `starting_state=none|reasoning|response`,
    /// `thinking=true|false`, `tool_choice=auto|required|none|name:TOOL`,
    /// `finish_reason=stop|length` (`specs/corpus.md` §1.2).
    #[arg(long = "request", value_name = "KEY=VALUE")]
    requests: Vec<String>,
    /// An external parser's dialect, `FORMAT.NAME=true|false` (repeatable): a rule the format's
    /// spec settles one way and the engine legitimately another (`kimi_k2.id_whole_header`).
    /// Its expectations are judged as conform's parser with these options reads the case.
    #[arg(long = "dialect", value_name = "FORMAT.NAME=BOOL")]
    dialect: Vec<String>,
}

/// `conform run`: the plan from the arguments, the run, what it prints, what it writes.
pub(crate) fn run(a: RunArgs) -> u8 {
    let plan = match plan(&a) {
        Ok(p) => p,
        Err(e) => return usage_error(e),
    };
    // Locked until the set is written: a second run into it fails here, before replaying.
    let report_dir = match a.report_dir.as_deref().map(report_dir::prepare).transpose() {
        Ok(d) => d,
        Err(e) => return usage_error(e),
    };
    let show_progress =
        !a.quiet && std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
    let progress = Progress::new(show_progress);
    let started = Instant::now();
    let run = match session::execute(&plan, &progress) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let matrix = (run.parser_runs.len() > 1).then(|| {
        let pairs: Vec<(String, Vec<CaseReport>)> = run
            .parser_runs
            .iter()
            .map(|r| (r.name.clone(), r.reports.clone()))
            .collect();
        matrix::matrix(&pairs)
    });
    print_tables(&a, &plan, &run, matrix.as_ref());
    if let Err(e) = write_outputs(&a, report_dir.as_ref(), &run, matrix.as_ref()) {
        return usage_error(e);
    }
    if !a.quiet {
        closing_note(&a, &run, started.elapsed());
    }
    // Last, once: the line a CI log ends with says why the job judged nothing.
    if let Some(why) = &run.judged_nothing {
        err!("error: {why}");
    }
    run.exit_code()
}

/// The strategies of `--strategies` [default: every default strategy].
fn strategies(a: &RunArgs) -> Result<Vec<Strategy>, String> {
    match &a.strategies {
        None => Ok(Strategy::DEFAULT.to_vec()),
        Some(list) => list.iter().map(|s| s.parse::<Strategy>()).collect(),
    }
}

/// The known failures: the `--known-failures` files, or each corpus directory's own file.
fn known_failures(a: &RunArgs, paths: &[String]) -> Result<KnownFailures, String> {
    let mut known = KnownFailures::default();
    let files: Vec<PathBuf> = if a.known_failures.is_empty() {
        paths
            .iter()
            .map(|p| Path::new(p).join(corpus::KNOWN_FAILURES_FILE))
            // Whatever is there by that name is read (a FIFO or a directory is named).
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect()
    } else {
        a.known_failures.clone()
    };
    for f in &files {
        known.extend(KnownFailures::load(f)?);
    }
    Ok(known)
}

/// The `--baseline` report, none when it is about to be created by `--update-baseline`.
fn baseline(a: &RunArgs) -> Result<Option<conform::harness::report::Report>, String> {
    match &a.baseline {
        Some(p) if p.exists() => report_dir::read(p).map(Some),
        Some(p) if !a.update_baseline => Err(format!(
            "{}: no such baseline (create it with --update-baseline)",
            p.display()
        )),
        _ => Ok(None),
    }
}

/// Everything the run needs, checked before anything is replayed (and the report directory
/// made ready): a usage error names the argument.
fn plan(a: &RunArgs) -> Result<RunPlan, String> {
    let strategies = strategies(a)?;
    if let Some(f) = &a.format
        && formats::by_id(f).is_none()
    {
        return Err(format!(
            "unknown format {f:?} (known: {})",
            corpus::known_formats()
        ));
    }
    let tokenizer = a.tokens.load()?;
    let shard = a.shard.as_deref().map(Shard::parse).transpose()?;
    let parsers = if a.parsers.is_empty() {
        vec!["builtin".to_string()]
    } else {
        a.parsers.clone()
    };
    for spec in &parsers {
        adapter::parse_parser_spec(spec)?;
    }
    let mut adapter = adapter_options(a.jobs, a.timeout);
    adapter.start_timeout = a.start_timeout;
    let paths = if a.paths.is_empty() {
        vec!["corpus/".to_string()]
    } else {
        a.paths.clone()
    };
    let known = known_failures(a, &paths)?;
    let baseline = baseline(a)?;
    let options = formats::registry::from_assignments(&a.options)?;
    let request = request_of(&a.requests)?;
    let dialect = formats::registry::from_assignments(&a.dialect)?;
    Ok(RunPlan {
        paths,
        load: LoadOptions {
            format: a.format.clone(),
            options,
            request,
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
            dialect,
            ..RunConfig::default()
        },
        parsers,
        adapter,
        known,
        baseline,
        shard,
    })
}

/// The terminal output: corpus errors, the comparison with the baseline, per parser its table
/// and failures, then the comparison matrix.
fn print_tables(
    a: &RunArgs,
    plan: &RunPlan,
    run: &session::RunOutput,
    matrix: Option<&matrix::Matrix>,
) {
    let rep = &run.report;
    let colour = Colour::detect(std::io::stdout().is_terminal());
    let mut out = Stdout;
    let _ = write!(out, "{}", table::corpus_errors(&run.corpus_errors));
    if let Some(c) = &rep.comparison {
        let _ = write!(out, "{}", table::comparison(c, colour));
    }
    let headed = rep.runs.len() > 1 || rep.runs.iter().any(|r| r.parser != "builtin");
    for (parser_run, pr) in rep.runs.iter().zip(&run.parser_runs) {
        if headed {
            let _ = writeln!(out, "parser: {}", parser_run.parser);
        }
        let _ = writeln!(out, "{}", table::format_table(parser_run, colour));
        let _ = write!(out, "{}", table::failures(parser_run, colour));
        if pr.results_only() {
            let _ = writeln!(
                out,
                "delta_contract: not applicable (the parser reports only final results)"
            );
        }
        if !a.quiet && pr.stderr_bytes > 0 {
            err!(
                "{}: {} byte(s) on stderr; the last lines:\n{}",
                pr.name,
                pr.stderr_bytes,
                last_lines(&pr.stderr_tail, 10)
            );
        }
        let seen: Vec<&str> = parser_run.cases.iter().map(|c| c.id.as_str()).collect();
        for id in plan.known.unseen(&parser_run.parser, &seen) {
            if plan.shard.is_none() {
                let _ = writeln!(
                    out,
                    "note: known failure {id} of {} was not replayed",
                    parser_run.parser
                );
            }
        }
    }
    if let Some(m) = matrix {
        let _ = write!(out, "{}", matrix::render(m, colour));
    }
}

/// The report directory's files and, with `--update-baseline`, the baseline.
fn write_outputs(
    a: &RunArgs,
    report_dir: Option<&report_dir::DirLock>,
    run: &session::RunOutput,
    matrix: Option<&matrix::Matrix>,
) -> Result<(), String> {
    if let Some(dir) = report_dir {
        report_dir::write_reports(dir, &run.report, matrix)?;
    }
    if a.update_baseline
        && let Some(p) = &a.baseline
    {
        report_dir::write_atomic(p, run.report.stable().to_json().as_bytes())?;
        err!("baseline {} updated", p.display());
    }
    Ok(())
}

/// The closing note on stderr: what was replayed, and the options other than the defaults
/// (they change verdicts, so a run under them says so).
fn closing_note(a: &RunArgs, run: &session::RunOutput, took: Duration) {
    let rep = &run.report;
    err!(
        "{} case(s), {} replay(s), seed {}, in {:.2?}",
        run.cases,
        rep.runs.iter().map(|r| r.totals.replays).sum::<usize>(),
        a.seed,
        took
    );
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
        err!(
            "{with_options} case(s) judged under options other than the defaults: {}",
            set.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
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

/// Reads `--request KEY=VALUE` arguments (a later one wins).
pub(crate) fn request_of(args: &[String]) -> Result<conform::formats::request::Request, String> {
    let mut r = conform::formats::request::Request::default();
    for a in args {
        r.set_assignment(a)?;
    }
    Ok(r)
}
