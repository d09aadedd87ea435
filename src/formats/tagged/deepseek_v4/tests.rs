use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::core::testkit::{arb_json, check_delta_contract, cycled_chunks, every_cut};
use crate::formats::run_chunks;
use crate::formats::tagged::Member;
use crate::tools::Tools;
use proptest::prelude::*;
use serde_json::json;

fn tools() -> Tools {
    Tools::from_json(
        r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"opts":{"type":"object"}}}},{"name":"get_time","parameters":{}}]"#,
    )
    .unwrap()
}

fn parse_with(cfg: Config, s: &str) -> ParseResult {
    let t = tools();
    every_cut(&|| tagged::boxed(&GRAMMAR, cfg, &t), s.as_bytes()).0
}

fn parse(s: &str) -> ParseResult {
    parse_with(DeepseekV4::config(), s)
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

/// The encoding script's rendering of the fact sheet's example, reasoning close included.
const TURN: &str = "Need the weather.</think>Let me check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">杭州</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>";

fn inside() -> Config {
    let mut c = DeepseekV4::config();
    c.reasoning.starts_inside = true;
    c
}

#[test]
fn the_template_turn_parses_under_every_cut() {
    let r = parse_with(inside(), TURN);
    assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    assert_eq!(r.reasoning_text(), "Need the weather.");
    assert_eq!(r.text, "Let me check.\n\n");
    assert_eq!(r.calls[0].arguments, json!({"city": "杭州", "days": 3}));
    assert_eq!(r.calls[1].arguments, json!({}));
    // Without the open tag in the prompt, the close is stray and the reasoning is text.
    let r = parse(TURN);
    assert_eq!(r.text, "Need the weather.Let me check.\n\n");
    assert_eq!(warnings(&r), ["stray_reasoning_end"]);
}

#[test]
fn a_calls_block_inside_reasoning_ends_it_with_a_warning() {
    let s = "Thinking about it<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    let r = parse_with(inside(), s);
    assert_eq!(r.reasoning_text(), "Thinking about it");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["implicit_reasoning_end"]);
    // Off: the call stays reasoning, never run.
    let mut off = inside();
    off.reasoning.implicit_reasoning_end = false;
    let r = parse_with(off, s);
    assert!(r.calls.is_empty());
    assert_eq!(
        warnings(&r),
        ["call_in_reasoning", "unterminated_reasoning"]
    );
}

#[test]
fn invokes_outside_a_block_are_calls_with_a_warning() {
    let s = "Sure.\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>";
    let r = parse(s);
    assert_eq!(r.text, "Sure.\n");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(warnings(&r), ["missing_wrapper", "missing_wrapper"]);
    let off = Config {
        missing_wrapper: false,
        ..DeepseekV4::config()
    };
    let r = parse_with(off, s);
    assert!(r.calls.is_empty());
    assert_eq!(r.text, s);
}

#[test]
fn a_json_body_is_the_arguments_and_markup_in_its_strings_is_data() {
    let s = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n{\"city\": \"a</｜DSML｜invoke>\\\"}b\", \"days\": 12345678901234567890, \"opts\": {\"x\": [1, {}]}}\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    let r = parse(s);
    assert!(r.errors.is_empty(), "{r:?}");
    assert_eq!(
        r.calls[0].arguments,
        json!({"city": "a</｜DSML｜invoke>\"}b", "days": 12345678901234567890u64, "opts": {"x": [1, {}]}})
    );
    assert_eq!(warnings(&r), ["json_invoke_body"]);
    // Off: text where parameters belong.
    let off = Config {
        json_invoke_body: false,
        ..DeepseekV4::config()
    };
    assert_eq!(
        parse_with(off, s).error_kinds(),
        [ErrorKind::MalformedMarkup]
    );
}

#[test]
fn a_broken_json_body_drops_its_call_only() {
    let good = "<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>";
    for body in [
        "{\"city\": 1",           // cut off by the call's close, outside a string
        "{'city': 1}",            // not JSON
        "{\"city\": 1} trailing", // text after it
        "{\"a\": 1}\n<｜DSML｜parameter name=\"city\" string=\"true\">x</｜DSML｜parameter>",
    ] {
        let s = format!(
            "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n{body}\n</｜DSML｜invoke>\n{good}\n</｜DSML｜tool_calls>"
        );
        let r = parse(&s);
        assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup], "{body}");
        assert_eq!(r.calls.len(), 1, "{body}");
        assert_eq!(r.calls[0].name, "get_time");
    }
    // Cut off inside the body: unterminated, nothing leaks as text.
    let r = parse(
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\">\n{\"a\": \"</｜DSML｜invoke>",
    );
    assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
    assert_eq!(r.text, "");
}

