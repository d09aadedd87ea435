//! A reader of Hugging Face `tokenizer.json` files for byte-level BPE vocabularies (DeepSeek V3
//! and V4, Llama 3), exact for what those files use, without the `tokenizers` crate and its
//! 42 dependencies (`specs/tokenizers.md` §3).
//!
//! What it reads: a `BPE` model (vocabulary, merges, `ignore_merges`; no byte fallback, no
//! subword prefix or suffix), no normalizer (or an empty sequence), a pre-tokenizer made of
//! `Split` (regex or string, `Isolated`, not inverted) and `ByteLevel` (without a prefix space)
//! steps, and `added_tokens` matched whole. Anything else is refused with a message naming it,
//! so a file this reader would get wrong never loads quietly (the `hf-tokenizers` feature reads
//! any file with the `tokenizers` crate). Encoding is what `tokenizers` does for
//! `encode(text, add_special_tokens=False)` on text without added tokens: split, map each byte
//! to its byte-level character, then apply the merges lowest rank first, leftmost first.

use super::ranks::TokenTable;
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A byte-level BPE vocabulary read from a `tokenizer.json`.
pub struct ByteLevelBpe {
    /// The id of each single byte.
    byte_ids: [u32; 256],
    /// (left id, right id) → (merge rank, merged id).
    merges: FxHashMap<(u32, u32), (u32, u32)>,
    /// Every token the byte alphabet spells: its bytes and id, in one compact table.
    tokens: TokenTable,
    /// `ignore_merges`: a pre-token that is itself in the vocabulary is that one token.
    ignore_merges: bool,
    /// The pre-tokenizer's splitting steps, applied in order.
    splits: Vec<Split>,
    /// The added tokens (`added_tokens`): text and id.
    added: Vec<(String, u32)>,
}

/// Buffers [`ByteLevelBpe::encode_piece`] reuses from piece to piece.
#[derive(Default)]
struct Scratch {
    id: Vec<u32>,
    len: Vec<usize>,
    prev: Vec<usize>,
    next: Vec<usize>,
    queue: BinaryHeap<Reverse<(u32, usize, u32)>>,
}

/// One splitting step of the pre-tokenizer.
enum Split {
    /// A regex whose matches are pieces of their own (`Split`, `Isolated`; `ByteLevel` with
    /// `use_regex`).
    Regex(fancy_regex::Regex),
    /// A literal string, isolated likewise.
    Literal(String),
}

/// GPT-2's pre-tokenization regex, which `ByteLevel` applies when `use_regex` is true.
const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// The byte-level alphabet: the character each byte is written as in the vocabulary
/// (printable Latin-1 bytes as themselves, the others shifted past U+0100, in byte order).
pub fn byte_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        out[b as usize] = if printable {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).unwrap_or('\0')
        };
    }
    out
}

/// The parts of a `tokenizer.json` the reader uses. The vocabulary and the merges, most of the
/// file, are read into their own types rather than a JSON tree, which would cost about ten
/// times the file (`docs/performance.md`, "Memory"); their strings are borrowed from the file's
/// bytes where they hold no escape, so that reading 128 000 tokens and 280 000 merges does not
/// allocate a string for each.
#[derive(serde::Deserialize)]
struct Doc<'a> {
    #[serde(borrow)]
    model: ModelDoc<'a>,
    #[serde(default)]
    normalizer: Value,
    #[serde(default)]
    pre_tokenizer: Value,
    #[serde(default)]
    added_tokens: Value,
}

/// `model` of a `tokenizer.json`.
#[derive(serde::Deserialize)]
struct ModelDoc<'a> {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    byte_fallback: Option<bool>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    ignore_merges: Option<bool>,
    #[serde(default, borrow)]
    vocab: VocabMap<'a>,
    #[serde(default, borrow)]
    merges: Vec<MergeDoc<'a>>,
}

