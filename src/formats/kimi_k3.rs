//! `kimi_k3`: Kimi K3 XTML messages (`specs/kimi_k3.md`).
//!
//! ```text
//! REASONING<|close|>think<|sep|><|open|>response<|sep|>TEXT<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|><|open|>argument key="K" type="string"<|sep|>VALUE<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>
//! ```
//!
//! The markup is read by the XTML tokenizer (`lexers::xtml`); this module is the grammar on top
//! of it: which channel a body belongs to (`think` → reasoning, `response` → text, `tools` →
//! calls), how an argument's value becomes JSON (by its `type` attribute, or the tool's schema
//! in the llama.cpp dialect), and the leniencies. A string value streams as it arrives; any
//! other value is held to its close and read as JSON. An argument's close ends the value only
//! where the call can go on after it (the next argument, the call's close, the end of the
//! stream): the close and the whitespace after it are held until the next token decides,
//! never rescanned, so the look-ahead costs nothing per byte.

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind, excerpt};
use crate::formats::config::config;
use crate::formats::core::decoded::{self, DecodedText};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::options::{Nest, Nested, Table};
use crate::formats::tagged::escape_json_into;
use crate::formats::typing::{Lookup, PRIORITY, ParamType, SchemaTypes, TypingOptions, type_value};
use crate::formats::{Format, SpecialToken, StreamParser};
use crate::lexers::has_byte;
use crate::lexers::json::{JsonConfig, JsonErrorKind, JsonParser, SERDE_JSON_MAX_DEPTH};
use crate::lexers::utf8::Utf8Decoder;
use crate::lexers::xtml::{
    self, CLOSE, Element, Malformed, Mode, OPEN, SEP, Token, XtmlConfig, XtmlLexer,
};
use crate::tools::Tools;
use serde_json::Value;

/// `<|end_of_msg|>`: ends a message (the turn's stop token).
pub const END_OF_MSG: &str = "<|end_of_msg|>";

/// The special tokens that are markup on their own, besides the XTML three.
const SPECIALS: &[&str] = &[END_OF_MSG];

config! {
    /// The thinking switches and the reasoning leniencies of the `think` channel (options
    /// `reasoning.NAME`, named as the shared reasoning layer's, whose meaning they keep).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Reasoning {
        options {
            /// Thinking mode, the request's `thinking` switch: on, the generation prompt opens `think`
            /// (see `starts_inside`); off, it opens `response`, so the turn starts in the response
            /// channel. A think channel the model writes anyway is reasoning either way.
            enabled,
            /// With thinking on, each turn starts inside the `think` channel the prompt opened (the
            /// template's default); off, it starts outside every channel (a raw transcript with its own
            /// openers, `starting_state = "none"`).
            starts_inside,
            /// Call markup inside `think` (`call`, `argument`, `json` elements, a `tools` close) stays
            /// reasoning, verbatim, with a warning; off: with a `malformed_markup` error. Either way it
            /// is never a call.
            call_in_reasoning,
            /// A `think` channel still open at the end of the turn or of the message is reasoning with
            /// a warning; off: an `unterminated` error (the reasoning is kept either way).
            unterminated_reasoning,
            /// A `think` close outside the think channel is dropped with a warning; off: dropped with a
            /// `malformed_markup` error.
            stray_reasoning_end,
            /// A `response` or `tools` opener inside `think` ends the reasoning there, with a warning
            /// (outputs that skip the think close, vllm-ascend#13204); off: the opener is markup inside
            /// reasoning, kept verbatim as `call_in_reasoning` says.
            implicit_reasoning_end,
        }
    }
}

impl Default for Reasoning {
    fn default() -> Self {
        Reasoning {
            enabled: true,
            starts_inside: true,
            call_in_reasoning: true,
            unterminated_reasoning: true,
            stray_reasoning_end: true,
            implicit_reasoning_end: true,
        }
    }
}

config! {
    /// Leniencies (each recovered deviation is one named option, on by default), the schema
    /// typing dialect (off by default), and limits.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// Whitespace between a special token and its tag, or before `<|sep|>` (`<|open|> tools
            /// <|sep|>`: vLLM's detokenizer with `spaces_between_special_tokens`), is read as the marker
            /// with a warning; off: such a marker is malformed (`malformed_markup`) and means nothing.
            spaced_marker,
            /// Text outside every channel, and a `response` close whose open never came (the prompt
            /// opened it), are kept as text with a warning; off: `malformed_markup`, the text dropped.
            text_outside_channel,
            /// A channel (`response`, `tools`) or the message ended by what follows (the next channel, the
            /// message's close, the end of the stream) instead of its own close ends there, with a
            /// warning; off: `malformed_markup` (`unterminated` at the end of the stream).
            missing_section_end,
            /// A call ended without its own close, by the next call or the section's or message's close,
            /// is kept with a warning; off: `malformed_markup`, the call dropped.
            missing_call_close,
            /// A `call` element outside a `tools` section is a call, with a warning (Dynamo reads it;
            /// vLLM, SGLang and the gateway look for calls only after the tools opener); off:
            /// `malformed_markup`, the call dropped.
            missing_wrapper,
            /// An argument's close followed by anything but the next argument, the call's end or the end
            /// of the stream is value content, with a warning (Dynamo's structural rule; the other
            /// engines cut the value there); off: `malformed_markup`, the call dropped.
            close_tag_in_value,
            /// Non-whitespace text between the calls of a `tools` section is kept as text, with a
            /// warning (the engines drop it); off: `malformed_markup`, the text dropped.
            text_in_section,
            /// Dialect: values are typed by the tool's schema (`typing.*` options), their `type`
            /// attribute ignored, as llama.cpp's grammar reads them. Off by default.
            schema_typing,
        }
        /// The `think` channel's switches and leniencies.
        pub reasoning: Reasoning,
        /// The schema typing's leniencies (with `schema_typing`).
        pub typing: TypingOptions,
        /// Longest argument value or JSON block in bytes (`limit_exceeded` beyond).
        pub max_value_bytes: usize,
        /// Longest element header (tag and attributes) in bytes (`malformed_markup` beyond).
        pub max_header_bytes: usize,
        /// Deepest JSON nesting of a typed value or JSON block (`limit_exceeded` beyond).
        pub max_depth: usize,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            spaced_marker: true,
            text_outside_channel: true,
            missing_section_end: true,
            missing_call_close: true,
            missing_wrapper: true,
            close_tag_in_value: true,
            text_in_section: true,
            schema_typing: false,
            reasoning: Reasoning::default(),
            typing: TypingOptions::default(),
            max_value_bytes: 64 << 20,
            max_header_bytes: 4096,
            max_depth: SERDE_JSON_MAX_DEPTH,
        }
    }
}

