//! External parsers: the JSON-lines adapter protocol of `specs/adapter.md`, spoken to a pool of
//! child processes.
//!
//! Each child gets three std threads: one writes requests to its stdin (so a child that stops
//! reading cannot block a rayon thread past the timeout), one reads its stdout line by line into
//! a channel (so a response can be awaited with a deadline), one keeps the tail of its stderr.
//! A child that crashes, hangs or breaks the protocol is killed and replaced on the next request;
//! the replay it was serving gets `crash`, `timeout` or `protocol_error`, and the run goes on.

use crate::event::{ErrorInfo, ErrorKind, Event, Folder, ParseResult, ToolCall, WarningInfo};
use crate::formats::Format;
use crate::harness::chunking::Cuts;
use crate::harness::corpus::Case;
use crate::harness::replay::{Backend, Breakdown, Builtin, Outcome, TurnOutcome};
use crate::harness::run::{CaseReport, RunConfig, Status, run_cases_on};
use crate::tools::Tools;
use serde::Deserialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The protocol version this build speaks (`"protocol": 1` in the hello exchange).
pub const PROTOCOL: u64 = 1;

/// Most stderr bytes kept per adapter for the report (the most recent ones).
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// Most stderr bytes of one child quoted in a crash message.
const CHILD_STDERR_BYTES: usize = 2 * 1024;

/// Start failures in a row after which the adapter is given up on for the rest of the run:
/// restarting a command that cannot even say hello would cost a process per replay.
const MAX_START_FAILURES: usize = 3;

/// What `--parser` names: the built-in parsers or an external command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParserSpec {
    /// This crate's parsers, in-process.
    Builtin,
    /// `cmd:COMMAND`: the command line, split into words.
    Command(Vec<String>),
}

/// Reads a `--parser` value: `builtin` or `cmd:COMMAND` (words split as a POSIX shell would,
/// with quotes and backslashes, but no expansion: the command is not run through a shell).
pub fn parse_parser_spec(s: &str) -> Result<ParserSpec, String> {
    if s == "builtin" {
        return Ok(ParserSpec::Builtin);
    }
    let Some(cmd) = s.strip_prefix("cmd:") else {
        return Err(format!(
            "unknown parser {s:?}: expected `builtin` or `cmd:COMMAND`"
        ));
    };
    let words = split_words(cmd)?;
    if words.is_empty() {
        return Err(format!("parser {s:?} names no command"));
    }
    Ok(ParserSpec::Command(words))
}

