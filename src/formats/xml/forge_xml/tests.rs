use super::*;
use crate::event::ErrorKind as K;
use crate::event::ParseResult;
use proptest::prelude::*;
use serde_json::json;

fn run(cfg: &Config, tools: &Tools, chunks: &[&[u8]]) -> Vec<Event> {
    let mut p = Parser::new(cfg.clone(), tools);
    let mut out = Vec::new();
    for c in chunks {
        p.feed(c, &mut out);
    }
    p.finish(&mut out);
    out
}

/// Checks the delta contract on one event list.
fn contract(evs: &[Event]) {
    let mut next = 0usize;
    let mut open: Option<usize> = None;
    let mut args = String::new();
    for e in evs {
        match e {
            Event::CallStart { index, .. } => {
                assert_eq!(*index, next, "indices in order");
                next += 1;
                open = Some(*index);
                args.clear();
            }
            Event::ArgsDelta { index, json } => {
                assert_eq!(open, Some(*index), "delta inside its call");
                args.push_str(json);
            }
            Event::CallEnd { index } => {
                assert_eq!(open, Some(*index));
                assert!(
                    serde_json::from_str::<Value>(&args).is_ok(),
                    "args JSON: {args}"
                );
                open = None;
            }
            _ => {}
        }
    }
}

/// Parses whole, byte by byte and at every single cut (sampled on long inputs); all must fold
/// to the same result.
fn check_cfg(cfg: &Config, tools: &Tools, input: &str) -> ParseResult {
    let b = input.as_bytes();
    let whole = run(cfg, tools, &[b]);
    contract(&whole);
    let want = ParseResult::fold(&whole);
    let bytes: Vec<&[u8]> = b.chunks(1).collect();
    let ev = run(cfg, tools, &bytes);
    contract(&ev);
    assert_eq!(ParseResult::fold(&ev), want, "byte by byte: {input:?}");
    let step = (b.len() / 200).max(1);
    for cut in (1..b.len()).step_by(step) {
        let ev = run(cfg, tools, &[&b[..cut], &b[cut..]]);
        assert_eq!(ParseResult::fold(&ev), want, "cut at {cut}: {input:?}");
    }
    want
}

fn check(input: &str) -> ParseResult {
    check_cfg(&Config::default(), &Tools::default(), input)
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        name: name.into(),
        id: None,
        server: Some("local".into()),
        arguments: args,
    }
}

fn tool(args: &str) -> String {
    format!("<tool><tool_name>t</tool_name><arguments>{args}</arguments></tool>")
}

fn kinds(r: &ParseResult) -> Vec<K> {
    r.error_kinds()
}

fn warnings(r: &ParseResult) -> Vec<String> {
    r.warnings.iter().map(|w| w.kind.clone()).collect()
}

#[test]
fn seed_call_in_prose() {
    let r = check(
        "Writing it.\n<tool>\n<server_name>local</server_name>\n<tool_name>write_to_file</tool_name>\n<arguments>\n  <path>src/main.go</path>\n  <content><![CDATA[package main\n\nfunc main() { fmt.Println(\"<ok>\") }]]></content>\n</arguments>\n</tool>\nDone.",
    );
    assert!(r.is_success());
    assert_eq!(r.text, "Writing it.\n\nDone.");
    assert_eq!(
        r.calls,
        vec![call(
            "write_to_file",
            json!({"path": "src/main.go", "content": "package main\n\nfunc main() { fmt.Println(\"<ok>\") }"})
        )]
    );
}

#[test]
fn server_defaults_to_local_and_names_are_trimmed() {
    let r = check("<tool>\n<tool_name>\n  read_file \n</tool_name></tool>");
    assert_eq!(r.calls, vec![call("read_file", json!({}))]);
    let r =
        check("<tool><server_name> mcp </server_name><tool_name>x</tool_name><arguments/></tool>");
    assert_eq!(r.calls[0].server.as_deref(), Some("mcp"));
}

#[test]
fn missing_or_empty_tool_name() {
    let r =
        check("<tool><server_name>local</server_name><arguments><a>1</a></arguments></tool>after");
    assert_eq!(kinds(&r), vec![K::MissingName]);
    assert_eq!(r.text, "after");
    let r = check("<tool><tool_name>  </tool_name></tool>");
    assert_eq!(kinds(&r), vec![K::MissingName]);
}

