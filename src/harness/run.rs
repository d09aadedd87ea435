//! The runner: every case under every chunking, invariants checked, failures minimized.

use super::chunking::{
    ChunkingParams, CutClass, Cuts, Strategy, TokenCuts, TurnSources, marker_occurrences,
    turn_chunkings_iter, turn_salt,
};
use super::corpus::{Case, Label};
use super::digest::{self, Baseline, Judged, LeanOutcome, LeanTurn};
use super::invariants::{
    Compare, Invariant, expectation_mismatch, markup_leak, result_difference, roundtrip_difference,
};
use super::minimize::minimize;
use super::serving::{Got, ReplayPath, Routes, served_case};
use super::tokens::Tokenizer;
use crate::backends::{Backend, Breakdown, Outcome, TurnOutcome, builtin};
use crate::formats::request::Request;
use crate::formats::{self, Format, OptionValues};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a run replays, and how hard it tries to shrink failures.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The strategies to replay (`whole` is always replayed as the baseline).
    pub strategies: Vec<Strategy>,
    /// Seed and sizes of the chunkings.
    pub params: ChunkingParams,
    /// Most re-replays spent minimizing one failure.
    pub minimize_budget: usize,
    /// What is compared: `None` means everything for conform's parsers and
    /// [`Compare::EXTERNAL`] for others.
    pub compare: Option<Compare>,
    /// Most time one case may take: replays not started by then are listed, not failed.
    pub case_budget: Option<Duration>,
    /// The tokenizer of the token-aligned strategies (`None`: the built-in o200k_base).
    pub tokenizer: Option<Arc<Tokenizer>>,
    /// An external parser's dialect: per format, options of conform's parser under which it
    /// reads a case as the engine legitimately does (`kimi_k2.id_whole_header`); the
    /// expectations' ids are judged as conform reads them in that dialect.
    pub dialect: formats::OptionsByFormat,
}

impl RunConfig {
    /// The comparison policy in force for `backend`.
    pub fn compare_for(&self, backend: &dyn Backend) -> Compare {
        self.compare.unwrap_or(if backend.is_builtin() {
            Compare::ALL
        } else {
            Compare::EXTERNAL
        })
    }

    /// The tokenizer of the token-aligned strategies for `format`: the one given, else the
    /// format's declared vocabulary, else the default (each loaded once per process).
    pub fn tokenizer_for(&self, format: &Format) -> Arc<Tokenizer> {
        self.tokenizer
            .clone()
            .unwrap_or_else(|| super::vocab::tokenizer_for(format))
    }

    /// The name reports give the tokenizer: the one given, or `by format` (each format's own,
    /// named per format in the report).
    pub fn tokenizer_name(&self) -> String {
        self.tokenizer
            .as_deref()
            .map_or("by format", Tokenizer::name)
            .to_string()
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            strategies: Strategy::DEFAULT.to_vec(),
            params: ChunkingParams::default(),
            minimize_budget: 400,
            compare: None,
            case_budget: None,
            tokenizer: None,
            dialect: formats::OptionsByFormat::new(),
        }
    }
}

/// One broken invariant of one case, with the smallest reproducer found.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    /// The invariant.
    pub invariant: Invariant,
    /// The strategy of the first failing replay (none for whole-input checks).
    pub strategy: Option<Strategy>,
    /// Minimized cut offsets, one list per turn.
    pub cuts: Vec<Vec<usize>>,
    /// How many replays broke this invariant.
    pub failing_replays: usize,
    /// What went wrong, in a sentence.
    pub message: String,
    /// The command that reproduces the minimized replay.
    pub replay: String,
    /// The most innocent cuts that show the failure (token-aligned ones are what a server
    /// sends); `None` for checks that do not cut (roundtrip, format-level checks).
    pub cut_class: Option<CutClass>,
    /// The serving path of the failing replay, for a parser that declares paths.
    pub path: Option<ReplayPath>,
    /// What the reported replay (the minimized one) folded to, per turn, for an external
    /// parser: what the engine returns, beside what it should.
    pub got: Vec<Got>,
}

/// A case's verdict.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// Every invariant held.
    Pass,
    /// At least one invariant broke.
    Fail,
    /// An external parser crashed on the case.
    Crash,
    /// An external parser did not answer in time.
    Timeout,
    /// An external parser answered outside the adapter protocol.
    ProtocolError,
    /// The case's files could not be loaded.
    CorpusError,
}

impl Status {
    /// The snake_case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Crash => "crash",
            Status::Timeout => "timeout",
            Status::ProtocolError => "protocol_error",
            Status::CorpusError => "corpus_error",
        }
    }
}

impl From<Breakdown> for Status {
    fn from(b: Breakdown) -> Status {
        match b {
            Breakdown::Crash => Status::Crash,
            Breakdown::Timeout => Status::Timeout,
            Breakdown::ProtocolError => Status::ProtocolError,
        }
    }
}

/// Everything the run learned about one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    /// The case id.
    pub id: String,
    /// The format id.
    pub format: &'static str,
    /// How the case is judged.
    pub label: Label,
    /// Pass or fail.
    pub status: Status,
    /// Broken invariants, one entry per invariant.
    pub violations: Vec<Violation>,
    /// Replays run (all strategies, including whole).
    pub replays: usize,
    /// Replays that ended without an error.
    pub error_free: usize,
    /// Replays whose result met the expectation (y_ cases).
    pub matched: usize,
    /// Invariants that did not apply, with the reason (e.g. a renderer that refuses the calls).
    pub not_applicable: Vec<String>,
    /// The task completion (`attempt_completion`'s `result`) the whole input reports, per turn.
    pub completion: Option<std::sync::Arc<str>>,
    /// Replays of an external parser that split a special token (a cut no server produces),
    /// judged apart: they are not in `replays` or the rates and never fail the case.
    pub token_split_replays: usize,
    /// Invariants those replays broke, minimized like the others.
    pub token_split_violations: Vec<Violation>,
    /// Invariants broken by the whole input sent as one streaming delta (a server coalescing
    /// deltas under load), for a parser that declares a streaming path: judged apart, never a
    /// failure of the case.
    pub coalesced_violations: Vec<Violation>,
    /// The format's options in force that differ from its defaults (empty: the defaults).
    pub options: OptionValues,
    /// The request modes the case was judged under, without the keys that say the default
    /// (absent from the report when there are none).
    #[serde(skip_serializing_if = "Request::is_default")]
    pub request: Request,
    /// Wall time spent on the case.
    #[serde(skip)]
    pub elapsed: Duration,
}

impl CaseReport {
    /// A passing report with nothing replayed yet.
    pub fn new(id: String, format: &'static str, label: Label) -> CaseReport {
        CaseReport {
            id,
            format,
            label,
            status: Status::Pass,
            violations: Vec::new(),
            replays: 0,
            error_free: 0,
            matched: 0,
            not_applicable: Vec::new(),
            completion: None,
            token_split_replays: 0,
            token_split_violations: Vec::new(),
            coalesced_violations: Vec::new(),
            options: OptionValues::new(),
            request: Request::default(),
            elapsed: Duration::ZERO,
        }
    }
}

/// The first replay that broke an invariant, and how many did.
struct FirstFailure {
    invariant: Invariant,
    strategy: Strategy,
    cuts: Vec<Cuts>,
    count: usize,
    message: String,
    /// The least class among the failing replays.
    class: CutClass,
    /// What that replay folded to.
    got: Vec<Got>,
}

/// A turn's tokens and the places of its special tokens, for classifying failing cuts.
type TurnTokens = (super::tokens::Tokenized, Vec<(usize, usize)>);

/// The verdict of one non-baseline replay.
struct Verdict {
    strategy: Strategy,
    cuts: Vec<Cuts>,
    error_free: bool,
    matched: bool,
    broken: Vec<(Invariant, String)>,
    /// An external parser that did not answer this replay.
    breakdown: Option<(Breakdown, String)>,
    /// What each turn folded to, kept for a broken external replay.
    got: Vec<Got>,
}

/// Replays every case the backend supports (in parallel), calling `progress` as each case
/// finishes; one report per case, in case order. conform's own parsers are also fed each case
/// interleaved with another case of its format (`partners`, `stream_isolation`).
pub fn run_cases_on(
    cases: &[Case],
    backend: &dyn Backend,
    cfg: &RunConfig,
    progress: &(dyn Fn() + Sync),
) -> Vec<CaseReport> {
    let partners = partners(cases, backend);
    cases
        .par_iter()
        .zip(&partners)
        .filter(|(c, _)| backend.supports(c.format))
        .map(|(c, partner)| {
            let format = formats::by_id(c.format).expect("corpus cases name registered formats");
            let partner = partner.map(|p| &cases[p]);
            let r = run_case_paired(c, partner, format, backend, cfg);
            progress();
            r
        })
        .collect()
}

/// For each case, the case whose stream it is interleaved with for `stream_isolation`: the next
/// case of the same format in the run (wrapping around), so `conform run A B` pairs A and B
/// again. None for an external parser (the adapter protocol carries one stream per request,
/// `specs/adapter.md` §2.2), a format with a single case, or a large case (replayed lean).
fn partners(cases: &[Case], backend: &dyn Backend) -> Vec<Option<usize>> {
    let mut out = vec![None; cases.len()];
    if !backend.is_builtin() {
        return out;
    }
    let mut by_format: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, c) in cases.iter().enumerate() {
        if c.len() < digest::LARGE_CASE_BYTES {
            by_format.entry(c.format).or_default().push(i);
        }
    }
    for group in by_format.values().filter(|g| g.len() > 1) {
        for (k, &i) in group.iter().enumerate() {
            out[i] = Some(group[(k + 1) % group.len()]);
        }
    }
    out
}

/// Replays one case under every configured strategy and checks every invariant: the whole
/// input first (the baseline every chunking is compared with), then every planned chunking in
/// parallel, each failure shrunk to its smallest cuts, then the roundtrip.
pub fn run_case_with(
    case: &Case,
    format: &Format,
    backend: &dyn Backend,
    cfg: &RunConfig,
) -> CaseReport {
    run_case_paired(case, None, format, backend, cfg)
}

/// [`run_case_with`], and for conform's own parsers `stream_isolation` against `partner` (a case
/// of the same format).
pub fn run_case_paired(
    case: &Case,
    partner: Option<&Case>,
    format: &Format,
    backend: &dyn Backend,
    cfg: &RunConfig,
) -> CaseReport {
    // What the server hands its parser: each turn up to the token that ends it.
    let served = (!backend.is_builtin())
        .then(|| served_case(case, format))
        .flatten();
    let case = served.as_ref().unwrap_or(case);
    let in_dialect = match cfg.dialect.get(format.id) {
        Some(d) if !backend.is_builtin() => in_dialect(case, format, d),
        _ => None,
    };
    let case = in_dialect.as_ref().unwrap_or(case);
    let mut run = CaseRun::new(case, format, backend, cfg);
    run.partner = partner;
    let mut report = run.new_report();
    let Some(whole) = run.replay_whole(&mut report) else {
        report.elapsed = run.started.elapsed();
        return report;
    };
    let mut whole = run.check_whole(&mut report, whole);
    let (failures, token_failures, coalesced_failures) = run.replay_chunkings(&mut report, &whole);
    report
        .violations
        .extend(run.shrink_all(&whole, failures, cfg.minimize_budget));
    // Chunkings that differ only from the one-delta whole input (a streaming-only parser).
    let coalesced = run.shrink_all(
        &whole,
        coalesced_failures,
        (cfg.minimize_budget / 8).max(16),
    );
    report.coalesced_violations.extend(coalesced);
    run.coalesced(&mut report, &whole);
    // An invariant already broken without splitting a token needs no second, excused entry.
    let token_failures: Vec<FirstFailure> = token_failures
        .into_iter()
        .filter(|f| !report.violations.iter().any(|v| v.invariant == f.invariant))
        .collect();
    // Failures only on split special tokens never fail the case: a small budget shows them.
    report.token_split_violations =
        run.shrink_all(&whole, token_failures, (cfg.minimize_budget / 8).max(16));
    if let Some(full) = whole.full_mut() {
        run.roundtrip(full, &mut report, false);
    }
    report.violations.sort_by_key(|v| v.invariant);
    report.token_split_violations.sort_by_key(|v| v.invariant);
    report.coalesced_violations.sort_by_key(|v| v.invariant);
    if !report.violations.is_empty() && report.status == Status::Pass {
        report.status = Status::Fail;
    }
    report.elapsed = run.started.elapsed();
    report
}

