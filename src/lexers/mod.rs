//! Format-agnostic lexers: incremental JSON, streaming XML, SSE, literal delimiters, and UTF-8
//! reassembly.
//!
//! Nothing here knows a tool-call format.

pub mod json;
pub mod markdown;
pub mod marker;
pub mod python;
pub mod sse;
pub mod utf8;
pub mod xml;

/// A piece of 4 to 8 bytes as one little-endian word made of two overlapping 4-byte halves.
/// "Does any byte match?" tests on streaming deltas then cost one word test, not a byte loop
/// (the overlap repeats bytes, which such tests do not mind).
#[inline]
pub(crate) fn short_word(bytes: &[u8]) -> u64 {
    debug_assert!((4..=8).contains(&bytes.len()));
    let half = |at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&bytes[at..at + 4]);
        u64::from(u32::from_le_bytes(w))
    };
    half(0) | half(bytes.len() - 4) << 32
}

/// Below this length a byte loop finds a byte faster than `memchr`, whose vector set-up costs
/// more than the search itself on the 4-byte pieces a stream is often cut into.
const SHORT: usize = 16;

/// The first `a` in `s` (`memchr` for long inputs, a loop for short ones).
#[inline]
pub(crate) fn find_byte(a: u8, s: &[u8]) -> Option<usize> {
    if s.len() < SHORT {
        s.iter().position(|&b| b == a)
    } else {
        memchr::memchr(a, s)
    }
}

/// The first `a` or `b` in `s`, like [`find_byte`].
#[inline]
pub(crate) fn find_byte2(a: u8, b: u8, s: &[u8]) -> Option<usize> {
    if s.len() < SHORT {
        s.iter().position(|&x| x == a || x == b)
    } else {
        memchr::memchr2(a, b, s)
    }
}

/// The first `a`, `b` or `c` in `s`, like [`find_byte`].
#[inline]
pub(crate) fn find_byte3(a: u8, b: u8, c: u8, s: &[u8]) -> Option<usize> {
    if s.len() < SHORT {
        s.iter().position(|&x| x == a || x == b || x == c)
    } else {
        memchr::memchr3(a, b, c, s)
    }
}

/// A small set of bytes searched for in every piece (the bytes that may start a delimiter),
/// with the cheapest search for the piece's length.
#[derive(Debug, Clone)]
pub(crate) struct ByteSet {
    table: [bool; 256],
    /// The members, when at most three (searched with `memchr`); empty otherwise.
    few: Vec<u8>,
}

impl ByteSet {
    /// The set of these bytes.
    pub(crate) fn new(bytes: impl IntoIterator<Item = u8>) -> ByteSet {
        let mut table = [false; 256];
        let mut members = Vec::new();
        for b in bytes {
            if !table[b as usize] {
                table[b as usize] = true;
                members.push(b);
            }
        }
        if members.len() > 3 {
            members.clear();
        }
        ByteSet {
            table,
            few: members,
        }
    }

    /// Whether `b` is a member.
    #[inline]
    pub(crate) fn contains(&self, b: u8) -> bool {
        self.table[b as usize]
    }

    /// The offset of the first member in `s`.
    #[inline]
    pub(crate) fn find(&self, s: &[u8]) -> Option<usize> {
        if s.len() < SHORT {
            return s.iter().position(|&b| self.contains(b));
        }
        match *self.few {
            [a] => memchr::memchr(a, s),
            [a, b] => memchr::memchr2(a, b, s),
            [a, b, c] => memchr::memchr3(a, b, c, s),
            _ => s.iter().position(|&b| self.contains(b)),
        }
    }
}
