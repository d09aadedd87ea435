//! `harmony`: OpenAI gpt-oss messages (`specs/harmony.md`).
//!
//! ```text
//! <|channel|>analysis<|message|>REASONING<|end|><|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{json}<|call|>
//! ```
//!
//! A byte-at-most-twice state machine like kimi_k2's: text is scanned with `memchr` for `<`,
//! a possible marker prefix at a chunk end is the only thing held back. A message's header is
//! buffered (bounded) until `<|message|>`, then its content streams as text, reasoning or a
//! call's arguments, validated by the incremental JSON parser as they arrive.

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::lexers::json::{JsonConfig, JsonErrorKind, JsonParser, SERDE_JSON_MAX_DEPTH};
use crate::lexers::marker::{Window, classify_window};
use crate::lexers::utf8::{Utf8Decoder, Utf8Piece};
use crate::tools::Tools;

/// `<|start|>`: begins a message (its role follows).
pub const START: &str = "<|start|>";
/// `<|channel|>`: begins the channel part of a header.
pub const CHANNEL: &str = "<|channel|>";
/// `<|constrain|>`: introduces the content type (`json`).
pub const CONSTRAIN: &str = "<|constrain|>";
/// `<|message|>`: ends the header; the content follows.
pub const MESSAGE: &str = "<|message|>";
/// `<|end|>`: ends a message.
pub const END: &str = "<|end|>";
/// `<|call|>`: ends a call message (a stop token).
pub const CALL: &str = "<|call|>";
/// `<|return|>`: ends the final answer (a stop token).
pub const RETURN: &str = "<|return|>";

/// Every structural token: the format's delimiters.
pub const MARKERS: [&str; 7] = [START, CHANNEL, CONSTRAIN, MESSAGE, END, CALL, RETURN];

/// The longest marker: the most bytes ever held back.
const MAX_MARKER: usize = 13;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Start,
    Channel,
    Constrain,
    Message,
    End,
    Call,
    Return,
}

const MARKER_KINDS: [Marker; 7] = [
    Marker::Start,
    Marker::Channel,
    Marker::Constrain,
    Marker::Message,
    Marker::End,
    Marker::Call,
    Marker::Return,
];

/// Classifies bytes starting with `<`: a whole marker, a prefix of one, or neither.
#[inline]
fn match_marker(s: &[u8]) -> Window<Marker> {
    if s.len() >= 2 && s[1] != b'|' {
        return Window::NotMarker;
    }
    classify_window(s, &MARKERS).map(|i| MARKER_KINDS[i])
}

config! {
    /// Leniency options and limits; every recovered deviation is one named option, on by default.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A call message ended by `<|end|>` or `<|return|>` (or another message by `<|call|>`)
            /// is accepted with a warning: the reference library treats all three as terminators.
            call_terminator,
            /// A call message whose complete arguments are cut by the end of the stream or by the next
            /// header keeps its call with a warning (the library closes the message at EOS).
            missing_call_end,
            /// A message cut by the next header (`<|start|>` or `<|channel|>` inside its content)
            /// ends there with a warning (outputs that skip `<|end|>`, mlx-openai-server#156).
            missing_end,
            /// A header that begins with `<|channel|>` after a message, without `<|start|>assistant`,
            /// is read as an assistant header with a warning.
            missing_start,
            /// A recipient outside `functions.` (`browser.search`, `python`) is a call named by the
            /// whole recipient with a warning, instead of an `unknown_tool` error.
            builtin_recipient,
            /// An `analysis` message still open at the end of the stream is reasoning with a warning;
            /// off: an `unterminated` error (the reasoning is kept either way).
            unterminated_reasoning,
        }
        /// Longest header (role, channel, recipient, content type) in bytes.
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
            call_terminator: true,
            missing_call_end: true,
            missing_end: true,
            missing_start: true,
            builtin_recipient: true,
            unterminated_reasoning: true,
            max_header_bytes: 1024,
            max_args_bytes: 64 << 20,
            max_depth: SERDE_JSON_MAX_DEPTH,
        }
    }
}

