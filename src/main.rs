//! The `conform` command line: `run`, `parse`, `formats`, `bench`.

mod bench;
mod fuzzing;

use clap::{Args, Parser, Subcommand};
use conform::event::ParseResult;
use conform::formats;
use conform::harness::chunking::{ChunkingParams, Cuts, Strategy};
use conform::harness::corpus::{self, LoadOptions};
use conform::harness::replay::{capture_panics, events_of};
use conform::harness::run::{RunConfig, Status, run_cases};
use conform::outputs::table::{self, Colour};
use serde_json::json;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

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
    #[arg(long, default_value_t = 8)]
    seeds: usize,
    /// Largest chunk size of random groupings, in bytes.
    #[arg(long, default_value_t = 16)]
    max_chunk: usize,
    /// Most single-cut replays per transcript (sampled evenly beyond it).
    #[arg(long, default_value_t = 512)]
    two_cut_cap: usize,
    /// Comma-separated strategies [default: all]: whole, bytes, chars, two_cut, markers, random.
    #[arg(long, value_delimiter = ',')]
    strategies: Option<Vec<String>>,
    /// Print only the table and failures, no per-run notes.
    #[arg(long, short)]
    quiet: bool,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(a) => cmd_run(a),
        Command::Parse(a) => cmd_parse(a),
        Command::Formats => cmd_formats(),
        Command::Bench(a) => bench::run(a),
        Command::Fuzzing(c) => fuzzing::run(c),
    };
    ExitCode::from(code)
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
        println!("{:<14} {}{render}", f.id, f.summary);
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
    let paths = if a.paths.is_empty() {
        vec!["corpus/".to_string()]
    } else {
        a.paths.clone()
    };
    let started = Instant::now();
    let corpus = corpus::load(
        &paths,
        &LoadOptions {
            format: a.format.clone(),
        },
    );
    let cfg = RunConfig {
        strategies,
        params: ChunkingParams {
            seed: a.seed,
            random_groupings: a.seeds,
            random_max_chunk: a.max_chunk,
            two_cut_cap: a.two_cut_cap,
        },
        ..RunConfig::default()
    };
    capture_panics();
    let reports = run_cases(&corpus.cases, &cfg);
    let colour = Colour::detect(std::io::stdout().is_terminal());
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{}", table::corpus_errors(&corpus.errors));
    let _ = writeln!(out, "{}", table::format_table(&reports, colour));
    let _ = write!(out, "{}", table::failures(&reports, colour));
    if !a.quiet {
        eprintln!(
            "{} case(s), {} replay(s), seed {}, in {:.2?}",
            reports.len(),
            reports.iter().map(|r| r.replays).sum::<usize>(),
            a.seed,
            started.elapsed()
        );
    }
    if !corpus.errors.is_empty() {
        EXIT_USAGE
    } else if reports.iter().any(|r| r.status == Status::Fail) {
        EXIT_FAIL
    } else {
        EXIT_OK
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
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| e.to_string())
    );
    EXIT_OK
}
