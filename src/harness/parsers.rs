//! What one `--parser` left behind after `session::execute` judged the corpus with it: its
//! case reports and its adapter's hello, counters and stderr, kept for the report.

use super::run::CaseReport;
use crate::backends::AnyBackend;
use crate::backends::adapter::{Adapter, AdapterStats, EngineTime, Hello};
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
