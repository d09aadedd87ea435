use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::core::testkit::{every_cut, fold_cut};
use proptest::prelude::*;
use serde_json::json;

fn parse_cfg(cfg: Config, s: &str) -> ParseResult {
    every_cut(&|| Box::new(Parser::new(cfg)), s.as_bytes()).0
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

const CALL_MSG: &str = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>";

#[test]
fn analysis_is_reasoning_and_a_call_follows() {
    let r = parse(&format!(
        "<|channel|>analysis<|message|>Need weather.<|end|>{CALL_MSG}"
    ));
    assert_eq!(r.reasoning_text(), "Need weather.");
    assert_eq!(r.text, "");
    assert_eq!(names(&r), ["get_weather"]);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
    assert!(r.errors.is_empty() && r.warnings.is_empty());
}

#[test]
fn the_first_message_may_carry_start_assistant_or_not() {
    let a = parse("<|channel|>final<|message|>Hi.<|return|>");
    let b = parse("<|start|>assistant<|channel|>final<|message|>Hi.<|return|>");
    assert_eq!(a, b);
    assert_eq!(a.text, "Hi.");
    assert!(a.errors.is_empty());
}

#[test]
fn final_and_preambles_are_text_in_order_without_separator() {
    let r = parse(
        "<|channel|>commentary<|message|>Checking. <|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>",
    );
    assert_eq!(r.text, "Checking. Sunny.");
    // A final answer cut before `<|return|>` (servers strip stop tokens) is the answer.
    let r = parse("<|channel|>final<|message|>Sun");
    assert_eq!(r.text, "Sun");
    assert!(r.errors.is_empty() && r.warnings.is_empty());
}

#[test]
fn the_recipient_may_be_in_the_role_or_the_channel_part() {
    for h in [
        " to=functions.f<|channel|>commentary json",
        "<|start|>assistant to=functions.f<|channel|>commentary <|constrain|>json",
        "<|channel|>commentary to=functions.f<|constrain|>json",
        "<|channel|>commentary to=functions.f json",
        "<|channel|>commentary to=functions.f",
    ] {
        let r = parse(&format!("{h}<|message|>{{\"a\":1}}<|call|>"));
        assert_eq!(names(&r), ["f"], "{h}");
        assert!(r.errors.is_empty(), "{h}: {:?}", r.errors);
    }
}

#[test]
fn a_functions_recipient_is_a_call_on_any_channel_and_the_name_loses_one_prefix() {
    let r = parse("<|channel|>analysis to=functions.functions.a.b code<|message|>{}<|call|>");
    assert_eq!(names(&r), ["functions.a.b"]);
    let r = parse("<|channel|>commentary to=functions.<|message|>{}<|call|>");
    assert_eq!(r.error_kinds(), [ErrorKind::MissingName]);
    assert!(r.calls.is_empty());
}

#[test]
fn builtin_recipients_are_calls_with_a_warning() {
    let r = parse("<|channel|>analysis to=browser.search<|message|>{\"query\":\"x\"}<|call|>");
    assert_eq!(names(&r), ["browser.search"]);
    assert_eq!(warnings(&r), ["builtin_recipient"]);
    let strict = Config {
        builtin_recipient: false,
        ..Config::default()
    };
    let r = parse_cfg(strict, "<|channel|>analysis to=python<|message|>{}<|call|>");
    assert_eq!(r.error_kinds(), [ErrorKind::UnknownTool]);
}

#[test]
fn other_terminators_after_a_call_keep_it_with_a_warning() {
    for t in ["<|end|>", "<|return|>"] {
        let r = parse(&format!(
            "<|channel|>commentary to=functions.f<|message|>{{}}{t}"
        ));
        assert_eq!(names(&r), ["f"]);
        assert_eq!(warnings(&r), ["call_terminator"]);
    }
    let strict = Config {
        call_terminator: false,
        ..Config::default()
    };
    let r = parse_cfg(
        strict,
        "<|channel|>commentary to=functions.f<|message|>{}<|end|>",
    );
    assert!(r.calls.is_empty());
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
}

#[test]
fn arguments_must_be_a_json_object() {
    let p = "<|channel|>commentary to=functions.f<|message|>";
    let kinds = |body: &str| parse(&format!("{p}{body}<|call|>")).error_kinds();
    assert_eq!(kinds("[1]"), [ErrorKind::InvalidJson]);
    assert_eq!(kinds("{\"a\":}"), [ErrorKind::InvalidJson]);
    assert_eq!(kinds("{\"a\":1"), [ErrorKind::InvalidJson]);
    assert_eq!(kinds("  \n"), [ErrorKind::EmptyArguments]);
    assert_eq!(kinds(""), [ErrorKind::EmptyArguments]);
    assert_eq!(kinds(" {\"a\": 1} \n"), []);
    // A terminator inside a JSON string still ends the message: it is a special token.
    // What follows is then outside any message.
    let r = parse(&format!("{p}{{\"a\":\"<|call|>\"}}<|call|>"));
    assert!(r.calls.is_empty());
    assert_eq!(r.error_kinds()[0], ErrorKind::InvalidJson);
}

#[test]
fn a_call_cut_by_the_end_of_the_stream() {
    let r = parse("<|channel|>commentary to=functions.f<|message|>{\"a\":1}");
    assert_eq!(names(&r), ["f"]);
    assert_eq!(warnings(&r), ["missing_call_end"]);
    let r = parse("<|channel|>commentary to=functions.f<|message|>{\"a\":");
    assert!(r.calls.is_empty());
    assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
    let strict = Config {
        missing_call_end: false,
        ..Config::default()
    };
    let r = parse_cfg(strict, "<|channel|>commentary to=functions.f<|message|>{}");
    assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
}

#[test]
fn a_message_cut_by_the_next_header() {
    let r = parse(
        "<|channel|>analysis<|message|>Think.<|start|>assistant<|channel|>commentary to=functions.f<|message|>{}<|channel|>final<|message|>Done.",
    );
    assert_eq!(r.reasoning_text(), "Think.");
    assert_eq!(r.text, "Done.");
    assert_eq!(names(&r), ["f"]);
    assert_eq!(warnings(&r), ["missing_end", "missing_call_end"]);
}

#[test]
fn whitespace_between_messages_is_ignored_and_other_text_is_not() {
    let r = parse(&format!(
        "<|channel|>analysis<|message|>a<|end|>\n\n{CALL_MSG}\n"
    ));
    assert!(r.errors.is_empty());
    assert_eq!(names(&r), ["get_weather"]);
    let r = parse(
        "<|channel|>final<|message|>a<|end|>stray<|start|>assistant<|channel|>final<|message|>b<|return|>",
    );
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.text, "ab");
}