/// One case being judged by one backend: what every step shares.
struct CaseRun<'a> {
    case: &'a Case,
    format: &'a Format,
    backend: &'a dyn Backend,
    cfg: &'a RunConfig,
    cmp: Compare,
    /// The format's delimiters in this case, reasoning tags included: the `markers` chunking
    /// cuts inside them and no text may hold one.
    markers: Vec<String>,
    /// The texts of the format's special tokens.
    special: Vec<String>,
    /// Where the special tokens are in each turn, for an external parser only: a replay that
    /// splits one is judged apart (`specs/adapter.md` §5).
    tokens: Vec<Vec<(usize, usize)>>,
    /// A large case replayed lean by the built-in parsers (`digest.rs`): only the roundtrip
    /// needs the whole input's full result, so there it goes first and the result is then
    /// kept as digests; no replay holds an event list.
    lean: bool,
    /// A lean case's whole input, digested by the argument text its parser delivered: the
    /// baseline its replays are compared with once the roundtrip is done.
    lean_whole: std::sync::Mutex<Option<Vec<LeanTurn>>>,
    /// The biggest single piece of the whole input's result (an argument's text, the text or
    /// the reasoning of a turn), for a lean case.
    biggest_piece: std::sync::Mutex<usize>,
    /// Whether the parser is not conform's: judged as a server's (`specs/adapter.md` §7).
    external: bool,
    /// Which serving path each replay takes.
    routes: Routes,
    /// The case fed interleaved with this one for `stream_isolation`.
    partner: Option<&'a Case>,
    started: Instant,
}

impl<'a> CaseRun<'a> {
    fn new(
        case: &'a Case,
        format: &'a Format,
        backend: &'a dyn Backend,
        cfg: &'a RunConfig,
    ) -> Self {
        let started = Instant::now();
        let mut markers = (format.markers)(&case.tools);
        markers.extend(format.reasoning.map(|r| r.tags()).unwrap_or_default());
        let special: Vec<String> = format
            .special_tokens
            .iter()
            .map(|t| t.text.to_string())
            .collect();
        let tokens = if !special.is_empty() && !backend.is_builtin() {
            case.turns
                .iter()
                .map(|t| marker_occurrences(t, &special))
                .collect()
        } else {
            Vec::new()
        };
        let lean = backend.is_builtin()
            && case.len() >= digest::LARGE_CASE_BYTES
            && !case.expects.iter().flatten().any(|e| e.calls.is_some());
        CaseRun {
            case,
            format,
            backend,
            cfg,
            cmp: cfg.compare_for(backend),
            markers,
            special,
            tokens,
            lean,
            lean_whole: std::sync::Mutex::new(None),
            biggest_piece: std::sync::Mutex::new(0),
            external: !backend.is_builtin(),
            routes: Routes::of(backend.paths()),
            partner: None,
            started,
        }
    }

    /// A passing report with nothing replayed yet.
    fn new_report(&self) -> CaseReport {
        let mut report = CaseReport::new(self.case.id.clone(), self.format.id, self.case.label);
        // Options configure conform's parsers; an adapter is configured by its own command.
        if self.backend.is_builtin() {
            report.options = self.case.options.as_ref().clone();
        }
        // The request reaches every parser: conform's through its options, an adapter's in
        // each parse request.
        report.request = self.case.request.as_ref().clone();
        report
    }

    /// No cut in any turn.
    fn whole_cuts(&self) -> Vec<Cuts> {
        self.case
            .turns
            .iter()
            .map(|_| Cuts::At(Vec::new()))
            .collect()
    }

    /// Whether the cuts split a special token of the format (external parsers only).
    fn splits_token(&self, cuts: &[Cuts]) -> bool {
        cuts.iter()
            .zip(&self.tokens)
            .zip(&self.case.turns)
            .any(|((c, t), data)| c.splits_any(data, t))
    }

    /// Whether the case has spent its `--case-budget`.
    fn over_budget(&self) -> bool {
        self.cfg
            .case_budget
            .is_some_and(|b| self.started.elapsed() > b)
    }

    /// Replays a chunking through the backend, along the chunkings' path (while shrinking
    /// too, when no cut is left).
    fn replay(&self, cuts: &[Cuts]) -> Outcome {
        self.replay_path(self.routes.chunked, cuts)
    }

    /// Replays `cuts` along `path`.
    fn replay_path(&self, path: Option<ReplayPath>, cuts: &[Cuts]) -> Outcome {
        let c = self.case;
        self.backend.replay_on(
            path.map(ReplayPath::serving),
            self.format,
            &c.tools,
            &c.options,
            &c.request,
            &c.turns,
            cuts,
        )
    }

    /// A violation found on the whole input.
    fn on_whole(&self, invariant: Invariant, message: String) -> Violation {
        self.whole_violation(invariant, message, self.routes.whole)
    }

    /// What an external parser's turns folded to (nothing for conform's own).
    fn got(&self, turns: &[TurnOutcome]) -> Vec<Got> {
        if self.external {
            turns.iter().map(|t| Got::of(&t.result)).collect()
        } else {
            Vec::new()
        }
    }

    /// A violation of a whole-input replay along `path`.
    fn whole_violation(
        &self,
        invariant: Invariant,
        message: String,
        path: Option<ReplayPath>,
    ) -> Violation {
        Violation {
            invariant,
            strategy: Some(Strategy::Whole),
            cuts: vec![Vec::new(); self.case.turns.len()],
            failing_replays: 1,
            cut_class: Some(CutClass::TokenAligned),
            message,
            replay: path_replay(replay_command(self.case, &self.backend.name(), &[]), path),
            path,
            got: Vec::new(),
        }
    }

