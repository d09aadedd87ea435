//! A push-based, linear, streaming XML tokenizer shared by the XML-family formats.
//!
//! The host decodes bytes with [`crate::lexers::utf8::Utf8Decoder`] and feeds `&str` chunks cut
//! anywhere. The tokenizer hands each [`Token`] to a sink closure as soon as it is decided, with
//! the stream byte offset of its first byte; the sink answers with a [`Ctl`] that may switch the
//! tokenizer's mode for the bytes that follow. It holds back only an incomplete construct: a
//! partial tag (bounded by [`XmlConfig::max_tag_bytes`]), a partial reference such as `&am`
//! (at most 32 bytes), a trailing `]`/`]]`, or a partial close delimiter such as `]]`. Text,
//! CDATA, comment and raw content **stream** in pieces (one per chunk at most), so a 10 MB CDATA
//! section is never buffered here. Every byte is scanned at most twice.
//!
//! # Tokens
//!
//! - [`Token::Text`]: character data, possibly one piece of a longer run. In
//!   [`EntityMode::Decode`] a valid reference arrives as its own `Text` piece holding the decoded
//!   character(s); in [`EntityMode::Raw`] `&` is ordinary text and nothing is decoded.
//! - [`Token::Start`] (with parsed attributes and `self_closing`), [`Token::End`]: tags, with
//!   their exact `raw` text so a host may turn them back into prose.
//! - [`Token::SectionStart`] / [`Token::SectionText`] / [`Token::SectionEnd`]: CDATA sections
//!   (`<![CDATA[`…`]]>`), comments (`<!--`…`-->`), processing instructions (`<?`…`?>`) and
//!   declarations (`<!DOCTYPE`…`>`; an internal subset is not supported: the first `>` ends it).
//!   `]]]]><![CDATA[>` yields two CDATA sections with content `]]` and `>`; the host concatenates.
//! - [`Token::Error`]: input that is not well-formed; `raw` is the literal text the tokenizer
//!   resynchronised past, so a lenient host can keep it as text. Kinds: a `<` that does not
//!   begin a tag/CDATA/comment/PI/declaration ([`XmlErrorKind::StrayLt`]; the rest is rescanned
//!   as text, so `if a < b` is text plus one `StrayLt`), a bare `&` ([`XmlErrorKind::BareAmp`]),
//!   an unknown entity like `&nbsp;` ([`XmlErrorKind::UnknownEntity`]), a character reference to
//!   a code point XML forbids like `&#0;` or `&#xD800;` ([`XmlErrorKind::InvalidCharRef`]), `]]>`
//!   in text ([`XmlErrorKind::StrayCDataEnd`]), a tag nested deeper than
//!   [`XmlConfig::max_depth`] ([`XmlErrorKind::DepthLimit`]; `raw` is the tag, no `Start` is
//!   emitted), a tag longer than [`XmlConfig::max_tag_bytes`] ([`XmlErrorKind::TagTooLong`]; its
//!   `<` becomes text), a tag or reference cut by the end of the stream
//!   ([`XmlErrorKind::Truncated`]; `raw` is its first byte, the rest is rescanned as text), and
//!   a section still open at [`XmlTokenizer::finish`] ([`XmlErrorKind::Unclosed`]). Errors
//!   never stop the tokenizer.
//! - [`Token::Eof`]: emitted by `finish`, with the open-element depth left.
//!
//! # Modes (set by the host through [`Ctl`])
//!
//! - **Entities**: [`EntityMode::Decode`] (predefined entities and numeric references decoded)
//!   or [`EntityMode::Raw`] (`2&gt;/dev/null` stays literal).
//! - **Lenient text** is always on: a `<` that cannot begin markup is reported as `StrayLt` and
//!   kept as text; the host decides whether that is an error.
//! - **Raw-until**: [`Ctl::raw_until`] makes everything up to the next close string plain
//!   [`Token::Text`] (no tags, no references, no CDATA); the close may be split across chunks.
//!   [`RawUntil::EndTag`] closes with a [`Token::End`] (and pops the depth),
//!   [`RawUntil::Literal`] with `SectionEnd(Section::Raw)`.
//! - **Depth**: the tokenizer counts open elements for the limit but never checks that end names
//!   match; [`Ctl::depth`] lets a host reset the count (prose is full of unclosed `<br>`).
//! - **Pause**: [`Ctl::pause`] after a `Start`/`End` makes [`XmlTokenizer::feed`] return the
//!   number of bytes consumed so the host can read the following bytes itself (for example a
//!   JSON body) and resume with [`XmlTokenizer::skip`] + `feed`.
//!
//! Offsets count the UTF-8 bytes fed (over the tokenizer's whole life, across `finish`).

use super::has_byte;
use memchr::memmem;

