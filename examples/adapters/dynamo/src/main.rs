//! A conform adapter (specs/adapter.md, protocol 2) around NVIDIA Dynamo's `dynamo-parsers`
//! 11.0.1, the v1 tool-call parsers of Dynamo's frontend, in two variants chosen by `--mode`:
//!
//! - `jail` (default): the streaming path. Dynamo's frontend does not parse deltas itself: it
//!   wraps the engine's stream of chat-completion chunks in the "jail"
//!   (`jail::apply_tool_calling_jail(parser, tool_choice, tools, structural_tag, stream)`, the
//!   one mapping its preprocessor uses), which buffers output once a tool call may be starting
//!   and batch-parses the jailed span. Each conform chunk becomes one chunk of assistant
//!   `delta.content` (decoded incrementally from UTF-8), and the stream ends with a chunk that
//!   carries `finish_reason: stop` and no content, as an engine's last chunk does. The jail's
//!   output chunks are mapped as an OpenAI client reads them: `delta.content` → `text`,
//!   `delta.reasoning_content` → `reasoning`, a `tool_calls[]` entry with a new index →
//!   `call_start` (its `id`, `call-<uuid>`, and name), `function.arguments` → `args_delta`; the
//!   end of the stream ends every started call (chat chunks have no per-call end).
//! - `batch`: the non-streaming path, `detect_and_parse_tool_call_with_recovery(text, parser,
//!   tools)` on the whole turn text (what `try_tool_call_parse_aggregate_finalize`, Dynamo's
//!   non-streaming aggregate, calls), answered with a `result`. `--no-recovery` calls
//!   `detect_and_parse_tool_call` instead (EOF recovery off, as mid-stream).
//!
//! No repairs: names, arguments (the JSON text Dynamo produced), text and ids go through as
//! Dynamo gives them. The batch parser's `Err` (it rejected the text) is a result with no
//! calls, no text (what Dynamo's jail makes of a parser error) and a `malformed_markup` error;
//! a panic is the replay's `error` response (a crash).

#[path = "../../protocol/o200k.rs"]
mod o200k;
#[allow(dead_code)]
#[path = "../../protocol/protocol.rs"]
mod protocol;

use dynamo_parsers::tool_calling::ToolDefinition;
use dynamo_parsers::tool_calling::jail::{Annotated, apply_tool_calling_jail};
use dynamo_parsers::tool_calling::parsers::{
    detect_and_parse_tool_call, detect_and_parse_tool_call_with_recovery,
};
use dynamo_protocols::types::{
    ChatChoiceStream, ChatCompletionMessageContent, ChatCompletionStreamResponseDelta,
    CreateChatCompletionStreamResponse, FinishReason, Role,
};
use futures::StreamExt;
use protocol::{Answer, EngineClock, Request, ev};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Instant;

const VERSION: &str = "11.0.1";

/// conform format id → Dynamo's `--tool-call-parser` name, for every wire format of conform
/// that a Dynamo v1 parser implements as specified.
const PARSERS: &[(&str, &str)] = &[
    ("hermes", "hermes"),
    ("kimi_k2", "kimi_k2"),
    ("deepseek_v3", "deepseek_v3"),
    ("deepseek_v31", "deepseek_v3_1"),
    ("deepseek_v32", "deepseek_v3_2"),
    ("mistral", "mistral"),
    ("llama3_json", "llama3_json"),
    ("pythonic", "pythonic"),
    ("qwen3_coder", "qwen3_coder"),
    ("glm47", "glm47"),
    ("minimax_m2", "minimax_m2"),
    ("harmony", "harmony"),
];

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Jail,
    Batch { recovery: bool },
}

