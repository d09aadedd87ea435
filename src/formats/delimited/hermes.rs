//! `hermes`: Hermes 2 Pro / Qwen2.5 / Qwen3 `<tool_call>{json}</tool_call>` (`specs/hermes.md`).
//!
//! ```text
//! text<tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```
//!
//! A grammar over the family driver ([`crate::formats::delimited`]): the call object is read by the
//! envelope reader, so `</tool_call>` inside a JSON string is content.

use crate::event::{ErrorKind, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::delimited::{
    Cx, Driver, EnvelopeOptions, EnvelopeReader, Grammar, Limits, TextStep, ValueEnd,
};
use crate::formats::reasoning::Syntax;
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// `<tool_call>`: opens a call.
pub const OPEN: &str = "<tool_call>";
/// `</tool_call>`: closes a call.
pub const CLOSE: &str = "</tool_call>";
/// The delimiters, in the order the grammar numbers them.
pub const MARKERS: [&str; 2] = [OPEN, CLOSE];

config! {
    /// Leniency options and limits; every recovered deviation is one named option, on by default.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// `arguments` written as a JSON string holding an object (Granite 4, vLLM's serialized-
            /// arguments test) is decoded once with a warning instead of rejected.
            string_arguments,
            /// `parameters` in place of `arguments` (SGLang's reading) is accepted with a warning; off,
            /// `parameters` is an ordinary (ignored) key.
            parameters_key,
            /// A call object without an arguments key gets `{}` with a warning instead of failing.
            missing_arguments,
            /// A complete call object followed by the next `<tool_call>` or the end of the stream
            /// (a max_tokens cut) is kept with a warning.
            missing_call_end,
            /// A `</tool_call>` outside a call is dropped with a warning instead of an error.
            stray_call_end,
        }
        /// Size and nesting limits.
        pub limits: Limits,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            string_arguments: true,
            parameters_key: true,
            missing_arguments: true,
            missing_call_end: true,
            stray_call_end: true,
            limits: Limits::default(),
        }
    }
}

const KEYS_LENIENT: &[(&str, Option<WarningKind>)] = &[
    ("arguments", None),
    ("parameters", Some(WarningKind::ParametersKey)),
];
const KEYS_STRICT: &[(&str, Option<WarningKind>)] = &[("arguments", None)];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Outside calls.
    Text,
    /// The call object is being read.
    Body,
    /// The call object was read; `</tool_call>` should follow.
    AfterBody(Option<usize>),
    /// After an error, up to the next `</tool_call>`.
    Skip,
}

struct Hermes {
    cfg: Config,
    state: State,
}

impl Hermes {
    fn open_call(&mut self, cx: &mut Cx) {
        cx.drop_whitespace();
        let opts = EnvelopeOptions {
            args_keys: if self.cfg.parameters_key {
                KEYS_LENIENT
            } else {
                KEYS_STRICT
            },
            has_id: false,
            missing_arguments: self.cfg.missing_arguments,
            string_arguments: self.cfg.string_arguments,
            text_unless_named: false,
            keyed: false,
        };
        cx.open(EnvelopeReader::boxed(opts, &cx.limits));
        self.state = State::Body;
    }

