//! How a replay cuts each turn into the pieces a parser is fed: the cut lists every backend
//! receives (implicit for the cut-everywhere forms, token-aligned ones with each chunk's ids),
//! and the class of a set of cuts. The harness decides which chunkings to replay.

use std::sync::Arc;

/// A token id as a chunk carries it: `None` for a special token whose id the format does not
/// declare (and the tokenizer does not know), or for a byte the tokenizer cannot name.
pub type TokenId = Option<u32>;

/// The vocabulary a tokenization's ids belong to, as an adapter needs it to map ids to text
/// (`specs/adapter.md` §2.2: a turn's `tokenizer`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VocabularyRef {
    /// The vocabulary's id (`qwen2`, `o200k_base`…) or the `--tokenizer` file's path.
    pub name: String,
    /// The vocabulary file (absolute path); `None` for one built into conform.
    pub file: Option<String>,
    /// Special tokens (text, id) the file does not carry or names otherwise: a tiktoken ranks
    /// file holds none, and a declaration may rename reserved ones.
    pub special: Vec<(String, u32)>,
}

/// A transcript cut into tokens, grouped into units (the smallest pieces a delta can hold).
///
/// Held for the whole replay of a case, so kept compact: 8 bytes a token (its id, and where
/// its unit ends), where a transcript of short tokens costs 2 or 3 bytes of tokens a byte.
/// Offsets are 32-bit: a turn over 4 GiB is not tokenized (see [`Tokenized::fits`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokenized {
    /// The vocabulary of the ids, when the tokenizer says.
    vocabulary: Option<Arc<VocabularyRef>>,
    /// The offset where each unit ends, ascending; the last is the transcript's length.
    ends: Vec<u32>,
    /// For each unit, the index in `ids` just past its last token; `None` while every unit
    /// is one token (unit `i` is token `i`), as for all but text that splits characters.
    id_ends: Option<Vec<u32>>,
    /// Every token's id, in order ([`NO_ID`] for none).
    ids: Vec<u32>,
}

/// A point of a [`Tokenized`] being built ([`Tokenized::mark`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    units: usize,
    tokens: usize,
    listed: bool,
}

/// How `Tokenized` stores a token without an id.
const NO_ID: u32 = u32::MAX;

impl Tokenized {
    /// Whether a turn of `len` bytes can be tokenized (its offsets fit 32 bits).
    pub fn fits(len: usize) -> bool {
        u32::try_from(len).is_ok()
    }

    /// Ends the current unit at `end` if anything is pending and `end` moves forward; tokens
    /// without text of their own join the next unit.
    pub(crate) fn close(&mut self, end: usize) {
        let Ok(end) = u32::try_from(end) else {
            return;
        };
        let done = self.id_end(self.ends.len());
        let pending = self.ids.len() > done;
        if pending && self.ends.last().is_none_or(|&e| e < end) {
            let tokens = self.ids.len();
            if self.id_ends.is_none() && tokens != self.ends.len() + 1 {
                // The first unit of several tokens: the implicit map becomes a list.
                self.id_ends = Some((1..=self.ends.len() as u32).collect());
            }
            self.ends.push(end);
            if let Some(v) = self.id_ends.as_mut() {
                v.push(tokens as u32);
            }
        }
    }

    /// Appends the next token's id (it joins the unit the next [`Tokenized::close`] ends).
    pub(crate) fn push_id(&mut self, id: TokenId) {
        self.ids.push(id.filter(|&i| i != NO_ID).unwrap_or(NO_ID));
    }

    /// Where the tokenization is now, to go back to with [`Tokenized::rollback`].
    pub(crate) fn mark(&self) -> Mark {
        Mark {
            units: self.ends.len(),
            tokens: self.ids.len(),
            listed: self.id_ends.is_some(),
        }
    }

    /// Forgets every token and unit added since `mark`.
    pub(crate) fn rollback(&mut self, mark: Mark) {
        self.ends.truncate(mark.units);
        self.ids.truncate(mark.tokens);
        if mark.listed {
            if let Some(v) = self.id_ends.as_mut() {
                v.truncate(mark.units);
            }
        } else {
            self.id_ends = None;
        }
    }

    /// Gives back the room growth left unused.
    pub(crate) fn shrink(&mut self) {
        self.ids.shrink_to_fit();
        self.ends.shrink_to_fit();
        if let Some(v) = self.id_ends.as_mut() {
            v.shrink_to_fit();
        }
    }

    /// The index in `ids` just past the tokens of the first `units` units.
    fn id_end(&self, units: usize) -> usize {
        match (&self.id_ends, units) {
            (_, 0) => 0,
            (Some(v), u) => v[u - 1] as usize,
            (None, u) => u,
        }
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        4 * (self.ids.capacity()
            + self.ends.capacity()
            + self.id_ends.as_ref().map_or(0, Vec::capacity))
    }