#[test]
fn a_tool_tag_without_call_children_is_prose() {
    let r = check("Use the <tool> tag. <tool>x</tool> and <tool/>, <tool>\n<b>c</b></tool>");
    assert!(r.is_success());
    assert!(r.calls.is_empty());
    assert_eq!(
        r.text,
        "Use the <tool> tag. <tool>x</tool> and <tool/>, <tool>\n<b>c</b></tool>"
    );
    // A mention before a real call does not hide the call.
    let r = check("see <tool> then <tool><tool_name>a</tool_name></tool>");
    assert_eq!(r.text, "see <tool> then ");
    assert_eq!(r.calls, vec![call("a", json!({}))]);
}

#[test]
fn prose_is_literal() {
    let r = check("a &amp; b < c ]]> <![CDATA[x]]> <!-- c --> <?p?> <br> &nbsp; AT&T");
    assert_eq!(
        r.text,
        "a &amp; b < c ]]> <![CDATA[x]]> <!-- c --> <?p?> <br> &nbsp; AT&T"
    );
    assert!(r.is_success() && r.warnings.is_empty());
}

#[test]
fn nested_elements_are_objects_and_repeats_are_arrays() {
    let r = check(&tool(
        "<path>src</path><exclude>a</exclude><exclude>b</exclude><exclude>c</exclude>\
         <edits><edit><search>x</search><replace>y</replace></edit>\
         <edit><search>1</search><replace>2</replace></edit></edits><one><item>z</item></one>",
    ));
    assert_eq!(
        r.calls[0].arguments,
        json!({"path": "src", "exclude": ["a", "b", "c"],
               "edits": {"edit": [{"search": "x", "replace": "y"}, {"search": 1, "replace": 2}]},
               "one": {"item": "z"}})
    );
}

#[test]
fn duplicate_scalar_elements_become_an_array() {
    let r = check(&tool("<path>a</path><path>b</path>"));
    assert_eq!(r.calls[0].arguments, json!({"path": ["a", "b"]}));
}

#[test]
fn array_schema_makes_a_single_element_an_array() {
    let tools = Tools::from_json(
        r#"[{"name":"t","parameters":{"type":"object","properties":{
            "exclude":{"type":"array","items":{"type":"string"}},
            "edits":{"type":"array","items":{"type":"object","properties":{"tags":{"type":"array"}}}}}}}]"#,
    )
    .unwrap();
    let r = check_cfg(
        &Config::default(),
        &tools,
        &tool("<exclude>a</exclude><edits><tags>x</tags></edits><other>o</other>"),
    );
    assert_eq!(
        r.calls[0].arguments,
        json!({"exclude": ["a"], "edits": [{"tags": ["x"]}], "other": "o"})
    );
}

#[test]
fn cdata_split_and_tool_close_inside_cdata() {
    let r = check(&tool(
        "<c><![CDATA[a]]]]><![CDATA[>b]]></c><d><![CDATA[echo </tool> done]]></d>",
    ));
    assert_eq!(
        r.calls[0].arguments,
        json!({"c": "a]]>b", "d": "echo </tool> done"})
    );
    let r = check(&tool("<c>pre <![CDATA[<mid>]]> post</c>"));
    assert_eq!(r.calls[0].arguments, json!({"c": "pre <mid> post"}));
}

#[test]
fn entities_are_primary() {
    let r = check(&tool("<c>&lt;/tool&gt; a &amp;&amp; b &#x41;&#66;</c>"));
    assert_eq!(r.calls[0].arguments, json!({"c": "</tool> a && b AB"}));
}

#[test]
fn unknown_entities_and_bare_ampersands() {
    let r = check(&tool("<c>a&nbsp;b && c</c>"));
    assert_eq!(r.calls[0].arguments, json!({"c": "a&nbsp;b && c"}));
    assert_eq!(
        warnings(&r),
        vec![
            "allow_unknown_entities",
            "allow_bare_ampersand",
            "allow_bare_ampersand"
        ]
    );
    let strict = Config {
        allow_bare_ampersand: false,
        allow_unknown_entities: false,
        ..Config::default()
    };
    let r = check_cfg(&strict, &Tools::default(), &tool("<c>a & b</c>"));
    assert_eq!(kinds(&r), vec![K::MalformedMarkup]);
    let r = check_cfg(&strict, &Tools::default(), &tool("<c>&nbsp;</c>"));
    assert_eq!(kinds(&r), vec![K::MalformedMarkup]);
    let r = check(&tool("<c>&#0;</c>"));
    assert_eq!(kinds(&r), vec![K::MalformedMarkup]);
}

