//! A streaming reader for token-quoted values: JSON's shape with bare keys, bare scalars, and
//! strings between a quote *token* instead of an escape scheme.
//!
//! ```text
//! city:<|"|>Paris, "FR"<|"|>,days:3,metric:true,tags:[<|"|>a<|"|>,<|"|>b<|"|>],o:{k:null}}
//! ```
//!
//! Gemma's function-calling notation is the known user (quote `<|"|>` in Gemma 4, `<escape>`
//! in FunctionGemma); the reader knows no format: the quote token and the outermost close
//! byte are its configuration. It reads an object body (the bytes after the opening bracket)
//! up to the matching close and writes the same value as JSON text as it reads, so a call's
//! arguments stream: a string's content goes out piece by piece (JSON-escaped), a container's
//! brackets as they open and close, a bare scalar when its terminator arrives. The rules are
//! in `specs/token_value.md`.
//!
//! Linear: every byte is looked at a bounded number of times whatever the cuts; only a quote
//! prefix at a piece end (shorter than the quote), a key and a bare scalar are held. The first
//! byte of the quote (`<`) is the markup byte: outside a string, one that does not begin the
//! quote stops the reader ([`Stop::Markup`]), so the caller can read what markup it is.

use std::collections::HashSet;

/// What the reader needs to know of the notation and its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The token that opens and closes a string (`<|"|>`). Its first byte is the markup byte;
    /// it must be ASCII and must not be whitespace or one of `{}[](),:"`.
    pub quote: &'static str,
    /// The byte that closes the outermost object: `}`, or `)` for a body written in
    /// parentheses.
    pub close: u8,
    /// Deepest nesting of containers, the outermost object counting 1.
    pub max_depth: usize,
    /// Longest key in bytes.
    pub max_key_bytes: usize,
    /// Read the bare words `True`, `False` and `None` as `true`, `false` and `null`, noted
    /// ([`Note::PythonLiteral`]); off, they are bare words like any other.
    pub python_literals: bool,
    /// Read any other bare scalar as a string, noted ([`Note::BareWord`]); off, it is a
    /// syntax error.
    pub bare_words: bool,
}

/// The JSON type of a value, as its syntax says (never a schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string, quoted or a bare word.
    String,
    /// A number without fraction or exponent.
    Integer,
    /// A number with a fraction or an exponent.
    Number,
    /// `true` / `false`.
    Boolean,
    /// `null`.
    Null,
    /// `{…}`.
    Object,
    /// `[…]`.
    Array,
}

/// Something the reader observed besides the JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note<'a> {
    /// A member of the outermost object: its key and its value's kind, known when a string or
    /// container opens and when a bare scalar ends.
    Member {
        /// The member's key.
        key: &'a str,
        /// Its value's kind.
        kind: Kind,
    },
    /// `True`, `False` or `None` read as JSON's literal (option `python_literals`).
    PythonLiteral {
        /// The word as written.
        word: &'a str,
        /// Its offset (from the reader's base).
        at: u64,
    },
    /// A bare scalar that is no JSON literal or number, read as a string (option
    /// `bare_words`).
    BareWord {
        /// The word, trimmed.
        word: &'a str,
        /// Its offset (from the reader's base).
        at: u64,
    },
    /// A key given twice in one object: both go out, and JSON readers keep the last value.
    DuplicateKey {
        /// The key.
        key: &'a str,
        /// The offset of its second occurrence.
        at: u64,
    },
}

/// Where the reader's output goes.
pub trait Out {
    /// The next fragment of the JSON text.
    fn json(&mut self, s: &str);
    /// A note on the value.
    fn note(&mut self, note: Note<'_>);
}

/// How far a feed went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The piece is used up; the body is still open.
    More,
    /// The outermost close was read: it ends this many bytes into the piece, and the rest of
    /// the piece is the caller's.
    Done(usize),
}

/// Why a feed stopped before the body closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A markup byte outside a string that does not begin the quote. The markup begins with
    /// the bytes [`Reader::take_held`] returns, then this offset of the piece: the caller reads
    /// it; the reader is done.
    Markup(usize),
    /// The body breaks the notation or a limit; reading stopped this many bytes into the
    /// piece (the rest is the caller's, as after markup).
    Error(ReadError, usize),
}

/// What is wrong with a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// The class of the problem.
    pub kind: ErrorKind,
    /// What, and where (offsets from the reader's base).
    pub message: String,
}