    /// Records the vocabulary the ids belong to.
    pub(crate) fn set_vocabulary(&mut self, v: Option<Arc<VocabularyRef>>) {
        self.vocabulary = v;
    }

    /// The vocabulary the ids belong to, when known.
    pub fn vocabulary(&self) -> Option<&VocabularyRef> {
        self.vocabulary.as_deref()
    }

    /// How many units (token groups that end on a character boundary).
    pub fn units(&self) -> usize {
        self.ends.len()
    }

    /// How many tokens.
    pub fn tokens(&self) -> usize {
        self.ids.len()
    }

    /// Every token's id, in order.
    pub fn ids(&self) -> Vec<TokenId> {
        self.id_range(0, self.ids.len())
    }

    fn id_range(&self, from: usize, to: usize) -> Vec<TokenId> {
        self.ids[from..to]
            .iter()
            .map(|&i| (i != NO_ID).then_some(i))
            .collect()
    }

    /// The offsets where a delta can end, strictly inside the transcript, ascending.
    pub fn boundaries(&self) -> Vec<usize> {
        self.boundary_iter().collect()
    }

    /// [`Tokenized::boundaries`], without a list.
    pub fn boundary_iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.inner_ends().iter().map(|&e| e as usize)
    }

    /// The `i`-th boundary.
    pub fn boundary(&self, i: usize) -> Option<usize> {
        self.inner_ends().get(i).map(|&e| e as usize)
    }

    /// How many boundaries.
    pub fn boundary_count(&self) -> usize {
        self.inner_ends().len()
    }

    fn inner_ends(&self) -> &[u32] {
        &self.ends[..self.ends.len().saturating_sub(1)]
    }

    /// The offset where unit `i` ends.
    #[cfg(test)]
    pub fn unit_end(&self, i: usize) -> usize {
        self.ends[i] as usize
    }

    /// True when a delta can end at `offset`.
    pub fn is_boundary(&self, offset: usize) -> bool {
        u32::try_from(offset).is_ok_and(|o| self.inner_ends().binary_search(&o).is_ok())
    }

    /// The token ids of each chunk that `cuts` (ascending offsets) make, or `None` when a cut is
    /// not a token boundary.
    pub fn chunk_ids(&self, cuts: &[usize]) -> Option<Vec<Vec<TokenId>>> {
        let mut out = Vec::with_capacity(cuts.len() + 1);
        let mut from = 0;
        for &c in cuts {
            let c = u32::try_from(c).ok()?;
            let u = self.inner_ends().binary_search(&c).ok()?;
            let to = self.id_end(u + 1);
            out.push(self.id_range(from, to));
            from = to;
        }
        out.push(self.id_range(from, self.ids.len()));
        Some(out)
    }
}

/// One chunking of one transcript.
///
/// The chunkings that cut everywhere are kept implicit and computed while the data is cut, so a
/// 10 MB transcript needs no list of millions of offsets per replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cuts {
    /// A cut after every byte.
    EveryByte,
    /// A cut at every character boundary (an invalid byte counts as one character).
    EveryChar,
    /// Chunks of seeded random sizes in `1..=max_chunk` bytes.
    Random {
        /// Seed of the size sequence.
        seed: u64,
        /// Largest chunk.
        max_chunk: usize,
    },
    /// Cuts at these sorted offsets.
    At(Vec<usize>),
    /// Every delimiter occurrence (sorted, non-overlapping (start, length) pairs) cut `k` bytes
    /// in, or at both edges when `k` is `None`: the `markers` chunkings of a transcript with
    /// millions of delimiters, computed while cutting instead of kept as offset lists.
    Markers {
        /// The occurrences, shared by every chunking of the transcript.
        occurrences: Arc<[(usize, usize)]>,
        /// How far into each occurrence (long enough) to cut.
        k: Option<usize>,
    },
    /// Cuts at token boundaries; each chunk knows the token ids it consists of
    /// ([`Cuts::chunk_token_ids`]).
    Tokens(TokenCuts),
}

/// A token-aligned chunking: the transcript's tokens and how they are grouped into deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCuts {
    /// The transcript's tokens, shared by every chunking of the turn.
    pub tokens: Arc<Tokenized>,
    /// How the tokens are grouped.
    pub grouping: Grouping,
}

/// How a token-aligned chunking groups tokens into deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grouping {
    /// One delta per token unit (a token, or the few that complete one character).
    EveryToken,
    /// Seeded deltas of `1..=max_tokens` token units each.
    Bursts {
        /// Seed of the size sequence.
        seed: u64,
        /// Most units in one delta.
        max_tokens: usize,
    },
    /// Cuts at these sorted offsets, every one a token boundary.
    At(Vec<usize>),
}