#[test]
fn headers_without_message_are_malformed() {
    for s in [
        "<|channel|>final<|end|>",
        "<|channel|>commentary to=functions.f json<|call|>",
        "<|channel|>analysis",
        "plain text",
        "<|channel|>final<|start|>assistant<|channel|>final<|message|>x",
    ] {
        let r = parse(s);
        assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup], "{s}");
    }
    assert!(parse("").errors.is_empty());
    assert!(parse(" \n").errors.is_empty());
}

#[test]
fn bad_headers() {
    for h in [
        "<|start|>user<|channel|>final",
        "<|channel|>commentary<|channel|>final",
        "<|channel|>commentary to=functions.a to=functions.b",
        "<|channel|>summary",
        "<|channel|>commentary to=functions.f <|constrain|>",
        "<|channel|>",
    ] {
        let r = parse(&format!("{h}<|message|>{{}}<|end|>"));
        assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup], "{h}");
        assert!(r.calls.is_empty() && r.text.is_empty());
    }
}

#[test]
fn missing_start_after_a_message() {
    let r = parse("<|channel|>analysis<|message|>x<|end|><|channel|>final<|message|>y<|return|>");
    assert_eq!(r.text, "y");
    assert_eq!(warnings(&r), ["missing_start"]);
}

#[test]
fn unknown_tokens_in_content_are_content() {
    let r = parse("<|channel|>final<|message|>a <|refusal|> b <|im_end|> <| c<|return|>");
    assert_eq!(r.text, "a <|refusal|> b <|im_end|> <| c");
    let r = parse("<|channel|>final<|message|>a<|message|>b<|return|>");
    assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.text, "ab");
}

