//! End-to-end tests of external parsers (specs/adapter.md): the example adapters show exactly
//! their documented failures, and misbehaving adapters never stop a run.
#![cfg(feature = "cli")] // drives the `conform` binary or the harness

mod common;

use common::{conform, have, kimi_k2_corpus, root, stdout, write_case};
use conform::backends::AdapterOptions;
use conform::harness::chunking::{ChunkingParams, Strategy};
use conform::harness::parsers::ParserRun;
use conform::harness::run::{RunConfig, Status};
use conform::harness::session::{RunPlan, Silent, execute};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `<case id> <invariant or status>` for every failure the terminal output lists, and
/// `<case id> split_token` for every case reported apart as breaking only on split tokens.
fn reported_failures(out: &str) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    let mut case: Option<String> = None;
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("SPLIT TOKEN ") {
            let id = rest.split(' ').next().unwrap_or_default();
            set.insert(format!("{id} split_token"));
            case = None;
            continue;
        }
        let mut words = line.split(' ');
        match words.next() {
            Some(head @ ("FAIL" | "CRASH" | "TIMEOUT" | "PROTOCOL_ERROR")) => {
                let id = words.next().unwrap_or_default().to_string();
                if head != "FAIL" {
                    set.insert(format!("{id} {}", head.to_lowercase()));
                }
                case = Some(id);
            }
            _ if !line.starts_with("  ") || line.starts_with("   ") => {
                if !line.starts_with(' ') {
                    case = None;
                }
            }
            _ => {
                let inv = line
                    .trim_start()
                    .split([' ', ':'])
                    .next()
                    .unwrap_or_default();
                if let Some(c) = &case
                    && !inv.is_empty()
                    && inv.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_')
                {
                    set.insert(format!("{c} {inv}"));
                }
            }
        }
    }
    set
}

fn expected_failures(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .expect("the expected list is committed")
        .lines()
        .map(|l| l.split(" #").next().unwrap_or_default().trim())
        .filter(|l| !l.starts_with('#'))
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn assert_exactly(out: &str, expected: &Path) {
    let got = reported_failures(out);
    let want = expected_failures(expected);
    let extra: Vec<_> = got.difference(&want).collect();
    let missing: Vec<_> = want.difference(&got).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "reported but not expected: {extra:#?}\nexpected but not reported: {missing:#?}"
    );
}

#[test]
fn the_python_example_shows_exactly_its_documented_failures() {
    if !have("python3") {
        return;
    }
    let o = conform(
        &[
            "run",
            "corpus/kimi_k2",
            "--quiet",
            "--parser",
            "cmd:python3 examples/adapters/python/kimi_adapter.py",
        ],
        root(),
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.starts_with("parser: cmd:python3 examples/adapters/python/kimi_adapter.py"));
    assert!(!out.contains("not applicable"), "events are checked: {out}");
    assert_exactly(
        &out,
        &root().join("examples/adapters/python/expected_failures.txt"),
    );
}

/// What the vLLM and SGLang adapters share (`examples/adapters/pyengine/`) has unit tests of its
/// own; they need no engine, so every `cargo test` runs them.
#[test]
fn the_python_engine_adapters_shared_code_passes_its_unit_tests() {
    if !have("python3") {
        return;
    }
    let o = Command::new("python3")
        .args([
            "-m",
            "unittest",
            "discover",
            "-s",
            "examples/adapters/pyengine",
        ])
        .current_dir(root())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let ran = err.lines().find_map(|l| {
        l.strip_prefix("Ran ")?
            .split(' ')
            .next()?
            .parse::<u32>()
            .ok()
    });
    assert!(ran.is_some_and(|n| n > 0), "no test ran: {err}");
}

#[test]
fn the_node_example_shows_exactly_its_documented_failures() {
    if !have("node") {
        return;
    }
    let o = conform(
        &[
            "run",
            "corpus/kimi_k2",
            "--quiet",
            "--parser",
            "cmd:node examples/adapters/node/kimi_adapter.mjs",
        ],
        root(),
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("delta_contract: not applicable (the parser reports only final results)"),
        "{out}"
    );
    assert_exactly(
        &out,
        &root().join("examples/adapters/node/expected_failures.txt"),
    );
}

