use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::core::testkit::{arb_json, cycled_chunks, every_cut, fold_cut};
use crate::formats::run_chunks;
use proptest::prelude::*;
use serde_json::json;

fn tools() -> Tools {
    Tools::from_json(
        r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"hot":{"type":"boolean"}}}}},
            {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}},
            {"type":"function","function":{"name":"f","parameters":{"type":"object"}}},
            {"type":"function","function":{"name":"g","parameters":{"type":"object"}}}]"#,
    )
    .unwrap()
}

fn parse_cfg(cfg: Config, s: &str) -> ParseResult {
    let t = tools();
    every_cut(&|| Box::new(Parser::new(cfg, &t)), s.as_bytes()).0
}

fn parse(s: &str) -> ParseResult {
    parse_cfg(Config::default(), s)
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

fn with(f: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::default();
    f(&mut c);
    c
}

const THINK_END: &str = "<|close|>think<|sep|>";
const MSG_END: &str = "<|close|>message<|sep|>";

fn arg(key: &str, ty: &str, v: &str) -> String {
    format!("<|open|>argument key=\"{key}\" type=\"{ty}\"<|sep|>{v}<|close|>argument<|sep|>")
}

fn call(name: &str, i: usize, body: &str) -> String {
    format!("<|open|>call tool=\"{name}\" index=\"{i}\"<|sep|>{body}<|close|>call<|sep|>")
}

fn turn(text: &str, calls: &str) -> String {
    let tools = if calls.is_empty() {
        String::new()
    } else {
        format!("<|open|>tools<|sep|>{calls}<|close|>tools<|sep|>")
    };
    format!("{THINK_END}<|open|>response<|sep|>{text}<|close|>response<|sep|>{tools}{MSG_END}")
}

#[test]
fn the_fact_sheet_example_parses_into_reasoning_text_and_two_calls() {
    let s = format!(
        "Need the weather.{THINK_END}<|open|>response<|sep|>Let me check.<|close|>response<|sep|><|open|>tools<|sep|>{}{}<|close|>tools<|sep|>{MSG_END}<|end_of_msg|>",
        call(
            "get_weather",
            1,
            &(arg("city", "string", "Paris") + &arg("days", "number", "3"))
        ),
        call("get_time", 2, "")
    );
    let r = parse(&s);
    assert_eq!(r.reasoning_text(), "Need the weather.");
    assert_eq!(r.text, "Let me check.");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[0].name, "get_weather");
    assert_eq!(r.calls[0].id, None);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris", "days": 3}));
    assert_eq!(r.calls[1].name, "get_time");
    assert_eq!(r.calls[1].arguments, json!({}));
    assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
}

#[test]
fn the_start_state_follows_the_request() {
    // Thinking prompt (default): the output starts inside think.
    let r = parse(&format!(
        "hmm{THINK_END}<|open|>response<|sep|>Hi<|close|>response<|sep|>{MSG_END}"
    ));
    assert_eq!((r.reasoning_text(), r.text.as_str()), ("hmm", "Hi"));
    // Thinking off: the prompt opened response.
    let off = with(|c| c.reasoning.enabled = false);
    let r = parse_cfg(off, &format!("Hi<|close|>response<|sep|>{MSG_END}"));
    assert_eq!((r.reasoning_text(), r.text.as_str()), ("", "Hi"));
    assert!(r.warnings.is_empty());
    // None: the transcript carries its own openers, a message's included.
    let none = with(|c| c.reasoning.starts_inside = false);
    let raw = format!(
        "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>hmm{THINK_END}<|open|>response<|sep|>Hi<|close|>response<|sep|>{MSG_END}"
    );
    let r = parse_cfg(none, &raw);
    assert_eq!((r.reasoning_text(), r.text.as_str()), ("hmm", "Hi"));
    assert!(r.warnings.is_empty());
    // The same raw transcript under the default: its openers replace the prompt's state.
    assert_eq!(parse(&raw), r);
    // Response-mode output read in none mode: the same text, with a warning.
    let r = parse_cfg(none, &format!("Hi<|close|>response<|sep|>{MSG_END}"));
    assert_eq!(r.text, "Hi");
    assert!(r.errors.is_empty());
    assert!(warnings(&r).contains(&"text_outside_channel"));
}