    /// Ends a call whose object is complete but whose `</tool_call>` is missing.
    fn unclosed(&mut self, index: Option<usize>, cx: &mut Cx, out: &mut dyn Sink) {
        let Some(i) = index else {
            return;
        };
        let what = format!("call {i} has no {CLOSE}");
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

impl Grammar for Hermes {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        match self.state {
            State::Text => {
                cx.text(t, out);
            }
            State::AfterBody(index) => {
                if !t.bytes().all(crate::formats::delimited::is_ws) {
                    if index.is_some() {
                        cx.error(
                            ErrorKind::InvalidJson,
                            "text after the call object, before </tool_call>,",
                            out,
                        );
                    }
                    self.state = State::Skip;
                }
            }
            State::Body | State::Skip => {}
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        let open = m == 0;
        match self.state {
            State::Text => {
                if open {
                    self.open_call(cx);
                } else {
                    cx.lenient(
                        self.cfg.stray_call_end,
                        WarningKind::StrayCallEnd,
                        "</tool_call> outside a call",
                        out,
                    );
                }
            }
            State::AfterBody(index) => {
                if open {
                    self.unclosed(index, cx, out);
                    self.open_call(cx);
                } else {
                    if let Some(i) = index {
                        cx.end_call(i, out);
                    } else {
                        cx.hold_whitespace();
                    }
                    self.state = State::Text;
                }
            }
            State::Skip => {
                cx.hold_whitespace();
                if open {
                    self.open_call(cx);
                } else {
                    self.state = State::Text;
                }
            }
            // The body is read by the envelope reader, which never yields to a delimiter.
            State::Body => {}
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        self.state = match end {
            ValueEnd::Done { index } => State::AfterBody(index),
            ValueEnd::NotAValue => {
                cx.error(
                    ErrorKind::InvalidJson,
                    "the call body is not a JSON object",
                    out,
                );
                State::Skip
            }
            ValueEnd::Failed { kind, message, .. } => {
                cx.report(kind, &message, out);
                State::Skip
            }
            ValueEnd::Cut { .. } | ValueEnd::Stopped(_) => {
                cx.unterminated("the stream ended inside a call", out);
                State::Text
            }
            // Only formats that read unnamed objects as text get this.
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
        if let State::AfterBody(index) = self.state {
            if self.cfg.missing_call_end {
                self.unclosed(index, cx, out);
            } else if index.is_some() {
                cx.unterminated("the stream ended before </tool_call>", out);
            }
        }
        self.state = State::Text;
    }
}

/// A hermes parser with the given options.
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(
        Hermes {
            cfg,
            state: State::Text,
        },
        &MARKERS,
        cfg.limits,
    )
}

/// Renders text and calls in the template's form: text, then per call
/// `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`, calls separated by a newline.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    render_blocks(text, calls, Some(&REASONING), "hermes")
}

/// The renderer of the `<tool_call>` grammar for a format (`id`, for messages) whose text is
/// also read by the reasoning layer `reasoning` (its tags are refused in the text).
pub(crate) fn render_blocks(
    text: &str,
    calls: &[ToolCall],
    reasoning: Option<&Syntax>,
    id: &str,
) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    if let Some(t) = reasoning.and_then(|r| r.tag_in(text)) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    let mut out = String::from(text);
    for (k, c) in calls.iter().enumerate() {
        if c.id.is_some() || c.server.is_some() {
            return Err(format!("{id} carries no call ids or servers"));
        }
        if c.name.is_empty() {
            return Err("a call needs a name".into());
        }
        crate::formats::delimited::json_header_fits(&c.name, "name")?;
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        if k > 0 {
            out.push('\n');
        }
        let obj = serde_json::json!({"name": c.name, "arguments": c.arguments});
        out.push_str(OPEN);
        out.push('\n');
        out.push_str(&obj.to_string());
        out.push('\n');
        out.push_str(CLOSE);
    }
    Ok(out.into_bytes())
}

/// Qwen3's reasoning blocks, `<think>…</think>` (its thinking mode is the default); a call
/// written inside one is reasoning, never a call (`specs/hermes.md`, Reasoning).
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &[OPEN],
    on_by_default: true,
    call_ends: &[],
};

/// What sets hermes apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "hermes";
    const SUMMARY: &'static str =
        "Hermes 2 Pro / Qwen2.5 / Qwen3: <tool_call>{\"name\": …, \"arguments\": {…}}</tool_call>";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// Qwen2.5 / Qwen3 special tokens that can appear in output, with their ids.
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<|im_end|>", "<|endoftext|>"];
    const VOCABULARY: Option<&'static str> = Some("qwen2");
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken::new("<|endoftext|>", 151643),
        SpecialToken::new("<|im_start|>", 151644),
        SpecialToken::new("<|im_end|>", 151645),
        SpecialToken::new(OPEN, 151657),
        SpecialToken::new(CLOSE, 151658),
        SpecialToken::new("<think>", 151667),
        SpecialToken::new("</think>", 151668),
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
    const LAYER: Option<&'static Syntax> = Some(&REASONING);
}

