//! conform's adapter protocol 2 (`specs/adapter.md`) for the Rust engine adapters: requests,
//! the incremental UTF-8 decoding of chunks, event and result lines, and the serving loop.
//!
//! The adapters are separate Cargo projects (each pins its engine), so this file is no crate:
//! each includes it by path (`#[path = "../../protocol/protocol.rs"] mod protocol;`) and so
//! speaks the protocol the same way. It needs `serde_json` and `base64` only.

use base64::Engine;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

/// One tool of the request: what the engines' parsers take to type arguments.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub parameters: Option<Value>,
    /// The tool as the request sent it (an OpenAI `tools` entry), for engines that take those.
    pub json: Value,
}

/// One assistant turn: the chunks' bytes and, on token-aligned replays, their token ids.
#[derive(Debug, Clone)]
pub struct TurnIn {
    pub chunks: Vec<Vec<u8>>,
    pub token_ids: Option<Vec<Vec<u32>>>,
    /// The vocabulary of `token_ids` (`specs/adapter.md` §2.2): its `name` (`qwen2`,
    /// `deepseek_v3`, `o200k_harmony`…; `o200k_base` is the fallback of a format whose model
    /// vocabulary conform could not load, whose ids are then not the model's), its `file` and
    /// the `special` tokens the file does not carry.
    pub tokenizer: Option<Value>,
}

impl TurnIn {
    /// The turn's text as a server's detokenizer hands it to its parser, piece by piece: a
    /// character cut across chunks waits for its bytes, and pieces with no text are left out.
    pub fn texts(&self) -> Vec<String> {
        let mut utf8 = Utf8Stream::default();
        let mut out: Vec<String> = self.chunks.iter().map(|c| utf8.push(c)).collect();
        out.push(utf8.finish());
        out.retain(|t| !t.is_empty());
        out
    }
}

/// A parse request (`specs/adapter.md` §2.2).
#[derive(Debug, Clone)]
pub struct Request {
    pub id: Value,
    pub format: String,
    pub tools: Vec<ToolSpec>,
    pub turns: Vec<TurnIn>,
    /// The serving path conform asks for (`batch`, `stream`; §2.1 `paths`), if any.
    pub path: Option<String>,
    /// The request mode of the case (`starting_state`, `thinking`, `tool_choice`…).
    pub mode: Value,
}

/// What an adapter answers for one request: events per turn or results per turn.
pub enum Answer {
    Events(Vec<Vec<Value>>),
    Results(Vec<Value>),
}

/// Time spent inside the engine's own calls, the `engine_ns` of every response.
#[derive(Debug, Default)]
pub struct EngineClock(Duration);

impl EngineClock {
    /// Runs `f` (an engine call) and adds its duration.
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.0 += start.elapsed();
        out
    }

    /// Adds an interval measured by the caller (an async engine call driven in pieces).
    pub fn add(&mut self, d: Duration) {
        self.0 += d;
    }

    /// Nanoseconds so far.
    pub fn nanos(&self) -> u64 {
        u64::try_from(self.0.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Turns chunk bytes into text the way a server's incremental detokenizer does: a character
/// cut across chunks waits for its remaining bytes, and invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The text the bytes so far complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &after[n..];
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// The end of the turn: bytes of a character that never completed become U+FFFD.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

fn chunk_bytes(c: &Value) -> Result<Vec<u8>, String> {
    match c {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        other => other
            .get("b64")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("a chunk is neither a string nor {{\"b64\"}}: {other}"))
            .and_then(|b| {
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|e| format!("bad base64 chunk: {e}"))
            }),
    }
}

/// Reads a `parse` message; `serve` does it for every request.
pub fn parse_request(req: &Value) -> Result<Request, String> {
    let tools = req["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|t| {
            let f = t.get("function").unwrap_or(t);
            Some(ToolSpec {
                name: f.get("name")?.as_str()?.to_string(),
                parameters: f.get("parameters").cloned(),
                json: t.clone(),
            })
        })
        .collect();
    let mut turns = Vec::new();
    for t in req["turns"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let chunks = t["chunks"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(chunk_bytes)
            .collect::<Result<Vec<_>, _>>()?;
        // A token the replay's tokenizer has no id for is `null`: then the turn cannot be fed
        // as ids at all, and goes as text.
        let token_ids = t
            .get("token_ids")
            .and_then(Value::as_array)
            .and_then(|per| {
                per.iter()
                    .map(|ids| {
                        ids.as_array()
                            .map(Vec::as_slice)
                            .unwrap_or_default()
                            .iter()
                            .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
                            .collect::<Option<Vec<u32>>>()
                    })
                    .collect::<Option<Vec<_>>>()
            });
        let tokenizer = t.get("tokenizer").filter(|v| v.is_object()).cloned();
        turns.push(TurnIn {
            chunks,
            token_ids,
            tokenizer,
        });
    }
    Ok(Request {
        id: req["id"].clone(),
        format: req["format"].as_str().unwrap_or_default().to_string(),
        tools,
        turns,
        path: req.get("path").and_then(Value::as_str).map(str::to_string),
        mode: req.get("request").cloned().unwrap_or(Value::Null),
    })
}

