//! `llama3_json`: Llama 3.x JSON tool calls, `{"name": …, "parameters": {…}}` at the start of
//! the output or right after `<|python_tag|>`, several joined by `;` (`specs/llama3_json.md`).
//!
//! No delimiter marks a call's end: the call object ends where its JSON ends. An object that
//! has no `name` key is an answer written in JSON, not a call: it is text.

use crate::event::{Sink, ToolCall};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::delimited::{
    Cx, Driver, EnvelopeOptions, EnvelopeReader, Grammar, Limits, TextStep, ValueEnd, is_ws,
};
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// `<|python_tag|>`: a tool call follows.
pub const PYTHON_TAG: &str = "<|python_tag|>";
/// `<|eom_id|>`: end of a message that expects a tool result (a terminator, dropped).
pub const EOM: &str = "<|eom_id|>";
/// `<|eot_id|>`: end of the turn (a terminator, dropped).
pub const EOT: &str = "<|eot_id|>";
/// The delimiters, in the order the grammar numbers them.
pub const MARKERS: [&str; 3] = [PYTHON_TAG, EOM, EOT];

config! {
    /// Options and limits. `parameters` and `arguments` are both canonical (Meta writes the
    /// first, engines accept both), so reading either is no leniency.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Config {
        options {
        }
        /// Size and nesting limits.
        pub limits: Limits,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace yet: a call may start here.
    Start,
    /// Prose: no call until `<|python_tag|>`.
    Text,
    /// Right after `<|python_tag|>`: a call may start after whitespace.
    Tag,
    /// A call object is being read.
    Call,
    /// After a call: `;`, a terminator or text.
    AfterCall,
    /// After `;` (kept with the whitespace after it, shown as text unless a call follows).
    Separator(String),
    /// After an error, up to the next delimiter.
    Skip,
}

struct Llama3 {
    state: State,
}

fn open_call(cx: &mut Cx) {
    let opts = EnvelopeOptions {
        args_keys: &[("parameters", None), ("arguments", None)],
        has_id: false,
        missing_arguments: false,
        string_arguments: false,
        text_unless_named: true,
        keyed: false,
    };
    cx.open(EnvelopeReader::boxed(opts, &cx.limits));
}

impl Grammar for Llama3 {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        let lead = t.bytes().take_while(|&b| is_ws(b)).count();
        match &mut self.state {
            State::Start | State::Tag | State::Separator(_) if lead == t.len() => {
                if let State::Separator(sep) = &mut self.state {
                    sep.push_str(t);
                } else {
                    if self.state == State::Start && !cx.is_holding() {
                        cx.hold_whitespace();
                    }
                    cx.text(t, out);
                }
            }
            State::Start | State::Tag | State::Separator(_) => {
                let call = t.as_bytes()[lead] == b'{';
                if let State::Separator(sep) = &mut self.state {
                    let sep = std::mem::take(sep);
                    if !call {
                        cx.text(&sep, out);
                    }
                } else if self.state == State::Start && !cx.is_holding() {
                    cx.hold_whitespace();
                }
                cx.text(&t[..lead], out);
                if call {
                    open_call(cx);
                    self.state = State::Call;
                    return TextStep::Value(lead);
                }
                cx.text(&t[lead..], out);
                self.state = State::Text;
            }
            State::AfterCall => {
                if lead < t.len() && t.as_bytes()[lead] == b';' {
                    cx.text(&t[..lead], out);
                    self.state = State::Separator(";".into());
                    if lead + 1 < t.len() {
                        return match self.text(cx, &t[lead + 1..], out) {
                            TextStep::Value(k) => TextStep::Value(lead + 1 + k),
                            TextStep::Taken => TextStep::Taken,
                        };
                    }
                } else {
                    if lead < t.len() {
                        self.state = State::Text;
                    }
                    cx.text(t, out);
                }
            }
            State::Text => {
                cx.text(t, out);
            }
            State::Call | State::Skip => {}
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        if self.state == State::Start {
            // Whitespace before the first delimiter is no call's neighbour: it is text.
            cx.flush(out);
        }
        if let State::Separator(sep) = &self.state {
            let sep = sep.clone();
            cx.text(&sep, out);
        }
        if m == 0 {
            cx.drop_whitespace();
            cx.hold_whitespace();
            self.state = State::Tag;
        } else {
            // A terminator ends the message: it is dropped, and what follows is prose.
            cx.drop_whitespace();
            self.state = State::Text;
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        self.state = match end {
            ValueEnd::Done { index } => {
                if let Some(i) = index {
                    cx.end_call(i, out);
                }
                State::AfterCall
            }
            ValueEnd::Unnamed(raw) => {
                cx.text(&raw, out);
                State::Text
            }
            ValueEnd::Failed { kind, message, .. } => {
                cx.drop_whitespace();
                cx.report(kind, &message, out);
                State::Skip
            }
            ValueEnd::Cut { .. } | ValueEnd::Stopped(_) => {
                cx.unterminated("the stream ended inside a call", out);
                State::Text
            }
            // The call opens at its `{`, never before it.
            ValueEnd::NotAValue => State::Text,
        };
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        if self.state == State::Start {
            cx.flush(out);
        }
        if let State::Separator(sep) = &self.state {
            let sep = sep.clone();
            cx.text(&sep, out);
        }
        self.state = State::Start;
    }
}

/// A llama3_json parser with the given options.
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(
        Llama3 {
            state: State::Start,
        },
        &MARKERS,
        cfg.limits,
    )
}

