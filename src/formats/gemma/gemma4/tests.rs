use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::core::testkit::{arb_call, cycled_chunks, every_cut, fold_cut};
use crate::formats::run_chunks;
use proptest::prelude::*;
use serde_json::json;

const Q: &str = QUOTE;

fn tools() -> Tools {
    Tools::from_json(
        r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}},
            {"name":"get_time","parameters":{"type":"object","properties":{}}}]"#,
    )
    .unwrap()
}

fn parse_with(cfg: Config, tools: &Tools, s: &str) -> ParseResult {
    every_cut(&|| super::super::boxed(&DIALECT, cfg, tools), s.as_bytes()).0
}

fn parse_cfg(cfg: Config, s: &str) -> ParseResult {
    parse_with(cfg, &Tools::default(), s)
}

fn parse(s: &str) -> ParseResult {
    parse_cfg(config(), s)
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

fn names(r: &ParseResult) -> Vec<&str> {
    r.calls.iter().map(|c| c.name.as_str()).collect()
}

fn weather() -> String {
    format!("{CALL_OPEN}call:get_weather{{city:{Q}Paris{Q},days:3}}{CALL_CLOSE}")
}

#[test]
fn reasoning_text_and_a_call_in_order() {
    let t = format!(
        "<|channel>thought\nNeed weather.<channel|>Let me check.{}{TOOL_RESPONSE}",
        weather()
    );
    let r = parse(&t);
    assert_eq!(r.reasoning_text(), "Need weather.");
    assert_eq!(r.text, "Let me check.");
    assert_eq!(names(&r), ["get_weather"]);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris", "days": 3}));
    assert_eq!(r.calls[0].id, None);
    assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
}

#[test]
fn calls_back_to_back_and_without_arguments() {
    let t = format!(
        "{}{CALL_OPEN}call:get_time{{}}{CALL_CLOSE}{}",
        weather(),
        weather()
    );
    let r = parse(&t);
    assert_eq!(names(&r), ["get_weather", "get_time", "get_weather"]);
    assert_eq!(r.calls[1].arguments, json!({}));
    assert_eq!(r.text, "");
    assert!(r.errors.is_empty() && r.warnings.is_empty());
}

#[test]
fn values_are_typed_by_their_syntax() {
    let t = format!(
        "{CALL_OPEN}call:f{{s:{Q}42{Q},i:42,n:-1.5e3,b:false,z:null,a:[1,{Q}x{Q},[]],o:{{k:true}}}}{CALL_CLOSE}"
    );
    let r = parse(&t);
    assert_eq!(
        r.calls[0].arguments,
        json!({"s": "42", "i": 42, "n": -1500.0, "b": false, "z": null, "a": [1, "x", []], "o": {"k": true}})
    );
    assert!(r.warnings.is_empty());
}

#[test]
fn inside_a_string_only_the_quote_is_structure() {
    let v = "a}b,c:{[<tool_call|><|tool_call>call:x{}<turn|><|channel>\"\\ 漢字😀\n";
    let t = format!("{CALL_OPEN}call:write{{content:{Q}{v}{Q}}}{CALL_CLOSE}");
    let r = parse(&t);
    assert_eq!(r.calls[0].arguments, json!({ "content": v }));
    assert_eq!(r.reasoning_text(), "");
    assert!(r.errors.is_empty() && r.warnings.is_empty());
}

#[test]
fn text_is_byte_exact_and_whitespace_beside_calls_is_dropped() {
    let t = format!("  Hi \n{}\n\n{} Done. \n", weather(), weather());
    let r = parse(&t);
    assert_eq!(r.text, "  Hi \n Done. \n");
    assert_eq!(r.calls.len(), 2);
    // Without calls, whitespace is the answer.
    assert_eq!(parse(" \n").text, " \n");
    // Whitespace between the arguments and the end marker is no text either.
    let t = format!("{CALL_OPEN}call:f{{}} \n{CALL_CLOSE}\n");
    let r = parse(&t);
    assert_eq!((r.text.as_str(), r.calls.len()), ("", 1));
    assert!(r.warnings.is_empty());
}

#[test]
fn a_missing_call_end_is_recovered_with_a_warning_or_an_error() {
    for after in [
        "",
        TOOL_RESPONSE,
        TURN_END,
        EOS,
        " and more",
        "<|tool_call>call:g{}<tool_call|>",
    ] {
        let t = format!("{CALL_OPEN}call:f{{a:1}}{after}");
        let r = parse(&t);
        assert_eq!(names(&r)[0], "f", "{after:?}");
        assert_eq!(r.calls[0].arguments, json!({"a": 1}));
        assert_eq!(warnings(&r)[0], "missing_call_end", "{after:?}");
        let strict = Config {
            missing_call_end: false,
            ..config()
        };
        let r = parse_cfg(strict, &t);
        assert!(r.calls.iter().all(|c| c.name != "f"), "{after:?}");
        let kind = if after.is_empty() {
            ErrorKind::Unterminated
        } else {
            ErrorKind::MalformedMarkup
        };
        assert_eq!(r.error_kinds(), [kind], "{after:?}");
    }
    assert_eq!(
        parse(&format!("{CALL_OPEN}call:f{{}} and more")).text,
        " and more"
    );
}

#[test]
fn stop_tokens_end_the_output() {
    let r = parse(&format!("{}{TOOL_RESPONSE}", weather()));
    assert!(r.errors.is_empty() && r.warnings.is_empty());
    let r = parse(&format!("Paris.{TURN_END}"));
    assert_eq!(r.text, "Paris.");
    let r = parse(&format!(
        "{}{TOOL_RESPONSE}response:get_weather{{t:15}}",
        weather()
    ));
    assert_eq!((r.text.as_str(), r.calls.len()), ("", 1));
    assert_eq!(warnings(&r), ["text_after_stop"]);
    let strict = Config {
        text_after_stop: false,
        ..config()
    };
    let r = parse_cfg(strict, &format!("a{EOS}b"));
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.text, "a");
}

