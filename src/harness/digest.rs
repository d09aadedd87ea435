//! Lean replays of large cases: results compared by digest instead of kept whole.
//!
//! A folded call costs hundreds of bytes (its arguments are a JSON `Value`), so a transcript of
//! a million calls folds to a result several times its own size. For a large case the runner
//! keeps the whole input's result only as long as the roundtrip needs it, and folds every other
//! replay here: text, errors and warnings in full, each call reduced to two hashes the moment
//! its place in the result is settled. Peak memory is then the transcript, one full result and
//! its rendering, whatever the number of replays in flight.

use super::chunking::Cuts;
use super::invariants::{Compare, result_difference};
use crate::backends::TurnOutcome;
use crate::backends::builtin::catching;
use crate::event::{
    COMPLETION_TOOL, Event, FOLD_MAX_DEPTH, Folder, ParseResult, Sink, ToolCall, excerpt,
};
use crate::formats::core::read_back::BlockHasher;
use crate::formats::request::Request;
use crate::formats::{Format, OptionValues};
use crate::lexers::json::{JsonConfig, JsonErrorKind, JsonParser};
use crate::tools::Tools;
use serde_json::Value;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Cases of at least this many bytes are replayed lean (by the built-in parsers).
pub const LARGE_CASE_BYTES: usize = 4 << 20;

/// One call, reduced to what comparing it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallDigest {
    /// Equal for calls that are `==` (what `split_invariance` compares); 0 when `streamed`.
    pub exact: u64,
    /// Equal for calls whose arguments are `json_eq` (what `roundtrip` compares); 0 when
    /// `streamed`.
    pub loose: u64,
    /// The call's name, id and server with the text of its arguments: the fragments as the
    /// parser delivered them, or, for a call made from its folded value, the compact JSON of
    /// that value. Equal texts are equal arguments, so equal `text` means equal calls however
    /// they are compared (see [`CallDigest::same`]).
    pub text: u64,
    /// Only `text` is known: the arguments were hashed as they streamed by, never built into
    /// a value (a lean replay keeps no argument text, whatever its size).
    pub streamed: bool,
}

impl CallDigest {
    /// The digest of one call.
    pub fn of(c: &ToolCall) -> CallDigest {
        let digest = |loose: bool| {
            let mut h = DefaultHasher::new();
            c.name.hash(&mut h);
            c.id.hash(&mut h);
            c.server.hash(&mut h);
            hash_value(&c.arguments, loose, &mut h);
            h.finish()
        };
        let mut text = ArgsText::new(&c.name, c.id.as_deref(), c.server.as_deref());
        match &c.arguments {
            // What a parser that delivers this compact JSON would have streamed.
            args @ Value::Object(_) => {
                let _ = serde_json::to_writer(&mut text.blocks, args);
            }
            // Fragments that did not form an object: their text, apart from any object's.
            other => {
                text.domain = b'S';
                let _ = serde_json::to_writer(&mut text.blocks, other);
            }
        }
        CallDigest {
            exact: digest(false),
            loose: digest(true),
            text: text.finish(),
            streamed: false,
        }
    }

    /// Whether the two calls are the same as `==` compares (`loose`: as `json_eq` does);
    /// `None` when that cannot be told without the streamed call's arguments.
    pub fn same(&self, other: &CallDigest, loose: bool) -> Option<bool> {
        if self.text == other.text {
            return Some(true);
        }
        if self.streamed || other.streamed {
            return None;
        }
        Some(if loose {
            self.loose == other.loose
        } else {
            self.exact == other.exact
        })
    }
}

/// The hash of a call's name, id, server and argument text, fed in pieces (in blocks, so the
/// result does not depend on how the text was cut).
struct ArgsText {
    blocks: BlockHasher,
    /// `J` for argument text as it came (or an object's compact JSON), `S` for the JSON of a
    /// folded value that is not an object: the two never compare equal.
    domain: u8,
}