/// A call's arguments as they stream.
struct Args {
    json: JsonParser,
    /// False until the first non-blank byte (`{`) arrived.
    opened: bool,
    index: usize,
    bytes: usize,
}

/// Where a message's content goes.
enum Content {
    /// `final`, a `commentary` preamble, or a message without channel: visible text.
    Text,
    /// `analysis`: reasoning.
    Reasoning,
    /// A message to a recipient: a call's arguments.
    Call(Box<Args>),
    /// A message that carries nothing for the consumer (failed header, failed call).
    Drop,
}

enum State {
    /// Outside a message: only whitespace may come before the next header.
    Between {
        /// Non-whitespace text was already reported in this run.
        reported: bool,
    },
    /// Collecting a header up to `<|message|>`; `buf` holds its text with `<|channel|>` and
    /// `<|constrain|>` written in.
    Header { buf: String, at: u64, spoiled: bool },
    /// Inside a message's content.
    Content(Content),
}

/// The harmony streaming parser.
pub struct Parser {
    cfg: Config,
    utf8: Utf8Decoder,
    state: State,
    /// A possible marker prefix held back at a chunk end (at most [`MAX_MARKER`] bytes).
    pending: String,
    /// Offset in the decoded text of the next unprocessed character (the start of `pending`).
    pos: u64,
    next_index: usize,
}

/// A parsed header.
#[derive(Debug, PartialEq, Eq)]
struct Header<'a> {
    channel: Option<&'a str>,
    recipient: Option<&'a str>,
}

/// Reads `ROLE[ to=R]<|channel|>CHANNEL[ to=R][ TYPE][ <|constrain|>TYPE]`; `Err` says why not.
fn parse_header(buf: &str) -> Result<Header<'_>, String> {
    let mut parts = buf.split(CHANNEL);
    let role_part = parts.next().unwrap_or("");
    let channel_part = parts.next();
    if parts.next().is_some() {
        return Err("the header has two <|channel|> tokens".into());
    }
    let mut role = None;
    let mut channel = None;
    let mut recipient: Option<&str> = None;
    let mut ctype = None;
    let mut constrained = false;
    for (part, is_channel) in [(Some(role_part), false), (channel_part, true)] {
        let Some(part) = part else { continue };
        let mut pieces = part.split(CONSTRAIN);
        let words = pieces.next().unwrap_or("");
        let after = pieces.next();
        if pieces.next().is_some() {
            return Err("the header has two <|constrain|> tokens".into());
        }
        for w in words.split_whitespace() {
            if let Some(r) = w.strip_prefix("to=") {
                if recipient.is_some_and(|x| x != r) {
                    return Err(format!(
                        "the header names two recipients, {:?} and {r:?}",
                        recipient.unwrap_or("")
                    ));
                }
                recipient = Some(r);
            } else if !is_channel && role.is_none() {
                role = Some(w);
            } else if is_channel && channel.is_none() {
                channel = Some(w);
            } else if is_channel && ctype.is_none() {
                ctype = Some(w);
            } else {
                return Err(format!("unexpected {w:?} in the header"));
            }
        }
        if let Some(after) = after {
            if constrained || ctype.is_some() {
                return Err("the header has two content types".into());
            }
            let mut ws = after.split_whitespace();
            match (ws.next(), ws.next()) {
                (Some(t), None) => ctype = Some(t),
                (None, _) => return Err("<|constrain|> names no content type".into()),
                (Some(_), Some(w)) => {
                    return Err(format!("unexpected {w:?} after the content type"));
                }
            }
            constrained = true;
        }
    }
    if let Some(r) = role
        && r != "assistant"
    {
        return Err(format!(
            "the role is {r:?}: an assistant turn holds assistant messages"
        ));
    }
    if channel_part.is_some() && channel.is_none() {
        return Err("<|channel|> names no channel".into());
    }
    Ok(Header { channel, recipient })
}

