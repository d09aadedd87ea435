//! The adapter protocol of `specs/adapter.md`: the hello exchange, request lines and the
//! checking of response lines.

use super::Hello;
use super::process::Worker;
use crate::backends::cuts::Cuts;
use crate::backends::{Breakdown, Paths, ServingPath, TurnOutcome};
use crate::event::{
    ErrorInfo, ErrorKind, Event, FOLD_MAX_DEPTH, Folder, ParseResult, ToolCall, WarningInfo,
    read_json,
};
use crate::formats::request::Request;
use crate::tools::Tools;
use base64::prelude::{BASE64_STANDARD, Engine as _};
use serde::Deserialize;
use serde_json::Value;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

/// The protocol version this build speaks (`"protocol": 2` in the hello exchange).
pub const PROTOCOL: u64 = 2;

/// The oldest version an adapter may answer: version 2 only added the optional `token_ids`,
/// so a version 1 adapter is judged as before (and sent no token ids).
pub const OLDEST_PROTOCOL: u64 = 1;

/// Levels a response line nests above a call's arguments (response, `turns`, a turn,
/// `calls`, a call), so that arguments [`FOLD_MAX_DEPTH`] deep still fit.
const RESPONSE_WRAPPER_DEPTH: usize = 5;

/// Reads one line from the adapter with conform's own JSON reader (its depth limit, not
/// serde_json's 128).
fn read_line_json(line: &[u8]) -> Result<Value, String> {
    let text =
        std::str::from_utf8(line).map_err(|e| format!("not UTF-8 ({e}): {}", quote_line(line)))?;
    read_json(text, FOLD_MAX_DEPTH + RESPONSE_WRAPPER_DEPTH).map_err(|e| {
        let hint = match e.kind {
            crate::lexers::json::JsonErrorKind::DepthLimit => format!(
                "; conform reads arguments up to {FOLD_MAX_DEPTH} levels deep, deeper ones \
                 fit only as a JSON string"
            ),
            _ => String::new(),
        };
        format!("not JSON ({e}{hint}): {}", quote_line(line))
    })
}

/// Sends the hello and checks the answer.
pub(super) fn say_hello(w: &mut Worker, timeout: Duration) -> Result<Hello, (Breakdown, String)> {
    let req = format!("{{\"type\":\"hello\",\"protocol\":{PROTOCOL}}}\n").into_bytes();
    let line = w.exchange(req, Instant::now() + timeout)?;
    let v = read_line_json(&line)
        .map_err(|m| (Breakdown::ProtocolError, format!("the hello answer is {m}")))?;
    #[derive(Deserialize)]
    struct WireHello {
        #[serde(rename = "type")]
        kind: String,
        protocol: u64,
        name: String,
        formats: Vec<String>,
        #[serde(default)]
        paths: Option<Vec<String>>,
    }
    let h: WireHello = serde_json::from_value(v).map_err(|e| {
        (
            Breakdown::ProtocolError,
            format!("bad hello answer ({e}): {}", quote_line(&line)),
        )
    })?;
    if h.kind != "hello" {
        return Err((
            Breakdown::ProtocolError,
            format!("expected a hello answer, got type {:?}", h.kind),
        ));
    }
    if !(OLDEST_PROTOCOL..=PROTOCOL).contains(&h.protocol) {
        return Err((
            Breakdown::ProtocolError,
            format!(
                "the adapter speaks protocol {}, conform speaks {PROTOCOL} (and accepts \
                 {OLDEST_PROTOCOL} to {PROTOCOL})",
                h.protocol
            ),
        ));
    }
    let mut paths = Paths::default();
    for p in h.paths.unwrap_or_default() {
        match p.parse::<ServingPath>() {
            Ok(ServingPath::Batch) => paths.batch = true,
            Ok(ServingPath::Stream) => paths.stream = true,
            Err(e) => {
                return Err((Breakdown::ProtocolError, format!("the hello's paths: {e}")));
            }
        }
    }
    Ok(Hello {
        name: h.name,
        formats: h.formats,
        protocol: h.protocol,
        paths,
    })
}

