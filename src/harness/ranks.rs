//! A vocabulary's ordinary tokens in one compact table, and tiktoken's byte-pair encoding over
//! it (`docs/performance.md`, "Memory").
//!
//! A vocabulary of 200 000 tokens held as a hash map of byte vectors (and a second map back,
//! as tiktoken-rs's `CoreBPE` keeps) costs 40 MB and more of memory: three heap allocations a
//! token. Here every token's bytes sit in one buffer, found through 32-bit offsets, and an
//! open-addressing index maps bytes to their entry: about 15 bytes a token in all.
//!
//! The encoding is tiktoken's: the ordinary text is cut by the pre-tokenizer regex, a piece
//! that is a token is that token, and any other piece starts as single bytes whose adjacent
//! pairs merge, the pair whose concatenation has the lowest rank first, the leftmost where
//! several have that rank, until no adjacent pair is a token. A heap of candidate pairs keeps
//! this O(n log n) in the piece's length.

use rustc_hash::FxHasher;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::Hasher;

/// No entry in an index slot.
const EMPTY: u32 = u32::MAX;

/// Ordinary tokens: bytes to rank (their id before any offset) and back.
pub struct TokenTable {
    /// Every token's bytes, one after another.
    bytes: Vec<u8>,
    /// Where entry `i`'s bytes start; entry `i` is `bytes[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    /// Each entry's rank.
    ranks: Vec<u32>,
    /// True while `ranks` is ascending (entries in rank order), so a rank is found by
    /// binary search.
    sorted: bool,
    /// Open addressing over the entries by their bytes: an entry index, or [`EMPTY`]; the
    /// length is a power of two at least twice the entries.
    index: Vec<u32>,
    /// The rank of each single byte, [`EMPTY`] for none.
    byte_ranks: Box<[u32; 256]>,
}

impl Default for TokenTable {
    fn default() -> TokenTable {
        TokenTable::new()
    }
}

/// Why a token cannot be added.
#[derive(Debug, PartialEq, Eq)]
pub enum AddError {
    /// The bytes are already a token.
    Duplicate,
    /// The table is full (its offsets are 32-bit).
    Full,
}

fn hash(b: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(b);
    h.finish()
}

impl TokenTable {
    /// An empty table.
    pub fn new() -> TokenTable {
        TokenTable {
            bytes: Vec::new(),
            starts: vec![0],
            ranks: Vec::new(),
            sorted: true,
            index: Vec::new(),
            byte_ranks: Box::new([EMPTY; 256]),
        }
    }

