//! A conform adapter (specs/adapter.md, protocol 2) around NVIDIA Dynamo's `dynamo-parsers-v2`
//! 0.9.6, the synchronous streaming parsers of Dynamo's v2 frontend.
//!
//! Two surfaces of the crate, chosen by `--api`:
//! - `tool` (default): `create_tool_parser_for_family(family, &tools)`, then per chunk
//!   `push(&str)` (or `push_tokens(&[u32])` when the replay carries token ids and the parser
//!   `prefers_tokens()`), then `finish()`. Its `ToolParseResult` has text and call deltas only.
//! - `unified`: `create_unified_parser_for_family(family, &tools)`, `initialize_request`
//!   (native defaults), per chunk `parse_into` (or `parse_token_ids_into` when the parser's
//!   `input_capabilities()` take ids and the replay carries them), then `finish()`. Its events
//!   are ordered text, reasoning and call updates.
//!
//! Mapping (no repairs): `normal_text`/`Text` → `text`, `Reasoning` → `reasoning`; a call
//! delta for an index not seen yet starts a call (conform numbers calls in the order Dynamo
//! starts them) once it carries a name; `arguments` fragments → `args_delta`; the delta with
//! `complete: true` → `call_end`. A call Dynamo never completes gets no `call_end` (the serving
//! layer suppresses provisional calls that never become valid, and conform drops it too).
//! A call's id is the parser's `tool_call_id(index)`, the id the wire carries (kimi_k2's
//! `functions.NAME:N`), or none: this crate mints no ids (Dynamo's serving layer does). An
//! `Err` from the engine (the parser rejected its input) is an `error` event of kind
//! `malformed_markup` that ends the turn; a panic is the replay's `error` response (a crash).

#[path = "../../protocol/o200k.rs"]
mod o200k;
#[allow(dead_code)]
#[path = "../../protocol/protocol.rs"]
mod protocol;

use dynamo_parsers_v2::{
    Tool, ToolCallDelta, ToolParseResult, ToolParser, UnifiedParser, UnifiedParserEvent,
    UnifiedParserInit, UnifiedParserOutput, UnifiedParserStartingState,
    create_tool_parser_for_family, create_unified_parser_for_family,
};
use protocol::{Answer, EngineClock, Request, TurnIn, ev};
use serde_json::Value;
use std::collections::HashMap;

const VERSION: &str = "0.9.6";

/// conform format id → the family name of the tool-only registry, for every wire format of
/// conform that a v2 tool parser implements as specified.
const TOOL_FAMILIES: &[(&str, &str)] = &[
    ("kimi_k2", "kimi_k2"),
    ("qwen3_coder", "qwen3_coder"),
    ("glm47", "glm47"),
    ("minimax_m2", "minimax_m2"),
    ("harmony", "harmony"),
    ("deepseek_v4", "deepseek_v4"),
    ("gemma4", "gemma4"),
    ("minimax_m3", "minimax_m3"),
    ("kimi_k3", "kimi_k3"),
    ("muse_glimmer", "muse_glimmer"),
];

/// conform format id → the family name of the unified registry (reasoning + text + calls).
const UNIFIED_FAMILIES: &[(&str, &str)] = &[
    ("kimi_k2", "kimi_k2"),
    ("qwen3_coder", "qwen3_coder"),
    ("glm47", "glm47"),
    ("harmony", "gpt_oss"),
    ("deepseek_v4", "deepseek_v4"),
    ("deepseek_v41", "deepseek_v41"),
    ("gemma4", "gemma4"),
    ("minimax_m3", "minimax_m3"),
    ("kimi_k3", "kimi_k3"),
    ("muse_glimmer", "muse_glimmer"),
];

#[derive(Clone, Copy, PartialEq)]
enum Api {
    Tool,
    Unified,
}

/// Turns Dynamo's call deltas into conform's call events.
#[derive(Default)]
struct Calls {
    /// Dynamo's `tool_index` → conform's index, once started.
    started: HashMap<usize, usize>,
    /// Argument fragments of a call whose name has not come yet.
    waiting: HashMap<usize, String>,
    ended: std::collections::HashSet<usize>,
}

