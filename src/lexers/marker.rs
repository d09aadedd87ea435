//! A streaming scanner for literal delimiters (`<tool_call>`, `[TOOL_CALLS]`, `<｜tool▁sep｜>`…).
//!
//! The input arrives in pieces cut anywhere; the scanner splits it into text and delimiters and
//! gives the same tokens (text merged) whatever the cuts. Only a possible delimiter prefix at the
//! end of a piece is held back, and only while it can still become a delimiter, so held memory
//! is bounded by the longest delimiter. Each byte is examined a bounded number of times (at most
//! once per delimiter window it falls in), never once per feed: the cost is linear in the input.
//!
//! With [`MarkerScanner::set_json_strings`] on, the scanner follows JSON string syntax (`"` and
//! `\` escapes) and a delimiter inside a JSON string is text: a file write whose content holds
//! `</tool_call>` does not end the call. Off (the default), every occurrence is a delimiter,
//! which is what raw-text users (parameter values, prose) need.
//!
//! Where several delimiters match at one position the longest wins; a shorter one is reported
//! only once no longer one can still match.

use super::ByteSet;
use std::borrow::Cow;

/// One piece of the scanned input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token<'a> {
    /// Text that is not a delimiter: borrowed from the input, or owned when it had been held
    /// back from an earlier piece.
    Text(Cow<'a, str>),
    /// The delimiter with this index in the scanner's list.
    Marker(usize),
}

/// How a window starting at a delimiter's first byte compares with the delimiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Match {
    /// This delimiter (index, byte length) matches, and no longer one can.
    Full(usize, usize),
    /// A delimiter may still match once more input arrives.
    NeedMore,
    /// No delimiter starts here.
    No,
}

/// What a window of bytes starting at a possible delimiter is, for formats that match their
/// special tokens themselves (kimi_k2, harmony): see [`classify_window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window<M> {
    /// The delimiter `M` (byte length) starts the window.
    Marker(M, usize),
    /// The window is a proper prefix of a delimiter: more input decides.
    NeedMore,
    /// No delimiter starts here.
    NotMarker,
}

impl<M> Window<M> {
    /// The same window with the delimiter mapped (an index to a format's own kind).
    #[inline]
    pub fn map<N>(self, f: impl FnOnce(M) -> N) -> Window<N> {
        match self {
            Window::Marker(m, len) => Window::Marker(f(m), len),
            Window::NeedMore => Window::NeedMore,
            Window::NotMarker => Window::NotMarker,
        }
    }
}

/// Classifies `s` against `markers`, none a prefix of another: the index and length of the one
/// that starts `s`, [`Window::NeedMore`] when `s` is a proper prefix of one, or neither.
#[inline]
pub fn classify_window(s: &[u8], markers: &[&str]) -> Window<usize> {
    let mut need_more = false;
    for (i, m) in markers.iter().enumerate() {
        let m = m.as_bytes();
        if s.len() >= m.len() {
            if &s[..m.len()] == m {
                return Window::Marker(i, m.len());
            }
        } else if m.starts_with(s) {
            need_more = true;
        }
    }
    if need_more {
        Window::NeedMore
    } else {
        Window::NotMarker
    }
}

/// Splits a stream of text into text and literal delimiters, across piece boundaries.
#[derive(Debug, Clone)]
pub struct MarkerScanner {
    markers: Vec<Box<str>>,
    /// Bytes that start some delimiter.
    first: ByteSet,
    /// The same and `"`, for JSON mode outside a string.
    first_or_quote: ByteSet,
    max_len: usize,
    /// Received bytes not yet tokenised: a possible delimiter prefix (whole characters).
    pending: String,
    /// A window of `pending` and the next input bytes, reused to avoid allocating.
    scratch: Vec<u8>,
    json: bool,
    in_str: bool,
    esc: bool,
    eof: bool,
}