#[test]
fn values_are_typed_by_their_type_attribute() {
    let body = [
        arg("s", "string", " 42 "),
        arg("n", "number", "3.5"),
        arg("i", "number", "-7"),
        arg("b", "boolean", "true"),
        arg("z", "null", "null"),
        arg("o", "object", "{\"a\": [1, 2], \"b\": \"x\"}"),
        arg("a", "array", "[\"x\", {\"y\": null}]"),
        "<|open|>argument key=\"untyped\"<|sep|>true<|close|>argument<|sep|>".to_string(),
        arg("other", "integer", "5"),
    ]
    .concat();
    let r = parse(&turn("", &call("f", 1, &body)));
    assert_eq!(
        r.calls[0].arguments,
        json!({"s": " 42 ", "n": 3.5, "i": -7, "b": true, "z": null,
               "o": {"a": [1, 2], "b": "x"}, "a": ["x", {"y": null}], "untyped": "true", "other": 5})
    );
    assert!(r.errors.is_empty());
    // Not JSON, or JSON of another kind: the raw text, noted.
    let body = [
        arg("n", "number", "three"),
        arg("b", "boolean", "True"),
        arg("o", "object", "[1]"),
        arg("q", "number", "\"3\""),
    ]
    .concat();
    let r = parse(&turn("", &call("f", 1, &body)));
    assert_eq!(
        r.calls[0].arguments,
        json!({"n": "three", "b": "True", "o": "[1]", "q": "\"3\""})
    );
    assert_eq!(warnings(&r), ["type_mismatch"; 4]);
}

#[test]
fn a_declared_type_the_schema_does_not_allow_is_noted_and_the_schema_dialect_types_by_schema() {
    let body = arg("days", "string", "3") + &arg("city", "string", "Oslo");
    let s = turn("", &call("get_weather", 1, &body));
    let r = parse(&s);
    assert_eq!(r.calls[0].arguments, json!({"days": "3", "city": "Oslo"}));
    assert_eq!(warnings(&r), ["schema_type_mismatch"]);
    let r = parse_cfg(with(|c| c.schema_typing = true), &s);
    assert_eq!(r.calls[0].arguments, json!({"days": 3, "city": "Oslo"}));
    assert!(r.warnings.is_empty());
}

#[test]
fn attributes_are_unescaped_and_calls_carry_no_id() {
    let s = turn(
        "",
        "<|open|>call index=\"7\" tool=\"a&quot;b&amp;c\"<|sep|><|open|>argument type=\"string\" key=\"k&quot;\"<|sep|>v<|close|>argument<|sep|><|close|>call<|sep|>",
    );
    let r = parse(&s);
    assert_eq!(r.calls[0].name, "a\"b&c");
    assert_eq!(r.calls[0].id, None);
    assert_eq!(r.calls[0].arguments, json!({"k\"": "v"}));
    // The index is optional.
    let r = parse(&turn(
        "",
        "<|open|>call tool=\"g\"<|sep|><|close|>call<|sep|>",
    ));
    assert_eq!((r.calls[0].name.as_str(), &r.calls[0].id), ("g", &None));
}

#[test]
fn a_call_without_a_tool_is_missing_name_and_an_unknown_tool_is_kept() {
    let s = turn(
        "",
        &("<|open|>call index=\"1\"<|sep|>".to_string()
            + &arg("k", "string", "v")
            + "<|close|>call<|sep|>"
            + &call("nope", 2, "")),
    );
    let r = parse(&s);
    assert_eq!(r.error_kinds(), [ErrorKind::MissingName]);
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].name, "nope");
    assert_eq!(warnings(&r), ["unknown_tool"]);
}

