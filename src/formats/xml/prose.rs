//! Plumbing shared by the formats that embed XML-ish tool markup in prose (roo_xml,
//! strict_xml): bytes → UTF-8 → the shared XML tokenizer → a format's token handler.

use crate::event::{Event, Sink};
use crate::lexers::markdown::CodeTracker;
use crate::lexers::push_bytes;
pub(crate) use crate::lexers::push_piece;
use crate::lexers::utf8::{JOIN_BUF, Utf8Decoder, Utf8Piece};
use crate::lexers::xml::{Ctl, EntityMode, RawUntil, Token, XmlConfig, XmlErrorKind, XmlTokenizer};

/// A format's reaction to tokens; it may switch the tokenizer's mode through the returned
/// [`Ctl`].
pub(crate) trait TokenHandler {
    /// Handles one token at stream offset `at`.
    fn token(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl;
    /// The turn state shared by these formats.
    fn turn(&mut self) -> &mut Turn;
    /// Reports what the end of the turn left open and resets the turn (after the tokenizer's
    /// last tokens).
    fn end_turn(&mut self, out: &mut dyn Sink);
    /// Reports an invalid UTF-8 sequence at `offset` (a U+FFFD is fed as text right after).
    fn invalid_utf8(&mut self, offset: u64, out: &mut dyn Sink) {
        out.push(Event::invalid_utf8(offset));
    }
    /// True when content text in the current state may wait for more input before it is
    /// handled: it changes no tokenizer mode, and what it gives is sent in batches anyway
    /// (strict_xml's JSON body). The driver then holds such chunks, up to [`WAIT_MAX`] bytes.
    #[inline(always)]
    fn may_wait(&self) -> bool {
        false
    }
}

/// The most bytes [`XmlDriver`] holds for a handler whose text may wait: a chunk that would
/// pass the limit, or may start the close, is handled at once, with what waited before it.
pub(crate) const WAIT_MAX: usize = 1024;

/// UTF-8 reassembly plus the tokenizer in raw entity mode, with no depth limit (prose is
/// full of unclosed tags and these formats never nest).
pub(crate) struct XmlDriver {
    utf8: Utf8Decoder,
    tok: XmlTokenizer,
    /// Chunks held while the handler's text may wait ([`TokenHandler::may_wait`]): content
    /// whole or in a few large pieces costs a fraction of content in many small ones.
    waiting: Vec<u8>,
    /// How many bytes of the tokenizer's close `waiting` ends with.
    partial: usize,
}

impl XmlDriver {
    /// A driver at the start of a stream.
    pub(crate) fn new() -> Self {
        XmlDriver {
            utf8: Utf8Decoder::new(),
            tok: XmlTokenizer::new(XmlConfig {
                entities: EntityMode::Raw,
                max_depth: usize::MAX,
                ..XmlConfig::default()
            }),
            waiting: Vec::new(),
            partial: 0,
        }
    }

    /// Feeds one chunk of bytes.
    #[inline(always)]
    pub(crate) fn feed<H: TokenHandler>(&mut self, chunk: &[u8], h: &mut H, out: &mut dyn Sink) {
        if h.may_wait() {
            if self.waiting.len() + chunk.len() <= WAIT_MAX
                && let Some(partial) = self.tok.content_ahead(self.partial, chunk)
            {
                self.partial = partial;
                push_bytes(&mut self.waiting, chunk);
                return;
            }
            self.feed_waiting(h, out);
        }
        self.feed_now(chunk, h, out);
    }

    /// Hands the held chunks on, if any.
    #[inline(never)]
    fn feed_waiting<H: TokenHandler>(&mut self, h: &mut H, out: &mut dyn Sink) {
        if !self.waiting.is_empty() {
            let w = std::mem::take(&mut self.waiting);
            self.feed_now(&w, h, out);
            self.waiting = w;
            self.waiting.clear();
            self.partial = 0;
        }
    }

    /// Feeds one chunk through the decoder and the tokenizer.
    #[inline(always)]
    fn feed_now<H: TokenHandler>(&mut self, chunk: &[u8], h: &mut H, out: &mut dyn Sink) {
        let XmlDriver { utf8, tok, .. } = self;
        // A short chunk that cuts a character is one piece too (joined with the held bytes
        // here), not two through the decoder's general path; one call site of the token loop.
        let mut buf = [0u8; JOIN_BUF];
        let s = if let Some(s) = utf8.ascii(chunk) {
            s
        } else if let Some(s) = utf8.joined(chunk, &mut buf) {
            s
        } else {
            return utf8.feed(chunk, &mut |p| piece(tok, p, h, out));
        };
        tok.feed(s, &mut |t, at| h.token(t, at, out));
    }

