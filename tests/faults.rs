//! The fault corpus (`tests/faults/`, and what the file system must hold built here): every
//! fault ends in seconds with exit 2 and a message naming the culprit, never green by accident.
#![cfg(feature = "cli")] // drives the `conform` binary or the harness

mod common;

use common::{CALL, root, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs conform in `dir`, killing it after 60 s (a hang is a failure, not a stuck test).
fn conform(args: &[&str], dir: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the conform binary runs");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("conform {args:?} still runs after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn faults() -> PathBuf {
    root().join("tests/faults")
}

/// A scratch corpus with one passing kimi_k2 case.
fn scratch() -> tempfile::TempDir {
    common::scratch("y_ok", CALL, None)
}

/// Exit 2, and the output names `culprit` with `what`.
fn refused(o: &Output, culprit: &str, what: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.lines().any(|l| l.contains(culprit) && l.contains(what)),
        "no line names {culprit:?} with {what:?}:\n{t}"
    );
}

const QUICK: [&str; 4] = ["--quiet", "--strategies", "whole,random", "--seeds=1"];

fn run(dir: &Path, paths: &[&str], extra: &[&str]) -> Output {
    let mut args = vec!["run"];
    args.extend(paths);
    args.extend(QUICK);
    args.extend(extra);
    conform(&args, dir)
}

#[test]
fn an_empty_corpus_judges_nothing_and_fails() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("empty")).unwrap();
    refused(
        &run(d.path(), &["empty"], &[]),
        "empty",
        "no case was judged",
    );
    // A shard with none of the cases says so too.
    let s = scratch();
    let o = run(s.path(), &["."], &["--shard", "2/2"]);
    let o1 = run(s.path(), &["."], &["--shard", "1/2"]);
    let empty = if o.status.code() == Some(2) { &o } else { &o1 };
    refused(empty, "shard", "holds none of the 1 case(s)");
}

#[cfg(unix)]
#[test]
fn directory_loops_are_walked_once_and_named() {
    let d = scratch();
    let k = d.path().join("kimi_k2");
    std::os::unix::fs::symlink(".", k.join("loop")).unwrap();
    std::os::unix::fs::symlink("..", k.join("up")).unwrap();
    let o = run(d.path(), &["."], &[]);
    refused(&o, "kimi_k2/loop", "directory loop");
    refused(&o, "kimi_k2/up", "directory loop");
    // The case itself was judged once, under its own path.
    let t = text(&o);
    assert_eq!(t.matches("y_ok.txt").count(), 0, "{t}");
    assert!(t.contains("│ kimi_k2 ┆ 1 "), "{t}");
}