/// One chunk of an engine's stream: assistant `content`, or the final chunk.
fn engine_chunk(
    content: Option<String>,
    finish: bool,
) -> Annotated<CreateChatCompletionStreamResponse> {
    #[allow(deprecated)]
    let choice = ChatChoiceStream {
        index: 0,
        delta: ChatCompletionStreamResponseDelta {
            role: Some(Role::Assistant),
            content: content.map(ChatCompletionMessageContent::Text),
            tool_calls: None,
            function_call: None,
            refusal: None,
            reasoning_content: None,
        },
        finish_reason: finish.then_some(FinishReason::Stop),
        logprobs: None,
    };
    Annotated {
        data: Some(CreateChatCompletionStreamResponse {
            id: "chatcmpl-conform".to_string(),
            choices: vec![choice],
            created: 0,
            model: "conform".to_string(),
            system_fingerprint: None,
            object: "chat.completion.chunk".to_string(),
            usage: None,
            service_tier: None,
        }),
        id: None,
        event: None,
        comment: None,
        error: None,
    }
}

/// Reads the jail's output chunks as an OpenAI streaming client does.
#[derive(Default)]
struct Client {
    events: Vec<Value>,
    /// The stream's tool-call index → conform's index, once started.
    started: HashMap<u32, usize>,
    /// Argument fragments of a call whose name has not come yet.
    waiting: HashMap<u32, (Option<String>, String)>,
}