#[test]
fn stray_markers_are_dropped_with_a_warning() {
    let r = parse(&format!("a{CALL_CLOSE}b{Q}c"));
    assert_eq!(r.text, "abc");
    assert_eq!(warnings(&r), ["stray_marker", "stray_marker"]);
    let strict = Config {
        stray_marker: false,
        ..config()
    };
    assert_eq!(
        parse_cfg(strict, &format!("a{CALL_CLOSE}")).error_kinds(),
        [ErrorKind::MalformedMarkup]
    );
}

#[test]
fn header_variants_are_options() {
    let paren = format!("{CALL_OPEN}call:f(a:1,b:{{c:2}}){CALL_CLOSE}");
    let r = parse(&paren);
    assert_eq!(r.calls[0].arguments, json!({"a": 1, "b": {"c": 2}}));
    assert_eq!(warnings(&r), ["paren_call"]);
    let bare = format!("{CALL_OPEN}:f{{a:1}}{CALL_CLOSE}");
    let r = parse(&bare);
    assert_eq!(names(&r), ["f"]);
    assert_eq!(warnings(&r), ["missing_call_prefix"]);
    let strict = Config {
        paren_call: false,
        missing_call_prefix: false,
        ..config()
    };
    for t in [&paren, &bare] {
        let r = parse_cfg(strict, &format!("{t}x{}", weather()));
        assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup], "{t}");
        // The failed call's arguments are read to their end: the text and the next call stay.
        assert_eq!((r.text.as_str(), names(&r)), ("x", vec!["get_weather"]));
    }
}

#[test]
fn unquoted_words_and_python_literals_are_read_with_a_warning() {
    let t = format!("{CALL_OPEN}call:f{{unit:celsius,n:None,t:True}}{CALL_CLOSE}");
    let r = parse(&t);
    assert_eq!(
        r.calls[0].arguments,
        json!({"unit": "celsius", "n": null, "t": true})
    );
    assert_eq!(
        warnings(&r),
        ["unquoted_string", "python_literal", "python_literal"]
    );
    let strict = Config {
        unquoted_string: false,
        ..config()
    };
    let r = parse_cfg(strict, &format!("{t}{}", weather()));
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    assert_eq!(names(&r), ["get_weather"]);
}

#[test]
fn a_bad_call_fails_alone() {
    for bad in [
        format!("{CALL_OPEN}call:{{a:1}}{CALL_CLOSE}"),
        format!("{CALL_OPEN}call:get weather{{a:1}}{CALL_CLOSE}"),
        format!("{CALL_OPEN}get_weather{{a:1}}{CALL_CLOSE}"),
        format!("{CALL_OPEN}call:f{{a:1,}}{CALL_CLOSE}"),
        format!("{CALL_OPEN}call:f{{a:1{CALL_CLOSE}"),
        format!("{CALL_OPEN}call:f{CALL_CLOSE}"),
        format!("{CALL_OPEN}call:f{{a={Q}x{Q}}}{CALL_CLOSE}"),
        format!("{CALL_OPEN}call:f{{a:{Q}x{Q}{CALL_CLOSE}"),
    ] {
        let r = parse(&format!("{bad}ok{}", weather()));
        assert_eq!(r.errors.len(), 1, "{bad}: {r:?}");
        assert_eq!(names(&r), ["get_weather"], "{bad}");
        assert_eq!(r.text, "ok", "{bad}");
    }
    let r = parse(&format!("{CALL_OPEN}call:{{}}{CALL_CLOSE}"));
    assert_eq!(r.error_kinds(), [ErrorKind::MissingName]);
}

