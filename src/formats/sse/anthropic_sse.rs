//! anthropic_sse: an Anthropic Messages stream (`message_start` … `message_stop`).
//!
//! Text blocks give `Text`; `tool_use` blocks give calls whose `input_json_delta.partial_json`
//! fragments are validated incrementally (one `Args` per call, each fragment fed once);
//! thinking deltas are `Reasoning` (signatures and redacted thinking are dropped, never text).
//! Rules and deviations:
//! `specs/anthropic_sse.md`.

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::sse::provider::{Args, SSE_PIECE, check_call, payload, pieces, sse_items};
use crate::formats::{Format, RenderFn, StreamParser};
use crate::lexers::sse::{SseConfig, SseEvent, SseItem, SseParser};
use crate::tools::Tools;
use serde_json::{Value, json};
use std::collections::HashMap;

config! {
    /// Leniency options and limits. Every recovered deviation emits `Warning{kind: <option name>}`.
    #[derive(Debug, Clone)]
    pub struct Config {
        options {
            /// Events before (or without) `message_start` are processed. Default true; off →
            /// `invalid_stream` once and the events are ignored.
            allow_missing_message_start,
            /// A `tool_use` block without `id` is a call without id. Default true; off →
            /// `invalid_stream`, the call is dropped.
            allow_missing_id,
            /// A non-empty `input` object in `content_block_start` is taken as the arguments (proxies that
            /// replay a non-streamed message do this). Default true; off → `invalid_stream`.
            accept_input_in_start,
            /// A `content_block_start` index that is not the next position (a gap or a jump back) is
            /// accepted. Default true; off → `invalid_stream`, the block is ignored.
            allow_block_index_gap,
            /// A second `content_block_stop` for a block is ignored. Default true; off → `invalid_stream`.
            ignore_duplicate_stop,
            /// Blocks still open at `message_stop` are closed there (a real fixture has no
            /// `content_block_stop`). Default true; off → open calls fail with `unterminated`.
            close_blocks_at_message_stop,
            /// A stream that has `message_delta` with its `stop_reason` but ends without `message_stop` is
            /// accepted. Default true; off → `invalid_stream`.
            allow_missing_message_stop,
            /// A last event not closed by a blank line whose payload is complete is used. Default true;
            /// off → `invalid_stream`.
            accept_unterminated_event,
        }
        /// Largest arguments text of one call, in bytes; more → `limit_exceeded`.
        pub max_call_bytes: usize,
        /// Deepest nesting of a call's arguments; deeper → `limit_exceeded`.
        pub max_depth: usize,
        /// Limits of the SSE layer.
        pub sse: SseConfig,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            allow_missing_message_start: true,
            allow_missing_id: true,
            accept_input_in_start: true,
            allow_block_index_gap: true,
            ignore_duplicate_stop: true,
            close_blocks_at_message_stop: true,
            allow_missing_message_stop: true,
            accept_unterminated_event: true,
            max_call_bytes: 16 << 20,
            max_depth: 128,
            sse: SseConfig::default(),
        }
    }
}

enum Block {
    Text,
    /// Thinking (its deltas are reasoning) and redacted thinking (dropped): never text.
    Thinking,
    /// A tool call with its output index; `None` args once it ended or failed.
    Tool(usize, Option<Box<Args>>),
    /// A tool call whose block stopped with incomplete JSON: the verdict waits for the
    /// `stop_reason` (`max_tokens` → `unterminated`, otherwise `invalid_json`).
    ToolIncomplete,
    /// Block types this parser does not model (server tools, results, …): ignored.
    Other,
}

struct Slot {
    block: Block,
    stopped: bool,
}

/// The anthropic_sse streaming parser.
pub struct Parser {
    config: Config,
    sse: SseParser,
    blocks: HashMap<u64, Slot>,
    /// (call index, block index) of calls waiting for the stop reason, so settling never scans
    /// every block.
    held: Vec<(usize, u64)>,
    started_blocks: u64,
    next_index: usize,
    saw_event: bool,
    message_started: bool,
    stop_reason: Option<String>,
    message_stopped: bool,
    warned: Vec<&'static str>,
}

/// How open calls are being closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// At `content_block_stop` or `message_stop`.
    Stop,
    /// The stream ended without `message_stop`.
    CutOff,
}