/// How an argument's value becomes JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueMode {
    /// A string: the raw text, streamed.
    Stream,
    /// Held and read as JSON of the kinds its `type` attribute names.
    Declared(ParamType),
    /// Held and typed by the schema (`schema_typing`).
    Schema(ParamType),
}

#[derive(Debug)]
struct Arg {
    key: String,
    mode: ValueMode,
    buf: String,
    bytes: usize,
}

/// A JSON block's arguments as they stream.
#[derive(Debug)]
struct Block {
    json: JsonParser,
    /// The first non-blank byte (`{`) arrived.
    opened: bool,
    bytes: usize,
}

#[derive(Debug)]
struct Call {
    index: usize,
    name: String,
    keys: Vec<String>,
    /// `{` of the arguments object was written.
    opened: bool,
    /// The arguments came as a JSON block, now closed.
    block_done: bool,
    /// An invalid byte fell inside it: it never ends.
    spoiled: bool,
}

/// Where the parser stands.
#[derive(Debug)]
enum St {
    /// Outside every channel (in or after the message).
    Outside,
    /// In the `think` channel.
    Think,
    /// In the `response` channel.
    Response,
    /// In a `tools` section, between calls.
    Tools,
    /// In a call, between its arguments.
    Call,
    /// In an argument's value (the lexer reads it raw).
    Value,
    /// After an argument's close: its text and the whitespace after it, until what follows
    /// decides whether it was the close.
    AfterValue(String),
    /// In a call's JSON block (the lexer reads it as raw JSON).
    Block(Box<Block>),
    /// After a failed call: everything up to its end is dropped.
    Skip,
    /// After a failed call, inside one of its raw bodies (up to that body's close).
    SkipRaw,
    /// In a message of another role: dropped up to its close.
    Foreign,
}

/// Text between markers outside channels or between calls: a whitespace-only run is not text.
#[derive(Debug, Default)]
struct Segment {
    ws: String,
    /// The segment's text was accepted (or refused, when `refused`).
    content: bool,
    refused: bool,
}

/// The kimi_k3 streaming parser.
pub struct Parser {
    cfg: Config,
    types: SchemaTypes,
    has_tools: bool,
    lex: XtmlLexer,
    utf8: Utf8Decoder,
    st: St,
    /// Nothing has been read in this turn yet: an explicit message or channel opener may
    /// replace the state the prompt left open.
    fresh: bool,
    /// A `tools` section is open.
    in_tools: bool,
    /// A channel was opened (or the turn started in one) and the message's close not seen.
    msg_open: bool,
    seg: Segment,
    /// Call markup was reported in the current think block.
    call_reported: bool,
    spaced_reported: bool,
    next_index: usize,
    call: Option<Call>,
    arg: Option<Arg>,
    scratch: String,
}

impl Parser {
    /// A parser with options `cfg`; `tools` type values in the schema dialect and name the
    /// unknown tools.
    pub fn new(cfg: Config, tools: &Tools) -> Parser {
        let mut p = Parser {
            cfg,
            types: SchemaTypes::new(tools),
            has_tools: !tools.is_empty(),
            lex: XtmlLexer::new(XtmlConfig {
                specials: SPECIALS,
                max_header_bytes: cfg.max_header_bytes,
            }),
            utf8: Utf8Decoder::new(),
            st: St::Outside,
            fresh: true,
            in_tools: false,
            msg_open: false,
            seg: Segment::default(),
            call_reported: false,
            spaced_reported: false,
            next_index: 0,
            call: None,
            arg: None,
            scratch: String::new(),
        };
        p.start_turn();
        p
    }

    /// The state the generation prompt leaves the turn in.
    fn start_turn(&mut self) {
        let r = self.cfg.reasoning;
        self.st = if !r.enabled {
            St::Response
        } else if r.starts_inside {
            St::Think
        } else {
            St::Outside
        };
        self.msg_open = !matches!(self.st, St::Outside);
        self.fresh = true;
        self.in_tools = false;
        self.seg = Segment::default();
        self.call_reported = false;
        self.spaced_reported = false;
        self.next_index = 0;
        self.call = None;
        self.arg = None;
        self.lex.reset();
    }

    #[inline]
    fn feed_str(&mut self, mut s: &str, out: &mut dyn Sink) {
        // A piece without `<` (every special token starts with one), nothing held: body text
        // whatever the lexer would say, the common streaming delta, without its machinery.
        if self.lex.is_clean() && !s.is_empty() && !has_byte(s.as_bytes(), b'<') {
            match self.st {
                St::Value => return self.value_text(s, out),
                St::Response => {
                    self.fresh = false;
                    return out.text(s);
                }
                St::Think => {
                    self.fresh = false;
                    return out.reasoning(s);
                }
                _ => {}
            }
        }
        while let Some(t) = self.lex.next(&mut s) {
            self.token(t, out);
        }
    }

    fn token(&mut self, t: Token<'_>, out: &mut dyn Sink) {
        match t {
            Token::Text(s) => self.text(&s, out),
            Token::Open(e) => {
                if self.marker_ok(&e, out) {
                    self.open(e, out);
                } else {
                    self.not_a_marker(&e.raw, out);
                }
            }
            Token::Close(e) => {
                if self.marker_ok(&e, out) {
                    self.close(e, out);
                } else {
                    self.not_a_marker(&e.raw, out);
                }
            }
            Token::Special(_, at) => self.end_of_msg(at, out),
            Token::Malformed { raw, why, at } => self.malformed(&raw, why, at, out),
        }
        self.fresh = false;
    }

