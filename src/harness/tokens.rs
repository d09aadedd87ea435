//! Tokenizers for token-aligned chunkings: where a server's deltas can end, and which token ids
//! each delta carries.
//!
//! A server decodes its model's output token by token and hands its parser one delta per token
//! (or per few tokens). So the cuts a parser meets in production are token boundaries, never the
//! inside of a special token, and never the inside of a UTF-8 character (an incremental
//! detokenizer holds back a token that ends mid-character until the next one completes it).
//! [`Tokenizer::tokenize`] reproduces that: it splits the transcript at the format's special
//! tokens and the vocabulary's own special and added tokens first (each one token, with its
//! id), BPE-encodes the ordinary text between them, and groups tokens into *units*, the smallest
//! pieces a delta can hold: one token, or several when a token ends inside a character.
//!
//! Three kinds of vocabulary file are read (`specs/tokenizers.md`): tiktoken ranks files
//! (`BASE64TOKEN RANK` lines, with the pre-tokenizer regex given by the vocabulary's
//! declaration), Hugging Face `tokenizer.json` files of byte-level BPE vocabularies (conform's
//! own reader, [`super::bpe`]; any other `tokenizer.json` with the `hf-tokenizers` feature), and
//! Mistral's tekken JSON. `o200k_base` and `o200k_harmony` are built in (tiktoken-rs). Which
//! vocabulary cuts which format is [`super::vocab`]'s business.

use super::bpe::ByteLevelBpe;
use super::ranks::{Scratch, TokenTable};
pub use crate::backends::cuts::{TokenId, Tokenized, VocabularyRef};
use crate::formats::SpecialToken;
use rustc_hash::FxHashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The name of the default tokenizer.
pub const DEFAULT_TOKENIZER: &str = "o200k_base";

/// The name of gpt-oss's vocabulary: o200k_base's ranks and the harmony special tokens.
pub const HARMONY_TOKENIZER: &str = "o200k_harmony";

/// The vocabularies built in (embedded in tiktoken-rs).
pub const BUILTIN: &[&str] = &[DEFAULT_TOKENIZER, HARMONY_TOKENIZER];

/// A loaded tokenizer, shared by every thread of a run.
pub struct Tokenizer {
    name: String,
    engine: Engine,
    /// The vocabulary's own special and added tokens (text, id), each matched whole.
    added: Vec<(String, u32)>,
    added_ids: FxHashMap<String, u32>,
    /// Finds the added tokens, leftmost and longest first (as `tokenizers` does).
    matcher: Option<aho_corasick::AhoCorasick>,
    /// False for control tokens no text spells (tekken's): known by id, never matched in text
    /// (only a format's declared special tokens are), as mistral-common encodes.
    match_added: bool,
    /// What adapters are told of the vocabulary, with every tokenization.
    reference: Arc<VocabularyRef>,
}

enum Engine {
    /// A tiktoken vocabulary (ranks file, tekken, the built-in o200k): its ordinary tokens in
    /// a compact table, encoded as tiktoken does ([`super::ranks`]).
    Tiktoken {
        table: Arc<TokenTable>,
        /// The pre-tokenizer regex.
        regex: Arc<fancy_regex::Regex>,
        /// The vocabulary's own special tokens (text → id): known by id, matched in text only
        /// where a format declares them.
        special: FxHashMap<String, u32>,
        /// Added to every rank to make its id (tekken puts its control tokens first).
        offset: u32,
        /// How many ordinary tokens (ranks `0..ranks`); 0 for the built-in vocabularies.
        ranks: u32,
    },
    ByteLevel(Box<ByteLevelBpe>),
    #[cfg(feature = "hf-tokenizers")]
    HuggingFace(Box<tokenizers::Tokenizer>),
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("name", &self.name)
            .finish()
    }
}

/// How to read a vocabulary file: what the file itself does not say.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileSpec<'a> {
    /// The tokenizer's name in reports (default: the file's path).
    pub name: Option<&'a str>,
    /// The pre-tokenizer regex of a tiktoken ranks file (default: o200k_base's).
    pub pattern: Option<&'a str>,
    /// Special tokens the file does not hold (a tiktoken ranks file holds none), or holds under
    /// another name at the same id (a later release renamed a reserved token): they replace any
    /// token of the file with the same id.
    pub special: &'a [SpecialToken],
}

impl Tokenizer {
    /// The default tokenizer (`o200k_base`), loaded once per process and shared.
    pub fn default_shared() -> Arc<Tokenizer> {
        static DEFAULT: OnceLock<Arc<Tokenizer>> = OnceLock::new();
        DEFAULT
            .get_or_init(|| {
                let (table, regex, special) = o200k();
                Arc::new(Tokenizer::from_table(
                    DEFAULT_TOKENIZER.into(),
                    table,
                    regex,
                    special.iter().map(|&(t, i)| (t.to_string(), i)).collect(),
                    0,
                    0,
                ))
            })
            .clone()
    }

    /// A built-in vocabulary by name ([`BUILTIN`]), loaded once per process and shared;
    /// `None` for any other name.
    pub fn builtin(name: &str) -> Option<Arc<Tokenizer>> {
        static HARMONY: OnceLock<Arc<Tokenizer>> = OnceLock::new();
        match name {
            DEFAULT_TOKENIZER => Some(Tokenizer::default_shared()),
            HARMONY_TOKENIZER => Some(
                HARMONY
                    .get_or_init(|| {
                        // o200k_base's ranks (one table for both), harmony's special tokens.
                        let (table, regex, _) = o200k();
                        Arc::new(Tokenizer::from_table(
                            HARMONY_TOKENIZER.into(),
                            table,
                            regex,
                            harmony_special(),
                            0,
                            0,
                        ))
                    })
                    .clone(),
            ),
            _ => None,
        }
    }

