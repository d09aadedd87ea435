//! A streaming tokenizer for XTML, the markup of special-token elements
//! `<|open|>TAG k="v"…<|sep|> BODY <|close|>TAG<|sep|>` (Kimi K3's chat format).
//!
//! XTML is not XML: its delimiters are three special tokens, `<|open|>`, `<|close|>` and
//! `<|sep|>`; a tag name and its attributes are ordinary text between an opener and `<|sep|>`;
//! attribute values escape only `&` (`&amp;`) and `"` (`&quot;`); bodies are never escaped. A
//! host may name further standalone special tokens (`<|end_of_msg|>`), reported on their own.
//!
//! The host decodes bytes (`crate::lexers::utf8`) and pulls [`Token`]s from `&str` pieces cut
//! anywhere ([`XtmlLexer::next`]); the tokens, text merged, are the same whatever the cuts. Held
//! back are only a special token's prefix at a piece's end (at most its length) and an
//! element's header up to its `<|sep|>` (bounded by [`XtmlConfig::max_header_bytes`]); body text
//! streams in borrowed pieces. Every byte is looked at a bounded number of times, never once per
//! piece: the cost is linear in the input for every chunking.
//!
//! # Modes
//!
//! Between tokens the host may switch the [`Mode`]:
//! - [`Mode::Markup`] (the default): every special token counts. An opener starts a header
//!   that ends at the next `<|sep|>`; a header cut by another special token, or too long, or
//!   unreadable, is a [`Token::Malformed`] carrying its exact text; a `<|sep|>` outside a header
//!   is one too.
//! - [`Mode::Raw`]: a body that only its own close ends (a value written raw): everything is
//!   text up to `<|close|>TAG<|sep|>` for the one tag named, which comes as a [`Token::Close`].
//!   With `json` on, the close counts only outside JSON strings (`"…"` with `\` escapes), so a
//!   JSON body may hold the close in a string.
//!
//! # Spacing
//!
//! A detokenizer that puts spaces between special tokens and the text next to them
//! (`spaces_between_special_tokens`) writes `<|open|> tools <|sep|>`. Whitespace between the
//! opener (or closer) and the tag, and before `<|sep|>`, is accepted and reported as
//! [`Element::spaced`]; the host decides what it is worth.

use super::{find_byte, find_byte2};
use crate::lexers::marker::{Window, classify_window};
use std::borrow::Cow;

/// The opener special token: a tag and its attributes follow, up to [`SEP`].
pub const OPEN: &str = "<|open|>";
/// The closer special token: a tag follows, then [`SEP`].
pub const CLOSE: &str = "<|close|>";
/// The special token that ends an opener's or closer's header.
pub const SEP: &str = "<|sep|>";

/// The lexer's settings.
#[derive(Debug, Clone)]
pub struct XtmlConfig {
    /// Further special tokens that are markup on their own (`<|end_of_msg|>`), reported as
    /// [`Token::Special`] with their index here. Each starts with `<`, holds no other `<` and
    /// is ASCII, like the three structural tokens.
    pub specials: &'static [&'static str],
    /// Longest header (the text between an opener or closer and `<|sep|>`) held back; a longer
    /// one is malformed.
    pub max_header_bytes: usize,
}

impl Default for XtmlConfig {
    fn default() -> Self {
        XtmlConfig {
            specials: &[],
            max_header_bytes: 4096,
        }
    }
}

/// An opener or closer with its header read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// The tag name.
    pub tag: String,
    /// The attributes in order, values unescaped (`&quot;` → `"`, `&amp;` → `&`, nothing
    /// else); names are unique. Always empty for a closer.
    pub attrs: Vec<(String, String)>,
    /// Whitespace stood between the special token and the tag, or before `<|sep|>`.
    pub spaced: bool,
    /// The element's exact text, special tokens included.
    pub raw: String,
    /// Offset of its first byte in the text fed since the last reset.
    pub at: u64,
}

impl Element {
    /// The value of attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a piece of markup is not an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// A `<|sep|>` outside any header.
    StraySep,
    /// A header cut by another special token or by the end of the input.
    Cut,
    /// A header longer than [`XtmlConfig::max_header_bytes`]; what follows it is read afresh.
    TooLong,
    /// A header whose tag or attributes cannot be read (a closer with attributes, an unquoted
    /// value, a repeated attribute).
    BadHeader,
}