    /// A spaced marker: read with a warning (once per turn), or not a marker.
    fn marker_ok(&mut self, e: &Element, out: &mut dyn Sink) -> bool {
        if !e.spaced {
            return true;
        }
        if self.cfg.spaced_marker {
            if !self.spaced_reported {
                self.spaced_reported = true;
                out.push(Event::warning(
                    WarningKind::SpacedMarker,
                    format!("spaced marker {} at byte {}", excerpt(&e.raw), e.at),
                ));
            }
            return true;
        }
        out.push(Event::error(
            ErrorKind::MalformedMarkup,
            format!(
                "spaced marker {} at byte {} (spaced_marker is off)",
                excerpt(&e.raw),
                e.at
            ),
        ));
        false
    }

    /// Markup that means nothing: inside a raw body it is content, elsewhere dropped.
    fn not_a_marker(&mut self, raw: &str, out: &mut dyn Sink) {
        match self.st {
            St::Value | St::Block(_) => self.text(raw, out),
            St::AfterValue(_) => self.reopen(raw, out),
            _ => {}
        }
    }

    // ---- text ----

    fn text(&mut self, s: &str, out: &mut dyn Sink) {
        if s.is_empty() {
            return;
        }
        match &mut self.st {
            St::Outside => self.seg_text(s, false, out),
            St::Tools => self.seg_text(s, true, out),
            St::Think => out.reasoning(s),
            St::Response => out.text(s),
            St::Call => {
                if !is_blank(s) {
                    let msg = format!("text {} between a call's arguments", excerpt(s));
                    self.fail(ErrorKind::MalformedMarkup, msg, out);
                }
            }
            St::Value => self.value_text(s, out),
            St::AfterValue(held) => {
                if is_blank(s) {
                    held.push_str(s);
                    if held.len() > self.cfg.max_value_bytes {
                        let msg = "whitespace after an argument is over the limit".to_string();
                        self.fail(ErrorKind::LimitExceeded, msg, out);
                    }
                } else {
                    self.reopen(s, out);
                }
            }
            St::Block(_) => self.block_text(s, out),
            St::Skip | St::SkipRaw | St::Foreign => {}
        }
    }

    /// Text outside channels (`in_tools`: between calls): a whitespace-only run is dropped at
    /// the next marker; anything else is text with a warning, or refused.
    fn seg_text(&mut self, s: &str, in_tools: bool, out: &mut dyn Sink) {
        if self.seg.refused {
            return;
        }
        if self.seg.content {
            return out.text(s);
        }
        if is_blank(s) {
            return self.seg.ws.push_str(s);
        }
        let (on, kind, what) = if in_tools {
            (
                self.cfg.text_in_section,
                WarningKind::TextInSection,
                "between the calls of a tools section",
            )
        } else {
            (
                self.cfg.text_outside_channel,
                WarningKind::TextOutsideChannel,
                "outside every channel",
            )
        };
        let msg = format!("text {} {what}", excerpt(s));
        if !on {
            out.push(Event::error(ErrorKind::MalformedMarkup, msg));
            self.seg.refused = true;
            self.seg.ws.clear();
            return;
        }
        out.push(Event::warning(kind, msg));
        self.seg.content = true;
        let ws = std::mem::take(&mut self.seg.ws);
        out.text(&ws);
        out.text(s);
    }

    /// Markup ends a segment: a whitespace-only one is dropped.
    fn boundary(&mut self) {
        self.seg = Segment::default();
    }

    // ---- markers ----

    fn open(&mut self, e: Element, out: &mut dyn Sink) {
        match &self.st {
            St::Outside => self.open_outside(e, out),
            St::Think => {
                if self.fresh && is_channel_or_message(&e.tag) {
                    self.st = St::Outside;
                    return self.open(e, out);
                }
                match e.tag.as_str() {
                    "response" | "tools" if self.cfg.reasoning.implicit_reasoning_end => {
                        out.push(Event::warning(
                            WarningKind::ImplicitReasoningEnd,
                            format!(
                                "{} at byte {} ends the think channel (its close is missing)",
                                excerpt(&e.raw),
                                e.at
                            ),
                        ));
                        self.st = St::Outside;
                        self.open(e, out);
                    }
                    "response" | "tools" | "call" | "argument" | "json" => {
                        self.call_in_reasoning(&e, out)
                    }
                    _ => self.misplaced(&e, "inside the think channel", out),
                }
            }
            St::Response => {
                if self.fresh && is_channel_or_message(&e.tag) {
                    self.st = St::Outside;
                    return self.open(e, out);
                }
                match e.tag.as_str() {
                    "tools" | "think" | "response" | "call" => {
                        self.section_cut("response", &e, out);
                        self.open(e, out);
                    }
                    _ => self.misplaced(&e, "inside the response channel", out),
                }
            }
            St::Tools => match e.tag.as_str() {
                "call" => {
                    self.boundary();
                    self.start_call(&e, out);
                }
                "tools" | "think" | "response" => {
                    self.section_cut("tools", &e, out);
                    self.open(e, out);
                }
                _ => self.misplaced(&e, "between calls", out),
            },
            St::Call => match e.tag.as_str() {
                "argument" => self.begin_arg(&e, out),
                "json" => self.begin_block(&e, out),
                "call" | "tools" | "think" | "response" => {
                    self.call_cut(&e, out);
                    self.open(e, out);
                }
                _ => {
                    let msg = format!("{} at byte {} inside a call", excerpt(&e.raw), e.at);
                    self.fail(ErrorKind::MalformedMarkup, msg, out);
                }
            },
            St::AfterValue(_) => {
                if matches!(e.tag.as_str(), "argument" | "json" | "call") {
                    self.confirm_value(out);
                    self.open(e, out);
                } else {
                    self.reopen(&e.raw, out);
                }
            }
            // The lexer reads these raw: no opener reaches them.
            St::Value | St::Block(_) | St::SkipRaw => self.text(&e.raw, out),
            St::Skip => match e.tag.as_str() {
                "argument" | "json" => {
                    // Its body is raw: a close inside it must not end the skip.
                    self.set_raw(if e.tag == "json" { "json" } else { "argument" });
                    self.st = St::SkipRaw;
                }
                "call" | "tools" | "think" | "response" => {
                    self.st = self.section_state();
                    self.open(e, out);
                }
                _ => {}
            },
            St::Foreign => {}
        }
    }