impl Parser {
    /// A parser with the given options.
    pub fn new(cfg: Config) -> Parser {
        Parser {
            cfg,
            utf8: Utf8Decoder::new(),
            state: Self::turn_start(),
            pending: String::new(),
            pos: 0,
            next_index: 0,
        }
    }

    /// A turn begins with the first header: the prompt ended with `<|start|>assistant`.
    fn turn_start() -> State {
        State::Header {
            buf: String::new(),
            at: 0,
            spoiled: false,
        }
    }

    fn feed_str(&mut self, input: &str, out: &mut dyn Sink) {
        if self.pending.is_empty() {
            self.scan(input, out);
        } else {
            self.feed_held(input, out);
        }
    }

    /// [`feed_str`](Parser::feed_str) with a marker prefix held back from the previous chunk.
    fn feed_held(&mut self, mut input: &str, out: &mut dyn Sink) {
        while !self.pending.is_empty() {
            let need = MAX_MARKER - self.pending.len();
            let mut take = need.min(input.len());
            // Round up: a character that straddles the room left still decides the match.
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
                    self.content("<", out);
                    self.pos += 1;
                    self.scan(&tmp[1..held], out);
                }
            }
        }
        self.scan(input, out);
    }

    /// Processes text with nothing held back, leaving a trailing marker prefix in `pending`.
    fn scan(&mut self, s: &str, out: &mut dyn Sink) {
        let mut i = 0;
        while i < s.len() {
            let k = crate::lexers::find_byte(b'<', &s.as_bytes()[i..]).map_or(s.len(), |k| i + k);
            if k > i {
                self.content(&s[i..k], out);
                self.pos += (k - i) as u64;
                i = k;
            }
            if i == s.len() {
                return;
            }
            let end = (i + MAX_MARKER).min(s.len());
            match match_marker(&s.as_bytes()[i..end]) {
                Window::Marker(m, len) => {
                    self.pos += len as u64;
                    self.on_marker(m, out);
                    i += len;
                }
                Window::NotMarker => {
                    self.content("<", out);
                    self.pos += 1;
                    i += 1;
                }
                Window::NeedMore => {
                    self.pending.push_str(&s[i..]);
                    return;
                }
            }
        }
    }

    /// The per-chunk path of streamed content: a piece without `<`, with nothing held back,
    /// that only continues text, reasoning or a JSON string of the arguments goes straight to
    /// the sink. `false`: nothing was done, take the general path.
    #[inline]
    fn content_fast(&mut self, s: &str, out: &mut dyn Sink) -> bool {
        if !self.pending.is_empty() || s.is_empty() || crate::lexers::has_byte(s.as_bytes(), b'<') {
            return false;
        }
        match &mut self.state {
            State::Content(Content::Text) => out.text(s),
            State::Content(Content::Reasoning) => out.reasoning(s),
            State::Content(Content::Call(a)) => {
                if !a.opened
                    || a.bytes + s.len() > self.cfg.max_args_bytes
                    || !a.json.continue_string_inlined(s)
                {
                    return false;
                }
                a.bytes += s.len();
                out.args_delta(a.index, s);
            }
            _ => return false,
        }
        self.pos += s.len() as u64;
        true
    }

    /// Text that holds no marker, in the current state.
    fn content(&mut self, s: &str, out: &mut dyn Sink) {
        if s.is_empty() {
            return;
        }
        let at = self.pos;
        match &mut self.state {
            State::Between { reported } => {
                if !*reported && !s.trim_start().is_empty() {
                    *reported = true;
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!("text outside a message at byte {at}"),
                    ));
                }
            }
            State::Header { buf, spoiled, .. } => {
                if *spoiled {
                } else if buf.len() + s.len() > self.cfg.max_header_bytes {
                    *spoiled = true;
                    out.push(Event::error(
                        ErrorKind::LimitExceeded,
                        format!(
                            "header at byte {at} is longer than {} bytes",
                            self.cfg.max_header_bytes
                        ),
                    ));
                } else {
                    buf.push_str(s);
                }
            }
            State::Content(Content::Text) => out.text(s),
            State::Content(Content::Reasoning) => out.reasoning(s),
            State::Content(Content::Drop) => {}
            State::Content(Content::Call(_)) => self.args(s, out),
        }
    }

    /// Argument text of the current call.
    fn args(&mut self, s: &str, out: &mut dyn Sink) {
        let pos = self.pos;
        let max = self.cfg.max_args_bytes;
        let State::Content(Content::Call(a)) = &mut self.state else {
            return;
        };
        if let Err((kind, msg)) = stream_args(a, s, pos, max, out) {
            self.fail_call(kind, msg, out);
        }
    }

    /// The current call fails: an error, no `CallEnd`, the rest of the message is dropped.
    fn fail_call(&mut self, kind: ErrorKind, msg: String, out: &mut dyn Sink) {
        out.push(Event::error(kind, msg));
        self.state = State::Content(Content::Drop);
    }

    /// A recovered deviation: a warning, or with the option off an error of `kind`.
    fn deviation(
        &self,
        on: bool,
        option: WarningKind,
        kind: ErrorKind,
        msg: String,
        out: &mut dyn Sink,
    ) {
        if on {
            out.push(Event::warning(option, msg));
        } else {
            out.push(Event::error(kind, msg));
        }
    }

    fn on_marker(&mut self, m: Marker, out: &mut dyn Sink) {
        let at = self.pos;
        match std::mem::replace(&mut self.state, State::Between { reported: false }) {
            State::Between { .. } => match m {
                Marker::Start => self.new_header(at),
                Marker::Channel => {
                    self.deviation(
                        self.cfg.missing_start,
                        WarningKind::MissingStart,
                        ErrorKind::MalformedMarkup,
                        format!("header at byte {at} has no <|start|>assistant"),
                        out,
                    );
                    self.new_header(at);
                    self.header_token(CHANNEL);
                }
                _ => out.push(Event::error(
                    ErrorKind::MalformedMarkup,
                    format!("{} at byte {at} outside a message", marker_text(m)),
                )),
            },
            State::Header {
                buf,
                at: h_at,
                spoiled,
            } => match m {
                Marker::Channel | Marker::Constrain => {
                    self.state = State::Header {
                        buf,
                        at: h_at,
                        spoiled,
                    };
                    self.header_token(marker_text(m));
                }
                Marker::Message => self.open_content(&buf, h_at, spoiled, out),
                Marker::Start => {
                    if !buf.trim().is_empty() && !spoiled {
                        out.push(Event::error(
                            ErrorKind::MalformedMarkup,
                            format!("header at byte {h_at} has no <|message|>"),
                        ));
                    }
                    self.new_header(at);
                }
                Marker::End | Marker::Call | Marker::Return => {
                    if !spoiled {
                        out.push(Event::error(
                            ErrorKind::MalformedMarkup,
                            format!("header at byte {h_at} has no <|message|>"),
                        ));
                    }
                }
            },
            State::Content(c) => match m {
                Marker::End | Marker::Return => self.close(c, m, out),
                Marker::Call => self.close(c, m, out),
                Marker::Start | Marker::Channel => {
                    self.cut(c, at, out);
                    self.new_header(at);
                    if m == Marker::Channel {
                        self.header_token(CHANNEL);
                    }
                }
                Marker::Message | Marker::Constrain => {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!("{} at byte {at} inside a message's content", marker_text(m)),
                    ));
                    self.state = State::Content(c);
                }
            },
        }
    }

    fn new_header(&mut self, at: u64) {
        self.state = State::Header {
            buf: String::new(),
            at,
            spoiled: false,
        };
    }

    /// Writes a header token into the header buffer (it counts towards the limit).
    fn header_token(&mut self, token: &str) {
        if let State::Header { buf, spoiled, .. } = &mut self.state
            && !*spoiled
        {
            if buf.len() + token.len() > self.cfg.max_header_bytes {
                // Reported by the next text, or dropped with the header.
                *spoiled = true;
            } else {
                buf.push_str(token);
            }
        }
    }

    /// `<|message|>`: the header decides where the content goes.
    fn open_content(&mut self, buf: &str, at: u64, spoiled: bool, out: &mut dyn Sink) {
        self.state = State::Content(Content::Drop);
        if spoiled {
            return;
        }
        let h = match parse_header(buf) {
            Ok(h) => h,
            Err(why) => {
                out.push(Event::error(
                    ErrorKind::MalformedMarkup,
                    format!("header {buf:?} at byte {at}: {why}"),
                ));
                return;
            }
        };
        let content = match (h.recipient, h.channel) {
            (Some(r), _) => {
                let name = match r.strip_prefix("functions.") {
                    Some(n) => n,
                    None => {
                        let msg = format!("recipient {r:?} at byte {at} is not a function");
                        if !self.cfg.builtin_recipient {
                            out.push(Event::error(ErrorKind::UnknownTool, msg));
                            return;
                        }
                        out.push(Event::warning(WarningKind::BuiltinRecipient, msg));
                        r
                    }
                };
                if name.is_empty() {
                    out.push(Event::error(
                        ErrorKind::MissingName,
                        format!("recipient {r:?} at byte {at} has no function name"),
                    ));
                    return;
                }
                let index = self.next_index;
                self.next_index += 1;
                out.push(Event::CallStart {
                    index,
                    id: None,
                    name: name.to_string(),
                    server: None,
                });
                Content::Call(Box::new(Args {
                    json: JsonParser::new(JsonConfig {
                        max_depth: self.cfg.max_depth,
                        stop_byte: None,
                        build_value: false,
                    }),
                    opened: false,
                    index,
                    bytes: 0,
                }))
            }
            (None, Some("analysis")) => Content::Reasoning,
            (None, Some("final" | "commentary") | None) => Content::Text,
            (None, Some(other)) => {
                out.push(Event::error(
                    ErrorKind::MalformedMarkup,
                    format!("unknown channel {other:?} at byte {at}"),
                ));
                return;
            }
        };
        self.state = State::Content(content);
    }

    /// A terminator ends the message.
    fn close(&mut self, c: Content, m: Marker, out: &mut dyn Sink) {
        let at = self.pos;
        let is_call = matches!(c, Content::Call(_));
        let mismatch = matches!(
            (&c, m),
            (Content::Call(_), Marker::End | Marker::Return)
                | (Content::Text | Content::Reasoning, Marker::Call)
        );
        if mismatch {
            let msg = format!(
                "a {} message ends with {} at byte {at}",
                if is_call { "call" } else { "non-call" },
                marker_text(m)
            );
            if !self.cfg.call_terminator {
                out.push(Event::error(ErrorKind::MalformedMarkup, msg));
                return;
            }
            out.push(Event::warning(WarningKind::CallTerminator, msg));
        }
        if let Content::Call(a) = c {
            self.end_call(*a, Ending::Terminator, out);
        }
    }

    /// The next header begins inside a message's content.
    fn cut(&mut self, c: Content, at: u64, out: &mut dyn Sink) {
        match c {
            Content::Call(a) => self.end_call(*a, Ending::Cut, out),
            Content::Drop => {}
            Content::Text | Content::Reasoning => self.deviation(
                self.cfg.missing_end,
                WarningKind::MissingEnd,
                ErrorKind::MalformedMarkup,
                format!("a message ends at byte {at} without <|end|>"),
                out,
            ),
        }
    }

    /// Ends a call: `CallEnd` when its arguments are a complete JSON object.
    fn end_call(&mut self, mut a: Args, how: Ending, out: &mut dyn Sink) {
        let at = self.pos;
        let index = a.index;
        if !a.opened {
            let (kind, msg) = match how {
                Ending::Eof => (
                    ErrorKind::Unterminated,
                    format!("the stream ended before call {index}'s arguments"),
                ),
                _ => (
                    ErrorKind::EmptyArguments,
                    format!("call {index} has empty arguments (at byte {at})"),
                ),
            };
            return out.push(Event::error(kind, msg));
        }
        if !a.json.is_complete() || a.json.finish().is_err() {
            let (kind, msg) = match how {
                Ending::Eof => (
                    ErrorKind::Unterminated,
                    format!("the stream ended inside call {index}'s arguments"),
                ),
                _ => (
                    ErrorKind::InvalidJson,
                    format!(
                        "call {index}'s arguments end at byte {at} before the JSON is complete"
                    ),
                ),
            };
            return out.push(Event::error(kind, msg));
        }
        if how != Ending::Terminator {
            let msg = format!("call {index} has no <|call|> (at byte {at})");
            if !self.cfg.missing_call_end {
                let kind = if how == Ending::Eof {
                    ErrorKind::Unterminated
                } else {
                    ErrorKind::MalformedMarkup
                };
                return out.push(Event::error(kind, msg));
            }
            out.push(Event::warning(WarningKind::MissingCallEnd, msg));
        }
        out.push(Event::CallEnd { index });
    }

    fn piece(&mut self, p: Utf8Piece<'_>, out: &mut dyn Sink) {
        match p {
            Utf8Piece::Text(s) => self.feed_str(s, out),
            Utf8Piece::Invalid { offset } => {
                out.push(Event::invalid_utf8(offset));
                if let State::Content(Content::Call(_)) = self.state {
                    // Its arguments are not what the model wrote: the call is dropped.
                    self.state = State::Content(Content::Drop);
                }
                self.feed_str("\u{FFFD}", out);
            }
        }
    }
}

