//! A conform adapter (specs/adapter.md, protocol 2) around the SGLang model gateway's
//! `tool-parser` crate (1.10.0, crates.io): the tool-call parsers the gateway runs on every
//! chat completion it serves.
//!
//! ```sh
//! examples/adapters/sglang_gateway/setup
//! conform run corpus/kimi_k2 --parser 'cmd:examples/adapters/sglang_gateway/run'
//! conform run corpus/kimi_k2 --parser 'cmd:examples/adapters/sglang_gateway/run --mode batch'
//! ```
//!
//! The adapter drives the engine's own code the way the gateway's streaming chat path does
//! (`routers/grpc/regular/streaming.rs` in the gateway): one fresh parser per request from
//! `ParserFactory::new().registry().create_parser(name)`; each decoded delta goes to
//! `parse_incremental(delta, &tools)`, its `normal_text` becomes content and each
//! `ToolCallItem` a tool-call delta (a named item opens the call with a server-made id, its
//! `parameters` are argument text); at the end of the stream `take_unstreamed_normal_text()` is
//! content and `get_unstreamed_tool_args()` argument text, as the gateway flushes them. A client
//! closes every call it saw opened when the stream ends, so every started call gets its
//! `call_end` then. Nothing of the engine's output is repaired: an argument delta for a call
//! the engine never opened is passed on as it is.
//!
//! `--mode batch` calls `parse_complete_with_tools(text, &tools)` once on the whole turn (the
//! gateway's non-streaming path) and answers with a result.
//!
//! The gateway reports no error to a client: a `parse_incremental` error is logged and that
//! delta is dropped. The adapter does the same, and notes it as a warning (`gateway_error`),
//! which conform does not judge for an adapter.
//!
//! Every response carries `engine_ns`: the nanoseconds spent inside the engine's parser calls.

#[allow(dead_code)]
#[path = "../../protocol/protocol.rs"]
mod protocol;

use protocol::{Answer, EngineClock, Request, ev};
use serde_json::{Value, json};
use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use tool_parser::{ParserFactory, ToolParser};

/// The pinned engine version (Cargo.toml pins `tool-parser = "=1.10.0"`).
const ENGINE_VERSION: &str = "1.10.0";

/// conform format id → the gateway's parser name (`--tool-call-parser`), for every format
/// whose wire format the gateway's parser is written for. Checked against the crate's
/// `ParserFactory::new()` registrations at start.
const FORMATS: &[(&str, &str)] = &[
    ("kimi_k2", "kimik2"),
    ("hermes", "qwen"),
    ("llama3_json", "llama"),
    ("mistral", "mistral"),
    ("pythonic", "pythonic"),
    ("deepseek_v3", "deepseek"),
    ("deepseek_v31", "deepseek31"),
    ("deepseek_v32", "deepseek32"),
    ("deepseek_v4", "deepseek_v4"),
    ("deepseek_v41", "deepseek_v41"),
    ("qwen3_coder", "qwen_coder"),
    ("glm45", "glm45_moe"),
    ("glm47", "glm47_moe"),
    ("minimax_m2", "minimax_m2"),
    ("gemma4", "gemma4"),
    ("minimax_m3", "minimax_m3"),
    ("kimi_k3", "kimi_k3"),
    ("step3", "step3"),
];

/// Runs a future of the engine's async API to completion. Its futures never wait on anything
/// (they are async only to fit the gateway's traits), so polling with a no-op waker suffices.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// How the gateway makes a tool call's id (`generate_tool_call_id` in its router utils): Kimi
/// models get `functions.NAME:N`, N counting the calls of the whole conversation; every other
/// model `call_` and 24 hex digits of a random UUID.
struct Ids {
    kimi: bool,
    random: RandomState,
    drawn: u64,
}

impl Ids {
    fn make(&mut self, name: &str, global_index: usize) -> String {
        if self.kimi {
            return format!("functions.{name}:{global_index}");
        }
        let mut hex = String::with_capacity(24);
        while hex.len() < 24 {
            self.drawn += 1;
            hex.push_str(&format!("{:016x}", self.random.hash_one(self.drawn)));
        }
        hex.truncate(24);
        format!("call_{hex}")
    }
}

