//! One run of the corpus per `--parser`: the backend started, every case judged, and what an
//! adapter left behind (its hello, counters and stderr) kept for the report.

use super::corpus::Case;
use super::run::{CaseReport, RunConfig, run_cases_on};
use crate::backends::AnyBackend;
use crate::backends::adapter::{
    Adapter, AdapterOptions, AdapterStats, EngineTime, Hello, parse_parser_spec,
};
use std::collections::BTreeMap;

/// One parser's run over a corpus, with what its adapter left behind.
#[derive(Debug)]
pub struct ParserRun {
    /// The parser as given to `--parser` (`builtin`, `cmd:…`).
    pub name: String,
    /// The adapter's hello, for an external parser.
    pub hello: Option<Hello>,
    /// One report per case the parser supports, in case order.
    pub reports: Vec<CaseReport>,
    /// The adapter's counters, for an external parser.
    pub stats: Option<AdapterStats>,
    /// The last [`STDERR_TAIL_BYTES`](crate::backends::adapter::STDERR_TAIL_BYTES) the adapter's children wrote to stderr.
    pub stderr_tail: String,
    /// Total stderr bytes.
    pub stderr_bytes: u64,
    /// The engine's own parse time per format, for an adapter that reports `engine_ns`.
    pub engine_ns: BTreeMap<String, EngineTime>,
}

impl ParserRun {
    /// Collects what a finished run over `backend` left behind.
    pub fn new(name: &str, backend: &AnyBackend, reports: Vec<CaseReport>) -> ParserRun {
        let adapter = backend.adapter();
        ParserRun {
            name: name.to_string(),
            hello: adapter.map(|a| a.hello().clone()),
            reports,
            stats: adapter.map(Adapter::stats),
            stderr_tail: adapter.map(Adapter::stderr_tail).unwrap_or_default(),
            stderr_bytes: adapter.map_or(0, Adapter::stderr_bytes),
            engine_ns: adapter.map(Adapter::engine_time).unwrap_or_default(),
        }
    }

    /// True when some case could not check the delta contract (the parser gave results only).
    pub fn results_only(&self) -> bool {
        self.reports.iter().any(|r| {
            r.not_applicable
                .iter()
                .any(|n| n.starts_with("delta_contract:"))
        })
    }
}

/// Runs every `--parser` over the same cases, one after the other (each adapter is stopped
/// before the next starts). `Err` names a parser that is not understood or does not start.
pub fn run_parsers(
    specs: &[String],
    cases: &[Case],
    cfg: &RunConfig,
    opts: &AdapterOptions,
) -> Result<Vec<ParserRun>, String> {
    for s in specs {
        parse_parser_spec(s)?;
    }
    let mut runs = Vec::new();
    for s in specs {
        let backend = AnyBackend::start(s, opts)?;
        let reports = run_cases_on(cases, backend.backend(), cfg, &|| {});
        runs.push(ParserRun::new(s, &backend, reports));
    }
    Ok(runs)
}