    fn open_outside(&mut self, e: Element, out: &mut dyn Sink) {
        self.boundary();
        match e.tag.as_str() {
            "message" => match e.attr("role") {
                Some("assistant") => self.msg_open = true,
                role => {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!(
                            "a message of role {:?} at byte {} inside the assistant's turn",
                            role.unwrap_or(""),
                            e.at
                        ),
                    ));
                    self.st = St::Foreign;
                }
            },
            "think" => {
                self.msg_open = true;
                self.call_reported = false;
                self.st = St::Think;
            }
            "response" => {
                self.msg_open = true;
                self.st = St::Response;
            }
            "tools" => {
                self.msg_open = true;
                self.in_tools = true;
                self.st = St::Tools;
            }
            "call" => {
                let msg = format!("a call at byte {} outside a tools section", e.at);
                if self.cfg.missing_wrapper {
                    out.push(Event::warning(WarningKind::MissingWrapper, msg));
                    self.msg_open = true;
                    self.start_call(&e, out);
                } else {
                    out.push(Event::error(ErrorKind::MalformedMarkup, msg));
                    self.st = St::Skip;
                }
            }
            "argument" | "json" => {
                out.push(Event::error(
                    ErrorKind::MalformedMarkup,
                    format!("{} at byte {} outside a call", excerpt(&e.raw), e.at),
                ));
                // Its body is raw text up to its close, dropped with it.
                self.set_raw(if e.tag == "json" { "json" } else { "argument" });
                self.st = St::SkipRaw;
            }
            _ => self.misplaced(&e, "outside the channels", out),
        }
    }

    fn close(&mut self, e: Element, out: &mut dyn Sink) {
        let tag = e.tag.as_str();
        match &self.st {
            St::Outside => {
                self.boundary();
                match tag {
                    "message" => self.message_end(),
                    "think" => self.stray_think_close(&e, out),
                    "response" => {
                        let msg = format!(
                            "a response close at byte {} without its open (the prompt opened it?)",
                            e.at
                        );
                        self.deviation(
                            self.cfg.text_outside_channel,
                            WarningKind::TextOutsideChannel,
                            ErrorKind::MalformedMarkup,
                            msg,
                            out,
                        );
                    }
                    _ => self.misplaced(&e, "outside the channels", out),
                }
            }
            St::Think => match tag {
                "think" => self.st = St::Outside,
                "message" => {
                    self.unterminated_think(out);
                    self.message_end();
                }
                "call" | "argument" | "json" | "tools" => self.call_in_reasoning(&e, out),
                _ => self.misplaced(&e, "inside the think channel", out),
            },
            St::Response => match tag {
                "response" => self.st = St::Outside,
                "think" => self.stray_think_close(&e, out),
                "message" => {
                    self.section_cut("response", &e, out);
                    self.message_end();
                }
                _ => self.misplaced(&e, "inside the response channel", out),
            },
            St::Tools => {
                self.boundary();
                match tag {
                    "tools" => {
                        self.in_tools = false;
                        self.st = St::Outside;
                    }
                    "message" => {
                        self.section_cut("tools", &e, out);
                        self.message_end();
                    }
                    _ => self.misplaced(&e, "between calls", out),
                }
            }
            St::Call => match tag {
                "call" => self.end_call(out),
                "tools" | "message" => {
                    self.call_cut(&e, out);
                    self.close(e, out);
                }
                _ => {
                    let msg = format!("{} at byte {} inside a call", excerpt(&e.raw), e.at);
                    self.fail(ErrorKind::MalformedMarkup, msg, out);
                }
            },
            St::Value => {
                self.lex.set_mode(Mode::Markup);
                self.st = St::AfterValue(e.raw);
            }
            St::AfterValue(_) => match tag {
                "call" | "tools" | "message" => {
                    self.confirm_value(out);
                    self.close(e, out);
                }
                "argument" => {
                    // The held close was content; this one is the candidate now.
                    self.reopen("", out);
                    self.lex.set_mode(Mode::Markup);
                    self.st = match self.st {
                        St::Value => St::AfterValue(e.raw),
                        // Refused (close_tag_in_value off): this close ends the dropped value.
                        _ => St::Skip,
                    };
                }
                _ => self.reopen(&e.raw, out),
            },
            St::Block(_) => self.end_block(out),
            St::SkipRaw => {
                self.lex.set_mode(Mode::Markup);
                self.st = St::Skip;
            }
            St::Skip => match tag {
                "call" => self.st = self.section_state(),
                "tools" => {
                    self.in_tools = false;
                    self.st = St::Outside;
                }
                "message" => {
                    self.st = self.section_state();
                    self.close(e, out);
                }
                _ => {}
            },
            St::Foreign => {
                if tag == "message" {
                    self.st = St::Outside;
                }
            }
        }
    }

    /// `<|end_of_msg|>`: the message ends, whatever is still open.
    fn end_of_msg(&mut self, at: u64, out: &mut dyn Sink) {
        let e = Element {
            tag: "message".into(),
            attrs: Vec::new(),
            spaced: false,
            raw: END_OF_MSG.into(),
            at,
        };
        match self.st {
            St::Outside => {
                self.boundary();
                self.message_end();
            }
            St::Value | St::Block(_) | St::SkipRaw => self.text(END_OF_MSG, out),
            St::Foreign => self.st = St::Outside,
            _ => self.close(e, out),
        }
    }

    fn message_end(&mut self) {
        self.msg_open = false;
        self.in_tools = false;
        self.st = St::Outside;
    }

    /// Markup that is not an element.
    fn malformed(&mut self, raw: &str, why: Malformed, at: u64, out: &mut dyn Sink) {
        match self.st {
            St::AfterValue(_) => return self.reopen(raw, out),
            St::Value | St::Block(_) | St::SkipRaw => return self.text(raw, out),
            St::Skip | St::Foreign => return,
            St::Outside | St::Tools => self.boundary(),
            _ => {}
        }
        let msg = format!("{} at byte {at}: {}", excerpt(raw), why.message());
        if matches!(self.st, St::Call) {
            return self.fail(ErrorKind::MalformedMarkup, msg, out);
        }
        out.push(Event::error(ErrorKind::MalformedMarkup, msg));
    }

    /// An element where it means nothing: an error, and it is dropped.
    fn misplaced(&mut self, e: &Element, where_: &str, out: &mut dyn Sink) {
        out.push(Event::error(
            ErrorKind::MalformedMarkup,
            format!("{} at byte {} {where_}", excerpt(&e.raw), e.at),
        ));
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

    /// A think close where no think channel is open (the prompt opened none): dropped.
    fn stray_think_close(&mut self, e: &Element, out: &mut dyn Sink) {
        let msg = format!("a think close at byte {} outside the think channel", e.at);
        self.deviation(
            self.cfg.reasoning.stray_reasoning_end,
            WarningKind::StrayReasoningEnd,
            ErrorKind::MalformedMarkup,
            msg,
            out,
        );
    }

    /// Call markup inside `think`: reasoning, verbatim.
    fn call_in_reasoning(&mut self, e: &Element, out: &mut dyn Sink) {
        if !self.call_reported {
            self.call_reported = true;
            let msg = format!(
                "call markup {} at byte {} inside the think channel is not a call",
                excerpt(&e.raw),
                e.at
            );
            self.deviation(
                self.cfg.reasoning.call_in_reasoning,
                WarningKind::CallInReasoning,
                ErrorKind::MalformedMarkup,
                msg,
                out,
            );
        }
        out.reasoning(&e.raw);
    }

    fn unterminated_think(&mut self, out: &mut dyn Sink) {
        self.deviation(
            self.cfg.reasoning.unterminated_reasoning,
            WarningKind::UnterminatedReasoning,
            ErrorKind::Unterminated,
            "the think channel is not closed".into(),
            out,
        );
    }

    /// A channel ended by `e` instead of its own close.
    fn section_cut(&mut self, what: &str, e: &Element, out: &mut dyn Sink) {
        let msg = format!("the {what} channel ends at byte {} without its close", e.at);
        self.deviation(
            self.cfg.missing_section_end,
            WarningKind::MissingSectionEnd,
            ErrorKind::MalformedMarkup,
            msg,
            out,
        );
        if what == "tools" {
            self.in_tools = false;
        }
        self.boundary();
        self.st = St::Outside;
    }

    /// The state after a call: its section, or outside.
    fn section_state(&self) -> St {
        if self.in_tools {
            St::Tools
        } else {
            St::Outside
        }
    }

    fn set_raw(&mut self, tag: &'static str) {
        self.lex.set_mode(Mode::Raw {
            tag,
            json: tag == "json",
        });
    }

    // ---- calls ----

    fn start_call(&mut self, e: &Element, out: &mut dyn Sink) {
        let name = match e.attr("tool") {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => {
                out.push(Event::error(
                    ErrorKind::MissingName,
                    format!("the call at byte {} names no tool", e.at),
                ));
                self.st = St::Skip;
                return;
            }
        };
        let index = self.next_index;
        self.next_index += 1;
        // No id: the wire's `index` is the call's position, which its order already says, and
        // no `NAME:INDEX` text occurs in the transcript (specs/kimi_k3.md §4.6, §6).
        out.push(Event::CallStart {
            index,
            id: None,
            name: name.clone(),
            server: None,
        });
        if self.has_tools && !self.types.knows_tool(&name) {
            out.push(Event::warning(
                WarningKind::UnknownTool,
                format!("{name:?} is not a declared tool"),
            ));
        }
        self.call = Some(Call {
            index,
            name,
            keys: Vec::new(),
            opened: false,
            block_done: false,
            spoiled: false,
        });
        self.st = St::Call;
    }

    /// The call ends without its own close (`e` follows it).
    fn call_cut(&mut self, e: &Element, out: &mut dyn Sink) {
        let msg = format!("a call ends at byte {} without its close", e.at);
        if self.cfg.missing_call_close {
            out.push(Event::warning(WarningKind::MissingCallClose, msg));
            self.end_call(out);
        } else {
            out.push(Event::error(ErrorKind::MalformedMarkup, msg));
            self.call = None;
            self.st = self.section_state();
        }
    }

    fn end_call(&mut self, out: &mut dyn Sink) {
        self.st = self.section_state();
        self.boundary();
        let Some(c) = self.call.take() else {
            return;
        };
        if c.spoiled {
            return;
        }
        if !c.block_done {
            out.args_delta(c.index, if c.opened { "}" } else { "{}" });
        }
        out.push(Event::CallEnd { index: c.index });
    }

    /// The current call fails: an error, no `CallEnd`, the rest of it dropped.
    fn fail(&mut self, kind: ErrorKind, msg: String, out: &mut dyn Sink) {
        out.push(Event::error(kind, msg));
        self.call = None;
        self.arg = None;
        self.st = match self.st {
            // Inside a raw body the lexer goes on reading it raw, up to its close.
            St::Value | St::Block(_) => St::SkipRaw,
            _ => {
                self.lex.set_mode(Mode::Markup);
                St::Skip
            }
        };
    }

    /// Writes the key of the next argument (`{"key":` or `,"key":`).
    fn key_prefix(&mut self, key: &str, string: bool) -> Option<usize> {
        let c = self.call.as_mut()?;
        self.scratch.clear();
        self.scratch.push_str(if c.opened { ",\"" } else { "{\"" });
        c.opened = true;
        escape_json_into(&mut self.scratch, key);
        self.scratch.push_str(if string { "\":\"" } else { "\":" });
        (!c.spoiled).then_some(c.index)
    }

    fn begin_arg(&mut self, e: &Element, out: &mut dyn Sink) {
        let Some(c) = &mut self.call else {
            return;
        };
        let Some(key) = e.attr("key") else {
            self.set_raw("argument");
            self.st = St::Value;
            let msg = format!("the argument at byte {} has no key", e.at);
            return self.fail(ErrorKind::MalformedMarkup, msg, out);
        };
        if c.block_done {
            self.set_raw("argument");
            self.st = St::Value;
            let msg = format!("an argument at byte {} after the call's JSON block", e.at);
            return self.fail(ErrorKind::MalformedMarkup, msg, out);
        }
        if c.keys.iter().any(|k| k == key) {
            out.push(Event::warning(
                WarningKind::DuplicateParameter,
                format!("argument {key:?} given twice; the last one counts"),
            ));
        }
        c.keys.push(key.to_string());
        let name = c.name.clone();
        let mode = self.value_mode(&name, key, e.attr("type"), out);
        if mode == ValueMode::Stream
            && let Some(index) = self.key_prefix(key, true)
        {
            out.args_delta(index, &self.scratch);
        }
        self.arg = Some(Arg {
            key: key.to_string(),
            mode,
            buf: String::new(),
            bytes: 0,
        });
        self.set_raw("argument");
        self.st = St::Value;
    }

    /// How the value of `key` becomes JSON: by its `type` attribute (missing: string), or in
    /// the schema dialect by the tool's schema; a declared type the schema does not allow is
    /// noted.
    fn value_mode(
        &self,
        name: &str,
        key: &str,
        declared: Option<&str>,
        out: &mut dyn Sink,
    ) -> ValueMode {
        let lookup = if self.has_tools {
            self.types.lookup(name, key)
        } else {
            Lookup::UnknownTool
        };
        if self.cfg.schema_typing {
            match &lookup {
                Lookup::UnknownParam => out.push(Event::warning(
                    WarningKind::UnknownParameter,
                    format!("{name:?} declares no parameter {key:?}; kept as a string"),
                )),
                Lookup::Unreadable(e) => {
                    out.push(Event::warning(WarningKind::UnreadableSchema, e.to_string()))
                }
                _ => {}
            }
            let pt = lookup.param_type();
            return if pt.is_string_only() {
                ValueMode::Stream
            } else {
                ValueMode::Schema(pt)
            };
        }
        let declared = declared.unwrap_or("string");
        let pt = ParamType::named(declared).unwrap_or(ParamType::ANY);
        if let Lookup::Typed(schema) = lookup
            && !PRIORITY.iter().any(|k| pt.has(*k) && schema.has(*k))
        {
            out.push(Event::warning(
                WarningKind::SchemaTypeMismatch,
                format!(
                    "argument {key:?} says type=\"{declared}\" but its schema says {}",
                    schema.describe()
                ),
            ));
        }
        if declared == "string" {
            ValueMode::Stream
        } else {
            ValueMode::Declared(pt)
        }
    }

    #[inline]
    fn value_text(&mut self, s: &str, out: &mut dyn Sink) {
        let (Some(a), Some(c)) = (&mut self.arg, &self.call) else {
            return;
        };
        a.bytes += s.len();
        if a.bytes > self.cfg.max_value_bytes {
            let msg = format!(
                "the value of {:?} is longer than {} bytes",
                a.key, self.cfg.max_value_bytes
            );
            return self.fail(ErrorKind::LimitExceeded, msg, out);
        }
        if a.mode != ValueMode::Stream {
            return a.buf.push_str(s);
        }
        if c.spoiled {
            return;
        }
        match s.bytes().position(needs_escape) {
            None => out.args_delta(c.index, s),
            Some(i) => {
                self.scratch.clear();
                self.scratch.push_str(&s[..i]);
                escape_json_into(&mut self.scratch, &s[i..]);
                out.args_delta(c.index, &self.scratch);
            }
        }
    }

    /// The held close was content after all: it, the whitespace after it and `more` go to the
    /// value, which goes on.
    fn reopen(&mut self, more: &str, out: &mut dyn Sink) {
        let St::AfterValue(held) = std::mem::replace(&mut self.st, St::Value) else {
            return;
        };
        self.set_raw("argument");
        let msg = format!(
            "{} is followed by value text, so it is content",
            excerpt(held.trim_end())
        );
        if !self.cfg.close_tag_in_value {
            return self.fail(ErrorKind::MalformedMarkup, msg, out);
        }
        out.push(Event::warning(WarningKind::CloseTagInValue, msg));
        self.value_text(&held, out);
        if !more.is_empty() {
            self.value_text(more, out);
        }
    }

    /// The held close was the value's close: the value is complete.
    fn confirm_value(&mut self, out: &mut dyn Sink) {
        self.st = St::Call;
        let Some(a) = self.arg.take() else {
            return;
        };
        let Some(c) = &self.call else {
            return;
        };
        let index = c.index;
        if c.spoiled {
            return;
        }
        let value = match a.mode {
            ValueMode::Stream => return out.args_delta(index, "\""),
            ValueMode::Declared(pt) => match crate::event::read_json(&a.buf, self.cfg.max_depth) {
                Ok(v) if pt.admits(&v) => v,
                Err(e) if e.kind == JsonErrorKind::DepthLimit => {
                    let msg = format!(
                        "the value of {:?} nests deeper than {} levels",
                        a.key, self.cfg.max_depth
                    );
                    return self.fail(ErrorKind::LimitExceeded, msg, out);
                }
                _ => {
                    out.push(Event::warning(
                        WarningKind::TypeMismatch,
                        format!(
                            "argument {:?}: {} is not a valid {}; kept as a string",
                            a.key,
                            excerpt(&a.buf),
                            pt.describe()
                        ),
                    ));
                    Value::String(a.buf)
                }
            },
            ValueMode::Schema(pt) => {
                let (v, note) = type_value(&a.buf, pt, self.cfg.typing);
                if let Some((kind, msg)) = note {
                    out.push(Event::warning(kind, format!("argument {:?}: {msg}", a.key)));
                }
                v
            }
        };
        if let Some(index) = self.key_prefix(&a.key, false) {
            self.scratch.push_str(&value.to_string());
            out.args_delta(index, &self.scratch);
        }
    }

    // ---- JSON blocks ----

    fn begin_block(&mut self, e: &Element, out: &mut dyn Sink) {
        let Some(c) = &self.call else {
            return;
        };
        let busy = c.opened || c.block_done;
        self.set_raw("json");
        self.st = St::Block(Box::new(Block {
            json: JsonParser::new(JsonConfig {
                max_depth: self.cfg.max_depth,
                stop_byte: None,
                build_value: false,
            }),
            opened: false,
            bytes: 0,
        }));
        if busy {
            let msg = format!(
                "a JSON block at byte {} in a call that has arguments already",
                e.at
            );
            self.fail(ErrorKind::MalformedMarkup, msg, out);
        }
    }

    fn block_text(&mut self, s: &str, out: &mut dyn Sink) {
        let max = self.cfg.max_value_bytes;
        let (St::Block(b), Some(c)) = (&mut self.st, &self.call) else {
            return;
        };
        let mut s = s;
        if !b.opened {
            let t = s.trim_start_matches(|ch: char| ch.is_ascii_whitespace());
            match t.as_bytes().first() {
                None => return,
                Some(b'{') => {
                    b.opened = true;
                    s = t;
                }
                Some(_) => {
                    let msg = format!(
                        "call {}'s JSON block {} is not a JSON object",
                        c.index,
                        excerpt(t)
                    );
                    return self.fail(ErrorKind::InvalidJson, msg, out);
                }
            }
        }
        b.bytes += s.len();
        if b.bytes > max {
            let msg = format!("call {}'s JSON block is longer than {max} bytes", c.index);
            return self.fail(ErrorKind::LimitExceeded, msg, out);
        }
        match b.json.feed(s) {
            Ok(_) => {
                if !c.spoiled {
                    out.args_delta(c.index, s);
                }
            }
            Err(e) => {
                let kind = if e.kind == JsonErrorKind::DepthLimit {
                    ErrorKind::LimitExceeded
                } else {
                    ErrorKind::InvalidJson
                };
                let msg = format!("call {}'s JSON block: {}", c.index, e.message);
                self.fail(kind, msg, out);
            }
        }
    }

    fn end_block(&mut self, out: &mut dyn Sink) {
        self.lex.set_mode(Mode::Markup);
        let St::Block(mut b) = std::mem::replace(&mut self.st, St::Call) else {
            return;
        };
        let Some(c) = &mut self.call else {
            return;
        };
        let index = c.index;
        if !b.opened {
            let msg = format!("call {index}'s JSON block is empty");
            return self.fail(ErrorKind::EmptyArguments, msg, out);
        }
        if !b.json.is_complete() || b.json.finish().is_err() {
            let msg = format!("call {index}'s JSON block ends before its object does");
            return self.fail(ErrorKind::InvalidJson, msg, out);
        }
        c.block_done = true;
    }

    // ---- the end ----

    fn end_turn(&mut self, out: &mut dyn Sink) {
        let st = std::mem::replace(&mut self.st, St::Outside);
        let unterminated = |p: &mut Parser, out: &mut dyn Sink| {
            if let Some(c) = p.call.take() {
                out.push(Event::error(
                    ErrorKind::Unterminated,
                    format!("the stream ended inside call {}", c.index),
                ));
            }
        };
        match st {
            St::Outside => {
                if self.msg_open {
                    self.eos_cut("message", out);
                }
            }
            St::Think => self.unterminated_think(out),
            St::Response => self.eos_cut("response channel", out),
            St::Tools => self.eos_cut("tools section", out),
            St::AfterValue(held) => {
                self.st = St::AfterValue(held);
                self.confirm_value(out);
                unterminated(self, out);
            }
            St::Call | St::Value | St::Block(_) => unterminated(self, out),
            St::Skip | St::SkipRaw | St::Foreign => {}
        }
        self.start_turn();
    }

    /// The stream ends with `what` open.
    fn eos_cut(&mut self, what: &str, out: &mut dyn Sink) {
        self.deviation(
            self.cfg.missing_section_end,
            WarningKind::MissingSectionEnd,
            ErrorKind::Unterminated,
            format!("the stream ended with the {what} open"),
            out,
        );
    }
}