#[test]
fn an_early_end_is_unterminated() {
    for t in [
        format!("{CALL_OPEN}cal"),
        format!("{CALL_OPEN}call:f{{a:{Q}long"),
        format!("{CALL_OPEN}call:f{{a:[1,"),
        format!("{CALL_OPEN}call:f{{a:1"),
    ] {
        let r = parse(&t);
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated], "{t}");
        assert!(r.calls.is_empty());
    }
}

#[test]
fn limits_give_limit_exceeded() {
    let deep = format!(
        "{CALL_OPEN}call:f{{a:{}1{}}}{CALL_CLOSE}ok",
        "[".repeat(130),
        "]".repeat(130)
    );
    let r = parse_cfg(config(), &deep);
    assert_eq!(r.error_kinds(), [ErrorKind::LimitExceeded]);
    assert_eq!(r.text, "ok");
    let small = Config {
        max_args_bytes: 10,
        max_header_bytes: 8,
        ..config()
    };
    let r = parse_cfg(
        small,
        &format!("{CALL_OPEN}call:f{{a:{Q}0123456789{Q}}}{CALL_CLOSE}ok"),
    );
    assert_eq!(r.error_kinds(), [ErrorKind::LimitExceeded]);
    assert_eq!(r.text, "ok");
    let r = parse_cfg(
        small,
        &format!("{CALL_OPEN}call:longname{{}}{CALL_CLOSE}ok"),
    );
    assert_eq!(r.error_kinds(), [ErrorKind::LimitExceeded]);
    assert_eq!(r.text, "ok");
}

#[test]
fn invalid_utf8_drops_the_call_it_falls_in() {
    let mut t = format!("{CALL_OPEN}call:f{{a:{Q}x").into_bytes();
    t.extend_from_slice(b"\xff");
    t.extend_from_slice(format!("y{Q}}}{CALL_CLOSE}{}", weather()).as_bytes());
    let r = every_cut(
        &|| super::super::boxed(&DIALECT, config(), &Tools::default()),
        &t,
    )
    .0;
    assert_eq!(r.error_kinds(), [ErrorKind::InvalidUtf8]);
    assert_eq!(names(&r), ["get_weather"]);
    assert!(r.warnings.is_empty());
}

#[test]
fn the_schema_only_notes() {
    let t = format!(
        "{CALL_OPEN}call:get_weather{{city:{Q}Paris{Q},days:{Q}3{Q}}}{CALL_CLOSE}{CALL_OPEN}call:nope{{}}{CALL_CLOSE}"
    );
    let r = parse_with(config(), &tools(), &t);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris", "days": "3"}));
    assert_eq!(warnings(&r), ["schema_type_mismatch", "unknown_tool"]);
    assert_eq!(names(&r), ["get_weather", "nope"]);
}

#[test]
fn reasoning_channels() {
    // A bare channel, and a stray empty one after the answer.
    let r = parse("<|channel>plan<channel|>Hi<|channel>thought\n<channel|>");
    assert_eq!((r.reasoning_text(), r.text.as_str()), ("plan", "Hi"));
    assert!(r.warnings.is_empty());
    // A stray close is dropped.
    let r = parse("Hi<channel|>!");
    assert_eq!(r.text, "Hi!");
    assert_eq!(warnings(&r), ["stray_reasoning_end"]);
    // The template opened the channel in the prompt.
    let inside = Config {
        reasoning: reasoning::Config {
            starts_inside: true,
            ..REASONING.config()
        },
        ..config()
    };
    let r = parse_cfg(inside, &format!("plan<channel|>{}", weather()));
    assert_eq!((r.reasoning_text(), r.calls.len()), ("plan", 1));
    // A call opened inside a thought ends it, noted.
    let r = parse(&format!("<|channel>thought\nplan{}", weather()));
    assert_eq!((r.reasoning_text(), r.calls.len()), ("plan", 1));
    assert_eq!(warnings(&r), ["implicit_reasoning_end"]);
    // Markers inside reasoning are reasoning.
    let r = parse(&format!("<|channel>thought\nmaybe {Q}x{Q}<channel|>"));
    assert_eq!(r.reasoning_text(), format!("maybe {Q}x{Q}"));
}

