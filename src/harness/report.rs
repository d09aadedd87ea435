//! `report.json`: the versioned, deterministic record of a run (`specs/report.md`).
//!
//! Everything but the `timings` and `adapters` sections is a pure function of the corpus, the seed, the options
//! and the parsers, so two runs with the same seed give byte-identical reports apart from it.

use super::chunking::{ChunkingParams, CutClass, Strategy};
use super::corpus::{Case, CorpusError, Label, hex};
use super::invariants::Invariant;
use super::run::{CaseReport, Status, Violation};
use super::serving::{Got, ReplayPath};
use crate::backends::adapter::{AdapterStats, EngineTime};
use crate::formats::OptionValues;
use crate::formats::request::Request;
use crate::harness::known::KnownFailures;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The schema version written in every report; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole report: one or more parser runs over the same corpus and chunkings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Always [`SCHEMA_VERSION`] for reports this version writes.
    pub schema_version: u32,
    /// The tool that wrote the report.
    pub tool: Tool,
    /// The master seed of every seeded chunking.
    pub seed: u64,
    /// The strategies replayed.
    pub strategies: Vec<String>,
    /// The chunking parameters.
    pub chunking: Chunking,
    /// The shard this report covers, if the corpus was split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// For a report of part of a corpus (a shard, or a merge of some shards): the whole
    /// corpus it was cut from, so that shards of another corpus are not merged with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole: Option<WholeCorpus>,
    /// For a merge of some shards only (`conform report merge --partial`): which ones. The
    /// cases of the others were not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<Partial>,
    /// What was loaded.
    pub corpus: CorpusInfo,
    /// One entry per parser judged.
    pub runs: Vec<Run>,
    /// Case-by-case comparison with a baseline, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// What each external parser's adapter said and left on stderr, by `--parser` value;
    /// kept apart like `timings` because process ids and logs change from run to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapters: Option<BTreeMap<String, AdapterOut>>,
    /// Wall-clock facts, kept apart because they change from run to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

/// One adapter's hello, counters and stderr.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterOut {
    /// The adapter's own name for its parser.
    pub name: String,
    /// The formats its hello listed.
    pub formats: Vec<String>,
    /// Requests, starts, crashes, timeouts and protocol errors.
    pub stats: AdapterStats,
    /// Total bytes its copies wrote to stderr.
    pub stderr_bytes: u64,
    /// The last 64 KiB of that, each line prefixed with the copy's pid.
    pub stderr_tail: String,
    /// The engine's own parse time per format, from the responses' `engine_ns`
    /// (`specs/adapter.md` §2.6); empty when the adapter reports none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub engine_ns: BTreeMap<String, EngineTime>,
}

/// Name and version of the tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// Always `conform`.
    pub name: String,
    /// The crate version.
    pub version: String,
}

/// Chunking parameters, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chunking {
    /// Random groupings per case.
    pub random_groupings: usize,
    /// Largest random chunk, in bytes.
    pub random_max_chunk: usize,
    /// Most single-cut replays per transcript.
    pub two_cut_cap: usize,
    /// Seeded `bursts` groupings per case.
    #[serde(default)]
    pub bursts: usize,
    /// Most tokens per delta in `bursts`.
    #[serde(default)]
    pub burst_max_tokens: usize,
    /// The tokenizer given with `--tokenizer` (a file or a vocabulary id), or `by format`: each
    /// format's own (`tokenizers`).
    #[serde(default)]
    pub tokenizer: String,
    /// Which tokenizer cut each format's token-aligned replays, by format id: its vocabulary
    /// and the package the file comes from, or `o200k_base` and why (`specs/tokenizers.md`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tokenizers: BTreeMap<String, String>,
}

impl Chunking {
    /// The chunking section of a run with these parameters and tokenizer.
    pub fn new(p: &ChunkingParams, tokenizer: &str) -> Chunking {
        Chunking {
            random_groupings: p.random_groupings,
            random_max_chunk: p.random_max_chunk,
            two_cut_cap: p.two_cut_cap,
            bursts: p.bursts,
            burst_max_tokens: p.burst_max_tokens,
            tokenizer: tokenizer.to_string(),
            tokenizers: BTreeMap::new(),
        }
    }

    /// The same parameters, whatever formats each covers (shards of one run).
    fn same_parameters(&self, other: &Chunking) -> bool {
        Chunking {
            tokenizers: BTreeMap::new(),
            ..self.clone()
        } == Chunking {
            tokenizers: BTreeMap::new(),
            ..other.clone()
        }
    }
}

/// Which part of a sharded corpus a report covers (`index` counts from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    /// This shard, 1..=count.
    pub index: u32,
    /// How many shards the corpus was split into.
    pub count: u32,
}

impl Shard {
    /// Parses `K/N`.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("invalid shard {s:?}: expected K/N, e.g. 2/4"))?;
        let index: u32 = k
            .trim()
            .parse()
            .map_err(|_| format!("invalid shard index {k:?}"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("invalid shard count {n:?}"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!("invalid shard {s:?}: need 1 <= K <= N"));
        }
        Ok(Shard { index, count })
    }

