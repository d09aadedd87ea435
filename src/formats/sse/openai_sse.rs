//! openai_sse: an OpenAI Chat Completions stream (`data: {chunk}` … `data: [DONE]`).
//!
//! Choice 0's `delta.content` is visible text (Kimi-style markers inside it are parsed with the
//! kimi_k2 parser, seed 001), `delta.tool_calls[]` carry calls: the first entry for an index has
//! the id and name, later ones argument fragments, which are validated incrementally (one
//! [`JsonParser`](crate::lexers::json::JsonParser) per call, each fragment fed once). Rules and every deviation: `specs/openai_sse.md`.

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::sse::provider::{
    Args, SSE_PIECE, check_call, payload, pieces, raw_string, sse_items,
};
use crate::formats::{Format, RenderFn, StreamParser};
use crate::lexers::sse::{SseConfig, SseEvent, SseItem, SseParser};
use crate::tools::Tools;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};

config! {
    /// Leniency options and limits. Every recovered deviation emits `Warning{kind: <option name>}`.
    #[derive(Debug, Clone)]
    pub struct Config {
        options {
            /// Parse Kimi-style `<|tool_call_begin|>…` markers inside `content` as calls (seed 001:
            /// "works alongside" the JSON tool calls). Default true.
            kimi_markers,
            /// A new index without an `id` still starts a call, with no id (sglang#7048). Default true;
            /// off → `invalid_stream` and the call is dropped.
            allow_missing_id,
            /// The same `id`/`name` repeated on later deltas of a call is ignored (warned once per call).
            /// Default true; off → `invalid_stream` and the call fails.
            allow_repeated_header,
            /// A second, different `id` on an index that already has a call ends that call and starts a
            /// new one (Ollama puts parallel calls all on index 0). Default true; off → `invalid_stream`.
            split_calls_on_new_id,
            /// The same `id` on two indices gives two calls. Default true; off → the second one fails
            /// with `invalid_stream`.
            allow_duplicate_id,
            /// Argument fragments that arrive before the call's name are held until the name comes.
            /// Default true; off → `invalid_stream`.
            buffer_args_before_name,
            /// A tool-call entry without `index` belongs to the latest call, or starts a new one when it
            /// carries a new id (term-llm#314). Default true; off → `invalid_stream`.
            infer_missing_index,
            /// A call whose arguments are empty (`""`, vllm#28806, qwen-code#6249) gets `{}`. Default
            /// true; off → `empty_arguments`.
            empty_arguments_as_object,
            /// `finish_reason: "stop"` ends open calls like `"tool_calls"` (gpt-4o under a forced
            /// `tool_choice`, ollama#7963). Default true; off → each open call fails with `invalid_stream`.
            end_calls_at_stop,
            /// With no `finish_reason` at all, `[DONE]` ends the open calls whose JSON is complete.
            /// Default true; off → they fail with `unterminated`.
            end_calls_at_stream_end,
            /// A stream that has its `finish_reason` but ends without `data: [DONE]` is accepted.
            /// Default true; off → `invalid_stream`.
            allow_missing_done,
            /// A last event not closed by a blank line whose payload is complete is used. Default true;
            /// off → `invalid_stream`.
            accept_unterminated_event,
            /// Choices other than 0 (`n > 1`) are ignored (warned once per turn). Default true; off →
            /// `invalid_stream` once.
            ignore_extra_choices,
        }
        /// Largest arguments text of one call, in bytes; more → `limit_exceeded` for that call.
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
            kimi_markers: true,
            allow_missing_id: true,
            allow_repeated_header: true,
            split_calls_on_new_id: true,
            allow_duplicate_id: true,
            buffer_args_before_name: true,
            infer_missing_index: true,
            empty_arguments_as_object: true,
            end_calls_at_stop: true,
            end_calls_at_stream_end: true,
            allow_missing_done: true,
            accept_unterminated_event: true,
            ignore_extra_choices: true,
            max_call_bytes: 16 << 20,
            max_depth: 128,
            sse: SseConfig::default(),
        }
    }
}

/// A chunk as far as this parser reads it; unknown fields are skipped.
#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<WireContent>,
    /// Reasoning as vLLM, DeepSeek and SGLang send it.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// Reasoning as OpenRouter and newer vLLM send it (the same text when both are present).
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

/// `delta.content`: a string, or (Mistral) an array of typed parts.
#[derive(Deserialize)]
#[serde(untagged)]
enum WireContent {
    Text(String),
    Parts(Vec<WirePart>),
}

/// One typed part of an array `content`: `{"type":"text","text"}` or
/// `{"type":"thinking","thinking":[{"type":"text","text"}…]}` (Magistral).
#[derive(Deserialize)]
struct WirePart {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<Value>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    /// Read raw and unescaped once: the whole of a huge argument often comes in one delta.
    #[serde(default, deserialize_with = "raw_string")]
    arguments: Option<String>,
}

/// How a group of open calls is being closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// The model said it finished: incomplete JSON is `invalid_json`.
    Finished,
    /// The model was cut (`length`, `content_filter`, no reason): incomplete JSON is `unterminated`.
    Truncated,
    /// The stream itself was cut: every open call is `unterminated`.
    CutOff,
}

enum SlotState {
    /// No name yet: argument fragments wait here.
    Pending(String),
    /// `CallStart` emitted with this output index.
    Open(usize, Box<Args>),
    /// Ended or failed; later deltas are ignored.
    Closed,
}

struct Slot {
    wire: u64,
    id: Option<String>,
    name: Option<String>,
    state: SlotState,
    warned_repeat: bool,
    warned_pending: bool,
}

/// The openai_sse streaming parser.
pub struct Parser {
    config: Config,
    sse: SseParser,
    /// The kimi_k2 parser fed choice 0's `content`, when `kimi_markers` is on.
    kimi: Option<Box<dyn StreamParser>>,
    /// kimi call index → output index.
    kimi_map: Vec<Option<usize>>,
    slots: Vec<Slot>,
    by_wire: HashMap<u64, usize>,
    /// Ids of this turn's calls, for the duplicate-id rule without a scan per call.
    ids: HashSet<String>,
    /// One past the highest wire index seen: where an index-less entry with a new id goes.
    next_wire: u64,
    /// Slot of the latest tool-call entry, for entries without `index`.
    last_slot: Option<usize>,
    next_index: usize,
    saw_event: bool,
    finished: bool,
    done: bool,
    warned: Vec<&'static str>,
}

impl Parser {
    /// A parser for one session.
    pub fn new(config: Config) -> Parser {
        let sse = SseParser::new(config.sse.clone());
        let kimi = config.kimi_markers.then(new_kimi).flatten();
        Parser {
            config,
            sse,
            kimi,
            kimi_map: Vec::new(),
            slots: Vec::new(),
            by_wire: HashMap::new(),
            ids: HashSet::new(),
            next_wire: 0,
            last_slot: None,
            next_index: 0,
            saw_event: false,
            finished: false,
            done: false,
            warned: Vec::new(),
        }
    }