fn is_blank(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

fn is_channel_or_message(tag: &str) -> bool {
    matches!(tag, "message" | "think" | "response" | "tools")
}

/// Bytes a JSON string cannot hold as they are.
#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

impl DecodedText for Parser {
    fn decoder(&mut self) -> &mut Utf8Decoder {
        &mut self.utf8
    }

    fn feed_str(&mut self, s: &str, out: &mut dyn Sink) {
        Parser::feed_str(self, s, out);
    }

    fn spoil(&mut self) {
        if let Some(c) = &mut self.call {
            c.spoiled = true;
        }
    }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        match self.utf8.ascii(chunk) {
            Some(s) => self.feed_str(s, out),
            None => decoded::feed_utf8(self, chunk, out),
        }
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        decoded::finish_utf8(self, out);
        while let Some(t) = self.lex.finish() {
            self.token(t, out);
        }
        self.end_turn(out);
        self.utf8 = Utf8Decoder::new();
    }
}

// ---- rendering ----

/// Every delimiter: the special tokens, and the markers of the known elements (their cut
/// positions matter to the `markers` chunking; `<|open|>` alone finds a leak).
pub const MARKERS: &[&str] = &[
    OPEN,
    CLOSE,
    SEP,
    END_OF_MSG,
    "<|open|>message",
    "<|close|>message<|sep|>",
    "<|open|>think<|sep|>",
    "<|close|>think<|sep|>",
    "<|open|>response<|sep|>",
    "<|close|>response<|sep|>",
    "<|open|>tools<|sep|>",
    "<|close|>tools<|sep|>",
    "<|open|>call",
    "<|close|>call<|sep|>",
    "<|open|>argument",
    "<|close|>argument<|sep|>",
    "<|open|>json",
    "<|close|>json<|sep|>",
];

