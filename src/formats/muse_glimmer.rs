//! `muse_glimmer`: Meta Muse Glimmer recipient-routed messages whose tool messages carry ATEM
//! XML calls (`specs/muse_glimmer.md`).
//!
//! ```text
//!  to=self<|message|>REASONING<|eom|><|start|>assistant to=NAME<|message|><atem:function_calls>⏎<atem:invoke name="NAME">⏎<atem:parameter name="KEY">VALUE</atem:parameter>⏎</atem:invoke>⏎</atem:function_calls><|eom|><|start|>assistant to=user<|message|>TEXT<|eot|>
//! ```
//!
//! Two layers. The message layer (this file) finds the four special tokens with the shared
//! [`MarkerScanner`], buffers a header (bounded) up to `<|message|>` and routes the content by
//! its recipient, as harmony's message layer does: `self` is reasoning, `user` or none is text,
//! any other recipient a tool message. A tool message's content goes, as it streams, to the
//! tagged family's parser over the ATEM [`GRAMMAR`] (one parser per turn, ended at each
//! message's end), which types values by the tool's schema; its call indices are shifted to
//! count across the turn. Harmony's own state machine is not shared: its content layer is a
//! streaming JSON reader and its headers have channels, neither of which this format has.

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::decoded::{self, DecodedText};
use crate::formats::options::{Nest, Nested, Table};
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::typing::TypingOptions;
use crate::formats::{Format, SpecialToken, StreamParser, Typing};
use crate::lexers::has_byte;
use crate::lexers::marker::{MarkerScanner, Token};
use crate::lexers::utf8::Utf8Decoder;
use crate::tools::Tools;

/// `<|start|>`: begins a message (`assistant` and the recipient follow).
pub const START: &str = "<|start|>";
/// `<|message|>`: ends the header; the content follows.
pub const MESSAGE: &str = "<|message|>";
/// `<|eom|>`: ends a message; more messages follow.
pub const EOM: &str = "<|eom|>";
/// `<|eot|>`: ends a message and the turn.
pub const EOT: &str = "<|eot|>";

/// The message layer's delimiters, in the scanner's order.
pub const MARKERS: [&str; 4] = [START, MESSAGE, EOM, EOT];

/// The ATEM call grammar of a tool message: `<atem:invoke name="…">` calls in one
/// `<atem:function_calls>` block, quoted attribute names, values verbatim, `</atem:parameter>`
/// closing only before the next parameter, `</atem:invoke>` or the message's end.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        ("<atem:function_calls>", Role::BlockOpen),
        ("</atem:function_calls>", Role::BlockClose),
        ("<atem:invoke name=", Role::CallOpen),
        ("</atem:invoke>", Role::CallClose),
        ("<atem:parameter name=", Role::ParamOpen),
        ("</atem:parameter>", Role::ValueClose),
    ],
    call: CallForm::Attr,
    param: ParamForm::Attr,
    structural: true,
    follow_block_close: false,
    pad: false,
    string_attr: false,
    nested: false,
    block_end_warning: WarningKind::MissingSectionEnd,
    reasoning: None,
    native: Native::NONE,
    variants: &[],
};

