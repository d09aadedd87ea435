//! The child processes of an adapter: spawning, the three pipe threads, bounded reading,
//! and killing a child's whole process group.
//!
//! Each child gets three std threads: one writes requests to its stdin (so a child that stops
//! reading cannot block a rayon thread past the timeout), one reads its stdout line by line into
//! a channel (so a response can be awaited with a deadline), one keeps the tail of its stderr.

use super::AdapterOptions;
use crate::backends::Breakdown;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Most stderr bytes kept per adapter for the report (the most recent ones).
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// Most stderr bytes of one child quoted in a crash message.
const CHILD_STDERR_BYTES: usize = 2 * 1024;

/// Lines read from a child's stdout and not yet taken by a request. One is all a request
/// needs; what an adapter writes beyond it waits in the pipe, not in conform's memory.
const LINES_IN_FLIGHT: usize = 1;

/// The most recent bytes of a stream, bounded.
#[derive(Debug, Default)]
pub(super) struct Tail {
    buf: VecDeque<u8>,
    cap: usize,
    pub(super) total: u64,
    /// Whether the stream it copies has ended (the pump read its end).
    closed: bool,
}

impl Tail {
    pub(super) fn new(cap: usize) -> Tail {
        Tail {
            buf: VecDeque::new(),
            cap,
            total: 0,
            closed: false,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let bytes = &bytes[bytes.len().saturating_sub(self.cap)..];
        let excess = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..excess.min(self.buf.len()));
        self.buf.extend(bytes);
    }