/// The class of a [`ReadError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The bytes break the notation.
    Syntax,
    /// Nesting or a key beyond the configured limit.
    Limit,
    /// The input ended before the body closed.
    Unterminated,
}

/// An open container.
#[derive(Debug)]
struct Frame {
    array: bool,
    /// The byte that closes it.
    close: u8,
    /// Members or items begun so far.
    count: usize,
    /// The keys read so far (objects), to note a duplicate.
    keys: HashSet<Box<str>>,
}

/// Where the reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// In an object, before a key (or its close when no member was begun).
    MemberStart,
    /// In a bare key (`buf`).
    Key,
    /// In a quoted key (`buf`).
    QuotedKey,
    /// After a quoted key, before its `:`.
    Colon,
    /// Before a value (after `:`, or in an array before an item or its close).
    ValueStart,
    /// In a string value.
    Str,
    /// In a bare scalar (`buf`).
    Bare,
    /// After a value: `,` or the container's close.
    AfterValue,
    /// The outermost close was read.
    Done,
}

/// Reads one object body; see the module documentation.
#[derive(Debug)]
pub struct Reader {
    cfg: Config,
    stack: Vec<Frame>,
    st: St,
    /// The key or bare scalar being read.
    buf: String,
    /// Offset of `buf`'s first byte.
    buf_at: u64,
    /// A quote prefix held at a piece end (starts with the markup byte).
    held: String,
    /// The current key of the outermost object (for [`Note::Member`]).
    top_key: String,
    /// Offset of the next byte to read (the first held byte, when some are held).
    pos: u64,
    /// JSON text not yet handed out (flushed at the end of each feed).
    pending: String,
    /// `{` went out.
    started: bool,
    /// Where in the piece being read the current step began (an error's offset).
    err_at: usize,
    /// Reading only to find the body's end: nothing goes out, no scalar is kept.
    discard: bool,
}

/// Bytes a JSON string cannot hold as they are: `"`, `\\` and the control characters.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Appends `s` to `out` as the body of a JSON string (without its quotes).
pub fn escape_into(out: &mut String, s: &str) {
    let mut rest = s;
    while let Some(i) = rest.bytes().position(|b| NEEDS_ESCAPE[b as usize]) {
        out.push_str(&rest[..i]);
        let b = rest.as_bytes()[i];
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 15) as usize] as char);
            }
        }
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

/// True when `s` is a JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; the second
/// value says whether it has a fraction or an exponent.
pub fn json_number(s: &str) -> Option<bool> {
    let b = s.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let int_start = i;
    let n = digits(&mut i);
    if n == 0 || (n > 1 && b[int_start] == b'0') {
        return None;
    }
    let mut float = false;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return None;
        }
        float = true;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return None;
        }
        float = true;
    }
    (i == b.len()).then_some(float)
}

/// True for the bytes a bare key can hold: none of the notation's structure, no JSON quote.
#[inline]
fn key_byte(b: u8) -> bool {
    !matches!(b, b'{' | b'}' | b'[' | b']' | b',' | b':' | b'"')
}

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// How bytes at a markup byte compare with the quote.
enum Quote {
    /// The quote, ending this many bytes into the piece.
    Full(usize),
    /// A proper prefix of the quote: more input decides.
    Partial,
    /// Not the quote.
    Not,
}

impl Reader {
    /// A reader of one body; `base` is the body's offset in the caller's stream (for
    /// messages).
    pub fn new(cfg: Config, base: u64) -> Reader {
        debug_assert!(
            cfg.quote.is_ascii()
                && !cfg.quote.is_empty()
                && !is_ws(cfg.quote.as_bytes()[0])
                && key_byte(cfg.quote.as_bytes()[0])
                && !matches!(cfg.quote.as_bytes()[0], b'(' | b')'),
            "the quote must start with a markup byte"
        );
        Reader {
            cfg,
            stack: vec![Frame {
                array: false,
                close: cfg.close,
                count: 0,
                keys: HashSet::new(),
            }],
            st: St::MemberStart,
            buf: String::new(),
            buf_at: 0,
            held: String::new(),
            top_key: String::new(),
            pos: base,
            pending: String::new(),
            started: false,
            err_at: 0,
            discard: false,
        }
    }

    /// From now on, reads only to find where the body ends: no JSON, no notes, no scalar
    /// kept (a caller whose call already failed still learns where its arguments end).
    pub fn discard(&mut self) {
        self.discard = true;
        self.pending.clear();
        self.buf.clear();
    }