/// Streams a piece of a call's arguments: its delta, or why the call fails.
fn stream_args(
    a: &mut Args,
    mut s: &str,
    pos: u64,
    max: usize,
    out: &mut dyn Sink,
) -> Result<(), (ErrorKind, String)> {
    if !a.opened {
        let t = s.trim_start_matches([' ', '\t', '\n', '\r']);
        match t.as_bytes().first() {
            None => return Ok(()),
            Some(b'{') => {
                a.opened = true;
                s = t;
            }
            Some(_) => {
                return Err((
                    ErrorKind::InvalidJson,
                    format!(
                        "call {}'s arguments at byte {} are not a JSON object",
                        a.index,
                        pos + (s.len() - t.len()) as u64
                    ),
                ));
            }
        }
    }
    a.bytes += s.len();
    if a.bytes > max {
        return Err((
            ErrorKind::LimitExceeded,
            format!("call {}'s arguments are longer than {max} bytes", a.index),
        ));
    }
    match a.json.feed(s) {
        Ok(_) => {
            out.args_delta(a.index, s);
            Ok(())
        }
        Err(e) => {
            let kind = if e.kind == JsonErrorKind::DepthLimit {
                ErrorKind::LimitExceeded
            } else {
                ErrorKind::InvalidJson
            };
            Err((
                kind,
                format!(
                    "call {}'s arguments are not valid JSON: {} (near byte {pos})",
                    a.index, e.message
                ),
            ))
        }
    }
}

