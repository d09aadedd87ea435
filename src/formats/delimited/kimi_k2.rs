//! `kimi_k2`: Kimi K2's special-token tool calls (`specs/kimi_k2.md`).
//!
//! ```text
//! text<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:ID<|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>
//! ```
//!
//! A grammar over the family driver (`specs/delimited.md`): the driver scans text for the
//! markers and streams the arguments through an `ObjectReader` that stops at a `<` outside a
//! JSON string, so a marker inside a string is content; this module is the section and call
//! grammar, the `functions.NAME:ID` header rule and the leniency options.

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::delimited::{
    Blank, Cx, Driver, Grammar, Limits, ObjectReader, Stop, TextStep, ValueEnd,
};
use crate::formats::reasoning::Syntax;
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::lexers::json::SERDE_JSON_MAX_DEPTH;
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

/// The longest marker: the most bytes the driver's scanner ever holds back.
#[cfg(test)]
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
            /// Dialect (off by default): the call's id is the whole header, `functions.NAME:0`,
            /// as Kimi's chat template renders it back and the serving engines keep it, instead
            /// of the text after its last `:` (`specs/kimi_k2.md` §4.3).
            id_whole_header,
            /// Dialect (off by default): the name is what precedes the header's last `:` with only
            /// a leading `functions.` taken off, its dotted path kept (`functions.a.b:0` is `a.b`,
            /// `system.functions.nested.tool:1` the whole path), as vLLM, SGLang, Dynamo and the
            /// SGLang gateway read it, instead of the last dot segment (`specs/kimi_k2.md` §4.3).
            name_keeps_path,
            /// A header without an index (`functions.f`, `functions.f:`, a bare name) is a call
            /// without an id, with warning `allow_missing_id`: Kimi's template always writes
            /// `:INDEX`, and vLLM's and SGLang's header patterns require it (they drop the
            /// call), so reading it is a recovered deviation.
            allow_missing_id,
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
            id_whole_header: false,
            name_keeps_path: false,
            allow_missing_id: true,
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

enum State {
    /// Outside a call.
    Text,
    /// Between the call begin and the argument marker.
    Header { buf: String, at: u64 },
    /// The arguments of this call (`None`: it already failed) are with their reader.
    Args(Option<usize>),
    /// The arguments stopped at a `<` outside a JSON string (or the stream ended): what
    /// follows (a marker or not) decides how the call ends.
    Stopped(Stop),
    /// Discarding input up to the next call end after an error.
    Skip,
}

/// Kimi K2's grammar over the family driver.
struct Kimi {
    cfg: Config,
    state: State,
    section: Section,
}

/// The kimi_k2 streaming parser.
pub struct Parser(Driver<Kimi>);

impl Parser {
    /// A parser with the given options.
    pub fn new(cfg: Config) -> Parser {
        let limits = Limits {
            max_header_bytes: cfg.max_header_bytes,
            max_args_bytes: cfg.max_args_bytes,
            max_depth: cfg.max_depth,
        };
        let g = Kimi {
            cfg,
            state: State::Text,
            section: Section::None,
        };
        // Whitespace between calls is trimmed as Unicode whitespace (`str::trim`), as the
        // engines Kimi's outputs go through do (§4.2).
        Parser(Driver::with_blank(g, &MARKERS, limits, Blank::Unicode))
    }
}

impl StreamParser for Parser {
    #[inline]
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        self.0.feed(chunk, out);
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        self.0.finish(out);
    }

    fn at_text(&self) -> bool {
        self.0.at_text()
    }
}

/// Pushes `msg` as a warning of `option`'s kind when `on`, else as an error of `kind`.
fn lenient(
    on: bool,
    option: WarningKind,
    kind: ErrorKind,
    msg: String,
    out: &mut dyn Sink,
) -> bool {
    if on {
        out.push(Event::warning(option, msg));
    } else {
        out.push(Event::error(kind, msg));
    }
    on
}

impl Kimi {
    /// Reports a recognised marker variant: a warning, or an error with the option off.
    fn variant(&self, used: bool, option: WarningKind, token: &str, at: u64, out: &mut dyn Sink) {
        if !used {
            return;
        }
        let enabled = match option {
            WarningKind::PluralArgumentMarker => self.cfg.plural_argument_marker,
            _ => self.cfg.singular_section_marker,
        };
        let msg = format!("{token} at byte {at} is a non-canonical marker");
        lenient(enabled, option, ErrorKind::MalformedMarkup, msg, out);
    }

