//! A push parser for Server-Sent Events (the WHATWG `text/event-stream` format).
//!
//! Fed raw bytes cut anywhere; yields events (type, data, id, offset) and errors naming a byte
//! offset. Every byte is scanned once and every line validated once, so cost is linear in the
//! stream whatever the cuts; a line and an event are bounded by [`SseConfig`] limits. The rules
//! and the places where this parser deviates from WHATWG are in `specs/sse.md`.

use memchr::memchr2;

/// Limits and strictness of the SSE layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseConfig {
    /// Longest line kept, in bytes (excluding its line end); a longer line is an error.
    pub max_line_bytes: usize,
    /// Largest data buffer of one event, in bytes; a larger event is an error.
    pub max_event_bytes: usize,
    /// Report a line whose field name is not `data`, `event`, `id` or `retry` (WHATWG ignores
    /// it; no provider sends one, so it is almost always garbage such as a cut JSON payload).
    pub reject_unknown_fields: bool,
}

impl Default for SseConfig {
    fn default() -> Self {
        SseConfig {
            max_line_bytes: 16 << 20,
            max_event_bytes: 16 << 20,
            reject_unknown_fields: true,
        }
    }
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last event id seen so far in the stream (`id:` fields persist across events).
    pub id: Option<String>,
    /// Stream offset of the event's first field line.
    pub offset: u64,
    /// False for an event that the stream ended inside (no blank line after it).
    pub terminated: bool,
}

/// What went wrong in an [`SseError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseErrorKind {
    /// A line is not valid UTF-8.
    InvalidUtf8,
    /// A line is neither a comment nor a known field.
    UnknownField,
    /// A line exceeded `max_line_bytes`.
    LineTooLong,
    /// An event's data exceeded `max_event_bytes`.
    EventTooLong,
}

/// A malformed or oversized part of the stream; the offending line (or event) is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseError {
    /// The kind of problem.
    pub kind: SseErrorKind,
    /// Stream offset where it was found.
    pub offset: u64,
    /// A human-readable explanation naming the offset.
    pub message: String,
}

impl SseError {
    /// True for the two size limits (hosts map them to `limit_exceeded`).
    pub fn is_limit(&self) -> bool {
        matches!(
            self.kind,
            SseErrorKind::LineTooLong | SseErrorKind::EventTooLong
        )
    }
}

/// One thing the SSE layer yields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseItem {
    /// A dispatched event.
    Event(SseEvent),
    /// A malformed part of the stream.
    Error(SseError),
}

/// The push parser.
#[derive(Debug, Clone, Default)]
pub struct SseParser {
    config: SseConfig,
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
    /// Stream offset of `line[0]`.
    line_start: u64,
    /// Stream offset of the next byte fed.
    offset: u64,
    /// The previous byte was a `\r`: a `\n` right after it belongs to the same line end.
    skip_lf: bool,
    /// The current line overflowed and its remaining bytes are being skipped.
    overlong: bool,
    data: String,
    event_type: String,
    last_id: Option<String>,
    event_offset: Option<u64>,
    /// A line of the current event was dropped, so the event is not dispatched.
    broken: bool,
    retry: Option<u64>,
}

impl SseParser {
    /// A parser at stream offset 0.
    pub fn new(config: SseConfig) -> Self {
        SseParser {
            config,
            ..Default::default()
        }
    }

