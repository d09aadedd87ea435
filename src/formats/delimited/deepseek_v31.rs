//! `deepseek_v31`: DeepSeek V3.1 `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>`
//! inside a `<｜tool▁calls▁begin｜>` … `<｜tool▁calls▁end｜>` section (`specs/deepseek_v31.md`).
//!
//! The section grammar is shared with `deepseek_v3`, whose calls carry a type and a fenced
//! body instead (`Shape`); both are grammars over the family driver.

use crate::event::{ErrorKind, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::delimited::{
    Cx, Driver, Grammar, Limits, ObjectReader, Stop, TextStep, ValueEnd, is_ws,
};
use crate::formats::options::{Nest, Nested};
use crate::formats::reasoning::{self, Reasoned, Syntax};
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// `<｜tool▁calls▁begin｜>`: opens the section of calls.
pub const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
/// `<｜tool▁calls▁end｜>`: closes the section.
pub const CALLS_END: &str = "<｜tool▁calls▁end｜>";
/// `<｜tool▁call▁begin｜>`: opens one call.
pub const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
/// `<｜tool▁call▁end｜>`: closes one call.
pub const CALL_END: &str = "<｜tool▁call▁end｜>";
/// `<｜tool▁sep｜>`: separates the header from the body.
pub const SEP: &str = "<｜tool▁sep｜>";
/// The delimiters, in the order the grammar numbers them.
pub const MARKERS: [&str; 5] = [CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP];

const M_CALLS_BEGIN: usize = 0;
const M_CALLS_END: usize = 1;
const M_CALL_BEGIN: usize = 2;
const M_CALL_END: usize = 3;
const M_SEP: usize = 4;

config! {
    /// Leniency options and limits of the DeepSeek formats; every recovered deviation is one
    /// named option, on by default.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A complete call followed by the next call, the section end or the end of the stream
            /// without `<｜tool▁call▁end｜>` (max_tokens cuts) is kept with a warning.
            missing_call_end,
            /// A section still open at the end of the stream keeps its calls, with a warning
            /// (Dynamo's fixtures drop them).
            missing_section_end,
            /// A call outside any section opens an implicit one, with a warning.
            missing_section_begin,
            /// Non-whitespace text between calls inside a section is kept as text with a warning.
            text_in_section,
            /// A `<｜tool▁calls▁end｜>` outside a section is dropped with a warning.
            stray_section_end,
        }
        /// Size and nesting limits.
        pub limits: Limits,
        /// The reasoning layer's options ([`REASONING`]). `starts_inside` is off by default: the
        /// V3.1 template's default mode is non-thinking (the prompt ends `<｜Assistant｜></think>`,
        /// the output has no tags); in thinking mode the prompt ends inside `<think>`, and a server
        /// that uses it turns `starts_inside` on (`specs/deepseek_v31.md`, Reasoning).
        pub reasoning: reasoning::Config,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            missing_call_end: true,
            missing_section_end: true,
            missing_section_begin: true,
            text_in_section: true,
            stray_section_end: true,
            limits: Limits::default(),
            reasoning: REASONING.config(),
        }
    }
}

fn is_ws_char(c: char) -> bool {
    c.is_ascii() && is_ws(c as u8)
}

/// The call body of each DeepSeek generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// V3 / R1: `function<｜tool▁sep｜>NAME⏎```json⏎{…}⏎````.
    V3,
    /// V3.1: `NAME<｜tool▁sep｜>{…}`.
    V31,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    None,
    Explicit,
    Implicit,
}

enum State {
    Text,
    /// After the call begin, up to the separator (V3.1: the name; V3: the type).
    Header(String),
    /// V3: after the separator, up to the JSON: the name line and the opening fence.
    Fence(String),
    /// The arguments of this call (`None`: it already failed) are being read.
    Args(Option<usize>),
    /// Only whitespace after the separator, then something that is not a JSON value.
    ArgsBlank(Option<usize>),
    /// After the arguments, up to the call end (V3: the closing fence).
    After(Option<usize>, String),
    /// After an error, up to the next call end.
    Skip,
}

pub(crate) struct Deepseek {
    shape: Shape,
    cfg: Config,
    state: State,
    section: Section,
}

impl Deepseek {
    pub(crate) fn new(shape: Shape, cfg: Config) -> Deepseek {
        Deepseek {
            shape,
            cfg,
            state: State::Text,
            section: Section::None,
        }
    }