impl Parser {
    /// A parser for one session.
    pub fn new(config: Config) -> Parser {
        let sse = SseParser::new(config.sse.clone());
        Parser {
            config,
            sse,
            blocks: HashMap::new(),
            held: Vec::new(),
            started_blocks: 0,
            next_index: 0,
            saw_event: false,
            message_started: false,
            stop_reason: None,
            message_stopped: false,
            warned: Vec::new(),
        }
    }

    fn reset_turn(&mut self) {
        self.blocks.clear();
        self.held.clear();
        self.started_blocks = 0;
        self.next_index = 0;
        self.saw_event = false;
        self.message_started = false;
        self.stop_reason = None;
        self.message_stopped = false;
        self.warned.clear();
    }

    fn once(&mut self, key: &'static str) -> bool {
        if self.warned.contains(&key) {
            false
        } else {
            self.warned.push(key);
            true
        }
    }

    /// Emits a warning for `option` once per turn; false (after an error) when it is off.
    fn lenient(&mut self, on: bool, option: WarningKind, msg: String, out: &mut dyn Sink) -> bool {
        if on {
            if self.once(option.as_str()) {
                out.push(Event::warning(option, msg));
            }
        } else {
            out.push(Event::error(ErrorKind::InvalidStream, msg));
        }
        on
    }

    fn handle(&mut self, item: SseItem, out: &mut dyn Sink) {
        match item {
            SseItem::Error(e) => {
                let kind = if e.is_limit() {
                    ErrorKind::LimitExceeded
                } else {
                    ErrorKind::InvalidStream
                };
                out.push(Event::error(kind, e.message));
            }
            SseItem::Event(ev) => self.on_event(ev, out),
        }
    }