    /// Where what the whole input breaks is listed: apart when it is the coalesced replay.
    fn whole_list<'r>(&self, report: &'r mut CaseReport) -> &'r mut Vec<Violation> {
        if self.routes.whole_is_coalesced() {
            &mut report.coalesced_violations
        } else {
            &mut report.violations
        }
    }

    /// The whole input as one streaming delta, for a parser that has both paths: judged
    /// against the expectation and the non-streaming result, its violations listed apart.
    fn coalesced(&self, report: &mut CaseReport, whole: &Baseline) {
        if !self.routes.coalesced || self.over_budget() {
            return;
        }
        let path = Some(ReplayPath::Coalesced);
        match self.replay_path(path, &self.whole_cuts()) {
            Outcome::Done(turns) => {
                let v = judge(
                    (
                        self.case,
                        &self.markers,
                        self.cmp,
                        self.external,
                        self.routes.parity(),
                    ),
                    whole,
                    &turns,
                    Strategy::Tokens,
                    self.whole_cuts(),
                );
                for (inv, msg) in v.broken {
                    let mut v = self.whole_violation(inv, msg, path);
                    v.got = self.got(&turns);
                    report.coalesced_violations.push(v);
                }
            }
            Outcome::Panicked(msg) | Outcome::Broke(_, msg) => {
                let v = self.whole_violation(
                    Invariant::Bounded,
                    format!("the parser broke down on the one-delta stream: {msg}"),
                    path,
                );
                report.coalesced_violations.push(v);
            }
        }
    }

    /// The baseline: the whole input, replayed once. `None` when the case ends there (the
    /// parser broke down or panicked; the report says so).
    fn replay_whole(&self, report: &mut CaseReport) -> Option<Vec<TurnOutcome>> {
        let c = self.case;
        let whole = if self.lean {
            digest::replay_full(
                self.format,
                &c.tools,
                &c.options,
                &c.request,
                &c.turns,
                &self.whole_cuts(),
            )
            .map_or_else(Outcome::Panicked, |(full, lean)| {
                let biggest = lean.iter().map(|t| t.biggest_piece).max().unwrap_or(0);
                *self.biggest_piece.lock().unwrap_or_else(|e| e.into_inner()) = biggest;
                *self.lean_whole.lock().unwrap_or_else(|e| e.into_inner()) = Some(lean);
                Outcome::Done(full)
            })
        } else {
            self.replay_path(self.routes.whole, &self.whole_cuts())
        };
        report.replays = 1;
        match whole {
            Outcome::Done(t) => Some(t),
            Outcome::Broke(why, msg) => {
                report.status = why.into();
                report
                    .not_applicable
                    .push(format!("{}: {msg}", report.status.as_str()));
                None
            }
            Outcome::Panicked(msg) => {
                report
                    .violations
                    .push(self.on_whole(Invariant::Bounded, format!("the parser panicked: {msg}")));
                report.status = Status::Fail;
                None
            }
        }
    }

    /// The checks on the whole input (expectations, leaks, delta contract, determinism; the
    /// roundtrip first when the case is lean); the baseline the chunkings are compared with.
    fn check_whole(&self, report: &mut CaseReport, whole: Vec<TurnOutcome>) -> Baseline {
        report.completion = whole.iter().rev().find_map(|t| t.result.completion.clone());
        // A non-streaming path answers results by nature; the chunkings give the events.
        if whole.iter().any(|t| !t.events_seen) && self.routes.whole != Some(ReplayPath::Batch) {
            report
                .not_applicable
                .push("delta_contract: the parser reports only final results, not events".into());
        }
        let verdict = judge(
            (
                self.case,
                &self.markers,
                self.cmp,
                self.external,
                self.routes.parity(),
            ),
            &Baseline::Full(Vec::new()),
            &whole,
            Strategy::Whole,
            self.whole_cuts(),
        );
        tally(report, &verdict);
        let whole_got = self.got(&whole);
        // Lean, the roundtrip goes first: the full result is dropped after it, each turn's
        // as soon as it is rendered (the digests of the whole input are the baseline).
        let whole = if self.lean {
            let digested = self
                .lean_whole
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            match digested {
                Some(lean) => {
                    let mut whole = whole;
                    self.roundtrip(&mut whole, report, true);
                    drop(whole);
                    Baseline::Lean(lean)
                }
                None => {
                    let mut whole = whole;
                    self.roundtrip(&mut whole, report, false);
                    Baseline::Full(whole).into_lean()
                }
            }
        } else {
            Baseline::Full(whole)
        };
        let again = self.replay_again(report);
        for (inv, msg) in verdict.broken {
            let mut v = self.on_whole(inv, msg);
            v.got = whole_got.clone();
            self.whole_list(report).push(v);
        }
        if let Some(again) = again {
            self.check_determinism(report, &whole, again);
        }
        whole
    }

    /// The whole input again, for the determinism check: each turn's events hash, and the
    /// full outcome when the case is not lean.
    fn replay_again(
        &self,
        report: &mut CaseReport,
    ) -> Option<(Vec<u64>, Option<Vec<TurnOutcome>>)> {
        let c = self.case;
        if self.lean {
            // Compared by its events hash only: its completion is not read.
            match digest::replay(
                self.format,
                &c.tools,
                &c.options,
                &c.request,
                &c.turns,
                &self.whole_cuts(),
                false,
            ) {
                LeanOutcome::Done(t) => {
                    Some((t.iter().map(|x| x.outcome.events_hash).collect(), None))
                }
                LeanOutcome::Panicked(_) => None,
            }
        } else {
            match self.replay_path(self.routes.whole, &self.whole_cuts()) {
                Outcome::Done(t) => Some((t.iter().map(|x| x.events_hash).collect(), Some(t))),
                Outcome::Broke(why, msg) => {
                    broke_outside_chunkings(report, why, "the second whole replay", &msg);
                    None
                }
                Outcome::Panicked(_) => None,
            }
        }
    }

    /// Two whole-input replays must emit the same events; a parser that generates ids gives
    /// new ones on every replay, which is noted, not failed.
    fn check_determinism(
        &self,
        report: &mut CaseReport,
        whole: &Baseline,
        (again, again_full): (Vec<u64>, Option<Vec<TurnOutcome>>),
    ) {
        let cmp = self.cmp;
        let same = again.len() == whole.len()
            && again
                .iter()
                .enumerate()
                .all(|(t, h)| whole.events_hash(t) == Some(*h));
        let only_ids = !same
            && !cmp.ids
            && again_full.as_ref().zip(whole.full()).is_some_and(|(a, w)| {
                a.len() == w.len()
                    && a.iter().zip(w).zip(&self.case.turns).all(|((a, b), data)| {
                        let (a, b) = (cmp.view(&a.result, data).0, cmp.view(&b.result, data).0);
                        a == b && result_difference(&a, &b, cmp).is_none()
                    })
            });
        if only_ids {
            report
                .not_applicable
                .push("deterministic: two whole-input replays differ only in generated ids".into());
        } else if !same {
            let v = self.on_whole(
                Invariant::Deterministic,
                "two whole-input replays emitted different events".into(),
            );
            self.whole_list(report).push(v);
        }
    }

    /// Every planned chunking, replayed in parallel and judged against the whole input as the
    /// verdicts come (in plan order, so the outcome never depends on the threads): the first
    /// failing replay of each invariant kept for shrinking (the most innocent one,
    /// token-aligned where one fails), later ones counted; replays that split a special token
    /// apart; the first breakdown made the case's status. Replays past the case budget are
    /// listed, not run. The plan is made as it is replayed, a batch at a time, so neither the
    /// chunkings nor their verdicts are ever all held at once.
    fn replay_chunkings(
        &self,
        report: &mut CaseReport,
        whole: &Baseline,
    ) -> (Vec<FirstFailure>, Vec<FirstFailure>, Vec<FirstFailure>) {
        let sources = TurnSources::of_case(self.case, self.format, self.cfg.tokenizer.as_deref());
        let mut plan = plan_replays(self.case, &self.markers, self.cfg, &sources);
        let mut judging = Judging::new(self);
        let mut not_replayed: BTreeMap<Strategy, usize> = BTreeMap::new();
        let batch = self.replays_in_flight();
        loop {
            // A parser without a streaming path is judged on its whole input only.
            let next: Vec<(Strategy, Vec<Cuts>)> = if self.routes.chunkings {
                plan.by_ref().take(batch).collect()
            } else {
                Vec::new()
            };
            if next.is_empty() {
                break;
            }
            let verdicts: Vec<Result<Verdict, Strategy>> = next
                .into_par_iter()
                .map(|(strategy, cuts)| {
                    if self.over_budget() {
                        return Err(strategy);
                    }
                    Ok(self.replay_judged(whole, strategy, cuts))
                })
                .collect();
            for v in verdicts {
                match v {
                    Ok(v) => judging.add(report, v),
                    Err(s) => *not_replayed.entry(s).or_default() += 1,
                }
            }
        }
        if !not_replayed.is_empty() {
            let list: Vec<String> = not_replayed
                .iter()
                .map(|(s, n)| format!("{n} {s}"))
                .collect();
            report.not_applicable.push(format!(
                "case budget: {:.1?} spent, replays not run: {}",
                self.cfg.case_budget.unwrap_or_default(),
                list.join(", ")
            ));
        }
        // While the turns' sources (their tokens) are at hand.
        if let Some(partner) = self.partner {
            self.isolation(report, partner, whole, &sources);
        }
        judging.finish(report)
    }

    /// How many chunkings are replayed at once. A large case whose single biggest piece (an
    /// argument, its text or reasoning) is a fair part of it replays one chunking at a time:
    /// every replay in flight holds that piece (and what its parser builds of it), so its peak
    /// is one replay's, not one per core. Any other case replays as many as there are threads,
    /// a few batches' worth at once.
    fn replays_in_flight(&self) -> usize {
        let biggest = *self.biggest_piece.lock().unwrap_or_else(|e| e.into_inner());
        if self.lean && biggest.saturating_mul(LARGE_PIECE_SHARE) >= self.case.len() {
            1
        } else {
            (rayon::current_num_threads() * 16).max(64)
        }
    }

    /// The failures as violations, each with its cuts shrunk (unless the case budget is
    /// spent) and the command that replays them.
    fn shrink_all(
        &self,
        whole: &Baseline,
        failures: Vec<FirstFailure>,
        budget: usize,
    ) -> Vec<Violation> {
        failures
            .into_iter()
            .map(|mut f| {
                let cuts = if self.over_budget() {
                    f.cuts
                        .iter()
                        .zip(&self.case.turns)
                        .map(|(c, t)| c.to_vec(t))
                        .collect()
                } else {
                    let (cuts, last) = self.shrink(whole, f.invariant, &f.cuts, budget);
                    // The reported replay is the minimized one: its message and result.
                    if let Some(v) = last
                        && let Some((_, msg)) =
                            v.broken.into_iter().find(|(i, _)| *i == f.invariant)
                    {
                        f.message = msg;
                        f.got = v.got;
                    }
                    cuts
                };
                let mut replay = replay_command(self.case, &self.backend.name(), &cuts);
                // What a server would send: the same deltas with their token ids.
                if f.strategy.token_aligned() && !self.backend.is_builtin() {
                    replay.push_str(" --token-ids");
                    if let Some(t) = &self.cfg.tokenizer {
                        replay.push_str(&format!(" --tokenizer {}", shell_quote(t.name())));
                    }
                }
                Violation {
                    invariant: f.invariant,
                    strategy: Some(f.strategy),
                    replay: path_replay(replay, self.routes.chunked),
                    cuts,
                    failing_replays: f.count,
                    cut_class: Some(f.class),
                    message: f.message,
                    path: self.routes.chunked,
                    got: f.got,
                }
            })
            .collect()
    }
    /// Replays one chunking and judges it against the whole input; a large case, whose whole
    /// input is kept lean, is replayed lean too.
    fn replay_judged(&self, whole: &Baseline, strategy: Strategy, cuts: Vec<Cuts>) -> Verdict {
        let (case, markers, cmp) = (self.case, &self.markers[..], self.cmp);
        let (external, parity) = (self.external, self.routes.parity());
        let outcome = if let Baseline::Lean(w) = whole {
            let (tools, options, request) = (&case.tools, &case.options, &case.request);
            // Its completion is read only against an expectation that names one.
            let completion = case
                .expects
                .iter()
                .flatten()
                .any(|e| e.completion.is_some());
            let mut lean = digest::replay(
                self.format,
                tools,
                options,
                request,
                &case.turns,
                &cuts,
                completion,
            );
            if let LeanOutcome::Done(turns) = &lean
                && !turns.iter().zip(w).all(|(t, w)| w.comparable(t, false))
            {
                // A call whose text differs from the whole input's: its value tells.
                lean =
                    digest::replay_valued(self.format, tools, options, request, &case.turns, &cuts);
            }
            match lean {
                LeanOutcome::Done(turns) => {
                    return judge(
                        (case, markers, cmp, external, parity),
                        whole,
                        &turns,
                        strategy,
                        cuts,
                    );
                }
                LeanOutcome::Panicked(msg) => Outcome::Panicked(msg),
            }
        } else {
            self.replay(&cuts)
        };
        match outcome {
            Outcome::Done(turns) => {
                let mut v = judge(
                    (case, markers, cmp, external, parity),
                    whole,
                    &turns,
                    strategy,
                    cuts,
                );
                if external && !v.broken.is_empty() {
                    v.got = turns.iter().map(|t| Got::of(&t.result)).collect();
                }
                v
            }
            Outcome::Panicked(msg) => Verdict {
                strategy,
                cuts,
                error_free: false,
                matched: false,
                broken: vec![(Invariant::Bounded, format!("the parser panicked: {msg}"))],
                breakdown: None,
                got: Vec::new(),
            },
            Outcome::Broke(why, msg) => Verdict {
                strategy,
                cuts,
                error_free: false,
                matched: false,
                broken: Vec::new(),
                breakdown: Some((why, msg)),
                got: Vec::new(),
            },
        }
    }

    /// Minimizes the cuts of a failing replay for one invariant.
    fn shrink(
        &self,
        whole: &Baseline,
        inv: Invariant,
        cuts: &[Cuts],
        budget: usize,
    ) -> (Vec<Vec<usize>>, Option<Verdict>) {
        let case = self.case;
        let flat: Vec<(usize, usize)> = cuts
            .iter()
            .enumerate()
            .flat_map(|(t, c)| {
                c.to_vec(case.turns.get(t).map_or(&[][..], Vec::as_slice))
                    .into_iter()
                    .map(move |o| (t, o))
            })
            .collect();
        // A token-aligned failure is minimized over token-aligned chunkings, so an adapter keeps
        // receiving each chunk's token ids while the cuts shrink.
        let to_cuts = |flat: &[(usize, usize)]| -> Vec<Cuts> {
            (0..case.turns.len())
                .map(|t| {
                    let list: Vec<usize> = flat.iter().filter(|c| c.0 == t).map(|c| c.1).collect();
                    match cuts.get(t) {
                        Some(Cuts::Tokens(tc)) => {
                            TokenCuts::aligned(&tc.tokens, list.clone()).unwrap_or(Cuts::At(list))
                        }
                        _ => Cuts::At(list),
                    }
                })
                .collect()
        };
        // A streaming path shrunk to no cut would be the whole output as one delta: the
        // coalesced replay, reported apart and a path no client takes. Keep one cut at least.
        let keep_a_cut = self.routes.chunked == Some(ReplayPath::Stream);
        let min = minimize(flat, budget, |f| {
            if keep_a_cut && f.is_empty() {
                return false;
            }
            let v = self.replay_judged(whole, Strategy::Random, to_cuts(f));
            v.breakdown.is_none() && v.broken.iter().any(|(i, _)| *i == inv)
        });
        // An external parser's minimized replay once more, for what it returns there.
        let last = self
            .external
            .then(|| self.replay_judged(whole, Strategy::Random, to_cuts(&min)));
        (
            to_cuts(&min).into_iter().map(|c| c.to_vec(&[])).collect(),
            last,
        )
    }

    /// `stream_isolation`: under the first chunking of each of the run's strategies, the case
    /// is fed to one parser instance while `partner`'s stream goes byte by byte to another, a
    /// piece of each in turn (so between any two pieces of the case the other instance has
    /// run); the case must give the result of its whole input. Where it does not, the same
    /// cuts fed alone tell a shared state (the events differ) from a chunking bug (they do
    /// not: `split_invariance` has it). conform's own parsers only, not for a lean case: one
    /// interleaved replay per strategy, on the chunkings' own token cuts.
    fn isolation(
        &self,
        report: &mut CaseReport,
        partner: &Case,
        whole: &Baseline,
        sources: &[TurnSources<'_>],
    ) {
        let (case, format) = (self.case, self.format);
        let Some(whole) = whole.full() else { return };
        if self.external || self.lean || self.over_budget() || partner.id == case.id {
            return;
        }
        let every_byte = vec![Cuts::EveryByte; partner.turns.len()];
        let mut first: Option<(Strategy, Vec<Cuts>, String)> = None;
        let mut failing = 0;
        for (strategy, cuts) in first_chunkings(case, &self.markers, self.cfg, sources) {
            let together = builtin::replay_interleaved(
                format,
                stream(case, &cuts),
                stream(partner, &every_byte),
            );
            let problem = match together {
                Ok([together, _]) => {
                    let same = together.len() == whole.len()
                        && together.iter().zip(whole).all(|(a, w)| {
                            result_difference(&w.result, &a.result, self.cmp).is_none()
                        });
                    if same {
                        None
                    } else {
                        match builtin::replay(
                            format,
                            &case.tools,
                            &case.options,
                            &case.request,
                            &case.turns,
                            &cuts,
                        ) {
                            Outcome::Done(alone) => {
                                isolation_difference(&alone, &together, self.cmp)
                            }
                            // A panic fed alone is `bounded`'s, found by the chunkings.
                            _ => None,
                        }
                    }
                }
                Err(msg) => Some(format!("the parser panicked fed interleaved: {msg}")),
            };
            if let Some(msg) = problem {
                failing += 1;
                first.get_or_insert((strategy, cuts, msg));
            }
        }
        let Some((strategy, cuts, msg)) = first else {
            return;
        };
        let replay = format!(
            "conform run {} {} --strategies whole,{strategy}",
            shell_quote(&case.path.display().to_string()),
            shell_quote(&partner.path.display().to_string())
        );
        report.violations.push(Violation {
            invariant: Invariant::StreamIsolation,
            strategy: Some(strategy),
            cuts: cuts
                .iter()
                .zip(&case.turns)
                .map(|(c, t)| c.to_vec(t))
                .collect(),
            failing_replays: failing,
            message: format!(
                "fed interleaved with the stream of {} (byte by byte; this case under {strategy}): {msg}",
                partner.id
            ),
            replay,
            cut_class: None,
            path: None,
            got: Vec::new(),
        });
    }

    /// Renders each error-free turn's result and parses it back, whole and byte by byte.
    /// `release` (a lean case whose whole input is digested apart): each turn's full result is
    /// dropped once rendered and digested, so that the replays of its rendering do not hold
    /// it too.
    fn roundtrip(&self, whole: &mut [TurnOutcome], report: &mut CaseReport, release: bool) {
        let (case, format, backend, special, lean) = (
            self.case,
            self.format,
            self.backend,
            &self.special[..],
            self.lean,
        );
        if format.render.is_none() {
            return;
        }
        let turn_count = whole.len();
        for (t, out) in whole.iter_mut().enumerate() {
            // An external parser's generated ids never go into the wire: no model writes them.
            // A call that carries one is written with the id the wire gives it instead.
            let data = case.turns.get(t).map_or(&[][..], Vec::as_slice);
            let viewed = self.cmp.view(&out.result, data).0;
            let r = wire_ids(case, format, &out.result, viewed, data);
            if !r.errors.is_empty() {
                continue;
            }
            // Rendered as the model writes under the case's request and options (a prefilled
            // reasoning start, a guided payload), so that it parses back under them.
            let (rendered, with_reasoning) =
                match formats::modes::render(format, &case.options, &case.request, &r, &case.tools)
                {
                    Ok(x) => (x.bytes, x.with_reasoning),
                    Err(why) => {
                        report
                            .not_applicable
                            .push(format!("roundtrip: the renderer refuses: {why}"));
                        continue;
                    }
                };
            // Lean, what the rendering must give back is compared by digest: the full result
            // is not needed past this point.
            let rendered_as = lean.then(|| LeanTurn::of(out));
            let r = if lean && release {
                drop(r);
                out.result = crate::event::ParseResult::default();
                None
            } else {
                Some(r)
            };
            for cuts in [Cuts::At(Vec::new()), Cuts::EveryByte] {
                let (turns, cut) = (std::slice::from_ref(&rendered), std::slice::from_ref(&cuts));
                let outcome = if let Some(rendered_as) = &rendered_as {
                    let (tools, options, request) = (&case.tools, &case.options, &case.request);
                    // Compared by `roundtrip_difference`, which reads no completion.
                    let mut back =
                        digest::replay(format, tools, options, request, turns, cut, false);
                    if let LeanOutcome::Done(b) = &back
                        && !b.first().is_some_and(|b| rendered_as.comparable(b, true))
                    {
                        back = digest::replay_valued(format, tools, options, request, turns, cut);
                    }
                    match back {
                        LeanOutcome::Done(back) => Err(back
                            .first()
                            .and_then(|b| rendered_as.roundtrip_difference(b, with_reasoning))),
                        LeanOutcome::Panicked(m) => Ok(Outcome::Panicked(m)),
                    }
                } else {
                    Ok(backend.replay_on(
                        self.routes.whole.map(ReplayPath::serving),
                        format,
                        &case.tools,
                        &case.options,
                        &case.request,
                        turns,
                        cut,
                    ))
                };
                let problem = match outcome {
                    Err(lean_problem) => lean_problem,
                    Ok(outcome) => match outcome {
                        Outcome::Panicked(m) => {
                            Some(format!("the parser panicked on the rendering: {m}"))
                        }
                        Outcome::Broke(why, m) => {
                            // The adapter's breakdown, not a difference in what it parsed.
                            broke_outside_chunkings(report, why, "the roundtrip replay", &m);
                            return;
                        }
                        Outcome::Done(turns) => turns.first().and_then(|back| {
                            roundtrip_difference(
                                r.as_deref()?,
                                &self.cmp.view(&back.result, &rendered).0,
                                with_reasoning,
                            )
                        }),
                    },
                };
                if let Some(msg) = problem {
                    let how = if cuts == Cuts::EveryByte {
                        " (fed byte by byte)"
                    } else {
                        ""
                    };
                    // Byte by byte splits special tokens, which an external parser never gets.
                    let apart = !backend.is_builtin()
                        && cuts.splits_any(&rendered, &marker_occurrences(&rendered, special));
                    let list = if apart {
                        &mut report.token_split_violations
                    } else {
                        self.whole_list(report)
                    };
                    list.push(Violation {
                        invariant: Invariant::Roundtrip,
                        strategy: None,
                        cuts: Vec::new(),
                        failing_replays: 1,
                        cut_class: None,
                        message: format!(
                            "{}{msg}{how}; rendered: {}",
                            if turn_count > 1 {
                                format!("turn {}: ", t + 1)
                            } else {
                                String::new()
                            },
                            crate::event::excerpt(&String::from_utf8_lossy(&rendered))
                        ),
                        // The rendering is the input: `--roundtrip` makes it again.
                        replay: path_replay(
                            format!(
                                "{} --roundtrip{}",
                                replay_command(case, &backend.name(), &[]),
                                if cuts == Cuts::EveryByte {
                                    " --strategy bytes"
                                } else {
                                    ""
                                }
                            ),
                            self.routes.whole,
                        ),
                        path: self.routes.whole,
                        got: Vec::new(),
                    });
                    return;
                }
            }
        }
    }
}