impl MarkerScanner {
    /// A scanner for these delimiters (non-empty strings), JSON-string awareness off.
    ///
    /// Panics on an empty list or an empty delimiter: that is a programming error of the
    /// caller, never a property of the input.
    pub fn new(markers: &[&str]) -> MarkerScanner {
        assert!(
            !markers.is_empty() && markers.iter().all(|m| !m.is_empty()),
            "a marker scanner needs non-empty delimiters"
        );
        let firsts = || markers.iter().map(|m| m.as_bytes()[0]);
        MarkerScanner {
            markers: markers.iter().map(|m| Box::from(*m)).collect(),
            first: ByteSet::new(firsts()),
            first_or_quote: ByteSet::new(firsts().chain([b'"'])),
            max_len: markers.iter().map(|m| m.len()).max().unwrap_or(1),
            pending: String::new(),
            scratch: Vec::new(),
            json: false,
            in_str: false,
            esc: false,
            eof: false,
        }
    }

    /// The same scanner with JSON-string awareness set (see [`set_json_strings`](Self::set_json_strings)).
    #[cfg(test)]
    pub fn with_json_strings(mut self, on: bool) -> MarkerScanner {
        self.set_json_strings(on);
        self
    }

    /// Switches JSON-string awareness: on, a delimiter inside a JSON string (from an unescaped
    /// `"` to the next) is text. Switching starts outside a string. Delimiters used in this mode
    /// must not contain `"` or `\`, which would change the string state inside them.
    pub fn set_json_strings(&mut self, on: bool) {
        debug_assert!(
            !on || self.markers.iter().all(|m| !m.contains(['"', '\\'])),
            "JSON-aware delimiters cannot contain quotes or backslashes"
        );
        self.json = on;
        self.in_str = false;
        self.esc = false;
    }

    /// The delimiter with index `i`.
    pub fn marker(&self, i: usize) -> &str {
        &self.markers[i]
    }

    /// The length in bytes of the longest delimiter: the most ever held back.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The bytes held back (a possible delimiter prefix, or input left after a shorter
    /// delimiter matched inside it).
    pub fn held(&self) -> &str {
        &self.pending
    }

    /// Takes the held-back bytes out, for a caller that reads the input itself after a
    /// delimiter (they come before the next input).
    pub fn take_held(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }

    /// Hands `s` back to be tokenised before what is held and the next input: for a caller
    /// that read past a delimiter and found it must be scanned after all (the tagged family's
    /// spaced namespace token). The caller keeps `s` short (a delimiter or so): what is held is
    /// scanned from its front.
    pub fn unread(&mut self, s: &str) {
        self.pending.insert_str(0, s);
    }

    /// Forgets held bytes and string state; ready for a new stream.
    pub fn reset(&mut self) {
        self.pending.clear();
        self.in_str = false;
        self.esc = false;
        self.eof = false;
    }

