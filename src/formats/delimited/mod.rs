//! The marker-delimited JSON family's shared machinery (`specs/delimited.md`): one driver that turns bytes
//! into text, delimiters and JSON values, and the readers of those values.
//!
//! A format of the family is a `Grammar`: what each delimiter means in its current state,
//! what text means there, and where a value starts. The driver owns everything else: UTF-8
//! reassembly, the [`MarkerScanner`] for delimiters in text, routing the bytes of an open value
//! straight to its reader (so a delimiter inside a JSON string is content), byte offsets for
//! messages, the rule that whitespace-only runs next to calls are dropped, and the limits.
//!
//! Readers stream: `ObjectReader` (a bare JSON object of arguments) hands each validated
//! piece out as an `ArgsDelta` the moment it arrives; `EnvelopeReader` (an object such as
//! `{"name": …, "arguments": {…}, "id": …}`) holds argument bytes only until the name (and,
//! where the format carries one, the id) is known. Both validate with the incremental JSON
//! parser and find the value's end with a string-aware structural scan of the validated
//! prefix, so each byte is looked at a bounded number of times whatever the cuts.

pub mod apertus;
pub mod deepseek_v3;
pub mod deepseek_v31;
pub mod granite4;
pub mod guided;
pub mod hermes;
pub mod kimi_k2;
pub mod llama3_json;
pub mod mistral;
pub mod mistral_v11;
pub mod olmo3;
pub mod pythonic;
pub mod xlam;

use crate::event::{ErrorKind, Event, Sink, WarningKind};
use crate::formats::StreamParser;
use crate::formats::core::decoded::{self, DecodedText};
use crate::lexers::json::SERDE_JSON_MAX_DEPTH;
use crate::lexers::json::{Feed, JsonConfig, JsonError, JsonErrorKind, JsonParser};
use crate::lexers::marker::{MarkerScanner, Token};
use crate::lexers::utf8::Utf8Decoder;
use serde_json::Value;

/// Size and nesting limits shared by the family; exceeding one gives `limit_exceeded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest header (a name, an id, a fence line) in bytes.
    pub max_header_bytes: usize,
    /// Longest value (one call's arguments, or its whole JSON object) in bytes.
    pub max_args_bytes: usize,
    /// Deepest JSON nesting (serde_json's own limit by default).
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 1024,
            max_args_bytes: 64 << 20,
            max_depth: SERDE_JSON_MAX_DEPTH,
        }
    }
}

/// Whether a name or id, written as a JSON string, fits the call-object reader's header limit
/// (counted on the escaped text, as the reader counts it): a renderer refuses what its parser
/// would answer with `limit_exceeded`.
pub(crate) fn json_header_fits(s: &str, what: &str) -> Result<(), String> {
    let written = serde_json::to_string(s).map_or(usize::MAX, |j| j.len() - 2);
    let limit = Limits::default().max_header_bytes;
    if written > limit {
        return Err(format!(
            "the {what} is {written} bytes as a JSON string, longer than the parser's {limit}-byte limit"
        ));
    }
    Ok(())
}

/// Whitespace held after a call beyond this many bytes is shown as text (memory stays bounded).
const MAX_HELD_WHITESPACE: usize = 64 << 10;

/// What a grammar did with a piece of text.
pub(crate) enum TextStep {
    /// All of it was taken.
    Taken,
    /// The bytes from this offset on belong to the value the grammar just opened.
    Value(usize),
}

/// How a value ended, as a reader reports it to the grammar.
#[derive(Debug)]
pub(crate) enum ValueEnd {
    /// The value was read whole; `index` is its call when one has started.
    Done { index: Option<usize> },
    /// Only whitespace, then a byte that cannot start the value; that byte and what follows
    /// are handed back as input.
    NotAValue,
    /// The value is bad: the error to report (a call that had started never ends). With
    /// `complete`, the value was read to its end (valid JSON, wrong content); otherwise the
    /// bytes from the offending one on are handed back as input.
    Failed {
        kind: ErrorKind,
        message: String,
        complete: bool,
    },
    /// The stream ended inside the value (or before it); `index` is its call if it started.
    Cut { index: Option<usize> },
    /// The value turned out not to be a call (an envelope without a name, for formats that
    /// read such objects as text): its raw text.
    Unnamed(String),
    /// A reader with a stop byte ([`ObjectReader::stop_at`]) met it outside a JSON string, or
    /// the stream ended: the value's extent is decided by what follows (a delimiter or not),
    /// so the grammar judges it. The stop byte and what follows are handed back as input.
    Stopped(Stop),
}

/// What a reader knew when it stopped ([`ValueEnd::Stopped`]).
#[derive(Debug)]
pub(crate) struct Stop {
    /// The value's call (`None`: the call had already failed).
    pub index: Option<usize>,
    /// Invalid UTF-8 fell inside the value (reported already).
    pub spoiled: bool,
    /// Only whitespace was read.
    pub blank: bool,
    /// The JSON value read is complete.
    pub complete: bool,
    /// A complete JSON string value, decoded (its content is for the grammar to judge).
    pub string: Option<String>,
}

/// A streaming reader of one value that bypasses the delimiter scanner.
pub(crate) trait ValueReader: Send {
    /// Takes bytes of `s` from its start: how many were consumed, and the end when reached.
    fn feed(&mut self, s: &str, cx: &mut Cx, out: &mut dyn Sink) -> (usize, Option<ValueEnd>);
    /// The stream ended with the value open.
    fn eof(&mut self, cx: &mut Cx, out: &mut dyn Sink) -> ValueEnd;
    /// Invalid UTF-8 arrived inside the value: the call is dropped without another error.
    fn spoil(&mut self);
    /// The per-chunk path: takes all of `s` when it only continues a string inside the value
    /// (what [`feed`](ValueReader::feed) would do with it, with fewer checks); `false`, having
    /// changed nothing, when `s` needs `feed`.
    fn stream(&mut self, _s: &str, _cx: &Cx, _out: &mut dyn Sink) -> bool {
        false
    }
    /// How the driver keeps the reader: the object reader is called directly on the per-chunk
    /// path (no virtual call, its `stream` inlined), others through `dyn` (measured: inlining
    /// the call-object reader's larger `stream` made hermes and mistral slower, not faster).
    fn into_opened(self: Box<Self>) -> Opened
    where
        Self: Sized + 'static,
    {
        Opened::Dyn(self)
    }
}

/// An open value's reader, as the driver holds it.
pub(crate) enum Opened {
    Object(Box<ObjectReader>),
    /// An [`ObjectReader`] with a stop byte, whose per-chunk path has less to check.
    Stopping(Box<ObjectReader>),
    Dyn(Box<dyn ValueReader>),
}

impl Opened {
    /// The reader behind the general (not per-chunk) calls.
    fn get(&mut self) -> &mut dyn ValueReader {
        match self {
            Opened::Object(r) | Opened::Stopping(r) => r.as_mut(),
            Opened::Dyn(r) => r.as_mut(),
        }
    }

    /// [`ValueReader::stream`], dispatched statically for the family's readers (inlined
    /// whole: it is the per-chunk path).
    #[inline(always)]
    fn stream(&mut self, s: &str, cx: &Cx, out: &mut dyn Sink) -> bool {
        match self {
            Opened::Object(r) => r.stream(s, cx, out),
            Opened::Stopping(r) => r.stream_to_stop(s, cx, out),
            Opened::Dyn(r) => r.stream(s, cx, out),
        }
    }
}

