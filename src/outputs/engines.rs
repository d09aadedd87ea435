//! The engines matrix page (`specs/engines.md`): real servers' parsers × formats, from the
//! directory `scripts/engines` fills (a `manifest.json`, one `report.json` per parser variant,
//! optional byte-level reports and cost measurements), as Markdown and as HTML.
//!
//! The page is built once as a list of [`Block`]s and written in both forms, so the two never
//! say different things.

use super::html;
use crate::harness::bugs::{Fingerprint, fingerprint};
use crate::harness::classify::{BugClass, CaseClass, CaseContext, PolicyKind, classify_case};
use crate::harness::invariants::Invariant;
use crate::harness::report::{CaseOut, CaseStatus, Report, ViolationOut};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// What `scripts/engines` records of one run: engines, their setup, and where each parser
/// variant's files are (paths relative to the manifest's directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// When the run started (UTC, RFC 3339).
    pub generated_at: String,
    /// The command that made it.
    pub command: String,
    /// conform's version.
    pub conform_version: String,
    /// The token-aligned and whole-input strategies every parser ran.
    pub strategies: Vec<String>,
    /// The byte-level strategies run apart (empty when they were not run).
    #[serde(default)]
    pub byte_strategies: Vec<String>,
    /// Seconds the whole run took.
    #[serde(default)]
    pub seconds: f64,
    /// One entry per `examples/adapters/*/engine.json`.
    pub engines: Vec<EngineEntry>,
}

/// One engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineEntry {
    /// Short id.
    pub engine: String,
    /// What it is.
    #[serde(default)]
    pub title: String,
    /// Where it comes from.
    #[serde(default)]
    pub package: String,
    /// The pinned version.
    #[serde(default)]
    pub version: String,
    /// When its setup started (UTC, RFC 3339).
    #[serde(default)]
    pub date: String,
    /// The engine's policies (ids, text after calls, errors…), each with a note; the keys
    /// the classifier knows (`PolicyKind::from_key`) are applied to its failures, a key
    /// `KEY@FORMAT` to that format's failures only ([`Policies`]).
    #[serde(default)]
    pub policy: BTreeMap<String, String>,
    /// The engine's dialect: `FORMAT.OPTION=BOOL` of conform's parser under which its
    /// expectations were read (`conform run --dialect`).
    #[serde(default)]
    pub dialect: Vec<String>,
    /// The `setup` step.
    pub setup: Step,
    /// Its parser variants.
    #[serde(default)]
    pub parsers: Vec<ParserEntry>,
}

/// A step that may fail, with the command to redo it by hand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Whether it succeeded.
    pub ok: bool,
    /// Seconds it took.
    #[serde(default)]
    pub seconds: f64,
    /// What went wrong (the last line the step printed).
    #[serde(default)]
    pub message: String,
    /// The command to run by hand.
    #[serde(default)]
    pub command: String,
}

/// One parser variant of an engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParserEntry {
    /// Its name (a directory of the matrix).
    pub name: String,
    /// The `--parser` value it ran with.
    pub parser: String,
    /// Its report, when the run produced one.
    #[serde(default)]
    pub report: Option<String>,
    /// Its byte-level report, when one was run.
    #[serde(default)]
    pub bytes_report: Option<String>,
    /// Its cost measurements, when taken.
    #[serde(default)]
    pub cost: Option<String>,
    /// Why there is no report, when there is none.
    #[serde(default)]
    pub error: Option<String>,
    /// Seconds its run took.
    #[serde(default)]
    pub seconds: f64,
    /// When its run started (UTC, RFC 3339; absent in manifests that predate it).
    #[serde(default)]
    pub date: String,
    /// The serving paths it declares (`batch`, `stream`).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Cases that timed out in the matrix and were rerun alone with a longer budget
    /// (`<name>/slow/report.json`), when any did.
    #[serde(default)]
    pub slow_report: Option<String>,
}

/// `conform engine-cost`'s output: one adapter's timings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostReport {
    /// The parser measured.
    pub parser: String,
    /// The adapter's name for itself.
    pub name: String,
    /// Seconds one stream could take before it counted as a timeout.
    #[serde(default)]
    pub timeout_s: f64,
    /// One row per format and size.
    pub rows: Vec<CostRow>,
}

/// One stream: one format, one argument size, one token per delta.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostRow {
    /// The format id.
    pub format: String,
    /// The string argument's length, in bytes.
    pub size: usize,
    /// The transcript's length, in bytes.
    pub bytes: usize,
    /// Deltas (tokens) of the stream.
    pub deltas: usize,
    /// `ok`, `timeout`, `crash`, `protocol_error`, `no_engine_ns` or `not_rendered`.
    pub status: String,
    /// What went wrong, when something did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The engine's parse time (nanoseconds), from the adapter's `engine_ns`.
    pub engine_ns: Option<u64>,
    /// conform's own parser on the same deltas (best of three, nanoseconds).
    pub conform_ns: u64,
    /// Whether the engine's calls equal conform's (name and arguments).
    pub same_calls: Option<bool>,
}

/// One parser variant with what its files hold.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The engine it belongs to.
    pub engine: EngineEntry,
    /// The variant.
    pub entry: ParserEntry,
    /// Its report (token-aligned and whole chunkings).
    pub report: Option<Report>,
    /// Its byte-level report.
    pub bytes: Option<Report>,
    /// Its timings.
    pub cost: Option<CostReport>,
    /// Files that were named but could not be read.
    pub problems: Vec<String>,
    /// Cases that timed out in the matrix and finished when rerun alone: their ids, with the
    /// seconds that rerun took (their outcome replaces the timeout in `report`).
    pub slow: Vec<(String, f64)>,
}

/// Everything the page shows.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The manifest.
    pub manifest: Manifest,
    /// Every variant of every engine whose setup succeeded, in manifest order.
    pub variants: Vec<Variant>,
}

/// Reads `dir/manifest.json` and the files it names.
pub fn load(dir: &Path) -> Result<Matrix, String> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not an engines manifest: {e}", path.display()))?;
    let mut variants = Vec::new();
    for e in &manifest.engines {
        for p in &e.parsers {
            let mut problems = Vec::new();
            let mut read_report = |rel: &Option<String>| {
                rel.as_ref().and_then(|r| {
                    super::report_dir::read(&dir.join(r))
                        .map_err(|m| problems.push(m))
                        .ok()
                })
            };
            let mut report = read_report(&p.report);
            let bytes = read_report(&p.bytes_report);
            let rerun = read_report(&p.slow_report);
            let slow = match (&mut report, rerun) {
                (Some(r), Some(again)) => replace_slow(r, &again),
                _ => Vec::new(),
            };
            let cost = p.cost.as_ref().and_then(|r| {
                let f = dir.join(r);
                std::fs::read_to_string(&f)
                    .map_err(|e| format!("{}: {e}", f.display()))
                    .and_then(|t| {
                        serde_json::from_str::<CostReport>(&t)
                            .map_err(|e| format!("{}: {e}", f.display()))
                    })
                    .map_err(|m| problems.push(m))
                    .ok()
            });
            variants.push(Variant {
                engine: e.clone(),
                entry: p.clone(),
                report,
                bytes,
                cost,
                problems,
                slow,
            });
        }
    }
    Ok(Matrix { manifest, variants })
}