/// Splits a command line into words: whitespace separates, `'…'` is literal, `"…"` honours
/// `\"` and `\\`, a backslash outside quotes escapes the next character.
fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut it = s.chars();
    while let Some(c) = it.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(format!("unclosed ' in {s:?}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('"') => break,
                        Some('\\') => match it.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err(format!("unclosed \" in {s:?}")),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(format!("unclosed \" in {s:?}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match it.next() {
                    Some(c) => cur.push(c),
                    None => return Err(format!("trailing backslash in {s:?}")),
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// How an adapter pool is run.
#[derive(Debug, Clone)]
pub struct AdapterOptions {
    /// Most child processes at once.
    pub jobs: usize,
    /// Longest wait for one response (the hello included).
    pub timeout: Duration,
    /// Longest response line accepted, in bytes.
    pub max_response_bytes: usize,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        AdapterOptions {
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            timeout: Duration::from_secs(10),
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
}

/// Counters of one adapter's life, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
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

/// The most recent bytes of a stream, bounded.
#[derive(Debug, Default)]
struct Tail {
    buf: VecDeque<u8>,
    cap: usize,
    total: u64,
}

impl Tail {
    fn new(cap: usize) -> Tail {
        Tail {
            buf: VecDeque::new(),
            cap,
            total: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let bytes = &bytes[bytes.len().saturating_sub(self.cap)..];
        let excess = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..excess.min(self.buf.len()));
        self.buf.extend(bytes);
    }

    fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut v = Vec::with_capacity(self.buf.len());
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        String::from_utf8_lossy(&v).into_owned()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep going.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a child's stdout (and its stdin writer) tells the waiting request.
enum FromChild {
    Line(Vec<u8>),
    TooLong(usize),
    Eof,
    ReadFailed(String),
    WriteFailed(String),
}

/// One running child process and its pipes.
struct Worker {
    child: Child,
    to_child: Option<Sender<Vec<u8>>>,
    from_child: Receiver<FromChild>,
    stderr: Arc<Mutex<Tail>>,
}

impl Worker {
    fn spawn(
        argv: &[String],
        shared: &Arc<Mutex<Tail>>,
        opts: &AdapterOptions,
    ) -> Result<Worker, String> {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A group of its own, so that killing the child also kills what it started.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", argv[0]))?;
        let pid = child.id();
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    kill_group(&mut child);
                    let _ = child.wait();
                    return Err("the child's pipes could not be opened".into());
                }
            };
        let (line_tx, line_rx) = mpsc::channel();
        let (req_tx, req_rx) = mpsc::channel::<Vec<u8>>();
        let write_tx = line_tx.clone();
        let max = opts.max_response_bytes;
        let own = Arc::new(Mutex::new(Tail::new(CHILD_STDERR_BYTES)));
        let spawned = std::thread::Builder::new()
            .name(format!("adapter-{pid}-out"))
            .spawn(move || read_lines(stdout, max, line_tx))
            .and_then(|_| {
                std::thread::Builder::new()
                    .name(format!("adapter-{pid}-in"))
                    .spawn(move || write_requests(stdin, req_rx, write_tx))
            })
            .and_then(|_| {
                let own = Arc::clone(&own);
                let shared = Arc::clone(shared);
                std::thread::Builder::new()
                    .name(format!("adapter-{pid}-err"))
                    .spawn(move || pump_stderr(stderr, pid, &own, &shared))
            });
        if let Err(e) = spawned {
            kill_group(&mut child);
            let _ = child.wait();
            return Err(format!("cannot start a pipe thread: {e}"));
        }
        Ok(Worker {
            child,
            to_child: Some(req_tx),
            from_child: line_rx,
            stderr: own,
        })
    }

    /// Sends one line and waits for the next non-blank line until `deadline`.
    fn exchange(
        &mut self,
        line: Vec<u8>,
        deadline: Instant,
    ) -> Result<Vec<u8>, (Breakdown, String)> {
        // Output the child produced unasked belongs to no request: it is a protocol breach.
        if let Ok(FromChild::Line(l)) = self.from_child.try_recv() {
            return Err((
                Breakdown::ProtocolError,
                format!("unsolicited output before the request: {}", quote_line(&l)),
            ));
        }
        let sent = self
            .to_child
            .as_ref()
            .is_some_and(|tx| tx.send(line).is_ok());
        if !sent {
            return Err((
                Breakdown::Crash,
                self.exit_note("the request could not be written"),
            ));
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from_child.recv_timeout(left) {
                Ok(FromChild::Line(l)) if l.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(FromChild::Line(l)) => return Ok(l),
                Ok(FromChild::TooLong(n)) => {
                    return Err((
                        Breakdown::ProtocolError,
                        format!("a response line of more than {n} bytes"),
                    ));
                }
                Ok(FromChild::Eof) | Err(RecvTimeoutError::Disconnected) => {
                    return Err((
                        Breakdown::Crash,
                        self.exit_note("stdout closed without a response"),
                    ));
                }
                Ok(FromChild::ReadFailed(e)) => {
                    return Err((
                        Breakdown::Crash,
                        self.exit_note(&format!("reading stdout failed: {e}")),
                    ));
                }
                Ok(FromChild::WriteFailed(e)) => {
                    return Err((
                        Breakdown::Crash,
                        self.exit_note(&format!("writing the request failed: {e}")),
                    ));
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err((
                        Breakdown::Timeout,
                        "no response in time; the child was killed".into(),
                    ));
                }
            }
        }
    }

    /// Says how the child ended (waiting briefly for it), with the tail of its stderr.
    fn exit_note(&mut self, what: &str) -> String {
        let mut status = None;
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            match self.child.try_wait() {
                Ok(Some(s)) => {
                    status = Some(s);
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => break,
            }
        }
        // The stderr pump may lag the exit by a moment.
        std::thread::sleep(Duration::from_millis(20));
        let how = match status {
            Some(s) => format!("the adapter exited ({s})"),
            None => "the adapter is still running".into(),
        };
        let err = lock(&self.stderr).text();
        let err = err.trim_end();
        let last: Vec<&str> = err
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if last.is_empty() {
            format!("{what}: {how}")
        } else {
            format!("{what}: {how}; stderr ends: {}", last.join(" | "))
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing stdin asks the child to exit; one that does not within a moment is killed.
        self.to_child = None;
        let until = Instant::now() + Duration::from_millis(200);
        while Instant::now() < until {
            if let Ok(Some(_)) | Err(_) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        kill_group(&mut self.child);
        let _ = self.child.wait();
    }
}

/// Kills a child and every process in its group: an adapter that wraps a server may run
/// workers of its own, and a hung adapter's workers must not outlive it. Called before the
/// child is reaped, so its group id cannot have been reused.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(pgid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) only sends a signal; a negative pid addresses the child's own group
        // (set at spawn), which never contains this process.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// Reads `\n`-terminated lines, bounded in length; a last line without `\n` is dropped.
fn read_lines(stdout: impl Read, max: usize, tx: Sender<FromChild>) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let mut overflow = 0usize;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send(FromChild::ReadFailed(e.to_string()));
                return;
            }
        };
        if buf.is_empty() {
            let _ = tx.send(FromChild::Eof);
            return;
        }
        let (take, end) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if overflow > 0 || line.len() + take > max {
            overflow += take;
            line = Vec::new();
        } else {
            line.extend_from_slice(&buf[..take]);
        }
        r.consume(take + usize::from(end));
        if end {
            let msg = if overflow > 0 {
                FromChild::TooLong(max)
            } else {
                FromChild::Line(std::mem::take(&mut line))
            };
            overflow = 0;
            if tx.send(msg).is_err() {
                return;
            }
        }
    }
}

fn write_requests(mut stdin: ChildStdin, rx: Receiver<Vec<u8>>, tx: Sender<FromChild>) {
    for req in rx {
        if let Err(e) = stdin.write_all(&req).and_then(|_| stdin.flush()) {
            let _ = tx.send(FromChild::WriteFailed(e.to_string()));
            return;
        }
    }
}

/// Copies stderr into the child's own tail and, line by line with the pid, the adapter's tail.
fn pump_stderr(stderr: impl Read, pid: u32, own: &Mutex<Tail>, shared: &Mutex<Tail>) {
    let mut r = BufReader::new(stderr);
    let mut line = Vec::new();
    let flush = |line: &mut Vec<u8>| {
        if !line.is_empty() {
            let mut l = format!("[{pid}] ").into_bytes();
            l.extend_from_slice(line);
            if l.last() != Some(&b'\n') {
                l.push(b'\n');
            }
            lock(shared).push(&l);
            line.clear();
        }
    };
    loop {
        let buf = match r.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(b) => b,
        };
        let n = buf.len();
        lock(own).push(buf);
        for &b in buf {
            line.push(b);
            if b == b'\n' || line.len() >= 4096 {
                flush(&mut line);
            }
        }
        r.consume(n);
    }
    flush(&mut line);
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
        let hello = say_hello(&mut first, opts.timeout)
            .map_err(|(_, m)| format!("{label}: hello failed: {m}"))?;
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

    /// A free child, started if the pool has room, or the reason none can be had.
    fn acquire(&self) -> Result<Worker, String> {
        let mut pool = lock(&self.pool);
        loop {
            if pool.start_failures >= MAX_START_FAILURES {
                return Err(format!(
                    "the adapter could not be restarted ({} attempts in a row): {}",
                    pool.start_failures, pool.last_start_error
                ));
            }
            if let Some(w) = pool.idle.pop() {
                return Ok(w);
            }
            if pool.live < self.opts.jobs {
                pool.live += 1;
                drop(pool);
                self.started.fetch_add(1, Ordering::Relaxed);
                let started =
                    Worker::spawn(&self.argv, &self.stderr, &self.opts).and_then(|mut w| {
                        match say_hello(&mut w, self.opts.timeout) {
                            Ok(h) if h == self.hello => Ok(w),
                            Ok(h) => {
                                Err(format!("a restarted child said a different hello: {h:?}"))
                            }
                            Err((_, m)) => Err(format!("hello failed: {m}")),
                        }
                    });
                let mut pool = lock(&self.pool);
                match started {
                    Ok(w) => {
                        pool.start_failures = 0;
                        return Ok(w);
                    }
                    Err(e) => {
                        pool.live -= 1;
                        pool.start_failures += 1;
                        pool.last_start_error = e.clone();
                        self.freed.notify_all();
                        return Err(e);
                    }
                }
            }
            pool = self
                .freed
                .wait(pool)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Returns a child to the pool, or drops (kills) it after a failure.
    fn release(&self, w: Worker, healthy: bool) {
        let mut pool = lock(&self.pool);
        if healthy {
            pool.idle.push(w);
        } else {
            pool.live -= 1;
            drop(pool);
            drop(w);
        }
        self.freed.notify_one();
    }

    fn note(&self, why: Breakdown) {
        let i = match why {
            Breakdown::Crash => 0,
            Breakdown::Timeout => 1,
            Breakdown::ProtocolError => 2,
        };
        self.broke[i].fetch_add(1, Ordering::Relaxed);
    }
}

impl Backend for Adapter {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn supports(&self, format: &str) -> bool {
        self.hello.formats.iter().any(|f| f == format)
    }

    fn replay(&self, format: &Format, tools: &Tools, turns: &[Vec<u8>], cuts: &[Cuts]) -> Outcome {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request = parse_request(id, format.id, tools, turns, cuts);
        let mut w = match self.acquire() {
            Ok(w) => w,
            Err(e) => {
                self.note(Breakdown::Crash);
                return Outcome::Broke(Breakdown::Crash, e);
            }
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.opts.timeout;
        let answer = w
            .exchange(request, deadline)
            .and_then(|line| read_response(&line, id, turns.len()));
        match answer {
            Ok(Ok(turns)) => {
                self.release(w, true);
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

/// Sends the hello and checks the answer.
fn say_hello(w: &mut Worker, timeout: Duration) -> Result<Hello, (Breakdown, String)> {
    let req = format!("{{\"type\":\"hello\",\"protocol\":{PROTOCOL}}}\n").into_bytes();
    let line = w.exchange(req, Instant::now() + timeout)?;
    let v: Value = serde_json::from_slice(&line).map_err(|e| {
        (
            Breakdown::ProtocolError,
            format!("the hello answer is not JSON ({e}): {}", quote_line(&line)),
        )
    })?;
    #[derive(Deserialize)]
    struct WireHello {
        #[serde(rename = "type")]
        kind: String,
        protocol: u64,
        name: String,
        formats: Vec<String>,
    }
    let h: WireHello = serde_json::from_value(v).map_err(|e| {
        (
            Breakdown::ProtocolError,
            format!("bad hello answer ({e}): {}", quote_line(&line)),
        )
    })?;
    if h.kind != "hello" {
        return Err((
            Breakdown::ProtocolError,
            format!("expected a hello answer, got type {:?}", h.kind),
        ));
    }
    if h.protocol != PROTOCOL {
        return Err((
            Breakdown::ProtocolError,
            format!(
                "the adapter speaks protocol {}, conform speaks {PROTOCOL}",
                h.protocol
            ),
        ));
    }
    Ok(Hello {
        name: h.name,
        formats: h.formats,
    })
}

/// The request line for one replay (`\n`-terminated).
pub fn parse_request(
    id: u64,
    format: &str,
    tools: &Tools,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + turns.iter().map(|t| t.len() * 2).sum::<usize>());
    out.extend_from_slice(format!("{{\"type\":\"parse\",\"id\":{id},\"format\":").as_bytes());
    json_string(&mut out, format);
    out.extend_from_slice(b",\"tools\":");
    let tools_json = Value::Array(
        tools
            .defs
            .iter()
            .map(|d| serde_json::json!({"type": "function", "function": {"name": d.name, "parameters": d.parameters}}))
            .collect(),
    );
    out.extend_from_slice(tools_json.to_string().as_bytes());
    out.extend_from_slice(b",\"turns\":[");
    let whole = Cuts::At(Vec::new());
    for (t, data) in turns.iter().enumerate() {
        if t > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"chunks\":[");
        for (i, piece) in cuts.get(t).unwrap_or(&whole).pieces(data).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match std::str::from_utf8(piece) {
                Ok(s) => json_string(&mut out, s),
                Err(_) => {
                    out.extend_from_slice(b"{\"b64\":\"");
                    base64(&mut out, piece);
                    out.extend_from_slice(b"\"}");
                }
            }
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}\n");
    out
}

fn json_string(out: &mut Vec<u8>, s: &str) {
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Standard base64 (RFC 4648 §4) with padding.
fn base64(out: &mut Vec<u8>, bytes: &[u8]) {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for g in bytes.chunks(3) {
        let n = (u32::from(g[0]) << 16)
            | (u32::from(*g.get(1).unwrap_or(&0)) << 8)
            | u32::from(*g.get(2).unwrap_or(&0));
        let digits = [n >> 18, n >> 12, n >> 6, n];
        for (k, d) in digits.iter().enumerate() {
            if k <= g.len() {
                out.push(ABC[(d & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

/// An event as adapters write it: `Event`'s serde form, with `message` optional.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum WireEvent {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    CallStart {
        index: usize,
        #[serde(default)]
        id: Option<String>,
        name: String,
        #[serde(default)]
        server: Option<String>,
    },
    ArgsDelta {
        index: usize,
        json: String,
    },
    CallEnd {
        index: usize,
    },
    Warning {
        kind: String,
        #[serde(default)]
        message: String,
    },
    Error {
        kind: ErrorKind,
        #[serde(default)]
        message: String,
    },
}

impl From<WireEvent> for Event {
    fn from(w: WireEvent) -> Event {
        match w {
            WireEvent::Text { text } => Event::text(text),
            WireEvent::Reasoning { text } => Event::reasoning(text),
            WireEvent::CallStart {
                index,
                id,
                name,
                server,
            } => Event::CallStart {
                index,
                id,
                name,
                server,
            },
            WireEvent::ArgsDelta { index, json } => Event::ArgsDelta {
                index,
                json: json.into(),
            },
            WireEvent::CallEnd { index } => Event::CallEnd { index },
            WireEvent::Warning { kind, message } => Event::Warning { kind, message },
            WireEvent::Error { kind, message } => Event::Error { kind, message },
        }
    }
}

/// A final result as adapters write it.
#[derive(Deserialize)]
struct WireResult {
    text: String,
    /// Absent when the adapter does not report reasoning: it is then not judged on it.
    #[serde(default)]
    reasoning: Option<String>,
    calls: Vec<WireCall>,
    errors: Vec<WireIssue<ErrorKind>>,
    #[serde(default)]
    warnings: Vec<WireIssue<String>>,
}

#[derive(Deserialize)]
struct WireCall {
    name: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    server: Option<String>,
    arguments: Value,
}

#[derive(Deserialize)]
struct WireIssue<K> {
    kind: K,
    #[serde(default)]
    message: String,
}

fn breach(msg: String) -> (Breakdown, String) {
    (Breakdown::ProtocolError, msg)
}

/// Reads one response line for request `id` with `n` turns: the outcomes, or the adapter's
/// own `error` message (`Ok(Err)`), or a breach of the protocol.
#[allow(clippy::type_complexity)]
fn read_response(
    line: &[u8],
    id: u64,
    n: usize,
) -> Result<Result<Vec<TurnOutcome>, String>, (Breakdown, String)> {
    let v: Value = serde_json::from_slice(line).map_err(|e| {
        breach(format!(
            "the response is not JSON ({e}): {}",
            quote_line(line)
        ))
    })?;
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let got = v.get("id").and_then(Value::as_u64);
    if got != Some(id) {
        return Err(breach(format!(
            "the response carries id {} but the request was {id}: {}",
            v.get("id").map_or("none".into(), Value::to_string),
            quote_line(line)
        )));
    }
    let turns = v.get("turns");
    let turns_len = turns.and_then(Value::as_array).map(Vec::len);
    match kind {
        "error" => {
            let msg = v
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)");
            return Ok(Err(format!("the adapter reported an error: {msg}")));
        }
        "events" | "result" if turns_len != Some(n) => {
            return Err(breach(format!(
                "the response has {} turn(s), the request {n}",
                turns_len.map_or("no array of".into(), |k| k.to_string())
            )));
        }
        "events" | "result" => {}
        other => {
            return Err(breach(format!(
                "unknown response type {other:?} (expected events, result or error)"
            )));
        }
    }
    let turns = turns.and_then(Value::as_array).cloned().unwrap_or_default();
    turns
        .into_iter()
        .enumerate()
        .map(|(t, turn)| {
            let at = if n > 1 {
                format!("turn {}: ", t + 1)
            } else {
                String::new()
            };
            if kind == "events" {
                let evs: Vec<WireEvent> = serde_json::from_value(turn)
                    .map_err(|e| breach(format!("{at}bad event list: {e}")))?;
                Ok(fold_events(evs.into_iter().map(Event::from)))
            } else {
                let r: WireResult = serde_json::from_value(turn)
                    .map_err(|e| breach(format!("{at}bad result: {e}")))?;
                Ok(result_outcome(r))
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Ok)
}

fn fold_events(events: impl Iterator<Item = Event>) -> TurnOutcome {
    let mut folder = Folder::default();
    let mut hasher = DefaultHasher::new();
    for ev in events {
        ev.hash(&mut hasher);
        folder.push(&ev);
    }
    let (result, anomalies) = folder.finish_with_anomalies();
    TurnOutcome {
        result,
        anomalies,
        events_hash: hasher.finish(),
        events_seen: true,
    }
}

fn result_outcome(r: WireResult) -> TurnOutcome {
    let calls: Vec<ToolCall> = r
        .calls
        .into_iter()
        .map(|c| ToolCall {
            name: c.name,
            id: c.id,
            server: c.server,
            // OpenAI-style APIs carry arguments as JSON text; text that is not JSON stays a
            // string so the mismatch shows.
            arguments: match c.arguments {
                Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
                v => v,
            },
        })
        .collect();
    let result = ParseResult {
        text: r.text,
        reasoning: r.reasoning,
        completion: crate::event::completion_of(&calls),
        calls,
        warnings: r
            .warnings
            .into_iter()
            .map(|w| WarningInfo {
                kind: w.kind,
                message: w.message,
            })
            .collect(),
        errors: r
            .errors
            .into_iter()
            .map(|e| ErrorInfo {
                kind: e.kind,
                message: e.message,
            })
            .collect(),
    };
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(&result)
        .unwrap_or_default()
        .hash(&mut hasher);
    TurnOutcome {
        result,
        anomalies: Vec::new(),
        events_hash: hasher.finish(),
        events_seen: false,
    }
}

/// A response line for messages: at most 120 characters, quoted.
fn quote_line(line: &[u8]) -> String {
    crate::event::excerpt(&String::from_utf8_lossy(line))
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
        match parse_parser_spec(spec)? {
            ParserSpec::Builtin => Ok(AnyBackend::Builtin(Builtin)),
            ParserSpec::Command(argv) => {
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
    /// The last [`STDERR_TAIL_BYTES`] the adapter's children wrote to stderr.
    pub stderr_tail: String,
    /// Total stderr bytes.
    pub stderr_bytes: u64,
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

/// The cases an external parser did not answer (crash, timeout, protocol error), one line each
/// with the first reason and the command that replays it.
pub fn breakdowns(cases: &[CaseReport]) -> String {
    let mut out = String::new();
    for c in cases.iter().filter(|c| {
        matches!(
            c.status,
            Status::Crash | Status::Timeout | Status::ProtocolError
        )
    }) {
        let why = c
            .not_applicable
            .iter()
            .find(|n| n.starts_with(c.status.as_str()))
            .map_or("", String::as_str);
        let _ = writeln!(
            out,
            "{} {} [{}]\n  {why}",
            c.status.as_str().to_uppercase(),
            c.id,
            c.format
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_specs() {
        assert_eq!(parse_parser_spec("builtin"), Ok(ParserSpec::Builtin));
        assert_eq!(
            parse_parser_spec("cmd:python3 'my adapter.py' --x \"a \\\"b\\\"\" c\\ d"),
            Ok(ParserSpec::Command(vec![
                "python3".into(),
                "my adapter.py".into(),
                "--x".into(),
                "a \"b\"".into(),
                "c d".into()
            ]))
        );
        assert!(parse_parser_spec("cmd:").is_err());
        assert!(parse_parser_spec("cmd:python3 'x").is_err());
        assert!(parse_parser_spec("vllm").is_err());
    }

    #[test]
    fn chunks_are_strings_unless_a_piece_is_not_utf8_on_its_own() {
        let data = "aé".as_bytes().to_vec(); // 61 C3 A9
        let req = parse_request(
            7,
            "kimi_k2",
            &Tools::default(),
            std::slice::from_ref(&data),
            &[Cuts::At(vec![2])],
        );
        let v: Value = serde_json::from_slice(&req).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["tools"], serde_json::json!([]));
        assert_eq!(
            v["turns"][0]["chunks"],
            serde_json::json!([{"b64": "YcM="}, {"b64": "qQ=="}])
        );
        assert!(req.ends_with(b"\n"));
        let whole = parse_request(1, "kimi_k2", &Tools::default(), &[data], &[]);
        let v: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(v["turns"][0]["chunks"], serde_json::json!(["aé"]));
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            let mut out = Vec::new();
            base64(&mut out, i.as_bytes());
            assert_eq!(String::from_utf8(out).unwrap(), o);
        }
    }

    #[test]
    fn tail_keeps_the_last_bytes() {
        let mut t = Tail::new(4);
        t.push(b"abc");
        t.push(b"defgh");
        assert_eq!(t.text(), "efgh");
        t.push(b"i");
        assert_eq!(t.text(), "fghi");
        assert_eq!(t.total, 9);
    }

    #[test]
    fn responses_are_checked() {
        let ok = br#"{"type":"events","id":3,"turns":[[{"type":"text","text":"hi"},{"type":"call_start","index":0,"name":"f"},{"type":"args_delta","index":0,"json":"{}"},{"type":"call_end","index":0}]]}"#;
        let t = read_response(ok, 3, 1).unwrap().unwrap();
        assert!(t[0].events_seen);
        assert_eq!(t[0].result.text, "hi");
        assert_eq!(t[0].result.calls.len(), 1);
        let res = br#"{"type":"result","id":3,"turns":[{"text":"","calls":[{"name":"f","arguments":"{\"a\":1}"}],"errors":[{"kind":"invalid_json"}]}]}"#;
        let t = read_response(res, 3, 1).unwrap().unwrap();
        assert!(!t[0].events_seen);
        assert_eq!(t[0].result.calls[0].arguments, serde_json::json!({"a": 1}));
        assert_eq!(t[0].result.error_kinds(), vec![ErrorKind::InvalidJson]);
        let kind = |r: &[u8], n| read_response(r, 3, n).err().map(|e| e.0);
        assert_eq!(kind(ok, 2), Some(Breakdown::ProtocolError));
        assert_eq!(
            kind(br#"{"type":"events","id":4,"turns":[[]]}"#, 1),
            Some(Breakdown::ProtocolError)
        );
        assert_eq!(kind(b"hello", 1), Some(Breakdown::ProtocolError));
        assert!(matches!(
            read_response(br#"{"type":"error","id":3,"message":"boom"}"#, 3, 1),
            Ok(Err(m)) if m.contains("boom")
        ));
        assert_eq!(
            kind(
                br#"{"type":"events","id":3,"turns":[[{"type":"error","kind":"nope"}]]}"#,
                1
            ),
            Some(Breakdown::ProtocolError)
        );
        assert_eq!(
            kind(br#"{"type":"result","id":3,"turns":[{"text":""}]}"#, 1),
            Some(Breakdown::ProtocolError)
        );
    }
}
