//! `kimi_k2`: Kimi K2's special-token tool calls (`specs/kimi_k2.md`).
//!
//! ```text
//! text<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:ID<|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>
//! ```
//!
//! The parser is a byte-at-most-twice state machine: text is scanned with `memchr` for `<`,
//! a possible marker prefix at a chunk end is the only thing held back, and arguments are
//! validated by the incremental JSON parser as they stream, which also tells whether a `<|`
//! sits inside a JSON string (content) or outside one (a marker).

use super::config::config;
use super::options::Table;
use super::reasoning::{self, Syntax};
use super::{Format, SpecialToken, StreamParser};
use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::lexers::json::{
    Feed, JsonConfig, JsonError, JsonErrorKind, JsonParser, SERDE_JSON_MAX_DEPTH,
};
use crate::lexers::marker::{Window, classify_window};
use crate::lexers::utf8::{Utf8Decoder, Utf8Piece};
use crate::tools::Tools;
use serde_json::Value;

/// `<|tool_calls_section_begin|>`: opens a section of calls.
pub const SECTION_BEGIN: &str = "<|tool_calls_section_begin|>";
/// `<|tool_calls_section_end|>`: closes a section.
pub const SECTION_END: &str = "<|tool_calls_section_end|>";
/// `<|tool_call_begin|>`: opens one call; its header follows.
pub const CALL_BEGIN: &str = "<|tool_call_begin|>";
/// `<|tool_call_argument_begin|>`: ends the header; the JSON arguments follow.
pub const ARGUMENT_BEGIN: &str = "<|tool_call_argument_begin|>";
/// `<|tool_call_end|>`: closes one call.
pub const CALL_END: &str = "<|tool_call_end|>";
/// Singular variant of the section begin (accepted by vLLM and Dynamo).
pub const SECTION_BEGIN_SINGULAR: &str = "<|tool_call_section_begin|>";
/// Singular variant of the section end.
pub const SECTION_END_SINGULAR: &str = "<|tool_call_section_end|>";
/// Plural variant of the argument marker (some third-party parsers).
pub const ARGUMENT_BEGIN_PLURAL: &str = "<|tool_call_arguments_begin|>";

/// Every delimiter the parser recognises, canonical ones first.
pub const MARKERS: [&str; 8] = [
    SECTION_BEGIN,
    SECTION_END,
    CALL_BEGIN,
    ARGUMENT_BEGIN,
    CALL_END,
    SECTION_BEGIN_SINGULAR,
    SECTION_END_SINGULAR,
    ARGUMENT_BEGIN_PLURAL,
];

/// The longest marker: the most bytes ever held back.
const MAX_MARKER: usize = 29;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    SectionBegin { singular: bool },
    SectionEnd { singular: bool },
    CallBegin,
    ArgumentBegin { plural: bool },
    CallEnd,
}

fn marker_of(i: usize) -> Marker {
    match i {
        0 => Marker::SectionBegin { singular: false },
        1 => Marker::SectionEnd { singular: false },
        2 => Marker::CallBegin,
        3 => Marker::ArgumentBegin { plural: false },
        4 => Marker::CallEnd,
        5 => Marker::SectionBegin { singular: true },
        6 => Marker::SectionEnd { singular: true },
        _ => Marker::ArgumentBegin { plural: true },
    }
}

/// Classifies bytes starting with `<`: a whole marker, a prefix of one, or neither.
#[inline]
fn match_marker(s: &[u8]) -> Window<Marker> {
    classify_window(s, &MARKERS).map(marker_of)
}

config! {
    /// Leniency options and limits; every recovered deviation is one named option, on by default.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// Non-whitespace text between calls inside a section (noise such as `!!!!!` or `</think>`,
            /// vllm#36763, #36969) is kept as text with a warning instead of an error.
            text_in_section,
            /// Whitespace around the header, the name or the id (spaced tokens, `\n` before the id:
            /// vllm#38441) is trimmed with a warning instead of failing the call.
            header_whitespace,
            /// Arguments written as a JSON string holding a JSON object (MoonshotAI/Kimi-K2#26) are
            /// unwrapped with a warning instead of rejected.
            string_arguments,
            /// Complete arguments followed by the next call, the section end or the end of the stream
            /// (max_tokens cuts, llama.cpp fixtures) are accepted with a warning.
            missing_call_end,
            /// A section still open at the end of the stream keeps its calls (Dynamo#8208).
            missing_section_end,
            /// A call outside any section opens an implicit section (outputs without the wrapper).
            missing_section_begin,
            /// `<|tool_call_section_begin|>` / `_end|>` are read as the plural section markers.
            singular_section_marker,
            /// `<|tool_call_arguments_begin|>` is read as the argument marker.
            plural_argument_marker,
            /// A section end outside any section is dropped with a warning.
            stray_section_end,
        }
        /// Longest header (name and id) in bytes.
        pub max_header_bytes: usize,
        /// Longest arguments text of one call in bytes.
        pub max_args_bytes: usize,
        /// Deepest JSON nesting of the arguments (serde_json's own limit by default).
        pub max_depth: usize,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            text_in_section: true,
            header_whitespace: true,
            string_arguments: true,
            missing_call_end: true,
            missing_section_end: true,
            missing_section_begin: true,
            singular_section_marker: true,
            plural_argument_marker: true,
            stray_section_end: true,
            max_header_bytes: 1024,
            max_args_bytes: 64 << 20,
            max_depth: SERDE_JSON_MAX_DEPTH,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    None,
    Explicit,
    Implicit,
}

/// How the arguments of the current call are being read.
enum ArgsMode {
    /// Only whitespace so far.
    Blank,
    /// A JSON object, streamed as it arrives.
    Object,
    /// A JSON string that must hold an object; buffered until it ends.
    Str,
}

struct Args {
    json: JsonParser,
    mode: ArgsMode,
    /// The call's index, when its `CallStart` was emitted (`None`: the call already failed).
    index: Option<usize>,
    /// Bytes of arguments seen.
    bytes: usize,
    /// The call is already known to be bad (e.g. invalid UTF-8 inside it).
    spoiled: bool,
}

