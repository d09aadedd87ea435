//! What can be judged: conform's own parsers ([`builtin`]) and external ones ([`adapter`]).
//!
//! A backend replays the turns of one case, each cut as given, and returns what every turn
//! folded to. It knows formats through the registry and nothing of the harness that judges it.

pub mod adapter;
pub mod builtin;
pub mod cuts;

pub use adapter::{Adapter, AdapterOptions};
pub use builtin::Builtin;

use crate::event::ParseResult;
use crate::formats::request::Request;
use crate::formats::{Format, OptionValues};
use crate::tools::Tools;
use cuts::Cuts;

/// What one turn of a replay produced.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// The folded result.
    pub result: ParseResult,
    /// Delta-contract breaches the fold noticed.
    pub anomalies: Vec<String>,
    /// A hash of the exact event sequence, for the determinism check.
    pub events_hash: u64,
    /// False when the parser reported only its final result, so the event-level checks
    /// (delta contract) cannot apply.
    pub events_seen: bool,
}

/// How an external parser failed to answer a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Breakdown {
    /// The process died (or answered with an internal error).
    Crash,
    /// No answer within the time limit.
    Timeout,
    /// An answer that does not follow the adapter protocol.
    ProtocolError,
}

/// What a whole replay produced: one outcome per turn, or why there is none.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Outcome {
    /// The parser ran to the end of every turn.
    Done(Vec<TurnOutcome>),
    /// The parser panicked; the message says where.
    Panicked(String),
    /// An external parser crashed, hung or answered garbage.
    Broke(Breakdown, String),
}

/// Whatever parses a case's turns under a chunking: the built-in parsers or an external one.
pub trait Backend: Sync {
    /// The name reports give the parser (`builtin`, `cmd:python3 adapter.py`).
    fn name(&self) -> String;
    /// Whether the backend parses this format at all.
    fn supports(&self, _format: &str) -> bool {
        true
    }
    /// Replays the turns of one case, each cut as given (a missing entry means whole), with
    /// `options` set over the format's defaults (conform's parsers; an adapter is configured
    /// by its own command).
    fn replay(
        &self,
        format: &Format,
        tools: &Tools,
        options: &OptionValues,
        request: &Request,
        turns: &[Vec<u8>],
        cuts: &[Cuts],
    ) -> Outcome;
    /// Whether this is conform's own reference parser, which must hold under every cut; an
    /// external parser is not blamed for cuts its deployment never produces.
    fn is_builtin(&self) -> bool {
        false
    }
}

/// A backend chosen by `--parser`: the built-in parsers or a started adapter.
pub enum AnyBackend {
    /// This crate's parsers.
    Builtin(Builtin),
    /// An external command.
    Adapter(Box<Adapter>),
}

impl AnyBackend {
    /// Starts the backend a `--parser` value names; `Err` says why it cannot run.
    pub fn start(spec: &str, opts: &AdapterOptions) -> Result<AnyBackend, String> {
        match adapter::parse_parser_spec(spec)? {
            adapter::ParserSpec::Builtin => Ok(AnyBackend::Builtin(Builtin)),
            adapter::ParserSpec::Command(argv) => {
                Adapter::start(spec, argv, opts.clone()).map(|a| AnyBackend::Adapter(Box::new(a)))
            }
        }
    }

    /// The backend as the harness sees it.
    pub fn backend(&self) -> &dyn Backend {
        match self {
            AnyBackend::Builtin(b) => b,
            AnyBackend::Adapter(a) => a.as_ref(),
        }
    }

    /// The adapter, when this is one.
    pub fn adapter(&self) -> Option<&Adapter> {
        match self {
            AnyBackend::Builtin(_) => None,
            AnyBackend::Adapter(a) => Some(a),
        }
    }
}
