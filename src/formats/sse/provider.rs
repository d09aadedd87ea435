//! Machinery shared by the provider streams (`openai_sse`, `anthropic_sse`): reading SSE
//! items and an event's JSON payload, the incremental check of a call's argument fragments,
//! and what renderers check of a call and how they cut text into deltas.

use crate::event::{ErrorKind, Event, Sink, ToolCall};
use crate::lexers::json::{JsonConfig, JsonErrorKind, JsonParser};
use crate::lexers::sse::{SseEvent, SseItem, SseParser};
use serde::de::DeserializeOwned;

/// Most bytes of a chunk handed to the SSE reader at once by [`sse_items`]' callers: the
/// items one piece completes are gathered before any is handled, and a whole stream fed at
/// once would otherwise gather all its events (1.25 million for a 10 MB rendering).
pub(crate) const SSE_PIECE: usize = 64 * 1024;

/// The items the SSE reader completes with `chunk` (`None`: the end of the stream), gathered
/// before any is handled, since handling one needs the whole parser. Callers cut a chunk into
/// pieces of at most [`SSE_PIECE`] bytes, so the items gathered stay few.
pub(crate) fn sse_items(sse: &mut SseParser, chunk: Option<&[u8]>) -> Vec<SseItem> {
    let mut items = Vec::new();
    match chunk {
        Some(c) => sse.feed(c, &mut |i| items.push(i)),
        None => sse.finish(&mut |i| items.push(i)),
    }
    items
}

/// The event's payload as `T`; `None` after reporting why not: `unterminated` when the stream
/// ends inside it, `invalid_stream` when it is not such JSON.
pub(crate) fn payload<T: DeserializeOwned>(ev: &SseEvent, out: &mut dyn Sink) -> Option<T> {
    match serde_json::from_str(&ev.data) {
        Ok(v) => Some(v),
        Err(e) => {
            let at = ev.offset;
            out.push(if !ev.terminated && e.is_eof() {
                Event::error(
                    ErrorKind::Unterminated,
                    format!("stream cut inside the payload of the event at byte {at}"),
                )
            } else {
                Event::error(
                    ErrorKind::InvalidStream,
                    format!("malformed JSON payload in the event at byte {at}: {e}"),
                )
            });
            None
        }
    }
}

/// A JSON string field read from the payload's own text and unescaped once into a string of
/// its size: serde_json would unescape a 10 MB argument into a growing scratch buffer and copy
/// it out, holding three copies beside the event (`docs/performance.md`, "Memory"). Only
/// borrowing readers (`serde_json::from_str`) can give the raw text; `null` is `None`.
pub(crate) fn raw_string<'de, D>(d: D) -> Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize as _;
    use serde::de::{Error, Unexpected};
    let Some(raw) = Option::<&'de serde_json::value::RawValue>::deserialize(d)? else {
        return Ok(None);
    };
    let text = raw.get();
    if !text.starts_with('"') {
        return Err(D::Error::invalid_type(
            Unexpected::Other(text.get(..1).unwrap_or("")),
            &"a string",
        ));
    }
    unescape_json_string(text)
        .map(Some)
        .ok_or_else(|| D::Error::custom("a string with an invalid escape"))
}

/// The value of a JSON string literal (quotes included, as serde_json validated it); `None`
/// for a bad escape or a lone surrogate, as serde_json refuses them.
pub(crate) fn unescape_json_string(lit: &str) -> Option<String> {
    let body = lit.strip_prefix('"')?.strip_suffix('"')?;
    // Unescaping never lengthens: this is the string's size up to the escapes' savings.
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let b = rest.as_bytes();
        let (c, used) = match *b.get(i + 1)? {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => {
                let hi = hex4(b.get(i + 2..i + 6)?)?;
                if (0xD800..0xDC00).contains(&hi) {
                    // A high surrogate must be followed by `\u` and a low one.
                    if b.get(i + 6..i + 8)? != b"\\u" {
                        return None;
                    }
                    let lo = hex4(b.get(i + 8..i + 12)?)?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return None;
                    }
                    let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    (char::from_u32(c)?, 12)
                } else {
                    (char::from_u32(hi)?, 6)
                }
            }
            _ => return None,
        };
        out.push(c);
        rest = &rest[i + used..];
    }
    out.push_str(rest);
    if out.capacity() - out.len() > out.len() / 8 {
        out.shrink_to_fit();
    }
    Some(out)
}

fn hex4(h: &[u8]) -> Option<u32> {
    h.iter()
        .try_fold(0u32, |v, &d| Some(v << 4 | char::from(d).to_digit(16)?))
}

/// Incremental check that one call's arguments form a single JSON object; each fragment is fed
/// once, so the cost is linear in the arguments whatever the number of deltas.
pub(crate) struct Args {
    json: JsonParser,
    started: bool,
    bytes: usize,
    max_bytes: usize,
}

impl Args {
    /// A validator for one call.
    pub(crate) fn new(max_depth: usize, max_bytes: usize) -> Args {
        Args {
            json: JsonParser::new(JsonConfig {
                max_depth,
                stop_byte: None,
                build_value: false,
            }),
            started: false,
            bytes: 0,
            max_bytes,
        }
    }