/// Puts in `report` the outcome of every case that timed out there and did not time out when
/// rerun alone (`again`): a slow case, not a hang. Returns their ids with the rerun's seconds
/// (from the rerun's timings, when it has them).
fn replace_slow(report: &mut Report, again: &Report) -> Vec<(String, f64)> {
    let mut slow = Vec::new();
    for run in &mut report.runs {
        let mut changed = false;
        for c in &mut run.cases {
            if c.status != CaseStatus::Timeout {
                continue;
            }
            let Some(new) = again
                .runs
                .iter()
                .flat_map(|r| &r.cases)
                .find(|x| x.id == c.id && x.status != CaseStatus::Timeout)
            else {
                continue;
            };
            let secs = again
                .timings
                .as_ref()
                .and_then(|t| t.per_case_seconds.values().find_map(|m| m.get(&c.id)))
                .copied()
                .unwrap_or(0.0);
            let mut new = new.clone();
            new.notes.push(format!(
                "slow: timed out in the matrix, finished alone in {secs:.1} s"
            ));
            *c = new;
            slow.push((c.id.clone(), secs));
            changed = true;
        }
        if changed {
            let parser = run.parser.clone();
            let cases = std::mem::take(&mut run.cases);
            let rebuilt = crate::harness::report::finish_run(parser, cases);
            run.totals = rebuilt.totals;
            run.formats = rebuilt.formats;
            run.cases = rebuilt.cases;
        }
    }
    slow
}

/// A piece of the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// A heading of level 1 to 4.
    Heading(u8, String),
    /// A paragraph of plain text.
    Para(String),
    /// A table: header cells and rows of cells (a cell wrapped in backticks is code).
    Table(Vec<String>, Vec<Vec<String>>),
    /// A command, shown as code.
    Code(String),
}

/// A failing case with its class.
#[derive(Debug, Clone)]
pub struct Classified<'a> {
    /// The case.
    pub case: &'a CaseOut,
    /// Its class.
    pub class: CaseClass,
    /// The violation that decided it, if any.
    pub by: Option<&'a ViolationOut>,
    /// For a bug, its root cause (`harness::bugs`).
    pub fingerprint: Option<Fingerprint>,
    /// What the classifier knew of the case.
    pub context: CaseContext,
}

/// Every failing case of a run, classified; `context` gives what the classifier knows of a
/// case beyond the report (its expectation and conform's reading of it).
pub fn classify_run<'a>(
    report: &'a Report,
    context: &dyn Fn(&CaseOut) -> CaseContext,
    policies: &Policies,
) -> Vec<Classified<'a>> {
    report
        .runs
        .iter()
        .flat_map(|r| &r.cases)
        .filter_map(|c| {
            let mut ctx = context(c);
            ctx.policies = Some(policies.for_format(&c.format));
            classify_case(c, &ctx).map(|(class, by)| Classified {
                case: c,
                class,
                by,
                fingerprint: match class {
                    CaseClass::Bug(b) => Some(fingerprint(c, b, by, &ctx)),
                    CaseClass::Policy(_) => None,
                },
                context: ctx,
            })
        })
        .collect()
}

/// The policies an engine declares: the keys of its engine.json `policy` the classifier
/// knows, each for every format (`KEY`) or for some formats' parsers (`KEY@FORMAT` or
/// `KEY@F1,F2`, where the engine settles the rule so in those parsers only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies(Vec<(PolicyKind, Option<String>)>);

impl Policies {
    /// The policies `e` declares.
    pub fn of(e: &EngineEntry) -> Policies {
        Policies(
            e.policy
                .keys()
                .flat_map(|k| {
                    let (key, formats) = match k.split_once('@') {
                        Some((key, f)) => (
                            key,
                            f.split(',').map(|f| Some(f.trim().to_string())).collect(),
                        ),
                        None => (k.as_str(), vec![None]),
                    };
                    let p = PolicyKind::from_key(key);
                    formats.into_iter().filter_map(move |f| p.map(|p| (p, f)))
                })
                .collect(),
        )
    }

    /// The policies that apply to a case of `format`.
    pub fn for_format(&self, format: &str) -> BTreeSet<PolicyKind> {
        self.0
            .iter()
            .filter(|(_, f)| f.as_deref().is_none_or(|f| f == format))
            .map(|(p, _)| *p)
            .collect()
    }
}

/// The page as blocks.
/// The pages of a matrix: the Markdown page (failures in one file per parser, linked), the
/// HTML page (everything inline), and each parser's failures file (`<parser>/FAILURES.md`).
pub struct Pages {
    /// `README.md`.
    pub markdown: Vec<Block>,
    /// `index.html`.
    pub html: Vec<Block>,
    /// `<parser>/FAILURES.md`, by parser name.
    pub failures: Vec<(String, Vec<Block>)>,
    /// `BUGS.md`: per engine, each distinct bug once.
    pub bugs: Vec<Block>,
    /// `bugs.json`: the same, for tools (per engine, each bug's fingerprint and its cases).
    pub bugs_json: serde_json::Value,
}

/// Builds every page.
pub fn pages(m: &Matrix, context: &dyn Fn(&CaseOut) -> CaseContext) -> Pages {
    let classified: Vec<(&Variant, Vec<Classified>)> = m
        .variants
        .iter()
        .map(|v| {
            (
                v,
                v.report
                    .as_ref()
                    .map(|r| classify_run(r, context, &Policies::of(&v.engine)))
                    .unwrap_or_default(),
            )
        })
        .collect();
    let head = document_head(m, &classified);
    let mut markdown = head.clone();
    markdown.extend(failure_index(&classified));
    markdown.extend(byte_level(m, context));
    let bugs = bugs_page(m, &classified);
    let bugs_json = bugs_json(&classified);
    let mut html = head;
    html.extend(bugs.iter().skip(1).cloned().map(|b| match b {
        Block::Heading(n, t) => Block::Heading(n + 1, t),
        b => b,
    }));
    html.extend(failures(&classified));
    html.extend(byte_level(m, context));
    let failures = classified
        .iter()
        .filter(|(v, _)| v.report.is_some())
        .map(|(v, cls)| {
            let mut b = vec![Block::Heading(
                1,
                format!(
                    "Failures of {} ({} {})",
                    v.entry.name, v.engine.engine, v.engine.version
                ),
            )];
            b.push(Block::Para(format!(
                "From the engines matrix of {} (../README.md), parser `{}`.",
                html::human_time(&m.manifest.generated_at),
                v.entry.parser
            )));
            b.extend(failures(std::slice::from_ref(&(*v, cls.clone()))));
            (v.entry.name.clone(), b)
        })
        .collect();
    Pages {
        markdown,
        html,
        failures,
        bugs,
        bugs_json,
    }
}

/// One distinct bug of an engine: its root cause and the cases it explains.
struct Bug<'a> {
    fingerprint: &'a Fingerprint,
    /// (variant, case) for every case it explains.
    cases: Vec<(&'a Variant, &'a Classified<'a>)>,
}

