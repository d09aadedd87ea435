//! `conform fuzz-seeds` (seed corpora and dictionaries for `fuzz/` from `corpus/`) and
//! `conform fuzz-case` (a fuzz artifact → a minimized corpus case).
//!
//! The input layouts and the oracles live in `fuzzing/layout.rs` and `fuzzing/checks.rs`; the
//! fuzz targets include the same files, so a seed decodes in a target exactly as it was written
//! here and a minimized case fails for the reason the target found.

#[allow(
    dead_code,
    reason = "shared with the fuzz targets, which use the other half"
)]
pub mod checks;
#[allow(
    dead_code,
    reason = "shared with the fuzz targets, which use the other half"
)]
pub mod layout;

use clap::{Args, Subcommand};
use conform::backends::builtin::{capture_panics, catching};
use conform::event::ParseResult;
use conform::formats::{self, Format};
use conform::harness::corpus::{self, Label, LoadOptions};
use conform::harness::minimize::minimize;
use conform::tools::Tools;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The fuzzing subcommands.
#[derive(Subcommand)]
pub enum FuzzCommand {
    /// Write the fuzz targets' seed corpora and dictionaries from a corpus.
    FuzzSeeds(SeedArgs),
    /// Turn a fuzz artifact into a minimized corpus case and print what was written.
    FuzzCase(CaseArgs),
}

/// Options of `conform fuzz-seeds`.
#[derive(Args)]
pub struct SeedArgs {
    /// Corpus directories [default: corpus/].
    paths: Vec<String>,
    /// Where the seed corpora go, one directory per target.
    #[arg(long, default_value = "fuzz/seeds")]
    out: PathBuf,
    /// Where the dictionaries go.
    #[arg(long, default_value = "fuzz/dicts")]
    dicts: PathBuf,
}

/// Options of `conform fuzz-case`.
#[derive(Args)]
pub struct CaseArgs {
    /// The artifact libFuzzer wrote (`fuzz/artifacts/<target>/crash-…`).
    artifact: PathBuf,
    /// The target that found it: parse or roundtrip.
    #[arg(long, default_value = "parse")]
    target: String,
    /// The corpus root; the case goes to `<out>/<format>/`.
    #[arg(long, default_value = "corpus")]
    out: PathBuf,
}

/// Runs a fuzzing subcommand and returns the exit code.
pub fn run(cmd: FuzzCommand) -> u8 {
    let r = match cmd {
        FuzzCommand::FuzzSeeds(a) => seeds(a),
        FuzzCommand::FuzzCase(a) => case(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            err!("error: {e}");
            2
        }
    }
}

/// The index of a format in the registry, as the layouts' format byte.
fn format_index(id: &str) -> u8 {
    formats::REGISTRY
        .iter()
        .position(|f| f.id == id)
        .unwrap_or(0) as u8
}

/// A file name made of the safe characters of a case id.
fn file_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// True for a transcript that looks like a server-sent event stream.
fn looks_like_sse(t: &[u8]) -> bool {
    [&b"data:"[..], b"event:", b":", b"id:"]
        .iter()
        .any(|p| t.starts_with(p))
}

