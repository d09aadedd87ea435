//! The Gemma function-calling family: `<|tool_call>call:NAME{ARGS}<tool_call|>`, the
//! arguments in Gemma's token-quoted notation (`key:<|"|>str<|"|>,n:42`), calls back to back,
//! a stop token after them (`specs/gemma4.md`, `specs/functiongemma.md`).
//!
//! One parser for the family: a format is a [`Dialect`] (its delimiters, string quote, stop
//! tokens and reasoning wrapper) and the options of [`Config`]. Text is scanned for the
//! dialect's markers with the marker scanner; a call's header is read up to its bracket; its
//! arguments go through the streaming token-quoted reader (`lexers/token_value.rs`), which
//! writes them as JSON as they arrive and says where they end, so the call end marker is
//! looked for only after a balanced body (a marker inside a string is content). Reasoning is
//! split by the shared layer in front of the parser.

pub mod functiongemma;
pub mod gemma4;

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::formats::StreamParser;
use crate::formats::config::config;
use crate::formats::core::decoded::{self, DecodedText};
use crate::formats::reasoning::{self, Syntax};
use crate::formats::typing::{Kind as SchemaKind, Lookup, SchemaTypes};
use crate::lexers::json::SERDE_JSON_MAX_DEPTH;
use crate::lexers::marker::{MarkerScanner, Token};
use crate::lexers::token_value::{self as tv, Note, Reader, Step, Stop};
use crate::lexers::utf8::Utf8Decoder;
use crate::tools::Tools;
use serde_json::Value;

/// What sets a format of the family apart.
#[derive(Debug)]
pub struct Dialect {
    /// Opens a call (`<|tool_call>`).
    pub open: &'static str,
    /// Ends a call (`<tool_call|>`).
    pub close: &'static str,
    /// Opens and closes a string (`<|"|>`).
    pub quote: &'static str,
    /// The tokens the model stops with (the first is what the renderer writes after calls).
    pub stops: &'static [&'static str],
    /// The reasoning wrapper its models write, split by the shared layer.
    pub reasoning: Option<&'static Syntax>,
}

impl Dialect {
    /// The markers the parser reads: open, close, quote, then the stop tokens.
    pub fn markers(&self) -> Vec<&'static str> {
        let mut m = vec![self.open, self.close, self.quote];
        m.extend_from_slice(self.stops);
        m
    }
}

/// Index of the call open marker in [`Dialect::markers`].
const OPEN: usize = 0;
/// Index of the call end marker.
const CLOSE: usize = 1;
/// Index of the string quote.
const QUOTE: usize = 2;

config! {
    /// Leniency options and limits of the family; every recovered deviation is one named option.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A call whose arguments closed but no call end marker follows (the stream ends, a stop
            /// token, the next call or text comes first) is kept with a warning: tool-parser and Dynamo
            /// recover it, and a server that stops on the end marker strips it. Off: an error
            /// (`unterminated` at the end of the stream, `malformed_markup` otherwise), no call.
            missing_call_end,
            /// A call written `call:NAME(…)` is read like `call:NAME{…}`, with a warning: Gemma 4
            /// checkpoints write it (vllm-project/vllm#53642) and vLLM and tool-parser accept it. Off:
            /// `malformed_markup`.
            paren_call,
            /// A call header without the word `call` (`<|tool_call>:NAME{…}`) is read, with a warning:
            /// some checkpoints write it (vllm-project/vllm#53431) and vLLM and tool-parser accept it.
            /// Off: `malformed_markup`.
            missing_call_prefix,
            /// An unquoted value that is no JSON number or literal (`unit:celsius`) is read as a
            /// string, with a warning: vLLM, SGLang and tool-parser keep the word. Off:
            /// `malformed_markup` for the call.
            unquoted_string,
            /// The unquoted words `True`, `False` and `None` (Python's spelling, which a Python-Jinja
            /// renderer prints for a null) are read as `true`, `false` and `null`, with a warning. Off:
            /// they are unquoted words like any other.
            python_literal,
            /// A call end marker outside a call, or a string quote outside a call's arguments, is
            /// dropped with a warning. Off: dropped with a `malformed_markup` error.
            stray_marker,
            /// Output after a stop token (which a server never lets through) is dropped with a
            /// warning. Off: dropped with a `malformed_markup` error.
            text_after_stop,
        }
        /// Longest call header (`call:NAME`) in bytes.
        pub max_header_bytes: usize,
        /// Longest arguments text of one call in bytes.
        pub max_args_bytes: usize,
        /// Deepest nesting of the arguments (the outermost object counts 1; serde_json's limit).
        pub max_depth: usize,
        /// Longest key in bytes.
        pub max_key_bytes: usize,
        /// The reasoning layer's options (`reasoning.NAME`), for a dialect whose models think.
        pub reasoning: reasoning::Config,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            missing_call_end: true,
            paren_call: true,
            missing_call_prefix: true,
            unquoted_string: true,
            python_literal: true,
            stray_marker: true,
            text_after_stop: true,
            max_header_bytes: 1024,
            max_args_bytes: 64 << 20,
            max_depth: SERDE_JSON_MAX_DEPTH,
            max_key_bytes: 1024,
            reasoning: reasoning::Config::default(),
        }
    }
}

