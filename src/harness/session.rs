//! One `conform run` from start to report: load the corpus, judge it with every parser, and
//! build the report model. The command line only validates arguments, shows progress and renders.

use super::chunking::{Cuts, Strategy};
use super::corpus::{self, Case, CorpusError, LoadOptions};
use super::format_checks;
use super::judged::nothing_judged;
use super::known::KnownFailures;
use super::parsers::ParserRun;
use super::report::{self, AdapterOut, Report, Shard};
use super::run::{RunConfig, run_cases_on};
use crate::backends::adapter::AdapterOptions;
use crate::backends::builtin::{capture_panics, events_of};
use crate::backends::{AnyBackend, Outcome};
use crate::event::ParseResult;
use crate::formats::{self, Format};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Everything one run needs, validated by the caller.
#[derive(Debug, Clone, Default)]
pub struct RunPlan {
    /// Corpus directories, files or glob patterns.
    pub paths: Vec<String>,
    /// How files are read.
    pub load: LoadOptions,
    /// Strategies, chunking parameters and budgets.
    pub cfg: RunConfig,
    /// The `--parser` values, in order (`builtin` when none was given).
    pub parsers: Vec<String>,
    /// How adapters are run.
    pub adapter: AdapterOptions,
    /// Cases known to fail, per parser.
    pub known: KnownFailures,
    /// The report to compare with, when a baseline was given.
    pub baseline: Option<Report>,
    /// The part of the corpus to replay.
    pub shard: Option<Shard>,
}

/// What the caller shows while a run goes on (a progress bar, or nothing).
pub trait Progress: Sync {
    /// A parser starts on `cases` cases.
    fn start(&self, parser: &str, cases: usize);
    /// One case is done.
    fn tick(&self);
    /// The parser is done.
    fn done(&self);
}

/// Shows nothing.
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _: &str, _: usize) {}
    fn tick(&self) {}
    fn done(&self) {}
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutput {
    /// The report model, comparison and timings included.
    pub report: Report,
    /// Each parser's case reports and what its adapter left behind.
    pub parser_runs: Vec<ParserRun>,
    /// Files that could not be loaded.
    pub corpus_errors: Vec<CorpusError>,
    /// Cases loaded (in this shard).
    pub cases: usize,
    /// Why the run judged nothing (no case loaded, an empty shard, a parser that supports
    /// none of the formats): such a run is never green.
    pub judged_nothing: Option<String>,
}

impl RunOutput {
    /// The exit code of the run: 2 for corpus errors or a parser that judged nothing, 1 for
    /// failures or regressions, 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        if !self.corpus_errors.is_empty() || self.judged_nothing.is_some() {
            2
        } else if self.report.has_failures() {
            1
        } else {
            0
        }
    }
}