#[test]
fn a_json_block_is_the_whole_arguments_and_its_close_counts_outside_strings_only() {
    let block = "<|open|>json type=\"object\"<|sep|>{\"code\": \"a<|close|>json<|sep|>b\", \"n\": [1]}<|close|>json<|sep|>";
    let r = parse(&turn("", &call("f", 1, block)));
    assert_eq!(
        r.calls[0].arguments,
        json!({"code": "a<|close|>json<|sep|>b", "n": [1]})
    );
    assert!(r.errors.is_empty());
    let cases = [
        ("[1]", ErrorKind::InvalidJson),
        ("{\"a\":", ErrorKind::InvalidJson),
        ("  ", ErrorKind::EmptyArguments),
        ("{} x", ErrorKind::InvalidJson),
    ];
    for (body, kind) in cases {
        let b = format!("<|open|>json type=\"object\"<|sep|>{body}<|close|>json<|sep|>");
        let r = parse(&turn("", &(call("f", 1, &b) + &call("g", 2, ""))));
        assert_eq!(r.error_kinds(), [kind], "{body}");
        assert_eq!(r.calls.len(), 1, "{body}: the next call survives");
    }
    // Arguments and a block in one call.
    let b = arg("k", "string", "v") + "<|open|>json<|sep|>{}<|close|>json<|sep|>";
    let r = parse(&turn("", &call("f", 1, &b)));
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    assert!(r.calls.is_empty());
}

#[test]
fn an_argument_close_ends_the_value_only_where_the_call_goes_on() {
    // Followed by text: content, with a warning.
    let v = "x<|close|>argument<|sep|> and more";
    let r = parse(&turn("", &call("f", 1, &arg("k", "string", v))));
    assert_eq!(r.calls[0].arguments, json!({"k": v}));
    assert_eq!(warnings(&r), ["close_tag_in_value"]);
    // Followed by the next argument (after whitespace), the call's close, the end of the
    // stream: the close.
    let body = format!(
        "<|open|>argument key=\"a\"<|sep|>1<|close|>argument<|sep|> \n {}",
        arg("b", "number", "2")
    );
    let r = parse(&turn("", &call("f", 1, &body)));
    assert_eq!(r.calls[0].arguments, json!({"a": "1", "b": 2}));
    assert!(r.warnings.is_empty());
    // A close that is content, then the real one.
    let body = "<|open|>argument key=\"a\"<|sep|>p<|close|>argument<|sep|><|close|>argument<|sep|>";
    let r = parse(&turn("", &call("f", 1, body)));
    assert_eq!(
        r.calls[0].arguments,
        json!({"a": "p<|close|>argument<|sep|>"})
    );
    // Off: an error, the call dropped.
    let off = with(|c| c.close_tag_in_value = false);
    let r = parse_cfg(off, &turn("", &call("f", 1, &arg("k", "string", v))));
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    assert!(r.calls.is_empty());
    // Other markup inside a value is content.
    let v = "<|open|>tools<|sep|><|close|>call<|sep|><|end_of_msg|>";
    let r = parse(&turn("", &call("f", 1, &arg("k", "string", v))));
    assert_eq!(r.calls[0].arguments, json!({"k": v}));
}

#[test]
fn spaced_markers_are_read_with_a_warning_or_refused() {
    let s = "<|close|> think <|sep|><|open|> response <|sep|>Hi<|close|> response <|sep|><|open|> tools <|sep|><|open|> call tool=\"f\" index=\"1\" <|sep|><|open|> argument key=\"k\" type=\"number\" <|sep|> 5 <|close|> argument <|sep|><|close|> call <|sep|><|close|> tools <|sep|><|close|> message <|sep|>";
    let r = parse(s);
    assert_eq!(r.text, "Hi");
    assert_eq!(r.calls[0].arguments, json!({"k": 5}));
    assert_eq!(warnings(&r), ["spaced_marker"]);
    let r = parse_cfg(with(|c| c.spaced_marker = false), s);
    assert!(r.error_kinds().contains(&ErrorKind::MalformedMarkup));
    assert!(r.calls.is_empty());
}

