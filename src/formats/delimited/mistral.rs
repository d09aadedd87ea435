//! `mistral`: Mistral tokenizers before v11, `[TOOL_CALLS]` followed by a JSON array of call
//! objects `{"name": …, "arguments": {…}, "id": …}` (`specs/mistral.md`).
//!
//! The array's brackets and commas are read by the grammar; each element by the call-object
//! reader, so brackets inside strings or nested arrays never end the array.

use crate::event::{ErrorKind, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::delimited::{
    Cx, Driver, EnvelopeOptions, EnvelopeReader, Grammar, Limits, TextStep, ValueEnd, is_ws,
};
use crate::formats::reasoning::Syntax;
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// `[TOOL_CALLS]`: the JSON array of calls follows.
pub const TOOL_CALLS: &str = "[TOOL_CALLS]";
/// The delimiters.
pub const MARKERS: [&str; 1] = [TOOL_CALLS];

config! {
    /// Leniency options and limits; every recovered deviation is one named option.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A single call object instead of an array (Dynamo's fixture form) is accepted with a
            /// warning.
            object_not_array,
            /// A call object without `arguments` gets `{}` with a warning (vLLM's reading). Off by
            /// default: mistral-common rejects it.
            missing_arguments,
        }
        /// Size and nesting limits.
        pub limits: Limits,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            object_not_array: true,
            missing_arguments: false,
            limits: Limits::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Text,
    /// After `[TOOL_CALLS]`: `[` (or a lone `{`) expected.
    Expect,
    /// Inside the array: an element is expected (`first`: right after `[`, so `]` may close it).
    Element {
        first: bool,
    },
    /// An element is being read (`single`: a lone object, not in an array).
    Reading {
        single: bool,
    },
    /// After an element: `,` or `]` expected.
    AfterElement,
    /// After an error, up to the next `[TOOL_CALLS]`.
    Skip,
}

struct Mistral {
    cfg: Config,
    state: State,
}

impl Mistral {
    fn open_element(&mut self, cx: &mut Cx, single: bool) {
        let opts = EnvelopeOptions {
            args_keys: &[("arguments", None)],
            has_id: true,
            missing_arguments: self.cfg.missing_arguments,
            string_arguments: false,
            text_unless_named: false,
            keyed: false,
        };
        cx.open(EnvelopeReader::boxed(opts, &cx.limits));
        self.state = State::Reading { single };
    }

    fn bad(&mut self, cx: &mut Cx, what: &str, out: &mut dyn Sink) {
        cx.error(ErrorKind::InvalidJson, what, out);
        self.state = State::Skip;
    }

    /// The array ended (or the lone object did).
    fn array_done(&mut self, cx: &mut Cx) {
        cx.hold_whitespace();
        self.state = State::Text;
    }
}

impl Grammar for Mistral {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        let b = t.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match self.state {
                State::Text => {
                    cx.text(&t[i..], out);
                    return TextStep::Taken;
                }
                State::Skip | State::Reading { .. } => return TextStep::Taken,
                _ if is_ws(b[i]) => {}
                State::Expect => match b[i] {
                    b'[' => self.state = State::Element { first: true },
                    b'{' => {
                        if cx.lenient(
                            self.cfg.object_not_array,
                            WarningKind::ObjectNotArray,
                            "a call object instead of an array",
                            out,
                        ) {
                            self.open_element(cx, true);
                            return TextStep::Value(i);
                        }
                        self.state = State::Skip;
                    }
                    _ => self.bad(cx, "[TOOL_CALLS] not followed by a JSON array", out),
                },
                State::Element { first } => match b[i] {
                    b'{' => {
                        self.open_element(cx, false);
                        return TextStep::Value(i);
                    }
                    b']' if first => self.array_done(cx),
                    b']' => self.bad(cx, "a trailing comma in the array of calls", out),
                    _ => self.bad(cx, "an element of the array of calls is not an object", out),
                },
                State::AfterElement => match b[i] {
                    b',' => self.state = State::Element { first: false },
                    b']' => self.array_done(cx),
                    _ => self.bad(cx, "expected `,` or `]` in the array of calls", out),
                },
            }
            i += 1;
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, _m: usize, out: &mut dyn Sink) {
        match self.state {
            State::Expect | State::Element { .. } | State::AfterElement => {
                cx.error(
                    ErrorKind::InvalidJson,
                    "an array of calls not closed before the next [TOOL_CALLS]",
                    out,
                );
            }
            _ => {}
        }
        cx.drop_whitespace();
        self.state = State::Expect;
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        let single = matches!(self.state, State::Reading { single: true });
        self.state = match end {
            ValueEnd::Done { index } => {
                if let Some(i) = index {
                    cx.end_call(i, out);
                }
                if single {
                    cx.hold_whitespace();
                    State::Text
                } else {
                    State::AfterElement
                }
            }
            ValueEnd::Failed {
                kind,
                message,
                complete,
            } => {
                cx.report(kind, &message, out);
                match (complete, single) {
                    // Valid JSON with wrong content: the array goes on.
                    (true, false) => State::AfterElement,
                    (true, true) => {
                        cx.hold_whitespace();
                        State::Text
                    }
                    (false, _) => State::Skip,
                }
            }
            ValueEnd::NotAValue => State::Skip,
            ValueEnd::Cut { .. } | ValueEnd::Stopped(_) => {
                cx.unterminated("the stream ended inside a call object", out);
                State::Text
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
        if matches!(
            self.state,
            State::Expect | State::Element { .. } | State::AfterElement
        ) {
            cx.unterminated("the stream ended inside the array of calls", out);
        }
        self.state = State::Text;
    }
}

/// A mistral parser with the given options.
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(
        Mistral {
            cfg,
            state: State::Text,
        },
        &MARKERS,
        cfg.limits,
    )
}