impl ArgsText {
    fn new(name: &str, id: Option<&str>, server: Option<&str>) -> ArgsText {
        let mut hasher = DefaultHasher::new();
        (name, id, server).hash(&mut hasher);
        ArgsText {
            blocks: BlockHasher::new(hasher),
            domain: b'J',
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.blocks.push(bytes);
    }

    fn finish(self) -> u64 {
        let mut hasher = self.blocks.into_hasher();
        hasher.write_u8(self.domain);
        hasher.finish()
    }
}

/// Hashes a JSON value so that equal values hash alike: object keys in sorted order (objects
/// compare without order); numbers by variant when `loose` is false (`1` and `1.0` differ, as
/// for `==`), by value when it is true (as for `json_eq`).
fn hash_value(v: &Value, loose: bool, h: &mut DefaultHasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => {
            2u8.hash(h);
            if let Some(i) = n.as_i128() {
                if loose && i.unsigned_abs() < (1 << 53) {
                    // Exactly representable: hashes like the equal float.
                    (i as f64).to_bits().hash(h);
                } else {
                    (n.is_f64(), i).hash(h);
                }
            } else if let Some(f) = n.as_f64() {
                // -0.0 == 0.0.
                let f = if f == 0.0 { 0.0 } else { f };
                if !loose {
                    true.hash(h);
                }
                f.to_bits().hash(h);
            }
        }
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(a) => {
            (4u8, a.len()).hash(h);
            for x in a {
                hash_value(x, loose, h);
            }
        }
        Value::Object(m) => {
            (5u8, m.len()).hash(h);
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (k, x) in entries {
                k.hash(h);
                hash_value(x, loose, h);
            }
        }
    }
}

/// One turn of a lean replay: the outcome with its calls taken out, and their digests.
#[derive(Debug, Clone)]
pub struct LeanTurn {
    /// Text, errors, warnings, completion, anomalies and the events hash; `result.calls` is
    /// empty.
    pub outcome: TurnOutcome,
    /// Every call of the result, in order.
    pub calls: Vec<CallDigest>,
    /// The length of the biggest single piece of the turn: its text, its reasoning, or one
    /// call's argument text (as delivered; 0 for calls known only by value).
    pub biggest_piece: usize,
}

impl LeanTurn {
    /// The lean form of a full turn.
    pub fn of(t: &TurnOutcome) -> LeanTurn {
        // Field by field: cloning the result and dropping its calls would copy them all.
        let r = &t.result;
        let outcome = TurnOutcome {
            result: ParseResult {
                text: r.text.clone(),
                reasoning: r.reasoning.clone(),
                calls: Vec::new(),
                warnings: r.warnings.clone(),
                errors: r.errors.clone(),
                completion: r.completion.clone(),
                order: r.order.clone(),
            },
            anomalies: t.anomalies.clone(),
            events_hash: t.events_hash,
            events_seen: t.events_seen,
        };
        let biggest_piece = r
            .text
            .len()
            .max(r.reasoning.as_ref().map_or(0, String::len));
        LeanTurn {
            outcome,
            calls: r.calls.iter().map(CallDigest::of).collect(),
            biggest_piece,
        }
    }

    /// Why `other` differs from this (the whole input's) turn, as `result_difference` says
    /// it: text, calls, error kinds, then warnings. Calls that cannot be told apart without
    /// their arguments count as different: [`LeanTurn::comparable`] says when to replay
    /// with values instead.
    pub fn difference(&self, other: &LeanTurn) -> Option<String> {
        let (w, o) = (&self.outcome.result, &other.outcome.result);
        if w.text != o.text {
            return result_difference(w, o, Compare::ALL);
        }
        if let Some(m) = calls_difference(&self.calls, &other.calls, false) {
            return Some(m);
        }
        result_difference(w, o, Compare::ALL)
    }

    /// Whether every call of `other` can be compared with this turn's by digest (`loose`:
    /// as `json_eq` compares): false when a streamed call's text differs from its
    /// counterpart's, so only its value can tell.
    pub fn comparable(&self, other: &LeanTurn, loose: bool) -> bool {
        self.calls.len() != other.calls.len()
            || self
                .calls
                .iter()
                .zip(&other.calls)
                .all(|(a, b)| a.same(b, loose).is_some())
    }

    /// Why a rendering parsed back (`got`) does not give this turn back, as
    /// `roundtrip_difference` says it.
    pub fn roundtrip_difference(&self, got: &LeanTurn, with_reasoning: bool) -> Option<String> {
        let (w, g) = (&self.outcome.result, &got.outcome.result);
        if let Some(e) = g.errors.first() {
            return Some(format!(
                "the rendered transcript does not parse: {}",
                e.message
            ));
        }
        if w.text != g.text {
            return Some(format!(
                "text {} came back as {}",
                excerpt(&w.text),
                excerpt(&g.text)
            ));
        }
        if with_reasoning && w.reasoning_text() != g.reasoning_text() {
            return Some(format!(
                "reasoning {} came back as {}",
                excerpt(w.reasoning_text()),
                excerpt(g.reasoning_text())
            ));
        }
        calls_difference(&self.calls, &got.calls, true)
            .map(|m| format!("{m} (after rendering and parsing back)"))
    }
}