    /// Loads a tiktoken ranks file (one `base64-token rank` per line, o200k_base's regex), a
    /// Hugging Face `tokenizer.json` or a tekken JSON (told apart by their content); every
    /// error names the file.
    pub fn load(path: &Path) -> Result<Tokenizer, String> {
        Tokenizer::load_with(path, &FileSpec::default())
    }

    /// Loads a vocabulary file with what its declaration adds (`spec`); every error names the
    /// file.
    pub fn load_with(path: &Path, spec: &FileSpec) -> Result<Tokenizer, String> {
        let tok = Tokenizer::read_file(path, spec);
        // Reading built the file's tokens as many small blocks, now freed: without this glibc
        // keeps them resident beside the run's own buffers (57 MB for a DeepSeek vocabulary
        // whose table is a fraction of that).
        release_freed_heap();
        tok
    }

    /// [`Tokenizer::load_with`] without giving the freed heap back.
    fn read_file(path: &Path, spec: &FileSpec) -> Result<Tokenizer, String> {
        use std::io::{BufRead, Read};
        let shown = path.display();
        // A regular file (a FIFO would block), of a tokenizer's size, checked as it is read.
        let (file, meta) =
            super::files::open_regular(path).map_err(|e| format!("tokenizer {shown}: {e}"))?;
        if meta.len() > MAX_TOKENIZER_BYTES {
            return Err(format!(
                "tokenizer {shown}: {} bytes, larger than any tokenizer (at most {MAX_TOKENIZER_BYTES})",
                meta.len()
            ));
        }
        let mut r = std::io::BufReader::new(file.take(MAX_TOKENIZER_BYTES));
        let name = spec
            .name
            .map_or_else(|| path.display().to_string(), str::to_string);
        let first = loop {
            let buf = r
                .fill_buf()
                .map_err(|e| format!("tokenizer {shown}: cannot read: {e}"))?;
            match buf.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(i) => break Some(buf[i]),
                None if buf.is_empty() => break None,
                None => {
                    let n = buf.len();
                    r.consume(n);
                }
            }
        };
        let mut tok = if first == Some(b'{') {
            let mut bytes = Vec::new();
            r.read_to_end(&mut bytes)
                .map_err(|e| format!("tokenizer {shown}: cannot read: {e}"))?;
            // Which kind of JSON file, read without building a tree of it: a tokenizer.json's
            // vocabulary and merges are read into their own types (a JSON tree costs about ten
            // times the file).
            #[derive(serde::Deserialize)]
            struct Probe {
                model: Option<serde::de::IgnoredAny>,
                vocab: Option<serde::de::IgnoredAny>,
                config: Option<serde::de::IgnoredAny>,
            }
            let probe: Probe = serde_json::from_slice(&bytes)
                .map_err(|e| format!("tokenizer {shown}: not valid JSON: {e}"))?;
            if probe.vocab.is_some() && probe.config.is_some() {
                Tokenizer::load_tekken(name, &bytes)
            } else if probe.model.is_none() {
                Err("not a tokenizer.json (no \"model\") nor a tekken file (no \"vocab\" and \"config\")".into())
            } else {
                Tokenizer::load_json(name, bytes)
            }
            .map_err(|e| format!("tokenizer {shown}: {e}"))?
        } else {
            let table = parse_ranks(r).map_err(|e| format!("tokenizer {shown}: {e}"))?;
            let n = u32::try_from(table.len()).unwrap_or(u32::MAX);
            let pattern = spec.pattern.unwrap_or(tiktoken_rs::O200K_BASE_PAT_STR);
            let regex =
                fancy_regex::Regex::new(pattern).map_err(|e| format!("tokenizer {shown}: {e}"))?;
            Tokenizer::from_table(
                name,
                Arc::new(table),
                Arc::new(regex),
                FxHashMap::default(),
                0,
                n,
            )
        };
        tok.add_special(spec.special);
        tok.reference = Arc::new(VocabularyRef {
            name: tok.name.clone(),
            file: Some(
                std::path::absolute(path)
                    .unwrap_or_else(|_| path.to_path_buf())
                    .display()
                    .to_string(),
            ),
            special: spec
                .special
                .iter()
                .filter_map(|s| Some((s.text.to_string(), s.id?)))
                .collect(),
        });
        Ok(tok)
    }

    /// A Hugging Face `tokenizer.json`: conform's byte-level BPE reader, else (with the
    /// `hf-tokenizers` feature) the `tokenizers` crate.
    #[cfg_attr(not(feature = "hf-tokenizers"), allow(unused_variables))]
    fn load_json(name: String, bytes: Vec<u8>) -> Result<Tokenizer, String> {
        match ByteLevelBpe::from_slice(&bytes) {
            Ok(b) => {
                let added = b.added().to_vec();
                Ok(Tokenizer::with_added(
                    name,
                    Engine::ByteLevel(Box::new(b)),
                    added,
                ))
            }
            #[cfg(feature = "hf-tokenizers")]
            Err(_) => {
                let tok = tokenizers::Tokenizer::from_bytes(&bytes)
                    .map_err(|e| format!("not a valid tokenizer.json: {e}"))?;
                let added = tok
                    .get_added_tokens_decoder()
                    .into_iter()
                    .map(|(id, t)| (t.content, id))
                    .collect();
                Ok(Tokenizer::with_added(
                    name,
                    Engine::HuggingFace(Box::new(tok)),
                    added,
                ))
            }
            #[cfg(not(feature = "hf-tokenizers"))]
            Err(e) => Err(format!(
                "not a tokenizer.json conform reads ({e}); conform built with the \
                 `hf-tokenizers` feature reads any (cargo build --features hf-tokenizers)"
            )),
        }
    }

    /// Mistral's tekken JSON: `config` (pattern, sizes), `vocab` (ranks with base64 bytes) and,
    /// from v7 on, `special_tokens`; a token's id is its rank after the control tokens.
    fn load_tekken(name: String, bytes: &[u8]) -> Result<Tokenizer, String> {
        use base64::Engine as _;
        /// The parts of a tekken file read, the vocabulary into its own type rather than a
        /// JSON tree (which costs about ten times the file).
        #[derive(serde::Deserialize)]
        struct Doc {
            #[serde(default)]
            config: serde_json::Value,
            vocab: Vec<Entry>,
            #[serde(default)]
            special_tokens: serde_json::Value,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            #[serde(default)]
            token_bytes: Option<String>,
        }
        let doc: Doc = serde_json::from_slice(bytes).map_err(|e| format!("tekken file: {e}"))?;
        let config = &doc.config;
        let field = |k: &str| {
            config
                .get(k)
                .and_then(serde_json::Value::as_u64)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| format!("tekken config has no {k}"))
        };
        let pattern = config
            .get("pattern")
            .and_then(serde_json::Value::as_str)
            .ok_or("tekken config has no pattern")?;
        let specials = field("default_num_special_tokens")?;
        let size = field("default_vocab_size")?;
        let inner = size
            .checked_sub(specials)
            .ok_or("tekken vocabulary smaller than its control tokens")?;
        let mut table = TokenTable::new();
        for (i, v) in doc.vocab.iter().take(inner as usize).enumerate() {
            let bytes = v
                .token_bytes
                .as_deref()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .ok_or_else(|| format!("tekken vocab entry {i} has no base64 token_bytes"))?;
            if table.push(&bytes, i as u32).is_err() {
                return Err(format!("tekken vocab entry {i} repeats a token"));
            }
        }
        drop(doc.vocab);
        table.finish();
        if table.len() < inner as usize {
            return Err(format!(
                "tekken vocab has {} entries, its config {inner}",
                table.len()
            ));
        }
        if let Some(b) = table.missing_byte() {
            return Err(format!(
                "tekken vocab is not byte-level: byte 0x{b:02x} has no token"
            ));
        }
        let mut added = Vec::new();
        for t in doc.special_tokens.as_array().map_or(&[][..], Vec::as_slice) {
            match (
                t.get("token_str").and_then(serde_json::Value::as_str),
                t.get("rank").and_then(serde_json::Value::as_u64),
            ) {
                (Some(s), Some(r)) => added.push((s.to_string(), r as u32)),
                _ => return Err("a tekken special token without token_str and rank".into()),
            }
        }
        let regex = fancy_regex::Regex::new(pattern).map_err(|e| format!("tekken pattern: {e}"))?;
        let mut tok = Tokenizer::from_table(
            name,
            Arc::new(table),
            Arc::new(regex),
            FxHashMap::default(),
            specials,
            inner,
        );
        tok.match_added = false;
        tok.added = added;
        tok.index_added();
        Ok(tok)
    }

    fn from_table(
        name: String,
        table: Arc<TokenTable>,
        regex: Arc<fancy_regex::Regex>,
        special: FxHashMap<String, u32>,
        offset: u32,
        ranks: u32,
    ) -> Tokenizer {
        let engine = Engine::Tiktoken {
            table,
            regex,
            special,
            offset,
            ranks,
        };
        Tokenizer::with_added(name, engine, Vec::new())
    }

    fn with_added(name: String, engine: Engine, added: Vec<(String, u32)>) -> Tokenizer {
        let reference = Arc::new(VocabularyRef {
            name: name.clone(),
            ..VocabularyRef::default()
        });
        let mut t = Tokenizer {
            name,
            engine,
            added,
            added_ids: FxHashMap::default(),
            matcher: None,
            match_added: true,
            reference,
        };
        t.index_added();
        t
    }

    /// Adds declared special tokens, replacing the file's token of the same id or text.
    fn add_special(&mut self, special: &[SpecialToken]) {
        if special.is_empty() {
            return;
        }
        for s in special {
            let Some(id) = s.id else { continue };
            self.added.retain(|(t, i)| *i != id && t != s.text);
            self.added.push((s.text.to_string(), id));
        }
        self.index_added();
    }

    fn index_added(&mut self) {
        self.added.retain(|(t, _)| !t.is_empty());
        self.added_ids = self.added.iter().cloned().collect();
        self.matcher = (self.match_added && !self.added.is_empty())
            .then(|| {
                aho_corasick::AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                    .build(self.added.iter().map(|(t, _)| t.as_bytes()))
                    .ok()
            })
            .flatten();
    }

    /// The tokenizer's name: a vocabulary's id (`o200k_base`, `qwen2`…) or the file it was
    /// loaded from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The vocabulary's own special and added tokens (text, id), matched whole.
    pub fn added(&self) -> &[(String, u32)] {
        &self.added
    }

    /// Cuts `data` into tokens: each occurrence of a special token (the format's, `special`,
    /// and the vocabulary's own) is one token with its id (the format's declared id, else the
    /// vocabulary's, else none); the text between them is encoded by the tokenizer; bytes that
    /// are not UTF-8 are one token each.
    pub fn tokenize(&self, data: &[u8], special: &[SpecialToken]) -> Tokenized {
        let mut out = Tokenized::default();
        if !Tokenized::fits(data.len()) {
            // Offsets are 32-bit: a turn over 4 GiB has no token-aligned chunkings.
            return out;
        }
        let mut pos = 0;
        for (start, len, id) in self.spans(data, special) {
            self.encode_text(&data[pos..start], pos, &mut out);
            out.push_id(id);
            pos = start + len;
            out.close(pos);
        }
        self.encode_text(&data[pos..], pos, &mut out);
        out.set_vocabulary(Some(self.reference.clone()));
        out.shrink();
        out
    }

    /// The whole tokens of `data`: (start, length, id), leftmost first, the longest where
    /// several start at one offset (the format's token where it and the vocabulary's are the
    /// same text), never overlapping.
    fn spans(&self, data: &[u8], special: &[SpecialToken]) -> Vec<(usize, usize, TokenId)> {
        let mut all: Vec<(usize, usize, TokenId)> = special_spans(data, special)
            .into_iter()
            .map(|(s, t)| (s, t.text.len(), t.id.or_else(|| self.special_id(t.text))))
            .collect();
        if let Some(m) = &self.matcher {
            all.extend(m.find_iter(data).map(|h| {
                (
                    h.start(),
                    h.len(),
                    Some(self.added[h.pattern().as_usize()].1),
                )
            }));
        }
        // Stable: at one start and length, the format's declaration (listed first) wins.
        all.sort_by_key(|&(s, len, _)| (s, std::cmp::Reverse(len)));
        let mut out = Vec::with_capacity(all.len());
        let mut free_from = 0;
        for (s, len, id) in all {
            if s >= free_from {
                free_from = s + len;
                out.push((s, len, id));
            }
        }
        out
    }

    /// The vocabulary's id for a special or added token's text, if it has one.
    #[cfg_attr(not(feature = "hf-tokenizers"), allow(unused_variables))]
    pub fn special_id(&self, text: &str) -> TokenId {
        if let Some(&id) = self.added_ids.get(text) {
            return Some(id);
        }
        match &self.engine {
            // Only a special token of the vocabulary has an id of its own; any other text
            // would be several ordinary tokens.
            Engine::Tiktoken { special, .. } => special.get(text).copied(),
            Engine::ByteLevel(_) => None,
            #[cfg(feature = "hf-tokenizers")]
            Engine::HuggingFace(t) => t.token_to_id(text),
        }
    }

    /// True when `id` is an ordinary (not special, not added) token of a vocabulary loaded from
    /// a file: a special token declared with that id would be ambiguous.
    pub fn is_ordinary(&self, id: u32) -> bool {
        match &self.engine {
            Engine::Tiktoken { offset, ranks, .. } => id >= *offset && id - offset < *ranks,
            Engine::ByteLevel(b) => b.token_len(id) > 0,
            #[cfg(feature = "hf-tokenizers")]
            Engine::HuggingFace(t) => {
                t.id_to_token(id).is_some() && !self.added_ids.values().any(|&i| i == id)
            }
        }
    }

    fn encode_text(&self, bytes: &[u8], base: usize, out: &mut Tokenized) {
        let mut at = base;
        for chunk in bytes.utf8_chunks() {
            let valid = chunk.valid();
            if !valid.is_empty() {
                self.encode_str(valid, at, out);
                at += valid.len();
            }
            for &b in chunk.invalid() {
                at += 1;
                out.push_id(self.byte_id(b));
                out.close(at);
            }
        }
    }

    fn byte_id(&self, b: u8) -> TokenId {
        match &self.engine {
            Engine::Tiktoken { table, offset, .. } => table.byte_rank(b).map(|r| r + offset),
            Engine::ByteLevel(bpe) => Some(bpe.byte_id(b)),
            #[cfg(feature = "hf-tokenizers")]
            Engine::HuggingFace(t) => t
                .token_to_id(&format!("<0x{b:02X}>"))
                .or_else(|| t.token_to_id(&super::bpe::byte_chars()[b as usize].to_string())),
        }
    }

    /// Encodes valid text; tokens are grouped so that every unit ends on a character boundary.
    fn encode_str(&self, s: &str, base: usize, out: &mut Tokenized) {
        match &self.engine {
            Engine::Tiktoken {
                table,
                regex,
                offset,
                ..
            } => {
                // fancy-regex can give up on pathological input (its backtracking limit): such
                // text is encoded in smaller pieces instead.
                let mark = out.mark();
                let mut scratch = Scratch::default();
                let mut end = 0;
                let mut gave_up = false;
                for m in regex.find_iter(s) {
                    let Ok(m) = m else {
                        gave_up = true;
                        break;
                    };
                    table.encode_piece(m.as_str().as_bytes(), &mut scratch, &mut |r, n| {
                        end += n;
                        out.push_id(r.map(|r| r + offset));
                        if end < s.len() && s.is_char_boundary(end) {
                            out.close(base + end);
                        }
                    });
                }
                if !gave_up {
                    out.close(base + s.len());
                } else if s.len() > 1 {
                    out.rollback(mark);
                    let mut mid = s.len() / 2;
                    while !s.is_char_boundary(mid) {
                        mid += 1;
                    }
                    let (a, b) = s.split_at(mid);
                    self.encode_str(a, base, out);
                    if !b.is_empty() {
                        self.encode_str(b, base + mid, out);
                    }
                } else {
                    out.rollback(mark);
                    out.push_id(None);
                    out.close(base + s.len());
                }
            }
            Engine::ByteLevel(bpe) => {
                let mut end = 0;
                bpe.encode(s, &mut |id, len| {
                    end += len;
                    out.push_id(Some(id));
                    if end < s.len() && s.is_char_boundary(end) {
                        out.close(base + end);
                    }
                });
                out.close(base + s.len());
            }
            #[cfg(feature = "hf-tokenizers")]
            Engine::HuggingFace(t) => {
                match t.encode(s, false) {
                    Ok(enc) => {
                        for (&id, &(_, end)) in enc.get_ids().iter().zip(enc.get_offsets()) {
                            out.push_id(Some(id));
                            if end < s.len() && s.is_char_boundary(end) {
                                out.close(base + end);
                            }
                        }
                    }
                    // A tokenizer.json that cannot encode this text: one anonymous unit.
                    Err(_) => out.push_id(None),
                }
                out.close(base + s.len());
            }
        }
    }
}

