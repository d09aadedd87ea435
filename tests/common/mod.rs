//! Helpers shared by the end-to-end tests: running the `conform` binary, reading its output,
//! and writing scratch corpora.

// Each file of tests/ is its own test binary and compiles this module on its own; none of them
// uses every helper, and what one binary leaves unused is not dead code of the suite.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root, where `corpus/`, `specs/` and `tests/` are.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the `conform` binary in `dir` without colours; Python adapters it starts write no
/// bytecode into the tree.
pub fn conform<S: AsRef<OsStr>>(args: &[S], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("the conform binary runs")
}

/// What a run printed on stdout.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What a run printed, stdout then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// True when `cmd --version` runs; otherwise prints why the test is skipped.
pub fn have(cmd: &str) -> bool {
    let ok = Command::new(cmd)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("note: `{cmd}` is not installed; skipping this test");
    }
    ok
}

/// A kimi_k2 call after the text "Hi.".
pub const CALL: &str = "Hi.<|tool_calls_section_begin|><|tool_call_begin|>functions.ls:0<|tool_call_argument_begin|>{\"path\": \"/x\"}<|tool_call_end|><|tool_calls_section_end|>";

/// A scratch corpus with an empty `kimi_k2/` directory, and that directory.
pub fn kimi_k2_corpus() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let k = d.path().join("kimi_k2");
    std::fs::create_dir(&k).unwrap();
    (d, k)
}

/// Writes the case `NAME.txt` holding `transcript` into `dir`, and `NAME.expect.json` holding
/// `expect` when there is one.
pub fn write_case(dir: &Path, name: &str, transcript: &str, expect: Option<&str>) {
    std::fs::write(dir.join(format!("{name}.txt")), transcript).unwrap();
    if let Some(expect) = expect {
        std::fs::write(dir.join(format!("{name}.expect.json")), expect).unwrap();
    }
}

/// A scratch corpus whose `kimi_k2/` holds the one case `write_case` writes.
pub fn scratch(name: &str, transcript: &str, expect: Option<&str>) -> tempfile::TempDir {
    let (d, k) = kimi_k2_corpus();
    write_case(&k, name, transcript, expect);
    d
}

/// A JSON file, parsed.
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The report.json of a run in `dir` with `--report-dir out`.
pub fn report(dir: &Path) -> serde_json::Value {
    read_json(&dir.join("out/report.json"))
}