/// The verdicts of one case's chunkings, taken in plan order (see
/// [`CaseRun::replay_chunkings`]).
struct Judging<'r, 'a> {
    run: &'r CaseRun<'a>,
    classes: CutClasses<'r, 'a>,
    first_failures: Vec<FirstFailure>,
    token_failures: Vec<FirstFailure>,
    /// Failures only against a one-delta whole input: not failures of the case.
    coalesced_failures: Vec<FirstFailure>,
    breakdown: Option<(Breakdown, String, Strategy, Vec<Cuts>)>,
}

impl<'r, 'a> Judging<'r, 'a> {
    fn new(run: &'r CaseRun<'a>) -> Self {
        Judging {
            run,
            classes: CutClasses::new(run),
            first_failures: Vec::new(),
            token_failures: Vec::new(),
            coalesced_failures: Vec::new(),
            breakdown: None,
        }
    }

    /// Counts one verdict into the report.
    fn add(&mut self, report: &mut CaseReport, v: Verdict) {
        let apart = self.run.splits_token(&v.cuts);
        let class = if v.broken.is_empty() {
            CutClass::TokenAligned
        } else {
            self.classes.of(&v.cuts)
        };
        if apart {
            report.token_split_replays += 1;
        } else {
            report.replays += 1;
            tally(report, &v);
            if let (None, Some((why, msg))) = (&self.breakdown, &v.breakdown) {
                self.breakdown = Some((*why, msg.clone(), v.strategy, v.cuts.clone()));
            }
        }
        for (inv, msg) in v.broken {
            let to_coalesced =
                self.run.routes.whole_is_coalesced() && inv == Invariant::SplitInvariance;
            let firsts = if apart {
                &mut self.token_failures
            } else if to_coalesced {
                &mut self.coalesced_failures
            } else {
                &mut self.first_failures
            };
            if !apart
                && !to_coalesced
                && let Some(existing) = report.violations.iter_mut().find(|x| x.invariant == inv)
            {
                existing.failing_replays += 1;
            } else if let Some(f) = firsts.iter_mut().find(|f| f.invariant == inv) {
                f.count += 1;
                if class < f.class {
                    f.class = class;
                    f.strategy = v.strategy;
                    f.cuts = v.cuts.clone();
                    f.message = msg;
                    f.got = v.got.clone();
                }
            } else {
                firsts.push(FirstFailure {
                    invariant: inv,
                    strategy: v.strategy,
                    cuts: v.cuts.clone(),
                    count: 1,
                    message: msg,
                    class,
                    got: v.got.clone(),
                });
            }
        }
    }

    /// The first failures (those only on split special tokens, those only against a
    /// one-delta whole input), the breakdown noted.
    fn finish(
        self,
        report: &mut CaseReport,
    ) -> (Vec<FirstFailure>, Vec<FirstFailure>, Vec<FirstFailure>) {
        if let Some((why, msg, strategy, cuts)) = self.breakdown {
            let case = self.run.case;
            let cuts: Vec<Vec<usize>> = cuts
                .iter()
                .zip(&case.turns)
                .map(|(c, t)| c.to_vec(t))
                .collect();
            report.status = why.into();
            report.not_applicable.push(format!(
                "{} under {strategy}: {msg}; replay: {}",
                report.status.as_str(),
                path_replay(
                    replay_command(case, &self.run.backend.name(), &cuts),
                    self.run.routes.chunked
                )
            ));
        }
        (
            self.first_failures,
            self.token_failures,
            self.coalesced_failures,
        )
    }
}

/// A large case whose biggest piece is at least this fraction of it replays one chunking at a
/// time (see [`CaseRun::replays_in_flight`]).
const LARGE_PIECE_SHARE: usize = 8;

/// The cut classes of failing replays, computed on tokens made at the first failure only.
struct CutClasses<'r, 'a> {
    run: &'r CaseRun<'a>,
    turns: std::sync::OnceLock<Vec<TurnTokens>>,
}

impl<'r, 'a> CutClasses<'r, 'a> {
    fn new(run: &'r CaseRun<'a>) -> Self {
        CutClasses {
            run,
            turns: std::sync::OnceLock::new(),
        }
    }

    /// The least innocent class among the turns' cuts.
    fn of(&self, cuts: &[Cuts]) -> CutClass {
        let run = self.run;
        let turns = self.turns.get_or_init(|| {
            let tokenizer = run.cfg.tokenizer_for(run.format);
            run.case
                .turns
                .iter()
                .map(|d| {
                    (
                        tokenizer.tokenize(d, run.format.special_tokens),
                        marker_occurrences(d, &run.special),
                    )
                })
                .collect()
        });
        cuts.iter()
            .zip(&run.case.turns)
            .zip(turns)
            .map(|((c, d), (tokens, special))| c.class(d, tokens, special))
            .max()
            .unwrap_or(CutClass::TokenAligned)
    }
}

/// `viewed` with each id the view set aside (generated by the engine, not on the wire)
/// replaced by the id conform reads off the wire for the call at the same place, when the
/// wire gives one: a format whose headers carry ids (kimi_k2's `functions.NAME:N`) is then
/// rendered as the model wrote it, not without the id the engines' readers require.
fn wire_ids<'a>(
    case: &Case,
    format: &Format,
    result: &crate::event::ParseResult,
    viewed: std::borrow::Cow<'a, crate::event::ParseResult>,
    data: &[u8],
) -> std::borrow::Cow<'a, crate::event::ParseResult> {
    let dropped: Vec<bool> = (0..result.calls.len())
        .map(|i| {
            result.calls[i].id.is_some() && viewed.calls.get(i).is_some_and(|c| c.id.is_none())
        })
        .collect();
    if !dropped.contains(&true) {
        return viewed;
    }
    let Ok(mut parser) = formats::modes::parser(format, &case.tools, &case.options, &case.request)
    else {
        return viewed;
    };
    let mut events = formats::run_chunks(parser.as_mut(), [data]);
    parser.finish(&mut events);
    let wire = crate::event::ParseResult::fold(&events);
    let mut r = viewed.into_owned();
    for (i, c) in r.calls.iter_mut().enumerate() {
        if dropped.get(i) == Some(&true)
            && let Some(id) = wire.calls.get(i).and_then(|w| w.id.clone())
        {
            c.id = Some(id);
        }
    }
    std::borrow::Cow::Owned(r)
}

fn tally(report: &mut CaseReport, v: &Verdict) {
    if v.error_free {
        report.error_free += 1;
    }
    if v.matched {
        report.matched += 1;
    }
}

