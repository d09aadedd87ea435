//! `glm45`: GLM-4.5 / GLM-4.6 `<arg_key>`/`<arg_value>` tool calls, typed by the tool's schema
//! (`specs/glm45.md`).
//!
//! ```text
//! text⏎<tool_call>NAME⏎<arg_key>KEY</arg_key>⏎<arg_value>VALUE</arg_value>⏎</tool_call>
//! ```

use crate::event::{ToolCall, WarningKind};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::reasoning::Syntax;
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};

pub use crate::formats::tagged::Config;

/// GLM's reasoning blocks, `<think>…</think>` (GLM-4.5 and later think by default; shared by
/// glm47); `specs/glm45.md`.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &["<tool_call>"],
    on_by_default: true,
    call_ends: &[],
};

/// GLM-4.5's grammar: the block is the call, its name is the text up to the first newline or
/// key, and only `</arg_value>` ends a value.
pub static GRAMMAR: Grammar = SHAPE;

/// The tags shared by `glm45` and `glm47` (which writes its names without the newline).
pub const SHAPE: Grammar = Grammar {
    markers: &[
        ("<tool_call>", Role::BlockOpen),
        ("</tool_call>", Role::BlockClose),
        ("<arg_key>", Role::ParamOpen),
        ("</arg_key>", Role::KeyClose),
        ("<arg_value>", Role::ValueOpen),
        ("</arg_value>", Role::ValueClose),
    ],
    call: CallForm::Bare,
    param: ParamForm::KeyValue,
    structural: false,
    follow_block_close: false,
    pad: false,
    string_attr: false,
    nested: false,
    block_end_warning: WarningKind::MissingCallEnd,
    reasoning: Some(&REASONING),
    native: Native::NONE,
    variants: &[],
};

/// glm45's place in the tagged family.
pub struct Glm45;

impl tagged::Member for Glm45 {
    const ID: &'static str = "glm45";
    const SUMMARY: &'static str = "GLM-4.5/4.6: <tool_call>NAME⏎<arg_key>K</arg_key>⏎<arg_value>raw value</arg_value>⏎</tool_call>, typed by the tool's schema";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<|user|>", "<|observation|>"];
    const VOCABULARY: Option<&'static str> = Some("glm4");
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        for (i, c) in calls.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("<tool_call>");
            out.push_str(&c.name);
            out.push('\n');
            for (k, v) in c.arguments.as_object().into_iter().flatten() {
                out.push_str("<arg_key>");
                out.push_str(k);
                out.push_str("</arg_key>\n<arg_value>");
                out.push_str(&tagged::value_text(v));
                out.push_str("</arg_value>\n");
            }
            out.push_str("</tool_call>");
        }
    }

    fn typing_probe(raw: &str) -> Vec<u8> {
        format!(
            "<tool_call>typing_probe\n<arg_key>v</arg_key>\n<arg_value>{raw}</arg_value>\n</tool_call>"
        )
        .into_bytes()
    }
}

/// The glm45 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: GLM-4.5 writes `<think>` itself; thinking off, the template writes `<think></think>`.
    thinking: Some(Thinking {
        on: StartingState::None,
        off: StartingState::Response,
    }),
    ..tagged::format::<Glm45>()
};