#[test]
fn json_bodies_over_the_limits_are_limit_exceeded() {
    let cfg = Config {
        max_value_bytes: 64,
        ..DeepseekV4::config()
    };
    let big = format!("{{\"city\": \"{}\"}}", "x".repeat(100));
    let s = format!("<｜DSML｜invoke name=\"get_weather\">\n{big}\n</｜DSML｜invoke>");
    assert_eq!(
        parse_with(cfg, &s).error_kinds(),
        [ErrorKind::LimitExceeded]
    );
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let s =
        format!("<｜DSML｜invoke name=\"get_weather\">\n{{\"opts\": {deep}}}\n</｜DSML｜invoke>");
    let r = parse(&s);
    assert_eq!(r.error_kinds(), [ErrorKind::LimitExceeded]);
    assert!(r.calls.is_empty());
}

#[test]
fn a_self_closing_invoke_is_a_call_without_arguments() {
    let s = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\"/>\n<｜DSML｜invoke name=\"get_time\" />\n</｜DSML｜tool_calls>";
    let r = parse(s);
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[1].arguments, json!({}));
    assert_eq!(warnings(&r), ["self_closing_invoke", "self_closing_invoke"]);
    let off = Config {
        self_closing_invoke: false,
        ..DeepseekV4::config()
    };
    // Off: unreadable attributes; the call is skipped to its block's end.
    let r = parse_with(off, s);
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    assert!(r.calls.is_empty());
}