config! {
    /// Leniencies of the message layer (each recovered deviation one named option) and limits;
    /// the ATEM body's are `body`'s (`tagged.NAME`, `typing.NAME`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A message cut by the next `<|start|>` without `<|eom|>`/`<|eot|>`, or a tool message
            /// with complete calls cut by the end of the stream, ends there with warning
            /// `missing_message_end` (vLLM and Dynamo recover so; losing the following call is
            /// the worst outcome, FreeToken#4); off → `malformed_markup`.
            missing_message_end,
            /// A header after a message's end without `<|start|>` (` to=user<|message|>`) is read
            /// with warning `missing_start`; off → `malformed_markup`.
            missing_start,
            /// Muse Spark's channel policy: recipient `commentary` is text and `developer` is
            /// dropped; off (Glimmer, vLLM's `MuseGlimmerToolParser`): both are tool recipients.
            /// Off by default.
            muse_spark_channels,
            /// A `self` message still open at the end of the stream is reasoning with warning
            /// `unterminated_reasoning`; off → `unterminated` (the reasoning is kept either way).
            unterminated_reasoning,
        }
        /// The ATEM body's options (the tagged family's `Config`).
        pub body: tagged::Config,
        /// Longest header (role and recipient) in bytes (`limit_exceeded` beyond).
        pub max_header_bytes: usize,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            missing_message_end: true,
            missing_start: true,
            muse_spark_channels: false,
            unterminated_reasoning: true,
            body: tagged::Config {
                // Glimmer's tool messages hold invokes without the block now and then; every
                // engine reads them (fact sheet §4).
                missing_wrapper: true,
                doubled_name: true,
                ..tagged::Config::default()
            },
            max_header_bytes: 1024,
        }
    }
}

/// Where a message's content goes.
enum Body {
    /// `to=user` or no recipient: visible text.
    Text,
    /// `to=self`: reasoning.
    Reasoning,
    /// Any other recipient: ATEM calls, read by the tagged parser; `first` is the first call
    /// index of this message.
    Tool { recipient: String, first: usize },
    /// A message that carries nothing for the consumer (a failed header, Spark's `developer`).
    Drop,
}

enum State {
    /// Collecting a header up to `<|message|>`. `after_end`: a message ended before it and no
    /// `<|start|>` came; `started`: `<|start|>` came.
    Header {
        buf: String,
        at: u64,
        spoiled: bool,
        started: bool,
        after_end: bool,
    },
    /// Inside a message's content.
    Content(Body),
}

/// The muse_glimmer streaming parser.
pub struct Parser {
    cfg: Config,
    utf8: Utf8Decoder,
    scan: MarkerScanner,
    state: State,
    /// The ATEM reader of tool messages (ended, and so reset, at each message's end).
    body: tagged::Parser,
    /// Offset in the decoded text of the next unprocessed character.
    pos: u64,
    /// The next call index of the turn.
    next_index: usize,
    /// A complete call ended in the current tool message.
    completed: bool,
    /// Text outside any message was reported in this turn.
    stray_reported: bool,
}

/// Forwards the ATEM reader's events: call indices shifted to count across the turn, a
/// recipient that names another tool noted.
struct Routed<'a> {
    out: &'a mut dyn Sink,
    first: usize,
    recipient: &'a str,
    next_index: &'a mut usize,
    completed: &'a mut bool,
}

impl Sink for Routed<'_> {
    fn push(&mut self, event: Event) {
        match event {
            Event::CallStart {
                index,
                id,
                name,
                server,
            } => {
                let index = self.first + index;
                *self.next_index = (*self.next_index).max(index + 1);
                let mismatch = !recipient_names(self.recipient, &name);
                let msg = format!(
                    "call {index} {name:?} is in a message to {:?}",
                    self.recipient
                );
                self.out.push(Event::CallStart {
                    index,
                    id,
                    name,
                    server,
                });
                if mismatch {
                    self.out
                        .push(Event::warning(WarningKind::RecipientMismatch, msg));
                }
            }
            Event::ArgsDelta { index, json } => self.out.push(Event::ArgsDelta {
                index: self.first + index,
                json,
            }),
            Event::CallEnd { index } => {
                *self.completed = true;
                self.out.push(Event::CallEnd {
                    index: self.first + index,
                });
            }
            other => self.out.push(other),
        }
    }

    fn args_delta(&mut self, index: usize, json: &str) {
        self.out.args_delta(self.first + index, json);
    }

    fn text(&mut self, text: &str) {
        self.out.text(text);
    }

    fn reasoning(&mut self, text: &str) {
        self.out.reasoning(text);
    }
}

