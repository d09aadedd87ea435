//! `xlam`: Salesforce xLAM, whose tool turn is a bare JSON list of call objects
//! (`specs/xlam.md`).
//!
//! ```text
//! [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]
//! ```
//!
//! A grammar over the family driver. The list has no delimiter of its own: it is calls when it
//! opens the output (after whitespace and any reasoning) and its first element names a call;
//! otherwise, like any JSON an answer may hold, it is text. The array is read by the driver's
//! call-array reader with text-unless-named call objects, so each call streams as it arrives
//! and markup inside JSON strings is content. The wrappers vLLM strips (a Markdown fence,
//! `[TOOL_CALLS]`, `<tool_call>…</tool_call>`) are one named option, `json_wrapper`.

use crate::event::{Event, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::delimited::{
    CallArrayReader, Cx, Driver, EnvelopeOptions, EnvelopeReader, Grammar, Limits, TextStep,
    ValueEnd, is_ws,
};
use crate::formats::reasoning::Syntax;
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// A Markdown code fence: with no tag or `json`, it may hold the list of calls.
pub const FENCE: &str = "```";
/// `[TOOL_CALLS]`: Mistral's call marker, which xLAM models sometimes write before the list.
pub const TOOL_CALLS: &str = "[TOOL_CALLS]";
/// `<tool_call>`: Hermes' call tag, which xLAM models sometimes write around the list.
pub const OPEN: &str = "<tool_call>";
/// `</tool_call>`: closes `<tool_call>`.
pub const CLOSE: &str = "</tool_call>";
/// The delimiters, in the order the grammar numbers them.
pub const MARKERS: [&str; 4] = [FENCE, TOOL_CALLS, OPEN, CLOSE];
/// Llama 3's `<|eot_id|>`: the turn's end (Llama-xLAM-2 is a Llama 3.1 fine-tune).
pub const EOT: &str = "<|eot_id|>";
/// Llama 3's `<|end_of_text|>`.
pub const END_OF_TEXT: &str = "<|end_of_text|>";

config! {
    /// Leniency options and limits; every recovered deviation is one named option.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// The list of calls inside a wrapper (a Markdown fence tagged `json` or untagged,
            /// after `[TOOL_CALLS]`, or inside `<tool_call>…</tool_call>`) is read with a warning,
            /// anywhere in the output, the wrapper dropped and the text around it kept: vLLM's
            /// xlam parser strips these wrappers (`json_code_block_patterns`), as xLAM models
            /// write them when prompted in other models' styles. Off: wrappers are text.
            json_wrapper,
            /// A single call object in place of the list is read as one call with a warning (the
            /// fact sheet's reading; vLLM ignores it, its parser wants a list). Off: it is text.
            object_not_array,
            /// `parameters` in place of `arguments` is read with a warning (xLAM's training data
            /// names the tools' schemas `parameters`, and models mix the two up).
            parameters_key,
            /// A wrapper (fence or `<tool_call>`) whose list is complete but whose close is
            /// missing keeps its calls with a warning: the list's `]` closed them.
            missing_section_end,
        }
        /// Size and nesting limits.
        pub limits: Limits,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            json_wrapper: true,
            object_not_array: true,
            parameters_key: true,
            missing_section_end: true,
            limits: Limits::default(),
        }
    }
}

/// Keys that hold the arguments, with `parameters_key` on.
const ARGS_LENIENT: &[(&str, Option<WarningKind>)] = &[
    ("arguments", None),
    ("parameters", Some(WarningKind::ParametersKey)),
];
/// Keys that hold the arguments, with `parameters_key` off.
const ARGS_STRICT: &[(&str, Option<WarningKind>)] = &[("arguments", None)];

/// What the list of calls is wrapped in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrapper {
    /// A Markdown fence, closed by another.
    Fence,
    /// `[TOOL_CALLS]`, which has no close.
    ToolCalls,
    /// `<tool_call>…</tool_call>`.
    Tag,
}