    fn on_event(&mut self, mut ev: SseEvent, out: &mut dyn Sink) {
        self.saw_event = true;
        let at = ev.offset;
        let Some(mut value) = payload::<Value>(&ev, out) else {
            return;
        };
        // Read: the payload's text is not needed beside its value (a 10 MB input is held once).
        ev.data = String::new();
        if !ev.terminated
            && !self.lenient(
                self.config.accept_unterminated_event,
                WarningKind::AcceptUnterminatedEvent,
                format!("last event at byte {at} has no blank line after it"),
                out,
            )
        {
            return;
        }
        // The payload's `type` is authoritative; the SSE `event:` name is the fallback.
        let ty = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str())
            .to_string();
        if self.message_stopped && ty != "ping" {
            if self.once("after_stop") {
                out.push(Event::error(
                    ErrorKind::InvalidStream,
                    format!("event {ty:?} at byte {at} after message_stop"),
                ));
            }
            return;
        }
        match ty.as_str() {
            "ping" => {}
            "error" => {
                let msg = value
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| value.to_string());
                out.push(Event::error(
                    ErrorKind::InvalidStream,
                    format!("provider error at byte {at}: {msg}"),
                ));
            }
            "message_start" => {
                if self.message_started {
                    if self.once("second_message_start") {
                        out.push(Event::error(
                            ErrorKind::InvalidStream,
                            format!("second message_start at byte {at}"),
                        ));
                    }
                } else {
                    self.message_started = true;
                }
            }
            "content_block_start"
            | "content_block_delta"
            | "content_block_stop"
            | "message_delta"
            | "message_stop" => {
                if !self.message_started {
                    if !self.lenient(
                        self.config.allow_missing_message_start,
                        WarningKind::AllowMissingMessageStart,
                        format!("event {ty:?} at byte {at} before message_start"),
                        out,
                    ) {
                        return;
                    }
                    self.message_started = true;
                }
                match ty.as_str() {
                    "content_block_start" => self.block_start(&mut value, at, out),
                    "content_block_delta" => self.block_delta(&value, at, out),
                    "content_block_stop" => self.block_stop(&value, at, out),
                    "message_delta" => {
                        if let Some(r) = value.pointer("/delta/stop_reason").and_then(Value::as_str)
                        {
                            self.stop_reason = Some(r.to_string());
                            self.settle_incomplete(out);
                        }
                    }
                    _ => self.message_stop(at, out),
                }
            }
            // Anthropic may add event types; clients are to ignore the ones they do not know.
            _ => {}
        }
    }

    fn index_of(&mut self, value: &Value, at: u64, out: &mut dyn Sink) -> Option<u64> {
        let idx = value.get("index").and_then(Value::as_u64);
        if idx.is_none() {
            out.push(Event::error(
                ErrorKind::InvalidStream,
                format!("event at byte {at} has no valid block index"),
            ));
        }
        idx
    }

    fn block_start(&mut self, value: &mut Value, at: u64, out: &mut dyn Sink) {
        let Some(idx) = self.index_of(value, at, out) else {
            return;
        };
        if self.blocks.contains_key(&idx) {
            out.push(Event::error(
                ErrorKind::InvalidStream,
                format!("content_block_start at byte {at} reuses block index {idx}"),
            ));
            return;
        }
        if idx != self.started_blocks
            && !self.lenient(
                self.config.allow_block_index_gap,
                WarningKind::AllowBlockIndexGap,
                format!(
                    "content_block_start at byte {at} has index {idx}, expected {}",
                    self.started_blocks
                ),
                out,
            )
        {
            return;
        }
        self.started_blocks += 1;
        let mut null = Value::Null;
        let cb = value.get_mut("content_block").unwrap_or(&mut null);
        let block = match cb.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = cb.get("text").and_then(Value::as_str) {
                    out.text(t);
                }
                Block::Text
            }
            Some("thinking") => {
                // The start usually carries `"thinking": ""`; the text comes as deltas.
                if let Some(t) = cb.get("thinking").and_then(Value::as_str) {
                    out.reasoning(t);
                }
                Block::Thinking
            }
            // Encrypted reasoning (`data`): nothing a consumer can read, never text.
            Some("redacted_thinking") => Block::Thinking,
            Some("tool_use") => self.tool_start(cb, at, out),
            _ => Block::Other,
        };
        self.blocks.insert(
            idx,
            Slot {
                block,
                stopped: false,
            },
        );
    }

    fn tool_start(&mut self, cb: &mut Value, at: u64, out: &mut dyn Sink) -> Block {
        // Taken out of the payload: its value is dropped once written as text.
        let input = cb.get_mut("input").map(Value::take);
        let Some(name) = cb
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            out.push(Event::error(
                ErrorKind::MissingName,
                format!("tool_use block at byte {at} has no name"),
            ));
            return Block::Other;
        };
        let id = cb
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        if id.is_none()
            && !self.lenient(
                self.config.allow_missing_id,
                WarningKind::AllowMissingId,
                format!("tool_use block at byte {at} has no id"),
                out,
            )
        {
            return Block::Other;
        }
        let preset = match input {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) if m.is_empty() => None,
            Some(v @ Value::Object(_)) => Some(v.to_string()),
            Some(_) => {
                out.push(Event::error(
                    ErrorKind::InvalidJson,
                    format!("tool_use block at byte {at}: `input` is not an object"),
                ));
                return Block::Other;
            }
        };
        if preset.is_some()
            && !self.lenient(
                self.config.accept_input_in_start,
                WarningKind::AcceptInputInStart,
                format!("tool_use block at byte {at} carries its input in content_block_start"),
                out,
            )
        {
            return Block::Other;
        }
        let n = self.next_index;
        self.next_index += 1;
        out.push(Event::CallStart {
            index: n,
            id: id.map(str::to_string),
            name: name.to_string(),
            server: None,
        });
        let mut args = Box::new(Args::new(self.config.max_depth, self.config.max_call_bytes));
        if let Some(p) = preset {
            if let Err((kind, msg)) = args.feed(&p) {
                out.push(Event::error(kind, format!("call {n}: {msg}")));
                return Block::Tool(n, None);
            }
            out.args_delta(n, &p);
        }
        Block::Tool(n, Some(args))
    }

    fn block_delta(&mut self, value: &Value, at: u64, out: &mut dyn Sink) {
        let Some(idx) = self.index_of(value, at, out) else {
            return;
        };
        let delta = value.get("delta").unwrap_or(&Value::Null);
        let dty = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let Some(slot) = self.blocks.get_mut(&idx) else {
            if self.once("unknown_block") {
                out.push(Event::error(
                    ErrorKind::InvalidStream,
                    format!(
                        "content_block_delta at byte {at} for block {idx}, which never started"
                    ),
                ));
            }
            return;
        };
        if slot.stopped {
            if self.once("delta_after_stop") {
                out.push(Event::error(
                    ErrorKind::InvalidStream,
                    format!("content_block_delta at byte {at} for block {idx} after its stop"),
                ));
            }
            return;
        }
        let mismatch = match (&mut slot.block, dty) {
            (Block::Text, "text_delta") => {
                if let Some(t) = delta.get("text").and_then(Value::as_str) {
                    out.text(t);
                }
                false
            }
            (Block::Thinking, "thinking_delta") => {
                if let Some(t) = delta.get("thinking").and_then(Value::as_str) {
                    out.reasoning(t);
                }
                false
            }
            // The signature authenticates the thinking for the API; it is neither text nor
            // reasoning.
            (Block::Thinking, "signature_delta") => false,
            (Block::Tool(n, args), "input_json_delta") => {
                let n = *n;
                if let (Some(a), Some(frag)) = (
                    args.as_mut(),
                    delta.get("partial_json").and_then(Value::as_str),
                ) && !frag.is_empty()
                {
                    match a.feed(frag) {
                        Ok(()) => out.args_delta(n, frag),
                        Err((kind, msg)) => {
                            *args = None;
                            out.push(Event::error(
                                kind,
                                format!("call {n}: {msg} (event at byte {at})"),
                            ));
                        }
                    }
                }
                false
            }
            (Block::Other, _) | (Block::ToolIncomplete, _) => false,
            // Citations and future delta kinds carry nothing this parser models.
            (_, "citations_delta") => false,
            (_, "text_delta" | "input_json_delta" | "thinking_delta" | "signature_delta") => true,
            _ => false,
        };
        if mismatch {
            out.push(Event::error(
                ErrorKind::InvalidStream,
                format!("{dty} at byte {at} does not belong to block {idx}'s type"),
            ));
            if let Block::Tool(_, args) = &mut slot.block {
                // The call's input stream is corrupt: it fails, never ends.
                *args = None;
            }
        }
    }

    fn block_stop(&mut self, value: &Value, at: u64, out: &mut dyn Sink) {
        let Some(idx) = self.index_of(value, at, out) else {
            return;
        };
        let on = self.config.ignore_duplicate_stop;
        match self.blocks.get(&idx) {
            None => {
                out.push(Event::error(
                    ErrorKind::InvalidStream,
                    format!("content_block_stop at byte {at} for block {idx}, which never started"),
                ));
            }
            Some(s) if s.stopped => {
                self.lenient(
                    on,
                    WarningKind::IgnoreDuplicateStop,
                    format!("second content_block_stop for block {idx} at byte {at}"),
                    out,
                );
            }
            Some(_) => self.close(idx, Close::Stop, at, out),
        }
    }

    /// Ends block `idx`: `CallEnd` for a complete call, or an error now or once the stop reason
    /// is known.
    fn close(&mut self, idx: u64, how: Close, at: u64, out: &mut dyn Sink) {
        let max_tokens = self.stop_reason.as_deref() == Some("max_tokens");
        let decide_now = self.message_stopped;
        let Some(slot) = self.blocks.get_mut(&idx) else {
            return;
        };
        slot.stopped = true;
        let Block::Tool(n, args) = &mut slot.block else {
            return;
        };
        let n = *n;
        let Some(mut a) = args.take() else {
            return;
        };
        if how == Close::CutOff {
            out.push(Event::error(
                ErrorKind::Unterminated,
                format!("call {n}: the stream ended without message_stop"),
            ));
            return;
        }
        if a.is_empty() {
            // No partial_json at all: the input is the start's `{}` (zero-argument tools).
            out.args_delta(n, "{}");
            out.push(Event::CallEnd { index: n });
            return;
        }
        let complete = a.is_complete();
        match a.finish() {
            Ok(()) => out.push(Event::CallEnd { index: n }),
            Err(msg) if complete || decide_now => {
                out.push(Event::error(
                    if max_tokens {
                        ErrorKind::Unterminated
                    } else {
                        ErrorKind::InvalidJson
                    },
                    format!("call {n}: {msg} (closed at byte {at})"),
                ));
            }
            Err(_) if max_tokens => out.push(Event::error(
                ErrorKind::Unterminated,
                format!("call {n}: arguments cut by max_tokens (closed at byte {at})"),
            )),
            Err(_) => {
                slot.block = Block::ToolIncomplete;
                self.held.push((n, idx));
            }
        }
    }

    /// Gives the held calls their verdict once the stop reason is known (or the stream ends).
    fn settle_incomplete(&mut self, out: &mut dyn Sink) {
        let max_tokens = self.stop_reason.as_deref() == Some("max_tokens");
        let mut held = std::mem::take(&mut self.held);
        held.sort_unstable();
        for (n, i) in held {
            if let Some(s) = self.blocks.get_mut(&i) {
                s.block = Block::Other;
            }
            out.push(Event::error(
                if max_tokens || self.stop_reason.is_none() {
                    ErrorKind::Unterminated
                } else {
                    ErrorKind::InvalidJson
                },
                format!(
                    "call {n}: arguments incomplete at content_block_stop (stop_reason {:?})",
                    self.stop_reason.as_deref().unwrap_or("none")
                ),
            ));
        }
    }

    /// Open blocks in call order.
    fn open_blocks(&self) -> Vec<u64> {
        let mut open: Vec<(usize, u64)> = self
            .blocks
            .iter()
            .filter(|(_, s)| !s.stopped)
            .map(|(i, s)| match s.block {
                Block::Tool(n, _) => (n, *i),
                _ => (usize::MAX, *i),
            })
            .collect();
        open.sort_unstable();
        open.into_iter().map(|(_, i)| i).collect()
    }

    fn message_stop(&mut self, at: u64, out: &mut dyn Sink) {
        self.settle_incomplete(out);
        let open = self.open_blocks();
        let has_open_call = open.iter().any(|i| {
            self.blocks
                .get(i)
                .is_some_and(|s| matches!(s.block, Block::Tool(_, Some(_))))
        });
        self.message_stopped = true;
        if has_open_call
            && !self.lenient(
                self.config.close_blocks_at_message_stop,
                WarningKind::CloseBlocksAtMessageStop,
                format!("message_stop at byte {at} with blocks still open"),
                out,
            )
        {
            for i in open {
                self.close(i, Close::CutOff, at, out);
            }
            return;
        }
        for i in open {
            self.close(i, Close::Stop, at, out);
        }
    }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        for piece in chunk.chunks(SSE_PIECE) {
            for i in sse_items(&mut self.sse, Some(piece)) {
                self.handle(i, out);
            }
        }
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        for i in sse_items(&mut self.sse, None) {
            self.handle(i, out);
        }
        let at = self.sse.offset();
        if self.saw_event && !self.message_stopped {
            if self.stop_reason.is_some() {
                self.lenient(
                    self.config.allow_missing_message_stop,
                    WarningKind::AllowMissingMessageStop,
                    "the stream ended without message_stop".into(),
                    out,
                );
                self.message_stop(at, out);
            } else {
                let open = self.open_blocks();
                let calls_open = open.iter().any(|i| {
                    self.blocks
                        .get(i)
                        .is_some_and(|s| matches!(s.block, Block::Tool(_, Some(_))))
                });
                let held = !self.held.is_empty();
                self.settle_incomplete(out);
                for i in open {
                    self.close(i, Close::CutOff, at, out);
                }
                if !calls_open && !held {
                    out.push(Event::error(
                        ErrorKind::Unterminated,
                        format!("the stream ended at byte {at} without message_stop"),
                    ));
                }
            }
        }
        self.reset_turn();
    }
}