    /// Bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The last valid `retry:` value, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Feeds the next chunk, handing each completed item to `f` in stream order.
    pub fn feed(&mut self, chunk: &[u8], f: &mut impl FnMut(SseItem)) {
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    self.offset += 1;
                    self.line_start = self.offset;
                    continue;
                }
            }
            match memchr2(b'\n', b'\r', rest) {
                Some(p) => {
                    self.append(&rest[..p], f);
                    self.offset += p as u64 + 1;
                    self.skip_lf = rest[p] == b'\r';
                    self.end_line(f);
                    self.line_start = self.offset;
                    rest = &rest[p + 1..];
                }
                None => {
                    self.append(rest, f);
                    self.offset += rest.len() as u64;
                    rest = &[];
                }
            }
        }
    }

    /// Ends the stream (or the turn): a last line without a line end is taken as a line, and an
    /// event not closed by a blank line is dispatched with `terminated: false` (WHATWG discards
    /// it; hosts decide). The parser is then ready for a new stream, offsets continuing.
    pub fn finish(&mut self, f: &mut impl FnMut(SseItem)) {
        if !self.line.is_empty() || self.overlong {
            self.end_line(f);
            self.line_start = self.offset;
        }
        self.dispatch(false, f);
        self.skip_lf = false;
        self.last_id = None;
    }

    fn append(&mut self, bytes: &[u8], f: &mut impl FnMut(SseItem)) {
        if self.overlong {
            return;
        }
        if self.line.len() + bytes.len() > self.config.max_line_bytes {
            self.overlong = true;
            self.line = Vec::new();
            f(SseItem::Error(SseError {
                kind: SseErrorKind::LineTooLong,
                offset: self.line_start,
                message: format!(
                    "line at byte {} is longer than {} bytes",
                    self.line_start, self.config.max_line_bytes
                ),
            }));
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, f: &mut impl FnMut(SseItem)) {
        if self.overlong {
            self.overlong = false;
            self.broken = true;
            self.event_offset.get_or_insert(self.line_start);
            return;
        }
        let line = std::mem::take(&mut self.line);
        let mut bytes = &line[..];
        let mut skipped = 0;
        if self.line_start == 0 && bytes.starts_with(b"\xEF\xBB\xBF") {
            bytes = &bytes[3..];
            skipped = 3;
        }
        if skipped == 0 && line.len() > 64 << 10 && self.data.is_empty() && !self.broken {
            // A long `data:` line, the event's first: its buffer becomes the event's data, so
            // that a 10 MB payload is not held twice (the line, then its copy).
            let prefix = if line.starts_with(b"data: ") {
                6
            } else if line.starts_with(b"data:") {
                5
            } else {
                0
            };
            if prefix > 0 && line.len() - prefix < self.config.max_event_bytes {
                match String::from_utf8(line) {
                    Ok(mut data) => {
                        self.event_offset.get_or_insert(self.line_start);
                        data.drain(..prefix);
                        data.push('\n');
                        self.data = data;
                        return;
                    }
                    Err(e) => {
                        let line = e.into_bytes();
                        self.process_line(&line, 0, f);
                        return;
                    }
                }
            }
        }
        self.process_line(bytes, skipped, f);
        // Keep the allocation for the next line unless one huge line inflated it.
        if line.capacity() <= 64 << 10 {
            self.line = line;
            self.line.clear();
        }
    }

    fn process_line(&mut self, bytes: &[u8], skipped: u64, f: &mut impl FnMut(SseItem)) {
        if bytes.is_empty() {
            self.dispatch(true, f);
            return;
        }
        if bytes[0] == b':' {
            return;
        }
        let start = self.line_start;
        let line = match std::str::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => {
                let at = start + skipped + e.valid_up_to() as u64;
                self.broken = true;
                self.event_offset.get_or_insert(start);
                f(SseItem::Error(SseError {
                    kind: SseErrorKind::InvalidUtf8,
                    offset: at,
                    message: format!("invalid UTF-8 at byte {at}"),
                }));
                return;
            }
        };
        let (name, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match name {
            "data" => {
                self.event_offset.get_or_insert(start);
                if self.data.len() + value.len() + 1 > self.config.max_event_bytes {
                    if !self.broken {
                        f(SseItem::Error(SseError {
                            kind: SseErrorKind::EventTooLong,
                            offset: start,
                            message: format!(
                                "event data exceeds {} bytes at byte {start}",
                                self.config.max_event_bytes
                            ),
                        }));
                    }
                    self.broken = true;
                    self.data = String::new();
                    return;
                }
                if !self.broken {
                    self.data.push_str(value);
                    self.data.push('\n');
                }
            }
            "event" => {
                self.event_offset.get_or_insert(start);
                self.event_type = value.to_string();
            }
            "id" => {
                self.event_offset.get_or_insert(start);
                if !value.contains('\0') {
                    self.last_id = Some(value.to_string());
                }
            }
            "retry" => {
                self.event_offset.get_or_insert(start);
                if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
                    self.retry = value.parse().ok();
                }
            }
            _ => {
                if self.config.reject_unknown_fields {
                    let shown: String = name.chars().take(40).collect();
                    f(SseItem::Error(SseError {
                        kind: SseErrorKind::UnknownField,
                        offset: start,
                        message: format!("line at byte {start} is not an SSE field: {shown:?}"),
                    }));
                }
            }
        }
    }

    fn dispatch(&mut self, terminated: bool, f: &mut impl FnMut(SseItem)) {
        let offset = self.event_offset.take();
        let event_type = std::mem::take(&mut self.event_type);
        let mut data = std::mem::take(&mut self.data);
        let broken = std::mem::replace(&mut self.broken, false);
        if broken || data.is_empty() {
            return;
        }
        data.pop();
        f(SseItem::Event(SseEvent {
            event: if event_type.is_empty() {
                "message".to_string()
            } else {
                event_type
            },
            data,
            id: self.last_id.clone(),
            offset: offset.unwrap_or(self.line_start),
            terminated,
        }));
    }
}