#[test]
fn reasoning_ends_at_a_channel_opener_and_keeps_call_markup_verbatim() {
    let c = call("f", 1, &arg("k", "string", "v"));
    let r = parse(&format!(
        "plan<|open|>tools<|sep|>{c}<|close|>tools<|sep|>{MSG_END}"
    ));
    assert_eq!(r.reasoning_text(), "plan");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["implicit_reasoning_end"]);
    // A call considered in the thought is not a call.
    let s = format!(
        "maybe {c} no.{THINK_END}<|open|>response<|sep|>ok<|close|>response<|sep|>{MSG_END}"
    );
    let r = parse(&s);
    assert_eq!(r.reasoning_text(), format!("maybe {c} no."));
    assert!(r.calls.is_empty());
    assert_eq!(warnings(&r), ["call_in_reasoning"]);
    let off = with(|c| c.reasoning.call_in_reasoning = false);
    assert_eq!(
        parse_cfg(off, &s).error_kinds(),
        [ErrorKind::MalformedMarkup]
    );
    // Without the implicit end the opener stays in the reasoning.
    let off = with(|c| c.reasoning.implicit_reasoning_end = false);
    let r = parse_cfg(off, &format!("plan<|open|>tools<|sep|>{c}"));
    assert!(r.calls.is_empty());
    assert!(r.reasoning_text().starts_with("plan<|open|>tools<|sep|>"));
}

#[test]
fn open_ends_are_recovered_or_reported() {
    // The stream ends in the think channel.
    let r = parse("still thinking");
    assert_eq!(warnings(&r), ["unterminated_reasoning"]);
    let off = with(|c| c.reasoning.unterminated_reasoning = false);
    assert_eq!(parse_cfg(off, "x").error_kinds(), [ErrorKind::Unterminated]);
    // A complete call, then the end: kept, the section noted.
    let c = call("f", 1, &arg("k", "string", "v"));
    let s = format!("{THINK_END}<|open|>tools<|sep|>{c}");
    let r = parse(&s);
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["missing_section_end"]);
    let off = with(|c| c.missing_section_end = false);
    assert_eq!(parse_cfg(off, &s).error_kinds(), [ErrorKind::Unterminated]);
    // The end inside a call, a value, a block, a header: unterminated, the earlier call kept.
    for tail in [
        "<|open|>call tool=\"g\"<|sep|>",
        "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"k\"<|sep|>par",
        "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"k\"<|sep|>v<|close|>argument<|sep|>",
        "<|open|>call tool=\"g\"<|sep|><|open|>json<|sep|>{\"a\"",
    ] {
        let r = parse(&format!("{s}{tail}"));
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated], "{tail}");
        assert_eq!(r.calls.len(), 1, "{tail}");
    }
    let r = parse(&format!("{s}<|open|>call tool=\"g"));
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    // A call closed by the section's close.
    let s = format!(
        "{THINK_END}<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>{}<|close|>tools<|sep|>{MSG_END}",
        arg("k", "number", "1")
    );
    let r = parse(&s);
    assert_eq!(r.calls[0].arguments, json!({"k": 1}));
    assert_eq!(warnings(&r), ["missing_call_close"]);
    let off = with(|c| c.missing_call_close = false);
    let r = parse_cfg(off, &s);
    assert!(r.calls.is_empty());
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
}