/// How references (`&…;`) in text and attribute values are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntityMode {
    /// Decode the five predefined entities and numeric character references.
    Decode,
    /// Keep `&` literally: references are ordinary text.
    Raw,
}

/// Tokenizer settings; hosts may change the entity mode and depth later through [`Ctl`].
#[derive(Debug, Clone)]
pub struct XmlConfig {
    /// Initial entity handling.
    pub entities: EntityMode,
    /// Maximum open-element depth; a deeper start tag gives [`XmlErrorKind::DepthLimit`].
    pub max_depth: usize,
    /// Maximum bytes of one tag (or `<!`/`<?` opening) held back while incomplete.
    pub max_tag_bytes: usize,
}

impl Default for XmlConfig {
    fn default() -> Self {
        XmlConfig {
            entities: EntityMode::Decode,
            max_depth: 256,
            max_tag_bytes: 16 * 1024,
        }
    }
}

/// A construct whose content is streamed between a start and an end token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `<![CDATA[` … `]]>`.
    CData,
    /// `<!--` … `-->`.
    Comment,
    /// `<?` … `?>` (the content starts with the target).
    Pi,
    /// `<!` letter … `>` (such as `<!DOCTYPE x>`; the content starts with the letter).
    Decl,
    /// Host-requested raw text closed by a literal ([`RawUntil::Literal`]).
    Raw,
}

impl Section {
    /// The literal that opens the section (empty for `Raw`, which the host opens).
    pub fn open(self) -> &'static str {
        match self {
            Section::CData => "<![CDATA[",
            Section::Comment => "<!--",
            Section::Pi => "<?",
            Section::Decl => "<!",
            Section::Raw => "",
        }
    }

    /// The literal that closes the section (empty for `Raw`, closed by the host's literal).
    pub fn close(self) -> &'static str {
        match self {
            Section::CData => "]]>",
            Section::Comment => "-->",
            Section::Pi => "?>",
            Section::Decl => ">",
            Section::Raw => "",
        }
    }
}

/// One attribute of a start tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// The attribute name.
    pub name: String,
    /// The value, with references decoded in [`EntityMode::Decode`] (invalid ones kept literal).
    pub value: String,
}

/// What kind of ill-formed input an [`Token::Error`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum XmlErrorKind {
    /// A `<` that does not begin markup (also an incomplete tag at `finish`).
    StrayLt,
    /// A `&` that does not begin a syntactically valid reference.
    BareAmp,
    /// A well-formed named reference that is not one of the five predefined entities.
    UnknownEntity,
    /// A numeric character reference to a code point XML does not allow.
    InvalidCharRef,
    /// `]]>` in text (outside CDATA).
    StrayCDataEnd,
    /// A start tag beyond the depth limit.
    DepthLimit,
    /// A tag longer than `max_tag_bytes`.
    TagTooLong,
    /// The stream ended inside a tag or reference (`raw` is its `<` or `&`; the rest is
    /// rescanned as text).
    Truncated,
    /// The stream ended inside a section.
    Unclosed(Section),
}

impl XmlErrorKind {
    /// A human-readable description.
    pub fn message(self) -> &'static str {
        match self {
            XmlErrorKind::StrayLt => "'<' does not begin markup",
            XmlErrorKind::BareAmp => "'&' does not begin a reference",
            XmlErrorKind::UnknownEntity => "unknown entity",
            XmlErrorKind::InvalidCharRef => "character reference to a forbidden code point",
            XmlErrorKind::StrayCDataEnd => "']]>' outside CDATA",
            XmlErrorKind::DepthLimit => "element nesting exceeds the depth limit",
            XmlErrorKind::TagTooLong => "tag exceeds the length limit",
            XmlErrorKind::Truncated => "stream ended inside a tag or reference",
            XmlErrorKind::Unclosed(_) => "stream ended inside a section",
        }
    }
}

/// One token, handed to the sink with its stream byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token<'a> {
    /// Character data (one piece of a possibly longer run).
    Text(&'a str),
    /// A start tag, or an empty-element tag when `self_closing`.
    Start {
        /// The element name.
        name: &'a str,
        /// The attributes in order.
        attrs: &'a [Attr],
        /// True for `<name/>`.
        self_closing: bool,
        /// The exact tag text.
        raw: &'a str,
    },
    /// An end tag (names are not checked against start tags).
    End {
        /// The element name.
        name: &'a str,
        /// The exact tag text.
        raw: &'a str,
    },
    /// A section opens.
    SectionStart(Section),
    /// One piece of a section's content.
    SectionText(Section, &'a str),
    /// A section closes.
    SectionEnd(Section),
    /// Ill-formed input; `raw` is the literal text it covers.
    Error {
        /// What is wrong.
        kind: XmlErrorKind,
        /// The literal text concerned.
        raw: &'a str,
    },
    /// End of stream (from `finish`), with the open-element depth left.
    Eof {
        /// Elements still open.
        depth: usize,
    },
}

/// Where host-requested raw text ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawUntil {
    /// At the literal `</NAME>`, reported as [`Token::End`].
    EndTag(String),
    /// At this literal string, reported as `SectionEnd(Section::Raw)`.
    Literal(String),
}