/// GLM-4.5/4.6/4.7 added tokens that can appear in output: each tag is one token (ids as
/// quoted from `tokenizer_config.json` in the fact sheet); the others' ids were not checked.
pub const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken::new("<tool_call>", 151352),
    SpecialToken::new("</tool_call>", 151353),
    SpecialToken::new("<arg_key>", 151356),
    SpecialToken::new("</arg_key>", 151357),
    SpecialToken::new("<arg_value>", 151358),
    SpecialToken::new("</arg_value>", 151359),
    SpecialToken {
        text: "<think>",
        id: None,
    },
    SpecialToken {
        text: "</think>",
        id: None,
    },
    SpecialToken {
        text: "<|user|>",
        id: None,
    },
    SpecialToken {
        text: "<|observation|>",
        id: None,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult};
    use crate::formats::core::testkit::every_cut;
    use crate::tools::Tools;
    use serde_json::json;

    fn tools() -> Tools {
        Tools::from_json(
            r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"units":{"enum":["c","f"]}}}},{"name":"get_time","parameters":{}}]"#,
        )
        .unwrap()
    }

    fn parse(s: &str) -> ParseResult {
        let t = tools();
        every_cut(
            &|| Box::new(tagged::Parser::new(&GRAMMAR, Config::default(), &t)),
            s.as_bytes(),
        )
        .0
    }

    fn kinds(r: &ParseResult) -> (Vec<ErrorKind>, Vec<&str>) {
        (
            r.errors.iter().map(|e| e.kind).collect(),
            r.warnings.iter().map(|w| w.kind.as_str()).collect(),
        )
    }

    #[test]
    fn template_calls_parallel_and_no_argument() {
        let r = parse(
            "Let me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value> Paris </arg_value>\n<arg_key>days</arg_key>\n<arg_value> 3 </arg_value>\n</tool_call>\n<tool_call>get_time\n</tool_call>",
        );
        assert_eq!(kinds(&r), (vec![], vec![]));
        assert_eq!(r.text, "Let me check.\n");
        assert_eq!(r.calls[0].arguments, json!({"city": " Paris ", "days": 3}));
        assert_eq!(
            (r.calls[1].name.as_str(), &r.calls[1].arguments),
            ("get_time", &json!({}))
        );
    }

    #[test]
    fn only_the_value_close_ends_a_value() {
        let r = parse(
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>git log </tool_call> <arg_key>x</arg_key> --oneline</arg_value>\n</tool_call>",
        );
        assert_eq!(
            r.calls[0].arguments,
            json!({"city": "git log </tool_call> <arg_key>x</arg_key> --oneline"})
        );
    }

    #[test]
    fn typed_out_newlines_are_read_with_a_warning() {
        let r = parse(
            "<tool_call>get_weather\\n<arg_key>city</arg_key>\\n<arg_value>Paris</arg_value>\\n</tool_call>",
        );
        assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(
            kinds(&r).1,
            ["escaped_newline", "escaped_newline", "escaped_newline"]
        );
        let off = Config {
            escaped_newline: false,
            ..Config::default()
        };
        let t = tools();
        let r = every_cut(
            &|| Box::new(tagged::Parser::new(&GRAMMAR, off, &t)),
            b"<tool_call>get_weather\n<arg_key>city</arg_key>\\n<arg_value>Paris</arg_value></tool_call>",
        )
        .0;
        assert_eq!(kinds(&r).0, [ErrorKind::MalformedMarkup]);
    }

    #[test]
    fn a_padded_or_compact_name_is_read_with_its_warning_or_refused() {
        let t = tools();
        let with = |cfg: Config, grammar: &'static Grammar, s: &str| {
            every_cut(
                &|| Box::new(tagged::Parser::new(grammar, cfg, &t)),
                s.as_bytes(),
            )
            .0
        };
        let padded = "<tool_call> get_time \n</tool_call>";
        let compact =
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>";
        let r = parse(padded);
        assert_eq!(
            (r.calls[0].name.as_str(), kinds(&r)),
            ("get_time", (vec![], vec!["header_whitespace"]))
        );
        let r = parse(compact);
        assert_eq!(r.calls[0].arguments, json!({"city": "Oslo"}));
        assert_eq!(kinds(&r), (vec![], vec!["compact_form"]));
        // GLM-4.7 writes the compact form: no warning there.
        let r = with(Config::default(), &crate::formats::glm47::GRAMMAR, compact);
        assert_eq!((r.calls.len(), kinds(&r)), (1, (vec![], vec![])));
        // Options off: refused, no call.
        let strict = Config {
            header_whitespace: false,
            compact_form: false,
            ..Config::default()
        };
        for s in [padded, compact] {
            let r = with(strict, &GRAMMAR, s);
            assert_eq!(
                (r.calls.len(), kinds(&r).0),
                (0, vec![ErrorKind::MalformedMarkup]),
                "{s}"
            );
        }
    }

    #[test]
    fn missing_value_or_key_is_malformed_never_an_empty_call() {
        for s in [
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>",
            "<tool_call>get_weather\n<arg_value>Paris</arg_value>\n</tool_call>",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis\n</tool_call>",
            "<tool_call>get_weather\ncity=Paris\n</tool_call>",
        ] {
            let r = parse(s);
            assert_eq!(kinds(&r).0, [ErrorKind::MalformedMarkup], "{s}");
            assert!(r.calls.is_empty());
        }
        let r =
            parse("<tool_call>\n<arg_key>city</arg_key>\n<arg_value>x</arg_value>\n</tool_call>");
        assert_eq!(kinds(&r).0, [ErrorKind::MissingName]);
    }

    #[test]
    fn a_missing_block_end_is_unterminated() {
        let r = parse(
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n",
        );
        assert_eq!(kinds(&r).0, [ErrorKind::Unterminated]);
        assert!(r.calls.is_empty() && r.text.is_empty());
    }

    #[test]
    fn renderer_round_trips() {
        let calls = vec![ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": " x<y> ", "days": 2}),
        }];
        let out =
            String::from_utf8(tagged::render::<Glm45>("T", &calls, &tools()).unwrap()).unwrap();
        assert_eq!(
            out,
            "T<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value> x<y> </arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"
        );
        assert_eq!(parse(&out).calls, calls);
    }
}
