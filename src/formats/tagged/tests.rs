use super::*;
use crate::formats::REGISTRY;
use serde_json::json;

#[test]
fn json_escaping_round_trips() {
    for s in ["", "plain", "q\"b\\s", "\n\r\t\u{1}\u{1f}", "é😀</x>&"] {
        let mut out = String::from("\"");
        escape_json_into(&mut out, s);
        out.push('"');
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), json!(s));
    }
}

#[test]
fn tag_ends_respect_quotes_and_newlines() {
    let mut q = None;
    assert_eq!(
        tag_end("\"a>b\" string=\"true\">x", &mut q, false),
        Some((19, false))
    );
    let mut q = None;
    assert_eq!(tag_end("\"a", &mut q, false), None);
    assert_eq!(q, Some('"'));
    assert_eq!(tag_end(">\">", &mut q, false), Some((2, false)));
    let mut q = None;
    assert_eq!(tag_end("city\nParis>", &mut q, true), Some((4, true)));
    let mut single = false;
    assert_eq!(quoted("'f' x", &mut single), Some(("f".into(), " x")));
    assert!(single);
    assert_eq!(quoted("f", &mut single), None);
}

/// The value fast path skips pieces without the delimiters' one first byte (`<`, or the
/// namespace token's); a delimiter that is a prefix of another would make roles ambiguous,
/// except in a namespaced grammar, where the longest match wins and every delimiter is the
/// token and a tag.
#[test]
fn every_grammar_delimiter_shares_one_first_byte_and_no_role_is_ambiguous() {
    for f in REGISTRY {
        let Some(_) = f.typing.as_ref().and_then(|t| t.schema_tool) else {
            continue;
        };
        let ms = (f.markers)(&Tools::default());
        assert!(!ms.is_empty(), "{}", f.id);
        let first = ms[0].as_bytes()[0];
        // A namespace token: the shortest delimiter, which starts every other.
        let ns = ms
            .iter()
            .min_by_key(|m| m.len())
            .filter(|s| ms.len() > 1 && ms.iter().all(|m| m.starts_with(s.as_str())));
        for m in &ms {
            assert_eq!(m.as_bytes()[0], first, "{}: {m}", f.id);
            match ns {
                Some(ns) => assert!(m.starts_with(ns.as_str()), "{}: {m}", f.id),
                None => {
                    assert_eq!(first, b'<', "{}", f.id);
                    for n in &ms {
                        assert!(m == n || !n.starts_with(m.as_str()), "{}: {m} / {n}", f.id);
                    }
                }
            }
        }
    }
}

use crate::event::{ErrorKind, ParseResult, ToolCall};
use crate::formats::core::testkit::{check_delta_contract, fold_cut, pieces_at};
use crate::formats::{Format, run_chunks};
use proptest::prelude::*;

/// The six formats of the family, by their registered entries.
fn family() -> Vec<&'static Format> {
    REGISTRY
        .iter()
        .copied()
        .filter(|f| f.typing.as_ref().is_some_and(|t| t.schema_tool.is_some()))
        // muse_glimmer types by schema through this parser too, but reads its ATEM grammar only
        // inside tool messages, behind its own message layer (its own tests cover it).
        .filter(|f| f.id != "muse_glimmer")
        .collect()
}

fn family_tools() -> Tools {
    Tools::from_json(
        r#"[{"name":"f","parameters":{"type":"object","properties":{"s":{"type":"string"},"n":{"type":"integer"},"o":{"type":["object","null"]}}}}]"#,
    )
    .unwrap()
}

#[test]
fn the_family_is_ten_formats() {
    let ids: Vec<&str> = family().iter().map(|f| f.id).collect();
    assert_eq!(
        ids,
        [
            "qwen3_coder",
            "seed_oss",
            "glm45",
            "glm47",
            "minimax_m2",
            "deepseek_v32",
            "deepseek_v4",
            "deepseek_v41",
            "minimax_m3",
            "step3"
        ]
    );
}

