//! `granite4`: IBM Granite 4 `<tool_call>{json}</tool_call>` (`specs/granite4.md`).
//!
//! ```text
//! Let me check.<tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```
//!
//! The hermes grammar ([`super::hermes`]) over the family driver, with Granite's own
//! declaration: its role and end tokens, no reasoning layer (Granite 4 instruct has no
//! reasoning channel, so `<think>` is text), and the escaped-string arguments its models write
//! read by the shared `string_arguments` option. Granite's older wire forms (3.0/3.1
//! `<|tool_call|>[…]`, granite-20b `<function_call>`) are not this format: they are text here.

use crate::event::ToolCall;
use crate::formats::core::entry::{self, Entry};
use crate::formats::delimited::hermes::{self, CLOSE, MARKERS, OPEN};
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// Granite 4's options: the hermes grammar's, with the same defaults (every recovered
/// deviation a named option, on): `string_arguments` is what Granite models do natively.
pub type Config = hermes::Config;

/// `<|start_of_role|>`: opens a turn's role header.
pub const START_OF_ROLE: &str = "<|start_of_role|>";
/// `<|end_of_role|>`: ends a turn's role header.
pub const END_OF_ROLE: &str = "<|end_of_role|>";
/// `<|end_of_text|>`: ends the turn.
pub const END_OF_TEXT: &str = "<|end_of_text|>";

/// A granite4 parser with the given options.
pub fn parser(cfg: Config) -> impl StreamParser {
    hermes::parser(cfg)
}

/// Renders text and calls as the Granite 4 tool prompt asks: text, then per call
/// `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`, calls separated by a newline.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    hermes::render_blocks(text, calls, None, "granite4")
}

/// What sets granite4 apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "granite4";
    const SUMMARY: &'static str =
        "IBM Granite 4: <tool_call>{\"name\": …, \"arguments\": {…}}</tool_call> (hermes grammar)";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &[END_OF_TEXT];
    /// Granite 4's tokens that can appear in output. Their ids are not verified (no package
    /// ships Granite's tokenizer), so none is declared and `o200k_base` cuts the replays
    /// (`specs/granite4.md`, Tokens); each is still one token of the replay.
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken {
            text: START_OF_ROLE,
            id: None,
        },
        SpecialToken {
            text: END_OF_ROLE,
            id: None,
        },
        SpecialToken {
            text: END_OF_TEXT,
            id: None,
        },
        SpecialToken {
            text: OPEN,
            id: None,
        },
        SpecialToken {
            text: CLOSE,
            id: None,
        },
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
}

/// The granite4 format.
pub static FORMAT: Format = entry::format::<Declared>();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult};
    use crate::formats::core::testkit::{every_cut, fold_cut, parses_back, prop_call};
    use crate::formats::delimited::Limits;
    use proptest::prelude::*;
    use serde_json::json;

    fn all_ways(s: &str) -> ParseResult {
        every_cut(&|| Box::new(parser(Config::default())), s.as_bytes()).0
    }

    fn warnings(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn template_form_and_blocks_without_separator() {
        let r = all_ways(
            "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
        );
        assert_eq!(r.text, "Let me check.");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
        assert!(r.errors.is_empty() && r.warnings.is_empty());
    }

    #[test]
    fn escaped_string_arguments_are_decoded_with_a_warning() {
        let r = all_ways(
            "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}</tool_call>",
        );
        assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(warnings(&r), ["string_arguments"]);
        let r = all_ways("<tool_call>{\"name\": \"f\", \"arguments\": \"Paris\"}</tool_call>");
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        let strict = Config {
            string_arguments: false,
            ..Config::default()
        };
        let r = fold_cut(
            &mut parser(strict),
            b"<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>",
            &[],
        );
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
    }

    #[test]
    fn older_granite_forms_and_think_tags_are_text() {
        for s in [
            "<|tool_call|>[{\"name\": \"f\", \"arguments\": {}}]",
            "<function_call> {\"name\": \"f\", \"arguments\": {}}",
            "<think>plan</think>done",
        ] {
            let r = all_ways(s);
            assert!(r.calls.is_empty() && r.errors.is_empty(), "{s}");
            assert_eq!(r.text, s);
        }
    }

    #[test]
    fn a_malformed_block_drops_only_itself() {
        let r = all_ways(
            "A<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }}</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>B",
        );
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.text, "AB");
    }

    #[test]
    fn the_renderer_refuses_what_would_not_read_back() {
        let call = |name: &str| ToolCall {
            name: name.into(),
            id: None,
            server: None,
            arguments: json!({}),
        };
        let t = Tools::default();
        assert!(render("a <tool_call> b", &[], &t).is_err());
        assert!(
            render(
                "",
                &[call(&"n".repeat(Limits::default().max_header_bytes + 1))],
                &t
            )
            .is_err()
        );
        assert!(render("<think>x</think>", &[call("f")], &t).is_ok());
        let mut c = call("f");
        c.id = Some("1".into());
        assert!(render("", &[c], &t).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn rendered_calls_parse_back_under_cuts(
            text in "[^<]{0,12}",
            calls in proptest::collection::vec(("[a-z_]{1,8}", crate::formats::core::testkit::arb_json("[a-z<>/_ \"\\\\]{0,8}")), 0..3),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, v)| prop_call(name, None, v)).collect();
            let bytes = render(&text, &calls, &Tools::default()).unwrap();
            parses_back(&mut parser(Config::default()), &bytes, &cuts, &text, &calls)?;
        }

        #[test]
        fn whole_and_cycling_small_chunks_agree(
            parts in proptest::collection::vec(prop_oneof![
                Just(OPEN.to_string()), Just(CLOSE.to_string()), Just("<|tool_call|>".to_string()),
                Just("{\"name\": \"f\", ".to_string()),
                Just("\"arguments\": \"{\\\"a\\\": 1}\"}".to_string()),
                Just("\"arguments\": {\"a\": \"</tool_call>\"}}".to_string()), Just("}".to_string()),
                Just("\"".to_string()), Just("\\".to_string()), Just(" \n".to_string()),
                Just("<tool_".to_string()), Just("東京🌧".to_string()),
                "[a-z{}\":, <>/]{0,6}",
            ], 0..16),
            size in 1usize..5,
        ) {
            let s = parts.concat();
            let whole = fold_cut(&mut parser(Config::default()), s.as_bytes(), &[]);
            // Cycling chunk sizes 1..=size, whatever falls inside a character or a marker.
            let mut cuts = Vec::new();
            let (mut at, mut k) = (0, 0);
            while at < s.len() {
                at += 1 + k % size;
                k += 1;
                cuts.push(at.min(s.len()));
            }
            let r = fold_cut(&mut parser(Config::default()), s.as_bytes(), &cuts);
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(r.warnings.len(), whole.warnings.len());
        }
    }
}
