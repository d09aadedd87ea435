//! Chunkings: deterministic ways to cut a transcript into the pieces a parser is fed.
//!
//! A chunking is a sorted list of cut offsets (strictly inside the transcript). Every strategy
//! is a pure function of the transcript, the format's markers and the master seed, so any
//! failing replay reproduces from its strategy name, seed and cut list alone.
//!
//! Three strategies need more than the bytes: `tokens` and `bursts` cut at the token boundaries
//! of a [`Tokenizer`] (what a server sends), and `recorded` replays the deltas a real server was
//! seen to send (a `.deltas.json` sidecar); [`turn_chunkings`] makes those from a [`TurnSources`].

use super::corpus::Case;
use super::tokens::{Tokenized, Tokenizer};
pub use crate::backends::cuts::{
    CutClass, Cuts, Grouping, SplitMix64, TokenCuts, is_char_boundary,
};
use crate::formats::{Format, SpecialToken};
use crate::names::wire_names;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

/// A way to cut transcripts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
    /// One delta per token of the run's tokenizer (special tokens whole).
    Tokens,
    /// Seeded groupings of 1..=k consecutive tokens per delta (speculative decoding, MTP).
    Bursts,
    /// The deltas a real server sent, from the case's `.deltas.json` sidecar (if it has one).
    Recorded,
}

impl Strategy {
    /// The strategies a run replays when none are named: all of them (the token strategies cost
    /// well under the 2x the bundled corpus allows, see README).
    pub const DEFAULT: [Strategy; 9] = Strategy::ALL;

    /// True for the strategies whose every cut is a token boundary (what a server sends).
    pub fn token_aligned(self) -> bool {
        matches!(self, Strategy::Tokens | Strategy::Bursts)
    }
}

wire_names! {
    Strategy {
        Whole => "whole",
        Bytes => "bytes",
        Chars => "chars",
        TwoCut => "two_cut",
        Markers => "markers",
        Random => "random",
        Tokens => "tokens",
        Bursts => "bursts",
        Recorded => "recorded",
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
    /// How many seeded `bursts` groupings per case.
    pub bursts: usize,
    /// Most tokens in one burst.
    pub burst_max_tokens: usize,
}

impl Default for ChunkingParams {
    fn default() -> Self {
        ChunkingParams {
            seed: 0,
            random_groupings: 8,
            random_max_chunk: 16,
            two_cut_cap: 512,
            bursts: 4,
            burst_max_tokens: 8,
        }
    }
}

/// The salt of turn `t` of a case: the seeded strategies' streams differ per case and turn.
pub fn turn_salt(case_id: &str, turn: usize) -> u64 {
    stable_hash(case_id) ^ (turn as u64).wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// One turn and what the token and recorded strategies need of it besides its bytes.
pub struct TurnSources<'a> {
    /// The turn's bytes.
    pub data: &'a [u8],
    /// The run's tokenizer (`None`: the built-in default).
    pub tokenizer: Option<&'a Tokenizer>,
    /// The format's special tokens, kept whole.
    pub special: &'a [SpecialToken],
    /// The format, whose vocabulary cuts the turn when the run names no tokenizer (`None`:
    /// o200k_base).
    pub format: Option<&'static Format>,
    /// The recorded cuts of the turn, if it has a `.deltas.json` sidecar.
    pub recorded: Option<&'a [usize]>,
    tokens: OnceLock<Arc<Tokenized>>,
}

impl<'a> TurnSources<'a> {
    /// Sources for one turn; the turn is tokenized on first use only.
    pub fn new(
        data: &'a [u8],
        tokenizer: Option<&'a Tokenizer>,
        special: &'a [SpecialToken],
        recorded: Option<&'a [usize]>,
    ) -> Self {
        TurnSources {
            data,
            tokenizer,
            special,
            format: None,
            recorded,
            tokens: OnceLock::new(),
        }
    }

    /// The sources of every turn of `case` in `format` (its special tokens kept whole, its
    /// vocabulary used when `tokenizer` is `None`).
    pub fn of_case(
        case: &'a Case,
        format: &Format,
        tokenizer: Option<&'a Tokenizer>,
    ) -> Vec<TurnSources<'a>> {
        case.turns
            .iter()
            .enumerate()
            .map(|(t, data)| {
                TurnSources::new(
                    data,
                    tokenizer,
                    format.special_tokens,
                    case.recorded_cuts(t),
                )
                .with_format(format)
            })
            .collect()
    }

    /// The same sources, tokenized with `format`'s vocabulary when the run names no tokenizer.
    pub fn with_format(mut self, format: &Format) -> Self {
        self.format = crate::formats::by_id(format.id);
        self
    }

    /// The turn's tokens (computed once; the format's tokenizer is loaded on first use).
    pub fn tokens(&self) -> Arc<Tokenized> {
        let data = self.data;
        self.tokens
            .get_or_init(|| {
                let tokens = match self.tokenizer {
                    Some(t) => t.tokenize(data, self.special),
                    None => match self.format {
                        Some(f) => super::vocab::tokenizer_for(f).tokenize(data, self.special),
                        None => Tokenizer::default_shared().tokenize(data, self.special),
                    },
                };
                Arc::new(tokens)
            })
            .clone()
    }
}

