//! One test per rule of `specs/strict_xml.md`; every input is replayed at every cut.

use super::*;
use crate::event::ErrorKind as K;
use crate::event::ParseResult;
use crate::formats::core::testkit::{cycled_chunks, every_cut};
use crate::formats::run_chunks;
use proptest::prelude::*;
use serde_json::json;

fn tools() -> Tools {
    Tools::from_json(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/corpus/strict_xml/tools.json"
    )))
    .unwrap()
}

fn run_cfg(cfg: Config, input: &str) -> ParseResult {
    let t = tools();
    every_cut(&|| Box::new(Parser::new(cfg.clone(), &t)), input.as_bytes()).0
}

fn run(input: &str) -> ParseResult {
    run_cfg(Config::default(), input)
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        name: name.into(),
        id: None,
        server: None,
        arguments: args,
    }
}

fn ok(input: &str, text: &str, calls: Vec<ToolCall>) {
    let r = run(input);
    assert_eq!(r.error_kinds(), vec![], "{input:?}: {:?}", r.errors);
    assert_eq!(r.text, text, "{input:?}");
    assert_eq!(r.calls, calls, "{input:?}");
}

fn err(input: &str, kinds: &[K]) -> ParseResult {
    let r = run(input);
    assert_eq!(r.error_kinds(), kinds, "{input:?}: {:?}", r.errors);
    r
}

/// Runs turns through one session (whole and byte by byte); returns each turn's error kinds.
fn session(cfg: Config, turns: &[&str]) -> Vec<Vec<K>> {
    let t = tools();
    let go = |bytewise: bool| {
        let mut p = Parser::new(cfg.clone(), &t);
        turns
            .iter()
            .map(|s| {
                let b = s.as_bytes();
                let evs = if bytewise {
                    run_chunks(&mut p, b.chunks(1))
                } else {
                    run_chunks(&mut p, [b])
                };
                ParseResult::fold(&evs).error_kinds()
            })
            .collect::<Vec<_>>()
    };
    let whole = go(false);
    assert_eq!(whole, go(true));
    whole
}

const GOOD: &str = "<read_file>{\"path\":\"a.ts\"}</read_file>";
const BAD_SCHEMA: &str = "<read_file>{\"limit\":3}</read_file>";
const UNKNOWN: &str = "<delete_file>{\"path\":\"a\"}</delete_file>";

#[test]
fn s1_1_text_around_calls_is_kept() {
    ok(
        "Let me look.\n\n\n<read_file>\n{\"path\": \"src/main.ts\"}\n</read_file>\nThen I decide.",
        "Let me look.\n\n\n\nThen I decide.",
        vec![call("read_file", json!({"path":"src/main.ts"}))],
    );
}

#[test]
fn s1_2_fences_inline_code_and_reasoning_are_text() {
    let fenced = "```xml\n<read_file>{\"path\":\"x\"}</read_file>\n```\n";
    let r = err(fenced, &[K::NoToolBlocks]);
    assert_eq!(r.text, fenced);
    ok(
        &format!("{fenced}{GOOD}"),
        fenced,
        vec![call("read_file", json!({"path":"a.ts"}))],
    );
    let thinking = "<thinking>maybe <read_file>{\"path\":\"x\"}</read_file></thinking>\n";
    ok(
        &format!("{thinking}{GOOD}"),
        thinking,
        vec![call("read_file", json!({"path":"a.ts"}))],
    );
    let inline = "Use `<read_file>{}</read_file>` then: ";
    ok(
        &format!("{inline}{GOOD}"),
        inline,
        vec![call("read_file", json!({"path":"a.ts"}))],
    );
}

#[test]
fn s2_2_known_tool_with_attributes_or_self_closing_is_malformed() {
    let r = err(
        "<read_file path=\"a.ts\"></read_file>after",
        &[K::MalformedMarkup],
    );
    assert_eq!(r.text, "after");
    err("<read_file/>", &[K::MalformedMarkup]);
}

