//! Format-agnostic lexers: incremental JSON, streaming XML, SSE, literal delimiters, and UTF-8
//! reassembly.
//!
//! Nothing here knows a tool-call format.

pub mod json;
pub mod markdown;
pub mod marker;
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