/// Parses a whole stream at once (for tests).
#[cfg(test)]
pub fn parse_all(input: &[u8], config: SseConfig) -> Vec<SseItem> {
    let mut p = SseParser::new(config);
    let mut out = Vec::new();
    p.feed(input, &mut |i| out.push(i));
    p.finish(&mut |i| out.push(i));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_long_first_data_line_reads_as_a_short_one_does() {
        // Over 64 KiB the line's buffer becomes the event's data: the same events, offsets and
        // errors as the field-by-field path, whole or fed in pieces.
        let long = "x".repeat(70 << 10);
        let cases = [
            format!("data: {long}\n\n"),
            format!("data:{long}\ndata: b\n\n"),
            format!("data:  {long}\r\n\r\n"),
            format!("event: e\ndata: {long}\nid: 7\n\n"),
            format!("data: a\ndata: {long}\n\n"),
            format!("datax: {long}\n\ndata: {long}"),
        ];
        for text in &cases {
            let bytes = text.as_bytes();
            let whole = run(&[bytes], SseConfig::default());
            let pieces: Vec<&[u8]> = bytes.chunks(4096).collect();
            assert_eq!(run(&pieces, SseConfig::default()), whole);
            let Some(SseItem::Event(ev)) = whole.iter().find(|i| matches!(i, SseItem::Event(_)))
            else {
                panic!("no event in {:?}", &text[..20]);
            };
            assert!(ev.data.contains(&long), "{:?}", &ev.data[..20]);
            assert!(!ev.data.starts_with("data"));
        }
        // Invalid UTF-8 and the size limit still say so.
        let mut bad = b"data: ".to_vec();
        bad.extend_from_slice(long.as_bytes());
        bad.extend_from_slice(b"\xff\n\n");
        assert!(matches!(
            run(&[&bad], SseConfig::default())[0],
            SseItem::Error(SseError { kind: SseErrorKind::InvalidUtf8, offset, .. }) if offset == 6 + long.len() as u64
        ));
        let small = SseConfig {
            max_event_bytes: long.len(),
            ..SseConfig::default()
        };
        assert!(matches!(
            run(&[format!("data: {long}\n\n").as_bytes()], small)[0],
            SseItem::Error(SseError {
                kind: SseErrorKind::EventTooLong,
                ..
            })
        ));
    }

    fn run(chunks: &[&[u8]], config: SseConfig) -> Vec<SseItem> {
        let mut p = SseParser::new(config);
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut |i| out.push(i));
        }
        p.finish(&mut |i| out.push(i));
        out
    }

    fn events(input: &[u8]) -> Vec<(String, String)> {
        parse_all(input, SseConfig::default())
            .into_iter()
            .filter_map(|i| match i {
                SseItem::Event(e) => Some((e.event, e.data)),
                SseItem::Error(_) => None,
            })
            .collect()
    }

    fn ev(t: &str, d: &str) -> (String, String) {
        (t.to_string(), d.to_string())
    }

    /// Every single cut and every byte-by-byte feed give the items of the whole.
    fn assert_split_invariant(input: &[u8]) {
        let whole = run(&[input], SseConfig::default());
        for cut in 0..=input.len() {
            let (a, b) = input.split_at(cut);
            assert_eq!(run(&[a, b], SseConfig::default()), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(run(&bytes, SseConfig::default()), whole);
    }

    #[test]
    fn data_line_and_blank_line_dispatch_a_message() {
        assert_eq!(events(b"data: hi\n\n"), vec![ev("message", "hi")]);
    }

    #[test]
    fn the_single_space_after_the_colon_is_optional_and_only_one_is_removed() {
        assert_eq!(
            events(b"data:a\n\ndata:  b\n\n"),
            vec![ev("message", "a"), ev("message", " b")]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        assert_eq!(
            events(b"data: a\ndata\ndata: c\n\n"),
            vec![ev("message", "a\n\nc")]
        );
    }

    #[test]
    fn all_three_line_ends_are_recognised() {
        let want = vec![ev("x", "1"), ev("message", "2")];
        assert_eq!(events(b"event: x\rdata: 1\r\rdata: 2\r\r"), want);
        assert_eq!(events(b"event: x\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n"), want);
        assert_eq!(events(b"event: x\ndata: 1\n\ndata: 2\n\n"), want);
        assert_split_invariant(b"event: x\r\ndata: 1\r\n\r\ndata: 2\r\r\n\n");
    }

    #[test]
    fn cr_at_a_chunk_end_then_lf_is_one_line_end() {
        let items = run(
            &[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"],
            SseConfig::default(),
        );
        assert_eq!(items.len(), 1);
        match &items[0] {
            SseItem::Event(e) => assert_eq!(e.data, "a\nb"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn comments_and_event_types() {
        assert_eq!(
            events(b": keep-alive\nevent: ping\ndata: {}\n\n"),
            vec![ev("ping", "{}")]
        );
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_type_resets() {
        assert_eq!(events(b"event: a\n\ndata: x\n\n"), vec![ev("message", "x")]);
    }

    #[test]
    fn id_persists_and_retry_is_parsed() {
        let items = parse_all(
            b"id: 7\nretry: 150\ndata: a\n\ndata: b\n\n",
            SseConfig::default(),
        );
        let ids: Vec<_> = items
            .iter()
            .map(|i| match i {
                SseItem::Event(e) => e.id.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(ids, vec![Some("7".into()), Some("7".into())]);
        let mut p = SseParser::new(SseConfig::default());
        p.feed(b"retry: 150\nretry: x\n", &mut |_| {});
        assert_eq!(p.retry(), Some(150));
    }

    #[test]
    fn done_is_ordinary_data() {
        assert_eq!(events(b"data: [DONE]\n\n"), vec![ev("message", "[DONE]")]);
    }

    #[test]
    fn offsets_name_the_first_field_line() {
        let items = parse_all(
            b": c\n\ndata: a\n\nevent: e\ndata: b\n\n",
            SseConfig::default(),
        );
        let offs: Vec<u64> = items
            .iter()
            .filter_map(|i| match i {
                SseItem::Event(e) => Some(e.offset),
                _ => None,
            })
            .collect();
        assert_eq!(offs, vec![5, 14]);
    }

    #[test]
    fn utf8_split_anywhere_is_reassembled() {
        assert_split_invariant("data: h€llo 😀\n\n".as_bytes());
        assert_eq!(
            events("data: h€llo 😀\n\n".as_bytes()),
            vec![ev("message", "h€llo 😀")]
        );
    }

    #[test]
    fn invalid_utf8_is_an_error_at_its_offset_and_drops_the_event() {
        let items = parse_all(b"data: a\xffb\n\ndata: ok\n\n", SseConfig::default());
        assert_eq!(items.len(), 2);
        match &items[0] {
            SseItem::Error(e) => {
                assert_eq!(e.kind, SseErrorKind::InvalidUtf8);
                assert_eq!(e.offset, 7);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&items[1], SseItem::Event(e) if e.data == "ok"));
    }

    #[test]
    fn a_line_that_is_not_a_field_is_an_error() {
        let items = parse_all(b"data: a\n\n{\"x\":1}\n\n", SseConfig::default());
        assert!(
            matches!(&items[1], SseItem::Error(e) if e.kind == SseErrorKind::UnknownField && e.offset == 9)
        );
        let lenient = SseConfig {
            reject_unknown_fields: false,
            ..SseConfig::default()
        };
        assert_eq!(parse_all(b"foo: 1\ndata: a\n\n", lenient).len(), 1);
    }

    #[test]
    fn overlong_line_is_an_error_and_memory_stays_bounded() {
        let config = SseConfig {
            max_line_bytes: 8,
            ..SseConfig::default()
        };
        let input = b"data: 0123456789\n\ndata: ok\n\n";
        let whole = run(&[input], config.clone());
        assert!(
            matches!(&whole[0], SseItem::Error(e) if e.kind == SseErrorKind::LineTooLong && e.offset == 0)
        );
        assert!(matches!(&whole[1], SseItem::Event(e) if e.data == "ok"));
        assert_eq!(whole.len(), 2);
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(run(&bytes, config), whole);
    }

    #[test]
    fn overlong_event_is_an_error() {
        let config = SseConfig {
            max_event_bytes: 6,
            ..SseConfig::default()
        };
        let items = parse_all(b"data: abc\ndata: def\ndata: g\n\ndata: x\n\n", config);
        assert_eq!(items.len(), 2);
        assert!(matches!(&items[0], SseItem::Error(e) if e.kind == SseErrorKind::EventTooLong));
        assert!(matches!(&items[1], SseItem::Event(e) if e.data == "x"));
    }

    #[test]
    fn unterminated_last_event_is_dispatched_and_marked() {
        let items = parse_all(b"data: a\n\ndata: b", SseConfig::default());
        assert!(matches!(&items[0], SseItem::Event(e) if e.terminated));
        assert!(matches!(&items[1], SseItem::Event(e) if !e.terminated && e.data == "b"));
    }

    #[test]
    fn bom_at_stream_start_is_skipped() {
        assert_eq!(events(b"\xEF\xBB\xBFdata: a\n\n"), vec![ev("message", "a")]);
    }

    #[test]
    fn finish_starts_a_new_stream() {
        let mut p = SseParser::new(SseConfig::default());
        let mut out = Vec::new();
        p.feed(b"id: 1\ndata: a\r", &mut |i| out.push(i));
        p.finish(&mut |i| out.push(i));
        p.feed(b"\ndata: b\n\n", &mut |i| out.push(i));
        p.finish(&mut |i| out.push(i));
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[1], SseItem::Event(e) if e.data == "b" && e.id.is_none()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn arbitrary_bytes_and_cuts_never_panic_and_match_the_whole(
            bytes in proptest::collection::vec(prop_oneof![
                Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '), Just(b'd'), Just(b'a'),
                Just(b't'), Just(0xE2), Just(0x82), Just(0xAC), any::<u8>()], 0..96),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let config = SseConfig { max_line_bytes: 12, max_event_bytes: 20, ..SseConfig::default() };
            let whole = run(&[&bytes], config.clone());
            let mut cs: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            cs.sort();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut prev = 0;
            for c in cs { chunks.push(&bytes[prev..c]); prev = c; }
            chunks.push(&bytes[prev..]);
            prop_assert_eq!(run(&chunks, config), whole);
        }
    }
}
