//! Reassembles UTF-8 from byte chunks cut anywhere, without copying whole chunks.
//!
//! The pieces produced are the same whatever the cuts: an invalid sequence is reported at the
//! same offset and with the same length as `std::str::from_utf8` reports it on the whole input.

/// What the decoder yields: valid text, or one invalid sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Utf8Piece<'a> {
    /// Valid text, borrowed from the chunk where possible.
    Text(&'a str),
    /// An invalid (or, at the end, incomplete) sequence starting at this byte offset.
    Invalid {
        /// Offset of the sequence's first byte in the whole stream.
        offset: u64,
    },
}

/// The size of [`Utf8Decoder::joined`]'s buffer: the held bytes and the chunk must fit below it.
pub const JOIN_BUF: usize = 16;

/// A push UTF-8 decoder that holds back at most three bytes of an incomplete character.
#[derive(Debug, Default, Clone)]
pub struct Utf8Decoder {
    pending: [u8; 4],
    pending_len: usize,
    /// Bytes fed so far.
    offset: u64,
}

impl Utf8Decoder {
    /// A decoder at stream offset 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Total bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The chunk itself as text when it is pure ASCII and nothing is held back: the common case
    /// of small streaming deltas, decided without the general machinery. `None` otherwise (then
    /// call [`feed`](Utf8Decoder::feed)).
    #[inline]
    pub fn ascii<'a>(&mut self, chunk: &'a [u8]) -> Option<&'a str> {
        if self.pending_len == 0 && is_ascii(chunk) {
            self.offset += chunk.len() as u64;
            // SAFETY: every byte is ASCII, and ASCII is valid UTF-8.
            Some(unsafe { std::str::from_utf8_unchecked(chunk) })
        } else {
            None
        }
    }

    /// The chunk itself as text when nothing is held back and it is short valid UTF-8 that
    /// ends on a character boundary (or ASCII of any length): [`ascii`](Utf8Decoder::ascii)
    /// for streams of non-ASCII text, whose short deltas would otherwise pay the general
    /// machinery and a `from_utf8` call each. `None` otherwise (then call
    /// [`feed`](Utf8Decoder::feed)).
    #[inline]
    pub fn whole<'a>(&mut self, chunk: &'a [u8]) -> Option<&'a str> {
        if self.pending_len == 0 && (is_ascii(chunk) || is_short_utf8(chunk)) {
            self.offset += chunk.len() as u64;
            // SAFETY: ASCII, or checked by `is_short_utf8`, is valid UTF-8.
            Some(unsafe { std::str::from_utf8_unchecked(chunk) })
        } else {
            None
        }
    }

    /// [`whole`](Utf8Decoder::whole) also for a short chunk that continues a held character
    /// or ends inside one (a stream cut a few bytes at a time cuts many): the held bytes and
    /// the chunk joined in `buf`, as one piece up to the last whole character, whose tail is
    /// held back. Where [`feed`](Utf8Decoder::feed) would hand over the held character and
    /// the rest as two pieces, through its general machinery, this is one. The text is the
    /// same; `None`, having changed nothing, for a longer chunk or an invalid sequence (then
    /// call [`feed`](Utf8Decoder::feed)).
    #[inline]
    pub fn joined<'a>(&mut self, chunk: &'a [u8], buf: &'a mut [u8; JOIN_BUF]) -> Option<&'a str> {
        let held = self.pending_len;
        let total = held + chunk.len();
        if total >= JOIN_BUF {
            return None;
        }
        let text: &'a [u8] = if held == 0 {
            chunk
        } else {
            buf[..4].copy_from_slice(&self.pending);
            copy_short(&mut buf[held..total], chunk);
            &buf[..total]
        };
        let v = short_utf8_prefix(text)?;
        let tail = &text[v..];
        copy_short(&mut self.pending[..tail.len()], tail);
        self.pending_len = tail.len();
        self.offset += chunk.len() as u64;
        // SAFETY: `short_utf8_prefix` validated `text[..v]`.
        Some(unsafe { std::str::from_utf8_unchecked(&text[..v]) })
    }

    /// Decodes `chunk`, handing each piece to `f` in order.
    pub fn feed(&mut self, chunk: &[u8], f: &mut impl FnMut(Utf8Piece<'_>)) {
        if let Some(s) = self.ascii(chunk) {
            if !s.is_empty() {
                f(Utf8Piece::Text(s));
            }
            return;
        }
        let mut pos = self.offset; // stream offset of rest[0]
        self.offset += chunk.len() as u64;
        let mut rest = chunk;
        if self.pending_len > 0 {
            let used = self.complete_held(rest, pos, f);
            rest = &rest[used..];
            pos += used as u64;
            if self.pending_len > 0 {
                return;
            }
        }
        loop {
            if is_ascii(rest) {
                if !rest.is_empty() {
                    // SAFETY: every byte is ASCII, and ASCII is valid UTF-8.
                    f(Utf8Piece::Text(unsafe {
                        std::str::from_utf8_unchecked(rest)
                    }));
                }
                return;
            }
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    f(Utf8Piece::Text(s));
                    return;
                }
                Err(e) => {
                    let v = e.valid_up_to();
                    if v > 0 {
                        // SAFETY: `from_utf8` just validated this prefix.
                        f(Utf8Piece::Text(unsafe {
                            std::str::from_utf8_unchecked(&rest[..v])
                        }));
                    }
                    match e.error_len() {
                        None => {
                            let tail = &rest[v..];
                            self.pending[..tail.len()].copy_from_slice(tail);
                            self.pending_len = tail.len();
                            return;
                        }
                        Some(n) => {
                            f(Utf8Piece::Invalid {
                                offset: pos + v as u64,
                            });
                            rest = &rest[v + n..];
                            pos += (v + n) as u64;
                        }
                    }
                }
            }
        }
    }

    /// Continues the held incomplete character with the first bytes of `rest` (at stream
    /// offset `pos`); returns how many it used. The character is emitted once complete, or
    /// reported invalid at the first byte that cannot continue it (that byte is not used);
    /// if `rest` ends first, everything joins the held bytes.
    ///
    /// The held bytes are a valid prefix (`from_utf8` ended on them, not at an error), so only
    /// the new bytes need checking, and a byte-by-byte check is cheaper than validating again.
    fn complete_held(&mut self, rest: &[u8], pos: u64, f: &mut impl FnMut(Utf8Piece<'_>)) -> usize {
        let held = self.pending_len;
        let lead = self.pending[0];
        let len = char_len(lead);
        let mut used = 0;
        for k in held..len {
            let Some(&b) = rest.get(used) else {
                self.pending_len = k;
                return used;
            };
            // Unicode Table 3-7: the second byte's range excludes overlong forms, surrogates
            // and code points past U+10FFFF; later bytes are any continuation byte.
            let (lo, hi) = match (k, lead) {
                (1, 0xE0) => (0xA0, 0xBF),
                (1, 0xED) => (0x80, 0x9F),
                (1, 0xF0) => (0x90, 0xBF),
                (1, 0xF4) => (0x80, 0x8F),
                _ => (0x80, 0xBF),
            };
            if !(lo..=hi).contains(&b) {
                self.pending_len = 0;
                f(Utf8Piece::Invalid {
                    offset: pos - held as u64,
                });
                return used;
            }
            self.pending[k] = b;
            used += 1;
        }
        self.pending_len = 0;
        // SAFETY: a valid prefix completed by continuation bytes in range is one character.
        f(Utf8Piece::Text(unsafe {
            std::str::from_utf8_unchecked(&self.pending[..len])
        }));
        used
    }

    /// Ends the stream: an incomplete trailing character is reported as invalid.
    pub fn finish(&mut self, f: &mut impl FnMut(Utf8Piece<'_>)) {
        if self.pending_len > 0 {
            f(Utf8Piece::Invalid {
                offset: self.offset - self.pending_len as u64,
            });
            self.pending_len = 0;
        }
    }
}

/// `<[u8]>::is_ascii`, with short inputs (streaming deltas) read as one word.
#[inline]
fn is_ascii(bytes: &[u8]) -> bool {
    if (4..8).contains(&bytes.len()) {
        super::short_word(bytes) & 0x8080_8080_8080_8080 == 0
    } else {
        bytes.is_ascii()
    }
}

/// Whether `bytes`, under 16 long, is valid UTF-8 ending on a character boundary (Unicode
/// Table 3-7, as `from_utf8` checks it); longer input is left to `from_utf8` (false).
#[inline(never)]
fn is_short_utf8(bytes: &[u8]) -> bool {
    if bytes.len() >= 16 {
        return false;
    }
    let mut i = 0;
    while let Some(&lead) = bytes.get(i) {
        if lead < 0x80 {
            i += 1;
            continue;
        }
        let Some((len, lo, hi)) = lead_byte(lead) else {
            return false;
        };
        let Some(seq) = bytes.get(i..i + len) else {
            return false;
        };
        if !char_tail_ok(seq, lo, hi) {
            return false;
        }
        i += len;
    }
    true
}

/// Copies `src` (under 16 bytes) onto `dst`, the same length, in at most three overlapping
/// loads and stores rather than a `memcpy` call.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    debug_assert!(n < 16 && dst.len() == n);
    if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..].copy_from_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..].copy_from_slice(&src[n - 4..]);
    } else if n > 0 {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

/// For `bytes` under 16 long: the length of its longest prefix that is valid UTF-8 ending on
/// a character boundary, when the rest is the valid start of one character (as `from_utf8`
/// reports an input cut inside a character: `error_len` `None`); `None` when it holds an
/// invalid sequence, or is 16 or longer.
#[inline(never)]
fn short_utf8_prefix(bytes: &[u8]) -> Option<usize> {
    if bytes.len() >= 16 {
        return None;
    }
    let mut i = 0;
    while let Some(&lead) = bytes.get(i) {
        if lead < 0x80 {
            i += 1;
            continue;
        }
        let (len, lo, hi) = lead_byte(lead)?;
        let Some(seq) = bytes.get(i..i + len) else {
            return cut_char(&bytes[i..], lo, hi).then_some(i);
        };
        if !char_tail_ok(seq, lo, hi) {
            return None;
        }
        i += len;
    }
    Some(i)
}

/// A non-ASCII lead byte's sequence length and the range its second byte must fall in
/// (Unicode's table of well-formed UTF-8, which rules out overlongs and surrogates); `None`
/// for a byte that cannot lead a character.
#[inline(always)]
fn lead_byte(lead: u8) -> Option<(usize, u8, u8)> {
    Some(match lead {
        0xC2..=0xDF => (2, 0x80, 0xBF),
        0xE0 => (3, 0xA0, 0xBF),
        0xE1..=0xEC | 0xEE..=0xEF => (3, 0x80, 0xBF),
        0xED => (3, 0x80, 0x9F),
        0xF0 => (4, 0x90, 0xBF),
        0xF1..=0xF3 => (4, 0x80, 0xBF),
        0xF4 => (4, 0x80, 0x8F),
        _ => return None,
    })
}

/// Whether the bytes after `seq`'s lead are right: the second in `lo..=hi`, any later one a
/// continuation byte.
#[inline(always)]
fn char_tail_ok(seq: &[u8], lo: u8, hi: u8) -> bool {
    (lo..=hi).contains(&seq[1]) && seq[2..].iter().all(|&b| (0x80..=0xBF).contains(&b))
}

/// Whether `seq`, shorter than its lead byte's character, is a valid start of it (second
/// byte in `lo..=hi`, any later one a continuation byte).
fn cut_char(seq: &[u8], lo: u8, hi: u8) -> bool {
    seq.get(1).is_none_or(|b| (lo..=hi).contains(b))
        && seq.get(2).is_none_or(|b| (0x80..=0xBF).contains(b))
}

fn char_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, PartialEq)]
    enum P {
        T(String),
        I(u64),
    }

    fn decode(chunks: &[&[u8]]) -> Vec<P> {
        decode_with(chunks, false)
    }

    /// [`decode`], offering each chunk to [`Utf8Decoder::joined`] first when `join` (as the
    /// XML driver does).
    fn decode_with(chunks: &[&[u8]], join: bool) -> Vec<P> {
        let mut d = Utf8Decoder::new();
        let mut out: Vec<P> = Vec::new();
        let mut f = |p: Utf8Piece<'_>| match p {
            Utf8Piece::Text(s) => {
                if let Some(P::T(t)) = out.last_mut() {
                    t.push_str(s)
                } else {
                    out.push(P::T(s.to_string()))
                }
            }
            Utf8Piece::Invalid { offset } => out.push(P::I(offset)),
        };
        for c in chunks {
            let mut buf = [0u8; JOIN_BUF];
            let joined = if join { d.joined(c, &mut buf) } else { None };
            match joined {
                Some("") => {}
                Some(s) => f(Utf8Piece::Text(s)),
                None => d.feed(c, &mut f),
            }
        }
        d.finish(&mut f);
        out
    }

    #[test]
    fn short_ascii_checks_see_a_high_byte_anywhere() {
        for n in 0..=17 {
            assert!(is_ascii(&vec![b'a'; n]));
            for at in 0..n {
                let mut v = vec![b'a'; n];
                v[at] = 0x80;
                assert!(!is_ascii(&v), "at {at} of {n}");
            }
        }
    }

    #[test]
    fn the_ascii_fast_path_only_takes_ascii_with_nothing_held() {
        let mut d = Utf8Decoder::new();
        assert_eq!(d.ascii(b"abc"), Some("abc"));
        assert_eq!(d.ascii("é".as_bytes()), None);
        d.feed(&"é".as_bytes()[..1], &mut |_| {});
        assert_eq!(d.ascii(b"x"), None, "a held byte must be completed first");
        assert_eq!(d.offset(), 4);
    }

    #[test]
    fn the_whole_chunk_path_takes_complete_utf8_with_nothing_held() {
        let mut d = Utf8Decoder::new();
        assert_eq!(d.whole(b"abc"), Some("abc"));
        assert_eq!(d.whole("é→".as_bytes()), Some("é→"));
        assert_eq!(d.whole(&"é".as_bytes()[..1]), None, "a cut character");
        assert_eq!(d.whole(b"a\xffb"), None);
        d.feed(&"é".as_bytes()[..1], &mut |_| {});
        assert_eq!(d.whole(b"x"), None, "a held byte must be completed first");
        assert_eq!(d.offset(), 9);
    }

    #[test]
    fn split_characters_are_reassembled() {
        let s = "aé€😀z".as_bytes();
        for cut in 0..s.len() {
            assert_eq!(decode(&[&s[..cut], &s[cut..]]), vec![P::T("aé€😀z".into())]);
        }
    }

    #[test]
    fn invalid_and_truncated_sequences_are_reported_at_their_offset() {
        assert_eq!(
            decode(&[b"a\xffb"]),
            vec![P::T("a".into()), P::I(1), P::T("b".into())]
        );
        assert_eq!(decode(&[b"ab\xe2\x82"]), vec![P::T("ab".into()), P::I(2)]);
    }

    #[test]
    fn joined_takes_a_held_character_and_the_rest_as_one_piece() {
        let s = "aé€😀z".as_bytes();
        let mut buf = [0u8; JOIN_BUF];
        let mut d = Utf8Decoder::new();
        assert_eq!(d.joined(&s[..2], &mut buf), Some("a"), "é cut: held back");
        assert_eq!(
            d.joined(&s[2..5], &mut buf),
            Some("é"),
            "é completed, € cut"
        );
        assert_eq!(d.offset(), 5);
        assert_eq!(
            d.joined(&s[5..8], &mut buf),
            Some("€"),
            "€ completed, 😀 cut"
        );
        assert_eq!(d.joined(&s[8..], &mut buf), Some("😀z"));
        assert_eq!(d.joined(b"a\xffb", &mut buf), None, "invalid: left to feed");
        assert_eq!(
            d.joined(b"\xe0\x80", &mut buf),
            None,
            "an overlong start is invalid, not held"
        );
        assert_eq!(d.joined(&[b'a'; 16], &mut buf), None, "too long");
        assert_eq!(d.offset(), s.len() as u64, "a refusal changes nothing");
    }

    proptest! {
        #[test]
        fn the_prefix_check_agrees_with_from_utf8(bytes in proptest::collection::vec(
            prop_oneof![any::<u8>(), 0x80u8..=0xC1, 0xE0u8..=0xF5], 0..16)) {
            let want = match std::str::from_utf8(&bytes) {
                Ok(_) => Some(bytes.len()),
                Err(e) if e.error_len().is_none() => Some(e.valid_up_to()),
                Err(_) => None,
            };
            prop_assert_eq!(short_utf8_prefix(&bytes), want);
        }

        #[test]
        fn joined_cuts_give_the_pieces_of_the_whole(
            bytes in proptest::collection::vec(proptest::sample::select(vec![
                0x41u8, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE1, 0xED,
                0xEF, 0xF0, 0xF3, 0xF4, 0xF5]), 0..40),
            n in 1usize..20) {
            let whole = decode(&[&bytes]);
            let chunks: Vec<&[u8]> = bytes.chunks(n).collect();
            prop_assert_eq!(decode_with(&chunks, true), whole);
        }

        #[test]
        fn the_short_check_agrees_with_from_utf8(bytes in proptest::collection::vec(
            prop_oneof![any::<u8>(), 0x80u8..=0xC1, 0xE0u8..=0xF5], 0..16)) {
            prop_assert_eq!(is_short_utf8(&bytes), std::str::from_utf8(&bytes).is_ok());
        }

        #[test]
        fn the_short_check_takes_any_short_text(s in "\\PC{0,5}") {
            prop_assert_eq!(is_short_utf8(s.as_bytes()), s.len() < 16);
        }

        #[test]
        fn any_cuts_give_the_pieces_of_the_whole(bytes in proptest::collection::vec(any::<u8>(), 0..64),
                                                 cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
            let whole = decode(&[&bytes]);
            let mut cs: Vec<usize> = cuts.iter().map(|c| if bytes.is_empty() { 0 } else { c % bytes.len() }).collect();
            cs.sort();
            let mut chunks = Vec::new();
            let mut prev = 0;
            for c in cs { chunks.push(&bytes[prev..c]); prev = c; }
            chunks.push(&bytes[prev..]);
            prop_assert_eq!(decode(&chunks), whole);
        }

        #[test]
        fn boundary_bytes_in_any_cuts_give_the_pieces_of_the_whole(
            bytes in proptest::collection::vec(proptest::sample::select(vec![
                0x41u8, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE1, 0xED,
                0xEF, 0xF0, 0xF3, 0xF4, 0xF5]), 0..24),
            cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
            let whole = decode(&[&bytes]);
            let mut cs: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            cs.sort();
            let mut chunks = Vec::new();
            let mut prev = 0;
            for c in cs { chunks.push(&bytes[prev..c]); prev = c; }
            chunks.push(&bytes[prev..]);
            prop_assert_eq!(decode(&chunks), whole.clone());
            let singles: Vec<&[u8]> = bytes.chunks(1).collect();
            prop_assert_eq!(decode(&singles), whole);
        }
    }
}