/// The request line for one replay (`\n`-terminated).
///
/// `token_ids` holds, per turn, the ids of each chunk's tokens for a token-aligned replay
/// (protocol 2); a missing or empty entry sends none for that turn. An entry whose length is
/// not the turn's number of chunks is a caller's bug and is not sent. Send ids only to an
/// adapter that answered protocol 2 ([`Hello::protocol`]). `request` is the case's request
/// modes, sent whole (defaults spelled out) as `"request"` (`specs/adapter.md` §2.2).
pub fn parse_request(
    id: u64,
    format: &str,
    tools: &Tools,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
    token_ids: &[Vec<Vec<u32>>],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + turns.iter().map(|t| t.len() * 2).sum::<usize>());
    out.extend_from_slice(format!("{{\"type\":\"parse\",\"id\":{id},\"format\":").as_bytes());
    json_string(&mut out, format);
    out.extend_from_slice(b",\"tools\":");
    let tools_json = Value::Array(
        tools
            .defs
            .iter()
            .map(|d| serde_json::json!({"type": "function", "function": {"name": d.name, "parameters": d.parameters}}))
            .collect(),
    );
    out.extend_from_slice(tools_json.to_string().as_bytes());
    out.extend_from_slice(b",\"request\":");
    out.extend_from_slice(request.wire().to_string().as_bytes());
    out.extend_from_slice(b",\"turns\":[");
    let whole = Cuts::At(Vec::new());
    for (t, data) in turns.iter().enumerate() {
        if t > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"chunks\":[");
        let mut chunks = 0;
        for (i, piece) in cuts.get(t).unwrap_or(&whole).pieces(data).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            chunks += 1;
            match std::str::from_utf8(piece) {
                Ok(s) => json_string(&mut out, s),
                Err(_) => {
                    out.extend_from_slice(b"{\"b64\":\"");
                    out.extend_from_slice(BASE64_STANDARD.encode(piece).as_bytes());
                    out.extend_from_slice(b"\"}");
                }
            }
        }
        out.push(b']');
        if let Some(ids) = token_ids.get(t).filter(|ids| !ids.is_empty()) {
            debug_assert_eq!(ids.len(), chunks, "one id list per chunk");
            if ids.len() == chunks {
                out.extend_from_slice(b",\"token_ids\":[");
                for (i, chunk) in ids.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.push(b'[');
                    for (j, id) in chunk.iter().enumerate() {
                        if j > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(id.to_string().as_bytes());
                    }
                    out.push(b']');
                }
                out.push(b']');
                if let Some(v) = cuts.get(t).and_then(Cuts::vocabulary) {
                    out.extend_from_slice(b",\"tokenizer\":");
                    let mut o = serde_json::json!({"name": v.name});
                    if let Some(f) = &v.file {
                        o["file"] = Value::from(f.as_str());
                    }
                    if !v.special.is_empty() {
                        o["special"] = serde_json::json!(v.special);
                    }
                    out.extend_from_slice(o.to_string().as_bytes());
                }
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}\n");
    out
}

fn json_string(out: &mut Vec<u8>, s: &str) {
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// An event as adapters write it: `Event`'s serde form, with `message` optional.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum WireEvent {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    CallStart {
        index: usize,
        #[serde(default)]
        id: Option<String>,
        name: String,
        #[serde(default)]
        server: Option<String>,
    },
    ArgsDelta {
        index: usize,
        json: String,
    },
    CallEnd {
        index: usize,
    },
    Warning {
        kind: String,
        #[serde(default)]
        message: String,
    },
    Error {
        kind: ErrorKind,
        #[serde(default)]
        message: String,
    },
}

impl From<WireEvent> for Event {
    fn from(w: WireEvent) -> Event {
        match w {
            WireEvent::Text { text } => Event::text(text),
            WireEvent::Reasoning { text } => Event::reasoning(text),
            WireEvent::CallStart {
                index,
                id,
                name,
                server,
            } => Event::CallStart {
                index,
                id,
                name,
                server,
            },
            WireEvent::ArgsDelta { index, json } => Event::ArgsDelta {
                index,
                json: json.into(),
            },
            WireEvent::CallEnd { index } => Event::CallEnd { index },
            WireEvent::Warning { kind, message } => Event::Warning { kind, message },
            WireEvent::Error { kind, message } => Event::Error { kind, message },
        }
    }
}