#[test]
fn a_delimiter_cut_off_by_the_end_inside_markup_is_not_text() {
    let t = Tools::default();
    let f = crate::formats::deepseek_v32::FORMAT.new_parser;
    let r = ParseResult::fold(&run_chunks(
        f(&t).as_mut(),
        ["<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"g\">\n</｜DSML｜inv".as_bytes()],
    ));
    assert_eq!(r.text, "");
    assert_eq!(r.errors[0].kind, ErrorKind::Unterminated);
    // In prose the same bytes are text.
    let r = ParseResult::fold(&run_chunks(
        f(&t).as_mut(),
        ["see </｜DSML｜inv".as_bytes()],
    ));
    assert_eq!(r.text, "see </｜DSML｜inv");
}

#[test]
fn a_large_parameter_leaves_no_large_scratch_behind() {
    // The parser's scratch buffer lives as long as the parser: a large piece written through
    // it (a streamed string with escapes, a typed value) must not stay resident.
    let big = "say \"hi\" ".repeat(20_000);
    let obj = serde_json::json!({ "k": big }).to_string();
    let input = format!(
        "<tool_call>\n<function=f>\n<parameter=s>\n{big}\n</parameter>\n<parameter=o>\n{obj}\n</parameter>\n</function>\n</tool_call>"
    );
    let t = family_tools();
    let mut p = Parser::new(
        &crate::formats::qwen3_coder::GRAMMAR,
        <crate::formats::qwen3_coder::Qwen3Coder as Member>::config(),
        &t,
    );
    let r = ParseResult::fold(&run_chunks(&mut p, [input.as_bytes()]));
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.calls[0].arguments["s"], serde_json::json!(big));
    assert_eq!(r.calls[0].arguments["o"], serde_json::json!({ "k": big }));
    assert!(p.scratch.capacity() <= 64 << 10, "{}", p.scratch.capacity());
}

#[test]
fn close_tag_look_alikes_cost_linear_time_under_byte_chunks() {
    // Each look-alike is decided once: 20k of them, fed byte by byte.
    let body = "</parameter> x\n".repeat(20_000);
    let input = format!(
        "<tool_call>\n<function=f>\n<parameter=s>\n{body}\n</parameter>\n</function>\n</tool_call>"
    );
    let t = family_tools();
    let mut p = Parser::new(
        &crate::formats::qwen3_coder::GRAMMAR,
        <crate::formats::qwen3_coder::Qwen3Coder as Member>::config(),
        &t,
    );
    let r = ParseResult::fold(&run_chunks(&mut p, input.as_bytes().chunks(1)));
    assert_eq!(r.calls[0].arguments["s"], serde_json::json!(body));
    assert_eq!(r.warnings.len(), 20_000);
}

#[test]
fn reasoning_is_split_where_the_family_reads_text_and_nowhere_else() {
    let t = family_tools();
    for f in family() {
        let (o, c) = f
            .reasoning
            .expect("every tagged format declares reasoning")
            .pairs[0];
        let call = ToolCall {
            name: "f".into(),
            id: None,
            server: None,
            arguments: json!({"s": format!("{o}x{c}")}),
        };
        let wire =
            String::from_utf8((f.render.unwrap())("", std::slice::from_ref(&call), &t).unwrap())
                .unwrap();
        let mk = || (f.new_parser)(&t);
        // Before a call: reasoning; inside a value: content.
        let r =
            crate::formats::core::testkit::every_cut(&mk, format!("{o}plan{c}{wire}").as_bytes()).0;
        assert_eq!(r.reasoning_text(), "plan", "{}", f.id);
        assert_eq!(r.calls, std::slice::from_ref(&call), "{}", f.id);
        // A call inside reasoning is reasoning, reported once, never run; or, where the format
        // says a call ends reasoning (natively, or by its option's default), the block ends
        // there and the call runs.
        let plain = ToolCall {
            arguments: json!({"s": "x"}),
            ..call
        };
        let wire =
            String::from_utf8((f.render.unwrap())("", std::slice::from_ref(&plain), &t).unwrap())
                .unwrap();
        let r =
            crate::formats::core::testkit::every_cut(&mk, format!("{o}{wire}{c}ok").as_bytes()).0;
        let kinds: Vec<&str> = r.warnings.iter().map(|w| w.kind.as_str()).collect();
        let native = grammar(f.id).native.calls_end_reasoning;
        let by_option = f
            .options
            .list()
            .iter()
            .any(|o| o.name == "reasoning.implicit_reasoning_end" && o.default);
        if native || by_option {
            assert_eq!(r.calls, [plain], "{}", f.id);
            let mut want = vec!["stray_reasoning_end", "text_after_calls"];
            if !native {
                want.insert(0, "implicit_reasoning_end");
            }
            assert_eq!(kinds, want, "{}", f.id);
        } else {
            assert!(r.calls.is_empty(), "{}", f.id);
            assert_eq!(r.text, "ok", "{}", f.id);
            assert_eq!(kinds, ["call_in_reasoning"], "{}", f.id);
        }
        // Text that holds a tag cannot be rendered: the layer would read it as reasoning.
        assert!(
            (f.render.unwrap())(&format!("a{o}b"), &[], &t).is_err(),
            "{}",
            f.id
        );
    }
}

