use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::core::testkit::{every_cut, fold_cut};
use crate::formats::reasoning;
use proptest::prelude::*;
use serde_json::json;

fn all_ways(s: &str) -> ParseResult {
    every_cut(&|| Box::new(parser(Config::default())), s.as_bytes()).0
}

fn with(cfg: Config, s: &str) -> ParseResult {
    every_cut(&move || Box::new(parser(cfg)), s.as_bytes()).0
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

#[test]
fn the_sheet_example_is_two_calls() {
    let r = all_ways(
        " \n[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", \"arguments\": {}}]\n",
    );
    assert_eq!(r.text, "");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
    assert_eq!(r.calls[1].name, "get_time");
    assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
}

#[test]
fn json_that_names_no_call_is_text() {
    for s in [
        "[1, 2, 3]",
        "[{\"answer\": 42}, {\"name\": \"f\", \"arguments\": {}}]",
        "[\"a\", {\"name\": \"f\"}]",
        "  {\"answer\": 42} is it",
        "[{\"a\": 1, \"b\": [tru",
        "[{\"city\": \"Paris\"",
        "[",
        "Here: [{\"name\": \"f\", \"arguments\": {}}]",
        "```python\nprint([{\"name\": 1}])\n```",
        "```json\n{\"answer\": 42}\n```",
        "[TOOL_CALLS] sorry, no tool fits",
        "<tool_call>none</tool_call>",
        "``` `` `` ```",
        "```JSON\n[{\"name\": \"f\", \"arguments\": {}}]\n```",
        "</tool_call>",
    ] {
        let r = all_ways(s);
        assert!(r.calls.is_empty() && r.errors.is_empty(), "{s}: {r:?}");
        assert_eq!(r.text, s);
        assert!(r.warnings.is_empty(), "{s}");
    }
}

#[test]
fn the_empty_list_names_no_call_it_is_text() {
    for s in ["[]", " [ ] \nNothing to call.", "```json\n[]\n```"] {
        let r = all_ways(s);
        assert_eq!(r.text, s);
        assert!(r.calls.is_empty() && r.errors.is_empty() && r.warnings.is_empty());
    }
}

#[test]
fn wrappers_are_read_anywhere_with_a_warning() {
    let call = "[{\"name\": \"f\", \"arguments\": {\"s\": \"```</tool_call>[TOOL_CALLS]\"}}]";
    for (s, text) in [
        (format!("Sure.\n```json\n{call}\n```"), "Sure.\n"),
        (format!("```\n{call}```\nDone."), "\nDone."),
        (format!("```json{call}```"), ""),
        (format!("A[TOOL_CALLS]{call}\nB"), "A\nB"),
        (format!("<tool_call>\n{call}\n</tool_call>"), ""),
    ] {
        let r = all_ways(&s);
        assert_eq!(r.calls.len(), 1, "{s}");
        assert_eq!(
            r.calls[0].arguments,
            json!({"s": "```</tool_call>[TOOL_CALLS]"})
        );
        assert_eq!(r.text, text, "{s}");
        assert_eq!(warnings(&r), ["json_wrapper"], "{s}");
        assert!(r.errors.is_empty());
        let strict = Config {
            json_wrapper: false,
            ..Config::default()
        };
        let r = with(strict, &s);
        assert!(r.calls.is_empty() && r.errors.is_empty(), "{s}");
        assert_eq!(r.text, s);
    }
}

#[test]
fn a_single_object_and_parameters_are_options() {
    let r = all_ways("{\"name\": \"f\", \"parameters\": {\"a\": 1}}");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].arguments, json!({"a": 1}));
    let mut w = warnings(&r);
    w.sort();
    assert_eq!(w, ["object_not_array", "parameters_key"]);
    let r = all_ways("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
    assert_eq!(r.calls.len(), 1);
    let strict = Config {
        object_not_array: false,
        parameters_key: false,
        ..Config::default()
    };
    let s = "{\"name\": \"f\", \"arguments\": {}}";
    let r = with(strict, s);
    assert!(r.calls.is_empty() && r.errors.is_empty());
    assert_eq!(r.text, s);
    let r = with(strict, "[{\"name\": \"f\", \"parameters\": {}}]");
    assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
}