    /// The next token of `input`, advancing it past what the token covers; `None` when
    /// `input` is used up (a trailing delimiter prefix is then held back).
    ///
    /// The caller may change the mode between calls, or take over `input` itself.
    pub fn next<'a>(&mut self, input: &mut &'a str) -> Option<Token<'a>> {
        if !self.pending.is_empty() {
            return self.next_held(input);
        }
        let s = *input;
        let bytes = s.as_bytes();
        let mut i = 0;
        loop {
            let c = i + self.find(&bytes[i..]);
            if c == s.len() {
                *input = "";
                return (c > 0).then_some(Token::Text(Cow::Borrowed(s)));
            }
            let w_end = (c + self.max_len).min(s.len());
            match self.classify(&bytes[c..w_end]) {
                Match::Full(idx, len) => {
                    if c > 0 {
                        *input = &s[c..];
                        return Some(Token::Text(Cow::Borrowed(&s[..c])));
                    }
                    *input = &s[len..];
                    return Some(Token::Marker(idx));
                }
                Match::NeedMore => {
                    self.pending.push_str(&s[c..]);
                    *input = "";
                    return (c > 0).then_some(Token::Text(Cow::Borrowed(&s[..c])));
                }
                Match::No => i = c + char_len(bytes[c]),
            }
        }
    }

    /// Ends the stream: the next token of what is held back, with no more input to come;
    /// `None` once everything is out (the scanner is then reset for a new stream).
    pub fn finish(&mut self) -> Option<Token<'static>> {
        self.eof = true;
        let mut empty = "";
        match self.next_held(&mut empty) {
            Some(Token::Text(t)) => Some(Token::Text(Cow::Owned(t.into_owned()))),
            Some(Token::Marker(i)) => Some(Token::Marker(i)),
            None => {
                self.reset();
                None
            }
        }
    }

    /// Feeds all of `input` with the mode left as it is, handing each token to `f`.
    pub fn feed(&mut self, mut input: &str, f: &mut impl FnMut(Token<'_>)) {
        while let Some(t) = self.next(&mut input) {
            f(t);
        }
    }

    /// [`next`](Self::next) with bytes held back from an earlier piece.
    #[cold]
    fn next_held<'a>(&mut self, input: &mut &'a str) -> Option<Token<'a>> {
        if self.pending.is_empty() {
            return None;
        }
        let held = std::mem::take(&mut self.pending);
        let c = self.find(held.as_bytes());
        self.pending = held;
        if c > 0 {
            return Some(Token::Text(self.take_text(c)));
        }
        // A delimiter's first byte at the start of what is held: decide it with the next bytes.
        let held = self.pending.len();
        let take = self.max_len.saturating_sub(held).min(input.len());
        self.scratch.clear();
        self.scratch.extend_from_slice(self.pending.as_bytes());
        self.scratch.extend_from_slice(&input.as_bytes()[..take]);
        let m = self.classify(&self.scratch);
        match m {
            Match::Full(idx, len) => {
                if len >= held {
                    *input = &input[len - held..];
                    self.pending.clear();
                } else {
                    self.pending.drain(..len);
                }
                Some(Token::Marker(idx))
            }
            Match::NeedMore => {
                // Only when the window took all of the input (a longer window would decide).
                self.pending.push_str(input);
                *input = "";
                None
            }
            Match::No => {
                // The first character is text, and so is what follows it up to the next byte
                // that may start a delimiter: one token for both.
                let n = char_len(self.pending.as_bytes()[0]);
                let held = std::mem::take(&mut self.pending);
                let n = n + self.find(&held.as_bytes()[n..]);
                self.pending = held;
                Some(Token::Text(self.take_text(n)))
            }
        }
    }

    /// The first `n` held bytes as text, without an allocation when they are one ASCII byte
    /// (a `<` that began no delimiter, the usual case).
    fn take_text(&mut self, n: usize) -> Cow<'static, str> {
        if n == 1 && self.pending.as_bytes()[0].is_ascii() {
            let b = usize::from(self.pending.as_bytes()[0]);
            self.pending.drain(..1);
            return Cow::Borrowed(&ASCII[b..b + 1]);
        }
        if n == self.pending.len() {
            return Cow::Owned(std::mem::take(&mut self.pending));
        }
        Cow::Owned(self.pending.drain(..n).collect())
    }

    /// The offset in `s` of the next byte that may start a delimiter outside a JSON string
    /// (`s.len()` if none), following the string state over the bytes passed.
    #[inline]
    fn find(&mut self, s: &[u8]) -> usize {
        if !self.json {
            return self.find_first(s);
        }
        let mut i = 0;
        while i < s.len() {
            if self.esc {
                self.esc = false;
                i += 1;
            } else if self.in_str {
                match super::find_byte2(b'"', b'\\', &s[i..]) {
                    None => return s.len(),
                    Some(k) => {
                        if s[i + k] == b'"' {
                            self.in_str = false;
                        } else {
                            self.esc = true;
                        }
                        i += k + 1;
                    }
                }
            } else {
                let j = i + self.find_first_or_quote(&s[i..]);
                if j == s.len() || s[j] != b'"' {
                    return j;
                }
                self.in_str = true;
                i = j + 1;
            }
        }
        s.len()
    }

    /// The offset of the next delimiter first byte in `s` (`s.len()` if none).
    #[inline]
    fn find_first(&self, s: &[u8]) -> usize {
        self.first.find(s).unwrap_or(s.len())
    }

    /// The offset of the next delimiter first byte or `"` in `s` (`s.len()` if none).
    #[inline]
    fn find_first_or_quote(&self, s: &[u8]) -> usize {
        self.first_or_quote.find(s).unwrap_or(s.len())
    }

    /// Compares a window (starting at a first byte, at most `max_len` bytes, ending where the
    /// input available ends or the longest delimiter would) with the delimiters.
    fn classify(&self, w: &[u8]) -> Match {
        let mut best: Option<(usize, usize)> = None;
        let mut could_grow = false;
        for (i, m) in self.markers.iter().enumerate() {
            let m = m.as_bytes();
            if w.len() >= m.len() {
                if &w[..m.len()] == m && best.is_none_or(|(_, l)| m.len() > l) {
                    best = Some((i, m.len()));
                }
            } else if !self.eof && m.starts_with(w) {
                could_grow = true;
            }
        }
        match (could_grow, best) {
            (true, _) => Match::NeedMore,
            (false, Some((i, len))) => Match::Full(i, len),
            (false, None) => Match::No,
        }
    }
}