impl TokenCuts {
    /// A token-aligned chunking cutting at `cuts` (sorted offsets), or `None` when one of them
    /// is not a token boundary: how a minimized cut list keeps its token ids.
    pub fn aligned(tokens: &Arc<Tokenized>, cuts: Vec<usize>) -> Option<Cuts> {
        cuts.iter().all(|&c| tokens.is_boundary(c)).then(|| {
            Cuts::Tokens(TokenCuts {
                tokens: tokens.clone(),
                grouping: Grouping::At(cuts),
            })
        })
    }
}

impl Cuts {
    /// The cut offsets, in order, strictly between 0 and `data.len()` for the implicit forms.
    pub fn positions<'a>(&'a self, data: &'a [u8]) -> Box<dyn Iterator<Item = usize> + 'a> {
        let n = data.len();
        match self {
            Cuts::EveryByte => Box::new(1..n.max(1)),
            Cuts::EveryChar => {
                let mut i = 0;
                Box::new(std::iter::from_fn(move || {
                    i += char_len_at(data, i);
                    (i < n).then_some(i)
                }))
            }
            &Cuts::Random { seed, max_chunk } => {
                let mut rng = SplitMix64::new(seed);
                let k = max_chunk.max(1) as u64;
                let mut pos = 0usize;
                Box::new(std::iter::from_fn(move || {
                    pos += 1 + (rng.next_u64() % k) as usize;
                    (pos < n).then_some(pos)
                }))
            }
            Cuts::At(v) => Box::new(v.iter().copied()),
            Cuts::Markers { occurrences, k } => {
                let inside = move |c: &usize| *c > 0 && *c < n;
                let raw: Box<dyn Iterator<Item = usize> + 'a> = match *k {
                    Some(k) => Box::new(
                        occurrences
                            .iter()
                            .filter(move |(_, len)| k <= *len)
                            .map(move |(s, _)| s + k),
                    ),
                    None => Box::new(occurrences.iter().flat_map(|(s, l)| [*s, s + l])),
                };
                // Non-overlapping occurrences give non-decreasing offsets: dropping repeats
                // sorts and dedups them as the list form would.
                let mut last = None;
                Box::new(raw.filter(inside).filter(move |&c| {
                    let new = last != Some(c);
                    last = Some(c);
                    new
                }))
            }
            Cuts::Tokens(t) => match &t.grouping {
                Grouping::EveryToken => Box::new(t.tokens.boundary_iter()),
                &Grouping::Bursts { seed, max_tokens } => {
                    let mut rng = SplitMix64::new(seed);
                    let k = max_tokens.max(1) as u64;
                    let tokens = &t.tokens;
                    let mut unit = 0usize;
                    Box::new(std::iter::from_fn(move || {
                        unit = unit.saturating_add(1 + (rng.next_u64() % k) as usize);
                        tokens.boundary(unit - 1)
                    }))
                }
                Grouping::At(v) => Box::new(v.iter().copied()),
            },
        }
    }

    /// For a token-aligned chunking, the token ids of each chunk in order (one entry per piece
    /// [`Cuts::pieces`] yields); `None` for chunkings that are not token-aligned. This is what
    /// an external parser receives as each delta's `token_ids`.
    pub fn chunk_token_ids(&self) -> Option<Vec<Vec<TokenId>>> {
        match self {
            Cuts::Tokens(t) => {
                let cuts: Vec<usize> = self.positions(&[]).collect();
                t.tokens.chunk_ids(&cuts)
            }
            _ => None,
        }
    }

    /// For a token-aligned chunking, the vocabulary its ids belong to.
    pub fn vocabulary(&self) -> Option<&VocabularyRef> {
        match self {
            Cuts::Tokens(t) => t.tokens.vocabulary(),
            _ => None,
        }
    }

    /// The class of this chunking's cuts of `data` (see [`CutClass`]); `tokens` is the data's
    /// tokenization by the run's tokenizer and `special` the occurrences of the format's special
    /// tokens ([`marker_occurrences`](crate::harness::chunking::marker_occurrences)).
    pub fn class(&self, data: &[u8], tokens: &Tokenized, special: &[(usize, usize)]) -> CutClass {
        if self.splits_any(data, special) {
            return CutClass::SplitsSpecialToken;
        }
        let mut aligned = true;
        for c in self.positions(data) {
            if !is_char_boundary(data, c) {
                return CutClass::SplitsChar;
            }
            aligned = aligned && tokens.is_boundary(c);
        }
        if aligned {
            CutClass::TokenAligned
        } else {
            CutClass::CharAligned
        }
    }

    /// The cut offsets as a list.
    pub fn to_vec(&self, data: &[u8]) -> Vec<usize> {
        self.positions(data).collect()
    }

    /// Whether a cut falls strictly inside one of `occurrences` of delimiters in `data`
    /// ((start, length) pairs, as [`marker_occurrences`](crate::harness::chunking::marker_occurrences) gives them): a delimiter split across
    /// two chunks.
    pub fn splits_any(&self, data: &[u8], occurrences: &[(usize, usize)]) -> bool {
        match self {
            Cuts::EveryByte => occurrences.iter().any(|&(_, len)| len > 1),
            Cuts::At(v) => occurrences.iter().any(|&(start, len)| {
                let first_after = v.partition_point(|&c| c <= start);
                v.get(first_after).is_some_and(|&c| c < start + len)
            }),
            _ => {
                // One walk over the cuts and the sorted occurrences together.
                let mut occ = occurrences.iter().peekable();
                self.positions(data).any(|c| {
                    while occ.next_if(|&&(start, len)| start + len <= c).is_some() {}
                    occ.peek().is_some_and(|&&(start, _)| start < c)
                })
            }
        }
    }

    /// The pieces of `data` this chunking produces.
    pub fn pieces<'a>(&'a self, data: &'a [u8]) -> Box<dyn Iterator<Item = &'a [u8]> + 'a> {
        if let Cuts::EveryByte = self {
            return Box::new(data.chunks(1));
        }
        let mut cuts = self.positions(data);
        let mut prev = 0;
        let mut done = false;
        Box::new(std::iter::from_fn(move || {
            if done {
                return None;
            }
            for c in cuts.by_ref() {
                let c = c.min(data.len());
                if c > prev {
                    let piece = &data[prev..c];
                    prev = c;
                    return Some(piece);
                }
            }
            done = true;
            Some(&data[prev..])
        }))
    }
}

