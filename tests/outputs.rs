//! What conform writes and reads back as reports, tried as a CI owner and an attacker would:
//! output paths that are links, pipes or devices, merges of the wrong shards, concurrent
//! writers, markup in what reports quote, runs that judged nothing, tampered reports.
#![cfg(all(feature = "cli", unix))] // drives the `conform` binary; FIFOs and links

mod common;

use common::{CALL, conform, text};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Output;

/// A scratch corpus with one passing kimi_k2 case, and its report written to `rep/`.
fn reported() -> tempfile::TempDir {
    let d = common::scratch("y_ok", CALL, None);
    let o = conform(
        &[
            "run",
            ".",
            "-q",
            "--strategies",
            "whole",
            "--report-dir",
            "rep",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    d
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A character device like /dev/null at `p`, when this user may make one (root).
fn mknod_null(p: &Path) -> bool {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; makedev(1, 3) is /dev/null's.
    unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) == 0 }
}

fn refused(o: &Output, culprit: &str, what: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.lines().any(|l| l.contains(culprit) && l.contains(what)),
        "no line names {culprit:?} with {what:?}:\n{t}"
    );
}

#[test]
fn an_output_through_a_symlink_writes_its_target_and_keeps_the_link() {
    let d = reported();
    let p = d.path();
    std::fs::create_dir(p.join("history")).unwrap();
    std::fs::write(p.join("history/old.json"), "old").unwrap();
    std::os::unix::fs::symlink("history/old.json", p.join("latest.json")).unwrap();
    let o = conform(
        &["report", "merge", "rep/report.json", "-o", "latest.json"],
        p,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let meta = std::fs::symlink_metadata(p.join("latest.json")).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced");
    let written = std::fs::read_to_string(p.join("history/old.json")).unwrap();
    assert!(written.contains("\"schema_version\""), "{written}");
    // A baseline behind a link, rewritten with --update-baseline: the same.
    std::os::unix::fs::symlink("history/base.json", p.join("base.json")).unwrap();
    std::fs::copy(p.join("rep/report.json"), p.join("history/base.json")).unwrap();
    let o = conform(
        &[
            "run",
            ".",
            "-q",
            "--strategies",
            "whole",
            "--baseline",
            "base.json",
            "--update-baseline",
        ],
        p,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        std::fs::symlink_metadata(p.join("base.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let base = std::fs::read_to_string(p.join("history/base.json")).unwrap();
    assert!(
        !base.contains("\"timings\""),
        "rewritten as a baseline: {base}"
    );
    // A link to nothing is not written through (as cp refuses to).
    std::os::unix::fs::symlink("nowhere/x.json", p.join("dangling.json")).unwrap();
    let o = conform(
        &["report", "merge", "rep/report.json", "-o", "dangling.json"],
        p,
    );
    refused(&o, "dangling.json", "symbolic link to nothing");
}

#[test]
fn an_output_that_is_a_fifo_or_a_device_is_written_into_never_replaced() {
    let d = reported();
    let p = d.path();
    let fifo = p.join("pipe.json");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let o = conform(
        &["report", "merge", "rep/report.json", "-o", "pipe.json"],
        p,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(reader.join().unwrap().contains("\"schema_version\""));
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // A character device (a /dev/null of our own, when we may make one).
    let null = p.join("null");
    if mknod_null(&null) {
        let o = conform(&["report", "merge", "rep/report.json", "-o", "null"], p);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let t = std::fs::symlink_metadata(&null).unwrap().file_type();
        assert!(t.is_char_device(), "the device node was replaced");
    }
    // A directory or a socket is refused.
    std::fs::create_dir(p.join("adir")).unwrap();
    let o = conform(&["report", "merge", "rep/report.json", "-o", "adir"], p);
    refused(&o, "adir", "directory");
    let _sock = std::os::unix::net::UnixListener::bind(p.join("sock")).unwrap();
    let o = conform(&["report", "merge", "rep/report.json", "-o", "sock"], p);
    refused(&o, "sock", "socket");
    assert!(
        std::fs::symlink_metadata(p.join("sock"))
            .unwrap()
            .file_type()
            .is_socket()
    );
}

#[test]
fn a_report_directory_whose_files_are_not_regular_is_refused_before_the_run() {
    let d = common::scratch("y_ok", CALL, None);
    let p = d.path();
    std::fs::create_dir(p.join("rep")).unwrap();
    mkfifo(&p.join("rep/report.md"));
    let o = conform(&["run", ".", "-q", "--report-dir", "rep"], p);
    refused(&o, "report.md", "FIFO");
    assert!(!text(&o).contains("┆"), "no replay ran: {}", text(&o));
    assert!(
        std::fs::symlink_metadata(p.join("rep/report.md"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // A member that is a link to a regular file is written through, the link kept.
    std::fs::remove_file(p.join("rep/report.md")).unwrap();
    std::fs::write(p.join("kept.md"), "").unwrap();
    std::os::unix::fs::symlink("../kept.md", p.join("rep/report.md")).unwrap();
    let o = conform(&["run", ".", "-q", "--report-dir", "rep"], p);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        std::fs::symlink_metadata(p.join("rep/report.md"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(p.join("kept.md"))
            .unwrap()
            .contains("conform")
    );
    // And read back as a member of the set.
    let o = conform(&["report", "render", "rep/report.json", "-o", "out"], p);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_second_writer_into_a_report_directory_is_refused_before_it_runs() {
    use std::os::fd::AsRawFd;
    let d = common::scratch("y_ok", CALL, None);
    let p = d.path();
    std::fs::create_dir(p.join("rep")).unwrap();
    // The first writer, holding the directory as conform holds it.
    let held = std::fs::File::open(p.join("rep")).unwrap();
    // SAFETY: an advisory lock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    for args in [
        &["run", ".", "-q", "--report-dir", "rep"][..],
        &["report", "render", "x/report.json", "-o", "rep"],
    ] {
        if args[0] == "report" {
            let o = conform(&["run", ".", "-q", "--report-dir", "x"], p);
            assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        }
        let o = conform(args, p);
        refused(&o, "rep", "another conform is writing");
        assert!(!text(&o).contains("┆"), "no replay ran: {}", text(&o));
    }
    assert!(!p.join("rep/report.json").exists());
    drop(held);
    let o = conform(&["run", ".", "-q", "--report-dir", "rep"], p);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// The parts of a Markdown line outside its code spans (CommonMark: a span opened by a run
/// of N backticks ends at the next run of exactly N), and the spans' contents.
fn spans(line: &str) -> (String, Vec<String>) {
    let b = line.as_bytes();
    let (mut outside, mut codes) = (String::new(), Vec::new());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            outside.push(b[i] as char);
            i += 1;
            continue;
        }
        let n = b[i..].iter().take_while(|&&c| c == b'`').count();
        let start = i + n;
        let mut j = start;
        let mut close = None;
        while j < b.len() {
            if b[j] == b'`' {
                let m = b[j..].iter().take_while(|&&c| c == b'`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                let s = &line[start..j];
                let s = if s.len() > 2 && s.starts_with(' ') && s.ends_with(' ') {
                    &s[1..s.len() - 1]
                } else {
                    s
                };
                codes.push(s.to_string());
                i = j + n;
            }
            None => {
                outside.push_str(&line[i..start]);
                i = start;
            }
        }
    }
    (outside, codes)
}

#[test]
fn report_md_escapes_what_it_quotes() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let k = p.join("kimi_k2");
    std::fs::create_dir(&k).unwrap();
    // A case id with backticks and markup, failing with a message that quotes its text.
    let id = "y_a`b``c <img src=x onerror=alert(1)> [x](javascript:alert) |.txt";
    let hostile = "Hi <a href=\"http://e.vil\">click</a> ![t](http://e.vil/t.png) **b** `x` | y";
    std::fs::write(k.join(id), hostile).unwrap();
    std::fs::write(
        k.join(id.replace(".txt", ".expect.json")),
        r#"{"text":"something else"}"#,
    )
    .unwrap();
    let o = conform(
        &[
            "run",
            ".",
            "-q",
            "--strategies",
            "whole",
            "--report-dir",
            "rep",
        ],
        p,
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let md = std::fs::read_to_string(p.join("rep/report.md")).unwrap();
    let mut ids_seen = 0;
    for line in md.lines() {
        let (outside, codes) = spans(line);
        for bad in ["<a", "<img", "](", "**b**"] {
            assert!(
                !outside.contains(bad),
                "{bad:?} outside a code span: {line}"
            );
        }
        // A `|` outside a code span in a list item or heading would split table rows.
        if !line.starts_with('|') {
            assert!(!outside.replace("\\|", "").contains('|'), "{line}");
        }
        ids_seen += codes.iter().filter(|c| c.ends_with(id)).count();
    }
    assert!(
        ids_seen >= 1,
        "the id is quoted whole in one code span:\n{md}"
    );
}

#[test]
fn a_run_that_judged_nothing_says_so_in_every_report() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir(p.join("empty")).unwrap();
    let o = conform(&["run", "empty", "-q", "--report-dir", "rep"], p);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let md = std::fs::read_to_string(p.join("rep/report.md")).unwrap();
    assert!(md.contains("nothing was judged"), "{md}");
    assert!(!md.contains("all invariants hold"), "{md}");
    let junit = std::fs::read_to_string(p.join("rep/junit.xml")).unwrap();
    assert!(junit.contains("errors=\"1\""), "{junit}");
    assert!(junit.contains("nothing was judged"), "{junit}");
    // Rendered again from the saved report: the same.
    let o = conform(&["report", "render", "rep/report.json", "-o", "again"], p);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = std::fs::read_to_string(p.join("again/report.md")).unwrap();
    assert!(md.contains("nothing was judged"), "{md}");
}

#[test]
fn report_html_walks_a_history_once_and_names_what_it_cannot_read() {
    let d = reported();
    let p = d.path();
    std::fs::create_dir_all(p.join("hist/a")).unwrap();
    std::fs::copy(p.join("rep/report.json"), p.join("hist/a/report.json")).unwrap();
    std::os::unix::fs::symlink("..", p.join("hist/a/up")).unwrap();
    std::os::unix::fs::symlink(".", p.join("hist/self")).unwrap();
    let o = conform(&["report", "html", "hist", "-o", "page"], p);
    refused(&o, "hist/a/up", "directory loop");
    refused(&o, "hist/self", "directory loop");
    assert!(!p.join("page/index.html").exists());
    std::fs::remove_file(p.join("hist/a/up")).unwrap();
    std::fs::remove_file(p.join("hist/self")).unwrap();
    // A second link to a directory already walked is walked once, and said.
    std::os::unix::fs::symlink("a", p.join("hist/b")).unwrap();
    let o = conform(&["report", "html", "hist", "-o", "page"], p);
    refused(&o, "hist/b", "already walked");
    std::fs::remove_file(p.join("hist/b")).unwrap();
    let o = conform(&["report", "html", "hist", "-o", "page"], p);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("from 1 report(s)"), "{}", text(&o));
    // A FIFO named report.json is named, not read (it would block).
    std::fs::create_dir(p.join("hist/c")).unwrap();
    mkfifo(&p.join("hist/c/report.json"));
    let started = std::time::Instant::now();
    let o = conform(&["report", "html", "hist", "-o", "page"], p);
    refused(&o, "hist/c/report.json", "FIFO");
    let o = conform(&["report", "html", "hist/c/report.json", "-o", "page"], p);
    refused(&o, "hist/c/report.json", "FIFO");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

/// The saved report of `reported()`, changed by `f`, written to `name`.
fn tampered(d: &Path, name: &str, f: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("rep/report.json")).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(d.join(name), serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn tampered_reports_are_refused_by_every_reader() {
    let d = reported();
    let p = d.path();
    tampered(p, "totals.json", |v| {
        v["runs"][0]["totals"]["passed"] = 7.into();
    });
    tampered(p, "format_totals.json", |v| {
        v["runs"][0]["formats"]["kimi_k2"]["replays"] = 99.into();
    });
    tampered(p, "pass_with_violations.json", |v| {
        v["runs"][0]["cases"][0]["violations"] = serde_json::json!([{
            "invariant": "split_invariance", "strategy": "bytes", "cuts": [[1]],
            "failing_replays": 1, "message": "m", "replay": "r"
        }]);
    });
    tampered(p, "duplicate.json", |v| {
        let c = v["runs"][0]["cases"][0].clone();
        v["runs"][0]["cases"].as_array_mut().unwrap().push(c);
    });
    tampered(p, "corpus_count.json", |v| {
        v["corpus"]["cases"] = 5.into();
    });
    for (file, what) in [
        ("totals.json", "totals"),
        ("format_totals.json", "totals"),
        ("pass_with_violations.json", "pass"),
        ("duplicate.json", "twice"),
        ("corpus_count.json", "cases"),
    ] {
        for args in [
            vec!["report", "diff", "rep/report.json", file],
            vec!["report", "render", file, "-o", "out"],
            vec!["report", "html", file, "-o", "page"],
            vec!["report", "merge", file, "-o", "merged.json"],
        ] {
            let o = conform(&args, p);
            refused(&o, file, what);
        }
        let o = conform(&["run", ".", "-q", "--baseline", file], p);
        refused(&o, file, what);
    }
}

/// A scratch corpus of six passing cases, run whole into `all/` and as shards `s<k>/` of 3.
fn sharded(name: &str) -> tempfile::TempDir {
    let (d, k) = common::kimi_k2_corpus();
    for i in 0..6 {
        common::write_case(&k, &format!("y_{name}{i}"), CALL, None);
    }
    let run = |extra: &[&str], dir: &str| {
        let mut args = vec![
            "run",
            ".",
            "-q",
            "--strategies",
            "whole",
            "--report-dir",
            dir,
        ];
        args.extend_from_slice(extra);
        conform(&args, d.path());
        assert!(d.path().join(dir).join("report.json").exists());
    };
    run(&[], "all");
    for s in 1..=3 {
        run(&["--shard", &format!("{s}/3")], &format!("s{s}"));
    }
    d
}

#[test]
fn a_merge_is_complete_or_refused_and_a_partial_one_says_so() {
    let d = sharded("a");
    let p = d.path();
    let merge = |args: &[&str]| {
        let mut a = vec!["report", "merge"];
        a.extend_from_slice(args);
        conform(&a, p)
    };
    // Missing a shard: refused, naming it.
    let o = merge(&["s1/report.json", "s2/report.json", "-o", "m.json"]);
    refused(&o, "3 missing", "--partial");
    assert!(!p.join("m.json").exists());
    // The same shard twice: refused.
    let o = merge(&[
        "s1/report.json",
        "s1/report.json",
        "s2/report.json",
        "-o",
        "m.json",
    ]);
    refused(&o, "shard 1 of 3", "both");
    // A shard of another corpus: refused.
    let other = sharded("b");
    std::fs::copy(other.path().join("s3/report.json"), p.join("other3.json")).unwrap();
    let o = merge(&[
        "s1/report.json",
        "s2/report.json",
        "other3.json",
        "-o",
        "m.json",
    ]);
    refused(&o, "other3.json", "another corpus");
    // All three: the unsharded report.
    let o = merge(&[
        "s3/report.json",
        "s1/report.json",
        "s2/report.json",
        "-o",
        "m.json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let read = |f: &str| -> serde_json::Value {
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p.join(f)).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("timings");
        v
    };
    assert_eq!(read("m.json"), read("all/report.json"));
    // Two of three with --partial: written, and it says so everywhere.
    let o = merge(&[
        "s1/report.json",
        "s2/report.json",
        "--partial",
        "-o",
        "part.json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("shards 1, 2 of 3 (3 missing)"),
        "{}",
        text(&o)
    );
    let v = read("part.json");
    assert_eq!(
        v["partial"],
        serde_json::json!({"count": 3, "shards": [1, 2]})
    );
    let o = conform(&["report", "render", "part.json", "-o", "r"], p);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = std::fs::read_to_string(p.join("r/report.md")).unwrap();
    assert!(md.contains("partial"), "{md}");
    // ... and merges again with the missing shard into the whole.
    let o = merge(&["part.json", "s3/report.json", "-o", "m2.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(read("m2.json"), read("all/report.json"));
}

#[test]
fn a_merge_keeps_every_parser() {
    let d = reported();
    let p = d.path();
    // The same corpus judged by another parser (its run renamed: a report of its own).
    tampered(p, "other.json", |v| {
        v["runs"][0]["parser"] = "cmd:other".into();
    });
    let o = conform(
        &[
            "report",
            "merge",
            "rep/report.json",
            "other.json",
            "-o",
            "m.json",
        ],
        p,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("m.json")).unwrap()).unwrap();
    let parsers: Vec<&str> = m["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["parser"].as_str().unwrap())
        .collect();
    assert_eq!(parsers, ["builtin", "cmd:other"]);
}
