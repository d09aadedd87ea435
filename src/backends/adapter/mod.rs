//! External parsers: a command speaking the JSON-lines adapter protocol of `specs/adapter.md`,
//! run as a pool of child processes.
//!
//! A child that crashes, hangs or breaks the protocol is killed and replaced on the next request;
//! the replay it was serving gets `crash`, `timeout` or `protocol_error`, and the run goes on.

mod process;
pub mod protocol;
pub mod spec;

pub use protocol::PROTOCOL;
pub use spec::{ParserSpec, parse_parser_spec};

use crate::backends::cuts::Cuts;
use crate::backends::{Backend, Breakdown, Outcome, Paths, ServingPath};
use crate::formats::request::Request;
use crate::formats::{Format, OptionValues};
use crate::tools::Tools;
use process::{Tail, Worker, lock};
use protocol::{parse_request, read_timed_response, say_hello};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use process::STDERR_TAIL_BYTES;

/// Start failures in a row after which the adapter is given up on for the rest of the run:
/// restarting a command that cannot even say hello would cost a process per replay.
const MAX_START_FAILURES: usize = 3;

/// How an adapter pool is run.
#[derive(Debug, Clone)]
pub struct AdapterOptions {
    /// Most child processes at once.
    pub jobs: usize,
    /// Longest wait for the response to one replay, from the moment its request is sent.
    pub timeout: Duration,
    /// Longest wait for a copy to start and answer the hello, at the first start and every
    /// restart; never counted against a replay's `timeout`.
    pub start_timeout: Duration,
    /// Longest response line accepted, in bytes.
    pub max_response_bytes: usize,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        AdapterOptions {
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            timeout: Duration::from_secs(10),
            // An engine's imports (torch, transformers) take seconds, more on a busy machine.
            start_timeout: Duration::from_secs(60),
            max_response_bytes: 256 * 1024 * 1024,
        }
    }
}

/// What an adapter said about itself in the hello exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The adapter's own name for its parser.
    pub name: String,
    /// The format ids it parses.
    pub formats: Vec<String>,
    /// The protocol version it answered (1 or 2).
    pub protocol: u64,
    /// The serving paths it declared (`paths`: `batch`, `stream`); none when it did not.
    pub paths: Paths,
}

/// Counters of one adapter's life, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdapterStats {
    /// Parse requests sent.
    pub requests: u64,
    /// Child processes started (the first included).
    pub started: u64,
    /// Replays answered with `crash`.
    pub crashes: u64,
    /// Replays answered with `timeout`.
    pub timeouts: u64,
    /// Replays answered with `protocol_error`.
    pub protocol_errors: u64,
}

/// The time an engine's own parser took, summed over the responses of one format that carried
/// `engine_ns` (`specs/adapter.md` §2.6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineTime {
    /// Responses that carried `engine_ns`.
    pub responses: u64,
    /// Their sum, in nanoseconds.
    pub total_ns: u64,
    /// The largest of them, in nanoseconds.
    pub max_ns: u64,
}

impl EngineTime {
    /// Adds one response's `engine_ns`.
    pub fn add(&mut self, ns: u64) {
        self.responses = self.responses.saturating_add(1);
        self.total_ns = self.total_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Adds another tally (shards of one run).
    pub fn merge(&mut self, o: &EngineTime) {
        self.responses = self.responses.saturating_add(o.responses);
        self.total_ns = self.total_ns.saturating_add(o.total_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
    }
}

/// The idle children and how many exist.
struct Pool {
    idle: Vec<Worker>,
    live: usize,
    start_failures: usize,
    last_start_error: String,
}

/// An external parser: a command speaking `specs/adapter.md`, run as a pool of children.
pub struct Adapter {
    label: String,
    argv: Vec<String>,
    opts: AdapterOptions,
    hello: Hello,
    pool: Mutex<Pool>,
    freed: Condvar,
    next_id: AtomicU64,
    stderr: Arc<Mutex<Tail>>,
    started: AtomicU64,
    requests: AtomicU64,
    broke: [AtomicUsize; 3],
    engine: Mutex<BTreeMap<String, EngineTime>>,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("label", &self.label)
            .field("hello", &self.hello)
            .finish_non_exhaustive()
    }
}

impl Adapter {
    /// Starts one child of `cmd:…` (given as words) and exchanges hellos; more children start
    /// on demand up to `opts.jobs`. `label` is the name reports give the parser.
    pub fn start(label: &str, argv: Vec<String>, opts: AdapterOptions) -> Result<Adapter, String> {
        if argv.is_empty() {
            return Err("no command".into());
        }
        let stderr = Arc::new(Mutex::new(Tail::new(STDERR_TAIL_BYTES)));
        let mut first = Worker::spawn(&argv, &stderr, &opts)?;
        let hello = say_hello(&mut first, opts.start_timeout)
            .map_err(|(_, m)| format!("{label}: hello failed: {m}"))?;
        check_formats(&hello).map_err(|m| format!("{label}: {m}"))?;
        Ok(Adapter {
            label: label.to_string(),
            argv,
            opts: AdapterOptions {
                jobs: opts.jobs.max(1),
                ..opts
            },
            hello,
            pool: Mutex::new(Pool {
                idle: vec![first],
                live: 1,
                start_failures: 0,
                last_start_error: String::new(),
            }),
            freed: Condvar::new(),
            next_id: AtomicU64::new(1),
            stderr,
            started: AtomicU64::new(1),
            requests: AtomicU64::new(0),
            broke: Default::default(),
            engine: Mutex::new(BTreeMap::new()),
        })
    }