#[test]
fn a_forbidden_character_is_malformed_raw_or_referenced() {
    for text in [
        "<c>a&#0;b</c>",
        "<c>a\0b</c>",
        "<c>a&#1;b</c>",
        "<c>a\u{1}b</c>",
        "<c>\u{FFFF}</c>",
        "<c><d>\0</d></c>",
    ] {
        let r = check(&tool(text));
        assert_eq!(kinds(&r), vec![K::MalformedMarkup], "{text:?}");
        assert!(r.calls.is_empty(), "{text:?}");
    }
    // Tab, line feed and carriage return are characters like any other.
    let r = check(&tool("<c>a\tb\r\nc</c>"));
    assert!(kinds(&r).is_empty(), "{:?}", r.errors);
}

#[test]
fn bare_lt_in_arguments_is_malformed_and_the_call_is_skipped() {
    let r = check(&format!("{} after", tool("<c>if a < b</c>")));
    assert_eq!(kinds(&r), vec![K::MalformedMarkup]);
    assert!(r.calls.is_empty());
    assert_eq!(r.text, " after");
    let r = check(&tool("<c>x ]]> y</c>"));
    assert_eq!(kinds(&r), vec![K::MalformedMarkup]);
}

#[test]
fn attributes_are_malformed_unless_ignored() {
    let r = check("<tool id=\"1\"><tool_name>t</tool_name></tool>");
    assert_eq!(kinds(&r), vec![K::MalformedMarkup]);
    let r = check(&tool("<c x='1'>v</c>"));
    assert_eq!(kinds(&r), vec![K::MalformedMarkup]);
    let lenient = Config {
        ignore_attributes: true,
        ..Config::default()
    };
    let r = check_cfg(
        &lenient,
        &Tools::default(),
        "<tool id=\"1\"><tool_name>t</tool_name><arguments><c x='1'>v</c></arguments></tool>",
    );
    assert_eq!(r.calls, vec![call("t", json!({"c": "v"}))]);
    assert_eq!(warnings(&r), vec!["ignore_attributes", "ignore_attributes"]);
}

#[test]
fn comments_and_pis_in_calls_are_skipped() {
    let r = check(&tool(
        "<!-- note --><c>a<!-- x -->b</c><?pi x?><n>4<!-- c -->2</n>",
    ));
    assert_eq!(r.calls[0].arguments, json!({"c": "ab", "n": 42}));
    let r = check(&tool("<!DOCTYPE x><c>a</c>"));
    assert_eq!(kinds(&r), vec![K::MalformedMarkup]);
}

#[test]
fn two_calls_and_text_between_and_after() {
    let r = check(&format!("a{}b{}c", tool("<x>1</x>"), tool("<y>2</y>")));
    assert_eq!(r.text, "abc");
    assert_eq!(
        r.calls,
        vec![call("t", json!({"x": 1})), call("t", json!({"y": 2}))]
    );
}

#[test]
fn unterminated_calls() {
    for s in [
        "<tool><tool_name>t</tool_name><arguments><c>abc",
        "<tool><tool_name>t</tool_name><arguments><c><![CDATA[abc",
        "<tool><tool_name>t",
        "<tool><tool_name>t</tool_name></tool_na",
    ] {
        let r = check(s);
        assert_eq!(kinds(&r), vec![K::Unterminated], "{s}");
        assert!(r.calls.is_empty());
    }
    // Only whitespace after <tool>: a mention, kept as text.
    let r = check("x <tool>\n");
    assert_eq!(r.text, "x <tool>\n");
    assert!(r.is_success());
}

#[test]
fn mixed_content_and_structure_errors() {
    for args in [
        "<a>text<b>1</b></a>",
        "<a><b>1</b>text</a>",
        "<a><![CDATA[x]]><b>1</b></a>",
        "<a>1</b>",
        "loose text",
    ] {
        let r = check(&tool(args));
        assert_eq!(kinds(&r), vec![K::MalformedMarkup], "{args}");
    }
    for s in [
        "<tool><tool_name>t</tool_name>junk</tool>",
        "<tool><tool_name>t</tool_name><id>1</id></tool>",
        "<tool><tool_name>t</tool_name><tool_name>u</tool_name></tool>",
        "<tool><tool_name>t</tool_name><arguments/><arguments/></tool>",
        "<tool><tool_name>t<b/></tool_name></tool>",
    ] {
        let r = check(s);
        assert_eq!(kinds(&r), vec![K::MalformedMarkup], "{s}");
    }
}

