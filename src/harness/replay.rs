//! Replaying one case under one chunking: feed, fold, and catch panics.

use super::chunking::Cuts;
use crate::event::{Event, Folder, ParseResult};
use crate::formats::{Format, StreamParser};
use crate::tools::Tools;
use std::cell::RefCell;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What one turn of a replay produced.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// The folded result.
    pub result: ParseResult,
    /// Delta-contract breaches the fold noticed.
    pub anomalies: Vec<String>,
    /// A hash of the exact event sequence, for the determinism check.
    pub events_hash: u64,
}

/// What a whole replay produced: one outcome per turn, or the panic that stopped it.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The parser ran to the end of every turn.
    Done(Vec<TurnOutcome>),
    /// The parser panicked; the message says where.
    Panicked(String),
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Routes panic messages to the replay that caused them instead of stderr; call once per run.
pub fn capture_panics() {
    std::panic::set_hook(Box::new(|info| {
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
    }));
}

/// Feeds every turn, cut as given (a missing entry means the turn is fed whole), to one parser.
pub fn replay(format: &Format, tools: &Tools, turns: &[Vec<u8>], cuts: &[Cuts]) -> Outcome {
    let run = || {
        let mut parser = (format.new_parser)(tools);
        turns
            .iter()
            .enumerate()
            .map(|(t, data)| {
                let whole = Cuts::At(Vec::new());
                let c = cuts.get(t).unwrap_or(&whole);
                run_turn(parser.as_mut(), data, c)
            })
            .collect::<Vec<_>>()
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(turns) => Outcome::Done(turns),
        Err(payload) => {
            let msg = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_string());
            Outcome::Panicked(msg)
        }
    }
}

fn run_turn(parser: &mut dyn StreamParser, data: &[u8], cuts: &Cuts) -> TurnOutcome {
    let mut folder = Folder::default();
    let mut hasher = DefaultHasher::new();
    let mut buf: Vec<Event> = Vec::new();
    let mut drain = |buf: &mut Vec<Event>, folder: &mut Folder| {
        for ev in buf.drain(..) {
            ev.hash(&mut hasher);
            folder.push(&ev);
        }
    };
    for piece in cuts.pieces(data) {
        parser.feed(piece, &mut buf);
        drain(&mut buf, &mut folder);
    }
    parser.finish(&mut buf);
    drain(&mut buf, &mut folder);
    let events_hash = hasher.finish();
    let (result, anomalies) = folder.finish_with_anomalies();
    TurnOutcome {
        result,
        anomalies,
        events_hash,
    }
}

/// Runs a parser over the pieces of one turn and returns every event (for `conform parse`).
pub fn events_of(parser: &mut dyn StreamParser, data: &[u8], cuts: &Cuts) -> Vec<Event> {
    let mut out = Vec::new();
    for piece in cuts.pieces(data) {
        parser.feed(piece, &mut out);
    }
    parser.finish(&mut out);
    out
}