/// Runs the plan: every parser over the same cases, one after the other (each adapter is
/// stopped before the next one starts). `Err` says which parser could not start.
pub fn execute(plan: &RunPlan, progress: &dyn Progress) -> Result<RunOutput, String> {
    let started = Instant::now();
    let mut corpus = corpus::load(&plan.paths, &plan.load);
    // Format-level invariants (cdata_split, type_inference) of the formats in the corpus,
    // decided before sharding so that shards split them like cases.
    let formats_seen: BTreeSet<&str> = corpus.cases.iter().map(|c| c.format).collect();
    let loaded = corpus.cases.len();
    // A shard is cut after the vocabularies have been checked and its whole corpus digested
    // (below), so that its `whole` is the corpus an unsharded run would report.
    // The first parser starts (and answers its hello) before the vocabularies load: an adapter
    // that cannot start fails the run at once.
    let mut first = match plan.parsers.first() {
        Some(spec) => Some(AnyBackend::start(spec, &plan.adapter)?),
        None => None,
    };
    // Each format's tokenizer, loaded (once, and only where a replay needs token boundaries:
    // the token-aligned and recorded strategies, and the cut classes of an external parser)
    // and checked before anything is replayed.
    let needs_tokens = plan
        .cfg
        .strategies
        .iter()
        .any(|s| s.token_aligned() || *s == Strategy::Recorded)
        || plan.parsers.iter().any(|p| p != "builtin");
    let tokenizers = if needs_tokens {
        super::vocab::prepare_run(
            plan.cfg.tokenizer.as_ref(),
            &mut corpus.cases,
            &mut corpus.errors,
        )?
    } else {
        BTreeMap::new()
    };
    let mut checked: Vec<(&'static Format, String, String)> = formats::REGISTRY
        .iter()
        .filter(|f| formats_seen.contains(f.id))
        .flat_map(|f| {
            format_checks::declared(f)
                .into_iter()
                .map(move |(id, m)| (*f, id, m))
        })
        .collect();
    let mut digests = report::case_digests(
        &corpus.cases,
        checked.iter().map(|(_, id, m)| (id.as_str(), m.as_str())),
    );
    // A shard says which corpus it was cut from, so that only its siblings merge with it.
    let whole = plan.shard.map(|s| {
        let whole = report::WholeCorpus {
            digest: report::corpus_digest(digests.values().map(String::as_str)),
            cases: digests.len(),
        };
        corpus.cases.retain(|c| s.contains(&c.id));
        checked.retain(|(_, id, _)| s.contains(id));
        digests.retain(|id, _| s.contains(id));
        whole
    });
    capture_panics();
    let mut runs = Vec::new();
    let mut per_case_seconds = BTreeMap::new();
    let mut parser_runs: Vec<ParserRun> = Vec::new();
    let mut judged: Vec<(&str, usize)> = Vec::new();
    let mut adapters = BTreeMap::new();
    for spec in &plan.parsers {
        let backend = match first.take() {
            Some(b) => b,
            None => AnyBackend::start(spec, &plan.adapter)?,
        };
        let b = backend.backend();
        let supported = corpus.cases.iter().filter(|c| b.supports(c.format)).count();
        progress.start(spec, supported);
        let mut reports = run_cases_on(&corpus.cases, b, &plan.cfg, &|| progress.tick());
        let mut done: BTreeSet<&str> = BTreeSet::new();
        for (f, _, _) in &checked {
            if done.insert(f.id) && b.supports(f.id) {
                reports.extend(
                    format_checks::check_format(f, b)
                        .into_iter()
                        .filter(|r| checked.iter().any(|(_, id, _)| *id == r.id)),
                );
            }
        }
        progress.done();
        judged.push((spec.as_str(), reports.len()));
        per_case_seconds.insert(
            spec.clone(),
            reports
                .iter()
                .map(|r| (r.id.clone(), r.elapsed.as_secs_f64()))
                .collect(),
        );
        runs.push(report::build_run(spec, &digests, &reports, &plan.known));
        let run = ParserRun::new(spec, &backend, reports);
        if let Some(hello) = &run.hello {
            adapters.insert(
                spec.clone(),
                AdapterOut {
                    name: hello.name.clone(),
                    formats: hello.formats.clone(),
                    stats: run.stats.unwrap_or_default(),
                    stderr_bytes: run.stderr_bytes,
                    stderr_tail: run.stderr_tail.clone(),
                    engine_ns: run.engine_ns.clone(),
                },
            );
        }
        parser_runs.push(run);
    }
    let mut rep = Report {
        schema_version: report::SCHEMA_VERSION,
        tool: report::Tool {
            name: "conform".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        seed: plan.cfg.params.seed,
        strategies: plan
            .cfg
            .strategies
            .iter()
            .map(|s| Strategy::as_str(*s).to_string())
            .collect(),
        chunking: report::Chunking {
            tokenizers,
            ..report::Chunking::new(&plan.cfg.params, &plan.cfg.tokenizer_name())
        },
        shard: plan.shard,
        whole,
        partial: None,
        corpus: report::corpus_info(&digests, &corpus.errors),
        runs,
        comparison: None,
        adapters: (!adapters.is_empty()).then_some(adapters),
        timings: None,
    };
    rep.comparison = plan.baseline.as_ref().map(|b| report::compare(b, &rep));
    rep.timings = Some(report::Timings {
        generated_at: report::now_rfc3339(),
        total_seconds: started.elapsed().as_secs_f64(),
        per_case_seconds,
    });
    let shard = plan.shard.map(|s| format!("{}/{}", s.index, s.count));
    let judged_nothing = nothing_judged(
        &plan.paths,
        loaded,
        corpus.errors.len(),
        shard.as_deref(),
        &judged,
    );
    Ok(RunOutput {
        report: rep,
        parser_runs,
        cases: corpus.cases.len(),
        corpus_errors: corpus.errors,
        judged_nothing,
    })
}

/// What `conform parse` prints for one case under one chunking (one [`Cuts`] per turn, as
/// `harness::select` chose them): per turn the cuts (and token ids, for a token-aligned
/// chunking) and the folded result, plus every event for conform's parsers or, for an adapter
/// (whose events are folded as they are read), the delta-contract breaches the fold noticed.
/// The flag is false when an external parser crashed, hung or broke the protocol.
pub fn parse_one(
    case: &Case,
    parser: &str,
    opts: &AdapterOptions,
    cuts: &[Cuts],
    with_events: bool,
    path: Option<crate::backends::ServingPath>,
) -> Result<(ParseDoc, bool), String> {
    let format =
        formats::by_id(case.format).ok_or_else(|| format!("unknown format {}", case.format))?;
    let whole = Cuts::At(Vec::new());
    let cuts_of = |t: usize| cuts.get(t).unwrap_or(&whole);
    // The cuts and token ids stay lists of integers (a tree of values would cost four times
    // as much for a recording of millions of deltas); the rest of a turn is a small object.
    let describe = |t: usize| {
        let c = cuts_of(t);
        TurnDoc {
            cuts: Some(c.to_vec(&case.turns[t])),
            token_ids: c.chunk_token_ids(),
            rest: json!({}),
        }
    };
    let backend = AnyBackend::start(parser, opts)?;
    let (mut turns, ok) = if backend.adapter().is_none() {
        capture_panics();
        let mut p =
            crate::formats::modes::parser(format, &case.tools, &case.options, &case.request)?;
        let turns = case
            .turns
            .iter()
            .enumerate()
            .map(|(t, data)| {
                let events = events_of(p.as_mut(), data, cuts_of(t));
                let mut v = describe(t);
                v.rest["result"] = json!(ParseResult::fold(&events));
                if with_events {
                    v.rest["events"] = serde_json::to_value(&events).unwrap_or_default();
                }
                v
            })
            .collect::<Vec<_>>();
        (turns, true)
    } else {
        let all: Vec<Cuts> = (0..case.turns.len()).map(|t| cuts_of(t).clone()).collect();
        match backend.backend().replay_on(
            path,
            format,
            &case.tools,
            &case.options,
            &case.request,
            &case.turns,
            &all,
        ) {
            Outcome::Done(outs) => (
                outs.into_iter()
                    .enumerate()
                    .map(|(t, o)| {
                        let mut v = describe(t);
                        v.rest["result"] = json!(o.result);
                        if !o.anomalies.is_empty() {
                            v.rest["delta_contract"] = json!(o.anomalies);
                        }
                        v
                    })
                    .collect(),
                true,
            ),
            Outcome::Broke(why, msg) => (
                vec![TurnDoc::other(json!({"breakdown": why, "message": msg}))],
                false,
            ),
            Outcome::Panicked(msg) => (vec![TurnDoc::other(json!({"panic": msg}))], false),
        }
    };
    let mut tail = json!({});
    if let Some(t) = backend
        .adapter()
        .and_then(|a| a.engine_time().get(format.id).copied())
    {
        // The engine's own parse time for this one request (specs/adapter.md §2.6).
        tail["engine_ns"] = json!(t.total_ns);
    }
    tail["format"] = json!(case.format);
    tail["case"] = json!(case.id);
    if parser != "builtin" {
        tail["parser"] = json!(parser);
    }
    let single = turns.len() == 1;
    turns.shrink_to_fit();
    Ok((
        ParseDoc {
            turns,
            single,
            tail,
        },
        ok,
    ))
}

/// What `conform parse` prints: the turn itself when there is one (`cuts`, `token_ids`, its
/// result…), else `{"turns": [...]}`, followed by the case's keys (`engine_ns`, `format`,
/// `case`, `parser`). Serialized as it is written, its cuts straight from their list.
#[derive(Debug)]
pub struct ParseDoc {
    turns: Vec<TurnDoc>,
    single: bool,
    tail: Value,
}

impl ParseDoc {
    /// Adds a key after the document's own (`rendered`, for a roundtrip replay).
    pub fn insert(&mut self, key: &str, value: Value) {
        self.tail[key] = value;
    }
}

/// One turn of a [`ParseDoc`].
#[derive(Debug)]
struct TurnDoc {
    cuts: Option<Vec<usize>>,
    token_ids: Option<Vec<Vec<crate::backends::cuts::TokenId>>>,
    /// The other keys, in order.
    rest: Value,
}

impl TurnDoc {
    /// A turn that is only `rest` (a breakdown or a panic).
    fn other(rest: Value) -> TurnDoc {
        TurnDoc {
            cuts: None,
            token_ids: None,
            rest,
        }
    }

    fn entries<M: serde::ser::SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        if let Some(c) = &self.cuts {
            m.serialize_entry("cuts", c)?;
        }
        if let Some(ids) = &self.token_ids {
            m.serialize_entry("token_ids", ids)?;
        }
        if let Value::Object(rest) = &self.rest {
            for (k, v) in rest {
                m.serialize_entry(k, v)?;
            }
        }
        Ok(())
    }
}

impl serde::Serialize for TurnDoc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        self.entries(&mut m)?;
        m.end()
    }
}

impl serde::Serialize for ParseDoc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match (&self.turns[..], self.single) {
            ([turn], true) => turn.entries(&mut m)?,
            (turns, _) => m.serialize_entry("turns", turns)?,
        }
        if let Value::Object(tail) = &self.tail {
            for (k, v) in tail {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}