enum State {
    /// Outside a call.
    Text,
    /// Between the call begin and the argument marker.
    Header { buf: String, at: u64 },
    /// Between the argument marker and the end of the call.
    Args(Box<Args>),
    /// Discarding input up to the next call end after an error.
    Skip,
}

/// The kimi_k2 streaming parser.
pub struct Parser {
    cfg: Config,
    utf8: Utf8Decoder,
    state: State,
    section: Section,
    /// Whitespace between calls inside a section, dropped unless text follows it.
    run_ws: String,
    /// Text inside the current between-calls run was already emitted.
    run_visible: bool,
    /// A possible marker prefix held back at a chunk end (at most [`MAX_MARKER`] bytes).
    pending: String,
    /// Offset in the decoded text of the next unprocessed character (the start of `pending`).
    pos: u64,
    next_index: usize,
}

impl Parser {
    /// A parser with the given options.
    pub fn new(cfg: Config) -> Parser {
        Parser {
            cfg,
            utf8: Utf8Decoder::new(),
            state: State::Text,
            section: Section::None,
            run_ws: String::new(),
            run_visible: false,
            pending: String::new(),
            pos: 0,
            next_index: 0,
        }
    }

    /// Feeds decoded text, resolving a held-back marker prefix first.
    #[inline]
    fn feed_str(&mut self, input: &str, out: &mut dyn Sink) {
        if self.pending.is_empty() {
            if !self.string_delta(input, out) {
                self.scan(input, out);
            }
        } else {
            self.feed_held(input, out);
        }
    }

    /// The per-chunk path of a streamed call: a piece that only continues a string inside the
    /// arguments goes straight out as a delta, without the scan loop. `false`: nothing was
    /// done, take the general path.
    #[inline]
    fn string_delta(&mut self, s: &str, out: &mut dyn Sink) -> bool {
        let State::Args(a) = &mut self.state else {
            return false;
        };
        let (ArgsMode::Object, Some(index), false) = (&a.mode, a.index, a.spoiled) else {
            return false;
        };
        if s.is_empty() || a.bytes + s.len() > self.cfg.max_args_bytes || !a.json.continue_string(s)
        {
            return false;
        }
        a.bytes += s.len();
        self.pos += s.len() as u64;
        out.args_delta(index, s);
        true
    }

    /// [`feed_str`](Parser::feed_str) with a marker prefix held back from the previous chunk.
    #[inline(never)]
    fn feed_held(&mut self, mut input: &str, out: &mut dyn Sink) {
        while !self.pending.is_empty() {
            let need = MAX_MARKER - self.pending.len();
            let mut take = need.min(input.len());
            // Round up, not down: a character that straddles the room left still decides the
            // match (markers are ASCII), and stopping short of it would leave `NeedMore` with
            // input unread, which was then dropped (found by the `parse` and `roundtrip` fuzz
            // targets).
            while !input.is_char_boundary(take) {
                take += 1;
            }
            let mut tmp = std::mem::take(&mut self.pending);
            let held = tmp.len();
            tmp.push_str(&input[..take]);
            match match_marker(tmp.as_bytes()) {
                Window::Marker(m, len) => {
                    input = &input[len - held..];
                    self.pos += len as u64;
                    self.on_marker(m, out);
                }
                Window::NeedMore => {
                    self.pending = tmp;
                    return;
                }
                Window::NotMarker => {
                    self.lt_not_marker(out);
                    self.pos += 1;
                    // The held bytes after `<` come before `input`: scan them first.
                    self.scan(&tmp[1..held], out);
                }
            }
        }
        self.scan(input, out);
    }

    /// Processes text with nothing held back, leaving a trailing marker prefix in `pending`.
    ///
    /// This loop and [`feed_args`](Parser::feed_args) are the per-chunk path of a streamed
    /// call; everything rarer (markers, text, errors) lives in functions kept out of line, so
    /// that a small delta costs little more than the JSON bytes it carries.
    #[inline]
    fn scan(&mut self, s: &str, out: &mut dyn Sink) {
        let mut i = 0;
        while i < s.len() {
            let rest = &s[i..];
            let (consumed, at_lt) = if let State::Args(_) = self.state {
                match self.feed_args(rest, out) {
                    ArgsFeed::All => (rest.len(), false),
                    ArgsFeed::Stopped(k) => (k, true),
                    ArgsFeed::Failed(k) => (k, false),
                }
            } else {
                self.outside_args(rest, out)
            };
            i += consumed;
            self.pos += consumed as u64;
            if at_lt {
                match self.at_lt(s, i, out) {
                    Some(next) => i = next,
                    None => return,
                }
            }
        }
    }

    /// Text up to the next `<` outside a call's arguments: (bytes consumed, stopped at `<`).
    #[inline(never)]
    fn outside_args(&mut self, s: &str, out: &mut dyn Sink) -> (usize, bool) {
        let k = crate::lexers::find_byte(b'<', s.as_bytes()).unwrap_or(s.len());
        self.content(&s[..k], out);
        (k, k < s.len())
    }

    /// Decides the `<` at `s[i]`: a marker, a plain `<`, or a prefix to hold back (`None`).
    /// Returns where scanning goes on.
    #[inline(never)]
    fn at_lt(&mut self, s: &str, i: usize, out: &mut dyn Sink) -> Option<usize> {
        let end = (i + MAX_MARKER).min(s.len());
        match match_marker(&s.as_bytes()[i..end]) {
            Window::Marker(m, len) => {
                self.pos += len as u64;
                self.on_marker(m, out);
                Some(i + len)
            }
            Window::NotMarker => {
                self.lt_not_marker(out);
                self.pos += 1;
                Some(i + 1)
            }
            Window::NeedMore => {
                self.pending.push_str(&s[i..]);
                None
            }
        }
    }