    /// Ends the turn: the handler is told it is finishing, the decoder and the tokenizer
    /// (which is then ready for the next turn) are flushed, and the handler ends the turn.
    pub(crate) fn finish<H: TokenHandler>(&mut self, h: &mut H, out: &mut dyn Sink) {
        self.feed_waiting(h, out);
        h.turn().finishing = true;
        let XmlDriver { utf8, tok, .. } = self;
        utf8.finish(&mut |p| piece(tok, p, h, out));
        tok.finish(&mut |t, at| h.token(t, at, out));
        h.end_turn(out);
    }
}

/// The registry entry of a format of this family, in the format's module: `FORMAT` (with
/// the module's `render` and `markers`), its option table (`Parser::new` with a `Config`),
/// and the default parser.
macro_rules! prose_format {
    ($id:literal, $summary:literal) => {
        fn new_parser(tools: &Tools) -> Box<dyn StreamParser> {
            Box::new(Parser::new(Config::default(), tools))
        }

        #[doc = concat!("The ", $id, " format's options, for `--option ", $id, ".NAME=…` and `conform.toml`.")]
        static OPTION_TABLE: $crate::formats::options::Table<Config> =
            $crate::formats::options::Table::new(Config::default, Config::OPTIONS, |c, t| {
                Box::new(Parser::new(c, t))
            });

        #[doc = concat!("The ", $id, " format.")]
        pub static FORMAT: $crate::formats::Format = $crate::formats::Format {
            render: Some(render),
            ..$crate::formats::Format::new($id, $summary, new_parser, markers, &OPTION_TABLE)
        };
    };
}
pub(crate) use prose_format;

/// A parser of one of these formats: the driver and the format's token handler.
pub(crate) struct ProseParser<H> {
    driver: XmlDriver,
    /// The format's handler and state.
    pub(crate) core: H,
}

impl<H: TokenHandler> ProseParser<H> {
    /// A parser at the start of a stream.
    pub(crate) fn new(core: H) -> Self {
        ProseParser {
            driver: XmlDriver::new(),
            core,
        }
    }

    /// [`StreamParser::feed`](crate::formats::StreamParser::feed).
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        self.driver.feed(chunk, &mut self.core, out);
    }

    /// [`StreamParser::finish`](crate::formats::StreamParser::finish).
    pub(crate) fn finish(&mut self, out: &mut dyn Sink) {
        self.driver.finish(&mut self.core, out);
    }
}

/// The per-turn state these formats share: visible text and the Markdown code it may open,
/// call numbering, and the tag a turn's end may cut.
pub(crate) struct Turn {
    /// Whether visible text is inside Markdown code (where tags are inert).
    pub(crate) md: CodeTracker,
    /// The index the next call gets.
    pub(crate) next_index: usize,
    /// The tokenizer is flushing the end of the turn.
    pub(crate) finishing: bool,
    /// A tag cut by the end of the turn (from its `<`), and whether it was live.
    pub(crate) tail: Option<(String, bool)>,
}

impl Turn {
    /// The state at the start of a turn.
    pub(crate) fn new() -> Turn {
        Turn {
            md: CodeTracker::new(),
            next_index: 0,
            finishing: false,
            tail: None,
        }
    }

    /// Visible text: to the sink, and to the code tracker.
    pub(crate) fn text(&mut self, s: &str, out: &mut dyn Sink) {
        out.text(s);
        self.md.push(s);
    }

    /// A prose token that opens nothing: its text is visible, and a tag cut by the end of
    /// the turn is kept (with the text after it, bounded: only a prefix of a tool tag
    /// matters) for [`Turn::cut_tool_tag`].
    pub(crate) fn prose_token(&mut self, t: Token<'_>, out: &mut dyn Sink) {
        match t {
            Token::Error {
                kind: XmlErrorKind::Truncated,
                raw,
            } if self.finishing => {
                let live = !self.md.in_code();
                self.tail = Some((raw.to_string(), live));
                self.text(raw, out);
            }
            Token::Text(s) => {
                if let Some((tail, _)) = &mut self.tail
                    && tail.len() < 4096
                {
                    tail.push_str(s);
                }
                self.text(s, out);
            }
            _ => self.text(raw_of(&t), out),
        }
    }

