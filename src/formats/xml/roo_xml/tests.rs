//! One test per rule of `specs/roo_xml.md`; every input is replayed at every cut.

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
        "/corpus/roo_xml/tools.json"
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

#[test]
fn r1_1_prose_around_a_call_is_kept_exactly() {
    ok(
        "I'll create it.\n<write_to_file>\n<path>hello.txt</path>\n<content>\nHello\n</content>\n</write_to_file>\nDone.",
        "I'll create it.\n\nDone.",
        vec![call(
            "write_to_file",
            json!({"path":"hello.txt","content":"Hello"}),
        )],
    );
    ok("just prose\n\n\n", "just prose\n\n\n", vec![]);
}

#[test]
fn r1_2_unknown_spaced_attribute_and_cased_tags_are_text() {
    for s in [
        "<foo>bar</foo>",
        "< read_file>\n<path>a</path>\n</read_file>",
        "<read_file path=\"a\"></read_file>",
        "<read_file/>",
        "<Read_File><path>a</path></Read_File>",
        "<read_file >x",
        "if a < b and c > d",
    ] {
        ok(s, s, vec![]);
    }
}

#[test]
fn r1_3_function_calls_form_is_text() {
    let s = "<function_calls>\n<invoke name=\"read_file\">\n<parameter name=\"path\">a</parameter>\n</invoke>\n</function_calls>";
    ok(s, s, vec![]);
}

#[test]
fn r1_4_comments_and_cdata_in_prose_are_text() {
    let s = "a <!-- <read_file><path>x</path></read_file> --> b <![CDATA[<x>]]> c";
    ok(s, s, vec![]);
}

#[test]
fn r2_1_fenced_calls_are_text_and_calls_after_the_fence_run() {
    let fenced = "Example:\n```xml\n<read_file>\n<path>a.ts</path>\n</read_file>\n```\n";
    ok(fenced, fenced, vec![]);
    let after = format!("{fenced}<read_file>\n<path>b.ts</path>\n</read_file>");
    ok(
        &after,
        fenced,
        vec![call("read_file", json!({"path":"b.ts"}))],
    );
    let tilde = "~~~\n<read_file><path>a</path></read_file>\n~~~~\n";
    ok(tilde, tilde, vec![]);
}

#[test]
fn r2_2_inline_code_mentions_are_text_until_the_span_or_line_ends() {
    let s = "Use `<read_file>` with `<path>`.";
    ok(s, s, vec![]);
    let stray = "a stray ` backtick\n<read_file><path>a</path></read_file>";
    ok(
        stray,
        "a stray ` backtick\n",
        vec![call("read_file", json!({"path":"a"}))],
    );
}

#[test]
fn r2_3_reasoning_blocks_are_text() {
    let s = "<thinking>I will call <read_file><path>a</path></read_file></thinking>";
    ok(s, s, vec![]);
    let then = format!("{s}\n<read_file><path>b</path></read_file>");
    ok(
        &then,
        &format!("{s}\n"),
        vec![call("read_file", json!({"path":"b"}))],
    );
    ok("<think>open", "<think>open", vec![]);
}

#[test]
fn r3_3_foreign_parameter_is_malformed() {
    let r = err(
        "<read_file>\n<command>ls</command>\n<path>a</path>\n</read_file>after",
        &[K::MalformedMarkup],
    );
    assert!(r.calls.is_empty());
    assert_eq!(r.text, "after");
}

#[test]
fn r3_4_text_between_params_is_malformed_or_dropped_with_the_option() {
    let s = "<read_file>\nplease read\n<path>a</path>\n</read_file>";
    err(s, &[K::MalformedMarkup]);
    err(
        "<read_file>\n< path>a</ path>\n</read_file>",
        &[K::MalformedMarkup],
    );
    let cfg = Config {
        allow_text_between_params: true,
        ..Config::default()
    };
    let r = run_cfg(cfg.clone(), s);
    assert_eq!(r.calls, vec![call("read_file", json!({"path":"a"}))]);
    assert_eq!(r.warnings.len(), 1);
    assert_eq!(r.warnings[0].kind, "allow_text_between_params");
    let r = run_cfg(
        cfg,
        "<read_file><command>ls <path>x</path></command><path>a</path></read_file>",
    );
    assert_eq!(r.calls, vec![call("read_file", json!({"path":"a"}))]);
}