/// The special tokens a piece of rendered text may not hold.
const TOKENS: [&str; 4] = [OPEN, CLOSE, SEP, END_OF_MSG];

fn token_in(s: &str) -> Option<&'static str> {
    TOKENS.iter().copied().find(|t| s.contains(t))
}

/// `json.dumps(v, ensure_ascii=False)` as the template writes non-string values: Python's
/// default separators `", "` and `": "`.
fn python_json(v: &Value, out: &mut String) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_json(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                python_json(x, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn xtml_type(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "boolean",
        Value::Null => "null",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
    }
}

fn open_tag(out: &mut String, tag: &str, attrs: &[(&str, &str)]) {
    out.push_str(OPEN);
    out.push_str(tag);
    for (k, v) in attrs {
        out.push(' ');
        out.push_str(k);
        out.push_str("=\"");
        out.push_str(&xtml::escape_attr(v));
        out.push('"');
    }
    out.push_str(SEP);
}

fn close_tag(out: &mut String, tag: &str) {
    out.push_str(CLOSE);
    out.push_str(tag);
    out.push_str(SEP);
}

/// Renders what the model writes after a thinking prompt (`…<|open|>think<|sep|>`): an empty
/// reasoning closed, the text in `response`, the calls in `tools` (each `index` its 1-based
/// position), the message's close. Refuses what would not parse back the same.
pub fn render(text: &str, calls: &[ToolCall], tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(t) = token_in(text) {
        return Err(format!("the text contains the special token {t}"));
    }
    let mut out = String::new();
    close_tag(&mut out, "think");
    open_tag(&mut out, "response", &[]);
    out.push_str(text);
    close_tag(&mut out, "response");
    if !calls.is_empty() {
        open_tag(&mut out, "tools", &[]);
        for (i, c) in calls.iter().enumerate() {
            write_call(&mut out, c, i + 1)?;
        }
        close_tag(&mut out, "tools");
    }
    close_tag(&mut out, "message");
    let parser = || Box::new(Parser::new(Config::default(), tools)) as Box<dyn StreamParser>;
    let r = crate::formats::read_back(parser, out.as_bytes(), calls);
    if !r.result.is_success() || r.result.text != text || !r.same_calls {
        return Err("the rendering does not parse back to the same text and calls".into());
    }
    Ok(out.into_bytes())
}

fn write_call(out: &mut String, c: &ToolCall, position: usize) -> Result<(), String> {
    if c.server.is_some() {
        return Err("kimi_k3 calls carry no server".into());
    }
    if c.name.is_empty() || token_in(&c.name).is_some() {
        return Err(format!("the name {:?} cannot be written", c.name));
    }
    if c.id.is_some() {
        return Err("kimi_k3 calls carry no id".into());
    }
    let Some(args) = c.arguments.as_object() else {
        return Err("arguments must be a JSON object".into());
    };
    open_tag(
        out,
        "call",
        &[("tool", &c.name), ("index", &position.to_string())],
    );
    for (k, v) in args {
        let value = match v {
            Value::String(s) => s.clone(),
            other => {
                let mut s = String::new();
                python_json(other, &mut s);
                s
            }
        };
        if token_in(k).is_some() || value.contains(CLOSE) {
            return Err(format!("argument {k:?} cannot be written raw"));
        }
        open_tag(out, "argument", &[("key", k), ("type", xtml_type(v))]);
        out.push_str(&value);
        close_tag(out, "argument");
    }
    close_tag(out, "call");
    Ok(())
}

// ---- registration ----

/// The nested options: the think channel's (`reasoning.NAME`) and the schema typing's
/// (`typing.NAME`, with `schema_typing`).
static NESTED: [&dyn Nested<Config>; 2] = [
    &Nest {
        prefix: "reasoning",
        options: Reasoning::OPTIONS,
        field: |c: &Config| &c.reasoning,
        field_mut: |c: &mut Config| &mut c.reasoning,
    },
    &Nest {
        prefix: "typing",
        options: TypingOptions::OPTIONS,
        field: |c: &Config| &c.typing,
        field_mut: |c: &mut Config| &mut c.typing,
    },
];

fn build(cfg: Config, tools: &Tools) -> Box<dyn StreamParser> {
    Box::new(Parser::new(cfg, tools))
}

fn new_parser(tools: &Tools) -> Box<dyn StreamParser> {
    build(Config::default(), tools)
}

fn markers(_tools: &Tools) -> Vec<String> {
    MARKERS.iter().map(|m| m.to_string()).collect()
}

static OPTIONS: Table<Config> = Table {
    nested: &NESTED,
    ..Table::new(Config::default, Config::OPTIONS, build)
};

/// The kimi_k3 format.
pub static FORMAT: Format = Format {
    render: Some(render),
    // The chat template opens `think` with thinking on (the default) and `response` with it off.
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    // Kimi K3's special tokens that can appear in its output, with their ids (the fact sheet:
    // five third-party tables agree; no public offline tokenizer to check them against).
    channel_reasoning: Some(("<|open|>think", "<|close|>think", SEP)),
    special_tokens: &[
        SpecialToken::new(END_OF_MSG, 163586),
        SpecialToken::new(OPEN, 163587),
        SpecialToken::new(CLOSE, 163588),
        SpecialToken::new(SEP, 163589),
    ],
    ..Format::new(
        "kimi_k3",
        "Kimi K3 XTML: <|open|>think<|sep|>…<|close|>think<|sep|><|open|>response<|sep|>…<|open|>tools<|sep|><|open|>call tool=\"NAME\" index=\"1\"<|sep|><|open|>argument key=\"K\" type=\"T\"<|sep|>VALUE<|close|>argument<|sep|>…",
        new_parser,
        markers,
        &OPTIONS,
    )
};

#[cfg(test)]
mod tests;