fn seeds(a: SeedArgs) -> Result<u8, String> {
    let paths = if a.paths.is_empty() {
        vec!["corpus/".to_string()]
    } else {
        a.paths
    };
    let corpus = corpus::load(&paths, &LoadOptions::default());
    for e in &corpus.errors {
        err!("warning: skipped {e}");
    }
    let mut written: BTreeMap<&str, usize> = BTreeMap::new();
    let mut json_seen = BTreeSet::new();
    let mut dict: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut sse_formats = BTreeSet::new();
    let mut put = |target: &'static str, name: String, bytes: Vec<u8>| -> Result<(), String> {
        *written.entry(target).or_default() += 1;
        write(&a.out.join(target).join(name), &bytes)
    };
    for case in &corpus.cases {
        let idx = format_index(case.format);
        let base = file_name(&case.id);
        for (t, turn) in case.turns.iter().enumerate() {
            let name = if case.turns.len() > 1 {
                format!("{base}_t{t}")
            } else {
                base.clone()
            };
            put("parse", name.clone(), layout::encode_parse(idx, &[], turn))?;
            if looks_like_sse(turn) {
                sse_formats.insert(case.format);
                put("sse", name.clone(), layout::encode_cut_text(&[], turn))?;
            }
            let Some(Some(exp)) = case.expects.get(t) else {
                continue;
            };
            for c in exp.calls.iter().flatten() {
                let text = c.arguments.to_string();
                if json_seen.insert(text.clone()) {
                    let n = json_seen.len();
                    put(
                        "json",
                        format!("args_{n}"),
                        layout::encode_cut_text(&[], text.as_bytes()),
                    )?;
                }
            }
            if case.label == Label::Accept
                && let (Some(text), Some(calls)) = (&exp.text, &exp.calls)
                && let Some(bytes) = layout::encode_roundtrip(idx, &[], text, calls)
            {
                put("roundtrip", name, bytes)?;
            }
        }
        let words = dict.entry(case.format).or_default();
        for d in &case.tools.defs {
            words.insert(d.name.clone());
            for p in d.param_names() {
                words.insert(p.to_string());
            }
        }
    }
    // Formats without a corpus still get a dictionary from their markers.
    for f in formats::REGISTRY {
        let words = dict.entry(f.id).or_default();
        let tools = corpus
            .cases
            .iter()
            .find(|c| c.format == f.id)
            .map(|c| c.tools.as_ref().clone())
            .unwrap_or_default();
        let markers = (f.markers)(&tools);
        let xml = markers
            .iter()
            .any(|m| m.starts_with('<') && !m.starts_with("<|"));
        let names: Vec<String> = words.iter().cloned().collect();
        if xml {
            for n in &names {
                words.insert(format!("<{n}>"));
                words.insert(format!("</{n}>"));
            }
            words.extend(XML_WORDS.iter().map(|s| s.to_string()));
        }
        if sse_formats.contains(f.id) {
            words.extend(SSE_WORDS.iter().map(|s| s.to_string()));
        }
        words.extend(markers);
        words.extend(f.reasoning.map(|r| r.tags()).unwrap_or_default());
        words.extend(JSON_WORDS.iter().map(|s| s.to_string()));
        for (_, extra) in EXTRA_WORDS.iter().filter(|(id, _)| *id == f.id) {
            words.extend(extra.iter().map(|s| s.to_string()));
        }
    }
    let mut all = BTreeSet::new();
    for (id, words) in &dict {
        write_dict(&a.dicts.join(format!("{id}.dict")), words)?;
        all.extend(words.iter().cloned());
    }
    write_dict(&a.dicts.join("all.dict"), &all)?;
    let json: BTreeSet<String> = JSON_WORDS.iter().map(|s| s.to_string()).collect();
    write_dict(&a.dicts.join("json.dict"), &json)?;
    let sse: BTreeSet<String> = SSE_WORDS
        .iter()
        .chain(JSON_WORDS)
        .map(|s| s.to_string())
        .collect();
    write_dict(&a.dicts.join("sse.dict"), &sse)?;
    for (target, n) in &written {
        out!("{n:>5} seed(s) in {}", a.out.join(target).display());
    }
    out!(
        "{:>5} dictionaries in {}",
        dict.len() + 3,
        a.dicts.display()
    );
    Ok(0)
}

/// Keywords of a format that are not delimiters (its `markers` give those).
const EXTRA_WORDS: &[(&str, &[&str])] = &[
    (
        "harmony",
        &[
            "assistant",
            "analysis",
            "commentary",
            "final",
            " to=functions.",
            " to=browser.search",
            " json",
            " code",
            "<|refusal|>",
            "<|endoftext|>",
        ],
    ),
    (
        "kimi_k2",
        &["functions.", ":0", "functions.a.b:1", "<|im_end|>", " <|"],
    ),
    (
        "roo_xml",
        &["attempt_completion", "result", "path", "content"],
    ),
    ("strict_xml", &["<param>", "</param>"]),
    (
        "forge_xml",
        &[
            "<tool>",
            "</tool>",
            "<server_name>",
            "<tool_name>",
            "<arguments>",
            "NaN",
            "+Inf",
            "-Inf",
            "007",
            "TRUE",
            "Null",
        ],
    ),
    (
        "forge_json",
        &[
            "<tool>",
            "</tool>",
            "\"server_name\"",
            "\"tool_name\"",
            "\"arguments\"",
        ],
    ),
];

/// JSON tokens every format's arguments are made of.
const JSON_WORDS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\\\"",
    "\\\\",
    "\\u0000",
    "\\ud83d\\ude00",
    "\\n",
    "true",
    "false",
    "null",
    "-0",
    "1e308",
    "-1.5E-7",
    "18446744073709551616",
    "{\"",
    "\":",
    "\"}",
];

/// XML constructs the XML formats must handle.
const XML_WORDS: &[&str] = &[
    "<![CDATA[",
    "]]>",
    "]]]]><![CDATA[>",
    "&amp;",
    "&lt;",
    "&gt;",
    "&quot;",
    "&apos;",
    "&#60;",
    "&#x3C;",
    "</",
    "/>",
    "<?xml version=\"1.0\"?>",
    "<!--",
    "-->",
    "<!DOCTYPE",
];

