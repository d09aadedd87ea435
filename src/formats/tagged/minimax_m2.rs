//! `minimax_m2`: MiniMax-M2 `<minimax:tool_call>`/`<invoke>` tool calls, typed by the tool's
//! schema (`specs/minimax_m2.md`).
//!
//! ```text
//! text⏎<minimax:tool_call>⏎<invoke name="NAME">⏎<parameter name="KEY">VALUE</parameter>⏎</invoke>⏎</minimax:tool_call>
//! ```

use crate::event::{ToolCall, WarningKind};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::reasoning::Syntax;
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};

pub use crate::formats::tagged::Config;

/// MiniMax-M2's reasoning blocks, `<think>…</think>` (the model always thinks);
/// `specs/minimax_m2.md`.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &["<minimax:tool_call>", "<invoke name="],
    on_by_default: true,
    call_ends: &[],
};

/// The grammar: `<invoke name="…">` calls inside one `<minimax:tool_call>` block, quoted
/// attribute names, values verbatim, `</parameter>` closing only before the next parameter or
/// `</invoke>`.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        ("<minimax:tool_call>", Role::BlockOpen),
        ("</minimax:tool_call>", Role::BlockClose),
        ("<invoke name=", Role::CallOpen),
        ("</invoke>", Role::CallClose),
        ("<parameter name=", Role::ParamOpen),
        ("</parameter>", Role::ValueClose),
    ],
    call: CallForm::Attr,
    param: ParamForm::Attr,
    structural: true,
    follow_block_close: false,
    pad: false,
    string_attr: false,
    nested: false,
    block_end_warning: WarningKind::MissingSectionEnd,
    reasoning: Some(&REASONING),
    native: Native::NONE,
    variants: &[],
};

/// minimax_m2's place in the tagged family.
pub struct MinimaxM2;

impl tagged::Member for MinimaxM2 {
    const ID: &'static str = "minimax_m2";
    const SUMMARY: &'static str = "MiniMax-M2: <minimax:tool_call><invoke name=\"f\"><parameter name=\"p\">raw value</parameter></invoke></minimax:tool_call>, typed by the tool's schema";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["[e~["];
    const VOCABULARY: Option<&'static str> = Some("minimax_m2");
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        out.push_str("<minimax:tool_call>\n");
        for c in calls {
            out.push_str("<invoke name=\"");
            out.push_str(&c.name);
            out.push_str("\">\n");
            for (k, v) in c.arguments.as_object().into_iter().flatten() {
                out.push_str("<parameter name=\"");
                out.push_str(k);
                out.push_str("\">");
                out.push_str(&tagged::value_text(v));
                out.push_str("</parameter>\n");
            }
            out.push_str("</invoke>\n");
        }
        out.push_str("</minimax:tool_call>");
    }

    fn typing_probe(raw: &str) -> Vec<u8> {
        format!("<minimax:tool_call>\n<invoke name=\"typing_probe\">\n<parameter name=\"v\">{raw}</parameter>\n</invoke>\n</minimax:tool_call>")
            .into_bytes()
    }
}

/// The minimax_m2 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: MiniMax-M2's generation prompt always ends `<think>`: the switch changes nothing.
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Reasoning,
    }),
    ..tagged::format::<MinimaxM2>()
};

/// MiniMax-M2 vocabulary tokens that can appear in its output (ids not verified; `<invoke`
/// and `<parameter` are ordinary text).
const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken {
        text: "<minimax:tool_call>",
        id: None,
    },
    SpecialToken {
        text: "</minimax:tool_call>",
        id: None,
    },
    SpecialToken {
        text: "<think>",
        id: None,
    },
    SpecialToken {
        text: "</think>",
        id: None,
    },
    SpecialToken {
        text: "[e~[",
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
            r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},"note":{"type":["string","null"]}}}},{"name":"get_time","parameters":{}}]"#,
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

    fn warnings(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn parallel_invokes_in_one_block() {
        let r = parse(
            "</think>\n\nLet me check.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">  San Francisco</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n<invoke name=\"get_time\">\n</invoke>\n</minimax:tool_call>",
        );
        assert!(r.errors.is_empty());
        assert_eq!(r.text, "</think>\n\nLet me check.\n");
        assert_eq!(
            r.calls[0].arguments,
            json!({"city": "  San Francisco", "days": 3})
        );
        assert_eq!(r.calls[1].arguments, json!({}));
    }

    #[test]
    fn booleans_and_nulls_follow_the_table() {
        let r = parse(
            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"metric\">yes</parameter>\n<parameter name=\"note\">nil</parameter>\n<parameter name=\"city\">null</parameter>\n</invoke>\n</minimax:tool_call>",
        );
        assert_eq!(
            r.calls[0].arguments,
            json!({"metric": "yes", "note": null, "city": "null"})
        );
        assert_eq!(warnings(&r), ["type_mismatch", "null_alias"]);
    }

    #[test]
    fn outer_closers_inside_a_value_are_content() {
        let r = parse(
            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">a</invoke></minimax:tool_call></parameter>b</parameter>\n</invoke>\n</minimax:tool_call>",
        );
        assert_eq!(
            r.calls[0].arguments,
            json!({"city": "a</invoke></minimax:tool_call></parameter>b"})
        );
    }

    #[test]
    fn single_quotes_and_missing_section_end_are_warnings() {
        let r = parse("<minimax:tool_call>\n<invoke name='get_time'>\n</invoke>\n");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["single_quotes", "missing_section_end"]);
        let r = parse("<minimax:tool_call>\n<invoke name=\"\">\n</invoke>\n</minimax:tool_call>");
        assert_eq!(r.errors[0].kind, ErrorKind::MissingName);
        let r =
            parse("<minimax:tool_call>\n<invoke name=get_time>\n</invoke>\n</minimax:tool_call>");
        assert_eq!(r.errors[0].kind, ErrorKind::MalformedMarkup);
        let r = parse("<minimax:tool_call>\n<invoke name=\"get_time\">\n");
        assert_eq!(r.errors[0].kind, ErrorKind::Unterminated);
    }

    #[test]
    fn renderer_round_trips() {
        let calls = vec![ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": "Zürich 🌧", "days": 1}),
        }];
        let out =
            String::from_utf8(tagged::render::<MinimaxM2>("", &calls, &tools()).unwrap()).unwrap();
        assert_eq!(
            out,
            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Zürich 🌧</parameter>\n<parameter name=\"days\">1</parameter>\n</invoke>\n</minimax:tool_call>"
        );
        assert_eq!(parse(&out).calls, calls);
    }
}
