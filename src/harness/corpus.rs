//! Loading corpora: directories, files and glob patterns into replayable cases.
//!
//! Layout (`specs/corpus.md`): the format is the nearest ancestor directory named after a format
//! id (or `--format`, or a JSONL line's `format`); tools come from the nearest `tools.json`;
//! `y_`/`n_`/`i_` prefixes label a case, anything else is unlabelled.

use crate::event::{ErrorKind, ToolCall};
use crate::formats;
use crate::tools::Tools;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a case is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Label {
    /// `y_`: must parse, and match its expectation.
    Accept,
    /// `n_`: must be rejected with an error (of the expected kind, if given).
    Reject,
    /// `i_`: implementation-defined; only invariants are checked.
    Free,
    /// No prefix: a real log, judged by parse success and invariants alone.
    Unlabelled,
}

impl Label {
    /// The label of a file or case name.
    pub fn of_name(name: &str) -> Label {
        if name.starts_with("y_") {
            Label::Accept
        } else if name.starts_with("n_") {
            Label::Reject
        } else if name.starts_with("i_") {
            Label::Free
        } else {
            Label::Unlabelled
        }
    }

    /// The short name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Accept => "y",
            Label::Reject => "n",
            Label::Free => "i",
            Label::Unlabelled => "unlabelled",
        }
    }
}

/// The expected error of an `n_` case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedError {
    /// The error kind that must be reported.
    pub kind: ErrorKind,
}

/// What a turn must fold to; absent fields are not checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// The exact visible text.
    #[serde(default)]
    pub text: Option<String>,
    /// The exact reasoning (the `Reasoning` events concatenated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The calls, in order.
    #[serde(default)]
    pub calls: Option<Vec<ToolCall>>,
    /// `null` for no error, or the error kind that must be reported.
    #[serde(default, deserialize_with = "present")]
    pub error: Option<Option<ExpectedError>>,
    /// The exact error kinds, in order (pins errors that come together).
    #[serde(default)]
    pub errors: Option<Vec<ErrorKind>>,
    /// The warning kinds, in order.
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
    /// The task-completion text.
    #[serde(default, deserialize_with = "present")]
    pub completion: Option<Option<String>>,
    /// A free-form note for readers of the corpus.
    #[serde(default)]
    pub note: Option<String>,
}

/// Distinguishes a field given as `null` (Some(None)) from a missing one (None).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// One replayable case: one turn, or several turns of a session.
#[derive(Debug, Clone)]
pub struct Case {
    /// Stable id: the file path as given (plus `#line-id` for JSONL lines).
    pub id: String,
    /// The format id.
    pub format: &'static str,
    /// How the case is judged.
    pub label: Label,
    /// The exact bytes of each turn (one for ordinary cases).
    pub turns: Vec<Vec<u8>>,
    /// The expectation of each turn, if any.
    pub expects: Vec<Option<Expectation>>,
    /// Tool definitions from the nearest `tools.json`.
    pub tools: Arc<Tools>,
    /// The file the case came from.
    pub path: PathBuf,
    /// The JSONL line id, for cases from a `.jsonl` file.
    pub line_id: Option<String>,
}

impl Case {
    /// SHA-256 of everything that defines the case: id, format, label, bytes and expectations.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for part in [
            self.id.as_bytes(),
            self.format.as_bytes(),
            self.label.as_str().as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        for t in &self.turns {
            h.update((t.len() as u64).to_le_bytes());
            h.update(t);
        }
        h.update(serde_json::to_vec(&self.expects).unwrap_or_default());
        h.update(
            serde_json::to_vec(
                &self
                    .tools
                    .defs
                    .iter()
                    .map(|d| (&d.name, &d.parameters))
                    .collect::<Vec<_>>(),
            )
            .unwrap_or_default(),
        );
        hex(&h.finalize())
    }

    /// True when the case is a multi-turn session.
    pub fn is_session(&self) -> bool {
        self.turns.len() > 1
    }

    /// Total bytes over all turns.
    pub fn len(&self) -> usize {
        self.turns.iter().map(Vec::len).sum()
    }

    /// True when every turn is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Lower-case hexadecimal of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A corpus file that could not be loaded; the run goes on without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusError {
    /// The offending file (or pattern).
    pub path: String,
    /// What is wrong, in a sentence.
    pub message: String,
}