    /// Handles text that contains no `<` in the current state.
    fn content(&mut self, s: &str, out: &mut dyn Sink) {
        if s.is_empty() {
            return;
        }
        match &mut self.state {
            State::Text => self.text(s, out),
            State::Header { buf, at } => {
                if buf.len() + s.len() > self.cfg.max_header_bytes {
                    let at = *at;
                    out.push(Event::error(
                        ErrorKind::LimitExceeded,
                        format!(
                            "call header at byte {at} is longer than {} bytes",
                            self.cfg.max_header_bytes
                        ),
                    ));
                    self.state = State::Skip;
                } else {
                    buf.push_str(s);
                }
            }
            State::Args(_) => {
                // Only reached for held-back text fed back at the end of the stream.
                let _ = self.feed_args(s, out);
            }
            State::Skip => {}
        }
    }

    /// A `<` that starts no marker.
    fn lt_not_marker(&mut self, out: &mut dyn Sink) {
        if let State::Args(a) = &mut self.state {
            // Outside a JSON string, `<` can only be markup; as JSON it is an error.
            let complete = a.json.is_complete();
            let why = if complete {
                "trailing characters after the arguments"
            } else {
                "unexpected `<` in the arguments"
            };
            let at = self.pos;
            self.fail_args(ErrorKind::InvalidJson, format!("{why} at byte {at}"), out);
        } else {
            self.content("<", out);
        }
    }