    /// A marker outside any call; `at` is the offset just past it.
    fn marker_in_text(&mut self, m: Marker, at: u64, out: &mut dyn Sink) {
        match m {
            Marker::SectionBegin { singular } => {
                self.variant(
                    singular,
                    WarningKind::SingularSectionMarker,
                    SECTION_BEGIN_SINGULAR,
                    at,
                    out,
                );
                if self.section == Section::Explicit {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!("section begin at byte {at} inside a section"),
                    ));
                }
                self.section = Section::Explicit;
            }
            Marker::SectionEnd { singular } => {
                self.variant(
                    singular,
                    WarningKind::SingularSectionMarker,
                    SECTION_END_SINGULAR,
                    at,
                    out,
                );
                if self.section == Section::None {
                    let msg = format!("section end at byte {at} outside a section");
                    lenient(
                        self.cfg.stray_section_end,
                        WarningKind::StraySectionEnd,
                        ErrorKind::MalformedMarkup,
                        msg,
                        out,
                    );
                }
                self.section = Section::None;
            }
            Marker::CallBegin => {
                if self.section == Section::None {
                    let msg = format!("call at byte {at} outside a tool-call section");
                    lenient(
                        self.cfg.missing_section_begin,
                        WarningKind::MissingSectionBegin,
                        ErrorKind::MalformedMarkup,
                        msg,
                        out,
                    );
                    self.section = Section::Implicit;
                }
                self.state = State::Header {
                    buf: String::new(),
                    at,
                };
            }
            Marker::ArgumentBegin { .. } => {
                out.push(Event::error(
                    ErrorKind::MalformedMarkup,
                    format!("<|tool_call_argument_begin|> at byte {at} outside a call; skipped to the next call end"),
                ));
                self.state = State::Skip;
            }
            Marker::CallEnd => out.push(Event::error(
                ErrorKind::MalformedMarkup,
                format!("<|tool_call_end|> at byte {at} outside a call"),
            )),
        }
    }

    /// Parses the header, starts the call and opens its arguments.
    fn start_args(&mut self, cx: &mut Cx, header: &str, at: u64, out: &mut dyn Sink) {
        let h = split_header(header, self.cfg.name_keeps_path);
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
        } else if h.id.is_none() && !self.cfg.allow_missing_id {
            out.push(Event::error(
                ErrorKind::MalformedMarkup,
                format!("call header {header:?} at byte {at} has no index"),
            ));
        } else {
            if h.id.is_none() {
                out.push(Event::warning(
                    WarningKind::AllowMissingId,
                    format!("call header {header:?} at byte {at} has no index; the call has no id"),
                ));
            }
            if h.trimmed {
                out.push(Event::warning(
                    WarningKind::HeaderWhitespace,
                    format!("call header {header:?} at byte {at} has surrounding whitespace"),
                ));
            }
            let id = if self.cfg.id_whole_header {
                Some(header.trim())
            } else {
                h.id
            };
            index = Some(cx.start_call(h.name, id, out));
        }
        // A string is always read to its end; whether it may stand for the object is decided
        // when the call closes (`string_arguments`).
        cx.open(Box::new(
            ObjectReader::new(index, true, &cx.limits).stop_at(b'<'),
        ));
        self.state = State::Args(index);
    }

    /// A marker right where the arguments stopped; `at` is the offset just past it.
    fn marker_after_args(&mut self, cx: &mut Cx, st: Stop, m: Marker, at: u64, out: &mut dyn Sink) {
        match m {
            Marker::CallEnd => {
                self.close(cx, st, false, false, at, out);
            }
            Marker::CallBegin | Marker::SectionEnd { .. } => {
                // The next call or the section end closes this call, then means what it says.
                self.close(cx, st, true, false, at, out);
                self.marker_in_text(m, at, out);
            }
            _ => {
                if st.index.is_some() {
                    out.push(Event::error(
                        ErrorKind::InvalidJson,
                        format!("marker inside the arguments at byte {at}"),
                    ));
                }
                self.state = State::Skip;
            }
        }
    }

    /// Ends a call whose arguments stopped; returns whether the call was accepted.
    fn close(
        &mut self,
        cx: &mut Cx,
        st: Stop,
        missing_end: bool,
        at_eof: bool,
        at: u64,
        out: &mut dyn Sink,
    ) -> bool {
        let Some(index) = st.index else {
            return false;
        };
        let fail = |out: &mut dyn Sink, kind: ErrorKind, msg: String| {
            out.push(Event::error(kind, msg));
            false
        };
        if st.spoiled {
            return false;
        }
        if st.blank {
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
        if !st.complete {
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
        if let Some(inner) = st.string {
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
        cx.end_call(index, out);
        true
    }

    /// The end of the stream inside an explicit section.
    fn section_open_at_eof(&self, out: &mut dyn Sink) {
        if self.section == Section::Explicit {
            let msg = "the stream ended inside a tool-call section".to_string();
            lenient(
                self.cfg.missing_section_end,
                WarningKind::MissingSectionEnd,
                ErrorKind::Unterminated,
                msg,
                out,
            );
        }
    }
}

impl Grammar for Kimi {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        match &mut self.state {
            State::Text => {
                if self.section != Section::None && cx.is_holding() && !cx.is_blank(t) {
                    if self.section == Section::Implicit {
                        self.section = Section::None;
                    } else {
                        let msg = format!("text between calls inside a section at byte {}", cx.pos);
                        lenient(
                            self.cfg.text_in_section,
                            WarningKind::TextInSection,
                            ErrorKind::MalformedMarkup,
                            msg,
                            out,
                        );
                    }
                }
                cx.text(t, out);
            }
            // A marker prefix cut off by the end of the stream is dropped with the call.
            _ if cx.at_eof() => {}
            State::Header { buf, at } => {
                if buf.len() + t.len() > cx.limits.max_header_bytes {
                    out.push(Event::error(
                        ErrorKind::LimitExceeded,
                        format!(
                            "call header at byte {at} is longer than {} bytes",
                            cx.limits.max_header_bytes
                        ),
                    ));
                    self.state = State::Skip;
                } else {
                    buf.push_str(t);
                }
            }
            State::Stopped(st) => {
                // The `<` the arguments stopped at starts no marker: outside a JSON string it
                // can only be markup, and as JSON it is an error.
                if st.index.is_some() {
                    let why = if st.complete {
                        "trailing characters after the arguments"
                    } else {
                        "unexpected `<` in the arguments"
                    };
                    out.push(Event::error(
                        ErrorKind::InvalidJson,
                        format!("{why} at byte {}", cx.pos),
                    ));
                }
                self.state = State::Skip;
            }
            State::Args(_) | State::Skip => {}
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, i: usize, out: &mut dyn Sink) {
        let m = marker_of(i);
        let at = cx.pos + MARKERS[i].len() as u64;
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text => self.marker_in_text(m, at, out),
            State::Header { buf, at: header_at } => match m {
                Marker::ArgumentBegin { plural } => {
                    self.variant(
                        plural,
                        WarningKind::PluralArgumentMarker,
                        ARGUMENT_BEGIN_PLURAL,
                        at,
                        out,
                    );
                    self.start_args(cx, &buf, header_at, out);
                }
                _ => {
                    out.push(Event::error(
                        ErrorKind::MalformedMarkup,
                        format!("call header at byte {header_at} has no <|tool_call_argument_begin|> before the next marker"),
                    ));
                    if m != Marker::CallEnd {
                        self.marker_in_text(m, at, out);
                    }
                }
            },
            State::Stopped(st) => self.marker_after_args(cx, st, m, at, out),
            State::Skip => {
                if m != Marker::CallEnd {
                    self.state = State::Skip;
                }
            }
            // The arguments' reader never yields to a delimiter.
            State::Args(i) => self.state = State::Args(i),
        }
        // Every marker ends a run of text: inside a section whitespace is held again.
        if self.section == Section::None {
            cx.release();
        } else {
            cx.hold_whitespace();
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        let index = match self.state {
            State::Args(i) => i,
            _ => None,
        };
        self.state = match end {
            ValueEnd::Stopped(st) => State::Stopped(st),
            ValueEnd::NotAValue => {
                if index.is_some() {
                    out.push(Event::error(
                        ErrorKind::InvalidJson,
                        format!("arguments at byte {} are not a JSON object", cx.pos),
                    ));
                }
                State::Skip
            }
            ValueEnd::Failed { kind, message, .. } => {
                if index.is_some() {
                    cx.report(kind, &message, out);
                }
                State::Skip
            }
            // A reader with a stop byte ends only by stopping; these cannot come.
            ValueEnd::Done { .. } | ValueEnd::Cut { .. } | ValueEnd::Unnamed(_) => State::Skip,
        };
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text => self.section_open_at_eof(out),
            State::Header { at, .. } => out.push(Event::error(
                ErrorKind::Unterminated,
                format!("the stream ended inside the call header at byte {at}"),
            )),
            State::Stopped(st) => {
                let at = cx.pos;
                if self.close(cx, st, true, true, at, out) {
                    self.section_open_at_eof(out);
                }
            }
            State::Args(_) | State::Skip => {}
        }
        self.section = Section::None;
    }

    fn at_text(&self) -> bool {
        matches!(self.state, State::Text)
    }
}

struct Header<'a> {
    name: &'a str,
    id: Option<&'a str>,
    trimmed: bool,
}

