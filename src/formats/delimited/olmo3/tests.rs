use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::core::testkit::{arb_json, check_delta_contract, cycled_chunks, every_cut};
use crate::formats::{reasoning, run_chunks};
use proptest::prelude::*;
use serde_json::json;

fn mk(cfg: Config) -> Box<dyn StreamParser> {
    reasoning::wrap(parser(cfg), &REASONING)
}

fn all_ways(s: &str) -> ParseResult {
    every_cut(&|| mk(Config::default()), s.as_bytes()).0
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

#[test]
fn a_block_of_calls_one_per_line_with_json_literals() {
    let r = all_ways(
        "Let me check.<function_calls>get_weather(city=\"Paris\", days=3)\nget_time(tz=null, dst=true)</function_calls>",
    );
    assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    assert_eq!(r.text, "Let me check.");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris", "days": 3}));
    assert_eq!(r.calls[1].arguments, json!({"tz": null, "dst": true}));
}

#[test]
fn a_call_spanning_lines_is_one_call_and_markup_in_strings_is_content() {
    let r = all_ways(
        "<function_calls>\nwrite(path=\"a.html\",\n  content=\"<b>x</b></function_calls>\\n\")\n\nget_time()\n</function_calls>\nDone.",
    );
    assert!(r.errors.is_empty(), "{r:?}");
    assert_eq!(
        r.calls[0].arguments,
        json!({"path": "a.html", "content": "<b>x</b></function_calls>\n"})
    );
    assert_eq!(r.calls[1].name, "get_time");
    assert_eq!(r.text, "\nDone.");
}

#[test]
fn python_literals_are_a_leniency_and_non_literals_drop_their_call() {
    let r = all_ways("<function_calls>f(a=True, b=None)\ng(c=1)</function_calls>");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(warnings(&r), ["python_literal"]);
    let cfg = Config {
        python_literals: false,
        ..Config::default()
    };
    let r = every_cut(
        &|| mk(cfg),
        b"<function_calls>f(a=True)\ng(c=1)</function_calls>",
    )
    .0;
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    let r = all_ways("<function_calls>f(a=x)\ng(c=1)</function_calls>");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
}

#[test]
fn two_calls_on_one_line_without_a_comma_are_a_syntax_error() {
    let r = all_ways("<function_calls>f() g()</function_calls>after");
    assert!(r.calls.is_empty());
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.text, "after");
    let r = all_ways("<function_calls>f(), g()</function_calls>");
    assert_eq!(r.calls.len(), 2);
}

#[test]
fn missing_close_and_cut_calls() {
    let r = all_ways("<function_calls>f(a=1)\n");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["missing_section_end"]);
    let r = all_ways("<function_calls>f(a=1)</function_ca");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["missing_section_end"]);
    let r = all_ways("<function_calls>f(a=\"x");
    assert!(r.calls.is_empty());
    assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
    let r = all_ways("<function_calls>");
    assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
}

#[test]
fn reasoning_opened_in_the_prompt_and_bare_lists() {
    let r = every_cut(
        &|| {
            let mut c = REASONING.config();
            c.starts_inside = true;
            Box::new(crate::formats::reasoning::Reasoned::new(
                parser(Config::default()),
                &REASONING,
                c,
            ))
        },
        b"plan</think>ok<function_calls>f()</function_calls>",
    )
    .0;
    assert_eq!(r.reasoning_text(), "plan");
    assert_eq!(r.text, "ok");
    assert_eq!(r.calls.len(), 1);
    // Without the wrapper, a call list is text unless the option reads it.
    let r = all_ways("f(a=1)\ng()");
    assert!(r.calls.is_empty());
    assert_eq!(r.text, "f(a=1)\ng()");
    let on = Config {
        missing_section_begin: true,
        ..Config::default()
    };
    let r = every_cut(&|| mk(on), b"  f(a=1)\ng()").0;
    assert_eq!(r.calls.len(), 2);
    assert_eq!(warnings(&r), ["missing_section_begin"]);
    let r = every_cut(&|| mk(on), b"  Note: f(x) is prose.").0;
    assert!(r.calls.is_empty() && r.errors.is_empty());
    assert_eq!(r.text, "  Note: f(x) is prose.");
    // Which is why the option is off: prose that starts `Word(` reads as a broken call.
    let r = every_cut(&|| mk(on), b"Note (this) is prose.").0;
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
}

