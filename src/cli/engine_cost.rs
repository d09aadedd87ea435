//! `conform engine-cost`: an engine's parser timed on the streams conform's own parser is timed
//! on (`specs/engines.md` §4): per format of the adapter's hello that has a renderer, one call
//! whose string argument is N bytes long, replayed at one token per delta; the engine's time
//! is the `engine_ns` its adapter reports (`specs/adapter.md` §2.6), conform's is measured
//! here on the same pieces.

use super::bench::{bench_tools, transcript};
use clap::Args;
use conform::backends::AnyBackend;
use conform::backends::Outcome;
use conform::backends::adapter::AdapterOptions;
use conform::event::{ParseResult, json_eq};
use conform::formats::{self, Format};
use conform::harness::chunking::{ChunkingParams, Strategy};
use conform::harness::corpus::{Case, Label};
use conform::harness::select::{Choice, Selection, select_cuts};
use conform::outputs::engines::{CostReport, CostRow};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `conform engine-cost`.
#[derive(Args)]
pub struct CostArgs {
    /// The adapter: `cmd:COMMAND` (its hello's formats are measured).
    #[arg(long)]
    pub parser: String,
    /// Sizes of the string argument, in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000", value_parser = crate::cli::count(1, 1 << 28))]
    pub sizes: Vec<usize>,
    /// Only these formats (comma-separated) [default: every format of the hello with a renderer].
    #[arg(long, value_delimiter = ',')]
    pub formats: Option<Vec<String>>,
    /// Seconds the adapter may take on one stream (a slower engine shows as a timeout).
    #[arg(long, default_value = "60", value_parser = crate::cli::seconds)]
    pub timeout: Duration,
    /// Seconds an adapter copy may take to start.
    #[arg(long, default_value = "60", value_parser = crate::cli::seconds)]
    pub start_timeout: Duration,
    /// Write the measurements as JSON here.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Runs the command.
pub fn run(a: CostArgs) -> u8 {
    let opts = AdapterOptions {
        jobs: 1,
        timeout: a.timeout,
        start_timeout: a.start_timeout,
        ..AdapterOptions::default()
    };
    let backend = match AnyBackend::start(&a.parser, &opts) {
        Ok(b) => b,
        Err(e) => return crate::cli::usage_error(e),
    };
    let Some(adapter) = backend.adapter() else {
        return crate::cli::usage_error(
            "engine-cost measures an adapter: give --parser cmd:COMMAND",
        );
    };
    let wanted: Vec<&'static Format> = formats::REGISTRY
        .iter()
        .copied()
        .filter(|f| adapter.hello().formats.iter().any(|h| h == f.id))
        .filter(|f| {
            a.formats
                .as_ref()
                .is_none_or(|l| l.iter().any(|x| x == f.id))
        })
        .collect();
    let mut rows = Vec::new();
    for f in wanted {
        // One small stream first: an engine's lazy set-up (a vocabulary, a compiled regex)
        // belongs to no size.
        let _ = measure(&backend, f, 1_000);
        for &size in &a.sizes {
            let row = measure(&backend, f, size);
            err!(
                "{:<14} {:>8} B {:>7} deltas  engine {:>12}  conform {:>10}  {}",
                row.format,
                row.size,
                row.deltas,
                row.engine_ns.map_or("–".into(), ms),
                ms(row.conform_ns),
                row.status
            );
            rows.push(row);
        }
    }
    let report = CostReport {
        parser: a.parser.clone(),
        name: adapter.hello().name.clone(),
        timeout_s: a.timeout.as_secs_f64(),
        rows,
    };
    let json = serde_json::to_string_pretty(&report).unwrap_or_default() + "\n";
    match &a.output {
        Some(p) => {
            if let Err(e) = conform::outputs::report_dir::write_atomic(p, json.as_bytes()) {
                return crate::cli::usage_error(e);
            }
        }
        None => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(json.as_bytes());
        }
    }
    crate::cli::EXIT_OK
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// One measurement (never fails: what went wrong is the row's status).
fn measure(backend: &AnyBackend, f: &'static Format, size: usize) -> CostRow {
    let mut row = CostRow {
        format: f.id.to_string(),
        size,
        bytes: 0,
        deltas: 0,
        status: "ok".into(),
        message: String::new(),
        engine_ns: None,
        conform_ns: 0,
        same_calls: None,
    };
    let tools = bench_tools();
    let data = match transcript(f, &tools, size) {
        Ok(d) => d,
        Err(e) => {
            row.status = "not_rendered".into();
            row.message = e;
            return row;
        }
    };
    row.bytes = data.len();
    let case = Case {
        id: format!("engine-cost/{}/{size}", f.id),
        format: f.id,
        label: Label::Accept,
        turns: vec![data],
        expects: vec![None],
        tools: Arc::new(tools),
        path: PathBuf::new(),
        line_id: None,
        recorded: None,
        options: Arc::default(),
        request: Arc::default(),
    };
    let sel = Selection {
        choice: Choice::Strategy {
            strategy: Strategy::Tokens,
            index: 0,
        },
        params: ChunkingParams::default(),
        tokenizer: None,
        token_ids: false,
    };
    let cuts = match select_cuts(&case, f, &sel) {
        Ok(c) => c,
        Err(e) => {
            row.status = "not_rendered".into();
            row.message = e;
            return row;
        }
    };
    let pieces: Vec<&[u8]> = cuts[0].pieces(&case.turns[0]).collect();
    row.deltas = pieces.len();
    // conform's own parser on the same deltas: best of three.
    let mut mine = ParseResult::default();
    row.conform_ns = (0..3)
        .map(|_| {
            let start = Instant::now();
            let mut p = (f.new_parser)(&case.tools);
            let mut events = formats::run_chunks(p.as_mut(), pieces.iter().copied());
            p.finish(&mut events);
            let ns = start.elapsed().as_nanos() as u64;
            mine = ParseResult::fold(&events);
            ns
        })
        .min()
        .unwrap_or(0);
    let Some(adapter) = backend.adapter() else {
        return row;
    };
    let before = adapter.engine_time().get(f.id).copied().unwrap_or_default();
    match backend.backend().replay(
        f,
        &case.tools,
        &case.options,
        &case.request,
        &case.turns,
        &cuts,
    ) {
        Outcome::Done(turns) => {
            let after = adapter.engine_time().get(f.id).copied().unwrap_or_default();
            if after.responses > before.responses {
                row.engine_ns = Some(after.total_ns - before.total_ns);
            } else {
                row.status = "no_engine_ns".into();
            }
            let theirs = &turns[0].result;
            row.same_calls = Some(
                theirs.calls.len() == mine.calls.len()
                    && theirs
                        .calls
                        .iter()
                        .zip(&mine.calls)
                        .all(|(a, b)| a.name == b.name && json_eq(&a.arguments, &b.arguments)),
            );
        }
        Outcome::Broke(why, msg) => {
            row.status = serde_json::to_value(why)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "crash".into());
            row.message = conform::event::excerpt(&msg);
        }
        Outcome::Panicked(msg) => {
            row.status = "crash".into();
            row.message = msg;
        }
        _ => {
            row.status = "crash".into();
            row.message = "the replay gave no outcome".into();
        }
    }
    row
}
