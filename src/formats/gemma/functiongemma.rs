//! `functiongemma`: Google FunctionGemma, the Gemma 3 270M function-calling model
//! (`specs/functiongemma.md`).
//!
//! ```text
//! <start_function_call>call:get_current_temperature{location:<escape>Paris<escape>,unit:<escape>celsius<escape>}<end_function_call>
//! ```
//!
//! The family's parser ([`super::Parser`]) with FunctionGemma's delimiters; its models do not
//! think, so there is no reasoning layer.

use super::{Config, Dialect};
use crate::event::ToolCall;
use crate::formats::options::Table;
use crate::formats::{Format, SpecialToken, StreamParser};
use crate::tools::Tools;

/// `<start_function_call>`: opens a call.
pub const CALL_OPEN: &str = "<start_function_call>";
/// `<end_function_call>`: ends a call.
pub const CALL_CLOSE: &str = "<end_function_call>";
/// `<escape>`: opens and closes a string value (a single token; nothing inside is escaped).
pub const QUOTE: &str = "<escape>";
/// `<start_function_response>`: the stop sequence after the model's calls.
pub const FUNCTION_RESPONSE: &str = "<start_function_response>";
/// `<end_of_turn>`: ends a turn (Gemma 3's turn format).
pub const TURN_END: &str = "<end_of_turn>";
/// `<eos>`: the end of the sequence.
pub const EOS: &str = "<eos>";

/// The tokens FunctionGemma stops with; a server ends the output there, so an engine's parser is
/// never handed them (the first is what the renderer writes after calls).
const STOPS: &[&str] = &[FUNCTION_RESPONSE, TURN_END, EOS];

/// FunctionGemma's delimiters.
pub static DIALECT: Dialect = Dialect {
    open: CALL_OPEN,
    close: CALL_CLOSE,
    quote: QUOTE,
    stops: STOPS,
    reasoning: None,
};

fn build(cfg: Config, tools: &Tools) -> Box<dyn StreamParser> {
    super::boxed(&DIALECT, cfg, tools)
}

fn new_parser(tools: &Tools) -> Box<dyn StreamParser> {
    build(Config::default(), tools)
}

fn markers(_tools: &Tools) -> Vec<String> {
    DIALECT.markers().into_iter().map(str::to_string).collect()
}

/// Renders a model turn as Google's FunctionGemma guide writes it ([`super::render`]).
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    super::render(&DIALECT, text, calls)
}

/// The options table (the family's, without the reasoning layer's).
static OPTIONS: Table<Config> = Table::new(Config::default, Config::OPTIONS, build);

/// FunctionGemma's special tokens that can appear in its output, with their ids in its Gemma 3
/// vocabulary (`specs/functiongemma.md` §3 says where they come from).
pub const SPECIAL_TOKENS: &[SpecialToken] = &[
    SpecialToken {
        text: EOS,
        id: None,
    },
    SpecialToken::new("<start_function_declaration>", 46),
    SpecialToken::new("<end_function_declaration>", 47),
    SpecialToken::new(CALL_OPEN, 48),
    SpecialToken::new(CALL_CLOSE, 49),
    SpecialToken::new(FUNCTION_RESPONSE, 50),
    SpecialToken::new("<end_function_response>", 51),
    SpecialToken::new(QUOTE, 52),
    SpecialToken {
        text: "<start_of_turn>",
        id: None,
    },
    SpecialToken {
        text: TURN_END,
        id: None,
    },
];