/// A JSON string, borrowed from the input when it holds no escape.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Str<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// `model.vocab`: token → id, or `None` when it is not an object (a Unigram model's list),
/// which the model type's check refuses by name.
#[derive(Default)]
struct VocabMap<'a>(Option<Vec<(Cow<'a, str>, u64)>>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for VocabMap<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = VocabMap<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a vocabulary")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<VocabMap<'a>, A::Error> {
                // In file order; a key given twice keeps its last id, as a map would.
                let mut out = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some((k, v)) = m.next_entry::<Str<'a>, u64>()? {
                    out.push((k.0, v));
                }
                Ok(VocabMap(Some(out)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<VocabMap<'a>, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(VocabMap(None))
            }
            fn visit_unit<E>(self) -> Result<VocabMap<'a>, E> {
                Ok(VocabMap(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<VocabMap<'a>, E> {
                Ok(VocabMap(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<VocabMap<'a>, E> {
                Ok(VocabMap(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<VocabMap<'a>, E> {
                Ok(VocabMap(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<VocabMap<'a>, E> {
                Ok(VocabMap(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<VocabMap<'a>, E> {
                Ok(VocabMap(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A merge rule: `"A B"`, or `["A", "B"]` in newer files.
enum MergeDoc<'a> {
    Joined(Cow<'a, str>),
    Pair(Vec<Cow<'a, str>>),
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for MergeDoc<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{SeqAccess, Visitor};
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = MergeDoc<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a merge rule (\"A B\" or [\"A\", \"B\"])")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<MergeDoc<'a>, E> {
                Ok(MergeDoc::Joined(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<MergeDoc<'a>, E> {
                Ok(MergeDoc::Joined(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<MergeDoc<'a>, E> {
                Ok(MergeDoc::Joined(Cow::Owned(s)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<MergeDoc<'a>, A::Error> {
                let mut parts = Vec::with_capacity(2);
                while let Some(p) = s.next_element::<Str<'a>>()? {
                    parts.push(p.0);
                }
                Ok(MergeDoc::Pair(parts))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl ByteLevelBpe {
    /// Reads a parsed `tokenizer.json`; the error says what is not supported or malformed.
    pub fn from_json(doc: &Value) -> Result<ByteLevelBpe, String> {
        let doc = <Doc<'_> as serde::Deserialize>::deserialize(doc).map_err(|e| e.to_string())?;
        Self::from_doc(doc)
    }

    /// Reads the bytes of a `tokenizer.json` without building a JSON tree of it.
    pub fn from_slice(bytes: &[u8]) -> Result<ByteLevelBpe, String> {
        let doc: Doc<'_> = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        Self::from_doc(doc)
    }

    fn from_doc(doc: Doc<'_>) -> Result<ByteLevelBpe, String> {
        let model = &doc.model;
        let kind = model.kind.as_deref().unwrap_or("BPE");
        if kind != "BPE" {
            return Err(format!("model type {kind:?} is not BPE"));
        }
        if model.byte_fallback == Some(true) {
            return Err("a BPE model with byte_fallback is not byte-level".into());
        }
        for (key, v) in [
            (
                "continuing_subword_prefix",
                &model.continuing_subword_prefix,
            ),
            ("end_of_word_suffix", &model.end_of_word_suffix),
        ] {
            if v.as_deref().is_some_and(|s| !s.is_empty()) {
                return Err(format!("{key} is not supported"));
            }
        }
        check_normalizer(&doc.normalizer)?;
        let mut splits = Vec::new();
        let mut byte_level = false;
        pre_tokenizer(&doc.pre_tokenizer, &mut splits, &mut byte_level)?;
        if !byte_level {
            return Err("the pre-tokenizer has no ByteLevel step: not a byte-level BPE".into());
        }
        let vocab = model
            .vocab
            .0
            .as_ref()
            .ok_or("model.vocab is not an object")?;
        let chars = byte_chars();
        let mut unchar: FxHashMap<char, u8> = FxHashMap::default();
        for (b, c) in chars.iter().enumerate() {
            unchar.insert(*c, b as u8);
        }
        let to_bytes =
            |s: &str| -> Option<Vec<u8>> { s.chars().map(|c| unchar.get(&c).copied()).collect() };
        // A key given twice keeps its last id (as the map it is read as in JSON).
        let mut ids: FxHashMap<&str, u32> = FxHashMap::default();
        ids.reserve(vocab.len());
        for (tok, id) in vocab {
            let id = u32::try_from(*id)
                .ok()
                .ok_or_else(|| format!("vocabulary entry {tok:?} has no integer id"))?;
            ids.insert(tok, id);
        }
        let mut tokens = TokenTable::new();
        for (&tok, &id) in &ids {
            // An entry outside the byte alphabet is an added token's (`<｜begin▁of▁sentence｜>`):
            // only the added-token pass produces it.
            let Some(bytes) = to_bytes(tok) else { continue };
            // Distinct strings spell distinct bytes: a duplicate cannot happen.
            if tokens.push(&bytes, id) == Err(super::ranks::AddError::Full) {
                return Err("the vocabulary is too large".into());
            }
        }
        tokens.finish();
        let mut byte_ids = [0u32; 256];
        for (b, c) in chars.iter().enumerate() {
            byte_ids[b] = *ids
                .get(c.to_string().as_str())
                .ok_or_else(|| format!("byte 0x{b:02x} ({c}) has no token"))?;
        }
        let mut merges = FxHashMap::default();
        for (rank, m) in model.merges.iter().enumerate() {
            let (a, b) = match m {
                MergeDoc::Joined(s) => s
                    .split_once(' ')
                    .ok_or_else(|| format!("merge {rank} {s:?} is not \"A B\""))?,
                MergeDoc::Pair(p) => match p.as_slice() {
                    [a, b] => (a.as_ref(), b.as_ref()),
                    _ => return Err(format!("merge {rank} is not a pair")),
                },
            };
            let id = |t: &str| {
                ids.get(t).copied().ok_or_else(|| {
                    format!("merge {rank} names {t:?}, which is not in the vocabulary")
                })
            };
            let merged = format!("{a}{b}");
            let pair = (id(a)?, id(b)?);
            let rank = u32::try_from(rank).map_err(|_| "too many merges".to_string())?;
            // The first rule for a pair wins, as in `tokenizers`.
            merges.entry(pair).or_insert((rank, id(&merged)?));
        }
        let ignore_merges = model.ignore_merges == Some(true);
        let mut added = Vec::new();
        for t in doc.added_tokens.as_array().map_or(&[][..], Vec::as_slice) {
            let content = t
                .get("content")
                .and_then(Value::as_str)
                .ok_or("an added token has no content")?;
            let id = t
                .get("id")
                .and_then(Value::as_u64)
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| format!("added token {content:?} has no id"))?;
            for flag in ["lstrip", "rstrip", "single_word"] {
                if t.get(flag).and_then(Value::as_bool) == Some(true) {
                    return Err(format!(
                        "added token {content:?} has {flag}, which is not supported"
                    ));
                }
            }
            if !content.is_empty() {
                added.push((content.to_string(), id));
            }
        }
        merges.shrink_to_fit();
        Ok(ByteLevelBpe {
            byte_ids,
            merges,
            tokens,
            ignore_merges,
            splits,
            added,
        })
    }

    /// The added tokens: text and id.
    pub fn added(&self) -> &[(String, u32)] {
        &self.added
    }

    /// The id of each single byte.
    pub fn byte_id(&self, b: u8) -> u32 {
        self.byte_ids[b as usize]
    }

    /// Encodes text holding no added token: `emit(id, length in bytes)` for each token, in
    /// order. The pre-tokenizer's steps apply piece by piece, so no list of the text's pieces
    /// or tokens is built (a 10 MB transcript has millions).
    pub fn encode(&self, text: &str, emit: &mut dyn FnMut(u32, usize)) {
        let mut scratch = Scratch::default();
        self.split_from(text, 0, text.len(), 0, &mut scratch, emit);
    }

    /// Encodes `text[s..e]` from pre-tokenizer step `step` on.
    fn split_from(
        &self,
        text: &str,
        s: usize,
        e: usize,
        step: usize,
        scratch: &mut Scratch,
        emit: &mut dyn FnMut(u32, usize),
    ) {
        match self.splits.get(step) {
            None => self.encode_piece(&text.as_bytes()[s..e], scratch, emit),
            Some(split) => split.apply(&text[s..e], s, &mut |a, b| {
                self.split_from(text, a, b, step + 1, scratch, emit)
            }),
        }
    }

    /// Byte-pair merges over one pre-token: the lowest-ranked applicable merge first, the
    /// leftmost where several have that rank (as `tokenizers`' `Word::merge_all`).
    fn encode_piece(&self, bytes: &[u8], scratch: &mut Scratch, emit: &mut dyn FnMut(u32, usize)) {
        if bytes.is_empty() {
            return;
        }
        if self.ignore_merges
            && let Some(id) = self.tokens.rank(bytes)
        {
            emit(id, bytes.len());
            return;
        }
        // A doubly linked list of symbols; a merged-away symbol has length 0.
        let n = bytes.len();
        let Scratch {
            id,
            len,
            prev,
            next,
            queue,
        } = scratch;
        id.clear();
        id.extend(bytes.iter().map(|&b| self.byte_ids[b as usize]));
        len.clear();
        len.resize(n, 1);
        prev.clear();
        prev.extend((0..n).map(|i| i.wrapping_sub(1)));
        next.clear();
        next.extend(1..=n);
        queue.clear();
        for i in 0..n - 1 {
            if let Some(&(rank, new)) = self.merges.get(&(id[i], id[i + 1])) {
                queue.push(Reverse((rank, i, new)));
            }
        }
        while let Some(Reverse((rank, i, new))) = queue.pop() {
            let j = next[i];
            if len[i] == 0 || j >= n {
                continue;
            }
            // Skip a queued merge the symbols around it no longer make.
            if self.merges.get(&(id[i], id[j])) != Some(&(rank, new)) {
                continue;
            }
            id[i] = new;
            len[i] += len[j];
            len[j] = 0;
            next[i] = next[j];
            if next[i] < n {
                prev[next[i]] = i;
            }
            let p = prev[i];
            if p < n
                && let Some(&(r, m)) = self.merges.get(&(id[p], id[i]))
            {
                queue.push(Reverse((r, p, m)));
            }
            if next[i] < n
                && let Some(&(r, m)) = self.merges.get(&(id[i], id[next[i]]))
            {
                queue.push(Reverse((r, i, m)));
            }
        }
        let mut i = 0;
        while i < n {
            emit(id[i], len[i]);
            i = next[i];
        }
    }

    /// The number of bytes of ordinary token `id` (0 for an added token or an id the vocabulary
    /// does not have).
    pub fn token_len(&self, id: u32) -> usize {
        if self.added.iter().any(|&(_, a)| a == id) {
            return 0;
        }
        self.tokens.token(id).map_or(0, <[u8]>::len)
    }
}

impl Split {
    /// Hands on the pieces of `s` (at offset `base`), in order: every match and every stretch
    /// between.
    fn apply(&self, s: &str, base: usize, out: &mut dyn FnMut(usize, usize)) {
        let mut at = 0;
        let push = |a: usize, b: usize, out: &mut dyn FnMut(usize, usize)| {
            if b > a {
                out(base + a, base + b);
            }
        };
        match self {
            Split::Regex(re) => {
                let mut from = 0;
                while from <= s.len() {
                    let Ok(Some(m)) = re.find_from_pos(s, from) else {
                        break;
                    };
                    push(at, m.start(), out);
                    push(m.start(), m.end(), out);
                    at = m.end();
                    from = if m.end() > m.start() {
                        m.end()
                    } else {
                        // An empty match: step over one character.
                        m.end() + s[m.end()..].chars().next().map_or(1, char::len_utf8)
                    };
                }
            }
            Split::Literal(lit) if !lit.is_empty() => {
                for (start, _) in s.match_indices(lit.as_str()) {
                    push(at, start, out);
                    push(start, start + lit.len(), out);
                    at = start + lit.len();
                }
            }
            Split::Literal(_) => {}
        }
        push(at, s.len(), out);
    }
}

fn check_normalizer(n: &Value) -> Result<(), String> {
    match n {
        Value::Null => Ok(()),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("Sequence") => o
                .get("normalizers")
                .and_then(Value::as_array)
                .map_or(Ok(()), |list| list.iter().try_for_each(check_normalizer)),
            // A normalizer changes the text's bytes, and cuts are offsets into the exact bytes.
            Some(t) => Err(format!("normalizer {t} is not supported")),
            None => Err("a normalizer without a type".into()),
        },
        _ => Err("the normalizer is not an object".into()),
    }
}

fn pre_tokenizer(p: &Value, splits: &mut Vec<Split>, byte_level: &mut bool) -> Result<(), String> {
    let Value::Object(o) = p else {
        return match p {
            Value::Null => Ok(()),
            _ => Err("the pre_tokenizer is not an object".into()),
        };
    };
    match o.get("type").and_then(Value::as_str) {
        Some("Sequence") => {
            for step in o
                .get("pretokenizers")
                .and_then(Value::as_array)
                .ok_or("a Sequence pre-tokenizer without pretokenizers")?
            {
                pre_tokenizer(step, splits, byte_level)?;
            }
            Ok(())
        }
        Some("Split") => {
            let behavior = o.get("behavior").and_then(Value::as_str).unwrap_or("");
            if behavior != "Isolated" {
                return Err(format!(
                    "Split behavior {behavior:?} is not supported (only Isolated)"
                ));
            }
            if o.get("invert").and_then(Value::as_bool) == Some(true) {
                return Err("an inverted Split is not supported".into());
            }
            let pattern = o.get("pattern").ok_or("a Split without a pattern")?;
            if let Some(re) = pattern.get("Regex").and_then(Value::as_str) {
                let re =
                    fancy_regex::Regex::new(re).map_err(|e| format!("Split regex {re:?}: {e}"))?;
                splits.push(Split::Regex(re));
            } else if let Some(s) = pattern.get("String").and_then(Value::as_str) {
                splits.push(Split::Literal(s.to_string()));
            } else {
                return Err("a Split pattern is neither Regex nor String".into());
            }
            Ok(())
        }
        Some("ByteLevel") => {
            if o.get("add_prefix_space").and_then(Value::as_bool) == Some(true) {
                // It adds a space the transcript does not have.
                return Err("ByteLevel with add_prefix_space is not supported".into());
            }
            if o.get("use_regex").and_then(Value::as_bool) != Some(false) {
                let re = fancy_regex::Regex::new(GPT2_PATTERN).map_err(|e| e.to_string())?;
                splits.push(Split::Regex(re));
            }
            *byte_level = true;
            Ok(())
        }
        Some(t) => Err(format!("pre-tokenizer {t} is not supported")),
        None => Err("a pre-tokenizer without a type".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tiny(extra_merges: &[&str], pre: Value) -> Value {
        let chars = byte_chars();
        let mut vocab = serde_json::Map::new();
        for (b, c) in chars.iter().enumerate() {
            vocab.insert(c.to_string(), json!(b));
        }
        for (i, t) in ["he", "ll", "hell", "hello", "Ġw", "Ġwo"]
            .iter()
            .enumerate()
        {
            vocab.insert(t.to_string(), json!(256 + i));
        }
        let mut merges = vec!["h e", "l l", "he ll", "hell o", "Ġ w", "Ġw o"];
        merges.extend_from_slice(extra_merges);
        json!({
            "added_tokens": [{"id": 900, "content": "<|x|>", "single_word": false, "lstrip": false,
                              "rstrip": false, "normalized": false, "special": true}],
            "normalizer": {"type": "Sequence", "normalizers": []},
            "pre_tokenizer": pre,
            "model": {"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": false}
        })
    }

    fn encode(b: &ByteLevelBpe, s: &str) -> Vec<(u32, usize)> {
        let mut out = Vec::new();
        b.encode(s, &mut |id, n| out.push((id, n)));
        out
    }

    #[test]
    fn merges_apply_by_rank_and_pre_tokens_never_merge_across() {
        let doc = tiny(
            &[],
            json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}),
        );
        let b = ByteLevelBpe::from_json(&doc).unwrap();
        assert_eq!(encode(&b, "hello"), vec![(259, 5)]);
        // " wo" is one pre-token; "rld" stays bytes.
        assert_eq!(
            encode(&b, "hello world"),
            vec![
                (259, 5),
                (261, 3),
                (b'r' as u32, 1),
                (b'l' as u32, 1),
                (b'd' as u32, 1)
            ]
        );
        assert_eq!(b.added(), &[("<|x|>".to_string(), 900)]);
        assert_eq!(b.byte_id(b'a'), u32::from(b'a'));
        // A byte that is not printable is written as a shifted character (U+0100 + k).
        assert_eq!(byte_chars()[0], '\u{100}');
        assert_eq!(byte_chars()[b' ' as usize], 'Ġ');
    }

    #[test]
    fn ignore_merges_takes_a_whole_token_and_added_tokens_have_no_length() {
        let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true});
        let mut doc = tiny(&[], byte_level);
        // "llo" is in the vocabulary, but no merge makes it.
        doc["model"]["vocab"]["llo"] = json!(300);
        doc["model"]["vocab"]["<|x|>"] = json!(900);
        let b = ByteLevelBpe::from_json(&doc).unwrap();
        assert_eq!(encode(&b, "llo"), vec![(257, 2), (u32::from(b'o'), 1)]);
        doc["model"]["ignore_merges"] = json!(true);
        let b = ByteLevelBpe::from_json(&doc).unwrap();
        assert_eq!(encode(&b, "llo"), vec![(300, 3)]);
        assert_eq!(encode(&b, "llo hello"), vec![(300, 3), (32, 1), (259, 5)]);
        assert_eq!(
            (b.token_len(300), b.token_len(259), b.token_len(900)),
            (3, 5, 0)
        );
        assert_eq!(b.token_len(12345), 0);
    }

    #[test]
    fn isolated_splits_cut_before_the_merges() {
        let pre = json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": "l"}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]});
        let b = ByteLevelBpe::from_json(&tiny(&[], pre)).unwrap();
        // "l" is isolated, so "ll" never forms.
        let ids: Vec<u32> = encode(&b, "hello").iter().map(|t| t.0).collect();
        assert_eq!(ids, vec![256, 108, 108, 111]);
    }

    #[test]
    fn unsupported_files_are_refused_by_name() {
        let byte_level =
            json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false});
        let mut nfc = tiny(&[], byte_level.clone());
        nfc["normalizer"] = json!({"type": "NFC"});
        for (doc, why) in [
            (nfc, "normalizer NFC"),
            (
                tiny(&[], json!({"type": "Metaspace"})),
                "pre-tokenizer Metaspace",
            ),
            (tiny(&[], json!(null)), "no ByteLevel"),
            (tiny(&["x y"], byte_level.clone()), "\"xy\""),
            (
                tiny(&[], json!({"type": "ByteLevel", "add_prefix_space": true})),
                "add_prefix_space",
            ),
        ] {
            let e = ByteLevelBpe::from_json(&doc).err().expect(why);
            assert!(e.contains(why), "{e}");
        }
        let mut doc = tiny(&[], byte_level);
        doc["added_tokens"][0]["lstrip"] = json!(true);
        assert!(
            ByteLevelBpe::from_json(&doc)
                .err()
                .unwrap()
                .contains("lstrip")
        );
    }

    /// The reader against the `tokenizers` crate, on every transcript of the corpus (every
    /// turn of every case, each stretch of valid UTF-8), for every cached `tokenizer.json`
    /// vocabulary: the same ids, token for token.
    #[cfg(feature = "hf-tokenizers")]
    #[test]
    fn the_reader_gives_the_reference_ids_on_every_corpus_transcript() {
        use crate::harness::tokens::Tokenizer;
        use crate::harness::vocab;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
        let corpus = crate::harness::corpus::load(
            &[root.display().to_string()],
            &crate::harness::corpus::LoadOptions::default(),
        );
        assert!(corpus.cases.len() > 1000, "{} cases", corpus.cases.len());
        for v in vocab::VOCABULARIES
            .iter()
            .filter(|v| v.file.ends_with("tokenizer.json"))
        {
            let path = vocab::cache_dir().join(v.file);
            if vocab::cached(v.id).is_none() {
                continue;
            }
            // The file as it is: no declared renames.
            let ours = Tokenizer::load(&path).unwrap();
            let reference = tokenizers::Tokenizer::from_file(&path).unwrap();
            let (mut texts, mut tokens, mut wrong) = (0, 0, Vec::new());
            for c in &corpus.cases {
                for turn in &c.turns {
                    for chunk in turn.utf8_chunks() {
                        let s = chunk.valid();
                        if s.is_empty() {
                            continue;
                        }
                        let want = reference.encode(s, false).unwrap().get_ids().to_vec();
                        let got: Vec<u32> = ours
                            .tokenize(s.as_bytes(), &[])
                            .ids()
                            .iter()
                            .map(|i| i.unwrap())
                            .collect();
                        texts += 1;
                        tokens += want.len();
                        if got != want && wrong.len() < 5 {
                            wrong.push(format!("{}: {got:?} != {want:?}", c.id));
                        }
                    }
                }
            }
            eprintln!("{}: {texts} texts, {tokens} tokens compared", v.id);
            assert!(wrong.is_empty(), "{}: {wrong:#?}", v.id);
        }
    }
}
