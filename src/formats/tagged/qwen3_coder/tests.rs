use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::StreamParser;
use crate::formats::core::testkit::{every_cut, fold_cut};
use crate::formats::tagged::Member;
use crate::tools::Tools;
use proptest::prelude::*;
use serde_json::{Value, json};

fn tools() -> Tools {
    Tools::from_json(
        r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},"opts":{"type":"object"},"tags":{"type":"array"},"temp":{"type":["number","null"]}}}},
            {"name":"write_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}},
            {"name":"get_time","parameters":{"type":"object","properties":{}}}]"#,
    )
    .unwrap()
}

fn parse_with(cfg: Config, s: &str) -> ParseResult {
    let t = tools();
    every_cut(
        &|| Box::new(tagged::Parser::new(&GRAMMAR, cfg, &t)),
        s.as_bytes(),
    )
    .0
}

fn parse(s: &str) -> ParseResult {
    parse_with(Qwen3Coder::config(), s)
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

fn errors(r: &ParseResult) -> Vec<ErrorKind> {
    r.errors.iter().map(|e| e.kind).collect()
}

fn args(r: &ParseResult, i: usize) -> &Value {
    &r.calls[i].arguments
}

#[test]
fn template_call_with_typed_values() {
    let r = parse(
        "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=temp>\n21.0\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(errors(&r), []);
    assert_eq!(r.text, "Let me check.\n\n");
    assert_eq!(r.calls[0].name, "get_weather");
    assert_eq!(r.calls[0].id, None);
    assert_eq!(
        args(&r, 0),
        &json!({"city": "Paris", "days": 3, "metric": true, "temp": 21.0})
    );
    assert!(args(&r, 0)["temp"].is_f64());
}

#[test]
fn exactly_one_newline_is_stripped_on_each_side() {
    let r = parse(
        "<tool_call>\n<function=write_file>\n<parameter=content>\n\n  x = 1\n\n\n</parameter>\n<parameter=path>\r\na.py\r\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(
        args(&r, 0),
        &json!({"content": "\n  x = 1\n\n", "path": "a.py"})
    );
    // No padding at all: nothing is stripped.
    let r = parse(
        "<tool_call><function=write_file><parameter=path>a.py</parameter></function></tool_call>",
    );
    assert_eq!(args(&r, 0), &json!({"path": "a.py"}));
    let r = parse(
        "<tool_call><function=write_file><parameter=path>\r</parameter><parameter=content>a\r</parameter></function></tool_call>",
    );
    assert_eq!(args(&r, 0), &json!({"path": "\r", "content": "a\r"}));
}

#[test]
fn no_entity_decoding_and_markup_characters_kept() {
    let r = parse(
        "<tool_call>\n<function=write_file>\n<parameter=content>\nif a < b && c > d: print(\"&amp; 'x'\")\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(
        args(&r, 0)["content"],
        json!("if a < b && c > d: print(\"&amp; 'x'\")")
    );
}

#[test]
fn a_close_tag_inside_code_is_content() {
    let code = "s = '</parameter>'\nt = \"</function></tool_call>\"\n</parameter>x";
    let r = parse(&format!(
        "<tool_call>\n<function=write_file>\n<parameter=content>\n{code}\n</parameter>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>"
    ));
    assert_eq!(errors(&r), []);
    assert_eq!(args(&r, 0), &json!({"content": code, "path": "a"}));
    assert!(warnings(&r).contains(&"close_tag_in_value"));
    let off = Config {
        close_tag_in_value: false,
        ..Qwen3Coder::config()
    };
    let r = parse_with(
        off,
        "<tool_call>\n<function=write_file>\n<parameter=content>\na</parameter>b\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    assert!(r.calls.is_empty());
}

#[test]
fn a_close_tag_before_the_block_end_closes_a_call_missing_its_end() {
    let r = parse(
        "<tool_call>\n<function=write_file>\n<parameter=path>\na\n</parameter>\n</tool_call>",
    );
    assert_eq!(args(&r, 0), &json!({"path": "a"}));
    assert_eq!(warnings(&r), ["missing_call_close"]);
}

#[test]
fn values_failing_their_type_stay_strings_with_a_warning() {
    let r = parse(
        "<tool_call>\n<function=get_weather>\n<parameter=days>\n2026-01-15\n</parameter>\n<parameter=metric>\nyes\n</parameter>\n<parameter=opts>\n{'a': None}\n</parameter>\n<parameter=tags>\n[1, \n</parameter>\n<parameter=temp>\nnull\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(
        args(&r, 0),
        &json!({"days": "2026-01-15", "metric": "yes", "opts": {"a": null}, "tags": "[1, ", "temp": null})
    );
    assert_eq!(
        warnings(&r),
        [
            "type_mismatch",
            "type_mismatch",
            "python_literal",
            "type_mismatch"
        ]
    );
}

#[test]
fn unknown_tools_and_parameters_are_kept_as_strings() {
    let r = parse(
        "<tool_call>\n<function=launch>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call><tool_call>\n<function=get_weather>\n<parameter=zoom>\n5\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(args(&r, 0), &json!({"n": "5"}));
    assert_eq!(args(&r, 1), &json!({"zoom": "5"}));
    assert_eq!(warnings(&r), ["unknown_tool", "unknown_parameter"]);
}

#[test]
fn parallel_and_no_argument_calls_and_text_between() {
    let r = parse(
        "A\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>\nthen\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>\n",
    );
    assert_eq!(r.text, "A\n\nthen\n");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(args(&r, 1), &json!({}));
    // Several functions in one block (vLLM and SGLang accept it).
    let r = parse(
        "<tool_call>\n<function=get_time>\n</function>\n<function=get_time>\n</function>\n</tool_call>",
    );
    assert_eq!(r.calls.len(), 2);
    // Text after the calls is kept, with a warning.
    let r = parse("<tool_call>\n<function=get_time>\n</function>\n</tool_call>\nDone.");
    assert_eq!(
        (r.text.as_str(), warnings(&r)),
        ("\nDone.", vec!["text_after_calls"])
    );
}

#[test]
fn whitespace_only_text_next_to_calls_is_dropped_but_text_alone_is_kept() {
    let r = parse("\n\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>\n\n");
    assert_eq!(r.text, "");
    let r = parse("  \n ");
    assert_eq!(r.text, "  \n ");
}

#[test]
fn truncation_is_unterminated_and_a_missing_block_end_a_warning() {
    for cut in [
        "<tool_call>\n<function=write_file>\n<parameter=content>\nhalf a fi",
        "<tool_call>\n<function=write_fi",
        "<tool_call>\n<function=write_file>\n<parameter=content>\nx\n</parameter>\n",
        "<tool_call>\n<function=write_file>\n<parameter=content>\nx\n</parameter>",
    ] {
        let r = parse(cut);
        assert_eq!(errors(&r), [ErrorKind::Unterminated], "{cut:?}");
        assert!(r.calls.is_empty());
        assert_eq!(r.text, "");
    }
    let r = parse("<tool_call>\n<function=get_time>\n</function>\n");
    assert_eq!((r.calls.len(), warnings(&r)), (1, vec!["missing_call_end"]));
    let off = Config {
        missing_block_end: false,
        ..Qwen3Coder::config()
    };
    let r = parse_with(off, "<tool_call>\n<function=get_time>\n</function>\n");
    assert_eq!(errors(&r), [ErrorKind::Unterminated]);
}

#[test]
fn a_missing_gt_costs_one_warning_not_every_call() {
    let r = parse(
        "<tool_call>\n<function=get_weather>\n<parameter=city\nParis\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time\n</function>\n</tool_call>",
    );
    assert_eq!(errors(&r), []);
    assert_eq!(args(&r, 0), &json!({"city": "Paris"}));
    assert_eq!(r.calls[1].name, "get_time");
    assert_eq!(warnings(&r), ["missing_gt", "missing_gt"]);
    let off = Config {
        missing_gt: false,
        ..Qwen3Coder::config()
    };
    let r = parse_with(
        off,
        "<tool_call>\n<function=get_weather>\n<parameter=city\nParis\n</parameter>\n</function>\n</tool_call><tool_call>\n<function=get_time>\n</function>\n</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.calls.len(), 1);
}

#[test]
fn bad_names_and_empty_names_drop_only_their_call() {
    let r = parse(
        "<tool_call>\n<function=>\n</function>\n</tool_call><tool_call>\n<function=a b>\n</function>\n</tool_call><tool_call>\n<function=get_time>\n</function>\n</tool_call>",
    );
    assert_eq!(
        errors(&r),
        [ErrorKind::MissingName, ErrorKind::MalformedMarkup]
    );
    assert_eq!(r.calls.len(), 1);
}

#[test]
fn calls_without_the_wrapper_need_a_declared_tool() {
    let r = parse("Sure.\n<function=get_time>\n</function>\nok");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.text, "Sure.\n\nok");
    assert_eq!(warnings(&r), ["missing_wrapper", "text_after_calls"]);
    let r = parse("Write <function=foo> in docs <function=get_tim");
    assert_eq!(
        (r.calls.len(), r.text.as_str()),
        (0, "Write <function=foo> in docs <function=get_tim")
    );
    let off = Config {
        missing_wrapper: false,
        ..Qwen3Coder::config()
    };
    let r = parse_with(off, "<function=get_time>\n</function>");
    assert_eq!(r.calls.len(), 0);
}

#[test]
fn long_values_stream_as_they_arrive() {
    let big = "x<y>&\u{1F600}中\n".repeat(3000);
    let input = format!(
        "<tool_call>\n<function=write_file>\n<parameter=content>\n{big}\n</parameter>\n</function>\n</tool_call>"
    );
    let t = tools();
    let mut p = tagged::Parser::new(&GRAMMAR, Qwen3Coder::config(), &t);
    let mut out = Vec::new();
    let mid = input.len() / 2;
    p.feed(&input.as_bytes()[..mid], &mut out);
    let streamed: usize = out
        .iter()
        .map(|e| match e {
            crate::event::Event::ArgsDelta { json, .. } => json.len(),
            _ => 0,
        })
        .sum();
    assert!(streamed > mid / 2, "only {streamed} bytes streamed");
    p.feed(&input.as_bytes()[mid..], &mut out);
    p.finish(&mut out);
    let r = ParseResult::fold(&out);
    assert_eq!(args(&r, 0)["content"], json!(big));
}

#[test]
fn limits_give_limit_exceeded() {
    let small = Config {
        max_value_bytes: 10,
        max_tag_bytes: 8,
        ..Qwen3Coder::config()
    };
    let r = parse_with(
        small,
        "<tool_call>\n<function=write_file>\n<parameter=content>\n01234567890\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::LimitExceeded]);
    let r = parse_with(
        small,
        "<tool_call>\n<function=get_weather_now>\n</function>\n</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::LimitExceeded]);
}

#[test]
fn unreadable_schemas_are_named_and_values_kept() {
    // `false` compiles as JSON Schema but accepts no value: the typing cannot choose a type.
    let t = Tools::from_json(
        r#"[{"name":"f","parameters":{"type":"object","properties":{"n":false}}}]"#,
    )
    .unwrap();
    let r = fold_cut(
        &mut tagged::Parser::new(&GRAMMAR, Qwen3Coder::config(), &t),
        b"<tool_call>\n<function=f>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>",
        &[],
    );
    assert_eq!(args(&r, 0), &json!({"n": "5"}));
    assert!(r.warnings[0].message.contains("\"f\"") && r.warnings[0].message.contains("\"n\""));
}

#[test]
fn invalid_utf8_drops_the_call() {
    let t = tools();
    let r = fold_cut(
        &mut tagged::Parser::new(&GRAMMAR, Qwen3Coder::config(), &t),
        b"<tool_call>\n<function=write_file>\n<parameter=path>\n\xff\n</parameter>\n</function>\n</tool_call>",
        &[],
    );
    assert_eq!(errors(&r), [ErrorKind::InvalidUtf8]);
    assert!(r.calls.is_empty());
}

#[test]
fn renderer_writes_the_template_and_refuses_what_cannot_come_back() {
    let calls = vec![ToolCall {
        name: "get_weather".into(),
        id: None,
        server: None,
        arguments: json!({"city": "Paris", "days": 3}),
    }];
    let out =
        String::from_utf8(tagged::render::<Qwen3Coder>("Hi", &calls, &tools()).unwrap()).unwrap();
    assert_eq!(
        out,
        "Hi<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
    );
    let bad = |args: Value| {
        let c = vec![ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: args,
        }];
        tagged::render::<Qwen3Coder>("", &c, &tools())
    };
    // 3 as a string would come back as the integer its schema says.
    assert!(bad(json!({"days": "3"})).is_err());
    assert!(bad(json!({"city": "a\n</parameter>\n</function>"})).is_err());
    assert!(tagged::render::<Qwen3Coder>("<tool_call>", &[], &tools()).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn tag_soup_never_panics_and_is_split_invariant(
        parts in proptest::collection::vec(prop_oneof![
            Just("<tool_call>"), Just("</tool_call>"), Just("<function=get_weather>"), Just("<function="),
            Just("</function>"), Just("<parameter=city>"), Just("<parameter=days>"), Just("</parameter>"),
            Just("\n"), Just(" "), Just("x"), Just(">"), Just("7"), Just("é"), Just("<"),
        ], 0..24),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let s: String = parts.concat();
        let t = tools();
        let whole = fold_cut(&mut tagged::Parser::new(&GRAMMAR, Qwen3Coder::config(), &t), s.as_bytes(), &[]);
        let cut = fold_cut(&mut tagged::Parser::new(&GRAMMAR, Qwen3Coder::config(), &t), s.as_bytes(), &cuts);
        prop_assert_eq!(whole, cut);
    }

    #[test]
    fn rendered_strings_parse_back(content in "[a-z<>/&\n ]{0,40}", path in "[a-z./]{1,12}") {
        let calls = vec![ToolCall {
            name: "write_file".into(),
            id: None,
            server: None,
            arguments: json!({"path": path, "content": content}),
        }];
        if let Ok(bytes) = tagged::render::<Qwen3Coder>("", &calls, &tools()) {
            let r = parse(std::str::from_utf8(&bytes).unwrap());
            prop_assert_eq!(r.calls, calls);
        }
    }
}

#[test]
fn a_tag_cut_by_another_tag_is_malformed() {
    let r = parse(
        "<tool_call>\n<function=get_weather>\n<parameter=city<parameter=days>\n3\n</parameter>\n</function>\n</tool_call><tool_call>\n<function=get_time>\n</function>\n</tool_call>",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    assert_eq!(r.calls.len(), 1);
}

#[test]
fn a_parameter_given_twice_keeps_the_last() {
    let r = parse(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=days>\n1\n</parameter>\n<parameter=city>\nB\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(args(&r, 0), &json!({"city": "B", "days": 1}));
    assert_eq!(warnings(&r), ["duplicate_parameter"]);
}

#[test]
fn text_inside_a_block_is_kept_with_a_warning_or_refused() {
    let s = "<tool_call>\n(one moment)\n<function=get_time>\n</function>\n</tool_call>";
    let r = parse(s);
    assert_eq!(
        (r.text.as_str(), warnings(&r)),
        ("\n(one moment)\n", vec!["text_in_block"])
    );
    let off = Config {
        text_in_block: false,
        text_after_calls: false,
        ..Qwen3Coder::config()
    };
    let r = parse_with(off, s);
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
    assert_eq!((r.text.as_str(), r.calls.len()), ("", 1));
    let r = parse_with(
        off,
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>\nafter",
    );
    assert_eq!(errors(&r), [ErrorKind::MalformedMarkup]);
}

#[test]
fn null_is_null_where_the_value_cannot_be_a_string() {
    let r = parse(
        "<tool_call>\n<function=get_weather>\n<parameter=days>\nnull\n</parameter>\n<parameter=city>\nnull\n</parameter>\n</function>\n</tool_call>",
    );
    assert_eq!(args(&r, 0), &json!({"days": null, "city": "null"}));
    assert_eq!(warnings(&r), ["null_not_allowed"]);
}
