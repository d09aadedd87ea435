//! The guided-JSON reader: the output of a request whose tool choice made the server constrain
//! generation to JSON (`tool_choice = "required"`: an array of call objects; a named tool: that
//! tool's argument object), whatever the format (`specs/corpus.md` §1.2, rules G1–G7).
//!
//! One grammar over the family's driver, so the payload is read by the family's readers: a
//! named payload by the `ObjectReader` (streamed as it arrives), each element of a required
//! array by the `EnvelopeReader` (`parameters` or `arguments`, key order free). The format
//! contributes only its delimiters, which are stripped where they wrap the payload, and its
//! reasoning layer, which `formats::modes` puts in front. A payload that is not one is text:
//! nothing the model wrote is lost, and the error says why it is not a call.

use super::{
    Cx, Driver, EnvelopeOptions, EnvelopeReader, Grammar, Limits, ObjectReader, TextStep, ValueEnd,
    ValueReader, is_ws,
};
use crate::event::{ErrorKind, Sink, WarningKind};
use crate::formats::config::config;
use crate::formats::core::request::FinishReason;
use crate::formats::{OptionInfo, OptionValues, StreamParser};
use std::sync::{Arc, Mutex};

/// What the payload is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `tool_choice = "required"`: a JSON array of call objects.
    Required,
    /// A named tool choice: the tool's argument object.
    Named(String),
}

config! {
    /// Leniencies of the guided reader (`--option FORMAT.guided.NAME=…`); each recovered
    /// deviation is a warning of the option's name, and with the option off an error.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A single call object where `tool_choice = "required"` asks for an array is read as
            /// a one-call array, with a warning (backends that constrain to one call, Dynamo's
            /// reading); off: `malformed_markup`.
            object_not_array,
            /// A call object without `parameters`/`arguments` is a call without arguments (`{}`),
            /// with a warning (a tool that takes none); off: `invalid_json`.
            missing_arguments,
            /// The format's own delimiters around the payload (`<tool_call>{…}</tool_call>` from a
            /// template that primes its markup) are stripped with a warning; off: `malformed_markup`.
            markup_around_payload,
            /// Text after a complete payload is kept as text with a warning (guided decoding ends
            /// with the payload, so only a backend that let the model go on writes any); off:
            /// `malformed_markup`.
            text_after_payload,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            object_not_array: true,
            missing_arguments: true,
            markup_around_payload: true,
            text_after_payload: true,
        }
    }
}

/// The guided reader's options, named `guided.NAME`, with their defaults.
pub fn option_list() -> Vec<OptionInfo> {
    let c = Config::default();
    Config::OPTIONS
        .iter()
        .map(|o| OptionInfo {
            name: format!("guided.{}", o.name),
            default: (o.get)(&c),
            reason: o.reason.split_whitespace().collect::<Vec<_>>().join(" "),
        })
        .collect()
}