    pub(super) fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut v = Vec::with_capacity(self.buf.len());
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        String::from_utf8_lossy(&v).into_owned()
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
pub(super) struct Worker {
    child: Child,
    to_child: Option<Sender<Vec<u8>>>,
    from_child: Receiver<FromChild>,
    stderr: Arc<Mutex<Tail>>,
}

impl Worker {
    pub(super) fn spawn(
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
        // Bounded: a child that writes faster than conform reads waits on its pipe instead of
        // queueing lines in conform's memory.
        let (line_tx, line_rx) = mpsc::sync_channel(LINES_IN_FLIGHT);
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
    pub(super) fn exchange(
        &mut self,
        line: Vec<u8>,
        deadline: Instant,
    ) -> Result<Vec<u8>, (Breakdown, String)> {
        // Output the child produced unasked belongs to no request: it is a protocol breach.
        if let Ok(FromChild::Line(l)) = self.from_child.try_recv() {
            return Err((
                Breakdown::ProtocolError,
                format!(
                    "unsolicited output before the request: {}",
                    crate::event::excerpt(&String::from_utf8_lossy(&l))
                ),
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
        // Blank lines never arrive here (the reader drops them), so every message ends the
        // wait: no output, however much, can keep a request past its deadline.
        let left = deadline.saturating_duration_since(Instant::now());
        match self.from_child.recv_timeout(left) {
            Ok(FromChild::Line(l)) => Ok(l),
            Ok(FromChild::TooLong(n)) => Err((
                Breakdown::ProtocolError,
                format!("a response line of more than {n} bytes"),
            )),
            Ok(FromChild::Eof) | Err(RecvTimeoutError::Disconnected) => Err((
                Breakdown::Crash,
                self.exit_note("stdout closed without a response"),
            )),
            Ok(FromChild::ReadFailed(e)) => Err((
                Breakdown::Crash,
                self.exit_note(&format!("reading stdout failed: {e}")),
            )),
            Ok(FromChild::WriteFailed(e)) => Err((
                Breakdown::Crash,
                self.exit_note(&format!("writing the request failed: {e}")),
            )),
            Err(RecvTimeoutError::Timeout) => Err((
                Breakdown::Timeout,
                "no response in time; the child was killed".into(),
            )),
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
        // The stderr pump may lag the exit, by more than a moment on a loaded machine: wait
        // for it to read the pipe's end (bounded: a grandchild may hold the pipe open).
        let until =
            Instant::now() + Duration::from_millis(if status.is_some() { 1000 } else { 20 });
        while !lock(&self.stderr).closed && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
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

/// Reads `\n`-terminated lines into `tx`, one at a time (the channel is bounded).
///
/// Leading ASCII whitespace is dropped as it arrives, so a blank line is no message and costs
/// no memory however many there are. A line longer than `max` bytes (its whitespace counted)
/// is reported the moment it passes `max`, not when it ends, and the rest of it is skipped.
/// A last line without `\n` is dropped.
fn read_lines(stdout: impl Read, max: usize, tx: SyncSender<FromChild>) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    // True until the current line's first byte that is not whitespace.
    let mut blank = true;
    let mut len = 0usize;
    let mut too_long = false;
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
        if blank && !too_long {
            // Skip whitespace (newlines included) in one step: a flood of blank lines is read
            // at memchr speed. Only the length since the last newline counts toward `max`.
            let ws = buf
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(buf.len());
            len = match memchr::memrchr(b'\n', &buf[..ws]) {
                Some(i) => ws - i - 1,
                None => len.saturating_add(ws),
            };
            blank = ws == buf.len();
            r.consume(ws);
            if len > max {
                too_long = true;
                if tx.send(FromChild::TooLong(max)).is_err() {
                    return;
                }
            }
            continue;
        }
        let (take, end) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        len = len.saturating_add(take);
        if !too_long {
            if len > max {
                too_long = true;
                line = Vec::new();
                if tx.send(FromChild::TooLong(max)).is_err() {
                    return;
                }
            } else {
                line.extend_from_slice(&buf[..take]);
            }
        }
        r.consume(take + usize::from(end));
        if end {
            if !too_long && tx.send(FromChild::Line(std::mem::take(&mut line))).is_err() {
                return;
            }
            len = 0;
            blank = true;
            too_long = false;
        }
    }
}

fn write_requests(mut stdin: ChildStdin, rx: Receiver<Vec<u8>>, tx: SyncSender<FromChild>) {
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
    lock(own).closed = true;
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// What `read_lines` sends for `input`, in order, up to its end.
    fn lines_of(input: Vec<u8>, max: usize) -> Vec<String> {
        let (tx, rx) = mpsc::sync_channel(LINES_IN_FLIGHT);
        let t = std::thread::spawn(move || read_lines(std::io::Cursor::new(input), max, tx));
        let got = rx
            .iter()
            .map(|m| match m {
                FromChild::Line(l) => String::from_utf8(l).unwrap(),
                FromChild::TooLong(n) => format!("too long: {n}"),
                FromChild::Eof => "eof".into(),
                FromChild::ReadFailed(e) | FromChild::WriteFailed(e) => e,
            })
            .collect();
        t.join().unwrap();
        got
    }

    #[test]
    fn blank_lines_and_leading_whitespace_are_no_messages() {
        assert_eq!(
            lines_of(
                b"\n\n  \r\n{\"a\":1}\r\n \t{}\n\n  x y \nno end".to_vec(),
                100
            ),
            ["{\"a\":1}\r", "{}", "x y ", "eof"]
        );
        let mut flood = vec![b'\n'; 8 << 20];
        flood.extend_from_slice(b"{}\n");
        assert_eq!(lines_of(flood, 16), ["{}", "eof"]);
    }

    #[test]
    fn the_line_limit_counts_whitespace_and_resets_per_line() {
        assert_eq!(
            lines_of(b"12345\n123456\n1\n".to_vec(), 5),
            ["12345", "too long: 5", "1", "eof"]
        );
        let mut ws = vec![b' '; 100];
        ws.extend_from_slice(b"{}\n   {}\n");
        assert_eq!(lines_of(ws, 10), ["too long: 10", "{}", "eof"]);
        let many = b"   \n".repeat(100);
        assert_eq!(lines_of(many, 5), ["eof"]);
    }

    /// Endless bytes of one kind, until `stop` is set.
    struct Endless(u8, Arc<std::sync::atomic::AtomicBool>);

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(0);
            }
            buf.fill(self.0);
            Ok(buf.len())
        }
    }

    #[test]
    fn a_line_that_never_ends_is_too_long_once_it_passes_the_limit() {
        for byte in [b'x', b' '] {
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (tx, rx) = mpsc::sync_channel(LINES_IN_FLIGHT);
            let input = Endless(byte, Arc::clone(&stop));
            let t = std::thread::spawn(move || read_lines(input, 1 << 20, tx));
            let first = rx.recv_timeout(Duration::from_secs(20));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            assert!(matches!(first, Ok(FromChild::TooLong(n)) if n == 1 << 20));
            drop(rx);
            t.join().unwrap();
        }
    }
}