impl Calls {
    /// `id_of` is the parser's `tool_call_id`: the id the wire gave the call, if any.
    fn delta(
        &mut self,
        d: ToolCallDelta,
        id_of: &dyn Fn(usize) -> Option<String>,
        out: &mut Vec<Value>,
    ) {
        let index = match self.started.get(&d.tool_index) {
            Some(&i) => i,
            None => match &d.name {
                Some(name) => {
                    let i = self.started.len();
                    self.started.insert(d.tool_index, i);
                    out.push(ev::call_start(i, id_of(d.tool_index).as_deref(), name));
                    if let Some(early) = self.waiting.remove(&d.tool_index)
                        && !early.is_empty()
                    {
                        out.push(ev::args_delta(i, &early));
                    }
                    i
                }
                None => {
                    self.waiting
                        .entry(d.tool_index)
                        .or_default()
                        .push_str(&d.arguments);
                    return;
                }
            },
        };
        if !d.arguments.is_empty() {
            out.push(ev::args_delta(index, &d.arguments));
        }
        if d.complete && self.ended.insert(index) {
            out.push(ev::call_end(index));
        }
    }
}

fn tool_result(
    r: ToolParseResult,
    parser: &dyn ToolParser,
    calls: &mut Calls,
    out: &mut Vec<Value>,
) {
    if !r.normal_text.is_empty() {
        out.push(ev::text(&r.normal_text));
    }
    let id_of = |i: usize| parser.tool_call_id(i).map(str::to_string);
    for d in r.calls {
        calls.delta(d, &id_of, out);
    }
}

fn unified_output(
    o: UnifiedParserOutput,
    parser: &dyn UnifiedParser,
    calls: &mut Calls,
    out: &mut Vec<Value>,
) {
    let id_of = |i: usize| parser.tool_call_id(i).map(str::to_string);
    for e in o.events {
        match e {
            UnifiedParserEvent::Text(t) if !t.is_empty() => out.push(ev::text(&t)),
            UnifiedParserEvent::Reasoning(t) if !t.is_empty() => out.push(ev::reasoning(&t)),
            UnifiedParserEvent::ToolCall(d) => calls.delta(d, &id_of, out),
            _ => {}
        }
    }
}

/// One piece of a turn as the engine is fed it.
enum Piece<'a> {
    Tokens(&'a [u32]),
    Text(String),
}

/// The pieces of a turn: its token ids when the replay carries them and the parser takes
/// them, otherwise its text, decoded incrementally (a cut character waits for its bytes).
fn pieces(turn: &TurnIn, parser_takes_ids: bool) -> Vec<Piece<'_>> {
    if let Some(ids) = turn
        .token_ids
        .as_ref()
        .filter(|ids| parser_takes_ids && ids.len() == turn.chunks.len())
    {
        return ids.iter().map(|c| Piece::Tokens(c)).collect();
    }
    turn.texts().into_iter().map(Piece::Text).collect()
}

/// An engine error: the parser rejected its input (it returned, it did not crash), so the turn
/// gets a `malformed_markup` error event and ends there, as a server stops reading the stream.
fn engine_error(family: &str, e: &dyn std::fmt::Display, out: &mut Vec<Value>) {
    let message = format!("dynamo-parsers-v2 {family}: {e:#}");
    out.push(ev::error("malformed_markup", &message));
}

fn run_tool_turn(
    family: &str,
    tools: &[Tool],
    turn: &TurnIn,
    clock: &mut EngineClock,
) -> Result<Vec<Value>, String> {
    let mut parser = create_tool_parser_for_family(family, tools).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut calls = Calls::default();
    for piece in pieces(turn, parser.prefers_tokens()) {
        let r = clock.time(|| match &piece {
            Piece::Tokens(ids) => parser.push_tokens(ids),
            Piece::Text(t) => parser.push(t),
        });
        match r {
            Ok(r) => tool_result(r, parser.as_ref(), &mut calls, &mut out),
            Err(e) => {
                engine_error(family, &e, &mut out);
                return Ok(out);
            }
        }
    }
    match clock.time(|| parser.finish()) {
        Ok(r) => tool_result(r, parser.as_ref(), &mut calls, &mut out),
        Err(e) => engine_error(family, &e, &mut out),
    }
    Ok(out)
}