/// A format's grammar over the driver's tokens.
pub(crate) trait Grammar: Send {
    /// Text (free of delimiters) in the current state.
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep;
    /// The delimiter with index `m` in the format's delimiter list.
    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink);
    /// The value the grammar opened ended.
    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink);
    /// The turn ended (after any open value reported `Cut`); the grammar resets itself.
    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink);
    /// True in the state where the grammar reads plain text (outside any call): the driver's
    /// [`StreamParser::at_text`], for the reasoning layer. The default keeps a grammar that
    /// does not say so out of its reach.
    fn at_text(&self) -> bool {
        false
    }
}

/// The driver's state a grammar works with: offsets, call indices, visible text, the value to open.
pub(crate) struct Cx {
    /// The format's limits.
    pub limits: Limits,
    /// Offset in the decoded stream of the next byte not yet handled (for messages).
    pub pos: u64,
    /// The index the next `CallStart` takes.
    pub next_index: usize,
    opened: Option<Opened>,
    /// Whitespace-only text is held (after a call, inside a section) until it proves to be text.
    holding: bool,
    ws: String,
    /// Which characters count as whitespace for the held runs.
    blank: Blank,
    /// The stream has ended: text now is what the scanner held back as a delimiter prefix.
    eof: bool,
}

/// Which characters a held whitespace run may hold (a format's rule, `specs/delimited.md` F1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blank {
    /// JSON whitespace: space, tab, CR, LF.
    Json,
    /// Unicode whitespace (`char::is_whitespace`), for formats whose engines trim with it.
    Unicode,
}

impl Blank {
    /// Whether `s` is whitespace only.
    #[inline]
    pub fn all(self, s: &str) -> bool {
        match self {
            Blank::Json => s.bytes().all(is_ws),
            Blank::Unicode => s.chars().all(char::is_whitespace),
        }
    }
}

impl Cx {
    fn new(limits: Limits, blank: Blank) -> Cx {
        Cx {
            limits,
            pos: 0,
            next_index: 0,
            opened: None,
            holding: false,
            ws: String::new(),
            blank,
            eof: false,
        }
    }

    /// The stream has ended: text the grammar gets now is a delimiter prefix the scanner held
    /// back, which a grammar may drop where a cut-off delimiter means nothing (inside a call).
    pub fn at_eof(&self) -> bool {
        self.eof
    }

    /// Whether `s` is whitespace only, by the format's whitespace class.
    pub fn is_blank(&self, s: &str) -> bool {
        self.blank.all(s)
    }

    /// Opens a value: the next bytes go to `r` until it ends.
    pub fn open<R: ValueReader + 'static>(&mut self, r: Box<R>) {
        self.opened = Some(r.into_opened());
    }

    /// Emits a `CallStart` and returns its index.
    pub fn start_call(&mut self, name: &str, id: Option<&str>, out: &mut dyn Sink) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        out.push(Event::CallStart {
            index,
            id: id.map(str::to_string),
            name: name.to_string(),
            server: None,
        });
        index
    }

    /// Emits a `CallEnd`; whitespace after it is held until text shows up.
    pub fn end_call(&mut self, index: usize, out: &mut dyn Sink) {
        out.push(Event::CallEnd { index });
        self.hold_whitespace();
    }

    /// From now on whitespace-only text is held (dropped if markup follows it).
    pub fn hold_whitespace(&mut self) {
        self.holding = true;
        self.ws.clear();
    }

    /// Markup follows: held whitespace is dropped and holding goes on.
    pub fn drop_whitespace(&mut self) {
        self.ws.clear();
    }

    /// Held whitespace is dropped and text is shown as it comes again.
    pub fn release(&mut self) {
        self.ws.clear();
        self.holding = false;
    }

    /// Shows held whitespace as text after all and stops holding (no call came next to it).
    pub fn flush(&mut self, out: &mut dyn Sink) {
        out.text(&self.ws);
        self.release();
    }

    /// Whether whitespace-only text is being held.
    pub fn is_holding(&self) -> bool {
        self.holding
    }

    /// Visible text: byte-exact, except a whitespace-only run next to calls.
    /// Returns true when non-whitespace text ended a held run.
    pub fn text(&mut self, s: &str, out: &mut dyn Sink) -> bool {
        if !self.holding {
            out.text(s);
            return false;
        }
        if self.blank.all(s) {
            self.ws.push_str(s);
            if self.ws.len() > MAX_HELD_WHITESPACE {
                out.text(&self.ws);
                self.ws.clear();
            }
            return false;
        }
        out.text(&self.ws);
        out.text(s);
        self.release();
        true
    }

    /// Reports an error at the current offset.
    pub fn error(&mut self, kind: ErrorKind, what: &str, out: &mut dyn Sink) {
        out.push(Event::error(kind, format!("{what} at byte {}", self.pos)));
    }

    /// Reports that the stream ended where the grammar still expected `what`
    /// (`unterminated`, at the current offset).
    pub fn unterminated(&mut self, what: &str, out: &mut dyn Sink) {
        self.error(ErrorKind::Unterminated, what, out);
    }

    /// The stream ended inside a value: `unterminated` when it was a call's arguments (`index`),
    /// nothing for a value that had not become a call.
    pub fn cut_in_value(&mut self, index: Option<usize>, out: &mut dyn Sink) {
        if index.is_some() {
            self.error(
                ErrorKind::Unterminated,
                "the stream ended inside a call's arguments",
                out,
            );
        }
    }

    /// Reports a failed value's error; an empty message means the call was spoiled by invalid
    /// UTF-8, which was reported already.
    pub fn report(&mut self, kind: ErrorKind, message: &str, out: &mut dyn Sink) {
        if !message.is_empty() {
            out.push(Event::error(kind, message));
        }
    }

    /// A recovered deviation: a warning named after its option when `on`, else a
    /// `malformed_markup` error. Returns `on`.
    pub fn lenient(
        &mut self,
        on: bool,
        option: WarningKind,
        what: &str,
        out: &mut dyn Sink,
    ) -> bool {
        let msg = format!("{what} at byte {}", self.pos);
        if on {
            out.push(Event::warning(option, msg));
        } else {
            out.push(Event::error(ErrorKind::MalformedMarkup, msg));
        }
        on
    }
}

/// JSON whitespace.
#[inline]
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The driver: a [`StreamParser`] made of a grammar and the family's machinery.
pub(crate) struct Driver<G> {
    g: G,
    cx: Cx,
    scan: MarkerScanner,
    /// Byte length of each delimiter, for offsets.
    lens: Vec<usize>,
    utf8: Utf8Decoder,
    value: Option<Opened>,
}

impl<G: Grammar> Driver<G> {
    /// A driver for `g`, whose delimiters are `markers` (indices as `Grammar::marker` sees them).
    pub fn new(g: G, markers: &[&str], limits: Limits) -> Driver<G> {
        Self::with_blank(g, markers, limits, Blank::Json)
    }

    /// [`new`](Driver::new) with the format's whitespace class for held runs.
    pub fn with_blank(g: G, markers: &[&str], limits: Limits, blank: Blank) -> Driver<G> {
        Driver {
            g,
            cx: Cx::new(limits, blank),
            scan: MarkerScanner::new(markers),
            lens: markers.iter().map(|m| m.len()).collect(),
            utf8: Utf8Decoder::new(),
            value: None,
        }
    }

    /// Moves a value the grammar opened into place.
    #[inline]
    fn adopt(&mut self) {
        if let Some(r) = self.cx.opened.take() {
            self.value = Some(r);
        }
    }

    #[inline]
    fn feed_str(&mut self, s: &str, out: &mut dyn Sink) {
        // The per-chunk path of a streamed value: one reader call, nothing else.
        if let Some(v) = self.value.as_mut()
            && self.scan.held().is_empty()
            && v.stream(s, &self.cx, out)
        {
            self.cx.pos += s.len() as u64;
            return;
        }
        self.feed_rest(s, out);
    }