/// How a call message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Terminator,
    Cut,
    Eof,
}

fn marker_text(m: Marker) -> &'static str {
    match m {
        Marker::Start => START,
        Marker::Channel => CHANNEL,
        Marker::Constrain => CONSTRAIN,
        Marker::Message => MESSAGE,
        Marker::End => END,
        Marker::Call => CALL,
        Marker::Return => RETURN,
    }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        match self.utf8.ascii(chunk) {
            Some(s) => {
                if !self.content_fast(s, out) {
                    self.feed_str(s, out);
                }
            }
            None => {
                let mut utf8 = std::mem::take(&mut self.utf8);
                utf8.feed(chunk, &mut |p| self.piece(p, out));
                self.utf8 = utf8;
            }
        }
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        let mut utf8 = std::mem::take(&mut self.utf8);
        utf8.finish(&mut |p| self.piece(p, out));
        // A marker prefix at the very end is not a marker.
        let held = std::mem::take(&mut self.pending);
        self.content(&held, out);
        match std::mem::replace(&mut self.state, Self::turn_start()) {
            State::Between { .. } => {}
            State::Header { buf, at, spoiled } => {
                if !buf.trim().is_empty() && !spoiled {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!("the stream ended in the header at byte {at}, before <|message|>"),
                    ));
                }
            }
            State::Content(Content::Call(a)) => self.end_call(*a, Ending::Eof, out),
            State::Content(Content::Reasoning) => self.deviation(
                self.cfg.unterminated_reasoning,
                WarningKind::UnterminatedReasoning,
                ErrorKind::Unterminated,
                "the stream ended inside an analysis message".into(),
                out,
            ),
            // A final answer without `<|return|>` is the answer: servers strip stop tokens.
            State::Content(Content::Text | Content::Drop) => {}
        }
        self.utf8 = Utf8Decoder::new();
        self.pos = 0;
        self.next_index = 0;
    }
}

