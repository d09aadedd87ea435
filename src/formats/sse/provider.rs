//! Machinery shared by the provider streams (`openai_sse`, `anthropic_sse`): reading SSE
//! items and an event's JSON payload, the incremental check of a call's argument fragments,
//! and what renderers check of a call and how they cut text into deltas.

use crate::event::{ErrorKind, Event, Sink, ToolCall};
use crate::lexers::json::{JsonConfig, JsonErrorKind, JsonParser};
use crate::lexers::sse::{SseEvent, SseItem, SseParser};
use serde::de::DeserializeOwned;

/// The items the SSE reader completes with `chunk` (`None`: the end of the stream), gathered
/// before any is handled, since handling one needs the whole parser.
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

/// Splits `s` into pieces of about `n` bytes, at character boundaries.
pub(crate) fn pieces(s: &str, n: usize) -> Vec<&str> {
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