/// Renders text and calls as mistral-common's v3+ encoder does: text, then `[TOOL_CALLS]` and
/// one JSON array whose elements carry `name`, `arguments` and (when the call has one) `id`.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    if text.contains(TOOL_CALLS) {
        return Err(format!("the text contains the marker {TOOL_CALLS}"));
    }
    if let Some(t) = REASONING.tag_in(text) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    let mut out = String::from(text);
    if calls.is_empty() {
        return Ok(out.into_bytes());
    }
    let mut items = Vec::new();
    for c in calls {
        if c.server.is_some() {
            return Err("mistral has no server field".into());
        }
        if c.name.is_empty() {
            return Err("a call needs a name".into());
        }
        crate::formats::delimited::json_header_fits(&c.name, "name")?;
        if let Some(id) = &c.id {
            crate::formats::delimited::json_header_fits(id, "id")?;
        }
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        let mut o = serde_json::json!({"name": c.name, "arguments": c.arguments});
        if let Some(id) = &c.id {
            o["id"] = serde_json::Value::String(id.clone());
        }
        items.push(o);
    }
    out.push_str(TOOL_CALLS);
    out.push_str(&serde_json::Value::Array(items).to_string());
    Ok(out.into_bytes())
}

/// Magistral's reasoning blocks, `[THINK]…[/THINK]` (control tokens: no plain text spells
/// them, so the layer is on); a call written inside one is reasoning, never a call
/// (`specs/mistral.md`, Reasoning).
pub static REASONING: Syntax = Syntax {
    pairs: &[("[THINK]", "[/THINK]")],
    call_markers: &[TOOL_CALLS],
    on_by_default: true,
    call_ends: &[],
};

/// What sets mistral apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "mistral";
    const SUMMARY: &'static str =
        "Mistral before v11: [TOOL_CALLS][{\"name\": …, \"arguments\": {…}, \"id\": …}, …]";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// Control tokens of the v3 SentencePiece vocabulary that can appear in output.
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["</s>"];
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken::new("</s>", 2),
        SpecialToken::new(TOOL_CALLS, 5),
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
    const LAYER: Option<&'static Syntax> = Some(&REASONING);
}