/// Splits a header: the id is after the last `:`, the name is the last dot-separated segment
/// before it (`specs/kimi_k2.md` §4.3).
fn split_header(h: &str, keep_path: bool) -> Header<'_> {
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
    let raw_name = if keep_path {
        name_part.strip_prefix("functions.").unwrap_or(name_part)
    } else {
        name_part.rsplit('.').next().unwrap_or("")
    };
    let name = raw_name.trim();
    trimmed |= name.len() != raw_name.len();
    Header { name, id, trimmed }
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

/// Kimi's reasoning blocks: `<think>…</think>` (K2-Thinking, K2.5, K2.6, which think by
/// default) and `◁think▷…◁/think▷` (Kimi-VL, k1.5 thinking); `specs/kimi_k2.md` §4.1.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>"), ("◁think▷", "◁/think▷")],
    call_markers: &[SECTION_BEGIN, CALL_BEGIN, SECTION_BEGIN_SINGULAR],
    on_by_default: true,
    call_ends: &[],
};

/// kimi_k2's registry data.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "kimi_k2";
    const SUMMARY: &'static str = "Kimi K2 special tokens: <|tool_calls_section_begin|>…<|tool_call_begin|>functions.NAME:ID<|tool_call_argument_begin|>{json}<|tool_call_end|>";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// Kimi K2's special tokens that can appear in its output, with their ids in its tokenizer.
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<|im_end|>", "[EOS]"];
    const VOCABULARY: Option<&'static str> = Some("kimi_k2");
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
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
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(Parser::new(cfg));
    const LAYER: Option<&'static Syntax> = Some(&REASONING);
}

