//! End-to-end tests of the `conform` command line.
#![cfg(feature = "cli")] // drives the `conform` binary or the harness

mod common;

use common::{CALL, conform, root, stdout};

/// A scratch corpus with one passing kimi_k2 case.
fn scratch() -> tempfile::TempDir {
    common::scratch(
        "y_ok",
        CALL,
        Some(
            r#"{"text":"Hi.","calls":[{"name":"ls","id":"0","arguments":{"path":"/x"}}],"error":null}"#,
        ),
    )
}

#[test]
fn the_bundled_corpus_passes_and_the_output_is_deterministic() {
    let args = [
        "run",
        "corpus/",
        "--quiet",
        "--strategies",
        "whole,markers,random",
        "--seeds",
        "2",
    ];
    let a = conform(&args, root());
    assert_eq!(a.status.code(), Some(0), "{}", stdout(&a));
    assert!(stdout(&a).contains("kimi_k2"));
    let b = conform(&args, root());
    assert_eq!(stdout(&a), stdout(&b));
    assert!(!stdout(&a).contains('\x1b'), "NO_COLOR is honoured");
}

#[test]
fn a_wrong_expectation_fails_with_exit_1_and_a_replay_command() {
    let d = scratch();
    let k = d.path().join("kimi_k2");
    std::fs::write(k.join("y_bad.txt"), CALL).unwrap();
    std::fs::write(k.join("y_bad.expect.json"), r#"{"text":"Bye."}"#).unwrap();
    let o = conform(&["run", "."], d.path());
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("FAIL ./kimi_k2/y_bad.txt"), "{out}");
    assert!(out.contains("replay: conform parse --format kimi_k2 ./kimi_k2/y_bad.txt"));
}

#[test]
fn a_bad_corpus_file_is_named_and_the_run_goes_on_with_exit_2() {
    let d = scratch();
    let k = d.path().join("kimi_k2");
    std::fs::write(k.join("y_broken.txt"), "x").unwrap();
    std::fs::write(k.join("y_broken.expect.json"), "{nope").unwrap();
    std::fs::write(d.path().join("orphan.txt"), "x").unwrap();
    let o = conform(&["run", "."], d.path());
    assert_eq!(o.status.code(), Some(2));
    let out = stdout(&o);
    assert!(
        out.contains("y_broken.expect.json: invalid expectation"),
        "{out}"
    );
    assert!(out.contains("orphan.txt: cannot tell the format"), "{out}");
    assert!(
        out.contains("│ kimi_k2 ┆ 1 "),
        "the good case still ran: {out}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let d = scratch();
    let o = conform(&["run", ".", "--strategies", "bytes,nope"], d.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown strategy"));
    let o = conform(&["run", ".", "--format", "nope"], d.path());
    assert_eq!(o.status.code(), Some(2));
    let o = conform(&["frobnicate"], d.path());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn parse_prints_events_and_result_for_given_cuts() {
    let d = scratch();
    let o = conform(&["parse", "kimi_k2/y_ok.txt", "--cuts", "5,40"], d.path());
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "kimi_k2");
    assert_eq!(v["cuts"], serde_json::json!([5, 40]));
    assert_eq!(v["result"]["calls"][0]["name"], "ls");
    assert_eq!(v["events"][0]["type"], "text");
    let o = conform(&["parse", "kimi_k2/y_ok.txt", "--cuts", "9999"], d.path());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn parse_roundtrip_replays_the_rendering_of_the_whole_result() {
    let d = scratch();
    let o = conform(
        &["parse", "kimi_k2/y_ok.txt", "--roundtrip", "--result-only"],
        d.path(),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rendered = v["rendered"][0].as_str().unwrap();
    assert!(rendered.contains("<|tool_call_begin|>"), "{rendered}");
    assert_eq!(v["result"]["calls"][0]["name"], "ls");
    // Cuts apply to the rendering.
    let o = conform(
        &[
            "parse",
            "kimi_k2/y_ok.txt",
            "--roundtrip",
            "--strategy",
            "bytes",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn strategies_and_seeds_change_the_replay_count() {
    let d = scratch();
    let whole = conform(&["run", ".", "--strategies", "whole"], d.path());
    assert!(stdout(&whole).contains("┆ 1       ┆"), "{}", stdout(&whole));
    let more = conform(
        &["run", ".", "--strategies", "random", "--seeds", "3"],
        d.path(),
    );
    assert!(stdout(&more).contains("┆ 4       ┆"), "{}", stdout(&more));
}