#[test]
fn s2_3_unknown_tool_only_with_a_json_object_body() {
    let r = err(
        &format!("x {UNKNOWN} y"),
        &[K::UnknownTool, K::NoToolBlocks][..1],
    );
    assert_eq!(r.text, "x  y");
    for prose in [
        "<button>Save</button>",
        "<span>{count}</span>",
        "<p>{\"a\" 1}</p>",
        "<ul><li>one</li></ul>",
        "<reed_file><path>a</path></reed_file>",
        "<div>\n  {",
        "<x>",
        "<p>{\"a\": \"<b>\"",
    ] {
        let s = format!("{prose}{GOOD}");
        ok(&s, prose, vec![call("read_file", json!({"path":"a.ts"}))]);
    }
    let cfg = Config {
        max_unknown_body_bytes: 4,
        ..Config::default()
    };
    let r = run_cfg(cfg, &format!("<x>{{\"long\":1}}</x>{GOOD}"));
    assert_eq!(r.error_kinds(), vec![K::LimitExceeded]);
    assert_eq!(r.text, "");
}

#[test]
fn s3_1_empty_body_and_text_body() {
    err("<read_file></read_file>", &[K::SchemaViolation]);
    err("<list_directory>\n</list_directory>", &[K::SchemaViolation]);
    let r = err("<read_file> please </read_file>", &[K::MalformedMarkup]);
    assert_eq!(r.text, "");
}

#[test]
fn s3_2_json_form_with_close_tag_inside_a_string() {
    ok(
        "<write_file>{\"file_path\":\"a.md\",\"content\":\"use </write_file> and <b>x</b>\"}</write_file>",
        "",
        vec![call(
            "write_file",
            json!({"file_path":"a.md","content":"use </write_file> and <b>x</b>"}),
        )],
    );
    err(
        "<read_file>{\"path\": \"a\",}</read_file>",
        &[K::InvalidJson],
    );
    err("<read_file>{\"path\": \"a\"</read_file>", &[K::InvalidJson]);
    err(
        "<read_file>{\"path\": \"a\"} x</read_file>",
        &[K::InvalidJson],
    );
    err("<read_file>[1]</read_file>", &[K::MalformedMarkup]);
}

#[test]
fn s3_3_no_json_repair() {
    err(
        "<read_file>{'path': 'it\\'s.ts'}</read_file>",
        &[K::InvalidJson],
    );
    err("<read_file>{path: \"a\"}</read_file>", &[K::InvalidJson]);
}

#[test]
fn s3_4_parameter_form() {
    ok(
        "<read_file>\n  <path> src/main.ts </path>\n</read_file>",
        "",
        vec![call("read_file", json!({"path":"src/main.ts"}))],
    );
    err(
        "<read_file>\n please <path>a</path></read_file>",
        &[K::MalformedMarkup],
    );
    err(
        "<read_file><path>a</path><path>b</path></read_file>",
        &[K::MalformedMarkup],
    );
    err(
        "<read_file><path x=\"1\">a</path></read_file>",
        &[K::MalformedMarkup],
    );
    // Raw values: tags and entities inside are text.
    ok(
        "<bash_command><command>ls 2&gt;/dev/null <b></command></bash_command>",
        "",
        vec![call(
            "bash_command",
            json!({"command":"ls 2&gt;/dev/null <b>"}),
        )],
    );
}

#[test]
fn s3_5_values_are_typed_by_the_schema() {
    ok(
        "<read_file><path>007</path><limit>10</limit></read_file>",
        "",
        vec![call("read_file", json!({"path":"007","limit":10}))],
    );
    ok(
        "<grep_search><pattern>[a-z]+</pattern><include>[\"*.ts\"]</include></grep_search>",
        "",
        vec![call(
            "grep_search",
            json!({"pattern":"[a-z]+","include":["*.ts"]}),
        )],
    );
    err(
        "<read_file><path>a</path><limit>ten</limit></read_file>",
        &[K::SchemaViolation],
    );
}