/// What a chunking's cuts are, from what a server sends to what none does: the class of a
/// failure is the least class among the chunkings that show it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum CutClass {
    /// Every cut is a token boundary of the tokenizer: a server can send exactly these deltas.
    TokenAligned,
    /// Every cut is between characters, some not at this tokenizer's token boundaries (another
    /// tokenizer's may be there).
    CharAligned,
    /// A cut falls inside a UTF-8 character (and none inside a special token): servers that
    /// detokenize incrementally never do this.
    SplitsChar,
    /// A cut falls inside a special token, which a server always delivers whole.
    SplitsSpecialToken,
}

impl CutClass {
    /// How reports say it of a failure that shows under such cuts at best.
    pub fn describe(self) -> &'static str {
        match self {
            CutClass::TokenAligned => "token-aligned",
            CutClass::CharAligned => "only off token boundaries",
            CutClass::SplitsChar => "only inside a UTF-8 character",
            CutClass::SplitsSpecialToken => "only inside a special token",
        }
    }

    /// The snake_case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            CutClass::TokenAligned => "token_aligned",
            CutClass::CharAligned => "char_aligned",
            CutClass::SplitsChar => "splits_char",
            CutClass::SplitsSpecialToken => "splits_special_token",
        }
    }
}

/// True when `offset` is not inside a UTF-8 character of `data` (an invalid byte counts as one
/// character, as in [`Cuts::EveryChar`]).
pub fn is_char_boundary(data: &[u8], offset: usize) -> bool {
    let continuation = |b: u8| (0x80..0xC0).contains(&b);
    if offset == 0 || offset >= data.len() || !continuation(data[offset]) {
        return true;
    }
    // The character holding `offset` starts at most 3 bytes before it, at a byte that is not a
    // continuation byte (which no earlier character can contain).
    match (1..=3.min(offset)).find(|&k| !continuation(data[offset - k])) {
        Some(k) => char_len_at(data, offset - k) <= k,
        None => true,
    }
}

/// Length of the character at `data[i]` (an invalid byte counts as one character).
fn char_len_at(data: &[u8], i: usize) -> usize {
    match std::str::from_utf8(&data[i..(i + 4).min(data.len())]) {
        Ok(s) => s.chars().next().map_or(1, char::len_utf8),
        Err(e) if e.valid_up_to() > 0 => std::str::from_utf8(&data[i..i + e.valid_up_to()])
            .ok()
            .and_then(|s| s.chars().next())
            .map_or(1, char::len_utf8),
        Err(_) => 1,
    }
}

/// SplitMix64: a tiny, well-known, stable generator; stability across versions matters more
/// here than quality, because cut lists must reproduce from a seed forever.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