    /// Visible text outside calls, with the section's whitespace rule.
    fn text(&mut self, s: &str, out: &mut dyn Sink) {
        if self.section == Section::None || self.run_visible {
            out.text(s);
            return;
        }
        let trimmed = s.trim_start();
        if trimmed.is_empty() {
            self.run_ws.push_str(s);
            return;
        }
        match self.section {
            Section::Implicit => self.section = Section::None,
            _ => {
                if self.cfg.text_in_section {
                    out.push(Event::warning(
                        WarningKind::TextInSection,
                        format!("text between calls inside a section at byte {}", self.pos),
                    ));
                } else {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!("text between calls inside a section at byte {}", self.pos),
                    ));
                }
                self.run_visible = true;
            }
        }
        let ws = std::mem::take(&mut self.run_ws);
        out.text(&ws);
        out.text(s);
    }

    /// Ends the run of text between calls at a marker.
    fn end_run(&mut self) {
        self.run_ws.clear();
        self.run_visible = false;
    }

    fn on_marker(&mut self, m: Marker, out: &mut dyn Sink) {
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text => self.marker_in_text(m, out),
            State::Header { buf, at } => match m {
                Marker::ArgumentBegin { plural } => {
                    self.variant(
                        plural,
                        WarningKind::PluralArgumentMarker,
                        ARGUMENT_BEGIN_PLURAL,
                        out,
                    );
                    self.start_args(&buf, at, out);
                }
                _ => {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!(
                            "call header at byte {at} has no <|tool_call_argument_begin|> before the next marker"
                        ),
                    ));
                    if m != Marker::CallEnd {
                        self.marker_in_text(m, out);
                    }
                }
            },
            State::Args(a) => self.marker_in_args(*a, m, out),
            State::Skip => {
                if m != Marker::CallEnd {
                    self.state = State::Skip;
                }
            }
        }
    }

    /// Reports a recognised marker variant: a warning, or an error with the option off.
    fn variant(&mut self, used: bool, option: WarningKind, token: &str, out: &mut dyn Sink) {
        if !used {
            return;
        }
        let enabled = match option {
            WarningKind::PluralArgumentMarker => self.cfg.plural_argument_marker,
            _ => self.cfg.singular_section_marker,
        };
        let msg = format!("{token} at byte {} is a non-canonical marker", self.pos);
        if enabled {
            out.push(Event::warning(option, msg));
        } else {
            out.push(Event::error(ErrorKind::MalformedMarkup, msg));
        }
    }

    fn marker_in_text(&mut self, m: Marker, out: &mut dyn Sink) {
        self.end_run();
        match m {
            Marker::SectionBegin { singular } => {
                self.variant(
                    singular,
                    WarningKind::SingularSectionMarker,
                    SECTION_BEGIN_SINGULAR,
                    out,
                );
                if self.section == Section::Explicit {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!("section begin at byte {} inside a section", self.pos),
                    ));
                }
                self.section = Section::Explicit;
            }
            Marker::SectionEnd { singular } => {
                self.variant(
                    singular,
                    WarningKind::SingularSectionMarker,
                    SECTION_END_SINGULAR,
                    out,
                );
                if self.section == Section::None {
                    let msg = format!("section end at byte {} outside a section", self.pos);
                    if self.cfg.stray_section_end {
                        out.push(Event::warning(WarningKind::StraySectionEnd, msg));
                    } else {
                        out.push(Event::error(ErrorKind::MalformedMarkup, msg));
                    }
                }
                self.section = Section::None;
            }
            Marker::CallBegin => {
                if self.section == Section::None {
                    let msg = format!("call at byte {} outside a tool-call section", self.pos);
                    if self.cfg.missing_section_begin {
                        out.push(Event::warning(WarningKind::MissingSectionBegin, msg));
                    } else {
                        out.push(Event::error(ErrorKind::MalformedMarkup, msg));
                    }
                    self.section = Section::Implicit;
                }
                self.state = State::Header {
                    buf: String::new(),
                    at: self.pos,
                };
            }
            Marker::ArgumentBegin { .. } => {
                out.push(Event::error(
                    ErrorKind::MalformedMarkup,
                    format!(
                        "<|tool_call_argument_begin|> at byte {} outside a call; skipped to the next call end",
                        self.pos
                    ),
                ));
                self.state = State::Skip;
            }
            Marker::CallEnd => out.push(Event::error(
                ErrorKind::MalformedMarkup,
                format!("<|tool_call_end|> at byte {} outside a call", self.pos),
            )),
        }
    }

    /// Parses the header and opens the arguments.
    fn start_args(&mut self, header: &str, at: u64, out: &mut dyn Sink) {
        let h = split_header(header);
        let mut index = None;
        if h.name.is_empty() {
            out.push(Event::error(
                ErrorKind::MissingName,
                format!("call header {header:?} at byte {at} has no function name"),
            ));
        } else if h.trimmed && !self.cfg.header_whitespace {
            out.push(Event::error(
                ErrorKind::MalformedMarkup,
                format!("call header {header:?} at byte {at} has surrounding whitespace"),
            ));
        } else {
            if h.trimmed {
                out.push(Event::warning(
                    WarningKind::HeaderWhitespace,
                    format!("call header {header:?} at byte {at} has surrounding whitespace"),
                ));
            }
            let i = self.next_index;
            self.next_index += 1;
            out.push(Event::CallStart {
                index: i,
                id: h.id.map(str::to_string),
                name: h.name.to_string(),
                server: None,
            });
            index = Some(i);
        }
        self.state = State::Args(Box::new(Args {
            json: JsonParser::new(JsonConfig {
                max_depth: self.cfg.max_depth,
                stop_byte: Some(b'<'),
                build_value: false,
            }),
            mode: ArgsMode::Blank,
            index,
            bytes: 0,
            spoiled: false,
        }));
    }

    /// Feeds argument text; stops at a `<` outside a JSON string or at an error.
    #[inline]
    fn feed_args(&mut self, s: &str, out: &mut dyn Sink) -> ArgsFeed {
        let State::Args(a) = &mut self.state else {
            return ArgsFeed::All;
        };
        let (s, skipped) = match a.mode {
            ArgsMode::Blank => match self.open_args(s, out) {
                Ok(skipped) => (&s[skipped..], skipped),
                Err(feed) => return feed,
            },
            _ => (s, 0),
        };
        let State::Args(a) = &mut self.state else {
            return ArgsFeed::All;
        };
        let before = a.json.offset();
        let (taken, stopped) = match a.json.feed(s) {
            Ok(Feed::NeedMore) => (s.len(), None),
            Ok(Feed::Stopped(k)) => (k, Some(k)),
            Err(e) => return self.args_not_json(e, before, s.len(), skipped, out),
        };
        a.bytes += taken;
        if a.bytes > self.cfg.max_args_bytes {
            return self.args_too_long(skipped + taken, out);
        }
        if let (ArgsMode::Object, Some(index), false) = (&a.mode, a.index, a.spoiled)
            && taken > 0
        {
            out.args_delta(index, &s[..taken]);
        }
        match stopped {
            Some(k) => ArgsFeed::Stopped(skipped + k),
            None => ArgsFeed::All,
        }
    }

    /// The first non-blank byte of the arguments decides how they are read: `Ok(blank bytes
    /// skipped)` to go on, or `Err(result)` when the piece is settled here.
    #[cold]
    fn open_args(&mut self, s: &str, out: &mut dyn Sink) -> Result<usize, ArgsFeed> {
        let State::Args(a) = &mut self.state else {
            return Err(ArgsFeed::All);
        };
        let t = s.trim_start_matches([' ', '\t', '\n', '\r']);
        let skipped = s.len() - t.len();
        match t.as_bytes().first() {
            None => Err(ArgsFeed::All),
            Some(b'<') => Err(ArgsFeed::Stopped(skipped)),
            Some(b'{') => {
                a.mode = ArgsMode::Object;
                Ok(skipped)
            }
            Some(b'"') => {
                a.mode = ArgsMode::Str;
                a.json = JsonParser::new(JsonConfig {
                    max_depth: self.cfg.max_depth,
                    stop_byte: Some(b'<'),
                    build_value: true,
                });
                Ok(skipped)
            }
            Some(_) => {
                let at = self.pos + skipped as u64;
                self.fail_args(
                    ErrorKind::InvalidJson,
                    format!("arguments at byte {at} are not a JSON object"),
                    out,
                );
                Err(ArgsFeed::Failed(skipped))
            }
        }
    }

    /// The JSON parser rejected the arguments: `before` is its offset before this piece of
    /// `len` bytes (which starts `skipped` bytes into the text fed).
    #[cold]
    fn args_not_json(
        &mut self,
        e: JsonError,
        before: u64,
        len: usize,
        skipped: usize,
        out: &mut dyn Sink,
    ) -> ArgsFeed {
        let at_in_s = e.offset.saturating_sub(before).min(len as u64) as usize;
        let kind = if e.kind == JsonErrorKind::DepthLimit {
            ErrorKind::LimitExceeded
        } else {
            ErrorKind::InvalidJson
        };
        let msg = format!(
            "arguments are not valid JSON: {} (call arguments at byte {})",
            e.message,
            self.pos + skipped as u64
        );
        self.fail_args(kind, msg, out);
        ArgsFeed::Failed(skipped + at_in_s)
    }

    /// The arguments passed `max_args_bytes`: the call fails and the rest is skipped.
    #[cold]
    fn args_too_long(&mut self, consumed: usize, out: &mut dyn Sink) -> ArgsFeed {
        let msg = format!(
            "arguments longer than {} bytes (call at byte {})",
            self.cfg.max_args_bytes, self.pos
        );
        self.fail_args(ErrorKind::LimitExceeded, msg, out);
        ArgsFeed::Failed(consumed)
    }

    /// Fails the current call: reports the error (once per call) and skips to its end.
    fn fail_args(&mut self, kind: ErrorKind, msg: String, out: &mut dyn Sink) {
        if let State::Args(a) = &self.state
            && a.index.is_some()
        {
            out.push(Event::error(kind, msg));
        }
        self.state = State::Skip;
    }

    /// A marker outside a JSON string while reading arguments.
    fn marker_in_args(&mut self, mut a: Args, m: Marker, out: &mut dyn Sink) {
        let ends_call = matches!(
            m,
            Marker::CallEnd | Marker::CallBegin | Marker::SectionEnd { .. }
        );
        if !ends_call {
            self.state = State::Args(Box::new(a));
            let at = self.pos;
            self.fail_args(
                ErrorKind::InvalidJson,
                format!("marker inside the arguments at byte {at}"),
                out,
            );
            return;
        }
        if m == Marker::CallEnd {
            self.close_args(&mut a, false, false, out);
        } else {
            // The next call or the section end closes this call, then means what it says.
            self.close_args(&mut a, true, false, out);
            self.marker_in_text(m, out);
        }
    }

    /// Ends a call's arguments; returns whether the call was accepted.
    fn close_args(
        &mut self,
        a: &mut Args,
        missing_end: bool,
        at_eof: bool,
        out: &mut dyn Sink,
    ) -> bool {
        let Some(index) = a.index else {
            return false;
        };
        let at = self.pos;
        let fail = |out: &mut dyn Sink, kind: ErrorKind, msg: String| {
            out.push(Event::error(kind, msg));
            false
        };
        if a.spoiled {
            return false;
        }
        if let ArgsMode::Blank = a.mode {
            return if at_eof {
                fail(
                    out,
                    ErrorKind::Unterminated,
                    format!("the stream ended before call {index}'s arguments"),
                )
            } else {
                fail(
                    out,
                    ErrorKind::EmptyArguments,
                    format!("call {index} has empty arguments (at byte {at})"),
                )
            };
        }
        if !a.json.is_complete() {
            return if at_eof {
                fail(
                    out,
                    ErrorKind::Unterminated,
                    format!("the stream ended inside call {index}'s arguments"),
                )
            } else {
                fail(
                    out,
                    ErrorKind::InvalidJson,
                    format!(
                        "call {index}'s arguments end at byte {at} before the JSON is complete"
                    ),
                )
            };
        }
        if missing_end {
            let msg = format!("call {index} has no <|tool_call_end|> (at byte {at})");
            if self.cfg.missing_call_end {
                out.push(Event::warning(WarningKind::MissingCallEnd, msg));
            } else {
                let kind = if at_eof {
                    ErrorKind::Unterminated
                } else {
                    ErrorKind::MalformedMarkup
                };
                return fail(out, kind, msg);
            }
        }
        if let ArgsMode::Str = a.mode {
            let inner = match a.json.finish() {
                Ok(Some(Value::String(s))) => s,
                _ => String::new(),
            };
            let obj = match serde_json::from_str::<Value>(&inner) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return fail(
                        out,
                        ErrorKind::InvalidJson,
                        format!(
                            "call {index}'s arguments are a JSON string that does not hold a JSON object"
                        ),
                    );
                }
            };
            if !self.cfg.string_arguments {
                return fail(
                    out,
                    ErrorKind::InvalidJson,
                    format!("call {index}'s arguments are a JSON string, not an object"),
                );
            }
            out.push(Event::warning(
                WarningKind::StringArguments,
                format!("call {index}'s arguments are a JSON string holding an object"),
            ));
            out.args_delta(index, &obj.to_string());
        }
        out.push(Event::CallEnd { index });
        true
    }

    fn reset_turn(&mut self) {
        self.utf8 = Utf8Decoder::new();
        self.state = State::Text;
        self.section = Section::None;
        self.end_run();
        self.pending.clear();
        self.pos = 0;
        self.next_index = 0;
    }
}