/// What one request asks for, and the state shared by its turns.
struct Replay<'a> {
    factory: &'a ParserFactory,
    parser_name: &'a str,
    tools: Vec<openai_protocol::common::Tool>,
    ids: Ids,
    /// Calls of earlier turns (the gateway's `history_tool_calls_count`).
    history: usize,
    clock: EngineClock,
}

impl Replay<'_> {
    fn parser(&self) -> Result<Box<dyn ToolParser>, String> {
        self.factory
            .registry()
            .create_parser(self.parser_name)
            .ok_or_else(|| format!("the gateway has no parser {:?}", self.parser_name))
    }

    /// One turn through the streaming path: the events a client of the gateway sees.
    fn stream_turn(&mut self, deltas: &[String]) -> Result<Vec<Value>, String> {
        let mut parser = self.parser()?;
        let tools = std::mem::take(&mut self.tools);
        let mut events = Vec::new();
        let mut started: Vec<usize> = Vec::new();
        for delta in deltas {
            match self
                .clock
                .time(|| block_on(parser.parse_incremental(delta, &tools)))
            {
                Ok(r) => {
                    if !r.normal_text.is_empty() {
                        events.push(ev::text(&r.normal_text));
                    }
                    for item in r.calls {
                        if let Some(name) = item.name {
                            let id = self.ids.make(&name, self.history + item.tool_index);
                            events.push(ev::call_start(item.tool_index, Some(&id), &name));
                            if !started.contains(&item.tool_index) {
                                started.push(item.tool_index);
                            }
                        }
                        if !item.parameters.is_empty() {
                            events.push(ev::args_delta(item.tool_index, &item.parameters));
                        }
                    }
                }
                Err(e) => events.push(ev::warning(
                    "gateway_error",
                    &format!(
                        "parse_incremental failed (the gateway logs it and drops the delta): {e}"
                    ),
                )),
            }
        }
        let rest = self.clock.time(|| parser.take_unstreamed_normal_text());
        if !rest.is_empty() {
            events.push(ev::text(&rest));
        }
        if let Some(items) = self.clock.time(|| parser.get_unstreamed_tool_args()) {
            for item in items {
                // The gateway sends these as argument deltas without a name.
                if !item.parameters.is_empty() {
                    events.push(ev::args_delta(item.tool_index, &item.parameters));
                }
            }
        }
        started.sort_unstable();
        for &index in &started {
            events.push(ev::call_end(index));
        }
        self.history += started.len();
        self.tools = tools;
        Ok(events)
    }

    /// One turn through the non-streaming path: the message a client of the gateway gets.
    fn batch_turn(&mut self, deltas: &[String]) -> Result<Value, String> {
        let parser = self.parser()?;
        let tools = std::mem::take(&mut self.tools);
        let text: String = deltas.concat();
        let out = self
            .clock
            .time(|| block_on(parser.parse_complete_with_tools(&text, &tools)));
        self.tools = tools;
        Ok(match out {
            Ok((normal, calls)) => {
                let calls: Vec<Value> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let id = self.ids.make(&c.function.name, self.history + i);
                        json!({"name": c.function.name, "id": id, "arguments": c.function.arguments})
                    })
                    .collect();
                self.history += calls.len();
                json!({"text": normal, "calls": calls, "errors": []})
            }
            Err(e) => json!({"text": text, "calls": [], "errors": [], "warnings": [{
                "kind": "gateway_error",
                "message": format!("parse_complete_with_tools failed (the gateway answers the text as content): {e}")}]}),
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Stream,
    Batch,
}