impl Client {
    fn read(&mut self, a: Annotated<CreateChatCompletionStreamResponse>) {
        if let Some(e) = a.error {
            self.events.push(ev::error("invalid_stream", &e));
        }
        let Some(resp) = a.data else { return };
        for choice in resp.choices {
            let d = choice.delta;
            if let Some(r) = d.reasoning_content {
                let text = match serde_json::to_value(&r) {
                    Ok(Value::String(s)) => s,
                    Ok(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .concat(),
                    _ => String::new(),
                };
                if !text.is_empty() {
                    self.events.push(ev::reasoning(&text));
                }
            }
            match d.content {
                Some(ChatCompletionMessageContent::Text(t)) if !t.is_empty() => {
                    self.events.push(ev::text(&t))
                }
                Some(ChatCompletionMessageContent::Parts(p)) => {
                    let t = serde_json::to_value(&p)
                        .map(|v| {
                            v.as_array()
                                .map(Vec::as_slice)
                                .unwrap_or_default()
                                .iter()
                                .filter_map(|x| x["text"].as_str())
                                .collect::<String>()
                        })
                        .unwrap_or_default();
                    if !t.is_empty() {
                        self.events.push(ev::text(&t));
                    }
                }
                _ => {}
            }
            for tc in d.tool_calls.unwrap_or_default() {
                let (name, args) = tc
                    .function
                    .map(|f| (f.name, f.arguments.unwrap_or_default()))
                    .unwrap_or_default();
                self.call_delta(tc.index, tc.id, name, args);
            }
        }
    }

    fn call_delta(&mut self, at: u32, id: Option<String>, name: Option<String>, args: String) {
        let index = match self.started.get(&at) {
            Some(&i) => i,
            None => {
                let w = self.waiting.entry(at).or_default();
                if w.0.is_none() {
                    w.0 = id;
                }
                w.1.push_str(&args);
                let Some(name) = name else { return };
                let (id, early) = self.waiting.remove(&at).unwrap_or_default();
                let i = self.started.len();
                self.started.insert(at, i);
                self.events.push(ev::call_start(i, id.as_deref(), &name));
                if !early.is_empty() {
                    self.events.push(ev::args_delta(i, &early));
                }
                return;
            }
        };
        if !args.is_empty() {
            self.events.push(ev::args_delta(index, &args));
        }
    }

    /// The end of the stream ends every started call, in start order.
    fn end(mut self) -> Vec<Value> {
        let mut started: Vec<usize> = self.started.values().copied().collect();
        started.sort_unstable();
        for i in started {
            self.events.push(ev::call_end(i));
        }
        self.events
    }
}

fn tool_definitions(req: &Request) -> Option<Vec<ToolDefinition>> {
    let tools: Vec<ToolDefinition> = req
        .tools
        .iter()
        .map(|t| ToolDefinition {
            name: t.name.clone(),
            parameters: t.parameters.clone(),
            strict: None,
        })
        .collect();
    (!tools.is_empty()).then_some(tools)
}

async fn jail_turn(
    parser: &str,
    tools: Option<Vec<ToolDefinition>>,
    pieces: Vec<String>,
    clock: &mut EngineClock,
) -> Vec<Value> {
    let mut input: Vec<_> = pieces
        .into_iter()
        .map(|t| engine_chunk(Some(t), false))
        .collect();
    input.push(engine_chunk(None, true));
    let start = Instant::now();
    let out: Vec<_> = apply_tool_calling_jail(
        Some(parser.to_string()),
        None,
        tools,
        false,
        futures::stream::iter(input),
    )
    .collect()
    .await;
    clock.add(start.elapsed());
    let mut client = Client::default();
    for a in out {
        client.read(a);
    }
    client.end()
}

async fn batch_turn(
    parser: &str,
    tools: Option<&[ToolDefinition]>,
    text: &str,
    recovery: bool,
    clock: &mut EngineClock,
) -> Result<Value, String> {
    let start = Instant::now();
    let r = if recovery {
        detect_and_parse_tool_call_with_recovery(text, Some(parser), tools).await
    } else {
        detect_and_parse_tool_call(text, Some(parser), tools).await
    };
    clock.add(start.elapsed());
    let (calls, normal) = match r {
        Ok(ok) => ok,
        // The parser rejected the text (it returns, it does not crash): no calls and, as
        // Dynamo's own jail does with a parser error, no content.
        Err(e) => {
            let message = format!("dynamo-parsers {parser}: {e:#}");
            return Ok(json!({"text": "", "calls": [],
                "errors": [{"kind": "malformed_markup", "message": message}]}));
        }
    };
    let calls: Vec<Value> = calls
        .into_iter()
        .map(|c| json!({"name": c.function.name, "id": c.id, "arguments": c.function.arguments}))
        .collect();
    Ok(json!({"text": normal.unwrap_or_default(), "calls": calls, "errors": []}))
}

fn handle(
    rt: &tokio::runtime::Runtime,
    mode: Mode,
    req: &Request,
) -> Result<(Answer, u64), String> {
    let parser = PARSERS
        .iter()
        .find(|(id, _)| *id == req.format)
        .map(|(_, p)| *p)
        .ok_or_else(|| format!("format {} is not in this adapter's table", req.format))?;
    let tools = tool_definitions(req);
    // The request's path, when conform names one: the jail for streaming, the batch parse
    // for stream=false.
    let mode = match req.path.as_deref() {
        Some("stream") => Mode::Jail,
        Some("batch") => Mode::Batch { recovery: true },
        _ => mode,
    };
    let mut clock = EngineClock::default();
    let answer = rt.block_on(async {
        match mode {
            Mode::Jail => {
                let mut turns = Vec::new();
                for turn in &req.turns {
                    let pieces = turn.texts();
                    turns.push(jail_turn(parser, tools.clone(), pieces, &mut clock).await);
                }
                Ok::<_, String>(Answer::Events(turns))
            }
            Mode::Batch { recovery } => {
                let mut turns = Vec::new();
                for turn in &req.turns {
                    let text = turn.texts().concat();
                    turns.push(
                        batch_turn(parser, tools.as_deref(), &text, recovery, &mut clock).await?,
                    );
                }
                Ok(Answer::Results(turns))
            }
        }
    })?;
    Ok((answer, clock.nanos()))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut mode = Mode::Jail;
    let mut recovery = true;
    let mut vocab: Option<std::path::PathBuf> = None;
    let mut explicit = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mode" => match it.next().map(String::as_str).inspect(|_| explicit = true) {
                Some("jail") => mode = Mode::Jail,
                Some("batch") => mode = Mode::Batch { recovery: true },
                other => {
                    eprintln!("--mode takes jail or batch, not {other:?}");
                    std::process::exit(2);
                }
            },
            "--no-recovery" => recovery = false,
            "--vocab-dir" => vocab = it.next().map(Into::into),
            other => {
                eprintln!(
                    "unknown argument {other} (usage: [--mode jail|batch [--no-recovery]] [--vocab-dir DIR])"
                );
                std::process::exit(2);
            }
        }
    }
    if let Mode::Batch { .. } = mode {
        mode = Mode::Batch { recovery };
    }
    let dir = vocab.unwrap_or_else(|| std::env::temp_dir().join("conform-dynamo-o200k"));
    if let Err(e) = o200k::provide_o200k(&dir) {
        eprintln!("cannot write the o200k vocabulary for harmony: {e}");
        std::process::exit(1);
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    // Harmony's parser loads its encoding once per process, on first use: load it now, so
    // that no replay's engine_ns pays for it.
    let _ = rt.block_on(detect_and_parse_tool_call(
        "<|channel|>final<|message|>warm-up<|return|>",
        Some("harmony"),
        None,
    ));
    let name = match mode {
        Mode::Jail if !explicit => format!("dynamo-parsers {VERSION}"),
        Mode::Jail => format!("dynamo-parsers {VERSION} (jail streaming)"),
        Mode::Batch { recovery: true } => format!("dynamo-parsers {VERSION} (batch)"),
        Mode::Batch { recovery: false } => {
            format!("dynamo-parsers {VERSION} (batch, no EOF recovery)")
        }
    };
    let formats: Vec<&str> = PARSERS.iter().map(|(id, _)| *id).collect();
    // Without --mode both of Dynamo's paths: the batch parse for stream=false, the jail for
    // streaming.
    let paths: &[&str] = if explicit { &[] } else { &["batch", "stream"] };
    protocol::serve_paths(&name, &formats, paths, |req| handle(&rt, mode, req));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jail_streams_a_hermes_call_with_a_generated_id() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut clock = EngineClock::default();
        let pieces = vec![
            "Hi <tool_call>{\"name\": \"f\", ".to_string(),
            "\"arguments\": {\"a\": 1}}</tool_call>".to_string(),
        ];
        let evs = rt.block_on(jail_turn("hermes", None, pieces, &mut clock));
        let start = evs.iter().find(|e| e["type"] == "call_start").unwrap();
        assert_eq!(start["name"], "f");
        assert!(
            start["id"].as_str().unwrap().starts_with("call-"),
            "{evs:?}"
        );
        assert!(evs.iter().any(|e| e["type"] == "call_end"));
        let text: String = evs
            .iter()
            .filter(|e| e["type"] == "text")
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(text.trim(), "Hi");
    }

    #[test]
    fn a_rejected_batch_is_an_error_with_no_calls_and_no_text() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut clock = EngineClock::default();
        let r = rt
            .block_on(batch_turn(
                "pythonic",
                None,
                "[f(a=1, a=2)]",
                true,
                &mut clock,
            ))
            .unwrap();
        assert_eq!(r["calls"], json!([]), "{r}");
        assert_eq!(r["text"], "");
        assert_eq!(r["errors"][0]["kind"], "malformed_markup");
    }

    #[test]
    fn a_call_whose_name_comes_late_starts_then_with_its_early_arguments() {
        let mut c = Client::default();
        c.call_delta(3, Some("call-x".into()), None, "{\"a\"".into());
        c.call_delta(3, None, Some("f".into()), ":1}".into());
        let evs = c.end();
        assert_eq!(evs[0], ev::call_start(0, Some("call-x"), "f"));
        assert_eq!(evs[1], ev::args_delta(0, "{\"a\":1}"));
        assert_eq!(evs[2], ev::call_end(0));
        assert_eq!(evs.len(), 3);
    }
}
