//! Tokenizers for token-aligned chunkings: where a server's deltas can end, and which token ids
//! each delta carries.
//!
//! A server decodes its model's output token by token and hands its parser one delta per token
//! (or per few tokens). So the cuts a parser meets in production are token boundaries, never the
//! inside of a special token, and never the inside of a UTF-8 character (an incremental
//! detokenizer holds back a token that ends mid-character until the next one completes it).
//! [`Tokenizer::tokenize`] reproduces that: it splits the transcript at the format's special
//! tokens first (each one token, with its declared id), BPE-encodes the ordinary text between
//! them, and groups tokens into *units*, the smallest pieces a delta can hold: one token, or
//! several when a token ends inside a character.
//!
//! The default tokenizer is tiktoken's `o200k_base`, whose ranks are embedded in the
//! `tiktoken-rs` crate (no file, no network); a format whose model uses another built-in
//! vocabulary declares it (`Format::vocabulary`: harmony, `o200k_harmony`). `--tokenizer FILE`
//! loads a tiktoken ranks file or, with the `hf-tokenizers` cargo feature, a Hugging Face
//! `tokenizer.json`, for every format.

pub use crate::backends::cuts::{TokenId, Tokenized};
use crate::formats::SpecialToken;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The name of the default tokenizer.
pub const DEFAULT_TOKENIZER: &str = "o200k_base";

/// The name of gpt-oss's vocabulary: o200k_base's ranks and the harmony special tokens.
pub const HARMONY_TOKENIZER: &str = "o200k_harmony";

/// The vocabularies built in (embedded in tiktoken-rs), which a format may declare.
pub const VOCABULARIES: &[&str] = &[DEFAULT_TOKENIZER, HARMONY_TOKENIZER];

/// A loaded tokenizer, shared by every thread of a run.
pub struct Tokenizer {
    name: String,
    engine: Engine,
}

enum Engine {
    Tiktoken {
        bpe: Box<tiktoken_rs::CoreBPE>,
        /// The id of each single byte, for bytes that are not valid UTF-8.
        byte_ids: Box<[TokenId; 256]>,
    },
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

impl Tokenizer {
    /// The default tokenizer (`o200k_base`), loaded once per process and shared.
    pub fn default_shared() -> Arc<Tokenizer> {
        static DEFAULT: OnceLock<Arc<Tokenizer>> = OnceLock::new();
        DEFAULT
            .get_or_init(|| {
                // The ranks are compiled into tiktoken-rs: failing to parse them is a broken
                // build of that crate, not bad input.
                let bpe = tiktoken_rs::o200k_base().expect("tiktoken-rs's embedded o200k_base");
                Arc::new(Tokenizer::from_bpe(DEFAULT_TOKENIZER.into(), bpe))
            })
            .clone()
    }

