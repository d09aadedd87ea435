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
    Tiktoken {
        bpe: Box<tiktoken_rs::CoreBPE>,
        /// The id of each single byte, for bytes that are not valid UTF-8.
        byte_ids: Box<[TokenId; 256]>,
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
                // The ranks are compiled into tiktoken-rs: failing to parse them is a broken
                // build of that crate, not bad input.
                let bpe = tiktoken_rs::o200k_base().expect("tiktoken-rs's embedded o200k_base");
                Arc::new(Tokenizer::from_bpe(
                    DEFAULT_TOKENIZER.into(),
                    bpe,
                    0,
                    0,
                    Vec::new(),
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
                        // Embedded in tiktoken-rs, like o200k_base.
                        let bpe = tiktoken_rs::o200k_harmony()
                            .expect("tiktoken-rs's embedded o200k_harmony");
                        Arc::new(Tokenizer::from_bpe(
                            HARMONY_TOKENIZER.into(),
                            bpe,
                            0,
                            0,
                            Vec::new(),
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
            let ranks = parse_ranks(r).map_err(|e| format!("tokenizer {shown}: {e}"))?;
            let n = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
            let pattern = spec.pattern.unwrap_or(tiktoken_rs::O200K_BASE_PAT_STR);
            let bpe = tiktoken_rs::CoreBPE::new(ranks, Default::default(), pattern)
                .map_err(|e| format!("tokenizer {shown}: {e}"))?;
            Tokenizer::from_bpe(name, bpe, 0, n, Vec::new())
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
        let mut ranks = FxHashMap::default();
        for (i, v) in doc.vocab.iter().take(inner as usize).enumerate() {
            let bytes = v
                .token_bytes
                .as_deref()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .ok_or_else(|| format!("tekken vocab entry {i} has no base64 token_bytes"))?;
            if ranks.insert(bytes, i as u32).is_some() {
                return Err(format!("tekken vocab entry {i} repeats a token"));
            }
        }
        if ranks.len() < inner as usize {
            return Err(format!(
                "tekken vocab has {} entries, its config {inner}",
                ranks.len()
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
        let bpe = tiktoken_rs::CoreBPE::new(ranks, Default::default(), pattern)
            .map_err(|e| format!("tekken pattern: {e}"))?;
        let mut tok = Tokenizer::from_bpe(name, bpe, specials, inner, Vec::new());
        tok.match_added = false;
        tok.added = added;
        tok.index_added();
        Ok(tok)
    }

    fn from_bpe(
        name: String,
        bpe: tiktoken_rs::CoreBPE,
        offset: u32,
        ranks: u32,
        added: Vec<(String, u32)>,
    ) -> Tokenizer {
        let mut byte_ids = Box::new([None; 256]);
        let mut found = 0;
        // Byte-level vocabularies hold every single byte, usually among the first ranks.
        for rank in 0..1_000_000u32 {
            if found == 256 {
                break;
            }
            if let Ok(b) = bpe.decode_bytes(&[rank])
                && let [one] = b[..]
                && byte_ids[one as usize].is_none()
            {
                byte_ids[one as usize] = Some(rank + offset);
                found += 1;
            }
        }
        let engine = Engine::Tiktoken {
            bpe: Box::new(bpe),
            byte_ids,
            offset,
            ranks,
        };
        Tokenizer::with_added(name, engine, added)
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
            Engine::Tiktoken { bpe, .. } if bpe.special_tokens().contains(text) => {
                match bpe.encode_with_special_tokens(text)[..] {
                    [id] => Some(id),
                    _ => None,
                }
            }
            Engine::Tiktoken { .. } | Engine::ByteLevel(_) => None,
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
            Engine::Tiktoken { byte_ids, .. } => byte_ids[b as usize],
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
            Engine::Tiktoken { bpe, offset, .. } => {
                // fancy-regex can give up on pathological input (its backtracking limit), and
                // tiktoken-rs then panics: such text is encoded in smaller pieces instead.
                let encoded = crate::backends::builtin::catching(|| bpe.encode_ordinary(s));
                match encoded {
                    Ok(ranks) => {
                        out.reserve(ranks.len());
                        let mut end = 0;
                        for r in ranks {
                            end += bpe.decode_bytes(&[r]).map_or(0, |b| b.len());
                            out.push_id(Some(r + offset));
                            if end < s.len() && s.is_char_boundary(end) {
                                out.close(base + end);
                            }
                        }
                        out.close(base + s.len());
                    }
                    Err(_) if s.len() > 1 => {
                        let mut mid = s.len() / 2;
                        while !s.is_char_boundary(mid) {
                            mid += 1;
                        }
                        let (a, b) = s.split_at(mid);
                        self.encode_str(a, base, out);
                        if !b.is_empty() {
                            self.encode_str(b, base + mid, out);
                        }
                    }
                    Err(_) => {
                        out.push_id(None);
                        out.close(base + s.len());
                    }
                }
            }
            Engine::ByteLevel(bpe) => {
                let mut toks = Vec::new();
                bpe.encode(s, &mut toks);
                let mut end = 0;
                for (id, len) in toks {
                    end += len;
                    out.push_id(Some(id));
                    if end < s.len() && s.is_char_boundary(end) {
                        out.close(base + end);
                    }
                }
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

/// Parses a tiktoken ranks file into the map `CoreBPE` takes, line by line as it is read (the
/// first bad line ends the reading), refusing what would make it panic (duplicate ranks, a
/// byte without a rank).
fn parse_ranks(
    mut r: impl std::io::BufRead,
) -> Result<rustc_hash::FxHashMap<Vec<u8>, u32>, String> {
    use base64::Engine as _;
    let mut ranks = rustc_hash::FxHashMap::default();
    let mut seen = rustc_hash::FxHashSet::default();
    let mut raw = Vec::new();
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
        let (Some(tok), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("not two fields"));
        };
        let tok = base64::engine::general_purpose::STANDARD
            .decode(tok)
            .map_err(|e| bad(&format!("bad base64: {e}")))?;
        let rank: u32 = rank.parse().map_err(|_| bad("bad rank"))?;
        if tok.is_empty() {
            return Err(bad("empty token"));
        }
        if !seen.insert(rank) {
            return Err(bad(&format!("rank {rank} given twice")));
        }
        if ranks.insert(tok, rank).is_some() {
            return Err(bad("token given twice"));
        }
    }
    if let Some(b) = (0..=255u8).find(|b| !ranks.contains_key(&[*b][..])) {
        return Err(format!(
            "not a byte-level vocabulary: byte 0x{b:02x} has no rank"
        ));
    }
    Ok(ranks)
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
