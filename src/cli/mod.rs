//! The command line, one module per subcommand (`run`, `parse`, `formats`, `report`, `bench`,
//! `engine-cost`, `engines-report`, `self-check`, `fuzz-seeds`/`fuzz-case`); `main.rs` parses
//! the arguments and dispatches here. A subcommand turns its arguments into a call of the
//! harness or the outputs and its result into an exit code; it holds no logic of its own that
//! a library user would miss.

use clap::{Args, Parser, Subcommand};
use conform::backends::adapter;
use conform::harness::tokens::Tokenizer;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Prints to stdout; a failed write fails the command at exit instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(
            &mut $crate::cli::Stdout,
            format_args!("{}\n", format_args!($($arg)*)),
        );
    }};
}

/// Prints to stderr; a failed write fails the command at exit (exit 2) instead of panicking
/// as `eprintln!` does.
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(
            &mut $crate::cli::Stderr,
            format_args!("{}\n", format_args!($($arg)*)),
        );
    }};
}

pub(crate) mod bench;
mod engine_cost;
mod engines;
mod formats;
mod fuzz;
mod parse;
mod report;
mod run;
mod self_check;

/// Exit code: every expectation and invariant held.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: failures (or regressions).
pub(crate) const EXIT_FAIL: u8 = 1;
/// Exit code: usage or corpus errors.
pub(crate) const EXIT_USAGE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "conform",
    version,
    about = "Finds the bugs in LLM tool-call parsers: replays transcripts under every chunking and checks invariants."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Replay corpora under every chunking and check every invariant.
    Run(run::RunArgs),
    /// Parse one transcript (optionally cut at given offsets) and print events and result as JSON.
    Parse(parse::ParseArgs),
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
    EngineCost(engine_cost::CostArgs),
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
    Fuzzing(fuzz::FuzzCommand),
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
    Report(report::ReportCommand),
}

/// Runs one subcommand; its exit code.
pub(crate) fn dispatch(command: Command) -> u8 {
    match command {
        Command::Run(a) => run::run(a),
        Command::Parse(a) => parse::run(a),
        Command::Formats { options } => formats::run(options),
        Command::Bench(a) => bench::run(a),
        Command::EngineCost(a) => engine_cost::run(a),
        Command::EnginesReport { dir, corpus } => engines::run(&dir, &corpus),
        Command::Fuzzing(c) => fuzz::run(c),
        Command::Report(c) => report::run(c),
        Command::SelfCheck {
            format,
            parser,
            timeout,
        } => self_check::run(format.as_deref(), &parser, timeout),
    }
}

/// The tokenizer and bursts of the token-aligned strategies.
#[derive(Args)]
pub(crate) struct TokenArgs {
    /// Tokenizer of `tokens`/`bursts`: a tiktoken ranks file or a Hugging Face tokenizer.json
    /// (with the `hf-tokenizers` feature) [default: o200k_base, built in].
    #[arg(long, value_name = "FILE")]
    pub(crate) tokenizer: Option<PathBuf>,
    /// Number of seeded `bursts` groupings per case (at most 1 048 576).
    #[arg(long, default_value_t = 4, value_parser = count(0, MAX_GROUPINGS))]
    pub(crate) bursts: usize,
    /// Most tokens per delta in `bursts` (1 to 1 048 576).
    #[arg(long, default_value_t = 8, value_parser = count(1, MAX_GROUPINGS))]
    pub(crate) burst_max_tokens: usize,
}

impl TokenArgs {
    /// The --tokenizer, loaded once for the whole run.
    pub(crate) fn load(&self) -> Result<Option<Arc<Tokenizer>>, String> {
        let loaded = self.tokenizer.as_deref().map(Tokenizer::load).transpose()?;
        Ok(loaded.map(Arc::new))
    }
}

/// The first error writing to stdout.
pub(crate) static STDOUT_ERROR: std::sync::OnceLock<std::io::Error> = std::sync::OnceLock::new();

/// The first error writing to stderr.
pub(crate) static STDERR_ERROR: std::sync::OnceLock<std::io::Error> = std::sync::OnceLock::new();

/// Stderr that remembers its first write error, so `main` can fail the command.
pub(crate) struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = std::io::stderr().lock().write(buf);
        if let Err(e) = &r {
            let _ = STDERR_ERROR.set(std::io::Error::new(e.kind(), e.to_string()));
        }
        r
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = std::io::stderr().lock().flush();
        if let Err(e) = &r {
            let _ = STDERR_ERROR.set(std::io::Error::new(e.kind(), e.to_string()));
        }
        r
    }
}

/// Stdout that remembers its first write error, so `main` can fail the command.
pub(crate) struct Stdout;

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

/// Prints `error: MSG` on stderr; the usage-error exit code.
pub(crate) fn usage_error(msg: impl std::fmt::Display) -> u8 {
    err!("error: {msg}");
    EXIT_USAGE
}

/// The most seeded groupings of one strategy per case (`--seeds`, `--bursts`).
pub(crate) const MAX_GROUPINGS: u64 = 1 << 20;

/// A count between `min` and `max`, as clap's value parser: a count out of range is a usage
/// error naming the argument, never an allocation that cannot be made.
pub(crate) fn count(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(min..=max)
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
pub(crate) fn adapter_options(jobs: Option<usize>, timeout: Duration) -> adapter::AdapterOptions {
    let mut opts = adapter::AdapterOptions {
        timeout,
        ..adapter::AdapterOptions::default()
    };
    if let Some(j) = jobs {
        opts.jobs = j;
    }
    opts
}

/// The last `n` lines of `s`.
pub(crate) fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