    /// Whether a case id belongs to this shard (a stable hash of the id, so shards partition).
    pub fn contains(&self, case_id: &str) -> bool {
        crate::harness::chunking::stable_hash(case_id) % u64::from(self.count)
            == u64::from(self.index - 1)
    }
}

/// The corpus a shard was cut from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WholeCorpus {
    /// Its digest (as `corpus.digest` of an unsharded run).
    pub digest: String,
    /// Its cases.
    pub cases: usize,
}

/// The shards a partial merge holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partial {
    /// How many shards the corpus was split into.
    pub count: u32,
    /// The shards merged, ascending (1-based); the others are missing.
    pub shards: Vec<u32>,
}

impl Partial {
    /// The shards missing, ascending.
    pub fn missing(&self) -> Vec<u32> {
        (1..=self.count)
            .filter(|k| !self.shards.contains(k))
            .collect()
    }

    /// `shards 1, 3 of 4 (2, 4 missing)`.
    pub fn describe(&self) -> String {
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        format!(
            "shards {} of {} ({} missing)",
            list(&self.shards),
            self.count,
            list(&self.missing())
        )
    }
}

/// What the corpus held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusInfo {
    /// SHA-256 over the sorted per-case digests: equal digests, equal corpus.
    pub digest: String,
    /// Cases loaded (in this shard).
    pub cases: usize,
    /// Files that could not be loaded.
    pub errors: Vec<CorpusErrorOut>,
}

/// A corpus file that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusErrorOut {
    /// The file.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

/// One parser's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// The parser (`builtin`, or `cmd:…` for an adapter).
    pub parser: String,
    /// Overall counts.
    pub totals: TotalsOut,
    /// Counts per format, by id.
    pub formats: BTreeMap<String, TotalsOut>,
    /// The options in force for every case of a format (set on the command line, or by
    /// `conform.toml` files that agree), where they differ from its defaults; by format id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, OptionValues>,
    /// Every case, sorted by id.
    pub cases: Vec<CaseOut>,
}

impl Run {
    /// The cases that break only when a special token is cut (judged apart, not failed).
    pub fn token_split_cases(&self) -> Vec<&CaseOut> {
        self.cases
            .iter()
            .filter(|c| !c.token_split_violations.is_empty())
            .collect()
    }
}

/// Counts and rates of a set of cases.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TotalsOut {
    /// Cases replayed.
    pub cases: usize,
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed (any status but pass, known failures excluded).
    pub failed: usize,
    /// Known failures that still fail.
    pub xfail: usize,
    /// Known failures that now pass: the mark must be removed.
    pub xpass: usize,
    /// Replays run.
    pub replays: usize,
    /// Replays of y_ and unlabelled cases.
    pub parse_replays: usize,
    /// Of those, replays without an error.
    pub parse_ok: usize,
    /// `parse_ok / parse_replays`, or null.
    pub parse_success_rate: Option<f64>,
    /// Replays of y_ cases.
    pub match_replays: usize,
    /// Of those, replays equal to the expectation.
    pub match_ok: usize,
    /// `match_ok / match_replays`, or null.
    pub match_rate: Option<f64>,
    /// Cases breaking each invariant.
    pub violations: BTreeMap<Invariant, usize>,
    /// Failing cases by the most innocent class of cuts that shows one of their failures.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cut_classes: BTreeMap<CutClass, usize>,
}

/// One case's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseOut {
    /// The case id (file path, plus `#line` for JSONL lines).
    pub id: String,
    /// The format id.
    pub format: String,
    /// `y`, `n`, `i` or `unlabelled`.
    pub label: Label,
    /// The case's status, known failures applied.
    pub status: CaseStatus,
    /// SHA-256 of the case's bytes and expectations.
    pub digest: String,
    /// Replays run.
    pub replays: usize,
    /// Replays without an error.
    pub error_free: usize,
    /// Replays equal to the expectation.
    pub matched: usize,
    /// Broken invariants with their minimal reproducers.
    pub violations: Vec<ViolationOut>,
    /// Invariants that did not apply, and breakdowns of external parsers, with reasons.
    pub notes: Vec<String>,
    /// The task completion the transcript reports: the `result` of its `attempt_completion` call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<String>,
    /// Replays of an external parser that split a special token, judged apart: not in
    /// `replays` or the rates, and never a failure (a server receives special tokens whole).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub token_split_replays: usize,
    /// Invariants those replays broke.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_split_violations: Vec<ViolationOut>,
    /// Invariants broken only by the whole input sent as one streaming delta (a server
    /// coalescing deltas), for a parser that declares serving paths: never a failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coalesced_violations: Vec<ViolationOut>,
    /// The format's options in force for this case where they differ from its defaults.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: OptionValues,
    /// The request modes the case was judged under, keys that say the default left out
    /// (`specs/corpus.md` §1.2); absent when there are none.
    #[serde(default, skip_serializing_if = "Request::is_default")]
    pub request: Request,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl CaseOut {
    /// The invariants broken only by replays that split a special token, comma-separated.
    pub fn token_split_invariants(&self) -> String {
        let names: Vec<&str> = self
            .token_split_violations
            .iter()
            .map(|v| v.invariant.as_str())
            .collect();
        names.join(", ")
    }
}

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViolationOut {
    /// The invariant id.
    pub invariant: Invariant,
    /// The strategy of the first failing replay, or null for whole-input checks.
    pub strategy: Option<Strategy>,
    /// Minimized cut offsets, one list per turn.
    pub cuts: Vec<Vec<usize>>,
    /// Replays that broke the invariant.
    pub failing_replays: usize,
    /// What went wrong.
    pub message: String,
    /// The command that reproduces it.
    pub replay: String,
    /// The most innocent cuts that show it: `token_aligned` (what a server sends),
    /// `char_aligned`, `splits_char` or `splits_special_token`; absent for checks that do not cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_class: Option<CutClass>,
    /// The serving path of the failing replay (`batch`, `stream`, `coalesced`), for a parser
    /// that declares paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<ReplayPath>,
    /// What the reported replay folded to, per turn (external parsers): what the engine
    /// returns, beside what it should.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub got: Vec<Got>,
}

