use super::*;
use crate::event::ErrorKind as K;
use crate::event::ParseResult;
use proptest::prelude::*;
use serde_json::json;

fn run(chunks: &[&[u8]]) -> Vec<Event> {
    let mut p = Parser::new(Config::default());
    let mut out = Vec::new();
    for c in chunks {
        p.feed(c, &mut out);
    }
    p.finish(&mut out);
    out
}

fn contract(evs: &[Event]) {
    let mut next = 0usize;
    let mut open: Option<usize> = None;
    let mut args = String::new();
    for e in evs {
        match e {
            Event::CallStart { index, .. } => {
                assert_eq!(*index, next);
                next += 1;
                open = Some(*index);
                args.clear();
            }
            Event::ArgsDelta { index, json } => {
                assert_eq!(open, Some(*index));
                args.push_str(json);
            }
            Event::CallEnd { index } => {
                assert_eq!(open, Some(*index));
                assert!(serde_json::from_str::<Value>(&args).is_ok());
                open = None;
            }
            _ => {}
        }
    }
}

/// Whole, byte by byte and every single cut must fold to the same result.
fn check(input: &str) -> ParseResult {
    let b = input.as_bytes();
    let whole = run(&[b]);
    contract(&whole);
    let want = ParseResult::fold(&whole);
    let bytes: Vec<&[u8]> = b.chunks(1).collect();
    let ev = run(&bytes);
    contract(&ev);
    assert_eq!(ParseResult::fold(&ev), want, "bytes: {input:?}");
    for cut in 1..b.len() {
        assert_eq!(
            ParseResult::fold(&run(&[&b[..cut], &b[cut..]])),
            want,
            "cut {cut}: {input:?}"
        );
    }
    want
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        name: name.into(),
        id: None,
        server: Some("local".into()),
        arguments: args,
    }
}

#[test]
fn canonical_call_in_prose() {
    let r = check(
        "Reading.\n<tool>{\"server_name\": \"local\", \"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a.go\", \"n\": [1, 2.5, null]}}</tool>\nDone.",
    );
    assert!(r.is_success());
    assert_eq!(r.text, "Reading.\n\nDone.");
    assert_eq!(
        r.calls,
        vec![call(
            "read_file",
            json!({"path": "a.go", "n": [1, 2.5, null]})
        )]
    );
}