fn calls_difference(whole: &[CallDigest], other: &[CallDigest], loose: bool) -> Option<String> {
    if whole.len() != other.len() {
        return Some(format!(
            "whole gives {} call(s), this chunking {}",
            whole.len(),
            other.len()
        ));
    }
    whole
        .iter()
        .zip(other)
        .position(|(a, b)| a.same(b, loose) != Some(true))
        .map(|i| format!("call {i} differs from the whole input's call {i}"))
}

/// The whole input's turns, as every other replay is compared with them: in full, or (for a
/// large case, once the roundtrip has rendered them) by digest.
#[derive(Debug)]
pub enum Baseline {
    /// The full outcomes.
    Full(Vec<TurnOutcome>),
    /// The digests.
    Lean(Vec<LeanTurn>),
}

impl Baseline {
    /// The full outcomes, while they are kept.
    pub fn full(&self) -> Option<&[TurnOutcome]> {
        match self {
            Baseline::Full(w) => Some(w),
            Baseline::Lean(_) => None,
        }
    }

    /// The full outcomes, while they are kept, to change.
    pub fn full_mut(&mut self) -> Option<&mut [TurnOutcome]> {
        match self {
            Baseline::Full(w) => Some(w),
            Baseline::Lean(_) => None,
        }
    }

    /// The digest form, which drops the full results.
    pub fn into_lean(self) -> Baseline {
        match self {
            Baseline::Full(w) => Baseline::Lean(w.iter().map(LeanTurn::of).collect()),
            lean => lean,
        }
    }

    /// The events hash of turn `t`.
    pub fn events_hash(&self, t: usize) -> Option<u64> {
        match self {
            Baseline::Full(w) => w.get(t).map(|x| x.events_hash),
            Baseline::Lean(w) => w.get(t).map(|x| x.outcome.events_hash),
        }
    }

    /// The number of turns.
    pub fn len(&self) -> usize {
        match self {
            Baseline::Full(w) => w.len(),
            Baseline::Lean(w) => w.len(),
        }
    }

    /// True when there is no turn.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A replayed turn as the judge sees it: full or lean.
pub trait Judged {
    /// The outcome (for a lean turn, without its calls).
    fn outcome(&self) -> &TurnOutcome;
    /// Why this turn differs from turn `t` of the whole input (`data`), if it does, as `cmp`
    /// compares (lean turns are conform's own parsers, held to everything).
    fn differs_from(&self, whole: &Baseline, t: usize, cmp: Compare, data: &[u8])
    -> Option<String>;
}

impl Judged for TurnOutcome {
    fn outcome(&self) -> &TurnOutcome {
        self
    }
    fn differs_from(
        &self,
        whole: &Baseline,
        t: usize,
        cmp: Compare,
        data: &[u8],
    ) -> Option<String> {
        match whole {
            Baseline::Full(w) => result_difference(
                &cmp.view(&w.get(t)?.result, data).0,
                &cmp.view(&self.result, data).0,
                cmp,
            ),
            Baseline::Lean(w) => w.get(t)?.difference(&LeanTurn::of(self)),
        }
    }
}

impl Judged for LeanTurn {
    fn outcome(&self) -> &TurnOutcome {
        &self.outcome
    }
    fn differs_from(&self, whole: &Baseline, t: usize, _: Compare, _: &[u8]) -> Option<String> {
        match whole {
            Baseline::Full(w) => LeanTurn::of(w.get(t)?).difference(self),
            Baseline::Lean(w) => w.get(t)?.difference(self),
        }
    }
}

/// What a lean replay produced.
#[derive(Debug, Clone)]
pub enum LeanOutcome {
    /// The parser ran to the end of every turn.
    Done(Vec<LeanTurn>),
    /// The parser panicked; the payload's message.
    Panicked(String),
}

/// One open call's arguments as they stream by: their text hashed, and (when the call is not
/// kept) checked by a JSON reader that builds nothing, so that no replay holds the text.
struct OpenArgs {
    text: ArgsText,
    /// Bytes of argument text so far.
    len: usize,
    /// The reader, when the call's value is not built (a lean replay).
    check: Option<JsonParser>,
    /// The first byte that is not whitespace, to tell an object from other JSON.
    first: Option<u8>,
    /// The first characters, for the message when the fragments are not an object.
    head: String,
}

/// Characters of the arguments an anomaly quotes (`excerpt` shows 80 and marks more).
const HEAD_CHARS: usize = 81;

impl OpenArgs {
    fn new(name: &str, id: Option<&str>, server: Option<&str>, check: bool) -> OpenArgs {
        OpenArgs {
            text: ArgsText::new(name, id, server),
            len: 0,
            check: check.then(|| {
                JsonParser::new(JsonConfig {
                    max_depth: FOLD_MAX_DEPTH,
                    stop_byte: None,
                    build_value: false,
                })
            }),
            first: None,
            head: String::new(),
        }
    }

