//! Loading corpora: directories, files and glob patterns into replayable cases.
//!
//! Layout (`specs/corpus.md`): the format is the nearest ancestor directory named after a format
//! id (or `--format`, or a JSONL line's `format`); tools come from the nearest `tools.json`;
//! `y_`/`n_`/`i_` prefixes label a case, anything else is unlabelled.

use crate::event::{ErrorKind, ToolCall};
use crate::formats::{self, OptionValues, OptionsByFormat};
use crate::tools::Tools;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a case is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Label {
    /// `y_`: must parse, and match its expectation.
    #[serde(rename = "y")]
    Accept,
    /// `n_`: must be rejected with an error (of the expected kind, if given).
    #[serde(rename = "n")]
    Reject,
    /// `i_`: implementation-defined; only invariants are checked.
    #[serde(rename = "i")]
    Free,
    /// No prefix: a real log, judged by parse success and invariants alone.
    #[serde(rename = "unlabelled")]
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

impl Expectation {
    /// Checks that the expectation can hold for a case of this label: a `y_` case parses
    /// without error, so an expected error there is a contradiction in the corpus, not a
    /// failure of the parser.
    pub fn fits(&self, label: Label) -> Result<(), String> {
        if label != Label::Accept {
            return Ok(());
        }
        if let Some(Some(e)) = &self.error {
            return Err(format!(
                "a y_ expectation expects the error {:?}; y_ cases must parse without error (use n_ or i_)",
                e.kind.as_str()
            ));
        }
        if let Some(kinds) = self.errors.as_ref().filter(|k| !k.is_empty()) {
            return Err(format!(
                "a y_ expectation expects the errors {:?}; y_ cases must parse without error (use n_ or i_)",
                kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>()
            ));
        }
        Ok(())
    }
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
    /// The deltas a real server sent for this transcript (`<name>.deltas.json`), if recorded.
    pub recorded: Option<Arc<Recorded>>,
    /// The format's options in force for this case that differ from its defaults: the nearest
    /// `conform.toml`'s, overridden by `--option` (empty: the defaults).
    pub options: Arc<OptionValues>,
}

/// A recorded chunking: where a real server's deltas ended (`specs/corpus.md` §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    /// Byte offsets between deltas: ascending, without 0 and the length (as `parse --cuts`).
    pub cuts: Vec<usize>,
    /// Tokens in each delta (one more entry than `cuts`), when the recording says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<u32>>,
    /// The vocabulary `tokens` counts in (an id of `specs/tokenizers.md`'s table; default: the
    /// format's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Where the recording comes from (free form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Value>,
    /// The engine that sent the deltas (free form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Value>,
    /// The model that produced them (free form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Value>,
    /// A note for readers of the corpus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<Value>,
}

impl Recorded {
    /// Reads and checks the sidecar of a transcript of `len` bytes.
    pub fn load(path: &Path, len: usize) -> Result<Recorded, CorpusError> {
        let err = |message: String| CorpusError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let r: Recorded = serde_json::from_str(&text)
            .map_err(|e| err(format!("invalid recorded deltas: {e}")))?;
        r.check(len).map_err(err)?;
        Ok(r)
    }