impl From<&Violation> for ViolationOut {
    fn from(v: &Violation) -> Self {
        ViolationOut {
            invariant: v.invariant,
            strategy: v.strategy,
            cuts: v.cuts.clone(),
            failing_replays: v.failing_replays,
            message: v.message.clone(),
            replay: v.replay.clone(),
            cut_class: v.cut_class,
            path: v.path,
            got: v.got.clone(),
        }
    }
}

/// Wall-clock facts of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timings {
    /// When the report was written (UTC, RFC 3339).
    pub generated_at: String,
    /// Seconds the whole run took.
    pub total_seconds: f64,
    /// Seconds per case id, per parser.
    pub per_case_seconds: BTreeMap<String, BTreeMap<String, f64>>,
}

/// The comparison of a report with a baseline.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Comparison {
    /// Pass→fail cases and rate drops: these fail the run.
    pub regressions: Vec<Change>,
    /// Fail→pass cases and rate rises.
    pub fixes: Vec<Change>,
    /// Cases the baseline did not have.
    pub new_cases: Vec<String>,
    /// Cases the baseline had and this run does not.
    pub removed_cases: Vec<String>,
}

/// One difference between a baseline and a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// The parser concerned.
    pub parser: String,
    /// A case id, or `format:<id>` for a rate.
    pub subject: String,
    /// What changed, e.g. `pass → fail` or `parse success 100.0% → 98.2%`.
    pub change: String,
}

/// A case's status in a report: the replay's [`Status`] with known failures applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CaseStatus {
    /// Every invariant held.
    Pass,
    /// At least one invariant broke.
    Fail,
    /// A known failure that still fails.
    Xfail,
    /// A known failure that now passes: the mark must be removed.
    Xpass,
    /// An external parser crashed on the case.
    Crash,
    /// An external parser did not answer in time.
    Timeout,
    /// An external parser answered outside the adapter protocol.
    ProtocolError,
    /// The case's files could not be loaded.
    CorpusError,
}

impl CaseStatus {
    /// The status of a case after known failures are applied.
    pub fn of(status: Status, known: bool) -> CaseStatus {
        match (status, known) {
            (Status::Pass, true) => CaseStatus::Xpass,
            (Status::Pass, false) => CaseStatus::Pass,
            (_, true) => CaseStatus::Xfail,
            (Status::Fail, false) => CaseStatus::Fail,
            (Status::Crash, false) => CaseStatus::Crash,
            (Status::Timeout, false) => CaseStatus::Timeout,
            (Status::ProtocolError, false) => CaseStatus::ProtocolError,
            (Status::CorpusError, false) => CaseStatus::CorpusError,
        }
    }

    /// The snake_case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            CaseStatus::Pass => "pass",
            CaseStatus::Fail => "fail",
            CaseStatus::Xfail => "xfail",
            CaseStatus::Xpass => "xpass",
            CaseStatus::Crash => "crash",
            CaseStatus::Timeout => "timeout",
            CaseStatus::ProtocolError => "protocol_error",
            CaseStatus::CorpusError => "corpus_error",
        }
    }

    /// True when the status counts as a failure of the run.
    pub fn is_failing(self) -> bool {
        !matches!(self, CaseStatus::Pass | CaseStatus::Xfail)
    }
}

impl std::fmt::Display for CaseStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TotalsOut {
    /// Counts of the given cases.
    pub fn of<'a>(cases: impl IntoIterator<Item = &'a CaseOut>) -> TotalsOut {
        let mut t = TotalsOut::default();
        for c in cases {
            t.cases += 1;
            match c.status {
                CaseStatus::Pass => t.passed += 1,
                CaseStatus::Xfail => t.xfail += 1,
                CaseStatus::Xpass => {
                    t.xpass += 1;
                    t.failed += 1;
                }
                _ => t.failed += 1,
            }
            t.replays += c.replays;
            if matches!(c.label, Label::Accept | Label::Unlabelled) {
                t.parse_replays += c.replays;
                t.parse_ok += c.error_free;
            }
            if c.label == Label::Accept {
                t.match_replays += c.replays;
                t.match_ok += c.matched;
            }
            for v in &c.violations {
                *t.violations.entry(v.invariant).or_default() += 1;
            }
            if c.status.is_failing()
                && let Some(class) = c.violations.iter().filter_map(|v| v.cut_class).min()
            {
                *t.cut_classes.entry(class).or_default() += 1;
            }
        }
        t.parse_success_rate = ratio(t.parse_ok, t.parse_replays);
        t.match_rate = ratio(t.match_ok, t.match_replays);
        t
    }
}

