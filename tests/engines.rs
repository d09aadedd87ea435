//! End to end: `scripts/engines` over a fake engine and one whose setup fails, on a tiny corpus
//! (tests/engines/): the page holds the failed row, the summary, failures by class with their
//! replay commands (which replay), the policy cases apart, and the cost table.
#![cfg(feature = "cli")] // drives the `conform` binary

mod common;

use common::{have, root};
use std::process::Command;

#[test]
fn the_matrix_of_a_fake_engine_classes_its_failures_and_names_a_failed_setup() {
    if !have("python3") {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("engines");
    let readme = out.path().join("README.md");
    std::fs::write(
        &readme,
        "# x\n\n<!-- engines-matrix:begin -->\nold\n<!-- engines-matrix:end -->\n\nrest\n",
    )
    .unwrap();
    let run = Command::new("python3")
        .arg("scripts/engines")
        .args(["--adapters", "tests/engines/adapters"])
        .args(["--corpus", "tests/engines/corpus"])
        .args(["--conform", env!("CARGO_BIN_EXE_conform")])
        .args(["--jobs", "1", "--cost-sizes", "2000,20000"])
        .arg("--out")
        .arg(&dir)
        .arg("--readme")
        .arg(&readme)
        .current_dir(root())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{log}");

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let engines = manifest["engines"].as_array().unwrap();
    let broken = engines.iter().find(|e| e["engine"] == "broken").unwrap();
    assert_eq!(broken["setup"]["ok"], false);
    assert!(
        broken["setup"]["message"]
            .as_str()
            .unwrap()
            .contains("cargo build --manifest-path broken/Cargo.toml")
    );

    // The adapter's engine_ns is summed per format in the report.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fake-drop/report.json")).unwrap())
            .unwrap();
    let timed = &report["adapters"]["cmd:tests/engines/adapters/fake/run --drop-second-call"]["engine_ns"]
        ["hermes"];
    assert!(timed["responses"].as_u64().unwrap() > 0, "{report}");
    assert!(timed["total_ns"].as_u64().unwrap() >= timed["max_ns"].as_u64().unwrap());

    let md = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        md.contains("| broken (9.9.9) | not run: setup failed |"),
        "{md}"
    );
    assert!(
        md.contains("fix: `tests/engines/adapters/broken/setup`"),
        "{md}"
    );
    assert!(
        md.contains("| fake-stream (0.0.1) | 2/4 · 1 bug in 1 case · +1 policy |"),
        "{md}"
    );
    assert!(
        md.contains("| fake-drop (0.0.1) | 1/4 · 2 bugs in 2 cases · +1 policy |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| fake-drop | hermes | 4 | 1 | 2 | 1 | 1 | expectation 2 | crash 1, call_lost 1 |"
        ),
        "{md}"
    );
    // Failures by class, the policy case apart, each with its replay command.
    assert!(
        md.contains("| fake-drop | hermes | crash 1, call_lost 1, policy:text_after_calls 1 | [fake-drop/FAILURES.md](fake-drop/FAILURES.md) |"),
        "{md}"
    );
    let listed = std::fs::read_to_string(dir.join("fake-drop/FAILURES.md")).unwrap();
    let drop = listed.split("### fake-drop · hermes").nth(1).unwrap();
    assert!(drop.contains("#### call lost (1)"), "{drop}");
    assert!(drop.contains("#### policy, not bugs (1)"), "{drop}");
    assert!(
        drop.contains("| policy:text_after_calls | `tests/engines/corpus/hermes/y_text_after.txt`")
    );
    assert!(drop.contains(
        "`conform parse --format hermes tests/engines/corpus/hermes/y_crash.txt --parser 'cmd:tests/engines/adapters/fake/run --drop-second-call'`"
    ));
    // The cost table has both sizes for both variants.
    assert!(
        md.contains("| parser | format | engine 2 KB | engine 20 KB | engine growth |"),
        "{md}"
    );
    assert!(md.contains("| fake-stream | hermes | "), "{md}");

    // The page's replay command for the lost call replays it.
    let replay = drop
        .lines()
        .find(|l| l.contains("y_two_calls.txt") && l.contains("conform parse"))
        .unwrap();
    let parsed = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args([
            "parse",
            "--format",
            "hermes",
            "tests/engines/corpus/hermes/y_two_calls.txt",
        ])
        .args([
            "--parser",
            "cmd:tests/engines/adapters/fake/run --drop-second-call",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(replay.contains("--drop-second-call"));
    let doc: serde_json::Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(doc["result"]["calls"].as_array().unwrap().len(), 1, "{doc}");
    assert!(doc["engine_ns"].as_u64().is_some(), "{doc}");

    // The README's summary between the markers is replaced, the rest kept.
    let top = std::fs::read_to_string(&readme).unwrap();
    assert!(!top.contains("old") && top.ends_with("\n\nrest\n"), "{top}");
    assert!(
        top.contains("| fake-drop (0.0.1) | 1/4 · 2 bugs in 2 cases · +1 policy |"),
        "{top}"
    );
    assert!(top.contains("Generated "), "{top}");

    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<h4>call lost (1)</h4>"), "{html}");
    assert!(html.contains("<table class=\"data\">"));
}