/// Renders text and calls in Meta's form: text, then `<|python_tag|>` and the calls as
/// `{"name": …, "parameters": {…}}` joined by `; `.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    use std::fmt::Write;
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    if text.trim_start().starts_with('{') {
        return Err("text that starts with `{` would be read as a call".into());
    }
    let mut out = String::from(text);
    if calls.is_empty() {
        return Ok(out.into_bytes());
    }
    out.push_str(PYTHON_TAG);
    for (k, c) in calls.iter().enumerate() {
        if c.id.is_some() || c.server.is_some() {
            return Err("llama3_json carries no call ids or servers".into());
        }
        if c.name.is_empty() {
            return Err("a call needs a name".into());
        }
        crate::formats::delimited::json_header_fits(&c.name, "name")?;
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        if k > 0 {
            out.push_str("; ");
        }
        // `{"name": …, "parameters": …}` compact, as serde_json writes that object, with the
        // arguments written in place rather than copied into a new object and a string first.
        let name = serde_json::to_string(&c.name).map_err(|e| e.to_string())?;
        write!(out, "{{\"name\":{name},\"parameters\":{}}}", c.arguments)
            .map_err(|e| e.to_string())?;
    }
    Ok(out.into_bytes())
}

/// What sets llama3_json apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "llama3_json";
    const SUMMARY: &'static str =
        "Llama 3.x JSON calls: [<|python_tag|>]{\"name\": …, \"parameters\": {…}}; …";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// Llama 3 special tokens that can appear in output (ids = 128000 + position).
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"];
    const VOCABULARY: Option<&'static str> = Some("llama3");
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken::new("<|begin_of_text|>", 128000),
        SpecialToken::new("<|end_of_text|>", 128001),
        SpecialToken::new("<|start_header_id|>", 128006),
        SpecialToken::new("<|end_header_id|>", 128007),
        SpecialToken::new(EOM, 128008),
        SpecialToken::new(EOT, 128009),
        SpecialToken::new(PYTHON_TAG, 128010),
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
}