/// The sink's answer to a token: mode changes for the bytes that follow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ctl {
    /// Switch entity handling.
    pub entities: Option<EntityMode>,
    /// Treat what follows as raw text up to this close.
    pub raw_until: Option<RawUntil>,
    /// Reset the open-element depth.
    pub depth: Option<usize>,
    /// Stop after this `Start`/`End` token: `feed` returns the bytes consumed.
    pub pause: bool,
}

impl Ctl {
    /// Carry on unchanged.
    pub fn go() -> Ctl {
        Ctl::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TagSt {
    Name,
    Space { ws: bool },
    AttrName,
    AfterAttrName,
    AfterEq,
    Value(u8),
    SelfClose,
    EndFirst,
    EndName,
    EndSpace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Text,
    /// `n` trailing `]` held (1 or 2).
    Rb(u8),
    Amp,
    Lt,
    Tag(TagSt),
    Bang,
    BangDash,
    BangCData(u8),
    PiStart,
    Until(Section),
}

const MAX_REF: usize = 32;

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':' || b >= 0x80
}

fn is_name_char(b: u8) -> bool {
    is_name_start(b) || b.is_ascii_digit() || b == b'-' || b == b'.'
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_ref_byte(b: u8) -> bool {
    is_name_char(b) || b == b'#'
}

/// True for code points the XML 1.0 `Char` production allows.
fn xml_char_ok(c: u32) -> bool {
    matches!(c, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

/// The outcome of a complete `&body;` reference.
enum RefOutcome {
    Char(char),
    Predefined(&'static str),
    Unknown,
    InvalidChar,
    Bare,
}

fn classify_ref(body: &str) -> RefOutcome {
    if let Some(num) = body.strip_prefix('#') {
        let (digits, radix) = match num.strip_prefix('x') {
            Some(h) => (h, 16),
            None => (num, 10),
        };
        let ok = !digits.is_empty()
            && digits.bytes().all(|b| {
                if radix == 16 {
                    b.is_ascii_hexdigit()
                } else {
                    b.is_ascii_digit()
                }
            });
        if !ok {
            return RefOutcome::Bare;
        }
        return match u32::from_str_radix(digits, radix) {
            Ok(c) if xml_char_ok(c) => char::from_u32(c)
                .map(RefOutcome::Char)
                .unwrap_or(RefOutcome::InvalidChar),
            _ => RefOutcome::InvalidChar,
        };
    }
    let b = body.as_bytes();
    if b.is_empty() || !is_name_start(b[0]) || !b.iter().all(|&c| is_name_char(c)) {
        return RefOutcome::Bare;
    }
    match body {
        "amp" => RefOutcome::Predefined("&"),
        "lt" => RefOutcome::Predefined("<"),
        "gt" => RefOutcome::Predefined(">"),
        "quot" => RefOutcome::Predefined("\""),
        "apos" => RefOutcome::Predefined("'"),
        _ => RefOutcome::Unknown,
    }
}

/// Decodes the valid references of an attribute value, keeping invalid ones literally.
fn decode_attr(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(p) = rest.find('&') {
        out.push_str(&rest[..p]);
        let after = &rest[p + 1..];
        if let Some(semi) = after.find(';') {
            match classify_ref(&after[..semi]) {
                RefOutcome::Char(c) => {
                    out.push(c);
                    rest = &after[semi + 1..];
                    continue;
                }
                RefOutcome::Predefined(s) => {
                    out.push_str(s);
                    rest = &after[semi + 1..];
                    continue;
                }
                _ => {}
            }
        }
        out.push('&');
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The streaming tokenizer; see the module documentation.
#[derive(Debug, Clone)]
pub struct XmlTokenizer {
    cfg: XmlConfig,
    st: St,
    /// The construct in progress (construct states) or a partial close (`Until`).
    held: String,
    /// Stream offset of the construct in progress (or of `held[0]`).
    cstart: u64,
    /// Stream offset of the next byte fed.
    offset: u64,
    depth: usize,
    close: String,
    /// A searcher for `close`, built once per section: a new one per chunk cost more than
    /// searching a small chunk.
    close_finder: memmem::Finder<'static>,
    /// `close` is not empty and its first byte does not occur again in it.
    close_first_once: bool,
    raw_end_name: Option<String>,
    attrs: Vec<Attr>,
}

enum Step {
    Continue,
    Paused,
}

impl XmlTokenizer {
    /// A tokenizer at stream offset 0 in text state.
    pub fn new(cfg: XmlConfig) -> Self {
        XmlTokenizer {
            cfg,
            st: St::Text,
            held: String::new(),
            cstart: 0,
            offset: 0,
            depth: 0,
            close: String::new(),
            close_finder: memmem::Finder::new(b"").into_owned(),
            close_first_once: false,
            raw_end_name: None,
            attrs: Vec::new(),
        }
    }

    /// The current open-element depth.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The stream offset of the next byte to be fed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The current entity mode.
    pub fn entities(&self) -> EntityMode {
        self.cfg.entities
    }

    /// Accounts for `n` bytes the host consumed itself after a pause.
    pub fn skip(&mut self, n: usize) {
        self.offset += n as u64;
    }

    /// For a host holding content back: given that the bytes it holds end with the first
    /// `partial` bytes of the close of the current raw element or section, how many bytes
    /// of the close they end with once `bytes` are added; `None` when `bytes` complete the
    /// close, or when the tokenizer is not inside such text with nothing of its own held (or
    /// its close repeats its first byte, which this simple match does not follow). Bytes for
    /// which it answers `Some` can be fed later, joined with what follows, and give the same
    /// tokens, only cut differently.
    #[inline]
    pub fn content_ahead(&self, partial: usize, bytes: &[u8]) -> Option<usize> {
        if !matches!(self.st, St::Until(_))
            || !self.held.is_empty()
            || !self.close_first_once
            || partial >= self.close.len()
        {
            return None;
        }
        let close = self.close.as_bytes();
        let first = close[0];
        if partial == 0 && !has_byte(bytes, first) {
            return Some(0);
        }
        let mut m = partial;
        for &b in bytes {
            if b == close[m] {
                m += 1;
                if m == close.len() {
                    return None;
                }
            } else {
                m = usize::from(b == first);
            }
        }
        Some(m)
    }

    /// Feeds one chunk; returns the bytes consumed (all of them unless the sink paused).
    #[inline]
    pub fn feed<F>(&mut self, input: &str, sink: &mut F) -> usize
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        let base = self.offset;
        if let St::Until(sec) = self.st
            && self.held.is_empty()
            && !input.is_empty()
            && !self.close.is_empty()
            && !has_byte(input.as_bytes(), self.close.as_bytes()[0])
        {
            // Streamed content of a raw element or a section (a parameter value, CDATA):
            // a piece that cannot start the close is all content. This is most pieces of a
            // large argument, so they skip the state machine.
            self.offset = base + input.len() as u64;
            let c = sink(self.content_token(sec, input), base);
            self.apply(c);
            return input.len();
        }
        self.feed_markup(input, sink)
    }

    /// [`feed`](XmlTokenizer::feed) through the state machine, kept out of line so that the
    /// content path stays small where it is inlined.
    #[inline(never)]
    fn feed_markup<F>(&mut self, input: &str, sink: &mut F) -> usize
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        let base = self.offset;
        if let St::Until(sec) = self.st
            && self.held.is_empty()
            && !input.is_empty()
            && is_short_content(input.as_bytes(), self.close.as_bytes())
        {
            // A short piece with a byte that may start the close but neither holds it nor
            // ends with its beginning (a `<` in code streamed in short pieces: `a < b`,
            // `<div>`): all content, as `run` would find, without its set-up.
            self.offset = base + input.len() as u64;
            let c = sink(self.content_token(sec, input), base);
            self.apply(c);
            return input.len();
        }
        let used = self.run(input, base, sink).unwrap_or(input.len());
        self.offset = base + used as u64;
        used
    }

    /// Ends the stream: resolves held-back input, reports open sections, emits [`Token::Eof`],
    /// and resets the state (not the offset or the entity mode) for a next stream.
    pub fn finish<F>(&mut self, sink: &mut F)
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        loop {
            match self.st {
                St::Text => break,
                St::Rb(n) => {
                    self.st = St::Text;
                    let c = sink(Token::Text(&"]]"[..n as usize]), self.cstart);
                    self.apply(c);
                }
                St::Until(sec) => {
                    let h = std::mem::take(&mut self.held);
                    self.st = St::Text;
                    if !h.is_empty() {
                        let c = sink(self.content_token(sec, &h), self.cstart);
                        self.apply(c);
                    }
                    let c = sink(
                        Token::Error {
                            kind: XmlErrorKind::Unclosed(sec),
                            raw: "",
                        },
                        self.offset,
                    );
                    self.apply(c);
                }
                _ => {
                    // An incomplete construct at the end is not markup: rescan it as text.
                    let kind = XmlErrorKind::Truncated;
                    let r = std::mem::take(&mut self.held);
                    self.st = St::Text;
                    let c = sink(Token::Error { kind, raw: &r[..1] }, self.cstart);
                    self.apply(c);
                    let start = self.cstart + 1;
                    let _ = self.run(&r[1..], start, sink);
                }
            }
        }
        let c = sink(Token::Eof { depth: self.depth }, self.offset);
        self.apply(c);
        self.st = St::Text;
        self.held.clear();
        self.depth = 0;
        self.raw_end_name = None;
    }

    fn content_token<'a>(&self, sec: Section, s: &'a str) -> Token<'a> {
        if sec == Section::Raw {
            Token::Text(s)
        } else {
            Token::SectionText(sec, s)
        }
    }

    /// Applies a sink answer; returns true when the sink asked to pause.
    #[inline]
    fn apply(&mut self, c: Ctl) -> bool {
        if c.entities.is_none() && c.depth.is_none() && c.raw_until.is_none() {
            // Almost every answer: carry on.
            return c.pause;
        }
        self.change_mode(c)
    }

    /// [`apply`](XmlTokenizer::apply) for an answer that changes a mode.
    #[inline(never)]
    fn change_mode(&mut self, c: Ctl) -> bool {
        if let Some(e) = c.entities {
            self.cfg.entities = e;
        }
        if let Some(d) = c.depth {
            self.depth = d;
        }
        if let Some(r) = c.raw_until {
            match r {
                RawUntil::EndTag(name) => {
                    self.set_close(format!("</{name}>"));
                    self.raw_end_name = Some(name);
                }
                RawUntil::Literal(l) => {
                    self.set_close(l);
                    self.raw_end_name = None;
                }
            }
            self.held.clear();
            self.st = if self.close.is_empty() {
                St::Text
            } else {
                St::Until(Section::Raw)
            };
        }
        c.pause
    }

    /// Sets the string that ends the current raw or section text, and its searcher.
    fn set_close(&mut self, close: String) {
        self.close_finder = memmem::Finder::new(close.as_bytes()).into_owned();
        self.close_first_once = close
            .as_bytes()
            .split_first()
            .is_some_and(|(first, rest)| !rest.contains(first));
        self.close = close;
    }

    fn enter_section<F>(&mut self, sec: Section, sink: &mut F)
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        self.held.clear();
        self.set_close(sec.close().to_string());
        self.st = St::Until(sec);
        let c = sink(Token::SectionStart(sec), self.cstart);
        self.apply(c);
    }

    /// Emits the close of the current `Until` section; returns whether the sink paused.
    fn close_section<F>(&mut self, sec: Section, at: u64, sink: &mut F) -> bool
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        self.st = St::Text;
        self.held.clear();
        if sec == Section::Raw
            && let Some(name) = self.raw_end_name.take()
        {
            self.depth = self.depth.saturating_sub(1);
            let c = sink(
                Token::End {
                    name: &name,
                    raw: &self.close,
                },
                at,
            );
            return self.apply(c);
        }
        let c = sink(Token::SectionEnd(sec), at);
        self.apply(c)
    }