/// Renders a raw completion: one call message per call, then the text as the final message.
/// The first header has no `<|start|>assistant` (the prompt ends with it).
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    let has_marker = |s: &str| MARKERS.iter().find(|m| s.contains(*m)).copied();
    if let Some(m) = has_marker(text) {
        return Err(format!("the text contains the marker {m}"));
    }
    let mut out = String::new();
    let header = |out: &mut String| {
        if !out.is_empty() {
            out.push_str(START);
            out.push_str("assistant");
        }
        out.push_str(CHANNEL);
    };
    for c in calls {
        if c.name.is_empty() || c.name.contains('<') || c.name.chars().any(char::is_whitespace) {
            return Err(format!(
                "the name {:?} cannot be written as a recipient",
                c.name
            ));
        }
        if c.id.is_some() || c.server.is_some() {
            return Err("harmony calls carry no id or server".into());
        }
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        let args = c.arguments.to_string();
        if let Some(m) = has_marker(&args) {
            return Err(format!("the arguments contain the marker {m}"));
        }
        let name = format!("functions.{}", c.name);
        if name.len() + 64 > Config::default().max_header_bytes {
            return Err(format!("the name {:?} is too long for a header", c.name));
        }
        header(&mut out);
        out.push_str("commentary to=");
        out.push_str(&name);
        out.push(' ');
        out.push_str(CONSTRAIN);
        out.push_str("json");
        out.push_str(MESSAGE);
        out.push_str(&args);
        out.push_str(CALL);
    }
    if !text.is_empty() {
        header(&mut out);
        out.push_str("final");
        out.push_str(MESSAGE);
        out.push_str(text);
        out.push_str(RETURN);
    }
    Ok(out.into_bytes())
}

/// What sets harmony apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "harmony";
    const SUMMARY: &'static str = "OpenAI gpt-oss harmony messages: <|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{json}<|call|>";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// gpt-oss's special tokens that can appear in its output, with their o200k_harmony ids.
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken::new("<|startoftext|>", 199998),
        SpecialToken::new("<|endoftext|>", 199999),
        SpecialToken::new(RETURN, 200002),
        SpecialToken::new(CONSTRAIN, 200003),
        SpecialToken::new(CHANNEL, 200005),
        SpecialToken::new(START, 200006),
        SpecialToken::new(END, 200007),
        SpecialToken::new(MESSAGE, 200008),
        SpecialToken::new(CALL, 200012),
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(Parser::new(cfg));
}

/// The harmony format.
pub static FORMAT: Format = Format {
    vocabulary: Some("o200k_harmony"),
    // Message channels, not one text: guided output lives inside a channel (not modelled).
    guided: false,
    ..entry::format::<Declared>()
};

#[cfg(test)]
mod tests;