/// A rate as a percentage with one decimal, never rounding a miss up to 100.0%.
pub fn percent(r: Option<f64>) -> String {
    match r {
        None => "–".into(),
        Some(x) if x < 1.0 && x > 0.999 => "99.9%".into(),
        Some(x) => format!("{:.1}%", x * 100.0),
    }
}

impl TotalsOut {
    /// `failures by cut: 2 token-aligned, 1 only inside a special token`, or `None` when no
    /// failing case has a cut class.
    pub fn cut_class_line(&self) -> Option<String> {
        if self.cut_classes.is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .cut_classes
            .iter()
            .map(|(c, n)| format!("{n} {}", c.describe()))
            .collect();
        Some(format!("failures by cut: {}", parts.join(", ")))
    }
}

fn ratio(n: usize, d: usize) -> Option<f64> {
    (d > 0).then(|| n as f64 / d as f64)
}

/// Builds one parser's run from its case reports.
///
/// `digests` maps every case id (corpus cases and format checks) to its digest.
pub fn build_run(
    parser: &str,
    digests: &BTreeMap<String, String>,
    reports: &[CaseReport],
    known: &KnownFailures,
) -> Run {
    let mut out: Vec<CaseOut> = reports
        .iter()
        .map(|r| {
            let status = CaseStatus::of(r.status, known.contains(parser, &r.id));
            CaseOut {
                id: r.id.clone(),
                format: r.format.to_string(),
                label: r.label,
                status,
                digest: digests.get(r.id.as_str()).cloned().unwrap_or_default(),
                replays: r.replays,
                error_free: r.error_free,
                matched: r.matched,
                violations: r.violations.iter().map(ViolationOut::from).collect(),
                notes: r.not_applicable.clone(),
                completion: r.completion.as_deref().map(str::to_string),
                token_split_replays: r.token_split_replays,
                token_split_violations: r
                    .token_split_violations
                    .iter()
                    .map(ViolationOut::from)
                    .collect(),
                coalesced_violations: r
                    .coalesced_violations
                    .iter()
                    .map(ViolationOut::from)
                    .collect(),
                options: r.options.clone(),
                request: r.request.clone(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    finish_run(parser.to_string(), out)
}

/// Computes the totals of a run from its cases.
pub fn finish_run(parser: String, cases: Vec<CaseOut>) -> Run {
    let mut per: BTreeMap<String, Vec<&CaseOut>> = BTreeMap::new();
    for c in &cases {
        per.entry(c.format.clone()).or_default().push(c);
    }
    let options = per
        .iter()
        .filter_map(|(f, cs)| {
            let common = options_of_every(cs);
            (!common.is_empty()).then(|| (f.clone(), common))
        })
        .collect();
    let formats = per
        .into_iter()
        .map(|(f, cs)| (f, TotalsOut::of(cs)))
        .collect();
    Run {
        parser,
        totals: TotalsOut::of(&cases),
        formats,
        options,
        cases,
    }
}

/// The options set alike on every one of a format's cases (a case without an option has the
/// default, so an option set on only some cases is not the format's).
fn options_of_every(cases: &[&CaseOut]) -> OptionValues {
    let Some((first, rest)) = cases.split_first() else {
        return OptionValues::new();
    };
    first
        .options
        .iter()
        .filter(|(name, on)| rest.iter().all(|c| c.options.get(*name) == Some(on)))
        .map(|(name, on)| (name.clone(), *on))
        .collect()
}

/// The corpus digest: SHA-256 over the sorted per-case digests, so shards merge exactly.
pub fn corpus_digest<'a>(digests: impl IntoIterator<Item = &'a str>) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted: Vec<&str> = digests.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut h = Sha256::new();
    for d in sorted {
        h.update(d.as_bytes());
        h.update(b"\n");
    }
    hex(&h.finalize())
}

/// Digests of every case: corpus cases, and format-level checks (keyed `format#invariant`).
pub fn case_digests<'a>(
    cases: &[Case],
    checks: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    use sha2::{Digest, Sha256};
    let mut m: BTreeMap<String, String> =
        cases.iter().map(|c| (c.id.clone(), c.digest())).collect();
    for (id, material) in checks {
        m.insert(
            id.to_string(),
            hex(&Sha256::digest(format!("{id}\n{material}").as_bytes())),
        );
    }
    m
}

/// The corpus section of a report.
pub fn corpus_info(digests: &BTreeMap<String, String>, errors: &[CorpusError]) -> CorpusInfo {
    let mut errs: Vec<CorpusErrorOut> = errors
        .iter()
        .map(|e| CorpusErrorOut {
            path: e.path.clone(),
            message: e.message.clone(),
        })
        .collect();
    errs.sort();
    CorpusInfo {
        digest: corpus_digest(digests.values().map(String::as_str)),
        cases: digests.len(),
        errors: errs,
    }
}

impl Report {
    /// Why the run judged nothing (no parser run, or one that judged no case), or `None`:
    /// such a run is never green, and no rendering of it says that everything held.
    pub fn judged_nothing(&self) -> Option<String> {
        let empty: Vec<&str> = self
            .runs
            .iter()
            .filter(|r| r.cases.is_empty())
            .map(|r| r.parser.as_str())
            .collect();
        if !self.runs.is_empty() && empty.is_empty() {
            return None;
        }
        let why = if self.corpus.cases == 0 && !self.corpus.errors.is_empty() {
            format!(
                "every case was refused ({} corpus error(s))",
                self.corpus.errors.len()
            )
        } else if self.corpus.cases == 0 {
            match self.shard {
                Some(s) => format!("shard {}/{} holds no case", s.index, s.count),
                None => "the corpus holds no case".into(),
            }
        } else if self.runs.is_empty() {
            "no parser ran".into()
        } else {
            format!(
                "{} judged none of the {} case(s)",
                empty.join(", "),
                self.corpus.cases
            )
        };
        Some(format!("nothing was judged: {why}"))
    }

    /// True when the run must exit 1: failures, unexpected passes or regressions.
    pub fn has_failures(&self) -> bool {
        self.runs.iter().any(|r| r.totals.failed > 0)
            || self
                .comparison
                .as_ref()
                .is_some_and(|c| !c.regressions.is_empty())
    }

    /// The report without its run-to-run parts (timings, adapters, comparison): what a
    /// baseline keeps.
    pub fn stable(&self) -> Report {
        Report {
            timings: None,
            adapters: None,
            comparison: None,
            ..self.clone()
        }
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Parses a report read from `path` (named in errors); `outputs::report_dir::read` also
    /// checks the file against the set it was written with.
    pub fn from_json(text: &str, path: &Path) -> Result<Report, String> {
        let r: Report = serde_json::from_str(text)
            .map_err(|e| format!("{}: not a conform report: {e}", path.display()))?;
        if r.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "{}: report schema version {} (this conform reads {SCHEMA_VERSION})",
                path.display(),
                r.schema_version
            ));
        }
        r.check()
            .map_err(|e| format!("{}: not a report conform wrote: {e}", path.display()))?;
        Ok(r)
    }

    /// Checks what conform's reports always hold, so that a tampered or hand-edited report is
    /// refused rather than believed: each run's cases sorted by id, each id once; a passing
    /// case without violations; replay counts that fit; totals (overall and per format) that
    /// are the sums of the cases; no run over more cases than the corpus holds.
    pub fn check(&self) -> Result<(), String> {
        for run in &self.runs {
            let p = &run.parser;
            for w in run.cases.windows(2) {
                if w[0].id == w[1].id {
                    return Err(format!("case {} appears twice in the run of {p}", w[0].id));
                }
                if w[0].id > w[1].id {
                    return Err(format!(
                        "the cases of {p} are not sorted by id ({} before {})",
                        w[0].id, w[1].id
                    ));
                }
            }
            for c in &run.cases {
                if matches!(c.status, CaseStatus::Pass | CaseStatus::Xpass)
                    && !c.violations.is_empty()
                {
                    return Err(format!(
                        "case {} of {p} is {} but has {} violation(s)",
                        c.id,
                        c.status,
                        c.violations.len()
                    ));
                }
                if c.error_free > c.replays || c.matched > c.replays {
                    return Err(format!(
                        "case {} of {p} counts more good replays than its {} replay(s)",
                        c.id, c.replays
                    ));
                }
            }
            // conform's own parsers judge every case loaded; an adapter those of its formats.
            let over = if run.parser == "builtin" {
                run.cases.len() != self.corpus.cases
            } else {
                run.cases.len() > self.corpus.cases
            };
            if over {
                return Err(format!(
                    "the run of {p} judged {} case(s), but corpus.cases is {}",
                    run.cases.len(),
                    self.corpus.cases
                ));
            }
            let want = finish_run(run.parser.clone(), run.cases.clone());
            if want.totals != run.totals {
                return Err(format!(
                    "the totals of {p} are not the sums of its cases ({} case(s), {} passed, {} replay(s) \
                     listed; {} case(s), {} passed, {} replay(s) in totals)",
                    want.totals.cases,
                    want.totals.passed,
                    want.totals.replays,
                    run.totals.cases,
                    run.totals.passed,
                    run.totals.replays
                ));
            }
            if want.formats != run.formats {
                let bad = want
                    .formats
                    .keys()
                    .chain(run.formats.keys())
                    .find(|f| want.formats.get(*f) != run.formats.get(*f))
                    .cloned()
                    .unwrap_or_default();
                return Err(format!(
                    "the totals of {p} for format {bad} are not the sums of its cases"
                ));
            }
        }
        Ok(())
    }
}