/// A final result as adapters write it.
#[derive(Deserialize)]
struct WireResult {
    text: String,
    /// Absent when the adapter does not report reasoning: it is then not judged on it.
    #[serde(default)]
    reasoning: Option<String>,
    calls: Vec<WireCall>,
    errors: Vec<WireIssue<ErrorKind>>,
    #[serde(default)]
    warnings: Vec<WireIssue<String>>,
}

#[derive(Deserialize)]
struct WireCall {
    name: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    server: Option<String>,
    arguments: Value,
}

#[derive(Deserialize)]
struct WireIssue<K> {
    kind: K,
    #[serde(default)]
    message: String,
}

fn breach(msg: String) -> (Breakdown, String) {
    (Breakdown::ProtocolError, msg)
}

/// Reads one response line for request `id` with `n` turns: the outcomes, or the adapter's
/// own `error` message (`Ok(Err)`), or a breach of the protocol.
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(super) fn read_response(
    line: &[u8],
    id: u64,
    n: usize,
) -> Result<Result<Vec<TurnOutcome>, String>, (Breakdown, String)> {
    read_timed_response(line, id, &vec![usize::MAX; n]).map(|r| r.map(|(turns, _)| turns))
}

/// [`read_response`], with the response's optional `engine_ns` (§2.6): the nanoseconds the
/// engine's own parser spent on the request, as the adapter measured them.
///
/// `limits` holds, per turn of the request, the most events its answer may carry
/// ([`max_events`]). An `events` answer is read as it is parsed, one event at a time, so that
/// it costs about its line, not a tree of values (a 135 MB line of 5 M events took 4 GB);
/// anything that reading does not take (a `result`, an `error`, a breach) is read whole as
/// before, for its message.
#[allow(clippy::type_complexity)]
pub(super) fn read_timed_response(
    line: &[u8],
    id: u64,
    limits: &[usize],
) -> Result<Result<(Vec<TurnOutcome>, Option<u64>), String>, (Breakdown, String)> {
    stream_events(line, id, limits).unwrap_or_else(|| read_whole(line, id, limits))
}