/// The kimi_k2 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: Kimi K2.5/K2.6 open `<think>` in the prompt with thinking on, write `<think></think>` off.
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    ..entry::format::<Declared>()
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult};
    use crate::formats::core::testkit::pieces_at;
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
            let hd = split_header(h, false);
            assert_eq!((hd.name, hd.id, hd.trimmed), (name, id, false), "{h}");
        }
        let hd = split_header(" functions.glob: 1\n", false);
        assert_eq!((hd.name, hd.id, hd.trimmed), ("glob", Some("1"), true));
    }

    #[test]
    fn the_engines_name_dialect_keeps_the_dotted_path_after_functions() {
        for (h, name, id) in [
            ("functions.list_directory:0", "list_directory", Some("0")),
            (
                "system.functions.nested.tool:1",
                "system.functions.nested.tool",
                Some("1"),
            ),
            ("simple_func:2", "simple_func", Some("2")),
            ("functions.a.b:0", "a.b", Some("0")),
            ("my:tool:10", "my:tool", Some("10")),
            ("functions.:0", "", Some("0")),
        ] {
            let hd = split_header(h, true);
            assert_eq!((hd.name, hd.id, hd.trimmed), (name, id, false), "{h}");
        }
        let hd = split_header(" functions.a.glob: 1\n", true);
        assert_eq!((hd.name, hd.id, hd.trimmed), ("a.glob", Some("1"), true));
        // Through the parser, with the option on.
        let cfg = Config {
            name_keeps_path: true,
            ..Config::default()
        };
        let mut p = Parser::new(cfg);
        let mut events = crate::formats::run_chunks(
            &mut p,
            [b"<|tool_calls_section_begin|><|tool_call_begin|>functions.a.b:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>".as_slice()],
        );
        p.finish(&mut events);
        let r = crate::event::ParseResult::fold(&events);
        assert_eq!(r.calls[0].name, "a.b");
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
    fn a_header_without_an_index_is_a_call_without_id_and_a_warning_or_refused() {
        for header in ["functions.f", "functions.f:", "functions.f: "] {
            let s = format!(
                "<|tool_calls_section_begin|><|tool_call_begin|>{header}<|tool_call_argument_begin|>{{}}<|tool_call_end|><|tool_calls_section_end|>"
            );
            let r = parse_all_ways(&s);
            assert_eq!(r.calls.len(), 1, "{header}");
            assert_eq!(r.calls[0].id, None);
            assert!(
                kinds(&r).iter().any(|k| k == "allow_missing_id"),
                "{header}"
            );
            let strict = Config {
                allow_missing_id: false,
                ..Config::default()
            };
            let r = parse_with(strict, &[s.as_bytes()]);
            assert!(r.calls.is_empty(), "{header}");
            assert_eq!(r.error_kinds(), vec![ErrorKind::MalformedMarkup]);
        }
        // With its index, no warning.
        let r = parse_all_ways(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
        );
        assert!(kinds(&r).is_empty());
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
                let mut p = (FORMAT.new_parser)(&Tools::default());
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
