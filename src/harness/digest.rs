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
use crate::event::{COMPLETION_TOOL, Event, Folder, ParseResult, Sink, ToolCall, excerpt};
use crate::formats::request::Request;
use crate::formats::{Format, OptionValues};
use crate::tools::Tools;
use serde_json::Value;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Cases of at least this many bytes are replayed lean (by the built-in parsers).
pub const LARGE_CASE_BYTES: usize = 4 << 20;

/// One call, reduced to what comparing it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallDigest {
    /// Equal for calls that are `==` (what `split_invariance` compares).
    pub exact: u64,
    /// Equal for calls whose arguments are `json_eq` (what `roundtrip` compares).
    pub loose: u64,
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
        CallDigest {
            exact: digest(false),
            loose: digest(true),
        }
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
        LeanTurn {
            outcome,
            calls: r.calls.iter().map(CallDigest::of).collect(),
        }
    }

    /// Why `other` differs from this (the whole input's) turn, as `result_difference` says
    /// it: text, calls, error kinds, then warnings.
    pub fn difference(&self, other: &LeanTurn) -> Option<String> {
        let (w, o) = (&self.outcome.result, &other.outcome.result);
        if w.text != o.text {
            return result_difference(w, o, Compare::ALL);
        }
        if let Some(m) = calls_difference(&self.calls, &other.calls, |c| c.exact) {
            return Some(m);
        }
        result_difference(w, o, Compare::ALL)
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
        calls_difference(&self.calls, &got.calls, |c| c.loose)
            .map(|m| format!("{m} (after rendering and parsing back)"))
    }
}

fn calls_difference(
    whole: &[CallDigest],
    other: &[CallDigest],
    key: impl Fn(&CallDigest) -> u64,
) -> Option<String> {
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
        .position(|(a, b)| key(a) != key(b))
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

/// Folds events as the parser emits them, with no event list in between: a single feed of a
/// million-call transcript would otherwise hold all its events at once. Text is merged exactly
/// as a `Vec<Event>` sink merges it within one feed, so the events hash equals a full replay's.
struct FoldSink {
    folder: Folder,
    hasher: DefaultHasher,
    /// The last event, when it is a `Text` that later text may still merge into.
    pending: Option<String>,
    /// Digests of the settled calls, and the calls themselves when kept.
    calls: Vec<CallDigest>,
    kept: Option<Vec<ToolCall>>,
    completion: Option<String>,
}

impl FoldSink {
    fn new(keep_calls: bool) -> FoldSink {
        FoldSink {
            folder: Folder::default(),
            hasher: DefaultHasher::new(),
            pending: None,
            calls: Vec::new(),
            kept: keep_calls.then(Vec::new),
            completion: None,
        }
    }

    fn take(&mut self, ev: Event) {
        ev.hash(&mut self.hasher);
        self.folder.push(&ev);
        if matches!(ev, Event::CallEnd { .. }) {
            let settled = self.folder.take_settled();
            self.settle(settled);
        }
    }

    /// Ends a feed: the pending text is an event of its own from here on.
    fn flush(&mut self) {
        if let Some(text) = self.pending.take() {
            self.take(Event::text(text));
        }
    }

    fn settle(&mut self, settled: Vec<ToolCall>) {
        for call in settled {
            if call.name == COMPLETION_TOOL {
                // As `completion_of`: the last completion call decides, with or without a
                // result.
                self.completion = call
                    .arguments
                    .get("result")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            self.calls.push(CallDigest::of(&call));
            if let Some(k) = self.kept.as_mut() {
                k.push(call);
            }
        }
    }

    fn finish(mut self) -> (LeanTurn, Option<Vec<ToolCall>>) {
        self.flush();
        let (mut result, anomalies) = self.folder.finish_with_anomalies();
        // As for every built-in replay: no reasoning is empty reasoning.
        result.reasoning.get_or_insert_with(String::new);
        let rest = std::mem::take(&mut result.calls);
        self.folder = Folder::default();
        self.settle(rest);
        result.completion = self.completion;
        let turn = LeanTurn {
            outcome: TurnOutcome {
                result,
                anomalies,
                events_hash: self.hasher.finish(),
                events_seen: true,
            },
            calls: self.calls,
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

/// A lean turn, with its calls when they were kept.
pub type KeptTurn = (LeanTurn, Option<Vec<ToolCall>>);

/// Feeds every turn, cut as given (a missing entry means whole), to one built-in parser and
/// folds each event as it comes. Calls are digested as they settle; with `keep_calls` they are
/// also kept, in the order of the result (for the rendering of the roundtrip). The events hash
/// is the one a full replay computes, so the two compare for the determinism check.
pub fn replay_keeping(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
    keep_calls: bool,
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
                let mut sink = FoldSink::new(keep_calls);
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

/// A lean replay: [`replay_keeping`] without the calls.
pub fn replay(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
) -> LeanOutcome {
    match replay_keeping(format, tools, options, request, turns, cuts, false) {
        Ok(turns) => LeanOutcome::Done(turns.into_iter().map(|(t, _)| t).collect()),
        Err(msg) => LeanOutcome::Panicked(msg),
    }
}

/// A full replay of a large case that holds no event list: the turns with their calls.
pub fn replay_full(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
) -> Result<Vec<TurnOutcome>, String> {
    Ok(
        replay_keeping(format, tools, options, request, turns, cuts, true)?
            .into_iter()
            .map(|(t, calls)| {
                let mut outcome = t.outcome;
                outcome.result.calls = calls.unwrap_or_default();
                outcome
            })
            .collect(),
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
        assert_eq!(
            d(json!({"a": 1, "b": [true]})),
            d(json!({"b": [true], "a": 1}))
        );
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
            ) else {
                unreachable!()
            };
            let want = LeanTurn::of(&full[0]);
            assert_eq!(lean[0].calls.len(), 50);
            assert_eq!(lean[0].calls, want.calls);
            assert_eq!(lean[0].outcome.events_hash, full[0].events_hash);
            assert_eq!(lean[0].outcome.result, want.outcome.result);
            assert_eq!(want.difference(&lean[0]), None);
            let kept = replay_full(
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
}