#[test]
fn whitespace_around_children_is_ignored_and_empty_arguments() {
    let r = check(&tool("\n  <a>\n    <b>1</b>\n  </a>\n"));
    assert_eq!(r.calls[0].arguments, json!({"a": {"b": 1}}));
    let r = check("<tool><tool_name>t</tool_name><arguments/></tool>");
    assert_eq!(r.calls[0].arguments, json!({}));
    let r = check(&tool("  "));
    assert_eq!(r.calls[0].arguments, json!({}));
    let r = check(&tool("<e/><f></f>"));
    assert_eq!(r.calls[0].arguments, json!({"e": "", "f": ""}));
}

#[test]
fn limits() {
    let deep = Config {
        max_depth: 4,
        ..Config::default()
    };
    let r = check_cfg(&deep, &Tools::default(), &tool("<a><b><c>1</c></b></a>"));
    assert_eq!(kinds(&r), vec![K::LimitExceeded]);
    let small = Config {
        max_call_bytes: 50,
        ..Config::default()
    };
    let r = check_cfg(
        &small,
        &Tools::default(),
        &format!("{}ok", tool(&"<a>x</a>".repeat(20))),
    );
    assert_eq!(kinds(&r), vec![K::LimitExceeded]);
    assert_eq!(r.text, "ok");
    // Prose is not limited: many unclosed tags never reach the depth limit.
    let r = check_cfg(
        &deep,
        &Tools::default(),
        &format!("{}{}", "<br>".repeat(10), tool("")),
    );
    assert_eq!(r.calls.len(), 1);
}

#[test]
fn invalid_utf8_inside_a_call_fails_it() {
    let mut b = b"<tool><tool_name>t</tool_name><arguments><c>a".to_vec();
    b.push(0xff);
    b.extend_from_slice(b"b</c></arguments></tool>z\xff");
    let ev = run(&Config::default(), &Tools::default(), &[&b]);
    let r = ParseResult::fold(&ev);
    assert_eq!(kinds(&r), vec![K::InvalidUtf8, K::InvalidUtf8]);
    assert!(r.calls.is_empty());
    assert_eq!(r.text, "z\u{FFFD}");
}

