//! Format-agnostic lexers: incremental JSON, streaming XML, XTML special-token markup, SSE,
//! literal delimiters, and UTF-8 reassembly.
//!
//! Nothing here knows a tool-call format.

pub mod json;
pub mod markdown;
pub mod marker;
pub mod python;
pub mod sse;
pub mod token_value;
pub mod utf8;
pub mod xml;
pub mod xtml;

/// Appends a piece of streamed text to `buf`: `push_str`, with a piece of 1 to 8 bytes (the
/// deltas of a token stream, and the characters a cut chunk completes) copied as two
/// overlapping 4-byte words, or as its first, middle and last byte, instead of through a
/// `memcpy` call, which costs more than the copy on a few bytes and is paid once per piece.
/// Longer pieces, and a full buffer, take `push_str` out of line, so that what is inlined
/// into a token loop stays small.
#[inline(always)]
pub(crate) fn push_piece(buf: &mut String, s: &str) {
    // SAFETY: `push_bytes` appends exactly the bytes of `s`, a whole `&str`, so `buf` stays
    // UTF-8.
    push_bytes(unsafe { buf.as_mut_vec() }, s.as_bytes());
}

/// [`push_piece`] for bytes.
#[inline(always)]
pub(crate) fn push_bytes(v: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if !(1..=8).contains(&n) || v.capacity() - v.len() < n {
        push_other(v, s);
        return;
    }
    let src = s.as_ptr();
    // SAFETY: the spare capacity holds `n` bytes after `len`; every read and write lies
    // within `s[..n]` and `v[len..len + n]` (the two words overlap when `n` < 8, the three
    // bytes when `n` < 3, and either way they cover every byte).
    unsafe {
        let len = v.len();
        let dst = v.as_mut_ptr().add(len);
        if n >= 4 {
            let a = src.cast::<u32>().read_unaligned();
            let b = src.add(n - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - 4).cast::<u32>().write_unaligned(b);
        } else {
            *dst = *src;
            *dst.add(n / 2) = *src.add(n / 2);
            *dst.add(n - 1) = *src.add(n - 1);
        }
        v.set_len(len + n);
    }
}

/// [`push_piece`] for the lengths it does not copy itself.
#[inline(never)]
fn push_other(v: &mut Vec<u8>, s: &[u8]) {
    v.extend_from_slice(s);
}

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

/// Whether any byte of `w` is `b` (the classic zero-byte test on `w ^ b…b`, exact for
/// "is there one").
#[inline]
pub(crate) fn word_has_byte(w: u64, b: u8) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let x = w ^ (ONES * u64::from(b));
    x.wrapping_sub(ONES) & !x & (ONES << 7) != 0
}

/// Below this length a byte loop finds a byte faster than `memchr`, whose vector set-up costs
/// more than the search itself on the 4-byte pieces a stream is often cut into.
const SHORT: usize = 16;

/// Whether `b` occurs in `s`: a streaming delta of 4 to 8 bytes in one word test, other short
/// pieces by the slice's own search, where setting up memchr's vectorised search costs more
/// than it saves.
#[inline]
pub(crate) fn has_byte(s: &[u8], b: u8) -> bool {
    if (4..=8).contains(&s.len()) {
        word_has_byte(short_word(s), b)
    } else if s.len() < SHORT {
        s.contains(&b)
    } else {
        find_byte(b, s).is_some()
    }
}

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

#[cfg(test)]
mod word_tests {
    use super::*;

    #[test]
    fn word_has_byte_finds_every_position_and_nothing_else() {
        for n in 4..=8 {
            for b in [b'<', 0u8, 0x80, 0xff, b'a'] {
                let other = if b == b'a' { b'b' } else { b'a' };
                assert!(
                    !word_has_byte(short_word(&vec![other; n]), b),
                    "{b} in none of {n}"
                );
                for at in 0..n {
                    let mut v = vec![other; n];
                    v[at] = b;
                    assert!(word_has_byte(short_word(&v), b), "{b} at {at} of {n}");
                    // Neighbours one above/below the byte must not count.
                    v[at] = b.wrapping_add(1);
                    assert!(!word_has_byte(short_word(&v), b), "{b}+1 at {at} of {n}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_piece_appends_every_length() {
        let text = "0123456789abcdefghé→✓😀 end";
        for start in 0..text.len() {
            for end in start..=text.len() {
                let (Some(piece), Some(_)) = (text.get(start..end), text.get(..start)) else {
                    continue;
                };
                let mut buf = String::from("ab");
                push_piece(&mut buf, piece);
                assert_eq!(buf, format!("ab{piece}"));
                let mut empty = String::new();
                push_piece(&mut empty, piece);
                assert_eq!(empty, piece);
            }
        }
    }
}