fn event_line(out: &mut Vec<u8>, data: Value) {
    let ty = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    out.extend_from_slice(format!("event: {ty}\ndata: {data}\n\n").as_bytes());
}

/// Renders text and calls in Anthropic's documented event order: `message_start`, a text block
/// (when there is text) with ~16-byte `text_delta`s, per call a `tool_use` block with
/// `input: {}`, an empty first `partial_json` and ~8-byte fragments, `message_delta` with the
/// stop reason, `message_stop`.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    event_line(
        &mut out,
        json!({"type": "message_start", "message": {"id": "msg_01conform", "type": "message", "role": "assistant",
            "model": "claude-conform", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    );
    let mut idx = 0;
    if !text.is_empty() {
        event_line(
            &mut out,
            json!({"type": "content_block_start", "index": idx, "content_block": {"type": "text", "text": ""}}),
        );
        event_line(&mut out, json!({"type": "ping"}));
        for p in pieces(text, 16) {
            event_line(
                &mut out,
                json!({"type": "content_block_delta", "index": idx, "delta": {"type": "text_delta", "text": p}}),
            );
        }
        event_line(
            &mut out,
            json!({"type": "content_block_stop", "index": idx}),
        );
        idx += 1;
    }
    for (i, c) in calls.iter().enumerate() {
        check_call(i, c, "tool_use blocks")?;
        let mut block = json!({"type": "tool_use", "name": c.name, "input": {}});
        if let Some(id) = &c.id {
            block["id"] = json!(id);
        }
        event_line(
            &mut out,
            json!({"type": "content_block_start", "index": idx, "content_block": block}),
        );
        let args = c.arguments.to_string();
        for p in std::iter::once("").chain(pieces(&args, 8)) {
            event_line(
                &mut out,
                json!({"type": "content_block_delta", "index": idx, "delta": {"type": "input_json_delta", "partial_json": p}}),
            );
        }
        event_line(
            &mut out,
            json!({"type": "content_block_stop", "index": idx}),
        );
        idx += 1;
    }
    let reason = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    event_line(
        &mut out,
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": {"output_tokens": 1}}),
    );
    event_line(&mut out, json!({"type": "message_stop"}));
    Ok(out)
}

/// What sets anthropic_sse apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "anthropic_sse";
    const SUMMARY: &'static str =
        "Anthropic Messages SSE stream (content_block_start/delta/stop, input_json_delta)";
    const MARKERS: &'static [&'static str] = &[
        "event: ",
        "data: ",
        "content_block_start",
        "content_block_stop",
        "message_stop",
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(Parser::new(cfg));
}

