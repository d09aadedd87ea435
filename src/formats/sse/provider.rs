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
