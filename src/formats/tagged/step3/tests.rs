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
    parse_with(Step3::config(), s)
}

fn inside() -> Config {
    let mut c = Step3::config();
    c.reasoning.starts_inside = true;
    c
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

const W: &str = "<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\"> 杭州 </steptml:parameter><steptml:parameter name=\"days\">3</steptml:parameter></steptml:invoke><｜tool_call_end｜>";
const T: &str = "<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_time\"></steptml:invoke><｜tool_call_end｜>";

#[test]
fn a_reasoned_turn_parses_under_every_cut() {
    let s = format!(
        "Need weather.</think>Let me check.<｜tool_calls_begin｜>{W}\n{T}<｜tool_calls_end｜>"
    );
    let r = parse_with(inside(), &s);
    assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    assert_eq!(r.reasoning_text(), "Need weather.");
    assert_eq!(r.text, "Let me check.");
    assert_eq!(r.calls[0].arguments, json!({"city": " 杭州 ", "days": 3}));
    assert_eq!(r.calls[1].arguments, json!({}));
}

#[test]
fn a_call_type_other_than_function_drops_that_call_only() {
    let bad = T.replace(">function<", ">retrieval<");
    let r = parse(&format!(
        "<｜tool_calls_begin｜>{bad}{W}<｜tool_calls_end｜>"
    ));
    assert_eq!(r.errors.len(), 1);
    assert_eq!(r.errors[0].kind, ErrorKind::MalformedMarkup);
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].name, "get_weather");
}

#[test]
fn markup_inside_a_value_is_content_and_a_missing_end_is_a_warning() {
    let s = "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\">a</steptml:parameter>b<steptml:invoke name=\"x\"></steptml:parameter></steptml:invoke><｜tool_call_end｜>";
    let r = parse(s);
    assert_eq!(
        r.calls[0].arguments,
        json!({"city": "a</steptml:parameter>b<steptml:invoke name=\"x\">"})
    );
    assert_eq!(warnings(&r), ["close_tag_in_value", "missing_section_end"]);
}

#[test]
fn the_wrappers_end_closes_a_call_whose_invoke_close_is_missing() {
    let s = "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"days\">4</steptml:parameter><｜tool_call_end｜><｜tool_calls_end｜>";
    let r = parse(s);
    assert_eq!(r.calls[0].arguments, json!({"days": 4}));
    assert_eq!(warnings(&r), ["missing_call_close"]);
}

#[test]
fn a_section_inside_reasoning_ends_it_with_a_warning() {
    let s = format!("Thinking<｜tool_calls_begin｜>{T}<｜tool_calls_end｜>");
    let r = parse_with(inside(), &s);
    assert_eq!(r.reasoning_text(), "Thinking");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["implicit_reasoning_end"]);
}

#[test]
fn unterminated_and_cut_calls() {
    let r = parse("<｜tool_calls_begin｜><｜tool_call_begin｜>func");
    assert_eq!(r.errors[0].kind, ErrorKind::Unterminated);
    let r = parse(
        "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\">Par",
    );
    assert_eq!(r.errors[0].kind, ErrorKind::Unterminated);
    assert!(r.calls.is_empty());
}

#[test]
fn a_type_over_the_tag_limit_is_limit_exceeded() {
    let long = "f".repeat(5000);
    let r = parse(&format!(
        "<｜tool_calls_begin｜><｜tool_call_begin｜>{long}<｜tool_sep｜>"
    ));
    assert_eq!(r.errors[0].kind, ErrorKind::LimitExceeded);
}

#[test]
fn the_renderer_round_trips_and_refuses_what_would_not_parse_back() {
    let calls = vec![
        ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": " 3 ", "opts": {"a": [1, null]}}),
        },
        ToolCall {
            name: "get_time".into(),
            id: None,
            server: None,
            arguments: json!({}),
        },
    ];
    let out = String::from_utf8(tagged::render::<Step3>("Hi.", &calls, &tools()).unwrap()).unwrap();
    assert_eq!(
        out,
        format!(
            "Hi.<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\"> 3 </steptml:parameter><steptml:parameter name=\"opts\">{{\"a\":[1,null]}}</steptml:parameter></steptml:invoke><｜tool_call_end｜>{T}<｜tool_calls_end｜>"
        )
    );
    assert_eq!(parse(&out).calls, calls);
    let bad = vec![ToolCall {
        arguments: json!({"city": "a</steptml:parameter></steptml:invoke>"}),
        ..calls[0].clone()
    }];
    assert!(tagged::render::<Step3>("", &bad, &tools()).is_err());
    // An integer's schema cannot carry the string "3".
    let bad = vec![ToolCall {
        arguments: json!({"days": "3"}),
        ..calls[0].clone()
    }];
    assert!(tagged::render::<Step3>("", &bad, &tools()).is_err());
}

/// Step-3 pieces, reasoning tags and text, in any order.
fn soup() -> impl Strategy<Value = Vec<u8>> {
    let pieces = [
        "<｜tool_calls_begin｜>",
        "<｜tool_calls_end｜>",
        "<｜tool_call_begin｜>",
        "function",
        "<｜tool_sep｜>",
        "<｜tool_call_end｜>",
        "<steptml:invoke name=\"get_weather\">",
        "<steptml:invoke name=\"get_time\">",
        "</steptml:invoke>",
        "<steptml:parameter name=\"city\">",
        "<steptml:parameter name=\"days\">",
        "<steptml:parameter name=\"opts\">",
        "</steptml:parameter>",
        "{\"a\": [1]}",
        "<think>",
        "</think>",
        " 杭州 😀 ",
        "\n",
        "3",
        "<｜tool",
        "<steptml:",
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
        inside in any::<bool>(),
    ) {
        let t = tools();
        let mut cfg = Step3::config();
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
        if let Ok(out) = tagged::render::<Step3>(&text, &calls, &tools()) {
            let t = tools();
            let mk = || tagged::boxed(&GRAMMAR, Step3::config(), &t);
            let r = ParseResult::fold(&run_chunks(mk().as_mut(), out.chunks(3)));
            prop_assert_eq!(r.calls, calls);
            prop_assert_eq!(r.text, text);
        }
    }
}