/// A scratch kimi_k2 corpus of plain-text cases, each expecting its own text back.
fn scratch(texts: &[(&str, &str)]) -> tempfile::TempDir {
    let (d, k) = kimi_k2_corpus();
    for (name, text) in texts {
        let expect = serde_json::json!({"text": text, "calls": [], "error": null, "warnings": []});
        write_case(&k, &format!("y_{name}"), text, Some(&expect.to_string()));
    }
    d
}

const PLAIN: [(&str, &str); 6] = [
    ("a", "hello one"),
    ("b", "hello two, é"),
    ("c", "hello three"),
    ("d", "hello four"),
    ("e", "hello five"),
    ("f", "hello six"),
];

fn small_run() -> RunConfig {
    RunConfig {
        strategies: vec![Strategy::Whole, Strategy::Bytes, Strategy::Random],
        params: ChunkingParams {
            random_groupings: 2,
            ..ChunkingParams::default()
        },
        ..RunConfig::default()
    }
}

fn run_script(script: &str, dir: &Path, timeout: Duration) -> ParserRun {
    let opts = AdapterOptions {
        jobs: 2,
        timeout,
        ..AdapterOptions::default()
    };
    run_script_with(script, &[], dir, &opts)
}

/// Runs `tests/adapters/<script> <args…>` over the cases of `dir` with `opts`.
fn run_script_with(script: &str, args: &[&str], dir: &Path, opts: &AdapterOptions) -> ParserRun {
    let mut spec = format!(
        "cmd:python3 {}",
        root().join("tests/adapters").join(script).display()
    );
    for a in args {
        spec.push(' ');
        spec.push_str(a);
    }
    let plan = RunPlan {
        paths: vec![dir.display().to_string()],
        cfg: small_run(),
        parsers: vec![spec],
        adapter: opts.clone(),
        ..RunPlan::default()
    };
    let mut out = execute(&plan, &Silent).expect("the adapter starts");
    assert!(out.corpus_errors.is_empty(), "{:?}", out.corpus_errors);
    out.parser_runs.pop().unwrap()
}

fn statuses(run: &ParserRun) -> BTreeMap<String, Status> {
    run.reports
        .iter()
        .map(|r| {
            let name = r.id.rsplit('/').next().unwrap_or_default().to_string();
            (name, r.status)
        })
        .collect()
}

fn all_pass_but(run: &ParserRun, odd: &str, status: Status) {
    let s = statuses(run);
    assert_eq!(s.len(), PLAIN.len() + 1, "every case is reported: {s:?}");
    for (name, st) in &s {
        let want = if name == odd { status } else { Status::Pass };
        assert_eq!(*st, want, "{name}: {s:?}");
    }
}

#[test]
fn a_correct_adapter_passes_and_agrees_with_builtin() {
    if !have("python3") {
        return;
    }
    let d = scratch(&PLAIN);
    let script = root().join("tests/adapters/echo.py");
    let o = conform(
        &[
            "run",
            ".",
            "--parser",
            "builtin",
            "--parser",
            &format!("cmd:python3 {}", script.display()),
        ],
        d.path(),
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("parser: builtin"), "{out}");
    assert!(out.contains("all agree: 6 kimi_k2 case(s)"), "{out}");
    assert!(
        out.contains("0 case(s) where the parsers disagree"),
        "{out}"
    );
}

#[test]
fn a_crashing_adapter_is_restarted_and_the_run_completes() {
    if !have("python3") {
        return;
    }
    let d = scratch(&PLAIN);
    let run = run_script("crash.py", d.path(), Duration::from_secs(10));
    let s = statuses(&run);
    assert_eq!(s.len(), PLAIN.len());
    assert!(s.values().any(|&st| st == Status::Crash), "{s:?}");
    assert!(
        s.values()
            .all(|&st| st == Status::Crash || st == Status::Pass),
        "{s:?}"
    );
    let stats = run.stats.unwrap();
    assert!(stats.crashes >= 1 && stats.started >= 2, "{stats:?}");
    let crashed = run
        .reports
        .iter()
        .find(|r| r.status == Status::Crash)
        .unwrap();
    assert!(
        crashed
            .not_applicable
            .iter()
            .any(|n| n.contains("exited") && n.contains("on purpose")),
        "the crash names the exit and the stderr: {:?}",
        crashed.not_applicable
    );
}

