//! End-to-end: token-aligned and recorded chunkings through `conform run` and `conform parse`.
#![cfg(feature = "cli")] // drives the `conform` binary or the harness

mod common;

use base64::Engine as _;
use common::{conform, report, text};
use std::path::Path;

const CALL: &str = "Hello.<|tool_calls_section_begin|><|tool_call_begin|>functions.ls:0<|tool_call_argument_begin|>{\"path\": \"/x\"}<|tool_call_end|><|tool_calls_section_end|>";

/// A tiny byte-level vocabulary: every byte, then "He", "ll", "llo", "Hello".
fn ranks_file(path: &Path) {
    let b64 = |t: &[u8]| base64::engine::general_purpose::STANDARD.encode(t);
    let mut s = String::new();
    for b in 0..=255u8 {
        s.push_str(&format!("{} {b}\n", b64(&[b])));
    }
    for (i, t) in ["He", "ll", "llo", "Hello"].iter().enumerate() {
        s.push_str(&format!("{} {}\n", b64(t.as_bytes()), 256 + i));
    }
    std::fs::write(path, s).unwrap();
}

/// A scratch corpus: one kimi_k2 case with recorded deltas, and the ranks file.
fn scratch() -> tempfile::TempDir {
    let d = common::scratch(
        "y_ok",
        CALL,
        Some(
            r#"{"text":"Hello.","calls":[{"name":"ls","id":"0","arguments":{"path":"/x"}}],"error":null}"#,
        ),
    );
    std::fs::write(
        d.path().join("kimi_k2/y_ok.deltas.json"),
        r#"{"cuts":[5,6,34],"engine":"test"}"#,
    )
    .unwrap();
    ranks_file(&d.path().join("tiny.tiktoken"));
    d
}

