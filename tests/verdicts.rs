//! End-to-end: the verdict policy for parsers that are not conform's (`--compare`,
//! specs/adapter.md §6). An engine that warns in its own words, generates its own ids where the
//! wire carries none and names its errors differently passes where its calls are right.
#![cfg(feature = "cli")] // drives the `conform` binary or the harness

mod common;

use common::{conform, have, kimi_k2_corpus, root, write_case};

/// A kimi_k2 corpus: one call without an id on the wire, one plain text, one rejection.
fn corpus() -> tempfile::TempDir {
    let (d, k) = kimi_k2_corpus();
    let write = |name: &str, text: &str, expect: serde_json::Value| {
        write_case(&k, name, text, Some(&expect.to_string()));
    };
    write(
        "y_call_without_id",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get<|tool_call_argument_begin|>{\"q\":1}<|tool_call_end|><|tool_calls_section_end|>",
        serde_json::json!({"text": "", "calls": [{"name": "get", "arguments": {"q": 1}}], "error": null, "warnings": []}),
    );
    write(
        "y_text",
        "just words",
        serde_json::json!({"text": "just words", "calls": [], "error": null, "warnings": []}),
    );
    write(
        "n_broken",
        "BROKEN",
        serde_json::json!({"error": {"kind": "invalid_json"}}),
    );
    d
}

fn adapter() -> String {
    format!(
        "cmd:python3 {}",
        root().join("tests/adapters/generated_ids.py").display()
    )
}

#[test]
fn an_engine_with_its_own_ids_warnings_and_error_names_passes_by_default() {
    if !have("python3") {
        return;
    }
    let d = corpus();
    let parser = adapter();
    let args = [
        "run",
        ".",
        "--strategies",
        "whole,random",
        "--parser",
        &parser,
        "--report-dir",
        "out",
    ];
    let o = conform(&args, d.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let report = std::fs::read_to_string(d.path().join("out/report.json")).unwrap();
    assert!(
        report.contains("differ only in generated ids"),
        "the determinism check notes generated ids apart: {report}"
    );

    // Held to conform's own rules, the same engine fails on ids, warnings and error kinds.
    let mut strict = args.to_vec();
    strict.extend(["--compare", "all"]);
    let o = conform(&strict, d.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("FAIL ./kimi_k2/y_call_without_id.txt"),
        "{out}"
    );
    assert!(out.contains("FAIL ./kimi_k2/n_broken.txt"), "{out}");
    assert!(!out.contains("FAIL ./kimi_k2/y_text.txt"), "{out}");
}

#[test]
fn an_unknown_compare_word_is_a_usage_error() {
    let d = corpus();
    let o = conform(&["run", ".", "--compare", "warnings,colour"], d.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("colour"), "{err}");
}