enum ArgsFeed {
    /// Everything consumed.
    All,
    /// A `<` outside a JSON string at this offset.
    Stopped(usize),
    /// The call failed; the state is now `Skip`, continue at this offset.
    Failed(usize),
}

struct Header<'a> {
    name: &'a str,
    id: Option<&'a str>,
    trimmed: bool,
}

/// Splits a header: the id is after the last `:`, the name is the last dot-separated segment
/// before it (`specs/kimi_k2.md` §4.3).
fn split_header(h: &str) -> Header<'_> {
    let t = h.trim();
    let mut trimmed = t.len() != h.len();
    let (name_part, id) = match t.rfind(':') {
        Some(k) => (&t[..k], Some(&t[k + 1..])),
        None => (t, None),
    };
    let id = id.and_then(|raw| {
        let id = raw.trim();
        trimmed |= id.len() != raw.len();
        (!id.is_empty()).then_some(id)
    });
    let raw_name = name_part.rsplit('.').next().unwrap_or("");
    let name = raw_name.trim();
    trimmed |= name.len() != raw_name.len();
    Header { name, id, trimmed }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        match self.utf8.ascii(chunk) {
            Some(s) => self.feed_str(s, out),
            None => self.feed_utf8(chunk, out),
        }
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        let mut utf8 = std::mem::take(&mut self.utf8);
        utf8.finish(&mut |p| self.piece(p, out));
        // A marker prefix at the very end is not a marker.
        let held = std::mem::take(&mut self.pending);
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text => {
                self.state = State::Text;
                self.text(&held, out);
                if self.section == Section::Explicit {
                    let msg = "the stream ended inside a tool-call section".to_string();
                    if self.cfg.missing_section_end {
                        out.push(Event::warning(WarningKind::MissingSectionEnd, msg));
                    } else {
                        out.push(Event::error(ErrorKind::Unterminated, msg));
                    }
                }
            }
            State::Header { at, .. } => out.push(Event::error(
                ErrorKind::Unterminated,
                format!("the stream ended inside the call header at byte {at}"),
            )),
            State::Args(mut a) => {
                // A marker cut short by the end of the stream is dropped with the call's end.
                let explicit = self.section == Section::Explicit;
                if self.close_args(&mut a, true, true, out) && explicit {
                    let msg = "the stream ended inside a tool-call section".to_string();
                    if self.cfg.missing_section_end {
                        out.push(Event::warning(WarningKind::MissingSectionEnd, msg));
                    } else {
                        out.push(Event::error(ErrorKind::Unterminated, msg));
                    }
                }
            }
            State::Skip => {}
        }
        self.reset_turn();
    }

    fn at_text(&self) -> bool {
        matches!(self.state, State::Text)
    }
}

impl Parser {
    /// Bytes that are not plain ASCII with nothing held: through the UTF-8 decoder.
    #[inline(never)]
    fn feed_utf8(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        let mut utf8 = std::mem::take(&mut self.utf8);
        utf8.feed(chunk, &mut |p| self.piece(p, out));
        self.utf8 = utf8;
    }