fn fold(input: &[u8], cuts: &[usize]) -> ParseResult {
    let mut p = new_parser(&Tools::default());
    fold_cut(p.as_mut(), input, cuts)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn rendered_calls_parse_back_whole_and_in_cycling_small_chunks(
        text in "[a-zA-Z .<|>{}\"\n漢😀]{0,12}",
        calls in proptest::collection::vec(arb_call(Just(None), "[a-z <>|{}\\[\\],:\"\\\\\n漢😀]{0,10}"), 0..3),
        sizes in proptest::collection::vec(1usize..8, 1..5),
    ) {
        let Ok(bytes) = render(&text, &calls, &Tools::default()) else {
            return Ok(());
        };
        let whole = fold(&bytes, &[]);
        prop_assert!(whole.errors.is_empty(), "{:?}", whole.errors);
        prop_assert_eq!(&whole.text, &text);
        prop_assert_eq!(&whole.calls, &calls);
        let mut p = new_parser(&Tools::default());
        let cut = ParseResult::fold(&run_chunks(p.as_mut(), cycled_chunks(&bytes, &sizes)));
        prop_assert_eq!(cut, whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_are_split_invariant(
        bytes in proptest::collection::vec(prop_oneof![
            Just(&b"<|tool_call>"[..]), Just(&b"<tool_call|>"[..]), Just(&b"<|\"|>"[..]),
            Just(&b"call:f{"[..]), Just(&b"<|channel>"[..]), Just(&b"<channel|>"[..]),
            Just(&b"thought\n"[..]), Just(&b"<|tool_response>"[..]), Just(&b"a:"[..]),
            Just(&b"{"[..]), Just(&b"}"[..]), Just(&b","[..]), Just(&b"["[..]), Just(&b"("[..]),
            Just(&b" "[..]), Just(&b"\xe6\xbc"[..]), Just(&b"<|"[..]), Just(&b"1"[..]),
        ], 0..24),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let bytes: Vec<u8> = bytes.concat();
        let whole = fold(&bytes, &[]);
        prop_assert_eq!(fold(&bytes, &cuts), whole.clone());
        let w: Vec<String> = whole.warnings.iter().map(|w| w.kind.clone()).collect();
        let c = fold(&bytes, &cuts);
        let cw: Vec<String> = c.warnings.iter().map(|w| w.kind.clone()).collect();
        prop_assert_eq!(cw, w);
    }
}

#[test]
fn the_renderer_writes_the_template_and_refuses_what_would_not_parse_back() {
    let call = |name: &str, args: serde_json::Value| crate::event::ToolCall {
        name: name.into(),
        id: None,
        server: None,
        arguments: args,
    };
    let out = render(
        "Done.",
        &[call(
            "f",
            json!({"b": [1, "x"], "A": {"k": null}, "a": true, "my key": 1.5}),
        )],
        &Tools::default(),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "{CALL_OPEN}call:f{{A:{{k:null}},a:true,b:[1,{Q}x{Q}],my key:1.5}}{CALL_CLOSE}Done.{TOOL_RESPONSE}"
        )
    );
    // A key that cannot be bare is quoted.
    let out = render("", &[call("f", json!({"a:b": 1}))], &Tools::default()).unwrap();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains(&format!("{Q}a:b{Q}:1"))
    );
    for (text, c) in [
        ("a<tool_call|>", call("f", json!({}))),
        ("<|channel>", call("f", json!({}))),
        (" ", call("f", json!({}))),
        ("", call("get weather", json!({}))),
        ("", call("f", json!({"a": Q}))),
        ("", call("f", json!([1]))),
        // Beyond the default limits the parser would answer limit_exceeded.
        ("", call(&"f".repeat(1100), json!({}))),
        ("", call("f", json!({ "k".repeat(1025): 1 }))),
    ] {
        assert!(render(text, &[c], &Tools::default()).is_err(), "{text:?}");
    }
    let with_id = crate::event::ToolCall {
        id: Some("0".into()),
        ..call("f", json!({}))
    };
    assert!(render("", &[with_id], &Tools::default()).is_err());
    assert_eq!(render("Hi", &[], &Tools::default()).unwrap(), b"Hi");
}