impl fmt::Display for CorpusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Everything loaded from the paths of one run.
#[derive(Debug, Default)]
pub struct Corpus {
    /// The cases, sorted by id.
    pub cases: Vec<Case>,
    /// Files that could not be loaded.
    pub errors: Vec<CorpusError>,
}

/// Options that change how files are read.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Use this format for every file instead of the directory rule.
    pub format: Option<String>,
}

/// Loads every case under `paths` (directories, files or glob patterns).
pub fn load(paths: &[String], opts: &LoadOptions) -> Corpus {
    let mut corpus = Corpus::default();
    let mut files: Vec<PathBuf> = Vec::new();
    for p in paths {
        let path = Path::new(p);
        if path.is_dir() {
            walk(path, &mut files, &mut corpus.errors);
        } else if path.is_file() {
            files.push(path.to_path_buf());
        } else if p.contains(['*', '?', '[']) {
            match glob::glob(p) {
                Ok(entries) => {
                    let mut any = false;
                    for e in entries {
                        match e {
                            Ok(f) if f.is_dir() => {
                                any = true;
                                walk(&f, &mut files, &mut corpus.errors)
                            }
                            Ok(f) => {
                                any = true;
                                files.push(f)
                            }
                            Err(e) => corpus.errors.push(CorpusError {
                                path: e.path().display().to_string(),
                                message: format!("cannot read: {}", e.error()),
                            }),
                        }
                    }
                    if !any {
                        corpus.errors.push(CorpusError {
                            path: p.clone(),
                            message: "the pattern matches no file".into(),
                        });
                    }
                }
                Err(e) => corpus.errors.push(CorpusError {
                    path: p.clone(),
                    message: format!("invalid glob pattern: {e}"),
                }),
            }
        } else {
            corpus.errors.push(CorpusError {
                path: p.clone(),
                message: "no such file or directory".into(),
            });
        }
    }
    files.sort();
    files.dedup();
    let mut tools_cache: BTreeMap<PathBuf, Result<Arc<Tools>, CorpusError>> = BTreeMap::new();
    for f in files {
        load_file(&f, opts, &mut tools_cache, &mut corpus);
    }
    corpus.cases.sort_by(|a, b| a.id.cmp(&b.id));
    corpus
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<CorpusError>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            errors.push(CorpusError {
                path: dir.display().to_string(),
                message: format!("cannot read directory: {e}"),
            });
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let hidden = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if p.is_dir() {
            walk(&p, files, errors);
        } else if is_case_file(&p) {
            files.push(p);
        }
    }
}

/// The known-failures file of a corpus directory (not a case; see `outputs::known`).
pub const KNOWN_FAILURES_FILE: &str = "KNOWN_FAILURES";

/// Which files in a directory are cases: `.txt`, `.jsonl` and `.session.json`.
fn is_case_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".txt") || name.ends_with(".jsonl") || name.ends_with(".session.json")
}

/// The format a file belongs to by the directory rule.
fn format_of_path(p: &Path) -> Option<&'static str> {
    p.ancestors()
        .skip(1)
        .filter_map(|a| a.file_name().and_then(|n| n.to_str()))
        .find_map(|n| formats::by_id(n).map(|f| f.id))
}

fn tools_for(
    file: &Path,
    cache: &mut BTreeMap<PathBuf, Result<Arc<Tools>, CorpusError>>,
) -> Result<Arc<Tools>, CorpusError> {
    for dir in file.ancestors().skip(1) {
        let candidate = dir.join("tools.json");
        if let Some(hit) = cache.get(&candidate) {
            return hit.clone();
        }
        if candidate.is_file() {
            let loaded = std::fs::read_to_string(&candidate)
                .map_err(|e| e.to_string())
                .and_then(|t| Tools::from_json(&t))
                .map(Arc::new)
                .map_err(|message| CorpusError {
                    path: candidate.display().to_string(),
                    message,
                });
            cache.insert(candidate, loaded.clone());
            return loaded;
        }
    }
    Ok(Arc::new(Tools::default()))
}

