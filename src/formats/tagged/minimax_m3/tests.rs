use super::*;
use crate::event::{ErrorKind, Event, ParseResult};
use crate::formats::core::testkit::{
    arb_json, check_delta_contract, cycled_chunks, every_cut, fold_cut,
};
use crate::formats::tagged::Member;
use crate::formats::{StreamParser, run_chunks};
use crate::tools::Tools;
use proptest::prelude::*;
use serde_json::json;

fn tools() -> Tools {
    Tools::from_json(
        r##"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}},
            {"name":"get_time","parameters":{"type":"object","properties":{}}},
            {"name":"create_order","parameters":{"type":"object","$defs":{"item":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}},
              "properties":{"user_id":{"type":"integer"},"items":{"type":"array","items":{"$ref":"#/$defs/item"}},
              "shipping":{"type":"object","properties":{"address":{"type":"string"},"express":{"type":"boolean"}}},"tags":{"type":"array","items":{"type":"string"}}}}},
            {"name":"anything","parameters":{"type":"object","properties":{"v":{}}}}]"##,
    )
    .unwrap()
}

/// `@` stands for the namespace token, to keep the inputs readable.
fn wire(s: &str) -> String {
    s.replace('@', NS)
}

fn parse_with(cfg: Config, s: &str) -> ParseResult {
    let t = tools();
    every_cut(&|| tagged::boxed(&GRAMMAR, cfg, &t), wire(s).as_bytes()).0
}

