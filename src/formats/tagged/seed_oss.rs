//! `seed_oss`: ByteDance Seed-OSS tool calls, Qwen3-Coder's inner grammar in a
//! `<seed:tool_call>` wrapper with unpadded values (`specs/seed_oss.md`).
//!
//! ```text
//! text<seed:tool_call>⏎<function=NAME>⏎<parameter=KEY>VALUE</parameter>⏎</function>⏎</seed:tool_call>
//! ```

use crate::event::{ToolCall, WarningKind};
use crate::formats::reasoning::Syntax;
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};

pub use crate::formats::tagged::Config;

/// Seed-OSS's reasoning blocks, `<seed:think>…</seed:think>` (vocabulary tokens; the model
/// thinks by default); `specs/seed_oss.md`.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<seed:think>", "</seed:think>")],
    call_markers: &["<seed:tool_call>", "<function="],
    on_by_default: true,
    call_ends: &[],
};

/// The grammar: Qwen3-Coder's tags in `<seed:tool_call>` blocks, values written verbatim;
/// `<seed:eos>` outside calls ends the turn and is not text.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        ("<seed:tool_call>", Role::BlockOpen),
        ("</seed:tool_call>", Role::BlockClose),
        ("<function=", Role::CallOpen),
        ("</function>", Role::CallClose),
        ("<parameter=", Role::ParamOpen),
        ("</parameter>", Role::ValueClose),
        ("<seed:eos>", Role::Drop),
    ],
    call: CallForm::Eq,
    param: ParamForm::Eq,
    structural: true,
    follow_block_close: true,
    pad: false,
    string_attr: false,
    nested: false,
    block_end_warning: WarningKind::MissingCallEnd,
    reasoning: Some(&REASONING),
    native: Native::NONE,
    variants: &[],
};

/// seed_oss's place in the tagged family.
pub struct SeedOss;

impl tagged::Member for SeedOss {
    const ID: &'static str = "seed_oss";
    const SUMMARY: &'static str = "Seed-OSS: <seed:tool_call><function=NAME><parameter=KEY>raw value</parameter></function></seed:tool_call>, typed by the tool's schema";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<seed:eos>"];
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        for (i, c) in calls.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("<seed:tool_call>\n<function=");
            out.push_str(&c.name);
            out.push_str(">\n");
            for (k, v) in c.arguments.as_object().into_iter().flatten() {
                out.push_str("<parameter=");
                out.push_str(k);
                out.push('>');
                out.push_str(&tagged::python_text(v));
                out.push_str("</parameter>\n");
            }
            out.push_str("</function>\n</seed:tool_call>");
        }
    }

    fn typing_probe(raw: &str) -> Vec<u8> {
        format!("<seed:tool_call>\n<function=typing_probe>\n<parameter=v>{raw}</parameter>\n</function>\n</seed:tool_call>")
            .into_bytes()
    }
}

/// The seed_oss format.
pub static FORMAT: Format = tagged::format::<SeedOss>();

/// Seed-OSS vocabulary tokens that can appear in its output (ids not published in the
/// sources read; `<function=` and `<parameter=` are ordinary text).
const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken {
        text: "<seed:eos>",
        id: None,
    },
    SpecialToken {
        text: "<seed:tool_call>",
        id: None,
    },
    SpecialToken {
        text: "</seed:tool_call>",
        id: None,
    },
    SpecialToken {
        text: "<seed:think>",
        id: None,
    },
    SpecialToken {
        text: "</seed:think>",
        id: None,
    },
    SpecialToken {
        text: "<seed:cot_budget_reflect>",
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
            r#"[{"name":"write_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"type":"integer"},"opts":{"type":"object"},"tags":{"type":"array"},"force":{"type":["boolean","null"]}}}},{"name":"get_time","parameters":{}}]"#,
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
    fn values_are_not_unpadded_and_eos_is_not_text() {
        let r = parse(
            "I'll write it.\n<seed:tool_call>\n<function=write_file>\n<parameter=path>a.py</parameter>\n<parameter=content>\nx = 1\n</parameter>\n</function>\n</seed:tool_call><seed:eos>",
        );
        assert!(r.errors.is_empty());
        assert_eq!(r.text, "I'll write it.\n");
        assert_eq!(
            r.calls[0].arguments,
            json!({"path": "a.py", "content": "\nx = 1\n"})
        );
    }

    #[test]
    fn eos_after_a_call_missing_its_block_end_is_not_text() {
        let r = parse("<seed:tool_call>\n<function=get_time>\n</function>\n<seed:eos>");
        assert_eq!(r.text, "");
        assert_eq!(r.calls.len(), 1);
        let kinds: Vec<&str> = r.warnings.iter().map(|w| w.kind.as_str()).collect();
        assert_eq!(kinds, ["missing_call_end"]);
    }

    #[test]
    fn python_repr_values_are_read_with_a_warning() {
        let r = parse(
            "<seed:tool_call>\n<function=write_file>\n<parameter=opts>{'a': True, 'b': None}</parameter>\n<parameter=tags>['x', 'y']</parameter>\n<parameter=force>None</parameter>\n<parameter=mode>0644</parameter>\n</function>\n</seed:tool_call>",
        );
        assert_eq!(
            r.calls[0].arguments,
            json!({"opts": {"a": true, "b": null}, "tags": ["x", "y"], "force": null, "mode": 644})
        );
        let kinds: Vec<&str> = r.warnings.iter().map(|w| w.kind.as_str()).collect();
        assert_eq!(kinds, ["python_literal", "python_literal", "null_alias"]);
    }

    #[test]
    fn reasoning_tags_stay_text_and_calls_inside_them_are_calls() {
        let r = parse(
            "<seed:think>plan</seed:think>\n<seed:tool_call>\n<function=get_time>\n</function>\n</seed:tool_call>",
        );
        assert_eq!(r.text, "<seed:think>plan</seed:think>\n");
        assert_eq!(r.calls.len(), 1);
    }

    #[test]
    fn structural_close_and_truncation() {
        let r = parse(
            "<seed:tool_call>\n<function=write_file>\n<parameter=content>a</parameter>b</parameter>\n</function>\n</seed:tool_call>",
        );
        assert_eq!(r.calls[0].arguments, json!({"content": "a</parameter>b"}));
        let r = parse("<seed:tool_call>\n<function=write_file>\n<parameter=content>a");
        assert_eq!(r.errors[0].kind, ErrorKind::Unterminated);
        assert!(r.calls.is_empty());
    }

    #[test]
    fn renderer_writes_python_repr_and_parses_back() {
        let calls = vec![ToolCall {
            name: "write_file".into(),
            id: None,
            server: None,
            arguments: json!({"opts": {"a": "it's \"q\"\n", "b": [1.5, false, null]}, "mode": 7}),
        }];
        let out =
            String::from_utf8(tagged::render::<SeedOss>("", &calls, &tools()).unwrap()).unwrap();
        assert!(
            out.contains(
                "<parameter=opts>{'a': 'it\\'s \"q\"\\n', 'b': [1.5, False, None]}</parameter>"
            ),
            "{out}"
        );
        assert_eq!(parse(&out).calls, calls);
    }
}