    /// A marker outside any call.
    fn marker_in_text(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        match m {
            M_CALLS_BEGIN => {
                if self.section == Section::Explicit {
                    cx.error(
                        ErrorKind::MalformedMarkup,
                        "a section begin inside a section",
                        out,
                    );
                }
                self.section = Section::Explicit;
                cx.hold_whitespace();
            }
            M_CALLS_END => {
                if self.section == Section::None {
                    cx.lenient(
                        self.cfg.stray_section_end,
                        WarningKind::StraySectionEnd,
                        "a section end outside a section",
                        out,
                    );
                }
                self.section = Section::None;
                cx.release();
            }
            M_CALL_BEGIN => {
                if self.section == Section::None {
                    cx.lenient(
                        self.cfg.missing_section_begin,
                        WarningKind::MissingSectionBegin,
                        "a call outside a section",
                        out,
                    );
                    self.section = Section::Implicit;
                }
                cx.drop_whitespace();
                self.state = State::Header(String::new());
            }
            M_CALL_END => cx.error(ErrorKind::MalformedMarkup, "a call end outside a call", out),
            _ => {
                cx.error(
                    ErrorKind::MalformedMarkup,
                    "a separator outside a call; skipped to the next call end",
                    out,
                );
                self.state = State::Skip;
            }
        }
    }

    /// Starts the call and opens its arguments (`name` `None`: the call already failed, its
    /// value is still read to find its end).
    fn open_args(&mut self, cx: &mut Cx, name: Option<&str>, out: &mut dyn Sink) {
        let index = name.map(|n| cx.start_call(n, None, out));
        cx.open(ObjectReader::boxed(index, false, &cx.limits));
        self.state = State::Args(index);
    }

    /// The header ended at the separator.
    fn header_done(&mut self, cx: &mut Cx, h: &str, out: &mut dyn Sink) {
        let h = h.trim();
        match self.shape {
            Shape::V31 => {
                if h.is_empty() {
                    cx.error(ErrorKind::MissingName, "a call without a name", out);
                    self.open_args(cx, None, out);
                } else {
                    self.open_args(cx, Some(h), out);
                }
            }
            Shape::V3 => {
                if h == "function" {
                    self.state = State::Fence(String::new());
                } else {
                    cx.error(
                        ErrorKind::MalformedMarkup,
                        &format!("call type {h:?} is not \"function\""),
                        out,
                    );
                    self.state = State::Skip;
                }
            }
        }
    }

    /// V3: the name line and the fence before the JSON: the name and what follows the fence
    /// line (trimmed), or the error.
    fn fence(h: &str) -> Result<(&str, &str), (ErrorKind, &'static str)> {
        let Some((name, rest)) = h.split_once('\n') else {
            return Err((
                ErrorKind::MalformedMarkup,
                "a call whose name is not followed by a line break and ```json",
            ));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err((ErrorKind::MissingName, "a call without a name"));
        }
        let rest = rest.trim_start();
        match rest.strip_prefix("```json") {
            Some(after) if after.is_empty() || after.starts_with(is_ws_char) => {
                Ok((name, after.trim()))
            }
            _ => Err((
                ErrorKind::MalformedMarkup,
                "a call whose arguments are not opened by a ```json fence",
            )),
        }
    }

    /// Ends a complete call at a marker other than its end, or at the end of the stream.
    fn unclosed(&mut self, cx: &mut Cx, index: Option<usize>, out: &mut dyn Sink) {
        if let Some(i) = index {
            let what = format!("call {i} has no {CALL_END}");
            if cx.lenient(
                self.cfg.missing_call_end,
                WarningKind::MissingCallEnd,
                &what,
                out,
            ) {
                cx.end_call(i, out);
            }
        }
    }

    fn too_long(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        cx.error(
            ErrorKind::LimitExceeded,
            &format!(
                "a call header longer than {} bytes",
                cx.limits.max_header_bytes
            ),
            out,
        );
        self.state = State::Skip;
    }
}