/// The mistral format.
pub static FORMAT: Format = entry::format::<Declared>();

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

    #[test]
    fn the_renderer_refuses_a_name_whose_json_form_is_over_the_header_limit() {
        // Found by the roundtrip fuzz target: 600 quotes are 1 200 bytes once escaped, which
        // the reader (counting escaped bytes) refuses with limit_exceeded.
        let call = |name: String| ToolCall {
            name,
            id: None,
            server: None,
            arguments: json!({}),
        };
        let quotes = "\"".repeat(600);
        let err = render("", &[call(quotes)], &Tools::default()).unwrap_err();
        assert!(
            err.contains("longer than the parser's 1024-byte limit"),
            "{err}"
        );
        let plain = "n".repeat(1000);
        let bytes = render("", &[call(plain.clone())], &Tools::default()).unwrap();
        let back = ParseResult::fold(&crate::formats::run_chunks(
            &mut parser(Config::default()),
            [&bytes[..]],
        ));
        assert_eq!(back.calls[0].name, plain, "{back:?}");
    }

    #[test]
    fn think_blocks_are_reasoning_and_a_call_inside_one_does_not_run() {
        let mk = || reasoning::wrap(parser(Config::default()), &REASONING);
        let call = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": \"[THINK]\"}}]";
        let r = every_cut(&mk, format!("[THINK]plan[/THINK]{call}").as_bytes()).0;
        assert_eq!(r.reasoning_text(), "plan");
        assert_eq!(r.text, "");
        assert_eq!(r.calls[0].arguments, json!({"a": "[THINK]"}));
        let r = every_cut(&mk, format!("[THINK]{call}[/THINK]ok").as_bytes()).0;
        assert!(r.calls.is_empty());
        assert_eq!(r.text, "ok");
        assert_eq!(r.warnings[0].kind, "call_in_reasoning");
    }

    #[test]
    fn array_with_ids_and_text_around() {
        let r = all_ways(
            "Let me check.\n[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"q\": \"arr[0] = v[1]]\"}, \"id\": \"a1B2c3D4e\"}, {\"id\": \"Zz9Yy8Xx7\", \"name\": \"get_time\", \"arguments\": {}}] Done.",
        );
        assert_eq!(r.text, "Let me check.\n Done.");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].id.as_deref(), Some("a1B2c3D4e"));
        assert_eq!(r.calls[0].arguments, json!({"q": "arr[0] = v[1]]"}));
        assert_eq!(r.calls[1].id.as_deref(), Some("Zz9Yy8Xx7"));
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    }

    #[test]
    fn errors_keep_complete_calls() {
        let r = all_ways(
            "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"x\": tru}}, {\"name\": \"c\", \"arguments\": {}}] tail",
        );
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.text, "");
        let r = all_ways(
            "[TOOL_CALLS][{\"arguments\": {}}, {\"name\": \"c\", \"arguments\": []}, {\"name\": \"d\", \"arguments\": {}}]",
        );
        assert_eq!(
            r.error_kinds(),
            vec![ErrorKind::MissingName, ErrorKind::InvalidJson]
        );
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].name, "d");
    }

    #[test]
    fn lone_object_second_marker_and_cut() {
        let r = all_ways("[TOOL_CALLS]{\"name\": \"f\", \"arguments\": {}}");
        assert_eq!(r.warnings[0].kind, "object_not_array");
        assert_eq!(r.calls.len(), 1);
        let r = all_ways(
            "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}][TOOL_CALLS][{\"name\": \"g\", \"arguments\": {}}]",
        );
        assert_eq!(r.calls.len(), 2);
        assert!(r.errors.is_empty());
        let r = all_ways("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\"");
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
        assert_eq!(r.calls.len(), 1);
        let r = all_ways("[TOOL_CALLS] []");
        assert!(r.calls.is_empty() && r.errors.is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn rendered_calls_parse_back_under_cuts(
            text in "[^\\[]{0,12}",
            calls in proptest::collection::vec(("[a-z_]{1,8}", proptest::option::of("[a-zA-Z0-9]{9}"), crate::formats::core::testkit::arb_json("[a-z\\[\\]_ \"\\\\]{0,8}")), 0..3),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, id, v)| prop_call(name, id, v)).collect();
            let bytes = render(&text, &calls, &Tools::default()).unwrap();
            parses_back(&mut parser(Config::default()), &bytes, &cuts, &text, &calls)?;
        }

        #[test]
        fn soup_is_split_invariant(
            parts in proptest::collection::vec(prop_oneof![
                Just(TOOL_CALLS.to_string()), Just("[{\"name\": \"f\", \"arguments\": {\"a\": \"]\"}".to_string()),
                Just(", \"id\": \"x\"}".to_string()), Just("]".to_string()), Just(",".to_string()),
                Just("\"".to_string()), Just(" \n".to_string()), Just("[TOOL".to_string()), "[a-z{}\":, \\[\\]]{0,6}",
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