    /// Checks the cuts against a transcript of `len` bytes, and the token counts against them.
    pub fn check(&self, len: usize) -> Result<(), String> {
        if let Some(&c) = self.cuts.iter().find(|&&c| c == 0 || c >= len) {
            return Err(format!(
                "cut {c} is outside 1..{len} (the transcript has {len} bytes)"
            ));
        }
        if let Some(w) = self.cuts.windows(2).find(|w| w[0] >= w[1]) {
            return Err(format!(
                "cuts must be strictly ascending: {} then {}",
                w[0], w[1]
            ));
        }
        if let Some(t) = &self.tokens {
            if t.len() != self.cuts.len() + 1 {
                return Err(format!(
                    "{} token counts for {} deltas (one per delta: cuts + 1)",
                    t.len(),
                    self.cuts.len() + 1
                ));
            }
            if t.contains(&0) {
                return Err("a delta has 0 tokens".into());
            }
        }
        Ok(())
    }
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
        // Only recorded cases hash their recording: other digests stay as they were.
        if let Some(r) = &self.recorded {
            h.update(serde_json::to_vec(r.as_ref()).unwrap_or_default());
        }
        // Options change what the parser accepts, so a case judged under other options is
        // another case; without options the digest stays as it was.
        if !self.options.is_empty() {
            h.update(serde_json::to_vec(self.options.as_ref()).unwrap_or_default());
        }
        hex(&h.finalize())
    }

    /// Total bytes over all turns.
    pub fn len(&self) -> usize {
        self.turns.iter().map(Vec::len).sum()
    }

    /// True when every turn is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The recorded cuts of turn `t`, if the case has a recording (only one-turn cases do).
    pub fn recorded_cuts(&self, t: usize) -> Option<&[usize]> {
        self.recorded
            .as_deref()
            .filter(|_| t == 0)
            .map(|r| r.cuts.as_slice())
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
    /// Format options from the command line (`--option`), by format id: they override those of
    /// a directory's `conform.toml`.
    pub options: OptionsByFormat,
}

/// The options file of a corpus directory: format options for the cases below it.
pub const OPTIONS_FILE: &str = "conform.toml";

/// `conform.toml`: `[options]` with `"FORMAT.NAME" = true|false` entries.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionsFile {
    #[serde(default)]
    options: BTreeMap<String, bool>,
}

/// Reads the text of a `conform.toml`; an unknown format or option is an error naming the
/// known ones.
pub fn parse_options_file(text: &str) -> Result<OptionsByFormat, String> {
    let file: OptionsFile = toml::from_str(text).map_err(|e| e.message().to_string())?;
    let mut out = OptionsByFormat::new();
    for (key, on) in file.options {
        let (format, name) = key
            .split_once('.')
            .ok_or_else(|| format!("option {key:?}: expected \"FORMAT.NAME\" = true|false"))?;
        formats::registry::check(format, name)?;
        out.entry(format.to_string())
            .or_default()
            .insert(name.to_string(), on);
    }
    Ok(out)
}

/// The options in force for a case of `format`: the directory's, overridden by the command
/// line's, without those equal to the format's defaults.
fn options_of(dir: &OptionsByFormat, cli: &OptionsByFormat, format: &str) -> Arc<OptionValues> {
    let mut v = dir.get(format).cloned().unwrap_or_default();
    if let Some(c) = cli.get(format) {
        v.extend(c.iter().map(|(k, on)| (k.clone(), *on)));
    }
    if v.is_empty() {
        return Arc::default();
    }
    Arc::new(formats::registry::differing(format, &v))
}

