//! The adapter protocol of `specs/adapter.md`: the hello exchange, request lines and the
//! checking of response lines.

use super::Hello;
use super::process::Worker;
use crate::backends::{Breakdown, TurnOutcome};
use crate::event::{ErrorInfo, ErrorKind, Event, Folder, ParseResult, ToolCall, WarningInfo};
use crate::harness::chunking::Cuts;
use crate::tools::Tools;
use base64::prelude::{BASE64_STANDARD, Engine as _};
use serde::Deserialize;
use serde_json::Value;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

/// The protocol version this build speaks (`"protocol": 1` in the hello exchange).
pub const PROTOCOL: u64 = 1;

/// Sends the hello and checks the answer.
pub(super) fn say_hello(w: &mut Worker, timeout: Duration) -> Result<Hello, (Breakdown, String)> {
    let req = format!("{{\"type\":\"hello\",\"protocol\":{PROTOCOL}}}\n").into_bytes();
    let line = w.exchange(req, Instant::now() + timeout)?;
    let v: Value = serde_json::from_slice(&line).map_err(|e| {
        (
            Breakdown::ProtocolError,
            format!("the hello answer is not JSON ({e}): {}", quote_line(&line)),
        )
    })?;
    #[derive(Deserialize)]
    struct WireHello {
        #[serde(rename = "type")]
        kind: String,
        protocol: u64,
        name: String,
        formats: Vec<String>,
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
    if h.protocol != PROTOCOL {
        return Err((
            Breakdown::ProtocolError,
            format!(
                "the adapter speaks protocol {}, conform speaks {PROTOCOL}",
                h.protocol
            ),
        ));
    }
    Ok(Hello {
        name: h.name,
        formats: h.formats,
    })
}

/// The request line for one replay (`\n`-terminated).
pub fn parse_request(
    id: u64,
    format: &str,
    tools: &Tools,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
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
    out.extend_from_slice(b",\"turns\":[");
    let whole = Cuts::At(Vec::new());
    for (t, data) in turns.iter().enumerate() {
        if t > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"chunks\":[");
        for (i, piece) in cuts.get(t).unwrap_or(&whole).pieces(data).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match std::str::from_utf8(piece) {
                Ok(s) => json_string(&mut out, s),
                Err(_) => {
                    out.extend_from_slice(b"{\"b64\":\"");
                    out.extend_from_slice(BASE64_STANDARD.encode(piece).as_bytes());
                    out.extend_from_slice(b"\"}");
                }
            }
        }
        out.extend_from_slice(b"]}");
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
#[allow(clippy::type_complexity)]
pub(super) fn read_response(
    line: &[u8],
    id: u64,
    n: usize,
) -> Result<Result<Vec<TurnOutcome>, String>, (Breakdown, String)> {
    let v: Value = serde_json::from_slice(line).map_err(|e| {
        breach(format!(
            "the response is not JSON ({e}): {}",
            quote_line(line)
        ))
    })?;
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let got = v.get("id").and_then(Value::as_u64);
    if got != Some(id) {
        return Err(breach(format!(
            "the response carries id {} but the request was {id}: {}",
            v.get("id").map_or("none".into(), Value::to_string),
            quote_line(line)
        )));
    }
    let turns = v.get("turns");
    let turns_len = turns.and_then(Value::as_array).map(Vec::len);
    match kind {
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
    let turns = turns.and_then(Value::as_array).cloned().unwrap_or_default();
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
                Ok(fold_events(evs.into_iter().map(Event::from)))
            } else {
                let r: WireResult = serde_json::from_value(turn)
                    .map_err(|e| breach(format!("{at}bad result: {e}")))?;
                Ok(result_outcome(r))
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Ok)
}

fn fold_events(events: impl Iterator<Item = Event>) -> TurnOutcome {
    let mut folder = Folder::default();
    let mut hasher = DefaultHasher::new();
    for ev in events {
        ev.hash(&mut hasher);
        folder.push(&ev);
    }
    let (result, anomalies) = folder.finish_with_anomalies();
    TurnOutcome {
        result,
        anomalies,
        events_hash: hasher.finish(),
        events_seen: true,
    }
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
                Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
                v => v,
            },
        })
        .collect();
    let result = ParseResult {
        text: r.text,
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
            std::slice::from_ref(&data),
            &[Cuts::At(vec![2])],
        );
        let v: Value = serde_json::from_slice(&req).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["tools"], serde_json::json!([]));
        assert_eq!(
            v["turns"][0]["chunks"],
            serde_json::json!([{"b64": "YcM="}, {"b64": "qQ=="}])
        );
        assert!(req.ends_with(b"\n"));
        let whole = parse_request(1, "kimi_k2", &Tools::default(), &[data], &[]);
        let v: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(v["turns"][0]["chunks"], serde_json::json!(["aé"]));
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