/// Compares `new` with `base` case by case and per format, parser by parser.
pub fn compare(base: &Report, new: &Report) -> Comparison {
    let mut c = Comparison::default();
    for run in &new.runs {
        let Some(old) = base.runs.iter().find(|r| r.parser == run.parser) else {
            continue;
        };
        let before: BTreeMap<&str, &CaseOut> =
            old.cases.iter().map(|c| (c.id.as_str(), c)).collect();
        let after: BTreeMap<&str, &CaseOut> =
            run.cases.iter().map(|c| (c.id.as_str(), c)).collect();
        for (id, now) in &after {
            match before.get(id) {
                None => c.new_cases.push(id.to_string()),
                Some(was) => {
                    let (was_bad, now_bad) = (was.status.is_failing(), now.status.is_failing());
                    let change = Change {
                        parser: run.parser.clone(),
                        subject: id.to_string(),
                        change: format!("{} → {}", was.status, now.status),
                    };
                    if !was_bad && now_bad {
                        c.regressions.push(change);
                    } else if was_bad && !now_bad {
                        c.fixes.push(change);
                    }
                }
            }
        }
        for id in before.keys() {
            if !after.contains_key(id) {
                c.removed_cases.push(id.to_string());
            }
        }
        for (format, now) in &run.formats {
            let Some(was) = old.formats.get(format) else {
                continue;
            };
            for (name, a, b) in [
                (
                    "parse success",
                    was.parse_success_rate,
                    now.parse_success_rate,
                ),
                ("match", was.match_rate, now.match_rate),
            ] {
                let (Some(a), Some(b)) = (a, b) else { continue };
                let change = Change {
                    parser: run.parser.clone(),
                    subject: format!("format:{format}"),
                    change: format!("{name} {} → {}", percent(Some(a)), percent(Some(b))),
                };
                if b < a - 1e-12 {
                    c.regressions.push(change);
                } else if b > a + 1e-12 {
                    c.fixes.push(change);
                }
            }
        }
    }
    let dedup = |v: &mut Vec<String>| {
        let set: BTreeSet<String> = v.drain(..).collect();
        v.extend(set);
    };
    dedup(&mut c.new_cases);
    dedup(&mut c.removed_cases);
    c
}