    /// Feeds the next fragment; an `Err` fails the call for good.
    pub(crate) fn feed(&mut self, frag: &str) -> Result<(), (ErrorKind, String)> {
        self.bytes += frag.len();
        if self.bytes > self.max_bytes {
            return Err((
                ErrorKind::LimitExceeded,
                format!("arguments exceed {} bytes", self.max_bytes),
            ));
        }
        if !self.started {
            let rest = frag.trim_start_matches([' ', '\t', '\n', '\r']);
            if let Some(c) = rest.chars().next() {
                self.started = true;
                if c != '{' {
                    return Err((
                        ErrorKind::InvalidJson,
                        format!("arguments are not a JSON object (start with {c:?})"),
                    ));
                }
            }
        }
        match self.json.feed(frag) {
            Ok(_) => Ok(()),
            Err(e) if e.kind == JsonErrorKind::DepthLimit => Err((
                ErrorKind::LimitExceeded,
                format!("arguments: {}", e.message),
            )),
            Err(e) => Err((ErrorKind::InvalidJson, format!("arguments: {}", e.message))),
        }
    }

    /// True while only whitespace (or nothing) has been fed.
    pub(crate) fn is_empty(&self) -> bool {
        !self.started
    }

    /// True once the object is complete.
    pub(crate) fn is_complete(&self) -> bool {
        self.json.is_complete()
    }

    /// Ends the arguments; `Err` carries the JSON parser's message.
    pub(crate) fn finish(&mut self) -> Result<(), String> {
        self.json.finish().map(|_| ()).map_err(|e| e.message)
    }
}

/// Checks that the `i`th call can be written in a provider stream whose calls (`calls`: how the
/// stream names them) carry no server, and read back as the same call.
pub(crate) fn check_call(i: usize, c: &ToolCall, calls: &str) -> Result<(), String> {
    if c.name.is_empty() {
        return Err(format!("call {i} has an empty name"));
    }
    if c.server.is_some() {
        return Err(format!("call {i} has a server, which {calls} cannot carry"));
    }
    if !c.arguments.is_object() {
        return Err(format!("call {i}: arguments are not a JSON object"));
    }
    if c.id.as_deref() == Some("") {
        // The parser reads `"id": ""` as no id (found by the `roundtrip` fuzz target).
        return Err(format!("call {i} has an empty id, which reads as no id"));
    }
    Ok(())
}

/// Most pieces [`pieces`] cuts one text into: a long value is cut into longer pieces, so that
/// a rendering (one provider event per piece, ~200 bytes of framing each) stays close to the
/// size of what it carries instead of growing 25-fold.
pub(crate) const MAX_PIECES: usize = 4096;

/// Splits `s` into pieces of about `n` bytes (more for a text over `n` × [`MAX_PIECES`]
/// bytes), at character boundaries.
pub(crate) fn pieces(s: &str, n: usize) -> Vec<&str> {
    let n = n.max(s.len().div_ceil(MAX_PIECES)).max(1);
    let mut v = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + n).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        v.push(&s[start..end]);
        start = end;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_string_is_unescaped_as_serde_json_does() {
        for lit in [
            r#""""#,
            r#""plain""#,
            r#""a\"b\\c\/d\b\f\n\r\t""#,
            r#""\u00e9\u4e2d\ud83d\ude00 x""#,
            r#""{\"content\": \"alpha beta\"}""#,
        ] {
            let want: String = serde_json::from_str(lit).unwrap();
            assert_eq!(
                unescape_json_string(lit).as_deref(),
                Some(&want[..]),
                "{lit}"
            );
        }
        for bad in [
            r#""\x""#,
            r#""\ud83d""#,
            r#""\ud83d\u0041""#,
            r#""\u12""#,
            r#""\""#,
            "x",
        ] {
            assert_eq!(unescape_json_string(bad), None, "{bad}");
        }
        // A long escaped value comes out at its size, not in a doubled buffer.
        let long = serde_json::to_string(&"say \"hi\" ".repeat(100_000)).unwrap();
        let got = unescape_json_string(&long).unwrap();
        assert!(
            got.capacity() <= got.len() + got.len() / 8,
            "{}",
            got.capacity()
        );
    }

    #[test]
    fn a_long_value_is_cut_into_at_most_max_pieces() {
        let short = "é".repeat(20);
        let p = pieces(&short, 8);
        assert!(p.iter().all(|x| x.len() <= 9));
        assert_eq!(p.concat(), short);
        // 1 MB in 8-byte pieces would be 131 072 provider events.
        let long = "ab€".repeat(200_000);
        let p = pieces(&long, 8);
        assert!(p.len() <= MAX_PIECES, "{}", p.len());
        assert_eq!(p.concat(), long);
    }

    #[test]
    fn a_rendering_of_a_large_argument_stays_close_to_its_size() {
        use crate::event::ToolCall;
        use crate::tools::Tools;
        let call = ToolCall {
            name: "write".into(),
            id: Some("call_1".into()),
            server: None,
            arguments: serde_json::json!({"content": "x y ".repeat(750_000)}),
        };
        for render in [
            crate::formats::sse::openai_sse::render,
            crate::formats::sse::anthropic_sse::render,
        ] {
            let out = render("", std::slice::from_ref(&call), &Tools::default()).unwrap();
            // 8-byte pieces would make it 75 MB: every event repeats ~200 bytes of framing.
            assert!(
                out.len() < 4_500_000,
                "{} bytes for a 3 MB argument",
                out.len()
            );
        }
    }
}
