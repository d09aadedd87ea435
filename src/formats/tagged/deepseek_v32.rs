//! `deepseek_v32`: DeepSeek-V3.2 DSML tool calls; each parameter says whether it is a string
//! (`specs/deepseek_v32.md`).
//!
//! ```text
//! text⏎⏎<｜DSML｜function_calls>⏎<｜DSML｜invoke name="NAME">⏎<｜DSML｜parameter name="KEY" string="true">VALUE</｜DSML｜parameter>⏎</｜DSML｜invoke>⏎</｜DSML｜function_calls>
//! ```

use crate::event::{ToolCall, WarningKind};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::reasoning::Syntax;
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};

pub use crate::formats::tagged::Config;

/// DeepSeek-V3.2's reasoning blocks, `<think>…</think>`; `specs/deepseek_v32.md`.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &["<｜DSML｜function_calls>", "<｜DSML｜invoke name="],
    on_by_default: true,
    call_ends: &[],
};

/// The grammar: the fullwidth DSML dialect only (`｜` is U+FF5C); `string="true"` values
/// verbatim, `string="false"` values JSON.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        ("<｜DSML｜function_calls>", Role::BlockOpen),
        ("</｜DSML｜function_calls>", Role::BlockClose),
        ("<｜DSML｜invoke name=", Role::CallOpen),
        ("</｜DSML｜invoke>", Role::CallClose),
        ("<｜DSML｜parameter name=", Role::ParamOpen),
        ("</｜DSML｜parameter>", Role::ValueClose),
    ],
    call: CallForm::Attr,
    param: ParamForm::Attr,
    structural: true,
    follow_block_close: false,
    pad: false,
    string_attr: true,
    nested: false,
    block_end_warning: WarningKind::MissingSectionEnd,
    reasoning: Some(&REASONING),
    native: Native::NONE,
    variants: &[],
};

/// deepseek_v32's place in the tagged family.
pub struct DeepseekV32;

impl tagged::Member for DeepseekV32 {
    const ID: &'static str = "deepseek_v32";
    const SUMMARY: &'static str = "DeepSeek-V3.2 DSML: <｜DSML｜function_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"p\" string=\"true|false\">value</｜DSML｜parameter>…";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<｜end▁of▁sentence｜>"];
    const VOCABULARY: Option<&'static str> = Some("deepseek_v3");
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        out.push_str("<｜DSML｜function_calls>");
        for c in calls {
            out.push_str("\n<｜DSML｜invoke name=\"");
            out.push_str(&c.name);
            out.push_str("\">\n");
            for (i, (k, v)) in c.arguments.as_object().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str("<｜DSML｜parameter name=\"");
                out.push_str(k);
                out.push_str(if v.is_string() {
                    "\" string=\"true\">"
                } else {
                    "\" string=\"false\">"
                });
                out.push_str(&tagged::value_text(v));
                out.push_str("</｜DSML｜parameter>");
            }
            out.push_str("\n</｜DSML｜invoke>");
        }
        out.push_str("\n</｜DSML｜function_calls>");
    }

    /// A call of `typing_probe` whose parameter `v` is written as exactly `raw`, without a
    /// `string` attribute, so the schema types it.
    const WIRE_TYPING_PROBE: bool = false;

    fn typing_probe(raw: &str) -> Vec<u8> {
        format!("<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"typing_probe\">\n<｜DSML｜parameter name=\"v\">{raw}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>")
            .into_bytes()
    }
}

/// The deepseek_v32 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: the prompt ends `<｜Assistant｜><think>` with thinking on, `</think>` off.
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    ..tagged::format::<DeepseekV32>()
};

/// DeepSeek-V3 special tokens that can appear in output; no DSML marker is one token.
const SPECIAL_TOKENS: &[SpecialToken] = &[SpecialToken::new("<｜end▁of▁sentence｜>", 1)];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult};
    use crate::formats::core::testkit::every_cut;
    use crate::tools::Tools;
    use serde_json::json;

    fn tools() -> Tools {
        Tools::from_json(
            r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"opts":{"type":"object"}}}},{"name":"get_time","parameters":{}}]"#,
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

    const CALL: &str = "I'll check.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\"> 杭州 </｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";

    #[test]
    fn the_attribute_decides_and_every_cut_agrees() {
        let r = parse(CALL);
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
        assert_eq!(r.text, "I'll check.\n\n");
        assert_eq!(r.calls[0].arguments, json!({"city": " 杭州 ", "days": 3}));
        assert_eq!(r.calls[1].arguments, json!({}));
    }

    #[test]
    fn disagreements_with_the_schema_and_missing_attributes_are_warnings() {
        let r = parse(
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"false\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\">7</｜DSML｜parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">{bad</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        );
        assert_eq!(
            r.calls[0].arguments,
            json!({"city": 42, "days": 7, "opts": "{bad"})
        );
        assert_eq!(
            warnings(&r),
            [
                "schema_type_mismatch",
                "missing_string_attribute",
                "type_mismatch"
            ]
        );
        let r = parse(
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"yes\">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        );
        assert_eq!(r.errors[0].kind, ErrorKind::MalformedMarkup);
        assert!(r.calls.is_empty());
    }

    #[test]
    fn ascii_dialect_inside_a_value_is_content() {
        let r = parse(
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">a</parameter></｜DSML｜invoke>b</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        );
        assert_eq!(
            r.calls[0].arguments,
            json!({"city": "a</parameter></｜DSML｜invoke>b"})
        );
    }

    #[test]
    fn several_blocks_are_all_parsed_and_a_missing_end_is_a_warning() {
        let r = parse(&format!("{CALL}\nmore\n{CALL}"));
        assert_eq!(r.calls.len(), 4);
        let cut = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n</｜DSML｜invoke>";
        let r = parse(cut);
        assert_eq!(
            (r.calls.len(), warnings(&r)),
            (1, vec!["missing_section_end"])
        );
    }

    #[test]
    fn renderer_round_trips() {
        let calls = vec![ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": "3", "opts": {"a": [1, null]}}),
        }];
        let out = String::from_utf8(tagged::render::<DeepseekV32>("", &calls, &tools()).unwrap())
            .unwrap();
        assert!(out.contains("<｜DSML｜parameter name=\"city\" string=\"true\">3</｜DSML｜parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">{\"a\":[1,null]}</｜DSML｜parameter>"));
        assert_eq!(parse(&out).calls, calls);
    }
}
