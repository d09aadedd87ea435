//! conform's own parsers, run in-process: feed, fold, and catch panics.

use super::{Backend, Outcome, TurnOutcome};
use crate::backends::cuts::Cuts;
use crate::event::{Event, Folder};
use crate::formats::request::Request;
use crate::formats::{Format, OptionValues, StreamParser};
use crate::tools::Tools;
use std::cell::RefCell;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The parsers of this crate, run in-process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Builtin;

impl Backend for Builtin {
    fn name(&self) -> String {
        "builtin".into()
    }
    fn replay(
        &self,
        format: &Format,
        tools: &Tools,
        options: &OptionValues,
        request: &Request,
        turns: &[Vec<u8>],
        cuts: &[Cuts],
    ) -> Outcome {
        replay(format, tools, options, request, turns, cuts)
    }
    fn is_builtin(&self) -> bool {
        true
    }
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    static IN_REPLAY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Routes the panic messages of replays to the replay that caused them instead of stderr;
/// any other panic (a bug of conform's, an adapter's reader thread) still prints, through the
/// hook that was there before. Call once per run.
pub fn capture_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_REPLAY.with(std::cell::Cell::get) {
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
            } else {
                previous(info);
            }
        }));
    });
}

/// Feeds every turn, cut as given (a missing entry means the turn is fed whole), to one
/// in-process parser with `options` over its defaults (an unknown option, which the corpus
/// loader and the command line refuse first, is a panic of the replay).
pub fn replay(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
    turns: &[Vec<u8>],
    cuts: &[Cuts],
) -> Outcome {
    let run = || {
        let mut parser = match crate::formats::modes::parser(format, tools, options, request) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
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
    match catching(run) {
        Ok(turns) => Outcome::Done(turns),
        Err(msg) => Outcome::Panicked(msg),
    }
}

/// Runs `f`, turning a panic into its message (with its place, once [`capture_panics`] ran):
/// every in-process replay is run this way, so a parser's panic costs only its replay.
pub fn catching<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let outer = IN_REPLAY.with(|r| r.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    IN_REPLAY.with(|r| r.set(outer));
    result.map_err(|payload| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string())
    })
}

fn run_turn(parser: &mut dyn StreamParser, data: &[u8], cuts: &Cuts) -> TurnOutcome {
    let mut fold = TurnFold::default();
    for piece in cuts.pieces(data) {
        fold.feed(parser, piece);
    }
    fold.finish(parser)
}

/// One turn's events as a parser emits them: folded and hashed as they come.
#[derive(Default)]
struct TurnFold {
    folder: Folder,
    hasher: DefaultHasher,
    buf: Vec<Event>,
}

impl TurnFold {
    fn feed(&mut self, parser: &mut dyn StreamParser, piece: &[u8]) {
        parser.feed(piece, &mut self.buf);
        self.drain();
    }

    fn drain(&mut self) {
        for ev in self.buf.drain(..) {
            ev.hash(&mut self.hasher);
            self.folder.push(&ev);
        }
    }

    /// Ends the turn.
    fn finish(mut self, parser: &mut dyn StreamParser) -> TurnOutcome {
        parser.finish(&mut self.buf);
        self.drain();
        let events_hash = self.hasher.finish();
        let (mut result, anomalies) = self.folder.finish_with_anomalies();
        // A built-in parser is judged on reasoning even when it reports none: no reasoning is
        // empty reasoning (only an adapter may leave it unreported, `specs/adapter.md`).
        result.reasoning.get_or_insert_with(String::new);
        TurnOutcome {
            result,
            anomalies,
            events_hash,
            events_seen: true,
        }
    }
}

/// One stream of an interleaved replay: what its parser is built from, its turns, and the
/// cuts of each turn (a missing entry means whole).
#[derive(Clone, Copy)]
pub struct Stream<'a> {
    /// The tools of the stream's request.
    pub tools: &'a Tools,
    /// The format's options over its defaults.
    pub options: &'a OptionValues,
    /// The request modes.
    pub request: &'a Request,
    /// The turns.
    pub turns: &'a [Vec<u8>],
    /// The cuts of each turn.
    pub cuts: &'a [Cuts],
}

/// A stream being fed one step at a time: a piece, or the end of a turn.
struct Stepper<'a> {
    parser: Box<dyn StreamParser>,
    stream: Stream<'a>,
    turn: usize,
    pieces: Option<Box<dyn Iterator<Item = &'a [u8]> + 'a>>,
    fold: TurnFold,
    out: Vec<TurnOutcome>,
}

static WHOLE: Cuts = Cuts::At(Vec::new());

impl<'a> Stepper<'a> {
    /// Takes one step; false once every turn has ended.
    fn step(&mut self) -> bool {
        let Stream { turns, cuts, .. } = self.stream;
        let Some(data) = turns.get(self.turn) else {
            return false;
        };
        let turn = self.turn;
        let pieces = self
            .pieces
            .get_or_insert_with(|| cuts.get(turn).unwrap_or(&WHOLE).pieces(data));
        match pieces.next() {
            Some(piece) => self.fold.feed(self.parser.as_mut(), piece),
            None => {
                self.pieces = None;
                let fold = std::mem::take(&mut self.fold);
                self.out.push(fold.finish(self.parser.as_mut()));
                self.turn += 1;
            }
        }
        true
    }
}

/// Feeds two streams of one format to two parser instances in one thread, taking turns: a
/// piece of the first, a piece of the second, and so on (a turn's end is a step too), as a
/// server interleaves the deltas of concurrent requests. Each stream's outcome, or the panic
/// message. Fed alone under the same cuts, each stream must give the same events
/// ([`Invariant::StreamIsolation`](crate::harness::invariants::Invariant)).
pub fn replay_interleaved(
    format: &Format,
    a: Stream<'_>,
    b: Stream<'_>,
) -> Result<[Vec<TurnOutcome>; 2], String> {
    catching(|| {
        let start = |s: Stream<'_>| match crate::formats::modes::parser(
            format, s.tools, s.options, s.request,
        ) {
            Ok(parser) => parser,
            Err(e) => panic!("{e}"),
        };
        let mut steppers = [a, b].map(|stream| Stepper {
            parser: start(stream),
            stream,
            turn: 0,
            pieces: None,
            fold: TurnFold::default(),
            out: Vec::new(),
        });
        loop {
            let [x, y] = &mut steppers;
            let (moved_a, moved_b) = (x.step(), y.step());
            if !moved_a && !moved_b {
                break;
            }
        }
        steppers.map(|s| s.out)
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_panic_is_caught_with_its_place_and_the_hook_stays_installed_once() {
        capture_panics();
        capture_panics();
        let msg = catching(|| -> u8 { panic!("boom in a parser") }).unwrap_err();
        assert!(msg.contains("boom in a parser"), "{msg}");
        assert!(msg.contains("builtin.rs"), "the hook kept the place: {msg}");
        assert_eq!(catching(|| 7), Ok(7));
        // Outside a replay, a panic is not kept for a replay's report.
        let _ = std::panic::catch_unwind(|| panic!("outside"));
        assert!(LAST_PANIC.with(|p| p.borrow().is_none()));
    }
}