/// Whether a message to `recipient` may hold a call of `name`: the same name, its namespace
/// (`ns`, `ns.*`, `name` = `ns.leaf`), or the doubled form `name.name` the template writes.
fn recipient_names(recipient: &str, name: &str) -> bool {
    let r = recipient.strip_suffix(".*").unwrap_or(recipient);
    r == name
        || tagged::doubled_leaf(r) == Some(name)
        || name
            .strip_prefix(r)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// A parsed header: the recipient, if any.
fn parse_header(buf: &str) -> Result<Option<&str>, String> {
    let mut recipient = None;
    for (i, w) in buf.split_whitespace().enumerate() {
        if let Some(r) = w.strip_prefix("to=") {
            if recipient.is_some() {
                return Err("the header names two recipients".into());
            }
            if r.is_empty() {
                return Err("`to=` names no recipient".into());
            }
            recipient = Some(r);
        } else if i == 0 && recipient.is_none() {
            if w != "assistant" {
                return Err(format!(
                    "the role is {w:?}: an assistant turn holds assistant messages"
                ));
            }
        } else {
            return Err(format!("unexpected {w:?} in the header"));
        }
    }
    if let Some(r) = recipient
        && r.contains('<')
    {
        return Err(format!("the recipient {r:?} holds `<`"));
    }
    Ok(recipient)
}

impl Parser {
    /// A parser with options `cfg`; `tools` type the values.
    pub fn new(cfg: Config, tools: &Tools) -> Parser {
        Parser {
            cfg,
            utf8: Utf8Decoder::new(),
            scan: MarkerScanner::new(&MARKERS),
            state: Self::turn_start(),
            body: tagged::Parser::new(&GRAMMAR, cfg.body, tools),
            pos: 0,
            next_index: 0,
            completed: false,
            stray_reported: false,
        }
    }

    /// A turn begins with the first header: the prompt ended with `<|start|>assistant`.
    fn turn_start() -> State {
        State::Header {
            buf: String::new(),
            at: 0,
            spoiled: false,
            started: true,
            after_end: false,
        }
    }

    fn header(&self, started: bool, after_end: bool) -> State {
        State::Header {
            buf: String::new(),
            at: self.pos,
            spoiled: false,
            started,
            after_end,
        }
    }

    fn read(&mut self, mut s: &str, out: &mut dyn Sink) {
        // The common streaming delta: content without `<` (every special token starts with
        // one) and nothing held back goes to the content as it is, without the scanner.
        if matches!(self.state, State::Content(_))
            && self.scan.held().is_empty()
            && !has_byte(s.as_bytes(), b'<')
        {
            self.content(s, out);
            self.pos += s.len() as u64;
            return;
        }
        while let Some(t) = self.scan.next(&mut s) {
            self.token(t, out);
        }
    }

    fn token(&mut self, t: Token<'_>, out: &mut dyn Sink) {
        match t {
            Token::Text(s) => {
                self.content(&s, out);
                self.pos += s.len() as u64;
            }
            Token::Marker(i) => {
                self.pos += MARKERS[i].len() as u64;
                self.marker(i, out);
            }
        }
    }

    /// Text that holds no special token, in the current state.
    fn content(&mut self, s: &str, out: &mut dyn Sink) {
        if s.is_empty() {
            return;
        }
        let at = self.pos;
        match &mut self.state {
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
            State::Content(Body::Text) => out.text(s),
            State::Content(Body::Reasoning) => out.reasoning(s),
            State::Content(Body::Drop) => {}
            State::Content(Body::Tool { recipient, first }) => {
                let mut routed = Routed {
                    out,
                    first: *first,
                    recipient,
                    next_index: &mut self.next_index,
                    completed: &mut self.completed,
                };
                DecodedText::feed_str(&mut self.body, s, &mut routed);
            }
        }
    }

    fn marker(&mut self, i: usize, out: &mut dyn Sink) {
        let at = self.pos - MARKERS[i].len() as u64;
        let m = MARKERS[i];
        let state = std::mem::replace(&mut self.state, Self::turn_start());
        match state {
            State::Header {
                buf,
                at: hat,
                spoiled,
                started,
                after_end,
            } => match m {
                MESSAGE => self.open(&buf, hat, spoiled, started, after_end, out),
                START => {
                    if !spoiled && !buf.trim().is_empty() {
                        self.stray(&buf, hat, out);
                    }
                    self.state = self.header(true, false);
                }
                _ => {
                    if !spoiled && (started || !buf.trim().is_empty()) {
                        out.push(Event::error(
                            ErrorKind::MalformedMarkup,
                            format!("{m} at byte {at} ends a header before <|message|>"),
                        ));
                    }
                    self.state = self.header(false, true);
                }
            },
            State::Content(body) => match m {
                EOM | EOT => {
                    self.close(body, out);
                    self.state = self.header(false, true);
                }
                START => {
                    let msg = format!("a message is cut at byte {at} by <|start|> without <|eom|>");
                    self.deviation(self.cfg.missing_message_end, msg, out);
                    self.close(body, out);
                    self.state = self.header(true, false);
                }
                _ => {
                    // A bare `<|message|>` inside content is framing, never data (SGLang and vLLM
                    // leak it into reasoning; fact sheet §3).
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!("<|message|> at byte {at} inside a message's content"),
                    ));
                    self.state = State::Content(body);
                }
            },
        }
    }

    /// Non-whitespace text outside any message: one error per turn.
    fn stray(&mut self, buf: &str, at: u64, out: &mut dyn Sink) {
        if !self.stray_reported {
            self.stray_reported = true;
            out.push(Event::error(
                ErrorKind::MalformedMarkup,
                format!(
                    "text {} outside a message at byte {at}",
                    crate::event::excerpt(buf.trim())
                ),
            ));
        }
    }

    /// A recovered deviation: a warning when `on`, else `malformed_markup`.
    fn deviation(&mut self, on: bool, msg: String, out: &mut dyn Sink) {
        if on {
            out.push(Event::warning(WarningKind::MissingMessageEnd, msg));
        } else {
            out.push(Event::error(ErrorKind::MalformedMarkup, msg));
        }
    }

    /// `<|message|>`: the header decides where the content goes.
    fn open(
        &mut self,
        buf: &str,
        at: u64,
        spoiled: bool,
        started: bool,
        after_end: bool,
        out: &mut dyn Sink,
    ) {
        self.state = State::Content(Body::Drop);
        if spoiled {
            return;
        }
        if after_end && !started {
            let msg = format!("a header at byte {at} without <|start|>");
            if !self.cfg.missing_start {
                return out.push(Event::error(ErrorKind::MalformedMarkup, msg));
            }
            out.push(Event::warning(WarningKind::MissingStart, msg));
        }
        let recipient = match parse_header(buf) {
            Ok(r) => r,
            Err(why) => {
                return out.push(Event::error(
                    ErrorKind::MalformedMarkup,
                    format!("header {buf:?} at byte {at}: {why}"),
                ));
            }
        };
        let body = match recipient {
            None | Some("user") => Body::Text,
            Some("self") => Body::Reasoning,
            Some("commentary") if self.cfg.muse_spark_channels => Body::Text,
            Some("developer") if self.cfg.muse_spark_channels => Body::Drop,
            Some(r) => {
                self.completed = false;
                Body::Tool {
                    recipient: r.to_string(),
                    first: self.next_index,
                }
            }
        };
        self.state = State::Content(body);
    }

    /// Ends a message's content: a tool message's ATEM reader is ended (what is open in it is
    /// `unterminated`).
    fn close(&mut self, body: Body, out: &mut dyn Sink) {
        if let Body::Tool { recipient, first } = body {
            let mut routed = Routed {
                out,
                first,
                recipient: &recipient,
                next_index: &mut self.next_index,
                completed: &mut self.completed,
            };
            self.body.finish(&mut routed);
        }
    }
}