fn resolve_format(
    explicit: Option<&str>,
    file: &Path,
    display: &str,
) -> Result<&'static str, CorpusError> {
    match explicit {
        Some(id) => formats::by_id(id).map(|f| f.id).ok_or_else(|| CorpusError {
            path: display.to_string(),
            message: format!("unknown format {id:?} (known: {})", known_formats()),
        }),
        None => format_of_path(file).ok_or_else(|| CorpusError {
            path: display.to_string(),
            message: format!(
                "cannot tell the format: no ancestor directory is named after a format ({}); use --format",
                known_formats()
            ),
        }),
    }
}

/// The registered format ids, comma-separated, for messages.
pub fn known_formats() -> String {
    formats::REGISTRY
        .iter()
        .map(|f| f.id)
        .collect::<Vec<_>>()
        .join(", ")
}

fn load_file(
    file: &Path,
    opts: &LoadOptions,
    tools_cache: &mut BTreeMap<PathBuf, Result<Arc<Tools>, CorpusError>>,
    corpus: &mut Corpus,
) {
    let display = file.display().to_string();
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let err = |message: String| CorpusError {
        path: display.clone(),
        message,
    };
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => return corpus.errors.push(err(format!("cannot read: {e}"))),
    };
    let tools = match tools_for(file, tools_cache) {
        Ok(t) => t,
        Err(e) => {
            return corpus.errors.push(err(format!(
                "its tools.json cannot be used ({}: {})",
                e.path, e.message
            )));
        }
    };
    if name.ends_with(".jsonl") {
        return load_jsonl(file, &display, &bytes, opts, tools, corpus);
    }
    let format = match resolve_format(opts.format.as_deref(), file, &display) {
        Ok(f) => f,
        Err(e) => return corpus.errors.push(e),
    };
    let label = Label::of_name(name);
    if let Some(stem) = name.strip_suffix(".session.json") {
        let _ = stem;
        match parse_session(&bytes) {
            Ok((turns, expects)) => corpus.cases.push(Case {
                id: display.clone(),
                format,
                label,
                turns,
                expects,
                tools,
                path: file.to_path_buf(),
                line_id: None,
            }),
            Err(m) => corpus.errors.push(err(m)),
        }
        return;
    }
    let stem = name.strip_suffix(".txt").unwrap_or(name);
    let expect_path = file.with_file_name(format!("{stem}.expect.json"));
    let expect = if expect_path.is_file() {
        match std::fs::read_to_string(&expect_path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<Expectation>(&t).map_err(|e| e.to_string()))
        {
            Ok(e) => Some(e),
            Err(m) => {
                return corpus.errors.push(CorpusError {
                    path: expect_path.display().to_string(),
                    message: format!("invalid expectation: {m}"),
                });
            }
        }
    } else {
        None
    };
    corpus.cases.push(Case {
        id: display.clone(),
        format,
        label,
        turns: vec![bytes],
        expects: vec![expect],
        tools,
        path: file.to_path_buf(),
        line_id: None,
    });
}

/// A session file: `{"turns": [...], "expect": [... or null]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionFile {
    turns: Vec<String>,
    #[serde(default)]
    expect: Vec<Option<Expectation>>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

type Turns = (Vec<Vec<u8>>, Vec<Option<Expectation>>);

fn parse_session(bytes: &[u8]) -> Result<Turns, String> {
    let s: SessionFile =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid session file: {e}"))?;
    if s.turns.is_empty() {
        return Err("a session needs at least one turn".into());
    }
    if s.expect.len() > s.turns.len() {
        return Err(format!(
            "{} expectations for {} turns",
            s.expect.len(),
            s.turns.len()
        ));
    }
    let mut expects = s.expect;
    expects.resize(s.turns.len(), None);
    Ok((
        s.turns.into_iter().map(String::into_bytes).collect(),
        expects,
    ))
}