/// `BUGS.md`: per engine, each distinct bug once, most cases first — its title, the smallest
/// case that shows it (input, deltas), what the engine returns and what it should, the cases
/// it explains, the command that replays it, and a report to paste upstream.
pub fn bugs_page<'a>(
    m: &Matrix,
    classified: &'a [(&'a Variant, Vec<Classified<'a>>)],
) -> Vec<Block> {
    let mut out = vec![
        Block::Heading(1, "Engine bugs".into()),
        Block::Para(format!(
            "Each distinct bug the engines matrix of {} found (../README.md), once per engine: \
             failing cases fingerprinted by format, serving path and the deciding difference \
             (specs/engines.md §5). Policies the engines declare and dialect differences are \
             not here. Every replay command reproduces its bug from the repository root.",
            html::human_time(&m.manifest.generated_at)
        )),
        Block::Heading(2, "Distinct bugs".into()),
    ];
    let mut engines: Vec<(&EngineEntry, Vec<Bug>)> = Vec::new();
    for (v, cls) in classified {
        let at = match engines
            .iter()
            .position(|(e, _)| e.engine == v.engine.engine)
        {
            Some(i) => i,
            None => {
                engines.push((&v.engine, Vec::new()));
                engines.len() - 1
            }
        };
        for c in cls {
            let Some(f) = &c.fingerprint else { continue };
            let bugs = &mut engines[at].1;
            match bugs.iter_mut().find(|b| b.fingerprint == f) {
                Some(b) => b.cases.push((v, c)),
                None => bugs.push(Bug {
                    fingerprint: f,
                    cases: vec![(v, c)],
                }),
            }
        }
    }
    for (_, bugs) in &mut engines {
        bugs.sort_by(|a, b| {
            distinct_cases(b)
                .cmp(&distinct_cases(a))
                .then_with(|| a.fingerprint.cmp(b.fingerprint))
        });
    }
    out.push(Block::Table(
        ["engine", "#", "bug", "cases"].map(String::from).to_vec(),
        engines
            .iter()
            .flat_map(|(e, bugs)| {
                bugs.iter().enumerate().map(move |(i, b)| {
                    vec![
                        format!("{} {}", e.engine, e.version),
                        format!("{}", i + 1),
                        b.fingerprint.title(),
                        distinct_cases(b).to_string(),
                    ]
                })
            })
            .collect(),
    ));
    for (e, bugs) in &engines {
        out.push(Block::Heading(
            2,
            format!("{} {} ({})", e.engine, e.version, e.package),
        ));
        if bugs.is_empty() {
            out.push(Block::Para("No bug found.".into()));
        }
        for (i, b) in bugs.iter().enumerate() {
            out.extend(bug_blocks(e, i + 1, b));
        }
    }
    out
}

/// Per engine, every bug's fingerprint and the (variant, case, replay) it explains.
fn bugs_json(classified: &[(&Variant, Vec<Classified>)]) -> serde_json::Value {
    let mut per: BTreeMap<String, BTreeMap<String, Vec<serde_json::Value>>> = BTreeMap::new();
    for (v, cls) in classified {
        for c in cls {
            let Some(f) = &c.fingerprint else { continue };
            per.entry(v.engine.engine.clone())
                .or_default()
                .entry(f.title())
                .or_default()
                .push(serde_json::json!({
                    "variant": v.entry.name,
                    "case": c.case.id,
                    "class": f.class,
                    "replay": replay_of(c, &v.entry.parser),
                }));
        }
    }
    serde_json::to_value(per).unwrap_or_default()
}

fn distinct_cases(b: &Bug) -> usize {
    let ids: BTreeSet<&str> = b.cases.iter().map(|(_, c)| c.case.id.as_str()).collect();
    ids.len()
}

/// The replay command of a classified case (its deciding violation's, or a crash's).
fn replay_of(c: &Classified, parser: &str) -> String {
    match c.by {
        Some(v) => v.replay.clone(),
        None => {
            let (_, replay) = crash_note(c.case);
            if replay.is_empty() {
                whole_replay(c.case, parser)
            } else {
                replay
            }
        }
    }
}