/// Which part of which corpus a report covers: `count` shards, of which it holds `shards`,
/// of the corpus with `whole`'s digest.
struct Coverage {
    count: u32,
    shards: Vec<u32>,
    whole: WholeCorpus,
}

fn coverage(r: &Report, name: &str) -> Result<Coverage, String> {
    let whole = |r: &Report| {
        r.whole.clone().ok_or_else(|| {
            format!(
                "{name}: a shard report that does not say which corpus it was cut from (written \
                 by an older conform); rerun the shards"
            )
        })
    };
    if let Some(p) = &r.partial {
        return Ok(Coverage {
            count: p.count,
            shards: p.shards.clone(),
            whole: whole(r)?,
        });
    }
    if let Some(s) = r.shard {
        return Ok(Coverage {
            count: s.count,
            shards: vec![s.index],
            whole: whole(r)?,
        });
    }
    Ok(Coverage {
        count: 1,
        shards: vec![1],
        whole: WholeCorpus {
            digest: r.corpus.digest.clone(),
            cases: r.corpus.cases,
        },
    })
}

/// Merges reports of shards of one corpus (`names` name them in errors) into the report an
/// unsharded run would have written: every parser of every report kept, each shard of each
/// parser once. Refused: reports of other seeds, strategies, chunkings or versions, of other
/// corpora or other splits, a shard (of a parser) given twice, and, unless `partial`, a
/// missing shard. A partial merge says which shards it holds (`partial`), and every parser
/// must hold the same ones.
pub fn merge(parts: &[Report], names: &[String], partial: bool) -> Result<Report, String> {
    let first = parts.first().ok_or("nothing to merge")?;
    let name = |k: usize| {
        names
            .get(k)
            .cloned()
            .unwrap_or_else(|| format!("report #{}", k + 1))
    };
    for p in parts {
        if p.seed != first.seed
            || p.strategies != first.strategies
            || !p.chunking.same_parameters(&first.chunking)
            || p.tool != first.tool
        {
            return Err("the reports were made with different seeds, strategies, chunkings or conform versions".into());
        }
    }
    let covers: Vec<Coverage> = parts
        .iter()
        .enumerate()
        .map(|(k, p)| coverage(p, &name(k)))
        .collect::<Result<_, _>>()?;
    let base = &covers[0];
    for (k, c) in covers.iter().enumerate().skip(1) {
        if c.whole.digest != base.whole.digest || c.whole.cases != base.whole.cases {
            return Err(format!(
                "{}: a report of another corpus ({} case(s), digest {}) than {} ({} case(s), \
                 digest {}); shards merge only with shards of the corpus they were cut from",
                name(k),
                c.whole.cases,
                short(&c.whole.digest),
                name(0),
                base.whole.cases,
                short(&base.whole.digest)
            ));
        }
        if c.count != base.count {
            return Err(format!(
                "{}: a split into {} shard(s), {} is of a split into {}",
                name(k),
                c.count,
                name(0),
                base.count
            ));
        }
    }
    // Each parser's shards, each once.
    let mut by_parser: BTreeMap<String, BTreeMap<u32, usize>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (k, (p, c)) in parts.iter().zip(&covers).enumerate() {
        for run in &p.runs {
            if !order.contains(&run.parser) {
                order.push(run.parser.clone());
            }
            let held = by_parser.entry(run.parser.clone()).or_default();
            for &shard in &c.shards {
                if let Some(other) = held.insert(shard, k) {
                    return Err(format!(
                        "shard {shard} of {} of the parser {} is in both {} and {}",
                        base.count,
                        run.parser,
                        name(other),
                        name(k)
                    ));
                }
            }
        }
    }
    let all: Vec<u32> = (1..=base.count).collect();
    let mut held: Option<Vec<u32>> = None;
    for (parser, shards) in &by_parser {
        let have: Vec<u32> = shards.keys().copied().collect();
        match &held {
            Some(h) if *h != have => {
                return Err(format!(
                    "the parsers hold different shards ({parser}: {}); merge each parser's \
                     shards alike",
                    Partial {
                        count: base.count,
                        shards: have.clone()
                    }
                    .describe()
                ));
            }
            _ => held = Some(have),
        }
    }
    let held = held.unwrap_or_default();
    let missing = Partial {
        count: base.count,
        shards: held.clone(),
    };
    let complete = held == all;
    if !complete && !partial {
        return Err(format!(
            "a merge of {}: the cases of the missing shards would look judged; add the missing \
             reports, or pass --partial for a report that says it is partial",
            missing.describe()
        ));
    }
    // Each shard names the tokenizers of the formats it ran; they must agree where they meet.
    let mut chunking = first.chunking.clone();
    for p in parts {
        for (f, t) in &p.chunking.tokenizers {
            if chunking
                .tokenizers
                .entry(f.clone())
                .or_insert_with(|| t.clone())
                != t
            {
                return Err(format!("the reports cut {f} with different tokenizers"));
            }
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    for parser in &order {
        let mut cases: BTreeMap<String, CaseOut> = BTreeMap::new();
        for p in parts {
            for r in p.runs.iter().filter(|r| &r.parser == parser) {
                for c in &r.cases {
                    if cases.insert(c.id.clone(), c.clone()).is_some() {
                        return Err(format!("case {} appears in more than one report", c.id));
                    }
                }
            }
        }
        runs.push(finish_run(parser.clone(), cases.into_values().collect()));
    }
    let mut errors: Vec<CorpusErrorOut> =
        parts.iter().flat_map(|p| p.corpus.errors.clone()).collect();
    errors.sort();
    errors.dedup();
    let corpus = if complete {
        // The corpus the shards were cut from, as an unsharded run reports it.
        CorpusInfo {
            digest: base.whole.digest.clone(),
            cases: base.whole.cases,
            errors,
        }
    } else {
        // Loaded cases of the shards held (a shard given for several parsers counts once).
        let loaded: BTreeMap<&[u32], usize> = parts
            .iter()
            .zip(&covers)
            .map(|(p, c)| (&c.shards[..], p.corpus.cases))
            .collect();
        let digests: BTreeSet<&str> = runs
            .iter()
            .flat_map(|r| r.cases.iter().map(|c| c.digest.as_str()))
            .collect();
        CorpusInfo {
            digest: corpus_digest(digests),
            cases: loaded.values().sum(),
            errors,
        }
    };
    let timings =
        parts
            .iter()
            .filter_map(|p| p.timings.as_ref())
            .fold(None, |acc: Option<Timings>, t| {
                Some(match acc {
                    None => t.clone(),
                    Some(mut a) => {
                        a.total_seconds = a.total_seconds.max(t.total_seconds);
                        a.generated_at = a.generated_at.max(t.generated_at.clone());
                        for (p, m) in &t.per_case_seconds {
                            a.per_case_seconds
                                .entry(p.clone())
                                .or_default()
                                .extend(m.clone());
                        }
                        a
                    }
                })
            });
    // Each shard ran its own copies: counters add up, the first shard's stderr is kept.
    let mut adapters: BTreeMap<String, AdapterOut> = BTreeMap::new();
    for (parser, a) in parts.iter().filter_map(|p| p.adapters.as_ref()).flatten() {
        match adapters.get_mut(parser) {
            None => {
                adapters.insert(parser.clone(), a.clone());
            }
            Some(m) => {
                // Counters saturate: a tampered or absurd shard cannot wrap them.
                let add = |x: &mut u64, y: u64| *x = x.saturating_add(y);
                add(&mut m.stats.requests, a.stats.requests);
                add(&mut m.stats.started, a.stats.started);
                add(&mut m.stats.crashes, a.stats.crashes);
                add(&mut m.stats.timeouts, a.stats.timeouts);
                add(&mut m.stats.protocol_errors, a.stats.protocol_errors);
                add(&mut m.stderr_bytes, a.stderr_bytes);
                for (f, t) in &a.engine_ns {
                    m.engine_ns.entry(f.clone()).or_default().merge(t);
                }
            }
        }
    }
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        tool: first.tool.clone(),
        seed: first.seed,
        strategies: first.strategies.clone(),
        chunking,
        shard: None,
        whole: (!complete).then(|| base.whole.clone()),
        partial: (!complete).then_some(missing),
        corpus,
        runs,
        comparison: None,
        adapters: (!adapters.is_empty()).then_some(adapters),
        timings,
    })
}

