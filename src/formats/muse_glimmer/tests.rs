use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::core::testkit::{every_cut, fold_cut};
use proptest::prelude::*;
use serde_json::json;

fn tools() -> Tools {
    Tools::from_json(
        r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"content":{"type":"string"}}}},{"name":"get_time","parameters":{}}]"#,
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

fn names(r: &ParseResult) -> Vec<&str> {
    r.calls.iter().map(|c| c.name.as_str()).collect()
}

const CALL: &str = "<atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"city\">Paris</atem:parameter>\n<atem:parameter name=\"days\">3</atem:parameter>\n</atem:invoke>\n</atem:function_calls>";

#[test]
fn reasoning_call_and_answer_route_by_recipient() {
    let r = parse(&format!(
        " to=self<|message|>Need the weather.<|eom|><|start|>assistant to=get_weather<|message|>{CALL}<|eom|><|start|>assistant to=user<|message|>It is sunny.<|eot|>"
    ));
    assert!(r.is_success(), "{r:?}");
    assert_eq!(r.reasoning_text(), "Need the weather.");
    assert_eq!(r.text, "It is sunny.");
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris", "days": 3}));
    assert!(r.warnings.is_empty());
}

#[test]
fn messages_and_invokes_count_calls_across_the_turn() {
    let two = "<atem:function_calls>\n<atem:invoke name=\"get_time\">\n</atem:invoke>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"city\">Rome</atem:parameter>\n</atem:invoke>\n</atem:function_calls>";
    let r = parse(&format!(
        " to=get_weather<|message|>{CALL}<|eom|><|start|>assistant to=functions<|message|>{two}<|eom|>"
    ));
    assert_eq!(names(&r), ["get_weather", "get_time", "get_weather"]);
    assert_eq!(r.calls[1].arguments, json!({}));
    assert_eq!(warnings(&r), ["recipient_mismatch", "recipient_mismatch"]);
}

#[test]
fn atem_outside_a_tool_message_is_data() {
    let r = parse(&format!(
        " to=self<|message|>{CALL}<|eom|><|start|>assistant to=user<|message|>{CALL}<|eot|>"
    ));
    assert!(r.calls.is_empty());
    assert_eq!(r.reasoning_text(), CALL);
    assert_eq!(r.text, CALL);
}

#[test]
fn a_missing_eom_keeps_the_next_call() {
    let r = parse(&format!(
        " to=self<|message|>think<|start|>assistant to=get_weather<|message|>{CALL}"
    ));
    assert_eq!(names(&r), ["get_weather"]);
    assert_eq!(warnings(&r), ["missing_message_end", "missing_message_end"]);
    let off = Config {
        missing_message_end: false,
        ..Config::default()
    };
    let r = parse_cfg(
        off,
        &format!(
            " to=self<|message|>think<|start|>assistant to=get_weather<|message|>{CALL}<|eom|>"
        ),
    );
    assert_eq!(r.errors[0].kind, ErrorKind::MalformedMarkup);
}

#[test]
fn doubled_names_collapse_and_unknown_tools_stay() {
    let r = parse(
        " to=get_time.get_time<|message|><atem:function_calls>\n<atem:invoke name=\"get_time.get_time\">\n</atem:invoke>\n</atem:function_calls><|eom|>",
    );
    assert_eq!(names(&r), ["get_time"]);
    assert_eq!(warnings(&r), ["name_normalised"]);
    let r = parse(
        " to=search<|message|><atem:function_calls>\n<atem:invoke name=\"search\">\n<atem:parameter name=\"q\">{\"a\":1}</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eom|>",
    );
    assert_eq!(names(&r), ["search"]);
    assert_eq!(warnings(&r), ["unknown_tool"]);
}

#[test]
fn string_values_are_verbatim_and_closers_inside_them_are_content() {
    let r = parse(
        " to=get_weather<|message|><atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"content\">  {\"k\": 1}</atem:parameter> x</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eom|>",
    );
    assert_eq!(
        r.calls[0].arguments,
        json!({"content": "  {\"k\": 1}</atem:parameter> x"})
    );
    assert_eq!(warnings(&r), ["close_tag_in_value"]);
}

#[test]
fn unterminated_invoke_and_bad_headers_are_errors() {
    let r = parse(
        " to=get_weather<|message|><atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"city\">Par",
    );
    assert_eq!(r.errors[0].kind, ErrorKind::Unterminated);
    let r = parse(
        " to=get_weather<|message|><atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"city\">Par<|eom|><|start|>assistant to=user<|message|>ok<|eot|>",
    );
    assert_eq!(r.errors[0].kind, ErrorKind::Unterminated);
    assert_eq!(r.text, "ok");
    let r = parse("<|start|>user<|message|>hi<|eot|>");
    assert_eq!(r.errors[0].kind, ErrorKind::MalformedMarkup);
    let r = parse(" to=self<|message|>a<|message|>b<|eom|>");
    assert_eq!(r.errors[0].kind, ErrorKind::MalformedMarkup);
    let r = parse(" to=user<|message|>a<|eom|>stray<|start|>assistant to=user<|message|>b<|eot|>");
    assert_eq!(r.errors[0].kind, ErrorKind::MalformedMarkup);
}

#[test]
fn a_header_without_start_is_read_with_a_warning() {
    let r = parse(" to=self<|message|>a<|eom|> to=user<|message|>b<|eot|>");
    assert_eq!(r.text, "b");
    assert_eq!(warnings(&r), ["missing_start"]);
}

#[test]
fn spark_channels_are_an_option() {
    let s =
        " to=commentary<|message|>note<|eom|><|start|>assistant to=developer<|message|>x<|eom|>";
    // Glimmer: both are tool messages, whose prose outside ATEM is text.
    let r = parse(s);
    assert!(r.errors.is_empty());
    assert_eq!(r.text, "notex");
    let spark = Config {
        muse_spark_channels: true,
        ..Config::default()
    };
    let r = parse_cfg(spark, s);
    assert_eq!(r.text, "note");
}

#[test]
fn header_over_the_limit_is_limit_exceeded() {
    let r = parse(&format!(" to={}<|message|>x<|eom|>", "a".repeat(2000)));
    assert_eq!(r.errors[0].kind, ErrorKind::LimitExceeded);
}

#[test]
fn renderer_round_trips() {
    let calls = vec![
        ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: json!({"city": "Zürich 🌧", "days": 1}),
        },
        ToolCall {
            name: "get_time".into(),
            id: None,
            server: None,
            arguments: json!({}),
        },
    ];
    let out = render("Done.", &calls, &tools()).unwrap();
    let r = parse(std::str::from_utf8(&out).unwrap());
    assert_eq!(r.calls, calls);
    assert_eq!(r.text, "Done.");
    assert!(render("a<|eom|>", &[], &tools()).is_err());
}

proptest! {
    #[test]
    fn never_panics_and_is_split_invariant(s in "(<\\|(start|message|eom|eot)\\|>|assistant| to=self| to=user| to=get_weather|<atem:function_calls>|</atem:function_calls>|<atem:invoke name=\"get_time\">|</atem:invoke>|<atem:parameter name=\"days\">|</atem:parameter>|3|x|\n|<\\||<atem|é){0,14}", cuts in proptest::collection::vec(0usize..300, 0..5)) {
        let t = tools();
        let whole = {
            let mut p = Parser::new(Config::default(), &t);
            fold_cut(&mut p, s.as_bytes(), &[])
        };
        let mut p = Parser::new(Config::default(), &t);
        prop_assert_eq!(fold_cut(&mut p, s.as_bytes(), &cuts), whole);
    }
}
