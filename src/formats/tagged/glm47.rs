//! `glm47`: GLM-4.7 / GLM-5 compact `<arg_key>`/`<arg_value>` tool calls: the `glm45` grammar
//! written without newlines (`specs/glm47.md`).
//!
//! ```text
//! text<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value></tool_call>
//! ```

use crate::event::ToolCall;
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::glm45::{SHAPE, SPECIAL_TOKENS};
use crate::formats::tagged::{self, Grammar, Native};
use crate::formats::{Format, SpecialToken};

pub use crate::formats::tagged::Config;

/// GLM-4.5's tags, each call's name run straight into its first tag (the template writes no
/// newline after it).
pub static GRAMMAR: Grammar = Grammar {
    native: Native {
        compact_name: true,
        ..Native::NONE
    },
    ..SHAPE
};

/// glm47's place in the tagged family.
pub struct Glm47;

impl tagged::Member for Glm47 {
    const ID: &'static str = "glm47";
    const SUMMARY: &'static str = "GLM-4.7/5: <tool_call>NAME<arg_key>K</arg_key><arg_value>raw value</arg_value></tool_call> without newlines, typed by the tool's schema";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<|user|>", "<|observation|>"];
    const VOCABULARY: Option<&'static str> = Some("glm4");
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        for c in calls {
            out.push_str("<tool_call>");
            out.push_str(&c.name);
            for (k, v) in c.arguments.as_object().into_iter().flatten() {
                out.push_str("<arg_key>");
                out.push_str(k);
                out.push_str("</arg_key><arg_value>");
                out.push_str(&tagged::value_text(v));
                out.push_str("</arg_value>");
            }
            out.push_str("</tool_call>");
        }
    }

    fn typing_probe(raw: &str) -> Vec<u8> {
        format!(
            "<tool_call>typing_probe<arg_key>v</arg_key><arg_value>{raw}</arg_value></tool_call>"
        )
        .into_bytes()
    }
}

/// The glm47 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: GLM-4.7's generation prompt ends `<think>` with thinking on, `<think></think>` with it off.
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    ..tagged::format::<Glm47>()
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::core::testkit::every_cut;
    use crate::tools::Tools;
    use serde_json::json;

    fn tools() -> Tools {
        Tools::from_json(
            r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":["integer","null"]}}}},{"name":"get_time","parameters":{}}]"#,
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

    #[test]
    fn compact_calls_back_to_back_with_text_between() {
        let r = parse(
            "before <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>null</arg_value></tool_call> and <tool_call>get_time</tool_call><tool_call>get_time</tool_call> after",
        );
        assert!(r.errors.is_empty());
        assert_eq!(r.text, "before  and  after");
        assert_eq!(r.calls.len(), 3);
        assert_eq!(r.calls[0].arguments, json!({"city": "Paris", "days": null}));
        assert_eq!(r.calls[2].arguments, json!({}));
    }

    #[test]
    fn glm45_newlines_are_accepted_silently() {
        let r = parse("<tool_call>get_time\n</tool_call>");
        assert!(r.errors.is_empty() && r.warnings.is_empty());
        assert_eq!(r.calls[0].name, "get_time");
    }

    #[test]
    fn a_close_tag_and_a_call_inside_a_value_are_content() {
        let r = parse(
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>before </tool_call><tool_call>get_time</tool_call> after</arg_value></tool_call>",
        );
        assert_eq!(r.calls.len(), 1);
        assert_eq!(
            r.calls[0].arguments,
            json!({"city": "before </tool_call><tool_call>get_time</tool_call> after"})
        );
    }

    #[test]
    fn renderer_writes_no_newlines() {
        let calls = vec![
            ToolCall {
                name: "get_weather".into(),
                id: None,
                server: None,
                arguments: json!({"city": "Paris", "days": 3}),
            },
            ToolCall {
                name: "get_time".into(),
                id: None,
                server: None,
                arguments: json!({}),
            },
        ];
        let out =
            String::from_utf8(tagged::render::<Glm47>("", &calls, &tools()).unwrap()).unwrap();
        assert_eq!(
            out,
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call><tool_call>get_time</tool_call>"
        );
        assert_eq!(parse(&out).calls, calls);
    }
}