impl Malformed {
    /// A short description, for messages.
    pub fn message(self) -> &'static str {
        match self {
            Malformed::StraySep => "a <|sep|> outside any element",
            Malformed::Cut => "an element cut before its <|sep|>",
            Malformed::TooLong => "an element header over the length limit",
            Malformed::BadHeader => "an element header that cannot be read",
        }
    }
}

/// One piece of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token<'a> {
    /// Body text: borrowed from the input, or owned when it had been held back.
    Text(Cow<'a, str>),
    /// An opener with its header: `<|open|>TAG k="v"<|sep|>`.
    Open(Element),
    /// A closer: `<|close|>TAG<|sep|>`.
    Close(Element),
    /// The host's special token with this index in [`XtmlConfig::specials`], at this offset.
    Special(usize, u64),
    /// Markup that is not an element (only in [`Mode::Markup`]), with its exact text.
    Malformed {
        /// The text, special tokens included.
        raw: String,
        /// Why.
        why: Malformed,
        /// Offset of its first byte.
        at: u64,
    },
}

/// What the lexer looks for (set by the host between tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every special token is markup.
    Markup,
    /// Everything is text up to the closer of `tag`; with `json`, a closer inside a JSON string
    /// is text too.
    Raw {
        /// The tag whose closer ends the body.
        tag: &'static str,
        /// Follow JSON string syntax.
        json: bool,
    },
}

/// A header being read.
#[derive(Debug)]
struct Pending {
    close: bool,
    buf: String,
    at: u64,
}

/// The index of [`CLOSE`] in the lexer's token list.
const CLOSE_AT: usize = 1;

/// The streaming XTML tokenizer.
#[derive(Debug)]
pub struct XtmlLexer {
    cfg: XtmlConfig,
    /// `OPEN`, `CLOSE`, `SEP`, then the host's specials.
    tokens: Vec<&'static str>,
    mode: Mode,
    /// A proper prefix of a special token, held at the end of the input (ASCII).
    held: String,
    /// The header being read, after its opener or closer.
    header: Option<Pending>,
    /// A special token that cut a header: read next, in the mode then in force.
    queued: Option<(usize, u64)>,
    /// JSON string state of a raw JSON body.
    in_str: bool,
    esc: bool,
    /// Bytes consumed since the last reset (held and header bytes included).
    pos: u64,
}

impl XtmlLexer {
    /// A lexer in [`Mode::Markup`].
    ///
    /// Panics when a host special token is empty, not ASCII, does not start with `<` or holds
    /// another `<`: that is a programming error of the host, never a property of the input.
    pub fn new(cfg: XtmlConfig) -> XtmlLexer {
        for s in cfg.specials {
            assert!(
                s.is_ascii() && s.starts_with('<') && !s[1..].contains('<'),
                "an XTML special token is ASCII and starts with its only `<`: {s:?}"
            );
        }
        let mut tokens = vec![OPEN, CLOSE, SEP];
        tokens.extend(cfg.specials.iter().copied());
        XtmlLexer {
            cfg,
            tokens,
            mode: Mode::Markup,
            held: String::new(),
            header: None,
            queued: None,
            in_str: false,
            esc: false,
            pos: 0,
        }
    }