    /// A built-in vocabulary by name ([`VOCABULARIES`]), loaded once per process and shared;
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
                        Arc::new(Tokenizer::from_bpe(HARMONY_TOKENIZER.into(), bpe))
                    })
                    .clone(),
            ),
            _ => None,
        }
    }

    /// The tokenizer of a format that declares `vocabulary` (`Format::vocabulary`) when no
    /// `--tokenizer` is given: that built-in vocabulary, or the default.
    pub fn for_vocabulary(vocabulary: Option<&str>) -> Arc<Tokenizer> {
        vocabulary
            .and_then(Tokenizer::builtin)
            .unwrap_or_else(Tokenizer::default_shared)
    }

    /// Loads a tiktoken ranks file (one `base64-token rank` per line) or a Hugging Face
    /// `tokenizer.json` (told apart by the JSON object it starts with); every error names the
    /// file.
    pub fn load(path: &Path) -> Result<Tokenizer, String> {
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
        let name = path.display().to_string();
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
        if first == Some(b'{') {
            let mut bytes = Vec::new();
            r.read_to_end(&mut bytes)
                .map_err(|e| format!("tokenizer {shown}: cannot read: {e}"))?;
            return Self::load_hf(name, &bytes);
        }
        let ranks = parse_ranks(r).map_err(|e| format!("tokenizer {shown}: {e}"))?;
        let bpe =
            tiktoken_rs::CoreBPE::new(ranks, Default::default(), tiktoken_rs::O200K_BASE_PAT_STR)
                .map_err(|e| format!("tokenizer {shown}: {e}"))?;
        Ok(Tokenizer::from_bpe(name, bpe))
    }

    #[cfg(feature = "hf-tokenizers")]
    fn load_hf(name: String, bytes: &[u8]) -> Result<Tokenizer, String> {
        let tok = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| format!("tokenizer {name}: not a valid tokenizer.json: {e}"))?;
        Ok(Tokenizer {
            name,
            engine: Engine::HuggingFace(Box::new(tok)),
        })
    }

    #[cfg(not(feature = "hf-tokenizers"))]
    fn load_hf(name: String, _bytes: &[u8]) -> Result<Tokenizer, String> {
        Err(format!(
            "tokenizer {name}: a Hugging Face tokenizer.json needs conform built with the \
             `hf-tokenizers` feature (cargo build --features hf-tokenizers); a tiktoken ranks \
             file works without it"
        ))
    }

    fn from_bpe(name: String, bpe: tiktoken_rs::CoreBPE) -> Tokenizer {
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
                byte_ids[one as usize] = Some(rank);
                found += 1;
            }
        }
        Tokenizer {
            name,
            engine: Engine::Tiktoken {
                bpe: Box::new(bpe),
                byte_ids,
            },
        }
    }

    /// The tokenizer's name: `o200k_base` or the file it was loaded from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Cuts `data` into tokens: each occurrence of a special token is one token with its declared
    /// id (or the tokenizer's own id for that text, or none); the text between them is encoded by
    /// the tokenizer; bytes that are not UTF-8 are one token each.
    pub fn tokenize(&self, data: &[u8], special: &[SpecialToken]) -> Tokenized {
        let mut out = Tokenized::default();
        if !Tokenized::fits(data.len()) {
            // Offsets are 32-bit: a turn over 4 GiB has no token-aligned chunkings.
            return out;
        }
        let mut pos = 0;
        for (start, token) in special_spans(data, special) {
            self.encode_text(&data[pos..start], pos, &mut out);
            let id = token.id.or_else(|| self.special_id(token.text));
            out.push_id(id);
            pos = start + token.text.len();
            out.close(pos);
        }
        self.encode_text(&data[pos..], pos, &mut out);
        out.shrink();
        out
    }

    #[cfg_attr(not(feature = "hf-tokenizers"), allow(unused_variables))]
    fn special_id(&self, text: &str) -> TokenId {
        match &self.engine {
            // Only a special token of the vocabulary has an id of its own; any other text
            // would be several ordinary tokens.
            Engine::Tiktoken { bpe, .. } if bpe.special_tokens().contains(text) => {
                match bpe.encode_with_special_tokens(text)[..] {
                    [id] => Some(id),
                    _ => None,
                }
            }
            Engine::Tiktoken { .. } => None,
            #[cfg(feature = "hf-tokenizers")]
            Engine::HuggingFace(t) => t.token_to_id(text),
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
            #[cfg(feature = "hf-tokenizers")]
            Engine::HuggingFace(t) => t.token_to_id(&format!("<0x{b:02X}>")),
        }
    }

    /// Encodes valid text; tokens are grouped so that every unit ends on a character boundary.
    fn encode_str(&self, s: &str, base: usize, out: &mut Tokenized) {
        match &self.engine {
            Engine::Tiktoken { bpe, .. } => {
                // fancy-regex can give up on pathological input (its backtracking limit), and
                // tiktoken-rs then panics: such text is encoded in smaller pieces instead.
                let encoded = crate::backends::builtin::catching(|| bpe.encode_ordinary(s));
                match encoded {
                    Ok(ranks) => {
                        out.reserve(ranks.len());
                        let mut end = 0;
                        for r in ranks {
                            end += bpe.decode_bytes(&[r]).map_or(0, |b| b.len());
                            out.push_id(Some(r));
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
    fn every_declared_vocabulary_is_built_in_and_agrees_with_the_declared_ids() {
        for f in crate::formats::REGISTRY {
            let Some(v) = f.vocabulary else { continue };
            assert!(
                VOCABULARIES.contains(&v),
                "{}: unknown vocabulary {v}",
                f.id
            );
            let tok = Tokenizer::for_vocabulary(Some(v));
            assert_eq!(tok.name(), v);
            for s in f.special_tokens {
                // The vocabulary's own id for the text, found without the declaration.
                assert_eq!(tok.special_id(s.text), s.id, "{}: {}", f.id, s.text);
            }
        }
    }

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
            Tokenizer::for_vocabulary(f.vocabulary).tokenize(text.as_bytes(), &undeclared);
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
        assert_eq!(Tokenizer::for_vocabulary(None).name(), DEFAULT_TOKENIZER);
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
        assert!(e.contains("tokenizer.json"), "{e}");
        #[cfg(not(feature = "hf-tokenizers"))]
        assert!(e.contains("hf-tokenizers"), "{e}");
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