#[test]
fn a_hanging_adapter_times_out_on_that_case_only() {
    if !have("python3") {
        return;
    }
    let mut texts = PLAIN.to_vec();
    texts.push(("hang", "please HANG now"));
    let d = scratch(&texts);
    let started = Instant::now();
    let run = run_script("hang.py", d.path(), Duration::from_secs(3));
    all_pass_but(&run, "y_hang.txt", Status::Timeout);
    assert_eq!(run.stats.unwrap().timeouts, 1);
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Whether a process still runs (a zombie waiting to be reaped does not).
#[cfg(target_os = "linux")]
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

#[cfg(target_os = "linux")]
#[test]
fn a_timed_out_adapter_takes_the_processes_it_started_with_it() {
    if !have("python3") || !have("sleep") {
        return;
    }
    let pids = tempfile::tempdir().unwrap();
    let file = pids.path().join("workers");
    let text = format!("please HANG_WORKER {}", file.display());
    let mut texts = PLAIN.to_vec();
    texts.push(("hang", &text));
    let d = scratch(&texts);
    let run = run_script("hang_with_worker.py", d.path(), Duration::from_secs(2));
    all_pass_but(&run, "y_hang.txt", Status::Timeout);
    let workers: Vec<u32> = std::fs::read_to_string(&file)
        .expect("the adapter started a worker")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert!(!workers.is_empty());
    let deadline = Instant::now() + Duration::from_secs(5);
    while workers.iter().any(|&p| running(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let alive: Vec<u32> = workers.into_iter().filter(|&p| running(p)).collect();
    assert!(
        alive.is_empty(),
        "workers outlived their adapter: {alive:?}"
    );
}

#[test]
fn a_hanging_adapter_on_the_command_line_gives_exit_1_and_names_the_case() {
    if !have("python3") {
        return;
    }
    let d = scratch(&[("a", "fine"), ("hang", "HANG")]);
    let script = root().join("tests/adapters/hang.py");
    let o = conform(
        &[
            "run",
            ".",
            "--timeout",
            "3",
            "--jobs",
            "1",
            "--parser",
            &format!("cmd:python3 {}", script.display()),
        ],
        d.path(),
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("TIMEOUT ./kimi_k2/y_hang.txt [kimi_k2]"),
        "{out}"
    );
    assert!(out.contains("│ kimi_k2 ┆ 2     ┆ 1 "), "{out}");
}

#[test]
fn a_garbage_printing_adapter_gives_a_protocol_error_on_that_case_only() {
    if !have("python3") {
        return;
    }
    let mut texts = PLAIN.to_vec();
    texts.push(("garbage", "GARBAGE please"));
    let d = scratch(&texts);
    let run = run_script("garbage.py", d.path(), Duration::from_secs(10));
    all_pass_but(&run, "y_garbage.txt", Status::ProtocolError);
    let r = run
        .reports
        .iter()
        .find(|r| r.status == Status::ProtocolError)
        .unwrap();
    assert!(
        r.not_applicable[0].contains("not JSON"),
        "{:?}",
        r.not_applicable
    );
}

#[test]
fn an_answer_with_the_wrong_id_is_a_protocol_error() {
    if !have("python3") {
        return;
    }
    let mut texts = PLAIN.to_vec();
    texts.push(("wrong", "WRONGID here"));
    let d = scratch(&texts);
    let run = run_script("wrong_id.py", d.path(), Duration::from_secs(10));
    all_pass_but(&run, "y_wrong.txt", Status::ProtocolError);
    let r = run
        .reports
        .iter()
        .find(|r| r.status == Status::ProtocolError)
        .unwrap();
    assert!(
        r.not_applicable[0].contains("carries id"),
        "{:?}",
        r.not_applicable
    );
}

#[test]
fn a_structured_error_answer_is_a_crash_of_that_case() {
    if !have("python3") {
        return;
    }
    let mut texts = PLAIN.to_vec();
    texts.push(("err", "ERR here"));
    let d = scratch(&texts);
    let run = run_script("error_reply.py", d.path(), Duration::from_secs(10));
    all_pass_but(&run, "y_err.txt", Status::Crash);
    let r = run
        .reports
        .iter()
        .find(|r| r.status == Status::Crash)
        .unwrap();
    assert!(
        r.not_applicable[0].contains("KeyError"),
        "{:?}",
        r.not_applicable
    );
}

#[test]
fn a_flood_on_stderr_is_kept_bounded_and_harms_nothing() {
    if !have("python3") {
        return;
    }
    let d = scratch(&PLAIN);
    let run = run_script("stderr_flood.py", d.path(), Duration::from_secs(10));
    assert!(run.reports.iter().all(|r| r.status == Status::Pass));
    assert!(run.stderr_bytes > 4 * 1024 * 1024, "{}", run.stderr_bytes);
    assert!(run.stderr_tail.len() <= 64 * 1024 + 64);
    assert!(
        run.stderr_tail.trim_end().ends_with("xxx"),
        "the tail is the newest output"
    );
}

#[test]
fn an_adapter_that_cannot_start_is_a_usage_error() {
    if !have("python3") {
        return;
    }
    let d = scratch(&PLAIN);
    let script = root().join("tests/adapters/no_hello.py");
    let o = conform(
        &[
            "run",
            ".",
            "--parser",
            &format!("cmd:python3 {}", script.display()),
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("hello failed") && err.contains("missing dependency"),
        "{err}"
    );
    let o = conform(&["run", ".", "--parser", "vllm"], d.path());
    assert_eq!(o.status.code(), Some(2));
}

/// A run of `flaky_start.py` with a fresh state directory.
fn flaky(delay: &str, failing: &str, timeout: Duration) -> ParserRun {
    flaky_with(&[delay, failing], timeout)
}

fn flaky_with(args: &[&str], timeout: Duration) -> ParserRun {
    let state = tempfile::tempdir().unwrap();
    let d = scratch(&PLAIN);
    let opts = AdapterOptions {
        jobs: 2,
        timeout,
        start_timeout: Duration::from_secs(30),
        ..AdapterOptions::default()
    };
    let dir = state.path().display().to_string();
    let mut all = vec![dir.as_str()];
    all.extend_from_slice(args);
    run_script_with("flaky_start.py", &all, d.path(), &opts)
}

/// The crash messages of a run, one per crashed case.
fn crash_messages(run: &ParserRun) -> Vec<String> {
    run.reports
        .iter()
        .filter(|r| r.status == Status::Crash)
        .map(|r| r.not_applicable.join(" | "))
        .collect()
}

#[test]
fn a_slow_start_has_its_own_timeout_at_the_first_start_and_every_restart() {
    if !have("python3") {
        return;
    }
    // Every copy takes 1.5 s to say hello, longer than a replay may take (1 s): only the
    // replay the first copy died on is a crash, the restarts' time is charged to no replay.
    let run = flaky("1.5", "none", Duration::from_secs(1));
    let crashes = crash_messages(&run);
    assert_eq!(crashes.len(), 1, "{crashes:#?}");
    assert!(crashes[0].contains("dies on purpose"), "{crashes:#?}");
    assert_eq!(
        statuses(&run)
            .values()
            .filter(|&&s| s == Status::Pass)
            .count(),
        PLAIN.len() - 1
    );
    assert!(run.stats.unwrap().started >= 2);
}

#[test]
fn start_timeout_on_the_command_line_bounds_the_first_hello() {
    if !have("python3") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let d = scratch(&PLAIN);
    let spec = format!(
        "cmd:python3 {} {} 5 none",
        root().join("tests/adapters/flaky_start.py").display(),
        state.path().display()
    );
    let started = Instant::now();
    let o = conform(
        &["run", ".", "--start-timeout", "1", "--parser", &spec],
        d.path(),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("hello failed") && err.contains("in time"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let o = conform(
        &["run", ".", "--start-timeout", "0", "--parser", &spec],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--start-timeout"));
}

#[test]
fn a_failed_restart_is_not_charged_to_the_next_case() {
    if !have("python3") {
        return;
    }
    // The second start fails once; the third works. No case but the one the first copy
    // died on may suffer for it.
    let run = flaky("0", "2", Duration::from_secs(10));
    let crashes = crash_messages(&run);
    assert_eq!(crashes.len(), 1, "{crashes:#?}");
    assert!(crashes[0].contains("dies on purpose"), "{crashes:#?}");
    assert!(run.stats.unwrap().started >= 3);
}

#[test]
fn an_adapter_that_cannot_be_restarted_is_given_up_after_three_failed_starts() {
    if !have("python3") {
        return;
    }
    let run = flaky("0", "2-", Duration::from_secs(10));
    let crashes = crash_messages(&run);
    assert_eq!(crashes.len(), PLAIN.len(), "{crashes:#?}");
    let given_up: Vec<_> = crashes
        .iter()
        .filter(|m| m.contains("could not be restarted (") && m.contains("failed starts in a row"))
        .collect();
    assert_eq!(given_up.len(), PLAIN.len() - 1, "{crashes:#?}");
    assert!(
        given_up.iter().all(|m| m.contains("fails on purpose")),
        "{given_up:#?}"
    );
    // One first start, three failed restarts, and one more when both copies' threads were
    // starting at once.
    let started = run.stats.unwrap().started;
    assert!((4..=5).contains(&started), "{started}");
}

#[test]
fn a_working_copy_keeps_serving_when_no_other_can_be_started() {
    if !have("python3") {
        return;
    }
    let run = flaky_with(&["0", "2-", "--first-lives"], Duration::from_secs(10));
    let s = statuses(&run);
    assert!(s.values().all(|&st| st == Status::Pass), "{s:?}");
}

#[test]
fn a_reply_line_that_never_ends_fails_at_the_line_limit_not_the_deadline() {
    if !have("python3") {
        return;
    }
    let mut texts = PLAIN.to_vec();
    texts.push(("endless", "ENDLESS line"));
    let d = scratch(&texts);
    let opts = AdapterOptions {
        jobs: 2,
        timeout: Duration::from_secs(60),
        max_response_bytes: 4 << 20,
        ..AdapterOptions::default()
    };
    let started = Instant::now();
    let run = run_script_with("flood.py", &[], d.path(), &opts);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    all_pass_but(&run, "y_endless.txt", Status::ProtocolError);
    let r = run
        .reports
        .iter()
        .find(|r| r.status == Status::ProtocolError)
        .unwrap();
    assert!(
        r.not_applicable[0].contains("more than 4194304 bytes"),
        "{:?}",
        r.not_applicable
    );
}

/// Peak resident memory of a running process, polled until it exits (or `limit` passes, when
/// it is killed): `(peak bytes, exit status, stdout)`.
#[cfg(target_os = "linux")]
fn watch_memory(mut cmd: Command, limit: Duration, kill_above: u64) -> (u64, Option<i32>, String) {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let mut peak = 0u64;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        let rss = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
            * 1024;
        peak = peak.max(rss);
        if started.elapsed() > limit || peak > kill_above {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (peak, status, reader.join().unwrap())
}

#[cfg(target_os = "linux")]
#[test]
fn floods_on_stdout_end_by_the_deadline_with_memory_bounded() {
    if !have("python3") {
        return;
    }
    let d = scratch(&[
        ("a", "fine"),
        ("blanks", "BLANKS forever"),
        ("newlines", "NEWLINES first"),
        ("mega", "MEGA reply"),
    ]);
    let script = root().join("tests/adapters/flood.py");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conform"));
    cmd.args([
        "run",
        ".",
        "--timeout",
        "10",
        "--jobs",
        "2",
        "--strategies",
        "whole,random",
        "--seeds",
        "2",
        "--parser",
        &format!("cmd:python3 {}", script.display()),
    ])
    .current_dir(d.path())
    .env("NO_COLOR", "1");
    let gib = 1 << 30;
    // 10 s: 100 MB of newlines take a while through an unoptimized build on a busy machine.
    let (peak, status, out) = watch_memory(cmd, Duration::from_secs(90), gib);
    assert!(peak < gib, "conform grew to {peak} bytes\n{out}");
    assert_eq!(status, Some(1), "the run ends by itself\n{out}");
    assert!(out.contains("TIMEOUT ./kimi_k2/y_blanks.txt"), "{out}");
    for ok in ["y_a", "y_newlines", "y_mega"] {
        assert!(!out.contains(&format!("/{ok}.txt")), "{ok} passes:\n{out}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn an_events_answer_costs_about_its_line() {
    // 2 MB of transcript answered with one event per byte: a 54 MB line of 2 M events, which
    // took 1.37 GB read whole into a tree of values (25 times the line); read as it is parsed,
    // it takes 180 MB.
    if !have("python3") {
        return;
    }
    let (d, k) = kimi_k2_corpus();
    std::fs::write(k.join("y_big.txt"), "a".repeat(2_000_000)).unwrap();
    let script = root().join("tests/adapters/many_events.py");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conform"));
    cmd.args([
        "parse",
        "kimi_k2/y_big.txt",
        "--result-only",
        "--timeout",
        "120",
        "--parser",
        &format!("cmd:python3 {}", script.display()),
    ])
    .current_dir(d.path());
    let gib = 1 << 30;
    let (peak, status, out) = watch_memory(cmd, Duration::from_secs(150), gib);
    assert_eq!(status, Some(0), "{}", out.get(..300).unwrap_or(&out));
    assert!(out.contains(&"a".repeat(1000)), "the text is folded");
    assert!(
        peak < 500 << 20,
        "conform grew to {peak} bytes for a 54 MB answer"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn parse_of_a_long_recording_costs_about_its_cuts() {
    // 2 M recorded deltas: the printed document took 220 MB built as a tree of values and
    // then as one string; written as it is serialized, 72 MB (`run` takes 172 MB).
    let (d, k) = kimi_k2_corpus();
    let n = 2_000_000;
    std::fs::write(k.join("y_rec.txt"), "a".repeat(n)).unwrap();
    let cuts: Vec<usize> = (1..n).collect();
    std::fs::write(
        k.join("y_rec.deltas.json"),
        serde_json::json!({ "cuts": cuts }).to_string(),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conform"));
    cmd.args(["parse", "kimi_k2/y_rec.txt", "--recorded", "--result-only"])
        .current_dir(d.path());
    let (peak, status, out) = watch_memory(cmd, Duration::from_secs(120), 1 << 30);
    assert_eq!(status, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["cuts"].as_array().unwrap().len(), n - 1);
    assert_eq!(v["result"]["text"].as_str().unwrap().len(), n);
    assert!(peak < 140 << 20, "conform parse grew to {peak} bytes");
}

/// Runs `hello_with.py` with `args` over a small corpus from the command line.
fn hello_run(args: &str) -> Output {
    let d = scratch(&PLAIN);
    let script = root().join("tests/adapters/hello_with.py");
    conform(
        &[
            "run",
            ".",
            "--strategies",
            "whole",
            "--parser",
            &format!("cmd:python3 {} {args}", script.display()),
        ],
        d.path(),
    )
}

#[test]
fn a_hello_without_a_known_format_is_a_usage_error() {
    if !have("python3") {
        return;
    }
    let o = hello_run(r#"'{"formats": ["kimi-k2"]}'"#);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("does not know: \"kimi-k2\"") && err.contains("kimi_k2, openai_sse"),
        "{err}"
    );
    let o = hello_run(r#"'{"formats": ["kimi_k2", "nope"]}'"#);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"nope\""));
    let o = hello_run(r#"'{"formats": []}'"#);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("names no format"), "{err}");
}

#[test]
fn protocol_2_is_offered_and_1_and_2_are_accepted() {
    if !have("python3") {
        return;
    }
    for answer in [
        r#"--want-protocol 2 '{}'"#,
        r#"'{"protocol": 2}'"#,
        r#"'{"protocol": 1}'"#,
    ] {
        let o = hello_run(answer);
        assert_eq!(o.status.code(), Some(0), "{answer}: {}", stdout(&o));
    }
    let o = hello_run(r#"'{"protocol": 3}'"#);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("speaks protocol 3, conform speaks 2"), "{err}");
}