#[test]
fn unterminated_analysis_is_reasoning_with_a_warning() {
    let r = parse("<|channel|>analysis<|message|>hmm");
    assert_eq!(r.reasoning_text(), "hmm");
    assert_eq!(warnings(&r), ["unterminated_reasoning"]);
}

#[test]
fn limits() {
    let cfg = Config {
        max_header_bytes: 16,
        max_args_bytes: 8,
        ..Config::default()
    };
    let r = parse_cfg(
        cfg,
        "<|channel|>commentary to=functions.very_long_name<|message|>{}<|call|>",
    );
    assert_eq!(r.error_kinds(), [ErrorKind::LimitExceeded]);
    let cfg = Config {
        max_header_bytes: 40,
        ..cfg
    };
    let r = parse_cfg(
        cfg,
        "<|channel|>commentary to=functions.f<|message|>{\"a\":\"bcdef\"}<|call|><|start|>assistant<|channel|>final<|message|>ok",
    );
    assert_eq!(r.error_kinds(), [ErrorKind::LimitExceeded]);
    assert_eq!(r.text, "ok");
}

#[test]
fn invalid_utf8_in_arguments_drops_the_call() {
    let mut p = Parser::new(Config::default());
    let r = fold_cut(
        &mut p,
        b"<|channel|>commentary to=functions.f<|message|>{\"a\":\"\xff\"}<|call|>",
        &[],
    );
    assert!(r.calls.is_empty());
    assert_eq!(r.error_kinds(), [ErrorKind::InvalidUtf8]);
}

#[test]
fn indices_restart_per_turn_and_calls_repeat_within_one() {
    let two = format!("{CALL_MSG}{CALL_MSG}");
    let mut p = Parser::new(Config::default());
    let evs = crate::formats::run_chunks(&mut p, [two.as_bytes()]);
    assert_eq!(ParseResult::fold(&evs).calls.len(), 2);
    let evs = crate::formats::run_chunks(&mut p, [two.as_bytes()]);
    assert!(matches!(evs[0], Event::CallStart { index: 0, .. }));
}

#[test]
fn render_round_trips() {
    let calls = vec![ToolCall {
        name: "get_weather".into(),
        id: None,
        server: None,
        arguments: json!({"city": "Paris", "n": [1, 2]}),
    }];
    let bytes = render("It is sunny.", &calls, &Tools::default()).unwrap();
    let s = String::from_utf8(bytes).unwrap();
    assert!(s.starts_with(
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    ));
    let r = parse(&s);
    assert_eq!(r.text, "It is sunny.");
    assert_eq!(r.calls, calls);
    assert!(render("a<|end|>", &[], &Tools::default()).is_err());
}

proptest! {
    #[test]
    fn never_panics_and_is_split_invariant(s in "(<\\|(start|end|channel|message|call|return|constrain)\\|>|assistant|analysis|final|commentary| to=functions\\.f| json|\\{\\}|\\{\"a\":1\\}|x|\n|<\\||é){0,12}", cuts in proptest::collection::vec(0usize..200, 0..4)) {
        let whole = {
            let mut p = Parser::new(Config::default());
            fold_cut(&mut p, s.as_bytes(), &[])
        };
        let mut p = Parser::new(Config::default());
        prop_assert_eq!(fold_cut(&mut p, s.as_bytes(), &cuts), whole);
    }
}
