//! End-to-end tests of format options: `--option` on `run` and `parse`, a corpus directory's
//! `conform.toml`, `conform formats --options`, and the options recorded in report.json.
#![cfg(feature = "cli")] // drives the `conform` binary

mod common;

use common::{conform, report, text};
use std::path::Path;
use std::process::Output;

/// A max_tokens cut: complete arguments, then the end of the stream without the call's end or
/// the section's end. It parses only thanks to `missing_call_end` (and `missing_section_end`).
const CUT: &str = "Reading.<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>{\"filePath\": \"a\"}";

/// A scratch corpus holding the cut as a `y_` case that expects the call.
fn scratch() -> tempfile::TempDir {
    common::scratch(
        "y_cut",
        CUT,
        Some(
            r#"{"text":"Reading.","calls":[{"name":"read_file","id":"0","arguments":{"filePath":"a"}}],"error":null}"#,
        ),
    )
}

fn run(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run", "kimi_k2", "--quiet", "--strategies", "whole,bytes"];
    args.extend_from_slice(extra);
    conform(&args, dir)
}

#[test]
fn an_option_on_the_command_line_changes_the_verdict_and_is_recorded() {
    let d = scratch();
    let lenient = run(d.path(), &["--report-dir", "out"]);
    assert_eq!(lenient.status.code(), Some(0), "{}", text(&lenient));
    let r = report(d.path());
    assert!(
        r["runs"][0].get("options").is_none(),
        "defaults are not listed"
    );
    assert!(r["runs"][0]["cases"][0].get("options").is_none());
    let default_digest = r["runs"][0]["cases"][0]["digest"].clone();

    let strict = run(
        d.path(),
        &[
            "--option",
            "kimi_k2.missing_call_end=false",
            "--report-dir",
            "out",
        ],
    );
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict));
    let r = report(d.path());
    let case = &r["runs"][0]["cases"][0];
    assert_eq!(case["status"], "fail");
    assert_eq!(
        case["options"],
        serde_json::json!({"missing_call_end": false})
    );
    assert_eq!(
        r["runs"][0]["options"],
        serde_json::json!({"kimi_k2": {"missing_call_end": false}})
    );
    assert_ne!(
        case["digest"], default_digest,
        "another case under other options"
    );
    // The replay command carries the option, so it reproduces the failure.
    let replay = case["violations"][0]["replay"].as_str().unwrap();
    assert!(
        replay.contains("--option kimi_k2.missing_call_end=false"),
        "{replay}"
    );

    // Setting an option to its default changes nothing, and is not recorded.
    let same = run(
        d.path(),
        &[
            "--option",
            "kimi_k2.missing_call_end=true",
            "--report-dir",
            "out",
        ],
    );
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    assert!(report(d.path())["runs"][0].get("options").is_none());
}

#[test]
fn a_conform_toml_sets_options_for_its_directory_and_the_command_line_overrides_it() {
    let d = scratch();
    std::fs::write(
        d.path().join("kimi_k2/conform.toml"),
        "# The strict reading of the spec.\n[options]\n\"kimi_k2.missing_call_end\" = false\n",
    )
    .unwrap();
    let strict = run(d.path(), &["--report-dir", "out"]);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict));
    assert_eq!(
        report(d.path())["runs"][0]["cases"][0]["options"],
        serde_json::json!({"missing_call_end": false})
    );
    // Without --quiet, the run says which options it judged under.
    let told = conform(&["run", "kimi_k2", "--strategies", "whole"], d.path());
    assert!(
        text(&told).contains(
            "1 case(s) judged under options other than the defaults: kimi_k2.missing_call_end=false"
        ),
        "{}",
        text(&told)
    );
    let overridden = run(d.path(), &["--option", "kimi_k2.missing_call_end=true"]);
    assert_eq!(overridden.status.code(), Some(0), "{}", text(&overridden));

    // A conform.toml naming an unknown option is a corpus error naming the known ones.
    std::fs::write(
        d.path().join("kimi_k2/conform.toml"),
        "[options]\n\"kimi_k2.no_such\" = false\n",
    )
    .unwrap();
    let bad = run(d.path(), &[]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("conform.toml"), "{}", text(&bad));
    assert!(
        text(&bad).contains("known options: text_in_section"),
        "{}",
        text(&bad)
    );
}

#[test]
fn parse_takes_options_and_unknown_ones_exit_2_with_the_known_ones() {
    let d = scratch();
    let parse = |extra: &[&str]| {
        let mut args = vec!["parse", "kimi_k2/y_cut.txt", "--result-only"];
        args.extend_from_slice(extra);
        conform(&args, d.path())
    };
    let lenient = parse(&[]);
    assert_eq!(lenient.status.code(), Some(0), "{}", text(&lenient));
    assert!(text(&lenient).contains("missing_call_end"), "a warning");
    let strict = parse(&["--option", "kimi_k2.missing_call_end=false"]);
    assert!(text(&strict).contains("unterminated"), "{}", text(&strict));
    assert!(
        !text(&strict).contains("\"read_file\""),
        "{}",
        text(&strict)
    );

    let unknown_format = parse(&["--option", "kimi.missing_call_end=false"]);
    assert_eq!(unknown_format.status.code(), Some(2));
    assert!(
        text(&unknown_format).contains("known formats: kimi_k2, openai_sse"),
        "{}",
        text(&unknown_format)
    );
    let unknown_option = run(d.path(), &["--option", "kimi_k2.nope=false"]);
    assert_eq!(unknown_option.status.code(), Some(2));
    assert!(
        text(&unknown_option).contains("known options: text_in_section, header_whitespace"),
        "{}",
        text(&unknown_option)
    );
    let bad_value = run(d.path(), &["--option", "kimi_k2.missing_call_end=no"]);
    assert_eq!(bad_value.status.code(), Some(2));
}

#[test]
fn formats_lists_every_option_with_its_default_and_reason() {
    let o = conform(
        &["formats", "--options"],
        Path::new(env!("CARGO_MANIFEST_DIR")),
    );
    assert_eq!(o.status.code(), Some(0));
    let out = text(&o);
    for want in [
        "kimi_k2.missing_call_end = true",
        "kimi_k2.reasoning.starts_inside = false",
        "openai_sse.allow_missing_done = true",
        "qwen3_coder.typing.null_aliases = true",
        "deepseek_v31.reasoning.enabled = true",
        "roo_xml.allow_text_between_params = false",
        "(max_tokens cuts, llama.cpp fixtures)",
    ] {
        assert!(out.contains(want), "{want} missing from:\n{out}");
    }
    // Without --options, only the formats.
    let plain = conform(&["formats"], Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(!text(&plain).contains("missing_call_end"));
}