/// Every ASCII character, in order: one-byte texts are borrowed from here.
const ASCII: &str = "\0\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\
\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f \
!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\x7f";

/// The length of the UTF-8 character whose first byte is `b`.
#[inline]
fn char_len(b: u8) -> usize {
    match b {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_a_marker_a_prefix_of_one_or_neither() {
        let m = ["<|a|>", "<|bb|>"];
        assert_eq!(classify_window(b"<|bb|>x", &m), Window::Marker(1, 6));
        assert_eq!(classify_window(b"<|a|>", &m), Window::Marker(0, 5));
        assert_eq!(classify_window(b"<|b", &m), Window::NeedMore);
        assert_eq!(classify_window(b"<", &m), Window::NeedMore);
        assert_eq!(classify_window(b"<|c", &m), Window::NotMarker);
        assert_eq!(
            classify_window(b"<|a|>", &m).map(|i| i + 10),
            Window::Marker(10, 5)
        );
    }
    use proptest::prelude::*;

    /// Tokens with adjacent text merged, owned.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum T {
        Text(String),
        M(usize),
    }

    fn push(out: &mut Vec<T>, t: Token<'_>) {
        match t {
            Token::Text(s) => {
                assert!(!s.is_empty(), "empty text token");
                if let Some(T::Text(prev)) = out.last_mut() {
                    prev.push_str(&s);
                } else {
                    out.push(T::Text(s.into_owned()));
                }
            }
            Token::Marker(i) => out.push(T::M(i)),
        }
    }

    fn scan(markers: &[&str], json: bool, pieces: &[&str]) -> Vec<T> {
        let mut sc = MarkerScanner::new(markers).with_json_strings(json);
        let mut out = Vec::new();
        for p in pieces {
            sc.feed(p, &mut |t| push(&mut out, t));
            assert!(sc.held().len() < sc.max_len(), "held back too much");
        }
        while let Some(t) = sc.finish() {
            push(&mut out, t);
        }
        out
    }

    /// The whole-input reference: leftmost delimiter, longest at its position, outside JSON
    /// strings in JSON mode.
    fn oracle(markers: &[&str], json: bool, s: &str) -> Vec<T> {
        let mut out = Vec::new();
        let (mut in_str, mut esc) = (false, false);
        let mut i = 0;
        let mut text = String::new();
        let b = s.as_bytes();
        while i < s.len() {
            if json && (in_str || b[i] == b'"') {
                if esc {
                    esc = false;
                } else if b[i] == b'\\' {
                    esc = true;
                } else if b[i] == b'"' {
                    in_str = !in_str;
                }
                // Copy byte-wise through a whole character.
                let n = if s.is_char_boundary(i) {
                    s[i..].chars().next().map_or(1, char::len_utf8)
                } else {
                    1
                };
                let n = n.min(s.len() - i);
                text.push_str(&s[i..i + n]);
                i += n;
                continue;
            }
            let best = markers
                .iter()
                .enumerate()
                .filter(|(_, m)| s[i..].starts_with(**m))
                .max_by_key(|(_, m)| m.len());
            if let Some((k, m)) = best {
                if !text.is_empty() {
                    out.push(T::Text(std::mem::take(&mut text)));
                }
                out.push(T::M(k));
                i += m.len();
            } else {
                let c = s[i..].chars().next().unwrap();
                text.push(c);
                i += c.len_utf8();
            }
        }
        if !text.is_empty() {
            out.push(T::Text(text));
        }
        out
    }

    fn all_cuts(markers: &[&str], json: bool, s: &str) -> Vec<T> {
        let whole = scan(markers, json, &[s]);
        assert_eq!(whole, oracle(markers, json, s), "whole vs oracle for {s:?}");
        let chars: Vec<&str> = s
            .char_indices()
            .map(|(i, c)| &s[i..i + c.len_utf8()])
            .collect();
        assert_eq!(scan(markers, json, &chars), whole, "char by char: {s:?}");
        for (cut, _) in s.char_indices().skip(1) {
            assert_eq!(
                scan(markers, json, &[&s[..cut], &s[cut..]]),
                whole,
                "cut at {cut}: {s:?}"
            );
        }
        whole
    }

    const HERMES: [&str; 2] = ["<tool_call>", "</tool_call>"];

    #[test]
    fn finds_delimiters_and_keeps_text() {
        let r = all_cuts(&HERMES, false, "a <b <tool_call>{}</tool_call> c");
        assert_eq!(
            r,
            vec![
                T::Text("a <b ".into()),
                T::M(0),
                T::Text("{}".into()),
                T::M(1),
                T::Text(" c".into())
            ]
        );
    }

    #[test]
    fn a_prefix_is_held_only_while_it_can_still_match() {
        let mut sc = MarkerScanner::new(&HERMES);
        let mut out = Vec::new();
        sc.feed("x<tool_", &mut |t| push(&mut out, t));
        assert_eq!(sc.held(), "<tool_");
        assert_eq!(out, vec![T::Text("x".into())]);
        sc.feed("x", &mut |t| push(&mut out, t));
        assert_eq!(sc.held(), "", "<tool_x can no longer become a delimiter");
        assert_eq!(out, vec![T::Text("x<tool_x".into())]);
        // A prefix at the end of the stream is text.
        sc.feed("</tool", &mut |t| push(&mut out, t));
        while let Some(t) = sc.finish() {
            push(&mut out, t);
        }
        assert_eq!(out, vec![T::Text("x<tool_x</tool".into())]);
    }

    #[test]
    fn a_failed_prefix_is_rescanned_for_a_later_delimiter() {
        let r = all_cuts(&HERMES, false, "<<tool_call><</tool_call>");
        assert_eq!(
            r,
            vec![T::Text("<".into()), T::M(0), T::Text("<".into()), T::M(1)]
        );
    }

    #[test]
    fn the_longest_delimiter_wins_and_a_shorter_one_waits() {
        let ms = ["[A]", "[A][B]", "[AB"];
        let r = all_cuts(&ms, false, "x[A][B]y[A][C]z[AB[A]");
        assert_eq!(
            r,
            vec![
                T::Text("x".into()),
                T::M(1),
                T::Text("y".into()),
                T::M(0),
                T::Text("[C]z".into()),
                T::M(2),
                T::M(0)
            ]
        );
        // A shorter delimiter at the very end is reported when the stream ends.
        assert_eq!(
            scan(&ms, false, &["[A][B"]),
            vec![T::M(0), T::Text("[B".into())]
        );
    }

    #[test]
    fn json_mode_treats_delimiters_in_strings_as_text() {
        let s = r#"<tool_call>{"a": "x</tool_call>\"</tool_call>\\"}</tool_call>"#;
        let r = all_cuts(&HERMES, true, s);
        assert_eq!(
            r,
            vec![
                T::M(0),
                T::Text(r#"{"a": "x</tool_call>\"</tool_call>\\"}"#.into()),
                T::M(1)
            ]
        );
        // Off, the same input splits at every occurrence.
        assert_eq!(all_cuts(&HERMES, false, s).len(), 7);
    }

    #[test]
    fn the_mode_can_change_between_tokens() {
        let mut sc = MarkerScanner::new(&HERMES);
        let mut input = "\"</tool_call>\"<tool_call>\"</tool_call>\"</tool_call>";
        let mut out = Vec::new();
        while let Some(t) = sc.next(&mut input) {
            let is_open = t == Token::Marker(0);
            push(&mut out, t);
            if is_open {
                sc.set_json_strings(true);
            }
        }
        assert_eq!(
            out,
            vec![
                T::Text("\"".into()),
                T::M(1),
                T::Text("\"".into()),
                T::M(0),
                T::Text("\"</tool_call>\"".into()),
                T::M(1)
            ]
        );
    }

    #[test]
    fn multibyte_delimiters_split_inside_characters() {
        let ms = ["<｜tool▁sep｜>", "<｜tool▁call▁end｜>"];
        let s = "name<｜tool▁sep｜>{\"a\": \"｜▁<｜\"}<｜tool▁call▁end｜>é";
        let r = all_cuts(&ms, true, s);
        assert_eq!(r[1], T::M(0));
        assert_eq!(r[3], T::M(1));
        assert_eq!(r[4], T::Text("é".into()));
    }

    #[test]
    fn the_caller_can_take_over_the_input_after_a_delimiter() {
        let mut sc = MarkerScanner::new(&["[ARGS]"]);
        let mut input = "f[AR";
        assert_eq!(sc.next(&mut input), Some(Token::Text(Cow::Borrowed("f"))));
        assert_eq!(sc.next(&mut input), None);
        let mut input = "GS]{\"a\":1}";
        assert_eq!(sc.next(&mut input), Some(Token::Marker(0)));
        assert_eq!(input, "{\"a\":1}");
        assert_eq!(sc.held(), "");
    }

    #[test]
    fn the_ascii_table_holds_each_byte_at_its_value() {
        assert_eq!(ASCII.len(), 128);
        assert!(ASCII.bytes().enumerate().all(|(i, b)| usize::from(b) == i));
    }

    #[test]
    fn many_first_bytes_use_the_table_search() {
        let ms = ["<a>", "[b]", "{c}", "(d)"];
        let r = all_cuts(&ms, false, "1<a>2[b]3{c}4(d)5(e)");
        assert_eq!(r.iter().filter(|t| matches!(t, T::M(_))).count(), 4);
    }

    fn soup() -> impl Strategy<Value = String> {
        let atoms = prop_oneof![
            Just("<tool_call>".to_string()),
            Just("</tool_call>".to_string()),
            Just("<tool_".to_string()),
            Just("</".to_string()),
            Just("[A]".to_string()),
            Just("[A][B]".to_string()),
            Just("<｜tool▁sep｜>".to_string()),
            Just("\"".to_string()),
            Just("\\".to_string()),
            Just("é😀▁".to_string()),
            "[a-z<>/\\[\\]\" \\\\]{0,5}",
        ];
        proptest::collection::vec(atoms, 0..20).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

        #[test]
        fn every_cut_gives_the_same_tokens(
            s in soup(),
            json in any::<bool>(),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let ms = ["<tool_call>", "</tool_call>", "[A]", "[A][B]", "<｜tool▁sep｜>"];
            let whole = scan(&ms, json, &[&s]);
            prop_assert_eq!(&whole, &oracle(&ms, json, &s));
            let mut cs: Vec<usize> = cuts.iter().map(|c| c % (s.len() + 1)).filter(|c| s.is_char_boundary(*c)).collect();
            cs.sort_unstable();
            let mut pieces = Vec::new();
            let mut prev = 0;
            for c in cs {
                pieces.push(&s[prev..c]);
                prev = c;
            }
            pieces.push(&s[prev..]);
            prop_assert_eq!(scan(&ms, json, &pieces), whole);
        }
    }
}