    /// How many tokens.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// True when the table holds no token.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    fn entry(&self, e: usize) -> &[u8] {
        &self.bytes[self.starts[e] as usize..self.starts[e + 1] as usize]
    }

    /// The slot of `b` in the index: where its entry is, or the empty slot it would take.
    fn slot(&self, b: &[u8]) -> usize {
        let mask = self.index.len().wrapping_sub(1);
        let mut s = hash(b) as usize & mask;
        loop {
            let e = self.index[s];
            if e == EMPTY || self.entry(e as usize) == b {
                return s;
            }
            s = (s + 1) & mask;
        }
    }

    /// Adds a token; the table grows as needed.
    pub fn push(&mut self, token: &[u8], rank: u32) -> Result<(), AddError> {
        if self.index.len() < 2 * (self.ranks.len() + 1) {
            self.reindex((2 * (self.ranks.len() + 1)).next_power_of_two().max(1024));
        }
        let s = self.slot(token);
        if self.index[s] != EMPTY {
            return Err(AddError::Duplicate);
        }
        let end = u32::try_from(self.bytes.len() + token.len()).map_err(|_| AddError::Full)?;
        let e = u32::try_from(self.ranks.len())
            .ok()
            .filter(|&e| e != EMPTY)
            .ok_or(AddError::Full)?;
        self.bytes.extend_from_slice(token);
        self.starts.push(end);
        self.sorted &= self.ranks.last().is_none_or(|&r| r < rank);
        self.ranks.push(rank);
        self.index[s] = e;
        if let [b] = token {
            self.byte_ranks[*b as usize] = rank;
        }
        Ok(())
    }

    fn reindex(&mut self, size: usize) {
        self.index = vec![EMPTY; size];
        for e in 0..self.ranks.len() {
            let s = self.slot(self.entry(e));
            self.index[s] = e as u32;
        }
    }

    /// Gives back the room growth left unused, and puts the entries in rank order when a file
    /// listed them otherwise (so that [`TokenTable::token`] finds a rank by binary search).
    pub fn finish(&mut self) {
        if !self.sorted {
            let mut order: Vec<u32> = (0..self.ranks.len() as u32).collect();
            order.sort_unstable_by_key(|&e| self.ranks[e as usize]);
            let mut bytes = Vec::with_capacity(self.bytes.len());
            let mut starts = Vec::with_capacity(self.starts.len());
            starts.push(0);
            let mut ranks = Vec::with_capacity(self.ranks.len());
            for &e in &order {
                bytes.extend_from_slice(self.entry(e as usize));
                starts.push(bytes.len() as u32);
                ranks.push(self.ranks[e as usize]);
            }
            (self.bytes, self.starts, self.ranks) = (bytes, starts, ranks);
            self.sorted = true;
            let size = self.index.len();
            self.reindex(size);
        }
        self.bytes.shrink_to_fit();
        self.starts.shrink_to_fit();
        self.ranks.shrink_to_fit();
    }

    /// The rank of a token's bytes.
    pub fn rank(&self, b: &[u8]) -> Option<u32> {
        if let [one] = b {
            let r = self.byte_ranks[*one as usize];
            return (r != EMPTY).then_some(r);
        }
        if self.index.is_empty() {
            return None;
        }
        match self.index[self.slot(b)] {
            EMPTY => None,
            e => Some(self.ranks[e as usize]),
        }
    }

    /// The bytes of the token of rank `rank`, after [`TokenTable::finish`].
    pub fn token(&self, rank: u32) -> Option<&[u8]> {
        if !self.sorted {
            return None;
        }
        let e = self.ranks.binary_search(&rank).ok()?;
        Some(self.entry(e))
    }

    /// The rank of each single byte (`None` for a byte that is no token).
    pub fn byte_rank(&self, b: u8) -> Option<u32> {
        let r = self.byte_ranks[b as usize];
        (r != EMPTY).then_some(r)
    }

    /// The first single byte that is no token, if any.
    pub fn missing_byte(&self) -> Option<u8> {
        (0..=255u8).find(|&b| self.byte_rank(b).is_none())
    }

    /// Every token (bytes, rank), in rank order after [`TokenTable::finish`].
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        (0..self.ranks.len()).map(|e| (self.entry(e), self.ranks[e]))
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
            + 4 * (self.starts.capacity() + self.ranks.capacity())
            + 4 * self.index.capacity()
            + 4 * 256
    }

    /// Byte-pair encodes one pre-token: `emit(rank, length)` for each token, in order. A byte
    /// that is no token (a table without every byte) is emitted alone with no rank.
    pub fn encode_piece(
        &self,
        piece: &[u8],
        scratch: &mut Scratch,
        emit: &mut impl FnMut(Option<u32>, usize),
    ) {
        let n = piece.len();
        if n == 0 {
            return;
        }
        if let Some(r) = self.rank(piece) {
            emit(Some(r), n);
            return;
        }
        // Symbols: `end[i]` is where the symbol starting at byte `i` ends (0 once merged into
        // the one before), `prev[i]` where the one before it starts.
        let Scratch { end, prev, heap } = scratch;
        end.clear();
        end.extend(1..=n);
        prev.clear();
        prev.extend((0..n).map(|i| i.wrapping_sub(1)));
        heap.clear();
        for i in 0..n - 1 {
            if let Some(r) = self.rank(&piece[i..i + 2]) {
                heap.push(Reverse((r, i)));
            }
        }
        while let Some(Reverse((r, i))) = heap.pop() {
            // A queued pair that merging around it has undone (or changed) is skipped: the pair
            // now starting at `i`, if any, has its own entry.
            let j = end[i];
            if j == 0 || j >= n {
                continue;
            }
            let k = end[j];
            if self.rank(&piece[i..k]) != Some(r) {
                continue;
            }
            end[i] = k;
            end[j] = 0;
            if k < n {
                prev[k] = i;
                if let Some(r) = self.rank(&piece[i..end[k]]) {
                    heap.push(Reverse((r, i)));
                }
            }
            let p = prev[i];
            if p < n
                && let Some(r) = self.rank(&piece[p..k])
            {
                heap.push(Reverse((r, p)));
            }
        }
        let mut i = 0;
        while i < n {
            let e = end[i];
            emit(self.rank(&piece[i..e]), e - i);
            i = e;
        }
    }
}