    fn piece(&mut self, p: Utf8Piece<'_>, out: &mut dyn Sink) {
        match p {
            Utf8Piece::Text(s) => self.feed_str(s, out),
            Utf8Piece::Invalid { offset } => {
                out.push(Event::error(
                    ErrorKind::InvalidUtf8,
                    format!("invalid UTF-8 at byte {offset}"),
                ));
                if let State::Args(a) = &mut self.state {
                    a.spoiled = true;
                }
                self.feed_str("\u{FFFD}", out);
            }
        }
    }
}

/// Renders text and calls in the canonical form: text, then one section with every call.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    // The reasoning layer in front of the parser would read a tag in the text as reasoning.
    if let Some(t) = REASONING
        .tags()
        .into_iter()
        .find(|t| text.contains(t.as_str()))
    {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    let mut out = String::from(text);
    if calls.is_empty() {
        return Ok(out.into_bytes());
    }
    out.push_str(SECTION_BEGIN);
    for c in calls {
        let bad_name = c.name.is_empty()
            || c.name.contains(['.', '<'])
            || c.name.chars().any(char::is_whitespace)
            || (c.id.is_none() && c.name.contains(':'));
        if bad_name {
            return Err(format!(
                "the name {:?} cannot be written in a header",
                c.name
            ));
        }
        if c.server.is_some() {
            return Err("kimi_k2 has no server field".into());
        }
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        let mut header = format!("functions.{}", c.name);
        if let Some(id) = &c.id {
            if id.contains([':', '<']) || id.trim() != id || id.is_empty() {
                return Err(format!("the id {id:?} cannot be written in a header"));
            }
            header.push(':');
            header.push_str(id);
        }
        // A header the parser would reject as too long must not be written.
        let limit = Config::default().max_header_bytes;
        if header.len() > limit {
            return Err(format!(
                "the header of {:?} is longer than the parser's {limit}-byte limit",
                c.name
            ));
        }
        out.push_str(CALL_BEGIN);
        out.push_str(&header);
        out.push_str(ARGUMENT_BEGIN);
        out.push_str(&c.arguments.to_string());
        out.push_str(CALL_END);
    }
    out.push_str(SECTION_END);
    Ok(out.into_bytes())
}

fn new_parser(_tools: &Tools) -> Box<dyn StreamParser> {
    reasoning::wrap(Parser::new(Config::default()), &REASONING)
}

/// Kimi's reasoning blocks: `<think>…</think>` (K2-Thinking, K2.5, K2.6, which think by
/// default) and `◁think▷…◁/think▷` (Kimi-VL, k1.5 thinking); `specs/kimi_k2.md` §4.1.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>"), ("◁think▷", "◁/think▷")],
    call_markers: &[SECTION_BEGIN, CALL_BEGIN, SECTION_BEGIN_SINGULAR],
    on_by_default: true,
};

fn markers(_tools: &Tools) -> Vec<String> {
    MARKERS.iter().map(|m| m.to_string()).collect()
}

/// The kimi_k2 format's options, for `--option kimi_k2.NAME=…` and `conform.toml`.
static OPTION_TABLE: Table<Config> = Table {
    reasoning: Some(&REASONING),
    ..Table::new(Config::default, Config::OPTIONS, |c, _| {
        Box::new(Parser::new(c))
    })
};
/// The kimi_k2 format.
pub static FORMAT: Format = Format {
    render: Some(render),
    special_tokens: SPECIAL_TOKENS,
    reasoning: Some(&REASONING),
    ..Format::new(
        "kimi_k2",
        "Kimi K2 special tokens: <|tool_calls_section_begin|>…<|tool_call_begin|>functions.NAME:ID<|tool_call_argument_begin|>{json}<|tool_call_end|>",
        new_parser,
        markers,
        &OPTION_TABLE,
    )
};