impl Grammar for Deepseek {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        match &mut self.state {
            State::Text => {
                if self.section != Section::None && cx.is_holding() && !t.bytes().all(is_ws) {
                    if self.section == Section::Explicit {
                        cx.lenient(
                            self.cfg.text_in_section,
                            WarningKind::TextInSection,
                            "text between calls inside a section",
                            out,
                        );
                    } else {
                        self.section = Section::None;
                    }
                }
                cx.text(t, out);
            }
            State::Header(buf) => {
                if buf.len() + t.len() > cx.limits.max_header_bytes {
                    self.too_long(cx, out);
                } else {
                    buf.push_str(t);
                }
            }
            State::Fence(buf) => {
                let k = memchr::memchr(b'{', t.as_bytes());
                let upto = k.unwrap_or(t.len());
                if buf.len() + upto > cx.limits.max_header_bytes {
                    self.too_long(cx, out);
                    return TextStep::Taken;
                }
                buf.push_str(&t[..upto]);
                if let Some(k) = k {
                    let h = std::mem::take(buf);
                    match Self::fence(&h) {
                        Ok((name, "")) => self.open_args(cx, Some(name), out),
                        Ok(_) => {
                            cx.error(
                                ErrorKind::MalformedMarkup,
                                "text between the ```json fence and the arguments",
                                out,
                            );
                            self.open_args(cx, None, out);
                        }
                        Err((kind, what)) => {
                            cx.error(kind, what, out);
                            self.open_args(cx, None, out);
                        }
                    }
                    return TextStep::Value(k);
                }
            }
            State::ArgsBlank(index) => {
                if index.is_some() {
                    cx.error(
                        ErrorKind::InvalidJson,
                        "arguments that are not a JSON object",
                        out,
                    );
                }
                self.state = State::Skip;
            }
            State::After(index, buf) => {
                buf.push_str(t);
                let rest = buf.trim();
                let ok = match self.shape {
                    Shape::V31 => rest.is_empty(),
                    Shape::V3 => "```".starts_with(rest),
                };
                if !ok {
                    if index.is_some() {
                        cx.error(
                            ErrorKind::InvalidJson,
                            "text after the arguments, before the call end,",
                            out,
                        );
                    }
                    self.state = State::Skip;
                }
            }
            State::Args(_) | State::Skip => {}
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text => self.marker_in_text(cx, m, out),
            State::Header(h) => {
                if m == M_SEP {
                    self.header_done(cx, &h, out);
                } else {
                    cx.error(
                        ErrorKind::MalformedMarkup,
                        "a call header without a separator",
                        out,
                    );
                    if m != M_CALL_END {
                        self.marker_in_text(cx, m, out);
                    }
                }
            }
            State::Fence(h) => {
                let (kind, what) = match Self::fence(&h) {
                    Ok((_, "" | "```")) => {
                        (ErrorKind::EmptyArguments, "a call with empty arguments")
                    }
                    Ok(_) => (
                        ErrorKind::InvalidJson,
                        "arguments that are not a JSON object",
                    ),
                    Err(e) => e,
                };
                cx.error(kind, what, out);
                if m == M_SEP {
                    self.state = State::Skip;
                } else if m != M_CALL_END {
                    self.marker_in_text(cx, m, out);
                }
            }
            State::ArgsBlank(index) => {
                if index.is_some() {
                    cx.error(
                        ErrorKind::EmptyArguments,
                        "a call with empty arguments",
                        out,
                    );
                }
                if m == M_SEP {
                    self.state = State::Skip;
                } else if m != M_CALL_END {
                    self.marker_in_text(cx, m, out);
                }
            }
            State::After(index, buf) => match m {
                M_CALL_END => {
                    if self.shape == Shape::V3 && buf.trim() != "```" {
                        if index.is_some() {
                            cx.error(
                                ErrorKind::MalformedMarkup,
                                "arguments not closed by a ``` fence",
                                out,
                            );
                        }
                        cx.hold_whitespace();
                    } else if let Some(i) = index {
                        cx.end_call(i, out);
                    } else {
                        cx.hold_whitespace();
                    }
                }
                M_CALL_BEGIN | M_CALLS_END => {
                    self.unclosed(cx, index, out);
                    self.marker_in_text(cx, m, out);
                }
                _ => {
                    if index.is_some() {
                        cx.error(
                            ErrorKind::MalformedMarkup,
                            "a marker after the arguments, before the call end,",
                            out,
                        );
                    }
                    if m == M_SEP {
                        self.state = State::Skip;
                    } else {
                        self.marker_in_text(cx, m, out);
                    }
                }
            },
            State::Skip => match m {
                M_CALL_END => cx.hold_whitespace(),
                M_CALL_BEGIN | M_CALLS_END | M_CALLS_BEGIN => self.marker_in_text(cx, m, out),
                _ => self.state = State::Skip,
            },
            // The arguments are read by their reader, which never yields to a delimiter.
            State::Args(i) => self.state = State::Args(i),
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        let args = match self.state {
            State::Args(i) => i,
            _ => None,
        };
        self.state = match end {
            ValueEnd::Done { index } => State::After(index, String::new()),
            ValueEnd::NotAValue => State::ArgsBlank(args),
            ValueEnd::Failed { kind, message, .. } => {
                cx.report(kind, &message, out);
                State::Skip
            }
            ValueEnd::Cut { index } | ValueEnd::Stopped(Stop { index, .. }) => {
                cx.cut_in_value(index, out);
                State::Skip
            }
            ValueEnd::Unnamed(raw) => {
                cx.text(&raw, out);
                State::Text
            }
        };
    }

