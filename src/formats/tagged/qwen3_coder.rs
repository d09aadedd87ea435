//! `qwen3_coder`: Qwen3-Coder (and Qwen3.5) XML-like tool calls, typed by the tool's schema
//! (`specs/qwen3_coder.md`).
//!
//! ```text
//! text<tool_call>⏎<function=NAME>⏎<parameter=KEY>⏎VALUE⏎</parameter>⏎</function>⏎</tool_call>
//! ```

use crate::event::{ToolCall, WarningKind};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::reasoning::Syntax;
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};

pub use crate::formats::tagged::Config;

/// Qwen3's reasoning blocks, `<think>…</think>` (vocabulary tokens of the thinking variants;
/// Qwen3.5/3.6, which think by default, reuse this call format); `specs/qwen3_coder.md`.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &["<tool_call>", "<function="],
    on_by_default: true,
    call_ends: &[],
};

/// The grammar: `<function=…>` calls in `<tool_call>` blocks, values padded with one newline.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        ("<tool_call>", Role::BlockOpen),
        ("</tool_call>", Role::BlockClose),
        ("<function=", Role::CallOpen),
        ("</function>", Role::CallClose),
        ("<parameter=", Role::ParamOpen),
        ("</parameter>", Role::ValueClose),
    ],
    call: CallForm::Eq,
    param: ParamForm::Eq,
    structural: true,
    follow_block_close: true,
    pad: true,
    string_attr: false,
    nested: false,
    block_end_warning: WarningKind::MissingCallEnd,
    reasoning: Some(&REASONING),
    native: Native::NONE,
    variants: &[],
};

/// qwen3_coder's place in the tagged family.
pub struct Qwen3Coder;

impl tagged::Member for Qwen3Coder {
    const ID: &'static str = "qwen3_coder";
    const SUMMARY: &'static str = "Qwen3-Coder: <tool_call><function=NAME><parameter=KEY>raw value</parameter></function></tool_call>, typed by the tool's schema";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<|im_end|>", "<|endoftext|>"];
    const VOCABULARY: Option<&'static str> = Some("qwen2");
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    /// Every leniency of the family on, calls without `<tool_call>` too.
    fn config() -> Config {
        Config {
            missing_wrapper: true,
            ..Config::default()
        }
    }

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        for (i, c) in calls.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("<tool_call>\n<function=");
            out.push_str(&c.name);
            out.push_str(">\n");
            for (k, v) in c.arguments.as_object().into_iter().flatten() {
                out.push_str("<parameter=");
                out.push_str(k);
                out.push_str(">\n");
                out.push_str(&tagged::value_text(v));
                out.push_str("\n</parameter>\n");
            }
            out.push_str("</function>\n</tool_call>");
        }
    }

    fn typing_probe(raw: &str) -> Vec<u8> {
        format!("<tool_call>\n<function=typing_probe>\n<parameter=v>\n{raw}\n</parameter>\n</function>\n</tool_call>")
            .into_bytes()
    }
}

/// The qwen3_coder format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: Qwen3.5/3.6 open `<think>` in the prompt with thinking on, write `<think></think>` off.
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    ..tagged::format::<Qwen3Coder>()
};

/// Qwen3's added tokens that can appear in a Qwen3-Coder answer (`<function=` and
/// `<parameter=` are ordinary text).
const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken::new("<|im_end|>", 151645),
    SpecialToken::new("<tool_call>", 151657),
    SpecialToken::new("</tool_call>", 151658),
    SpecialToken::new("<think>", 151667),
    SpecialToken::new("</think>", 151668),
];

#[cfg(test)]
mod tests;