#[test]
fn other_spellings_are_text_unless_the_option_reads_them() {
    let ascii = "<|DSML|tool_calls>\n<|DSML|invoke name=\"get_weather\">\n<|DSML|parameter name=\"city\" string=\"true\">Rome</|DSML|parameter>\n</|DSML|invoke>\n</|DSML|tool_calls>";
    let spelled = "<｜DSML｜toolcalls>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜toolcalls>";
    let spaced = "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_time\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
    let strict = Config {
        missing_wrapper: false,
        ..DeepseekV4::config()
    };
    for s in [ascii, spelled, spaced] {
        let r = parse_with(strict, s);
        assert!(r.calls.is_empty(), "{s}");
        // The spaced and ASCII invokes are no markup of V4 either.
        assert!(r.text.contains("invoke name="), "{s}");
        let on = Config {
            marker_variants: true,
            ..DeepseekV4::config()
        };
        let r = parse_with(on, s);
        assert_eq!(r.calls.len(), 1, "{s}");
        assert_eq!(warnings(&r), ["marker_variant"], "{s}");
        assert_eq!(r.text, "");
    }
    // Inside a value a variant is content unless it is a value close.
    let on = Config {
        marker_variants: true,
        ..DeepseekV4::config()
    };
    let r = parse_with(
        on,
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">a<|DSML|invoke name=\"x\"></｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    );
    assert_eq!(
        r.calls[0].arguments,
        json!({"city": "a<|DSML|invoke name=\"x\">"})
    );
    assert!(r.warnings.is_empty());
}

#[test]
fn the_end_of_sentence_token_is_never_text() {
    let r = parse("Done.<｜end▁of▁sentence｜>");
    assert_eq!(r.text, "Done.");
}

#[test]
fn a_missing_string_attribute_is_typed_by_the_schema() {
    let r = parse(
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\">7</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    );
    assert_eq!(r.calls[0].arguments, json!({"city": "42", "days": 7}));
    assert_eq!(
        warnings(&r),
        ["missing_string_attribute", "missing_string_attribute"]
    );
}

#[test]
fn the_renderer_writes_the_encoding_scripts_spacing_and_round_trips() {
    let calls = vec![
        ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": " 3 ", "opts": {"a": [1, null], "b": "é"}}),
        },
        ToolCall {
            name: "get_time".into(),
            id: None,
            server: None,
            arguments: json!({}),
        },
    ];
    let out =
        String::from_utf8(tagged::render::<DeepseekV4>("", &calls, &tools()).unwrap()).unwrap();
    assert_eq!(
        out,
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\"> 3 </｜DSML｜parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">{\"a\": [1, null], \"b\": \"é\"}</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    );
    assert_eq!(parse(&out).calls, calls);
    let out = tagged::render::<DeepseekV4>("Checking.\n\n", &calls, &tools()).unwrap();
    assert!(out.starts_with("Checking.\n\n<｜DSML｜tool_calls>".as_bytes()));
    // A value that would close early cannot be written.
    let bad = vec![ToolCall {
        arguments: json!({"city": "a</｜DSML｜parameter>\n</｜DSML｜invoke>"}),
        ..calls[1].clone()
    }];
    assert!(tagged::render::<DeepseekV4>("", &bad, &tools()).is_err());
}

/// DSML pieces, JSON-body pieces, reasoning tags and text, in any order.
fn soup() -> impl Strategy<Value = Vec<u8>> {
    let pieces = [
        "<｜DSML｜tool_calls>",
        "</｜DSML｜tool_calls>",
        "\n<｜DSML｜invoke name=\"get_weather\">\n",
        "<｜DSML｜invoke name=\"get_time\"/>",
        "\n</｜DSML｜invoke>",
        "<｜DSML｜parameter name=\"city\" string=\"true\">",
        "<｜DSML｜parameter name=\"days\" string=\"false\">",
        "<｜DSML｜parameter name=\"opts\">",
        "</｜DSML｜parameter>",
        "{\"city\": \"x</｜DSML｜invoke>\\\"\", \"days\": [1, {}]}",
        "{\"a\"",
        "<think>",
        "</think>",
        "<｜end▁of▁sentence｜>",
        "<|DSML|invoke name=\"get_time\">",
        " 杭州 😀 ",
        "\n",
        "3",
        "\\",
        "\"",
        "<｜DS",
        "\u{ff5c}",
    ];
    proptest::collection::vec(0..pieces.len(), 0..24)
        .prop_map(move |ix| ix.iter().flat_map(|&i| pieces[i].bytes()).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn split_invariant_in_cycling_small_chunks(
        bytes in soup(),
        sizes in proptest::collection::vec(1usize..9, 1..6),
        variants in any::<bool>(),
        inside in any::<bool>(),
    ) {
        let t = tools();
        let mut cfg = Config { marker_variants: variants, ..DeepseekV4::config() };
        cfg.reasoning.starts_inside = inside;
        let mk = || tagged::boxed(&GRAMMAR, cfg, &t);
        let whole = ParseResult::fold(&run_chunks(mk().as_mut(), [bytes.as_slice()]));
        let evs = run_chunks(mk().as_mut(), cycled_chunks(&bytes, &sizes));
        check_delta_contract(&evs);
        prop_assert_eq!(&ParseResult::fold(&evs), &whole);
        let bytewise = ParseResult::fold(&run_chunks(mk().as_mut(), bytes.chunks(1)));
        prop_assert_eq!(&bytewise, &whole);
    }

    #[test]
    fn rendered_calls_parse_back(
        text in "[a-z .\n]{0,10}",
        s in "[a-z<>/&\"' \n中😀｜]{0,24}",
        o in arb_json("[a-z ]{0,6}"),
    ) {
        let calls = vec![ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": s, "opts": o}),
        }];
        if let Ok(out) = tagged::render::<DeepseekV4>(&text, &calls, &tools()) {
            let t = tools();
            let mk = || tagged::boxed(&GRAMMAR, DeepseekV4::config(), &t);
            let r = ParseResult::fold(&run_chunks(mk().as_mut(), out.chunks(3)));
            prop_assert_eq!(r.calls, calls);
            prop_assert_eq!(r.text, text);
        }
    }
}