#[test]
fn s3_6_schema_violations() {
    err(BAD_SCHEMA, &[K::SchemaViolation]);
    err(
        "<read_file>{\"path\":\"a\",\"extra\":1}</read_file>",
        &[K::SchemaViolation],
    );
    err(
        "<read_file>{\"path\":\"a\",\"limit\":0}</read_file>",
        &[K::SchemaViolation],
    );
}

#[test]
fn s3_8_two_calls() {
    ok(
        &format!("{GOOD}\n<list_directory><path>.</path></list_directory>"),
        "\n",
        vec![
            call("read_file", json!({"path":"a.ts"})),
            call("list_directory", json!({"path":"."})),
        ],
    );
}

#[test]
fn s3_9_body_over_limit() {
    let cfg = Config {
        max_call_bytes: 8,
        ..Config::default()
    };
    let r = run_cfg(
        cfg.clone(),
        "<read_file>{\"path\":\"abcdefgh\"}</read_file>",
    );
    assert_eq!(r.error_kinds(), vec![K::LimitExceeded]);
    let r = run_cfg(cfg, "<read_file><path>abcdefghij</path></read_file>x");
    assert_eq!(r.error_kinds(), vec![K::LimitExceeded]);
    assert_eq!(r.text, "x");
}

#[test]
fn s3_9_json_nested_deeper_than_the_limit_is_limit_exceeded() {
    // As the streaming contract and every other JSON format say it: a limit, not bad JSON.
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    for body in [
        format!("<read_file>{{\"path\":\"a\",\"x\":{deep}}}</read_file>"),
        format!("<delete_file>{{\"a\":{deep}}}</delete_file>"),
    ] {
        let r = run(&body);
        assert_eq!(r.error_kinds(), vec![K::LimitExceeded], "{:?}", r.errors);
    }
}

#[test]
fn truncation_is_unterminated() {
    for s in [
        "<read_file>{\"path\":",
        "<read_file><path>a.ts</path>",
        "<read_file><path>a.ts</pa",
        "<read_file>",
        "I will <read_fi",
    ] {
        err(s, &[K::Unterminated]);
    }
    // An unknown element cut off is text (and the turn has no call).
    let r = err("<x>{\"a\":1}", &[K::NoToolBlocks]);
    assert_eq!(r.text, "<x>{\"a\":1}");
}

#[test]
fn s5_1_no_tool_blocks_only_when_required_and_nothing_else_failed() {
    err("Let me read the file.", &[K::NoToolBlocks]);
    err("", &[K::NoToolBlocks]);
    err(UNKNOWN, &[K::UnknownTool]);
    let cfg = Config {
        require_tool_call: false,
        ..Config::default()
    };
    assert!(run_cfg(cfg, "plain answer").errors.is_empty());
}

#[test]
fn s5_2_three_strikes_accompany_the_third_error_and_repeat() {
    let cfg = Config::default();
    assert_eq!(
        session(
            cfg.clone(),
            &[
                BAD_SCHEMA, BAD_SCHEMA, BAD_SCHEMA, BAD_SCHEMA, GOOD, BAD_SCHEMA
            ]
        ),
        vec![
            vec![K::SchemaViolation],
            vec![K::SchemaViolation],
            vec![K::SchemaViolation, K::MaxMistakes],
            vec![K::SchemaViolation, K::MaxMistakes],
            vec![],
            vec![K::SchemaViolation],
        ]
    );
    assert_eq!(
        session(
            cfg.clone(),
            &[UNKNOWN, "no call", GOOD, UNKNOWN, UNKNOWN, GOOD]
        ),
        vec![
            vec![K::UnknownTool],
            vec![K::NoToolBlocks],
            vec![],
            vec![K::UnknownTool],
            vec![K::UnknownTool],
            vec![],
        ]
    );
    let off = Config {
        max_mistakes: 0,
        ..Config::default()
    };
    assert_eq!(session(off, &[UNKNOWN; 4])[3], vec![K::UnknownTool]);
}