/// Kimi K2's special tokens that can appear in its output, with their ids in its tokenizer.
const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken::new("[EOS]", 163585),
    SpecialToken::new("<|im_end|>", 163586),
    SpecialToken::new("<|im_user|>", 163587),
    SpecialToken::new("<|im_assistant|>", 163588),
    SpecialToken::new("[EOT]", 163593),
    SpecialToken::new("<|im_system|>", 163594),
    SpecialToken::new(SECTION_BEGIN, 163595),
    SpecialToken::new(SECTION_END, 163596),
    SpecialToken::new(CALL_BEGIN, 163597),
    SpecialToken::new(ARGUMENT_BEGIN, 163598),
    SpecialToken::new(CALL_END, 163599),
    SpecialToken::new("<|im_middle|>", 163601),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult};
    use crate::formats::testkit::pieces_at;
    use proptest::prelude::*;
    use serde_json::json;

    fn parse_with(cfg: Config, chunks: &[&[u8]]) -> ParseResult {
        let mut p = Parser::new(cfg);
        ParseResult::fold(&crate::formats::run_chunks(&mut p, chunks.iter().copied()))
    }

    fn parse(s: &str) -> ParseResult {
        parse_with(Config::default(), &[s.as_bytes()])
    }

    /// Parses whole, byte by byte and at every single cut, and checks all agree.
    fn parse_all_ways(s: &str) -> ParseResult {
        let b = s.as_bytes();
        let whole = parse(s);
        let bytes: Vec<&[u8]> = b.chunks(1).collect();
        let by_byte = parse_with(Config::default(), &bytes);
        assert_eq!(by_byte, whole, "byte by byte");
        assert_eq!(kinds(&by_byte), kinds(&whole));
        for cut in 1..b.len() {
            let r = parse_with(Config::default(), &[&b[..cut], &b[cut..]]);
            assert_eq!(r, whole, "cut at {cut}");
            assert_eq!(kinds(&r), kinds(&whole), "warnings, cut at {cut}");
        }
        whole
    }

    fn kinds(r: &ParseResult) -> Vec<String> {
        r.warnings.iter().map(|w| w.kind.clone()).collect()
    }

    fn call(r: &ParseResult, i: usize) -> (&str, Option<&str>, &Value) {
        let c = &r.calls[i];
        (c.name.as_str(), c.id.as_deref(), &c.arguments)
    }

    #[test]
    fn seed_single_and_parallel_calls() {
        let r = parse_all_ways(
            "Listing.<|tool_calls_section_begin|><|tool_call_begin|>functions.list_directory:0<|tool_call_argument_begin|>{\"path\": \"/p1\"}<|tool_call_end|><|tool_call_begin|>functions.read_file:1<|tool_call_argument_begin|>{\"filePath\": \"/p2\"}<|tool_call_end|><|tool_calls_section_end|>Done.",
        );
        assert_eq!(r.text, "Listing.Done.");
        assert_eq!(
            call(&r, 0),
            ("list_directory", Some("0"), &json!({"path": "/p1"}))
        );
        assert_eq!(
            call(&r, 1),
            ("read_file", Some("1"), &json!({"filePath": "/p2"}))
        );
        assert!(r.errors.is_empty() && r.warnings.is_empty());
    }

    #[test]
    fn header_rule_takes_last_colon_and_last_dot_segment() {
        for (h, name, id) in [
            ("functions.list_directory:0", "list_directory", Some("0")),
            ("system.functions.nested.tool:1", "tool", Some("1")),
            ("simple_func:2", "simple_func", Some("2")),
            ("functions.read_file", "read_file", None),
            ("functions.a.b:0", "b", Some("0")),
            ("my:tool:10", "my:tool", Some("10")),
            ("functions.x:", "x", None),
        ] {
            let hd = split_header(h);
            assert_eq!((hd.name, hd.id, hd.trimmed), (name, id, false), "{h}");
        }
        let hd = split_header(" functions.glob: 1\n");
        assert_eq!((hd.name, hd.id, hd.trimmed), ("glob", Some("1"), true));
    }

    #[test]
    fn markers_inside_json_strings_are_content() {
        let r = parse_all_ways(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.w:0<|tool_call_argument_begin|>{\"s\": \"a<|tool_call_end|>b<|\"}<|tool_call_end|><|tool_calls_section_end|>",
        );
        assert_eq!(r.calls[0].arguments, json!({"s": "a<|tool_call_end|>b<|"}));
    }

    #[test]
    fn errors_drop_the_call_and_the_stream_continues() {
        let ok = "<|tool_call_begin|>functions.ok:1<|tool_call_argument_begin|>{}<|tool_call_end|>";
        for (bad, kind) in [
            (
                "<|tool_call_begin|>:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
                ErrorKind::MissingName,
            ),
            (
                "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>  <|tool_call_end|>",
                ErrorKind::EmptyArguments,
            ),
            (
                "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": \"b\"<|tool_call_end|>",
                ErrorKind::InvalidJson,
            ),
            (
                "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1,}<|tool_call_end|>",
                ErrorKind::InvalidJson,
            ),
            (
                "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1]<|tool_call_end|>",
                ErrorKind::InvalidJson,
            ),
            (
                "<|tool_call_begin|>functions.f:0<|tool_call_end|>",
                ErrorKind::MalformedMarkup,
            ),
        ] {
            let s = format!("<|tool_calls_section_begin|>{bad}{ok}<|tool_calls_section_end|>after");
            let r = parse_all_ways(&s);
            assert_eq!(r.error_kinds(), vec![kind], "{bad}");
            assert_eq!(r.calls.len(), 1, "{bad}");
            assert_eq!(r.calls[0].name, "ok");
            assert_eq!(r.text, "after");
        }
    }

    #[test]
    fn truncation_is_unterminated_but_complete_json_is_recovered() {
        let r = parse_all_ways(
            "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": [1, 2",
        );
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
        assert!(r.calls.is_empty());
        let r = parse_all_ways(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_e",
        );
        assert_eq!(kinds(&r), ["missing_call_end", "missing_section_end"]);
        assert_eq!(r.calls.len(), 1);
    }

    #[test]
    fn string_arguments_are_unwrapped_once() {
        let r = parse_all_ways(
            "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>\"{\\\"path\\\": \\\"a\\\"}\"<|tool_call_end|>",
        );
        assert_eq!(r.calls[0].arguments, json!({"path": "a"}));
        assert_eq!(kinds(&r), ["missing_section_begin", "string_arguments"]);
    }

    #[test]
    fn options_off_turn_recoveries_into_errors() {
        let s = "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}";
        let strict = Config {
            missing_call_end: false,
            missing_section_begin: false,
            ..Config::default()
        };
        let r = parse_with(strict, &[s.as_bytes()]);
        assert_eq!(
            r.error_kinds(),
            vec![ErrorKind::MalformedMarkup, ErrorKind::Unterminated]
        );
        assert!(r.calls.is_empty());
    }

    #[test]
    fn limits_give_limit_exceeded() {
        let small = Config {
            max_args_bytes: 10,
            max_header_bytes: 8,
            ..Config::default()
        };
        let s = "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": \"0123456789\"}<|tool_call_end|>";
        let r = parse_with(small, &[s.as_bytes()]);
        assert_eq!(r.error_kinds(), vec![ErrorKind::LimitExceeded]);
        // In small chunks the string body takes the per-chunk fast path, which must count too.
        let pieces: Vec<&[u8]> = s.as_bytes().chunks(3).collect();
        let r = parse_with(small, &pieces);
        assert_eq!(r.error_kinds(), vec![ErrorKind::LimitExceeded]);
        let deep = format!(
            "<|tool_call_begin|>f:0<|tool_call_argument_begin|>{}{}<|tool_call_end|>",
            "{\"a\":".repeat(200),
            "}".repeat(200)
        );
        let r = parse(&deep);
        assert_eq!(r.error_kinds(), vec![ErrorKind::LimitExceeded]);
    }

    #[test]
    fn invalid_utf8_is_replaced_and_reported() {
        let r = parse_with(Config::default(), &[b"a\xffb"]);
        assert_eq!(r.text, "a\u{FFFD}b");
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidUtf8]);
        let r = parse_with(
            Config::default(),
            &["é".as_bytes()[..1].as_ref(), &"é".as_bytes()[1..]],
        );
        assert_eq!(r.text, "é");
    }

    #[test]
    fn max_marker_is_the_longest_marker() {
        assert_eq!(MAX_MARKER, MARKERS.iter().map(|m| m.len()).max().unwrap());
    }

    #[test]
    fn a_wide_character_after_a_long_marker_prefix_is_kept() {
        // 27 bytes held back, then characters wider than the 2 bytes of room left.
        let s = "<|tool_call_argument_begin|é䥽9 ".as_bytes();
        let whole = parse_with(Config::default(), &[s]);
        assert_eq!(whole.text, "<|tool_call_argument_begin|é䥽9 ");
        for cut in 1..s.len() {
            assert_eq!(
                parse_with(Config::default(), &[&s[..cut], &s[cut..]]),
                whole
            );
        }
        // 16 bytes held, then 11 bytes of marker prefix and a character past the room left.
        let s = "<|tool_calls_section_begin|\u{FFFD}".as_bytes();
        for cut in 1..s.len() {
            let r = parse_with(Config::default(), &[&s[..cut], &s[cut..]]);
            assert_eq!(r.text, "<|tool_calls_section_begin|\u{FFFD}", "cut {cut}");
        }
        let bad = b"<|tool_call_argument_begin|\xa4x";
        let r = parse_with(Config::default(), &[bad]);
        assert_eq!(r.text, "<|tool_call_argument_begin|\u{FFFD}x");
    }

    #[test]
    fn renderer_refuses_what_it_cannot_write() {
        let c = |name: &str, id: Option<&str>| ToolCall {
            name: name.into(),
            id: id.map(Into::into),
            server: None,
            arguments: json!({}),
        };
        let t = Tools::default();
        assert!(render("", &[c("a.b", Some("0"))], &t).is_err());
        assert!(render("", &[c("my:tool", None)], &t).is_err());
        assert!(render("", &[c("my:tool", Some("3"))], &t).is_ok());
        assert!(render("", &[c("f", Some("a:b"))], &t).is_err());
        assert!(render("x<|tool_call_end|>", &[], &t).is_err());
        let long = "x".repeat(Config::default().max_header_bytes);
        assert!(
            render("", &[c(&long, None)], &t).is_err(),
            "the parser would reject the header"
        );
    }

    /// Inputs built from markers, JSON-ish fragments and text, so the fuzzing reaches deep states.
    fn token_soup() -> impl Strategy<Value = Vec<u8>> {
        let atoms = prop_oneof![
            Just(SECTION_BEGIN.to_string()),
            Just(SECTION_END.to_string()),
            Just(CALL_BEGIN.to_string()),
            Just(ARGUMENT_BEGIN.to_string()),
            Just(CALL_END.to_string()),
            Just(SECTION_BEGIN_SINGULAR.to_string()),
            Just("functions.f:0".to_string()),
            Just("{\"a\": \"<|tool_call_end|>\"}".to_string()),
            Just("{\"a\": [1, {\"b\": null}]}".to_string()),
            Just("\"{\\\"x\\\": 1}\"".to_string()),
            Just("<|".to_string()),
            Just(" \n".to_string()),
            Just("é😀".to_string()),
            "[a-z{}\":, <|>]{0,6}",
        ];
        proptest::collection::vec(atoms, 0..24).prop_map(|v| v.concat().into_bytes())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        /// The registered parser (behind the reasoning layer) on markup-dense input.
        #[test]
        fn with_reasoning_any_cuts_agree_with_whole(
            s in "(<think>|</think>|◁think▷|◁/think▷|<\\|tool_calls_section_begin\\|>|<\\|tool_calls_section_end\\|>|<\\|tool_call_begin\\|>functions\\.f:0|<\\|tool_call_argument_begin\\|>|<\\|tool_call_end\\|>|\\{\"a\":\"<think>\"\\}|\\{\\}|x|<|é|\n){0,14}",
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let run = |chunks: Vec<&[u8]>| {
                let mut p = new_parser(&Tools::default());
                ParseResult::fold(&crate::formats::run_chunks(p.as_mut(), chunks))
            };
            let whole = run(vec![s.as_bytes()]);
            let r = run(pieces_at(s.as_bytes(), &cuts));
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(kinds(&r), kinds(&whole));
            let by_byte = run(s.as_bytes().chunks(1).collect());
            prop_assert_eq!(&by_byte, &whole);
        }

        #[test]
        fn arbitrary_bytes_and_cuts_never_panic_and_agree_with_whole(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
        ) {
            let whole = parse_with(Config::default(), &[&bytes]);
            let r = parse_with(Config::default(), &pieces_at(&bytes, &cuts));
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(kinds(&r), kinds(&whole));
        }

        #[test]
        fn marker_soup_is_split_invariant(bytes in token_soup(), cuts in proptest::collection::vec(any::<usize>(), 0..12)) {
            let whole = parse_with(Config::default(), &[&bytes]);
            let r = parse_with(Config::default(), &pieces_at(&bytes, &cuts));
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(kinds(&r), kinds(&whole));
            let by_byte: Vec<&[u8]> = bytes.chunks(1).collect();
            prop_assert_eq!(&parse_with(Config::default(), &by_byte), &whole);
        }

        #[test]
        fn rendered_calls_parse_back(
            text in "[^<]{0,20}",
            calls in proptest::collection::vec(("[a-z_][a-z0-9_-]{0,10}", proptest::option::of("[0-9]{1,3}"), proptest::collection::btree_map("[a-z]{1,5}", "\\PC{0,12}", 0..4)), 0..4),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, id, args)| ToolCall {
                name, id, server: None, arguments: serde_json::to_value(args).unwrap(),
            }).collect();
            let bytes = render(&text, &calls, &Tools::default()).unwrap();
            let r = parse_with(Config::default(), &pieces_at(&bytes, &cuts));
            prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
            prop_assert_eq!(r.text, text);
            prop_assert_eq!(r.calls, calls);
        }
    }
}