/// SSE framing and the provider event vocabulary.
const SSE_WORDS: &[&str] = &[
    "data: ",
    "data:",
    "event: ",
    "id: ",
    "retry: ",
    ": ping",
    "\n\n",
    "\r\n",
    "\r",
    "[DONE]",
    "\"choices\"",
    "\"delta\"",
    "\"content\"",
    "\"tool_calls\"",
    "\"index\"",
    "\"id\"",
    "\"function\"",
    "\"name\"",
    "\"arguments\"",
    "\"finish_reason\"",
    "\"type\"",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "tool_use",
    "input_json_delta",
    "partial_json",
    "text_delta",
    "\"input\"",
    "error",
];

/// Writes a libFuzzer dictionary: one quoted entry per line, non-printables as `\xNN`.
fn write_dict(path: &Path, words: &BTreeSet<String>) -> Result<(), String> {
    let mut out = String::from("# generated by `conform fuzz-seeds`; do not edit\n");
    for w in words.iter().filter(|w| !w.is_empty()) {
        out.push('"');
        for &b in w.as_bytes() {
            match b {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                0x20..=0x7e => out.push(b as char),
                _ => out.push_str(&format!("\\x{b:02X}")),
            }
        }
        out.push_str("\"\n");
    }
    write(path, out.as_bytes())
}

/// Whether a parse input fails the target's oracle (a panic counts), with the reason.
fn parse_failure(format: &Format, tools: &Tools, data: &[u8], cuts: &[usize]) -> Option<String> {
    match catching(|| checks::check_parse(format, tools, data, cuts)) {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(m) => Some(format!("panic: {m}")),
    }
}

fn tools_in(root: &Path, format: &str) -> Result<Tools, String> {
    let p = root.join(format).join("tools.json");
    if !p.is_file() {
        return Ok(Tools::default());
    }
    let t = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    Tools::from_json(&t).map_err(|e| format!("{}: {e}", p.display()))
}

fn case(a: CaseArgs) -> Result<u8, String> {
    let data = std::fs::read(&a.artifact).map_err(|e| format!("{}: {e}", a.artifact.display()))?;
    if formats::REGISTRY.is_empty() {
        return Err("no format is registered".into());
    }
    capture_panics();
    let (format, transcript, cuts, expect) = match a.target.as_str() {
        "parse" => {
            let inp = layout::decode_parse(&data);
            let format = formats::REGISTRY[inp.format as usize % formats::REGISTRY.len()];
            let cuts = inp.cuts.resolve(inp.transcript.len());
            (format, inp.transcript, cuts, None)
        }
        "roundtrip" => {
            let inp = layout::decode_roundtrip(&data);
            let format = formats::REGISTRY[inp.format as usize % formats::REGISTRY.len()];
            let Some(render) = format.render else {
                return Err(format!("{} has no renderer", format.id));
            };
            let tools = checks::tools_for_calls(&inp.calls);
            let bytes = render(&inp.text, &inp.calls, &tools)
                .map_err(|e| format!("the renderer refuses the artifact's calls: {e}"))?;
            let cuts = inp.cuts.resolve(bytes.len());
            let want = ParseResult {
                text: inp.text,
                calls: inp.calls,
                ..ParseResult::default()
            };
            (format, bytes, cuts, Some(want))
        }
        t => return Err(format!("unknown target {t:?} (parse or roundtrip)")),
    };
    let tools = match &expect {
        Some(want) => checks::tools_for_calls(&want.calls),
        None => tools_in(&a.out, format.id)?,
    };
    let failure = |d: &[u8], c: &[usize]| -> Option<String> {
        parse_failure(format, &tools, d, c).or_else(|| {
            let want = expect.as_ref()?;
            let (got, ..) = checks::feed(format, &tools, checks::pieces(d, c));
            (got != *want).then(|| {
                format!(
                    "parse gives {}, the rendered calls are {}",
                    checks::summary(&got),
                    checks::summary(want)
                )
            })
        })
    };
    let fails = |d: &[u8], c: &[usize]| failure(d, c).is_some();
    let (data, cuts) = match failure(&transcript, &cuts) {
        None => {
            out!("the artifact no longer fails: writing it as a regression case as is");
            (transcript, cuts)
        }
        Some(why) => {
            out!("reproduced: {why}");
            // A rendering must stay whole: its expectation is the calls it was rendered from.
            shrink(&transcript, &cuts, expect.is_none(), &fails)
        }
    };
    let tools = tools_in(&a.out, format.id)?;
    // A parser that still panics on the case gets an `i_` case: the harness reports the panic.
    let whole = catching(|| checks::feed(format, &tools, [&data[..]]).0).unwrap_or_else(|_| {
        out!("the parser panics on the whole input");
        ParseResult::default()
    });
    let hash: String = Sha256::digest(&data)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = a.out.join(format.id);
    // A rendering the whole parse already misreads may be the renderer's fault: keep it as an
    // implementation-defined case and show both sides; one misread only under cuts is the
    // parser's, and the calls it was rendered from are its expectation.
    let expect = expect.filter(|want| {
        let ok = whole == *want;
        if !ok {
            out!(
                "the whole parse gives {}, the rendered calls are {}: fix the renderer (refuse \
                 such calls) or the parser",
                checks::summary(&whole),
                checks::summary(want)
            );
        }
        ok
    });
    let (stem, expect_json) = match (&expect, whole.errors.first()) {
        (Some(want), _) => (
            format!("y_fuzz_{hash}"),
            Some(serde_json::json!({"text": want.text, "calls": want.calls, "error": null})),
        ),
        (None, Some(e)) => (
            format!("n_fuzz_{hash}"),
            Some(serde_json::json!({"error": {"kind": e.kind}})),
        ),
        (None, None) => (format!("i_fuzz_{hash}"), None),
    };
    let txt = dir.join(format!("{stem}.txt"));
    write(&txt, &data)?;
    out!("wrote {} ({} bytes)", txt.display(), data.len());
    if let Some(v) = expect_json {
        let p = dir.join(format!("{stem}.expect.json"));
        let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        write(&p, text.as_bytes())?;
        out!("wrote {}", p.display());
    }
    let list: Vec<String> = cuts.iter().map(usize::to_string).collect();
    out!("minimal cuts: [{}]", list.join(","));
    let cut_arg = if list.is_empty() {
        String::new()
    } else {
        format!(" --cuts {}", list.join(","))
    };
    out!(
        "replay: conform parse --format {} {}{cut_arg}",
        format.id,
        txt.display()
    );
    Ok(0)
}