fn parse(s: &str) -> ParseResult {
    parse_with(MinimaxM3::config(), s)
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

fn errors(r: &ParseResult) -> Vec<ErrorKind> {
    r.errors.iter().map(|e| e.kind).collect()
}

#[test]
fn the_template_example_parses_with_nested_values_typed() {
    let r = parse(
        "I'll check.@<tool_call>\n@<invoke name=\"create_order\">@<user_id>42@</user_id>@<items>@<item>@<sku>book-001@</sku>@<qty>2@</qty>@</item>@</items>@</invoke>\n@</tool_call>",
    );
    assert_eq!(r.text, "I'll check.");
    assert_eq!(
        r.calls[0].arguments,
        json!({"user_id": 42, "items": [{"sku": "book-001", "qty": 2}]})
    );
    assert!(r.warnings.is_empty() && r.errors.is_empty(), "{r:?}");
}

#[test]
fn strings_stream_as_they_arrive_and_nested_values_come_at_their_close() {
    let t = tools();
    let mut p = tagged::boxed(&GRAMMAR, MinimaxM3::config(), &t);
    let mut out = Vec::new();
    p.feed(
        wire("@<tool_call>\n@<invoke name=\"get_weather\">@<city>San Fr").as_bytes(),
        &mut out,
    );
    let args: String = out
        .iter()
        .filter_map(|e| match e {
            Event::ArgsDelta { json, .. } => Some(json.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, "{\"city\":\"San Fr");
    let mut out = Vec::new();
    let mut p = tagged::boxed(&GRAMMAR, MinimaxM3::config(), &t);
    p.feed(
        wire("@<tool_call>\n@<invoke name=\"create_order\">@<shipping>@<address>1 Main").as_bytes(),
        &mut out,
    );
    assert!(
        !out.iter().any(|e| matches!(e, Event::ArgsDelta { .. })),
        "{out:?}"
    );
}

#[test]
fn a_namespace_token_before_a_tag_is_markup_and_nowhere_else() {
    // Without the token a tag is data.
    let r = parse(
        "@<tool_call>\n@<invoke name=\"get_weather\">@<city><tool_call></city> ]<]minima [x]@</city>@</invoke>\n@</tool_call>",
    );
    assert_eq!(
        r.calls[0].arguments,
        json!({"city": "<tool_call></city> ]<]minima [x]"})
    );
    // With it, every delimiter in a value is markup: the value is left unclosed.
    let r = parse(
        "@<tool_call>\n@<invoke name=\"get_weather\">@<city>Paris@</invoke>\n@<invoke name=\"get_time\">@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].name, "get_time");
    // A new invoke inside a broken one starts over.
    let r = parse(
        "@<tool_call>\n@<invoke name=\"get_weather\">@<city>Paris@<invoke name=\"get_time\">@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.calls[0].name, "get_time");
}

#[test]
fn closes_must_match_and_strings_hold_no_elements() {
    let r = parse(
        "@<tool_call>\n@<invoke name=\"get_weather\">@<city>Paris@</town>@</invoke>\n@<invoke name=\"get_time\">@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.calls.len(), 1);
    let r = parse(
        "@<tool_call>\n@<invoke name=\"get_weather\">@<city>@<name>Paris@</name>@</city>@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    assert!(r.calls.is_empty());
    // A nested close inside a nested value must name the innermost element.
    let r = parse(
        "@<tool_call>\n@<invoke name=\"create_order\">@<shipping>@<address>x@</shipping>@</address>@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
}

#[test]
fn spaced_tags_are_read_with_a_warning_and_a_lone_token_is_not_markup() {
    let r = parse(
        "@ <tool_call>\n@<invoke name=\"get_weather\">@\n <city>Oslo@  </city>@</invoke>\n@\t</tool_call>",
    );
    assert_eq!(r.calls[0].arguments, json!({"city": "Oslo"}));
    assert_eq!(warnings(&r), ["spaced_marker"; 4]);
    // In prose the token with no tag after it is text, and so is a spaced tag that means
    // nothing there, as it came; in a value it is malformed.
    let r = parse("a @ b @ </city> @\n<mm:think>x");
    assert_eq!(r.text, wire("a @ b @ </city> @\n<mm:think>x"));
    assert!(r.warnings.is_empty(), "{r:?}");
    let r = parse(
        "@<tool_call>\n@<invoke name=\"get_weather\">@<city>a @ b@</city>@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    // Off: the spaced form is no markup.
    let off = Config {
        spaced_marker: false,
        ..MinimaxM3::config()
    };
    let r = parse_with(off, "@ <tool_call>");
    assert_eq!(r.text, wire("@ <tool_call>"));
    assert!(r.calls.is_empty());
}

#[test]
fn names_quoting_and_invokes_without_a_block() {
    let r = parse("@<tool_call>\n@<invoke name=get_time>@</invoke>\n@</tool_call>");
    assert_eq!(r.calls[0].name, "get_time");
    assert_eq!(warnings(&r), ["unquoted_attribute"]);
    let strict = Config {
        unquoted_attribute: false,
        ..MinimaxM3::config()
    };
    let r = parse_with(
        strict,
        "@<tool_call>\n@<invoke name=get_time>@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    let r = parse("Sure.@<invoke name=\"get_time\">@</invoke> Done.");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.text, "Sure. Done.");
    assert_eq!(warnings(&r), ["missing_wrapper", "text_after_calls"]);
}

#[test]
fn mixed_content_repeats_and_empty_containers() {
    let r = parse(
        "@<tool_call>\n@<invoke name=\"create_order\">@<shipping>Note @<address>x@</address>@</shipping>@<tags>@</tags>@<items>@</items>@</invoke>\n@</tool_call>",
    );
    assert_eq!(
        r.calls[0].arguments,
        json!({"shipping": {"address": "x", "$text": "Note "}, "tags": [], "items": []})
    );
    assert_eq!(warnings(&r), ["mixed_content"]);
    let r = parse(
        "@<tool_call>\n@<invoke name=\"anything\">@<v>@<h>a@</h>@<h>b@</h>@<l>@<item>1@</item>@</l>@</v>@</invoke>\n@</tool_call>",
    );
    assert_eq!(
        r.calls[0].arguments,
        json!({"v": {"h": ["a", "b"], "l": ["1"]}})
    );
}

#[test]
fn limits_give_limit_exceeded_and_the_next_call_parses() {
    let deep: String = (0..200).map(|_| "@<a>").collect();
    let r = parse(&format!(
        "@<tool_call>\n@<invoke name=\"anything\">@<v>{deep}@<invoke name=\"get_time\">@</invoke>\n@</tool_call>"
    ));
    assert_eq!(errors(&r), [ErrorKind::LimitExceeded]);
    assert_eq!(r.calls[0].name, "get_time");
    let small = Config {
        max_tag_bytes: 8,
        max_value_bytes: 16,
        ..MinimaxM3::config()
    };
    let r = parse_with(
        small,
        "@<tool_call>\n@<invoke name=\"anything\">@<v>@<a_long_tag>x@</a_long_tag>@</v>@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::LimitExceeded]);
    let r = parse_with(
        small,
        "@<tool_call>\n@<invoke name=\"anything\">@<v>@<a>0123456789abcdef@</a>@</v>@</invoke>\n@</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::LimitExceeded]);
}

#[test]
fn truncation_inside_an_invoke_is_unterminated_and_a_missing_block_end_a_warning() {
    for cut in [
        "@<tool_call>\n@<invoke name=\"create_order\">@<items>@<item>@<sku>bo",
        "@<tool_call>\n@<invoke name=\"get_weather\">@<city>x@</ci",
        "@<tool_call>\n@<invoke name=\"get_weather\">@",
    ] {
        let r = parse(cut);
        assert_eq!(errors(&r), [ErrorKind::Unterminated], "{cut}");
        assert_eq!(r.text, "", "{cut}");
    }
    let r = parse("@<tool_call>\n@<invoke name=\"get_time\">@</invoke>\n");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["missing_section_end"]);
}

#[test]
fn adaptive_start_and_implicit_reasoning_end() {
    let r = parse("</mm:think>Hi.");
    assert_eq!((r.text.as_str(), r.reasoning_text()), ("Hi.", ""));
    assert!(r.warnings.is_empty());
    // Later, a close is stray.
    let r = parse("Hi.</mm:think>");
    assert_eq!(warnings(&r), ["stray_reasoning_end"]);
    let r =
        parse("<mm:think>plan@<tool_call>\n@<invoke name=\"get_time\">@</invoke>\n@</tool_call>");
    assert_eq!(r.reasoning_text(), "plan");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["implicit_reasoning_end"]);
    // With the option off, T20 holds: the call is reasoning.
    let off = Config {
        reasoning: crate::formats::reasoning::Config {
            implicit_reasoning_end: false,
            ..MinimaxM3::config().reasoning
        },
        ..MinimaxM3::config()
    };
    let r = parse_with(
        off,
        "<mm:think>plan@<invoke name=\"get_time\">@</invoke></mm:think>",
    );
    assert!(r.calls.is_empty());
    assert_eq!(warnings(&r), ["call_in_reasoning"]);
}

#[test]
fn the_renderer_writes_the_template_and_refuses_what_does_not_parse_back() {
    let t = tools();
    let calls = vec![
        ToolCall {
            name: "create_order".into(),
            id: None,
            server: None,
            arguments: json!({"user_id": 7, "items": [{"sku": "a <b>", "qty": 1}], "tags": []}),
        },
        ToolCall {
            name: "get_time".into(),
            id: None,
            server: None,
            arguments: json!({}),
        },
    ];
    let out = String::from_utf8(tagged::render::<MinimaxM3>("Ok.", &calls, &t).unwrap()).unwrap();
    assert_eq!(
        out,
        wire(
            "Ok.@<tool_call>\n@<invoke name=\"create_order\">@<user_id>7@</user_id>@<items>@<item>@<sku>a <b>@</sku>@<qty>1@</qty>@</item>@</items>@<tags>@</tags>@</invoke>\n@<invoke name=\"get_time\">@</invoke>\n@</tool_call>"
        )
    );
    let bad = |args: serde_json::Value| {
        let c = [ToolCall {
            name: "anything".into(),
            id: None,
            server: None,
            arguments: args,
        }];
        tagged::render::<MinimaxM3>("", &c, &t).is_err()
    };
    assert!(bad(json!({"v": null})));
    assert!(bad(json!({"v": format!("a{NS}b")})));
    assert!(bad(json!({"v": {"tool_call": "x"}})));
    assert!(!bad(json!({"v": {"a": ["x", {"b": "y"}]}})));
}

/// Byte soup of the grammar's pieces.
fn soup() -> Vec<String> {
    let mut v: Vec<String> = GRAMMAR.markers.iter().map(|m| m.0.to_string()).collect();
    v.extend(
        [
            "<mm:think>",
            "</mm:think>",
            "<tool_call>",
            "invoke name=\"get_time\">",
            "\"v\">",
            "v>",
            "item>",
            "/v>",
            "/item>",
            "a>",
            "/a>",
            "x",
            " ",
            "\n",
            "]",
            "]<]",
            "é",
            ">",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn soup_is_split_invariant_under_small_cycling_chunks(
        picks in proptest::collection::vec(any::<usize>(), 0..40),
        sizes in proptest::collection::vec(1usize..6, 1..5),
    ) {
        let parts = soup();
        let s: String = picks.iter().map(|i| parts[i % parts.len()].as_str()).collect();
        let t = tools();
        let mk = || tagged::boxed(&GRAMMAR, MinimaxM3::config(), &t);
        let whole = fold_cut(mk().as_mut(), s.as_bytes(), &[]);
        let evs = run_chunks(mk().as_mut(), cycled_chunks(s.as_bytes(), &sizes));
        check_delta_contract(&evs);
        prop_assert_eq!(&ParseResult::fold(&evs), &whole, "{:?}", s);
    }

    #[test]
    fn rendered_nested_calls_parse_back_under_small_cycling_chunks(
        text in "[a-z .<>\n]{0,10}",
        v in arb_json("[a-z <>&\"中😀]{0,6}"),
        sizes in proptest::collection::vec(1usize..9, 1..5),
    ) {
        let t = tools();
        let calls = vec![ToolCall {
            name: "anything".into(),
            id: None,
            server: None,
            arguments: json!({"v": v}),
        }];
        if let Ok(bytes) = tagged::render::<MinimaxM3>(&text, &calls, &t) {
            let mk = || tagged::boxed(&GRAMMAR, MinimaxM3::config(), &t);
            let evs = run_chunks(mk().as_mut(), cycled_chunks(&bytes, &sizes));
            check_delta_contract(&evs);
            let r = ParseResult::fold(&evs);
            prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
            prop_assert_eq!(r.calls, calls);
            prop_assert_eq!(r.text, text);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), cut in any::<usize>()) {
        let t = tools();
        let mut p = tagged::boxed(&GRAMMAR, MinimaxM3::config(), &t);
        let _ = fold_cut(p.as_mut(), &bytes, &[cut]);
    }
}

#[test]
fn look_alikes_and_spaced_tokens_cost_linear_time_under_byte_chunks() {
    // Each near miss of the token, and each spaced tag, is decided once.
    let body = "]<]minimax[>x ]]".repeat(20_000);
    let spaced = "@ <a>1@ </a>".repeat(5_000);
    let input = wire(&format!(
        "@<tool_call>\n@<invoke name=\"anything\">@<v>{body}@</v>@</invoke>\n@<invoke name=\"anything\">@<v>{spaced}@</v>@</invoke>\n@</tool_call>"
    ));
    let t = tools();
    let mut p = tagged::boxed(&GRAMMAR, MinimaxM3::config(), &t);
    let r = ParseResult::fold(&run_chunks(p.as_mut(), input.as_bytes().chunks(1)));
    assert_eq!(r.calls[0].arguments["v"], json!(body));
    assert_eq!(
        r.calls[1].arguments["v"]["a"].as_array().unwrap().len(),
        5_000
    );
    assert_eq!(r.warnings.len(), 10_000);
}
