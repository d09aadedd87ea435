//! Reasoning blocks (`<think>…</think>` and kin): one shared layer in front of a format's parser.
//!
//! A format whose models think declares a [`Syntax`] (its open/close tag pairs and the markers
//! that begin one of its calls) and wraps its parser with [`wrap`]. The layer splits the byte
//! stream: outside a block, bytes go to the format's parser; inside, they are `Reasoning`
//! events and the format's parser never sees them. An open tag counts only where the format's
//! parser is reading plain text ([`StreamParser::at_text`]), so `<think>` inside a JSON string
//! of the arguments stays argument text. The rules are in `specs/streaming.md` ("Reasoning").

use crate::event::{ErrorKind, Event, Sink, WarningKind};
use crate::formats::StreamParser;
use crate::formats::config::config;
use crate::lexers::utf8::{Utf8Decoder, Utf8Piece};
use crate::lexers::{ByteSet, short_word, word_has_byte};

pub use crate::formats::core::contract::Syntax;

impl Syntax {
    /// Every open and close tag, for the markup-leak check and the `markers` chunking.
    pub fn tags(&self) -> Vec<String> {
        self.pairs
            .iter()
            .flat_map(|(o, c)| [o.to_string(), c.to_string()])
            .collect()
    }

    /// The first tag `text` contains: a renderer must refuse such text, the layer would read
    /// the tag as reasoning.
    pub fn tag_in(&self, text: &str) -> Option<&'static str> {
        self.pairs
            .iter()
            .flat_map(|(o, c)| [*o, *c])
            .find(|t| text.contains(t))
    }

    /// The default configuration for this syntax.
    pub fn config(&self) -> Config {
        Config {
            enabled: self.on_by_default,
            ..Config::default()
        }
    }
}

config! {
    /// Options of the reasoning layer; every recovered deviation is one named option.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// Split reasoning from the text at all (off: the tags are whatever the format makes of
            /// them, usually text). Default: the syntax's `on_by_default`.
            enabled,
            /// Each turn begins inside a block: chat templates that put the open tag in the prompt
            /// (Kimi K2.5/K2.6, DeepSeek-R1, Qwen3 thinking) make the output start with reasoning and
            /// contain only the close tag (smg-project/smg#1873). Off by default: a server knows its
            /// template, the parser does not.
            starts_inside,
            /// Call markup inside reasoning stays reasoning with a warning; off: with a
            /// `malformed_markup` error. Either way it is never a call (see `specs/streaming.md`).
            call_in_reasoning,
            /// A block still open at the end of the turn is reasoning with a warning; off: an
            /// `unterminated` error (the reasoning is kept either way, never made text).
            unterminated_reasoning,
            /// A close tag outside any block (the open tag was in the prompt but `starts_inside` is
            /// off) is dropped with a warning; off: dropped with a `malformed_markup` error.
            stray_reasoning_end,
            /// A close tag before anything but whitespace in the turn is the model's own "no
            /// thinking this turn" (MiniMax-M3's adaptive mode writes a bare `</mm:think>` first),
            /// dropped without a warning; off: it is stray like any other. On only where the format's
            /// models write it (minimax_m3).
            adaptive_start,
            /// A call marker inside a block ends the block there, with a warning, and is parsed as
            /// a call (a model that forgot the close before acting: ai-dynamo/dynamo#10646,
            /// ai-dynamo/frontend-crates#133); off: `call_in_reasoning` applies. On only where the
            /// format's spec says why (minimax_m3).
            implicit_reasoning_end,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            starts_inside: false,
            call_in_reasoning: true,
            unterminated_reasoning: true,
            stray_reasoning_end: true,
            adaptive_start: false,
            implicit_reasoning_end: false,
        }
    }
}