#[test]
fn s5_2_host_can_reset_the_counter() {
    let t = tools();
    let mut p = Parser::new(Config::default(), &t);
    let mut out = Vec::new();
    for _ in 0..2 {
        p.feed(UNKNOWN.as_bytes(), &mut out);
        p.finish(&mut out);
    }
    assert_eq!(p.mistakes(), 2);
    p.reset_mistakes();
    out.clear();
    p.feed(UNKNOWN.as_bytes(), &mut out);
    p.finish(&mut out);
    assert_eq!(ParseResult::fold(&out).error_kinds(), vec![K::UnknownTool]);
}

#[test]
fn invalid_utf8_counts_as_an_error() {
    let t = tools();
    let input = b"<read_file>{\"path\":\"a\xff\"}</read_file>";
    let (r, _) = every_cut(&|| Box::new(Parser::new(Config::default(), &t)), input);
    assert_eq!(r.error_kinds(), vec![K::InvalidUtf8]);
    assert_eq!(
        r.calls,
        vec![call("read_file", json!({"path":"a\u{FFFD}"}))]
    );
}

#[test]
fn renderer_roundtrips_and_refuses_what_cannot() {
    let t = tools();
    let calls = vec![
        call(
            "write_file",
            json!({"file_path":"a","content":"</write_file> & ]]> 😀"}),
        ),
        call("read_file", json!({"path":"b","limit":5})),
    ];
    let out = render("Sure.\n", &calls, &t).unwrap();
    let r = run(std::str::from_utf8(&out).unwrap());
    assert_eq!(r.text, "Sure.\n");
    assert_eq!(r.calls, calls);
    assert!(render("x", &[], &t).is_err());
    assert!(render("", &[call("nope", json!({}))], &t).is_err());
    assert!(render("", &[call("read_file", json!({}))], &t).is_err());
    assert!(render("", &[call("read_file", json!([1]))], &t).is_err());
    assert!(render("```\n", &[call("read_file", json!({"path":"a"}))], &t).is_err());
}

#[test]
fn s3_7_held_input_gives_the_call_end_with_the_close_and_errors_within_a_batch() {
    let t = tools();
    // Code with `<`, beginnings of the close, non-ASCII and an escaped backslash.
    let content = "x < y </div> </read_fil é\\\\ ".repeat(200);
    let body = format!("<read_file>{{\"path\": \"{content}\"}}</read_file> after");
    let b = body.as_bytes();
    let mut p = Parser::new(Config::default(), &t);
    let mut seen = Vec::new();
    let mut end_feed = None;
    let mut fed = 0;
    for (i, c) in b.chunks(4).enumerate() {
        p.feed(c, &mut seen);
        fed += c.len();
        if end_feed.is_none() && seen.iter().any(|e| matches!(e, Event::CallEnd { .. })) {
            end_feed = Some(fed);
        }
        // No more than a batch of the body is ever held unsent.
        let sent: usize = seen
            .iter()
            .map(|e| match e {
                Event::ArgsDelta { json, .. } => json.len(),
                _ => 0,
            })
            .sum();
        let body_in = fed.saturating_sub("<read_file>".len());
        if end_feed.is_none() {
            assert!(
                body_in - sent <= 2 * DELTA_BATCH + 4,
                "chunk {i}: {body_in} in, {sent} sent"
            );
        }
    }
    // The call ends in the feed that brings the close's last byte.
    let close_end = body.find("</read_file>").unwrap() + "</read_file>".len();
    assert_eq!(end_feed, Some(close_end.next_multiple_of(4)));
    p.finish(&mut seen);
    let r = ParseResult::fold(&seen);
    assert_eq!(r.error_kinds(), vec![]);
    let path = content.replace("\\\\", "\\");
    assert_eq!(r.calls, vec![call("read_file", json!({"path": path}))]);
    assert_eq!(r.text, " after");

    // A JSON error is reported once its held input is handed on: within 1 KiB of its byte.
    let bad = format!("<read_file>{{\"path\": x {}", " ".repeat(4 * DELTA_BATCH));
    let mut p = Parser::new(Config::default(), &t);
    let mut seen = Vec::new();
    let mut fed = 0;
    for c in bad.as_bytes().chunks(4) {
        p.feed(c, &mut seen);
        fed += c.len();
        if !seen.is_empty() && seen.iter().any(|e| matches!(e, Event::Error { .. })) {
            break;
        }
    }
    // The bad byte is byte 20; held input is handed on before it passes WAIT_MAX.
    assert!(fed <= 20 + crate::formats::xml::prose::WAIT_MAX, "{fed}");
    let e = seen.iter().find_map(|e| match e {
        Event::Error { kind, message } => Some((*kind, message.clone())),
        _ => None,
    });
    assert_eq!(
        e,
        Some((
            K::InvalidJson,
            "<read_file> body from byte 11: expected value at byte 9 of the body (byte 20 of the \
             stream)"
                .into()
        ))
    );
}