/// [`read_timed_response`] on the line read whole into a tree of values.
#[allow(clippy::type_complexity)]
fn read_whole(
    line: &[u8],
    id: u64,
    limits: &[usize],
) -> Result<Result<(Vec<TurnOutcome>, Option<u64>), String>, (Breakdown, String)> {
    let n = limits.len();
    let mut v = read_line_json(line).map_err(|m| breach(format!("the response is {m}")))?;
    // Optional and advisory: a value that is not a non-negative integer is ignored, not a
    // breach, since the verdict does not depend on it.
    let engine_ns = v.get("engine_ns").and_then(Value::as_u64);
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let got = v.get("id").and_then(Value::as_u64);
    if got != Some(id) {
        return Err(breach(format!(
            "the response carries id {} but the request was {id}: {}",
            v.get("id").map_or("none".into(), Value::to_string),
            quote_line(line)
        )));
    }
    let turns_len = v.get("turns").and_then(Value::as_array).map(Vec::len);
    match kind.as_str() {
        "error" => {
            let msg = v
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)");
            return Ok(Err(format!("the adapter reported an error: {msg}")));
        }
        "events" | "result" if turns_len != Some(n) => {
            return Err(breach(format!(
                "the response has {} turn(s), the request {n}",
                turns_len.map_or("no array of".into(), |k| k.to_string())
            )));
        }
        "events" | "result" => {}
        other => {
            return Err(breach(format!(
                "unknown response type {other:?} (expected events, result or error)"
            )));
        }
    }
    let turns = match v.get_mut("turns").map(Value::take) {
        Some(Value::Array(turns)) => turns,
        _ => Vec::new(),
    };
    turns
        .into_iter()
        .enumerate()
        .map(|(t, turn)| {
            let at = if n > 1 {
                format!("turn {}: ", t + 1)
            } else {
                String::new()
            };
            if kind == "events" {
                let evs: Vec<WireEvent> = serde_json::from_value(turn)
                    .map_err(|e| breach(format!("{at}bad event list: {e}")))?;
                if evs.len() > limits[t] {
                    return Err(breach(too_many_events(&at, limits[t])));
                }
                Ok(fold_events(evs.into_iter().map(Event::from)))
            } else {
                let r: WireResult = serde_json::from_value(turn)
                    .map_err(|e| breach(format!("{at}bad result: {e}")))?;
                Ok(result_outcome(r))
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|turns| Ok((turns, engine_ns)))
}

fn fold_events(events: impl Iterator<Item = Event>) -> TurnOutcome {
    let mut fold = TurnFold::default();
    for ev in events {
        fold.push(&ev);
    }
    fold.finish()
}

/// A turn's events folded as they come, and hashed (two answers with the same events are
/// the same answer).
#[derive(Default)]
struct TurnFold {
    folder: Folder,
    hasher: DefaultHasher,
    events: usize,
}

impl TurnFold {
    fn push(&mut self, ev: &Event) {
        ev.hash(&mut self.hasher);
        self.folder.push(ev);
        self.events += 1;
    }

    fn finish(self) -> TurnOutcome {
        let (result, anomalies) = self.folder.finish_with_anomalies();
        TurnOutcome {
            result,
            anomalies,
            events_hash: self.hasher.finish(),
            events_seen: true,
        }
    }
}

/// The most events an answer may carry for a turn of `bytes` bytes: a parser emits a few per
/// chunk it is fed and no turn has more chunks than bytes, so more than four per byte (and a
/// margin) is an adapter run wild, not a parse.
pub(super) fn max_events(bytes: usize) -> usize {
    bytes.saturating_mul(4).saturating_add(1024)
}

fn too_many_events(at: &str, limit: usize) -> String {
    format!(
        "{at}more than {limit} events for the turn (at most 4 per byte of the turn, and 1024 \
         more): not read further"
    )
}

/// Reads an `events` answer for request `id` as it is parsed (see [`read_timed_response`]):
/// `None` when the line is anything else, or anything the whole reading must look at to name
/// (an `error` or `result` answer, another id or turn count, a bad event, JSON serde_json's
/// reader refuses); then the caller reads it whole.
#[allow(clippy::type_complexity)]
fn stream_events(
    line: &[u8],
    id: u64,
    limits: &[usize],
) -> Option<Result<Result<(Vec<TurnOutcome>, Option<u64>), String>, (Breakdown, String)>> {
    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use std::cell::RefCell;

    // First pass: the head, with the turns counted and skipped (nothing is built).
    struct Count(usize);
    impl<'de> Deserialize<'de> for Count {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Count;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an array")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Count, A::Error> {
                    let mut n = 0;
                    while a.next_element::<IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok(Count(n))
                }
            }
            d.deserialize_seq(V)
        }
    }
    #[derive(Deserialize)]
    struct Head {
        #[serde(rename = "type")]
        kind: String,
        id: u64,
        #[serde(default)]
        engine_ns: Option<Value>,
        turns: Count,
    }
    let head: Head = serde_json::from_slice(line).ok()?;
    if head.kind != "events" || head.id != id || head.turns.0 != limits.len() {
        return None;
    }
    let engine_ns = head.engine_ns.as_ref().and_then(Value::as_u64);

    // Second pass: each turn's events folded one by one.
    struct Line<'a> {
        limits: &'a [usize],
        over: &'a RefCell<Option<String>>,
    }
    struct Turns<'a>(&'a Line<'a>);
    struct Turn<'a> {
        at: String,
        limit: usize,
        over: &'a RefCell<Option<String>>,
    }
    impl<'de> DeserializeSeed<'de> for &Line<'_> {
        type Value = Vec<TurnOutcome>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for &Line<'_> {
        type Value = Vec<TurnOutcome>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a response object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            let mut turns = Vec::new();
            while let Some(key) = a.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "turns" {
                    turns = a.next_value_seed(Turns(self))?;
                } else {
                    a.next_value::<IgnoredAny>()?;
                }
            }
            Ok(turns)
        }
    }
    impl<'de> DeserializeSeed<'de> for Turns<'_> {
        type Value = Vec<TurnOutcome>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
    }
    impl<'de> Visitor<'de> for Turns<'_> {
        type Value = Vec<TurnOutcome>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of turns")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            let n = self.0.limits.len();
            let mut out = Vec::with_capacity(n);
            for (t, &limit) in self.0.limits.iter().enumerate() {
                let at = if n > 1 {
                    format!("turn {}: ", t + 1)
                } else {
                    String::new()
                };
                let seed = Turn {
                    at,
                    limit,
                    over: self.0.over,
                };
                match a.next_element_seed(seed)? {
                    Some(turn) => out.push(turn),
                    None => return Err(serde::de::Error::custom("fewer turns")),
                }
            }
            Ok(out)
        }
    }
    impl<'de> DeserializeSeed<'de> for Turn<'_> {
        type Value = TurnOutcome;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
    }
    impl<'de> Visitor<'de> for Turn<'_> {
        type Value = TurnOutcome;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of events")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            let mut fold = TurnFold::default();
            while let Some(ev) = a.next_element::<WireEvent>()? {
                if fold.events == self.limit {
                    *self.over.borrow_mut() = Some(too_many_events(&self.at, self.limit));
                    return Err(serde::de::Error::custom("too many events"));
                }
                fold.push(&Event::from(ev));
            }
            Ok(fold.finish())
        }
    }
    let over = RefCell::new(None);
    let seed = Line {
        limits,
        over: &over,
    };
    let mut de = serde_json::Deserializer::from_slice(line);
    let read = (&seed)
        .deserialize(&mut de)
        .and_then(|t| de.end().map(|()| t));
    if let Some(msg) = over.into_inner() {
        return Some(Err(breach(msg)));
    }
    read.ok().map(|turns| Ok(Ok((turns, engine_ns))))
}