#[test]
fn r3_5_values_stay_strings() {
    ok(
        "<read_file><path>a</path><start_line>10</start_line></read_file>",
        "",
        vec![call("read_file", json!({"path":"a","start_line":"10"}))],
    );
}

#[test]
fn a_parameter_s_text_is_serde_json_s_escaping() {
    // The argument text a parser delivers is what digests compare: each parameter goes out as
    // `{"key":"value"` with serde_json's escapes, whatever the value holds.
    let t = tools();
    let v = "a\"b\\c\u{8}\u{c}\u{1}é";
    let input = format!("<read_file><path>{v}</path></read_file>");
    let mut p = Parser::new(Config::default(), &t);
    let evs = run_chunks(&mut p, [input.as_bytes()]);
    let args: String = evs
        .iter()
        .filter_map(|e| match e {
            Event::ArgsDelta { json, .. } => Some(json.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        args,
        format!("{{\"path\":{}}}", serde_json::to_string(v).unwrap())
    );
}

#[test]
fn r3_6_entities_stay_raw() {
    ok(
        "<execute_command>\n<command>ls 2&gt;/dev/null && echo &amp;</command>\n</execute_command>",
        "",
        vec![call(
            "execute_command",
            json!({"command":"ls 2&gt;/dev/null && echo &amp;"}),
        )],
    );
}

#[test]
fn r3_7_missing_required_is_a_schema_violation() {
    let r = err(
        "<write_to_file><path>a</path></write_to_file>",
        &[K::SchemaViolation],
    );
    assert!(r.calls.is_empty());
}

#[test]
fn r3_8_two_calls_are_both_parsed() {
    ok(
        "<read_file><path>a</path></read_file>\n<read_file><path>b</path></read_file>",
        "\n",
        vec![
            call("read_file", json!({"path":"a"})),
            call("read_file", json!({"path":"b"})),
        ],
    );
}

#[test]
fn r4_1_tags_inside_values_are_text() {
    ok(
        "<execute_command><command>echo '<read_file><path>x</path></read_file>'</command></execute_command>",
        "",
        vec![call(
            "execute_command",
            json!({"command":"echo '<read_file><path>x</path></read_file>'"}),
        )],
    );
}

#[test]
fn r4_2_first_close_ends_a_plain_param() {
    err(
        "<attempt_completion><result>Done. Use </result> tags.</result></attempt_completion>",
        &[K::MalformedMarkup],
    );
}

#[test]
fn r4_3_content_loses_one_line_break_each_side_others_are_trimmed() {
    ok(
        "<write_to_file><path>  a.txt\n</path><content>\n\nx\n\n</content></write_to_file>",
        "",
        vec![call(
            "write_to_file",
            json!({"path":"a.txt","content":"\nx\n"}),
        )],
    );
    ok(
        "<write_to_file><path>a</path><content></content></write_to_file>",
        "",
        vec![call("write_to_file", json!({"path":"a","content":""}))],
    );
    ok(
        "<write_to_file>\r\n<path>a</path>\r\n<content>\r\nl1\r\nl2\r\n</content>\r\n</write_to_file>",
        "",
        vec![call(
            "write_to_file",
            json!({"path":"a","content":"l1\r\nl2"}),
        )],
    );
}

#[test]
fn r4_4_content_close_tag_is_rescued_unless_a_close_follows() {
    ok(
        "<write_to_file><path>a.js</path><content>\nx = \"</content>\";\n</content>\n</write_to_file>",
        "",
        vec![call(
            "write_to_file",
            json!({"path":"a.js","content":"x = \"</content>\";"}),
        )],
    );
    ok(
        "<write_to_file><path>a</path><content>\n</content> <!-- c --> </content>\n</write_to_file>",
        "",
        vec![call(
            "write_to_file",
            json!({"path":"a","content":"</content> <!-- c --> "}),
        )],
    );
    // An early `</content>` then `</write_to_file>` closes; the rest is prose.
    ok(
        "<write_to_file><path>a</path><content>\nA</content>\n</write_to_file>B\n</content>\n</write_to_file>",
        "B\n</content>\n</write_to_file>",
        vec![call("write_to_file", json!({"path":"a","content":"A"}))],
    );
    // Content after a look-ahead that turned out to be content keeps streaming raw.
    ok(
        "<write_to_file><path>a</path><content>\n</content>\n<b>x</b>\n</content></write_to_file>",
        "",
        vec![call(
            "write_to_file",
            json!({"path":"a","content":"</content>\n<b>x</b>"}),
        )],
    );
}

#[test]
fn r4_5_path_hijack_is_rejected() {
    let r = err(
        "<write_to_file>\n<path>a.txt</path>\n<content>\nA</content><path>evil</path>B\n</content>\n</write_to_file>",
        &[K::MalformedMarkup],
    );
    assert!(r.calls.is_empty());
    err(
        "<write_to_file>\n<content>\nA</content><path>evil</path>B\n</content>\n</write_to_file>",
        &[K::MalformedMarkup],
    );
}

#[test]
fn r4_6_duplicate_param_is_malformed() {
    err(
        "<read_file><path>a</path><path>b</path></read_file>",
        &[K::MalformedMarkup],
    );
}

#[test]
fn r4_7_param_over_limit_is_limit_exceeded() {
    let cfg = Config {
        max_param_bytes: 8,
        ..Config::default()
    };
    let r = run_cfg(
        cfg.clone(),
        "<read_file><path>0123456789</path></read_file>ok",
    );
    assert_eq!(r.error_kinds(), vec![K::LimitExceeded]);
    assert_eq!(r.text, "ok");
    let r = run_cfg(
        cfg,
        "<write_to_file><path>a</path><content>\n1234</content>     \n</content></write_to_file>",
    );
    assert_eq!(r.error_kinds(), vec![K::LimitExceeded]);
}

#[test]
fn r6_1_truncation_inside_a_call_is_unterminated() {
    for s in [
        "<read_file>\n<path>a.ts</pa",
        "<read_file>\n<path>a.ts",
        "<read_file>\n<path>a.ts</path>\n</read_fi",
        "<read_file>\n",
        "<write_to_file><path>a</path><content>\nx</content>\n",
    ] {
        let r = err(s, &[K::Unterminated]);
        assert!(r.calls.is_empty());
        assert_eq!(r.text, "");
    }
}

#[test]
fn r6_2_truncated_tool_tag_is_unterminated_and_kept_as_text() {
    let r = err("hello <read_fi", &[K::Unterminated]);
    assert_eq!(r.text, "hello <read_fi");
    ok("a <", "a <", vec![]);
    ok("a <foo", "a <foo", vec![]);
    ok("`<read_fi", "`<read_fi", vec![]);
}

#[test]
fn sessions_restart_per_turn() {
    let t = tools();
    let mut p = Parser::new(Config::default(), &t);
    let mut out = Vec::new();
    p.feed(b"<read_file><path>a", &mut out);
    p.finish(&mut out);
    p.feed(b"<read_file><path>b</path></read_file>", &mut out);
    p.finish(&mut out);
    let r = ParseResult::fold(&out);
    assert_eq!(r.error_kinds(), vec![K::Unterminated]);
    assert_eq!(r.calls, vec![call("read_file", json!({"path":"b"}))]);
    assert!(out.contains(&Event::CallStart {
        index: 0,
        id: None,
        name: "read_file".into(),
        server: None
    }));
}

#[test]
fn invalid_utf8_is_reported_and_replaced() {
    let t = tools();
    let input = b"a\xffb<read_file><path>\xfe</path></read_file>";
    let (r, _) = every_cut(&|| Box::new(Parser::new(Config::default(), &t)), input);
    assert_eq!(r.error_kinds(), vec![K::InvalidUtf8, K::InvalidUtf8]);
    assert_eq!(r.text, "a\u{FFFD}b");
    assert_eq!(r.calls, vec![call("read_file", json!({"path":"\u{FFFD}"}))]);
}

#[test]
fn renderer_roundtrips_and_refuses_what_cannot() {
    let t = tools();
    let calls = vec![
        call(
            "write_to_file",
            json!({"path":"a b.txt","content":"\n\nx</content>;\n\n"}),
        ),
        call("execute_command", json!({"command":"ls 2>&1 | grep '<x>'"})),
    ];
    let out = render("Sure: ", &calls, &t).unwrap();
    let r = run(std::str::from_utf8(&out).unwrap());
    assert_eq!(r.text, "Sure: ");
    assert_eq!(r.calls, calls);
    for (text, c) in [
        ("", call("nope", json!({}))),
        ("", call("read_file", json!({"path":" a"}))),
        ("", call("read_file", json!({"path":"a</path>"}))),
        ("", call("read_file", json!({"path":1}))),
        ("", call("read_file", json!({"command":"x"}))),
        (
            "",
            call(
                "write_to_file",
                json!({"path":"a","content":"x</content>\n</write_to_file>"}),
            ),
        ),
        (
            "",
            call("write_to_file", json!({"path":"a","content":"x\r"})),
        ),
        ("", call("write_to_file", json!({"path":"a"}))),
        ("```\n", call("read_file", json!({"path":"a"}))),
        ("<read_file>", call("read_file", json!({"path":"a"}))),
    ] {
        assert!(
            render(text, std::slice::from_ref(&c), &t).is_err(),
            "{text:?} {c:?}"
        );
    }
}

#[test]
fn markers_name_tools_and_params() {
    let m = markers(&tools());
    assert!(m.contains(&"<write_to_file>".to_string()));
    assert!(m.contains(&"</content>".to_string()));
}

fn arb_value() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z<>&/ \\]\\[é😀\n]{0,12}").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn values_are_split_invariant_in_small_chunks(
        parts in proptest::collection::vec(prop_oneof![
            Just("<write_to_file>".as_bytes().to_vec()), Just(b"</write_to_file>".to_vec()),
            Just(b"<path>".to_vec()), Just(b"</path>".to_vec()), Just(b"<content>".to_vec()),
            Just(b"</content>".to_vec()), Just(b"</conten".to_vec()), Just(b"</".to_vec()),
            Just(b"<".to_vec()), Just(b"\n".to_vec()), Just("é😀".as_bytes().to_vec()),
            Just(vec![0xff]), Just(vec![0xe2, 0x82]), Just(vec![b'a'; 700]),
        ], 0..24),
        sizes in proptest::collection::vec(1usize..9, 1..6),
        limit in prop_oneof![Just(Config::default().max_param_bytes), Just(300usize), Just(1500usize)],
    ) {
        // The driver holds a value's chunks (§5): every chunking gives the events of the whole.
        let bytes = parts.concat();
        let t = tools();
        let cfg = Config { max_param_bytes: limit, ..Config::default() };
        let mk = || Parser::new(cfg.clone(), &t);
        let whole = ParseResult::fold(&run_chunks(&mut mk(), [bytes.as_slice()]));
        let evs = run_chunks(&mut mk(), cycled_chunks(&bytes, &sizes));
        crate::formats::core::testkit::check_delta_contract(&evs);
        prop_assert_eq!(&ParseResult::fold(&evs), &whole);
        prop_assert_eq!(&ParseResult::fold(&run_chunks(&mut mk(), bytes.chunks(1))), &whole);
    }

    #[test]
    fn no_panic_on_arbitrary_bytes_and_cuts(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let t = tools();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort();
        let mut p = Parser::new(Config::default(), &t);
        let mut out = Vec::new();
        let mut last = 0;
        for c in cuts {
            p.feed(&bytes[last..c], &mut out);
            last = c;
        }
        p.feed(&bytes[last..], &mut out);
        p.finish(&mut out);
        crate::formats::core::testkit::check_delta_contract(&out);
    }

    #[test]
    fn no_panic_on_markup_soup(
        parts in proptest::collection::vec(prop_oneof![
            Just("<read_file>"), Just("</read_file>"), Just("<path>"), Just("</path>"),
            Just("<write_to_file>"), Just("</write_to_file>"), Just("<content>"), Just("</content>"),
            Just("<thinking>"), Just("</thinking>"), Just("```\n"), Just("`"), Just("<"),
            Just(" "), Just("\n"), Just("x"), Just("<!--"), Just("-->"), Just("é"),
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
    fn roundtrip_render_parse_under_random_cuts(
        text in proptest::string::string_regex("[a-z .\n]{0,10}").unwrap(),
        path in "[a-z./]{1,8}",
        content in arb_value(),
        command in proptest::string::string_regex("[a-z&<> ]{0,8}[a-z]").unwrap(),
        cuts in proptest::collection::vec(any::<usize>(), 0..5),
    ) {
        let t = tools();
        let calls = vec![
            call("write_to_file", json!({"path": path, "content": content})),
            call("execute_command", json!({"command": command})),
        ];
        let Ok(bytes) = render(&text, &calls, &t) else {
            // Only values the spec says cannot roundtrip may be refused.
            prop_assert!(
                content.contains("</content>")
                    || command.contains("</command>")
                    || command.trim() != command
            );
            return Ok(());
        };
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
    let n = crate::formats::xml::prose::corpus_check::check_corpus("corpus/roo_xml", new_parser);
    assert!(n >= 30, "only {n} corpus cases");
}