    /// [`feed_str`](Driver::feed_str) once the per-chunk path declined `s` (it is not tried
    /// again: a reader's `feed` does the same work in full). Out of line, so that the
    /// per-chunk path that calls it stays small.
    #[inline(never)]
    fn feed_rest(&mut self, mut s: &str, out: &mut dyn Sink) {
        if self.value.is_some() && self.scan.held().is_empty() {
            let n = self.feed_value(s, out);
            if n == s.len() {
                return;
            }
            s = &s[n..];
        }
        loop {
            if self.value.is_some() {
                if !self.scan.held().is_empty() {
                    // Bytes the scanner held back come before `s` and belong to the value.
                    let held = self.scan.take_held();
                    self.feed_str(&held, out);
                    continue;
                }
                if s.is_empty() {
                    return;
                }
                let n = self.feed_value(s, out);
                s = &s[n..];
                continue;
            }
            match self.scan.next(&mut s) {
                None => return,
                Some(Token::Marker(m)) => self.on_marker(m, out),
                Some(Token::Text(t)) => self.on_text(&t, out),
            }
        }
    }

    /// Feeds the open value; returns the bytes it consumed.
    #[inline]
    fn feed_value(&mut self, s: &str, out: &mut dyn Sink) -> usize {
        let Some(v) = self.value.as_mut() else {
            return 0;
        };
        let (n, end) = v.get().feed(s, &mut self.cx, out);
        self.cx.pos += n as u64;
        if let Some(end) = end {
            self.value = None;
            self.g.value_end(&mut self.cx, end, out);
            self.adopt();
        }
        n
    }

    fn on_marker(&mut self, m: usize, out: &mut dyn Sink) {
        self.g.marker(&mut self.cx, m, out);
        self.cx.pos += self.lens[m] as u64;
        self.adopt();
    }

    /// Text free of delimiters: to the grammar, or to a value it opens inside the text.
    fn on_text(&mut self, mut t: &str, out: &mut dyn Sink) {
        while !t.is_empty() {
            if self.value.is_some() {
                let n = self.feed_value(t, out);
                t = &t[n..];
                continue;
            }
            match self.g.text(&mut self.cx, t, out) {
                TextStep::Taken => {
                    self.cx.pos += t.len() as u64;
                    return;
                }
                TextStep::Value(k) => {
                    self.cx.pos += k as u64;
                    t = &t[k..];
                    self.adopt();
                    if self.value.is_none() {
                        // A grammar that names a value start must open one; take the rest as text.
                        debug_assert!(false, "TextStep::Value without an opened value");
                        return;
                    }
                }
            }
        }
    }
}

impl<G: Grammar> DecodedText for Driver<G> {
    fn decoder(&mut self) -> &mut Utf8Decoder {
        &mut self.utf8
    }

    fn feed_str(&mut self, s: &str, out: &mut dyn Sink) {
        Driver::feed_str(self, s, out);
    }

    fn spoil(&mut self) {
        if let Some(v) = self.value.as_mut() {
            v.get().spoil();
        }
    }
}

impl<G: Grammar> StreamParser for Driver<G> {
    #[inline]
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        match self.utf8.ascii(chunk) {
            Some(s) => {
                // The per-chunk path of a streamed value: one reader call, nothing else. The
                // offset moves first (readers' `stream` does not read it) so that the reader's
                // `ArgsDelta` is the last thing done, a tail call.
                if let Some(v) = self.value.as_mut()
                    && self.scan.held().is_empty()
                {
                    self.cx.pos += s.len() as u64;
                    if v.stream(s, &self.cx, out) {
                        return;
                    }
                    self.cx.pos -= s.len() as u64;
                    return self.feed_rest(s, out);
                }
                self.feed_str(s, out)
            }
            None => decoded::feed_utf8(self, chunk, out),
        }
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        decoded::finish_utf8(self, out);
        self.cx.eof = true;
        loop {
            if self.value.is_some() && !self.scan.held().is_empty() {
                let held = self.scan.take_held();
                self.feed_str(&held, out);
                continue;
            }
            if let Some(mut v) = self.value.take() {
                let end = v.get().eof(&mut self.cx, out);
                self.g.value_end(&mut self.cx, end, out);
                self.adopt();
                continue;
            }
            match self.scan.finish() {
                None => break,
                Some(Token::Marker(m)) => self.on_marker(m, out),
                Some(Token::Text(t)) => self.on_text(&t, out),
            }
        }
        self.g.finish(&mut self.cx, out);
        self.scan.reset();
        self.value = None;
        self.cx = Cx::new(self.cx.limits, self.cx.blank);
    }

    fn at_text(&self) -> bool {
        // An open value (a call's arguments) is never text, whatever the grammar's state.
        self.value.is_none() && self.cx.opened.is_none() && self.g.at_text()
    }
}

/// The error kind and message for a JSON parser error inside a value that began at `at`.
fn json_failure(e: &JsonError, what: &str, at: u64) -> (ErrorKind, String) {
    let kind = if e.kind == JsonErrorKind::DepthLimit {
        ErrorKind::LimitExceeded
    } else {
        ErrorKind::InvalidJson
    };
    (
        kind,
        format!(
            "{what} are not valid JSON: {} (value at byte {at})",
            e.message
        ),
    )
}

/// The offset in `s` of a JSON error `rel` bytes into it, on a character boundary (the parser
/// reports the first byte of the offending character; this keeps a slice from ever panicking).
fn error_at(s: &str, rel: u64) -> usize {
    let mut k = usize::try_from(rel).unwrap_or(usize::MAX).min(s.len());
    while !s.is_char_boundary(k) {
        k -= 1;
    }
    k
}

/// String and nesting state of a structural scan over validated JSON.
#[derive(Debug, Default, Clone, Copy)]
struct Nesting {
    depth: usize,
    in_str: bool,
    esc: bool,
}

impl Nesting {
    /// Follows a piece known to continue the current string (no closing quote): only its
    /// escapes matter. Short pieces are read byte by byte, cheaper than a search's setup.
    #[inline]
    fn continue_string(&mut self, s: &[u8]) {
        // Only the trailing run of backslashes decides: any other byte is plain or escaped,
        // and either way the next byte starts fresh. A piece of backslashes only continues
        // the escape state it found.
        let run = s.iter().rev().take_while(|&&b| b == b'\\').count();
        let odd = run % 2 == 1;
        self.esc = if run == s.len() { self.esc != odd } else { odd };
    }

    /// Scans `s` (a valid JSON prefix continuing what was scanned before) for the end of the
    /// top-level value: the offset just past it, if it ends inside `s`.
    fn end_in(&mut self, s: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < s.len() {
            if self.esc {
                self.esc = false;
                i += 1;
                continue;
            }
            if self.in_str {
                match crate::lexers::find_byte2(b'"', b'\\', &s[i..]) {
                    None => return None,
                    Some(k) => {
                        i += k;
                        if s[i] == b'"' {
                            self.in_str = false;
                            if self.depth == 0 {
                                return Some(i + 1);
                            }
                        } else {
                            self.esc = true;
                        }
                        i += 1;
                    }
                }
                continue;
            }
            match s[i] {
                b'"' => self.in_str = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        None
    }
}

/// How an [`ObjectReader`] reads its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ObjectMode {
    /// Only whitespace so far.
    Blank,
    /// A JSON object, streamed as it arrives.
    Object,
    /// A JSON string that must hold an object (`string_arguments`); kept until it ends.
    Str,
}

/// Reads a bare JSON object of arguments between delimiters, streaming it as `ArgsDelta`s.
pub(crate) struct ObjectReader {
    json: JsonParser,
    nest: Nesting,
    mode: ObjectMode,
    index: Option<usize>,
    /// Accept a JSON string holding an object, with a `string_arguments` warning.
    string_arguments: bool,
    bytes: usize,
    spoiled: bool,
    /// Offset where the value began, for messages.
    at: u64,
    /// Set by [`stop_at`](ObjectReader::stop_at): the value runs to this byte outside a string.
    stop: Option<u8>,
    /// The call whose `ArgsDelta`s the bytes are, once known to be streamed (an object of a
    /// live call): one test on the per-chunk path instead of three.
    streams_to: Option<usize>,
}

impl ObjectReader {
    /// A reader for the arguments of call `index` (`None`: the call already failed; the value
    /// is still read to find its end).
    pub fn new(index: Option<usize>, string_arguments: bool, limits: &Limits) -> ObjectReader {
        ObjectReader {
            json: JsonParser::new(JsonConfig {
                max_depth: limits.max_depth,
                stop_byte: None,
                build_value: false,
            }),
            nest: Nesting::default(),
            mode: ObjectMode::Blank,
            index,
            string_arguments,
            bytes: 0,
            spoiled: false,
            at: 0,
            stop: None,
            streams_to: None,
        }
    }