/// Formats whose chat template thinks unless the request turns it off: the prompt opens the
/// think channel, so the output starts inside it (Kimi K3's `thinking`, on by default).
const THINKS_BY_DEFAULT: &[&str] = &["kimi_k3"];

/// Where the request's prompt left the output, as the serving layer tells the parser: the
/// case's `starting_state`, else what the format's template does with the thinking switch.
fn starting_state(format: &str, mode: &Value) -> UnifiedParserStartingState {
    match mode.get("starting_state").and_then(Value::as_str) {
        Some("reasoning") => return UnifiedParserStartingState::Reasoning,
        Some("response") => return UnifiedParserStartingState::Response,
        _ => {}
    }
    if !THINKS_BY_DEFAULT.contains(&format) {
        return UnifiedParserStartingState::None;
    }
    match mode.get("thinking").and_then(Value::as_bool) {
        Some(false) => UnifiedParserStartingState::Response,
        _ => UnifiedParserStartingState::Reasoning,
    }
}

fn run_unified_turn(
    family: &str,
    tools: &[Tool],
    turn: &TurnIn,
    start: UnifiedParserStartingState,
    clock: &mut EngineClock,
) -> Result<Vec<Value>, String> {
    let mut parser = create_unified_parser_for_family(family, tools).map_err(|e| e.to_string())?;
    parser
        .initialize_request(UnifiedParserInit {
            starting_state: start,
            ..UnifiedParserInit::default()
        })
        .map_err(|e| format!("dynamo-parsers-v2 {family}: {e:#}"))?;
    let mut out = Vec::new();
    let mut calls = Calls::default();
    for piece in pieces(turn, parser.input_capabilities().token_ids) {
        // Events appended before an error stay committed (the trait's contract).
        let mut o = UnifiedParserOutput::default();
        let r = clock.time(|| match &piece {
            Piece::Tokens(ids) => parser.parse_token_ids_into(ids, &mut o),
            Piece::Text(t) => parser.parse_into(t, &mut o),
        });
        unified_output(o, parser.as_ref(), &mut calls, &mut out);
        if let Err(e) = r {
            engine_error(family, &e, &mut out);
            return Ok(out);
        }
    }
    match clock.time(|| parser.finish()) {
        Ok(o) => unified_output(o, parser.as_ref(), &mut calls, &mut out),
        Err(e) => engine_error(family, &e, &mut out),
    }
    Ok(out)
}