/// Loads every case under `paths` (directories, files or glob patterns).
pub fn load(paths: &[String], opts: &LoadOptions) -> Corpus {
    let mut corpus = Corpus::default();
    let mut walk = Walk::default();
    for p in paths {
        let path = Path::new(p);
        if let Ok(meta) = std::fs::metadata(path) {
            walk.entry(path.to_path_buf(), &meta, true, &mut corpus.errors);
        } else if p.contains(['*', '?', '[']) {
            match glob::glob(p) {
                Ok(entries) => {
                    let mut any = false;
                    for e in entries {
                        any = true;
                        match e.map_err(|e| (e.path().to_path_buf(), std::io::Error::from(e))) {
                            Ok(f) => match std::fs::metadata(&f) {
                                Ok(meta) => walk.entry(f, &meta, true, &mut corpus.errors),
                                Err(e) => corpus.errors.push(CorpusError {
                                    path: f.display().to_string(),
                                    message: format!("cannot read: {e}"),
                                }),
                            },
                            Err((f, e)) => corpus.errors.push(CorpusError {
                                path: f.display().to_string(),
                                message: format!("cannot read: {e}"),
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
            let message = match std::fs::symlink_metadata(path) {
                Ok(_) => "a symbolic link to nothing".to_string(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    "no such file or directory".into()
                }
                Err(e) => format!("cannot read: {e}"),
            };
            corpus.errors.push(CorpusError {
                path: p.clone(),
                message,
            });
        }
    }
    let mut files = walk.files;
    orphan_expectations(&files, &walk.expectations, &mut corpus.errors);
    files.sort();
    files.dedup();
    let mut caches = Caches::default();
    let mut unusable: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for f in files {
        load_file(&f, opts, &mut caches, &mut unusable, &mut corpus);
    }
    // A bad tools.json or conform.toml is named once, with the number of case files it kept
    // out of the run.
    for (file, skipped) in unusable {
        let error = match caches.tools.get(&file) {
            Some(Err(e)) => Some(e),
            _ => match caches.options.get(&file) {
                Some(Err(e)) => Some(e),
                _ => None,
            },
        };
        if let Some(e) = error {
            corpus.errors.push(CorpusError {
                path: e.path.clone(),
                message: format!(
                    "{}; the {skipped} case file(s) that use it were not loaded",
                    e.message
                ),
            });
        }
    }
    corpus.cases.sort_by(|a, b| a.id.cmp(&b.id));
    corpus
}

/// What a walk over the given paths found.
#[derive(Default)]
struct Walk {
    /// Case files, in walk order.
    files: Vec<PathBuf>,
    /// `.expect.json` files met in walked directories (each needs a transcript beside it).
    expectations: Vec<PathBuf>,
    /// Directories entered, by identity (device and inode on Unix), with the path first used:
    /// a symbolic link back to an ancestor (or twice to one directory) is walked once.
    seen_dirs: BTreeMap<DirKey, PathBuf>,
    /// The directories being walked, outermost first.
    stack: Vec<DirKey>,
}

#[cfg(unix)]
type DirKey = (u64, u64);
#[cfg(not(unix))]
type DirKey = PathBuf;

#[cfg(unix)]
fn dir_key(_path: &Path, meta: &std::fs::Metadata) -> DirKey {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn dir_key(path: &Path, _meta: &std::fs::Metadata) -> DirKey {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// What a file's type makes it, for a file whose name says it is a corpus file: only regular
/// files are read (a FIFO would block the run, a device never end).
fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_socket() {
            return Some("a socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        }
    }
    if t.is_dir() {
        return Some("a directory");
    }
    Some("not a regular file")
}

impl Walk {
    /// Takes one path (given, or met in a walked directory) whose metadata follows links.
    fn entry(
        &mut self,
        path: PathBuf,
        meta: &std::fs::Metadata,
        given: bool,
        errors: &mut Vec<CorpusError>,
    ) {
        if meta.is_dir() {
            // A directory reached by a link is a loop or a second walk of one directory when
            // already walked; overlapping paths on the command line are walked once, silently.
            let via_link = !given
                && std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
            return self.dir(&path, meta, via_link, errors);
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let expectation = name.ends_with(".expect.json");
        if !(given || is_case_file(&path) || expectation || name == "tools.json") {
            return;
        }
        if expectation && !given {
            // Read (and judged regular) with its transcript; named here only when orphaned.
            self.expectations.push(path);
        } else if let Some(what) = not_regular(meta) {
            errors.push(CorpusError {
                path: path.display().to_string(),
                message: format!("{what}, not a regular file: not read"),
            });
        } else if given || is_case_file(&path) {
            self.files.push(path);
        }
    }

    fn dir(
        &mut self,
        dir: &Path,
        meta: &std::fs::Metadata,
        via_link: bool,
        errors: &mut Vec<CorpusError>,
    ) {
        let key = dir_key(dir, meta);
        if let Some(first) = self.seen_dirs.get(&key) {
            // An ancestor again is a loop, however reached (only a link can make one).
            let what = if self.stack.contains(&key) {
                Some("a directory loop: the same directory as its ancestor")
            } else if via_link {
                Some("a symbolic link to a directory already walked as")
            } else {
                None
            };
            if let Some(what) = what {
                errors.push(CorpusError {
                    path: dir.display().to_string(),
                    message: format!("{what} {}; not followed", first.display()),
                });
            }
            return;
        }
        self.stack.push(key);
        if let Some(k) = self.stack.last().cloned() {
            self.seen_dirs.insert(k, dir.to_path_buf());
        }
        self.dir_entries(dir, errors);
        self.stack.pop();
    }

    fn dir_entries(&mut self, dir: &Path, errors: &mut Vec<CorpusError>) {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                return errors.push(CorpusError {
                    path: dir.display().to_string(),
                    message: format!("cannot read directory: {e}"),
                });
            }
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        for e in entries {
            match e {
                Ok(e) => paths.push(e.path()),
                Err(e) => errors.push(CorpusError {
                    path: dir.display().to_string(),
                    message: format!("cannot list an entry: {e}"),
                }),
            }
        }
        paths.sort();
        for p in paths {
            let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                errors.push(CorpusError {
                    path: p.display().to_string(),
                    message: "the file name is not valid UTF-8, so it has no label, format or id: not read".into(),
                });
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            match std::fs::metadata(&p) {
                Ok(meta) => self.entry(p, &meta, false, errors),
                Err(e) => {
                    let dangling = std::fs::symlink_metadata(&p).is_ok();
                    if dangling || is_case_file(&p) {
                        errors.push(CorpusError {
                            path: p.display().to_string(),
                            message: if dangling && e.kind() == std::io::ErrorKind::NotFound {
                                "a symbolic link to nothing: not read".into()
                            } else {
                                format!("cannot read: {e}")
                            },
                        });
                    }
                }
            }
        }
    }
}

/// Reads a file only if it is a regular file (a FIFO given by name would block the run).
fn read_regular(file: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(file).map_err(|e| format!("cannot read: {e}"))?;
    if let Some(what) = not_regular(&meta) {
        return Err(format!("{what}, not a regular file: not read"));
    }
    std::fs::read(file).map_err(|e| format!("cannot read: {e}"))
}

/// Names every `.expect.json` with no transcript (`.txt`) beside it: an expectation that
/// judges nothing.
fn orphan_expectations(files: &[PathBuf], expectations: &[PathBuf], errors: &mut Vec<CorpusError>) {
    let files: std::collections::BTreeSet<&PathBuf> = files.iter().collect();
    for e in expectations {
        let name = e.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let stem = name.strip_suffix(".expect.json").unwrap_or(name);
        let txt = e.with_file_name(format!("{stem}.txt"));
        if !files.contains(&txt) {
            errors.push(CorpusError {
                path: e.display().to_string(),
                message: format!(
                    "an expectation with no transcript {} beside it",
                    txt.file_name().and_then(|n| n.to_str()).unwrap_or("")
                ),
            });
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

/// The nearest file `name` up from `file` (`tools.json`, `conform.toml`), each read once and
/// made a `T` by `read`; an unusable one is returned by path (its error is in the cache). No
/// such file: `T::default()`.
fn nearest<T: Default>(
    file: &Path,
    name: &str,
    cache: &mut BTreeMap<PathBuf, Result<Arc<T>, CorpusError>>,
    read: fn(&str) -> Result<T, String>,
) -> Result<Arc<T>, PathBuf> {
    for dir in file.ancestors().skip(1) {
        let candidate = dir.join(name);
        if let Some(hit) = cache.get(&candidate) {
            return hit.clone().map_err(|_| candidate);
        }
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        let loaded = match not_regular(&meta) {
            Some(what) => Err(format!("{what}, not a regular file")),
            None => std::fs::read_to_string(&candidate)
                .map_err(|e| format!("cannot read: {e}"))
                .and_then(|t| read(&t)),
        }
        .map(Arc::new)
        .map_err(|message| CorpusError {
            path: candidate.display().to_string(),
            message,
        });
        cache.insert(candidate.clone(), loaded.clone());
        return loaded.map_err(|_| candidate);
    }
    Ok(Arc::new(T::default()))
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

/// The `tools.json` and `conform.toml` files read so far, by path.
#[derive(Default)]
struct Caches {
    tools: BTreeMap<PathBuf, Result<Arc<Tools>, CorpusError>>,
    options: BTreeMap<PathBuf, Result<Arc<OptionsByFormat>, CorpusError>>,
}

fn load_file(
    file: &Path,
    opts: &LoadOptions,
    caches: &mut Caches,
    unusable: &mut BTreeMap<PathBuf, usize>,
    corpus: &mut Corpus,
) {
    let display = file.display().to_string();
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let err = |message: String| CorpusError {
        path: display.clone(),
        message,
    };
    let tools = match nearest(file, "tools.json", &mut caches.tools, Tools::from_json) {
        Ok(t) => t,
        Err(tools_json) => {
            *unusable.entry(tools_json).or_default() += 1;
            return;
        }
    };
    let dir_options = match nearest(file, OPTIONS_FILE, &mut caches.options, parse_options_file) {
        Ok(o) => o,
        Err(toml) => {
            *unusable.entry(toml).or_default() += 1;
            return;
        }
    };
    let options = |format: &str| options_of(&dir_options, &opts.options, format);
    let bytes = match read_regular(file) {
        Ok(b) => b,
        Err(m) => return corpus.errors.push(err(m)),
    };
    if name.ends_with(".jsonl") {
        return load_jsonl(file, &display, &bytes, opts, tools, &options, corpus);
    }
    let format = match resolve_format(opts.format.as_deref(), file, &display) {
        Ok(f) => f,
        Err(e) => return corpus.errors.push(e),
    };
    let label = Label::of_name(name);
    if let Some(stem) = name.strip_suffix(".session.json") {
        let _ = stem;
        match parse_session(&bytes, label) {
            Ok((turns, expects)) => corpus.cases.push(Case {
                id: display.clone(),
                format,
                label,
                turns,
                expects,
                tools,
                path: file.to_path_buf(),
                line_id: None,
                recorded: None,
                options: options(format),
            }),
            Err(m) => corpus.errors.push(err(m)),
        }
        return;
    }
    let stem = name.strip_suffix(".txt").unwrap_or(name);
    let expect_path = file.with_file_name(format!("{stem}.expect.json"));
    let expect = if std::fs::symlink_metadata(&expect_path).is_ok() {
        match read_regular(&expect_path).and_then(|b| {
            serde_json::from_slice::<Expectation>(&b)
                .map_err(|e| format!("invalid expectation: {e}"))
                .and_then(|e| e.fits(label).map(|()| e))
        }) {
            Ok(e) => Some(e),
            Err(m) => {
                return corpus.errors.push(CorpusError {
                    path: expect_path.display().to_string(),
                    message: format!("{m} ({name} not loaded)"),
                });
            }
        }
    } else {
        None
    };
    let deltas_path = file.with_file_name(format!("{stem}.deltas.json"));
    let recorded = if deltas_path.is_file() {
        match Recorded::load(&deltas_path, bytes.len()) {
            Ok(r) => Some(Arc::new(r)),
            Err(e) => return corpus.errors.push(e),
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
        recorded,
        options: options(format),
    });
}

/// A session file: `{"turns": [...], "expect": [... or null]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionFile {
    turns: Vec<String>,
    #[serde(default)]
    expect: Option<Vec<Option<Expectation>>>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

type Turns = (Vec<Vec<u8>>, Vec<Option<Expectation>>);

fn parse_session(bytes: &[u8], label: Label) -> Result<Turns, String> {
    let s: SessionFile =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid session file: {e}"))?;
    if s.turns.is_empty() {
        return Err("a session needs at least one turn".into());
    }
    // Absent means "nothing checked"; given, one entry per turn (`null` for not checked).
    let expects = match s.expect {
        None => vec![None; s.turns.len()],
        Some(e) if e.len() != s.turns.len() => {
            return Err(format!(
                "{} expectation(s) for {} turn(s): \"expect\" needs one entry per turn (null for not checked)",
                e.len(),
                s.turns.len()
            ));
        }
        Some(e) => e,
    };
    for (t, e) in expects.iter().enumerate() {
        if let Some(e) = e {
            e.fits(label).map_err(|m| format!("turn {}: {m}", t + 1))?;
        }
    }
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
    options: &dyn Fn(&str) -> Arc<OptionValues>,
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
    // Line of each id so far: an id names one case, so a second line with it is an error.
    let mut first_line: BTreeMap<String, usize> = BTreeMap::new();
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
        if let Some(first) = first_line.get(&id) {
            corpus.errors.push(CorpusError {
                path: at,
                message: format!("duplicate id {id:?} (first on line {first}): not loaded"),
            });
            continue;
        }
        first_line.insert(id.clone(), n + 1);
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
        if let Some(Err(m)) = parsed.expect.as_ref().map(|e| e.fits(label)) {
            corpus.errors.push(CorpusError {
                path: at,
                message: format!("line {id:?}: {m}"),
            });
            continue;
        }
        corpus.cases.push(Case {
            id: format!("{display}#{id}"),
            format,
            label,
            turns: vec![parsed.transcript.into_bytes()],
            expects: vec![parsed.expect],
            tools: tools.clone(),
            path: file.to_path_buf(),
            line_id: Some(id),
            recorded: None,
            options: options(format),
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
    fn spec_rules_are_corpus_errors() {
        let d = tmpdir("spec");
        let k = d.join("kimi_k2");
        std::fs::write(
            k.join("y_s.session.json"),
            r#"{"turns":["a","b"],"expect":[null]}"#,
        )
        .unwrap();
        std::fs::write(k.join("i_s.session.json"), r#"{"turns":["a","b"]}"#).unwrap();
        std::fs::write(k.join("y_e.txt"), "x").unwrap();
        std::fs::write(k.join("y_e.expect.json"), r#"{"errors":["invalid_json"]}"#).unwrap();
        std::fs::write(k.join("n_e.txt"), "x").unwrap();
        std::fs::write(
            k.join("n_e.expect.json"),
            r#"{"error":{"kind":"invalid_json"}}"#,
        )
        .unwrap();
        std::fs::write(k.join("y_orphan.expect.json"), "{}").unwrap();
        std::fs::write(
            k.join("l.jsonl"),
            "{\"id\":1,\"transcript\":\"a\"}\n{\"id\":\"y_2\",\"transcript\":\"b\",\"expect\":{\"error\":{\"kind\":\"invalid_json\"}}}\n{\"id\":1,\"transcript\":\"c\"}\n",
        )
        .unwrap();
        let c = load(&[d.display().to_string()], &LoadOptions::default());
        let ids: Vec<_> = c
            .cases
            .iter()
            .map(|c| c.id.rsplit('/').next().unwrap().to_string())
            .collect();
        assert_eq!(ids, ["i_s.session.json", "l.jsonl#1", "n_e.txt"]);
        let bad: Vec<_> = c.errors.iter().map(|e| e.to_string()).collect();
        let has = |a: &str, b: &str| bad.iter().any(|e| e.contains(a) && e.contains(b));
        assert!(
            has("y_s.session.json", "1 expectation(s) for 2 turn(s)"),
            "{bad:?}"
        );
        assert!(
            has("y_e.expect.json", "must parse without error"),
            "{bad:?}"
        );
        assert!(has("l.jsonl:2", "must parse without error"), "{bad:?}");
        assert!(
            has("l.jsonl:3", "duplicate id \"1\" (first on line 1)"),
            "{bad:?}"
        );
        assert!(
            has("y_orphan.expect.json", "no transcript y_orphan.txt"),
            "{bad:?}"
        );
        assert_eq!(bad.len(), 5, "{bad:?}");
    }

    #[cfg(unix)]
    #[test]
    fn loops_fifos_odd_names_and_bad_tools_are_named() {
        use std::os::unix::ffi::OsStrExt;
        let d = tmpdir("faults");
        let k = d.join("kimi_k2");
        std::fs::write(k.join("y_a.txt"), "x").unwrap();
        std::os::unix::fs::symlink(".", k.join("loop")).unwrap();
        std::os::unix::fs::symlink("..", k.join("up")).unwrap();
        let c = std::ffi::CString::new(k.join("y_f.txt").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        std::fs::write(k.join(std::ffi::OsStr::from_bytes(b"y_\xfe.txt")), "x").unwrap();
        // A second directory with a schema that does not compile, above two cases.
        let s = d.join("sub/strict_xml");
        std::fs::create_dir_all(&s).unwrap();
        std::fs::write(
            s.join("tools.json"),
            r#"[{"name":"t","parameters":{"type":"object","required":"x"}}]"#,
        )
        .unwrap();
        std::fs::write(s.join("i_1.txt"), "x").unwrap();
        std::fs::write(s.join("i_2.txt"), "x").unwrap();
        // The same directory given twice, and inside another given path: walked once, silently.
        let c = load(
            &[k.display().to_string(), d.display().to_string()],
            &LoadOptions::default(),
        );
        assert_eq!(c.cases.len(), 1, "{:?}", c.cases);
        let bad: Vec<_> = c.errors.iter().map(|e| e.to_string()).collect();
        let has = |a: &str, b: &str| bad.iter().any(|e| e.contains(a) && e.contains(b));
        assert!(has("kimi_k2/loop", "directory loop"), "{bad:?}");
        assert!(has("kimi_k2/up", "directory loop"), "{bad:?}");
        assert!(has("y_f.txt", "FIFO"), "{bad:?}");
        assert!(has("y_\u{FFFD}.txt", "not valid UTF-8"), "{bad:?}");
        assert!(has("strict_xml/tools.json", "\"t\" (#0)"), "{bad:?}");
        assert!(has("tools.json", "/required"), "{bad:?}");
        assert!(has("tools.json", "2 case file(s)"), "{bad:?}");
        assert_eq!(bad.len(), 5, "{bad:?}");
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

    #[test]
    fn a_deltas_sidecar_is_the_recorded_chunking_and_a_bad_one_a_corpus_error() {
        let d = tmpdir("deltas");
        let k = d.join("kimi_k2");
        std::fs::write(k.join("y_a.txt"), "hello world").unwrap();
        std::fs::write(
            k.join("y_a.deltas.json"),
            r#"{"cuts":[5,11],"tokens":[1,1,1],"engine":"vllm","model":{"name":"m"}}"#,
        )
        .unwrap();
        std::fs::write(k.join("y_b.txt"), "hello").unwrap();
        let c = load(&[d.display().to_string()], &LoadOptions::default());
        assert!(!c.errors.is_empty(), "11 is the length, not a cut");
        assert!(
            c.errors[0].path.ends_with("y_a.deltas.json"),
            "{:?}",
            c.errors
        );
        assert!(c.errors[0].message.contains("outside"));
        std::fs::write(
            k.join("y_a.deltas.json"),
            r#"{"cuts":[5,6],"tokens":[1,1,1],"engine":"vllm","model":{"name":"m"}}"#,
        )
        .unwrap();
        let c = load(&[d.display().to_string()], &LoadOptions::default());
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        let a = &c.cases[0];
        assert_eq!(a.recorded_cuts(0), Some(&[5usize, 6][..]));
        assert_eq!(a.recorded_cuts(1), None);
        assert_eq!(c.cases[1].recorded, None);
        let digest = a.digest();
        let mut plain = a.clone();
        plain.recorded = None;
        assert_ne!(plain.digest(), digest, "the recording is part of the case");
        for (body, why) in [
            (r#"{"cuts":[6,5]}"#, "ascending"),
            (r#"{"cuts":[5],"tokens":[1]}"#, "token counts"),
            (r#"{"cuts":[5],"tokens":[1,0]}"#, "0 tokens"),
            (r#"{"cut":[5]}"#, "unknown field"),
            ("[5]", "invalid"),
        ] {
            std::fs::write(k.join("y_a.deltas.json"), body).unwrap();
            let c = load(&[d.display().to_string()], &LoadOptions::default());
            assert_eq!(c.errors.len(), 1, "{body}");
            assert!(c.errors[0].message.contains(why), "{body}: {}", c.errors[0]);
            assert!(c.errors[0].path.ends_with("y_a.deltas.json"));
            assert_eq!(
                c.cases.len(),
                1,
                "only the case with the bad sidecar is out"
            );
        }
    }
}