    /// A token inside a reasoning block (read raw until its close): all of it is visible
    /// text. True for the close, which ends the block.
    pub(crate) fn reasoning_token(&mut self, t: Token<'_>, out: &mut dyn Sink) -> bool {
        self.text(raw_of(&t), out);
        matches!(t, Token::End { .. })
    }

    /// The message for a live tool tag of `names` cut by the end of the turn, if there is one.
    pub(crate) fn cut_tool_tag<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Option<String> {
        match &self.tail {
            Some((tail, true)) if is_cut_tool_tag(tail, names) => {
                Some(format!("turn ended inside the tool tag {tail:?}"))
            }
            _ => None,
        }
    }

    /// Ready for the next turn.
    pub(crate) fn reset(&mut self) {
        *self = Turn::new();
    }
}

fn piece<H: TokenHandler>(tok: &mut XmlTokenizer, p: Utf8Piece<'_>, h: &mut H, out: &mut dyn Sink) {
    match p {
        Utf8Piece::Text(s) => {
            tok.feed(s, &mut |t, at| h.token(t, at, out));
        }
        Utf8Piece::Invalid { offset } => {
            h.invalid_utf8(offset, out);
            tok.feed("\u{FFFD}", &mut |t, at| h.token(t, at, out));
        }
    }
}

/// The exact source text of a token (empty for `Eof` and for errors that cover nothing).
pub(crate) fn raw_of<'a>(t: &Token<'a>) -> &'a str {
    match *t {
        Token::Text(s) | Token::SectionText(_, s) => s,
        Token::Start { raw, .. } | Token::End { raw, .. } | Token::Error { raw, .. } => raw,
        Token::SectionStart(sec) => sec.open(),
        Token::SectionEnd(sec) => sec.close(),
        Token::Eof { .. } => "",
    }
}

/// True when a start tag is exactly `<name>`: no attribute, no whitespace, not self-closing.
pub(crate) fn is_bare_start(name: &str, raw: &str) -> bool {
    raw.len() == name.len() + 2 && raw.starts_with('<') && raw.ends_with('>')
}

/// True when an end tag is exactly `</name>`.
pub(crate) fn is_bare_end(name: &str, raw: &str) -> bool {
    raw.len() == name.len() + 3 && raw.starts_with("</") && raw.ends_with('>')
}

/// True for the whitespace the XML formats skip between elements (CRLF included).
pub(crate) fn is_xml_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// A control answer that makes everything up to `</name>` raw text.
pub(crate) fn raw_until(name: &str) -> Ctl {
    Ctl {
        raw_until: Some(RawUntil::EndTag(name.to_string())),
        ..Ctl::go()
    }
}