    /// Boxed, ready for [`Cx::open`].
    pub fn boxed(index: Option<usize>, string_arguments: bool, limits: &Limits) -> Box<Self> {
        Box::new(Self::new(index, string_arguments, limits))
    }

    /// The same reader for a format whose arguments end where a delimiter starts (its first
    /// byte `b`, outside a JSON string), not at the object's closing brace: whitespace and
    /// anything else after the object are read as part of the value (JSON then rejects what is
    /// not whitespace), and the reader ends with [`ValueEnd::Stopped`] at `b` or at the end of
    /// the stream, so the grammar decides from the delimiter whether the call ended well. A JSON
    /// string value is decoded and handed to the grammar instead of unwrapped here.
    pub fn stop_at(mut self, b: u8) -> Self {
        self.stop = Some(b);
        self.json = JsonParser::new(JsonConfig {
            stop_byte: Some(b),
            ..*self.json.config()
        });
        self
    }

    /// [`ValueReader::stream`] of a reader with a stop byte: the JSON parser's own state is
    /// all there is to follow.
    #[inline(always)]
    fn stream_to_stop(&mut self, s: &str, cx: &Cx, out: &mut dyn Sink) -> bool {
        if !(self.mode != ObjectMode::Blank
            && self.bytes + s.len() <= cx.limits.max_args_bytes
            && self.json.continue_string_inlined(s))
        {
            return false;
        }
        self.bytes += s.len();
        if let Some(i) = self.streams_to {
            out.args_delta(i, s);
        }
        true
    }

    /// What the grammar of a stop-byte reader gets when it stops.
    #[cold]
    fn stopped(&mut self) -> ValueEnd {
        let complete = self.json.is_complete();
        let string = if complete && self.mode == ObjectMode::Str {
            match self.json.finish() {
                Ok(Some(Value::String(s))) => Some(s),
                _ => Some(String::new()),
            }
        } else {
            None
        };
        ValueEnd::Stopped(Stop {
            index: self.index,
            spoiled: self.spoiled,
            blank: self.mode == ObjectMode::Blank,
            complete,
            string,
        })
    }

    fn fail(&self, kind: ErrorKind, message: String) -> Option<ValueEnd> {
        Some(ValueEnd::Failed {
            kind,
            message,
            complete: false,
        })
    }

    /// The end of a complete value: a string one is unwrapped here.
    fn done(&mut self, out: &mut dyn Sink) -> ValueEnd {
        if self.mode == ObjectMode::Str {
            let inner = match self.json.finish() {
                Ok(Some(Value::String(s))) => s,
                _ => String::new(),
            };
            match serde_json::from_str::<Value>(&inner) {
                Ok(v @ Value::Object(_)) => {
                    if let Some(i) = self.index.filter(|_| !self.spoiled) {
                        out.push(Event::warning(
                            WarningKind::StringArguments,
                            format!(
                                "arguments at byte {} are a JSON string holding an object",
                                self.at
                            ),
                        ));
                        out.args_delta(i, &v.to_string());
                    }
                }
                _ => {
                    return ValueEnd::Failed {
                        complete: true,
                        kind: ErrorKind::InvalidJson,
                        message: format!(
                            "arguments at byte {} are a JSON string that does not hold a JSON object",
                            self.at
                        ),
                    };
                }
            }
        }
        if self.spoiled {
            return ValueEnd::Failed {
                complete: true,
                kind: ErrorKind::InvalidUtf8,
                message: String::new(),
            };
        }
        ValueEnd::Done { index: self.index }
    }
}

impl ValueReader for ObjectReader {
    #[inline]
    fn feed(&mut self, s: &str, cx: &mut Cx, out: &mut dyn Sink) -> (usize, Option<ValueEnd>) {
        let mut skipped = 0;
        if self.mode == ObjectMode::Blank {
            skipped = s.bytes().take_while(|&b| is_ws(b)).count();
            let Some(&b) = s.as_bytes().get(skipped) else {
                return (s.len(), None);
            };
            self.at = cx.pos + skipped as u64;
            match b {
                b'{' => {
                    self.mode = ObjectMode::Object;
                    self.streams_to = self.index.filter(|_| !self.spoiled);
                }
                b'"' if self.string_arguments => {
                    self.mode = ObjectMode::Str;
                    self.json = JsonParser::new(JsonConfig {
                        build_value: true,
                        ..*self.json.config()
                    });
                }
                _ if Some(b) == self.stop => return (skipped, Some(self.stopped())),
                _ => return (skipped, Some(ValueEnd::NotAValue)),
            }
        }
        let s = &s[skipped..];
        let mut stopped = false;
        let (valid, err) = match self.json.feed(s) {
            Ok(Feed::NeedMore) => (s.len(), None),
            Ok(Feed::Stopped(k)) => {
                stopped = true;
                (k, None)
            }
            Err(e) => {
                let k = error_at(s, e.offset.saturating_sub(self.bytes as u64));
                (k, Some(e))
            }
        };
        // With a stop byte the JSON parser finds the value's end itself (string-aware).
        let end = if self.stop.is_some() {
            None
        } else {
            self.nest.end_in(&s.as_bytes()[..valid])
        };
        let took = end.unwrap_or(valid);
        self.bytes += took;
        if self.bytes > cx.limits.max_args_bytes {
            let msg = format!(
                "arguments at byte {} are longer than {} bytes",
                self.at, cx.limits.max_args_bytes
            );
            return (skipped + took, self.fail(ErrorKind::LimitExceeded, msg));
        }
        if let Some(i) = self.streams_to
            && took > 0
        {
            out.args_delta(i, &s[..took]);
        }
        if end.is_some() {
            return (skipped + took, Some(self.done(out)));
        }
        if stopped {
            return (skipped + took, Some(self.stopped()));
        }
        if let Some(e) = err {
            let (kind, msg) = json_failure(&e, "arguments", self.at);
            return (skipped + took, self.fail(kind, msg));
        }
        (skipped + took, None)
    }

    fn eof(&mut self, _cx: &mut Cx, _out: &mut dyn Sink) -> ValueEnd {
        if self.stop.is_some() {
            return self.stopped();
        }
        ValueEnd::Cut {
            index: if self.spoiled { None } else { self.index },
        }
    }