    /// The mode in force.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switches the mode for the input that follows (JSON string state starts afresh).
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
        self.in_str = false;
        self.esc = false;
    }

    /// Bytes consumed since the last reset, held ones included: the offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// Nothing is held back: the next piece is read from its first byte on.
    #[inline]
    pub fn is_clean(&self) -> bool {
        self.held.is_empty() && self.header.is_none() && self.queued.is_none()
    }

    /// Forgets everything held and returns to [`Mode::Markup`] at offset 0 (a new turn).
    pub fn reset(&mut self) {
        self.held.clear();
        self.header = None;
        self.queued = None;
        self.set_mode(Mode::Markup);
        self.pos = 0;
    }

    /// The next token from `input`, advancing it; `None` once `input` is used up (what could
    /// not be decided yet is held).
    pub fn next<'a>(&mut self, input: &mut &'a str) -> Option<Token<'a>> {
        loop {
            if let Some((k, at)) = self.queued.take() {
                if let Some(t) = self.special(k, at) {
                    return Some(t);
                }
                continue;
            }
            if !self.held.is_empty() {
                match self.extend_held(input) {
                    Window::NeedMore => return None,
                    Window::Marker(k, len) => {
                        self.held.clear();
                        let at = self.pos - len as u64;
                        if let Some(t) = self.special(k, at) {
                            return Some(t);
                        }
                    }
                    Window::NotMarker => {
                        let h = std::mem::take(&mut self.held);
                        if self.header.is_some() {
                            if let Some((t, used)) = self.header_text(&h) {
                                // The part over the limit is read afresh: held again (it has no
                                // `<` but at its start, so it is text or a token's prefix).
                                self.held = h[used..].to_string();
                                return Some(t);
                            }
                        } else {
                            return Some(self.body_text(Cow::Owned(h)));
                        }
                    }
                }
                continue;
            }
            if input.is_empty() {
                return None;
            }
            let s = *input;
            let (k, w) = self.find_candidate(s);
            if k > 0 {
                if self.header.is_some() {
                    if let Some((t, used)) = self.header_text(&s[..k]) {
                        *input = &s[used..];
                        self.pos += used as u64;
                        return Some(t);
                    }
                    *input = &s[k..];
                    self.pos += k as u64;
                    continue;
                }
                *input = &s[k..];
                self.pos += k as u64;
                return Some(Token::Text(Cow::Borrowed(&s[..k])));
            }
            match w {
                Window::Marker(i, len) => {
                    *input = &s[len..];
                    self.pos += len as u64;
                    if let Some(t) = self.special(i, self.pos - len as u64) {
                        return Some(t);
                    }
                }
                // A prefix at the very end (a candidate that is no token is never returned).
                Window::NeedMore | Window::NotMarker => {
                    self.held.push_str(s);
                    self.pos += s.len() as u64;
                    *input = "";
                    return None;
                }
            }
        }
    }

    /// Ends the input: what is held comes out (a cut header as [`Token::Malformed`] in markup,
    /// as text in a raw body; a special token's prefix as text). Call until `None`; then the
    /// lexer is as after [`reset`](XtmlLexer::reset).
    pub fn finish(&mut self) -> Option<Token<'static>> {
        if let Some((k, at)) = self.queued.take() {
            if let Some(t) = self.special(k, at) {
                return Some(t.into_owned());
            }
            return self.finish();
        }
        if let Some(h) = self.header.take() {
            let raw = opener(h.close).to_string() + &h.buf + &std::mem::take(&mut self.held);
            return Some(self.not_element(raw, Malformed::Cut, h.at).into_owned());
        }
        if !self.held.is_empty() {
            let h = std::mem::take(&mut self.held);
            return Some(Token::Text(Cow::Owned(h)));
        }
        self.reset();
        None
    }

    /// The token list in force at the start of a header or in the body.
    #[inline]
    fn only_close(&self) -> bool {
        self.header.is_none() && matches!(self.mode, Mode::Raw { .. })
    }

    /// Classifies `s` (starting with `<`) against the special tokens in force.
    #[inline]
    fn classify(&self, s: &[u8]) -> Window<usize> {
        if s.len() >= 2 && s[1] != b'|' {
            return Window::NotMarker;
        }
        if self.only_close() {
            classify_window(s, &[CLOSE]).map(|_| CLOSE_AT)
        } else {
            classify_window(s, &self.tokens)
        }
    }

    /// The offset of the first `<` in `s` that starts (or, at the end, may start) a special
    /// token in force, with its classification; `(s.len(), NotMarker)` when there is none. In
    /// a raw JSON body, the string state is followed over the bytes before it.
    #[inline]
    fn find_candidate(&mut self, s: &str) -> (usize, Window<usize>) {
        let b = s.as_bytes();
        let json = matches!(self.mode, Mode::Raw { json: true, .. }) && self.header.is_none();
        let mut i = 0;
        loop {
            if json && self.in_str {
                if self.esc {
                    if i == b.len() {
                        return (i, Window::NotMarker);
                    }
                    self.esc = false;
                    i += 1;
                }
                match find_byte2(b'"', b'\\', &b[i..]) {
                    None => return (b.len(), Window::NotMarker),
                    Some(j) => {
                        i += j + 1;
                        if b[i - 1] == b'\\' {
                            self.esc = true;
                        } else {
                            self.in_str = false;
                        }
                    }
                }
                continue;
            }
            let next = if json {
                find_byte2(b'"', b'<', &b[i..])
            } else {
                find_byte(b'<', &b[i..])
            };
            let Some(j) = next else {
                return (b.len(), Window::NotMarker);
            };
            i += j;
            if b[i] == b'"' {
                self.in_str = true;
                i += 1;
                continue;
            }
            match self.classify(&b[i..]) {
                Window::NotMarker => i += 1,
                w => return (i, w),
            }
        }
    }

    /// Moves bytes of `input` to the held prefix while it may still become a special token;
    /// the byte that shows it cannot stays in `input`.
    fn extend_held(&mut self, input: &mut &str) -> Window<usize> {
        if matches!(self.mode, Mode::Raw { json: true, .. }) && self.header.is_none() && self.in_str
        {
            return Window::NotMarker;
        }
        loop {
            let w = self.classify(self.held.as_bytes());
            if !matches!(w, Window::NeedMore) {
                return w;
            }
            let Some(&b) = input.as_bytes().first() else {
                return Window::NeedMore;
            };
            if !b.is_ascii() {
                return Window::NotMarker;
            }
            self.held.push(b as char);
            if matches!(self.classify(self.held.as_bytes()), Window::NotMarker) {
                self.held.pop();
                return Window::NotMarker;
            }
            *input = &input[1..];
            self.pos += 1;
        }
    }

    /// Body text given back (a held prefix that is no token): in a raw JSON body it counts
    /// for the string state.
    fn body_text<'a>(&mut self, s: Cow<'a, str>) -> Token<'a> {
        if matches!(self.mode, Mode::Raw { json: true, .. }) {
            self.follow_json(&s);
        }
        Token::Text(s)
    }

    /// Header text: appended while the header stays within the limit. Past it, the header is
    /// malformed (or, in a raw body, text) up to exactly the limit, and the token comes back
    /// with the number of bytes of `s` it took; the rest is read afresh. The cut falls at the
    /// same byte whatever the chunking.
    fn header_text(&mut self, s: &str) -> Option<(Token<'static>, usize)> {
        let h = self.header.as_mut()?;
        let room = self.cfg.max_header_bytes.saturating_sub(h.buf.len());
        if s.len() <= room {
            h.buf.push_str(s);
            return None;
        }
        let mut used = room;
        while !s.is_char_boundary(used) {
            used -= 1;
        }
        h.buf.push_str(&s[..used]);
        let h = self.header.take()?;
        let raw = opener(h.close).to_string() + &h.buf;
        Some((self.not_element(raw, Malformed::TooLong, h.at), used))
    }

    /// Follows the JSON string state over text given back (held or a header's).
    fn follow_json(&mut self, s: &str) {
        for &b in s.as_bytes() {
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if b == b'\\' {
                    self.esc = true;
                } else if b == b'"' {
                    self.in_str = false;
                }
            } else if b == b'"' {
                self.in_str = true;
            }
        }
    }

    /// Markup text that is no element: malformed in markup, text in a raw body.
    fn not_element(&mut self, raw: String, why: Malformed, at: u64) -> Token<'static> {
        match self.mode {
            Mode::Markup => Token::Malformed { raw, why, at },
            Mode::Raw { json, .. } => {
                if json {
                    self.follow_json(&raw);
                }
                Token::Text(Cow::Owned(raw))
            }
        }
    }

    /// Special token `k` (index in `tokens`) at offset `at` was read.
    fn special<'a>(&mut self, k: usize, at: u64) -> Option<Token<'a>> {
        if let Some(h) = self.header.take() {
            if self.tokens[k] == SEP {
                return Some(self.element(h));
            }
            // Another special token cuts the header; it is read next, on its own.
            self.queued = Some((k, at));
            let raw = opener(h.close).to_string() + &h.buf;
            return Some(self.not_element(raw, Malformed::Cut, h.at));
        }
        let t = self.tokens[k];
        if let Mode::Raw { json, .. } = self.mode
            && (t != CLOSE || (json && self.in_str))
        {
            // In a raw body only its closer counts, and in a JSON body only outside strings.
            return Some(Token::Text(Cow::Borrowed(t)));
        }
        match t {
            OPEN | CLOSE => {
                self.header = Some(Pending {
                    close: t == CLOSE,
                    buf: String::new(),
                    at,
                });
                None
            }
            SEP => Some(Token::Malformed {
                raw: SEP.to_string(),
                why: Malformed::StraySep,
                at,
            }),
            _ => Some(Token::Special(k - 3, at)),
        }
    }

    /// A header ended by `<|sep|>`.
    fn element(&mut self, h: Pending) -> Token<'static> {
        let raw = format!("{}{}{SEP}", opener(h.close), h.buf);
        let parsed = read_header(&h.buf, h.close);
        match (parsed, self.mode) {
            (Some(Header { tag, attrs, spaced }), Mode::Markup) => {
                let e = Element {
                    tag,
                    attrs,
                    spaced,
                    raw,
                    at: h.at,
                };
                if h.close {
                    Token::Close(e)
                } else {
                    Token::Open(e)
                }
            }
            (Some(Header { tag, spaced, .. }), Mode::Raw { tag: want, .. })
                if h.close && tag == want =>
            {
                Token::Close(Element {
                    tag,
                    attrs: Vec::new(),
                    spaced,
                    raw,
                    at: h.at,
                })
            }
            _ => self.not_element(raw, Malformed::BadHeader, h.at),
        }
    }
}

