//! Reports: schema validity, determinism, shards, baselines, known failures, JUnit.
#![cfg(feature = "cli")] // drives the `conform` binary or the harness

mod common;

use common::{CALL, conform, read_json, root, write_case};
use serde_json::Value;
use std::path::Path;

fn validate(report: &Value) {
    let schema = read_json(&root().join("specs/report.schema.json"));
    let v = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = v
        .iter_errors(report)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "report violates the schema: {errors:#?}");
}

fn without_timings(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("timings");
    v
}

/// A scratch corpus: two passing cases, one failing, one known failure, one bad file.
fn scratch() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let k = d.path().join("corpus/kimi_k2");
    std::fs::create_dir_all(&k).unwrap();
    for (name, expect) in [
        ("y_ok", r#"{"text":"Hi."}"#),
        (
            "y_ok2",
            r#"{"calls":[{"name":"ls","id":"0","arguments":{"path":"/x"}}]}"#,
        ),
        ("y_wrong", r#"{"text":"Bye."}"#),
        ("y_known", r#"{"text":"Nope."}"#),
    ] {
        write_case(&k, name, CALL, Some(expect));
    }
    write_case(&k, "n_bad", "x", Some("{"));
    std::fs::write(
        d.path().join("corpus/KNOWN_FAILURES"),
        "corpus/kimi_k2/y_known.txt # wrong on purpose\n",
    )
    .unwrap();
    d
}

#[test]
fn reports_validate_and_are_deterministic_apart_from_timings() {
    let d = scratch();
    let o = conform(&["run", "corpus", "--report-dir", "r1", "-q"], d.path());
    assert_eq!(
        o.status.code(),
        Some(2),
        "the bad file makes the run exit 2"
    );
    conform(&["run", "corpus", "--report-dir", "r2", "-q"], d.path());
    let a = read_json(&d.path().join("r1/report.json"));
    let b = read_json(&d.path().join("r2/report.json"));
    validate(&a);
    assert!(a.get("timings").is_some());
    assert_eq!(without_timings(a.clone()), without_timings(b));
    let run = &a["runs"][0];
    assert_eq!(run["parser"], "builtin");
    let status = |id: &str| {
        run["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == format!("corpus/kimi_k2/{id}.txt"))
            .map(|c| c["status"].as_str().unwrap().to_string())
    };
    assert_eq!(status("y_ok").as_deref(), Some("pass"));
    assert_eq!(status("y_wrong").as_deref(), Some("fail"));
    assert_eq!(status("y_known").as_deref(), Some("xfail"));
    assert_eq!(
        a["corpus"]["errors"][0]["path"],
        "corpus/kimi_k2/n_bad.expect.json"
    );
    assert_eq!(run["totals"]["xfail"], 1);
    assert_eq!(run["totals"]["failed"], 1);

    let junit = std::fs::read_to_string(d.path().join("r1/junit.xml")).unwrap();
    let parsed = quick_junit::Report::deserialize_from_str(&junit).expect("valid JUnit XML");
    assert_eq!(parsed.tests, 5, "four cases and one corpus error");
    assert_eq!(parsed.failures, 1);
    assert_eq!(parsed.errors, 1);
    let md = std::fs::read_to_string(d.path().join("r1/report.md")).unwrap();
    assert!(md.contains("y_wrong.txt") && md.contains("conform parse --format kimi_k2"));
}

#[test]
fn four_shards_merge_into_the_unsharded_report() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path();
    let all = o.join("all");
    let run = |extra: &[&str], dir: &Path| {
        let mut args = vec![
            "run",
            "corpus/kimi_k2",
            "--strategies",
            "whole,markers,random",
            "-q",
            "--report-dir",
        ];
        let dir = dir.to_str().unwrap().to_string();
        args.push(&dir);
        args.extend_from_slice(extra);
        let r = conform(&args, root());
        assert_eq!(
            r.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&r.stdout)
        );
    };
    run(&[], &all);
    let mut parts = Vec::new();
    for k in 1..=4 {
        let dir = o.join(format!("s{k}"));
        run(&["--shard", &format!("{k}/4")], &dir);
        let r = read_json(&dir.join("report.json"));
        validate(&r);
        assert_eq!(r["shard"]["count"], 4);
        parts.push(dir.join("report.json").to_str().unwrap().to_string());
    }
    let merged = o.join("merged.json");
    let mut args = vec!["report", "merge"];
    args.extend(parts.iter().map(String::as_str));
    args.extend(["-o", merged.to_str().unwrap()]);
    assert_eq!(conform(&args, root()).status.code(), Some(0));
    let m = read_json(&merged);
    validate(&m);
    assert_eq!(
        without_timings(m),
        without_timings(read_json(&all.join("report.json")))
    );
}

#[test]
fn baselines_catch_regressions_and_only_update_on_request() {
    let d = scratch();
    std::fs::remove_file(d.path().join("corpus/kimi_k2/n_bad.expect.json")).unwrap();
    std::fs::remove_file(d.path().join("corpus/kimi_k2/n_bad.txt")).unwrap();
    std::fs::remove_file(d.path().join("corpus/kimi_k2/y_wrong.txt")).unwrap();
    std::fs::remove_file(d.path().join("corpus/kimi_k2/y_wrong.expect.json")).unwrap();
    let o = conform(&["run", "corpus", "--baseline", "base.json"], d.path());
    assert_eq!(
        o.status.code(),
        Some(2),
        "a missing baseline is a usage error"
    );
    let o = conform(
        &[
            "run",
            "corpus",
            "--baseline",
            "base.json",
            "--update-baseline",
            "-q",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(0));
    let base = std::fs::read_to_string(d.path().join("base.json")).unwrap();
    assert!(!base.contains("timings"), "a baseline keeps no timings");
    validate(&serde_json::from_str(&base).unwrap());
    let o = conform(
        &["run", "corpus", "--baseline", "base.json", "-q"],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(0));
    // Break a passing case: a regression, listed first, exit 1, baseline untouched.
    std::fs::write(
        d.path().join("corpus/kimi_k2/y_ok.expect.json"),
        r#"{"text":"Changed."}"#,
    )
    .unwrap();
    let o = conform(
        &[
            "run",
            "corpus",
            "--baseline",
            "base.json",
            "--report-dir",
            "r",
            "-q",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("REGRESSION corpus/kimi_k2/y_ok.txt (builtin): pass → fail"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("base.json")).unwrap(),
        base
    );
    let md = std::fs::read_to_string(d.path().join("r/report.md")).unwrap();
    let reg = md.find("Regressions").unwrap();
    assert!(
        reg < md.find("| format |").unwrap(),
        "regressions come first"
    );
    let diff = conform(&["report", "diff", "base.json", "r/report.json"], d.path());
    assert_eq!(diff.status.code(), Some(1));
}

#[test]
fn a_known_failure_that_passes_fails_the_run_until_unmarked() {
    let d = scratch();
    std::fs::write(
        d.path().join("corpus/kimi_k2/y_known.expect.json"),
        r#"{"text":"Hi."}"#,
    )
    .unwrap();
    for f in [
        "n_bad.txt",
        "n_bad.expect.json",
        "y_wrong.txt",
        "y_wrong.expect.json",
    ] {
        std::fs::remove_file(d.path().join("corpus/kimi_k2").join(f)).unwrap();
    }
    let o = conform(&["run", "corpus", "-q"], d.path());
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("XPASS corpus/kimi_k2/y_known.txt"), "{out}");
    assert!(out.contains("remove it from the known failures"));
    std::fs::write(d.path().join("corpus/KNOWN_FAILURES"), "").unwrap();
    assert_eq!(
        conform(&["run", "corpus", "-q"], d.path()).status.code(),
        Some(0)
    );
}

#[test]
fn report_html_reads_a_history_directory_and_names_unreadable_reports() {
    let d = scratch();
    conform(
        &["run", "corpus", "--report-dir", "history/a", "-q"],
        d.path(),
    );
    conform(
        &[
            "run",
            "corpus",
            "--report-dir",
            "history/b",
            "-q",
            "--seed",
            "3",
        ],
        d.path(),
    );
    let o = conform(&["report", "html", "history", "-o", "site"], d.path());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = std::fs::read_to_string(d.path().join("site/index.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<svg"));
    assert!(
        page.contains("corpus/kimi_k2/y_wrong.txt"),
        "the current failure"
    );
    assert!(page.contains("2 report(s) in the history"));

    std::fs::write(d.path().join("broken.json"), "not json").unwrap();
    let o = conform(
        &[
            "report",
            "html",
            "history",
            "broken.json",
            "missing",
            "-o",
            "site",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("broken.json") && err.contains("missing"),
        "{err}"
    );
}