/// Pieces of JSON-form bodies: the close cut anywhere and its beginnings that are not it,
/// escapes, non-ASCII and invalid bytes, and runs that fill the driver's wait (S3.7).
fn body_soup() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            Just(b"<read_file>".to_vec()),
            Just(b"</read_file>".to_vec()),
            Just(b"{\"path\": \"".to_vec()),
            Just(b"\"}".to_vec()),
            Just(b"</read_fil".to_vec()),
            Just(b"</".to_vec()),
            Just(b"<".to_vec()),
            Just(b"\\".to_vec()),
            Just(b"\"".to_vec()),
            Just(b"\\u00e9".to_vec()),
            Just("é😀".as_bytes().to_vec()),
            Just(vec![0xff]),
            Just(vec![0xe2, 0x82]),
            Just(vec![b'a'; 700]),
            Just(b" x ".to_vec()),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        "[a-z<>&/\"\\\\ é😀\\]]{0,10}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_panic_on_arbitrary_bytes_and_cuts(
        turns in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 1..3),
        cut in any::<usize>(),
    ) {
        let t = tools();
        let mut p = Parser::new(Config::default(), &t);
        for b in &turns {
            let c = cut % (b.len() + 1);
            let evs = run_chunks(&mut p, [&b[..c], &b[c..]]);
            crate::formats::core::testkit::check_delta_contract(&evs);
        }
    }

    #[test]
    fn no_panic_on_markup_soup(
        parts in proptest::collection::vec(prop_oneof![
            Just("<read_file>"), Just("</read_file>"), Just("<path>"), Just("</path>"),
            Just("{"), Just("}"), Just("\""), Just("\"path\":"), Just("<x>"), Just("</x>"),
            Just("<thinking>"), Just("</thinking>"), Just("```\n"), Just("`"), Just("<"),
            Just(" "), Just("\n"), Just("a"), Just("é"), Just("\\"),
        ], 0..30),
        cut in any::<usize>(),
    ) {
        let s: String = parts.concat();
        let t = tools();
        let b = s.as_bytes();
        let c = cut % (b.len() + 1);
        let mk = || Parser::new(Config::default(), &t);
        let whole = ParseResult::fold(&run_chunks(&mut mk(), [b]));
        let split = ParseResult::fold(&run_chunks(&mut mk(), [&b[..c], &b[c..]]));
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn json_bodies_are_split_invariant_in_small_chunks(
        bytes in body_soup(),
        sizes in proptest::collection::vec(1usize..9, 1..6),
        limit in prop_oneof![Just(Config::default().max_call_bytes), Just(300usize), Just(1500usize)],
    ) {
        let t = tools();
        let cfg = Config { max_call_bytes: limit, ..Config::default() };
        let mk = || Parser::new(cfg.clone(), &t);
        let whole = ParseResult::fold(&run_chunks(&mut mk(), [bytes.as_slice()]));
        let evs = run_chunks(&mut mk(), cycled_chunks(&bytes, &sizes));
        crate::formats::core::testkit::check_delta_contract(&evs);
        prop_assert_eq!(&ParseResult::fold(&evs), &whole);
        let bytewise = ParseResult::fold(&run_chunks(&mut mk(), bytes.chunks(1)));
        prop_assert_eq!(&bytewise, &whole);
    }

    #[test]
    fn roundtrip_render_parse_under_random_cuts(
        text in "[a-z .\n]{0,10}",
        content in arb_json(),
        path in "[a-z./<>]{1,8}",
        cuts in proptest::collection::vec(any::<usize>(), 0..5),
    ) {
        // A free-form tool (no schema constraints) carries arbitrary JSON objects.
        let t = Tools::from_json(
            r#"[{"name":"anything","parameters":{"type":"object"}},{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]"#,
        ).unwrap();
        let calls = vec![
            call("anything", json!({"v": content})),
            call("read_file", json!({"path": path})),
        ];
        let bytes = render(&text, &calls, &t).expect("JSON-form calls always render");
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort();
        let mut chunks = Vec::new();
        let mut last = 0;
        for c in cuts {
            chunks.push(&bytes[last..c]);
            last = c;
        }
        chunks.push(&bytes[last..]);
        let mut p = Parser::new(Config::default(), &t);
        let r = ParseResult::fold(&run_chunks(&mut p, chunks));
        prop_assert_eq!(r.text, text);
        prop_assert_eq!(r.calls, calls);
        prop_assert!(r.errors.is_empty());
    }
}