fn result_outcome(r: WireResult) -> TurnOutcome {
    let calls: Vec<ToolCall> = r
        .calls
        .into_iter()
        .map(|c| ToolCall {
            name: c.name,
            id: c.id,
            server: c.server,
            // OpenAI-style APIs carry arguments as JSON text; text that is not JSON stays a
            // string so the mismatch shows.
            arguments: match c.arguments {
                Value::String(s) => read_json(&s, FOLD_MAX_DEPTH).unwrap_or(Value::String(s)),
                v => v,
            },
        })
        .collect();
    let result = ParseResult {
        text: r.text,
        reasoning: r.reasoning,
        completion: crate::event::completion_of(&calls),
        calls,
        warnings: r
            .warnings
            .into_iter()
            .map(|w| WarningInfo {
                kind: w.kind,
                message: w.message,
            })
            .collect(),
        errors: r
            .errors
            .into_iter()
            .map(|e| ErrorInfo {
                kind: e.kind,
                message: e.message,
            })
            .collect(),
        // A result without events: no order to judge.
        order: None,
    };
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(&result)
        .unwrap_or_default()
        .hash(&mut hasher);
    TurnOutcome {
        result,
        anomalies: Vec::new(),
        events_hash: hasher.finish(),
        events_seen: false,
    }
}