/// Every occurrence of a special token in `data`, leftmost first, the longest where several
/// start at one offset, never overlapping.
pub fn special_spans<'a>(
    data: &[u8],
    special: &'a [SpecialToken],
) -> Vec<(usize, &'a SpecialToken)> {
    let mut all: Vec<(usize, &SpecialToken)> = Vec::new();
    for t in special.iter().filter(|t| !t.text.is_empty()) {
        all.extend(memchr::memmem::find_iter(data, t.text.as_bytes()).map(|s| (s, t)));
    }
    all.sort_by_key(|&(s, t)| (s, std::cmp::Reverse(t.text.len())));
    let mut out = Vec::with_capacity(all.len());
    let mut free_from = 0;
    for (s, t) in all {
        if s >= free_from {
            free_from = s + t.text.len();
            out.push((s, t));
        }
    }
    out
}

/// The largest tokenizer file read (a vocabulary's file is a few MB; o200k_base's ranks are
/// 3.6 MB).
pub const MAX_TOKENIZER_BYTES: u64 = 256 << 20;

/// Parses a tiktoken ranks file into a token table, line by line as it is read (the first bad
/// line ends the reading), refusing duplicate ranks or tokens and a byte without a rank.
fn parse_ranks(mut r: impl std::io::BufRead) -> Result<TokenTable, String> {
    use base64::Engine as _;
    let mut table = TokenTable::new();
    let mut seen = rustc_hash::FxHashSet::default();
    let mut raw = Vec::new();
    let mut tok = Vec::new();
    for n in 0.. {
        raw.clear();
        let got = r
            .read_until(b'\n', &mut raw)
            .map_err(|e| format!("cannot read: {e}"))?;
        if got == 0 {
            break;
        }
        let line = std::str::from_utf8(&raw)
            .map_err(|e| format!("line {}: not a tiktoken ranks file: {e}", n + 1))?;
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| format!("line {}: {why} (want `BASE64TOKEN RANK`)", n + 1);
        let mut parts = line.split_ascii_whitespace();
        let (Some(b64), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("not two fields"));
        };
        tok.clear();
        base64::engine::general_purpose::STANDARD
            .decode_vec(b64, &mut tok)
            .map_err(|e| bad(&format!("bad base64: {e}")))?;
        let rank: u32 = rank.parse().map_err(|_| bad("bad rank"))?;
        if tok.is_empty() {
            return Err(bad("empty token"));
        }
        if !seen.insert(rank) {
            return Err(bad(&format!("rank {rank} given twice")));
        }
        match table.push(&tok, rank) {
            Ok(()) => {}
            Err(super::ranks::AddError::Duplicate) => return Err(bad("token given twice")),
            Err(super::ranks::AddError::Full) => return Err(bad("too many tokens")),
        }
    }
    if let Some(b) = table.missing_byte() {
        return Err(format!(
            "not a byte-level vocabulary: byte 0x{b:02x} has no rank"
        ));
    }
    table.finish();
    Ok(table)
}