/// The configuration with `values` (names without the `guided.` prefix) over the defaults.
pub fn config(values: &OptionValues) -> Result<Config, String> {
    let mut c = Config::default();
    for (name, &on) in values {
        let o = Config::OPTIONS
            .iter()
            .find(|o| o.name == name)
            .ok_or_else(|| {
                format!(
                    "unknown option \"guided.{name}\"; known guided options: {}",
                    Config::OPTIONS
                        .iter()
                        .map(|o| o.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        (o.set)(&mut c, on);
    }
    Ok(c)
}

/// Where the reader is in the visible output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the payload: whitespace and delimiters so far.
    Start,
    /// Inside a required array: an element is expected (`first`: right after `[`).
    Element { first: bool },
    /// A value is open (the named arguments, or an element; `single`: a lone call object).
    Reading { single: bool },
    /// After an element of the array: `,` or `]`.
    AfterElement,
    /// After the complete payload.
    After,
    /// Everything from here on is text (the output held no payload, it broke, or text followed
    /// it).
    Text,
}

/// The guided grammar.
struct Guided {
    choice: Choice,
    cfg: Config,
    finish: FinishReason,
    state: State,
    /// What came before the payload, verbatim (whitespace and delimiters): text after all if no
    /// payload starts.
    pending: String,
    /// Delimiters met before the payload.
    stripped: usize,
    /// The raw text of the value being read and of the array around it, shared with the
    /// capturing reader: a value that breaks is shown as what the model wrote.
    raw: Arc<Mutex<String>>,
    /// Calls read whole.
    calls: usize,
    /// The format's delimiters, to show a delimiter met where text is kept as it came.
    markers: Vec<String>,
}

impl Guided {
    fn raw(&self) -> std::sync::MutexGuard<'_, String> {
        // A poisoned lock only means a panic elsewhere; the text is still what was captured.
        self.raw.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn open(&mut self, cx: &mut Cx, single: bool, out: &mut dyn Sink) {
        let reader: Box<dyn ValueReader> = match &self.choice {
            Choice::Named(name) => {
                let i = cx.start_call(name, None, out);
                Box::new(ObjectReader::new(Some(i), false, &cx.limits))
            }
            Choice::Required => Box::new(EnvelopeReader::new(
                EnvelopeOptions {
                    args_keys: &[("parameters", None), ("arguments", None)],
                    has_id: false,
                    missing_arguments: self.cfg.missing_arguments,
                    string_arguments: false,
                    text_unless_named: false,
                    keyed: false,
                },
                &cx.limits,
            )),
        };
        // An element that breaks after calls of the array ended is shown from its first byte
        // (those calls stand); before any, the whole payload is.
        if self.calls > 0 {
            self.raw().clear();
        }
        cx.open(Box::new(Capturing {
            inner: reader,
            raw: self.raw.clone(),
        }));
        self.state = State::Reading { single };
    }

    /// The payload starts: the delimiters before it were markup around it.
    fn payload_starts(&mut self, cx: &mut Cx, out: &mut dyn Sink) -> bool {
        if self.stripped > 0 {
            let ok = cx.lenient(
                self.cfg.markup_around_payload,
                WarningKind::MarkupAroundPayload,
                "the format's delimiters before the guided payload, stripped",
                out,
            );
            if !ok {
                self.broken(cx, out);
                return false;
            }
        }
        self.pending.clear();
        self.raw().clear();
        true
    }

    /// The output is not a payload: what was held, and all that follows, is text.
    fn broken(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        let mut held = std::mem::take(&mut self.pending);
        held.push_str(&std::mem::take(&mut *self.raw()));
        cx.release();
        cx.text(&held, out);
        self.state = State::Text;
    }

    /// The payload holds no call.
    fn no_call(&mut self, cx: &mut Cx, what: &str, out: &mut dyn Sink) {
        let msg = match &self.choice {
            Choice::Named(n) => format!(
                "{what}: the tool choice names {n:?}, so the output had to be its argument object"
            ),
            Choice::Required => format!(
                "{what}: tool_choice=required, so the output had to be a JSON array of calls"
            ),
        };
        cx.error(ErrorKind::NoToolBlocks, &msg, out);
        self.broken(cx, out);
    }

    /// A value or the array around it broke: its error, then its text.
    fn failed(&mut self, cx: &mut Cx, kind: ErrorKind, what: &str, out: &mut dyn Sink) {
        cx.report(kind, what, out);
        self.broken(cx, out);
    }

    fn payload_done(&mut self, cx: &mut Cx) {
        self.raw().clear();
        cx.hold_whitespace();
        self.state = State::After;
    }

    fn keep_raw(&mut self, s: &str) {
        self.raw().push_str(s);
    }
}

impl Grammar for Guided {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        let b = t.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match self.state {
                State::Text => {
                    cx.text(&t[i..], out);
                    return TextStep::Taken;
                }
                State::Reading { .. } => return TextStep::Taken,
                State::After => {
                    let rest = &t[i..];
                    if cx.is_blank(rest) {
                        cx.text(rest, out);
                        return TextStep::Taken;
                    }
                    if cx.lenient(
                        self.cfg.text_after_payload,
                        WarningKind::TextAfterPayload,
                        "text after the guided payload, kept as text",
                        out,
                    ) {
                        cx.text(rest, out);
                    }
                    self.state = State::Text;
                    return TextStep::Taken;
                }
                State::Start => {
                    let c = b[i];
                    if is_ws(c) {
                        self.pending.push(c as char);
                        i += 1;
                        continue;
                    }
                    let starts = match (&self.choice, c) {
                        (Choice::Named(_), b'{') => Some(true),
                        (Choice::Required, b'[') => Some(false),
                        (Choice::Required, b'{') => Some(true),
                        _ => None,
                    };
                    match starts {
                        None => {
                            self.no_call(
                                cx,
                                &format!(
                                    "the output at byte {} is not a guided JSON payload",
                                    cx.pos + i as u64
                                ),
                                out,
                            );
                            cx.text(&t[i..], out);
                            return TextStep::Taken;
                        }
                        Some(object) => {
                            cx.pos += i as u64;
                            let ok = self.payload_starts(cx, out);
                            cx.pos -= i as u64;
                            if !ok {
                                cx.text(&t[i..], out);
                                return TextStep::Taken;
                            }
                            if !object {
                                self.keep_raw("[");
                                self.state = State::Element { first: true };
                                i += 1;
                                continue;
                            }
                            if matches!(self.choice, Choice::Required) {
                                cx.pos += i as u64;
                                let ok = cx.lenient(
                                    self.cfg.object_not_array,
                                    WarningKind::ObjectNotArray,
                                    "a call object where tool_choice=required asks for an array of calls",
                                    out,
                                );
                                cx.pos -= i as u64;
                                if !ok {
                                    self.broken(cx, out);
                                    cx.text(&t[i..], out);
                                    return TextStep::Taken;
                                }
                            }
                            self.open(cx, true, out);
                            return TextStep::Value(i);
                        }
                    }
                }
                State::Element { first } => {
                    let c = b[i];
                    if is_ws(c) {
                        self.keep_raw(&t[i..i + 1]);
                        i += 1;
                        continue;
                    }
                    match c {
                        b'{' => {
                            self.open(cx, false, out);
                            return TextStep::Value(i);
                        }
                        b']' if first => {
                            self.keep_raw("]");
                            self.no_call(cx, "an empty array of calls", out);
                            i += 1;
                        }
                        _ => {
                            let at = cx.pos + i as u64;
                            self.failed(
                                cx,
                                ErrorKind::InvalidJson,
                                &format!("an element of the guided array of calls at byte {at} is not a call object"),
                                out,
                            );
                        }
                    }
                }
                State::AfterElement => {
                    let c = b[i];
                    self.keep_raw(&t[i..i + 1]);
                    i += 1;
                    match c {
                        _ if is_ws(c) => {}
                        b',' => self.state = State::Element { first: false },
                        b']' => self.payload_done(cx),
                        _ => {
                            let at = cx.pos + i as u64 - 1;
                            self.failed(
                                cx,
                                ErrorKind::InvalidJson,
                                &format!(
                                    "expected `,` or `]` in the guided array of calls at byte {at}"
                                ),
                                out,
                            );
                        }
                    }
                }
            }
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        let text = self.markers.get(m).cloned().unwrap_or_default();
        match self.state {
            State::Start => {
                self.stripped += 1;
                self.pending.push_str(&text);
            }
            State::After => {
                if cx.lenient(
                    self.cfg.markup_around_payload,
                    WarningKind::MarkupAroundPayload,
                    "the format's delimiter after the guided payload, stripped",
                    out,
                ) {
                    cx.drop_whitespace();
                } else {
                    cx.text(&text, out);
                    self.state = State::Text;
                }
            }
            State::Text => {
                cx.text(&text, out);
            }
            State::Element { .. } | State::AfterElement => {
                let at = cx.pos;
                self.keep_raw(&text);
                self.failed(
                    cx,
                    ErrorKind::InvalidJson,
                    &format!(
                        "a delimiter of the format inside the guided array of calls at byte {at}"
                    ),
                    out,
                );
            }
            // The value's bytes go to its reader, never to the scanner.
            State::Reading { .. } => {}
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        let single = matches!(self.state, State::Reading { single: true });
        match end {
            ValueEnd::Done { index } => {
                if let Some(i) = index {
                    cx.end_call(i, out);
                    self.calls += 1;
                }
                if single {
                    self.payload_done(cx);
                } else {
                    // The call stands: what breaks later is shown from after it.
                    self.raw().clear();
                    self.state = State::AfterElement;
                }
            }
            ValueEnd::Failed { kind, message, .. } => {
                self.failed(cx, kind, &message, out);
            }
            ValueEnd::NotAValue | ValueEnd::Stopped(_) | ValueEnd::Unnamed(_) => {
                let at = cx.pos;
                self.failed(
                    cx,
                    ErrorKind::InvalidJson,
                    &format!("the guided payload at byte {at} is not a call"),
                    out,
                );
            }
            ValueEnd::Cut { .. } => self.cut(cx, out),
        }
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        match self.state {
            State::Start if self.finish == FinishReason::Length => {
                let at = cx.pos;
                cx.error(
                    ErrorKind::Unterminated,
                    &format!("max_tokens cut the output (finish_reason=length) at byte {at}, before the guided payload"),
                    out,
                );
                self.broken(cx, out);
            }
            State::Start => {
                let at = cx.pos;
                self.no_call(
                    cx,
                    &format!("the output ended at byte {at} without a guided payload"),
                    out,
                );
            }
            State::Element { .. } | State::AfterElement => self.cut(cx, out),
            _ => {}
        }
        self.state = State::Start;
        self.pending.clear();
        self.stripped = 0;
        self.raw().clear();
        self.calls = 0;
    }

    fn at_text(&self) -> bool {
        matches!(self.state, State::Start | State::After | State::Text)
    }
}

impl Guided {
    /// The stream ended inside the payload: `unterminated`, and what was written is text.
    fn cut(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        let why = match self.finish {
            FinishReason::Length => "max_tokens cut the guided payload (finish_reason=length)",
            FinishReason::Stop => "the output ended inside the guided payload",
        };
        let at = cx.pos;
        self.failed(
            cx,
            ErrorKind::Unterminated,
            &format!("{why} at byte {at}"),
            out,
        );
    }
}

/// A value reader that keeps the raw text it consumes in the grammar's buffer.
struct Capturing {
    inner: Box<dyn ValueReader>,
    raw: Arc<Mutex<String>>,
}

impl Capturing {
    fn keep(&self, s: &str) {
        self.raw
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_str(s);
    }
}

impl ValueReader for Capturing {
    fn feed(&mut self, s: &str, cx: &mut Cx, out: &mut dyn Sink) -> (usize, Option<ValueEnd>) {
        let (n, end) = self.inner.feed(s, cx, out);
        self.keep(&s[..n.min(s.len())]);
        (n, end)
    }
    fn eof(&mut self, cx: &mut Cx, out: &mut dyn Sink) -> ValueEnd {
        self.inner.eof(cx, out)
    }
    fn spoil(&mut self) {
        self.inner.spoil();
    }
    fn stream(&mut self, s: &str, cx: &Cx, out: &mut dyn Sink) -> bool {
        let took = self.inner.stream(s, cx, out);
        if took {
            self.keep(s);
        }
        took
    }
}

/// A delimiter no output holds, for a format that declares none (the driver needs one).
const NO_MARKER: &str = "\u{0}guided\u{0}";

/// The guided reader for `choice`, stripping the format's delimiters `markers` around the
/// payload.
pub fn parser(
    choice: Choice,
    cfg: Config,
    markers: Vec<String>,
    finish: FinishReason,
) -> impl StreamParser {
    let mut markers: Vec<String> = markers.into_iter().filter(|m| !m.is_empty()).collect();
    if markers.is_empty() {
        markers.push(NO_MARKER.to_string());
    }
    let refs: Vec<&str> = markers.iter().map(String::as_str).collect();
    let driver = Driver::new(
        Guided {
            choice,
            cfg,
            finish,
            state: State::Start,
            pending: String::new(),
            stripped: 0,
            raw: Arc::new(Mutex::new(String::new())),
            calls: 0,
            markers: markers.clone(),
        },
        &refs,
        Limits::default(),
    );
    GuidedParser { driver }
}

/// The driver of the guided grammar, as a parser.
struct GuidedParser {
    driver: Driver<Guided>,
}

impl StreamParser for GuidedParser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        self.driver.feed(chunk, out);
    }
    fn finish(&mut self, out: &mut dyn Sink) {
        self.driver.finish(out);
    }
    fn at_text(&self) -> bool {
        self.driver.at_text()
    }
}

/// Writes calls as guided decoding makes a model write them: a named choice's argument
/// object, or `tool_choice = "required"`'s array of `{"name", "parameters"}` objects (vLLM's
/// schema). Text cannot be carried (guided output is the payload alone).
pub fn render(
    choice: &Choice,
    text: &str,
    calls: &[crate::event::ToolCall],
) -> Result<String, String> {
    if !text.is_empty() {
        return Err("guided output carries no text beside the payload".into());
    }
    match choice {
        Choice::Named(name) => match calls {
            [c] if c.name == *name && c.id.is_none() && c.server.is_none() => {
                if !c.arguments.is_object() {
                    return Err("arguments must be a JSON object".into());
                }
                Ok(exact_json(&c.arguments))
            }
            _ => Err(format!(
                "a named tool choice carries exactly one call of {name:?}, without id or server"
            )),
        },
        Choice::Required => {
            if calls.is_empty() {
                return Err("tool_choice=required carries at least one call".into());
            }
            let mut items = Vec::new();
            for c in calls {
                if c.id.is_some()
                    || c.server.is_some()
                    || c.name.is_empty()
                    || !c.arguments.is_object()
                {
                    return Err(
                        "a guided call has a name and object arguments, no id or server".into(),
                    );
                }
                super::json_header_fits(&c.name, "name")?;
                items.push(serde_json::json!({"name": c.name, "parameters": c.arguments}));
            }
            Ok(exact_json(&serde_json::Value::Array(items)))
        }
    }
}

/// A JSON value's text in a string of exactly its size: written once to count its bytes, then
/// into a string that never grows (growing doubles: a 10 MB argument took 20 MB).
fn exact_json(v: &serde_json::Value) -> String {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    if serde_json::to_writer(&mut n, v).is_err() {
        return v.to_string();
    }
    let mut out = Vec::with_capacity(n.0);
    if serde_json::to_writer(&mut out, v).is_err() {
        return v.to_string();
    }
    // serde_json writes UTF-8 only.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult, ToolCall};
    use crate::formats::core::testkit::{self, every_cut};
    use proptest::prelude::*;
    use serde_json::json;

    const MARKERS: [&str; 2] = ["<tool_call>", "</tool_call>"];

    #[test]
    fn rendered_json_takes_exactly_its_size() {
        let v = json!({"a": "x".repeat(100_000), "b": [1, 2.5, null, "é\n"]});
        let s = exact_json(&v);
        assert_eq!(s, v.to_string());
        assert_eq!(s.capacity(), s.len(), "no room left over from growing");
    }

    fn make(
        choice: Choice,
        cfg: Config,
        finish: FinishReason,
    ) -> impl Fn() -> Box<dyn StreamParser> {
        move || -> Box<dyn StreamParser> {
            Box::new(parser(
                choice.clone(),
                cfg,
                MARKERS.iter().map(|m| m.to_string()).collect(),
                finish,
            ))
        }
    }

    fn run(choice: Choice, s: &str) -> ParseResult {
        every_cut(
            &make(choice, Config::default(), FinishReason::Stop),
            s.as_bytes(),
        )
        .0
    }

    fn named() -> Choice {
        Choice::Named("f".into())
    }

    fn warns(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn g2_a_named_payload_is_the_argument_object_verbatim() {
        let r = run(
            named(),
            " {\"name\": \"x\", \"arguments\": {\"a\": [1, \"}\"]}} \n",
        );
        assert_eq!(r.calls[0].name, "f");
        assert_eq!(
            r.calls[0].arguments,
            json!({"name": "x", "arguments": {"a": [1, "}"]}})
        );
        assert_eq!((r.text.as_str(), r.errors.len()), ("", 0));
    }

    #[test]
    fn g2_a_required_payload_is_an_array_of_call_objects() {
        let r = run(
            Choice::Required,
            "[{\"name\": \"a\", \"parameters\": {\"x\": 1}},{\"arguments\": {}, \"name\": \"b\"}]",
        );
        let names: Vec<&str> = r.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(r.errors.is_empty() && r.warnings.is_empty());
        let r = run(Choice::Required, "{\"name\": \"a\"}");
        assert_eq!(r.calls[0].arguments, json!({}));
        assert_eq!(warns(&r), ["object_not_array", "missing_arguments"]);
        let strict = Config {
            object_not_array: false,
            missing_arguments: false,
            ..Config::default()
        };
        let r = every_cut(
            &make(Choice::Required, strict, FinishReason::Stop),
            b"{\"name\": \"a\"}",
        )
        .0;
        assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
        assert_eq!(r.text, "{\"name\": \"a\"}");
    }

    #[test]
    fn g3_markup_around_the_payload_is_stripped_with_a_warning() {
        let r = run(
            named(),
            "<tool_call>\n{\"a\": \"<tool_call>\"}\n</tool_call>\n",
        );
        assert_eq!(r.calls[0].arguments, json!({"a": "<tool_call>"}));
        assert_eq!(r.text, "");
        assert_eq!(
            warns(&r),
            ["markup_around_payload", "markup_around_payload"]
        );
        let strict = Config {
            markup_around_payload: false,
            ..Config::default()
        };
        let r = every_cut(&make(named(), strict, FinishReason::Stop), b"<tool_call>{}").0;
        assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
        assert_eq!(r.text, "<tool_call>{}");
    }

    #[test]
    fn g4_text_after_the_payload_is_text_with_a_warning() {
        let r = run(named(), "{} and more {}");
        assert_eq!((r.calls.len(), r.text.as_str()), (1, " and more {}"));
        assert_eq!(warns(&r), ["text_after_payload"]);
    }

    #[test]
    fn g5_no_payload_is_text_with_no_tool_blocks() {
        for (choice, s) in [
            (named(), "Sure: {\"a\": 1}"),
            (named(), "[1]"),
            (Choice::Required, "  nothing"),
            (Choice::Required, "[ ]"),
            (Choice::Required, ""),
        ] {
            let r = run(choice, s);
            assert_eq!(r.error_kinds(), [ErrorKind::NoToolBlocks], "{s:?}");
            assert_eq!(r.text, s, "{s:?}");
            assert!(r.calls.is_empty());
        }
    }

    #[test]
    fn g6_a_broken_payload_is_text_with_its_error() {
        let r = run(named(), "{\"a\": tru}");
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidJson]);
        assert_eq!(r.text, "{\"a\": tru}");
        let r = run(
            Choice::Required,
            "[{\"name\": \"a\", \"parameters\": {}}, {\"parameters\": {}}, {\"name\": \"c\"}]",
        );
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.error_kinds(), [ErrorKind::MissingName]);
        assert_eq!(r.text, "{\"parameters\": {}}, {\"name\": \"c\"}]");
        let r = run(
            Choice::Required,
            "[{\"name\": \"a\", \"parameters\": {}} 7]",
        );
        assert_eq!((r.calls.len(), r.text.as_str()), (1, " 7]"));
        let r = run(
            Choice::Required,
            "[{\"name\": \"a\", \"parameters\": {\"q\": \"x",
        );
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
        assert_eq!(r.text, "[{\"name\": \"a\", \"parameters\": {\"q\": \"x");
    }

    #[test]
    fn g7_a_cut_before_the_payload_under_length_is_unterminated() {
        let r = every_cut(
            &make(named(), Config::default(), FinishReason::Length),
            b"  ",
        )
        .0;
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
    }

    #[test]
    fn invalid_utf8_inside_the_payload_fails_the_call() {
        let r = every_cut(
            &make(named(), Config::default(), FinishReason::Stop),
            b"{\"a\": \"\xff\"}",
        )
        .0;
        assert!(r.calls.is_empty());
        assert!(r.error_kinds().contains(&ErrorKind::InvalidUtf8));
    }

    fn arb_calls() -> impl Strategy<Value = Vec<ToolCall>> {
        proptest::collection::vec(
            testkit::arb_call(Just(None), "[a-z<>\"\\\\ \\]\\[{}é🙂]{0,6}"),
            1..4,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn a_rendered_payload_parses_back_under_cycling_small_chunks(
            calls in arb_calls(), sizes in proptest::collection::vec(1usize..6, 1..5)) {
            let s = render(&Choice::Required, "", &calls).unwrap();
            let mut p = make(Choice::Required, Config::default(), FinishReason::Stop)();
            let chunks = testkit::cycled_chunks(s.as_bytes(), &sizes);
            let r = ParseResult::fold(&crate::formats::run_chunks(p.as_mut(), chunks));
            prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
            prop_assert_eq!(r.calls, calls.clone());
            let one = vec![ToolCall { name: "f".into(), ..calls[0].clone() }];
            let s = render(&named(), "", &one).unwrap();
            let mut p = make(named(), Config::default(), FinishReason::Stop)();
            let r = ParseResult::fold(&crate::formats::run_chunks(p.as_mut(), testkit::cycled_chunks(s.as_bytes(), &sizes)));
            prop_assert_eq!(r.calls, one);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_are_split_invariant(
            bytes in proptest::collection::vec(prop_oneof![
                Just(b'['), Just(b']'), Just(b'{'), Just(b'}'), Just(b'"'), Just(b','), Just(b'<'), any::<u8>()], 0..60),
            cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
            for choice in [named(), Choice::Required] {
                let m = make(choice, Config::default(), FinishReason::Stop);
                let whole = testkit::fold_cut(m().as_mut(), &bytes, &[]);
                prop_assert_eq!(testkit::fold_cut(m().as_mut(), &bytes, &cuts), whole);
            }
        }
    }
}