#[cfg(unix)]
#[test]
fn a_fifo_is_named_not_read() {
    let d = scratch();
    let fifo = d.path().join("kimi_k2/y_x.txt");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let started = Instant::now();
    refused(&run(d.path(), &["."], &[]), "y_x.txt", "FIFO");
    // Given by name, too.
    refused(&run(d.path(), &["kimi_k2/y_x.txt"], &[]), "y_x.txt", "FIFO");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[cfg(unix)]
#[test]
fn a_file_name_that_is_not_utf8_is_named() {
    use std::os::unix::ffi::OsStrExt;
    let d = scratch();
    let name = std::ffi::OsStr::from_bytes(b"y_\xff.txt");
    std::fs::write(d.path().join("kimi_k2").join(name), CALL).unwrap();
    refused(&run(d.path(), &["."], &[]), "y_", "not valid UTF-8");
}

#[cfg(unix)]
#[test]
fn a_dangling_link_is_named() {
    let d = scratch();
    std::os::unix::fs::symlink("nowhere.txt", d.path().join("kimi_k2/y_gone.txt")).unwrap();
    refused(
        &run(d.path(), &["."], &[]),
        "y_gone.txt",
        "symbolic link to nothing",
    );
}

#[test]
fn a_schema_that_does_not_compile_is_one_corpus_error() {
    let o = run(&faults(), &["bad_schema"], &[]);
    let t = text(&o);
    refused(&o, "bad_schema/strict_xml/tools.json", "\"write_file\"");
    refused(&o, "tools.json", "/properties/content/type");
    assert_eq!(t.matches("corpus error").count(), 1, "{t}");
    assert!(!t.contains("schema_violation"), "{t}");
    assert!(t.contains("2 case file(s)"), "{t}");
}

#[test]
fn an_empty_tools_file_is_named_once() {
    let o = run(&faults(), &["empty_tools"], &[]);
    let t = text(&o);
    refused(&o, "empty_tools/strict_xml/tools.json", "invalid JSON");
    assert_eq!(t.matches("tools.json").count(), 1, "{t}");
}

#[test]
fn corpus_rules_of_the_spec_are_enforced() {
    let o = run(&faults(), &["spec"], &[]);
    refused(&o, "y_short.session.json", "1 expectation(s) for 2 turn(s)");
    refused(
        &o,
        "y_expects_error.expect.json",
        "y_ cases must parse without error",
    );
    refused(&o, "lines.jsonl:3", "duplicate id \"a\" (first on line 1)");
    refused(&o, "y_gone.expect.json", "no transcript y_gone.txt");
    // The rest of the corpus is still judged.
    let t = text(&o);
    assert!(
        t.contains("lines.jsonl#a") || t.contains("│ kimi_k2 ┆ 3 "),
        "{t}"
    );
}

#[test]
fn an_unusable_report_directory_fails_before_the_first_replay() {
    let d = scratch();
    std::fs::write(d.path().join("file"), "x").unwrap();
    let o = run(d.path(), &["."], &["--report-dir", "file"]);
    refused(&o, "file", "not a directory");
    assert!(!text(&o).contains("┆"), "no replay, no table: {}", text(&o));
    refused(
        &run(d.path(), &["."], &["--report-dir", "file/sub"]),
        "file/sub",
        "cannot create",
    );
}

#[test]
fn the_report_set_is_replaced_as_one_unit() {
    let d = scratch();
    let rep = d.path().join("rep");
    std::fs::create_dir(&rep).unwrap();
    // A temporary left by a killed writer (no such process) goes.
    let stale = rep.join(format!(".conform-{}-x1y2z3.tmp", i32::MAX - 3));
    std::fs::write(&stale, "half a report").unwrap();
    let o = run(d.path(), &["."], &["--report-dir", "rep"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!stale.exists());
    let manifest = std::fs::read_to_string(rep.join("conform-manifest.json")).unwrap();
    assert!(manifest.contains("\"complete\""), "{manifest}");
    for f in ["report.json", "report.md", "junit.xml"] {
        assert!(manifest.contains(f), "{manifest}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&rep)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A report.json of another run beside this set is detected, not mixed in.
    let json = std::fs::read_to_string(rep.join("report.json")).unwrap();
    std::fs::write(rep.join("report.json"), format!("{json} ")).unwrap();
    let o = conform(
        &["report", "render", "rep/report.json", "-o", "out"],
        d.path(),
    );
    refused(&o, "report.json", "torn");
}

#[test]
fn numeric_arguments_are_range_checked() {
    let d = scratch();
    for (arg, value) in [
        ("--timeout", "1e30"),
        ("--timeout", "1e19"),
        ("--timeout", "0"),
        ("--timeout", "NaN"),
        ("--max-chunk", "0"),
        ("--jobs", "0"),
        ("--bursts", "18446744073709551615"),
        ("--bursts", "4294967295"),
        ("--burst-max-tokens", "0"),
        ("--burst-max-tokens", "99999999999"),
        ("--two-cut-cap", "99999999999"),
    ] {
        let o = conform(&["run", ".", arg, value], d.path());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{arg} {value}: {t}");
        assert!(t.contains(arg) && t.contains("error"), "{arg} {value}: {t}");
        assert!(!t.contains("panicked"), "{t}");
    }
    // Every other command's counts too.
    for args in [
        &[
            "parse",
            "kimi_k2/y_ok.txt",
            "--strategy",
            "bursts",
            "--bursts",
            "4294967295",
        ][..],
        &[
            "parse",
            "kimi_k2/y_ok.txt",
            "--strategy",
            "random",
            "--chunking",
            "99999999999",
        ],
        &["bench", "--max-size", "99999999999"],
        &["bench", "--chunk", "0"],
        &["bench", "--millis", "0"],
        &[
            "engine-cost",
            "--parser",
            "cmd:true",
            "--sizes",
            "99999999999",
        ],
    ] {
        let o = conform(args, d.path());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains("error"), "{args:?}: {t}");
        assert!(!t.contains("panicked"), "{args:?}: {t}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_an_error() {
    let d = scratch();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["run", ".", "--quiet"])
        .current_dir(d.path())
        .stdout(full)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("cannot write to stdout"), "{t}");
}

#[test]
fn nothing_judged_is_said_once_with_its_reason() {
    // The only case is refused for its tools.json, or for its sidecar: it was loadable, so
    // the run says it was refused, once, quiet or not.
    let d = scratch();
    std::fs::write(d.path().join("kimi_k2/tools.json"), "[").unwrap();
    let d2 = scratch();
    std::fs::write(d2.path().join("kimi_k2/y_ok.deltas.json"), "{").unwrap();
    for dir in [d.path(), d2.path()] {
        for quiet in [true, false] {
            let mut args = vec!["run", ".", "--strategies", "whole"];
            if quiet {
                args.push("--quiet");
            }
            let o = conform(&args, dir);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(2), "{t}");
            assert_eq!(t.matches("no case was judged").count(), 1, "{t}");
            assert!(!t.contains("no loadable case file"), "{t}");
            refused(&o, "no case was judged", "refused");
        }
    }
}

/// Runs conform in `dir` with stdout or stderr (or both) on /dev/full.
#[cfg(target_os = "linux")]
fn conform_full(args: &[&str], dir: &Path, stdout_full: bool, stderr_full: bool) -> Output {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conform"));
    cmd.args(args).current_dir(dir).env("NO_COLOR", "1");
    cmd.stdout(if stdout_full {
        Stdio::from(full())
    } else {
        Stdio::piped()
    });
    cmd.stderr(if stderr_full {
        Stdio::from(full())
    } else {
        Stdio::piped()
    });
    cmd.output().unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn output_failures_exit_2_never_101() {
    let d = scratch();
    let bench = [
        "bench",
        "--max-size",
        "1000",
        "--millis",
        "1",
        "--formats",
        "kimi_k2",
        "--no-baseline",
    ];
    let cases: [(&[&str], bool, bool); 6] = [
        (&bench, true, false),
        (&["run", ".", "--strategies", "whole"], false, true),
        (&["run", ".", "--strategies", "whole"], true, true),
        (&["report", "diff", "nope.json", "nope.json"], false, true),
        (&["formats"], true, false),
        (&["run", "--help"], true, false),
    ];
    for (args, out_full, err_full) in cases {
        let o = conform_full(args, d.path(), out_full, err_full);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        if !err_full {
            assert!(err.contains("cannot write to stdout"), "{args:?}: {err}");
        }
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[cfg(unix)]
fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[cfg(unix)]
#[test]
fn fifos_given_as_inputs_are_named_not_read() {
    let d = scratch();
    let p = d.path();
    mkfifo(&p.join("pipe"));
    let started = Instant::now();
    for (arg, culprit) in [
        ("--known-failures", "pipe"),
        ("--baseline", "pipe"),
        ("--tokenizer", "pipe"),
    ] {
        refused(&run(p, &["."], &[arg, "pipe"]), culprit, "FIFO");
    }
    refused(
        &conform(&["report", "diff", "pipe", "pipe"], p),
        "pipe",
        "FIFO",
    );
    refused(
        &conform(&["parse", "kimi_k2/y_ok.txt", "--tokenizer", "pipe"], p),
        "pipe",
        "FIFO",
    );
    // In a corpus: a FIFO sidecar or KNOWN_FAILURES is named, not silently skipped.
    mkfifo(&p.join("kimi_k2/y_ok.deltas.json"));
    refused(&run(p, &["."], &[]), "y_ok.deltas.json", "FIFO");
    std::fs::remove_file(p.join("kimi_k2/y_ok.deltas.json")).unwrap();
    mkfifo(&p.join("kimi_k2/KNOWN_FAILURES"));
    refused(&run(p, &["kimi_k2"], &[]), "KNOWN_FAILURES", "FIFO");
    assert!(started.elapsed() < Duration::from_secs(40));
}

#[test]
fn a_tokenizer_file_is_checked_as_it_is_read() {
    // A huge file is refused by its size; a bad line stops the reading there.
    let d = scratch();
    let p = d.path();
    let f = std::fs::File::create(p.join("huge.tiktoken")).unwrap();
    f.set_len(1 << 30).unwrap(); // sparse: no disk used
    refused(
        &run(p, &["."], &["--tokenizer", "huge.tiktoken"]),
        "huge.tiktoken",
        "larger than",
    );
    let mut bad = "not base64 at all\n".to_string();
    bad.push_str(&"QQ== 0\n".repeat(1000));
    std::fs::write(p.join("bad.tiktoken"), bad).unwrap();
    refused(
        &run(p, &["."], &["--tokenizer", "bad.tiktoken"]),
        "bad.tiktoken",
        "line 1",
    );
}

#[test]
fn a_schema_too_large_to_compile_is_refused_naming_its_tool() {
    // A 100 000-long chain of $ref took 13 s to compile; 200 000 values are no tool's schema.
    let n = 100_000;
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        defs.insert(
            format!("d{i}"),
            serde_json::json!({"$ref": format!("#/$defs/d{}", i + 1)}),
        );
    }
    defs.insert(format!("d{n}"), serde_json::json!({"type": "string"}));
    let chain = serde_json::json!([{"name": "chained", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs}}]);
    let wide: Vec<u32> = (0..200_000).collect();
    let wide = serde_json::json!([{"name": "wide", "parameters": {
        "type": "object", "properties": {"a": {"enum": wide}}}}]);
    for (tools, name, what) in [(chain, "chained", "$ref"), (wide, "wide", "values")] {
        let d = scratch();
        std::fs::write(d.path().join("kimi_k2/tools.json"), tools.to_string()).unwrap();
        let started = Instant::now();
        let o = run(d.path(), &["."], &[]);
        refused(&o, &format!("\"{name}\""), what);
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