/// Shrinks a failing input: first the cut list, then the bytes (each byte keeps the cut that
/// follows it, so removing bytes moves the cuts along).
fn shrink(
    data: &[u8],
    cuts: &[usize],
    bytes_too: bool,
    fails: &dyn Fn(&[u8], &[usize]) -> bool,
) -> (Vec<u8>, Vec<usize>) {
    let cuts = if fails(data, &[]) {
        Vec::new()
    } else {
        minimize(cuts.to_vec(), 4000, |c| fails(data, c))
    };
    if !bytes_too {
        return (data.to_vec(), cuts);
    }
    let marked: Vec<(u8, bool)> = data
        .iter()
        .enumerate()
        .map(|(i, &b)| (b, cuts.binary_search(&(i + 1)).is_ok()))
        .collect();
    let split = |m: &[(u8, bool)]| -> (Vec<u8>, Vec<usize>) {
        let bytes = m.iter().map(|x| x.0).collect();
        let cuts = (0..m.len().saturating_sub(1))
            .filter(|&i| m[i].1)
            .map(|i| i + 1)
            .collect();
        (bytes, cuts)
    };
    let m = minimize(marked, 20_000, |m| {
        let (d, c) = split(m);
        fails(&d, &c)
    });
    split(&m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionaries_escape_quotes_backslashes_and_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.dict");
        let words: BTreeSet<String> = ["a\"b\\", "é\n"].iter().map(|s| s.to_string()).collect();
        write_dict(&p, &words).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("\"a\\\"b\\\\\"\n"), "{text}");
        assert!(text.contains("\"\\xC3\\xA9\\x0A\"\n"), "{text}");
    }

    #[test]
    fn shrinking_keeps_the_cut_with_its_byte() {
        // Fails when some cut falls right after a `!`.
        let fails = |d: &[u8], c: &[usize]| c.iter().any(|&i| d[i - 1] == b'!');
        let data = b"abc!defgh!ij";
        let (d, c) = shrink(data, &[2, 4, 7, 10], true, &fails);
        assert_eq!((d.len(), d[0], c), (2, b'!', vec![1]));
    }

    #[test]
    fn every_parse_seed_decodes_to_its_transcript() {
        let corpus = corpus::load(&["corpus/".to_string()], &LoadOptions::default());
        for case in corpus.cases.iter().take(40) {
            let idx = format_index(case.format);
            let enc = layout::encode_parse(idx, &[], &case.turns[0]);
            let d = layout::decode_parse(&enc);
            assert_eq!(formats::REGISTRY[d.format as usize].id, case.format);
            assert_eq!(d.transcript, case.turns[0]);
            assert!(d.cuts.resolve(d.transcript.len()).is_empty());
        }
    }
}