/// A call's arguments being read.
struct Args {
    reader: Reader,
    /// The call's index; `None` when the call already failed and its arguments are read only
    /// to find their end.
    index: Option<usize>,
    name: String,
    bytes: usize,
}

/// What the parser is reading.
enum State {
    /// Text, and markers between calls.
    Text,
    /// A call header after the open marker, up to its bracket.
    Header { buf: String, at: u64 },
    /// A call's arguments.
    Args(Box<Args>),
    /// After a call that failed where its end is unknown: dropped up to the next call end
    /// marker (or call, or stop token).
    Skip,
    /// After a stop token: the rest of the turn is no output.
    Stopped { reported: bool },
}

/// A call whose arguments closed, waiting for its end marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// This call ends at its marker.
    Call(usize),
    /// A call that already failed: its end marker is consumed silently.
    Failed,
}

/// The family's streaming parser (without the reasoning layer: see [`boxed`]).
pub struct Parser {
    d: &'static Dialect,
    cfg: Config,
    types: SchemaTypes,
    has_tools: bool,
    utf8: Utf8Decoder,
    scan: MarkerScanner,
    state: State,
    /// Decoded bytes read before the current piece (for messages).
    pos: u64,
    next_index: usize,
    /// The current text run's leading whitespace, held until the run shows it is more than
    /// whitespace (a whitespace-only run next to a call is no text).
    ws: String,
    /// The current text run has more than whitespace.
    run_content: bool,
    /// The current text run follows a call.
    run_after_call: bool,
    pending: Option<Pending>,
}

impl Parser {
    /// A parser of dialect `d` with options `cfg` for `tools` (used for notes only: values are
    /// typed by their syntax).
    pub fn new(d: &'static Dialect, cfg: Config, tools: &Tools) -> Parser {
        Parser {
            d,
            cfg,
            types: SchemaTypes::new(tools),
            has_tools: !tools.defs.is_empty(),
            utf8: Utf8Decoder::new(),
            scan: MarkerScanner::new(&d.markers()),
            state: State::Text,
            pos: 0,
            next_index: 0,
            ws: String::new(),
            run_content: false,
            run_after_call: false,
            pending: None,
        }
    }

    fn feed_str(&mut self, s: &str, out: &mut dyn Sink) {
        let len = s.len() as u64;
        let mut s = s;
        while !s.is_empty() {
            match self.state {
                State::Args(_) => s = self.args(s, out),
                State::Header { .. } => s = self.header(s, out),
                State::Stopped { .. } => {
                    self.stopped(s, out);
                    s = "";
                }
                State::Text | State::Skip => match self.scan.next(&mut s) {
                    None => break,
                    Some(Token::Text(t)) => self.text(&t, out),
                    Some(Token::Marker(i)) => {
                        self.marker(i, out);
                        if !matches!(self.state, State::Text | State::Skip) {
                            // The scanner's leftovers come before the rest of the piece.
                            let held = self.scan.take_held();
                            if !held.is_empty() {
                                self.feed_str(&held, out);
                            }
                        }
                    }
                },
            }
        }
        self.pos += len;
    }