impl Wrapper {
    /// The delimiter index that closes the wrapper, if it has one.
    fn close(self) -> Option<usize> {
        match self {
            Wrapper::Fence => Some(0),
            Wrapper::ToolCalls => None,
            Wrapper::Tag => Some(3),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Wrapper::Fence => "a Markdown fence",
            Wrapper::ToolCalls => "[TOOL_CALLS]",
            Wrapper::Tag => "<tool_call>",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace yet: the list may start here.
    Start,
    /// Prose.
    Text,
    /// Inside a code fence that is text (tagged, or holding no calls), up to its close.
    TextFence,
    /// After a wrapper's opening, before its value: what was read of it (the delimiter, a
    /// fence's tag, whitespace), shown as text if no value follows.
    Opening {
        wrapper: Wrapper,
        pending: String,
        /// A fence's tag has ended (always, for the other wrappers).
        tagged: bool,
    },
    /// A value is being read: the list, or (`single`) one call object.
    Value {
        wrapper: Option<Wrapper>,
        single: bool,
        pending: String,
    },
    /// The wrapped value was read: the wrapper's close should follow.
    Close(Wrapper),
    /// After the calls: whitespace held, text or another wrapper.
    AfterCalls,
    /// After an error, up to the wrapper's close (or the next delimiter, without a wrapper).
    Skip(Option<Wrapper>),
}

struct Xlam {
    cfg: Config,
    state: State,
}

impl Xlam {
    fn element(&self, text_unless_named: bool) -> EnvelopeOptions {
        EnvelopeOptions {
            args_keys: if self.cfg.parameters_key {
                ARGS_LENIENT
            } else {
                ARGS_STRICT
            },
            has_id: false,
            missing_arguments: false,
            string_arguments: false,
            text_unless_named,
            keyed: false,
        }
    }

    /// Opens the value starting with `b` (`[` or `{`), if it can be calls.
    fn open(&mut self, cx: &mut Cx, b: u8, wrapper: Option<Wrapper>, pending: &mut String) -> bool {
        let single = match b {
            b'[' => false,
            b'{' if self.cfg.object_not_array => true,
            _ => return false,
        };
        if single {
            cx.open(EnvelopeReader::boxed(self.element(true), &cx.limits));
        } else {
            cx.open(CallArrayReader::boxed(self.element(true)));
        }
        self.state = State::Value {
            wrapper,
            single,
            pending: std::mem::take(pending),
        };
        true
    }

    /// Text where the output may still start with the list (`Start`) or after calls.
    fn text_at_start(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        let lead = t.bytes().take_while(|&b| is_ws(b)).count();
        if !cx.is_holding() {
            cx.hold_whitespace();
        }
        cx.text(&t[..lead], out);
        if lead == t.len() {
            return TextStep::Taken;
        }
        if self.state == State::Start && self.open(cx, t.as_bytes()[lead], None, &mut String::new())
        {
            return TextStep::Value(lead);
        }
        self.state = State::Text;
        cx.text(&t[lead..], out);
        TextStep::Taken
    }

    /// Text right after a wrapper's opening: a fence's tag, whitespace, then `[` or `{`.
    fn text_opening(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        let State::Opening {
            wrapper,
            mut pending,
            mut tagged,
        } = std::mem::replace(&mut self.state, State::Text)
        else {
            return TextStep::Taken;
        };
        let b = t.as_bytes();
        for (i, &c) in b.iter().enumerate() {
            if !tagged {
                // The tag is what follows "```" up to whitespace or the value: `json` or none.
                let tag = &pending[FENCE.len()..];
                if "json".len() > tag.len() && "json".as_bytes()[tag.len()] == c {
                    pending.push(c as char);
                    continue;
                }
                if tag == "json" || tag.is_empty() {
                    tagged = true;
                } else {
                    return self.not_calls(cx, wrapper, pending, &t[i..], out);
                }
            }
            if is_ws(c) {
                pending.push(c as char);
                if pending.len() > cx.limits.max_header_bytes {
                    return self.not_calls(cx, wrapper, pending, &t[i + 1..], out);
                }
                continue;
            }
            if self.open(cx, c, Some(wrapper), &mut pending) {
                return TextStep::Value(i);
            }
            return self.not_calls(cx, wrapper, pending, &t[i..], out);
        }
        self.state = State::Opening {
            wrapper,
            pending,
            tagged,
        };
        TextStep::Taken
    }

    /// A wrapper's opening turned out to hold no calls: it and `rest` are text.
    fn not_calls(
        &mut self,
        cx: &mut Cx,
        wrapper: Wrapper,
        pending: String,
        rest: &str,
        out: &mut dyn Sink,
    ) -> TextStep {
        cx.text(&pending, out);
        self.state = if wrapper == Wrapper::Fence {
            State::TextFence
        } else {
            State::Text
        };
        if rest.is_empty() {
            return TextStep::Taken;
        }
        self.text(cx, rest, out)
    }

    /// A delimiter where text is read (`Start`, `Text`, `AfterCalls`).
    fn marker_in_text(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        let wrapper = match m {
            _ if !self.cfg.json_wrapper => None,
            0 => Some(Wrapper::Fence),
            1 => Some(Wrapper::ToolCalls),
            2 => Some(Wrapper::Tag),
            _ => None,
        };
        match wrapper {
            Some(wrapper) => {
                self.state = State::Opening {
                    wrapper,
                    pending: MARKERS[m].to_string(),
                    tagged: wrapper != Wrapper::Fence,
                };
            }
            None => {
                cx.text(MARKERS[m], out);
                self.state = State::Text;
            }
        }
    }

    /// The wrapper's close did not follow its calls; `why` says what came instead.
    fn unclosed(&mut self, wrapper: Wrapper, why: &str, cx: &mut Cx, out: &mut dyn Sink) {
        cx.lenient(
            self.cfg.missing_section_end,
            WarningKind::MissingSectionEnd,
            &format!(
                "the calls in {} are not followed by its close ({why})",
                wrapper.name()
            ),
            out,
        );
    }

    /// The value was read as calls (or as the empty list): the state that follows it.
    fn after_value(&mut self, cx: &mut Cx, wrapper: Option<Wrapper>, out: &mut dyn Sink) {
        cx.drop_whitespace();
        cx.hold_whitespace();
        if let Some(w) = wrapper {
            out.push(Event::warning(
                WarningKind::JsonWrapper,
                format!("calls inside {}, read at byte {}", w.name(), cx.pos),
            ));
        }
        self.state = match wrapper {
            Some(w) if w.close().is_some() => State::Close(w),
            _ => State::AfterCalls,
        };
    }
}

impl Grammar for Xlam {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        match &self.state {
            State::Start => self.text_at_start(cx, t, out),
            State::AfterCalls => {
                if !cx.is_blank(t) {
                    self.state = State::Text;
                }
                cx.text(t, out);
                TextStep::Taken
            }
            State::Text | State::TextFence => {
                cx.text(t, out);
                TextStep::Taken
            }
            State::Opening { .. } => self.text_opening(cx, t, out),
            State::Close(w) => {
                if !cx.is_blank(t) {
                    let w = *w;
                    self.unclosed(w, "text follows them", cx, out);
                    self.state = State::Text;
                }
                cx.text(t, out);
                TextStep::Taken
            }
            State::Value { .. } | State::Skip(_) => TextStep::Taken,
        }
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        match std::mem::replace(&mut self.state, State::Text) {
            State::Start | State::Text | State::AfterCalls => self.marker_in_text(cx, m, out),
            State::TextFence => {
                cx.text(MARKERS[m], out);
                self.state = if m == 0 {
                    State::Text
                } else {
                    State::TextFence
                };
            }
            State::Opening {
                wrapper, pending, ..
            } => {
                // No value after the opening: it is text, and so is this delimiter's meaning
                // in the state that follows.
                cx.text(&pending, out);
                if wrapper == Wrapper::Fence {
                    self.state = State::TextFence;
                    self.marker(cx, m, out);
                } else {
                    self.marker_in_text(cx, m, out);
                }
            }
            State::Close(w) => {
                if w.close() == Some(m) {
                    cx.drop_whitespace();
                    cx.hold_whitespace();
                    self.state = State::AfterCalls;
                } else {
                    self.unclosed(w, "another delimiter follows them", cx, out);
                    self.state = State::AfterCalls;
                    self.marker(cx, m, out);
                }
            }
            State::Skip(w) => match w.and_then(Wrapper::close) {
                Some(c) if c == m => {
                    cx.hold_whitespace();
                    self.state = State::AfterCalls;
                }
                Some(_) => self.state = State::Skip(w),
                None => {
                    cx.hold_whitespace();
                    self.state = State::AfterCalls;
                    self.marker(cx, m, out);
                }
            },
            // The value is read by its reader, which never yields to a delimiter.
            s @ State::Value { .. } => self.state = s,
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        let State::Value {
            wrapper,
            single,
            pending,
        } = std::mem::replace(&mut self.state, State::Text)
        else {
            return;
        };
        match end {
            ValueEnd::Done { index } => {
                if let Some(i) = index {
                    cx.end_call(i, out);
                }
                if single {
                    out.push(Event::warning(
                        WarningKind::ObjectNotArray,
                        format!(
                            "a call object in place of the list, ending at byte {}",
                            cx.pos
                        ),
                    ));
                }
                self.after_value(cx, wrapper, out);
            }
            ValueEnd::Unnamed(raw) => {
                // Not calls: the wrapper's opening and the value are text.
                cx.text(&pending, out);
                cx.text(&raw, out);
                self.state = if wrapper == Some(Wrapper::Fence) {
                    State::TextFence
                } else {
                    State::Text
                };
            }
            ValueEnd::Failed {
                kind,
                message,
                complete,
            } => {
                cx.report(kind, &message, out);
                if single && complete {
                    // Valid JSON of the wrong shape: the object ended where JSON says.
                    self.after_value(cx, wrapper, out);
                } else {
                    cx.drop_whitespace();
                    self.state = State::Skip(wrapper);
                }
            }
            ValueEnd::Cut { .. } | ValueEnd::Stopped(_) => {
                cx.unterminated("the stream ended inside the list of calls", out);
            }
            ValueEnd::NotAValue => {
                cx.text(&pending, out);
            }
        }
    }

    fn at_text(&self) -> bool {
        matches!(
            self.state,
            State::Start | State::Text | State::TextFence | State::AfterCalls
        )
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        match std::mem::replace(&mut self.state, State::Start) {
            // Whitespace-only output is text (no call came next to it).
            State::Start => cx.flush(out),
            State::Opening { pending, .. } => {
                cx.text(&pending, out);
            }
            State::Close(w) => self.unclosed(w, "the output ends", cx, out),
            _ => {}
        }
    }
}

/// An xlam parser with the given options (without the reasoning layer).
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(
        Xlam {
            cfg,
            state: State::Start,
        },
        &MARKERS,
        cfg.limits,
    )
}

/// The list as xLAM writes it: `[{"name": N, "arguments": A}, …]`.
/// Writes the calls as xLAM's JSON list into `out`, each argument written once in place (no
/// item strings joined and copied again: a 10 MB argument would be held three times).
fn list(calls: &[ToolCall], out: &mut String) -> Result<(), String> {
    use std::fmt::Write;
    out.push('[');
    for (i, c) in calls.iter().enumerate() {
        if c.id.is_some() || c.server.is_some() {
            return Err("xlam carries no call ids or servers".into());
        }
        if c.name.is_empty() {
            return Err("a call needs a name".into());
        }
        crate::formats::delimited::json_header_fits(&c.name, "name")?;
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        let name = serde_json::to_string(&c.name).map_err(|e| e.to_string())?;
        if i > 0 {
            out.push_str(", ");
        }
        write!(out, "{{\"name\": {name}, \"arguments\": {}}}", c.arguments)
            .map_err(|e| e.to_string())?;
    }
    out.push(']');
    Ok(())
}

/// Renders text and calls: calls alone as the bare list xLAM writes; text with calls as the
/// text, then the list in a ```` ```json ```` fence (the bare list is calls only at the start
/// of the output, and the wrapper is the one vLLM documents first).
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the delimiter {m}"));
    }
    if let Some(t) = REASONING.tag_in(text) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    if text
        .trim_start_matches(|c: char| c.is_ascii() && is_ws(c as u8))
        .starts_with(['[', '{'])
    {
        return Err("text that starts with `[` or `{` could be read as calls".into());
    }
    if calls.is_empty() {
        return Ok(text.as_bytes().to_vec());
    }
    let mut out = String::new();
    if !text.is_empty() {
        out.push_str(text);
        out.push_str(FENCE);
        out.push_str("json\n");
    }
    list(calls, &mut out)?;
    if text.is_empty() {
        return Ok(out.into_bytes());
    }
    if text.bytes().all(is_ws) {
        return Err("whitespace-only text next to calls is not text".into());
    }
    out.push('\n');
    out.push_str(FENCE);
    Ok(out.into_bytes())
}

/// Reasoning in `<think>…</think>`, before the list (vLLM's xlam parser reads the list after
/// `</think>`); a wrapper inside it is reasoning, never calls.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &[TOOL_CALLS, OPEN],
    on_by_default: true,
    call_ends: &[],
};

/// What sets xlam apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "xlam";
    const SUMMARY: &'static str = "Salesforce xLAM: a bare JSON list [{\"name\": …, \"arguments\": {…}}, …] (or in a ```json fence, after [TOOL_CALLS], in <tool_call>)";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &[EOT, END_OF_TEXT];
    /// Llama-xLAM-2-8b-fc-r, the model vLLM's docs name for this parser, is a Llama 3.1
    /// fine-tune (`specs/xlam.md`, Tokens).
    const VOCABULARY: Option<&'static str> = Some("llama3");
    /// The list has no tokens of its own; only the turn's ends are special.
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken::new(END_OF_TEXT, 128001),
        SpecialToken::new(EOT, 128009),
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
    const LAYER: Option<&'static Syntax> = Some(&REASONING);
}

/// The xlam format.
pub static FORMAT: Format = entry::format::<Declared>();

#[cfg(test)]
mod tests;