    /// The common streaming piece: string body only (escapes included). Without a stop byte
    /// the nesting scan follows it too, to know whether it ends inside an escape; with one,
    /// the JSON parser's own state is all there is.
    #[inline(always)]
    fn stream(&mut self, s: &str, cx: &Cx, out: &mut dyn Sink) -> bool {
        if !((self.stop.is_some() || self.nest.in_str)
            && self.mode != ObjectMode::Blank
            && self.bytes + s.len() <= cx.limits.max_args_bytes
            && self.json.continue_string_inlined(s))
        {
            return false;
        }
        if self.stop.is_none() {
            self.nest.continue_string(s.as_bytes());
        }
        self.bytes += s.len();
        if let Some(i) = self.streams_to {
            out.args_delta(i, s);
        }
        true
    }

    fn spoil(&mut self) {
        self.spoiled = true;
        self.streams_to = None;
    }

    fn into_opened(self: Box<Self>) -> Opened {
        if self.stop.is_some() {
            Opened::Stopping(self)
        } else {
            Opened::Object(self)
        }
    }
}

/// Which member of a call object a value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    Id,
    /// The arguments, under the key with this index in [`EnvelopeOptions::args_keys`].
    Args(usize),
    Other,
}

/// Where a structural scan is inside the call object (at depth 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Before `{`.
    Open,
    /// Expecting a key or `}`.
    Key,
    /// Inside a key string.
    InKey,
    /// After a key, before `:`.
    Colon,
    /// After `:`, before the value.
    Value,
    /// Inside a value (string, container or scalar) of this field.
    InValue,
    /// After a value, before `,` or `}`.
    After,
}

/// What a format's call object looks like.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EnvelopeOptions {
    /// Keys that hold the arguments, each with the warning its use gives (`None`: canonical).
    pub args_keys: &'static [(&'static str, Option<WarningKind>)],
    /// The object may carry an `"id"` string, the call's id (null: none).
    pub has_id: bool,
    /// A missing arguments key gives `{}` with a `missing_arguments` warning (else `invalid_json`).
    pub missing_arguments: bool,
    /// Arguments written as a JSON string holding an object are decoded with a warning.
    pub string_arguments: bool,
    /// An object without a `name` key is text, not a call (and so is one broken before it).
    pub text_unless_named: bool,
    /// The keyed shape `{"NAME": {…arguments…}}` (Apertus): the object's one key is the name
    /// (held to the header limit), its value the arguments; a second key is `invalid_json`.
    /// `args_keys` then names nothing: its first entry stands for the key, whatever it is.
    pub keyed: bool,
}

/// Reads a call object `{"name": …, "arguments": {…}}`, streaming the arguments once the
/// call can start.
pub(crate) struct EnvelopeReader {
    opts: EnvelopeOptions,
    json: JsonParser,
    nest: Nesting,
    slot: Slot,
    /// The current key's raw text (between its quotes), or `None` once it is too long.
    key: Option<String>,
    /// Longest key kept, in escaped bytes: the header limit for a keyed object's name.
    key_cap: usize,
    /// The key's last byte so far is an escaping backslash.
    key_esc: bool,
    field: Field,
    /// Raw text of the current name / id / string-arguments value.
    capture: String,
    /// The current value is a container or string whose end the nesting scan finds.
    value_nested: bool,
    name: Option<String>,
    name_seen: bool,
    id: Option<String>,
    id_seen: bool,
    /// Which arguments key was used, and whether the value is a string to decode.
    args_key: Option<usize>,
    args_is_str: bool,
    /// Argument bytes waiting for the call to start.
    held_args: String,
    index: Option<usize>,
    /// A problem found in valid JSON, reported when the object ends.
    problem: Option<(ErrorKind, String)>,
    /// The raw text so far, while the object may still turn out not to be a call.
    raw: Option<String>,
    bytes: usize,
    spoiled: bool,
    at: u64,
}

impl EnvelopeReader {
    /// A reader for one call object.
    pub fn new(opts: EnvelopeOptions, limits: &Limits) -> EnvelopeReader {
        EnvelopeReader {
            opts,
            json: JsonParser::new(JsonConfig {
                max_depth: limits.max_depth,
                stop_byte: None,
                build_value: false,
            }),
            nest: Nesting::default(),
            slot: Slot::Open,
            key: Some(String::new()),
            key_cap: if opts.keyed {
                limits.max_header_bytes
            } else {
                256
            },
            key_esc: false,
            field: Field::Other,
            capture: String::new(),
            value_nested: false,
            name: None,
            name_seen: false,
            id: None,
            id_seen: false,
            args_key: None,
            args_is_str: false,
            held_args: String::new(),
            index: None,
            problem: None,
            raw: opts.text_unless_named.then(String::new),
            bytes: 0,
            spoiled: false,
            at: 0,
        }
    }

    /// Boxed, ready for [`Cx::open`].
    pub fn boxed(opts: EnvelopeOptions, limits: &Limits) -> Box<Self> {
        Box::new(Self::new(opts, limits))
    }

    /// Whether the object's name key has been read (it is a call, not text, from then on).
    fn named(&self) -> bool {
        self.name_seen
    }

    fn problem(&mut self, kind: ErrorKind, msg: String) {
        if self.problem.is_none() {
            self.problem = Some((kind, msg));
        }
    }

    /// Starts the call once its name (and id, where the format has one) is known.
    fn try_start(&mut self, settled: bool, cx: &mut Cx, out: &mut dyn Sink) {
        if self.index.is_some() || self.problem.is_some() || self.spoiled {
            return;
        }
        let Some(name) = &self.name else {
            return;
        };
        if self.opts.has_id && !self.id_seen && !settled {
            return;
        }
        let i = cx.start_call(name, self.id.as_deref(), out);
        self.index = Some(i);
        if !self.held_args.is_empty() {
            out.args_delta(i, &self.held_args);
            self.held_args = String::new();
        }
    }

    /// A key ended: decide its field.
    fn key_done(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        if self.opts.keyed {
            return self.name_key_done(cx, out);
        }
        let key = match self.key.take() {
            Some(k) if k.contains('\\') => {
                serde_json::from_str::<String>(&format!("\"{k}\"")).unwrap_or_default()
            }
            Some(k) => k,
            None => String::new(),
        };
        self.key = Some(String::new());
        let dup = |seen: bool| if seen { Some(key.clone()) } else { None };
        self.field = match key.as_str() {
            "name" => {
                if let Some(k) = dup(self.name_seen) {
                    self.problem(
                        ErrorKind::InvalidJson,
                        format!("duplicate key {k:?} in the call object at byte {}", self.at),
                    );
                }
                self.name_seen = true;
                self.raw = None;
                Field::Name
            }
            "id" if self.opts.has_id => {
                if let Some(k) = dup(self.id_seen) {
                    self.problem(
                        ErrorKind::InvalidJson,
                        format!("duplicate key {k:?} in the call object at byte {}", self.at),
                    );
                }
                Field::Id
            }
            k => match self.opts.args_keys.iter().position(|(a, _)| *a == k) {
                Some(i) => {
                    if self.args_key.is_some() {
                        self.problem(
                            ErrorKind::InvalidJson,
                            format!(
                                "the call object at byte {} has its arguments twice",
                                self.at
                            ),
                        );
                    }
                    self.args_key = Some(i);
                    Field::Args(i)
                }
                None => Field::Other,
            },
        };
    }

    /// A key of a keyed object (`EnvelopeOptions::keyed`) ended: the first is the call's name
    /// (the call starts now), any other makes the object ambiguous.
    fn name_key_done(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        let raw = self.key.take();
        self.key = Some(String::new());
        self.raw = None;
        if self.name_seen {
            self.problem(
                ErrorKind::InvalidJson,
                format!("the call object at byte {} has more than one key", self.at),
            );
            self.field = Field::Other;
            return;
        }
        self.name_seen = true;
        self.args_key = Some(0);
        self.field = Field::Args(0);
        let name = match raw {
            None => {
                return self.problem(
                    ErrorKind::LimitExceeded,
                    format!(
                        "the name (key) of the call object at byte {} is longer than {} bytes",
                        self.at, cx.limits.max_header_bytes
                    ),
                );
            }
            Some(k) if k.contains('\\') => {
                serde_json::from_str::<String>(&format!("\"{k}\"")).unwrap_or_default()
            }
            Some(k) => k,
        };
        if name.is_empty() {
            return self.problem(
                ErrorKind::MissingName,
                format!("the call object at byte {} has an empty name", self.at),
            );
        }
        self.name = Some(name);
        self.try_start(false, cx, out);
    }

