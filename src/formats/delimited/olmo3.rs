//! `olmo3`: AllenAI Olmo 3's calls, Python calls one per line inside `<function_calls>…
//! </function_calls>` with JSON's `null`/`true`/`false`, after `<think>` reasoning
//! (`specs/olmo3.md`).
//!
//! ```text
//! text<function_calls>get_weather(city="Paris", days=3)⏎get_time(tz=null)</function_calls>
//! ```
//!
//! A variant of `pythonic` on the same machinery: the family driver finds the wrapper, and
//! the streaming Python reader ([`crate::lexers::python`]) reads the calls in its bare,
//! JSON-literal dialect ([`PyDialect`]): no brackets, calls separated by line breaks (or
//! commas), the list ended by the wrapper's close. Calls are emitted when the list ends: a
//! syntax error voids the whole block, as in `pythonic`.

use crate::event::{ErrorKind, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::delimited::pythonic::{ListValue, is_identifier};
use crate::formats::delimited::{Cx, Driver, Grammar, Limits, TextStep, ValueEnd};
use crate::formats::reasoning::Syntax;
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::lexers::python::{PyDialect, PyLimits, PyListReader, Quotes, write_literal};
use crate::tools::Tools;
use serde_json::Value;

/// Opens the block of calls.
pub const OPEN: &str = "<function_calls>";
/// Closes it.
pub const CLOSE: &str = "</function_calls>";
/// The delimiters, in the order the grammar numbers them.
pub const MARKERS: [&str; 2] = [OPEN, CLOSE];

/// The dialect of the Python reader inside a block.
const DIALECT: PyDialect = PyDialect {
    bare: true,
    json_literals: true,
};

/// Olmo 3's reasoning, `<think>…</think>`, which the chat template may open in the prompt
/// (request mode `starting_state = "reasoning"`); a block of calls inside it is reasoning.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &[OPEN],
    on_by_default: true,
    call_ends: &[],
};

config! {
    /// Leniencies (each recovered deviation is one named option) and limits.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A call written with Python's `True`/`False`/`None` (the pythonic habit; vLLM's
            /// shared helpers read both) is read, with warning `python_literal`; off → that call
            /// is `malformed_markup`.
            python_literals,
            /// The stream ending after complete calls inside a block, its close missing, keeps
            /// the calls with warning `missing_section_end`; off → `unterminated`.
            missing_section_end,
            /// A bare call list at the very start of the output, without `<function_calls>`
            /// (vLLM reads the whole output as the list when the wrapper is absent), is read,
            /// with warning `missing_section_begin`. Off by default: prose may start `Word(`.
            missing_section_begin,
        }
        /// Size and nesting limits (`max_args_bytes` bounds one block).
        pub limits: Limits,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            python_literals: true,
            missing_section_end: true,
            missing_section_begin: false,
            limits: Limits::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace so far (a bare list may start, under `missing_section`).
    Start,
    /// Prose.
    Text,
    /// After `<function_calls>`, before its calls.
    Open,
    /// The calls are being read.
    List,
    /// After the calls of a block, before its close.
    Listed,
    /// A bare list (no wrapper) is being read.
    BareList,
    /// After a syntax error in the block, up to its close.
    Skip,
}

struct Olmo3 {
    cfg: Config,
    state: State,
}

impl Olmo3 {
    fn open_list(&self, cx: &mut Cx, at: usize) {
        cx.open(Box::new(ListValue::new(
            PyListReader::with_dialect(
                PyLimits {
                    max_bytes: cx.limits.max_args_bytes,
                    max_depth: cx.limits.max_depth,
                },
                DIALECT,
            ),
            cx.pos + at as u64,
            Some(self.cfg.python_literals),
            None,
        )));
    }
}

