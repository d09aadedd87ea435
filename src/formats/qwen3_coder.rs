//! `qwen3_coder`: Qwen3-Coder (and Qwen3.5) XML-like tool calls, typed by the tool's schema
//! (`specs/qwen3_coder.md`).
//!
//! ```text
//! text<tool_call>⏎<function=NAME>⏎<parameter=KEY>⏎VALUE⏎</parameter>⏎</function>⏎</tool_call>
//! ```

use super::options::Table;
use super::reasoning::Syntax;
use super::tagged::{self, CallForm, Grammar, ParamForm, Role};
use super::{Format, SpecialToken, StreamParser, Typing};
use crate::event::{ToolCall, WarningKind};
use crate::tools::Tools;

pub use super::tagged::Config;

/// Qwen3's reasoning blocks, `<think>…</think>` (vocabulary tokens of the thinking variants;
/// Qwen3.5/3.6, which think by default, reuse this call format); `specs/qwen3_coder.md`.
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &["<tool_call>", "<function="],
    on_by_default: true,
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
    block_end_warning: WarningKind::MissingCallEnd,
    reasoning: Some(&REASONING),
};

/// The default options: every leniency of the family on, calls without `<tool_call>` too.
pub fn config() -> Config {
    Config {
        missing_wrapper: true,
        ..Config::default()
    }
}

/// A parser with options `cfg`.
pub fn parser(cfg: Config, tools: &Tools) -> tagged::Parser {
    tagged::Parser::new(&GRAMMAR, cfg, tools)
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

/// Renders text and calls as the chat template does (values padded with one newline, strings
/// verbatim, other values as JSON), refusing what would not parse back.
pub fn render(text: &str, calls: &[ToolCall], tools: &Tools) -> Result<Vec<u8>, String> {
    tagged::render_checked(&GRAMMAR, config(), text, calls, tools, &write_calls)
}

fn new_parser(tools: &Tools) -> Box<dyn StreamParser> {
    tagged::boxed(&GRAMMAR, config(), tools)
}

fn markers(_tools: &Tools) -> Vec<String> {
    GRAMMAR.markers.iter().map(|m| m.0.to_string()).collect()
}

/// A call of `typing_probe` whose parameter `v` is written as exactly `raw`.
fn typing_probe(raw: &str) -> Vec<u8> {
    format!("<tool_call>\n<function=typing_probe>\n<parameter=v>\n{raw}\n</parameter>\n</function>\n</tool_call>")
        .into_bytes()
}

/// The qwen3_coder format's options, for `--option qwen3_coder.NAME=…` and `conform.toml`.
static OPTION_TABLE: Table<Config> = Table {
    default: config,
    options: Config::OPTIONS,
    nested: &tagged::NESTED,
    reasoning: None,
    build: |c, t| tagged::boxed(&GRAMMAR, c, t),
};
/// The qwen3_coder format.
pub static FORMAT: Format = Format {
    id: "qwen3_coder",
    summary: "Qwen3-Coder: <tool_call><function=NAME><parameter=KEY>raw value</parameter></function></tool_call>, typed by the tool's schema",
    new_parser,
    render: Some(render),
    markers,
    cdata: None,
    typing: Some(Typing {
        table: include_str!("../../specs/typing.json"),
        transcript: typing_probe,
        key: "v",
        schema_tool: Some("typing_probe"),
    }),
    special_tokens: SPECIAL_TOKENS,
    vocabulary: None,
    reasoning: Some(&REASONING),
    options: &OPTION_TABLE,
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