#[test]
fn broken_named_lists() {
    for (s, kind, calls, text) in [
        (
            "[{\"name\": \"f\", \"arguments\": {\"a\": }}]",
            ErrorKind::InvalidJson,
            0,
            "",
        ),
        (
            "[{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"a\": 1",
            ErrorKind::Unterminated,
            1,
            "",
        ),
        (
            "[{\"name\": \"f\", \"arguments\": {}}, ",
            ErrorKind::Unterminated,
            1,
            "",
        ),
        (
            "[{\"name\": \"f\", \"arguments\": [1]}, {\"name\": \"g\", \"arguments\": {}}]",
            ErrorKind::InvalidJson,
            1,
            "",
        ),
        (
            "[{\"name\": \"f\", \"arguments\": {}}, {\"answer\": 1}]",
            ErrorKind::MissingName,
            1,
            "",
        ),
        (
            "[{\"name\": \"\", \"arguments\": {}}]",
            ErrorKind::MissingName,
            0,
            "",
        ),
        ("[{\"name\": \"f\"}]", ErrorKind::InvalidJson, 0, ""),
        (
            "[{\"name\": \"f\", \"arguments\": {}},]",
            ErrorKind::InvalidJson,
            1,
            "",
        ),
        (
            "```json\n[{\"name\": \"f\", \"arguments\": {]}\n```after",
            ErrorKind::InvalidJson,
            0,
            "after",
        ),
    ] {
        let r = all_ways(s);
        assert_eq!(r.error_kinds(), vec![kind], "{s}");
        assert_eq!(r.calls.len(), calls, "{s}");
        assert_eq!(r.text, text, "{s}");
    }
}

#[test]
fn text_after_the_list_and_a_missing_close() {
    let r = all_ways("[{\"name\": \"f\", \"arguments\": {}}]\n\nI called f.");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.text, "\n\nI called f.");
    let r = all_ways("```json\n[{\"name\": \"f\", \"arguments\": {}}]\n");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["json_wrapper", "missing_section_end"]);
    let r = all_ways("<tool_call>[{\"name\": \"f\", \"arguments\": {}}] then");
    assert_eq!(r.text, " then");
    assert_eq!(warnings(&r), ["json_wrapper", "missing_section_end"]);
    let strict = Config {
        missing_section_end: false,
        ..Config::default()
    };
    let r = with(strict, "```json\n[{\"name\": \"f\", \"arguments\": {}}]");
    assert_eq!(r.error_kinds(), vec![ErrorKind::MalformedMarkup]);
}

#[test]
fn reasoning_before_the_list() {
    let mk = || reasoning::wrap(parser(Config::default()), &REASONING);
    let r = every_cut(
        &mk,
        b"<think>Need the weather.</think>\n\n[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
    )
    .0;
    assert_eq!(r.reasoning_text(), "Need the weather.");
    assert_eq!(r.text, "");
    assert_eq!(r.calls.len(), 1);
    assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
}