/// The llama3_json format.
pub static FORMAT: Format = entry::format::<Declared>();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult};
    use crate::formats::core::testkit::{every_cut, fold_cut, parses_back, prop_call};
    use proptest::prelude::*;
    use serde_json::json;

    fn all_ways(s: &str) -> ParseResult {
        every_cut(&|| Box::new(parser(Config::default())), s.as_bytes()).0
    }

    #[test]
    fn a_name_at_the_header_limit_renders_and_parses_back_one_over_is_refused() {
        // Found by the roundtrip fuzz target: the reader counted the name's two quotes, so a
        // name the renderer let through at 1 023 escaped bytes came back limit_exceeded.
        let call = |name: &str| ToolCall {
            name: name.to_string(),
            id: None,
            server: None,
            arguments: json!({}),
        };
        let at_limit = format!("{}{}", "\u{0}".repeat(100), "n".repeat(1024 - 600));
        assert_eq!(serde_json::to_string(&at_limit).unwrap().len() - 2, 1024);
        let bytes = render("", &[call(&at_limit)], &Tools::default()).unwrap();
        let back = all_ways(std::str::from_utf8(&bytes).unwrap());
        assert_eq!(back.error_kinds(), vec![]);
        assert_eq!(back.calls[0].name, at_limit);
        let over = format!("{at_limit}n");
        assert!(render("", &[call(&over)], &Tools::default()).is_err());
        let text = format!(
            "{{\"name\": {}, \"parameters\": {{}}}}",
            serde_json::to_string(&over).unwrap()
        );
        assert_eq!(
            all_ways(&text).error_kinds(),
            vec![ErrorKind::LimitExceeded]
        );
    }

    #[test]
    fn calls_at_the_start_or_after_the_tag() {
        let r = all_ways(
            " \n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"type\": \"function\", \"arguments\": {}, \"name\": \"get_time\"}<|eot_id|>",
        );
        assert_eq!(r.text, "");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[1].name, "get_time");
        assert!(r.errors.is_empty());
        let r = all_ways(
            "Sure.<|python_tag|>{\"name\": \"f\", \"parameters\": {\"q\": \"<|eot_id|>;\"}}<|eom_id|>",
        );
        assert_eq!(r.text, "Sure.");
        assert_eq!(r.calls[0].arguments, json!({"q": "<|eot_id|>;"}));
    }

    #[test]
    fn json_later_in_prose_or_without_a_name_is_text() {
        let r = all_ways("Here: {\"name\": \"f\", \"parameters\": {}}");
        assert!(r.calls.is_empty());
        assert_eq!(r.text, "Here: {\"name\": \"f\", \"parameters\": {}}");
        let r = all_ways("  {\"answer\": 42} is it");
        assert!(r.calls.is_empty() && r.errors.is_empty());
        assert_eq!(r.text, "  {\"answer\": 42} is it");
        let r = all_ways("{\"answer\": 4 2}");
        assert!(r.errors.is_empty());
        assert_eq!(r.text, "{\"answer\": 4 2}");
        let r = all_ways("<|python_tag|>brave_search.call(query=\"x\")");
        assert_eq!(r.text, "brave_search.call(query=\"x\")");
    }

    #[test]
    fn broken_and_cut_calls() {
        let r = all_ways("{\"name\": \"f\", \"parameters\": {\"a\": }}");
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        let r = all_ways("{\"name\": \"f\", \"parameters\": [1]}");
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        let r = all_ways("{\"name\": \"f\"}");
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        let r = all_ways("{\"name\": \"f\", \"parameters\": {}, \"arguments\": {}}");
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        let r = all_ways("{\"name\": \"\", \"parameters\": {}}");
        assert_eq!(r.error_kinds(), vec![ErrorKind::MissingName]);
        let r = all_ways("{\"name\": \"f\", \"parameters\": {\"a\": 1");
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
        let r = all_ways("{\"name\": \"f\", \"parameters\": {}}; then text");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.text, "; then text");
        let r = all_ways("{\"name\": \"f\", \"parameters\": {}}\n\nThat is all.");
        assert_eq!(r.text, "\n\nThat is all.");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn rendered_calls_parse_back_under_cuts(
            text in "[^<{]{0,12}",
            calls in proptest::collection::vec(("[a-z_]{1,8}", crate::formats::core::testkit::arb_json("[a-z<>|;_ \"\\\\]{0,8}")), 0..3),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, v)| prop_call(name, None, v)).collect();
            let bytes = render(&text, &calls, &Tools::default()).unwrap();
            parses_back(&mut parser(Config::default()), &bytes, &cuts, &text, &calls)?;
        }

        #[test]
        fn soup_is_split_invariant(
            parts in proptest::collection::vec(prop_oneof![
                Just(PYTHON_TAG.to_string()), Just(EOT.to_string()), Just("{\"name\": \"f\", ".to_string()),
                Just("\"parameters\": {\"a\": \"<|eot_id|>\"}}".to_string()), Just(";".to_string()),
                Just("}".to_string()), Just("\"".to_string()), Just(" \n".to_string()), Just("<|py".to_string()),
                "[a-z{}\":;, <|>]{0,6}",
            ], 0..16),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
        ) {
            let s = parts.concat();
            let whole = fold_cut(&mut parser(Config::default()), s.as_bytes(), &[]);
            let r = fold_cut(&mut parser(Config::default()), s.as_bytes(), &cuts);
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(r.warnings.len(), whole.warnings.len());
        }
    }
}