impl Token<'_> {
    /// The same token owning its text.
    pub fn into_owned(self) -> Token<'static> {
        match self {
            Token::Text(s) => Token::Text(Cow::Owned(s.into_owned())),
            Token::Open(e) => Token::Open(e),
            Token::Close(e) => Token::Close(e),
            Token::Special(k, at) => Token::Special(k, at),
            Token::Malformed { raw, why, at } => Token::Malformed { raw, why, at },
        }
    }
}

fn opener(close: bool) -> &'static str {
    if close { CLOSE } else { OPEN }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')
}

/// A header's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The tag name.
    pub tag: String,
    /// The attributes, unescaped, in order.
    pub attrs: Vec<(String, String)>,
    /// Whitespace stood at either end.
    pub spaced: bool,
}

/// Reads a header: `WS? TAG (WS+ NAME="VALUE")* WS?` (a closer has no attributes); `None`
/// when it cannot be read.
pub fn read_header(buf: &str, close: bool) -> Option<Header> {
    let b = buf.as_bytes();
    let mut i = b.iter().take_while(|&&c| is_ws(c)).count();
    let mut spaced = i > 0;
    let t0 = i;
    while i < b.len() && is_name_byte(b[i]) {
        i += 1;
    }
    if i == t0 {
        return None;
    }
    let tag = buf[t0..i].to_string();
    let mut attrs: Vec<(String, String)> = Vec::new();
    loop {
        let ws = b[i..].iter().take_while(|&&c| is_ws(c)).count();
        i += ws;
        if i == b.len() {
            spaced |= ws > 0;
            break;
        }
        if ws == 0 || close {
            return None;
        }
        let n0 = i;
        while i < b.len() && is_name_byte(b[i]) {
            i += 1;
        }
        if i == n0 || b.get(i) != Some(&b'=') || b.get(i + 1) != Some(&b'"') {
            return None;
        }
        let name = &buf[n0..i];
        let v0 = i + 2;
        let len = b[v0..].iter().position(|&c| c == b'"')?;
        if attrs.iter().any(|(k, _)| k == name) {
            return None;
        }
        attrs.push((name.to_string(), unescape_attr(&buf[v0..v0 + len])));
        i = v0 + len + 1;
    }
    Some(Header { tag, attrs, spaced })
}

/// An attribute value's escapes undone: `&quot;` → `"`, `&amp;` → `&`; any other `&` is
/// itself (the writer escapes nothing else).
pub fn unescape_attr(v: &str) -> String {
    if !v.contains('&') {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(k) = rest.find('&') {
        out.push_str(&rest[..k]);
        let r = &rest[k..];
        if let Some(after) = r.strip_prefix("&quot;") {
            out.push('"');
            rest = after;
        } else if let Some(after) = r.strip_prefix("&amp;") {
            out.push('&');
            rest = after;
        } else {
            out.push('&');
            rest = &r[1..];
        }
    }
    out.push_str(rest);
    out
}

/// An attribute value escaped as the writer does: `&` → `&amp;`, then `"` → `&quot;`.
pub fn escape_attr(v: &str) -> String {
    v.replace('&', "&amp;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests;