#[test]
fn run_replays_tokens_bursts_and_recorded_with_a_ranks_file() {
    let d = scratch();
    let o = conform(
        &[
            "run",
            "kimi_k2",
            "--strategies",
            "tokens,bursts,recorded",
            "--tokenizer",
            "tiny.tiktoken",
            "--bursts",
            "3",
            "--report-dir",
            "out",
            "-q",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = report(d.path());
    assert_eq!(
        r["strategies"],
        serde_json::json!(["tokens", "bursts", "recorded"])
    );
    let case = &r["runs"][0]["cases"][0];
    assert_eq!(case["status"], "pass");
    // whole + tokens + 3 bursts + recorded.
    assert_eq!(case["replays"], 6, "{case}");

    // Without the sidecar there is no recorded chunking.
    std::fs::remove_file(d.path().join("kimi_k2/y_ok.deltas.json")).unwrap();
    let o = conform(
        &[
            "run",
            "kimi_k2",
            "--strategies",
            "recorded",
            "--report-dir",
            "out",
            "-q",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(report(d.path())["runs"][0]["cases"][0]["replays"], 1);
}

#[test]
fn parse_replays_token_chunkings_with_their_ids() {
    let d = scratch();
    let o = conform(
        &[
            "parse",
            "kimi_k2/y_ok.txt",
            "--strategy",
            "tokens",
            "--tokenizer",
            "tiny.tiktoken",
            "--result-only",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids = v["token_ids"].as_array().unwrap();
    assert_eq!(ids[0], serde_json::json!([259]), "\"Hello\" is one token");
    assert_eq!(ids[1], serde_json::json!([46]), "\".\" is its byte");
    assert_eq!(
        ids[2],
        serde_json::json!([163595]),
        "the section token, whole"
    );
    assert_eq!(v["cuts"][0], 5);
    assert_eq!(v["result"]["text"], "Hello.");

    // The recorded deltas, with ids where every cut is a token boundary.
    let o = conform(
        &["parse", "kimi_k2/y_ok.txt", "--recorded", "--token-ids"],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cuts"], serde_json::json!([5, 6, 34]));
    assert_eq!(v["token_ids"].as_array().unwrap().len(), 4);
    let o = conform(
        &["parse", "kimi_k2/y_ok.txt", "--cuts", "3", "--token-ids"],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("not a token boundary"), "{}", text(&o));
}

#[test]
fn bad_strategies_tokenizers_and_sidecars_exit_2_naming_them() {
    let d = scratch();
    std::fs::write(d.path().join("broken.tiktoken"), "SGVsbG8= one\n").unwrap();
    for (args, want) in [
        (
            vec!["run", "kimi_k2", "--strategies", "tokens,tokenz"],
            "tokenz",
        ),
        (
            vec!["run", "kimi_k2", "--tokenizer", "missing.tiktoken"],
            "missing.tiktoken",
        ),
        (
            vec!["run", "kimi_k2", "--tokenizer", "broken.tiktoken"],
            "broken.tiktoken",
        ),
        (
            vec![
                "parse",
                "kimi_k2/y_ok.txt",
                "--tokenizer",
                "broken.tiktoken",
            ],
            "broken.tiktoken",
        ),
        (
            vec!["parse", "kimi_k2/y_ok.txt", "--strategy", "nope"],
            "nope",
        ),
    ] {
        let o = conform(&args, d.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
    std::fs::write(d.path().join("kimi_k2/y_ok.deltas.json"), r#"{"cuts":[0]}"#).unwrap();
    let o = conform(&["run", "kimi_k2", "-q"], d.path());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("y_ok.deltas.json"), "{}", text(&o));
}

#[test]
fn a_sidecar_whose_token_counts_disagree_with_the_tokenizer_exits_2_naming_it() {
    let d = scratch();
    // tiny.tiktoken: "Hello" "." <section begin> and then many byte tokens, not 9.
    std::fs::write(
        d.path().join("kimi_k2/y_ok.deltas.json"),
        r#"{"cuts":[5,6,34],"tokens":[1,1,1,9]}"#,
    )
    .unwrap();
    let run = ["run", "kimi_k2", "--tokenizer", "tiny.tiktoken", "-q"];
    let o = conform(&run, d.path());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("y_ok.deltas.json") && text(&o).contains("delta 4 holds"),
        "{}",
        text(&o)
    );
    // Counted right, the case runs.
    let o = conform(
        &[
            "parse",
            "kimi_k2/y_ok.txt",
            "--recorded",
            "--token-ids",
            "--tokenizer",
            "tiny.tiktoken",
        ],
        d.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = v["token_ids"][3].as_array().unwrap().len();
    std::fs::write(
        d.path().join("kimi_k2/y_ok.deltas.json"),
        format!(r#"{{"cuts":[5,6,34],"tokens":[1,1,1,{n}]}}"#),
    )
    .unwrap();
    let o = conform(&run, d.path());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_tokenizer_file_that_is_not_the_formats_vocabulary_exits_2_naming_it() {
    let d = scratch();
    // A tokenizer.json that gives kimi_k2's section token another id.
    let mut vocab = serde_json::Map::new();
    for (i, c) in (b'!'..=b'~').map(char::from).enumerate() {
        vocab.insert(c.to_string(), serde_json::json!(i));
    }
    let json = serde_json::json!({
        "added_tokens": [{"id": 7, "content": "<|tool_calls_section_begin|>", "single_word": false,
                          "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
        "model": {"type": "BPE", "vocab": vocab, "merges": []}
    });
    std::fs::write(d.path().join("other.json"), json.to_string()).unwrap();
    let o = conform(
        &["run", "kimi_k2", "--tokenizer", "other.json", "-q"],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("other.json"), "{}", text(&o));
    // A cached vocabulary file that does not parse: the run stops naming it.
    let cache = d.path().join("cache");
    std::fs::create_dir_all(cache.join("kimi_k2")).unwrap();
    std::fs::write(cache.join("kimi_k2/kimi_k2.tiktoken"), "not ranks\n").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["run", "kimi_k2", "--strategies", "tokens", "-q"])
        .current_dir(d.path())
        .env("CONFORM_TOKENIZERS", &cache)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("kimi_k2.tiktoken"), "{}", text(&o));
    // An empty cache: the fallback cuts, and the report says so.
    std::fs::remove_file(cache.join("kimi_k2/kimi_k2.tiktoken")).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_conform"))
        .args([
            "run",
            "kimi_k2",
            "--strategies",
            "tokens",
            "--report-dir",
            "out",
            "-q",
        ])
        .current_dir(d.path())
        .env("CONFORM_TOKENIZERS", &cache)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("scripts/fetch-tokenizers"),
        "{}",
        text(&o)
    );
    let r = report(d.path());
    assert_eq!(
        r["chunking"]["tokenizers"]["kimi_k2"],
        "o200k_base (fallback: kimi_k2 not in the cache)"
    );
}

/// The vocabulary of `id` from the cache, or `None` (a skip) unless CI requires it.
fn cached(id: &str, file: &str) -> bool {
    let dir = std::env::var_os("CONFORM_TOKENIZERS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/conform/tokenizers")
        });
    let there = dir.join(id).join(file).exists();
    assert!(
        there || std::env::var_os("CONFORM_REQUIRE_TOKENIZERS").is_none(),
        "CONFORM_REQUIRE_TOKENIZERS is set and {id} is not in {}",
        dir.display()
    );
    if !there {
        eprintln!("skipped: {id} is not in the cache (scripts/fetch-tokenizers)");
    }
    there
}

#[test]
fn hermes_cuts_tool_call_as_qwens_single_token_and_deepseek_its_own_markers() {
    let root = common::root();
    if cached("qwen2", "qwen.tiktoken") {
        let o = conform(
            &[
                "parse",
                "corpus/hermes/y_boolean_argument.txt",
                "--strategy",
                "tokens",
                "--token-ids",
                "--result-only",
            ],
            root,
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let t = std::fs::read_to_string(root.join("corpus/hermes/y_boolean_argument.txt")).unwrap();
        let at = t.find("<tool_call>").unwrap();
        let cuts: Vec<usize> = v["cuts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap() as usize)
            .collect();
        let k = cuts
            .iter()
            .position(|&c| c == at + "<tool_call>".len())
            .unwrap();
        assert_eq!(v["token_ids"][k], serde_json::json!([151657]), "{v}");
    }
    if cached("deepseek_v3", "tokenizer.json") {
        let o = conform(
            &[
                "parse",
                "corpus/deepseek_v31/y_single_call.txt",
                "--strategy",
                "tokens",
                "--token-ids",
                "--result-only",
            ],
            root,
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let ids: Vec<u64> = v["token_ids"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c.as_array().unwrap().iter().map(|i| i.as_u64().unwrap()))
            .collect();
        assert!(
            ids.contains(&128806),
            "<｜tool▁calls▁begin｜> is DeepSeek's 128806: {ids:?}"
        );
    }
}

#[test]
fn parse_names_a_broken_cached_vocabulary() {
    let d = scratch();
    let cache = d.path().join("cache");
    std::fs::create_dir_all(cache.join("kimi_k2")).unwrap();
    std::fs::write(cache.join("kimi_k2/kimi_k2.tiktoken"), "not ranks\n").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["parse", "kimi_k2/y_ok.txt", "--strategy", "tokens"])
        .current_dir(d.path())
        .env("CONFORM_TOKENIZERS", &cache)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("kimi_k2.tiktoken"), "{}", text(&o));
}
