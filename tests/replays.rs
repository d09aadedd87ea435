//! End-to-end: every `replay:` line reproduces its failure with the same parser and chunking,
//! and a run that judged nothing is never green.
#![cfg(feature = "cli")] // drives the `conform` binary or the harness

mod common;

use common::{conform, have, root};

/// A kimi_k2 corpus with one plain-text case that expects its own text back.
fn corpus(text: &str) -> tempfile::TempDir {
    let expect = serde_json::json!({"text": text, "calls": [], "error": null}).to_string();
    common::scratch("y_plain", text, Some(&expect))
}

fn adapter(script: &str) -> String {
    format!(
        "cmd:python3 {}",
        root().join("tests/adapters").join(script).display()
    )
}

#[test]
fn the_replay_line_of_an_adapter_failure_reproduces_it() {
    if !have("python3") {
        return;
    }
    let text = "hello there";
    let d = corpus(text);
    let parser = adapter("first_chunk_only.py");
    let run = conform(
        &[
            "run".into(),
            ".".into(),
            "--strategies".into(),
            "whole,bytes".into(),
            "--parser".into(),
            parser.clone(),
        ],
        d.path(),
    );
    let out = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{out}");
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: "))
        .unwrap_or_else(|| panic!("no replay line in {out}"));
    assert!(line.contains("--parser"), "{line}");
    let words = shlex::split(line).expect("the replay line is shell words");
    assert_eq!(words[0], "conform");
    let replayed = conform(&words[1..], d.path());
    let doc: serde_json::Value = serde_json::from_slice(&replayed.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&replayed.stdout)));
    assert_eq!(doc["parser"], serde_json::json!(parser));
    let got = doc["result"]["text"].as_str().unwrap();
    assert_ne!(got, text, "the replay shows the failure: {doc}");
    let cuts = doc["cuts"].as_array().unwrap();
    assert!(!cuts.is_empty(), "the failing chunking is replayed: {doc}");
    assert_eq!(got, &text[..cuts[0].as_u64().unwrap() as usize]);

    // The same chunking through conform's own parser parses right.
    let mut own: Vec<String> = words[1..5].to_vec();
    own.extend(["--cuts".to_string(), cuts[0].to_string()]);
    let builtin = conform(&own, d.path());
    let doc: serde_json::Value = serde_json::from_slice(&builtin.stdout).unwrap();
    assert_eq!(doc["result"]["text"], serde_json::json!(text));
}

#[test]
fn an_adapter_that_judges_no_case_is_never_green() {
    if !have("python3") {
        return;
    }
    let d = corpus("hello");
    let run = conform(
        &[
            "run".into(),
            ".".into(),
            "--parser".into(),
            adapter("other_format.py"),
        ],
        d.path(),
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("supports none of the formats"), "{err}");
    assert!(err.contains("other_format.py"), "{err}");
}