    fn push(&mut self, json: &str) {
        self.len += json.len();
        self.text.push(json.as_bytes());
        if let Some(p) = self.check.as_mut() {
            if self.first.is_none() {
                self.first = json.bytes().find(|b| !b.is_ascii_whitespace());
            }
            let room = HEAD_CHARS - self.head.chars().count().min(HEAD_CHARS);
            self.head.extend(json.chars().take(room));
            // Errors are sticky: the verdict is read at the end.
            let _ = p.feed(json);
        }
    }
}

/// Folds events as the parser emits them, with no event list in between: a single feed of a
/// million-call transcript would otherwise hold all its events at once. Text is merged exactly
/// as a `Vec<Event>` sink merges it within one feed, so the events hash equals a full replay's.
///
/// Each call's arguments are hashed as they stream by. A kept call (`keep_calls`) is also
/// folded into its value; any other is only checked, by a JSON reader that builds nothing, and
/// digested by its text alone (`CallDigest::streamed`), so a replay of a 10 MB argument holds
/// none of it. The contract's checks of a streamed call are the fold's: the same anomalies,
/// in the same order.
struct FoldSink {
    folder: Folder,
    hasher: DefaultHasher,
    /// The last event, when it is a `Text` that later text may still merge into.
    pending: Option<String>,
    /// Digests of the settled calls, and the calls themselves when kept.
    calls: Vec<CallDigest>,
    kept: Option<Vec<ToolCall>>,
    completion: Option<std::sync::Arc<str>>,
    /// The open calls' arguments, by index.
    open: std::collections::BTreeMap<usize, OpenArgs>,
    /// Ended calls' text digests (and whether streamed) by index, until they settle.
    ended: std::collections::BTreeMap<usize, (u64, bool)>,
    /// Calls are streamed through rather than folded into values.
    stream: bool,
    /// A streamed replay builds the completion call's value, to read its `result` (the
    /// caller reads `result.completion`).
    completion_read: bool,
    /// The longest argument text of a call so far.
    longest_args: usize,
}

/// What a lean replay keeps of its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every call, folded into its value (the whole input, for the roundtrip's rendering).
    Keep,
    /// Each call's value, digested and dropped once settled.
    Value,
    /// Each call's text, hashed as it streams by; no value is built, but for a completion
    /// call, whose `result` is the turn's completion.
    Stream,
    /// [`Mode::Stream`] for a caller that never reads `result.completion` (the roundtrip's
    /// replays of the rendering, the determinism replay, chunkings of a case that expects no
    /// completion): the completion call is streamed too, so a 10 MB `result` is not held as
    /// text, then as a value, then as the completion (`docs/performance.md`, h/mem6).
    StreamAll,
}

impl FoldSink {
    fn new(mode: Mode) -> FoldSink {
        FoldSink {
            folder: Folder::default(),
            hasher: DefaultHasher::new(),
            pending: None,
            calls: Vec::new(),
            kept: (mode == Mode::Keep).then(Vec::new),
            stream: matches!(mode, Mode::Stream | Mode::StreamAll),
            completion_read: mode != Mode::StreamAll,
            longest_args: 0,
            completion: None,
            open: Default::default(),
            ended: Default::default(),
        }
    }

    /// An `ArgsDelta`, given by reference: a 10 MB fragment is hashed and checked where it
    /// lies, never copied into an event.
    fn args(&mut self, index: usize, json: &str) {
        if !self.folder.is_open(index) {
            return self.folder.push_args(index, json);
        }
        let args = self.open.get_mut(&index);
        let streamed = args.as_ref().is_some_and(|a| a.check.is_some());
        if let Some(a) = args {
            a.push(json);
        }
        if !streamed {
            self.folder.push_args(index, json);
        }
    }

    fn take(&mut self, ev: Event) {
        ev.hash(&mut self.hasher);
        match &ev {
            Event::CallStart {
                index,
                id,
                name,
                server,
            } => {
                // A completion's result is read from its value: built when it is read.
                let check = self.stream && !(self.completion_read && name == COMPLETION_TOOL);
                self.folder.push(&ev);
                self.open.insert(
                    *index,
                    OpenArgs::new(name, id.as_deref(), server.as_deref(), check),
                );
            }
            Event::ArgsDelta { index, json } => self.args(*index, json),
            Event::CallEnd { index } if self.folder.is_open(*index) => {
                if let Some(a) = self.open.get(index) {
                    self.longest_args = self.longest_args.max(a.len);
                }
                match self.open.remove(index) {
                    Some(a) if a.check.is_some() => self.end_streamed(*index, a),
                    Some(a) => {
                        self.ended.insert(*index, (a.text.finish(), false));
                        self.folder.push(&ev);
                    }
                    None => self.folder.push(&ev),
                }
                let settled = self.folder.take_settled_indexed();
                self.settle(settled);
            }
            _ => self.folder.push(&ev),
        }
    }