/// Wraps a format's parser with its reasoning syntax and the syntax's default configuration.
pub fn wrap<P: StreamParser + 'static>(inner: P, syntax: &'static Syntax) -> Box<dyn StreamParser> {
    Box::new(Reasoned::new(inner, syntax, syntax.config()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Bytes go to the format's parser.
    Outside,
    /// Inside a block opened by pair `Some(i)`, or by the prompt (`None`: any close tag ends it).
    Inside(Option<usize>),
    /// A call section inside that block ([`Syntax::call_ends`]): bytes go to the format's
    /// parser until it is back at text after a call end.
    Call(Option<usize>),
}

/// What the bytes at a candidate position are.
enum Tag {
    Open(usize, usize),
    Close(usize),
    Call(usize),
    CallEnd(usize),
    Not,
    NeedMore,
}

/// A format's parser behind the reasoning layer.
pub struct Reasoned<P> {
    inner: P,
    syntax: &'static Syntax,
    cfg: Config,
    state: State,
    /// A possible tag prefix held back at a chunk end (shorter than the longest tag).
    held: Vec<u8>,
    /// Decodes reasoning bytes (the format's parser decodes its own).
    utf8: Utf8Decoder,
    /// Offset in the turn of the next unprocessed byte (the start of `held`).
    pos: u64,
    /// Call markup was already reported in the current block.
    call_reported: bool,
    /// Nothing but whitespace has been read in this turn (the adaptive start's window).
    at_start: bool,
    /// The format's models end reasoning with a call natively: a call marker inside a block
    /// ends it without a warning, whatever `implicit_reasoning_end` says.
    native_call_end: bool,
    /// The bytes any tag or call marker can start with.
    first: ByteSet,
    /// That byte, when there is only one (`<` for every syntax so far): a streaming delta of
    /// 4 to 8 bytes is then looked at in one word test.
    only_first: Option<u8>,
    /// The longest tag or call marker.
    longest: usize,
    /// The turn has ended: a tag prefix is what it is, no longer tag can follow.
    eof: bool,
    /// Nothing but whitespace in the block since a call section inside it ended: a turn that
    /// ends here paused to run the calls, its block is not cut short.
    after_call: bool,
}

impl<P: StreamParser> Reasoned<P> {
    /// The layer with explicit options.
    pub fn new(inner: P, syntax: &'static Syntax, cfg: Config) -> Self {
        let mut first = Vec::new();
        let mut longest = 0;
        let all = syntax
            .pairs
            .iter()
            .flat_map(|(o, c)| [*o, *c])
            .chain(syntax.call_markers.iter().copied())
            .chain(syntax.call_ends.iter().copied());
        for t in all {
            if let Some(&b) = t.as_bytes().first()
                && !first.contains(&b)
            {
                first.push(b);
            }
            longest = longest.max(t.len());
        }
        Reasoned {
            inner,
            syntax,
            cfg,
            state: Self::start_state(&cfg),
            held: Vec::new(),
            utf8: Utf8Decoder::new(),
            pos: 0,
            call_reported: false,
            at_start: true,
            native_call_end: false,
            only_first: match *first {
                [b] => Some(b),
                _ => None,
            },
            first: ByteSet::new(first),
            longest,
            eof: false,
            after_call: false,
        }
    }

    /// The layer for a syntax whose models open calls inside reasoning as their own way of
    /// ending it (`native`): a call marker there ends the block without a warning.
    pub fn calls_end_reasoning(mut self, native: bool) -> Self {
        self.native_call_end = native;
        self
    }

    fn start_state(cfg: &Config) -> State {
        if cfg.enabled && cfg.starts_inside {
            State::Inside(None)
        } else {
            State::Outside
        }
    }

    /// The first byte in `s` that may start a tag or call marker.
    #[inline]
    fn find(&self, s: &[u8]) -> Option<usize> {
        self.first.find(s)
    }

    /// Classifies the bytes at `s` (which start with a candidate byte) in the current state.
    /// Where several tags match, the longest wins, and a shorter one only once no longer one
    /// can still match (Gemma 4's `<|channel>thought⏎` and `<|channel>`): `NeedMore` until
    /// then, unless the turn has ended ([`eof`](Reasoned::eof)).
    fn classify(&self, s: &[u8]) -> Tag {
        // The longest whole match, and the longest tag `s` is a proper prefix of.
        let mut best = (0, Tag::Not);
        let mut partial = 0;
        let mut test = |t: &str, tag: Tag| {
            // Byte by byte, not `starts_with`: most candidates (a `<` in code) differ at their
            // second byte, where a loop has already answered and a `memcmp` call has not begun.
            let t = t.as_bytes();
            let n = s.len().min(t.len());
            if !s[..n].iter().zip(&t[..n]).all(|(a, b)| a == b) {
            } else if n < t.len() {
                partial = partial.max(t.len());
            } else if t.len() > best.0 {
                best = (t.len(), tag);
            }
        };
        match self.state {
            State::Outside => {
                for (i, (open, close)) in self.syntax.pairs.iter().enumerate() {
                    test(open, Tag::Open(i, open.len()));
                    test(close, Tag::Close(close.len()));
                }
            }
            State::Inside(pair) => {
                for (i, (_, close)) in self.syntax.pairs.iter().enumerate() {
                    if pair.is_none_or(|p| p == i) {
                        test(close, Tag::Close(close.len()));
                    }
                }
                for m in self.syntax.call_markers {
                    test(m, Tag::Call(m.len()));
                }
            }
            State::Call(_) => {
                for m in self.syntax.call_ends {
                    test(m, Tag::CallEnd(m.len()));
                }
            }
        }
        if partial > best.0 && !self.eof {
            Tag::NeedMore
        } else {
            best.1
        }
    }

    /// Processes bytes with nothing held back, holding back a trailing tag prefix.
    #[inline(never)]
    fn run(&mut self, mut s: &[u8], out: &mut dyn Sink) {
        while !s.is_empty() {
            // The next place a tag (or a prefix of one, at the end) starts: candidate bytes that
            // start no tag stay in the same feed, so code full of `<` is not cut at each one.
            let mut from = 0;
            let next = loop {
                let Some(i) = self.find(&s[from..]) else {
                    break None;
                };
                match self.classify(&s[from + i..]) {
                    Tag::Not => from += i + 1,
                    tag => break Some((from + i, tag)),
                }
            };
            let Some((k, tag)) = next else {
                self.pass(s, out);
                return;
            };
            if k > 0 {
                self.pass(&s[..k], out);
                s = &s[k..];
            }
            if self.state == State::Outside && !self.inner.at_text() {
                // Inside the format's markup (a call's arguments): not a tag.
                self.pass(&s[..1], out);
                s = &s[1..];
                continue;
            }
            match tag {
                Tag::NeedMore => {
                    self.held.extend_from_slice(s);
                    return;
                }
                // Not found above (such candidates were skipped); kept total without a panic.
                Tag::Not => {
                    self.pass(&s[..1], out);
                    s = &s[1..];
                }
                tag => {
                    let len = self.on_tag(tag, s, out);
                    s = &s[len..];
                }
            }
        }
    }

    /// Bytes that are no tag: to the format's parser, or reasoning.
    #[inline]
    fn pass(&mut self, s: &[u8], out: &mut dyn Sink) {
        if self.at_start && !s.iter().all(u8::is_ascii_whitespace) {
            self.at_start = false;
        }
        self.pos += s.len() as u64;
        match self.state {
            State::Outside | State::Call(_) => self.inner.feed(s, out),
            State::Inside(_) => {
                if self.after_call && !s.iter().all(u8::is_ascii_whitespace) {
                    self.after_call = false;
                }
                self.reason(s, out)
            }
        }
    }

    #[inline(never)]
    fn reason(&mut self, s: &[u8], out: &mut dyn Sink) {
        if let Some(t) = self.utf8.ascii(s) {
            out.reasoning(t);
            return;
        }
        let pos = self.pos;
        let mut utf8 = std::mem::take(&mut self.utf8);
        utf8.feed(s, &mut |p| emit_piece(p, pos, out));
        self.utf8 = utf8;
    }

    /// Acts on a tag or call marker at the start of `s`; returns its length.
    fn on_tag(&mut self, tag: Tag, s: &[u8], out: &mut dyn Sink) -> usize {
        match tag {
            Tag::Open(pair, len) => {
                self.pos += len as u64;
                self.state = State::Inside(Some(pair));
                self.call_reported = false;
                self.after_call = false;
                self.at_start = false;
                len
            }
            Tag::Close(len) => {
                let at = self.pos;
                self.pos += len as u64;
                let adaptive = std::mem::replace(&mut self.at_start, false);
                if self.state == State::Outside && adaptive && self.cfg.adaptive_start {
                    // The model's own "no thinking": not a deviation.
                } else if self.state == State::Outside {
                    let msg = format!(
                        "reasoning end at byte {at} outside any reasoning block (was the open tag in the prompt?)"
                    );
                    if self.cfg.stray_reasoning_end {
                        out.push(Event::warning(WarningKind::StrayReasoningEnd, msg));
                    } else {
                        out.push(Event::error(ErrorKind::MalformedMarkup, msg));
                    }
                } else {
                    self.flush_utf8(out);
                    self.state = State::Outside;
                }
                len
            }
            Tag::Call(len) if !self.syntax.call_ends.is_empty() => {
                // The format's models call tools while they think: a call, and the block
                // goes on after it.
                self.flush_utf8(out);
                if let State::Inside(pair) = self.state {
                    self.state = State::Call(pair);
                }
                self.pass(&s[..len], out);
                len
            }
            Tag::CallEnd(len) => {
                self.pass(&s[..len], out);
                if let State::Call(pair) = self.state
                    && self.inner.at_text()
                {
                    self.state = State::Inside(pair);
                    self.after_call = true;
                }
                len
            }
            Tag::Call(len) if self.cfg.implicit_reasoning_end || self.native_call_end => {
                if !self.native_call_end {
                    let msg = format!(
                        "call markup at byte {} ends the reasoning block (its close tag is missing)",
                        self.pos
                    );
                    out.push(Event::warning(WarningKind::ImplicitReasoningEnd, msg));
                }
                self.flush_utf8(out);
                self.state = State::Outside;
                self.pass(&s[..len], out);
                len
            }
            Tag::Call(len) => {
                if !self.call_reported {
                    self.call_reported = true;
                    let msg = format!(
                        "call markup at byte {} inside reasoning is not a call",
                        self.pos
                    );
                    if self.cfg.call_in_reasoning {
                        out.push(Event::warning(WarningKind::CallInReasoning, msg));
                    } else {
                        out.push(Event::error(ErrorKind::MalformedMarkup, msg));
                    }
                }
                self.pass(&s[..len], out);
                len
            }
            Tag::Not | Tag::NeedMore => 0,
        }
    }

    fn flush_utf8(&mut self, out: &mut dyn Sink) {
        let pos = self.pos;
        let mut utf8 = std::mem::take(&mut self.utf8);
        utf8.finish(&mut |p| emit_piece(p, pos, out));
    }
}

fn emit_piece(p: Utf8Piece<'_>, pos: u64, out: &mut dyn Sink) {
    match p {
        Utf8Piece::Text(t) => out.reasoning(t),
        Utf8Piece::Invalid { .. } => {
            out.push(Event::error(
                ErrorKind::InvalidUtf8,
                format!("invalid UTF-8 in reasoning near byte {pos}"),
            ));
            out.reasoning("\u{FFFD}");
        }
    }
}

impl<P: StreamParser> StreamParser for Reasoned<P> {
    #[inline]
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        if !self.cfg.enabled {
            return self.inner.feed(chunk, out);
        }
        if self.held.is_empty() {
            // The per-feed path: a piece with no byte that may start a tag goes straight on.
            let clear = self.only_first.is_some_and(|b| {
                (4..=8).contains(&chunk.len()) && !word_has_byte(short_word(chunk), b)
            });
            if clear || self.find(chunk).is_none() {
                if !chunk.is_empty() {
                    self.pass(chunk, out);
                }
                return;
            }
            return self.run(chunk, out);
        }
        let mut input = chunk;
        while !self.held.is_empty() {
            let room = self.longest.saturating_sub(self.held.len());
            let take = room.min(input.len());
            let mut tmp = std::mem::take(&mut self.held);
            let held = tmp.len();
            tmp.extend_from_slice(&input[..take]);
            match self.classify(&tmp) {
                Tag::NeedMore => {
                    // `take` < `room` here: the whole input is held.
                    self.held = tmp;
                    return;
                }
                Tag::Not => {
                    self.pass(&tmp[..1], out);
                    // The held bytes after the first come before `input`: run them first.
                    self.run(&tmp[1..held], out);
                }
                tag => {
                    let len = self.on_tag(tag, &tmp, out);
                    if len < held {
                        // A shorter tag matched inside the held bytes: the rest of them come
                        // before `input`.
                        self.run(&tmp[len..held], out);
                    } else {
                        input = &input[len - held..];
                    }
                }
            }
        }
        self.run(input, out);
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        if self.cfg.enabled {
            // A tag prefix cut short by the end of the turn is no tag, but a shorter tag may
            // start it.
            let held = std::mem::take(&mut self.held);
            self.eof = true;
            self.run(&held, out);
            self.eof = false;
            if let State::Inside(_) = self.state
                && !self.after_call
            {
                self.flush_utf8(out);
                let msg = "the turn ended inside a reasoning block".to_string();
                if self.cfg.unterminated_reasoning {
                    out.push(Event::warning(WarningKind::UnterminatedReasoning, msg));
                } else {
                    out.push(Event::error(ErrorKind::Unterminated, msg));
                }
            }
        }
        self.inner.finish(out);
        self.state = Self::start_state(&self.cfg);
        self.utf8 = Utf8Decoder::new();
        self.pos = 0;
        self.call_reported = false;
        self.at_start = true;
        self.after_call = false;
    }

    fn at_text(&self) -> bool {
        self.state == State::Outside && self.held.is_empty() && self.inner.at_text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::run_chunks;

    /// A format whose every byte is text, with `<call>` as its one call marker.
    struct Plain;
    impl StreamParser for Plain {
        fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
            out.text(&String::from_utf8_lossy(chunk));
        }
        fn finish(&mut self, _out: &mut dyn Sink) {}
        fn at_text(&self) -> bool {
            true
        }
    }

    static SYNTAX: Syntax = Syntax {
        pairs: &[("<think>", "</think>"), ("◁think▷", "◁/think▷")],
        call_markers: &["<call>"],
        on_by_default: true,
        call_ends: &[],
    };

    fn parse_cfg(cfg: Config, s: &str) -> ParseResult {
        let b = s.as_bytes();
        let whole = {
            let mut p = Reasoned::new(Plain, &SYNTAX, cfg);
            ParseResult::fold(&run_chunks(&mut p, [b]))
        };
        let kinds = |r: &ParseResult| -> Vec<String> {
            r.warnings.iter().map(|w| w.kind.clone()).collect()
        };
        let mut p = Reasoned::new(Plain, &SYNTAX, cfg);
        let by_byte = ParseResult::fold(&run_chunks(&mut p, b.chunks(1)));
        assert_eq!(by_byte, whole, "byte by byte: {s:?}");
        assert_eq!(kinds(&by_byte), kinds(&whole));
        for cut in 1..b.len() {
            let mut p = Reasoned::new(Plain, &SYNTAX, cfg);
            let r = ParseResult::fold(&run_chunks(&mut p, [&b[..cut], &b[cut..]]));
            assert_eq!(r, whole, "cut at {cut}: {s:?}");
            assert_eq!(kinds(&r), kinds(&whole), "cut at {cut}");
        }
        whole
    }

    fn parse(s: &str) -> ParseResult {
        parse_cfg(Config::default(), s)
    }

    fn warnings(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn a_block_is_reasoning_and_the_rest_text() {
        let r = parse("<think>plan é</think>\nanswer");
        assert_eq!(r.reasoning_text(), "plan é");
        assert_eq!(r.text, "\nanswer");
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn each_pair_closes_with_its_own_tag() {
        let r = parse("◁think▷a</think>b◁/think▷c");
        assert_eq!(r.reasoning_text(), "a</think>b");
        assert_eq!(r.text, "c");
    }

    #[test]
    fn empty_reasoning_is_no_reasoning() {
        let r = parse("<think></think>x");
        assert_eq!(r.reasoning_text(), "");
        assert_eq!(r.text, "x");
    }

    #[test]
    fn an_unterminated_block_stays_reasoning_with_a_warning() {
        let r = parse("<think>still thinking</thi");
        assert_eq!(r.reasoning_text(), "still thinking</thi");
        assert_eq!(r.text, "");
        assert_eq!(warnings(&r), ["unterminated_reasoning"]);
        let strict = Config {
            unterminated_reasoning: false,
            ..Config::default()
        };
        let r = parse_cfg(strict, "<think>x");
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
        assert_eq!(r.reasoning_text(), "x");
    }

    #[test]
    fn starting_inside_ends_at_any_close_tag() {
        let cfg = Config {
            starts_inside: true,
            ..Config::default()
        };
        let r = parse_cfg(cfg, "prefilled◁/think▷answer");
        assert_eq!(r.reasoning_text(), "prefilled");
        assert_eq!(r.text, "answer");
    }

    #[test]
    fn a_stray_close_is_dropped_with_a_warning() {
        let r = parse("thought</think>answer");
        assert_eq!(r.text, "thoughtanswer");
        assert_eq!(warnings(&r), ["stray_reasoning_end"]);
        let strict = Config {
            stray_reasoning_end: false,
            ..Config::default()
        };
        assert_eq!(
            parse_cfg(strict, "a</think>b").error_kinds(),
            [ErrorKind::MalformedMarkup]
        );
    }

    #[test]
    fn a_call_inside_reasoning_is_reported_once_per_block_and_stays_reasoning() {
        let r = parse("<think>maybe <call>x <call>y</think><think><call></think>");
        assert_eq!(r.reasoning_text(), "maybe <call>x <call>y<call>");
        assert_eq!(warnings(&r), ["call_in_reasoning", "call_in_reasoning"]);
        let strict = Config {
            call_in_reasoning: false,
            ..Config::default()
        };
        let r = parse_cfg(strict, "<think><call></think>");
        assert_eq!(r.error_kinds(), [ErrorKind::MalformedMarkup]);
    }

    /// Gemma 4's shape: the canonical open tag carries a label a bare open tag lacks.
    static LABELLED: Syntax = Syntax {
        pairs: &[("<c>thought\n", "</c>"), ("<c>", "</c>")],
        call_markers: &["<call>"],
        on_by_default: true,
        call_ends: &[],
    };

    fn parse_labelled(s: &str) -> ParseResult {
        let b = s.as_bytes();
        let run = |chunks: Vec<&[u8]>| {
            let mut p = Reasoned::new(Plain, &LABELLED, Config::default());
            ParseResult::fold(&run_chunks(&mut p, chunks))
        };
        let whole = run(vec![b]);
        assert_eq!(run(b.chunks(1).collect()), whole, "byte by byte: {s:?}");
        for cut in 1..b.len() {
            assert_eq!(
                run(vec![&b[..cut], &b[cut..]]),
                whole,
                "cut at {cut}: {s:?}"
            );
        }
        whole
    }

    #[test]
    fn the_longest_tag_wins_and_a_shorter_one_only_once_no_longer_one_can() {
        let r = parse_labelled("a<c>thought\nplan</c>b");
        assert_eq!((r.reasoning_text(), r.text.as_str()), ("plan", "ab"));
        // Not the label: the bare open tag, and what follows is reasoning.
        let r = parse_labelled("<c>thoughtful</c>b");
        assert_eq!((r.reasoning_text(), r.text.as_str()), ("thoughtful", "b"));
        let r = parse_labelled("<c>plan</c>");
        assert_eq!(r.reasoning_text(), "plan");
        // Cut short by the end of the turn: the bare tag opened, the rest is reasoning.
        let r = parse_labelled("x<c>though");
        assert_eq!((r.reasoning_text(), r.text.as_str()), ("though", "x"));
        assert_eq!(warnings(&r), ["unterminated_reasoning"]);
        let r = parse_labelled("x<c");
        assert_eq!((r.reasoning_text(), r.text.as_str()), ("", "x<c"));
    }

    #[test]
    fn an_adaptive_start_drops_a_first_close_silently_and_only_first() {
        let cfg = Config {
            adaptive_start: true,
            ..Config::default()
        };
        let r = parse_cfg(cfg, "</think>answer");
        assert_eq!(r.text, "answer");
        assert!(r.warnings.is_empty());
        // Whitespace before it is still the start, and stays text.
        let r = parse_cfg(cfg, " \n</think>answer");
        assert_eq!(r.text, " \nanswer");
        assert!(r.warnings.is_empty());
        // Anything else before it, or a second one, makes it stray.
        for s in ["a</think>", "</think></think>", "<think>x</think></think>"] {
            assert_eq!(warnings(&parse_cfg(cfg, s)), ["stray_reasoning_end"], "{s}");
        }
        // Off (the default), the first close is stray too.
        assert_eq!(warnings(&parse("</think>a")), ["stray_reasoning_end"]);
    }

    #[test]
    fn an_implicit_end_closes_the_block_at_a_call_marker() {
        let cfg = Config {
            implicit_reasoning_end: true,
            ..Config::default()
        };
        let r = parse_cfg(cfg, "<think>plan <call>args");
        assert_eq!(r.reasoning_text(), "plan ");
        assert_eq!(r.text, "<call>args");
        assert_eq!(warnings(&r), ["implicit_reasoning_end"]);
        // From a prompt that opened the block too.
        let inside = Config {
            starts_inside: true,
            ..cfg
        };
        let r = parse_cfg(inside, "plan<call>x");
        assert_eq!((r.reasoning_text(), r.text.as_str()), ("plan", "<call>x"));
    }

    #[test]
    fn a_native_call_end_needs_no_option_and_warns_nothing() {
        let inside = Config {
            starts_inside: true,
            ..Config::default()
        };
        let b = "plé<call>x</think>".as_bytes();
        let run = |chunks: &[&[u8]]| {
            let mut p = Reasoned::new(Plain, &SYNTAX, inside).calls_end_reasoning(true);
            ParseResult::fold(&run_chunks(&mut p, chunks.iter().copied()))
        };
        let whole = run(&[b]);
        for cut in 1..b.len() {
            assert_eq!(run(&[&b[..cut], &b[cut..]]), whole, "cut at {cut}");
        }
        // Outside again after the call marker: a later close is stray.
        assert_eq!(whole.reasoning_text(), "plé");
        assert_eq!(whole.text, "<call>x");
        assert_eq!(warnings(&whole), ["stray_reasoning_end"]);
        let mut p = Reasoned::new(Plain, &SYNTAX, Config::default()).calls_end_reasoning(true);
        let r = ParseResult::fold(&run_chunks(&mut p, [&b"<think>a<call>b"[..]]));
        assert_eq!((r.reasoning_text(), r.text.as_str()), ("a", "<call>b"));
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn near_tags_are_text_and_disabled_is_transparent() {
        let r = parse("<thin <think <<think>>");
        assert_eq!(r.text, "<thin <think <");
        assert_eq!(r.reasoning_text(), ">");
        let off = Config {
            enabled: false,
            ..Config::default()
        };
        let r = parse_cfg(off, "<think>a</think>");
        assert_eq!(r.text, "<think>a</think>");
    }

    #[test]
    fn invalid_utf8_in_reasoning_is_replaced_and_reported() {
        let mut p = Reasoned::new(Plain, &SYNTAX, Config::default());
        let r = ParseResult::fold(&run_chunks(&mut p, [&b"<think>a\xE2\x97"[..], b"</think>"]));
        assert_eq!(r.reasoning_text(), "a\u{FFFD}");
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidUtf8]);
    }

    /// A format that is never at text: tags are its content.
    struct Opaque;
    impl StreamParser for Opaque {
        fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
            out.text(&String::from_utf8_lossy(chunk));
        }
        fn finish(&mut self, _out: &mut dyn Sink) {}
    }

    #[test]
    fn tags_count_only_where_the_format_reads_text() {
        let mut p = Reasoned::new(Opaque, &SYNTAX, Config::default());
        let r = ParseResult::fold(&run_chunks(&mut p, [&b"<think>a</think>"[..]]));
        assert_eq!(r.text, "<think>a</think>");
        assert_eq!(r.reasoning_text(), "");
    }
}