    /// Parses and emits a complete tag; returns whether the sink paused.
    fn emit_tag<F>(&mut self, raw: &str, sink: &mut F) -> bool
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        let at = self.cstart;
        if let Some(rest) = raw.strip_prefix("</") {
            let name = rest
                .trim_end_matches('>')
                .trim_end_matches(|c: char| c.is_ascii_whitespace());
            self.depth = self.depth.saturating_sub(1);
            let c = sink(Token::End { name, raw }, at);
            return self.apply(c);
        }
        let self_closing = raw.ends_with("/>");
        let inner = &raw[1..raw.len() - if self_closing { 2 } else { 1 }];
        let name_end = inner
            .bytes()
            .position(|b| !is_name_char(b))
            .unwrap_or(inner.len());
        let name = &inner[..name_end];
        self.attrs.clear();
        let mut rest = &inner[name_end..];
        loop {
            rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let Some(eq) = rest.find('=') else { break };
            let aname = rest[..eq].trim_end_matches(|c: char| c.is_ascii_whitespace());
            let after = rest[eq + 1..].trim_start_matches(|c: char| c.is_ascii_whitespace());
            let Some(q) = after.chars().next() else { break };
            let body = &after[1..];
            let Some(endq) = body.find(q) else { break };
            let v = &body[..endq];
            let value = if self.cfg.entities == EntityMode::Decode {
                decode_attr(v)
            } else {
                v.to_string()
            };
            self.attrs.push(Attr {
                name: aname.to_string(),
                value,
            });
            rest = &body[endq + 1..];
        }
        if self.depth + 1 > self.cfg.max_depth {
            let c = sink(
                Token::Error {
                    kind: XmlErrorKind::DepthLimit,
                    raw,
                },
                at,
            );
            return self.apply(c);
        }
        if !self_closing {
            self.depth += 1;
        }
        let attrs = std::mem::take(&mut self.attrs);
        let c = sink(
            Token::Start {
                name,
                attrs: &attrs,
                self_closing,
                raw,
            },
            at,
        );
        self.attrs = attrs;
        self.apply(c)
    }

    /// Resolves a complete reference `raw` = `&body;`.
    fn emit_ref<F>(&mut self, raw: &str, sink: &mut F)
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        let at = self.cstart;
        let body = &raw[1..raw.len() - 1];
        let c = match classify_ref(body) {
            RefOutcome::Char(ch) => {
                let mut buf = [0u8; 4];
                sink(Token::Text(ch.encode_utf8(&mut buf)), at)
            }
            RefOutcome::Predefined(s) => sink(Token::Text(s), at),
            RefOutcome::Unknown => sink(
                Token::Error {
                    kind: XmlErrorKind::UnknownEntity,
                    raw,
                },
                at,
            ),
            RefOutcome::InvalidChar => sink(
                Token::Error {
                    kind: XmlErrorKind::InvalidCharRef,
                    raw,
                },
                at,
            ),
            RefOutcome::Bare => {
                // Unreachable: `run` resolves bare references before calling this.
                sink(
                    Token::Error {
                        kind: XmlErrorKind::BareAmp,
                        raw,
                    },
                    at,
                )
            }
        };
        self.apply(c);
    }

    /// The core loop over one input; `base` is the stream offset of `s[0]`.
    /// Returns `Some(consumed)` when the sink paused.
    fn run<F>(&mut self, s: &str, base: u64, sink: &mut F) -> Option<usize>
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        let b = s.as_bytes();
        let n = b.len();
        let mut i = 0usize;
        // Where the current construct's bytes not yet in `held` begin in `s`.
        let mut cfrom = 0usize;
        while i < n {
            match self.st {
                St::Text => {
                    let found = match self.cfg.entities {
                        EntityMode::Decode => super::find_byte3(b'<', b'&', b']', &b[i..]),
                        EntityMode::Raw => super::find_byte2(b'<', b']', &b[i..]),
                    };
                    let j = found.map_or(n, |k| i + k);
                    if j > i {
                        let c = sink(Token::Text(&s[i..j]), base + i as u64);
                        i = j;
                        self.apply(c);
                        continue;
                    }
                    self.cstart = base + i as u64;
                    cfrom = i;
                    self.held.clear();
                    self.st = match b[i] {
                        b'<' => St::Lt,
                        b'&' => St::Amp,
                        _ => St::Rb(1),
                    };
                    i += 1;
                }
                St::Rb(k) => match b[i] {
                    b']' if k == 1 => {
                        self.st = St::Rb(2);
                        i += 1;
                    }
                    b']' => {
                        let c = sink(Token::Text("]"), self.cstart);
                        self.cstart += 1;
                        i += 1;
                        self.apply(c);
                    }
                    b'>' if k == 2 => {
                        self.st = St::Text;
                        let c = sink(
                            Token::Error {
                                kind: XmlErrorKind::StrayCDataEnd,
                                raw: "]]>",
                            },
                            self.cstart,
                        );
                        i += 1;
                        self.apply(c);
                    }
                    _ => {
                        self.st = St::Text;
                        let c = sink(Token::Text(&"]]"[..k as usize]), self.cstart);
                        self.apply(c);
                    }
                },
                St::Until(sec) => {
                    // First settle a partial close held from the previous input.
                    while !self.held.is_empty() {
                        if self.close.starts_with(self.held.as_str()) {
                            let need_from = self.held.len();
                            let need = &self.close.as_bytes()[need_from..];
                            let avail = &b[i..];
                            if avail.len() >= need.len() {
                                if avail.starts_with(need) {
                                    let at = self.cstart;
                                    i += need.len();
                                    if self.close_section(sec, at, sink) {
                                        return Some(i);
                                    }
                                    break;
                                }
                            } else if need.starts_with(avail) {
                                self.held.push_str(&s[i..]);
                                return None;
                            }
                        }
                        // Not the close: content up to the next place the close may begin
                        // again, in one piece (no copy: `held` is lent to the token).
                        let first = self.held.chars().next().map_or(1, char::len_utf8);
                        let cl = (first..self.held.len())
                            .find(|&k| {
                                self.held.is_char_boundary(k)
                                    && self.close.starts_with(&self.held[k..])
                            })
                            .unwrap_or(self.held.len());
                        let held = std::mem::take(&mut self.held);
                        let at = self.cstart;
                        self.cstart += cl as u64;
                        let c = sink(self.content_token(sec, &held[..cl]), at);
                        self.held = held;
                        self.held.drain(..cl);
                        self.apply(c);
                    }
                    if self.st != St::Until(sec) || i >= n {
                        continue;
                    }
                    let close_len = self.close.len();
                    // A piece shorter than the close (most streamed deltas) cannot hold it.
                    let found = if n - i < close_len {
                        None
                    } else {
                        self.close_finder.find(&b[i..])
                    };
                    match found {
                        Some(k) => {
                            if k > 0 {
                                let c =
                                    sink(self.content_token(sec, &s[i..i + k]), base + i as u64);
                                self.apply(c);
                            }
                            let at = base + (i + k) as u64;
                            i += k + close_len;
                            if self.st == St::Until(sec) && self.close_section(sec, at, sink) {
                                return Some(i);
                            }
                        }
                        None => {
                            let cut = n - held_close_prefix(&b[i..], self.close.as_bytes());
                            if cut > i {
                                let c = sink(self.content_token(sec, &s[i..cut]), base + i as u64);
                                self.apply(c);
                            }
                            if self.st == St::Until(sec) {
                                self.held.push_str(&s[cut..]);
                                self.cstart = base + cut as u64;
                            } else if cut < n {
                                // The sink changed mode on the last piece: rescan the tail.
                                i = cut;
                                continue;
                            }
                            return None;
                        }
                    }
                }
                St::Amp => {
                    let c = b[i];
                    let len = self.held.len() + (i - cfrom);
                    let bare = c == b';' && {
                        let is_bare = |body: &str| matches!(classify_ref(body), RefOutcome::Bare);
                        if self.held.is_empty() {
                            is_bare(&s[cfrom + 1..i])
                        } else {
                            is_bare(&format!("{}{}", &self.held[1..], &s[cfrom..i]))
                        }
                    };
                    if c == b';' && len > 1 && !bare {
                        let end = i + 1;
                        let raw = self.take_raw(s, cfrom, end);
                        self.st = St::Text;
                        self.emit_ref(&raw, sink);
                        i = end;
                    } else if is_ref_byte(c) && (len <= MAX_REF || (0x80..0xC0).contains(&c)) {
                        i += 1;
                    } else {
                        i = self.fail(XmlErrorKind::BareAmp, s, cfrom, i, sink);
                        cfrom = i;
                    }
                }
                St::Lt | St::Tag(_) | St::Bang | St::BangDash | St::BangCData(_) | St::PiStart => {
                    let c = b[i];
                    let len = self.held.len() + (i - cfrom);
                    if len > self.cfg.max_tag_bytes && !(0x80..0xC0).contains(&c) {
                        i = self.fail(XmlErrorKind::TagTooLong, s, cfrom, i, sink);
                        cfrom = i;
                        continue;
                    }
                    match self.step_markup(c) {
                        Mk::More => i += 1,
                        Mk::Fail => {
                            i = self.fail(XmlErrorKind::StrayLt, s, cfrom, i, sink);
                            cfrom = i;
                        }
                        Mk::Section(sec, consume) => {
                            if consume {
                                i += 1;
                            }
                            self.enter_section(sec, sink);
                        }
                        Mk::Done => {
                            let end = i + 1;
                            let raw = self.take_raw(s, cfrom, end);
                            self.st = St::Text;
                            i = end;
                            if let Step::Paused = self.finish_tag(&raw, sink) {
                                return Some(i);
                            }
                        }
                    }
                }
            }
        }
        if self.in_construct() {
            self.held.push_str(&s[cfrom.min(n)..]);
        }
        None
    }

    fn finish_tag<F>(&mut self, raw: &str, sink: &mut F) -> Step
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        if self.emit_tag(raw, sink) {
            Step::Paused
        } else {
            Step::Continue
        }
    }

    fn in_construct(&self) -> bool {
        matches!(
            self.st,
            St::Amp
                | St::Lt
                | St::Tag(_)
                | St::Bang
                | St::BangDash
                | St::BangCData(_)
                | St::PiStart
        )
    }

    /// The complete construct text: `held` + `s[cfrom..end]`; clears `held`.
    fn take_raw(&mut self, s: &str, cfrom: usize, end: usize) -> String {
        let mut raw = std::mem::take(&mut self.held);
        raw.push_str(&s[cfrom..end]);
        raw
    }

    /// Resolves a construct that turned out not to be markup: its first byte (`<` or `&`)
    /// becomes an error token and the rest is rescanned as text. Returns the index in `s` to
    /// continue from.
    fn fail<F>(
        &mut self,
        kind: XmlErrorKind,
        s: &str,
        cfrom: usize,
        j: usize,
        sink: &mut F,
    ) -> usize
    where
        F: FnMut(Token<'_>, u64) -> Ctl,
    {
        let first = if self.st == St::Amp { "&" } else { "<" };
        self.st = St::Text;
        let at = self.cstart;
        // Take the construct's held bytes first: a sink that switches to raw mode on the error
        // makes `apply` clear `held`, and they would be lost, with `s` rescanned from a wrong
        // index (found by the `parse` fuzz target: a panic slicing inside a character).
        let held = std::mem::take(&mut self.held);
        let c = sink(Token::Error { kind, raw: first }, at);
        self.apply(c);
        if held.is_empty() {
            // The construct began in `s`: rescan it in place.
            return cfrom + 1;
        }
        // It began in an earlier chunk: rescan the held bytes (no `<` after the first, so no
        // tag can complete in there and this recursion is one level deep), then go on at `j`.
        let mut r = held;
        r.push_str(&s[cfrom..j]);
        let _ = self.run(&r[1..], at + 1, sink);
        j
    }

    /// Advances the markup state machine over one byte.
    fn step_markup(&mut self, c: u8) -> Mk {
        use TagSt::*;
        let next = match self.st {
            St::Lt => match c {
                b'/' => St::Tag(EndFirst),
                b'!' => St::Bang,
                b'?' => St::PiStart,
                _ if is_name_start(c) => St::Tag(Name),
                _ => return Mk::Fail,
            },
            St::Bang => match c {
                b'-' => St::BangDash,
                b'[' => St::BangCData(0),
                _ if c.is_ascii_alphabetic() => return Mk::Section(Section::Decl, false),
                _ => return Mk::Fail,
            },
            St::BangDash => {
                return if c == b'-' {
                    Mk::Section(Section::Comment, true)
                } else {
                    Mk::Fail
                };
            }
            St::BangCData(k) => {
                if c != b"CDATA["[k as usize] {
                    return Mk::Fail;
                }
                if k == 5 {
                    return Mk::Section(Section::CData, true);
                }
                St::BangCData(k + 1)
            }
            St::PiStart => {
                return if is_name_start(c) {
                    Mk::Section(Section::Pi, false)
                } else {
                    Mk::Fail
                };
            }
            St::Tag(t) => match (t, c) {
                (Name, _) if is_name_char(c) => St::Tag(Name),
                (Name | Space { .. }, _) if is_ws(c) => St::Tag(Space { ws: true }),
                (Name | Space { .. }, b'/') => St::Tag(SelfClose),
                (Name | Space { .. }, b'>') => return Mk::Done,
                (Space { ws: true }, _) if is_name_start(c) => St::Tag(AttrName),
                (AttrName, _) if is_name_char(c) => St::Tag(AttrName),
                (AttrName | AfterAttrName, _) if is_ws(c) => St::Tag(AfterAttrName),
                (AttrName | AfterAttrName, b'=') => St::Tag(AfterEq),
                (AfterEq, _) if is_ws(c) => St::Tag(AfterEq),
                (AfterEq, b'"' | b'\'') => St::Tag(Value(c)),
                (Value(q), _) if c == q => St::Tag(Space { ws: false }),
                (Value(_), b'<') => return Mk::Fail,
                (Value(q), _) => St::Tag(Value(q)),
                (SelfClose, b'>') => return Mk::Done,
                (EndFirst, _) if is_name_start(c) => St::Tag(EndName),
                (EndName, _) if is_name_char(c) => St::Tag(EndName),
                (EndName | EndSpace, _) if is_ws(c) => St::Tag(EndSpace),
                (EndName | EndSpace, b'>') => return Mk::Done,
                _ => return Mk::Fail,
            },
            _ => return Mk::Fail,
        };
        self.st = next;
        Mk::More
    }
}

enum Mk {
    More,
    Fail,
    Done,
    /// Enter a section; `true` when the current byte is part of the opening.
    Section(Section, bool),
}

/// Length of the longest suffix of `rest` that is a proper prefix of `close`: the bytes to hold
/// back because the next input may complete the close. Only the last `close.len() - 1` bytes can
/// take part, and a candidate must start with `close`'s first byte.
/// Whether `piece`, shorter than `close`, has no suffix that begins `close` (so it can neither
/// hold the close nor need a tail held back); false for a longer piece or an empty close.
fn is_short_content(piece: &[u8], close: &[u8]) -> bool {
    piece.len() < close.len()
        && (0..piece.len()).all(|p| !piece[p..].iter().zip(close).all(|(a, b)| a == b))
}

fn held_close_prefix(rest: &[u8], close: &[u8]) -> usize {
    let Some(&first) = close.first() else {
        return 0;
    };
    let tail = &rest[rest.len().saturating_sub(close.len() - 1)..];
    // The tail is shorter than the close: a plain loop beats setting up a vector search.
    (0..tail.len())
        .find(|&p| tail[p] == first && close.starts_with(&tail[p..]))
        .map_or(0, |p| tail.len() - p)
}

#[cfg(test)]
mod tests;