    /// Ends a streamed call as the fold would end it, without its text: the fold gets an
    /// empty object, and the anomaly it would have noted is noted in its place.
    fn end_streamed(&mut self, index: usize, a: OpenArgs) {
        let OpenArgs {
            text,
            check,
            first,
            head,
            ..
        } = a;
        let verdict = check.map(|mut p| p.finish().map(drop));
        let object = first == Some(b'{');
        match verdict {
            Some(Ok(())) if object => {}
            // Deeper than the fold reads: its text stays, without a breach (as `Folder`).
            Some(Err(e)) if e.kind == JsonErrorKind::DepthLimit => {}
            _ => {
                if let Some(name) = self.folder.open_name(index) {
                    let msg = format!(
                        "call {index} ({name}) ended but its fragments do not form a JSON object: {}",
                        excerpt(&head)
                    );
                    self.folder.anomalies.push(msg);
                }
            }
        }
        self.ended.insert(index, (text.finish(), true));
        self.folder.push(&Event::ArgsDelta {
            index,
            json: "{}".into(),
        });
        self.folder.push(&Event::CallEnd { index });
    }

    /// Ends a feed: the pending text is an event of its own from here on.
    fn flush(&mut self) {
        if let Some(text) = self.pending.take() {
            self.take(Event::text(text));
        }
    }

    fn settle(&mut self, settled: Vec<(usize, ToolCall)>) {
        for (index, call) in settled {
            let (text, streamed) = self.ended.remove(&index).unwrap_or_default();
            if call.name == COMPLETION_TOOL {
                // As `completion_of`: the last completion call decides, with or without a
                // result.
                self.completion = call
                    .arguments
                    .get("result")
                    .and_then(Value::as_str)
                    .map(Into::into);
            }
            self.calls.push(if streamed {
                CallDigest {
                    exact: 0,
                    loose: 0,
                    text,
                    streamed: true,
                }
            } else {
                CallDigest {
                    text,
                    ..CallDigest::of(&call)
                }
            });
            if let Some(k) = self.kept.as_mut() {
                k.push(call);
            }
        }
    }

    fn finish(mut self) -> (LeanTurn, Option<Vec<ToolCall>>) {
        self.flush();
        let rest = self.folder.take_ended_indexed();
        self.settle(rest);
        let folder = std::mem::take(&mut self.folder);
        let (mut result, anomalies) = folder.finish_with_anomalies();
        // As for every built-in replay: no reasoning is empty reasoning.
        result.reasoning.get_or_insert_with(String::new);
        result.completion = self.completion;
        let biggest_piece = self
            .longest_args
            .max(result.text.len())
            .max(result.reasoning.as_ref().map_or(0, String::len));
        let turn = LeanTurn {
            outcome: TurnOutcome {
                result,
                anomalies,
                events_hash: self.hasher.finish(),
                events_seen: true,
            },
            calls: self.calls,
            biggest_piece,
        };
        (turn, self.kept)
    }
}

impl Sink for FoldSink {
    fn push(&mut self, event: Event) {
        self.flush();
        match event {
            Event::Text { text } => self.pending = Some(text.into()),
            ev => self.take(ev),
        }
    }

    fn args_delta(&mut self, index: usize, json: &str) {
        self.flush();
        // Hashed as `Event::ArgsDelta { index, json }` hashes (a test checks it).
        args_delta_discriminant().hash(&mut self.hasher);
        index.hash(&mut self.hasher);
        json.hash(&mut self.hasher);
        self.args(index, json);
    }

    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.pending.as_mut() {
            Some(p) => p.push_str(text),
            None => self.pending = Some(text.to_string()),
        }
    }
}

/// The discriminant of `Event::ArgsDelta`, which its derived `Hash` hashes first.
fn args_delta_discriminant() -> std::mem::Discriminant<Event> {
    static D: std::sync::OnceLock<std::mem::Discriminant<Event>> = std::sync::OnceLock::new();
    *D.get_or_init(|| {
        std::mem::discriminant(&Event::ArgsDelta {
            index: 0,
            json: Default::default(),
        })
    })
}

/// A lean turn, with its calls when they were kept.
pub type KeptTurn = (LeanTurn, Option<Vec<ToolCall>>);