#[test]
fn a_session_restarts_indices_per_turn() {
    let mut p = Parser::new(Config::default(), &Tools::default());
    let mut out = Vec::new();
    p.feed(tool("").as_bytes(), &mut out);
    p.finish(&mut out);
    p.feed(b"<tool><tool_name>t", &mut out);
    p.finish(&mut out);
    p.feed(tool("").as_bytes(), &mut out);
    p.finish(&mut out);
    let starts: Vec<usize> = out
        .iter()
        .filter_map(|e| match e {
            Event::CallStart { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(starts, vec![0, 0]);
}

#[test]
fn large_cdata_streams() {
    let body = "fn main() { println!(\"]]\"); } // <tool> & </tool>\n".repeat(200_000);
    let doc = tool(&format!("<content>{}</content>", cdata(&body)));
    assert!(doc.len() > 10_000_000);
    let chunks: Vec<&[u8]> = doc.as_bytes().chunks(4096).collect();
    let r = ParseResult::fold(&run(&Config::default(), &Tools::default(), &chunks));
    assert!(r.is_success());
    assert_eq!(
        r.calls[0].arguments["content"].as_str(),
        Some(body.as_str())
    );
    let small = &body[..200_000];
    let doc = tool(&format!("<content>{}</content>", cdata(small)));
    let chunks: Vec<&[u8]> = doc.as_bytes().chunks(4).collect();
    let r = ParseResult::fold(&run(&Config::default(), &Tools::default(), &chunks));
    assert_eq!(r.calls[0].arguments["content"].as_str(), Some(small));
}

// ---- typing table ----------------------------------------------------------------------------

#[derive(serde::Deserialize)]
struct Row {
    xml: String,
    json: Value,
    rule: String,
}

fn typing_rows() -> Vec<Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/forge_xml_typing.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn typing_table_rows_parse_as_stated() {
    let rows = typing_rows();
    assert!(rows.len() >= 30);
    for row in rows {
        let doc = format!(
            "<tool><tool_name>t</tool_name><arguments><v>{}</v></arguments></tool>",
            row.xml
        );
        let r = check(&doc);
        assert!(r.is_success(), "{}: {:?}", row.rule, r.errors);
        let got = &r.calls[0].arguments["v"];
        assert!(
            crate::event::json_eq(got, &row.json) && got.is_number() == row.json.is_number(),
            "{}: {:?} gave {got}, want {}",
            row.rule,
            row.xml,
            row.json
        );
        if row.json.is_f64() {
            assert!(got.is_f64(), "{}: float expected", row.rule);
        }
        if !row.xml.contains('<') && !row.xml.contains('&') {
            assert!(
                crate::event::json_eq(&infer_scalar(&row.xml), &row.json),
                "{}",
                row.rule
            );
        }
    }
}

#[test]
fn markdown_typing_table_matches_the_json_rows() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/forge_xml.md");
    let md = std::fs::read_to_string(path).unwrap();
    let begin = md
        .find("<!-- typing-table:begin -->")
        .expect("begin marker");
    let end = md.find("<!-- typing-table:end -->").expect("end marker");
    let table: Vec<&str> = md[begin..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .collect();
    let rows = typing_rows();
    assert_eq!(table.len(), rows.len(), "row count");
    for (line, row) in table.iter().zip(&rows) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 3, "{line}");
        assert_eq!(cells[0], format!("`<v>{}</v>`", row.xml), "{line}");
        let j: Value = serde_json::from_str(cells[1].trim_matches('`')).unwrap();
        assert_eq!(j, row.json, "{line}");
        assert_eq!(cells[2], row.rule, "{line}");
    }
}

// ---- renderer --------------------------------------------------------------------------------

fn roundtrip(text: &str, calls: &[ToolCall], tools: &Tools) {
    let out = render(text, calls, tools).unwrap();
    let r = check_cfg(
        &Config::default(),
        tools,
        std::str::from_utf8(&out).unwrap(),
    );
    assert!(r.is_success());
    assert_eq!(r.text, text);
    assert_eq!(r.calls, calls);
}

#[test]
fn renderer_roundtrips_types_and_markup() {
    roundtrip(
        "Here:",
        &[call(
            "w",
            json!({"s": "true", "n": 7, "f": 1.5, "b": false, "z": null, "q": "\"x\"",
                   "pad": " 42 ", "ml": "a ]]> b </tool> <![CDATA[", "amp": "a && b < c",
                   "arr": ["x", "y"], "obj": {"k": [1, 2], "e": ""}, "nan": "NaN", "inf": "inf",
                   "big": "18446744073709551616", "u": "é😀"}),
        )],
        &Tools::default(),
    );
}

#[test]
fn renderer_refuses_what_cannot_be_represented() {
    let t = Tools::default();
    for args in [
        json!({"a": []}),
        json!({"a": ["one"]}),
        json!({"a": {}}),
        json!({"a b": 1}),
        json!({"a": [[1, 2], [3]]}),
    ] {
        assert!(
            render("", &[call("t", args.clone())], &t).is_err(),
            "{args}"
        );
    }
    let mut c = call("t", json!({}));
    c.server = None;
    assert!(render("", &[c], &t).is_err());
    let tools = Tools::from_json(
        r#"[{"name":"t","parameters":{"type":"object","properties":{"a":{"type":"array"}}}}]"#,
    )
    .unwrap();
    roundtrip("", &[call("t", json!({"a": ["one"]}))], &tools);
}

fn arb_string() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("a"),
            Just(" "),
            Just("<"),
            Just("&"),
            Just("]]>"),
            Just("]"),
            Just("\""),
            Just("'"),
            Just("é"),
            Just("😀"),
            Just("\n"),
            Just("1"),
            Just("true"),
            Just("</tool>"),
            Just("&amp;"),
        ],
        0..6,
    )
    .prop_map(|v| v.concat())
}

fn arb_value(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        arb_string().prop_map(Value::String),
        any::<i64>().prop_map(|i| json!(i)),
        // Binary fractions: serde_json (without float_roundtrip) misreads some long decimals.
        any::<i32>().prop_map(|i| json!(f64::from(i) / 8.0)),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => proptest::collection::vec(arb_value(0), 2..4).prop_map(Value::Array),
        1 => arb_object(depth - 1),
    ]
    .boxed()
}