/// Answers one request; the engine's panics are the protocol loop's to catch (a crash).
fn handle(factory: &ParserFactory, mode: Mode, req: &Request) -> Result<(Answer, u64), String> {
    let parser_name = FORMATS
        .iter()
        .find(|(id, _)| *id == req.format)
        .map(|(_, name)| *name)
        .ok_or_else(|| format!("format {:?} is not one this adapter declared", req.format))?;
    let tools = req
        .tools
        .iter()
        .map(|t| serde_json::from_value::<openai_protocol::common::Tool>(t.json.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the request's tools do not convert to the gateway's Tool: {e}"))?;
    let mut r = Replay {
        factory,
        parser_name,
        tools,
        ids: Ids {
            kimi: req.format == "kimi_k2",
            random: RandomState::new(),
            drawn: 0,
        },
        history: 0,
        clock: EngineClock::default(),
    };
    // The request's path, when conform names one, else the command line's mode.
    let mode = match req.path.as_deref() {
        Some("batch") => Mode::Batch,
        Some("stream") => Mode::Stream,
        _ => mode,
    };
    // The gateway skips a delta with no text (a character still incomplete): `texts` does.
    let answer = match mode {
        Mode::Stream => Answer::Events(
            req.turns
                .iter()
                .map(|turn| r.stream_turn(&turn.texts()))
                .collect::<Result<_, _>>()?,
        ),
        Mode::Batch => Answer::Results(
            req.turns
                .iter()
                .map(|turn| r.batch_turn(&turn.texts()))
                .collect::<Result<_, _>>()?,
        ),
    };
    Ok((answer, r.clock.nanos()))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => Mode::Stream,
        ["--mode", "stream"] => Mode::Stream,
        ["--mode", "batch"] => Mode::Batch,
        other => {
            eprintln!("usage: sglang-gateway-adapter [--mode stream|batch] (got {other:?})");
            std::process::exit(2);
        }
    };
    let explicit = !args.is_empty();
    let factory = ParserFactory::new();
    let missing: Vec<&str> = FORMATS
        .iter()
        .filter(|(_, name)| !factory.has_parser(name))
        .map(|(_, name)| *name)
        .collect();
    if !missing.is_empty() {
        eprintln!("tool-parser {ENGINE_VERSION} registers no parser named {missing:?}");
        std::process::exit(1);
    }
    // The engine's panics are answered as crashes; keep their message short on stderr.
    std::panic::set_hook(Box::new(|info| eprintln!("panic: {info}")));
    let name = match (explicit, mode) {
        (false, _) => format!("sglang-gateway tool-parser {ENGINE_VERSION}"),
        (true, Mode::Stream) => format!("sglang-gateway tool-parser {ENGINE_VERSION} (streaming)"),
        (true, Mode::Batch) => format!("sglang-gateway tool-parser {ENGINE_VERSION} (batch)"),
    };
    let formats: Vec<&str> = FORMATS.iter().map(|(id, _)| *id).collect();
    // Both paths of the gateway: `parse_complete_with_tools` for stream=false, the
    // incremental parser for streaming; `--mode` alone keeps one path for every request.
    let paths: &[&str] = if explicit { &[] } else { &["batch", "stream"] };
    protocol::serve_paths(&name, &formats, paths, |req| handle(&factory, mode, req));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_gateway() {
        let mut kimi = Ids {
            kimi: true,
            random: RandomState::new(),
            drawn: 0,
        };
        assert_eq!(kimi.make("get_weather", 3), "functions.get_weather:3");
        let mut other = Ids {
            kimi: false,
            ..kimi
        };
        let (a, b) = (other.make("f", 0), other.make("f", 0));
        assert!(a.starts_with("call_") && a.len() == 29, "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn a_kimi_call_streamed_per_token_gives_start_args_end() {
        let factory = ParserFactory::new();
        let req = json!({"type": "parse", "id": 7, "format": "kimi_k2",
            "tools": [{"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object"}}}],
            "turns": [{"chunks": ["Hi.", "<|tool_calls_section_begin|>",
                "<|tool_call_begin|>", "functions.get_weather:0",
                "<|tool_call_argument_begin|>", "{\"city\":", " \"Paris\"}",
                "<|tool_call_end|>", "<|tool_calls_section_end|>"]}]});
        let req = protocol::parse_request(&req).unwrap();
        let (Answer::Events(turns), _) = handle(&factory, Mode::Stream, &req).unwrap() else {
            panic!("the streaming path answers events");
        };
        let events = &turns[0];
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds.first(), Some(&"text"));
        assert!(kinds.contains(&"call_start"));
        assert_eq!(kinds.last(), Some(&"call_end"));
        let args: String = events
            .iter()
            .filter(|e| e["type"] == "args_delta")
            .map(|e| e["json"].as_str().unwrap())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&args).unwrap(),
            json!({"city": "Paris"})
        );
    }
}