/// Feeds every turn, cut as given (a missing entry means whole), to one built-in parser and
/// folds each event as it comes. Calls are digested as they settle; with `keep_calls` they are
/// also kept, in the order of the result (for the rendering of the roundtrip), and otherwise
/// streamed through (`CallDigest::streamed`). The events hash is the one a full replay
/// computes, so the two compare for the determinism check.
pub fn replay_keeping(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
    mode: Mode,
) -> Result<Vec<KeptTurn>, String> {
    let run = || {
        let mut parser = match crate::formats::modes::parser(format, tools, options, request) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let whole = Cuts::At(Vec::new());
        turns
            .iter()
            .enumerate()
            .map(|(t, data)| {
                let mut sink = FoldSink::new(mode);
                for piece in cuts.get(t).unwrap_or(&whole).pieces(data) {
                    parser.feed(piece, &mut sink);
                    sink.flush();
                }
                parser.finish(&mut sink);
                sink.finish()
            })
            .collect::<Vec<_>>()
    };
    catching(run)
}

/// A lean replay: [`replay_keeping`] without the calls, their arguments streamed through.
/// `completion`: the caller reads each turn's `result.completion` (else it is `None`).
pub fn replay(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
    completion: bool,
) -> LeanOutcome {
    let mode = if completion {
        Mode::Stream
    } else {
        Mode::StreamAll
    };
    match replay_keeping(format, tools, options, request, turns, cuts, mode) {
        Ok(turns) => LeanOutcome::Done(turns.into_iter().map(|(t, _)| t).collect()),
        Err(msg) => LeanOutcome::Panicked(msg),
    }
}

/// A lean replay whose calls are folded into values and digested by them: for a replay whose
/// streamed calls cannot be compared by text alone ([`LeanTurn::comparable`]). It holds one
/// call's arguments at a time.
pub fn replay_valued(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
) -> LeanOutcome {
    match replay_keeping(format, tools, options, request, turns, cuts, Mode::Value) {
        Ok(turns) => LeanOutcome::Done(turns.into_iter().map(|(t, _)| t).collect()),
        Err(msg) => LeanOutcome::Panicked(msg),
    }
}