    /// The first byte of a value.
    fn value_start(&mut self, b: u8) {
        self.capture.clear();
        self.value_nested = matches!(b, b'{' | b'[' | b'"');
        if let Field::Args(_) = self.field {
            match b {
                b'{' => {}
                b'"' if self.opts.string_arguments => self.args_is_str = true,
                _ => self.problem(
                    ErrorKind::InvalidJson,
                    format!(
                        "the arguments of the call object at byte {} are not a JSON object",
                        self.at
                    ),
                ),
            }
        }
    }

    /// A value ended (its raw text is in `capture` for the fields that keep it).
    fn value_done(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        match self.field {
            Field::Name => match serde_json::from_str::<Value>(&self.capture) {
                Ok(Value::String(s)) if !s.is_empty() => {
                    self.name = Some(s);
                    self.try_start(false, cx, out);
                }
                _ => self.problem(
                    ErrorKind::MissingName,
                    format!(
                        "the call object at byte {} has an empty or non-string name",
                        self.at
                    ),
                ),
            },
            Field::Id => {
                self.id_seen = true;
                match serde_json::from_str::<Value>(&self.capture) {
                    Ok(Value::String(s)) => self.id = Some(s),
                    Ok(Value::Null) => {}
                    _ => self.problem(
                        ErrorKind::InvalidJson,
                        format!(
                            "the id of the call object at byte {} is not a string",
                            self.at
                        ),
                    ),
                }
                self.try_start(false, cx, out);
            }
            _ => {}
        }
        self.field = Field::Other;
        self.slot = Slot::After;
    }

    /// Keeps raw value bytes of the fields that need them.
    fn keep(&mut self, bytes: &str, cx: &Cx) {
        match self.field {
            Field::Name | Field::Id => {
                // The capture is the JSON text with its two quotes; the limit (F8) is on what
                // lies between them, as a renderer counts it (`json_header_fits`).
                if self.capture.len() + bytes.len() > cx.limits.max_header_bytes + 2 {
                    self.problem(
                        ErrorKind::LimitExceeded,
                        format!(
                            "a name or id in the call object at byte {} is longer than {} bytes",
                            self.at, cx.limits.max_header_bytes
                        ),
                    );
                } else {
                    self.capture.push_str(bytes);
                }
            }
            Field::Args(_) if self.args_is_str => self.capture.push_str(bytes),
            _ => {}
        }
    }

    /// Argument bytes of an object value: out now, or held until the call starts.
    fn args_bytes(&mut self, bytes: &str, out: &mut dyn Sink) {
        if self.args_is_str || self.problem.is_some() || self.spoiled || bytes.is_empty() {
            return;
        }
        match self.index {
            Some(i) => out.args_delta(i, bytes),
            None => self.held_args.push_str(bytes),
        }
    }