/// One line of a `.jsonl` corpus file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonlLine {
    id: Value,
    #[serde(default)]
    format: Option<String>,
    transcript: String,
    #[serde(default)]
    expect: Option<Expectation>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

fn load_jsonl(
    file: &Path,
    display: &str,
    bytes: &[u8],
    opts: &LoadOptions,
    tools: Arc<Tools>,
    corpus: &mut Corpus,
) {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            return corpus.errors.push(CorpusError {
                path: display.to_string(),
                message: format!("not UTF-8: {e}"),
            });
        }
    };
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{display}:{}", n + 1);
        let parsed: JsonlLine = match serde_json::from_str(line) {
            Ok(p) => p,
            Err(e) => {
                corpus.errors.push(CorpusError {
                    path: at,
                    message: format!("invalid JSONL line: {e}"),
                });
                continue;
            }
        };
        let id = match &parsed.id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let explicit = parsed.format.as_deref().or(opts.format.as_deref());
        let format = match resolve_format(explicit, file, &at) {
            Ok(f) => f,
            Err(e) => {
                corpus.errors.push(e);
                continue;
            }
        };
        let label = if parsed.expect.is_some() {
            match Label::of_name(&id) {
                Label::Unlabelled => Label::Accept,
                l => l,
            }
        } else {
            match Label::of_name(&id) {
                Label::Accept | Label::Reject => {
                    corpus.errors.push(CorpusError {
                        path: at,
                        message: format!("line {id:?} is labelled but has no \"expect\""),
                    });
                    continue;
                }
                l => l,
            }
        };
        corpus.cases.push(Case {
            id: format!("{display}#{id}"),
            format,
            label,
            turns: vec![parsed.transcript.into_bytes()],
            expects: vec![parsed.expect],
            tools: tools.clone(),
            path: file.to_path_buf(),
            line_id: Some(id),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("conform-corpus-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("kimi_k2")).unwrap();
        d
    }

    #[test]
    fn labels_formats_expectations_and_bad_files() {
        let d = tmpdir("basic");
        let k = d.join("kimi_k2");
        std::fs::write(k.join("y_a.txt"), "x").unwrap();
        std::fs::write(k.join("y_a.expect.json"), r#"{"text":"x","error":null}"#).unwrap();
        std::fs::write(k.join("n_b.txt"), "y").unwrap();
        std::fs::write(k.join("n_b.expect.json"), r#"{"error":{"kind":"nope"}}"#).unwrap();
        std::fs::write(k.join("log.txt"), "z").unwrap();
        std::fs::write(
            k.join("t.jsonl"),
            "{\"id\":\"l1\",\"transcript\":\"q\"}\nnot json\n{\"id\":\"y_2\",\"transcript\":\"r\",\"expect\":{\"text\":\"r\"}}\n",
        )
        .unwrap();
        std::fs::write(d.join("stray.txt"), "s").unwrap();
        let c = load(&[d.display().to_string()], &LoadOptions::default());
        let ids: Vec<_> = c
            .cases
            .iter()
            .map(|c| c.id.rsplit('/').next().unwrap().to_string())
            .collect();
        assert_eq!(ids, ["log.txt", "t.jsonl#l1", "t.jsonl#y_2", "y_a.txt"]);
        assert_eq!(c.cases[3].label, Label::Accept);
        assert_eq!(c.cases[3].expects[0].as_ref().unwrap().error, Some(None));
        assert_eq!(c.cases[0].label, Label::Unlabelled);
        assert_eq!(c.cases[2].label, Label::Accept);
        let bad: Vec<_> = c.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert!(bad.iter().any(|e| e.contains("n_b.expect.json")));
        assert!(bad.iter().any(|e| e.contains("t.jsonl:2")));
        assert!(
            bad.iter()
                .any(|e| e.contains("stray.txt") && e.contains("--format"))
        );
    }

    #[test]
    fn missing_paths_and_empty_globs_are_errors() {
        let c = load(
            &["/nonexistent/x".into(), "/nonexistent/*.txt".into()],
            &LoadOptions::default(),
        );
        assert!(c.cases.is_empty());
        assert_eq!(c.errors.len(), 2);
    }
}