    /// The per-feed path of a streamed string value: a piece that only continues it goes
    /// straight to the sink. `false`: nothing was done, take the general path.
    #[inline]
    fn string_piece(&mut self, s: &str, out: &mut dyn Sink) -> bool {
        let State::Args(a) = &mut self.state else {
            return false;
        };
        let Some(index) = a.index else {
            return false;
        };
        if a.bytes + s.len() > self.cfg.max_args_bytes || s.is_empty() {
            return false;
        }
        let Some(json) = a.reader.continue_string(s) else {
            return false;
        };
        out.args_delta(index, json);
        a.bytes += s.len();
        self.pos += s.len() as u64;
        true
    }

    /// Text between markers.
    fn text(&mut self, t: &str, out: &mut dyn Sink) {
        if matches!(self.state, State::Skip) {
            return;
        }
        if self.run_content {
            return out.text(t);
        }
        match t.bytes().position(|b| !b.is_ascii_whitespace()) {
            None => self.ws.push_str(t),
            Some(_) => {
                // The run is more than whitespace: a call waiting for its end marker gets none.
                self.settle(false, out);
                self.run_content = true;
                out.text(&self.ws);
                self.ws.clear();
                out.text(t);
            }
        }
    }

    /// A call waiting for its end marker gets none: kept with a warning, or an error.
    fn settle(&mut self, eof: bool, out: &mut dyn Sink) {
        let Some(p) = self.pending.take() else {
            return;
        };
        let Pending::Call(index) = p else {
            return;
        };
        let at = self.pos;
        let msg = format!("call {index} has no {} (near byte {at})", self.d.close);
        if self.cfg.missing_call_end {
            out.push(Event::warning(WarningKind::MissingCallEnd, msg));
            out.push(Event::CallEnd { index });
        } else {
            let kind = if eof {
                ErrorKind::Unterminated
            } else {
                ErrorKind::MalformedMarkup
            };
            out.push(Event::error(kind, msg));
        }
    }

    /// Ends the current text run: its whitespace is text unless it is next to a call.
    fn end_run(&mut self, before_call: bool, out: &mut dyn Sink) {
        if !(self.run_content || self.run_after_call || before_call) {
            out.text(&self.ws);
        }
        self.ws.clear();
        self.run_content = false;
        self.run_after_call = false;
    }

    /// A new text run after a call.
    fn after_call(&mut self) {
        self.ws.clear();
        self.run_content = false;
        self.run_after_call = true;
    }

    /// A recovered deviation: a warning, or with its option off an error.
    fn deviation(&self, on: bool, kind: WarningKind, msg: String, out: &mut dyn Sink) {
        if on {
            out.push(Event::warning(kind, msg));
        } else {
            out.push(Event::error(ErrorKind::MalformedMarkup, msg));
        }
    }

    fn marker(&mut self, i: usize, out: &mut dyn Sink) {
        let at = self.pos;
        if matches!(self.state, State::Skip) {
            match i {
                OPEN => self.open_header(at),
                CLOSE => {
                    self.state = State::Text;
                    self.after_call();
                }
                QUOTE => {}
                _ => self.state = State::Stopped { reported: false },
            }
            return;
        }
        match i {
            OPEN => {
                self.settle(false, out);
                self.end_run(true, out);
                self.open_header(at);
            }
            CLOSE => match self.pending.take() {
                Some(Pending::Call(index)) => {
                    out.push(Event::CallEnd { index });
                    self.after_call();
                }
                Some(Pending::Failed) => self.after_call(),
                None => self.deviation(
                    self.cfg.stray_marker,
                    WarningKind::StrayMarker,
                    format!("{} outside a call near byte {at}, dropped", self.d.close),
                    out,
                ),
            },
            QUOTE => self.deviation(
                self.cfg.stray_marker,
                WarningKind::StrayMarker,
                format!(
                    "{} outside a call's arguments near byte {at}, dropped",
                    self.d.quote
                ),
                out,
            ),
            _ => {
                self.settle(false, out);
                self.end_run(false, out);
                self.state = State::Stopped { reported: false };
            }
        }
    }