    /// True once the outermost close was read.
    pub fn is_done(&self) -> bool {
        self.st == St::Done
    }

    /// True inside a string value or a quoted key, where nothing but the quote is structure.
    pub fn in_string(&self) -> bool {
        matches!(self.st, St::Str | St::QuotedKey)
    }

    /// The bytes held back at the last piece's end (after [`Stop::Markup`]: the markup's
    /// first bytes).
    pub fn take_held(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    fn markup(&self) -> u8 {
        self.cfg.quote.as_bytes()[0]
    }

    /// Reads the next piece.
    pub fn feed(&mut self, s: &str, out: &mut dyn Out) -> Result<Step, Stop> {
        // What `continue_string` returned was handed out.
        self.pending.clear();
        if s.is_empty() {
            return Ok(if self.st == St::Done {
                Step::Done(0)
            } else {
                Step::More
            });
        }
        if !self.started {
            self.started = true;
            self.pending.push('{');
        }
        self.err_at = 0;
        let r = match self.feed_inner(s, out) {
            Err(Stop::Error(e, _)) => Err(Stop::Error(e, self.err_at)),
            r => r,
        };
        self.flush(out);
        r
    }

    /// The per-piece path inside a string value: a piece with no markup byte, with nothing
    /// held, is content. Returns its JSON (the piece itself, or its escaped form, to be handed
    /// out before the next call), or `None` having done nothing (then call
    /// [`feed`](Reader::feed)). In discard mode the piece is read and the fragment is empty.
    #[inline]
    pub fn continue_string<'a>(&'a mut self, s: &'a str) -> Option<&'a str> {
        if self.st != St::Str
            || !self.held.is_empty()
            || crate::lexers::has_byte(s.as_bytes(), self.markup())
        {
            return None;
        }
        self.pos += s.len() as u64;
        if self.discard {
            Some("")
        } else if s.bytes().any(|b| NEEDS_ESCAPE[b as usize]) {
            self.pending.clear();
            escape_into(&mut self.pending, s);
            Some(&self.pending)
        } else {
            Some(s)
        }
    }

    fn feed_inner(&mut self, mut s: &str, out: &mut dyn Out) -> Result<Step, Stop> {
        let piece_len = s.len();
        while !self.held.is_empty() {
            let q = self.cfg.quote.as_bytes();
            let held = std::mem::take(&mut self.held);
            let have = held.len();
            match compare(&q[have..], s.as_bytes()) {
                Quote::Full(n) => {
                    self.pos += have as u64;
                    self.on_quote(n, out)?;
                    s = &s[n..];
                }
                Quote::Partial => {
                    self.held = held;
                    self.held.push_str(s);
                    return Ok(Step::More);
                }
                Quote::Not => {
                    // The held markup byte is no quote: content in a string, markup elsewhere.
                    if !matches!(self.st, St::Str | St::QuotedKey) {
                        self.held = held;
                        return Err(Stop::Markup(0));
                    }
                    if self.st == St::Str {
                        self.content(&held[..1], out);
                    } else {
                        self.key_text(&held[..1])?;
                    }
                    self.pos += 1;
                    // The rest of the held bytes hold no markup byte (the quote has one).
                    let rest = &held[1..];
                    match self.run(rest, out) {
                        // A close cannot be held: unreachable, kept total.
                        Ok(Step::Done(_)) => return Ok(Step::Done(0)),
                        Ok(Step::More) => {}
                        Err(e) => {
                            self.err_at = 0;
                            return Err(e);
                        }
                    }
                }
            }
        }
        let before = piece_len - s.len();
        match self.run(s, out) {
            Ok(Step::Done(n)) => Ok(Step::Done(before + n)),
            Ok(Step::More) => Ok(Step::More),
            Err(Stop::Markup(n)) => Err(Stop::Markup(before + n)),
            Err(e) => {
                self.err_at += before;
                Err(e)
            }
        }
    }

    /// Reads `s` with nothing held.
    fn run(&mut self, s: &str, out: &mut dyn Out) -> Result<Step, Stop> {
        let b = s.as_bytes();
        let mk = self.markup();
        let mut i = 0;
        while i < b.len() {
            self.err_at = i;
            match self.st {
                St::Str | St::QuotedKey => {
                    let k = crate::lexers::find_byte(mk, &b[i..]).map_or(b.len(), |k| i + k);
                    if k > i {
                        if self.st == St::Str {
                            self.content(&s[i..k], out);
                        } else {
                            self.key_text(&s[i..k])?;
                        }
                        self.pos += (k - i) as u64;
                        i = k;
                    }
                    if i == b.len() {
                        break;
                    }
                    match compare(self.cfg.quote.as_bytes(), &b[i..]) {
                        Quote::Full(n) => {
                            self.on_quote(n, out)?;
                            i += n;
                        }
                        Quote::Partial => {
                            self.held.push_str(&s[i..]);
                            return Ok(Step::More);
                        }
                        Quote::Not => {
                            if self.st == St::Str {
                                self.content(&s[i..i + 1], out);
                            } else {
                                self.key_text(&s[i..i + 1])?;
                            }
                            self.pos += 1;
                            i += 1;
                        }
                    }
                }
                St::Key | St::Bare => {
                    // Up to the next byte that may end it.
                    let start = i;
                    while i < b.len() && !self.ends_scalar(b[i]) {
                        i += 1;
                    }
                    if i > start {
                        if self.st == St::Key {
                            self.key_text(&s[start..i])?;
                        } else if !self.discard {
                            crate::lexers::push_piece(&mut self.buf, &s[start..i]);
                        }
                        self.pos += (i - start) as u64;
                    }
                    if i == b.len() {
                        break;
                    }
                    let c = b[i];
                    if c == mk {
                        return Err(Stop::Markup(i));
                    }
                    if self.st == St::Key {
                        if c != b':' {
                            return Err(self.syntax(format!(
                                "{:?} inside the key {:?}",
                                c as char,
                                self.buf.trim()
                            )));
                        }
                        self.end_key(false, out)?;
                        self.pos += 1;
                        i += 1;
                        self.st = St::ValueStart;
                    } else {
                        self.end_bare(out)?;
                        // The terminator is read after the value.
                        self.st = St::AfterValue;
                    }
                }
                St::MemberStart | St::Colon | St::ValueStart | St::AfterValue => {
                    let c = b[i];
                    if is_ws(c) {
                        self.pos += 1;
                        i += 1;
                        continue;
                    }
                    if c == mk {
                        match compare(self.cfg.quote.as_bytes(), &b[i..]) {
                            Quote::Full(n) => {
                                self.on_quote(n, out)?;
                                i += n;
                                continue;
                            }
                            Quote::Partial => {
                                self.held.push_str(&s[i..]);
                                return Ok(Step::More);
                            }
                            Quote::Not => return Err(Stop::Markup(i)),
                        }
                    }
                    if let Some(done) = self.structural(c, out)? {
                        self.pos += 1;
                        i += 1;
                        if done {
                            return Ok(Step::Done(i));
                        }
                    } else {
                        // The first byte of a bare key or scalar: read by its state.
                        self.buf_at = self.pos;
                    }
                }
                St::Done => return Ok(Step::Done(i)),
            }
        }
        Ok(Step::More)
    }

    /// Whether `c` ends a bare key or scalar (or is markup inside one).
    #[inline]
    fn ends_scalar(&self, c: u8) -> bool {
        if c == self.markup() {
            return true;
        }
        if self.st == St::Key {
            return !key_byte(c);
        }
        matches!(c, b',' | b'}' | b']') || (c == self.top().close && self.stack.len() == 1)
    }

    fn top(&self) -> &Frame {
        // The stack is never empty before `Done`, where nothing reads it.
        &self.stack[self.stack.len() - 1]
    }

    /// A structural byte (no whitespace, no markup) in a state between tokens. `Some(done)`:
    /// the byte was consumed (`done`: it closed the body); `None`: it begins a bare key or
    /// scalar, and the state now reads it.
    fn structural(&mut self, c: u8, out: &mut dyn Out) -> Result<Option<bool>, Stop> {
        let at = self.pos;
        let (array, close, count) = {
            let f = self.top();
            (f.array, f.close, f.count)
        };
        match self.st {
            St::MemberStart => {
                if c == close && count == 0 {
                    return Ok(Some(self.close()));
                }
                if c == close || c == b',' {
                    return Err(
                        self.syntax(format!("{:?} at byte {at} where a key belongs", c as char))
                    );
                }
                if c == b':' {
                    return Err(self.syntax(format!("a member without a key at byte {at}")));
                }
                if !key_byte(c) {
                    return Err(
                        self.syntax(format!("{:?} at byte {at} where a key belongs", c as char))
                    );
                }
                self.st = St::Key;
                self.buf.clear();
                Ok(None)
            }
            St::Colon => {
                if c != b':' {
                    return Err(self.syntax(format!(
                        "{:?} at byte {at} after a key, where ':' belongs",
                        c as char
                    )));
                }
                self.st = St::ValueStart;
                Ok(Some(false))
            }
            St::ValueStart => {
                if array && c == close && count == 0 {
                    return Ok(Some(self.close()));
                }
                if matches!(c, b',' | b'}' | b']' | b')' | b':') {
                    return Err(self.syntax(format!(
                        "{:?} at byte {at} where a value belongs",
                        c as char
                    )));
                }
                self.begin_value();
                match c {
                    b'{' | b'[' => {
                        self.open(c == b'[', at, out)?;
                        Ok(Some(false))
                    }
                    _ => {
                        self.st = St::Bare;
                        self.buf.clear();
                        Ok(None)
                    }
                }
            }
            St::AfterValue => {
                if c == close {
                    return Ok(Some(self.close()));
                }
                if c == b',' {
                    self.st = if array {
                        St::ValueStart
                    } else {
                        St::MemberStart
                    };
                    return Ok(Some(false));
                }
                Err(self.syntax(format!(
                    "{:?} at byte {at} after a value, where ',' or {:?} belongs",
                    c as char, close as char
                )))
            }
            _ => Ok(Some(false)),
        }
    }

    /// A value begins in the current container: an item's separator goes out.
    fn begin_value(&mut self) {
        let f = self.stack.last_mut().expect("open container");
        if f.array {
            if f.count > 0 {
                self.pending.push(',');
            }
            f.count += 1;
        }
    }

    /// Opens a nested container.
    fn open(&mut self, array: bool, at: u64, out: &mut dyn Out) -> Result<(), Stop> {
        if self.stack.len() >= self.cfg.max_depth {
            return Err(Stop::Error(
                ReadError {
                    kind: ErrorKind::Limit,
                    message: format!(
                        "nesting deeper than {} levels at byte {at}",
                        self.cfg.max_depth
                    ),
                },
                0,
            ));
        }
        if self.stack.len() == 1 && !self.discard {
            let kind = if array { Kind::Array } else { Kind::Object };
            out.note(Note::Member {
                key: &self.top_key,
                kind,
            });
        }
        self.stack.push(Frame {
            array,
            close: if array { b']' } else { b'}' },
            count: 0,
            keys: HashSet::new(),
        });
        self.pending.push(if array { '[' } else { '{' });
        self.st = if array {
            St::ValueStart
        } else {
            St::MemberStart
        };
        Ok(())
    }

    /// Closes the current container; true when it was the outermost.
    fn close(&mut self) -> bool {
        let f = self.stack.pop().expect("open container");
        self.pending.push(if f.array { ']' } else { '}' });
        if self.stack.is_empty() {
            self.st = St::Done;
            true
        } else {
            self.st = St::AfterValue;
            false
        }
    }

    /// The quote, ending `n` bytes into the piece, in the current state.
    fn on_quote(&mut self, n: usize, out: &mut dyn Out) -> Result<(), Stop> {
        let at = self.pos;
        self.pos += n as u64;
        match self.st {
            St::Str => {
                self.pending.push('"');
                self.st = St::AfterValue;
            }
            St::QuotedKey => {
                self.end_key(true, out)?;
                self.st = St::Colon;
            }
            St::MemberStart => {
                self.st = St::QuotedKey;
                self.buf.clear();
                self.buf_at = at;
            }
            St::ValueStart => {
                self.begin_value();
                if self.stack.len() == 1 && !self.discard {
                    out.note(Note::Member {
                        key: &self.top_key,
                        kind: Kind::String,
                    });
                }
                self.pending.push('"');
                self.st = St::Str;
            }
            _ => {
                return Err(self.syntax(format!(
                    "a string at byte {at} where {} belongs",
                    if self.st == St::Colon {
                        "':'"
                    } else {
                        "',' or a close"
                    }
                )));
            }
        }
        Ok(())
    }

    /// String content.
    #[inline]
    fn content(&mut self, s: &str, out: &mut dyn Out) {
        if self.discard {
        } else if s.bytes().any(|b| NEEDS_ESCAPE[b as usize]) {
            escape_into(&mut self.pending, s);
        } else if s.len() < 64 {
            crate::lexers::push_piece(&mut self.pending, s);
        } else {
            self.flush(out);
            out.json(s);
        }
    }

    /// Key text, within the limit.
    fn key_text(&mut self, s: &str) -> Result<(), Stop> {
        if self.buf.len() + s.len() > self.cfg.max_key_bytes {
            return Err(Stop::Error(
                ReadError {
                    kind: ErrorKind::Limit,
                    message: format!(
                        "a key at byte {} is longer than {} bytes",
                        self.buf_at, self.cfg.max_key_bytes
                    ),
                },
                0,
            ));
        }
        self.buf.push_str(s);
        Ok(())
    }

    /// A key is complete (`quoted`: written between quotes, kept as written; bare: trimmed).
    fn end_key(&mut self, quoted: bool, out: &mut dyn Out) -> Result<(), Stop> {
        let at = self.buf_at;
        let key = if quoted {
            std::mem::take(&mut self.buf)
        } else {
            let k = self.buf.trim_matches(is_ws_char).to_string();
            self.buf.clear();
            if k.is_empty() {
                return Err(self.syntax(format!("a member without a key at byte {at}")));
            }
            k
        };
        let depth = self.stack.len();
        let f = self.stack.last_mut().expect("open container");
        if f.count > 0 {
            self.pending.push(',');
        }
        f.count += 1;
        if self.discard {
            return Ok(());
        }
        let fresh = f.keys.insert(key.as_str().into());
        if !fresh {
            out.note(Note::DuplicateKey { key: &key, at });
        }
        self.pending.push('"');
        escape_into(&mut self.pending, &key);
        self.pending.push_str("\":");
        if depth == 1 {
            self.top_key = key;
        }
        Ok(())
    }

    /// A bare scalar is complete: its JSON, noted as the configuration says.
    fn end_bare(&mut self, out: &mut dyn Out) -> Result<(), Stop> {
        let at = self.buf_at;
        if self.discard {
            return Ok(());
        }
        let word = std::mem::take(&mut self.buf);
        let w = word.trim_matches(is_ws_char);
        let kind = match w {
            "true" | "false" => {
                self.pending.push_str(w);
                Kind::Boolean
            }
            "null" => {
                self.pending.push_str(w);
                Kind::Null
            }
            "True" | "False" | "None" if self.cfg.python_literals => {
                out.note(Note::PythonLiteral { word: w, at });
                let (json, kind) = match w {
                    "True" => ("true", Kind::Boolean),
                    "False" => ("false", Kind::Boolean),
                    _ => ("null", Kind::Null),
                };
                self.pending.push_str(json);
                kind
            }
            _ => match json_number(w) {
                Some(float) => {
                    self.pending.push_str(w);
                    if float { Kind::Number } else { Kind::Integer }
                }
                None if self.cfg.bare_words => {
                    out.note(Note::BareWord { word: w, at });
                    self.pending.push('"');
                    escape_into(&mut self.pending, w);
                    self.pending.push('"');
                    Kind::String
                }
                None => {
                    return Err(self.syntax(format!(
                        "the unquoted value {:?} at byte {at} is no number or literal",
                        excerpt(w)
                    )));
                }
            },
        };
        if self.stack.len() == 1 {
            out.note(Note::Member {
                key: &self.top_key,
                kind,
            });
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut dyn Out) {
        if self.discard {
            self.pending.clear();
        } else if !self.pending.is_empty() {
            out.json(&self.pending);
            self.pending.clear();
        }
    }

    fn syntax(&self, message: String) -> Stop {
        Stop::Error(
            ReadError {
                kind: ErrorKind::Syntax,
                message,
            },
            0,
        )
    }

    /// The input ended: an error unless the body closed.
    pub fn finish(&mut self) -> Result<(), ReadError> {
        if self.st == St::Done {
            return Ok(());
        }
        let what = match self.st {
            St::Str => "inside a string value",
            St::QuotedKey | St::Key => "inside a key",
            St::Bare => "inside an unquoted value",
            _ => "before the arguments closed",
        };
        Err(ReadError {
            kind: ErrorKind::Unterminated,
            message: format!("the input ended {what} (at byte {})", self.pos),
        })
    }
}

fn is_ws_char(c: char) -> bool {
    c.is_ascii() && is_ws(c as u8)
}

/// Compares the bytes at a markup byte with the (rest of the) quote `q`.
#[inline]
fn compare(q: &[u8], s: &[u8]) -> Quote {
    let n = q.len().min(s.len());
    if s[..n] != q[..n] {
        Quote::Not
    } else if n == q.len() {
        Quote::Full(n)
    } else {
        Quote::Partial
    }
}

/// The first 40 characters of `s`, for messages.
fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests;