/// Gives the heap's free pages back to the system. glibc keeps the freed small blocks of a
/// discarded reading (a vocabulary file's per-token blocks, tens of MB) for later small allocations, while a
/// huge transcript's buffers are mapped apart: without this, a run's peak carries both.
fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system; it touches no live block.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// o200k_base's ordinary tokens in conform's compact form, written by `build.rs` from
/// tiktoken-rs's ranks: per token, its rank (u32 LE), its length (u16 LE) and its bytes.
static O200K_TOKENS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k.bin"));

/// Reads [`O200K_TOKENS`] into a table; `None` if the embedded file is malformed.
fn o200k_table(mut data: &[u8]) -> Option<TokenTable> {
    let mut table = TokenTable::new();
    while !data.is_empty() {
        let (head, rest) = data.split_at_checked(6)?;
        let rank = u32::from_le_bytes(head[..4].try_into().ok()?);
        let len = u16::from_le_bytes(head[4..].try_into().ok()?);
        let (bytes, rest) = rest.split_at_checked(usize::from(len))?;
        table.push(bytes, rank).ok()?;
        data = rest;
    }
    table.finish();
    Some(table)
}

/// o200k_base's ordinary tokens, pre-tokenizer and special tokens, read once per process. The
/// ranks are decoded from tiktoken-rs at build time (`build.rs`): building its `CoreBPE` here
/// peaked at ~60 MiB beside the transcript, to keep a table of 5 MB.
fn o200k() -> (
    Arc<TokenTable>,
    Arc<fancy_regex::Regex>,
    &'static [(&'static str, u32)],
) {
    static O200K: OnceLock<(Arc<TokenTable>, Arc<fancy_regex::Regex>)> = OnceLock::new();
    /// o200k_base's special tokens (tiktoken-rs's `o200k_base`).
    const SPECIAL: &[(&str, u32)] = &[("<|endoftext|>", 199_999), ("<|endofprompt|>", 200_018)];
    let (table, regex) = O200K.get_or_init(|| {
        // The file is build.rs's output, compiled in: failing to read it is a broken build,
        // not bad input (a test reads it).
        let table = o200k_table(O200K_TOKENS).expect("build.rs's o200k table is well formed");
        let regex = fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR)
            .expect("tiktoken-rs's o200k_base pattern compiles");
        (Arc::new(table), Arc::new(regex))
    });
    (table.clone(), regex.clone(), SPECIAL)
}