#[test]
fn the_renderer_round_trips_and_refuses_what_it_cannot_write() {
    let calls = vec![
        ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": "東京 \"x\"\n", "n": null, "b": [true, 1.5], "o": {"k": false}}),
        },
        ToolCall {
            name: "get_time".into(),
            id: None,
            server: None,
            arguments: json!({}),
        },
    ];
    let out = String::from_utf8(render("Hi.", &calls, &Tools::default()).unwrap()).unwrap();
    assert_eq!(
        out,
        "Hi.<function_calls>get_weather(city=\"東京 \\\"x\\\"\\n\", n=null, b=[true, 1.5], o={\"k\": false})\nget_time()</function_calls>"
    );
    let r = all_ways(&out);
    assert_eq!(r.calls, calls);
    assert_eq!(r.text, "Hi.");
    for bad in ["a b", "class", "1x"] {
        let c = vec![ToolCall {
            name: bad.into(),
            ..calls[1].clone()
        }];
        assert!(render("", &c, &Tools::default()).is_err(), "{bad}");
    }
    assert!(render("<function_calls>", &[], &Tools::default()).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn split_invariant_in_cycling_small_chunks(
        parts in proptest::collection::vec(prop_oneof![
            Just(OPEN.to_string()), Just(CLOSE.to_string()), Just("<think>".to_string()),
            Just("</think>".to_string()), Just("f(".to_string()), Just("a=\"</function_calls>\"".to_string()),
            Just(")".to_string()), Just("\n".to_string()), Just(", ".to_string()), Just("null".to_string()),
            Just("True".to_string()), Just("<func".to_string()), Just("東京😀".to_string()),
            "[a-z0-9'\"\\[\\](),= <>/\n]{0,6}",
        ], 0..20),
        sizes in proptest::collection::vec(1usize..9, 1..6),
    ) {
        let bytes = parts.concat().into_bytes();
        let whole = ParseResult::fold(&run_chunks(mk(Config::default()).as_mut(), [bytes.as_slice()]));
        let evs = run_chunks(mk(Config::default()).as_mut(), cycled_chunks(&bytes, &sizes));
        check_delta_contract(&evs);
        prop_assert_eq!(&ParseResult::fold(&evs), &whole);
        let bytewise = ParseResult::fold(&run_chunks(mk(Config::default()).as_mut(), bytes.chunks(1)));
        prop_assert_eq!(&bytewise, &whole);
    }

    #[test]
    fn rendered_calls_parse_back(
        text in "( ?[a-z.]{1,10})?",
        calls in proptest::collection::vec(("[a-z_]{1,8}".prop_filter("a Python name", |n| is_identifier(n) && !matches!(n.as_str(), "true" | "false" | "null")), proptest::collection::btree_map("[a-z]{1,5}", arb_json("[a-z'\"\\\\()<>/\\[\\], \n]{0,8}"), 0..3)), 1..3),
        sizes in proptest::collection::vec(1usize..9, 1..6),
    ) {
        let calls: Vec<ToolCall> = calls.into_iter().map(|(name, args)| ToolCall {
            name, id: None, server: None,
            arguments: Value::Object(args.into_iter().collect()),
        }).collect();
        if let Ok(bytes) = render(&text, &calls, &Tools::default()) {
            let r = ParseResult::fold(&run_chunks(mk(Config::default()).as_mut(), cycled_chunks(&bytes, &sizes)));
            prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
            prop_assert_eq!(r.text, text);
            prop_assert_eq!(r.calls, calls);
        }
    }
}