fn handle(api: Api, table: &[(&str, &str)], req: &Request) -> Result<(Answer, u64), String> {
    let family = table
        .iter()
        .find(|(id, _)| *id == req.format)
        .map(|(_, f)| *f)
        .ok_or_else(|| format!("format {} is not in this adapter's table", req.format))?;
    let tools: Vec<Tool> = req
        .tools
        .iter()
        .map(|t| Tool {
            name: t.name.clone(),
            description: None,
            parameters: t
                .parameters
                .clone()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            strict: None,
        })
        .collect();
    let mut clock = EngineClock::default();
    let mut turns = Vec::new();
    // A fresh parser per turn: Dynamo's parsers hold one stream each and no session state.
    for turn in &req.turns {
        turns.push(match api {
            Api::Tool => run_tool_turn(family, &tools, turn, &mut clock)?,
            Api::Unified => run_unified_turn(
                family,
                &tools,
                turn,
                starting_state(&req.format, &req.mode),
                &mut clock,
            )?,
        });
    }
    Ok((Answer::Events(turns), clock.nanos()))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut api = Api::Tool;
    let mut cache: Option<std::path::PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--api" => match it.next().map(String::as_str) {
                Some("tool") => api = Api::Tool,
                Some("unified") => api = Api::Unified,
                other => {
                    eprintln!("--api takes tool or unified, not {other:?}");
                    std::process::exit(2);
                }
            },
            "--vocab-dir" => cache = it.next().map(Into::into),
            other => {
                eprintln!(
                    "unknown argument {other} (usage: [--api tool|unified] [--vocab-dir DIR])"
                );
                std::process::exit(2);
            }
        }
    }
    let dir = cache.unwrap_or_else(|| std::env::temp_dir().join("conform-dynamo-o200k"));
    if let Err(e) = o200k::provide_o200k(&dir) {
        eprintln!("cannot write the o200k vocabulary for harmony: {e}");
        std::process::exit(1);
    }
    // Harmony's parser loads its encoding once per process, on first use: load it now, so
    // that no replay's engine_ns pays for it.
    if let Ok(mut p) = create_tool_parser_for_family("harmony", &[]) {
        let _ = p.push("<|channel|>final<|message|>warm-up<|return|>");
        let _ = p.finish();
    }
    let (table, name) = match api {
        Api::Tool => (
            TOOL_FAMILIES,
            format!("dynamo-parsers-v2 {VERSION} (tool parser)"),
        ),
        Api::Unified => (
            UNIFIED_FAMILIES,
            format!("dynamo-parsers-v2 {VERSION} (unified parser)"),
        ),
    };
    let formats: Vec<&str> = table.iter().map(|(id, _)| *id).collect();
    // Streaming only: dynamo-parsers-v2 has no non-streaming entry point.
    protocol::serve_paths(&name, &formats, &["stream"], |req| handle(api, table, req));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starting_state_follows_the_case_then_the_templates_thinking_default() {
        use UnifiedParserStartingState as S;
        let mode = |v: Value| v;
        assert_eq!(
            starting_state("kimi_k3", &mode(serde_json::json!({}))),
            S::Reasoning
        );
        assert_eq!(
            starting_state("kimi_k3", &mode(serde_json::json!({"thinking": false}))),
            S::Response
        );
        assert_eq!(
            starting_state(
                "qwen3_coder",
                &mode(serde_json::json!({"starting_state": "reasoning"}))
            ),
            S::Reasoning
        );
        assert_eq!(
            starting_state(
                "qwen3_coder",
                &mode(serde_json::json!({"starting_state": "none"}))
            ),
            S::None
        );
    }

    fn turn(chunks: &[&str]) -> TurnIn {
        TurnIn {
            chunks: chunks.iter().map(|c| c.as_bytes().to_vec()).collect(),
            token_ids: None,
            tokenizer: None,
        }
    }

    #[test]
    fn kimi_call_maps_to_events() {
        let t = turn(&[
            "Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.get:0",
            "<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>",
        ]);
        let mut clock = EngineClock::default();
        let evs = run_tool_turn("kimi_k2", &[], &t, &mut clock).unwrap();
        let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert!(kinds.contains(&"call_start"), "{evs:?}");
        assert!(kinds.contains(&"call_end"), "{evs:?}");
        let start = evs.iter().find(|e| e["type"] == "call_start").unwrap();
        assert_eq!(
            start["id"], "functions.get:0",
            "the wire's id, as the parser reads it"
        );
    }

    #[test]
    fn unified_reasoning_is_a_reasoning_event() {
        let t = turn(&["<think>check", " again</think>Hello"]);
        let mut clock = EngineClock::default();
        let evs = run_unified_turn(
            "qwen3_coder",
            &[],
            &t,
            UnifiedParserStartingState::None,
            &mut clock,
        )
        .unwrap();
        let reasoning: String = evs
            .iter()
            .filter(|e| e["type"] == "reasoning")
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(reasoning, "check again", "{evs:?}");
        assert!(
            evs.iter()
                .all(|e| e["type"] != "text" || e["text"] == "Hello")
        );
    }

    #[test]
    fn a_call_never_completed_gets_no_call_end() {
        let t = turn(&["<tool_call>\n<function=get>\n<parameter=city>\nPar"]);
        let mut clock = EngineClock::default();
        let evs = run_tool_turn("qwen3_coder", &[], &t, &mut clock).unwrap();
        assert!(evs.iter().all(|e| e["type"] != "call_end"), "{evs:?}");
    }

    #[test]
    fn token_ids_go_only_to_a_parser_that_takes_them() {
        let mut t = turn(&["ab", "c"]);
        t.token_ids = Some(vec![vec![1], vec![2]]);
        assert!(matches!(pieces(&t, true)[0], Piece::Tokens([1])));
        assert!(matches!(&pieces(&t, false)[0], Piece::Text(s) if s == "ab"));
    }
}