#[test]
fn corpus_cases_hold_at_every_cut() {
    let n = crate::formats::xml::prose::corpus_check::check_corpus("corpus/strict_xml", new_parser);
    assert!(n >= 30, "only {n} corpus cases");
}

#[test]
fn an_unterminated_body_over_the_call_limit_reads_the_same_byte_by_byte() {
    // proptest found it: a JSON body whose string holds a truncated close tag, then runs on
    // past the call limit without ending.
    let mut bytes = br#"<read_file>{"path": "{"path": "</read_fil"#.to_vec();
    bytes.extend(std::iter::repeat_n(b'a', 704));
    let t = tools();
    let cfg = Config {
        max_call_bytes: 300,
        ..Config::default()
    };
    let mk = || Parser::new(cfg.clone(), &t);
    let whole = ParseResult::fold(&run_chunks(&mut mk(), [bytes.as_slice()]));
    let bytewise = ParseResult::fold(&run_chunks(&mut mk(), bytes.chunks(1)));
    assert_eq!(bytewise, whole);
}

#[test]
fn a_body_piece_of_a_batch_or_more_is_not_held_in_the_batch() {
    // A body fed whole is one piece: it goes out as one delta where it lies, and the batch
    // does not keep a copy (or its capacity) while the call is open; the deltas are the
    // batches the pieces make, a short piece pending joined to the long one after it.
    let t = tools();
    let content = "abc ".repeat(16 * DELTA_BATCH);
    let body = format!("{{\"path\": \"{content}\"}}");
    for first in [0, 3, 40] {
        let mut p = Parser::new(Config::default(), &t);
        let mut seen = Vec::new();
        p.feed(b"<read_file>", &mut seen);
        p.feed(&body.as_bytes()[..first], &mut seen);
        p.feed(&body.as_bytes()[first..], &mut seen);
        let held = p.0.core.call.as_ref().map(|c| c.pending.capacity());
        assert!(
            held.is_some_and(|n| n <= 2 * DELTA_BATCH),
            "{first}: {held:?}"
        );
        let deltas: Vec<&str> = seen
            .iter()
            .filter_map(|e| match e {
                Event::ArgsDelta { json, .. } => Some(&json[..]),
                _ => None,
            })
            .collect();
        assert!(deltas.iter().all(|d| d.len() >= DELTA_BATCH), "{first}");
        p.feed(b"</read_file>", &mut seen);
        p.finish(&mut seen);
        let r = ParseResult::fold(&seen);
        assert_eq!(r.error_kinds(), vec![]);
        assert_eq!(r.calls, vec![call("read_file", json!({"path": content}))]);
    }
}