/// A response line for messages: at most 120 characters, quoted.
pub(super) fn quote_line(line: &[u8]) -> String {
    crate::event::excerpt(&String::from_utf8_lossy(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_strings_unless_a_piece_is_not_utf8_on_its_own() {
        let data = "aé".as_bytes().to_vec(); // 61 C3 A9
        let req = parse_request(
            7,
            "kimi_k2",
            &Tools::default(),
            &Request::default(),
            std::slice::from_ref(&data),
            &[Cuts::At(vec![2])],
            &[],
        );
        let v: Value = serde_json::from_slice(&req).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["tools"], serde_json::json!([]));
        // Every request carries the request modes, the defaults spelled out.
        assert_eq!(
            v["request"],
            serde_json::json!({"starting_state": "none", "tool_choice": "auto", "finish_reason": "stop"})
        );
        assert_eq!(
            v["turns"][0]["chunks"],
            serde_json::json!([{"b64": "YcM="}, {"b64": "qQ=="}])
        );
        assert!(req.ends_with(b"\n"));
        let whole = parse_request(
            1,
            "kimi_k2",
            &Tools::default(),
            &Request::default(),
            &[data],
            &[],
            &[],
        );
        let v: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(v["turns"][0]["chunks"], serde_json::json!(["aé"]));
        assert!(v["turns"][0].get("token_ids").is_none());
    }

    #[test]
    fn token_ids_go_with_their_turn_one_list_per_chunk() {
        let turns = [b"ab<|x|>".to_vec(), b"cd".to_vec(), b"e".to_vec()];
        let cuts = [Cuts::At(vec![2]), Cuts::At(vec![1])];
        let ids = [vec![vec![1, 2], vec![163_586]], vec![], vec![vec![7]]];
        let req = parse_request(
            3,
            "kimi_k2",
            &Tools::default(),
            &Request::default(),
            &turns,
            &cuts,
            &ids,
        );
        let v: Value = serde_json::from_slice(&req).unwrap();
        assert_eq!(
            v["turns"],
            serde_json::json!([
                {"chunks": ["ab", "<|x|>"], "token_ids": [[1, 2], [163_586]]},
                {"chunks": ["c", "d"]},
                {"chunks": ["e"], "token_ids": [[7]]},
            ])
        );
    }

    #[test]
    fn a_token_aligned_turn_names_the_vocabulary_of_its_ids() {
        use crate::backends::cuts::{Grouping, TokenCuts, Tokenized, VocabularyRef};
        let mut tokens = Tokenized::default();
        tokens.push_id(Some(151657));
        tokens.close(11);
        tokens.push_id(Some(9));
        tokens.close(12);
        tokens.set_vocabulary(Some(std::sync::Arc::new(VocabularyRef {
            name: "qwen2".into(),
            file: Some("/cache/qwen2/qwen.tiktoken".into()),
            special: vec![("<tool_call>".into(), 151657)],
        })));
        let cuts = [Cuts::Tokens(TokenCuts {
            tokens: std::sync::Arc::new(tokens),
            grouping: Grouping::EveryToken,
        })];
        let ids = [vec![vec![151657], vec![9]]];
        let turns = [b"<tool_call>*".to_vec()];
        let req = parse_request(
            4,
            "hermes",
            &Tools::default(),
            &Request::default(),
            &turns,
            &cuts,
            &ids,
        );
        let v: Value = serde_json::from_slice(&req).unwrap();
        assert_eq!(
            v["turns"][0]["tokenizer"],
            serde_json::json!({"name": "qwen2", "file": "/cache/qwen2/qwen.tiktoken",
                               "special": [["<tool_call>", 151657]]})
        );
        // Without ids, no vocabulary.
        let req = parse_request(
            5,
            "hermes",
            &Tools::default(),
            &Request::default(),
            &turns,
            &cuts,
            &[],
        );
        let v: Value = serde_json::from_slice(&req).unwrap();
        assert!(v["turns"][0].get("tokenizer").is_none());
    }

    /// `{"a":{"a":…{}…}}`, `depth` objects deep.
    fn nested(depth: usize) -> String {
        let mut s = "{\"a\":".repeat(depth - 1);
        s.push_str("{}");
        s.push_str(&"}".repeat(depth - 1));
        s
    }

    #[test]
    fn arguments_deeper_than_serde_json_reads_are_judged() {
        let args = nested(300);
        let events = serde_json::json!({"type": "events", "id": 1, "turns": [[
            {"type": "call_start", "index": 0, "name": "f"},
            {"type": "args_delta", "index": 0, "json": args},
            {"type": "call_end", "index": 0},
        ]]});
        let t = read_response(events.to_string().as_bytes(), 1, 1)
            .unwrap()
            .unwrap();
        assert_eq!(t[0].anomalies, Vec::<String>::new());
        assert_eq!(
            t[0].result.calls[0].arguments,
            read_json(&args, 400).unwrap()
        );
        // The same arguments as an object inside a result line, and as a string.
        for call in [
            format!("{{\"name\":\"f\",\"arguments\":{args}}}"),
            serde_json::json!({"name": "f", "arguments": args}).to_string(),
        ] {
            let line = format!(
                "{{\"type\":\"result\",\"id\":1,\"turns\":[{{\"text\":\"\",\"calls\":[{call}],\"errors\":[]}}]}}"
            );
            let t = read_response(line.as_bytes(), 1, 1).unwrap().unwrap();
            assert!(t[0].result.calls[0].arguments.is_object());
        }
        // As deep as conform reads, as an object in a result line, on a thread of rayon's
        // default stack (2 MiB), unoptimized: reading, converting and dropping fit.
        let deepest = nested(FOLD_MAX_DEPTH);
        let line = format!(
            "{{\"type\":\"result\",\"id\":1,\"turns\":[{{\"text\":\"\",\"calls\":[{{\"name\":\"f\",\"arguments\":{deepest}}}],\"errors\":[]}}]}}"
        );
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let t = read_response(line.as_bytes(), 1, 1).unwrap().unwrap();
                assert!(t[0].result.calls[0].arguments.is_object());
                let copy = t.clone();
                drop(copy);
            })
            .unwrap()
            .join()
            .unwrap();
        // Beyond conform's own limit: a result line is refused, saying why; event fragments
        // stay text, without blaming the parser's delta contract.
        let too_deep = nested(FOLD_MAX_DEPTH + 10);
        let line = format!(
            "{{\"type\":\"result\",\"id\":1,\"turns\":[{{\"text\":\"\",\"calls\":[{{\"name\":\"f\",\"arguments\":{too_deep}}}],\"errors\":[]}}]}}"
        );
        let e = read_response(line.as_bytes(), 1, 1).unwrap_err();
        assert_eq!(e.0, Breakdown::ProtocolError);
        assert!(e.1.contains("as a JSON string"), "{}", e.1);
        let events = serde_json::json!({"type": "events", "id": 1, "turns": [[
            {"type": "call_start", "index": 0, "name": "f"},
            {"type": "args_delta", "index": 0, "json": too_deep},
            {"type": "call_end", "index": 0},
        ]]});
        let t = read_response(events.to_string().as_bytes(), 1, 1)
            .unwrap()
            .unwrap();
        assert_eq!(t[0].anomalies, Vec::<String>::new());
        assert_eq!(t[0].result.calls[0].arguments, Value::String(too_deep));
    }

    #[test]
    fn events_past_the_bound_are_a_breach_whichever_way_they_are_read() {
        let ev = r#"{"type":"text","text":"x"}"#;
        let line = |k: usize| {
            let evs = vec![ev; k].join(",");
            format!(r#"{{"type":"events","id":7,"turns":[[{evs}],[]]}}"#)
        };
        let ok = read_timed_response(line(3).as_bytes(), 7, &[3, 0])
            .unwrap()
            .unwrap();
        assert_eq!(ok.0[0].result.text, "xxx");
        for read in [read_timed_response, read_whole] {
            let e = read(line(4).as_bytes(), 7, &[3, 0]).unwrap_err();
            assert_eq!(e.0, Breakdown::ProtocolError);
            assert!(e.1.contains("turn 1: more than 3 events"), "{}", e.1);
        }
        assert_eq!(max_events(10), 1064);
    }

    #[test]
    fn an_events_answer_read_as_it_is_parsed_is_the_answer_read_whole() {
        let lines = [
            r#"{"type":"events","id":3,"turns":[[{"type":"text","text":"hi"},{"type":"call_start","index":0,"name":"f"},{"type":"args_delta","index":0,"json":"{\"a\":"},{"type":"args_delta","index":0,"json":"[1]}"},{"type":"call_end","index":0}]]}"#,
            r#"{"engine_ns":9,"turns":[[{"type":"reasoning","text":"r"},{"type":"warning","kind":"w"}],[{"type":"error","kind":"invalid_json","message":"m"},{"type":"text","text":"t"}]],"id":3,"extra":{"a":[1,2]},"type":"events"}"#,
            r#"{"type":"events","id":3,"turns":[[{"type":"call_start","index":1,"id":"c","name":"g","server":"s"},{"type":"call_end","index":1}],[]]}"#,
        ];
        for line in lines {
            let n = if line.contains("],[") { 2 } else { 1 };
            let limits = vec![usize::MAX; n];
            let streamed = stream_events(line.as_bytes(), 3, &limits)
                .expect("read as it is parsed")
                .unwrap()
                .unwrap();
            let whole = read_whole(line.as_bytes(), 3, &limits).unwrap().unwrap();
            assert_eq!(streamed.1, whole.1, "{line}");
            for (a, b) in streamed.0.iter().zip(&whole.0) {
                assert_eq!(a.result, b.result, "{line}");
                assert_eq!(a.anomalies, b.anomalies, "{line}");
                assert_eq!(a.events_hash, b.events_hash, "{line}");
            }
        }
        // What it does not take is read whole, for its message.
        for other in [
            r#"{"type":"result","id":3,"turns":[{"text":"","calls":[],"errors":[]}]}"#,
            r#"{"type":"events","id":4,"turns":[[]]}"#,
            r#"{"type":"events","id":3,"turns":[[],[]]}"#,
            r#"{"type":"events","id":3,"turns":[[{"type":"error","kind":"nope"}]]}"#,
        ] {
            assert!(
                stream_events(other.as_bytes(), 3, &[usize::MAX]).is_none(),
                "{other}"
            );
        }
    }

    #[test]
    fn engine_time_is_read_when_present_and_ignored_when_odd() {
        let timed = br#"{"type":"result","id":5,"engine_ns":12345,"turns":[{"text":"","calls":[],"errors":[]}]}"#;
        let (turns, ns) = read_timed_response(timed, 5, &[usize::MAX])
            .unwrap()
            .unwrap();
        assert_eq!((turns.len(), ns), (1, Some(12345)));
        let plain = br#"{"type":"events","id":5,"turns":[[]]}"#;
        assert_eq!(
            read_timed_response(plain, 5, &[usize::MAX])
                .unwrap()
                .unwrap()
                .1,
            None
        );
        let odd = br#"{"type":"events","id":5,"engine_ns":-3,"turns":[[]]}"#;
        assert_eq!(
            read_timed_response(odd, 5, &[usize::MAX])
                .unwrap()
                .unwrap()
                .1,
            None
        );
    }

    #[test]
    fn responses_are_checked() {
        let ok = br#"{"type":"events","id":3,"turns":[[{"type":"text","text":"hi"},{"type":"call_start","index":0,"name":"f"},{"type":"args_delta","index":0,"json":"{}"},{"type":"call_end","index":0}]]}"#;
        let t = read_response(ok, 3, 1).unwrap().unwrap();
        assert!(t[0].events_seen);
        assert_eq!(t[0].result.text, "hi");
        assert_eq!(t[0].result.calls.len(), 1);
        let res = br#"{"type":"result","id":3,"turns":[{"text":"","calls":[{"name":"f","arguments":"{\"a\":1}"}],"errors":[{"kind":"invalid_json"}]}]}"#;
        let t = read_response(res, 3, 1).unwrap().unwrap();
        assert!(!t[0].events_seen);
        assert_eq!(t[0].result.calls[0].arguments, serde_json::json!({"a": 1}));
        assert_eq!(t[0].result.error_kinds(), vec![ErrorKind::InvalidJson]);
        let kind = |r: &[u8], n| read_response(r, 3, n).err().map(|e| e.0);
        assert_eq!(kind(ok, 2), Some(Breakdown::ProtocolError));
        assert_eq!(
            kind(br#"{"type":"events","id":4,"turns":[[]]}"#, 1),
            Some(Breakdown::ProtocolError)
        );
        assert_eq!(kind(b"hello", 1), Some(Breakdown::ProtocolError));
        assert!(matches!(
            read_response(br#"{"type":"error","id":3,"message":"boom"}"#, 3, 1),
            Ok(Err(m)) if m.contains("boom")
        ));
        assert_eq!(
            kind(
                br#"{"type":"events","id":3,"turns":[[{"type":"error","kind":"nope"}]]}"#,
                1
            ),
            Some(Breakdown::ProtocolError)
        );
        assert_eq!(
            kind(br#"{"type":"result","id":3,"turns":[{"text":""}]}"#, 1),
            Some(Breakdown::ProtocolError)
        );
    }
}