    fn at_text(&self) -> bool {
        matches!(self.state, State::Text)
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        let mut complete = true;
        match std::mem::replace(&mut self.state, State::Text) {
            State::Header(_) | State::Fence(_) => {
                cx.unterminated("the stream ended inside a call header", out);
                complete = false;
            }
            State::ArgsBlank(index) => {
                if index.is_some() {
                    cx.unterminated("the stream ended before a call's arguments", out);
                }
                complete = false;
            }
            State::After(index, buf) => {
                let whole = match self.shape {
                    Shape::V31 => true,
                    Shape::V3 => "```".starts_with(buf.trim()),
                };
                if whole {
                    self.unclosed(cx, index, out);
                } else if index.is_some() {
                    cx.error(
                        ErrorKind::MalformedMarkup,
                        "arguments not closed by a ``` fence",
                        out,
                    );
                }
            }
            State::Text | State::Args(_) | State::Skip => {}
        }
        if complete && self.section == Section::Explicit {
            cx.lenient(
                self.cfg.missing_section_end,
                WarningKind::MissingSectionEnd,
                "the stream ended inside a tool-call section",
                out,
            );
        }
        self.section = Section::None;
    }
}

/// A deepseek_v31 parser with the given options.
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(Deepseek::new(Shape::V31, cfg), &MARKERS, cfg.limits)
}

/// DeepSeek's reasoning blocks, `<think>…</think>` (R1, V3.1 thinking mode); section or call
/// markup written inside one is reasoning, never a call (`specs/deepseek_v31.md`, Reasoning).
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &[CALLS_BEGIN, CALL_BEGIN],
    on_by_default: true,
    call_ends: &[],
};

/// The reasoning layer's options of both DeepSeek V3 formats (`reasoning.NAME`).
pub static NESTED: [&dyn Nested<Config>; 1] = [&Nest {
    prefix: "reasoning",
    options: reasoning::Config::OPTIONS,
    field: |c: &Config| &c.reasoning,
    field_mut: |c: &mut Config| &mut c.reasoning,
}];

/// A parser of the body shape `shape` behind the reasoning layer with `cfg.reasoning`.
pub(crate) fn reasoned(shape: Shape, cfg: Config) -> Box<dyn StreamParser> {
    let inner = Driver::new(Deepseek::new(shape, cfg), &MARKERS, cfg.limits);
    Box::new(Reasoned::new(inner, &REASONING, cfg.reasoning))
}

/// Renders calls in the body shape `shape` inside one section, after the text.
pub(crate) fn render_shape(
    shape: Shape,
    text: &str,
    calls: &[ToolCall],
) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    if let Some(t) = REASONING.tag_in(text) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    let mut out = String::from(text);
    if calls.is_empty() {
        return Ok(out.into_bytes());
    }
    out.push_str(CALLS_BEGIN);
    for c in calls {
        if c.id.is_some() || c.server.is_some() {
            return Err("DeepSeek calls carry no ids or servers".into());
        }
        let bad = c.name.trim().is_empty()
            || c.name.trim() != c.name
            || MARKERS.iter().any(|m| c.name.contains(m))
            || (shape == Shape::V3 && (c.name.contains('\n') || c.name.contains('{')));
        if bad || c.name.len() > Limits::default().max_header_bytes - 16 {
            return Err(format!("the name {:?} cannot be written", c.name));
        }
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        out.push_str(CALL_BEGIN);
        match shape {
            Shape::V31 => {
                out.push_str(&c.name);
                out.push_str(SEP);
                out.push_str(&c.arguments.to_string());
            }
            Shape::V3 => {
                out.push_str("function");
                out.push_str(SEP);
                out.push_str(&c.name);
                out.push_str("\n```json\n");
                out.push_str(&c.arguments.to_string());
                out.push_str("\n```");
            }
        }
        out.push_str(CALL_END);
    }
    out.push_str(CALLS_END);
    Ok(out.into_bytes())
}

