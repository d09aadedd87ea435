//! An incremental (push) JSON parser that agrees with `serde_json::from_str::<Value>`.
//!
//! Fragments may be cut anywhere (at `char` boundaries, since they are `&str`); each byte is
//! looked at once, so the total cost is linear in the input whatever the cuts. Nesting lives
//! on an explicit stack: no input can overflow the call stack while parsing.
//!
//! Hosts that embed JSON in markup set a [`JsonConfig::stop_byte`]: the parser stops at that
//! byte when it appears outside a string where JSON could not continue, so an end marker
//! such as `</tool>` is found even when the same text occurs inside a JSON string.

use serde_json::{Map, Number, Value};
use std::fmt;

/// The deepest nesting `serde_json::from_str` accepts: its limit of 128 rejects the 128th level.
pub const SERDE_JSON_MAX_DEPTH: usize = 127;

/// Open containers shown by [`JsonParser::partial_value`]; deeper ones are left out, because
/// `Value`'s own `Clone` and `Drop` recurse and a snapshot must not overflow the stack.
pub const PARTIAL_MAX_DEPTH: usize = 512;

/// Above this configured depth, values are dismantled iteratively when dropped by the parser.
const RECURSIVE_DROP_SAFE_DEPTH: usize = 1024;

/// Options for a [`JsonParser`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonConfig {
    /// Maximum nesting depth of arrays/objects; deeper input is a `DepthLimit` error. Default
    /// [`SERDE_JSON_MAX_DEPTH`] (127), so accept/reject agrees with serde_json.
    pub max_depth: usize,
    /// A byte that, met OUTSIDE a string where a value or delimiter is expected, stops the feed
    /// instead of being a syntax error (hosts use b'<' to find their end marker). None by default.
    pub stop_byte: Option<u8>,
    /// Build the serde_json::Value (needed for finish() value and partial_value()); false =
    /// validate only (faster). Default true.
    pub build_value: bool,
}

impl Default for JsonConfig {
    fn default() -> Self {
        JsonConfig {
            max_depth: SERDE_JSON_MAX_DEPTH,
            stop_byte: None,
            build_value: true,
        }
    }
}

/// What a [`JsonParser::feed`] call did with its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// Every byte was consumed.
    NeedMore,
    /// Stopped at `input[i]` == stop_byte (outside a string); bytes before `i` are consumed,
    /// the stop byte is not.
    Stopped(usize),
}

/// The class of a [`JsonError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// The input is not JSON.
    Syntax,
    /// Input ended before the value was complete (from finish).
    Eof,
    /// No value at all: empty or whitespace only (from finish).
    Empty,
    /// Nesting deeper than [`JsonConfig::max_depth`].
    DepthLimit,
    /// A number whose magnitude does not fit an f64 (serde_json's "number out of range").
    NumberOutOfRange,
}

/// A parse error; the parser keeps returning it until [`JsonParser::reset`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// The class of error.
    pub kind: JsonErrorKind,
    /// Byte offset in the total input fed so far.
    pub offset: u64,
    /// A serde_json-style message, e.g. "expected `:` at byte 17".
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonError {}

/// Where the parser is in the grammar. Kept `Copy` so the hot loop can match on it freely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// A value is required: document start, after `:`, or after `,` in an array.
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closer.
    AfterValue,
    /// The top-level value is complete; only whitespace may follow.
    Done,
    /// Inside a string body.
    Str,
    /// After a backslash.
    Esc,
    /// Reading the hex digits of `\u`.
    Hex {
        n: u8,
        acc: u16,
    },
    /// After a high surrogate: its low half must follow as `\uXXXX`.
    LowBackslash,
    LowU,
    LowHex {
        n: u8,
        acc: u16,
    },
    Num(NumSt),
    /// Inside `true`/`false`/`null`: `which` indexes [`LITERALS`], `pos` bytes matched.
    Lit {
        which: u8,
        pos: u8,
    },
    Failed,
}

/// Number grammar states; `Zero`, `Int`, `Frac` and `Exp` may end the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumSt {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// An open container in build mode; an object carries the key awaiting its value.
#[derive(Debug)]
enum Frame {
    Array(Vec<Value>),
    Object(Map<String, Value>, String),
}

/// A push JSON parser: feed `&str` fragments, then [`finish`](JsonParser::finish).
#[derive(Debug)]
pub struct JsonParser {
    cfg: JsonConfig,
    state: St,
    /// One entry per open container, `true` for objects; authoritative in both modes.
    kinds: Vec<bool>,
    /// Containers under construction, parallel to `kinds` in build mode only.
    frames: Vec<Frame>,
    /// Decoded text of the current string, for the part that spans fragments or has escapes.
    sbuf: String,
    str_is_key: bool,
    /// The pending high surrogate of a `\uD8xx\uDCxx` pair.
    hi: u16,
    /// Text of the current number; numbers are short and may span fragments.
    num: String,
    num_has_exp: bool,
    root: Option<Value>,
    error: Option<JsonError>,
    offset: u64,
}

impl JsonParser {
    /// A parser ready for one document.
    pub fn new(config: JsonConfig) -> Self {
        JsonParser {
            cfg: config,
            state: St::Value,
            kinds: Vec::new(),
            frames: Vec::new(),
            sbuf: String::new(),
            str_is_key: false,
            hi: 0,
            num: String::new(),
            num_has_exp: false,
            root: None,
            error: None,
            offset: 0,
        }
    }

    /// The configuration this parser was made with.
    pub fn config(&self) -> &JsonConfig {
        &self.cfg
    }

