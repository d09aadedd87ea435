//! `gemma4`: Google Gemma 4 (`specs/gemma4.md`).
//!
//! ```text
//! <|channel>thought⏎Need weather.<channel|>Let me check.<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|><|tool_response>
//! ```
//!
//! The family's parser ([`super::Parser`]) with Gemma 4's delimiters, behind the shared
//! reasoning layer for its `<|channel>thought⏎…<channel|>` blocks.

use super::{Config, Dialect};
use crate::event::ToolCall;
use crate::formats::core::request::{StartingState, Thinking};
use crate::formats::options::{Nest, Nested, Table};
use crate::formats::reasoning::{self, Syntax};
use crate::formats::{Format, SpecialToken, StreamParser};
use crate::tools::Tools;

/// `<|tool_call>`: opens a call.
pub const CALL_OPEN: &str = "<|tool_call>";
/// `<tool_call|>`: ends a call.
pub const CALL_CLOSE: &str = "<tool_call|>";
/// `<|"|>`: opens and closes a string value (a single token; nothing inside is escaped).
pub const QUOTE: &str = "<|\"|>";
/// `<|tool_response>`: the model stops with it after its calls.
pub const TOOL_RESPONSE: &str = "<|tool_response>";
/// `<turn|>`: ends a turn.
pub const TURN_END: &str = "<turn|>";
/// `<eos>`: the end of the sequence (some checkpoints stop with it after a call).
pub const EOS: &str = "<eos>";
/// `<|channel>`: opens a reasoning channel.
pub const CHANNEL_OPEN: &str = "<|channel>";
/// `<channel|>`: closes it.
pub const CHANNEL_CLOSE: &str = "<channel|>";

/// The tokens Gemma 4 stops with; a server ends the output there, so an engine's parser is
/// never handed them (the first is what the renderer writes after calls).
const STOPS: &[&str] = &[TOOL_RESPONSE, TURN_END, EOS];

/// Gemma 4's delimiters.
pub static DIALECT: Dialect = Dialect {
    open: CALL_OPEN,
    close: CALL_CLOSE,
    quote: QUOTE,
    stops: STOPS,
    reasoning: Some(&REASONING),
};

/// Gemma 4's reasoning channel: `<|channel>thought⏎…<channel|>` as the template writes it (the
/// `thought⏎` label is part of the canonical open tag and never reasoning), or a bare
/// `<|channel>…<channel|>`; a call opened inside it ends it (`reasoning.implicit_reasoning_end`).
pub static REASONING: Syntax = Syntax {
    pairs: &[
        ("<|channel>thought\n", CHANNEL_CLOSE),
        (CHANNEL_OPEN, CHANNEL_CLOSE),
    ],
    call_markers: &[CALL_OPEN],
    on_by_default: true,
};

/// Gemma 4's default options: the family's, with its reasoning syntax's layer defaults and a
/// call opened inside a thought ending it (vLLM's and Dynamo's reading; the template always
/// closes the channel, so it is noted).
fn config() -> Config {
    Config {
        reasoning: reasoning::Config {
            implicit_reasoning_end: true,
            ..REASONING.config()
        },
        ..Config::default()
    }
}

/// The nested options: the reasoning layer's (`reasoning.NAME`).
static NESTED: [&dyn Nested<Config>; 1] = [&Nest {
    prefix: "reasoning",
    options: reasoning::Config::OPTIONS,
    field: |c: &Config| &c.reasoning,
    field_mut: |c: &mut Config| &mut c.reasoning,
}];

fn build(cfg: Config, tools: &Tools) -> Box<dyn StreamParser> {
    super::boxed(&DIALECT, cfg, tools)
}

fn new_parser(tools: &Tools) -> Box<dyn StreamParser> {
    build(config(), tools)
}

fn markers(_tools: &Tools) -> Vec<String> {
    DIALECT.markers().into_iter().map(str::to_string).collect()
}

/// Renders a model turn as the Gemma 4 chat template writes it ([`super::render`]).
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    super::render(&DIALECT, text, calls)
}

/// The options table.
static OPTIONS: Table<Config> = Table {
    default: config,
    options: Config::OPTIONS,
    nested: &NESTED,
    reasoning: None,
    build,
};

/// Gemma 4's special tokens that can appear in its output, with their ids in the Gemma 4
/// vocabulary (`specs/gemma4.md` §7 says where they come from).
pub const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken {
        text: EOS,
        id: None,
    },
    SpecialToken::new("<|tool>", 46),
    SpecialToken::new("<tool|>", 47),
    SpecialToken::new(CALL_OPEN, 48),
    SpecialToken::new(CALL_CLOSE, 49),
    SpecialToken::new(TOOL_RESPONSE, 50),
    SpecialToken::new("<tool_response|>", 51),
    SpecialToken::new(QUOTE, 52),
    SpecialToken::new("<|think|>", 98),
    SpecialToken::new(CHANNEL_OPEN, 100),
    SpecialToken::new(CHANNEL_CLOSE, 101),
    SpecialToken::new("<|turn>", 105),
    SpecialToken::new(TURN_END, 106),
];

/// The gemma4 format.
pub static FORMAT: Format = Format {
    render: Some(render),
    stop_tokens: STOPS,
    special_tokens: SPECIAL_TOKENS,
    reasoning: Some(&REASONING),
    // The request's thinking switch: on, the model writes `<|channel>thought` itself; off, the
    // generation prompt prefills an empty thought, so the output is the response.
    thinking: Some(Thinking {
        on: StartingState::None,
        off: StartingState::Response,
    }),
    ..Format::new(
        "gemma4",
        "Google Gemma 4: <|channel>thought⏎…<channel|> then <|tool_call>call:NAME{key:<|\"|>str<|\"|>,n:42}<tool_call|>, calls back to back, <|tool_response> after them",
        new_parser,
        markers,
        &OPTIONS,
    )
};

#[cfg(test)]
mod tests;