/// A full replay of a large case that holds no event list: the turns with their calls, and
/// their digests by the text the parser delivered (the baseline lean replays compare with).
pub fn replay_full(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
) -> Result<(Vec<TurnOutcome>, Vec<LeanTurn>), String> {
    Ok(
        replay_keeping(format, tools, options, request, turns, cuts, Mode::Keep)?
            .into_iter()
            .map(|(t, calls)| {
                let mut outcome = t.outcome.clone();
                outcome.result.calls = calls.unwrap_or_default();
                (outcome, t)
            })
            .unzip(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::{self as replay, builtin::replay as builtin_replay};
    use serde_json::json;

    fn call(args: Value) -> ToolCall {
        ToolCall {
            name: "f".into(),
            id: Some("1".into()),
            server: None,
            arguments: args,
        }
    }

    #[test]
    fn digests_follow_equality_and_json_eq() {
        let d = |v| CallDigest::of(&call(v));
        let (x, y) = (
            d(json!({"a": 1, "b": [true]})),
            d(json!({"b": [true], "a": 1})),
        );
        assert_eq!((x.exact, x.loose), (y.exact, y.loose));
        assert_eq!(x.same(&y, false), Some(true));
        let (int, float) = (d(json!({"a": 1})), d(json!({"a": 1.0})));
        assert_ne!(int.exact, float.exact, "1 != 1.0 for ==");
        assert_eq!(int.loose, float.loose, "1 json_eq 1.0");
        assert_ne!(d(json!({"a": 1})).loose, d(json!({"a": 2})).loose);
        assert_ne!(d(json!({"a": "1"})).exact, d(json!({"a": 1})).exact);
    }

    #[test]
    fn a_lean_replay_agrees_with_a_full_one() {
        let f = crate::formats::by_id("kimi_k2").unwrap();
        let mut t = String::from("hi <|tool_calls_section_begin|>");
        for i in 0..50 {
            t.push_str(&format!(
                "<|tool_call_begin|>functions.f:{i}<|tool_call_argument_begin|>{{\"a\":{i}}}<|tool_call_end|>"
            ));
        }
        t.push_str("<|tool_calls_section_end|>");
        let turns = vec![t.into_bytes()];
        let tools = Tools::default();
        for cuts in [Cuts::At(vec![]), Cuts::EveryByte, Cuts::At(vec![40, 41])] {
            let full = match builtin_replay(
                f,
                &tools,
                &OptionValues::new(),
                &Request::default(),
                &turns,
                std::slice::from_ref(&cuts),
            ) {
                replay::Outcome::Done(t) => t,
                _ => unreachable!(),
            };
            let LeanOutcome::Done(lean) = replay(
                f,
                &tools,
                &OptionValues::new(),
                &Request::default(),
                &turns,
                std::slice::from_ref(&cuts),
                true,
            ) else {
                unreachable!()
            };
            let want = LeanTurn::of(&full[0]);
            assert_eq!(lean[0].calls.len(), 50);
            assert!(lean[0].calls.iter().all(|c| c.streamed));
            assert!(want.comparable(&lean[0], false));
            assert_eq!(lean[0].outcome.events_hash, full[0].events_hash);
            assert_eq!(lean[0].outcome.result, want.outcome.result);
            assert_eq!(lean[0].outcome.anomalies, full[0].anomalies);
            assert_eq!(want.difference(&lean[0]), None);
            let LeanOutcome::Done(valued) = replay_valued(
                f,
                &tools,
                &OptionValues::new(),
                &Request::default(),
                &turns,
                std::slice::from_ref(&cuts),
            ) else {
                unreachable!()
            };
            let values = |t: &LeanTurn| {
                t.calls
                    .iter()
                    .map(|c| (c.exact, c.loose))
                    .collect::<Vec<_>>()
            };
            assert_eq!(values(&valued[0]), values(&want));
            let (kept, digested) = replay_full(
                f,
                &tools,
                &OptionValues::new(),
                &Request::default(),
                &turns,
                std::slice::from_ref(&cuts),
            )
            .unwrap();
            assert_eq!(kept[0].result, full[0].result);
            assert_eq!(kept[0].events_hash, full[0].events_hash);
            assert_eq!(digested[0].difference(&lean[0]), None);
        }
        // A changed call is found by its index.
        let mut other = match builtin_replay(
            f,
            &tools,
            &OptionValues::new(),
            &Request::default(),
            &turns,
            &[],
        ) {
            replay::Outcome::Done(t) => t,
            _ => unreachable!(),
        };
        let base = LeanTurn::of(&other[0]);
        other[0].result.calls[7].arguments = json!({"a": 8});
        let m = base.difference(&LeanTurn::of(&other[0])).unwrap();
        assert!(m.contains("call 7"), "{m}");
        other[0].result.calls.pop();
        let m = base.difference(&LeanTurn::of(&other[0])).unwrap();
        assert!(m.contains("50 call(s), this chunking 49"), "{m}");
    }

    #[test]
    fn a_completion_is_held_once_by_the_whole_input_its_digest_and_the_report() {
        // A large completion's `result` is as big as the transcript: the kept whole input,
        // its digest (`replay_full`, `LeanTurn::of`) and the case report share one copy.
        let big = "done ".repeat(1000);
        let args = serde_json::to_string(&json!({ "result": big })).unwrap();
        let mut sink = FoldSink::new(Mode::Keep);
        for e in [
            Event::CallStart {
                index: 0,
                id: None,
                name: COMPLETION_TOOL.into(),
                server: None,
            },
            Event::ArgsDelta {
                index: 0,
                json: args.into(),
            },
            Event::CallEnd { index: 0 },
        ] {
            sink.push(e);
        }
        let (lean, kept) = sink.finish();
        assert_eq!(kept.map(|k| k.len()), Some(1));
        let digest = LeanTurn::of(&lean.outcome);
        let (a, b) = (
            lean.outcome.result.completion,
            digest.outcome.result.completion,
        );
        assert_eq!(a.as_deref(), Some(&big[..]));
        assert!(std::sync::Arc::ptr_eq(&a.unwrap(), &b.unwrap()));
    }

    #[test]
    fn a_completion_is_built_only_for_a_caller_that_reads_it() {
        // A replay whose completion is not read streams the completion call as any other:
        // no 10 MB `result` held as text, value and completion. Everything else it gives is
        // what the replay that builds it gives, and its digest still compares.
        let big = "done ".repeat(1000);
        let args = serde_json::to_string(&json!({ "result": big })).unwrap();
        let mut events = call_events(&[&args[..7], &args[7..]]);
        if let Event::CallStart { name, .. } = &mut events[0] {
            *name = COMPLETION_TOOL.into();
        }
        let read = fold(Mode::Stream, &events);
        let unread = fold(Mode::StreamAll, &events);
        assert_eq!(read.outcome.result.completion.as_deref(), Some(&big[..]));
        assert_eq!(unread.outcome.result.completion, None);
        assert!(!read.calls[0].streamed && unread.calls[0].streamed);
        assert_eq!(read.calls[0].text, unread.calls[0].text);
        assert_eq!(read.outcome.events_hash, unread.outcome.events_hash);
        assert_eq!(read.outcome.anomalies, unread.outcome.anomalies);
        let mut without = read.outcome.result.clone();
        without.completion = None;
        assert_eq!(without, unread.outcome.result);
        assert!(read.comparable(&unread, false) && read.difference(&unread).is_none());
        // Fragments that are not an object are noted as the fold notes them.
        let bad = fold(Mode::StreamAll, &{
            let mut e = call_events(&["[1]"]);
            if let Event::CallStart { name, .. } = &mut e[0] {
                *name = COMPLETION_TOOL.into();
            }
            e
        });
        assert_eq!(
            bad.outcome.anomalies.len(),
            1,
            "{:?}",
            bad.outcome.anomalies
        );
    }

    /// Folds `events` in `mode`: the turn, as a lean replay would give it.
    fn fold(mode: Mode, events: &[Event]) -> LeanTurn {
        let mut sink = FoldSink::new(mode);
        for e in events {
            sink.push(e.clone());
        }
        sink.finish().0
    }

    fn call_events(args: &[&str]) -> Vec<Event> {
        let mut v = vec![Event::CallStart {
            index: 0,
            id: Some("7".into()),
            name: "f".into(),
            server: None,
        }];
        v.extend(args.iter().map(|a| Event::ArgsDelta {
            index: 0,
            json: (*a).into(),
        }));
        v.push(Event::CallEnd { index: 0 });
        v
    }

    #[test]
    fn streamed_calls_note_what_the_fold_notes_and_compare_by_their_text() {
        let deep = format!("{}1{}", "[".repeat(600), "]".repeat(600));
        let deep_object = format!("{{\"a\":{deep}}}");
        let long_bad = format!("{{\"a\": \"{}", "x".repeat(200));
        for args in [
            vec!["{\"a\":", " [1, 2]}"],
            vec!["{\"a\":"],
            vec!["[1]"],
            vec![""],
            vec![long_bad.as_str(), "\" x"],
            vec![deep_object.as_str()],
        ] {
            let events = call_events(&args);
            let mut folder = Folder::default();
            for e in &events {
                folder.push(e);
            }
            let (result, anomalies) = folder.finish_with_anomalies();
            let streamed = fold(Mode::Stream, &events);
            let kept = fold(Mode::Keep, &events);
            assert_eq!(streamed.outcome.anomalies, anomalies, "{args:?}");
            assert_eq!(kept.outcome.anomalies, anomalies, "{args:?}");
            assert!(streamed.calls[0].streamed);
            // The whole input's digest (kept) and a streamed replay's agree by text alone.
            assert_eq!(kept.calls[0].same(&streamed.calls[0], false), Some(true));
            assert_eq!(kept.difference(&streamed), None);
            let _ = result;
        }
        // Other fragments of the same value: text differs, only the value can tell.
        let a = fold(Mode::Keep, &call_events(&["{\"a\": 1}"]));
        let b = fold(Mode::Stream, &call_events(&["{\"a\":1}"]));
        assert!(!a.comparable(&b, false));
        let c = fold(Mode::Value, &call_events(&["{\"a\":1}"]));
        assert!(a.comparable(&c, false));
        assert_eq!(a.difference(&c), None);
        // A different value whose text differs is different once valued.
        let d = fold(Mode::Value, &call_events(&["{\"a\":2}"]));
        assert!(a.difference(&d).is_some());
    }

    #[test]
    fn argument_text_hashes_alike_however_it_is_cut() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let whole = fold(Mode::Stream, &call_events(&[&text]));
        for n in [1, 3, 63, 64, 65, 200] {
            let pieces: Vec<&str> = text
                .as_bytes()
                .chunks(n)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            let cut = fold(Mode::Stream, &call_events(&pieces));
            assert_eq!(cut.calls[0].text, whole.calls[0].text, "{n}");
        }
        // A value that is not an object (the fold's string of bad fragments) never matches
        // the text of an object.
        let bad = CallDigest::of(&call(Value::String("{}".into())));
        let good = CallDigest::of(&call(json!({})));
        assert_ne!(bad.text, good.text);
    }

    #[test]
    fn a_fragment_given_by_reference_hashes_as_its_event() {
        for json in ["", "{\"a\":", &"x".repeat(100)] {
            let mut by_event = FoldSink::new(Mode::Stream);
            by_event.push(Event::ArgsDelta {
                index: 3,
                json: json.into(),
            });
            let mut by_ref = FoldSink::new(Mode::Stream);
            by_ref.args_delta(3, json);
            assert_eq!(by_event.hasher.finish(), by_ref.hasher.finish());
            assert_eq!(by_event.folder.anomalies, by_ref.folder.anomalies);
        }
    }
}
