//! `step3`: StepFun Step-3 tool calls, a section of wrapped calls whose bodies are `steptml`
//! invokes with raw values typed by the schema, after reasoning that the prompt opened and
//! `</think>` ends (`specs/step3.md`).
//!
//! ```text
//! text<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="NAME"><steptml:parameter name="KEY">VALUE</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>
//! ```
//!
//! The grammar is the tagged family's attribute form (MiniMax-M2's `<invoke name=…>` with a
//! `steptml:` prefix) inside Kimi-K2-like section and call markers; the per-call wrapper and
//! its type word are the family's [`Native::call_type`] capability.

use crate::event::{ToolCall, WarningKind};
use crate::formats::reasoning::Syntax;
use crate::formats::tagged::{self, CallForm, Grammar, Native, ParamForm, Role};
use crate::formats::{Format, SpecialToken};

pub use crate::formats::tagged::Config;

/// The section's open marker (`｜` is U+FF5C).
pub const SECTION_BEGIN: &str = "<｜tool_calls_begin｜>";
/// The section's close marker.
pub const SECTION_END: &str = "<｜tool_calls_end｜>";
/// One call's wrapper open.
pub const CALL_BEGIN: &str = "<｜tool_call_begin｜>";
/// Ends the call's type word.
pub const TOOL_SEP: &str = "<｜tool_sep｜>";
/// One call's wrapper close.
pub const CALL_END: &str = "<｜tool_call_end｜>";

/// Step-3's reasoning: the prompt opens it (request mode `starting_state = "reasoning"`) and
/// `</think>` ends it; a section opened inside it ends it (option
/// `reasoning.implicit_reasoning_end`, on, with a warning).
pub static REASONING: Syntax = Syntax {
    pairs: &[("<think>", "</think>")],
    call_markers: &[SECTION_BEGIN],
    on_by_default: true,
    call_ends: &[],
};

/// The grammar: section, wrapped calls typed `function`, `steptml` invokes and parameters;
/// values raw, typed by the schema.
pub static GRAMMAR: Grammar = Grammar {
    markers: &[
        (SECTION_BEGIN, Role::BlockOpen),
        (SECTION_END, Role::BlockClose),
        (CALL_BEGIN, Role::CallWrapOpen),
        (TOOL_SEP, Role::TypeSep),
        (CALL_END, Role::CallWrapClose),
        ("<steptml:invoke name=", Role::CallOpen),
        ("</steptml:invoke>", Role::CallClose),
        ("<steptml:parameter name=", Role::ParamOpen),
        ("</steptml:parameter>", Role::ValueClose),
    ],
    call: CallForm::Attr,
    param: ParamForm::Attr,
    structural: true,
    // The wrapper's and the section's ends are special tokens, never value text: either
    // confirms a value close whose invoke close is missing.
    follow_block_close: true,
    pad: false,
    string_attr: false,
    nested: false,
    block_end_warning: WarningKind::MissingSectionEnd,
    reasoning: Some(&REASONING),
    native: Native {
        call_type: Some("function"),
        ..Native::NONE
    },
    variants: &[],
};

/// step3's place in the tagged family.
pub struct Step3;

impl tagged::Member for Step3 {
    const ID: &'static str = "step3";
    const SUMMARY: &'static str = "StepFun Step-3: <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"f\"><steptml:parameter name=\"p\">value</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>, reasoning ended by </think>";
    const GRAMMAR: &'static Grammar = &GRAMMAR;
    const SPECIAL_TOKENS: &'static [SpecialToken] = SPECIAL_TOKENS;

    /// A section opened inside reasoning ends it (the fact sheet's rule; vLLM's reasoning
    /// parser would keep the calls as reasoning, which never runs them).
    fn config() -> Config {
        let mut c = Config::default();
        c.reasoning.implicit_reasoning_end = true;
        c
    }

    /// As the tool-parser's doc comment writes a turn: the section right after the text, no
    /// whitespace between markers; strings verbatim, other values compact JSON.
    fn write_calls(out: &mut String, calls: &[ToolCall]) {
        out.push_str(SECTION_BEGIN);
        for c in calls {
            out.push_str(CALL_BEGIN);
            out.push_str("function");
            out.push_str(TOOL_SEP);
            out.push_str("<steptml:invoke name=\"");
            out.push_str(&c.name);
            out.push_str("\">");
            for (k, v) in c.arguments.as_object().into_iter().flatten() {
                out.push_str("<steptml:parameter name=\"");
                out.push_str(k);
                out.push_str("\">");
                out.push_str(&tagged::value_text(v));
                out.push_str("</steptml:parameter>");
            }
            out.push_str("</steptml:invoke>");
            out.push_str(CALL_END);
        }
        out.push_str(SECTION_END);
    }

    fn typing_probe(raw: &str) -> Vec<u8> {
        format!("{SECTION_BEGIN}{CALL_BEGIN}function{TOOL_SEP}<steptml:invoke name=\"typing_probe\"><steptml:parameter name=\"v\">{raw}</steptml:parameter></steptml:invoke>{CALL_END}{SECTION_END}")
            .into_bytes()
    }
}

/// The step3 format.
pub static FORMAT: Format = tagged::format::<Step3>();

/// The five markers vLLM treats as special tokens (it turns `skip_special_tokens` off for
/// them) and the reasoning close its reasoning parser looks up in the vocabulary. Their ids
/// are not verified: no Step-3 tokenizer could be had offline, so `o200k_base` cuts the
/// token-aligned replays with these texts kept whole (`specs/step3.md`).
pub const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken {
        text: SECTION_BEGIN,
        id: None,
    },
    SpecialToken {
        text: SECTION_END,
        id: None,
    },
    SpecialToken {
        text: CALL_BEGIN,
        id: None,
    },
    SpecialToken {
        text: TOOL_SEP,
        id: None,
    },
    SpecialToken {
        text: CALL_END,
        id: None,
    },
    SpecialToken {
        text: "</think>",
        id: None,
    },
];

#[cfg(test)]
mod tests;
