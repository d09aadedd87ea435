//! `minimax_m3`: MiniMax-M3 tool calls, every tag prefixed with the namespace token
//! `]<]minimax[>[`, parameters named by their tags and nested as elements, typed by the tool's
//! schema (`specs/minimax_m3.md`).
//!
//! ```text
//! text NS<tool_call>⏎NS<invoke name="NAME">NS<KEY>VALUE NS</KEY>NS<LIST>NS<item>…NS</item>NS</LIST>NS</invoke>⏎NS</tool_call>
//! ```
//!
//! The same block, call and value rules as the rest of the tagged family (`minimax_m2` is its
//! closest member); what sets it apart is three capabilities of the family's parser: a
//! namespace token before every delimiter ([`Role::Namespace`]: nothing else is markup, and a
//! delimiter is never content), parameters named by their tags ([`ParamForm::Named`]) and
//! values holding child elements ([`Grammar::nested`], read by [`super::elements`]).

use crate::event::{ToolCall, WarningKind};
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::reasoning::{self, Syntax};
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};
use serde_json::Value;

pub use crate::formats::tagged::Config;

/// The namespace token (one vocabulary token, id 200058) that starts every structural tag.
pub const NS: &str = "]<]minimax[>[";

/// MiniMax-M3's reasoning blocks, `<mm:think>…</mm:think>`. A block's call markers end it
/// (option `reasoning.implicit_reasoning_end`); the adaptive mode's bare `</mm:think>` may start
/// the turn (option `reasoning.adaptive_start`).
pub static REASONING: Syntax = Syntax {
    pairs: &[("<mm:think>", "</mm:think>")],
    call_markers: &["]<]minimax[>[<tool_call>", "]<]minimax[>[<invoke name="],
    on_by_default: true,
    call_ends: &[],
};

/// The grammar: `<invoke name="…">` calls inside `<tool_call>` blocks, `<KEY>` parameters with
/// nested elements, every tag behind the namespace token.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        ("]<]minimax[>[<tool_call>", Role::BlockOpen),
        ("]<]minimax[>[</tool_call>", Role::BlockClose),
        ("]<]minimax[>[<invoke name=", Role::CallOpen),
        ("]<]minimax[>[</invoke>", Role::CallClose),
        ("]<]minimax[>[<", Role::ParamOpen),
        ("]<]minimax[>[</", Role::ValueClose),
        ("]<]minimax[>[", Role::Namespace),
    ],
    call: CallForm::Attr,
    param: ParamForm::Named,
    structural: false,
    follow_block_close: false,
    pad: false,
    string_attr: false,
    nested: true,
    block_end_warning: WarningKind::MissingSectionEnd,
    reasoning: Some(&REASONING),
    native: Native::NONE,
    variants: &[],
};

/// minimax_m3's place in the tagged family.
pub struct MinimaxM3;

impl tagged::Member for MinimaxM3 {
    const ID: &'static str = "minimax_m3";
    const SUMMARY: &'static str = "MiniMax-M3: ]<]minimax[>[ before every tag; <tool_call><invoke name=\"f\"><KEY>raw value</KEY> with nested elements and <item> lists, typed by the tool's schema; <mm:think> reasoning";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    /// The family's leniencies, and what M3's engines read besides: invokes without their
    /// block, unquoted names; reasoning that the adaptive mode starts with a bare close, and
    /// that a call ends.
    fn config() -> Config {
        Config {
            missing_wrapper: true,
            unquoted_attribute: true,
            reasoning: reasoning::Config {
                adaptive_start: true,
                implicit_reasoning_end: true,
                ..reasoning::Config::default()
            },
            ..Config::default()
        }
    }

    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        out.push_str(NS);
        out.push_str("<tool_call>\n");
        for (i, c) in calls.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(NS);
            out.push_str("<invoke name=\"");
            out.push_str(&c.name);
            out.push_str("\">");
            if let Some(args) = c.arguments.as_object() {
                write_members(out, args);
            }
            out.push_str(NS);
            out.push_str("</invoke>");
        }
        out.push('\n');
        out.push_str(NS);
        out.push_str("</tool_call>");
    }

    fn typing_probe(raw: &str) -> Vec<u8> {
        format!("{NS}<tool_call>\n{NS}<invoke name=\"typing_probe\">{NS}<v>{raw}{NS}</v>{NS}</invoke>\n{NS}</tool_call>")
            .into_bytes()
    }
}

/// One element per member, as the template's `to_xml` writes a mapping; a null member is left
/// out, as the template leaves it out (so such a call does not render: it would not parse back).
fn write_members(out: &mut String, members: &serde_json::Map<String, Value>) {
    for (k, v) in members {
        if v.is_null() {
            continue;
        }
        write_element(out, k, v);
    }
}

/// `NS<name>`, the value as `to_xml` writes it, `NS</name>`.
fn write_element(out: &mut String, name: &str, v: &Value) {
    out.push_str(NS);
    out.push('<');
    out.push_str(name);
    out.push('>');
    match v {
        Value::Object(m) => write_members(out, m),
        Value::Array(items) => {
            for x in items {
                write_element(out, tagged::elements::ITEM, x);
            }
        }
        Value::Null => {}
        other => out.push_str(&tagged::value_text(other)),
    }
    out.push_str(NS);
    out.push_str("</");
    out.push_str(name);
    out.push('>');
}

/// The minimax_m3 format.
pub static FORMAT: Format = Format {
    // The request's thinking switch (thinking_mode enabled / disabled): the prompt prefills
    // `<mm:think>`, or writes a bare `</mm:think>` (fact sheet: reasoning).
    thinking: Some(Thinking {
        on: StartingState::Reasoning,
        off: StartingState::Response,
    }),
    ..tagged::format::<MinimaxM3>()
};

/// MiniMax-M3 vocabulary tokens that can appear in its output: the namespace token (id from
/// ggml-org/llama.cpp#24523) and the reasoning tags (whole vocabulary entries, ids not public);
/// tag names (`tool_call`, `invoke`, keys, `item`) are ordinary text.
const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken::new(NS, 200058),
    SpecialToken {
        text: "<mm:think>",
        id: None,
    },
    SpecialToken {
        text: "</mm:think>",
        id: None,
    },
    SpecialToken {
        text: "[e~[",
        id: None,
    },
];

#[cfg(test)]
mod tests;