/// One of the two DeepSeek V3 formats, which share their markers, options and special tokens
/// and differ in the call body's shape; its registry entry follows.
pub(crate) trait Shaped: 'static {
    /// The format id.
    const ID: &'static str;
    /// One line for `conform formats`.
    const SUMMARY: &'static str;
    /// The call body's shape.
    const SHAPE: Shape;
}

/// Renders text and calls in `D`'s template form: text, then one section with every call.
fn render<D: Shaped>(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    render_shape(D::SHAPE, text, calls)
}

impl<D: Shaped> Entry for D {
    const ID: &'static str = <D as Shaped>::ID;
    const SUMMARY: &'static str = <D as Shaped>::SUMMARY;
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<｜end▁of▁sentence｜>"];
    const VOCABULARY: Option<&'static str> = Some("deepseek_v3");
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;
    const RENDER: Option<RenderFn> = Some(render::<D>);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| reasoned(D::SHAPE, cfg);
    const NESTED: &'static [&'static dyn Nested<Config>] = &NESTED;
    const REASONING: Option<&'static Syntax> = Some(&REASONING);
}

/// What sets deepseek_v31 apart.
struct V31;

impl Shaped for V31 {
    const ID: &'static str = "deepseek_v31";
    const SUMMARY: &'static str = "DeepSeek V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>";
    const SHAPE: Shape = Shape::V31;
}

/// The deepseek_v31 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: the prompt ends `<｜Assistant｜><think>` with thinking on, `</think>` off.
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    ..entry::format::<V31>()
};

