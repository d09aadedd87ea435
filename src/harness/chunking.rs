//! Chunkings: deterministic ways to cut a transcript into the pieces a parser is fed.
//!
//! A chunking is a sorted list of cut offsets (strictly inside the transcript). Every strategy
//! is a pure function of the transcript, the format's markers and the master seed, so any
//! failing replay reproduces from its strategy name, seed and cut list alone.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A way to cut transcripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// No cut: the baseline every other chunking is compared to.
    Whole,
    /// A cut after every byte (cuts UTF-8 characters).
    Bytes,
    /// A cut after every character.
    Chars,
    /// Each single cut position, one chunking per position (sampled evenly beyond a cap).
    TwoCut,
    /// Every position inside and at both edges of every delimiter occurrence.
    Markers,
    /// Seeded groupings with chunk sizes drawn from 1..=k bytes.
    Random,
}

impl Strategy {
    /// Every strategy, in report order.
    pub const ALL: [Strategy; 6] = [
        Strategy::Whole,
        Strategy::Bytes,
        Strategy::Chars,
        Strategy::TwoCut,
        Strategy::Markers,
        Strategy::Random,
    ];

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Whole => "whole",
            Strategy::Bytes => "bytes",
            Strategy::Chars => "chars",
            Strategy::TwoCut => "two_cut",
            Strategy::Markers => "markers",
            Strategy::Random => "random",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Strategy::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown strategy {s:?} (known: {})",
                    Strategy::ALL.map(Strategy::as_str).join(", ")
                )
            })
    }
}

/// Knobs of the strategies that have any.
#[derive(Debug, Clone, Copy)]
pub struct ChunkingParams {
    /// The master seed.
    pub seed: u64,
    /// How many random groupings per case.
    pub random_groupings: usize,
    /// Largest random chunk size in bytes.
    pub random_max_chunk: usize,
    /// Most single-cut chunkings per transcript for `two_cut` (sampled evenly beyond it).
    pub two_cut_cap: usize,
}

impl Default for ChunkingParams {
    fn default() -> Self {
        ChunkingParams {
            seed: 0,
            random_groupings: 8,
            random_max_chunk: 16,
            two_cut_cap: 512,
        }
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
        }
    }

    /// The cut offsets as a list.
    pub fn to_vec(&self, data: &[u8]) -> Vec<usize> {
        self.positions(data).collect()
    }

    /// Whether a cut falls strictly inside one of `occurrences` of delimiters in `data`
    /// ((start, length) pairs, as [`marker_occurrences`] gives them): a delimiter split across
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