/// The first 12 characters of a digest, for messages.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Current UTC time as RFC 3339, without a date library.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm, public domain).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, status: &str, label: &str) -> CaseOut {
        CaseOut {
            id: id.into(),
            format: "kimi_k2".into(),
            label: serde_json::from_value(serde_json::json!(label)).unwrap(),
            status: serde_json::from_value(serde_json::json!(status)).unwrap(),
            digest: format!("d-{id}"),
            replays: 10,
            error_free: if status == "pass" { 10 } else { 7 },
            matched: if status == "pass" { 10 } else { 5 },
            violations: vec![],
            notes: vec![],
            completion: None,
            token_split_replays: 0,
            token_split_violations: Vec::new(),
            coalesced_violations: Vec::new(),
            options: Default::default(),
            request: Default::default(),
        }
    }

    fn report(cases: Vec<CaseOut>) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            tool: Tool {
                name: "conform".into(),
                version: "0".into(),
            },
            seed: 0,
            strategies: vec!["whole".into()],
            chunking: Chunking {
                random_groupings: 1,
                random_max_chunk: 1,
                two_cut_cap: 1,
                bursts: 4,
                burst_max_tokens: 8,
                tokenizer: "o200k_base".into(),
                tokenizers: BTreeMap::new(),
            },
            shard: None,
            whole: None,
            partial: None,
            corpus: CorpusInfo {
                digest: String::new(),
                cases: cases.len(),
                errors: vec![],
            },
            runs: vec![finish_run("builtin".into(), cases)],
            comparison: None,
            adapters: None,
            timings: None,
        }
    }

    #[test]
    fn comparison_finds_regressions_fixes_new_and_removed() {
        let base = report(vec![
            case("a", "pass", "y"),
            case("b", "fail", "y"),
            case("c", "pass", "y"),
        ]);
        let new = report(vec![
            case("a", "fail", "y"),
            case("b", "pass", "y"),
            case("d", "pass", "y"),
        ]);
        let c = compare(&base, &new);
        assert_eq!(c.regressions.iter().filter(|r| r.subject == "a").count(), 1);
        assert_eq!(c.fixes.iter().filter(|r| r.subject == "b").count(), 1);
        assert_eq!(c.new_cases, ["d"]);
        assert_eq!(c.removed_cases, ["c"]);
    }

    #[test]
    fn a_rate_drop_is_a_regression_even_when_statuses_agree() {
        let base = report(vec![case("a", "fail", "y")]);
        let mut worse = case("a", "fail", "y");
        worse.matched = 1;
        let c = compare(&base, &report(vec![worse]));
        assert_eq!(c.regressions.len(), 1);
        assert!(c.regressions[0].subject.starts_with("format:"));
    }

    #[test]
    fn known_failures_turn_into_xfail_and_xpass() {
        assert_eq!(CaseStatus::of(Status::Fail, true), CaseStatus::Xfail);
        assert_eq!(CaseStatus::of(Status::Pass, true), CaseStatus::Xpass);
        assert!(CaseStatus::Xpass.is_failing() && !CaseStatus::Xfail.is_failing());
        let t = TotalsOut::of(&[case("a", "xfail", "y"), case("b", "xpass", "y")]);
        assert_eq!((t.xfail, t.xpass, t.failed), (1, 1, 1));
    }

    #[test]
    fn shards_partition_any_ids() {
        let ids: Vec<String> = (0..500).map(|i| format!("corpus/x/y_{i}.txt")).collect();
        for n in 1..6 {
            for id in &ids {
                let owners = (1..=n)
                    .filter(|k| {
                        Shard {
                            index: *k,
                            count: n,
                        }
                        .contains(id)
                    })
                    .count();
                assert_eq!(owners, 1);
            }
        }
        assert!(Shard::parse("0/3").is_err());
        assert!(Shard::parse("4/3").is_err());
        assert_eq!(Shard::parse("2/3").unwrap(), Shard { index: 2, count: 3 });
    }

    #[test]
    fn rfc3339_is_well_formed() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20);
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }

    #[test]
    fn merged_adapter_counters_saturate() {
        use crate::backends::adapter::{AdapterStats, EngineTime};
        let with = |id: &str, k: u32, n: u64| {
            let mut r = report(vec![case(id, "pass", "y")]);
            r.shard = Some(Shard { index: k, count: 2 });
            r.whole = Some(WholeCorpus {
                digest: "w".into(),
                cases: 2,
            });
            let huge = EngineTime {
                responses: n,
                total_ns: n,
                max_ns: n,
            };
            r.adapters = Some(BTreeMap::from([(
                "builtin".to_string(),
                AdapterOut {
                    name: "x".into(),
                    formats: vec!["kimi_k2".into()],
                    stats: AdapterStats {
                        requests: n,
                        started: n,
                        crashes: n,
                        timeouts: n,
                        protocol_errors: n,
                    },
                    stderr_bytes: n,
                    stderr_tail: String::new(),
                    engine_ns: BTreeMap::from([("kimi_k2".to_string(), huge)]),
                },
            )]));
            r
        };
        let m = merge(&[with("a", 1, u64::MAX - 1), with("b", 2, 5)], &[], false).unwrap();
        let a = &m.adapters.unwrap()["builtin"];
        assert_eq!(a.stats.requests, u64::MAX);
        assert_eq!(a.stats.protocol_errors, u64::MAX);
        assert_eq!(a.stderr_bytes, u64::MAX);
        assert_eq!(a.engine_ns["kimi_k2"].responses, u64::MAX);
    }
}
