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

/// How a server reaches its parser (`specs/adapter.md` §2.1 `paths`): the non-streaming entry
/// point on the whole output (`stream=false`), or the incremental one per delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServingPath {
    /// The non-streaming parser, given the whole output once.
    Batch,
    /// The streaming parser, given the output delta by delta.
    Stream,
}

impl ServingPath {
    /// The wire name (`batch`, `stream`).
    pub fn as_str(self) -> &'static str {
        match self {
            ServingPath::Batch => "batch",
            ServingPath::Stream => "stream",
        }
    }
}

impl std::str::FromStr for ServingPath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "batch" => Ok(ServingPath::Batch),
            "stream" => Ok(ServingPath::Stream),
            other => Err(format!(
                "unknown serving path {other:?} (known: batch, stream)"
            )),
        }
    }
}

/// The serving paths an external parser declares; both false for one that declares none
/// (it is then sent every replay alike, and the whole input is its baseline).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Paths {
    /// It has a non-streaming entry point.
    pub batch: bool,
    /// It has a streaming entry point.
    pub stream: bool,
}

impl Paths {
    /// Whether any path is declared.
    pub fn declared(self) -> bool {
        self.batch || self.stream
    }
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
    /// The serving paths the parser declares (none by default).
    fn paths(&self) -> Paths {
        Paths::default()
    }
    /// Replays through one serving path (`None`: the parser's only one); a backend without
    /// paths replays as [`Backend::replay`] does.
    // The replay's inputs are [`Backend::replay`]'s and the path: bundling them would only
    // move the list into a struct every caller builds.
    #[allow(clippy::too_many_arguments)]
    fn replay_on(
        &self,
        _path: Option<ServingPath>,
        format: &Format,
        tools: &Tools,
        options: &OptionValues,
        request: &Request,
        turns: &[Vec<u8>],
        cuts: &[Cuts],
    ) -> Outcome {
        self.replay(format, tools, options, request, turns, cuts)
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