    fn open_header(&mut self, at: u64) {
        self.state = State::Header {
            buf: String::new(),
            at,
        };
    }

    /// Output after a stop token.
    fn stopped(&mut self, s: &str, out: &mut dyn Sink) {
        let State::Stopped { reported } = &mut self.state else {
            return;
        };
        if *reported || s.bytes().all(|b| b.is_ascii_whitespace()) {
            return;
        }
        *reported = true;
        let msg = format!(
            "output after a stop token near byte {}, dropped (a server stops there)",
            self.pos
        );
        self.deviation(
            self.cfg.text_after_stop,
            WarningKind::TextAfterStop,
            msg,
            out,
        );
    }

    /// Header bytes, up to the arguments' bracket; returns the rest of `s`.
    fn header<'a>(&mut self, s: &'a str, out: &mut dyn Sink) -> &'a str {
        let State::Header { buf, at } = &mut self.state else {
            return s;
        };
        let at = *at;
        let k = crate::lexers::find_byte3(b'{', b'(', b'<', s.as_bytes());
        let take = k.unwrap_or(s.len());
        if buf.len() + take > self.cfg.max_header_bytes {
            out.push(Event::error(
                ErrorKind::LimitExceeded,
                format!(
                    "the call header at byte {at} is longer than {} bytes",
                    self.cfg.max_header_bytes
                ),
            ));
            self.state = State::Skip;
            return &s[take..];
        }
        buf.push_str(&s[..take]);
        let Some(k) = k else {
            return "";
        };
        let bracket = s.as_bytes()[k];
        if bracket == b'<' {
            out.push(Event::error(
                ErrorKind::MalformedMarkup,
                format!("the call header {buf:?} at byte {at} ends before its arguments"),
            ));
            self.state = State::Skip;
            return &s[k..];
        }
        let header = std::mem::take(buf);
        self.open_call(&header, bracket, at, out);
        &s[k + 1..]
    }

    /// A header and its bracket: the call starts, or fails with its arguments still read to
    /// find their end.
    fn open_call(&mut self, header: &str, bracket: u8, at: u64, out: &mut dyn Sink) {
        let mut failed = false;
        let mut fail = |kind: ErrorKind, msg: String, out: &mut dyn Sink| {
            if !failed {
                failed = true;
                out.push(Event::error(kind, msg));
            }
        };
        let name = if let Some(n) = header.strip_prefix("call:") {
            n
        } else if let Some(n) = header.strip_prefix(':') {
            let msg = format!("the call header {header:?} at byte {at} has no \"call\"");
            if self.cfg.missing_call_prefix {
                out.push(Event::warning(WarningKind::MissingCallPrefix, msg));
            } else {
                fail(ErrorKind::MalformedMarkup, msg, out);
            }
            n
        } else {
            fail(
                ErrorKind::MalformedMarkup,
                format!("the call header {header:?} at byte {at} is not call:NAME"),
                out,
            );
            header
        };
        if bracket == b'(' {
            let msg = format!("call {name:?} at byte {at} is written with parentheses");
            if self.cfg.paren_call {
                out.push(Event::warning(WarningKind::ParenCall, msg));
            } else {
                fail(ErrorKind::MalformedMarkup, msg, out);
            }
        }
        if name.is_empty() {
            fail(
                ErrorKind::MissingName,
                format!("the call at byte {at} has no name"),
                out,
            );
        } else if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            fail(
                ErrorKind::MalformedMarkup,
                format!("the call name {name:?} at byte {at} is not [A-Za-z0-9_.-]+"),
                out,
            );
        }
        let mut reader = Reader::new(
            tv::Config {
                quote: self.d.quote,
                close: if bracket == b'(' { b')' } else { b'}' },
                max_depth: self.cfg.max_depth,
                max_key_bytes: self.cfg.max_key_bytes,
                python_literals: self.cfg.python_literal,
                bare_words: self.cfg.unquoted_string,
            },
            self.pos,
        );
        let index = if failed {
            reader.discard();
            None
        } else {
            let index = self.next_index;
            self.next_index += 1;
            out.push(Event::CallStart {
                index,
                id: None,
                name: name.to_string(),
                server: None,
            });
            if self.has_tools && !self.types.knows_tool(name) {
                out.push(Event::warning(
                    WarningKind::UnknownTool,
                    format!("{name:?} is not a declared tool"),
                ));
            }
            Some(index)
        };
        self.state = State::Args(Box::new(Args {
            reader,
            index,
            name: name.to_string(),
            bytes: 0,
        }));
    }

    /// Argument bytes; returns the rest of `s` once they end.
    fn args<'a>(&mut self, s: &'a str, out: &mut dyn Sink) -> &'a str {
        let (r, index, held) = {
            let Parser {
                state, types, cfg, ..
            } = &mut *self;
            let State::Args(a) = state else {
                return s;
            };
            let max = cfg.max_args_bytes;
            if let Some(index) = a.index
                && a.bytes + s.len() <= max
                && let Some(json) = a.reader.continue_string(s)
            {
                out.args_delta(index, json);
                a.bytes += s.len();
                return "";
            }
            let mut emit = Emit {
                out: &mut *out,
                index: a.index,
                name: &a.name,
                types,
            };
            let r = a.reader.feed(s, &mut emit);
            a.bytes += match r {
                Ok(Step::More) => s.len(),
                Ok(Step::Done(n)) => n,
                Err(_) => 0,
            };
            if a.bytes > max
                && let Some(index) = a.index.take()
            {
                out.push(Event::error(
                    ErrorKind::LimitExceeded,
                    format!("call {index}'s arguments are longer than {max} bytes"),
                ));
                a.reader.discard();
            }
            let held = match r {
                Err(Stop::Markup(_)) => a.reader.take_held(),
                _ => String::new(),
            };
            (r, a.index, held)
        };
        match r {
            Ok(Step::More) => "",
            Ok(Step::Done(n)) => {
                self.pending = Some(match index {
                    Some(i) => Pending::Call(i),
                    None => Pending::Failed,
                });
                self.state = State::Text;
                self.after_call();
                &s[n..]
            }
            Err(Stop::Markup(n)) => {
                if let Some(index) = index {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!(
                            "call {index}'s arguments break off at markup near byte {}",
                            self.pos
                        ),
                    ));
                }
                self.state = State::Skip;
                self.feed_str(&held, out);
                &s[n..]
            }
            Err(Stop::Error(e, n)) => {
                if let Some(index) = index {
                    let kind = match e.kind {
                        tv::ErrorKind::Limit => ErrorKind::LimitExceeded,
                        tv::ErrorKind::Unterminated => ErrorKind::Unterminated,
                        tv::ErrorKind::Syntax => ErrorKind::MalformedMarkup,
                    };
                    out.push(Event::error(
                        kind,
                        format!("call {index}'s arguments: {}", e.message),
                    ));
                }
                self.state = State::Skip;
                &s[n..]
            }
        }
    }

    fn finish_turn(&mut self, out: &mut dyn Sink) {
        decoded::finish_utf8(self, out);
        if matches!(self.state, State::Text | State::Skip) {
            while let Some(t) = self.scan.finish() {
                match t {
                    Token::Text(t) => self.text(&t, out),
                    Token::Marker(i) => self.marker(i, out),
                }
            }
        }
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text => {
                self.settle(true, out);
                self.end_run(false, out);
            }
            State::Header { buf, at } => out.push(Event::error(
                ErrorKind::Unterminated,
                format!("the stream ended in the call header {buf:?} at byte {at}"),
            )),
            State::Args(mut a) => {
                if let (Some(index), Err(e)) = (a.index, a.reader.finish()) {
                    out.push(Event::error(
                        ErrorKind::Unterminated,
                        format!("call {index}'s arguments: {}", e.message),
                    ));
                }
            }
            State::Skip | State::Stopped { .. } => {}
        }
        self.scan.reset();
        self.utf8 = Utf8Decoder::new();
        self.pos = 0;
        self.next_index = 0;
        self.ws.clear();
        self.run_content = false;
        self.run_after_call = false;
        self.pending = None;
    }
}