/// The chunkings a strategy makes of one turn, including the token and recorded strategies.
pub fn turn_chunkings(
    strategy: Strategy,
    markers: &[String],
    params: &ChunkingParams,
    salt: u64,
    sources: &TurnSources,
) -> Vec<Cuts> {
    let data = sources.data;
    match strategy {
        Strategy::Tokens => {
            let tokens = sources.tokens();
            if tokens.boundaries().is_empty() {
                return vec![];
            }
            vec![Cuts::Tokens(TokenCuts {
                tokens,
                grouping: Grouping::EveryToken,
            })]
        }
        Strategy::Bursts => {
            let tokens = sources.tokens();
            if tokens.boundaries().is_empty() {
                return vec![];
            }
            (0..params.bursts)
                .map(|g| {
                    Cuts::Tokens(TokenCuts {
                        tokens: tokens.clone(),
                        grouping: Grouping::Bursts {
                            seed: params.seed
                                ^ salt
                                ^ (g as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
                            max_tokens: params.burst_max_tokens,
                        },
                    })
                })
                .collect()
        }
        // A recording whose every cut is a token boundary carries its ids, as a server's would.
        Strategy::Recorded => match sources.recorded {
            Some(cuts) => {
                vec![
                    TokenCuts::aligned(&sources.tokens(), cuts.to_vec())
                        .unwrap_or(Cuts::At(cuts.to_vec())),
                ]
            }
            None => vec![],
        },
        _ => chunkings(strategy, data, markers, params, salt),
    }
}

/// The chunkings a strategy makes of one transcript (none for `tokens`, `bursts` and
/// `recorded`, which need a turn's [`TurnSources`]: see [`turn_chunkings`]).
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
        Strategy::Tokens | Strategy::Bursts | Strategy::Recorded => vec![],
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

    fn kimi_like() -> Vec<SpecialToken> {
        vec![
            SpecialToken::new("<|tool_call_begin|>", 163597),
            SpecialToken {
                text: "<|im_end|>",
                id: None,
            },
        ]
    }

    fn sources<'a>(
        data: &'a [u8],
        special: &'a [SpecialToken],
        recorded: Option<&'a [usize]>,
    ) -> TurnSources<'a> {
        TurnSources::new(data, None, special, recorded)
    }

    #[test]
    fn tokens_cut_every_token_and_carry_ids() {
        let sp = kimi_like();
        let d = "Hi wörld<|tool_call_begin|>x<|im_end|>".as_bytes();
        let src = sources(d, &sp, None);
        let c = turn_chunkings(Strategy::Tokens, &[], &params(), 0, &src);
        assert_eq!(c.len(), 1);
        let one = sources(b"a", &sp, None);
        let cuts = c[0].to_vec(d);
        assert_eq!(cuts, src.tokens().boundaries());
        assert!(cuts.contains(&9) && cuts.contains(&28) && cuts.contains(&29));
        let ids = c[0].chunk_token_ids().unwrap();
        assert_eq!(ids.len(), c[0].pieces(d).count());
        let pieces: Vec<&[u8]> = c[0].pieces(d).collect();
        let at = pieces
            .iter()
            .position(|p| *p == b"<|tool_call_begin|>")
            .unwrap();
        assert_eq!(ids[at], &[Some(163597)]);
        assert_eq!(ids[ids.len() - 1], &[None], "<|im_end|> declares no id");
        assert_eq!(joined(&c[0], d), d);
        assert_eq!(c[0].class(d, &src.tokens(), &[]), CutClass::TokenAligned);
        assert!(Cuts::At(cuts).chunk_token_ids().is_none());
        // Nothing to cut: no chunking.
        assert!(turn_chunkings(Strategy::Tokens, &[], &params(), 0, &one).is_empty());
    }

    #[test]
    fn a_minimized_cut_list_keeps_its_token_ids_when_aligned() {
        let d = b"hello world again";
        let src = sources(d, &[], None);
        let t = src.tokens();
        let ok = TokenCuts::aligned(&t, vec![5]).unwrap();
        assert_eq!(ok.to_vec(d), vec![5]);
        assert_eq!(ok.chunk_token_ids().unwrap()[0], &[Some(24912)]);
        assert!(TokenCuts::aligned(&t, vec![4]).is_none());
    }

    #[test]
    fn recorded_replays_exactly_the_sidecar_cuts() {
        let rec = [3usize, 5];
        let src = sources(b"abcdefg", &[], Some(&rec));
        let c = turn_chunkings(Strategy::Recorded, &[], &params(), 0, &src);
        assert_eq!(c, vec![Cuts::At(vec![3, 5])]);
        let none = sources(b"abcdefg", &[], None);
        assert!(turn_chunkings(Strategy::Recorded, &[], &params(), 0, &none).is_empty());
        // The data-only entry point makes none of the context strategies.
        for s in [Strategy::Tokens, Strategy::Bursts, Strategy::Recorded] {
            assert!(chunkings(s, b"abcdefg", &[], &params(), 0).is_empty());
        }
    }

    #[test]
    fn cut_classes() {
        let sp = kimi_like();
        let d = "ab é<|im_end|>".as_bytes();
        let occ = marker_occurrences(
            d,
            &sp.iter().map(|t| t.text.to_string()).collect::<Vec<_>>(),
        );
        let t = sources(d, &sp, None).tokens();
        let class = |v: Vec<usize>| Cuts::At(v).class(d, &t, &occ);
        assert_eq!(class(vec![]), CutClass::TokenAligned);
        assert_eq!(class(t.boundaries().to_vec()), CutClass::TokenAligned);
        assert_eq!(
            class(vec![1]),
            CutClass::CharAligned,
            "inside the token \"ab\""
        );
        assert_eq!(
            class(vec![4]),
            CutClass::SplitsChar,
            "between é's two bytes"
        );
        assert_eq!(
            class(vec![4, 8]),
            CutClass::SplitsSpecialToken,
            "the token wins"
        );
        assert_eq!(class(vec![5]), CutClass::TokenAligned);
        assert_eq!(
            Cuts::EveryByte.class(d, &t, &occ),
            CutClass::SplitsSpecialToken
        );
        assert_eq!(Cuts::EveryByte.class(d, &t, &[]), CutClass::SplitsChar);
        assert_eq!(Cuts::EveryChar.class(d, &t, &[]), CutClass::CharAligned);
        assert!(CutClass::TokenAligned < CutClass::CharAligned);
        assert!(CutClass::SplitsChar < CutClass::SplitsSpecialToken);
        // An invalid byte is one character; a stray continuation byte too.
        assert!(is_char_boundary(b"a\xffb", 1) && is_char_boundary(b"a\xffb", 2));
        assert!(is_char_boundary(b"a\x80\x80", 2));
        assert!(!is_char_boundary("€".as_bytes(), 2));
        assert!(
            is_char_boundary(b"\xe2\x82", 1),
            "an incomplete character at the end"
        );
    }

    proptest::proptest! {
        #[test]
        fn char_boundaries_agree_with_every_char(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24)) {
            let chars = Cuts::EveryChar.to_vec(&bytes);
            for p in 1..bytes.len() {
                proptest::prop_assert_eq!(is_char_boundary(&bytes, p), chars.contains(&p), "{}", p);
            }
        }

        #[test]
        fn token_chunkings_are_whole_deterministic_and_nested(
            s in "(\\PC|<\\|tool_call_begin\\|>|<\\|im_end\\|>| |\n|[a-z]{1,6}){0,40}",
            seed in 0u64..1000,
            salt in 0u64..1000,
        ) {
            let sp = kimi_like();
            let d = s.as_bytes();
            let src = sources(d, &sp, None);
            let p = ChunkingParams { seed, ..params() };
            let tokens = turn_chunkings(Strategy::Tokens, &[], &p, salt, &src);
            let bursts = turn_chunkings(Strategy::Bursts, &[], &p, salt, &src);
            let all: Vec<usize> = tokens.first().map(|c| c.to_vec(d)).unwrap_or_default();
            let occ = marker_occurrences(d, &["<|tool_call_begin|>".into(), "<|im_end|>".into()]);
            let t = src.tokens();
            for c in tokens.iter().chain(&bursts) {
                let cuts = c.to_vec(d);
                proptest::prop_assert!(cuts.iter().all(|&k| s.is_char_boundary(k)));
                proptest::prop_assert!(!c.splits_any(d, &occ));
                proptest::prop_assert!(cuts.iter().all(|k| all.contains(k)), "bursts cut at token boundaries only");
                proptest::prop_assert_eq!(c.class(d, &t, &occ), CutClass::TokenAligned);
                proptest::prop_assert_eq!(joined(c, d), d);
                let ids = c.chunk_token_ids().unwrap();
                proptest::prop_assert_eq!(ids.len(), c.pieces(d).count());
                proptest::prop_assert_eq!(ids.concat(), t.ids().to_vec());
            }
            for c in &bursts {
                // 1..=8 token units per delta.
                let n = c.chunk_token_ids().unwrap().len();
                proptest::prop_assert!(n * 8 >= t.units() && n <= t.units());
            }
            let again = turn_chunkings(Strategy::Bursts, &[], &p, salt, &sources(d, &sp, None));
            proptest::prop_assert_eq!(&bursts, &again);
            proptest::prop_assert_eq!(bursts.len(), if all.is_empty() { 0 } else { 4 });
        }
    }

    #[test]
    fn bursts_depend_on_the_seed_and_merge_up_to_eight_tokens() {
        let d = "the quick brown fox jumps over the lazy dog ".repeat(20);
        let d = d.as_bytes();
        let src = sources(d, &[], None);
        let a = turn_chunkings(Strategy::Bursts, &[], &params(), 1, &src);
        let b = turn_chunkings(Strategy::Bursts, &[], &params(), 2, &src);
        assert_ne!(a, b);
        let sizes: Vec<usize> = a[0]
            .chunk_token_ids()
            .unwrap()
            .iter()
            .map(|c| c.len())
            .collect();
        assert!(sizes.iter().all(|&n| (1..=8).contains(&n)));
        assert!(sizes.iter().any(|&n| n > 1) && sizes.iter().any(|&n| n < 8));
    }
}