fn bug_blocks(e: &EngineEntry, n: usize, b: &Bug) -> Vec<Block> {
    // The smallest case shows it best.
    let (v, rep) = *b
        .cases
        .iter()
        .min_by_key(|(_, c)| (c.context.bytes, c.case.id.clone()))
        .expect("a bug has a case");
    let f = b.fingerprint;
    let ctx = &rep.context;
    let replay = replay_of(rep, &v.entry.parser);
    let deltas = match rep.by {
        Some(x) if x.cuts.iter().any(|c| !c.is_empty()) => format!(
            "streamed in deltas cut at bytes {:?} ({})",
            x.cuts,
            x.strategy.map_or("", |s| s.as_str())
        ),
        Some(x) if x.path == Some(crate::harness::serving::ReplayPath::Batch) => {
            "the whole output, non-streaming (stream=false)".to_string()
        }
        Some(_) => "the whole output".to_string(),
        None => "see the replay command".to_string(),
    };
    let got = rep
        .by
        .and_then(|x| x.got.first())
        .map(|g| serde_json::to_string(g).unwrap_or_default())
        .unwrap_or_else(|| crash_note(rep.case).0);
    let expected = ctx.expected.clone().unwrap_or_else(|| {
        "(no expectation file: an i_ or unlabelled case, judged by its invariants)".into()
    });
    let what = rep
        .by
        .map_or_else(|| crash_note(rep.case).0, |x| x.message.clone());
    let mut ids: Vec<&str> = b.cases.iter().map(|(_, c)| c.case.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut variants: Vec<&str> = b.cases.iter().map(|(v, _)| v.entry.name.as_str()).collect();
    variants.sort_unstable();
    variants.dedup();
    let shown: Vec<&str> = ids.iter().take(12).copied().collect();
    let more = if ids.len() > shown.len() {
        format!(" and {} more", ids.len() - shown.len())
    } else {
        String::new()
    };
    let input = if ctx.transcript.chars().count() > 1500 {
        let cut: String = ctx.transcript.chars().take(1500).collect();
        format!("{cut}… ({} bytes in all)", ctx.bytes)
    } else {
        ctx.transcript.clone()
    };
    let report = format!(
        "### {title}\n\n\
         **{engine} {version}** ({package}), format `{format}`, {path}.\n\n\
         **Input** (the model's output, {bytes} bytes; conform case `{case}`):\n\n\
         ```text\n{input}\n```\n\n\
         **Delivered**: {deltas}.\n\n\
         **Expected**: `{expected}`\n\n\
         **Returned**: `{got}`\n\n\
         **What differs**: {what}\n\n\
         **Reproduce** (conform, from its repository root, with the engine's adapter set up):\n\n\
         ```sh\n{replay}\n```\n\n\
         The same bug fails {count} case(s) of conform's corpus: {list}{more}.",
        title = f.detail,
        engine = e.engine,
        version = e.version,
        package = e.package,
        format = f.format,
        path = f.path,
        bytes = ctx.bytes,
        case = rep.case.id,
        count = ids.len(),
        list = shown.join(", "),
    );
    vec![
        Block::Heading(3, format!("{n}. {}", f.title())),
        Block::Table(
            ["", ""].map(String::from).to_vec(),
            vec![
                vec!["class".into(), f.class.describe().into()],
                vec![
                    "cases".into(),
                    format!("{} ({})", ids.len(), variants.join(", ")),
                ],
                vec![
                    "smallest case".into(),
                    format!("`{}` ({} bytes)", rep.case.id, ctx.bytes),
                ],
                vec!["delivered".into(), deltas],
                vec!["expected".into(), format!("`{expected}`")],
                vec!["returned".into(), format!("`{got}`")],
                vec!["replay".into(), format!("`{replay}`")],
                vec!["engine".into(), format!("{} {}", e.package, e.version)],
            ],
        ),
        Block::Para("Upstream report (Markdown):".into()),
        Block::Code(report),
    ]
}

/// Per parser and format, the failing cases per class, with the file that lists them.
fn failure_index(classified: &[(&Variant, Vec<Classified>)]) -> Vec<Block> {
    let mut rows = Vec::new();
    for (v, cls) in classified {
        if v.report.is_none() {
            continue;
        }
        let mut formats: Vec<&str> = cls.iter().map(|c| c.case.format.as_str()).collect();
        formats.sort_unstable();
        formats.dedup();
        for f in formats {
            let mut counts: BTreeMap<CaseClass, usize> = BTreeMap::new();
            for c in cls.iter().filter(|c| c.case.format == f) {
                *counts.entry(c.class).or_default() += 1;
            }
            rows.push(vec![
                v.entry.name.clone(),
                f.to_string(),
                counts
                    .iter()
                    .map(|(k, n)| format!("{} {n}", k.label()))
                    .collect::<Vec<_>>()
                    .join(", "),
                format!("[{0}/FAILURES.md]({0}/FAILURES.md)", v.entry.name),
            ]);
        }
    }
    vec![
        Block::Heading(2, "Failures by engine, format and class".into()),
        Block::Para(
            "Each parser's failing cases are listed in its FAILURES.md (and all of them in \
             index.html): per format and class (specs/engines.md §3), each case with what went \
             wrong, the minimal chunking that shows it and the command that replays it; the \
             policy cases apart."
                .into(),
        ),
        Block::Table(
            ["parser", "format", "failing cases by class", "cases"]
                .map(String::from)
                .to_vec(),
            rows,
        ),
    ]
}

/// The page (every section inline), as [`Pages::html`] has it.
pub fn document(m: &Matrix, context: &dyn Fn(&CaseOut) -> CaseContext) -> Vec<Block> {
    pages(m, context).html
}

/// Everything before the failure lists.
fn document_head(m: &Matrix, classified: &[(&Variant, Vec<Classified>)]) -> Vec<Block> {
    let mf = &m.manifest;
    let mut out = vec![Block::Heading(1, "Engines matrix".into())];
    out.push(Block::Para(format!(
        "Real servers' tool-call parsers, run live through their adapters (examples/adapters/) over \
         conform's bundled corpus. Generated {} by `{}` with conform {} in {:.0} s (each \
         engine's date is in its row). Chunkings: {} \
         (token-aligned and whole input, what a server sends){}.",
        html::human_time(&mf.generated_at),
        mf.command,
        mf.conform_version,
        mf.seconds,
        mf.strategies.join(", "),
        if mf.byte_strategies.is_empty() {
            "; byte-level cuts were not run".to_string()
        } else {
            format!(
                "; byte-level cuts ({}) are reported apart, below",
                mf.byte_strategies.join(", ")
            )
        }
    )));
    out.push(Block::Code(mf.command.clone()));
    engines_table(m, &mut out);
    out.extend(summary(m, classified));
    out.extend(detail_table(classified));
    out.extend(cost_table(m));
    out
}

/// The compact grid: one row per parser, one column per format, `pass/cases`.
pub fn summary(m: &Matrix, classified: &[(&Variant, Vec<Classified>)]) -> Vec<Block> {
    let mut formats: Vec<String> = classified
        .iter()
        .filter_map(|(v, _)| v.report.as_ref())
        .flat_map(|r| r.runs.iter().flat_map(|run| run.formats.keys().cloned()))
        .collect();
    formats.sort();
    formats.dedup();
    let mut head = vec!["parser (version)".to_string()];
    head.extend(formats.iter().cloned());
    let mut rows = Vec::new();
    for (v, cls) in classified {
        let mut row = vec![format!("{} ({})", v.entry.name, v.engine.version)];
        match &v.report {
            None => {
                row.push(not_run(v));
                row.extend(formats.iter().skip(1).map(|_| String::new()));
            }
            Some(r) => {
                for f in &formats {
                    let t = r.runs.iter().find_map(|run| run.formats.get(f));
                    row.push(match t {
                        None => "–".into(),
                        Some(t) => {
                            let of: Vec<&Classified> =
                                cls.iter().filter(|c| c.case.format == *f).collect();
                            let policy = of
                                .iter()
                                .filter(|c| matches!(c.class, CaseClass::Policy(_)))
                                .count();
                            let bugs: BTreeSet<&Fingerprint> =
                                of.iter().filter_map(|c| c.fingerprint.as_ref()).collect();
                            let bug_cases = of.len() - policy;
                            let coalesced = r
                                .runs
                                .iter()
                                .flat_map(|run| &run.cases)
                                .filter(|c| {
                                    c.format == *f
                                        && !c.status.is_failing()
                                        && !c.coalesced_violations.is_empty()
                                })
                                .count();
                            let mut cell = format!("{}/{}", t.passed, t.cases);
                            if !bugs.is_empty() {
                                cell.push_str(&format!(
                                    " · {} bug{} in {bug_cases} case{}",
                                    bugs.len(),
                                    if bugs.len() == 1 { "" } else { "s" },
                                    if bug_cases == 1 { "" } else { "s" }
                                ));
                            }
                            if policy > 0 {
                                cell.push_str(&format!(" · +{policy} policy"));
                            }
                            if coalesced > 0 {
                                cell.push_str(&format!(" · {coalesced} coalesced-only"));
                            }
                            cell
                        }
                    });
                }
            }
        }
        rows.push(row);
    }
    for e in m
        .manifest
        .engines
        .iter()
        .filter(|e| !e.setup.ok && e.parsers.is_empty())
    {
        let mut row = vec![format!("{} ({})", e.engine, e.version)];
        row.push(format!(
            "setup failed: {} — fix: `{}`",
            e.setup.message, e.setup.command
        ));
        row.extend(formats.iter().skip(1).map(|_| String::new()));
        rows.push(row);
    }
    let mut out = vec![
        Block::Heading(2, "Summary: cases passed / cases".into()),
        Block::Para(
            "A cell counts the format's cases the parser passed on both serving paths (the \
             whole output through its non-streaming parser, every token-aligned chunking \
             through its streaming one), then the distinct bugs the failing cases come from \
             and how many cases fail from bugs (BUGS.md lists each bug once), `policy` cases \
             that fail only on a rule engines legitimately settle their own way and the \
             engine declares (specs/engines.md §3; dialect differences are not failures at \
             all), and `coalesced-only` cases that pass but break when the whole output comes \
             as one streaming delta (never counted as failures); – the engine does not have \
             the format."
                .into(),
        ),
        Block::Table(head, rows),
    ];
    out.extend(bug_counts(classified));
    out
}

/// Distinct bugs per engine (variants of one engine share their bugs).
fn bug_counts(classified: &[(&Variant, Vec<Classified>)]) -> Vec<Block> {
    /// Per (engine, version): its bugs and the cases failing from them.
    type Found<'a> = (BTreeSet<&'a Fingerprint>, BTreeSet<&'a str>);
    let mut per: BTreeMap<(String, String), Found> = BTreeMap::new();
    for (v, cls) in classified {
        let e = per
            .entry((v.engine.engine.clone(), v.engine.version.clone()))
            .or_default();
        for c in cls {
            if let Some(f) = &c.fingerprint {
                e.0.insert(f);
                e.1.insert(c.case.id.as_str());
            }
        }
    }
    let rows = per
        .iter()
        .map(|((e, ver), (bugs, cases))| {
            let mut formats: Vec<&str> = bugs.iter().map(|f| f.format.as_str()).collect();
            formats.dedup();
            vec![
                format!("{e} {ver}"),
                bugs.len().to_string(),
                cases.len().to_string(),
                formats.join(", "),
            ]
        })
        .collect();
    vec![
        Block::Para(
            "Distinct bugs per engine (BUGS.md: each once, with its smallest reproducer and a \
             report to paste upstream):"
                .into(),
        ),
        Block::Table(
            [
                "engine",
                "distinct bugs",
                "cases failing from them",
                "formats",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        ),
    ]
}

fn not_run(v: &Variant) -> String {
    match (&v.entry.error, v.problems.first()) {
        (Some(e), _) => format!("not run: {e}"),
        (None, Some(p)) => format!("no report: {p}"),
        (None, None) => "not run".into(),
    }
}

fn engines_table(m: &Matrix, out: &mut Vec<Block>) {
    out.push(Block::Heading(2, "Engines".into()));
    let mut rows = Vec::new();
    for e in &m.manifest.engines {
        let setup = if e.setup.ok {
            format!(
                "ok ({:.0} s), {}",
                e.setup.seconds,
                html::human_time(&e.date)
            )
        } else {
            format!("FAILED: {} — fix: `{}`", e.setup.message, e.setup.command)
        };
        if e.parsers.is_empty() || !e.setup.ok {
            rows.push(vec![
                e.engine.clone(),
                e.title.clone(),
                e.package.clone(),
                e.version.clone(),
                String::new(),
                setup,
                String::new(),
            ]);
            continue;
        }
        for p in &e.parsers {
            let v = m
                .variants
                .iter()
                .find(|v| v.entry.name == p.name && v.engine.engine == e.engine);
            let hello = v
                .and_then(|v| v.report.as_ref())
                .and_then(|r| r.adapters.as_ref())
                .and_then(|a| a.values().next())
                .map(|a| format!("{} [{}]", a.name, a.formats.join(", ")))
                .unwrap_or_else(|| v.map(not_run).unwrap_or_default());
            rows.push(vec![
                p.name.clone(),
                e.title.clone(),
                e.package.clone(),
                e.version.clone(),
                hello,
                setup.clone(),
                if p.date.is_empty() {
                    format!("{:.0} s", p.seconds)
                } else {
                    format!("{:.0} s, {}", p.seconds, html::human_time(&p.date))
                },
            ]);
        }
    }
    out.push(Block::Table(
        [
            "parser",
            "engine",
            "package",
            "version",
            "adapter hello [formats]",
            "setup",
            "run",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    ));
    let notes: Vec<Vec<String>> = m
        .manifest
        .engines
        .iter()
        .flat_map(|e| {
            e.policy
                .iter()
                .map(|(k, v)| vec![e.engine.clone(), k.clone(), v.clone()])
        })
        .collect();
    if !notes.is_empty() {
        out.push(Block::Para(
            "Policies the engines declare (their adapters' engine.json):".into(),
        ));
        out.push(Block::Table(
            vec!["engine".into(), "rule".into(), "the engine's choice".into()],
            notes,
        ));
    }
}

/// Per parser and format: cases, pass, bugs, policy, crash/timeout, failures by invariant and
/// by class.
pub fn detail_table(classified: &[(&Variant, Vec<Classified>)]) -> Vec<Block> {
    let mut rows = Vec::new();
    for (v, cls) in classified {
        let Some(r) = &v.report else { continue };
        for run in &r.runs {
            for (f, t) in &run.formats {
                let of_format: Vec<&Classified> =
                    cls.iter().filter(|c| c.case.format == *f).collect();
                let policy = of_format
                    .iter()
                    .filter(|c| matches!(c.class, CaseClass::Policy(_)))
                    .count();
                let crashes = run
                    .cases
                    .iter()
                    .filter(|c| {
                        c.format == *f
                            && matches!(
                                c.status,
                                CaseStatus::Crash | CaseStatus::Timeout | CaseStatus::ProtocolError
                            )
                    })
                    .count();
                let by_inv: Vec<String> = Invariant::ALL
                    .iter()
                    .filter_map(|i| t.violations.get(i).map(|n| format!("{} {n}", i.as_str())))
                    .collect();
                let mut by_class: BTreeMap<BugClass, usize> = BTreeMap::new();
                for c in &of_format {
                    if let CaseClass::Bug(b) = c.class {
                        *by_class.entry(b).or_default() += 1;
                    }
                }
                rows.push(vec![
                    v.entry.name.clone(),
                    f.clone(),
                    t.cases.to_string(),
                    t.passed.to_string(),
                    (of_format.len() - policy).to_string(),
                    policy.to_string(),
                    crashes.to_string(),
                    by_inv.join(", "),
                    by_class
                        .iter()
                        .map(|(b, n)| format!("{} {n}", b.as_str()))
                        .collect::<Vec<_>>()
                        .join(", "),
                ]);
            }
        }
    }
    vec![
        Block::Heading(2, "Engines × formats".into()),
        Block::Para(
            "bugs + policy = failing cases; crash/timeout counts the cases among the bugs \
             where the adapter crashed, hung or broke the protocol; by invariant counts cases \
             breaking each (a case may break several); by class puts each failing bug in one \
             class (specs/engines.md §3)."
                .into(),
        ),
        Block::Table(
            [
                "parser",
                "format",
                "cases",
                "pass",
                "bugs",
                "policy",
                "crash/timeout",
                "fail by invariant",
                "bugs by class",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        ),
    ]
}

fn ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

fn kb(n: usize) -> String {
    format!("{} KB", n / 1000)
}

/// The cost table: per parser and format, the engine's time and conform's at each size, and
/// the growth from the smallest to the largest.
pub fn cost_table(m: &Matrix) -> Vec<Block> {
    let mut sizes: Vec<usize> = m
        .variants
        .iter()
        .filter_map(|v| v.cost.as_ref())
        .flat_map(|c| c.rows.iter().map(|r| r.size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.is_empty() {
        return Vec::new();
    }
    let mut head = vec!["parser".to_string(), "format".to_string()];
    head.extend(sizes.iter().map(|s| format!("engine {}", kb(*s))));
    head.push("engine growth".into());
    head.extend(sizes.iter().map(|s| format!("conform {}", kb(*s))));
    head.push("same calls".into());
    let mut rows = Vec::new();
    for v in &m.variants {
        let Some(c) = &v.cost else { continue };
        let mut formats: Vec<&str> = c.rows.iter().map(|r| r.format.as_str()).collect();
        formats.dedup();
        for f in formats {
            let at = |s: usize| c.rows.iter().find(|r| r.format == f && r.size == s);
            let mut row = vec![v.entry.name.clone(), f.to_string()];
            let cell = |r: Option<&CostRow>| match r {
                None => "–".to_string(),
                Some(r) => match (r.status.as_str(), r.engine_ns) {
                    ("ok", Some(ns)) => ms(ns),
                    ("timeout", _) if c.timeout_s > 0.0 => format!("timeout (> {} s)", c.timeout_s),
                    (s, _) => s.replace('_', " "),
                },
            };
            row.extend(sizes.iter().map(|s| cell(at(*s))));
            let first = sizes.first().and_then(|s| at(*s)).and_then(|r| r.engine_ns);
            let last = sizes.last().and_then(|s| at(*s));
            row.push(match (first, last) {
                (Some(a), Some(b)) if a > 0 && sizes.len() > 1 => match b.engine_ns {
                    Some(ns) => format!("×{:.1}", ns as f64 / a as f64),
                    // A timeout bounds the growth from below.
                    None if b.status == "timeout" && c.timeout_s > 0.0 => {
                        format!("> ×{:.0}", c.timeout_s * 1e9 / a as f64)
                    }
                    None => "–".into(),
                },
                _ => "–".into(),
            });
            row.extend(
                sizes
                    .iter()
                    .map(|s| at(*s).map_or("–".into(), |r| ms(r.conform_ns))),
            );
            let same: Vec<String> = sizes
                .iter()
                .filter_map(|s| at(*s))
                .map(|r| match r.same_calls {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "–".into(),
                })
                .collect();
            row.push(same.join(" / "));
            rows.push(row);
        }
    }
    vec![
        Block::Heading(2, "Cost: a large argument at one token per delta".into()),
        Block::Para(format!(
            "One call whose string argument is {} bytes of code-like text, rendered by conform \
             for each format and replayed one o200k token per delta. The engine's time is what \
             its adapter measured inside the engine's parser calls (engine_ns, specs/adapter.md \
             §2.6); conform's is its own parser on the same deltas. Growth is the engine's time \
             at the largest size over the smallest: ×{} is linear, ×{} quadratic. `same calls`: \
             whether the engine's call equals conform's. Timings are this machine's (2 busy \
             cores) and change from run to run.",
            sizes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(" and "),
            sizes.last().unwrap_or(&1) / sizes.first().unwrap_or(&1).max(&1),
            (sizes.last().unwrap_or(&1) / sizes.first().unwrap_or(&1).max(&1)).pow(2),
        )),
        Block::Table(head, rows),
    ]
}

/// Longest message shown in a failure table, in characters (report.json has them whole).
const MESSAGE_CHARS: usize = 240;

fn shorten(m: &str) -> String {
    if m.chars().count() <= MESSAGE_CHARS {
        return m.to_string();
    }
    let mut s: String = m.chars().take(MESSAGE_CHARS).collect();
    s.push('…');
    s
}

/// The minimal chunking a violation names: `tokens, token-aligned, cuts [3, 9]`.
fn chunking_text(v: &ViolationOut) -> String {
    if v.cuts.iter().all(Vec::is_empty) {
        return match v.strategy {
            Some(crate::harness::chunking::Strategy::Whole) => "whole input".into(),
            Some(s) => format!("{}, no cut", s.as_str()),
            None => "whole-input check".into(),
        };
    }
    let mut parts = vec![
        v.strategy
            .map_or("whole-input check", |s| s.as_str())
            .to_string(),
    ];
    if let Some(c) = v.cut_class {
        parts.push(c.describe().to_string());
    }
    parts.push(format!("cuts {}", html::cuts_text(&v.cuts)));
    parts.join(", ")
}

/// A crash's reason and replay, from the case's notes.
fn crash_note(c: &CaseOut) -> (String, String) {
    let note = c
        .notes
        .iter()
        .find(|n| {
            ["crash", "timeout", "protocol_error"]
                .iter()
                .any(|k| n.starts_with(k))
        })
        .cloned()
        .unwrap_or_default();
    match note.split_once("; replay: ") {
        Some((why, replay)) => (why.to_string(), replay.to_string()),
        None => (note, String::new()),
    }
}

/// The command replaying a case's whole input through `parser` (for a crash on it, which
/// the report gives no command for).
fn whole_replay(c: &CaseOut, parser: &str) -> String {
    use crate::harness::run::shell_quote;
    let (path, line) = match c.id.split_once('#') {
        Some((p, l)) => (p, Some(l)),
        None => (c.id.as_str(), None),
    };
    let mut cmd = format!(
        "conform parse --format {} {} --parser {}",
        c.format,
        shell_quote(path),
        shell_quote(parser)
    );
    if let Some(l) = line {
        cmd.push_str(&format!(" --line {}", shell_quote(l)));
    }
    cmd
}

fn case_row(c: &Classified, parser: &str) -> Vec<String> {
    let invariants: Vec<&str> = c
        .case
        .violations
        .iter()
        .map(|v| v.invariant.as_str())
        .collect();
    let (what, chunking, replay) = match c.by {
        Some(v) => (shorten(&v.message), chunking_text(v), v.replay.clone()),
        None => {
            let (why, replay) = crash_note(c.case);
            if replay.is_empty() {
                (why, "whole input".into(), whole_replay(c.case, parser))
            } else {
                (why, String::new(), replay)
            }
        }
    };
    vec![
        format!("`{}`", c.case.id),
        if invariants.is_empty() {
            c.case.status.as_str().to_string()
        } else {
            invariants.join(", ")
        },
        what,
        chunking,
        if replay.is_empty() {
            String::new()
        } else {
            format!("`{replay}`")
        },
    ]
}

/// Per parser and format, the failing cases grouped by class, then the policy cases apart.
pub fn failures(classified: &[(&Variant, Vec<Classified>)]) -> Vec<Block> {
    let mut out = vec![
        Block::Heading(2, "Failures by engine, format and class".into()),
        Block::Para(
            "Each failing case once, in the class of its most telling violation \
             (specs/engines.md §3), with what went wrong, the minimal chunking that shows it \
             and the command that replays it."
                .into(),
        ),
    ];
    let head: Vec<String> = [
        "case",
        "invariants",
        "what went wrong",
        "minimal chunking",
        "replay",
    ]
    .map(String::from)
    .to_vec();
    for (v, cls) in classified {
        let mut formats: Vec<&str> = cls.iter().map(|c| c.case.format.as_str()).collect();
        formats.sort_unstable();
        formats.dedup();
        for f in formats {
            let of: Vec<&Classified> = cls.iter().filter(|c| c.case.format == f).collect();
            out.push(Block::Heading(3, format!("{} · {f}", v.entry.name)));
            for b in BugClass::ALL {
                let group: Vec<&&Classified> =
                    of.iter().filter(|c| c.class == CaseClass::Bug(b)).collect();
                if group.is_empty() {
                    continue;
                }
                out.push(Block::Heading(
                    4,
                    format!("{} ({})", b.describe(), group.len()),
                ));
                out.push(Block::Table(
                    head.clone(),
                    group.iter().map(|c| case_row(c, &v.entry.parser)).collect(),
                ));
            }
            let policy: Vec<&&Classified> = of
                .iter()
                .filter(|c| matches!(c.class, CaseClass::Policy(_)))
                .collect();
            if !policy.is_empty() {
                out.push(Block::Heading(
                    4,
                    format!("policy, not bugs ({})", policy.len()),
                ));
                let mut ph = vec!["policy".to_string()];
                ph.extend(head.iter().cloned());
                out.push(Block::Table(
                    ph,
                    policy
                        .iter()
                        .map(|c| {
                            let mut r = vec![c.class.label()];
                            r.extend(case_row(c, &v.entry.parser));
                            r
                        })
                        .collect(),
                ));
            }
        }
    }
    out
}

/// The byte-level runs, apart: per parser and format, cases failing there and not under
/// token-aligned cuts, and replays that split a special token.
pub fn byte_level(m: &Matrix, context: &dyn Fn(&CaseOut) -> CaseContext) -> Vec<Block> {
    let runs: Vec<(&Variant, &Report)> = m
        .variants
        .iter()
        .filter_map(|v| v.bytes.as_ref().map(|b| (v, b)))
        .collect();
    if runs.is_empty() {
        return Vec::new();
    }
    let mut out = vec![
        Block::Heading(2, "Byte-level cuts (apart)".into()),
        Block::Para(
            "A server never cuts inside a token, so these do not count above: they show how a \
             parser copes with arbitrary deltas (a proxy re-chunking a stream, a client \
             parser). Replays that cut inside a special token are never failures \
             (specs/adapter.md §5)."
                .into(),
        ),
    ];
    let mut rows = Vec::new();
    let mut lists = Vec::new();
    for (v, b) in runs {
        let token_failing: Vec<&str> = v
            .report
            .iter()
            .flat_map(|r| r.runs.iter().flat_map(|run| &run.cases))
            .filter(|c| c.status.is_failing())
            .map(|c| c.id.as_str())
            .collect();
        let cls = classify_run(b, context, &Policies::of(&v.engine));
        for run in &b.runs {
            for (f, t) in &run.formats {
                let only: Vec<&Classified> = cls
                    .iter()
                    .filter(|c| c.case.format == *f && !token_failing.contains(&c.case.id.as_str()))
                    .collect();
                let split = run
                    .cases
                    .iter()
                    .filter(|c| c.format == *f && !c.token_split_violations.is_empty())
                    .count();
                rows.push(vec![
                    v.entry.name.clone(),
                    f.clone(),
                    t.cases.to_string(),
                    t.passed.to_string(),
                    only.len().to_string(),
                    split.to_string(),
                ]);
                if !only.is_empty() {
                    lists.push(Block::Heading(
                        3,
                        format!("{} · {f}: failing only on byte-level cuts", v.entry.name),
                    ));
                    let mut ph = vec!["class".to_string()];
                    ph.extend(
                        [
                            "case",
                            "invariants",
                            "what went wrong",
                            "minimal chunking",
                            "replay",
                        ]
                        .map(String::from),
                    );
                    lists.push(Block::Table(
                        ph,
                        only.iter()
                            .map(|c| {
                                let mut r = vec![c.class.label()];
                                r.extend(case_row(c, &v.entry.parser));
                                r
                            })
                            .collect(),
                    ));
                }
            }
        }
    }
    out.push(Block::Table(
        [
            "parser",
            "format",
            "cases",
            "pass",
            "failing only here",
            "split special tokens (not failures)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    ));
    out.extend(lists);
    out
}

/// A table cell for Markdown: pipes escaped, newlines flattened.
fn md_cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// The blocks as Markdown.
pub fn markdown(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            Block::Heading(l, t) => {
                let _ = writeln!(out, "{} {}\n", "#".repeat(usize::from(*l)), t);
            }
            Block::Para(t) => {
                let _ = writeln!(out, "{t}\n");
            }
            Block::Code(c) => {
                // A longer fence when the code holds one (a bug report with its own blocks).
                if c.contains("```") {
                    let _ = writeln!(out, "````markdown\n{c}\n````\n");
                } else {
                    let _ = writeln!(out, "```sh\n{c}\n```\n");
                }
            }
            Block::Table(head, rows) => {
                let _ = writeln!(
                    out,
                    "| {} |",
                    head.iter()
                        .map(|h| md_cell(h))
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
                let _ = writeln!(out, "|{}", "---|".repeat(head.len()));
                for r in rows {
                    let cells: Vec<String> = r.iter().map(|c| md_code_cell(c)).collect();
                    let _ = writeln!(out, "| {} |", cells.join(" | "));
                }
                out.push('\n');
            }
        }
    }
    out
}

/// A cell wholly in backticks is code: its pipes are escaped and backticks inside it widen
/// the fence.
fn md_code_cell(c: &str) -> String {
    match c.strip_prefix('`').and_then(|s| s.strip_suffix('`')) {
        Some(code) if !code.is_empty() => {
            let inner = code.replace('|', "\\|").replace(['\n', '\r'], " ");
            if inner.contains('`') {
                format!("`` {inner} ``")
            } else {
                format!("`{inner}`")
            }
        }
        _ => md_cell(c),
    }
}

/// Text with `` `code` `` spans as HTML.
fn html_inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", html::escape(part));
        } else {
            out.push_str(&html::escape(part));
        }
    }
    out
}

/// The blocks as a self-contained HTML page (the report page's stylesheet).
pub fn html_page(blocks: &[Block], footer: &str) -> String {
    let mut body = String::new();
    for b in blocks {
        match b {
            Block::Heading(l, t) => {
                let _ = writeln!(body, "<h{l}>{}</h{l}>", html::escape(t));
            }
            Block::Para(t) => {
                let _ = writeln!(body, "<p>{}</p>", html_inline(t));
            }
            Block::Code(c) => {
                let _ = writeln!(body, "<pre><code>{}</code></pre>", html::escape(c));
            }
            Block::Table(head, rows) => {
                body.push_str("<table class=\"data\"><thead><tr>");
                for h in head {
                    let _ = write!(body, "<th>{}</th>", html::escape(h));
                }
                body.push_str("</tr></thead><tbody>\n");
                for r in rows {
                    body.push_str("<tr>");
                    for c in r {
                        let _ = write!(body, "<td>{}</td>", html_inline(c));
                    }
                    body.push_str("</tr>\n");
                }
                body.push_str("</tbody></table>\n");
            }
        }
    }
    html::page("conform · engines matrix", &body, footer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_key_with_a_format_applies_to_that_format_only() {
        let e: EngineEntry = serde_json::from_value(serde_json::json!({
            "engine": "x",
            "setup": {"ok": true, "command": "", "seconds": 0.0},
            "policy": {"errors": "none", "typing@deepseek_v32": "JSON first", "notes": "-",
                       "guided_native@hermes, apertus": "own markup"}
        }))
        .unwrap();
        let p = Policies::of(&e);
        for f in ["hermes", "apertus"] {
            assert_eq!(
                p.for_format(f),
                [PolicyKind::Errors, PolicyKind::GuidedNative]
                    .into_iter()
                    .collect()
            );
        }
        assert_eq!(
            p.for_format("deepseek_v32"),
            [PolicyKind::Errors, PolicyKind::Typing]
                .into_iter()
                .collect()
        );
        assert_eq!(
            p.for_format("qwen3_coder"),
            [PolicyKind::Errors].into_iter().collect()
        );
    }

    #[test]
    fn markdown_and_html_escape_what_would_break_them() {
        let blocks = vec![
            Block::Heading(2, "T".into()),
            Block::Table(
                vec!["a".into(), "b".into()],
                vec![vec![
                    "x|y".into(),
                    "`conform parse --parser 'cmd:a|b'`".into(),
                ]],
            ),
            Block::Para("see `x<y>`".into()),
        ];
        let md = markdown(&blocks);
        assert!(
            md.contains("| x\\|y | `conform parse --parser 'cmd:a\\|b'` |"),
            "{md}"
        );
        let page = html_page(&blocks, "f");
        assert!(page.contains("<code>x&lt;y&gt;</code>"), "{page}");
        assert!(page.contains("<td>x|y</td>"));
    }

    fn cost_row(format: &str, size: usize, status: &str, ns: Option<u64>) -> CostRow {
        CostRow {
            format: format.into(),
            size,
            bytes: size + 100,
            deltas: size / 4,
            status: status.into(),
            message: String::new(),
            engine_ns: ns,
            conform_ns: 1_000_000,
            same_calls: ns.map(|_| true),
        }
    }

    #[test]
    fn the_cost_table_shows_growth_and_bounds_it_below_on_a_timeout() {
        let engine = EngineEntry {
            engine: "e".into(),
            title: String::new(),
            package: String::new(),
            version: "1".into(),
            date: String::new(),
            policy: BTreeMap::new(),
            dialect: vec![],
            setup: Step {
                ok: true,
                seconds: 0.0,
                message: String::new(),
                command: String::new(),
            },
            parsers: vec![],
        };
        let entry = ParserEntry {
            name: "e".into(),
            parser: "cmd:e".into(),
            report: None,
            bytes_report: None,
            cost: None,
            error: None,
            seconds: 0.0,
            date: String::new(),
            paths: vec![],
            slow_report: None,
        };
        let cost = CostReport {
            parser: "cmd:e".into(),
            name: "e 1".into(),
            timeout_s: 20.0,
            rows: vec![
                cost_row("hermes", 10_000, "ok", Some(2_000_000)),
                cost_row("hermes", 100_000, "ok", Some(200_000_000)),
                cost_row("kimi_k2", 10_000, "ok", Some(1_000_000_000)),
                cost_row("kimi_k2", 100_000, "timeout", None),
            ],
        };
        let m = Matrix {
            manifest: Manifest {
                generated_at: String::new(),
                command: String::new(),
                conform_version: String::new(),
                strategies: vec![],
                byte_strategies: vec![],
                seconds: 0.0,
                engines: vec![engine.clone()],
            },
            variants: vec![Variant {
                engine,
                entry,
                report: None,
                bytes: None,
                cost: Some(cost),
                problems: vec![],
                slow: vec![],
            }],
        };
        let md = markdown(&cost_table(&m));
        assert!(
            md.contains(
                "| e | hermes | 2.00 ms | 200 ms | ×100.0 | 1.00 ms | 1.00 ms | yes / yes |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| e | kimi_k2 | 1000 ms | timeout (> 20 s) | > ×20 |"),
            "{md}"
        );
    }

    #[test]
    fn a_crash_note_gives_its_reason_and_replay() {
        let c = CaseOut {
            id: "c".into(),
            format: "kimi_k2".into(),
            label: crate::harness::corpus::Label::Accept,
            status: CaseStatus::Timeout,
            digest: String::new(),
            replays: 2,
            error_free: 0,
            matched: 0,
            violations: vec![],
            notes: vec!["timeout under tokens: no answer in 10 s; replay: conform parse x".into()],
            completion: None,
            token_split_replays: 0,
            token_split_violations: vec![],
            coalesced_violations: Vec::new(),
            options: Default::default(),
            request: Default::default(),
        };
        assert_eq!(
            crash_note(&c),
            (
                "timeout under tokens: no answer in 10 s".to_string(),
                "conform parse x".to_string()
            )
        );
    }

    /// A case of `format` failing `expectation` on `path` with what the engine returned.
    fn failing(id: &str, path: &str, message: &str, got: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "id": id, "format": "deepseek_v3", "label": "y", "status": "fail", "digest": "",
            "replays": 3, "error_free": 3, "matched": 0, "notes": [],
            "violations": [{"invariant": "expectation", "strategy": "tokens", "cuts": [[5]],
                "failing_replays": 1, "message": message, "path": path,
                "replay": format!("conform parse --format deepseek_v3 {id} --cuts 5 --path stream"),
                "got": [got]}]
        })
    }

    #[test]
    fn bugs_are_listed_once_per_engine_with_their_smallest_case_and_an_upstream_report() {
        let args = |suffix: &str| {
            let arguments = serde_json::json!({ "a": format!("x{suffix}") }).to_string();
            serde_json::json!({"text": "", "calls": [{"name": "f", "arguments": arguments}]})
        };
        let msg = r#"call 0 differs: parsed f({"a":"x…"}) but the expectation says f({"a":"x"})"#;
        let cases = vec![
            failing("c/big.txt", "stream", msg, args("<｜tool▁call▁end｜>")),
            failing(
                "c/small.txt",
                "stream",
                msg,
                args("\n```<｜tool▁call▁end｜>"),
            ),
            failing(
                "c/text.txt",
                "batch",
                r#"text is "" but the expectation says "Hi.""#,
                serde_json::json!({"text": "", "calls": []}),
            ),
        ];
        let report: Report = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "tool": {"name": "conform", "version": "0"}, "seed": 0,
            "strategies": ["whole", "tokens"],
            "chunking": {"random_groupings": 8, "random_max_chunk": 16, "two_cut_cap": 512,
                "bursts": 4, "burst_max_tokens": 8, "tokenizer": "o200k_base"},
            "corpus": {"digest": "", "cases": 3, "errors": []},
            "runs": [{"parser": "cmd:e", "totals": {"cases": 3, "passed": 0, "failed": 3,
                "xfail": 0, "xpass": 0, "replays": 9, "parse_replays": 9, "parse_ok": 9,
                "parse_success_rate": 1.0, "match_replays": 9, "match_ok": 0, "match_rate": 0.0,
                "violations": {}, "cut_classes": {}},
                "formats": {}, "cases": cases}]
        }))
        .unwrap();
        let engine = EngineEntry {
            engine: "e".into(),
            title: String::new(),
            package: "e (crates.io)".into(),
            version: "1.0".into(),
            date: String::new(),
            policy: BTreeMap::new(),
            dialect: vec![],
            setup: Step {
                ok: true,
                seconds: 0.0,
                message: String::new(),
                command: String::new(),
            },
            parsers: vec![],
        };
        let entry = ParserEntry {
            name: "e".into(),
            parser: "cmd:e".into(),
            report: None,
            bytes_report: None,
            cost: None,
            error: None,
            seconds: 0.0,
            date: String::new(),
            paths: vec!["batch".into(), "stream".into()],
            slow_report: None,
        };
        let m = Matrix {
            manifest: Manifest {
                generated_at: String::new(),
                command: String::new(),
                conform_version: String::new(),
                strategies: vec![],
                byte_strategies: vec![],
                seconds: 0.0,
                engines: vec![engine.clone()],
            },
            variants: vec![Variant {
                engine,
                entry,
                report: Some(report),
                bytes: None,
                cost: None,
                problems: vec![],
                slow: vec![],
            }],
        };
        let context = |c: &CaseOut| {
            let mut ctx = CaseContext::of_format(&c.format);
            ctx.bytes = if c.id.contains("small") { 10 } else { 99 };
            ctx.transcript = format!("transcript of {}", c.id);
            ctx.turns = vec![crate::harness::classify::TurnContext {
                expected_text: Some("Hi.".into()),
                expected_calls: Some(vec![crate::event::ToolCall {
                    name: "f".into(),
                    id: None,
                    server: None,
                    arguments: serde_json::json!({"a": "x"}),
                }]),
                ..Default::default()
            }];
            ctx
        };
        let pages = pages(&m, &context);
        let md = markdown(&pages.bugs);
        // Two distinct bugs: the arguments one explains two cases, shown by the smaller.
        assert!(md.contains("| e 1.0 | 1 | deepseek_v3: a string argument ends with markup (`<｜tool▁call▁end｜>`) (streaming) | 2 |"), "{md}");
        assert!(
            md.contains("| e 1.0 | 2 | deepseek_v3: text dropped (stream=false) | 1 |"),
            "{md}"
        );
        assert!(md.contains("`c/small.txt` (10 bytes)"), "{md}");
        assert!(
            md.contains("````markdown\n### a string argument ends with markup"),
            "{md}"
        );
        assert!(md.contains("transcript of c/small.txt"), "{md}");
        assert!(
            md.contains("conform parse --format deepseek_v3 c/small.txt --cuts 5 --path stream"),
            "{md}"
        );
        // The summary counts them per engine.
        let summary = markdown(&pages.markdown);
        assert!(
            summary.contains("| e 1.0 | 2 | 3 | deepseek_v3 |"),
            "{summary}"
        );
    }
}