/// The chunkings a strategy makes of one transcript.
///
/// `salt` separates the random streams of different cases and turns (a hash of the case id).
pub fn chunkings(
    strategy: Strategy,
    data: &[u8],
    markers: &[String],
    params: &ChunkingParams,
    salt: u64,
) -> Vec<Cuts> {
    let n = data.len();
    match strategy {
        Strategy::Whole => vec![Cuts::At(Vec::new())],
        Strategy::Bytes if n > 1 => vec![Cuts::EveryByte],
        Strategy::Bytes => vec![],
        Strategy::Chars => {
            let every = Cuts::EveryChar;
            let any = every.positions(data).next().is_some();
            if any { vec![every] } else { vec![] }
        }
        Strategy::TwoCut => {
            if n < 2 {
                return vec![];
            }
            let positions = n - 1;
            let take = positions.min(params.two_cut_cap.max(1));
            (0..take)
                .map(|i| {
                    // Evenly spread over 1..n, always including both ends.
                    let p = if take == 1 {
                        1
                    } else {
                        1 + i * (positions - 1) / (take - 1)
                    };
                    Cuts::At(vec![p])
                })
                .collect()
        }
        Strategy::Markers => marker_chunkings(data, markers),
        Strategy::Random => (0..params.random_groupings)
            .map(|g| Cuts::Random {
                seed: params.seed ^ salt ^ (g as u64).wrapping_mul(0x9E37),
                max_chunk: params.random_max_chunk,
            })
            .filter(|c| c.positions(data).next().is_some())
            .collect(),
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

/// Every occurrence of every delimiter in `data`, as sorted, distinct (start, length) pairs.
pub fn marker_occurrences(data: &[u8], markers: &[String]) -> Vec<(usize, usize)> {
    let mut occurrences: Vec<(usize, usize)> = Vec::new();
    for m in markers
        .iter()
        .map(String::as_bytes)
        .filter(|m| !m.is_empty())
    {
        occurrences.extend(memchr::memmem::find_iter(data, m).map(|start| (start, m.len())));
    }
    occurrences.sort_unstable();
    occurrences.dedup();
    occurrences
}

/// For each offset k, one chunking that cuts every marker occurrence k bytes in, so every
/// position inside and at both edges of every delimiter is exercised in few replays.
fn marker_chunkings(data: &[u8], markers: &[String]) -> Vec<Cuts> {
    marker_chunkings_from(data, markers, LAZY_MARKER_OCCURRENCES)
}

fn marker_chunkings_from(data: &[u8], markers: &[String], lazy_from: usize) -> Vec<Cuts> {
    let occurrences = marker_occurrences(data, markers);
    if occurrences.is_empty() {
        return vec![];
    }
    let longest = occurrences.iter().map(|o| o.1).max().unwrap_or(0);
    let disjoint = occurrences.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0);
    if disjoint && occurrences.len() >= lazy_from {
        // The same chunkings, in the same order, as the lists below, without the lists.
        let occurrences: Arc<[(usize, usize)]> = occurrences.into();
        let mut out: Vec<(Cuts, usize, u64)> = Vec::new();
        for k in (0..=longest).map(Some).chain([None]) {
            let c = Cuts::Markers {
                occurrences: occurrences.clone(),
                k,
            };
            let (len, hash) = c
                .positions(data)
                .fold((0usize, 0xcbf2_9ce4_8422_2325u64), |(n, h), p| {
                    (n + 1, (h ^ p as u64).wrapping_mul(0x0100_0000_01b3))
                });
            let seen = out.iter().any(|(o, l, h)| {
                *l == len && *h == hash && o.positions(data).eq(c.positions(data))
            });
            if len > 0 && !seen {
                out.push((c, len, hash));
            }
        }
        return out.into_iter().map(|(c, _, _)| c).collect();
    }
    let mut out: Vec<Cuts> = Vec::new();
    for k in 0..=longest {
        let mut cuts: Vec<usize> = occurrences
            .iter()
            .filter(|(_, len)| k <= *len)
            .map(|(s, _)| s + k)
            .filter(|&c| c > 0 && c < data.len())
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        if !cuts.is_empty() && !out.iter().any(|c| *c == Cuts::At(cuts.clone())) {
            out.push(Cuts::At(cuts));
        }
    }
    // Each delimiter alone in its chunk: both edges cut at once.
    let mut both: Vec<usize> = occurrences
        .iter()
        .flat_map(|(s, l)| [*s, s + l])
        .filter(|&c| c > 0 && c < data.len())
        .collect();
    both.sort_unstable();
    both.dedup();
    if !both.is_empty() && !out.iter().any(|c| *c == Cuts::At(both.clone())) {
        out.push(Cuts::At(both));
    }
    out
}

/// From this many delimiter occurrences on, `markers` chunkings are computed while cutting
/// (a list of offsets per chunking would cost 8 bytes per delimiter each).
const LAZY_MARKER_OCCURRENCES: usize = 1 << 16;

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

/// A stable 64-bit hash (FNV-1a) of a string, for salts and shards that must not change
/// between Rust versions.
pub fn stable_hash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ChunkingParams {
        ChunkingParams::default()
    }

    fn joined(c: &Cuts, d: &[u8]) -> Vec<u8> {
        c.pieces(d).flatten().copied().collect()
    }

    #[test]
    fn every_strategy_reassembles_to_the_input() {
        let d = "héllo <|x|> wörld <|x|>".as_bytes();
        let m = vec!["<|x|>".to_string()];
        for s in Strategy::ALL {
            for c in chunkings(s, d, &m, &params(), 7) {
                assert_eq!(joined(&c, d), d, "{s}");
            }
        }
    }

    #[test]
    fn chars_never_split_a_character() {
        let d = "aé€😀".as_bytes();
        let c = chunkings(Strategy::Chars, d, &[], &params(), 0);
        assert_eq!(c, vec![Cuts::EveryChar]);
        assert_eq!(c[0].to_vec(d), vec![1, 3, 6]);
        // Invalid bytes, and an incomplete character at the end, count one byte each.
        assert_eq!(Cuts::EveryChar.to_vec(b"a\xffb\xe2\x82"), vec![1, 2, 3, 4]);
        assert!(chunkings(Strategy::Chars, "é".as_bytes(), &[], &params(), 0).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn implicit_chunkings_agree_with_their_lists(s in ".{0,40}", seed in 0u64..1000, k in 1usize..9) {
            let d = s.as_bytes();
            let chars: Vec<usize> = s.char_indices().map(|(i, _)| i).filter(|&i| i > 0).collect();
            proptest::prop_assert_eq!(Cuts::EveryChar.to_vec(d), chars.clone());
            let r = Cuts::Random { seed, max_chunk: k };
            let listed = Cuts::At(r.to_vec(d));
            proptest::prop_assert!(r.pieces(d).eq(listed.pieces(d)));
            proptest::prop_assert!(r.pieces(d).all(|p| p.len() <= k || d.is_empty()));
            let occ = marker_occurrences(d, &["é".to_string(), "ab".to_string()]);
            proptest::prop_assert_eq!(r.splits_any(d, &occ), listed.splits_any(d, &occ));
            proptest::prop_assert_eq!(
                Cuts::EveryChar.splits_any(d, &occ),
                Cuts::At(chars).splits_any(d, &occ)
            );
        }
    }

    #[test]
    fn two_cut_is_capped_and_keeps_both_ends() {
        let d = vec![b'a'; 10_000];
        let p = ChunkingParams {
            two_cut_cap: 5,
            ..params()
        };
        let c = chunkings(Strategy::TwoCut, &d, &[], &p, 0);
        assert_eq!(c.len(), 5);
        assert_eq!(c[0], Cuts::At(vec![1]));
        assert_eq!(c[4], Cuts::At(vec![9_999]));
    }

    #[test]
    fn a_cut_strictly_inside_a_delimiter_splits_it() {
        let occ = marker_occurrences(b"ab<|x|>cd<|x|>", &["<|x|>".to_string()]);
        assert_eq!(occ, vec![(2, 5), (9, 5)]);
        let d: &[u8] = b"ab<|x|>cd<|x|>";
        assert!(!Cuts::At(vec![]).splits_any(d, &occ));
        assert!(
            !Cuts::At(vec![1, 2, 7, 9, 14]).splits_any(d, &occ),
            "edges are not inside"
        );
        assert!(Cuts::At(vec![2, 3]).splits_any(d, &occ));
        assert!(Cuts::At(vec![13]).splits_any(d, &occ));
        assert!(Cuts::EveryByte.splits_any(d, &occ));
        assert!(!Cuts::EveryByte.splits_any(d, &[]));
        assert!(Cuts::EveryChar.splits_any(d, &occ));
        let r = Cuts::Random {
            seed: 7,
            max_chunk: 3,
        };
        let want = occ
            .iter()
            .any(|&(s, l)| r.to_vec(d).iter().any(|&c| s < c && c < s + l));
        assert_eq!(r.splits_any(d, &occ), want);
        assert!(!Cuts::At(vec![2, 7, 9]).splits_any(d, &occ));
    }

    #[test]
    fn lazy_marker_chunkings_equal_the_lists() {
        let markers: Vec<String> = ["<|a|>", "<|bb|>", "<|a"].map(String::from).to_vec();
        for d in [
            &b"<|a|>x<|bb|>yy<|a|><|bb|>"[..],
            b"z<|bb|><|a|>",
            b"<|a|>",
            b"none",
        ] {
            let lists = marker_chunkings_from(d, &markers[..2], usize::MAX);
            let lazy = marker_chunkings_from(d, &markers[..2], 0);
            assert!(lazy.iter().all(|c| matches!(c, Cuts::Markers { .. })));
            let v = |c: &[Cuts]| c.iter().map(|c| c.to_vec(d)).collect::<Vec<_>>();
            assert_eq!(v(&lists), v(&lazy), "{:?}", String::from_utf8_lossy(d));
            for (a, b) in lists.iter().zip(&lazy) {
                let occ = marker_occurrences(d, &markers[..2]);
                assert_eq!(a.splits_any(d, &occ), b.splits_any(d, &occ));
                assert_eq!(joined(b, d), d);
            }
        }
        // Overlapping delimiters (`<|a` inside `<|a|>`) keep the list form.
        let d = b"<|a|>x<|a|>";
        assert!(
            marker_chunkings_from(d, &markers, 0)
                .iter()
                .all(|c| matches!(c, Cuts::At(_)))
        );
    }

    #[test]
    fn markers_cut_every_offset_of_every_occurrence() {
        let d = b"ab<|x|>cd<|x|>";
        let c = chunkings(Strategy::Markers, d, &["<|x|>".into()], &params(), 0);
        assert!(c.contains(&Cuts::At(vec![2, 9])));
        assert!(c.contains(&Cuts::At(vec![4, 11])));
        assert!(c.contains(&Cuts::At(vec![2, 7, 9])));
    }

    #[test]
    fn random_is_deterministic_and_bounded() {
        let d = vec![b'a'; 300];
        let a = chunkings(Strategy::Random, &d, &[], &params(), 3);
        let b = chunkings(Strategy::Random, &d, &[], &params(), 3);
        assert_eq!(a, b);
        assert_eq!(a.len(), 8);
        for c in &a {
            assert!(c.pieces(&d).all(|p| (1..=16).contains(&p.len())));
        }
        assert_ne!(a, chunkings(Strategy::Random, &d, &[], &params(), 4));
    }
}