    fn reset_turn(&mut self) {
        self.kimi = self.config.kimi_markers.then(new_kimi).flatten();
        self.kimi_map.clear();
        self.slots.clear();
        self.by_wire.clear();
        self.ids.clear();
        self.next_wire = 0;
        self.last_slot = None;
        self.next_index = 0;
        self.saw_event = false;
        self.finished = false;
        self.done = false;
        self.warned.clear();
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

    /// Emits a warning for `option` once per turn; false when the option is off.
    fn lenient(&mut self, on: bool, option: WarningKind, msg: String, out: &mut dyn Sink) -> bool {
        if on {
            if !self.warned.contains(&option.as_str()) {
                self.warned.push(option.as_str());
                out.push(Event::warning(option, msg));
            }
        } else {
            out.push(Event::error(ErrorKind::InvalidStream, msg));
        }
        on
    }

    fn on_event(&mut self, ev: SseEvent, out: &mut dyn Sink) {
        self.saw_event = true;
        let at = ev.offset;
        if self.done {
            if !self.warned.contains(&"after_done") {
                self.warned.push("after_done");
                out.push(Event::error(
                    ErrorKind::InvalidStream,
                    format!("event at byte {at} after data: [DONE]"),
                ));
            }
            return;
        }
        if ev.event == "error" {
            out.push(Event::error(
                ErrorKind::InvalidStream,
                format!("provider error event at byte {at}: {}", ev.data),
            ));
            return;
        }
        if ev.event != "message" {
            // Not part of the Chat Completions protocol; nothing in it can be a call or text.
            return;
        }
        if ev.data.trim() == "[DONE]" {
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
            self.on_done(out);
            return;
        }
        let Some(chunk) = payload::<WireChunk>(&ev, out) else {
            return;
        };
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
        if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            out.push(Event::error(
                ErrorKind::InvalidStream,
                format!("provider error at byte {at}: {msg}"),
            ));
            return;
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                self.lenient(
                    self.config.ignore_extra_choices,
                    WarningKind::IgnoreExtraChoices,
                    format!(
                        "chunk at byte {at} has a choice other than 0 (n > 1); only choice 0 is parsed"
                    ),
                    out,
                );
                continue;
            }
            self.on_choice(choice, at, out);
        }
    }

    fn on_choice(&mut self, choice: WireChoice, at: u64, out: &mut dyn Sink) {
        let (content, reasoning, refusal, calls) = match choice.delta {
            Some(d) => (
                d.content,
                d.reasoning_content.or(d.reasoning),
                d.refusal,
                d.tool_calls.unwrap_or_default(),
            ),
            None => (None, None, None, Vec::new()),
        };
        let says_something = |c: &WireContent| match c {
            WireContent::Text(s) => !s.is_empty(),
            WireContent::Parts(p) => !p.is_empty(),
        };
        if self.finished
            && (!calls.is_empty()
                || content.as_ref().is_some_and(says_something)
                || reasoning.as_ref().is_some_and(|s| !s.is_empty()))
        {
            if !self.warned.contains(&"after_finish") {
                self.warned.push("after_finish");
                out.push(Event::error(
                    ErrorKind::InvalidStream,
                    format!("delta at byte {at} after the finish_reason"),
                ));
            }
            return;
        }
        if let Some(s) = reasoning {
            out.reasoning(&s);
        }
        match content {
            Some(WireContent::Text(s)) => self.content(&s, out),
            Some(WireContent::Parts(parts)) => {
                for part in parts {
                    self.content_part(part, out);
                }
            }
            None => {}
        }
        if let Some(s) = refusal {
            // A refusal is what the user is shown instead of an answer: visible text.
            out.text(&s);
        }
        for entry in calls {
            self.tool_entry(entry, at, out);
        }
        if let Some(reason) = choice.finish_reason {
            self.on_finish_reason(&reason, at, out);
        }
    }

    /// One typed part of an array `content`: text parts are content, thinking parts reasoning;
    /// other parts (images, references) carry no text.
    fn content_part(&mut self, part: WirePart, out: &mut dyn Sink) {
        match part.kind.as_deref() {
            Some("text") => {
                if let Some(t) = part.text {
                    self.content(&t, out);
                }
            }
            Some("thinking") => match part.thinking {
                Some(Value::String(t)) => out.reasoning(&t),
                Some(Value::Array(items)) => {
                    for item in items {
                        if let Some(t) = item.get("text").and_then(Value::as_str) {
                            out.reasoning(t);
                        }
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn content(&mut self, s: &str, out: &mut dyn Sink) {
        let Some(kimi) = self.kimi.as_mut() else {
            out.text(s);
            return;
        };
        let mut evs = Vec::new();
        kimi.feed(s.as_bytes(), &mut evs);
        self.forward_kimi(evs, out);
    }

    /// Renumbers the kimi parser's calls into this turn's single index sequence.
    fn forward_kimi(&mut self, evs: Vec<Event>, out: &mut dyn Sink) {
        for ev in evs {
            match ev {
                Event::Text { text } => out.text(&text),
                Event::Reasoning { text } => out.reasoning(&text),
                Event::CallStart {
                    index,
                    id,
                    name,
                    server,
                } => {
                    if self.kimi_map.len() <= index {
                        self.kimi_map.resize(index + 1, None);
                    }
                    let n = self.next_index;
                    self.next_index += 1;
                    self.kimi_map[index] = Some(n);
                    out.push(Event::CallStart {
                        index: n,
                        id,
                        name,
                        server,
                    });
                }
                Event::ArgsDelta { index, json } => {
                    if let Some(Some(n)) = self.kimi_map.get(index) {
                        out.push(Event::ArgsDelta { index: *n, json });
                    }
                }
                Event::CallEnd { index } => {
                    if let Some(Some(n)) = self.kimi_map.get(index) {
                        out.push(Event::CallEnd { index: *n });
                    }
                }
                Event::Warning { kind, message } => out.push(Event::Warning {
                    kind,
                    message: format!("in content: {message}"),
                }),
                Event::Error { kind, message } => out.push(Event::Error {
                    kind,
                    message: format!("in content: {message}"),
                }),
            }
        }
    }

    fn tool_entry(&mut self, entry: WireToolCall, at: u64, out: &mut dyn Sink) {
        let id = entry.id.as_deref().filter(|s| !s.is_empty());
        let (name, args) = match &entry.function {
            Some(f) => (
                f.name.as_deref().filter(|s| !s.is_empty()),
                f.arguments.as_deref(),
            ),
            None => (None, None),
        };
        let wire = match entry.index {
            Some(w) => w,
            None => {
                if !self.lenient(
                    self.config.infer_missing_index,
                    WarningKind::InferMissingIndex,
                    format!("tool_calls entry at byte {at} has no index"),
                    out,
                ) {
                    return;
                }
                let last = self.last_slot.map(|s| &self.slots[s]);
                match last {
                    Some(s) if id.is_none() || s.id.as_deref() == id => s.wire,
                    _ => self.next_wire,
                }
            }
        };
        let pos = match self.by_wire.get(&wire).copied() {
            None => match self.new_slot(wire, id, at, out) {
                Some(p) => p,
                None => return,
            },
            Some(p) => {
                let slot_id = self.slots[p].id.clone();
                match (id, slot_id) {
                    (Some(new), Some(old)) if new != old => {
                        if !self.lenient(
                            self.config.split_calls_on_new_id,
                            WarningKind::SplitCallsOnNewId,
                            format!(
                                "a second id {new:?} on tool index {wire} at byte {at}: a new call"
                            ),
                            out,
                        ) {
                            self.fail(p, out, None);
                            return;
                        }
                        self.close(p, Close::Finished, at, out);
                        match self.new_slot(wire, id, at, out) {
                            Some(p) => p,
                            None => return,
                        }
                    }
                    (Some(_), _) => {
                        if matches!(self.slots[p].state, SlotState::Pending(_))
                            && self.slots[p].id.is_none()
                        {
                            self.slots[p].id = id.map(str::to_string);
                        } else if !self.repeated_header(p, at, out) {
                            return;
                        }
                        p
                    }
                    (None, _) => p,
                }
            }
        };
        self.last_slot = Some(pos);
        if let Some(name) = name {
            match &self.slots[pos].state {
                SlotState::Pending(_) => {
                    self.slots[pos].name = Some(name.to_string());
                    self.start(pos, at, out);
                }
                SlotState::Open(..) => {
                    if self.slots[pos].name.as_deref() == Some(name) {
                        if !self.repeated_header(pos, at, out) {
                            return;
                        }
                    } else {
                        let msg =
                            format!("call at tool index {wire} renamed to {name:?} at byte {at}");
                        self.fail(pos, out, Some((ErrorKind::InvalidStream, msg)));
                        return;
                    }
                }
                SlotState::Closed => return,
            }
        }
        if let Some(frag) = args {
            self.args(pos, frag, at, out);
        }
    }

    /// Handles an id or name sent again; false when the call failed.
    fn repeated_header(&mut self, pos: usize, at: u64, out: &mut dyn Sink) -> bool {
        if matches!(self.slots[pos].state, SlotState::Closed) {
            return false;
        }
        if self.config.allow_repeated_header {
            if !self.slots[pos].warned_repeat {
                self.slots[pos].warned_repeat = true;
                out.push(Event::warning(
                    WarningKind::AllowRepeatedHeader,
                    format!("id or name sent again at byte {at}"),
                ));
            }
            true
        } else {
            let msg = format!("id or name sent again at byte {at}");
            self.fail(pos, out, Some((ErrorKind::InvalidStream, msg)));
            false
        }
    }

    fn new_slot(
        &mut self,
        wire: u64,
        id: Option<&str>,
        at: u64,
        out: &mut dyn Sink,
    ) -> Option<usize> {
        let mut ok = true;
        if id.is_none() {
            ok = self.lenient(
                self.config.allow_missing_id,
                WarningKind::AllowMissingId,
                format!("new tool index {wire} at byte {at} has no id"),
                out,
            );
        } else if id.is_some_and(|i| self.ids.contains(i)) {
            ok = self.lenient(
                self.config.allow_duplicate_id,
                WarningKind::AllowDuplicateId,
                format!(
                    "id {:?} at byte {at} is already used by another call",
                    id.unwrap_or("")
                ),
                out,
            );
        }
        if let Some(i) = id {
            self.ids.insert(i.to_string());
        }
        self.next_wire = self.next_wire.max(wire.saturating_add(1));
        let pos = self.slots.len();
        self.slots.push(Slot {
            wire,
            id: id.map(str::to_string),
            name: None,
            state: if ok {
                SlotState::Pending(String::new())
            } else {
                SlotState::Closed
            },
            warned_repeat: false,
            warned_pending: false,
        });
        self.by_wire.insert(wire, pos);
        ok.then_some(pos)
    }

    fn start(&mut self, pos: usize, at: u64, out: &mut dyn Sink) {
        let n = self.next_index;
        self.next_index += 1;
        let slot = &mut self.slots[pos];
        let pending = match std::mem::replace(
            &mut slot.state,
            SlotState::Open(
                n,
                Box::new(Args::new(self.config.max_depth, self.config.max_call_bytes)),
            ),
        ) {
            SlotState::Pending(buf) => buf,
            _ => String::new(),
        };
        out.push(Event::CallStart {
            index: n,
            id: slot.id.clone(),
            name: slot.name.clone().unwrap_or_default(),
            server: None,
        });
        if !pending.is_empty() {
            self.args(pos, &pending, at, out);
        }
    }

    fn args(&mut self, pos: usize, frag: &str, at: u64, out: &mut dyn Sink) {
        if frag.is_empty() {
            return;
        }
        let max = self.config.max_call_bytes;
        let buffer_ok = self.config.buffer_args_before_name;
        let slot = &mut self.slots[pos];
        let err = match &mut slot.state {
            SlotState::Pending(_) if !buffer_ok => Some((
                ErrorKind::InvalidStream,
                format!("arguments before the name at byte {at}"),
            )),
            SlotState::Pending(buf) if buf.len() + frag.len() > max => Some((
                ErrorKind::LimitExceeded,
                format!("arguments exceed {max} bytes at byte {at}"),
            )),
            SlotState::Pending(buf) => {
                buf.push_str(frag);
                if !slot.warned_pending {
                    slot.warned_pending = true;
                    out.push(Event::warning(
                        WarningKind::BufferArgsBeforeName,
                        format!("arguments before the name at byte {at}"),
                    ));
                }
                None
            }
            SlotState::Open(n, a) => {
                let n = *n;
                match a.feed(frag) {
                    Ok(()) => {
                        out.args_delta(n, frag);
                        None
                    }
                    Err((kind, msg)) => {
                        Some((kind, format!("call {n}: {msg} (event at byte {at})")))
                    }
                }
            }
            SlotState::Closed => None,
        };
        if err.is_some() {
            self.fail(pos, out, err);
        }
    }

    /// Marks a call failed, with its error if given.
    fn fail(&mut self, pos: usize, out: &mut dyn Sink, err: Option<(ErrorKind, String)>) {
        self.slots[pos].state = SlotState::Closed;
        if let Some((kind, msg)) = err {
            out.push(Event::error(kind, msg));
        }
    }

    /// Ends one call: `CallEnd` when its arguments are a complete object, an error otherwise.
    fn close(&mut self, pos: usize, how: Close, at: u64, out: &mut dyn Sink) {
        let empty_ok = self.config.empty_arguments_as_object;
        let slot = &mut self.slots[pos];
        let wire = slot.wire;
        match std::mem::replace(&mut slot.state, SlotState::Closed) {
            SlotState::Closed => {}
            SlotState::Pending(_) => {
                let kind = if how == Close::CutOff {
                    ErrorKind::Unterminated
                } else {
                    ErrorKind::MissingName
                };
                out.push(Event::error(
                    kind,
                    format!("call at tool index {wire} never got a name (closed at byte {at})"),
                ));
            }
            SlotState::Open(n, mut a) => {
                if how == Close::CutOff {
                    out.push(Event::error(
                        ErrorKind::Unterminated,
                        format!("call {n}: the stream ended without finish_reason or [DONE]"),
                    ));
                } else if a.is_empty() {
                    if empty_ok {
                        out.push(Event::warning(
                            WarningKind::EmptyArgumentsAsObject,
                            format!("call {n} has empty arguments; taken as {{}}"),
                        ));
                        out.args_delta(n, "{}");
                        out.push(Event::CallEnd { index: n });
                    } else {
                        out.push(Event::error(
                            ErrorKind::EmptyArguments,
                            format!("call {n} has empty arguments"),
                        ));
                    }
                } else {
                    let complete = a.is_complete();
                    match a.finish() {
                        Ok(()) => out.push(Event::CallEnd { index: n }),
                        Err(msg) => {
                            let kind = if how == Close::Truncated && !complete {
                                ErrorKind::Unterminated
                            } else {
                                ErrorKind::InvalidJson
                            };
                            out.push(Event::error(
                                kind,
                                format!(
                                    "call {n}: arguments incomplete ({msg}), closed at byte {at}"
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }

    /// Closes every open call, in output-index order (pending ones last).
    fn close_all(&mut self, how: Close, at: u64, out: &mut dyn Sink) {
        let mut order: Vec<(usize, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(p, s)| match s.state {
                SlotState::Open(n, _) => Some((n, p)),
                SlotState::Pending(_) => Some((usize::MAX, p)),
                SlotState::Closed => None,
            })
            .collect();
        order.sort_unstable();
        for (_, p) in order {
            self.close(p, how, at, out);
        }
    }

    fn has_open(&self) -> bool {
        self.slots
            .iter()
            .any(|s| !matches!(s.state, SlotState::Closed))
    }

    fn on_finish_reason(&mut self, reason: &str, at: u64, out: &mut dyn Sink) {
        self.finished = true;
        match reason {
            "length" | "content_filter" => self.close_all(Close::Truncated, at, out),
            "stop" if self.has_open() => {
                if self.lenient(
                    self.config.end_calls_at_stop,
                    WarningKind::EndCallsAtStop,
                    format!("finish_reason \"stop\" at byte {at} with open tool calls"),
                    out,
                ) {
                    self.close_all(Close::Finished, at, out);
                } else {
                    for p in 0..self.slots.len() {
                        self.fail(p, out, None);
                    }
                }
            }
            _ => self.close_all(Close::Finished, at, out),
        }
    }

    fn on_done(&mut self, out: &mut dyn Sink) {
        self.done = true;
        if self.finished || !self.has_open() {
            return;
        }
        let at = self.sse.offset();
        if self.config.end_calls_at_stream_end {
            out.push(Event::warning(
                WarningKind::EndCallsAtStreamEnd,
                "no finish_reason: open calls end at [DONE]",
            ));
            self.close_all(Close::Truncated, at, out);
        } else {
            self.close_all(Close::CutOff, at, out);
        }
    }
}

/// The format whose markup `content` may carry (seed 001), through its registry entry only
/// (its parser with the reasoning layer, its markers): this module knows nothing of its
/// internals, and the family sits below the registry, not beside it.
static CONTENT_FORMAT: &Format = &crate::formats::delimited::kimi_k2::FORMAT;

/// A parser for the markup in `content`: the registered format's, reasoning layer included.
fn new_kimi() -> Option<Box<dyn StreamParser>> {
    Some((CONTENT_FORMAT.new_parser)(&Tools::default()))
}

/// The markup of the format in `content`: its markers and reasoning tags, which rendered
/// text must not contain (they would parse as markup).
fn content_markup() -> Vec<String> {
    let f = CONTENT_FORMAT;
    let mut m = (f.markers)(&Tools::default());
    m.extend(f.reasoning.map(|r| r.tags()).unwrap_or_default());
    m
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
        if let Some(mut kimi) = self.kimi.take() {
            let mut evs = Vec::new();
            kimi.finish(&mut evs);
            self.forward_kimi(evs, out);
        }
        let at = self.sse.offset();
        if !self.done && self.saw_event {
            if self.finished {
                self.lenient(
                    self.config.allow_missing_done,
                    WarningKind::AllowMissingDone,
                    "the stream ended without data: [DONE]".into(),
                    out,
                );
            } else if self.has_open() {
                self.close_all(Close::CutOff, at, out);
            } else {
                out.push(Event::error(
                    ErrorKind::Unterminated,
                    format!("the stream ended at byte {at} without finish_reason or [DONE]"),
                ));
            }
        }
        self.reset_turn();
    }
}

/// Bytes of text per `content` delta in rendered streams.
const TEXT_PIECE: usize = 16;
/// Bytes of arguments per delta in rendered streams: small, so a roundtrip exercises reassembly.
const ARGS_PIECE: usize = 8;

fn chunk_line(out: &mut Vec<u8>, delta: Value, finish: Option<&str>) {
    let chunk = json!({
        "id": "chatcmpl-conform",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "conform",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(chunk.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// Renders text and calls as a canonical gpt-4o-like stream: role chunk, content deltas, per call
/// a first delta with id/name/`arguments: ""` then ~8-byte argument fragments, a finish chunk,
/// and `data: [DONE]`.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(m) = content_markup()
        .into_iter()
        .find(|m| text.contains(m.as_str()))
    {
        // Content is fed to the kimi_k2 parser, so its markup in it is not text (found by the
        // `roundtrip` fuzz target).
        return Err(format!(
            "the text contains the {} markup {m}",
            CONTENT_FORMAT.id
        ));
    }
    let mut out = Vec::new();
    chunk_line(
        &mut out,
        json!({"role": "assistant", "content": null, "refusal": null}),
        None,
    );
    for p in pieces(text, TEXT_PIECE) {
        chunk_line(&mut out, json!({ "content": p }), None);
    }
    for (i, c) in calls.iter().enumerate() {
        check_call(i, c, "OpenAI tool calls")?;
        let mut first = Map::new();
        first.insert("index".into(), json!(i));
        if let Some(id) = &c.id {
            first.insert("id".into(), json!(id));
        }
        first.insert("type".into(), json!("function"));
        first.insert("function".into(), json!({"name": c.name, "arguments": ""}));
        chunk_line(&mut out, json!({ "tool_calls": [first] }), None);
        let args = c.arguments.to_string();
        for p in pieces(&args, ARGS_PIECE) {
            chunk_line(
                &mut out,
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                None,
            );
        }
    }
    let reason = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    chunk_line(&mut out, json!({}), Some(reason));
    out.extend_from_slice(b"data: [DONE]\n\n");
    Ok(out)
}

/// Its SSE framing, and the markup of the format its content is read as.
fn markers(_tools: &Tools) -> Vec<String> {
    let mut m: Vec<String> = Declared::MARKERS.iter().map(|s| s.to_string()).collect();
    m.extend(content_markup());
    m
}

/// What sets openai_sse apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "openai_sse";
    const SUMMARY: &'static str =
        "OpenAI Chat Completions SSE stream (delta.content, delta.tool_calls[])";
    const MARKERS: &'static [&'static str] = &["data: ", "[DONE]"];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(Parser::new(cfg));
}

/// The openai_sse format.
pub static FORMAT: Format = Format {
    markers,
    // The provider already parsed the model's output: a tool choice changed it upstream.
    guided: false,
    ..entry::format::<Declared>()
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::core::testkit;
    use crate::formats::run_chunks;
    use proptest::prelude::*;
    use serde_json::json;

    fn run_cfg(input: &[u8], config: &Config, cuts: &[usize]) -> ParseResult {
        testkit::fold_cut(&mut Parser::new(config.clone()), input, cuts)
    }

    /// Parses whole, byte by byte and at every single cut (in the first `limit` bytes), and
    /// checks the results agree.
    pub(crate) fn parse_all_cuts(input: &[u8], config: &Config, limit: usize) -> ParseResult {
        testkit::agree_under_cuts(&|b, c| run_cfg(b, config, c), input, limit)
    }

    fn parse(input: &str) -> ParseResult {
        parse_all_cuts(input.as_bytes(), &Config::default(), usize::MAX)
    }

    fn parse_with(input: &str, config: Config) -> ParseResult {
        parse_all_cuts(input.as_bytes(), &config, usize::MAX)
    }

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        let c = json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    }

    fn tc(entries: Value) -> String {
        chunk(json!({ "tool_calls": entries }), None)
    }

    fn fin(reason: &str) -> String {
        chunk(json!({}), Some(reason))
    }

    const DONE: &str = "data: [DONE]\n\n";

    fn warnings(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn kimi_reasoning_in_content_is_reasoning_and_refused_by_render() {
        let s = chunk(json!({"content": "<think>plan</th"}), None)
            + &chunk(json!({"content": "ink>shown"}), None)
            + &fin("stop")
            + DONE;
        let r = parse(&s);
        assert_eq!((r.reasoning_text(), r.text.as_str()), ("plan", "shown"));
        assert!(render("a <think> b", &[], &Tools::default()).is_err());
        let off = Config {
            kimi_markers: false,
            ..Config::default()
        };
        assert_eq!(parse_with(&s, off).text, "<think>plan</think>shown");
    }

    #[test]
    fn reasoning_fields_are_reasoning_once() {
        let s = chunk(json!({"reasoning_content": "a", "content": null}), None)
            + &chunk(json!({"reasoning": "b"}), None)
            + &chunk(json!({"reasoning_content": "c", "reasoning": "c"}), None)
            + &chunk(json!({"content": "x"}), None)
            + &fin("stop")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.reasoning_text(), "abc");
        assert_eq!(r.text, "x");
        assert!(r.errors.is_empty());
        let late = fin("stop") + &chunk(json!({"reasoning": "late"}), None) + DONE;
        assert_eq!(parse(&late).error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn mistral_content_parts_split_thinking_from_text() {
        let s = chunk(
            json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "t1"}]}]}),
            None,
        ) + &chunk(
            json!({"content": [{"type": "thinking", "thinking": "t2"}, {"type": "text", "text": "3"}, {"type": "image_url", "image_url": "x"}]}),
            None,
        ) + &chunk(json!({"content": "91"}), None)
            + &fin("stop")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.reasoning_text(), "t1t2");
        assert_eq!(r.text, "391");
        assert!(r.errors.is_empty());
    }

    fn one_call() -> String {
        [
            chunk(json!({"role": "assistant", "content": null}), None),
            tc(json!([{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}])),
            tc(json!([{"index": 0, "function": {"arguments": "{\"ci"}}])),
            tc(json!([{"index": 0, "function": {"arguments": "ty\":\"Paris\"}"}}])),
        ]
        .concat()
    }

    #[test]
    fn arguments_are_read_raw_and_unescaped_as_a_json_string() {
        // Escapes of every kind in one fragment, as a server sends a whole argument at once.
        let args = r#"{"s":"a\"b\\c\n\u00e9\ud83d\ude00/"}"#;
        let s = tc(json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": args}}]))
            + &fin("tool_calls")
            + DONE;
        assert!(s.contains(r#"\\u00e9"#), "escaped twice on the wire: {s}");
        let r = parse(&s);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(
            r.calls[0].arguments,
            json!({"s": "a\"b\\c\n\u{e9}\u{1f600}/"})
        );
        // `null` is no arguments; anything but a string is a malformed chunk, as before.
        let null =
            tc(json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": null}}]))
                + &fin("tool_calls")
                + DONE;
        assert!(
            parse(&null)
                .errors
                .iter()
                .all(|e| e.kind != ErrorKind::InvalidStream)
        );
        for bad in [json!(1), json!({"a": 1}), json!(["x"])] {
            let s =
                tc(json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": bad}}]));
            let r = parse(&s);
            assert!(
                r.errors.iter().any(|e| e.kind == ErrorKind::InvalidStream
                    && e.message.contains("malformed JSON payload")),
                "{bad}: {:?}",
                r.errors
            );
        }
        // A lone surrogate is refused as serde_json refuses it.
        let lone = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"\\ud83d\"}}]}}]}\n\n";
        assert!(
            parse(lone)
                .errors
                .iter()
                .any(|e| e.kind == ErrorKind::InvalidStream)
        );
    }

    #[test]
    fn a_call_is_started_by_id_and_name_and_ended_by_finish_reason() {
        let r = parse(&(one_call() + &fin("tool_calls") + DONE));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].id.as_deref(), Some("call_1"));
        assert_eq!(r.calls[0].name, "get_weather");
        assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn events_follow_the_delta_contract() {
        let mut p = Parser::new(Config::default());
        let s = one_call() + &fin("tool_calls") + DONE;
        let evs = run_chunks(&mut p, [s.as_bytes()]);
        let kinds: Vec<&str> = evs
            .iter()
            .map(|e| match e {
                Event::CallStart { .. } => "start",
                Event::ArgsDelta { .. } => "delta",
                Event::CallEnd { .. } => "end",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["start", "delta", "delta", "end"]);
    }

    #[test]
    fn content_is_text_and_refusal_is_text() {
        let s = chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            None,
        ) + &chunk(json!({"content": "Hé"}), None)
            + &chunk(json!({"content": "llo"}), None)
            + &chunk(json!({"refusal": " no"}), None)
            + &fin("stop")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.text, "Héllo no");
        assert!(r.errors.is_empty() && r.warnings.is_empty());
    }

    #[test]
    fn usage_chunk_and_empty_tool_calls_are_ignored() {
        let s = chunk(json!({"role": "assistant", "tool_calls": []}), None)
            + &chunk(json!({"content": "x"}), None)
            + &fin("stop")
            + "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n"
            + DONE;
        let r = parse(&s);
        assert_eq!(r.text, "x");
        assert!(r.errors.is_empty() && r.warnings.is_empty());
    }

    #[test]
    fn parallel_calls_on_two_indices() {
        let s = one_call()
            + &tc(
                json!([{"index": 1, "id": "call_2", "function": {"name": "b", "arguments": "{}"}}]),
            )
            + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[1].name, "b");
    }

    #[test]
    fn new_index_without_id_is_a_call_without_id() {
        let s = tc(json!([{"index": 0, "function": {"name": "a", "arguments": "{}"}}]))
            + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].id, None);
        assert_eq!(warnings(&r), ["allow_missing_id"]);
        let strict = Config {
            allow_missing_id: false,
            ..Config::default()
        };
        let r = parse_with(&s, strict);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn second_id_on_index_zero_splits_the_calls() {
        let s = tc(
            json!([{"index": 0, "id": "a1", "function": {"name": "ls", "arguments": "{\"path\":\"a\"}"}}]),
        ) + &tc(
            json!([{"index": 0, "id": "a2", "function": {"name": "ls", "arguments": "{\"path\":\".\"}"}}]),
        ) + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[1].id.as_deref(), Some("a2"));
        assert_eq!(r.calls[1].arguments, json!({"path": "."}));
        assert_eq!(warnings(&r), ["split_calls_on_new_id"]);
        let strict = Config {
            split_calls_on_new_id: false,
            ..Config::default()
        };
        let r = parse_with(&s, strict);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn second_id_while_the_first_call_is_incomplete_fails_the_first() {
        let s = tc(
            json!([{"index": 0, "id": "a1", "function": {"name": "ls", "arguments": "{\"path\":"}}]),
        ) + &tc(
            json!([{"index": 0, "id": "a2", "function": {"name": "ls", "arguments": "{}"}}]),
        ) + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].id.as_deref(), Some("a2"));
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidJson]);
    }

    #[test]
    fn arguments_before_the_name_are_buffered() {
        let s = tc(json!([{"index": 0, "id": "c", "function": {"arguments": "{\"x\":"}}]))
            + &tc(json!([{"index": 0, "function": {"name": "f", "arguments": "1}"}}]))
            + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls[0].arguments, json!({"x": 1}));
        assert_eq!(warnings(&r), ["buffer_args_before_name"]);
        let strict = Config {
            buffer_args_before_name: false,
            ..Config::default()
        };
        assert_eq!(
            parse_with(&s, strict).error_kinds(),
            [ErrorKind::InvalidStream]
        );
    }

    #[test]
    fn a_call_that_never_gets_a_name_is_missing_name() {
        let s = tc(json!([{"index": 0, "id": "c", "function": {"arguments": "{}"}}]))
            + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::MissingName]);
    }

    #[test]
    fn repeated_id_and_name_are_tolerated_once_warned() {
        let s =
            tc(json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{\"a\""}}]))
                + &tc(
                    json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": ":1"}}]),
                )
                + &tc(
                    json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "}"}}]),
                )
                + &fin("tool_calls")
                + DONE;
        let r = parse(&s);
        assert_eq!(r.calls[0].arguments, json!({"a": 1}));
        assert_eq!(warnings(&r), ["allow_repeated_header"]);
        let strict = Config {
            allow_repeated_header: false,
            ..Config::default()
        };
        let r = parse_with(&s, strict);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn a_renamed_call_fails() {
        let s = tc(json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{"}}]))
            + &tc(json!([{"index": 0, "function": {"name": "g", "arguments": "}"}}]))
            + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn same_id_on_two_indices_gives_two_calls() {
        let s = tc(json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]))
            + &tc(json!([{"index": 1, "id": "c", "function": {"name": "g", "arguments": "{}"}}]))
            + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls.len(), 2);
        assert_eq!(warnings(&r), ["allow_duplicate_id"]);
        let strict = Config {
            allow_duplicate_id: false,
            ..Config::default()
        };
        let r = parse_with(&s, strict);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn entries_without_index_join_the_latest_call_or_start_one_on_a_new_id() {
        let s = tc(json!([{"id": "c1", "function": {"name": "f", "arguments": "{\"a\":"}}]))
            + &tc(json!([{"function": {"arguments": "1}"}}]))
            + &tc(json!([{"id": "c2", "function": {"name": "g", "arguments": "{}"}}]))
            + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].arguments, json!({"a": 1}));
        assert_eq!(r.calls[1].name, "g");
        assert_eq!(warnings(&r), ["infer_missing_index"]);
        let strict = Config {
            infer_missing_index: false,
            ..Config::default()
        };
        assert!(parse_with(&s, strict).calls.is_empty());
    }

    #[test]
    fn empty_arguments_become_an_empty_object() {
        let s = tc(json!([{"index": 0, "id": "c", "function": {"name": "now", "arguments": ""}}]))
            + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls[0].arguments, json!({}));
        assert_eq!(warnings(&r), ["empty_arguments_as_object"]);
        let strict = Config {
            empty_arguments_as_object: false,
            ..Config::default()
        };
        assert_eq!(
            parse_with(&s, strict).error_kinds(),
            [ErrorKind::EmptyArguments]
        );
    }

    #[test]
    fn finish_reason_stop_ends_calls_with_a_warning() {
        let r = parse(&(one_call() + &fin("stop") + DONE));
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["end_calls_at_stop"]);
        let strict = Config {
            end_calls_at_stop: false,
            ..Config::default()
        };
        let r = parse_with(&(one_call() + &fin("stop") + DONE), strict);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn finish_reason_length_with_incomplete_arguments_is_unterminated() {
        let s = tc(
            json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{\"a\": \"par"}}]),
        ) + &fin("length")
            + DONE;
        let r = parse(&s);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
        // Complete arguments survive a length stop.
        let r = parse(&(one_call() + &fin("length") + DONE));
        assert_eq!(r.calls.len(), 1);
    }

    #[test]
    fn incomplete_arguments_at_tool_calls_are_invalid_json() {
        let s = tc(
            json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{\"a\": 1"}}]),
        ) + &fin("tool_calls")
            + DONE;
        assert_eq!(parse(&s).error_kinds(), [ErrorKind::InvalidJson]);
    }

    #[test]
    fn absent_finish_reason_ends_complete_calls_at_done() {
        let r = parse(&(one_call() + DONE));
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["end_calls_at_stream_end"]);
        let strict = Config {
            end_calls_at_stream_end: false,
            ..Config::default()
        };
        assert_eq!(
            parse_with(&(one_call() + DONE), strict).error_kinds(),
            [ErrorKind::Unterminated]
        );
    }

    #[test]
    fn a_stream_cut_off_without_finish_or_done_is_unterminated() {
        let r = parse(&one_call());
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
        let r = parse(&chunk(json!({"content": "hi"}), None));
        assert_eq!(r.text, "hi");
        assert_eq!(r.error_kinds(), [ErrorKind::Unterminated]);
    }

    #[test]
    fn a_missing_done_after_finish_reason_is_a_warning() {
        let r = parse(&(one_call() + &fin("tool_calls")));
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["allow_missing_done"]);
        let strict = Config {
            allow_missing_done: false,
            ..Config::default()
        };
        assert_eq!(
            parse_with(&(one_call() + &fin("tool_calls")), strict).error_kinds(),
            [ErrorKind::InvalidStream]
        );
    }

    #[test]
    fn a_last_event_without_blank_line_is_accepted_and_a_cut_payload_is_unterminated() {
        let s = one_call() + &fin("tool_calls") + "data: [DONE]";
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["accept_unterminated_event"]);
        let s = one_call() + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"He";
        let r = parse(&s);
        assert_eq!(
            r.error_kinds(),
            [ErrorKind::Unterminated, ErrorKind::Unterminated]
        );
    }

    #[test]
    fn other_choices_are_ignored_with_one_warning() {
        let s = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}},{\"index\":1,\"delta\":{\"content\":\"b\"}}]}\n\n".to_string()
            + "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"c\"}}]}\n\n"
            + &fin("stop")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.text, "a");
        assert_eq!(warnings(&r), ["ignore_extra_choices"]);
        let strict = Config {
            ignore_extra_choices: false,
            ..Config::default()
        };
        assert_eq!(
            parse_with(&s, strict).error_kinds(),
            [ErrorKind::InvalidStream, ErrorKind::InvalidStream]
        );
    }

    #[test]
    fn concatenated_objects_in_one_call_are_invalid_json() {
        let s = tc(
            json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{\"a\":1}{\"b\":2}"}}]),
        ) + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert!(r.calls.is_empty());
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidJson]);
    }

    #[test]
    fn arguments_that_are_not_an_object_are_invalid_json() {
        for a in ["[1]", "\"{\\\"a\\\":1}\"", "42"] {
            let s = tc(json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": a}}]))
                + &fin("tool_calls")
                + DONE;
            assert_eq!(parse(&s).error_kinds(), [ErrorKind::InvalidJson], "{a}");
        }
    }

    #[test]
    fn name_and_first_args_as_two_entries_in_one_chunk() {
        let s = tc(json!([
            {"index": 0, "id": "c", "function": {"name": "f"}},
            {"index": 0, "function": {"arguments": "{\"q\":true}"}}
        ])) + &fin("tool_calls")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.calls[0].arguments, json!({"q": true}));
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn malformed_payload_is_invalid_stream_naming_the_offset() {
        let s = chunk(json!({"content": "a"}), None)
            + "data: {\"choices\": [\n\n"
            + &fin("stop")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.text, "a");
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
        let at = chunk(json!({"content": "a"}), None).len();
        assert!(
            r.errors[0].message.contains(&format!("byte {at}")),
            "{}",
            r.errors[0].message
        );
    }

    #[test]
    fn error_objects_and_error_events_are_invalid_stream() {
        let s = chunk(json!({"content": "a"}), None)
            + "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n";
        let r = parse(&s);
        assert_eq!(
            r.error_kinds(),
            [ErrorKind::InvalidStream, ErrorKind::Unterminated]
        );
        assert!(r.errors[0].message.contains("overloaded"));
        let s = "event: error\ndata: boom\n\n".to_string() + &fin("stop") + DONE;
        assert_eq!(parse(&s).error_kinds(), [ErrorKind::InvalidStream]);
    }

    #[test]
    fn sse_errors_map_to_invalid_stream_and_limits() {
        let s = "garbage line\n\n".to_string() + &fin("stop") + DONE;
        assert_eq!(parse(&s).error_kinds(), [ErrorKind::InvalidStream]);
        let mut bytes = chunk(json!({"content": "a"}), None).into_bytes();
        bytes.extend_from_slice(b"data: \xff\n\n");
        bytes.extend_from_slice((fin("stop") + DONE).as_bytes());
        let r = parse_all_cuts(&bytes, &Config::default(), usize::MAX);
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
        let small = Config {
            sse: SseConfig {
                max_line_bytes: 90,
                ..SseConfig::default()
            },
            ..Config::default()
        };
        let s = chunk(json!({"content": "a".repeat(100)}), None) + &fin("stop") + DONE;
        assert_eq!(
            parse_with(&s, small).error_kinds(),
            [ErrorKind::LimitExceeded]
        );
    }

    #[test]
    fn oversized_arguments_are_limit_exceeded() {
        let cfg = Config {
            max_call_bytes: 10,
            ..Config::default()
        };
        let s = tc(
            json!([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{\"a\":\"0123456789\"}"}}]),
        ) + &fin("tool_calls")
            + DONE;
        assert_eq!(
            parse_with(&s, cfg).error_kinds(),
            [ErrorKind::LimitExceeded]
        );
    }

    #[test]
    fn crlf_line_ends_and_comments() {
        let s = (": ping\n\n".to_string() + &one_call() + &fin("tool_calls") + DONE)
            .replace('\n', "\r\n");
        let r = parse(&s);
        assert_eq!(r.calls.len(), 1);
        assert!(r.errors.is_empty());
    }

    #[test]
    fn data_after_done_and_deltas_after_finish_are_invalid_stream() {
        let r = parse(
            &(one_call() + &fin("tool_calls") + DONE + &chunk(json!({"content": "x"}), None)),
        );
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
        let r = parse(
            &(one_call() + &fin("tool_calls") + &chunk(json!({"content": "x"}), None) + DONE),
        );
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.error_kinds(), [ErrorKind::InvalidStream]);
    }

    const KIMI: &str = "<|tool_calls_section_begin|><|tool_call_begin|>functions.list_directory:0<|tool_call_argument_begin|>{\"path\": \"/x\"}<|tool_call_end|><|tool_calls_section_end|>";

    #[test]
    fn kimi_markers_in_content_are_calls_even_split_across_deltas() {
        let content = format!("Listing. {KIMI}");
        let s = pieces(&content, 5)
            .into_iter()
            .map(|p| chunk(json!({ "content": p }), None))
            .collect::<String>()
            + &fin("stop")
            + DONE;
        let r = parse(&s);
        assert_eq!(r.text, "Listing. ");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].name, "list_directory");
        assert_eq!(r.calls[0].id.as_deref(), Some("0"));
        assert_eq!(r.calls[0].arguments, json!({"path": "/x"}));
        let off = Config {
            kimi_markers: false,
            ..Config::default()
        };
        assert_eq!(parse_with(&s, off).text, content);
    }

    #[test]
    fn kimi_and_native_calls_share_one_index_sequence_in_start_order() {
        let s = chunk(json!({ "content": KIMI }), None) + &one_call() + &fin("tool_calls") + DONE;
        let mut p = Parser::new(Config::default());
        let evs = run_chunks(&mut p, [s.as_bytes()]);
        let starts: Vec<(usize, String)> = evs
            .iter()
            .filter_map(|e| match e {
                Event::CallStart { index, name, .. } => Some((*index, name.to_string())),
                _ => None,
            })
            .collect();
        assert_eq!(
            starts,
            [
                (0, "list_directory".to_string()),
                (1, "get_weather".to_string())
            ]
        );
        assert_eq!(parse(&s).calls.len(), 2);
    }

    #[test]
    fn attempt_completion_is_the_completion() {
        let s = tc(
            json!([{"index": 0, "id": "c", "function": {"name": "attempt_completion", "arguments": "{\"result\":\"Done: 3 files\"}"}}]),
        ) + &fin("tool_calls")
            + DONE;
        assert_eq!(parse(&s).completion.as_deref(), Some("Done: 3 files"));
    }

    #[test]
    fn sessions_restart_indices_after_finish() {
        let s = one_call() + &fin("tool_calls") + DONE;
        let mut p = Parser::new(Config::default());
        let mut turns = Vec::new();
        for _ in 0..2 {
            let mut evs = Vec::new();
            p.feed(s.as_bytes(), &mut evs);
            p.finish(&mut evs);
            turns.push(evs);
        }
        let starts: Vec<usize> = turns
            .iter()
            .flatten()
            .filter_map(|e| match e {
                Event::CallStart { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(starts, [0, 0]);
        for evs in &turns {
            assert_eq!(ParseResult::fold(evs).calls.len(), 1);
        }
    }

    #[test]
    fn render_refuses_a_kimi_marker_in_the_text() {
        let r = render("a<|tool_call_section_end|>", &[], &Tools::default());
        assert!(r.is_err());
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

    #[test]
    fn render_gives_a_gpt4o_shaped_stream_that_parses_back() {
        let calls = vec![
            ToolCall {
                name: "get_weather".into(),
                id: Some("call_1".into()),
                server: None,
                arguments: json!({"city": "Zürich", "days": 3}),
            },
            ToolCall {
                name: "now".into(),
                id: None,
                server: None,
                arguments: json!({}),
            },
        ];
        let bytes = render("Let me check – ok.", &calls, &Tools::default()).unwrap();
        let s = String::from_utf8(bytes.clone()).unwrap();
        assert!(s.starts_with("data: {"));
        assert!(s.ends_with("data: [DONE]\n\n"));
        assert!(s.contains("\"finish_reason\":\"tool_calls\""));
        let r = parse_all_cuts(&bytes, &Config::default(), usize::MAX);
        assert_eq!(r.text, "Let me check – ok.");
        assert_eq!(r.calls, calls);
        assert!(r.errors.is_empty());
        assert!(
            render(
                "x",
                &[ToolCall {
                    name: "f".into(),
                    id: None,
                    server: None,
                    arguments: json!([1])
                }],
                &Tools::default()
            )
            .is_err()
        );
    }

    /// The recorded gpt-4o streams (`shared/realdata/openai_sse`), if present.
    fn realdata_dir() -> Option<std::path::PathBuf> {
        let near =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/realdata/openai_sse");
        [near, "/work/shared/realdata/openai_sse".into()]
            .into_iter()
            .find(|p| p.is_dir())
    }

    #[test]
    fn real_gpt4o_streams_parse_without_errors_under_every_cut() {
        let Some(dir) = realdata_dir() else {
            eprintln!("skipped: shared/realdata/openai_sse not found");
            return;
        };
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "txt"))
            .collect();
        files.sort();
        assert_eq!(
            files.len(),
            12,
            "expected the 12 recorded streams in {dir:?}"
        );
        // Each file is parsed ~2050 times; files run on their own threads to keep this fast.
        let results: Vec<(std::path::PathBuf, ParseResult)> = std::thread::scope(|s| {
            let handles: Vec<_> = files
                .iter()
                .map(|f| {
                    s.spawn(move || {
                        let bytes = std::fs::read(f).unwrap();
                        (f.clone(), parse_all_cuts(&bytes, &Config::default(), 2048))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut calls = 0;
        let mut with_text = 0;
        for (f, r) in &results {
            assert!(r.errors.is_empty(), "{f:?}: {:?}", r.errors);
            for w in &r.warnings {
                assert_eq!(w.kind, "ignore_extra_choices", "{f:?}: {w:?}");
            }
            calls += r.calls.len();
            with_text += usize::from(!r.text.is_empty());
            for c in &r.calls {
                assert!(
                    c.id.as_deref().is_some_and(|i| i.starts_with("call_")),
                    "{f:?}"
                );
                assert!(
                    c.arguments.as_object().is_some_and(|o| !o.is_empty()),
                    "{f:?}"
                );
            }
        }
        // 4 streams with tool calls, one of them with two parallel calls; 8 with content only.
        assert_eq!(calls, 5);
        assert_eq!(with_text, 8);
    }

    testkit::stream_properties!(
        |b: &[u8], c: &[usize]| run_cfg(b, &Config::default(), c),
        |text: &str, calls: &[ToolCall]| render(text, calls, &Tools::default()),
        testkit::arb_call(
            proptest::option::of("call_[A-Za-z0-9]{1,8}"),
            "[a-zé\"\\\\ \n{}<|€😀]{0,8}"
        ),
        "[a-zé \n€😀<|]{0,24}"
    );
}