/// The hermes format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: Qwen3's hybrid template: the model writes `<think>`; thinking off, `<think></think>` is prefilled.
    thinking: Some(Thinking {
        on: StartingState::None,
        off: StartingState::Response,
    }),
    ..entry::format::<Declared>()
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::core::testkit::{every_cut, fold_cut, parses_back, prop_call};
    use crate::formats::reasoning;
    use proptest::prelude::*;
    use serde_json::json;

    fn all_ways(s: &str) -> ParseResult {
        every_cut(&|| Box::new(parser(Config::default())), s.as_bytes()).0
    }

    fn warnings(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn reasoning_is_split_and_a_call_inside_it_does_not_run() {
        let mk = || reasoning::wrap(parser(Config::default()), &REASONING);
        let r = every_cut(
            &mk,
            b"<think>plan</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"<think>\"}}\n</tool_call>",
        )
        .0;
        assert_eq!(r.reasoning_text(), "plan");
        assert_eq!(r.text, "\n");
        assert_eq!(r.calls[0].arguments, json!({"a": "<think>"}));
        let r = every_cut(
            &mk,
            b"<think><tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call></think>ok",
        )
        .0;
        assert!(r.calls.is_empty());
        assert_eq!(r.text, "ok");
        assert_eq!(warnings(&r), ["call_in_reasoning"]);
    }

    #[test]
    fn template_form_text_and_parallel_calls() {
        let r = all_ways(
            "Checking both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n",
        );
        assert_eq!(r.text, "Checking both.\n");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].name, "get_weather");
        assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(r.calls[0].id, None);
        assert_eq!(r.calls[1].arguments, json!({}));
        assert!(r.errors.is_empty() && r.warnings.is_empty());
    }

    #[test]
    fn text_between_and_after_calls_is_kept_verbatim() {
        let r = all_ways(
            "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call> and then \n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>\n done",
        );
        assert_eq!(r.text, " and then \n\n done");
        assert_eq!(r.calls.len(), 2);
    }

    #[test]
    fn markers_in_strings_and_key_order() {
        let r = all_ways(
            "<tool_call>{\"arguments\": {\"s\": \"</tool_call><tool_call>{\\\"\"}, \"name\": \"w\"}</tool_call>",
        );
        assert_eq!(r.calls[0].name, "w");
        assert_eq!(
            r.calls[0].arguments,
            json!({"s": "</tool_call><tool_call>{\""})
        );
    }

    #[test]
    fn escaped_keys_are_decoded() {
        let r = all_ways(
            "<tool_call>{\"n\\u0061me\": \"f\", \"x\\\"y\": 1, \"argument\\u0073\": {\"k\\\\\": 2}}</tool_call>",
        );
        assert_eq!(r.calls[0].name, "f");
        assert_eq!(r.calls[0].arguments, json!({"k\\": 2}));
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    }

    #[test]
    fn argument_variants_warn() {
        let r = all_ways("<tool_call>{\"name\": \"f\", \"parameters\": {\"a\": 1}}</tool_call>");
        assert_eq!(r.calls[0].arguments, json!({"a": 1}));
        assert_eq!(warnings(&r), ["parameters_key"]);
        let r = all_ways("<tool_call>{\"name\": \"f\"}</tool_call>");
        assert_eq!(r.calls[0].arguments, json!({}));
        assert_eq!(warnings(&r), ["missing_arguments"]);
        let r = all_ways(
            "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1]}\"}</tool_call>",
        );
        assert_eq!(r.calls[0].arguments, json!({"a": [1]}));
        assert_eq!(warnings(&r), ["string_arguments"]);
    }

    #[test]
    fn bad_calls_drop_only_themselves() {
        let ok = "<tool_call>{\"name\": \"ok\", \"arguments\": {}}</tool_call>";
        for (bad, kind) in [
            (
                "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }}</tool_call>",
                ErrorKind::InvalidJson,
            ),
            (
                "<tool_call>{\"arguments\": {}}</tool_call>",
                ErrorKind::MissingName,
            ),
            (
                "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
                ErrorKind::MissingName,
            ),
            (
                "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",
                ErrorKind::MissingName,
            ),
            (
                "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
                ErrorKind::InvalidJson,
            ),
            (
                "<tool_call>{\"name\": \"f\", \"arguments\": {}} x</tool_call>",
                ErrorKind::InvalidJson,
            ),
            (
                "<tool_call>{\"name\": \"f\", \"arguments\": {}</tool_call>",
                ErrorKind::InvalidJson,
            ),
            ("<tool_call></tool_call>", ErrorKind::InvalidJson),
            ("<tool_call>[1]</tool_call>", ErrorKind::InvalidJson),
            (
                "<tool_call>{\"name\": \"f\", \"name\": \"g\", \"arguments\": {}}</tool_call>",
                ErrorKind::InvalidJson,
            ),
        ] {
            let r = all_ways(&format!("A{bad}\n{ok}\nB"));
            assert_eq!(r.error_kinds(), vec![kind], "{bad}");
            assert_eq!(r.calls.len(), 1, "{bad}");
            assert_eq!(r.calls[0].name, "ok");
            assert_eq!(r.text, "A\nB", "{bad}");
        }
    }

    #[test]
    fn end_of_stream() {
        let r = all_ways("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["missing_call_end"]);
        let r = all_ways("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1");
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
        assert!(r.calls.is_empty());
        let strict = Config {
            missing_call_end: false,
            ..Config::default()
        };
        let mut p = parser(strict);
        let r = fold_cut(
            &mut p,
            b"<tool_call>{\"name\": \"f\", \"arguments\": {}}",
            &[],
        );
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
    }

    #[test]
    fn limits() {
        let small = Config {
            limits: Limits {
                max_args_bytes: 20,
                ..Limits::default()
            },
            ..Config::default()
        };
        let mut p = parser(small);
        let r = fold_cut(
            &mut p,
            b"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"0123456789\"}}</tool_call>",
            &[],
        );
        assert_eq!(r.error_kinds(), vec![ErrorKind::LimitExceeded]);
        let deep = format!(
            "<tool_call>{{\"name\": \"f\", \"arguments\": {}{}}}</tool_call>",
            "[".repeat(200),
            "]".repeat(200)
        );
        let r = all_ways(&deep);
        assert_eq!(r.error_kinds(), vec![ErrorKind::LimitExceeded]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn rendered_calls_parse_back_under_cuts(
            text in "[^<]{0,12}",
            calls in proptest::collection::vec(("[a-z_]{1,8}", crate::formats::core::testkit::arb_json("[a-z<>/_ \"\\\\]{0,8}")), 0..3),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, v)| prop_call(name, None, v)).collect();
            let bytes = render(&text, &calls, &Tools::default()).unwrap();
            parses_back(&mut parser(Config::default()), &bytes, &cuts, &text, &calls)?;
        }

        #[test]
        fn soup_is_split_invariant(
            parts in proptest::collection::vec(prop_oneof![
                Just(OPEN.to_string()), Just(CLOSE.to_string()), Just("{\"name\": \"f\", ".to_string()),
                Just("\"arguments\": {\"a\": \"</tool_call>\"}}".to_string()), Just("}".to_string()),
                Just("\"".to_string()), Just("\\".to_string()), Just(" \n".to_string()), Just("<tool_".to_string()),
                "[a-z{}\":, <>/]{0,6}",
            ], 0..16),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
        ) {
            let s = parts.concat();
            let mut p = parser(Config::default());
            let whole = fold_cut(&mut p, s.as_bytes(), &[]);
            let mut p = parser(Config::default());
            let r = fold_cut(&mut p, s.as_bytes(), &cuts);
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(r.warnings.len(), whole.warnings.len());
        }
    }
}