impl Grammar for Olmo3 {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        match self.state {
            State::Start if self.cfg.missing_section_begin => {
                if !cx.is_holding() {
                    cx.hold_whitespace();
                }
                let lead = t.len() - t.trim_start().len();
                // Held: dropped before calls, shown before prose (`Unnamed`).
                cx.text(&t[..lead], out);
                if lead == t.len() {
                    return TextStep::Taken;
                }
                self.open_list(cx, lead);
                self.state = State::BareList;
                TextStep::Value(lead)
            }
            State::Start | State::Text => {
                if self.state == State::Start && !cx.is_holding() {
                    cx.hold_whitespace();
                }
                if !cx.is_blank(t) {
                    self.state = State::Text;
                }
                cx.text(t, out);
                TextStep::Taken
            }
            State::Open => {
                self.open_list(cx, 0);
                self.state = State::List;
                TextStep::Value(0)
            }
            // A cut close at the end of the stream: `finish` says the close is missing.
            State::Listed if cx.at_eof() => TextStep::Taken,
            State::Listed => {
                // Not the close: the block is over without it, and this is text.
                cx.lenient(
                    self.cfg.missing_section_end,
                    WarningKind::MissingSectionEnd,
                    &format!("text where {CLOSE} belongs"),
                    out,
                );
                cx.release();
                cx.text(t, out);
                self.state = State::Text;
                TextStep::Taken
            }
            State::List | State::BareList | State::Skip => TextStep::Taken,
        }
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        match (self.state, m) {
            (State::Start | State::Text, 0) => {
                // Whitespace-only text next to the block is no text.
                cx.drop_whitespace();
                self.state = State::Open;
            }
            (State::Open | State::Listed | State::Skip, 1) => {
                cx.hold_whitespace();
                self.state = State::Text;
            }
            (State::Listed, 0) => {
                cx.lenient(
                    self.cfg.missing_section_end,
                    WarningKind::MissingSectionEnd,
                    &format!("{OPEN} where {CLOSE} belongs"),
                    out,
                );
                self.state = State::Open;
            }
            (State::Skip, _) => {}
            (State::Open, _) => {
                cx.error(
                    ErrorKind::MalformedMarkup,
                    &format!("{} inside an open block", MARKERS[m]),
                    out,
                );
                self.state = State::Skip;
            }
            // A close outside a block is text.
            (_, _) => {
                cx.text(MARKERS[m], out);
                self.state = State::Text;
            }
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        let bare = self.state == State::BareList;
        self.state = match end {
            ValueEnd::Done { .. } if bare => {
                cx.drop_whitespace();
                cx.lenient(
                    true,
                    WarningKind::MissingSectionBegin,
                    &format!("calls without {OPEN}"),
                    out,
                );
                cx.hold_whitespace();
                State::Text
            }
            ValueEnd::Done { .. } => {
                cx.hold_whitespace();
                State::Listed
            }
            ValueEnd::Unnamed(raw) if bare => {
                cx.text(&raw, out);
                State::Text
            }
            ValueEnd::Unnamed(raw) => {
                if cx.at_eof() || raw.trim().is_empty() {
                    cx.unterminated(&format!("the stream ended inside {OPEN}"), out);
                    State::Text
                } else {
                    let msg = format!("{OPEN} holds no call");
                    cx.error(ErrorKind::MalformedMarkup, &msg, out);
                    State::Skip
                }
            }
            ValueEnd::Failed { kind, message, .. } => {
                cx.drop_whitespace();
                cx.report(kind, &message, out);
                State::Skip
            }
            ValueEnd::Cut { .. } | ValueEnd::Stopped(_) => {
                cx.unterminated("the stream ended inside the calls", out);
                State::Text
            }
            ValueEnd::NotAValue => State::Text,
        };
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        match self.state {
            State::Start => cx.flush(out),
            State::Listed => {
                let msg = format!("the stream ended before {CLOSE}");
                if self.cfg.missing_section_end {
                    cx.lenient(true, WarningKind::MissingSectionEnd, &msg, out);
                } else {
                    cx.unterminated(&msg, out);
                }
            }
            State::Open => cx.unterminated(&format!("the stream ended inside {OPEN}"), out),
            _ => {}
        }
        self.state = State::Start;
    }

    fn at_text(&self) -> bool {
        matches!(self.state, State::Start | State::Text)
    }
}

/// An olmo3 parser with the given options (without the reasoning layer).
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(
        Olmo3 {
            cfg,
            state: State::Start,
        },
        &MARKERS,
        cfg.limits,
    )
}

/// Renders text and then the block: `<function_calls>` right after the text, one call per
/// line, values as Python literals with double-quoted strings and JSON's `null`/`true`/`false`
/// (vLLM's docstring and vllm#26126's example; no template could be verified).
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    if let Some(t) = REASONING.tag_in(text) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    if calls.is_empty() {
        return Ok(text.as_bytes().to_vec());
    }
    if !text.is_empty() && text.trim().is_empty() {
        return Err("whitespace-only text before calls is dropped by the parser".into());
    }
    let mut out = String::from(text);
    out.push_str(OPEN);
    for (k, c) in calls.iter().enumerate() {
        if c.id.is_some() || c.server.is_some() {
            return Err("olmo3 carries no call ids or servers".into());
        }
        if !c.name.split('.').all(is_identifier) {
            return Err(format!("the name {:?} is not a Python name", c.name));
        }
        let Value::Object(args) = &c.arguments else {
            return Err("arguments must be a JSON object".into());
        };
        if k > 0 {
            out.push('\n');
        }
        out.push_str(&c.name);
        out.push('(');
        for (j, (key, v)) in args.iter().enumerate() {
            if !is_identifier(key) || matches!(key.as_str(), "true" | "false" | "null") {
                return Err(format!("the argument {key:?} is not a keyword name"));
            }
            if j > 0 {
                out.push_str(", ");
            }
            out.push_str(key);
            out.push('=');
            write_literal(&mut out, v, Quotes::DoubleJson);
        }
        out.push(')');
    }
    out.push_str(CLOSE);
    if out.len() - text.len() > Limits::default().max_args_bytes {
        return Err("the block is longer than the parser's limit".into());
    }
    Ok(out.into_bytes())
}

/// What sets olmo3 apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "olmo3";
    const SUMMARY: &'static str = "AllenAI Olmo 3: <function_calls>get_weather(city=\"Paris\", days=3)⏎get_time(tz=null)</function_calls>, <think> reasoning";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// None: Olmo 3 writes `<function_calls>` and `<think>` with ordinary vocabulary entries
    /// (vLLM's `Olmo3ReasoningParser`: "`<think>` and `</think>`, which are tokenized using
    /// standard vocabulary entries", `</think>` split in three); no Olmo 3 tokenizer could be
    /// had offline, so `o200k_base` cuts the replays and may split every delimiter.
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
    const LAYER: Option<&'static Syntax> = Some(&REASONING);
}

/// The olmo3 format.
pub static FORMAT: Format = entry::format::<Declared>();

#[cfg(test)]
mod tests;