/// The reader's output as events of call `index` (nothing when the call failed).
struct Emit<'a> {
    out: &'a mut dyn Sink,
    index: Option<usize>,
    name: &'a str,
    types: &'a SchemaTypes,
}

impl tv::Out for Emit<'_> {
    #[inline]
    fn json(&mut self, s: &str) {
        if let Some(i) = self.index {
            self.out.args_delta(i, s);
        }
    }

    fn note(&mut self, note: Note<'_>) {
        if self.index.is_none() {
            return;
        }
        let (kind, msg) = match note {
            Note::Member { key, kind } => {
                let Lookup::Typed(t) = self.types.lookup(self.name, key) else {
                    return;
                };
                let k = match kind {
                    tv::Kind::String => SchemaKind::String,
                    tv::Kind::Integer => SchemaKind::Integer,
                    tv::Kind::Number => SchemaKind::Number,
                    tv::Kind::Boolean => SchemaKind::Boolean,
                    tv::Kind::Null => SchemaKind::Null,
                    tv::Kind::Object => SchemaKind::Object,
                    tv::Kind::Array => SchemaKind::Array,
                };
                if t.has(k) {
                    return;
                }
                (
                    WarningKind::SchemaTypeMismatch,
                    format!(
                        "{:?}.{key:?} is written as a {} but its schema says {}; kept as written",
                        self.name,
                        k.name(),
                        t.describe()
                    ),
                )
            }
            Note::PythonLiteral { word, at } => (
                WarningKind::PythonLiteral,
                format!("{word} at byte {at} read as a JSON literal"),
            ),
            Note::BareWord { word, at } => (
                WarningKind::UnquotedString,
                format!(
                    "the unquoted value {:?} at byte {at} read as a string",
                    excerpt(word)
                ),
            ),
            Note::DuplicateKey { key, at } => (
                WarningKind::DuplicateParameter,
                format!("the key {key:?} is given again at byte {at}; the last one counts"),
            ),
        };
        self.out.push(Event::warning(kind, msg));
    }
}

fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

impl DecodedText for Parser {
    fn decoder(&mut self) -> &mut Utf8Decoder {
        &mut self.utf8
    }

    fn feed_str(&mut self, s: &str, out: &mut dyn Sink) {
        Parser::feed_str(self, s, out);
    }

    fn spoil(&mut self) {
        if let State::Args(a) = &mut self.state
            && a.index.take().is_some()
        {
            // The invalid sequence's error says why the call is gone.
            a.reader.discard();
        }
    }
}

impl StreamParser for Parser {
    #[inline]
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        match self.utf8.ascii(chunk) {
            Some(s) => {
                if !self.string_piece(s, out) {
                    self.feed_str(s, out);
                }
            }
            None => decoded::feed_utf8(self, chunk, out),
        }
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        self.finish_turn(out);
    }

    fn at_text(&self) -> bool {
        matches!(self.state, State::Text)
    }
}

/// The parser of `d` with options `cfg`, behind the reasoning layer when `d` has a wrapper.
pub fn boxed(d: &'static Dialect, cfg: Config, tools: &Tools) -> Box<dyn StreamParser> {
    let p = Parser::new(d, cfg, tools);
    match d.reasoning {
        Some(syntax) => Box::new(reasoning::Reasoned::new(p, syntax, cfg.reasoning)),
        None => Box::new(p),
    }
}