/// Event constructors, in the serde form of `conform::event::Event`.
pub mod ev {
    use serde_json::{Value, json};

    pub fn text(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }
    pub fn reasoning(t: &str) -> Value {
        json!({"type": "reasoning", "text": t})
    }
    pub fn call_start(index: usize, id: Option<&str>, name: &str) -> Value {
        match id {
            Some(id) => json!({"type": "call_start", "index": index, "id": id, "name": name}),
            None => json!({"type": "call_start", "index": index, "name": name}),
        }
    }
    pub fn args_delta(index: usize, json: &str) -> Value {
        json!({"type": "args_delta", "index": index, "json": json})
    }
    pub fn call_end(index: usize) -> Value {
        json!({"type": "call_end", "index": index})
    }
    pub fn error(kind: &str, message: &str) -> Value {
        json!({"type": "error", "kind": kind, "message": message})
    }
    pub fn warning(kind: &str, message: &str) -> Value {
        json!({"type": "warning", "kind": kind, "message": message})
    }
}

/// Serves protocol 2 on stdin/stdout until stdin closes. `handle` answers one request and the
/// engine time it spent; an `Err` or a panic is the request's `error` response (a `crash`).
pub fn serve(
    name: &str,
    formats: &[&str],
    handle: impl FnMut(&Request) -> Result<(Answer, u64), String>,
) {
    serve_paths(name, formats, &[], handle)
}

/// `serve` for an adapter that declares its serving paths (`batch`, `stream`) in the hello:
/// each request then names the one it wants (`Request::path`).
pub fn serve_paths(
    name: &str,
    formats: &[&str],
    paths: &[&str],
    mut handle: impl FnMut(&Request) -> Result<(Answer, u64), String>,
) {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            eprintln!("not a JSON line: {line:.80}");
            continue;
        };
        let reply = match msg.get("type").and_then(Value::as_str) {
            Some("hello") => {
                let mut h = json!({"type": "hello", "protocol": 2, "name": name, "formats": formats});
                if !paths.is_empty() {
                    h["paths"] = json!(paths);
                }
                h
            }
            Some("parse") => {
                let id = msg["id"].clone();
                let outcome = parse_request(&msg).and_then(|req| {
                    std::panic::catch_unwind(AssertUnwindSafe(|| handle(&req)))
                        .unwrap_or_else(|p| Err(format!("the engine panicked: {}", panic_text(&p))))
                });
                match outcome {
                    Ok((Answer::Events(turns), ns)) => {
                        json!({"type": "events", "id": id, "turns": turns, "engine_ns": ns})
                    }
                    Ok((Answer::Results(turns), ns)) => {
                        json!({"type": "result", "id": id, "turns": turns, "engine_ns": ns})
                    }
                    Err(message) => json!({"type": "error", "id": id, "message": message}),
                }
            }
            _ => continue,
        };
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_stream_waits_for_a_cut_character_and_replaces_invalid_bytes() {
        let mut s = Utf8Stream::default();
        let e = "é".as_bytes();
        assert_eq!(s.push(&[b'a', e[0]]), "a");
        assert_eq!(s.push(&[e[1], b'b']), "éb");
        assert_eq!(s.push(&[0xff, b'c']), "\u{FFFD}c");
        assert_eq!(s.push(&[e[0]]), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }

    #[test]
    fn a_turns_texts_leave_out_pieces_without_text() {
        let e = "é".as_bytes();
        let turn = TurnIn {
            chunks: vec![vec![e[0]], vec![e[1], b'x'], vec![0xff], vec![e[0]]],
            token_ids: None,
            tokenizer: None,
        };
        assert_eq!(turn.texts(), vec!["éx", "\u{FFFD}", "\u{FFFD}"]);
    }

    #[test]
    fn requests_decode_b64_chunks_and_token_ids() {
        let req = json!({"type":"parse","id":3,"format":"kimi_k2",
            "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
            "turns":[{"chunks":["ab",{"b64":"w6k="}],"token_ids":[[1,2],[3]],
                      "tokenizer":{"name":"kimi_k2","file":"/c/kimi_k2.tiktoken"}}]});
        let r = parse_request(&req).unwrap();
        assert_eq!(r.tools[0].name, "f");
        assert_eq!(r.tools[0].json["type"], "function");
        assert_eq!(
            r.turns[0].chunks,
            vec![b"ab".to_vec(), "é".as_bytes().to_vec()]
        );
        assert_eq!(r.turns[0].token_ids, Some(vec![vec![1, 2], vec![3]]));
        assert_eq!(r.turns[0].tokenizer.as_ref().unwrap()["name"], "kimi_k2");
        let req = json!({"type":"parse","id":4,"format":"harmony","tools":[],
            "turns":[{"chunks":["a","b"],"token_ids":[[1],[null]]}]});
        assert_eq!(parse_request(&req).unwrap().turns[0].token_ids, None);
    }
}