#[test]
fn text_where_no_channel_holds_it() {
    let c = call("f", 1, "");
    // Between calls of a section.
    let s = turn("", &format!("{c} note {c}"));
    let r = parse(&s);
    assert_eq!((r.text.as_str(), r.calls.len()), (" note ", 2));
    assert_eq!(warnings(&r), ["text_in_section"]);
    let r = parse_cfg(with(|c| c.text_in_section = false), &s);
    assert_eq!(
        (r.text.as_str(), r.error_kinds()),
        ("", vec![ErrorKind::MalformedMarkup])
    );
    // Outside every channel; whitespace alone is not text.
    let s = format!("{THINK_END} \n after{MSG_END}\n");
    let r = parse(&s);
    assert_eq!(r.text, " \n after");
    assert_eq!(warnings(&r), ["text_outside_channel"]);
    // A call outside a section.
    let r = parse(&format!("{THINK_END}{c}{MSG_END}"));
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["missing_wrapper"]);
    let r = parse_cfg(
        with(|c| c.missing_wrapper = false),
        &format!("{THINK_END}{c}{MSG_END}"),
    );
    assert!(r.calls.is_empty());
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
}

#[test]
fn limits_give_limit_exceeded_and_the_rest_parses() {
    let small = with(|c| {
        c.max_value_bytes = 16;
        c.max_depth = 4;
    });
    let next = call("g", 2, "");
    for body in [
        arg("k", "string", &"x".repeat(17)),
        arg("k", "object", "{\"a\":{\"b\":{\"c\":{\"d\":{}}}}}"),
        format!(
            "<|open|>json<|sep|>{}<|close|>json<|sep|>",
            "{\"a\":[[[[1]]]]}"
        ),
    ] {
        let r = parse_cfg(small, &turn("", &(call("f", 1, &body) + &next)));
        assert_eq!(r.error_kinds(), [ErrorKind::LimitExceeded], "{body}");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].name, "g");
    }
}

#[test]
fn invalid_utf8_inside_a_call_drops_it_and_text_keeps_a_replacement() {
    let mut s = turn("é", &call("f", 1, &arg("k", "string", "ab"))).into_bytes();
    let at = s.windows(2).position(|w| w == b"ab").unwrap();
    s[at] = 0xff;
    let head = turn("", "");
    let t = tools();
    let (r, _) = every_cut(&|| Box::new(Parser::new(Config::default(), &t)), &s);
    assert_eq!(r.error_kinds(), [ErrorKind::InvalidUtf8]);
    assert!(r.calls.is_empty());
    assert_eq!(r.text, "é");
    assert!(!head.is_empty());
}

#[test]
fn the_renderer_writes_what_the_parser_reads() {
    let calls = vec![
        ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": "Paris", "days": 3, "o": {"a": [1, null]}, "e": ""}),
        },
        ToolCall {
            name: "get_time".into(),
            id: None,
            server: None,
            arguments: json!({}),
        },
    ];
    let bytes = render("Let me check.\n", &calls, &tools()).unwrap();
    let s = String::from_utf8(bytes).unwrap();
    assert!(
        s.contains("<|open|>call tool=\"get_time\" index=\"2\"<|sep|>"),
        "{s}"
    );
    assert!(s.contains("<|open|>argument key=\"o\" type=\"object\"<|sep|>{\"a\": [1, null]}<|close|>argument<|sep|>"), "{s}");
    let r = parse(&s);
    assert_eq!((r.text.as_str(), &r.calls), ("Let me check.\n", &calls));
    assert!(r.warnings.is_empty());
    // What it cannot write.
    let bad = |c: ToolCall| render("", &[c], &Tools::default()).is_err();
    let base = calls[0].clone();
    assert!(bad(ToolCall {
        id: Some("get_weather:1".into()),
        ..base.clone()
    }));
    assert!(bad(ToolCall {
        server: Some("s".into()),
        ..base.clone()
    }));
    assert!(bad(ToolCall {
        arguments: json!({"k": "a<|close|>argument<|sep|>"}),
        ..base.clone()
    }));
    assert!(render("<|sep|>", &[], &Tools::default()).is_err());
}

#[test]
fn a_session_restarts_per_turn() {
    let mut p = Parser::new(Config::default(), &tools());
    let t = turn("one", &call("f", 1, ""));
    let a = ParseResult::fold(&run_chunks(&mut p, [t.as_bytes()]));
    let b = ParseResult::fold(&run_chunks(&mut p, [t.as_bytes()]));
    assert_eq!(a, b);
    assert_eq!(b.calls[0].name, "f");
}