/// The functiongemma format.
pub static FORMAT: Format = Format {
    render: Some(render),
    stop_tokens: STOPS,
    special_tokens: SPECIAL_TOKENS,
    ..Format::new(
        "functiongemma",
        "Google FunctionGemma: <start_function_call>call:NAME{key:<escape>str<escape>,n:42}<end_function_call>, calls back to back, <start_function_response> after them",
        new_parser,
        markers,
        &OPTIONS,
    )
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult};
    use crate::formats::core::testkit::{arb_call, cycled_chunks, every_cut};
    use crate::formats::run_chunks;
    use proptest::prelude::*;
    use serde_json::json;

    fn parse(s: &str) -> ParseResult {
        every_cut(&|| new_parser(&Tools::default()), s.as_bytes()).0
    }

    #[test]
    fn the_guide_example_and_its_stop_sequence() {
        let t = format!(
            "{CALL_OPEN}call:get_current_temperature{{location:{QUOTE}Paris{QUOTE},unit:{QUOTE}celsius{QUOTE}}}{CALL_CLOSE}{FUNCTION_RESPONSE}"
        );
        let r = parse(&t);
        assert_eq!(r.calls[0].name, "get_current_temperature");
        assert_eq!(
            r.calls[0].arguments,
            json!({"location": "Paris", "unit": "celsius"})
        );
        assert!(r.errors.is_empty() && r.warnings.is_empty() && r.text.is_empty());
    }

    /// Each leniency is an option of this dialect too (`specs/functiongemma.md` §10): off, the
    /// deviation it recovers is an error.
    #[test]
    fn every_option_off_is_an_error_in_this_dialect_too() {
        let strict = Config {
            missing_call_end: false,
            paren_call: false,
            missing_call_prefix: false,
            unquoted_string: false,
            python_literal: false,
            stray_marker: false,
            text_after_stop: false,
            ..Config::default()
        };
        let p = |cfg: Config, t: &str| every_cut(&|| build(cfg, &Tools::default()), t.as_bytes()).0;
        let malformed = [
            format!("{CALL_OPEN}call:f(a:1){CALL_CLOSE}"),
            format!("{CALL_OPEN}:f{{a:1}}{CALL_CLOSE}"),
            format!("{CALL_OPEN}call:f{{a:celsius}}{CALL_CLOSE}"),
            format!("{CALL_OPEN}call:f{{a:True}}{CALL_CLOSE}"),
            format!("{CALL_OPEN}call:f{{a:1}}x"),
        ];
        for t in &malformed {
            let r = p(strict, t);
            assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup], "{t}");
            assert!(r.calls.is_empty(), "{t}");
        }
        let r = p(strict, &format!("{CALL_OPEN}call:f{{a:1}}"));
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
        let r = p(strict, &format!("x{CALL_CLOSE}y{QUOTE}z"));
        assert_eq!(r.text, "xyz");
        assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup; 2]);
        let r = p(
            strict,
            &format!("{CALL_OPEN}call:f{{}}{CALL_CLOSE}{FUNCTION_RESPONSE}response:f{{}}"),
        );
        assert_eq!(
            (r.calls.len(), r.error_kinds()),
            (1, vec![ErrorKind::MalformedMarkup])
        );
        // python_literal off alone: `True` is an unquoted word, kept as a string.
        let words = Config {
            python_literal: false,
            ..Config::default()
        };
        let r = p(words, &format!("{CALL_OPEN}call:f{{a:True}}{CALL_CLOSE}"));
        assert_eq!(r.calls[0].arguments, json!({"a": "True"}));
    }

    #[test]
    fn bare_numbers_are_numbers_and_escaped_digits_stay_strings() {
        let t = format!("{CALL_OPEN}call:f{{t:15,s:{QUOTE}007{QUOTE}}}{CALL_CLOSE}");
        assert_eq!(parse(&t).calls[0].arguments, json!({"t": 15, "s": "007"}));
    }

    #[test]
    fn gemma4_markup_is_text_here_and_there_is_no_reasoning() {
        let r = parse("<|channel>thought\nx<channel|><|tool_call>call:f{}<tool_call|>");
        assert_eq!(
            r.text,
            "<|channel>thought\nx<channel|><|tool_call>call:f{}<tool_call|>"
        );
        assert_eq!(r.reasoning_text(), "");
        assert!(
            FORMAT
                .options
                .list()
                .iter()
                .all(|o| !o.name.starts_with("reasoning."))
        );
    }

    #[test]
    fn a_quote_inside_a_call_is_only_the_escape_token() {
        let t = format!("{CALL_OPEN}call:f{{a:{QUOTE}x<|\"|>{CALL_CLOSE}y{QUOTE}}}{CALL_CLOSE}");
        let r = parse(&t);
        assert_eq!(
            r.calls[0].arguments,
            json!({ "a": format!("x<|\"|>{CALL_CLOSE}y") })
        );
        let r = parse(&format!("{CALL_OPEN}call:f{{a:{QUOTE}x"));
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn rendered_calls_parse_back_in_cycling_small_chunks(
            text in "[a-z <>{}\n]{0,10}",
            calls in proptest::collection::vec(arb_call(Just(None), "[a-z <>|{}:,\"\n]{0,10}"), 0..3),
            sizes in proptest::collection::vec(1usize..8, 1..5),
        ) {
            let Ok(bytes) = render(&text, &calls, &Tools::default()) else {
                return Ok(());
            };
            let mut p = new_parser(&Tools::default());
            let r = ParseResult::fold(&run_chunks(p.as_mut(), cycled_chunks(&bytes, &sizes)));
            prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
            prop_assert_eq!(r.text, text);
            prop_assert_eq!(r.calls, calls);
        }
    }
}