/// DeepSeek V3 / V3.1 special tokens that can appear in output, with their ids.
const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken::new("<｜end▁of▁sentence｜>", 1),
    SpecialToken::new("<think>", 128798),
    SpecialToken::new("</think>", 128799),
    SpecialToken::new(CALLS_BEGIN, 128806),
    SpecialToken::new(CALLS_END, 128807),
    SpecialToken::new(CALL_BEGIN, 128808),
    SpecialToken::new(CALL_END, 128809),
    SpecialToken::new(SEP, 128814),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::core::testkit::{every_cut, fold_cut, parses_back, prop_call};
    use proptest::prelude::*;
    use serde_json::json;

    fn all_ways(s: &str) -> ParseResult {
        every_cut(&|| Box::new(parser(Config::default())), s.as_bytes()).0
    }

    fn warnings(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    const TWO: &str = "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>bar<｜tool▁sep｜>\n{\"y\": \"<｜tool▁call▁end｜>｜▁\"}\n<｜tool▁call▁end｜><｜tool▁calls▁end｜> after";

    #[test]
    fn reasoning_split_inside_calls_and_the_thinking_mode_prompt() {
        let call = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        let mk = || reasoned(Shape::V31, Config::default());
        let r = every_cut(&mk, format!("<think>{call}</think>ok").as_bytes()).0;
        assert!(r.calls.is_empty());
        assert_eq!(r.text, "ok");
        assert_eq!(warnings(&r), ["call_in_reasoning"]);
        // Thinking mode: the prompt ends inside `<think>`; off by default, the tag is stray.
        let r = every_cut(&mk, format!("plan</think>{call}").as_bytes()).0;
        assert_eq!((r.text.as_str(), r.calls.len()), ("plan", 1));
        assert_eq!(warnings(&r), ["stray_reasoning_end"]);
        let cfg = Config {
            reasoning: reasoning::Config {
                starts_inside: true,
                ..REASONING.config()
            },
            ..Config::default()
        };
        let r = every_cut(
            &|| reasoned(Shape::V31, cfg),
            format!("plan</think>{call}").as_bytes(),
        )
        .0;
        assert_eq!(r.reasoning_text(), "plan");
        assert_eq!((r.text.as_str(), r.calls.len()), ("", 1));
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn section_with_two_calls_and_text_around() {
        let r = all_ways(TWO);
        assert_eq!(r.text, "Sure. after");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].name, "foo");
        assert_eq!(r.calls[0].arguments, json!({"x": 1}));
        assert_eq!(r.calls[1].arguments, json!({"y": "<｜tool▁call▁end｜>｜▁"}));
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    }

    #[test]
    fn errors_drop_one_call() {
        let ok = "<｜tool▁call▁begin｜>ok<｜tool▁sep｜>{}<｜tool▁call▁end｜>";
        for (bad, kind) in [
            (
                "<｜tool▁call▁begin｜> <｜tool▁sep｜>{}<｜tool▁call▁end｜>",
                ErrorKind::MissingName,
            ),
            (
                "<｜tool▁call▁begin｜>f<｜tool▁sep｜> <｜tool▁call▁end｜>",
                ErrorKind::EmptyArguments,
            ),
            (
                "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1<｜tool▁call▁end｜>",
                ErrorKind::InvalidJson,
            ),
            (
                "<｜tool▁call▁begin｜>f<｜tool▁sep｜>[1]<｜tool▁call▁end｜>",
                ErrorKind::InvalidJson,
            ),
            (
                "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{} x<｜tool▁call▁end｜>",
                ErrorKind::InvalidJson,
            ),
            (
                "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜>",
                ErrorKind::InvalidJson,
            ),
            (
                "<｜tool▁call▁begin｜>f{}<｜tool▁call▁end｜>",
                ErrorKind::MalformedMarkup,
            ),
        ] {
            let r = all_ways(&format!(
                "<｜tool▁calls▁begin｜>{bad}{ok}<｜tool▁calls▁end｜>x"
            ));
            assert_eq!(r.error_kinds(), vec![kind], "{bad}");
            assert_eq!(r.calls.len(), 1, "{bad}");
            assert_eq!(r.calls[0].name, "ok");
            assert_eq!(r.text, "x");
        }
    }

    #[test]
    fn end_of_stream() {
        let r = all_ways(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜>",
        );
        assert_eq!(warnings(&r), ["missing_section_end"]);
        assert_eq!(r.calls.len(), 1);
        let r = all_ways("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}");
        assert_eq!(warnings(&r), ["missing_call_end", "missing_section_end"]);
        let r = all_ways("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": ");
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
        assert!(r.calls.is_empty());
        let r = all_ways("<｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>\ntext");
        assert_eq!(warnings(&r), ["missing_section_begin"]);
        assert_eq!(r.text, "\ntext");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn rendered_calls_parse_back_under_cuts(
            text in "[^<]{0,12}",
            calls in proptest::collection::vec(("[a-z_]{1,8}", crate::formats::core::testkit::arb_json("[a-z<>｜▁ \"\\\\]{0,8}")), 0..3),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, v)| prop_call(name, None, v)).collect();
            for shape in [Shape::V31, Shape::V3] {
                let bytes = render_shape(shape, &text, &calls).unwrap();
                let mut p = Driver::new(Deepseek::new(shape, Config::default()), &MARKERS, Limits::default());
                parses_back(&mut p, &bytes, &cuts, &text, &calls)?;
            }
        }

        #[test]
        fn soup_is_split_invariant(
            parts in proptest::collection::vec(prop_oneof![
                Just(CALLS_BEGIN.to_string()), Just(CALLS_END.to_string()), Just(CALL_BEGIN.to_string()),
                Just(CALL_END.to_string()), Just(SEP.to_string()), Just("function".to_string()),
                Just("\n```json\n".to_string()), Just("\n```".to_string()),
                Just("{\"a\": \"<｜tool▁call▁end｜>\"}".to_string()), Just("\"".to_string()),
                Just(" \n".to_string()), Just("<｜tool".to_string()), "[a-z{}\":, <>｜▁]{0,6}",
            ], 0..16),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
            v3 in any::<bool>(),
        ) {
            let s = parts.concat();
            let shape = if v3 { Shape::V3 } else { Shape::V31 };
            let mk = || Driver::new(Deepseek::new(shape, Config::default()), &MARKERS, Limits::default());
            let whole = fold_cut(&mut mk(), s.as_bytes(), &[]);
            let r = fold_cut(&mut mk(), s.as_bytes(), &cuts);
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(r.warnings.len(), whole.warnings.len());
        }
    }
}