/// The chunkings to replay besides the whole input: per strategy, one cut list per turn (a
/// turn with fewer chunkings than another is replayed whole in the rest), made as they are
/// taken.
fn plan_replays<'a>(
    case: &'a Case,
    markers: &'a [String],
    cfg: &'a RunConfig,
    sources: &'a [TurnSources<'a>],
) -> impl Iterator<Item = (Strategy, Vec<Cuts>)> + 'a {
    cfg.strategies
        .iter()
        .filter(|s| **s != Strategy::Whole)
        .flat_map(move |&s| {
            let mut per_turn: Vec<_> = sources
                .iter()
                .enumerate()
                .map(|(t, src)| {
                    turn_chunkings_iter(s, markers, &cfg.params, turn_salt(&case.id, t), src)
                })
                .collect();
            std::iter::from_fn(move || {
                let mut any = false;
                let cuts: Vec<Cuts> = per_turn
                    .iter_mut()
                    .map(|it| match it.next() {
                        Some(c) => {
                            any = true;
                            c
                        }
                        None => Cuts::At(Vec::new()),
                    })
                    .collect();
                any.then_some((s, cuts))
            })
        })
}

/// A case's turns under `cuts`, as one stream of an interleaved replay.
fn stream<'s>(case: &'s Case, cuts: &'s [Cuts]) -> builtin::Stream<'s> {
    builtin::Stream {
        tools: &case.tools,
        options: &case.options,
        request: &case.request,
        turns: &case.turns,
        cuts,
    }
}