    /// Feeds the next fragment; errors are sticky.
    #[inline]
    pub fn feed(&mut self, input: &str) -> Result<Feed, JsonError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        match self.run(input) {
            Ok(f) => Ok(f),
            Err(e) => {
                self.state = St::Failed;
                self.error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// [`continue_string`](JsonParser::continue_string) with its usual piece (4 to 7 plain
    /// bytes, a token of a stream cut in 4-byte chunks) taken inline: its stop test and its copy
    /// are one word read each, without a call, and any other short piece in build mode goes
    /// straight to the decoder. For strict_xml's token loop, which pays per piece; unlike
    /// [`continue_string_inlined`](JsonParser::continue_string_inlined) it inlines only that
    /// head, not the whole body.
    #[inline(always)]
    pub fn continue_string_short(&mut self, input: &str) -> bool {
        let n = input.len();
        if matches!(self.state, St::Str)
            && (4..8).contains(&n)
            && word_stops(super::short_word(input.as_bytes())) == 0
        {
            if self.cfg.build_value {
                super::push_piece(&mut self.sbuf, input);
            }
            self.offset += n as u64;
            return true;
        }
        if self.cfg.build_value && n <= ESCAPED_PIECE_MAX {
            // Any other short piece (escaped, or cut to 1 to 3 bytes): decoded in one pass,
            // without `continue_string`'s second look at it.
            match self.state {
                St::Str => return self.decode_piece(input, false),
                St::Esc => return self.decode_piece(input, true),
                _ => return false,
            }
        }
        self.continue_string(input)
    }

    /// Takes `input` when it only continues the string being read: no closing quote, no `\u`
    /// escape, no control byte. Returns `false`, having changed nothing, when `input` needs
    /// [`feed`](JsonParser::feed).
    ///
    /// Streamed arguments arrive a few bytes at a time and are almost all string body; this is
    /// their whole per-chunk cost, without the grammar dispatch of `feed`.
    ///
    /// Out of line (the compiler's own choice for its callers before
    /// [`continue_string_inlined`](JsonParser::continue_string_inlined) existed; inlined into
    /// strict_xml it made that format's per-chunk path longer).
    #[inline(never)]
    pub fn continue_string(&mut self, input: &str) -> bool {
        self.continue_string_inlined(input)
    }

    /// [`continue_string`](JsonParser::continue_string), always inlined: for a caller whose
    /// per-chunk path is this one call (the marker-delimited driver's readers), where the call
    /// and its register spills are a fair part of the cost (14 to 25 instructions per 4-byte
    /// feed, callgrind).
    #[inline(always)]
    pub fn continue_string_inlined(&mut self, input: &str) -> bool {
        let mut esc = match self.state {
            St::Str => false,
            St::Esc => true,
            _ => return false,
        };
        if !esc && !has_string_stop(input.as_bytes()) {
            if self.cfg.build_value {
                super::push_piece(&mut self.sbuf, input);
            }
            self.offset += input.len() as u64;
            return true;
        }
        if input.len() > ESCAPED_PIECE_MAX {
            // Longer pieces with escapes are faster through `feed`, which scans by the word.
            return false;
        }
        if self.cfg.build_value {
            return self.decode_piece(input, esc);
        }
        for &b in input.as_bytes() {
            if esc {
                if unescape(b).is_none() {
                    return false;
                }
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' || b < 0x20 {
                return false;
            }
        }
        self.state = if esc { St::Esc } else { St::Str };
        self.offset += input.len() as u64;
        true
    }

    /// [`continue_string`](JsonParser::continue_string)'s build mode for a short piece (one
    /// with an escape, or any from [`continue_string_short`](JsonParser::continue_string_short)):
    /// decodes it onto `sbuf` and moves on, or returns `false` having changed nothing. Out of
    /// line, so that the plain-text path the other formats take stays small.
    #[inline(never)]
    fn decode_piece(&mut self, input: &str, mut esc: bool) -> bool {
        // One pass that checks and decodes together, byte by byte into room reserved up
        // front (decoding never lengthens: an escape is two bytes for one), so that no byte
        // pays a capacity check or a `memcpy` call; the length is set only on success, so a
        // refusal changes nothing.
        self.sbuf.reserve(input.len());
        // SAFETY: the bytes are only written to the spare capacity here, and made part of
        // the string below once they are UTF-8.
        let v = unsafe { self.sbuf.as_mut_vec() };
        // Written through a pointer: `n` never passes `input.len()`, within the room reserved,
        // which an index into the spare capacity would check again for every byte.
        let room = v.spare_capacity_mut().as_mut_ptr();
        let mut n = 0;
        for &b in input.as_bytes() {
            let c = if esc {
                esc = false;
                match UNESCAPED[usize::from(b)] {
                    0 => return false,
                    c => c,
                }
            } else if b == b'\\' {
                esc = true;
                continue;
            } else if b == b'"' || b < 0x20 {
                return false;
            } else {
                b
            };
            // SAFETY: `n` < `input.len()`, and `input.len()` bytes of room were reserved.
            unsafe { room.add(n).write(std::mem::MaybeUninit::new(c)) };
            n += 1;
        }
        // SAFETY: `n` bytes were written; they are `input`'s bytes in order minus ASCII
        // backslashes, with ASCII bytes for the escapes, and a backslash before a non-ASCII
        // byte was refused, so every multi-byte character is whole and the string stays UTF-8.
        unsafe { v.set_len(v.len() + n) };
        self.state = if esc { St::Esc } else { St::Str };
        self.offset += input.len() as u64;
        true
    }

    /// Ends the input: returns the value (`Some` in build mode) or the error.
    ///
    /// The value is moved out; call [`reset`](JsonParser::reset) before parsing another document.
    pub fn finish(&mut self) -> Result<Option<Value>, JsonError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if let St::Num(ns) = self.state
            && matches!(ns, NumSt::Zero | NumSt::Int | NumSt::Frac | NumSt::Exp)
        {
            // End of input is the byte that ends a number.
            if let Err(e) = self.end_number(0) {
                self.state = St::Failed;
                self.error = Some(e.clone());
                return Err(e);
            }
        }
        let r = match self.state {
            St::Done => return Ok(self.root.take()),
            St::Value if self.kinds.is_empty() => Err(JsonError {
                kind: JsonErrorKind::Empty,
                offset: self.offset,
                message: format!("EOF while parsing a value at byte {}", self.offset),
            }),
            st => {
                let what = if self.in_string() {
                    "a string"
                } else if matches!(st, St::Num(_) | St::Lit { .. }) || self.kinds.is_empty() {
                    "a value"
                } else if self.kinds.last() == Some(&true) {
                    "an object"
                } else {
                    "a list"
                };
                Err(JsonError {
                    kind: JsonErrorKind::Eof,
                    offset: self.offset,
                    message: format!("EOF while parsing {what} at byte {}", self.offset),
                })
            }
        };
        if let Err(e) = &r {
            self.state = St::Failed;
            self.error = Some(e.clone());
        }
        r
    }

    /// A whole top-level value has been read (a top-level number only once a byte ends it).
    pub fn is_complete(&self) -> bool {
        self.state == St::Done
    }

    /// Currently inside a string (key or value).
    pub fn in_string(&self) -> bool {
        matches!(
            self.state,
            St::Str | St::Esc | St::Hex { .. } | St::LowBackslash | St::LowU | St::LowHex { .. }
        )
    }

    /// Number of open arrays/objects.
    pub fn depth(&self) -> usize {
        self.kinds.len()
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// A snapshot for progressive display (build mode only), monotone as input grows.
    ///
    /// Strings show their decoded prefix, containers appear when opened, numbers and literals
    /// once complete, and an object key once its value has appeared. Monotonicity holds for
    /// documents without duplicate keys (a repeated key restarts its value, as last-wins
    /// demands). Only the outer [`PARTIAL_MAX_DEPTH`] open containers are shown. Each call
    /// clones what has been built, so it costs time linear in the value so far.
    pub fn partial_value(&self) -> Option<Value> {
        if !self.cfg.build_value {
            return None;
        }
        if self.state == St::Done {
            return self.root.clone();
        }
        let n = self.frames.len();
        let shown = n.min(PARTIAL_MAX_DEPTH);
        let mut child = if n <= PARTIAL_MAX_DEPTH && self.in_string() && !self.str_is_key {
            Some(Value::String(self.sbuf.clone()))
        } else {
            None
        };
        for f in self.frames[..shown].iter().rev() {
            child = Some(match f {
                Frame::Array(a) => {
                    let mut a = a.clone();
                    a.extend(child);
                    Value::Array(a)
                }
                Frame::Object(m, k) => {
                    let mut m = m.clone();
                    if let Some(c) = child {
                        m.insert(k.clone(), c);
                    }
                    Value::Object(m)
                }
            });
        }
        child
    }

    /// Ready for a new document; keeps the configuration and buffers.
    pub fn reset(&mut self) {
        self.state = St::Value;
        self.kinds.clear();
        self.drop_built();
        self.sbuf.clear();
        self.num.clear();
        self.num_has_exp = false;
        self.hi = 0;
        self.root = None;
        self.error = None;
        self.offset = 0;
    }

    fn drop_built(&mut self) {
        if self.cfg.max_depth > RECURSIVE_DROP_SAFE_DEPTH {
            for f in self.frames.drain(..) {
                match f {
                    Frame::Array(a) => drop_deep(Value::Array(a)),
                    Frame::Object(m, _) => drop_deep(Value::Object(m)),
                }
            }
            if let Some(v) = self.root.take() {
                drop_deep(v);
            }
        } else {
            self.frames.clear();
        }
    }

    fn syntax(&self, at: usize, what: &str) -> JsonError {
        self.error_at(JsonErrorKind::Syntax, at, what)
    }

    fn error_at(&self, kind: JsonErrorKind, at: usize, what: &str) -> JsonError {
        let offset = self.offset + at as u64;
        JsonError {
            kind,
            offset,
            message: format!("{what} at byte {offset}"),
        }
    }

    /// Stops at `input[at]` if it is the stop byte, else fails with `what`.
    fn stop_or(&mut self, b: u8, at: usize, what: &str) -> Result<Feed, JsonError> {
        if self.cfg.stop_byte == Some(b) {
            self.offset += at as u64;
            Ok(Feed::Stopped(at))
        } else {
            Err(self.syntax(at, what))
        }
    }

    #[inline]
    fn run(&mut self, input: &str) -> Result<Feed, JsonError> {
        let bytes = input.as_bytes();
        let len = bytes.len();
        let build = self.cfg.build_value;
        let mut i = 0;
        while i < len {
            match self.state {
                St::Str => {
                    let start = i;
                    let j = scan_string(bytes, i);
                    if j == len {
                        if build {
                            self.sbuf.push_str(&input[start..]);
                        }
                        break;
                    }
                    match bytes[j] {
                        b'"' => {
                            i = j + 1;
                            let s = if !build {
                                None
                            } else if self.sbuf.is_empty() {
                                Some(input[start..j].to_owned())
                            } else {
                                self.sbuf.push_str(&input[start..j]);
                                Some(std::mem::take(&mut self.sbuf))
                            };
                            self.string_done(s);
                        }
                        b'\\' => {
                            if build {
                                self.sbuf.push_str(&input[start..j]);
                            }
                            i = j + 1;
                            self.state = St::Esc;
                        }
                        _ => {
                            return Err(self.syntax(
                                j,
                                "control character (\\u0000-\\u001F) found while parsing a string",
                            ));
                        }
                    }
                }
                St::Value
                | St::ArrayFirst
                | St::ObjectFirst
                | St::Key
                | St::Colon
                | St::AfterValue
                | St::Done => {
                    while i < len && matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r') {
                        i += 1;
                    }
                    if i == len {
                        break;
                    }
                    let b = bytes[i];
                    match self.state {
                        St::Value | St::ArrayFirst => match b {
                            b'"' => {
                                self.str_is_key = false;
                                self.state = St::Str;
                                i += 1;
                            }
                            b'{' => {
                                self.open(true, i)?;
                                i += 1;
                            }
                            b'[' => {
                                self.open(false, i)?;
                                i += 1;
                            }
                            b't' | b'f' | b'n' => {
                                let which = match b {
                                    b't' => 0,
                                    b'f' => 1,
                                    _ => 2,
                                };
                                self.state = St::Lit { which, pos: 1 };
                                i += 1;
                            }
                            b'-' | b'0'..=b'9' => {
                                self.num.clear();
                                self.num_has_exp = false;
                                self.num.push(b as char);
                                self.state = St::Num(match b {
                                    b'-' => NumSt::Minus,
                                    b'0' => NumSt::Zero,
                                    _ => NumSt::Int,
                                });
                                i += 1;
                            }
                            b']' if self.state == St::ArrayFirst => {
                                self.close();
                                i += 1;
                            }
                            _ => {
                                let what = if b == b']' && self.kinds.last() == Some(&false) {
                                    "trailing comma"
                                } else {
                                    "expected value"
                                };
                                return self.stop_or(b, i, what);
                            }
                        },
                        St::ObjectFirst | St::Key => match b {
                            b'"' => {
                                self.str_is_key = true;
                                self.state = St::Str;
                                i += 1;
                            }
                            b'}' if self.state == St::ObjectFirst => {
                                self.close();
                                i += 1;
                            }
                            b'}' => return self.stop_or(b, i, "trailing comma"),
                            _ => return self.stop_or(b, i, "key must be a string"),
                        },
                        St::Colon => {
                            if b == b':' {
                                self.state = St::Value;
                                i += 1;
                            } else {
                                return self.stop_or(b, i, "expected `:`");
                            }
                        }
                        St::AfterValue => {
                            let obj = self.kinds.last() == Some(&true);
                            match (b, obj) {
                                (b',', true) => self.state = St::Key,
                                (b',', false) => self.state = St::Value,
                                (b'}', true) | (b']', false) => self.close(),
                                (_, true) => return self.stop_or(b, i, "expected `,` or `}`"),
                                (_, false) => return self.stop_or(b, i, "expected `,` or `]`"),
                            }
                            i += 1;
                        }
                        _ => return self.stop_or(b, i, "trailing characters"),
                    }
                }
                St::Esc => {
                    let b = bytes[i];
                    let c = match unescape(b) {
                        Some(c) => c,
                        None if b == b'u' => {
                            self.state = St::Hex { n: 0, acc: 0 };
                            i += 1;
                            continue;
                        }
                        _ => return Err(self.syntax(i, "invalid escape")),
                    };
                    if build {
                        self.sbuf.push(c);
                    }
                    self.state = St::Str;
                    i += 1;
                }
                St::Hex { n, acc } | St::LowHex { n, acc } => {
                    let low = matches!(self.state, St::LowHex { .. });
                    let Some(d) = hex_value(bytes[i]) else {
                        return Err(self.syntax(i, "invalid escape"));
                    };
                    i += 1;
                    let (n, acc) = (n + 1, acc << 4 | d);
                    if n < 4 {
                        self.state = if low {
                            St::LowHex { n, acc }
                        } else {
                            St::Hex { n, acc }
                        };
                        continue;
                    }
                    let c = if low {
                        if !(0xDC00..=0xDFFF).contains(&acc) {
                            return Err(self.syntax(i - 1, "lone leading surrogate in hex escape"));
                        }
                        char::from_u32(
                            0x10000
                                + ((u32::from(self.hi) - 0xD800) << 10)
                                + (u32::from(acc) - 0xDC00),
                        )
                    } else {
                        match acc {
                            0xD800..=0xDBFF => {
                                self.hi = acc;
                                self.state = St::LowBackslash;
                                continue;
                            }
                            0xDC00..=0xDFFF => {
                                return Err(
                                    self.syntax(i - 1, "lone leading surrogate in hex escape")
                                );
                            }
                            _ => char::from_u32(u32::from(acc)),
                        }
                    };
                    if build {
                        // Both arms yield a valid scalar value by construction.
                        self.sbuf.push(c.unwrap_or(char::REPLACEMENT_CHARACTER));
                    }
                    self.state = St::Str;
                }
                St::LowBackslash | St::LowU => {
                    let want = if self.state == St::LowBackslash {
                        b'\\'
                    } else {
                        b'u'
                    };
                    if bytes[i] != want {
                        return Err(self.syntax(i, "unexpected end of hex escape"));
                    }
                    self.state = if want == b'\\' {
                        St::LowU
                    } else {
                        St::LowHex { n: 0, acc: 0 }
                    };
                    i += 1;
                }
                St::Num(ns) => {
                    let b = bytes[i];
                    let next = match (ns, b) {
                        (NumSt::Int | NumSt::Frac | NumSt::Exp, b'0'..=b'9') => {
                            let mut j = i + 1;
                            while j < len && bytes[j].is_ascii_digit() {
                                j += 1;
                            }
                            self.num.push_str(&input[i..j]);
                            i = j;
                            continue;
                        }
                        (NumSt::Minus, b'0') => NumSt::Zero,
                        (NumSt::Minus, b'1'..=b'9') => NumSt::Int,
                        (NumSt::Zero | NumSt::Int, b'.') => NumSt::Dot,
                        (NumSt::Zero | NumSt::Int | NumSt::Frac, b'e' | b'E') => {
                            self.num_has_exp = true;
                            NumSt::E
                        }
                        (NumSt::Dot, b'0'..=b'9') => NumSt::Frac,
                        (NumSt::E, b'+' | b'-') => NumSt::ESign,
                        (NumSt::E | NumSt::ESign, b'0'..=b'9') => NumSt::Exp,
                        (NumSt::Zero | NumSt::Int | NumSt::Frac | NumSt::Exp, _)
                            if !b.is_ascii_digit() =>
                        {
                            // The terminator is not consumed: the next state judges it.
                            self.end_number(i)?;
                            continue;
                        }
                        _ => return Err(self.syntax(i, "invalid number")),
                    };
                    self.num.push(b as char);
                    self.state = St::Num(next);
                    i += 1;
                }
                St::Lit { which, pos } => {
                    let lit = LITERALS[which as usize];
                    if bytes[i] != lit[pos as usize] {
                        return Err(self.syntax(i, "expected ident"));
                    }
                    i += 1;
                    if pos as usize + 1 == lit.len() {
                        let v = match which {
                            0 => Value::Bool(true),
                            1 => Value::Bool(false),
                            _ => Value::Null,
                        };
                        self.value_done(build.then_some(v));
                    } else {
                        self.state = St::Lit {
                            which,
                            pos: pos + 1,
                        };
                    }
                }
                St::Failed => unreachable!("a failed parser returns its error before running"),
            }
        }
        self.offset += len as u64;
        Ok(Feed::NeedMore)
    }

    fn open(&mut self, object: bool, at: usize) -> Result<(), JsonError> {
        if self.kinds.len() >= self.cfg.max_depth {
            return Err(self.error_at(JsonErrorKind::DepthLimit, at, "recursion limit exceeded"));
        }
        self.kinds.push(object);
        if self.cfg.build_value {
            self.frames.push(if object {
                Frame::Object(Map::new(), String::new())
            } else {
                Frame::Array(Vec::new())
            });
        }
        self.state = if object {
            St::ObjectFirst
        } else {
            St::ArrayFirst
        };
        Ok(())
    }

    fn close(&mut self) {
        self.kinds.pop();
        let v = self.frames.pop().map(|f| match f {
            Frame::Array(a) => Value::Array(a),
            Frame::Object(m, _) => Value::Object(m),
        });
        self.value_done(v);
    }

    fn string_done(&mut self, s: Option<String>) {
        if self.str_is_key {
            if let (Some(s), Some(Frame::Object(_, k))) = (s, self.frames.last_mut()) {
                *k = s;
            }
            self.state = St::Colon;
        } else {
            self.value_done(s.map(Value::String));
        }
    }

    /// `at` is the index of the byte that ended the number, for error offsets.
    fn end_number(&mut self, at: usize) -> Result<(), JsonError> {
        // serde_json's own number parser, so values are bit-identical to `from_str`.
        let parse = || self.num.parse::<Number>();
        let v = if self.cfg.build_value {
            Some(Value::Number(parse().map_err(|_| self.out_of_range(at))?))
        } else {
            // Without an exponent and with few digits a number cannot overflow an f64.
            if self.num_has_exp || self.num.len() > 300 {
                parse().map_err(|_| self.out_of_range(at))?;
            }
            None
        };
        self.value_done(v);
        Ok(())
    }

    fn out_of_range(&self, at: usize) -> JsonError {
        self.error_at(JsonErrorKind::NumberOutOfRange, at, "number out of range")
    }

    /// Records a finished value (`None` in validate mode) in its container or as the root.
    fn value_done(&mut self, v: Option<Value>) {
        if self.kinds.is_empty() {
            self.root = v;
            self.state = St::Done;
            return;
        }
        self.state = St::AfterValue;
        if let Some(v) = v {
            match self.frames.last_mut() {
                Some(Frame::Array(a)) => a.push(v),
                Some(Frame::Object(m, k)) => {
                    m.insert(std::mem::take(k), v);
                }
                None => {}
            }
        }
    }
}

impl Drop for JsonParser {
    fn drop(&mut self) {
        self.drop_built();
    }
}

/// Parses a complete `&str` in one go with the given config.
pub fn parse_complete(input: &str, config: JsonConfig) -> Result<Option<Value>, JsonError> {
    let mut p = JsonParser::new(config);
    match p.feed(input)? {
        Feed::NeedMore => p.finish(),
        // A whole document has no host around it: the stop byte is just a bad byte.
        Feed::Stopped(_) => Err(p.syntax(0, "unexpected stop byte")),
    }
}

/// Drops a value of any depth without recursion (serde_json's own `Drop` recurses).
pub fn drop_deep(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => stack.extend(m.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// The longest piece with escapes that [`JsonParser::continue_string`] checks byte by byte.
const ESCAPED_PIECE_MAX: usize = 16;

/// [`unescape`] as a table, for the byte loop of [`JsonParser::decode_piece`]: the ASCII byte a
/// one-letter escape stands for, or 0 for a byte that does not make one.
const UNESCAPED: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0c;
    t[b'n' as usize] = b'\n';
    t[b'r' as usize] = b'\r';
    t[b't' as usize] = b'\t';
    t
};

/// The character a one-letter escape (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`)
/// stands for; `None` for any other byte (`u` included).
#[inline]
fn unescape(b: u8) -> Option<char> {
    Some(match b {
        b'"' | b'\\' | b'/' => b as char,
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

fn hex_value(b: u8) -> Option<u16> {
    match b {
        b'0'..=b'9' => Some(u16::from(b - b'0')),
        b'a'..=b'f' => Some(u16::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(b - b'A' + 10)),
        _ => None,
    }
}

/// Whether a word has a `"`, `\` or control byte; each test flags the lowest such byte exactly
/// (false positives only occur above a true hit).
#[inline]
fn word_stops(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let q = w ^ (ONES * u64::from(b'"'));
    let s = w ^ (ONES * u64::from(b'\\'));
    ((q.wrapping_sub(ONES) & !q) | (s.wrapping_sub(ONES) & !s) | (w.wrapping_sub(ONES * 0x20) & !w))
        & HIGHS
}

/// Whether `bytes` holds a `"`, `\` or control byte. Short inputs (streaming deltas) are read
/// as one word instead of byte by byte.
#[inline]
fn has_string_stop(bytes: &[u8]) -> bool {
    if (4..8).contains(&bytes.len()) {
        word_stops(super::short_word(bytes)) != 0
    } else {
        scan_string(bytes, 0) < bytes.len()
    }
}

/// Index of the first `"`, `\` or control byte at or after `i`, or `bytes.len()`.
#[inline]
fn scan_string(bytes: &[u8], mut i: usize) -> usize {
    while i + 8 <= bytes.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[i..i + 8]);
        let hits = word_stops(u64::from_le_bytes(w));
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'"' || c == b'\\' || c < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexers::utf8::{Utf8Decoder, Utf8Piece};
    use proptest::prelude::*;
    use serde_json::json;

    fn cfg() -> JsonConfig {
        JsonConfig::default()
    }

    fn validate() -> JsonConfig {
        JsonConfig {
            build_value: false,
            ..JsonConfig::default()
        }
    }

    fn parse(s: &str) -> Result<Option<Value>, JsonError> {
        parse_complete(s, cfg())
    }

    fn err(s: &str) -> JsonError {
        parse(s).expect_err(s)
    }

    /// Feeds `s` cut before each index in `cuts` (moved forward to a char boundary).
    fn parse_cut(s: &str, cuts: &[usize], config: JsonConfig) -> Result<Option<Value>, JsonError> {
        parse_pieces(s, cuts, config, false)
    }

    /// [`parse_cut`], offering each piece to `continue_string` (or `continue_string_short`)
    /// first when `fast` (as streaming callers do): that must change nothing, not even an
    /// error's offset.
    fn parse_pieces(
        s: &str,
        cuts: &[usize],
        config: JsonConfig,
        fast: bool,
    ) -> Result<Option<Value>, JsonError> {
        let mut p = JsonParser::new(config);
        // Every other piece is offered to the inline variant, which must take the same.
        let mut inline = false;
        let mut feed = |piece: &str| {
            inline = !inline;
            let taken = fast
                && if inline {
                    p.continue_string_short(piece)
                } else {
                    p.continue_string(piece)
                };
            if !taken {
                assert_eq!(p.feed(piece)?, Feed::NeedMore);
            }
            Ok::<_, JsonError>(())
        };
        let mut prev = 0;
        let mut cs: Vec<usize> = cuts.iter().map(|c| c % (s.len() + 1)).collect();
        cs.sort_unstable();
        for mut c in cs {
            while !s.is_char_boundary(c) {
                c += 1;
            }
            if c > prev {
                feed(&s[prev..c])?;
                prev = c;
            }
        }
        feed(&s[prev..])?;
        let end = p.offset();
        let r = p.finish();
        if r.is_ok() {
            assert_eq!(end, s.len() as u64, "every byte counted");
        }
        r
    }

    #[test]
    fn unescape_table_agrees() {
        for b in 0..=255u8 {
            assert_eq!(
                UNESCAPED[usize::from(b)],
                unescape(b).map_or(0, |c| c as u8),
                "{b}"
            );
        }
    }

    #[test]
    fn continue_string_takes_only_plain_string_body() {
        let mut p = JsonParser::new(validate());
        assert!(!p.continue_string("abc"), "not inside a string yet");
        p.feed("{\"k\": \"").unwrap();
        let at = p.offset();
        for refused in ["a\"b", "\\u00e9", "a\u{1}", "\\q"] {
            assert!(!p.continue_string(refused), "{refused:?}");
            assert_eq!(p.offset(), at, "a refusal changes nothing");
        }
        assert!(p.continue_string("x < y é 12345678 9"), "long, plain");
        assert!(p.continue_string("x < \\n\\\\ é \\"), "short, escaped");
        assert!(
            !p.continue_string("x < y \\n 0123456789"),
            "long and escaped: left to feed"
        );
        assert!(
            p.continue_string("\"ok"),
            "the escape carried over is completed"
        );
        p.feed("\"}").unwrap();
        assert!(p.finish().is_ok());
        // Building the value, string body is decoded as it is taken.
        let mut p = JsonParser::new(cfg());
        p.feed("{\"k\": \"a").unwrap();
        assert!(p.continue_string("b é"));
        assert!(p.continue_string("\\n\\t\\"));
        assert!(p.continue_string("\"\\\\/"));
        assert!(!p.continue_string("\\u0041"));
        p.feed("\\u0041c\"}").unwrap();
        assert_eq!(p.finish().unwrap(), Some(json!({"k": "ab é\n\t\"\\/Ac"})));
    }

    #[test]
    fn short_pieces_decode_as_feed_does_at_every_cut() {
        // Every piece of 1 to 9 bytes, taken in a string or just after a backslash, by the
        // word decoder (with `feed` for what it refuses) and by `feed` alone.
        let body = "a\\\"\\\\b\\/\\n\\t\\r\\b\\fé→😀\\u0041\\x\"y\u{1}z\\é\\\\";
        let run = |lead: &str, piece: &str, short: bool| {
            let mut p = JsonParser::new(cfg());
            p.feed(lead).unwrap();
            let r = if short && p.continue_string_short(piece) {
                Ok(Feed::NeedMore)
            } else {
                p.feed(piece)
            };
            let state = p.in_string();
            let offset = p.offset();
            let end = r
                .clone()
                .and_then(|_| p.feed("\"").and_then(|_| p.finish()));
            (r.map(drop), state, offset, end)
        };
        let mut checked = 0;
        for i in 0..body.len() {
            for j in i + 1..=(i + 9).min(body.len()) {
                let Some(piece) = body.get(i..j) else {
                    continue;
                };
                for lead in ["\"", "\"\\"] {
                    assert_eq!(
                        run(lead, piece, true),
                        run(lead, piece, false),
                        "{lead:?} then {piece:?}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 300, "{checked}");
    }

    #[test]
    fn stop_bytes_are_found_at_every_position_of_short_input() {
        for n in 0..=17 {
            assert!(!has_string_stop(&vec![b'a'; n]));
            for at in 0..n {
                for stop in [b'"', b'\\', 0x00, 0x1f] {
                    let mut v = vec![0xe9; n];
                    v[at] = stop;
                    assert!(has_string_stop(&v), "{stop:#x} at {at} of {n}");
                }
            }
        }
    }

    /// Feeds `s` in fragments of `n` bytes, reassembling UTF-8 with our decoder.
    fn parse_bytes_in(s: &[u8], n: usize, config: JsonConfig) -> Result<Option<Value>, JsonError> {
        let mut d = Utf8Decoder::new();
        let mut p = JsonParser::new(config);
        let mut res = Ok(Feed::NeedMore);
        for chunk in s.chunks(n.max(1)) {
            d.feed(chunk, &mut |piece| {
                if let (Utf8Piece::Text(t), Ok(_)) = (piece, &res) {
                    res = p.feed(t);
                }
            });
        }
        res?;
        p.finish()
    }

    fn same_as_serde(s: &str) {
        let theirs = serde_json::from_str::<Value>(s);
        let ours = parse(s);
        match (&theirs, &ours) {
            (Ok(a), Ok(Some(b))) => assert_eq!(a, b, "{s:?}"),
            (Err(_), Err(_)) => {}
            _ => panic!("{s:?}: serde {theirs:?} vs ours {ours:?}"),
        }
        assert_eq!(
            parse_complete(s, validate()).is_ok(),
            theirs.is_ok(),
            "{s:?}"
        );
    }

    #[test]
    fn floats_round_trip_exactly() {
        // Without serde_json's `float_roundtrip` feature these came back one ulp off, so a
        // rendered float parsed to another value (found by the `roundtrip` fuzz target).
        for x in [
            -1.157117770045541e294_f64,
            1.37428943736099e-309,
            0.1,
            5e-324,
        ] {
            let text = serde_json::to_string(&x).unwrap();
            let v = parse(&text).unwrap().unwrap();
            assert_eq!(v.as_f64().map(f64::to_bits), Some(x.to_bits()), "{text}");
        }
    }

    #[test]
    fn scalars_and_containers() {
        assert_eq!(parse("true").unwrap(), Some(json!(true)));
        assert_eq!(parse(" false ").unwrap(), Some(json!(false)));
        assert_eq!(parse("null").unwrap(), Some(Value::Null));
        assert_eq!(parse("\"hi\"").unwrap(), Some(json!("hi")));
        assert_eq!(parse("[]").unwrap(), Some(json!([])));
        assert_eq!(parse("{}").unwrap(), Some(json!({})));
        assert_eq!(
            parse(" {\"a\" : [1, {\"b\":null}, \"x\"] ,\"c\":{}}\n").unwrap(),
            Some(json!({"a": [1, {"b": null}, "x"], "c": {}}))
        );
        for s in ["\t\r\n 1", "[1\t,\r2\n]", "{ \"a\" :\n1 }"] {
            same_as_serde(s);
        }
        // Only the four JSON whitespace bytes.
        for s in ["\u{c}1", "\u{b}1", "\u{a0}1", "1\u{c}"] {
            same_as_serde(s);
            assert_eq!(err(s).kind, JsonErrorKind::Syntax);
        }
    }

    #[test]
    fn every_escape() {
        let s = r#""\" \\ \/ \b \f \n \r \t \u0041 \u00e9 \u20AC \uD83D\uDE00 \u0000""#;
        assert_eq!(
            parse(s).unwrap(),
            Some(json!("\" \\ / \u{8} \u{c} \n \r \t A é € 😀 \u{0}"))
        );
        same_as_serde(s);
        for bad in [
            r#""\x""#,
            r#""\U0041""#,
            r#""\u00G0""#,
            r#""\u12""#,
            r#""\'""#,
        ] {
            same_as_serde(bad);
            assert_eq!(err(bad).kind, JsonErrorKind::Syntax, "{bad}");
        }
        assert_eq!(err(r#""ab\q""#).offset, 4);
    }

    #[test]
    fn surrogates_match_serde() {
        for s in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#""\ud800\n""#,
            r#""\ud800x""#,
            r#""\ud800\ud800\udc00""#,
            r#""\udbff\udfff""#,
            r#""\uD83D\uDE00""#,
            r#""\ud800\udbff""#,
            r#""\ud800\u""#,
        ] {
            same_as_serde(s);
        }
        assert_eq!(
            parse(r#""\udbff\udfff""#).unwrap(),
            Some(json!("\u{10FFFF}"))
        );
        assert_eq!(
            err(r#""\udc00""#).message,
            "lone leading surrogate in hex escape at byte 6"
        );
        assert_eq!(err(r#""\ud800x""#).offset, 7);
    }

    #[test]
    fn control_characters_are_rejected_in_strings() {
        for c in (0u8..0x20).chain([0x7f]) {
            let s = format!("\"a{}b\"", c as char);
            same_as_serde(&s);
        }
        let e = err("[\"a\nb\"]");
        assert_eq!((e.kind, e.offset), (JsonErrorKind::Syntax, 3));
        assert!(e.message.starts_with("control character"));
    }

    #[test]
    fn number_forms_match_serde() {
        for s in [
            "0",
            "-0",
            "-0.0",
            "1",
            "-1",
            "12.5",
            "1e5",
            "1E5",
            "1e+5",
            "1e-5",
            "1.5e300",
            "0e999999999999",
            "1.5e-400",
            "1e400",
            "-1e400",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "0.1",
            "3.141592653589793",
            "2.2250738585072014e-308",
            "1.7976931348623157e308",
            "1.7976931348623159e308",
            "01",
            "-01",
            "00",
            "+1",
            ".5",
            "1.",
            "1e",
            "1e+",
            "-",
            "--1",
            "1.e5",
            "0x10",
            "NaN",
            "Infinity",
            "-Infinity",
            "1.5.2",
            "1e5e5",
            "[1.]",
            "[-]",
            "[01]",
        ] {
            same_as_serde(s);
            same_as_serde(&format!("[{s}]"));
            same_as_serde(&format!("{{\"n\":{s} }}"));
        }
        let long = "1".repeat(400);
        same_as_serde(&long);
        same_as_serde(&format!("0.{long}"));
        assert_eq!(err("1e400").kind, JsonErrorKind::NumberOutOfRange);
        assert_eq!(
            parse_complete("1e400", validate()).unwrap_err().kind,
            JsonErrorKind::NumberOutOfRange
        );
        let neg0 = parse("-0").unwrap().unwrap();
        assert!(neg0.as_f64().unwrap().is_sign_negative());
        assert_eq!(err("[01]").offset, 2);
    }

    #[test]
    fn duplicate_keys_last_wins_at_first_position() {
        let s = r#"{"a":1,"b":2,"a":{"x":[3]}}"#;
        same_as_serde(s);
        let v = parse(s).unwrap().unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(v["a"], json!({"x": [3]}));
    }

    #[test]
    fn structural_errors_have_offsets_and_messages() {
        let cases: &[(&str, u64, &str)] = &[
            ("{\"a\" 1}", 5, "expected `:`"),
            ("[1 2]", 3, "expected `,` or `]`"),
            ("{\"a\":1 \"b\"}", 7, "expected `,` or `}`"),
            ("[1,]", 3, "trailing comma"),
            ("{\"a\":1,}", 7, "trailing comma"),
            ("{1:2}", 1, "key must be a string"),
            ("[,1]", 1, "expected value"),
            ("1 2", 2, "trailing characters"),
            ("{} x", 3, "trailing characters"),
            ("[tru]", 4, "expected ident"),
            ("nulL", 3, "expected ident"),
            ("]", 0, "expected value"),
        ];
        for &(s, offset, msg) in cases {
            same_as_serde(s);
            let e = err(s);
            assert_eq!((e.kind, e.offset), (JsonErrorKind::Syntax, offset), "{s}");
            assert_eq!(e.message, format!("{msg} at byte {offset}"), "{s}");
            assert_eq!(e.to_string(), e.message);
        }
    }

    #[test]
    fn empty_and_truncated() {
        for s in ["", "   ", "\n\t"] {
            let e = err(s);
            assert_eq!((e.kind, e.offset), (JsonErrorKind::Empty, s.len() as u64));
        }
        for s in [
            "{",
            "[1,",
            "\"ab",
            "\"a\\",
            "\"\\u12",
            "\"\\ud800",
            "tr",
            "-",
            "1.",
            "1e+",
            "{\"a\"",
            "{\"a\":",
            "[[]",
        ] {
            same_as_serde(s);
            let e = err(s);
            assert_eq!(
                (e.kind, e.offset),
                (JsonErrorKind::Eof, s.len() as u64),
                "{s}"
            );
        }
        assert_eq!(
            err("{\"a\":1").message,
            "EOF while parsing an object at byte 6"
        );
        assert_eq!(err("\"ab").message, "EOF while parsing a string at byte 3");
    }

    #[test]
    fn errors_are_sticky_and_reset_clears_them() {
        let mut p = JsonParser::new(cfg());
        assert_eq!(p.feed("[1").unwrap(), Feed::NeedMore);
        let e = p.feed(" x").unwrap_err();
        assert_eq!(e.offset, 3);
        assert_eq!(p.feed("]").unwrap_err(), e);
        assert_eq!(p.finish().unwrap_err(), e);
        p.reset();
        assert_eq!(p.offset(), 0);
        assert_eq!(p.feed("[2]").unwrap(), Feed::NeedMore);
        assert!(p.is_complete());
        assert_eq!(p.finish().unwrap(), Some(json!([2])));
        p.reset();
        assert_eq!(p.finish().unwrap_err().kind, JsonErrorKind::Empty);
    }

    #[test]
    fn depth_limit_boundary_matches_serde() {
        for (d, ok) in [(126, true), (127, true), (128, false), (129, false)] {
            let arr = "[".repeat(d) + &"]".repeat(d);
            let obj = "{\"k\":".repeat(d - 1) + "{}" + &"}".repeat(d - 1);
            for s in [&arr, &obj] {
                assert_eq!(serde_json::from_str::<Value>(s).is_ok(), ok, "serde at {d}");
                let r = parse(s);
                assert_eq!(r.is_ok(), ok, "ours at {d}");
                if !ok {
                    assert_eq!(r.unwrap_err().kind, JsonErrorKind::DepthLimit);
                }
                assert_eq!(parse_complete(s, validate()).is_ok(), ok);
            }
        }
        let small = JsonConfig {
            max_depth: 2,
            ..cfg()
        };
        assert!(parse_complete("[[1]]", small).is_ok());
        let e = parse_complete("[[[1]]]", small).unwrap_err();
        assert_eq!((e.kind, e.offset), (JsonErrorKind::DepthLimit, 2));
        let none = JsonConfig {
            max_depth: 0,
            ..cfg()
        };
        assert!(parse_complete("1", none).is_ok());
        assert!(parse_complete("[]", none).is_err());
    }

    #[test]
    fn deep_nesting_never_overflows_the_stack() {
        let open = "[".repeat(100_000);
        let e = parse(&open).unwrap_err();
        assert_eq!((e.kind, e.offset), (JsonErrorKind::DepthLimit, 127));

        let deep = JsonConfig {
            max_depth: 1_000_000,
            ..cfg()
        };
        let mut p = JsonParser::new(deep);
        for chunk in open.as_bytes().chunks(7) {
            assert_eq!(
                p.feed(std::str::from_utf8(chunk).unwrap()).unwrap(),
                Feed::NeedMore
            );
        }
        assert_eq!(p.depth(), 100_000);
        // Snapshots show only the outer PARTIAL_MAX_DEPTH levels.
        let mut v = p.partial_value().unwrap();
        let mut levels = 0;
        while let Value::Array(mut a) = v {
            levels += 1;
            v = a.pop().unwrap_or(Value::Null);
        }
        assert_eq!(levels, PARTIAL_MAX_DEPTH);
        assert_eq!(p.finish().unwrap_err().kind, JsonErrorKind::Eof);
        drop(p);

        let closed = open.clone() + &"]".repeat(100_000);
        let v_only = JsonConfig {
            build_value: false,
            ..deep
        };
        assert_eq!(parse_complete(&closed, v_only).unwrap(), None);
        // The parser drops its half-built deep value iteratively; the caller uses drop_deep.
        let mut p = JsonParser::new(deep);
        p.feed(&closed[..150_000]).unwrap();
        drop(p);
        drop_deep(parse_complete(&closed, deep).unwrap().unwrap());
    }

    #[test]
    fn stop_byte_in_each_position() {
        let stop = JsonConfig {
            stop_byte: Some(b'<'),
            ..cfg()
        };
        let run = |s: &str| {
            let mut p = JsonParser::new(stop);
            let r = p.feed(s);
            (r, p)
        };
        // (input, stop index, depth, complete)
        for (s, at, depth, complete) in [
            ("<", 0, 0, false),
            ("  <", 2, 0, false),
            ("{<", 1, 1, false),
            ("{\"a\"<", 4, 1, false),
            ("{\"a\":<", 5, 1, false),
            ("{\"a\":1<", 6, 1, false),
            ("{\"a\":1,<", 7, 1, false),
            ("[<", 1, 1, false),
            ("[1 <", 3, 1, false),
            ("[true<", 5, 1, false),
            ("42<", 2, 0, true),
            ("-0.5e3<", 6, 0, true),
            ("{\"a\":1}<", 7, 0, true),
            ("{\"a\":1} \n<x", 9, 0, true),
            ("\"x\"<", 3, 0, true),
        ] {
            let (r, p) = run(s);
            assert_eq!(r.unwrap(), Feed::Stopped(at), "{s}");
            assert_eq!(
                (p.depth(), p.is_complete(), p.offset()),
                (depth, complete, at as u64),
                "{s}"
            );
        }
        let (_, mut p) = run("42<");
        assert_eq!(p.finish().unwrap(), Some(json!(42)));
        let (_, p) = run("{\"a\":1<");
        assert_eq!(p.partial_value(), Some(json!({"a": 1})));
        // Inside a string the stop byte is content; inside a literal or number it ends nothing.
        let (r, mut p) = run("{\"a\":\"x</tool>\"}");
        assert_eq!(r.unwrap(), Feed::NeedMore);
        assert_eq!(p.finish().unwrap(), Some(json!({"a": "x</tool>"})));
        for s in ["tr<", "-<", "1.<", "1e<", "\"\\<\""] {
            assert_eq!(run(s).0.unwrap_err().kind, JsonErrorKind::Syntax, "{s}");
        }
        // Stopping does not consume: the host may go on feeding.
        let (_, mut p) = run("[1<");
        assert_eq!(p.feed("]").unwrap(), Feed::NeedMore);
        assert_eq!(p.finish().unwrap(), Some(json!([1])));
        // Without a stop byte `<` is an ordinary syntax error.
        assert_eq!(err("{\"a\":1<").offset, 6);
        // A stop byte that is valid JSON there does not stop.
        let comma = JsonConfig {
            stop_byte: Some(b','),
            ..cfg()
        };
        assert_eq!(parse_complete("[1,2]", comma).unwrap(), Some(json!([1, 2])));
    }

    #[test]
    fn top_level_number_completes_on_terminator_or_finish() {
        let mut p = JsonParser::new(cfg());
        p.feed("12").unwrap();
        assert!(!p.is_complete());
        assert_eq!(p.partial_value(), None);
        p.feed("3 ").unwrap();
        assert!(p.is_complete());
        assert_eq!(p.partial_value(), Some(json!(123)));
        assert_eq!(p.finish().unwrap(), Some(json!(123)));
        let mut p = JsonParser::new(cfg());
        p.feed("-7").unwrap();
        assert_eq!(p.finish().unwrap(), Some(json!(-7)));
    }

    #[test]
    fn partial_values_follow_the_display_rules() {
        let steps: &[(&str, Option<Value>)] = &[
            ("{", Some(json!({}))),
            ("\"pa", Some(json!({}))),
            ("th\"", Some(json!({}))),
            (":", Some(json!({}))),
            (" \"src/m", Some(json!({"path": "src/m"}))),
            ("a\\", Some(json!({"path": "src/ma"}))),
            ("n\\u00", Some(json!({"path": "src/ma\n"}))),
            ("e9\\ud83d", Some(json!({"path": "src/ma\né"}))),
            ("\\ude00\",", Some(json!({"path": "src/ma\né😀"}))),
            ("\"n\": 12", Some(json!({"path": "src/ma\né😀"}))),
            (",\"b\":tr", Some(json!({"path": "src/ma\né😀", "n": 12}))),
            (
                "ue, \"l\":[1, [",
                Some(json!({"path": "src/ma\né😀", "n": 12, "b": true, "l": [1, []]})),
            ),
            (
                "]]}",
                Some(json!({"path": "src/ma\né😀", "n": 12, "b": true, "l": [1, []]})),
            ),
        ];
        let mut p = JsonParser::new(cfg());
        assert_eq!(p.partial_value(), None);
        for (frag, want) in steps {
            p.feed(frag).unwrap();
            assert_eq!(&p.partial_value(), want, "after {frag:?}");
        }
        assert!(p.is_complete());
        assert_eq!(JsonParser::new(validate()).partial_value(), None);
    }

    #[test]
    fn in_string_depth_offset_track_progress() {
        let mut p = JsonParser::new(cfg());
        p.feed("{\"k\":[\"a").unwrap();
        assert!(p.in_string());
        assert_eq!((p.depth(), p.offset()), (2, 8));
        p.feed("\\").unwrap();
        assert!(p.in_string());
        p.feed("n\"").unwrap();
        assert!(!p.in_string());
        p.feed("]}").unwrap();
        assert_eq!((p.depth(), p.offset(), p.is_complete()), (0, 13, true));
    }

    #[test]
    fn scan_string_finds_the_first_special_byte() {
        let s = b"abcdefghijklmnop\"qrs\\t\x01";
        assert_eq!(scan_string(s, 0), 16);
        assert_eq!(scan_string(s, 17), 20);
        assert_eq!(scan_string(s, 21), 22);
        assert_eq!(scan_string("ééééé\"".as_bytes(), 0), 10);
        assert_eq!(scan_string(b"\x7f\x80\xff abcdefgh", 0), 12);
        for k in 0..16 {
            let mut v = vec![b'a'; 16];
            v[k] = 0x1f;
            if k + 1 < 16 {
                v[k + 1] = 0;
            }
            assert_eq!(scan_string(&v, 0), k);
        }
    }

    // ---- property tests ----

    fn arb_string() -> impl Strategy<Value = String> {
        let ch = prop_oneof![
            4 => proptest::char::range('a', 'z'),
            1 => Just('"'),
            1 => Just('\\'),
            1 => Just('/'),
            1 => Just('\n'),
            1 => Just('\u{0}'),
            1 => Just('\u{1f}'),
            1 => Just('\u{7f}'),
            1 => Just('é'),
            1 => Just('😀'),
            1 => Just('<'),
            1 => any::<char>(),
        ];
        proptest::collection::vec(ch, 0..10).prop_map(|v| v.into_iter().collect())
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1000i32..1000).prop_map(Value::from),
            any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
            arb_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((arb_string(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn arb_text() -> impl Strategy<Value = String> {
        (arb_value(), any::<bool>()).prop_map(|(v, pretty)| {
            if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            }
        })
    }

    /// Checks that ours agrees with serde_json on `bytes`, whole and cut at `cuts`.
    fn check_agrees(bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
        let Ok(s) = std::str::from_utf8(bytes) else {
            return Ok(());
        };
        let theirs = serde_json::from_str::<Value>(s);
        let whole = parse(s);
        match (&theirs, &whole) {
            (Ok(a), Ok(Some(b))) => prop_assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "{:?}: serde {:?} vs ours {:?}", s, theirs, whole),
        }
        // Cuts change nothing, not even the error.
        prop_assert_eq!(&parse_cut(s, cuts, cfg()), &whole);
        let v = parse_cut(s, cuts, validate());
        prop_assert_eq!(v.clone().map(|_| ()), whole.map(|_| ()));
        prop_assert_eq!(&v, &parse_bytes_in(bytes, 3, validate()));
        prop_assert_eq!(&v, &parse_pieces(s, cuts, validate(), true));
        let every_char: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
        prop_assert_eq!(&v, &parse_pieces(s, &every_char, validate(), true));
        Ok(())
    }

    fn is_prefix_of(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::String(a), Value::String(b)) => b.starts_with(a.as_str()),
            (Value::Object(a), Value::Object(b)) => a
                .iter()
                .all(|(k, va)| b.get(k).is_some_and(|vb| is_prefix_of(va, vb))),
            (Value::Array(a), Value::Array(b)) => {
                a.len() <= b.len()
                    && a.iter().zip(b).enumerate().all(|(i, (x, y))| {
                        if i + 1 == a.len() {
                            is_prefix_of(x, y)
                        } else {
                            x == y
                        }
                    })
            }
            _ => a == b,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn values_round_trip_in_any_fragments(text in arb_text(),
                                               cuts in proptest::collection::vec(any::<usize>(), 0..12)) {
            let want = serde_json::from_str::<Value>(&text).unwrap();
            prop_assert_eq!(parse_cut(&text, &cuts, cfg()).unwrap(), Some(want.clone()));
            prop_assert_eq!(parse_pieces(&text, &cuts, cfg(), true).unwrap(), Some(want.clone()));
            prop_assert_eq!(parse_bytes_in(text.as_bytes(), 4, cfg()).unwrap(), Some(want));
            prop_assert_eq!(parse_cut(&text, &cuts, validate()).unwrap(), None);
        }

        #[test]
        fn arbitrary_bytes_agree_with_serde(bytes in proptest::collection::vec(any::<u8>(), 0..48),
                                            cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
            check_agrees(&bytes, &cuts)?;
        }

        #[test]
        fn json_alphabet_agrees_with_serde(
            bytes in proptest::collection::vec(
                proptest::sample::select(b"{}[],:\"\\ \n0123456789-+.eEtrufalsnu/bx<\x01\xc3\xa9".to_vec()), 0..40),
            cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
            check_agrees(&bytes, &cuts)?;
        }

        #[test]
        fn mutated_json_agrees_with_serde(
            text in arb_text(),
            edits in proptest::collection::vec((any::<usize>(), 0u8..3, proptest::sample::select(
                b"{}[],:\"\\ 019-+.eEtnu<\x00\x1f\xc3\xa9\xff".to_vec())), 1..4),
            cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
            let mut bytes = text.into_bytes();
            for (pos, op, b) in edits {
                let at = pos % (bytes.len() + 1);
                match op {
                    0 => bytes.insert(at, b),
                    1 if at < bytes.len() => { bytes.remove(at); }
                    _ if at < bytes.len() => bytes[at] = b,
                    _ => bytes.push(b),
                }
            }
            check_agrees(&bytes, &cuts)?;
        }

        #[test]
        fn partial_values_are_monotone(text in arb_text()) {
            let want = serde_json::from_str::<Value>(&text).unwrap();
            let mut p = JsonParser::new(cfg());
            let mut prev: Option<Value> = None;
            let mut buf = [0u8; 4];
            for c in text.chars() {
                p.feed(c.encode_utf8(&mut buf)).unwrap();
                let cur = p.partial_value();
                if let Some(a) = &prev {
                    let b = cur.as_ref();
                    prop_assert!(b.is_some_and(|b| is_prefix_of(a, b)), "{:?} then {:?}", a, b);
                    prop_assert!(is_prefix_of(a, &want));
                }
                prev = cur;
            }
            if !want.is_number() {
                prop_assert_eq!(prev, Some(want.clone()));
            }
            prop_assert_eq!(p.finish().unwrap(), Some(want));
        }
    }
}