/// The grammar of a family member, by id.
fn grammar(id: &str) -> &'static Grammar {
    use crate::formats::{
        deepseek_v4, deepseek_v32, deepseek_v41, glm45, minimax_m2, minimax_m3, qwen3_coder,
        seed_oss, step3,
    };
    match id {
        "qwen3_coder" => &qwen3_coder::GRAMMAR,
        "seed_oss" => &seed_oss::GRAMMAR,
        "glm45" => &glm45::GRAMMAR,
        "glm47" => &glm47::GRAMMAR,
        "minimax_m2" => &minimax_m2::GRAMMAR,
        "minimax_m3" => &minimax_m3::GRAMMAR,
        "deepseek_v32" => &deepseek_v32::GRAMMAR,
        "deepseek_v4" => &deepseek_v4::GRAMMAR,
        "deepseek_v41" => &deepseek_v41::GRAMMAR,
        "step3" => &step3::GRAMMAR,
        other => panic!("{other} is not in the tagged family"),
    }
}

/// Pieces of each grammar's wire, for tag soup.
fn soup(f: &Format) -> Vec<String> {
    let mut v: Vec<String> = (f.markers)(&Tools::default());
    v.extend(f.reasoning.map(|r| r.tags()).unwrap_or_default());
    v.extend(
        [
            "\"f\">",
            "f>",
            "f",
            "\"s\">",
            "s>",
            "\"n\" string=\"false\">",
            "\n",
            " ",
            "7",
            "é",
            "<",
            ">",
            "\\n",
            "'",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_family_format_is_split_invariant_on_tag_soup(
        which in 0usize..9,
        picks in proptest::collection::vec(any::<usize>(), 0..30),
        cuts in proptest::collection::vec(any::<usize>(), 0..10),
    ) {
        let f = family()[which];
        let parts = soup(f);
        let s: String = picks.iter().map(|i| parts[i % parts.len()].as_str()).collect();
        let t = family_tools();
        let whole = fold_cut((f.new_parser)(&t).as_mut(), s.as_bytes(), &[]);
        let evs = run_chunks((f.new_parser)(&t).as_mut(), pieces_at(s.as_bytes(), &cuts));
        check_delta_contract(&evs);
        prop_assert_eq!(whole, ParseResult::fold(&evs), "{}: {:?}", f.id, s);
    }

    #[test]
    fn every_family_renderer_parses_back(
        which in 0usize..9,
        s in "[a-z<>/&\"' \n中😀]{0,24}",
        n in any::<i64>(),
        o in crate::formats::core::testkit::arb_json("[a-z ]{0,6}"),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let f = family()[which];
        let t = family_tools();
        let o = if o.is_object() || o.is_null() { o } else { serde_json::json!({"v": o}) };
        let calls = vec![ToolCall {
            name: "f".into(),
            id: None,
            server: None,
            arguments: serde_json::json!({"s": s, "n": n, "o": o}),
        }];
        if let Ok(bytes) = (f.render.unwrap())("Hi.", &calls, &t) {
            let r = fold_cut((f.new_parser)(&t).as_mut(), &bytes, &cuts);
            prop_assert!(r.errors.is_empty(), "{}: {:?}", f.id, r.errors);
            prop_assert_eq!(r.calls, calls);
            prop_assert_eq!(r.text, "Hi.");
        }
    }
}