impl DecodedText for Parser {
    fn decoder(&mut self) -> &mut Utf8Decoder {
        &mut self.utf8
    }

    fn feed_str(&mut self, s: &str, out: &mut dyn Sink) {
        self.read(s, out);
    }

    fn spoil(&mut self) {
        if let State::Content(Body::Tool { .. }) = self.state {
            DecodedText::spoil(&mut self.body);
        }
    }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        match self.utf8.ascii(chunk) {
            Some(s) => self.read(s, out),
            None => decoded::feed_utf8(self, chunk, out),
        }
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        decoded::finish_utf8(self, out);
        // A special token's beginning cut off by the end is text where it stands.
        while let Some(t) = self.scan.finish() {
            self.token(t, out);
        }
        self.scan.reset();
        match std::mem::replace(&mut self.state, Self::turn_start()) {
            State::Header {
                buf,
                at,
                spoiled,
                after_end,
                ..
            } => {
                if !spoiled && !buf.trim().is_empty() {
                    if after_end {
                        self.stray(&buf, at, out);
                    } else {
                        out.push(Event::error(
                            ErrorKind::MalformedMarkup,
                            format!(
                                "the stream ended in the header at byte {at}, before <|message|>"
                            ),
                        ));
                    }
                }
            }
            State::Content(Body::Reasoning) => {
                let msg = "the stream ended inside a `self` message";
                if self.cfg.unterminated_reasoning {
                    out.push(Event::warning(WarningKind::UnterminatedReasoning, msg));
                } else {
                    out.push(Event::error(ErrorKind::Unterminated, msg));
                }
            }
            State::Content(body @ Body::Tool { .. }) => {
                self.close(body, out);
                if self.completed {
                    let msg = "the stream ended in a tool message without <|eom|>".to_string();
                    self.deviation(self.cfg.missing_message_end, msg, out);
                }
            }
            // An answer without `<|eot|>` is the answer: servers strip stop tokens.
            State::Content(Body::Text | Body::Drop) => {}
        }
        self.utf8 = Utf8Decoder::new();
        self.pos = 0;
        self.next_index = 0;
        self.completed = false;
        self.stray_reported = false;
    }
}