/// Buffers [`TokenTable::encode_piece`] reuses from piece to piece.
#[derive(Default)]
pub struct Scratch {
    end: Vec<usize>,
    prev: Vec<usize>,
    heap: BinaryHeap<Reverse<(u32, usize)>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(extra: &[(&[u8], u32)]) -> TokenTable {
        let mut t = TokenTable::new();
        for b in 0..=255u8 {
            t.push(&[b], u32::from(b)).unwrap();
        }
        for (tok, r) in extra {
            t.push(tok, *r).unwrap();
        }
        t.finish();
        t
    }

    fn encode(t: &TokenTable, s: &[u8]) -> Vec<(Option<u32>, usize)> {
        let mut out = Vec::new();
        t.encode_piece(s, &mut Scratch::default(), &mut |r, n| out.push((r, n)));
        out
    }

    #[test]
    fn the_lowest_rank_merges_first_and_the_leftmost_among_equals() {
        // A piece that is a token is that token.
        let t = table(&[(b"ab", 300), (b"bc", 301), (b"abc", 302)]);
        assert_eq!(encode(&t, b"abc"), vec![(Some(302), 3)]);
        assert_eq!(
            encode(&t, b"abcd"),
            vec![(Some(302), 3), (Some(u32::from(b'd')), 1)]
        );
        // "bc" before "ab": "xabc" → "x" "a" "bc", then "abc" by its bytes (as tiktoken
        // merges: by the concatenation's rank, whatever the split).
        let t = table(&[(b"bc", 300), (b"ab", 301), (b"abc", 302)]);
        assert_eq!(
            encode(&t, b"xabc"),
            vec![(Some(u32::from(b'x')), 1), (Some(302), 3)]
        );
        let t = table(&[(b"bc", 300), (b"ab", 301)]);
        assert_eq!(
            encode(&t, b"abc"),
            vec![(Some(u32::from(b'a')), 1), (Some(300), 2)]
        );
        // Equal ranks: "aa" leftmost first, so "aaa" is "aa" "a".
        let t = table(&[(b"aa", 300)]);
        assert_eq!(
            encode(&t, b"aaa"),
            vec![(Some(300), 2), (Some(u32::from(b'a')), 1)]
        );
        assert_eq!(encode(&t, b"aaaa"), vec![(Some(300), 2), (Some(300), 2)]);
    }

    #[test]
    fn lookups_duplicates_and_rank_order() {
        let mut t = TokenTable::new();
        t.push(b"zz", 9).unwrap();
        t.push(b"a", 5).unwrap();
        assert_eq!(t.push(b"zz", 6), Err(AddError::Duplicate));
        assert!(t.token(5).is_none(), "not in rank order before finish");
        t.finish();
        assert_eq!(t.token(9), Some(&b"zz"[..]));
        assert_eq!(t.token(5), Some(&b"a"[..]));
        assert_eq!(t.rank(b"zz"), Some(9));
        assert_eq!(t.rank(b"a"), Some(5));
        assert_eq!(t.rank(b"b"), None);
        assert_eq!(t.missing_byte(), Some(0));
        assert_eq!(t.iter().map(|(_, r)| r).collect::<Vec<_>>(), vec![5, 9]);
        // A byte that is no token goes out alone, without a rank.
        assert_eq!(encode(&t, b"ab"), vec![(Some(5), 1), (None, 1)]);
        // Many entries: the index grows and every one is still found.
        let mut big = TokenTable::new();
        for r in 0..50_000u32 {
            big.push(format!("t{r}").as_bytes(), r).unwrap();
        }
        big.finish();
        assert!((0..50_000u32).all(|r| big.rank(format!("t{r}").as_bytes()) == Some(r)));
        assert!(big.heap_bytes() < 50_000 * 32, "{}", big.heap_bytes());
    }

    #[test]
    fn a_long_piece_encodes_in_near_linear_time() {
        let t = table(&[(b"ab", 300), (b"abab", 301)]);
        let s = b"ab".repeat(500_000);
        let start = std::time::Instant::now();
        let got = encode(&t, &s);
        assert_eq!(got.len(), 250_000);
        assert!(got.iter().all(|&(r, n)| r == Some(301) && n == 4));
        assert!(start.elapsed().as_secs() < 5);
    }
}