/// o200k_harmony's special tokens (tiktoken-rs's `o200k_harmony`): named ones and the reserved
/// ids 200013 to 201087.
fn harmony_special() -> FxHashMap<String, u32> {
    let named = [
        ("<|startoftext|>", 199_998),
        ("<|endoftext|>", 199_999),
        ("<|return|>", 200_002),
        ("<|constrain|>", 200_003),
        ("<|channel|>", 200_005),
        ("<|start|>", 200_006),
        ("<|end|>", 200_007),
        ("<|message|>", 200_008),
        ("<|call|>", 200_012),
    ];
    let reserved = [200_000, 200_001, 200_004, 200_009, 200_010, 200_011]
        .into_iter()
        .chain(200_013..=201_087)
        .map(|i| (format!("<|reserved_{i}|>"), i));
    named
        .into_iter()
        .map(|(t, i)| (t.to_string(), i))
        .chain(reserved)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harmony_is_tokenized_with_o200k_harmony_unless_a_tokenizer_is_given() {
        let f = crate::formats::by_id("harmony").unwrap();
        assert_eq!(f.vocabulary, Some(HARMONY_TOKENIZER));
        let text = "<|channel|>final<|message|>Hi<|return|>";
        let undeclared: Vec<SpecialToken> = f
            .special_tokens
            .iter()
            .map(|s| SpecialToken { id: None, ..*s })
            .collect();
        // Without the declared ids the vocabulary still gives the special tokens theirs.
        let harmony =
            crate::harness::vocab::tokenizer_for(f).tokenize(text.as_bytes(), &undeclared);
        let base = Tokenizer::default_shared().tokenize(text.as_bytes(), &undeclared);
        let ids = |k: &Tokenized| k.ids().iter().flatten().copied().collect::<Vec<_>>();
        assert!(ids(&harmony).starts_with(&[200005]), "{:?}", ids(&harmony));
        assert!(ids(&harmony).ends_with(&[200002]));
        assert_eq!(base.ids().iter().filter(|i| i.is_none()).count(), 3);
        assert!(!ids(&base).contains(&200005));
        let run = crate::harness::run::RunConfig::default();
        assert_eq!(run.tokenizer_for(f).name(), HARMONY_TOKENIZER);
        let given = crate::harness::run::RunConfig {
            tokenizer: Some(Tokenizer::default_shared()),
            ..run
        };
        assert_eq!(given.tokenizer_for(f).name(), DEFAULT_TOKENIZER);
        assert!(Tokenizer::builtin("cl100k_base").is_none());
        assert_eq!(BUILTIN, &[DEFAULT_TOKENIZER, HARMONY_TOKENIZER]);
    }

    fn specials() -> Vec<SpecialToken> {
        vec![
            SpecialToken::new("<|a|>", 900),
            SpecialToken {
                text: "<|a|>x",
                id: None,
            },
            SpecialToken::new("<|b|>", 901),
        ]
    }

    #[test]
    fn special_tokens_are_whole_with_their_ids_and_the_longest_wins() {
        let t = Tokenizer::default_shared();
        let d = "hi<|a|>x there<|b|><|a|>".as_bytes();
        let k = t.tokenize(d, &specials());
        for (s, tok) in special_spans(d, &specials()) {
            let inside = s + 1..s + tok.text.len();
            assert!(k.boundaries().iter().all(|c| !inside.contains(c)));
        }
        assert!(k.is_boundary(2) && k.is_boundary(8) && k.is_boundary(14));
        assert_eq!(k.unit_end(k.units() - 1), d.len());
        let chunks = k.chunk_ids(&k.boundaries()).unwrap();
        assert_eq!(chunks.len(), k.units());
        assert_eq!(chunks[1], &[None], "<|a|>x is longer and has no id");
        assert_eq!(chunks[chunks.len() - 2], &[Some(901)]);
        assert_eq!(chunks[chunks.len() - 1], &[Some(900)]);
        assert!(chunks[0].iter().all(Option::is_some));
        assert!(k.chunk_ids(&[1]).is_none() || k.is_boundary(1));
    }

    #[test]
    fn o200k_encodes_like_tiktoken() {
        let t = Tokenizer::default_shared();
        let k = t.tokenize(b"hello world", &[]);
        // tiktoken's o200k_base: "hello" = 24912, " world" = 2375.
        assert_eq!(k.ids(), &[Some(24912), Some(2375)]);
        assert_eq!(k.boundaries(), &[5]);
    }

    #[test]
    fn a_token_ending_inside_a_character_travels_with_the_next() {
        let t = Tokenizer::default_shared();
        // Rare characters are split into byte tokens by o200k_base.
        let s = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ";
        let k = t.tokenize(s.as_bytes(), &[]);
        assert!(k.tokens() > k.units(), "some token ends mid-character");
        assert!(k.boundaries().iter().all(|&c| s.is_char_boundary(c)));
        let ids: Vec<u32> = k.ids().iter().map(|i| i.unwrap()).collect();
        assert_eq!(
            tiktoken_rs::o200k_base().unwrap().decode(&ids).unwrap(),
            s,
            "the ids are the encoding of the text"
        );
    }

    #[test]
    fn invalid_bytes_are_one_token_each() {
        let t = Tokenizer::default_shared();
        let k = t.tokenize(b"a\xffb", &[]);
        assert_eq!(k.boundaries(), &[1, 2]);
        assert!(k.ids()[1].is_some(), "o200k_base names every byte");
        assert_eq!(t.tokenize(b"", &[]).units(), 0);
        assert_eq!(t.tokenize(b"", &[]).chunk_ids(&[]).unwrap(), vec![&[][..]]);
    }

    fn ranks_file(lines: &[(&[u8], u32)]) -> String {
        use base64::Engine as _;
        let mut s = String::new();
        for b in 0..=255u8 {
            s.push_str(&format!(
                "{} {b}\n",
                base64::engine::general_purpose::STANDARD.encode([b])
            ));
        }
        for (tok, r) in lines {
            s.push_str(&format!(
                "{} {r}\n",
                base64::engine::general_purpose::STANDARD.encode(tok)
            ));
        }
        s
    }

    #[test]
    fn a_ranks_file_loads_and_merges() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tiny.tiktoken");
        std::fs::write(
            &p,
            ranks_file(&[(b"he", 256), (b"ll", 257), (b"hell", 258)]),
        )
        .unwrap();
        let t = Tokenizer::load(&p).unwrap();
        assert_eq!(t.name(), p.display().to_string());
        let k = t.tokenize(b"hello", &[]);
        assert_eq!(k.ids(), &[Some(258), Some(b'o' as u32)]);
        assert_eq!(k.boundaries(), &[4]);
    }

    #[test]
    fn bad_tokenizer_files_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.tiktoken");
        let e = Tokenizer::load(&missing).unwrap_err();
        assert!(
            e.contains("missing.tiktoken") && e.contains("cannot read"),
            "{e}"
        );
        for (name, body, why) in [
            ("junk", "not ranks at all\n".to_string(), "line 1"),
            ("b64", "!!!! 1\n".to_string(), "bad base64"),
            ("dup", ranks_file(&[(b"ab", 3)]), "given twice"),
            ("short", "YQ== 0\n".to_string(), "byte 0x00 has no rank"),
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            let e = Tokenizer::load(&p).unwrap_err();
            assert!(e.contains(name) && e.contains(why), "{e}");
        }
        let p = dir.path().join("tokenizer.json");
        std::fs::write(&p, "{\"nope\": 1}").unwrap();
        let e = Tokenizer::load(&p).unwrap_err();
        assert!(
            e.contains("tokenizer.json") && e.contains("no \"model\""),
            "{e}"
        );
        std::fs::write(&p, "{\"model\": {\"type\": \"Unigram\"}}").unwrap();
        let e = Tokenizer::load(&p).unwrap_err();
        assert!(e.contains("tokenizer.json"), "{e}");
        #[cfg(not(feature = "hf-tokenizers"))]
        assert!(e.contains("Unigram") && e.contains("hf-tokenizers"), "{e}");
        std::fs::write(&p, "{\"model\": ").unwrap();
        let e = Tokenizer::load(&p).unwrap_err();
        assert!(e.contains("not valid JSON"), "{e}");
    }

    #[cfg(feature = "hf-tokenizers")]
    #[test]
    fn a_hugging_face_tokenizer_json_loads_and_names_its_added_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        let json = serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": [{"id": 6, "content": "<|x|>", "single_word": false, "lstrip": false,
                              "rstrip": false, "normalized": false, "special": true}],
            "normalizer": null,
            "pre_tokenizer": null,
            "post_processor": null,
            "decoder": null,
            "model": {"type": "BPE", "dropout": null, "unk_token": "?",
                      "continuing_subword_prefix": null, "end_of_word_suffix": null,
                      "fuse_unk": false, "byte_fallback": false,
                      "vocab": {"?": 0, "h": 1, "i": 2, "hi": 3, " ": 4, "é": 5},
                      "merges": ["h i"]}
        });
        std::fs::write(&p, json.to_string()).unwrap();
        let t = Tokenizer::load(&p).unwrap();
        let x = [SpecialToken {
            text: "<|x|>",
            id: None,
        }];
        let k = t.tokenize("hi hié<|x|>".as_bytes(), &x);
        assert_eq!(
            k.ids(),
            &[Some(3), Some(4), Some(3), Some(5), Some(6)],
            "the added token's own id, for a special token that declares none"
        );
        assert_eq!(k.boundaries(), &[2, 3, 5, 7]);
        std::fs::write(&p, "{\"model\": 3}").unwrap();
        let e = Tokenizer::load(&p).unwrap_err();
        assert!(
            e.contains("tokenizer.json") && e.contains("not a valid"),
            "{e}"
        );
    }

    /// The compact table and its encoder against tiktoken-rs's `CoreBPE` over the same ranks
    /// and regex, on every transcript of the corpus (every turn of every case, each stretch of
    /// valid UTF-8), for o200k_base and every cached tiktoken or tekken vocabulary: the same
    /// ids, token for token (so the same boundaries).
    #[test]
    fn the_table_gives_tiktokens_ids_on_every_corpus_transcript() {
        use crate::harness::vocab;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
        let corpus = crate::harness::corpus::load(
            &[root.display().to_string()],
            &crate::harness::corpus::LoadOptions::default(),
        );
        assert!(corpus.cases.len() > 1000, "{} cases", corpus.cases.len());
        let mut toks = vec![Tokenizer::default_shared()];
        for v in vocab::VOCABULARIES
            .iter()
            .filter(|v| v.file.ends_with(".tiktoken") || v.id == "tekken")
        {
            toks.extend(vocab::cached(v.id));
        }
        for tok in toks {
            let Engine::Tiktoken {
                table,
                regex,
                offset,
                ..
            } = &tok.engine
            else {
                panic!("{} is a tiktoken vocabulary", tok.name());
            };
            let reference = if tok.name() == DEFAULT_TOKENIZER {
                tiktoken_rs::o200k_base().unwrap()
            } else {
                let ranks = table.iter().map(|(b, r)| (b.to_vec(), r)).collect();
                tiktoken_rs::CoreBPE::new(ranks, Default::default(), regex.as_str()).unwrap()
            };
            let (mut texts, mut tokens, mut wrong) = (0, 0, Vec::new());
            for c in &corpus.cases {
                for turn in &c.turns {
                    for chunk in turn.utf8_chunks() {
                        let s = chunk.valid();
                        if s.is_empty() {
                            continue;
                        }
                        let want: Vec<Option<u32>> = reference
                            .encode_ordinary(s)
                            .into_iter()
                            .map(|r| Some(r + offset))
                            .collect();
                        let mut got = Tokenized::default();
                        tok.encode_str(s, 0, &mut got);
                        texts += 1;
                        tokens += want.len();
                        if got.ids() != want && wrong.len() < 5 {
                            wrong.push(format!("{}: {:?} != {want:?}", c.id, got.ids()));
                        }
                    }
                }
            }
            eprintln!("{}: {texts} texts, {tokens} tokens compared", tok.name());
            assert!(tokens > 100_000, "{}: {tokens} tokens", tok.name());
            assert!(wrong.is_empty(), "{}: {wrong:#?}", tok.name());
        }
    }

    #[test]
    fn the_embedded_o200k_table_holds_every_tiktoken_rs_rank() {
        // build.rs's table against tiktoken-rs's `CoreBPE`, every rank both ways: each rank it
        // decodes is ours with the same bytes, and we hold no other.
        let bpe = tiktoken_rs::o200k_base().unwrap();
        let table = o200k_table(O200K_TOKENS).unwrap();
        let mut held = 0;
        for rank in 0..201_000u32 {
            let ours = table.token(rank);
            match bpe.decode_bytes(&[rank]) {
                Ok(_) if [199_999, 200_018].contains(&rank) => assert_eq!(ours, None),
                Ok(theirs) => {
                    assert_eq!(ours, Some(&theirs[..]), "rank {rank}");
                    assert_eq!(table.rank(&theirs), Some(rank));
                    held += 1;
                }
                Err(_) => assert_eq!(ours, None, "rank {rank}"),
            }
        }
        assert_eq!(held, table.len());
        assert_eq!(table.missing_byte(), None);
    }

    #[test]
    fn a_malformed_embedded_table_is_refused_not_misread() {
        let entry = |rank: u32, b: &[u8]| {
            let mut v = rank.to_le_bytes().to_vec();
            v.extend_from_slice(&(b.len() as u16).to_le_bytes());
            v.extend_from_slice(b);
            v
        };
        let good = [entry(0, b"a"), entry(1, b"bc")].concat();
        let t = o200k_table(&good).unwrap();
        assert_eq!(
            (t.token(0), t.token(1)),
            (Some(&b"a"[..]), Some(&b"bc"[..]))
        );
        // A cut header, a token cut short, the same bytes twice.
        assert!(o200k_table(&good[..good.len() - 1]).is_none());
        assert!(o200k_table(&good[..9]).is_none());
        assert!(o200k_table(&[entry(0, b"a"), entry(1, b"a")].concat()).is_none());
    }

    #[test]
    fn the_built_in_vocabularies_have_tiktoken_rss_tokens_and_share_one_table() {
        let base = tiktoken_rs::o200k_base().unwrap();
        let harmony = tiktoken_rs::o200k_harmony().unwrap();
        let ours = Tokenizer::default_shared();
        let theirs = Tokenizer::builtin(HARMONY_TOKENIZER).unwrap();
        let (Engine::Tiktoken { table, .. }, Engine::Tiktoken { table: t2, .. }) =
            (&ours.engine, &theirs.engine)
        else {
            panic!("tiktoken vocabularies");
        };
        assert!(Arc::ptr_eq(table, t2), "one o200k table for both");
        assert_eq!(table.len(), 199_998);
        for (bytes, rank) in table.iter().step_by(97) {
            assert_eq!(base.decode_bytes(&[rank]).unwrap(), bytes);
        }
        assert!(table.heap_bytes() < 8 << 20, "{}", table.heap_bytes());
        for (bpe, tok) in [(&base, &ours), (&harmony, &theirs)] {
            let special = bpe.special_tokens();
            for text in &special {
                let id = bpe.encode_with_special_tokens(text)[0];
                assert_eq!(tok.special_id(text), Some(id), "{}: {text}", tok.name());
            }
            let Engine::Tiktoken { special: ours, .. } = &tok.engine else {
                unreachable!()
            };
            assert_eq!(ours.len(), special.len(), "{}", tok.name());
        }
    }

    #[test]
    fn text_the_regex_gives_up_on_is_encoded_in_halves_without_a_trace_of_the_attempt() {
        // A regex whose lookahead backtracks past fancy-regex's limit on a long run.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tiny.tiktoken");
        std::fs::write(&p, ranks_file(&[(b"aa", 256)])).unwrap();
        let pattern = r"(?:(?=a)a+)+(?=b)|a|b";
        let spec = FileSpec {
            pattern: Some(pattern),
            ..FileSpec::default()
        };
        let t = Tokenizer::load_with(&p, &spec).unwrap();
        let s = format!("b{}", "a".repeat(40));
        let re = fancy_regex::Regex::new(pattern).unwrap();
        assert!(re.find_iter(&s).any(|m| m.is_err()), "the regex gives up");
        let k = t.tokenize(s.as_bytes(), &[]);
        // "b" was encoded before the regex gave up: it is not kept twice.
        assert_eq!(k.tokens(), 41, "one token a character, each once");
        assert_eq!(k.boundaries(), (1..41).collect::<Vec<_>>());
    }

    proptest::proptest! {
        #[test]
        fn units_tile_the_text_on_character_boundaries(s in "(\\PC|<\\|a\\|>|<\\|b\\|>| |\n){0,60}") {
            let t = Tokenizer::default_shared();
            let k = t.tokenize(s.as_bytes(), &specials());
            proptest::prop_assert!(k.boundaries().iter().all(|&c| s.is_char_boundary(c) && c > 0));
            proptest::prop_assert!(k.boundaries().windows(2).all(|w| w[0] < w[1]));
            proptest::prop_assert_eq!(k.units() == 0, s.is_empty());
            for (st, tok) in special_spans(s.as_bytes(), &specials()) {
                proptest::prop_assert!(k.is_boundary(st) || st == 0);
                proptest::prop_assert!(!k.boundaries().iter().any(|&c| st < c && c < st + tok.text.len()));
            }
            let chunks = k.chunk_ids(&k.boundaries()).unwrap();
            proptest::prop_assert_eq!(chunks.iter().map(|c| c.len()).sum::<usize>(), k.tokens());
            proptest::prop_assert!(s.is_empty() || chunks.iter().all(|c| !c.is_empty()));
        }
    }
}