    /// Scans validated bytes; returns the offset just past the object when it ends in `s`.
    fn scan(&mut self, s: &str, cx: &mut Cx, out: &mut dyn Sink) -> Option<usize> {
        let b = s.as_bytes();
        let mut i = 0;
        // Start of the current value's bytes in `s`, for the fields streamed or kept.
        let mut from = 0;
        while i < b.len() {
            match self.slot {
                Slot::InValue if self.value_nested => {
                    match self.nest.end_in(&b[i..]) {
                        Some(k) => {
                            let end = i + k;
                            self.take_value_bytes(&s[from..end], out, cx);
                            i = end;
                            // The value's own nesting scan ended at depth 0: back at the object.
                            self.nest = Nesting::default();
                            self.value_done(cx, out);
                        }
                        None => {
                            self.take_value_bytes(&s[from..], out, cx);
                            return None;
                        }
                    }
                }
                Slot::InValue => {
                    // A scalar: up to `,`, `}` or whitespace.
                    let k = b[i..]
                        .iter()
                        .position(|&c| c == b',' || c == b'}' || is_ws(c))
                        .map_or(b.len(), |k| i + k);
                    self.take_value_bytes(&s[from..k], out, cx);
                    if k == b.len() {
                        return None;
                    }
                    i = k;
                    self.value_done(cx, out);
                }
                Slot::InKey => {
                    if self.key_esc {
                        // The character after a backslash that ended the previous piece.
                        let n = s[i..].chars().next().map_or(1, char::len_utf8);
                        self.key_bytes(&s[i..i + n]);
                        self.key_esc = false;
                        i += n;
                        continue;
                    }
                    match crate::lexers::find_byte2(b'"', b'\\', &b[i..]) {
                        None => {
                            self.key_bytes(&s[i..]);
                            return None;
                        }
                        Some(k) => {
                            let j = i + k;
                            self.key_bytes(&s[i..j]);
                            i = j + 1;
                            if b[j] == b'\\' {
                                self.key_bytes("\\");
                                self.key_esc = true;
                            } else {
                                self.key_done(cx, out);
                                self.slot = Slot::Colon;
                            }
                        }
                    }
                }
                _ => {
                    let c = b[i];
                    i += 1;
                    if is_ws(c) {
                        continue;
                    }
                    match (self.slot, c) {
                        (Slot::Open, b'{') => self.slot = Slot::Key,
                        (Slot::Key, b'"') => self.slot = Slot::InKey,
                        (Slot::Key | Slot::After, b'}') => return Some(i),
                        (Slot::Colon, b':') => self.slot = Slot::Value,
                        (Slot::After, b',') => self.slot = Slot::Key,
                        (Slot::Value, _) => {
                            self.value_start(c);
                            self.slot = Slot::InValue;
                            from = i - 1;
                            i -= 1;
                            if self.value_nested {
                                self.nest = Nesting::default();
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        None
    }

    /// Bytes of a key: kept while short, else the key is just "too long".
    fn key_bytes(&mut self, s: &str) {
        if let Some(k) = &mut self.key {
            if k.len() + s.len() > self.key_cap {
                self.key = None;
            } else {
                k.push_str(s);
            }
        }
    }

    fn take_value_bytes(&mut self, bytes: &str, out: &mut dyn Sink, cx: &Cx) {
        self.keep(bytes, cx);
        if let Field::Args(_) = self.field {
            self.args_bytes(bytes, out);
        }
    }

    /// The object ended: the call's last checks.
    fn close(&mut self, cx: &mut Cx, out: &mut dyn Sink) -> ValueEnd {
        if self.spoiled {
            return ValueEnd::Failed {
                complete: true,
                kind: ErrorKind::InvalidUtf8,
                message: String::new(),
            };
        }
        if let Some(raw) = self.raw.take() {
            return ValueEnd::Unnamed(raw);
        }
        if self.problem.is_none() && self.name.is_none() {
            self.problem(
                ErrorKind::MissingName,
                format!("the call object at byte {} has no name", self.at),
            );
        }
        if self.problem.is_none() {
            match self.args_key {
                None => {
                    let msg = format!("the call object at byte {} has no arguments", self.at);
                    if self.opts.missing_arguments {
                        self.try_start(true, cx, out);
                        out.push(Event::warning(WarningKind::MissingArguments, msg));
                        if let Some(i) = self.index {
                            out.args_delta(i, "{}");
                        }
                    } else {
                        self.problem(ErrorKind::InvalidJson, msg);
                    }
                }
                Some(k) => {
                    if let Some(w) = self.opts.args_keys[k].1 {
                        out.push(Event::warning(
                            w,
                            format!(
                                "the call object at byte {} has its arguments under {:?}",
                                self.at, self.opts.args_keys[k].0
                            ),
                        ));
                    }
                    if self.args_is_str {
                        let inner =
                            serde_json::from_str::<String>(&self.capture).unwrap_or_default();
                        match serde_json::from_str::<Value>(&inner) {
                            Ok(v @ Value::Object(_)) => {
                                self.try_start(true, cx, out);
                                out.push(Event::warning(
                                    WarningKind::StringArguments,
                                    format!(
                                        "the arguments of the call object at byte {} are a JSON string holding an object",
                                        self.at
                                    ),
                                ));
                                if let Some(i) = self.index {
                                    out.args_delta(i, &v.to_string());
                                }
                            }
                            _ => self.problem(
                                ErrorKind::InvalidJson,
                                format!(
                                    "the arguments of the call object at byte {} are a string that does not hold a JSON object",
                                    self.at
                                ),
                            ),
                        }
                    }
                }
            }
        }
        if let Some((kind, message)) = self.problem.take() {
            return ValueEnd::Failed {
                kind,
                message,
                complete: true,
            };
        }
        self.try_start(true, cx, out);
        ValueEnd::Done { index: self.index }
    }
}

impl ValueReader for EnvelopeReader {
    fn feed(&mut self, s: &str, cx: &mut Cx, out: &mut dyn Sink) -> (usize, Option<ValueEnd>) {
        let mut skipped = 0;
        if self.slot == Slot::Open {
            skipped = s.bytes().take_while(|&b| is_ws(b)).count();
            match s.as_bytes().get(skipped) {
                None => return (s.len(), None),
                Some(b'{') => self.at = cx.pos + skipped as u64,
                Some(_) => return (skipped, Some(ValueEnd::NotAValue)),
            }
        }
        let s = &s[skipped..];
        // The limit is crossed at the same byte whatever the chunking: the reader never looks
        // past the first byte over it (rounded up to a whole character), so whether a name key
        // came first does not depend on the cuts.
        let room = (cx.limits.max_args_bytes + 1).saturating_sub(self.bytes);
        let s = if s.len() > room {
            let mut k = room;
            while !s.is_char_boundary(k) {
                k += 1;
            }
            &s[..k]
        } else {
            s
        };
        let (valid, err) = match self.json.feed(s) {
            Ok(_) => (s.len(), None),
            Err(e) => {
                let k = error_at(s, e.offset.saturating_sub(self.bytes as u64));
                (k, Some(e))
            }
        };
        let end = self.scan(&s[..valid], cx, out);
        let took = end.unwrap_or(valid);
        if let Some(raw) = &mut self.raw {
            raw.push_str(&s[..took]);
        }
        self.bytes += took;
        if self.bytes > cx.limits.max_args_bytes {
            let msg = format!(
                "the call object at byte {} is longer than {} bytes",
                self.at, cx.limits.max_args_bytes
            );
            if let Some(raw) = self.raw.take() {
                return (skipped + took, Some(ValueEnd::Unnamed(raw)));
            }
            return (
                skipped + took,
                Some(ValueEnd::Failed {
                    complete: false,
                    kind: ErrorKind::LimitExceeded,
                    message: msg,
                }),
            );
        }
        if end.is_some() {
            return (skipped + took, Some(self.close(cx, out)));
        }
        if let Some(e) = err {
            if let Some(raw) = self.raw.take() {
                return (skipped + took, Some(ValueEnd::Unnamed(raw)));
            }
            let (kind, message) = json_failure(&e, "the call object's contents", self.at);
            return (
                skipped + took,
                Some(ValueEnd::Failed {
                    kind,
                    message,
                    complete: false,
                }),
            );
        }
        (skipped + took, None)
    }

    fn eof(&mut self, _cx: &mut Cx, _out: &mut dyn Sink) -> ValueEnd {
        if let Some(raw) = self.raw.take()
            && self.slot != Slot::Open
        {
            return ValueEnd::Unnamed(raw);
        }
        ValueEnd::Cut {
            index: if self.spoiled { None } else { self.index },
        }
    }

    fn spoil(&mut self) {
        self.spoiled = true;
    }

    /// The common streaming piece: the body of a string inside a value.
    #[inline]
    fn stream(&mut self, s: &str, cx: &Cx, out: &mut dyn Sink) -> bool {
        if !(self.slot == Slot::InValue
            && self.value_nested
            && self.nest.in_str
            && self.bytes + s.len() <= cx.limits.max_args_bytes
            && self.json.continue_string_inlined(s))
        {
            return false;
        }
        self.nest.continue_string(s.as_bytes());
        self.take_value_bytes(s, out, cx);
        if let Some(raw) = &mut self.raw {
            raw.push_str(s);
        }
        self.bytes += s.len();
        true
    }
}

/// Where a [`CallArrayReader`] is between its elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Between {
    /// Before `[`.
    Open,
    /// After `[`: an element or `]`.
    First,
    /// After `,`: an element.
    Next,
    /// After an element: `,` or `]`.
    After,
}

/// Reads a JSON array of call objects, `[{…}, {…}]`, each element by an [`EnvelopeReader`]
/// (streamed as it arrives, its `CallEnd` as soon as it ends): the array capability of the
/// family, for formats whose calls are one JSON array between delimiters (apertus). An element
/// that is valid JSON of the wrong shape is one error and the array goes on; broken JSON ends
/// the array with `Failed` (reported already: the grammar gets an empty message) and hands the
/// offending bytes back. `Done { index: None }` is the array's `]`.
///
/// With [`EnvelopeOptions::text_unless_named`] the array is text until its first element names
/// a call (xlam, whose list of calls is bare JSON that an answer may also be): an array whose
/// first element is no object or an object without a `name` key, or that breaks or is cut
/// before one, ends as `Unnamed` with its raw text. Elements after a named first one must be
/// calls (an unnamed one is `missing_name`). `[]` names no call: text.
pub(crate) struct CallArrayReader {
    opts: EnvelopeOptions,
    at: Between,
    elem: Option<Box<EnvelopeReader>>,
    /// The array's raw text while it may still turn out not to be calls.
    raw: Option<String>,
}

impl CallArrayReader {
    /// A reader for one array whose elements look like `opts`.
    pub fn boxed(opts: EnvelopeOptions) -> Box<Self> {
        Box::new(CallArrayReader {
            opts,
            at: Between::Open,
            elem: None,
            raw: opts.text_unless_named.then(String::new),
        })
    }

    /// The array is not calls: its raw text so far plus `s[..n]`, handed over as text.
    fn unnamed(&mut self, s: &str, n: usize) -> (usize, Option<ValueEnd>) {
        let mut raw = self.raw.take().unwrap_or_default();
        raw.push_str(&s[..n]);
        (n, Some(ValueEnd::Unnamed(raw)))
    }

    /// Broken array syntax at `pos` (reported here; the grammar gets an empty message).
    fn broken(&self, what: &str, cx: &mut Cx, pos: usize, out: &mut dyn Sink) -> ValueEnd {
        out.push(Event::error(
            ErrorKind::InvalidJson,
            format!("{what} at byte {}", cx.pos + pos as u64),
        ));
        ValueEnd::Failed {
            kind: ErrorKind::InvalidJson,
            message: String::new(),
            complete: false,
        }
    }
}

impl ValueReader for CallArrayReader {
    fn feed(&mut self, s: &str, cx: &mut Cx, out: &mut dyn Sink) -> (usize, Option<ValueEnd>) {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if let Some(e) = self.elem.as_mut() {
                // The element's offsets are the driver's plus what this piece consumed so far.
                cx.pos += i as u64;
                let (n, end) = e.feed(&s[i..], cx, out);
                cx.pos -= i as u64;
                i += n;
                if self.raw.is_some() {
                    if let Some(ValueEnd::Unnamed(_)) = end {
                        return self.unnamed(s, i);
                    }
                    if e.named() || end.is_some() {
                        // The first element names a call (or ended as one that failed, spoiled
                        // by invalid UTF-8): the array is calls from here on.
                        self.raw = None;
                    }
                }
                let Some(end) = end else { continue };
                self.elem = None;
                self.at = Between::After;
                match end {
                    ValueEnd::Done { index: Some(k) } => cx.end_call(k, out),
                    ValueEnd::Failed {
                        kind,
                        message,
                        complete,
                    } => {
                        cx.report(kind, &message, out);
                        if !complete {
                            return (
                                i,
                                Some(ValueEnd::Failed {
                                    kind,
                                    message: String::new(),
                                    complete: false,
                                }),
                            );
                        }
                    }
                    // Elements open at their `{` and are never read as text.
                    _ => {}
                }
                continue;
            }
            if let Some(raw) = &self.raw
                && raw.len() + i >= cx.limits.max_args_bytes
            {
                // Held as possible text for as long as a value may be: the text it still is
                // (at the same byte for every chunking).
                return self.unnamed(s, i);
            }
            let c = b[i];
            if is_ws(c) {
                i += 1;
                continue;
            }
            match (self.at, c) {
                (Between::Open, b'[') => self.at = Between::First,
                (Between::Open, _) => return (i, Some(ValueEnd::NotAValue)),
                (Between::First | Between::Next, b'{') => {
                    // Only the first element decides whether the array is text.
                    let opts = EnvelopeOptions {
                        text_unless_named: self.raw.is_some(),
                        ..self.opts
                    };
                    self.elem = Some(EnvelopeReader::boxed(opts, &cx.limits));
                    continue;
                }
                (Between::First, b']') if self.raw.is_some() => return self.unnamed(s, i + 1),
                (Between::First, _) if self.raw.is_some() => return self.unnamed(s, i),
                (Between::First, b']') => return (i + 1, Some(ValueEnd::Done { index: None })),
                (Between::Next, b']') => {
                    return (
                        i,
                        Some(self.broken("a trailing comma in the array of calls", cx, i, out)),
                    );
                }
                (Between::After, b',') => self.at = Between::Next,
                (Between::After, b']') => return (i + 1, Some(ValueEnd::Done { index: None })),
                (Between::After, _) => {
                    return (
                        i,
                        Some(self.broken("expected `,` or `]` in the array of calls", cx, i, out)),
                    );
                }
                (_, _) => {
                    return (
                        i,
                        Some(self.broken(
                            "an element of the array of calls is not an object",
                            cx,
                            i,
                            out,
                        )),
                    );
                }
            }
            i += 1;
        }
        if let Some(raw) = &mut self.raw {
            raw.push_str(s);
        }
        (b.len(), None)
    }

    fn eof(&mut self, cx: &mut Cx, out: &mut dyn Sink) -> ValueEnd {
        if let Some(raw) = self.raw.take() {
            return ValueEnd::Unnamed(raw);
        }
        match self.elem.as_mut() {
            Some(e) => e.eof(cx, out),
            None => ValueEnd::Cut { index: None },
        }
    }

    fn spoil(&mut self) {
        // Invalid UTF-8 between elements is reported by the driver and spoils no call.
        if let Some(e) = self.elem.as_mut() {
            e.spoil();
        }
    }

    #[inline]
    fn stream(&mut self, s: &str, cx: &Cx, out: &mut dyn Sink) -> bool {
        match self.elem.as_mut() {
            // While the array may be text, its raw text is kept by `feed`.
            Some(e) if self.raw.is_none() => e.stream(s, cx, out),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::event::ParseResult;
    use crate::formats::core::testkit::{check_delta_contract, pieces_at};
    use crate::formats::{by_id, run_chunks};
    use crate::tools::Tools;
    use proptest::prelude::*;

    const FAMILY: [&str; 10] = [
        "hermes",
        "granite4",
        "apertus",
        "llama3_json",
        "mistral",
        "mistral_v11",
        "deepseek_v3",
        "deepseek_v31",
        "pythonic",
        "xlam",
    ];

    /// Bytes that mix every family delimiter, JSON and Python fragments and invalid UTF-8.
    fn soup() -> impl Strategy<Value = Vec<u8>> {
        let atoms = prop_oneof![
            Just(b"<tool_call>".to_vec()),
            Just(b"</tool_call>".to_vec()),
            Just(b"[TOOL_CALLS]".to_vec()),
            Just(b"[ARGS]".to_vec()),
            Just(b"[CALL_ID]".to_vec()),
            Just(b"<|python_tag|>".to_vec()),
            Just(b"<|eot_id|>".to_vec()),
            Just(b"<|tools_prefix|>".to_vec()),
            Just(b"<|tools_suffix|>".to_vec()),
            Just(b"<|inner_prefix|>".to_vec()),
            Just(b"[{\"f\": {\"a\": [1]}}, {\"g\": {}}]".to_vec()),
            Just(b"<|python_start|>".to_vec()),
            Just("<｜tool▁calls▁begin｜>".as_bytes().to_vec()),
            Just("<｜tool▁call▁begin｜>".as_bytes().to_vec()),
            Just("<｜tool▁sep｜>".as_bytes().to_vec()),
            Just("<｜tool▁call▁end｜>".as_bytes().to_vec()),
            Just(b"{\"name\": \"f\", \"arguments\": {\"a\": [1, \"x\"]}}".to_vec()),
            Just(b"[f(a='x', b=[1, (2,)])]".to_vec()),
            Just(b"function".to_vec()),
            Just(b"\n```json\n".to_vec()),
            Just(vec![0xff]),
            Just(vec![0xe2, 0x96]),
            proptest::collection::vec(any::<u8>(), 0..6),
        ];
        proptest::collection::vec(atoms, 0..20).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        #[test]
        fn every_family_format_is_split_invariant_on_any_bytes(
            bytes in soup(),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let tools = Tools::default();
            for id in FAMILY {
                let f = by_id(id).expect("registered");
                let whole_evs = run_chunks((f.new_parser)(&tools).as_mut(), [bytes.as_slice()]);
                check_delta_contract(&whole_evs);
                let whole = ParseResult::fold(&whole_evs);
                let evs = run_chunks((f.new_parser)(&tools).as_mut(), pieces_at(&bytes, &cuts));
                check_delta_contract(&evs);
                let r = ParseResult::fold(&evs);
                prop_assert_eq!(&r, &whole, "{}", id);
                prop_assert_eq!(r.warnings.len(), whole.warnings.len(), "{}", id);
                let by_byte: Vec<&[u8]> = bytes.chunks(1).collect();
                prop_assert_eq!(&ParseResult::fold(&run_chunks((f.new_parser)(&tools).as_mut(), by_byte)), &whole, "{} byte by byte", id);
            }
        }

        #[test]
        fn a_parser_can_be_reused_for_the_next_turn(bytes in soup()) {
            let tools = Tools::default();
            for id in FAMILY {
                let f = by_id(id).expect("registered");
                let mut p = (f.new_parser)(&tools);
                let first = ParseResult::fold(&run_chunks(p.as_mut(), [bytes.as_slice()]));
                let second = ParseResult::fold(&run_chunks(p.as_mut(), [bytes.as_slice()]));
                prop_assert_eq!(first, second, "{}", id);
            }
        }
    }
}