/// Transcripts that exercise most states, for the split properties.
fn samples() -> Vec<String> {
    let c1 = call(
        "get_weather",
        1,
        &(arg("city", "string", "Zürich \"quoted\" 😀<tag>")
            + &arg("days", "number", "3")
            + &arg("o", "object", "{\"a\": \"<|close|>json<|sep|>\"}")),
    );
    let c2 = call(
        "f",
        2,
        "<|open|>json type=\"object\"<|sep|>{\"x\": \"<|close|>json<|sep|>\\\"\", \"y\": 1}<|close|>json<|sep|>",
    );
    vec![
        format!("think <b>{}", turn("Hi <|op & 你好", &(c1.clone() + &c2))),
        format!("{THINK_END}<|open|>response<|sep|>cut {c1}"),
        format!("x<|open|>tools<|sep|>{c2} junk {c1}"),
        turn("", &call("f", 1, &arg("k", "string", "v<|close|>argument<|sep|> z"))),
        "<|close|> think <|sep|><|open|> tools <|sep|><|open|> call tool=\"f\" <|sep|><|close|> call <|sep|>".into(),
        format!("{THINK_END}<|sep|><|open|>bogus<|sep|><|open|>message role=\"tool\"<|sep|>r{MSG_END}t"),
    ]
}

#[test]
fn every_sample_is_split_invariant_under_every_cut() {
    for s in samples() {
        parse(&s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn cycling_small_chunks_give_the_whole_result(which in 0usize..6, sizes in prop::collection::vec(1usize..7, 1..6)) {
        let s = samples()[which].clone();
        let t = tools();
        let whole = ParseResult::fold(&run_chunks(&mut Parser::new(Config::default(), &t), [s.as_bytes()]));
        let cut = ParseResult::fold(&run_chunks(&mut Parser::new(Config::default(), &t), cycled_chunks(s.as_bytes(), &sizes)));
        prop_assert_eq!(cut, whole);
    }

    #[test]
    fn rendered_calls_parse_back_under_random_cuts(
        text in "[a-z <>&\"é]{0,12}",
        args in prop::collection::vec(prop::collection::btree_map("[a-z]{1,4}", arb_json("[a-z <>\"\\\\é|]{0,8}"), 0..3), 0..3),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let calls: Vec<ToolCall> = args.into_iter().map(|a| ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: Value::Object(a.into_iter().collect()),
        }).collect();
        let bytes = render(&text, &calls, &tools()).unwrap();
        let r = fold_cut(&mut Parser::new(Config::default(), &tools()), &bytes, &cuts);
        prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
        prop_assert_eq!(r.text, text);
        prop_assert_eq!(r.calls, calls);
    }

    #[test]
    fn arbitrary_xtml_soup_never_panics_and_is_split_invariant(
        parts in prop::collection::vec(prop::sample::select(vec![
            "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>", "think", "response", "tools",
            "call", "argument", "json", "message", " tool=\"f\"", " key=\"k\"", " type=\"number\"",
            " type=\"object\"", " role=\"assistant\"", "{", "}", "\"", "1", " ", "x", "<", "é",
        ]), 0..40),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let s: String = parts.concat();
        let t = tools();
        let whole = fold_cut(&mut Parser::new(Config::default(), &t), s.as_bytes(), &[]);
        let cut = fold_cut(&mut Parser::new(Config::default(), &t), s.as_bytes(), &cuts);
        prop_assert_eq!(cut, whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64), cuts in prop::collection::vec(any::<usize>(), 0..4)) {
        let t = tools();
        let whole = fold_cut(&mut Parser::new(Config::default(), &t), &bytes, &[]);
        let cut = fold_cut(&mut Parser::new(Config::default(), &t), &bytes, &cuts);
        prop_assert_eq!(cut, whole);
    }
}