/// The anthropic_sse format.
pub static FORMAT: Format = Format {
    // The provider already parsed the model's output: a tool choice changed it upstream.
    guided: false,
    ..entry::format::<Declared>()
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::core::testkit;
    use proptest::prelude::*;

    fn run_cfg(input: &[u8], config: &Config, cuts: &[usize]) -> ParseResult {
        testkit::fold_cut(&mut Parser::new(config.clone()), input, cuts)
    }

    /// Parses whole, byte by byte and at every single cut; all results must agree.
    fn parse_with(input: &str, config: Config) -> ParseResult {
        testkit::agree_under_cuts(&|b, c| run_cfg(b, &config, c), input.as_bytes(), usize::MAX)
    }

    fn parse(input: &str) -> ParseResult {
        parse_with(input, Config::default())
    }

    fn ev(v: Value) -> String {
        let ty = v["type"].as_str().unwrap_or("x").to_string();
        format!("event: {ty}\ndata: {v}\n\n")
    }

    fn start() -> String {
        ev(
            json!({"type": "message_start", "message": {"id": "msg_1", "content": [], "stop_reason": null}}),
        )
    }

    fn tool_start(i: u64, id: &str, name: &str) -> String {
        ev(
            json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        )
    }

    fn pj(i: u64, s: &str) -> String {
        ev(
            json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": s}}),
        )
    }

    fn text_block(i: u64, parts: &[&str]) -> String {
        let mut s = ev(
            json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
        );
        for p in parts {
            s += &ev(
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": p}}),
            );
        }
        s + &stop(i)
    }

    fn stop(i: u64) -> String {
        ev(json!({"type": "content_block_stop", "index": i}))
    }

    fn end(reason: &str) -> String {
        ev(
            json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": {"output_tokens": 9}}),
        ) + &ev(json!({"type": "message_stop"}))
    }

    fn weather(i: u64) -> String {
        tool_start(i, "toolu_01A", "get_weather")
            + &pj(i, "")
            + &pj(i, "{\"locati")
            + &pj(i, "on\": \"Paris\"}")
            + &stop(i)
    }

    fn warnings(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn text_and_a_tool_call_in_the_documented_order() {
        let s = start()
            + &ev(json!({"type": "ping"}))
            + &text_block(0, &["Let me ", "check."])
            + &weather(1)
            + &end("tool_use");
        let r = parse(&s);
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
        assert_eq!(r.text, "Let me check.");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].id.as_deref(), Some("toolu_01A"));
        assert_eq!(r.calls[0].arguments, json!({"location": "Paris"}));
    }

    #[test]
    fn thinking_is_reasoning_and_never_leaks_into_text() {
        let s = start()
            + &ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            )
            + &ev(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "secret plan"}}),
            )
            + &ev(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}}),
            )
            + &stop(0)
            + &ev(
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "xyz"}}),
            )
            + &stop(1)
            + &text_block(2, &["Answer."])
            + &end("end_turn");
        let r = parse(&s);
        assert_eq!(r.text, "Answer.");
        assert_eq!(r.reasoning_text(), "secret plan");
        assert!(r.errors.is_empty());
    }

    #[test]
    fn max_tokens_in_the_middle_of_arguments_is_unterminated() {
        let s = start()
            + &tool_start(0, "toolu_x", "write")
            + &pj(0, "{\"content\": \"abc")
            + &stop(0)
            + &end("max_tokens");
        let r = parse(&s);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
        // Without content_block_stop (the fine-grained streaming fixture).
        let s = start()
            + &tool_start(0, "toolu_x", "write")
            + &pj(0, "{\"content\": \"abc")
            + &end("max_tokens");
        assert_eq!(parse(&s).error_kinds(), [ErrorKind::Unterminated]);
    }

    #[test]
    fn incomplete_arguments_with_tool_use_stop_are_invalid_json() {
        let s = start()
            + &tool_start(0, "toolu_x", "f")
            + &pj(0, "{\"a\": 1")
            + &stop(0)
            + &end("tool_use");
        assert_eq!(parse(&s).error_kinds(), [ErrorKind::InvalidJson]);
    }

    #[test]
    fn invalid_final_json_is_invalid_json() {
        let s = start()
            + &tool_start(0, "toolu_x", "get_weather")
            + &pj(0, "{\"location\": \"Paris\", \"unit\": celsius}")
            + &stop(0)
            + &end("tool_use");
        let r = parse(&s);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidJson]);
    }

    #[test]
    fn whitespace_after_the_json_and_no_block_stop_are_accepted() {
        let s = start()
            + &tool_start(0, "toolu_x", "f")
            + &pj(0, "{\"a\": 1}")
            + &pj(0, "\n  ")
            + &end("tool_use");
        let r = parse(&s);
        assert_eq!(r.calls[0].arguments, json!({"a": 1}));
        assert_eq!(warnings(&r), ["close_blocks_at_message_stop"]);
        let strict = Config {
            close_blocks_at_message_stop: false,
            ..Config::default()
        };
        assert_eq!(
            parse_with(&s, strict).error_kinds(),
            [ErrorKind::InvalidStream, ErrorKind::Unterminated]
        );
    }

    #[test]
    fn zero_argument_call_gets_an_empty_object() {
        let s =
            start() + &tool_start(0, "toolu_t", "now") + &pj(0, "") + &stop(0) + &end("tool_use");
        let r = parse(&s);
        assert_eq!(r.calls[0].arguments, json!({}));
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn duplicate_stop_is_a_warning() {
        let s = start() + &weather(0) + &stop(0) + &end("tool_use");
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["ignore_duplicate_stop"]);
        let strict = Config {
            ignore_duplicate_stop: false,
            ..Config::default()
        };
        assert_eq!(
            parse_with(&s, strict).error_kinds(),
            [ErrorKind::InvalidStream]
        );
    }

    #[test]
    fn input_json_delta_for_a_text_block_is_invalid_stream() {
        let s = start()
            + &ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            )
            + &pj(0, "{}")
            + &ev(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            )
            + &stop(0)
            + &end("end_turn");
        let r = parse(&s);
        assert_eq!(r.text, "ok");
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn text_delta_for_a_tool_block_fails_the_call() {
        let s = start()
            + &tool_start(0, "toolu_x", "f")
            + &ev(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "oops"}}),
            )
            + &pj(0, "{}")
            + &stop(0)
            + &end("tool_use");
        let r = parse(&s);
        assert!(r.calls.is_empty() && r.text.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn index_mismatches() {
        // A delta for a block that never started.
        let s = start() + &weather(0) + &pj(5, "{}") + &end("tool_use");
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
        // A start reusing an index.
        let s = start() + &weather(0) + &tool_start(0, "toolu_y", "g") + &end("tool_use");
        assert_eq!(parse(&s).error_kinds(), [ErrorKind::InvalidStream]);
        // A gap in the indices.
        let s = start() + &weather(2) + &end("tool_use");
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["allow_block_index_gap"]);
    }

    #[test]
    fn non_empty_input_in_start_is_the_arguments() {
        let s = start()
            + &ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_p", "name": "f", "input": {"a": [1, 2]}}}),
            )
            + &stop(0)
            + &end("tool_use");
        let r = parse(&s);
        assert_eq!(r.calls[0].arguments, json!({"a": [1, 2]}));
        assert_eq!(warnings(&r), ["accept_input_in_start"]);
        // Input in the start and deltas as well: two objects, invalid.
        let s2 = start()
            + &ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_p", "name": "f", "input": {"a": 1}}}),
            )
            + &pj(0, "{\"a\": 1}")
            + &stop(0)
            + &end("tool_use");
        assert_eq!(parse(&s2).error_kinds(), [ErrorKind::InvalidJson]);
        let strict = Config {
            accept_input_in_start: false,
            ..Config::default()
        };
        assert_eq!(
            parse_with(&s, strict).error_kinds(),
            [ErrorKind::InvalidStream]
        );
    }

    #[test]
    fn error_event_mid_stream() {
        let s = start()
            + &text_block(0, &["Hi"])
            + &ev(
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            );
        let r = parse(&s);
        assert_eq!(r.text, "Hi");
        assert_eq!(
            r.error_kinds(),
            [ErrorKind::InvalidStream, ErrorKind::Unterminated]
        );
        assert!(r.errors[0].message.contains("Overloaded"));
    }

    #[test]
    fn unknown_event_types_and_block_types_are_ignored() {
        let s = start()
            + &ev(json!({"type": "future_event", "x": 1}))
            + &ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
            )
            + &pj(0, "{\"query\": \"x\"}")
            + &stop(0)
            + &text_block(1, &["done"])
            + &end("end_turn");
        let r = parse(&s);
        assert_eq!(r.text, "done");
        assert!(r.calls.is_empty() && r.errors.is_empty() && r.warnings.is_empty());
    }

    #[test]
    fn cut_off_streams_are_unterminated() {
        let s = start() + &tool_start(0, "toolu_x", "f") + &pj(0, "{\"a\": 1}");
        let r = parse(&s);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
        let s = start() + &text_block(0, &["Hel"]);
        assert_eq!(parse(&s).error_kinds(), [ErrorKind::Unterminated]);
        let s = start()
            + &weather(0)
            + &ev(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}));
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["allow_missing_message_stop"]);
    }

    #[test]
    fn missing_message_start_is_a_warning() {
        let s = weather(0) + &end("tool_use");
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["allow_missing_message_start"]);
    }

    #[test]
    fn missing_id_and_missing_name() {
        let s = start()
            + &ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "name": "f", "input": {}}}),
            )
            + &pj(0, "{}")
            + &stop(0)
            + &end("tool_use");
        let r = parse(&s);
        assert_eq!(r.calls[0].id, None);
        assert_eq!(warnings(&r), ["allow_missing_id"]);
        let s = start()
            + &ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "input": {}}}),
            )
            + &pj(0, "{}")
            + &stop(0)
            + &end("tool_use");
        assert_eq!(parse(&s).error_kinds(), [ErrorKind::MissingName]);
    }

    #[test]
    fn malformed_payload_and_events_after_message_stop() {
        let s = start()
            + "event: content_block_start\ndata: {\"type\":\n\n"
            + &text_block(0, &["a"])
            + &end("end_turn");
        let r = parse(&s);
        assert_eq!(r.text, "a");
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
        let s = start() + &text_block(0, &["a"]) + &end("end_turn") + &text_block(1, &["b"]);
        let r = parse(&s);
        assert_eq!(r.text, "a");
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn attempt_completion_is_the_completion() {
        let s = start()
            + &tool_start(0, "toolu_c", "attempt_completion")
            + &pj(0, "")
            + &pj(0, "{\"result\": \"All")
            + &pj(0, " done\"}")
            + &stop(0)
            + &end("tool_use");
        assert_eq!(parse(&s).completion.as_deref(), Some("All done"));
    }

    #[test]
    fn render_roundtrips() {
        let calls = vec![
            ToolCall {
                name: "get_weather".into(),
                id: Some("toolu_01".into()),
                server: None,
                arguments: json!({"location": "Zürich"}),
            },
            ToolCall {
                name: "now".into(),
                id: Some("toolu_02".into()),
                server: None,
                arguments: json!({}),
            },
        ];
        let b = render("Checking – 😀", &calls, &Tools::default()).unwrap();
        let s = String::from_utf8(b).unwrap();
        assert!(s.starts_with("event: message_start\n"));
        assert!(s.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
        let r = parse(&s);
        assert_eq!(r.text, "Checking – 😀");
        assert_eq!(r.calls, calls);
        assert!(r.errors.is_empty() && r.warnings.is_empty());
    }

    #[test]
    fn render_refuses_an_empty_id() {
        let call = ToolCall {
            name: "now".into(),
            id: Some(String::new()),
            server: None,
            arguments: json!({}),
        };
        assert!(render("", &[call], &Tools::default()).is_err());
    }

    testkit::stream_properties!(
        |b: &[u8], c: &[usize]| run_cfg(b, &Config::default(), c),
        |text: &str, calls: &[ToolCall]| render(text, calls, &Tools::default()),
        testkit::arb_call(
            "toolu_01[A-Za-z0-9]{1,8}".prop_map(Some),
            "[a-zé\"\\\\ \n{}€😀]{0,8}"
        ),
        "[a-zé \n€😀]{0,24}"
    );
}