/// Writes one call as a tool message's ATEM block.
fn write_call(out: &mut String, c: &ToolCall) {
    out.push_str("<atem:function_calls>\n<atem:invoke name=\"");
    out.push_str(&c.name);
    out.push_str("\">\n");
    for (k, v) in c.arguments.as_object().into_iter().flatten() {
        out.push_str("<atem:parameter name=\"");
        out.push_str(k);
        out.push_str("\">");
        out.push_str(&tagged::value_text(v));
        out.push_str("</atem:parameter>\n");
    }
    out.push_str("</atem:invoke>\n</atem:function_calls>");
}

/// Renders a raw completion as llama.cpp's grammar writes it: one tool message per call
/// (recipient = the call's name), then the text as the `user` message ending the turn. The
/// first header has no `<|start|>assistant` (the prompt ends with it). Refuses what would not
/// parse back to the same text and calls.
pub fn render(text: &str, calls: &[ToolCall], tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the special token {m}"));
    }
    let mut out = String::new();
    let header = |out: &mut String, recipient: &str| {
        if !out.is_empty() {
            out.push_str(START);
            out.push_str("assistant");
        }
        out.push_str(" to=");
        out.push_str(recipient);
        out.push_str(MESSAGE);
    };
    for c in calls {
        if c.id.is_some() || c.server.is_some() {
            return Err("muse_glimmer calls carry no id or server".into());
        }
        if c.name.is_empty()
            || c.name.contains(['<', '>', '"', '\''])
            || c.name.chars().any(char::is_whitespace)
        {
            return Err(format!("the name {:?} cannot be written", c.name));
        }
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        header(&mut out, &c.name);
        write_call(&mut out, c);
        out.push_str(EOM);
    }
    if !text.is_empty() || calls.is_empty() {
        header(&mut out, "user");
        out.push_str(text);
        out.push_str(EOT);
    }
    let parser = || Box::new(Parser::new(Config::default(), tools)) as Box<dyn StreamParser>;
    let r = crate::formats::read_back(parser, out.as_bytes(), calls);
    if !r.result.is_success() || r.result.text != text || !r.same_calls {
        return Err("the rendering does not parse back to the same text and calls".into());
    }
    Ok(out.into_bytes())
}