#[test]
fn tool_close_inside_a_json_string_is_content() {
    let r = check(r#"<tool>{"tool_name":"w","arguments":{"c":"echo </tool> <b> done"}}</tool>"#);
    assert_eq!(
        r.calls,
        vec![call("w", json!({"c": "echo </tool> <b> done"}))]
    );
}

#[test]
fn whitespace_around_the_json_and_key_order() {
    let r =
        check("<tool>\n  {\"arguments\":{},\"tool_name\":\"t\",\"server_name\":\"mcp\"}\n</tool>");
    assert_eq!(r.calls[0].name, "t");
    assert_eq!(r.calls[0].server.as_deref(), Some("mcp"));
}

#[test]
fn defaults_server_and_arguments() {
    let r = check(r#"<tool>{"tool_name":"t"}</tool>"#);
    assert_eq!(r.calls, vec![call("t", json!({}))]);
}

#[test]
fn invalid_json_and_missing_names() {
    for (s, k) in [
        (
            r#"<tool>{"tool_name": "t", "arguments": {"a": }}</tool>x"#,
            K::InvalidJson,
        ),
        (
            r#"<tool>{"tool_name": "t", "arguments": {"a": 1}</tool>x"#,
            K::InvalidJson,
        ),
        (
            r#"<tool>{"tool_name": "t"} trailing</tool>x"#,
            K::InvalidJson,
        ),
        (
            r#"<tool>{"tool_name": "t", "arguments": [1]}</tool>x"#,
            K::InvalidJson,
        ),
        (
            r#"<tool>{"tool_name": "t", "arguments": "{}"}</tool>x"#,
            K::InvalidJson,
        ),
        (
            r#"<tool>{"tool_name": "t", "server_name": 1}</tool>x"#,
            K::InvalidJson,
        ),
        (
            "<tool>{\"tool_name\": \"t\", \"arguments\": {\"a\": \"l1\nl2\"}}</tool>x",
            K::InvalidJson,
        ),
        (
            r#"<tool>{"server_name": "local", "arguments": {}}</tool>x"#,
            K::MissingName,
        ),
        (r#"<tool>{"tool_name": ""}</tool>x"#, K::MissingName),
        (r#"<tool>{"tool_name": 5}</tool>x"#, K::MissingName),
        (r#"<tool>{"tool_name": "t"}<b></tool>x"#, K::MalformedMarkup),
    ] {
        let r = check(s);
        assert_eq!(r.error_kinds(), vec![k], "{s}");
        assert!(r.calls.is_empty(), "{s}");
        assert!(r.text.ends_with('x'), "{s}: {:?}", r.text);
    }
}

#[test]
fn unterminated() {
    for s in [
        r#"<tool>{"tool_name": "t", "argu"#,
        r#"<tool>{"tool_name": "t"}"#,
        r#"<tool>{"tool_name": "t"}  </to"#,
    ] {
        let r = check(s);
        assert_eq!(r.error_kinds(), vec![K::Unterminated], "{s}");
    }
}

#[test]
fn mentions_and_prose() {
    let r =
        check("Use <tool> tags. <tool></tool> <tool id=\"1\">{}</tool> a < b &amp; <![CDATA[x]]>");
    assert!(r.is_success() && r.calls.is_empty());
    assert_eq!(
        r.text,
        "Use <tool> tags. <tool></tool> <tool id=\"1\">{}</tool> a < b &amp; <![CDATA[x]]>"
    );
    let r = check("see <tool>\n<tool>{\"tool_name\":\"t\"}</tool>");
    assert_eq!(r.text, "see <tool>\n");
    assert_eq!(r.calls.len(), 1);
}

#[test]
fn two_calls_and_text_after() {
    let r = check(r#"a<tool>{"tool_name":"x"}</tool>b<tool>{"tool_name":"y"}</tool>c"#);
    assert_eq!(r.text, "abc");
    assert_eq!(r.calls, vec![call("x", json!({})), call("y", json!({}))]);
}

#[test]
fn limits() {
    let deep = format!(
        "<tool>{{\"tool_name\":\"t\",\"arguments\":{{\"a\":{}1{}}}}}</tool>",
        "[".repeat(200),
        "]".repeat(200)
    );
    let r = check(&deep);
    assert_eq!(r.error_kinds(), vec![K::LimitExceeded]);
}

#[test]
fn a_body_over_max_call_bytes_is_limit_exceeded_in_any_chunks() {
    let cfg = Config {
        max_call_bytes: 64,
        ..Config::default()
    };
    let body = format!(
        "<tool>{{\"tool_name\":\"t\",\"arguments\":{{\"c\":\"{}\"}}}}</tool> after",
        "x<y ".repeat(40)
    );
    // Valid, and with a JSON error past the limit.
    let bad = body.replace("\"}}</tool>", "\" x}}</tool>");
    for b in [body.as_bytes(), bad.as_bytes()] {
        for n in [b.len(), 7, 4, 1] {
            let mut p = Parser::new(cfg.clone());
            let evs = crate::formats::run_chunks(&mut p, b.chunks(n));
            let r = ParseResult::fold(&evs);
            assert_eq!(r.error_kinds(), vec![K::LimitExceeded], "chunks of {n}");
            assert!(r.calls.is_empty(), "chunks of {n}");
            assert_eq!(r.text, " after", "chunks of {n}");
        }
    }
}

#[test]
fn invalid_utf8_in_a_body_fails_the_call() {
    let r = ParseResult::fold(&run(&[
        b"<tool>{\"tool_name\":\"t\",\"a\":\"\xff\"}</tool>z",
    ]));
    assert_eq!(r.error_kinds(), vec![K::InvalidUtf8]);
    assert!(r.calls.is_empty());
    assert_eq!(r.text, "z");
}

#[test]
fn renderer_roundtrip_and_refusals() {
    let calls = vec![call("w", json!({"c": "a </tool> \"q\" \n é", "n": 1.5}))];
    let out = render("Hi", &calls, &Tools::default()).unwrap();
    let r = check(std::str::from_utf8(&out).unwrap());
    assert_eq!(r.text, "Hi");
    assert_eq!(r.calls, calls);
    // The body's keys in the wire's order, written at the rendering's exact size.
    let body = r#"{"server_name":"local","tool_name":"w","arguments":{"c":"a </tool> \"q\" \n é","n":1.5}}"#;
    assert_eq!(out, format!("Hi<tool>{body}</tool>").into_bytes());
    assert_eq!(out.capacity(), out.len());
    let mut c = call("w", json!({}));
    c.server = None;
    assert!(render("", &[c], &Tools::default()).is_err());
    assert!(render("", &[call("w", json!([1]))], &Tools::default()).is_err());
}

fn arb_value(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        "[a-z<>&\"'\\\\\n é😀/]{0,8}|</tool>".prop_map(Value::String),
        any::<i64>().prop_map(|i| json!(i)),
        any::<i32>().prop_map(|i| json!(f64::from(i) / 4.0)),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => proptest::collection::vec(arb_value(depth - 1), 0..3).prop_map(Value::Array),
        1 => proptest::collection::btree_map("[a-z<]{0,4}", arb_value(depth - 1), 0..3)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn render_then_parse_under_random_cuts(
        text in "[a-z .,!\n]{0,12}",
        calls in proptest::collection::vec(
            ("[a-z_<&é ]{1,8}", "[a-z]{0,5}",
             proptest::collection::btree_map("[a-z]{1,4}", arb_value(2), 0..4)), 0..3),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|(name, server, m)| ToolCall {
                name, id: None, server: Some(server), arguments: Value::Object(m.into_iter().collect()),
            })
            .collect();
        let out = render(&text, &calls, &Tools::default()).map_err(TestCaseError::fail)?;
        let evs = run(&crate::formats::core::testkit::pieces_at(&out, &cuts));
        contract(&evs);
        let r = ParseResult::fold(&evs);
        prop_assert!(r.is_success());
        prop_assert_eq!(r.text, text);
        prop_assert_eq!(r.calls, calls);
    }

    #[test]
    fn no_panic_and_split_invariant_on_arbitrary_bytes(
        pieces in proptest::collection::vec(prop_oneof![
            Just(b"<tool>".to_vec()), Just(b"</tool>".to_vec()), Just(b"{\"tool_name\":\"t\"".to_vec()),
            Just(b"{".to_vec()), Just(b"}".to_vec()), Just(b"\"".to_vec()), Just(b"<".to_vec()),
            Just(b",\"arguments\":{\"a\":[1,".to_vec()), Just(b" ".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..4),
        ], 0..16),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let b = pieces.concat();
        let whole = ParseResult::fold(&run(&[&b]));
        let evs = run(&crate::formats::core::testkit::pieces_at(&b, &cuts));
        contract(&evs);
        prop_assert_eq!(ParseResult::fold(&evs), whole);
    }
}

#[test]
fn an_array_body_is_a_failed_call_not_a_mention() {
    let r = check(r#"<tool>[{"tool_name":"t"}]</tool>x"#);
    assert_eq!(r.error_kinds(), vec![K::InvalidJson]);
    assert_eq!(r.text, "x");
}

#[test]
fn corpus_cases_meet_their_expectations() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/forge_json");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut n_cases = 0;
    for f in names.iter().filter(|f| f.ends_with(".txt")) {
        let bytes = std::fs::read(format!("{dir}/{f}")).unwrap();
        let whole = ParseResult::fold(&run(&[&bytes]));
        let step = (bytes.len() / 64).max(1);
        for cut in (1..bytes.len()).step_by(step) {
            let ev = run(&[&bytes[..cut], &bytes[cut..]]);
            contract(&ev);
            assert_eq!(ParseResult::fold(&ev), whole, "{f} cut {cut}");
        }
        let Ok(exp) =
            std::fs::read_to_string(format!("{dir}/{}", f.replace(".txt", ".expect.json")))
        else {
            continue;
        };
        n_cases += 1;
        let exp: Value = serde_json::from_str(&exp).unwrap();
        if let Some(t) = exp.get("text") {
            assert_eq!(whole.text, t.as_str().unwrap(), "{f} text");
        }
        if let Some(c) = exp.get("calls") {
            let calls: Vec<ToolCall> = serde_json::from_value(c.clone()).unwrap();
            assert_eq!(whole.calls, calls, "{f} calls");
        }
        if f.starts_with("y_") {
            assert!(whole.is_success(), "{f}: {:?}", whole.errors);
            let out = render(&whole.text, &whole.calls, &Tools::default())
                .unwrap_or_else(|e| panic!("{f}: {e}"));
            assert_eq!(ParseResult::fold(&run(&[&out])), whole, "{f} roundtrip");
        } else {
            assert_eq!(
                whole.errors.first().map(|e| e.kind.as_str()),
                exp["error"]["kind"].as_str(),
                "{f}: {:?}",
                whole.errors
            );
        }
    }
    assert!(n_cases >= 30);
}
