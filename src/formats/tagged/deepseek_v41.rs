//! `deepseek_v41`: DeepSeek-V4.1 DSML tool calls, V4's grammar with a leading space in every
//! tag name (`<｜DSML｜ calls>`, `<｜DSML｜ invoke name=`, `<｜DSML｜ parameter name=`)
//! (`specs/deepseek_v41.md`).
//!
//! ```text
//! text⏎⏎<｜DSML｜ calls>⏎<｜DSML｜ invoke name="NAME">⏎<｜DSML｜ parameter name="KEY" string="true">VALUE</｜DSML｜ parameter>⏎</｜DSML｜ invoke>⏎</｜DSML｜ calls>
//! ```
//!
//! What V4 reads as leniencies V4.1 writes as its own (DeepSeek's reference library and every
//! engine read them so): invokes without the `calls` block, a JSON object as an invoke's body,
//! and a calls block opened inside `<think>` ending the reasoning. They are the grammar's
//! [`Native`] shapes, read without a warning.

use crate::event::{ToolCall, WarningKind};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::reasoning::Syntax;
use crate::formats::tagged::deepseek_v4::{self, Dialect, dsml_typing_probe, write_dsml};
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};

pub use crate::formats::tagged::Config;

/// DeepSeek-V4.1's reasoning blocks, `<think>…</think>`; a calls block or an invoke opened
/// inside one ends it natively.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &["<｜DSML｜ calls>", "<｜DSML｜ invoke name="],
    on_by_default: true,
    call_ends: &[],
};

/// The grammar: the spaced DSML dialect, exactly one space after the sentinel; V4's typing by
/// the `string` attribute; block-less invokes, JSON bodies and calls that end reasoning native.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        ("<｜DSML｜ calls>", Role::BlockOpen),
        ("</｜DSML｜ calls>", Role::BlockClose),
        ("<｜DSML｜ invoke name=", Role::CallOpen),
        ("</｜DSML｜ invoke>", Role::CallClose),
        ("<｜DSML｜ parameter name=", Role::ParamOpen),
        ("</｜DSML｜ parameter>", Role::ValueClose),
        ("<｜end▁of▁sentence｜>", Role::Drop),
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
    native: Native {
        optional_block: true,
        json_body: true,
        calls_end_reasoning: true,
        ..Native::NONE
    },
    variants: VARIANTS,
};

/// V4's unspaced dialect, markup only under `marker_variants` (DeepSeek's reference library
/// and Dynamo's V4 tool parser read both dialects).
const VARIANTS: &[(&str, Role)] = &[
    ("<｜DSML｜tool_calls>", Role::BlockOpen),
    ("</｜DSML｜tool_calls>", Role::BlockClose),
    ("<｜DSML｜invoke name=", Role::CallOpen),
    ("</｜DSML｜invoke>", Role::CallClose),
    ("<｜DSML｜parameter name=", Role::ParamOpen),
    ("</｜DSML｜parameter>", Role::ValueClose),
];

/// DeepSeek-V4.1's tag names.
pub const DIALECT: Dialect = Dialect {
    block: " calls",
    invoke: " invoke",
    parameter: " parameter",
};

/// deepseek_v41's place in the tagged family.
pub struct DeepseekV41;

impl tagged::Member for DeepseekV41 {
    const ID: &'static str = "deepseek_v41";
    const SUMMARY: &'static str = "DeepSeek-V4.1 spaced DSML: <｜DSML｜ calls><｜DSML｜ invoke name=\"f\"><｜DSML｜ parameter name=\"p\" string=\"true|false\">value</｜DSML｜ parameter>…; block-less invokes and JSON bodies, <think> reasoning";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<｜end▁of▁sentence｜>"];
    const VOCABULARY: Option<&'static str> = Some("deepseek_v4");
    const SPECIAL_TOKENS: &'static [SpecialToken] = deepseek_v4::SPECIAL_TOKENS;

    /// SGLang's self-closing invoke is a recovered deviation here as in V4.
    fn config() -> Config {
        Config {
            self_closing_invoke: true,
            ..Config::default()
        }
    }

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        write_dsml(out, calls, DIALECT);
    }

    const WIRE_TYPING_PROBE: bool = false;

    fn typing_probe(raw: &str) -> Vec<u8> {
        dsml_typing_probe(raw, DIALECT)
    }
}

/// The deepseek_v41 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: the prompt ends `<｜Assistant｜><think>` with thinking on,
    // `<｜Assistant｜></think>` off (fact sheet: prompt).
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    ..tagged::format::<DeepseekV41>()
};

#[cfg(test)]
mod tests;