fn arb_object(depth: u32) -> BoxedStrategy<Value> {
    proptest::collection::btree_map("[a-z_][a-z0-9_.-]{0,5}|é[a-z]{0,2}", arb_value(depth), 1..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn render_then_parse_under_random_cuts(
        text in "[a-z .,!\n]{0,12}",
        calls in proptest::collection::vec(
            ("[a-z_][a-z0-9_]{0,8}", "[a-z]{1,5}", arb_object(2)), 0..3),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|(name, server, arguments)| ToolCall { name, id: None, server: Some(server), arguments })
            .collect();
        let tools = Tools::default();
        let out = render(&text, &calls, &tools).map_err(TestCaseError::fail)?;
        let evs = run(&Config::default(), &tools, &crate::formats::core::testkit::pieces_at(&out, &cuts));
        contract(&evs);
        let r = ParseResult::fold(&evs);
        prop_assert!(r.is_success());
        prop_assert_eq!(r.text, text);
        prop_assert_eq!(r.calls, calls);
    }

    #[test]
    fn no_panic_and_split_invariant_on_arbitrary_bytes(
        pieces in proptest::collection::vec(prop_oneof![
            Just(b"<tool>".to_vec()), Just(b"</tool>".to_vec()), Just(b"<tool_name>t</tool_name>".to_vec()),
            Just(b"<arguments>".to_vec()), Just(b"</arguments>".to_vec()), Just(b"<a>".to_vec()),
            Just(b"</a>".to_vec()), Just(b"<![CDATA[".to_vec()), Just(b"]]>".to_vec()),
            Just(b"&amp;".to_vec()), Just(b"&".to_vec()), Just(b"<".to_vec()), Just(b"x".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..4),
        ], 0..16),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let b = pieces.concat();
        let whole = ParseResult::fold(&run(&Config::default(), &Tools::default(), &[&b]));
        let evs = run(&Config::default(), &Tools::default(), &crate::formats::core::testkit::pieces_at(&b, &cuts));
        contract(&evs);
        prop_assert_eq!(ParseResult::fold(&evs), whole);
    }
}

// ---- corpus (until the harness runs it) -----------------------------------------------------

#[test]
fn corpus_cases_meet_their_expectations() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/forge_xml");
    let tools =
        Tools::from_json(&std::fs::read_to_string(format!("{dir}/tools.json")).unwrap()).unwrap();
    let mut n_cases = 0;
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    for f in names.iter().filter(|f| f.ends_with(".txt")) {
        let bytes = std::fs::read(format!("{dir}/{f}")).unwrap();
        let whole = ParseResult::fold(&run(&Config::default(), &tools, &[&bytes]));
        let step = (bytes.len() / 64).max(1);
        for cut in (1..bytes.len()).step_by(step) {
            let ev = run(&Config::default(), &tools, &[&bytes[..cut], &bytes[cut..]]);
            contract(&ev);
            assert_eq!(ParseResult::fold(&ev), whole, "{f} cut {cut}");
        }
        let exp_path = format!("{dir}/{}", f.replace(".txt", ".expect.json"));
        let Ok(exp) = std::fs::read_to_string(&exp_path) else {
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
        if let Some(w) = exp.get("warnings") {
            let w: Vec<String> = serde_json::from_value(w.clone()).unwrap();
            assert_eq!(warnings(&whole), w, "{f} warnings");
        }
        if f.starts_with("y_") {
            assert!(whole.is_success(), "{f}: {:?}", whole.errors);
            // y_ cases also roundtrip through the renderer.
            let out =
                render(&whole.text, &whole.calls, &tools).unwrap_or_else(|e| panic!("{f}: {e}"));
            let back = ParseResult::fold(&run(&Config::default(), &tools, &[&out]));
            assert_eq!(back, whole, "{f} roundtrip");
        } else {
            let kind = exp["error"]["kind"].as_str().unwrap();
            assert_eq!(
                whole.errors.first().map(|e| e.kind.as_str()),
                Some(kind),
                "{f}: {:?}",
                whole.errors
            );
        }
    }
    assert!(n_cases >= 30);
}

#[test]
fn text_escaping_matches_quick_xml_and_reads_back() {
    for s in ["", "plain", "a<b>&c\r\nd", "<<&&>>", "é\r€😀&amp;"] {
        assert_eq!(
            escape_text(s),
            quick_xml::escape::partial_escape(s),
            "{s:?}"
        );
    }
}

proptest! {
    #[test]
    fn text_escaping_agrees_with_quick_xml(s in "[a-z<>&\r\n\"' é😀]{0,40}") {
        prop_assert_eq!(escape_text(&s), quick_xml::escape::partial_escape(s.as_str()));
    }
}