/// A tool message calling `typing_probe` whose parameter `v` is written as exactly `raw`.
fn typing_probe(raw: &str) -> Vec<u8> {
    format!(" to=typing_probe<|message|><atem:function_calls>\n<atem:invoke name=\"typing_probe\">\n<atem:parameter name=\"v\">{raw}</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eom|>")
        .into_bytes()
}

fn new_parser(tools: &Tools) -> Box<dyn StreamParser> {
    Box::new(Parser::new(Config::default(), tools))
}

fn build(cfg: Config, tools: &Tools) -> Box<dyn StreamParser> {
    Box::new(Parser::new(cfg, tools))
}

/// Both layers' delimiters: the special tokens and the ATEM tags.
fn markers(_tools: &Tools) -> Vec<String> {
    (MARKERS.iter().copied())
        .chain(GRAMMAR.markers.iter().map(|m| m.0))
        .map(str::to_string)
        .collect()
}

/// The ATEM body's options (`tagged.NAME`) and its typing's (`typing.NAME`).
static NESTED: [&dyn Nested<Config>; 2] = [
    &Nest {
        prefix: "tagged",
        options: tagged::Config::OPTIONS,
        field: |c: &Config| &c.body,
        field_mut: |c: &mut Config| &mut c.body,
    },
    &Nest {
        prefix: "typing",
        options: TypingOptions::OPTIONS,
        field: |c: &Config| &c.body.typing,
        field_mut: |c: &mut Config| &mut c.body.typing,
    },
];

static OPTIONS: Table<Config> = Table {
    default: Config::default,
    options: Config::OPTIONS,
    nested: &NESTED,
    reasoning: None,
    build,
};

/// The special tokens of the framing (ids unknown: no offline tokenizer of the model could be
/// had) and the ATEM tags llama.cpp keeps as vocabulary tokens.
const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken {
        text: START,
        id: None,
    },
    SpecialToken {
        text: MESSAGE,
        id: None,
    },
    SpecialToken {
        text: EOM,
        id: None,
    },
    SpecialToken {
        text: EOT,
        id: None,
    },
    SpecialToken {
        text: "<atem:function_calls>",
        id: None,
    },
    SpecialToken {
        text: "</atem:function_calls>",
        id: None,
    },
    SpecialToken {
        text: "</atem:parameter>",
        id: None,
    },
    SpecialToken {
        text: "</atem:invoke>",
        id: None,
    },
];

/// The muse_glimmer format.
pub static FORMAT: Format = Format {
    render: Some(render),
    typing: Some(Typing {
        table: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/typing.json")),
        transcript: typing_probe,
        key: "v",
        schema_tool: Some("typing_probe"),
        wire_probe: true,
    }),
    special_tokens: SPECIAL_TOKENS,
    ..Format::new(
        "muse_glimmer",
        "Meta Muse Glimmer: \" to=NAME<|message|><atem:function_calls><atem:invoke name=\\\"f\\\"><atem:parameter name=\\\"p\\\">raw</atem:parameter></atem:invoke></atem:function_calls><|eom|>\", reasoning to=self, text to=user",
        new_parser,
        markers,
        &OPTIONS,
    )
};

#[cfg(test)]
mod tests;