/// True when `tail` (held back at the end of a turn, starting with `<`) is a proper prefix of
/// `<name>` for one of `names`, with at least one name character: a tool tag cut off.
pub(crate) fn is_cut_tool_tag<'a>(tail: &str, names: impl IntoIterator<Item = &'a str>) -> bool {
    let Some(rest) = tail.strip_prefix('<') else {
        return false;
    };
    !rest.is_empty()
        && names
            .into_iter()
            .any(|n| n.len() + 1 > rest.len() && format!("{n}>").starts_with(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_tool_tags_are_recognised() {
        let names = ["read_file", "write_to_file"];
        assert!(is_cut_tool_tag("<read_fi", names));
        assert!(is_cut_tool_tag("<read_file", names));
        assert!(!is_cut_tool_tag("<", names));
        assert!(!is_cut_tool_tag("<foo", names));
        assert!(!is_cut_tool_tag("<read_file>", names));
    }

    #[test]
    fn bare_tags() {
        assert!(is_bare_start("a", "<a>"));
        assert!(!is_bare_start("a", "<a >"));
        assert!(!is_bare_start("a", "<a/>"));
        assert!(is_bare_end("a", "</a>"));
        assert!(!is_bare_end("a", "</a >"));
    }
}

/// Replays a format's corpus directory until the harness lands: every case at every cut,
/// expectations checked as `specs/corpus.md` defines them (session cases included).
#[cfg(test)]
pub(crate) mod corpus_check {
    use crate::event::{ParseResult, ToolCall};
    use crate::formats::core::testkit::every_cut;
    use crate::formats::{StreamParser, run_chunks};
    use crate::tools::Tools;
    use serde_json::Value;
    use std::path::Path;

    fn check_expect(id: &str, r: &ParseResult, e: &Value) {
        if e.is_null() {
            return;
        }
        if let Some(t) = e.get("text") {
            assert_eq!(Some(r.text.as_str()), t.as_str(), "{id}: text");
        }
        if let Some(c) = e.get("calls") {
            let want: Vec<ToolCall> = serde_json::from_value(c.clone()).expect("calls");
            assert_eq!(r.calls, want, "{id}: calls");
        }
        match e.get("error") {
            Some(Value::Null) => assert!(r.errors.is_empty(), "{id}: errors {:?}", r.errors),
            Some(k) => {
                let kind = k.get("kind").and_then(Value::as_str).expect("error.kind");
                assert!(
                    r.error_kinds().iter().any(|x| x.as_str() == kind),
                    "{id}: expected {kind}, got {:?}",
                    r.errors
                );
            }
            None => {}
        }
        if let Some(list) = e.get("errors") {
            let got: Vec<&str> = r.error_kinds().iter().map(|k| k.as_str()).collect();
            let want: Vec<&str> = list
                .as_array()
                .expect("errors")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert_eq!(got, want, "{id}: error kinds");
        }
        if let Some(list) = e.get("warnings") {
            let got: Vec<&str> = r.warnings.iter().map(|w| w.kind.as_str()).collect();
            let want: Vec<&str> = list
                .as_array()
                .expect("warnings")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert_eq!(got, want, "{id}: warnings");
        }
    }

    fn label(id: &str, r: &[ParseResult]) {
        let any_err = r.iter().any(|x| !x.errors.is_empty());
        if id.starts_with("y_") {
            assert!(!any_err, "{id}: y_ case has errors {r:?}");
        } else if id.starts_with("n_") {
            assert!(any_err, "{id}: n_ case has no error");
        }
    }

    /// Checks every case of `dir`; returns how many cases ran.
    pub(crate) fn check_corpus(dir: &str, make: fn(&Tools) -> Box<dyn StreamParser>) -> usize {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let tools = Tools::from_json(&std::fs::read_to_string(dir.join("tools.json")).unwrap())
            .expect("tools.json");
        let mut n = 0;
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let file = p.file_name().unwrap().to_string_lossy().to_string();
            if let Some(id) = file.strip_suffix(".txt") {
                let bytes = std::fs::read(&p).unwrap();
                let (r, _) = every_cut(&|| make(&tools), &bytes);
                label(id, std::slice::from_ref(&r));
                let ep = dir.join(format!("{id}.expect.json"));
                if let Ok(s) = std::fs::read_to_string(&ep) {
                    let e: Value = serde_json::from_str(&s).expect("expect.json");
                    check_expect(id, &r, &e);
                } else {
                    assert!(!id.starts_with("y_"), "{id}: y_ case without expectation");
                }
                n += 1;
            } else if let Some(id) = file.strip_suffix(".session.json") {
                let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                    .expect("session json");
                let turns: Vec<&str> = v["turns"]
                    .as_array()
                    .expect("turns")
                    .iter()
                    .map(|t| t.as_str().expect("turn"))
                    .collect();
                let expect = v["expect"].as_array().expect("expect");
                assert_eq!(turns.len(), expect.len(), "{id}: turns/expect length");
                let per_turn = |bytewise: bool| {
                    let mut p = make(&tools);
                    turns
                        .iter()
                        .map(|t| {
                            let b = t.as_bytes();
                            let evs = if bytewise {
                                run_chunks(p.as_mut(), b.chunks(1))
                            } else {
                                run_chunks(p.as_mut(), [b])
                            };
                            crate::formats::core::testkit::check_delta_contract(&evs);
                            ParseResult::fold(&evs)
                        })
                        .collect::<Vec<_>>()
                };
                let whole = per_turn(false);
                assert_eq!(whole, per_turn(true), "{id}: byte-by-byte differs");
                label(id, &whole);
                for (k, (r, e)) in whole.iter().zip(expect).enumerate() {
                    check_expect(&format!("{id} turn {}", k + 1), r, e);
                }
                n += 1;
            } else if file.ends_with(".jsonl") {
                for line in std::fs::read_to_string(&p).unwrap().lines() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let v: Value = serde_json::from_str(line).expect("jsonl line");
                    let id = v["id"].as_str().expect("id").to_string();
                    let t = v["transcript"].as_str().expect("transcript");
                    let (r, _) = every_cut(&|| make(&tools), t.as_bytes());
                    if let Some(e) = v.get("expect") {
                        check_expect(&id, &r, e);
                    }
                    n += 1;
                }
            }
        }
        n
    }
}