#[test]
fn limits_and_the_renderer() {
    let deep = format!(
        "[{{\"name\": \"f\", \"arguments\": {{\"a\": {}{}}}}}]",
        "[".repeat(200),
        "]".repeat(200)
    );
    assert_eq!(
        all_ways(&deep).error_kinds(),
        vec![ErrorKind::LimitExceeded]
    );
    let long = "n".repeat(Limits::default().max_header_bytes + 1);
    let r = all_ways(&format!("[{{\"name\": \"{long}\", \"arguments\": {{}}}}]"));
    assert_eq!(r.error_kinds(), vec![ErrorKind::LimitExceeded]);
    let call = |name: &str| ToolCall {
        name: name.into(),
        id: None,
        server: None,
        arguments: json!({}),
    };
    let t = Tools::default();
    assert!(render("", &[call(&long)], &t).is_err());
    assert!(render("", &[call(&long[1..])], &t).is_ok());
    assert!(render("a ``` b", &[], &t).is_err());
    assert!(render(" [1]", &[], &t).is_err());
    assert!(render("<think>", &[], &t).is_err());
    assert!(render(" ", &[call("f")], &t).is_err());
    assert_eq!(
        render("", &[call("f")], &t).unwrap(),
        b"[{\"name\": \"f\", \"arguments\": {}}]"
    );
    let mut c = call("f");
    c.id = Some("1".into());
    assert!(render("", &[c], &t).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    #[test]
    fn rendered_calls_parse_back_under_cuts(
        text in "[^<\\[{`]{0,12}",
        calls in proptest::collection::vec(("[a-z_]{1,8}", crate::formats::core::testkit::arb_json("[a-z<>`|\\[\\]{}_ \"\\\\]{0,8}")), 0..3),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let calls: Vec<ToolCall> = calls.into_iter().map(|(name, v)| ToolCall {
            name, id: None, server: None,
            arguments: if v.is_object() { v } else { json!({"v": v}) },
        }).collect();
        let Ok(bytes) = render(&text, &calls, &Tools::default()) else {
            // Only whitespace-only text beside calls is refused here.
            prop_assert!(!calls.is_empty() && text.bytes().all(is_ws));
            return Ok(());
        };
        let r = fold_cut(&mut parser(Config::default()), &bytes, &cuts);
        prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
        prop_assert_eq!(r.text, text);
        prop_assert_eq!(r.calls, calls);
    }

    #[test]
    fn whole_and_cycling_small_chunks_agree(
        parts in proptest::collection::vec(prop_oneof![
            Just(FENCE.to_string()), Just("json\n".to_string()), Just(TOOL_CALLS.to_string()),
            Just(OPEN.to_string()), Just(CLOSE.to_string()), Just("[".to_string()),
            Just("]".to_string()), Just(", ".to_string()), Just("{\"name\": \"f\", ".to_string()),
            Just("\"arguments\": {\"a\": \"```]\"}}".to_string()), Just("\"parameters\": {}}".to_string()),
            Just("{\"answer\": 1}".to_string()), Just("}".to_string()),
            Just("\"".to_string()), Just("\\".to_string()), Just(" \n".to_string()),
            Just("``".to_string()), Just("東京🌧".to_string()),
            "[a-z{}\\[\\]\":, <>/`]{0,6}",
        ], 0..16),
        size in 1usize..5,
    ) {
        let s = parts.concat();
        let whole = fold_cut(&mut parser(Config::default()), s.as_bytes(), &[]);
        // Cycling chunk sizes 1..=size, whatever falls inside a character or a delimiter.
        let mut cuts = Vec::new();
        let (mut at, mut k) = (0, 0);
        while at < s.len() {
            at += 1 + k % size;
            k += 1;
            cuts.push(at.min(s.len()));
        }
        let r = fold_cut(&mut parser(Config::default()), s.as_bytes(), &cuts);
        prop_assert_eq!(&r, &whole);
        prop_assert_eq!(r.warnings.len(), whole.warnings.len());
    }
}

#[test]
fn a_list_held_as_possible_text_beyond_the_value_limit_is_text() {
    let small = Config {
        limits: Limits {
            max_args_bytes: 64,
            ..Limits::default()
        },
        ..Config::default()
    };
    for s in [
        format!(
            "[{}{{\"name\": \"f\", \"arguments\": {{}}}}]",
            " ".repeat(100)
        ),
        format!("[{{\"answer\": \"{}\"}}]", "x".repeat(100)),
    ] {
        let r = with(small, &s);
        assert!(r.calls.is_empty() && r.errors.is_empty(), "{s}: {r:?}");
        assert_eq!(r.text, s);
    }
    // Once named, the list is calls and the limit is the element's.
    let r = with(
        small,
        &format!(
            "[{{\"name\": \"f\", \"arguments\": {{\"a\": \"{}\"}}}}]",
            "x".repeat(100)
        ),
    );
    assert_eq!(r.error_kinds(), vec![ErrorKind::LimitExceeded]);
}
