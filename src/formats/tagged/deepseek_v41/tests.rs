use super::*;
use crate::event::{ErrorKind, ParseResult};
use crate::formats::core::testkit::{check_delta_contract, cycled_chunks, every_cut};
use crate::formats::run_chunks;
use crate::formats::tagged::Member;
use crate::tools::Tools;
use proptest::prelude::*;
use serde_json::json;

fn tools() -> Tools {
    Tools::from_json(
        r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}},{"name":"get_time","parameters":{}},{"name":"fs::read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]"#,
    )
    .unwrap()
}

fn parse_with(cfg: Config, s: &str) -> ParseResult {
    let t = tools();
    every_cut(&|| tagged::boxed(&GRAMMAR, cfg, &t), s.as_bytes()).0
}

fn parse(s: &str) -> ParseResult {
    parse_with(DeepseekV41::config(), s)
}

fn inside() -> Config {
    let mut c = DeepseekV41::config();
    c.reasoning.starts_inside = true;
    c
}

fn warnings(r: &ParseResult) -> Vec<&str> {
    r.warnings.iter().map(|w| w.kind.as_str()).collect()
}

/// DeepSeek's reference library's rendering (`deepseek_v41.md` §1), from after `<think>`.
const TURN: &str = "Need weather.</think>Let me check.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"city\" string=\"true\"> Paris </｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"get_time\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ calls><｜end▁of▁sentence｜>";

#[test]
fn the_reference_rendering_parses_under_every_cut() {
    let r = parse_with(inside(), TURN);
    assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    assert_eq!(r.reasoning_text(), "Need weather.");
    assert_eq!(r.text, "Let me check.\n\n");
    assert_eq!(r.calls[0].arguments, json!({"city": " Paris ", "days": 3}));
    assert_eq!(r.calls[1].arguments, json!({}));
}

#[test]
fn native_shapes_need_no_warning() {
    // A calls block inside reasoning ends it; invokes without a block; a JSON body.
    let s = "Weigh it<｜DSML｜ invoke name=\"get_weather\">\n{\"city\": \"x</｜DSML｜ invoke>\", \"days\": 2}\n</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"fs::read\">\n<｜DSML｜ parameter name=\"path\" string=\"true\">a</｜DSML｜ invoke>b</｜DSML｜ parameter>\n</｜DSML｜ invoke>";
    let r = parse_with(inside(), s);
    assert_eq!(r.reasoning_text(), "Weigh it");
    assert_eq!(r.text, "");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(
        r.calls[0].arguments,
        json!({"city": "x</｜DSML｜ invoke>", "days": 2})
    );
    assert_eq!(r.calls[1].name, "fs::read");
    assert_eq!(
        r.calls[1].arguments,
        json!({"path": "a</｜DSML｜ invoke>b"})
    );
    assert!(r.warnings.is_empty(), "{r:?}");
}

#[test]
fn only_one_space_is_the_dialect_and_v4_tags_need_the_option() {
    for s in [
        "<｜DSML｜  calls>\n<｜DSML｜  invoke name=\"get_time\">\n\n</｜DSML｜  invoke>\n</｜DSML｜  calls>",
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    ] {
        let r = parse(s);
        assert!(r.calls.is_empty(), "{s}");
        assert_eq!(r.text, s);
    }
    let on = Config {
        marker_variants: true,
        ..DeepseekV41::config()
    };
    let r = parse_with(
        on,
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    );
    assert_eq!(r.calls.len(), 1);
    assert_eq!(warnings(&r), ["marker_variant"]);
}

#[test]
fn a_cut_inside_a_value_is_unterminated_and_no_call() {
    let r = parse(
        "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"city\" string=\"true\"> Par",
    );
    assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
    assert!(r.calls.is_empty());
}

#[test]
fn the_renderer_writes_the_spaced_dialect() {
    let calls = vec![ToolCall {
        name: "fs::read".into(),
        id: None,
        server: None,
        arguments: json!({"path": "a b"}),
    }];
    let out =
        String::from_utf8(tagged::render::<DeepseekV41>("", &calls, &tools()).unwrap()).unwrap();
    assert_eq!(
        out,
        "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"fs::read\">\n<｜DSML｜ parameter name=\"path\" string=\"true\">a b</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>"
    );
}

fn soup() -> impl Strategy<Value = Vec<u8>> {
    let pieces = [
        "<｜DSML｜ calls>",
        "</｜DSML｜ calls>",
        "\n<｜DSML｜ invoke name=\"get_weather\">\n",
        "\n</｜DSML｜ invoke>",
        "<｜DSML｜ parameter name=\"city\" string=\"true\">",
        "<｜DSML｜ parameter name=\"days\" string=\"false\">",
        "</｜DSML｜ parameter>",
        "<｜DSML｜invoke name=\"get_time\">",
        "</｜DSML｜invoke>",
        "{\"city\": \"</｜DSML｜ invoke>\\\\\", \"days\": 1}",
        "{",
        "}",
        "<think>",
        "</think>",
        " Paris ",
        "\n",
        "\"",
        "<｜DSML｜ ",
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
        variants in any::<bool>(),
        inside in any::<bool>(),
    ) {
        let t = tools();
        let mut cfg = Config { marker_variants: variants, ..DeepseekV41::config() };
        cfg.reasoning.starts_inside = inside;
        let mk = || tagged::boxed(&GRAMMAR, cfg, &t);
        let whole = ParseResult::fold(&run_chunks(mk().as_mut(), [bytes.as_slice()]));
        let evs = run_chunks(mk().as_mut(), cycled_chunks(&bytes, &sizes));
        check_delta_contract(&evs);
        prop_assert_eq!(&ParseResult::fold(&evs), &whole);
        let bytewise = ParseResult::fold(&run_chunks(mk().as_mut(), bytes.chunks(1)));
        prop_assert_eq!(&bytewise, &whole);
    }
}