    /// What the adapter said in the hello exchange.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The last [`STDERR_TAIL_BYTES`] of what every child wrote to stderr, each line prefixed
    /// with the child's pid.
    pub fn stderr_tail(&self) -> String {
        lock(&self.stderr).text()
    }

    /// Total bytes the children wrote to stderr.
    pub fn stderr_bytes(&self) -> u64 {
        lock(&self.stderr).total
    }

    /// Counters so far.
    pub fn stats(&self) -> AdapterStats {
        AdapterStats {
            requests: self.requests.load(Ordering::Relaxed),
            started: self.started.load(Ordering::Relaxed),
            crashes: self.broke[0].load(Ordering::Relaxed) as u64,
            timeouts: self.broke[1].load(Ordering::Relaxed) as u64,
            protocol_errors: self.broke[2].load(Ordering::Relaxed) as u64,
        }
    }

    /// The engine's own parse time per format id, from the responses that reported it.
    pub fn engine_time(&self) -> BTreeMap<String, EngineTime> {
        lock(&self.engine).clone()
    }

    /// A free child, started if the pool has room, or the reason none can be had.
    ///
    /// A copy that fails to start is retried here, up to [`MAX_START_FAILURES`] failures in a
    /// row: a failed restart is the adapter's trouble, not the fault of the replay that
    /// happens to need the next copy. Only when the adapter is given up does a replay get an
    /// error, which says so.
    fn acquire(&self) -> Result<Worker, String> {
        let mut pool = lock(&self.pool);
        loop {
            // A copy that works is used even when others would not restart.
            if let Some(w) = pool.idle.pop() {
                return Ok(w);
            }
            let given_up = pool.start_failures >= MAX_START_FAILURES;
            if given_up && pool.live == 0 {
                return Err(format!(
                    "the adapter could not be restarted ({} failed starts in a row), so this \
                     replay was not run: {}",
                    pool.start_failures, pool.last_start_error
                ));
            }
            if !given_up && pool.live < self.opts.jobs {
                pool.live += 1;
                drop(pool);
                let started = self.start_copy();
                pool = lock(&self.pool);
                match started {
                    Ok(w) => {
                        pool.start_failures = 0;
                        return Ok(w);
                    }
                    Err(e) => {
                        pool.live -= 1;
                        pool.start_failures += 1;
                        pool.last_start_error = e;
                        self.freed.notify_all();
                        continue;
                    }
                }
            }
            pool = self
                .freed
                .wait(pool)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Starts one more copy and checks that it gives the first copy's hello, within
    /// `start_timeout`.
    fn start_copy(&self) -> Result<Worker, String> {
        self.started.fetch_add(1, Ordering::Relaxed);
        let mut w = Worker::spawn(&self.argv, &self.stderr, &self.opts)?;
        match say_hello(&mut w, self.opts.start_timeout) {
            Ok(h) if h == self.hello => Ok(w),
            Ok(h) => Err(format!("a restarted copy said a different hello: {h:?}")),
            Err((_, m)) => Err(format!("a restarted copy's hello failed: {m}")),
        }
    }

    /// Returns a child to the pool, or drops (kills) it after a failure.
    fn release(&self, w: Worker, healthy: bool) {
        let mut pool = lock(&self.pool);
        if healthy {
            pool.idle.push(w);
            drop(pool);
            self.freed.notify_one();
        } else {
            pool.live -= 1;
            drop(pool);
            drop(w);
            // Every waiter must look again: one may start a copy, and when the adapter is
            // given up and no copy is left, all of them must stop waiting.
            self.freed.notify_all();
        }
    }

    /// The token ids a request may carry: none for an adapter that answered protocol 1.
    fn note(&self, why: Breakdown) {
        let i = match why {
            Breakdown::Crash => 0,
            Breakdown::Timeout => 1,
            Breakdown::ProtocolError => 2,
        };
        self.broke[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// Per turn, the token ids of each chunk of a token-aligned chunking (protocol 2). A turn whose
/// chunking is not token-aligned, or holds a special token the format declares without an id,
/// gets none: an adapter then tokenizes the text itself rather than receive ids that lie.
fn token_ids(cuts: &[Cuts]) -> Vec<Vec<Vec<u32>>> {
    cuts.iter()
        .map(|c| {
            c.chunk_token_ids()
                .and_then(|chunks| {
                    chunks
                        .iter()
                        .map(|ids| ids.iter().copied().collect::<Option<Vec<u32>>>())
                        .collect::<Option<Vec<_>>>()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// Checks that a hello names formats, all of them known to conform: a misspelled id would
/// otherwise send the adapter no case at all, and the run would look green.
fn check_formats(hello: &Hello) -> Result<(), String> {
    let known = || {
        crate::formats::REGISTRY
            .iter()
            .map(|f| f.id)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if hello.formats.is_empty() {
        return Err(format!(
            "the hello names no format (`formats` is empty); conform knows {}",
            known()
        ));
    }
    let unknown: Vec<&str> = hello
        .formats
        .iter()
        .map(String::as_str)
        .filter(|f| crate::formats::by_id(f).is_none())
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "the hello names format(s) conform does not know: {}; conform knows {}",
            unknown
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            known()
        ));
    }
    Ok(())
}

impl Backend for Adapter {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn supports(&self, format: &str) -> bool {
        self.hello.formats.iter().any(|f| f == format)
    }

    fn replay(
        &self,
        format: &Format,
        tools: &Tools,
        options: &OptionValues,
        request: &Request,
        turns: &[Vec<u8>],
        cuts: &[Cuts],
    ) -> Outcome {
        self.replay_on(None, format, tools, options, request, turns, cuts)
    }

    fn paths(&self) -> Paths {
        self.hello.paths
    }

    #[allow(clippy::too_many_arguments)]
    fn replay_on(
        &self,
        path: Option<ServingPath>,
        format: &Format,
        tools: &Tools,
        _options: &OptionValues,
        request: &Request,
        turns: &[Vec<u8>],
        cuts: &[Cuts],
    ) -> Outcome {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let ids = if self.hello.protocol >= 2 {
            token_ids(cuts)
        } else {
            Vec::new()
        };
        // A path goes only to an adapter that declared paths, and only one it declared.
        let path = path.filter(|p| match p {
            ServingPath::Batch => self.hello.paths.batch,
            ServingPath::Stream => self.hello.paths.stream,
        });
        let mut line = parse_request(id, format.id, tools, request, turns, cuts, &ids);
        if let Some(p) = path {
            // `…]}\n` → `…],"path":"batch"}\n`: the field goes last, after the turns.
            line.truncate(line.len() - 2);
            line.extend_from_slice(format!(",\"path\":\"{}\"}}\n", p.as_str()).as_bytes());
        }
        let mut w = match self.acquire() {
            Ok(w) => w,
            Err(e) => {
                self.note(Breakdown::Crash);
                return Outcome::Broke(Breakdown::Crash, e);
            }
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.opts.timeout;
        let answer = w.exchange(line, deadline).and_then(|line| {
            let limits: Vec<usize> = turns
                .iter()
                .map(|t| protocol::max_events(t.len()))
                .collect();
            read_timed_response(&line, id, &limits)
        });
        match answer {
            Ok(Ok((turns, engine_ns))) => {
                self.release(w, true);
                if let Some(ns) = engine_ns {
                    lock(&self.engine)
                        .entry(format.id.to_string())
                        .or_default()
                        .add(ns);
                }
                Outcome::Done(turns)
            }
            Ok(Err(msg)) => {
                // The adapter caught its parser's failure and stayed in step: keep the child.
                self.release(w, true);
                self.note(Breakdown::Crash);
                Outcome::Broke(Breakdown::Crash, msg)
            }
            Err((why, msg)) => {
                // After any breach the child's stream cannot be trusted to be in step: replace it.
                self.release(w, false);
                self.note(why);
                Outcome::Broke(why, msg)
            }
        }
    }
}