/// True for a name the parser reads as a call name.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Renders text and calls as the chat template writes a model turn: each call as
/// `OPEN call:NAME{ARGS} CLOSE` (keys sorted as `dictsort` sorts them, strings between
/// quotes, numbers, booleans and null bare), then the text, then the first stop token when
/// there are calls. Refuses what would not parse back: a marker or reasoning tag in the text,
/// whitespace-only text beside calls, ids, servers, names outside `[A-Za-z0-9_.-]+`, strings
/// or keys holding the quote, names, keys or nesting beyond the parser's default limits.
pub fn render(d: &'static Dialect, text: &str, calls: &[ToolCall]) -> Result<Vec<u8>, String> {
    if let Some(m) = d.markers().into_iter().find(|m| text.contains(m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    if let Some(t) = d.reasoning.and_then(|r| r.tag_in(text)) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    if !calls.is_empty() && !text.is_empty() && text.bytes().all(|b| b.is_ascii_whitespace()) {
        return Err("whitespace-only text beside calls is no text".into());
    }
    let mut out = String::new();
    for c in calls {
        if c.id.is_some() || c.server.is_some() {
            return Err("calls of this format carry no id or server".into());
        }
        if !is_name(&c.name) {
            return Err(format!("the name {:?} is not [A-Za-z0-9_.-]+", c.name));
        }
        if "call:".len() + c.name.len() > Config::default().max_header_bytes {
            return Err("the name is longer than the parser reads by default".into());
        }
        let Value::Object(args) = &c.arguments else {
            return Err("arguments must be a JSON object".into());
        };
        out.push_str(d.open);
        out.push_str("call:");
        out.push_str(&c.name);
        out.push('{');
        write_members(d.quote, args, 1, &mut out)?;
        out.push('}');
        out.push_str(d.close);
    }
    out.push_str(text);
    if !calls.is_empty()
        && let Some(stop) = d.stops.first()
    {
        out.push_str(stop);
    }
    Ok(out.into_bytes())
}

/// An object's members, keys in `dictsort` order (case-insensitive, then as written).
fn write_members(
    quote: &str,
    m: &serde_json::Map<String, Value>,
    depth: usize,
    out: &mut String,
) -> Result<(), String> {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort_by(|a, b| a.to_lowercase().cmp(&b.to_lowercase()).then(a.cmp(b)));
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let bare = !k.is_empty()
            && k.trim_matches(|c: char| c.is_ascii_whitespace()) == k
            && !k.bytes().any(|b| {
                matches!(b, b'{' | b'}' | b'[' | b']' | b',' | b':' | b'"')
                    || b == quote.as_bytes()[0]
            });
        if k.len() > Config::default().max_key_bytes {
            return Err(format!(
                "a key of {} bytes is longer than the parser reads by default",
                k.len()
            ));
        }
        if bare {
            out.push_str(k);
        } else if k.contains(quote) {
            return Err(format!("the key {k:?} holds the string quote"));
        } else {
            out.push_str(quote);
            out.push_str(k);
            out.push_str(quote);
        }
        out.push(':');
        write_value(quote, &m[k], depth, out)?;
    }
    Ok(())
}

fn write_value(quote: &str, v: &Value, depth: usize, out: &mut String) -> Result<(), String> {
    match v {
        Value::String(s) => {
            if s.contains(quote) {
                return Err(format!("a string holds the string quote {quote}"));
            }
            out.push_str(quote);
            out.push_str(s);
            out.push_str(quote);
        }
        Value::Object(_) | Value::Array(_) if depth >= SERDE_JSON_MAX_DEPTH => {
            return Err("the arguments nest deeper than the parser reads".into());
        }
        Value::Object(m) => {
            out.push('{');
            write_members(quote, m, depth + 1, out)?;
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(quote, x, depth + 1, out)?;
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
    Ok(())
}