/// The first chunking of each of the run's strategies (`whole` included), one cut list per turn
/// (a turn that strategy does not cut is whole); a strategy that cuts no turn is left out.
fn first_chunkings(
    case: &Case,
    markers: &[String],
    cfg: &RunConfig,
    sources: &[TurnSources<'_>],
) -> Vec<(Strategy, Vec<Cuts>)> {
    let mut out = vec![(Strategy::Whole, Vec::new())];
    for &s in cfg.strategies.iter().filter(|s| **s != Strategy::Whole) {
        let cuts: Vec<Option<Cuts>> = sources
            .iter()
            .enumerate()
            .map(|(t, src)| {
                turn_chunkings_iter(s, markers, &cfg.params, turn_salt(&case.id, t), src).next()
            })
            .collect();
        if cuts.iter().any(Option::is_some) {
            let cuts = cuts
                .into_iter()
                .map(|c| c.unwrap_or(Cuts::At(Vec::new())))
                .collect();
            out.push((s, cuts));
        }
    }
    out
}

/// Why a case's turns fed interleaved with another stream differ from the same turns fed
/// alone, or `None`: the events must be the same, not only their fold.
fn isolation_difference(
    alone: &[TurnOutcome],
    together: &[TurnOutcome],
    cmp: Compare,
) -> Option<String> {
    let session = alone.len() > 1;
    alone
        .iter()
        .zip(together)
        .enumerate()
        .find(|(_, (a, b))| a.events_hash != b.events_hash)
        .map(|(t, (a, b))| {
            let at = if session {
                format!("turn {}: ", t + 1)
            } else {
                String::new()
            };
            let what = match result_difference(&a.result, &b.result, cmp) {
                // The comparison's words are whole/chunking; here they are alone/interleaved.
                Some(d) => d
                    .replace("whole gives", "alone it gives")
                    .replace("this chunking", "interleaved"),
                None => "the same result from different events".into(),
            };
            format!("{at}{what}")
        })
        .or_else(|| {
            (alone.len() != together.len()).then(|| {
                format!(
                    "{} turn(s) alone, {} interleaved",
                    alone.len(),
                    together.len()
                )
            })
        })
}

/// The delimiters reasoning must not contain: the reasoning tags of a format that declares
/// them (its call markup may stay inside reasoning, `specs/streaming.md`), else every marker.
fn reasoning_markers(format: &str, markers: &[String]) -> Vec<String> {
    match crate::formats::by_id(format).and_then(|f| f.reasoning) {
        Some(syntax) => syntax.tags(),
        None => markers.to_vec(),
    }
}

/// Checks one replay's outcome against the whole-input baseline and the case's expectations.
///
/// conform's own parsers are judged on the expectation with the whole input, and every
/// chunking against the whole input. An external parser (`external`) is judged on the
/// expectation under every replay, and a chunking that differs from the whole input is blamed
/// only when it is the side that differs from the expectation: where the whole input fails
/// the expectation and the chunking meets it, the whole input's failure is the one reported.
/// With `parity` (a parser with both serving paths: the whole input went through the
/// non-streaming one, this replay through the streaming one) the difference is
/// `stream_batch_parity` rather than `split_invariance`.
fn judge<T: Judged>(
    (case, markers, cmp, external, parity): (&Case, &[String], Compare, bool, bool),
    whole: &Baseline,
    turns: &[T],
    strategy: Strategy,
    cuts: Vec<Cuts>,
) -> Verdict {
    let mut broken: Vec<(Invariant, String)> = Vec::new();
    let mut note = |inv: Invariant, msg: String| {
        if !broken.iter().any(|(i, _)| *i == inv) {
            broken.push((inv, msg));
        }
    };
    // Under tool_choice=none the server parses no calls: call markup is text by rule, and only
    // the reasoning tags (split by the format's layer still) are delimiters of the text.
    let text_markers: std::borrow::Cow<[String]> =
        if case.request.tool_choice() == crate::formats::request::ToolChoice::None {
            reasoning_markers(case.format, &[]).into()
        } else {
            markers.into()
        };
    let session = case.turns.len() > 1;
    let at = |t: usize| {
        if session {
            format!("turn {}: ", t + 1)
        } else {
            String::new()
        }
    };
    let mut error_free = true;
    let mut matched = case.label == Label::Accept;
    let mut any_error = false;
    for (t, judged) in turns.iter().enumerate() {
        let out = judged.outcome();
        let data = case.turns.get(t).map_or(&[][..], Vec::as_slice);
        let (r, id_problem) = cmp.view(&out.result, data);
        let r = r.as_ref();
        if !r.errors.is_empty() {
            error_free = false;
            any_error = true;
        }
        if !out.events_seen {
            // Result-only parsers: the delta contract cannot be checked.
        } else if let Some(a) = out.anomalies.first() {
            note(Invariant::DeltaContract, format!("{}{a}", at(t)));
        }
        let labelled = matches!(case.label, Label::Accept | Label::Reject);
        let label = if case.label == Label::Reject {
            Label::Reject
        } else {
            Label::Accept
        };
        let expect = case.expects.get(t).and_then(Option::as_ref);
        let mismatch = if labelled {
            expectation_mismatch(label, expect, r, cmp).or_else(|| id_problem.clone())
        } else {
            None
        };
        if strategy != Strategy::Whole
            && let Some(d) = judged.differs_from(whole, t, cmp, data)
        {
            let blamed = if external && labelled {
                // The expectation decides which side is wrong: this chunking when it fails it
                // (that failure is reported below), else the whole input when that fails it;
                // when both meet it they differ only where it says nothing.
                mismatch.is_none()
                    && whole.full().and_then(|w| w.get(t)).is_none_or(|w| {
                        let (wr, wid) = cmp.view(&w.result, data);
                        expectation_mismatch(label, expect, &wr, cmp)
                            .or(wid)
                            .is_none()
                    })
            } else {
                true
            };
            if blamed {
                // Against the other serving path's result the difference is one of paths.
                let inv = if parity {
                    Invariant::StreamBatchParity
                } else {
                    Invariant::SplitInvariance
                };
                note(inv, format!("{}{d}", at(t)));
            }
        }
        if matches!(case.label, Label::Accept | Label::Unlabelled)
            && r.errors.is_empty()
            && let Some(l) = markup_leak(
                &r.text,
                &text_markers,
                case.expects
                    .get(t)
                    .and_then(Option::as_ref)
                    .and_then(|e| e.text.as_deref()),
            )
        {
            note(Invariant::NoMarkupLeak, format!("{}{l}", at(t)));
        }
        if matches!(case.label, Label::Accept | Label::Unlabelled)
            && r.errors.is_empty()
            && let Some(reasoning) = r.reasoning.as_deref().filter(|s| !s.is_empty())
            && let Some(l) = markup_leak(
                reasoning,
                &reasoning_markers(case.format, markers),
                case.expects
                    .get(t)
                    .and_then(Option::as_ref)
                    .and_then(|e| e.reasoning.as_deref()),
            )
        {
            note(
                Invariant::NoMarkupLeak,
                format!("{}in reasoning: {l}", at(t)),
            );
        }
        if let Some(m) = mismatch {
            matched = false;
            if strategy == Strategy::Whole || external {
                note(Invariant::Expectation, format!("{}{m}", at(t)));
            }
        }
    }
    if case.label == Label::Reject && !any_error && (strategy == Strategy::Whole || external) {
        note(
            Invariant::Expectation,
            "must be rejected, but parsed without error".into(),
        );
    }
    Verdict {
        strategy,
        cuts,
        error_free,
        matched,
        broken,
        breakdown: None,
        got: Vec::new(),
    }
}

/// Records a crash, timeout or protocol error of a replay that is not one of the chunkings
/// (the determinism or roundtrip replay) as the case's breakdown, like one under a chunking:
/// which request an adapter breaks on is chance, and the status must not depend on it.
fn broke_outside_chunkings(report: &mut CaseReport, why: Breakdown, during: &str, msg: &str) {
    if report.status == Status::Pass {
        report.status = why.into();
    }
    report.not_applicable.push(format!(
        "{} during {during}: {msg}",
        Status::from(why).as_str()
    ));
}

/// The command line that replays a case through `parser` (a `--parser` value) with the given
/// cuts (one list per turn).
pub fn replay_command(case: &Case, parser: &str, cuts: &[Vec<usize>]) -> String {
    let mut cmd = format!(
        "conform parse --format {} {}",
        case.format,
        shell_quote(&case.path.display().to_string())
    );
    if parser != "builtin" {
        cmd.push_str(&format!(" --parser {}", shell_quote(parser)));
    }
    if let Some(id) = &case.line_id {
        cmd.push_str(&format!(" --line {}", shell_quote(id)));
    }
    // The options in force, spelled out: the command reproduces the replay even where they
    // came from a `conform.toml` that is not the file's nearest one any more.
    for (name, on) in case.options.iter() {
        cmd.push_str(&format!(" --option {}.{name}={on}", case.format));
    }
    // The request in force, spelled out likewise (it may come from the folder's conform.toml).
    for a in case.request.assignments() {
        cmd.push_str(&format!(" --request {}", shell_quote(&a)));
    }
    if cuts.iter().any(|c| !c.is_empty()) {
        let spec = cuts
            .iter()
            .map(|c| c.iter().map(usize::to_string).collect::<Vec<_>>().join(","))
            .collect::<Vec<_>>()
            .join("/");
        cmd.push_str(&format!(" --cuts {spec}"));
    }
    cmd
}

/// The case with its expectations read in a dialect. Where conform's parser, with the case's
/// options, reads the turn exactly as expected, the expectation becomes what it reads with the
/// dialect's options too (`pythonic.calls_after_text`: a list after prose is calls and the
/// prose before it text). Otherwise each expected call takes the name and id the dialect
/// reads, where those calls are the expected ones but for names and ids (`kimi_k2`'s header
/// dialects only change how a header is split). `None` when nothing changes.
fn in_dialect(case: &Case, format: &Format, dialect: &OptionValues) -> Option<Case> {
    let mut values = case.options.as_ref().clone();
    values.extend(dialect.iter().map(|(k, v)| (k.clone(), *v)));
    let read = |data: &[u8], values: &OptionValues| {
        let mut p = format.parser(&case.tools, values).ok()?;
        let mut events = formats::run_chunks(p.as_mut(), [data]);
        p.finish(&mut events);
        Some(crate::event::ParseResult::fold(&events))
    };
    let mut out = case.clone();
    let mut changed = false;
    for (t, data) in case.turns.iter().enumerate() {
        let Some(Some(e)) = out.expects.get_mut(t) else {
            continue;
        };
        if e.calls.is_none() {
            continue;
        }
        let got = read(data, &values)?;
        let base = read(data, &case.options)?;
        if base.calls == got.calls && base.text == got.text {
            continue;
        }
        let as_expected = e.calls.as_ref() == Some(&base.calls)
            && e.text.as_ref().is_none_or(|w| *w == base.text)
            && e.errors.as_ref().is_none_or(|w| *w == base.error_kinds())
            && e.error
                .as_ref()
                .is_none_or(|w| w.as_ref().map(|x| x.kind) == base.errors.first().map(|x| x.kind));
        if as_expected {
            let r = got;
            e.errors = e.errors.as_ref().map(|_| r.error_kinds());
            e.error = e.error.as_ref().map(|_| {
                r.errors
                    .first()
                    .map(|x| crate::harness::corpus::ExpectedError { kind: x.kind })
            });
            if e.warnings.is_some() {
                e.warnings = Some(r.warnings.iter().map(|w| w.kind.clone()).collect());
            }
            if e.order.is_some() {
                e.order = r.order;
            }
            if e.reasoning.is_some() {
                e.reasoning = r.reasoning;
            }
            if e.text.is_some() {
                e.text = Some(r.text);
            }
            e.calls = Some(r.calls);
            changed = true;
            continue;
        }
        let Some(calls) = e.calls.as_mut() else {
            continue;
        };
        let same_but_headers = got.calls.len() == calls.len()
            && got
                .calls
                .iter()
                .zip(calls.iter())
                .all(|(g, w)| g.arguments == w.arguments && g.server == w.server);
        if !same_but_headers {
            continue;
        }
        for (w, g) in calls.iter_mut().zip(got.calls) {
            if (&w.name, &w.id) != (&g.name, &g.id) {
                (w.name, w.id) = (g.name, g.id);
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

/// A replay command along a serving path: `--path batch|stream` added when there is one.
fn path_replay(mut cmd: String, path: Option<ReplayPath>) -> String {
    if let Some(p) = path {
        cmd.push_str(&format!(" --path {}", p.serving().as_str()));
    }
    cmd
}

/// Quotes a shell word when it needs it.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=+,@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::Builtin;
    use crate::event::{Sink, ToolCall};
    use crate::formats::{SpecialToken, StreamParser};
    use crate::harness::corpus::Expectation;
    use crate::tools::Tools;
    use std::path::PathBuf;
    use std::sync::Arc;

    /// Echoes text, but drops a `!` that ends a chunk: a chunk-boundary bug to be caught.
    struct Flaky;
    impl StreamParser for Flaky {
        fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
            let s = String::from_utf8_lossy(chunk);
            let s = s.strip_suffix('!').unwrap_or(&s);
            out.text(s);
        }
        fn finish(&mut self, _out: &mut dyn Sink) {}
    }
    fn flaky(_: &Tools) -> Box<dyn StreamParser> {
        Box::new(Flaky)
    }
    fn no_markers(_: &Tools) -> Vec<String> {
        vec!["<|x|>".into()]
    }
    fn echo_render(text: &str, _: &[ToolCall], _: &Tools) -> Result<Vec<u8>, String> {
        Ok(text.as_bytes().to_vec())
    }
    static FLAKY: Format = Format {
        id: "flaky",
        summary: "test parser with a chunk-boundary bug",
        new_parser: flaky,
        render: Some(echo_render),
        markers: no_markers,
        cdata: None,
        typing: None,
        special_tokens: &[],
        vocabulary: None,
        stop_tokens: &[],
        reasoning: None,
        options: &crate::formats::options::NoOptions,
        thinking: None,
        guided: true,
        channel_reasoning: None,
    };

    fn case(text: &str, expect: Option<Expectation>) -> Case {
        Case {
            id: "t/y_case.txt".into(),
            format: "flaky",
            label: Label::Accept,
            turns: vec![text.as_bytes().to_vec()],
            expects: vec![expect],
            tools: Arc::new(Tools::default()),
            path: PathBuf::from("t/y_case.txt"),
            line_id: None,
            recorded: None,
            options: Arc::default(),
            request: Arc::default(),
        }
    }

    #[test]
    fn a_chunk_boundary_bug_is_found_and_minimized_to_one_cut() {
        let e = Expectation {
            text: Some("hello! world".into()),
            ..Default::default()
        };
        let r = run_case_with(
            &case("hello! world", Some(e)),
            &FLAKY,
            &Builtin,
            &RunConfig::default(),
        );
        assert_eq!(r.status, Status::Fail);
        let v = &r.violations[0];
        assert_eq!(v.invariant, Invariant::SplitInvariance);
        // Byte cuts fail first, but a single cut at a token boundary shows it too: the
        // reproducer is the token-aligned one, what a server could send.
        assert_eq!(v.strategy, Some(Strategy::TwoCut));
        assert_eq!(v.cut_class, Some(CutClass::TokenAligned));
        assert_eq!(v.cuts, vec![vec![6]]);
        assert!(v.replay.ends_with("--cuts 6"), "{}", v.replay);
        assert!(r.error_free == r.replays);
        assert!(r.matched < r.replays);
    }

    #[test]
    fn token_strategies_and_recordings_are_replayed() {
        let cfg = |strategies: Vec<Strategy>| RunConfig {
            strategies,
            ..RunConfig::default()
        };
        // o200k_base: "hello" "!" " world": the "!" token ends a delta.
        let c = case("hello! world", None);
        let r = run_case_with(&c, &FLAKY, &Builtin, &cfg(vec![Strategy::Tokens]));
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.violations[0].strategy, Some(Strategy::Tokens));
        assert_eq!(r.replays, 2, "whole and one token chunking");
        let b = run_case_with(&c, &FLAKY, &Builtin, &cfg(vec![Strategy::Bursts]));
        assert_eq!(b.replays, 5, "whole and four bursts");

        let r = run_case_with(&c, &FLAKY, &Builtin, &cfg(vec![Strategy::Recorded]));
        assert_eq!(r.replays, 1, "no recording, no recorded chunking");
        let mut recorded = c.clone();
        recorded.recorded = Some(Arc::new(
            serde_json::from_str(r#"{"cuts": [3, 9]}"#).unwrap(),
        ));
        let r = run_case_with(&recorded, &FLAKY, &Builtin, &cfg(vec![Strategy::Recorded]));
        assert_eq!(r.replays, 2);
        assert!(
            r.violations
                .iter()
                .all(|v| v.strategy != Some(Strategy::Recorded)),
            "no delta of the recording ends at the !"
        );
        recorded.recorded = Some(Arc::new(serde_json::from_str(r#"{"cuts": [6]}"#).unwrap()));
        let r = run_case_with(&recorded, &FLAKY, &Builtin, &cfg(vec![Strategy::Recorded]));
        assert_eq!(r.violations[0].strategy, Some(Strategy::Recorded));
        assert_eq!(r.violations[0].cuts, vec![vec![6]]);
    }

    #[test]
    fn clean_input_passes_and_leaks_are_reported() {
        let r = run_case_with(
            &case("hello", None),
            &FLAKY,
            &Builtin,
            &RunConfig::default(),
        );
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        assert_eq!(r.matched, r.replays);
        let r = run_case_with(
            &case("a<|x|>b", None),
            &FLAKY,
            &Builtin,
            &RunConfig::default(),
        );
        assert!(
            r.violations
                .iter()
                .any(|v| v.invariant == Invariant::NoMarkupLeak)
        );
    }

    /// Removes `<|x|>` where a chunk holds it whole: fine for a server, which never splits it.
    struct TokenWhole;
    impl StreamParser for TokenWhole {
        fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
            out.text(&String::from_utf8_lossy(chunk).replace("<|x|>", ""));
        }
        fn finish(&mut self, _out: &mut dyn Sink) {}
    }
    fn token_whole(_: &Tools) -> Box<dyn StreamParser> {
        Box::new(TokenWhole)
    }
    static TOKENS: Format = Format {
        id: "flaky",
        summary: "test format whose delimiter is a special token",
        new_parser: token_whole,
        render: None,
        markers: no_markers,
        cdata: None,
        typing: None,
        special_tokens: &[SpecialToken::new("<|x|>", 1)],
        vocabulary: None,
        stop_tokens: &[],
        reasoning: None,
        options: &crate::formats::options::NoOptions,
        thinking: None,
        guided: true,
        channel_reasoning: None,
    };

    /// The built-in parsers, presented as an external one.
    struct External;
    impl Backend for External {
        fn name(&self) -> String {
            "external".into()
        }
        fn replay(
            &self,
            f: &Format,
            tools: &Tools,
            options: &OptionValues,
            request: &Request,
            turns: &[Vec<u8>],
            cuts: &[Cuts],
        ) -> Outcome {
            Builtin.replay(f, tools, options, request, turns, cuts)
        }
    }

    /// conform's parsers, taking a while per replay.
    struct Slow;
    impl Backend for Slow {
        fn name(&self) -> String {
            "slow".into()
        }
        fn replay(
            &self,
            f: &Format,
            tools: &Tools,
            options: &OptionValues,
            request: &Request,
            turns: &[Vec<u8>],
            cuts: &[Cuts],
        ) -> Outcome {
            std::thread::sleep(Duration::from_millis(20));
            Builtin.replay(f, tools, options, request, turns, cuts)
        }
    }

    #[test]
    fn a_spent_case_budget_lists_what_was_not_replayed_and_fails_nothing() {
        let c = case("plain text, no bug", None);
        let cfg = RunConfig {
            case_budget: Some(Duration::from_millis(50)),
            ..RunConfig::default()
        };
        let r = run_case_with(&c, &FLAKY, &Slow, &cfg);
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        let note = r
            .not_applicable
            .iter()
            .find(|n| n.starts_with("case budget"))
            .expect("the skipped replays are listed");
        assert!(note.contains("bytes") || note.contains("random"), "{note}");
        let full = run_case_with(&c, &FLAKY, &Builtin, &RunConfig::default());
        assert!(
            r.replays < full.replays,
            "{} vs {}",
            r.replays,
            full.replays
        );
    }

    /// conform's parsers as an adapter that crashes on its `nth` whole-input request.
    struct CrashesOnWhole {
        nth: usize,
        seen: std::sync::atomic::AtomicUsize,
    }
    impl Backend for CrashesOnWhole {
        fn name(&self) -> String {
            "crashes".into()
        }
        fn replay(
            &self,
            f: &Format,
            tools: &Tools,
            options: &OptionValues,
            request: &Request,
            turns: &[Vec<u8>],
            cuts: &[Cuts],
        ) -> Outcome {
            if matches!(cuts, [Cuts::At(c)] if c.is_empty())
                && self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == self.nth
            {
                return Outcome::Broke(Breakdown::Crash, "exited on purpose".into());
            }
            Builtin.replay(f, tools, options, request, turns, cuts)
        }
    }

    #[test]
    fn chunkings_are_planned_as_they_are_taken() {
        // usize::MAX bursts and random groupings: a list of them could not even be allocated
        // ("capacity overflow"); made one at a time, the first come at once.
        let c = case("some text to cut into tokens", None);
        let cfg = RunConfig {
            strategies: vec![Strategy::Bursts, Strategy::Random],
            params: ChunkingParams {
                bursts: usize::MAX,
                random_groupings: usize::MAX,
                ..ChunkingParams::default()
            },
            ..RunConfig::default()
        };
        let sources = TurnSources::of_case(&c, &FLAKY, None);
        let mut plan = plan_replays(&c, &[], &cfg, &sources);
        let first: Vec<_> = plan.by_ref().take(3).collect();
        assert_eq!(first.len(), 3);
        assert!(
            first
                .iter()
                .all(|(s, cuts)| *s == Strategy::Bursts && cuts.len() == 1)
        );
        // A session: a turn with fewer chunkings is replayed whole in the rest.
        let mut two = case("ab", None);
        two.turns.push(b"a longer second turn".to_vec());
        let cfg = RunConfig {
            strategies: vec![Strategy::TwoCut],
            ..RunConfig::default()
        };
        let sources = TurnSources::of_case(&two, &FLAKY, None);
        let all: Vec<_> = plan_replays(&two, &[], &cfg, &sources).collect();
        assert_eq!(all.len(), 19);
        assert_eq!(all[0].1[0], Cuts::At(vec![1]));
        assert_eq!(all[1].1[0], Cuts::At(vec![]));
    }

    #[test]
    fn a_crash_on_the_determinism_or_roundtrip_replay_is_a_crash_not_a_failure() {
        let kimi = formats::by_id("kimi_k2").unwrap();
        let mut c = case("plain text", None);
        c.format = "kimi_k2";
        let cfg = RunConfig {
            strategies: vec![Strategy::Whole, Strategy::Bytes],
            ..RunConfig::default()
        };
        // Whole-input requests: the first replay, the determinism replay, the roundtrip's.
        for (nth, during) in [(2, "the second whole replay"), (3, "the roundtrip replay")] {
            let backend = CrashesOnWhole {
                nth,
                seen: Default::default(),
            };
            let r = run_case_with(&c, kimi, &backend, &cfg);
            assert_eq!(r.status, Status::Crash, "{nth}: {:?}", r.violations);
            assert!(r.violations.is_empty(), "{nth}: {:?}", r.violations);
            assert!(
                r.not_applicable
                    .iter()
                    .any(|n| n == &format!("crash during {during}: exited on purpose")),
                "{:?}",
                r.not_applicable
            );
        }
        let fine = CrashesOnWhole {
            nth: 99,
            seen: Default::default(),
        };
        assert_eq!(run_case_with(&c, kimi, &fine, &cfg).status, Status::Pass);
    }

    #[test]
    fn an_external_parser_is_not_blamed_for_split_special_tokens() {
        let e = Expectation {
            text: Some("ab".into()),
            ..Default::default()
        };
        let c = case("a<|x|>b", Some(e));
        let cfg = RunConfig::default();

        let r = run_case_with(&c, &TOKENS, &External, &cfg);
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        assert!(r.token_split_replays > 0);
        assert_eq!(
            r.matched, r.replays,
            "the rates count only whole-token replays"
        );
        // The expectation decides: a replay that fails it is blamed, not the whole input.
        let v = r
            .token_split_violations
            .iter()
            .find(|v| v.invariant == Invariant::Expectation)
            .expect("the split replays fail the expectation");
        assert_eq!(v.cuts.len(), 1);
        assert!(v.cuts[0].iter().any(|&k| k > 1 && k < 6), "{:?}", v.cuts);

        // conform's own parsers must hold under every cut.
        let r = run_case_with(&c, &TOKENS, &Builtin, &cfg);
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.token_split_replays, 0);

        // Delimiters that are ordinary text (XML tags, SSE fields) are split by real streams.
        let plain = Format {
            special_tokens: &[],
            reasoning: None,
            options: &crate::formats::options::NoOptions,
            cdata: None,
            typing: None,
            ..TOKENS
        };
        let r = run_case_with(&c, &plain, &External, &cfg);
        assert_eq!(r.status, Status::Fail);
    }

    #[test]
    fn a_large_case_is_replayed_lean_and_its_bugs_still_found() {
        let big = "!".repeat(crate::harness::digest::LARGE_CASE_BYTES);
        let cfg = RunConfig {
            strategies: vec![Strategy::Whole, Strategy::TwoCut],
            params: ChunkingParams {
                two_cut_cap: 4,
                ..ChunkingParams::default()
            },
            minimize_budget: 20,
            ..RunConfig::default()
        };
        let r = run_case_with(&case(&big, None), &FLAKY, &Builtin, &cfg);
        assert_eq!(r.status, Status::Fail);
        let v = &r.violations[0];
        assert_eq!(v.invariant, Invariant::SplitInvariance);
        assert_eq!(v.failing_replays, 4);
        assert_eq!(v.cuts[0].len(), 1, "{:?}", v.cuts);
        assert!(v.message.contains("text differs"), "{}", v.message);
        // Clean input passes lean, roundtrip included (Flaky echoes text).
        let clean = "a".repeat(crate::harness::digest::LARGE_CASE_BYTES);
        let r = run_case_with(&case(&clean, None), &FLAKY, &Builtin, &cfg);
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        assert_eq!(r.replays, 5);
        // A rendering that does not give the text back is found lean too, its full result
        // dropped once rendered.
        fn adds_a_letter(text: &str, _: &[ToolCall], _: &Tools) -> Result<Vec<u8>, String> {
            Ok(format!("{text}b").into_bytes())
        }
        static ADDS: Format = Format {
            id: "flaky",
            summary: "test parser whose renderer adds a letter",
            new_parser: flaky,
            render: Some(adds_a_letter),
            markers: no_markers,
            cdata: None,
            typing: None,
            special_tokens: &[],
            vocabulary: None,
            stop_tokens: &[],
            reasoning: None,
            options: &crate::formats::options::NoOptions,
            thinking: None,
            guided: true,
            channel_reasoning: None,
        };
        let r = run_case_with(&case(&clean, None), &ADDS, &Builtin, &cfg);
        assert_eq!(r.status, Status::Fail);
        let v = &r.violations[0];
        assert_eq!(v.invariant, Invariant::Roundtrip);
        assert!(v.message.contains("came back as"), "{}", v.message);
    }

    /// Reasoning for the upper-case letters of each chunk, emitted before the chunk's other
    /// text: the same text and reasoning under every cut, in another order.
    struct Reorders;
    impl StreamParser for Reorders {
        fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
            let s = String::from_utf8_lossy(chunk);
            let upper: String = s.chars().filter(char::is_ascii_uppercase).collect();
            let rest: String = s.chars().filter(|c| !c.is_ascii_uppercase()).collect();
            out.reasoning(&upper);
            out.text(&rest);
        }
        fn finish(&mut self, _out: &mut dyn Sink) {}
    }
    fn reorders(_: &Tools) -> Box<dyn StreamParser> {
        Box::new(Reorders)
    }
    static REORDERS: Format = Format {
        id: "reorders",
        summary: "test parser that reorders reasoning and text by chunk",
        new_parser: reorders,
        stop_tokens: &[],
        render: None,
        markers: no_markers,
        cdata: None,
        typing: None,
        special_tokens: &[],
        vocabulary: None,
        reasoning: None,
        options: &crate::formats::options::NoOptions,
        thinking: None,
        guided: true,
        channel_reasoning: None,
    };

    #[test]
    fn the_order_of_reasoning_and_text_is_judged_under_every_cut() {
        let mut c = case("aB", None);
        c.format = "reorders";
        let r = run_case_with(&c, &REORDERS, &Builtin, &RunConfig::default());
        assert_eq!(r.status, Status::Fail);
        let v = &r.violations[0];
        assert_eq!(v.invariant, Invariant::SplitInvariance);
        assert!(
            v.message
                .contains("whole gives [reasoning, text], this chunking [text, reasoning]"),
            "{}",
            v.message
        );
        assert_eq!(v.cuts, vec![vec![1]]);
        // The expectation's order is checked too.
        let e = Expectation {
            order: Some(vec![
                crate::event::Part::Text,
                crate::event::Part::Reasoning,
            ]),
            ..Default::default()
        };
        let mut c = case("B", Some(e));
        c.format = "reorders";
        let r = run_case_with(&c, &REORDERS, &Builtin, &RunConfig::default());
        assert_eq!(r.violations[0].invariant, Invariant::Expectation);
        assert!(
            r.violations[0].message.contains("is [reasoning] but"),
            "{}",
            r.violations[0].message
        );
    }

    #[test]
    fn expectation_mismatch_is_reported_once_on_the_whole_input() {
        let e = Expectation {
            text: Some("bye".into()),
            ..Default::default()
        };
        let r = run_case_with(
            &case("hello", Some(e)),
            &FLAKY,
            &Builtin,
            &RunConfig::default(),
        );
        assert_eq!(r.violations.len(), 1);
        assert_eq!(r.violations[0].invariant, Invariant::Expectation);
        assert_eq!(r.matched, 0);
    }

    /// Echoes text; `Bang` drops every `!`, `Glued` a `!` followed by more in its chunk.
    struct Echo(fn(&str, bool) -> String);
    impl StreamParser for Echo {
        fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
            out.text(&(self.0)(&String::from_utf8_lossy(chunk), false));
        }
        fn finish(&mut self, _out: &mut dyn Sink) {}
    }
    fn echo(_: &Tools) -> Box<dyn StreamParser> {
        Box::new(Echo(|s, _| s.to_string()))
    }
    fn bang(_: &Tools) -> Box<dyn StreamParser> {
        Box::new(Echo(|s, _| s.replace('!', "")))
    }
    fn glued(_: &Tools) -> Box<dyn StreamParser> {
        Box::new(Echo(|s, _| {
            let end = s.ends_with('!');
            let mut t = s.replace('!', "");
            if end {
                t.push('!');
            }
            t
        }))
    }
    static ECHO: Format = Format {
        new_parser: echo,
        stop_tokens: &["<|x|>"],
        typing: None,
        ..Format::new(
            "flaky",
            "test parser",
            echo,
            no_markers,
            &crate::formats::options::NoOptions,
        )
    };
    static BANG: Format = Format {
        new_parser: bang,
        typing: None,
        ..Format::new(
            "flaky",
            "test parser",
            bang,
            no_markers,
            &crate::formats::options::NoOptions,
        )
    };
    static GLUED: Format = Format {
        new_parser: glued,
        typing: None,
        ..Format::new(
            "flaky",
            "test parser",
            glued,
            no_markers,
            &crate::formats::options::NoOptions,
        )
    };

    /// An external parser with a non-streaming and a streaming path, each one of conform's
    /// test parsers.
    struct TwoPaths {
        batch: &'static Format,
        stream: &'static Format,
        paths: crate::backends::Paths,
        seen: std::sync::Mutex<Vec<Option<crate::backends::ServingPath>>>,
    }
    impl TwoPaths {
        fn new(batch: &'static Format, stream: &'static Format, both: bool) -> Self {
            TwoPaths {
                batch,
                stream,
                paths: crate::backends::Paths {
                    batch: both,
                    stream: true,
                },
                seen: Default::default(),
            }
        }
    }
    impl Backend for TwoPaths {
        fn name(&self) -> String {
            "cmd:two-paths".into()
        }
        fn paths(&self) -> crate::backends::Paths {
            self.paths
        }
        fn replay(
            &self,
            f: &Format,
            tools: &Tools,
            options: &OptionValues,
            request: &Request,
            turns: &[Vec<u8>],
            cuts: &[Cuts],
        ) -> Outcome {
            self.replay_on(None, f, tools, options, request, turns, cuts)
        }
        #[allow(clippy::too_many_arguments)]
        fn replay_on(
            &self,
            path: Option<crate::backends::ServingPath>,
            _f: &Format,
            tools: &Tools,
            options: &OptionValues,
            request: &Request,
            turns: &[Vec<u8>],
            cuts: &[Cuts],
        ) -> Outcome {
            self.seen.lock().unwrap().push(path);
            let f = match path {
                Some(crate::backends::ServingPath::Batch) => self.batch,
                _ => self.stream,
            };
            Builtin.replay(f, tools, options, request, turns, cuts)
        }
    }

    fn text_case(text: &str, want: &str) -> Case {
        let e = Expectation {
            text: Some(want.into()),
            ..Default::default()
        };
        case(text, Some(e))
    }

    fn chars() -> RunConfig {
        RunConfig {
            strategies: vec![Strategy::Whole, Strategy::Chars],
            ..RunConfig::default()
        }
    }

    #[test]
    fn the_whole_input_goes_through_the_batch_path_and_chunkings_through_the_stream() {
        let b = TwoPaths::new(&ECHO, &ECHO, true);
        let r = run_case_with(&text_case("a!b", "a!b"), &FLAKY, &b, &chars());
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        let seen = b.seen.lock().unwrap();
        use crate::backends::ServingPath::{Batch, Stream};
        // The whole input, its determinism replay, the roundtrip (whole and byte by byte):
        // batch; the chunking and the one-delta stream: stream.
        assert_eq!(
            seen.iter().filter(|p| **p == Some(Batch)).count(),
            4,
            "{seen:?}"
        );
        assert_eq!(
            seen.iter().filter(|p| **p == Some(Stream)).count(),
            2,
            "{seen:?}"
        );
    }

    #[test]
    fn a_batch_bug_is_blamed_on_the_batch_path_not_on_the_chunkings() {
        let b = TwoPaths::new(&BANG, &ECHO, true);
        let r = run_case_with(&text_case("a!b", "a!b"), &FLAKY, &b, &chars());
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        let v = &r.violations[0];
        assert_eq!(v.invariant, Invariant::Expectation);
        assert_eq!(v.path, Some(ReplayPath::Batch));
        assert!(v.replay.ends_with("--path batch"), "{}", v.replay);
        assert!(r.coalesced_violations.is_empty());
    }

    #[test]
    fn a_stream_bug_is_an_expectation_failure_of_the_chunking_that_shows_it() {
        let b = TwoPaths::new(&ECHO, &FLAKY, true);
        let r = run_case_with(&text_case("a!b", "a!b"), &FLAKY, &b, &chars());
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        let v = &r.violations[0];
        assert_eq!(v.invariant, Invariant::Expectation);
        assert_eq!(v.path, Some(ReplayPath::Stream));
        assert_eq!(v.strategy, Some(Strategy::Chars));
        assert_eq!(v.cuts, vec![vec![2]]);
        assert!(v.replay.ends_with("--path stream"), "{}", v.replay);
        // Without an expectation to decide, the chunking that differs is still blamed: the
        // streaming path against the non-streaming one.
        let r = run_case_with(&case("a!b", None), &FLAKY, &b, &chars());
        assert_eq!(r.violations[0].invariant, Invariant::StreamBatchParity);
    }

    #[test]
    fn paths_that_disagree_are_a_parity_finding_blamed_by_the_expectation() {
        // The batch path drops every `!`, the streaming one keeps it: on an `i_`-like case
        // (no expectation) the two paths disagree and the streaming side is named.
        let b = TwoPaths::new(&BANG, &ECHO, true);
        let r = run_case_with(&case("a!b", None), &FLAKY, &b, &chars());
        assert_eq!(r.status, Status::Fail);
        let v = &r.violations[0];
        assert_eq!(
            v.invariant,
            Invariant::StreamBatchParity,
            "{:?}",
            r.violations
        );
        assert_eq!(v.path, Some(ReplayPath::Stream));
        assert!(v.message.contains("text differs"), "{}", v.message);
        // The one-delta stream disagrees with the batch path too: listed apart, by its name.
        assert!(
            r.coalesced_violations
                .iter()
                .any(|v| v.invariant == Invariant::StreamBatchParity),
            "{:?}",
            r.coalesced_violations
        );
        // With an expectation that sides with the streaming path, the batch path is blamed
        // (as `expectation`), never the stream.
        let r = run_case_with(&text_case("a!b", "a!b"), &FLAKY, &b, &chars());
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        assert_eq!(r.violations[0].invariant, Invariant::Expectation);
        assert_eq!(r.violations[0].path, Some(ReplayPath::Batch));
        // Paths that agree: no finding; a parser with one path has none to make.
        let agree = TwoPaths::new(&ECHO, &ECHO, true);
        let r = run_case_with(&case("a!b", None), &FLAKY, &agree, &chars());
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        let one = TwoPaths::new(&ECHO, &FLAKY, false);
        let r = run_case_with(&case("a!b", None), &FLAKY, &one, &chars());
        assert!(
            r.violations
                .iter()
                .chain(&r.coalesced_violations)
                .all(|v| v.invariant != Invariant::StreamBatchParity),
            "{:?}",
            r.violations
        );
    }

    thread_local! {
        /// What [`Shared`] holds back, shared by every instance on the thread: the bug.
        static HELD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Echoes text holding back the last byte fed until more comes: correct alone under every
    /// cut, but the held byte lives in a thread-local, so two instances share it.
    struct Shared;
    impl StreamParser for Shared {
        fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
            HELD.with(|h| {
                let mut h = h.borrow_mut();
                h.extend_from_slice(chunk);
                let keep = h.pop();
                out.text(&String::from_utf8_lossy(&h));
                h.clear();
                h.extend(keep);
            });
        }
        fn finish(&mut self, out: &mut dyn Sink) {
            HELD.with(|h| {
                let mut h = h.borrow_mut();
                out.text(&String::from_utf8_lossy(&h));
                h.clear();
            });
        }
    }
    fn shared(_: &Tools) -> Box<dyn StreamParser> {
        Box::new(Shared)
    }
    static SHARED: Format = Format {
        new_parser: shared,
        typing: None,
        ..Format::new(
            "flaky",
            "test parser sharing state between instances",
            shared,
            no_markers,
            &crate::formats::options::NoOptions,
        )
    };

    fn named(id: &str, text: &str) -> Case {
        let mut c = text_case(text, text);
        c.id = id.into();
        c.path = PathBuf::from(id);
        c
    }

    #[test]
    fn a_parser_sharing_state_between_instances_breaks_stream_isolation() {
        let (a, b) = (named("t/y_a.txt", "abc"), named("t/y_b.txt", "xyz"));
        // Alone, the shared parser holds every invariant.
        let r = run_case_with(&a, &SHARED, &Builtin, &chars());
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        // Interleaved with another stream, its held byte goes to the other instance.
        let r = run_case_paired(&a, Some(&b), &SHARED, &Builtin, &chars());
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        let v = &r.violations[0];
        assert_eq!(v.invariant, Invariant::StreamIsolation);
        assert!(v.message.contains("t/y_b.txt"), "{}", v.message);
        assert!(v.message.contains("alone it gives"), "{}", v.message);
        assert!(
            v.replay
                .starts_with("conform run t/y_a.txt t/y_b.txt --strategies whole,"),
            "{}",
            v.replay
        );
        // Both strategies interleave (whole: one piece of each) and both show it.
        assert_eq!(v.failing_replays, 2, "{v:?}");
        // A parser without shared state passes the same check.
        let r = run_case_paired(&a, Some(&b), &ECHO, &Builtin, &chars());
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
    }

    #[test]
    fn each_case_is_interleaved_with_the_next_of_its_format() {
        let mut c = named("t/y_c.txt", "c");
        c.format = "hermes";
        let cases = vec![
            named("t/y_a.txt", "a"),
            c,
            named("t/y_b.txt", "b"),
            named("t/y_d.txt", "d"),
        ];
        assert_eq!(
            partners(&cases, &Builtin),
            vec![Some(2), None, Some(3), Some(0)]
        );
        // An adapter gets one stream per request: nothing to interleave.
        assert_eq!(partners(&cases, &External), vec![None; 4]);
    }

    #[test]
    fn a_stream_bug_that_one_delta_also_shows_is_shrunk_to_one_cut_not_to_none() {
        // The stream path drops every '!' whatever the deltas: the one-delta replay fails too,
        // but the reproducer of a streaming failure must stay a stream of two deltas at least.
        let b = TwoPaths::new(&ECHO, &BANG, true);
        let r = run_case_with(&text_case("a!b", "a!b"), &FLAKY, &b, &chars());
        assert_eq!(r.status, Status::Fail);
        let v = &r.violations[0];
        assert_eq!(v.path, Some(ReplayPath::Stream));
        assert_eq!(
            v.cuts.iter().map(Vec::len).sum::<usize>(),
            1,
            "{:?}",
            v.cuts
        );
        assert!(v.replay.contains("--cuts"), "{}", v.replay);
    }

    #[test]
    fn the_one_delta_stream_is_judged_apart_and_never_fails_the_case() {
        let b = TwoPaths::new(&ECHO, &GLUED, true);
        let r = run_case_with(&text_case("a!b", "a!b"), &FLAKY, &b, &chars());
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        assert_eq!(r.coalesced_violations.len(), 1);
        let v = &r.coalesced_violations[0];
        assert_eq!(v.invariant, Invariant::Expectation);
        assert_eq!(v.path, Some(ReplayPath::Coalesced));
        assert!(v.replay.ends_with("--path stream"), "{}", v.replay);
        // A streaming-only parser: the whole input is that one delta, judged apart as well.
        let b = TwoPaths::new(&ECHO, &GLUED, false);
        let r = run_case_with(&text_case("a!b", "a!b"), &FLAKY, &b, &chars());
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        assert!(
            r.coalesced_violations
                .iter()
                .all(|v| v.path == Some(ReplayPath::Coalesced)),
            "{:?}",
            r.coalesced_violations
        );
        assert!(!r.coalesced_violations.is_empty());
    }

    #[test]
    fn an_external_parser_gets_each_turn_up_to_its_stop_token() {
        let c = text_case("ab<|x|>", "ab");
        let r = run_case_with(&c, &ECHO, &External, &chars());
        assert_eq!(r.status, Status::Pass, "{:?}", r.violations);
        // conform's own parser is given every byte.
        let r = run_case_with(&c, &ECHO, &Builtin, &chars());
        assert_eq!(r.status, Status::Fail);
    }

    #[test]
    fn a_dialect_reads_the_expected_ids_as_its_reference_parser_does() {
        // kimi_k2's engines keep the whole header as the id; conform's spec takes the text
        // after its last ':'. Over the corpus, the reference parser in that dialect gives
        // every expected call back but for its id, which is the header.
        let corpus = crate::harness::corpus::load(
            &["corpus/kimi_k2".to_string()],
            &crate::harness::corpus::LoadOptions::default(),
        );
        let kimi = formats::by_id("kimi_k2").unwrap();
        let dialect: OptionValues = [("id_whole_header".to_string(), true)]
            .into_iter()
            .collect();
        let mut changed = 0;
        for case in corpus.cases.iter().filter(|c| c.label == Label::Accept) {
            let Some(read) = in_dialect(case, kimi, &dialect) else {
                continue;
            };
            changed += 1;
            for (a, b) in read.expects.iter().zip(&case.expects) {
                let (Some(a), Some(b)) = (a, b) else { continue };
                for (x, y) in a.calls.iter().flatten().zip(b.calls.iter().flatten()) {
                    assert_eq!(
                        (&x.name, &x.arguments),
                        (&y.name, &y.arguments),
                        "{}",
                        case.id
                    );
                    if let (Some(whole), Some(tail)) = (&x.id, &y.id) {
                        assert!(
                            whole.ends_with(tail.as_str()) && whole.contains(':'),
                            "{}: {whole} vs {tail}",
                            case.id
                        );
                    }
                }
            }
        }
        assert!(
            changed > 20,
            "{changed} cases read differently in the dialect"
        );
    }

    #[test]
    fn a_name_dialect_reads_the_expected_names_with_their_dotted_path() {
        let corpus = crate::harness::corpus::load(
            &["corpus/kimi_k2/y_name_dotted_last_segment.txt".to_string()],
            &crate::harness::corpus::LoadOptions::default(),
        );
        let kimi = formats::by_id("kimi_k2").unwrap();
        let case = &corpus.cases[0];
        let dialect: OptionValues = [("name_keeps_path".to_string(), true)]
            .into_iter()
            .collect();
        let read = in_dialect(case, kimi, &dialect).expect("the name changes");
        let call = |c: &Case| c.expects[0].as_ref().unwrap().calls.as_ref().unwrap()[0].clone();
        assert_eq!(
            (call(case).name, call(&read).name),
            ("b".into(), "a.b".into())
        );
        assert_eq!(call(case).arguments, call(&read).arguments);
        // Neither dialect touches a call without a dotted path.
        let plain = crate::harness::corpus::load(
            &["corpus/kimi_k2/y_seed_single_call.txt".to_string()],
            &crate::harness::corpus::LoadOptions::default(),
        );
        assert!(in_dialect(&plain.cases[0], kimi, &dialect).is_none());
    }

    #[test]
    fn a_reading_dialect_makes_the_expectation_what_it_reads() {
        // pythonic's spec reads a list after prose as text; SGLang, Dynamo and the gateway
        // read it as calls. In their dialect the expectation is that reading, prose and all.
        let load = |p: &str| {
            crate::harness::corpus::load(
                &[p.to_string()],
                &crate::harness::corpus::LoadOptions::default(),
            )
        };
        let corpus = load("corpus/pythonic/y_list_later_in_prose_is_text.txt");
        let py = formats::by_id("pythonic").unwrap();
        let dialect: OptionValues = [("calls_after_text".to_string(), true)]
            .into_iter()
            .collect();
        let read = in_dialect(&corpus.cases[0], py, &dialect).expect("the reading changes");
        let e = read.expects[0].as_ref().unwrap();
        assert_eq!(e.text.as_deref(), Some("Let me check the weather: "));
        let calls = e.calls.as_ref().unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(e.error, Some(None));
        // A case the dialect reads as the spec does is left alone.
        let plain = load("corpus/pythonic/y_bracketed_prose_is_text.txt");
        assert!(in_dialect(&plain.cases[0], py, &dialect).is_none());
        // A case whose expectation is not conform's reading is not rewritten to one.
        let mut off = corpus.cases[0].clone();
        off.expects[0].as_mut().unwrap().text = Some("something else".into());
        assert!(in_dialect(&off, py, &dialect).is_none());
    }
}
