//! The nightly page: one self-contained HTML file (inline CSS and SVG, no script, no network)
//! with the latest run's headline, per-format rates over time, the current failures and, for
//! several parsers, the comparison matrix.
//!
//! The page is built from saved `report.json` files only, so a history directory of nightly
//! reports is all it needs; nothing here reruns a parser.

use super::report_dir;
use crate::harness::report::percent;
use crate::harness::report::{CaseOut, CaseStatus, Change, Report, Run, TotalsOut};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Failing cases shown per parser before the rest are only counted (the page must stay usable).
const MAX_FAILURES: usize = 200;
/// Disagreeing matrix rows shown before the rest are only counted.
const MAX_MATRIX_ROWS: usize = 300;
/// Rows of the history table, newest first.
const MAX_HISTORY_ROWS: usize = 60;

/// Escapes text for element content and double- or single-quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The reports in chart order: by `timings.generated_at` when every report has one (RFC 3339
/// UTC strings sort as times), otherwise in the order given.
pub fn chronological(history: &[Report]) -> Vec<&Report> {
    let mut out: Vec<&Report> = history.iter().collect();
    if out.iter().all(|r| r.timings.is_some()) {
        out.sort_by(|a, b| generated_at(a).cmp(generated_at(b)));
    }
    out
}

fn generated_at(r: &Report) -> &str {
    r.timings.as_ref().map_or("", |t| t.generated_at.as_str())
}

/// Reads reports from files and from directories (every `report.json` below them, in path
/// order), naming every file or directory that could not be used.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<Report>, String> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        if p.is_dir() {
            let found = report_files(p, &mut errors);
            if found.is_empty() {
                errors.push(format!("{}: no report.json below it", p.display()));
            }
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let mut reports = Vec::new();
    for f in &files {
        match report_dir::read(f) {
            Ok(r) => reports.push(r),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(reports)
    } else {
        Err(errors.join("\n"))
    }
}

/// Every `report.json` below `dir`, sorted by path, walked as the corpus is: each directory
/// once by its identity, so a symbolic link back to an ancestor (a loop) or to a directory
/// already walked is named instead of followed; a link to nothing is named. What is named
/// `report.json` is read as a report, and a FIFO or device by that name is named, not read
/// (see `report_dir::read`).
fn report_files(dir: &Path, errors: &mut Vec<String>) -> Vec<PathBuf> {
    let mut w = HistoryWalk::default();
    if let Ok(meta) = std::fs::metadata(dir) {
        w.dir(dir, &meta, false, errors);
    }
    w.found.sort();
    w.found
}

/// Deeper directories than this are not walked (and named).
const MAX_HISTORY_DEPTH: usize = 64;

#[derive(Default)]
struct HistoryWalk {
    found: Vec<PathBuf>,
    /// Directories entered, by identity, with the path first used.
    seen: std::collections::BTreeMap<DirId, PathBuf>,
    /// The directories being walked, outermost first.
    stack: Vec<DirId>,
}

#[cfg(unix)]
type DirId = (u64, u64);
#[cfg(not(unix))]
type DirId = PathBuf;

#[cfg(unix)]
fn dir_id(_: &Path, meta: &std::fs::Metadata) -> DirId {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn dir_id(path: &Path, _: &std::fs::Metadata) -> DirId {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl HistoryWalk {
    fn dir(
        &mut self,
        dir: &Path,
        meta: &std::fs::Metadata,
        via_link: bool,
        errors: &mut Vec<String>,
    ) {
        let id = dir_id(dir, meta);
        if let Some(first) = self.seen.get(&id) {
            if self.stack.contains(&id) {
                errors.push(format!(
                    "{}: a directory loop: the same directory as its ancestor {}; not followed",
                    dir.display(),
                    first.display()
                ));
            } else if via_link {
                errors.push(format!(
                    "{}: a symbolic link to a directory already walked as {}; not followed",
                    dir.display(),
                    first.display()
                ));
            }
            return;
        }
        if self.stack.len() >= MAX_HISTORY_DEPTH {
            errors.push(format!(
                "{}: more than {MAX_HISTORY_DEPTH} directories deep; not walked",
                dir.display()
            ));
            return;
        }
        // DirId is Copy on unix, a PathBuf elsewhere.
        #[allow(clippy::clone_on_copy)]
        self.seen.insert(id.clone(), dir.to_path_buf());
        self.stack.push(id);
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                errors.push(format!("{}: cannot read: {e}", dir.display()));
                self.stack.pop();
                return;
            }
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => self.dir(&path, &m, link, errors),
                Ok(_) if path.file_name().is_some_and(|n| n == "report.json") => {
                    self.found.push(path)
                }
                Ok(_) => {}
                Err(_) if link && path.file_name().is_some_and(|n| n == "report.json") => {
                    errors.push(format!("{}: a symbolic link to nothing", path.display()))
                }
                Err(_) => {}
            }
        }
        self.stack.pop();
    }
}

/// Renders the page for a history of reports; the latest (last in chart order) is detailed.
pub fn render(history: &[Report]) -> String {
    let reports = chronological(history);
    let mut body = String::new();
    match reports.last() {
        None => body.push_str("<header class=\"top\"><h1>conform</h1><p class=\"muted\">No reports were given.</p></header>"),
        Some(latest) => {
            header(&mut body, latest, reports.len());
            if let Some(c) = &latest.comparison {
                regressions(&mut body, c);
            }
            trends(&mut body, &reports);
            latest_tables(&mut body, latest);
            if latest.runs.len() > 1 {
                matrix_section(&mut body, &latest.runs);
            }
            failures(&mut body, latest);
            history_table(&mut body, &reports);
        }
    }
    let title = reports.last().map_or_else(
        || "conform report".to_string(),
        |r| format!("conform report · {}", human_time(generated_at(r))),
    );
    let version = reports.last().map_or("", |r| r.tool.version.as_str());
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n{body}\
         <footer>Written by conform {} from {} report(s). Self-contained: no scripts, no network.</footer>\n\
         </main>\n</body>\n</html>\n",
        escape(&title),
        escape(version),
        reports.len()
    )
}

/// A self-contained page with the report's stylesheet around `body` (already HTML).
pub fn page(title: &str, body: &str, footer: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n{body}\
         <footer>{}</footer>\n</main>\n</body>\n</html>\n",
        escape(title),
        escape(footer)
    )
}

/// `2026-11-22T05:27:40Z` → `2026-11-22 05:27 UTC`; anything else is shown as given.
pub fn human_time(t: &str) -> String {
    let b = t.as_bytes();
    if b.len() >= 16 && b[10] == b'T' && t.is_char_boundary(16) && t.ends_with('Z') {
        format!("{} {} UTC", &t[..10], &t[11..16])
    } else if t.is_empty() {
        "time not recorded".into()
    } else {
        t.to_string()
    }
}

/// 123509 → `123,509`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn short_digest(d: &str) -> &str {
    d.get(..12).unwrap_or(d)
}

fn failing_count(r: &Report) -> usize {
    r.runs.iter().map(|x| x.totals.failed).sum()
}

/// A rate class for colouring: full, partial, or absent. A rate below 100 % is a warning only
/// when cases of its totals fail: with none failing it comes from unlabelled inputs that end in
/// an error as they should (a truncated seed transcript), and is shown plainly.
fn rate_class(r: Option<f64>, failed: usize) -> &'static str {
    match r {
        None => "na",
        Some(x) if x >= 1.0 => "good",
        Some(_) if failed == 0 => "plain",
        Some(x) if x >= 0.95 => "warn",
        Some(_) => "bad",
    }
}

fn header(out: &mut String, r: &Report, count: usize) {
    let failed = failing_count(r);
    let regressions = r.comparison.as_ref().map_or(0, |c| c.regressions.len());
    let (verdict, class) = if r.judged_nothing().is_some() {
        ("nothing was judged", "bad")
    } else if r.partial.is_some() {
        ("partial merge", "bad")
    } else if failed == 0 && regressions == 0 && r.corpus.errors.is_empty() {
        ("all invariants hold", "ok")
    } else if failed == 0 && regressions == 0 {
        ("corpus errors", "bad")
    } else {
        ("failures", "bad")
    };
    let _ = write!(
        out,
        "<header class=\"top\">\n<div class=\"title\"><h1>conform</h1>\
         <span class=\"verdict {class}\">{verdict}</span></div>\n\
         <p class=\"muted\">Latest run {} · {} report(s) in the history</p>\n<div class=\"runs\">\n",
        escape(&human_time(generated_at(r))),
        count
    );
    if let Some(p) = &r.partial {
        let _ = writeln!(
            out,
            "<p class=\"bad\">A partial merge of {}: the cases of the missing shards were not judged.</p>",
            escape(&p.describe())
        );
    }
    for run in &r.runs {
        let t = &run.totals;
        let _ = writeln!(
            out,
            "<section class=\"run\"><h2 class=\"parser\" title=\"{p}\">{p}</h2><div class=\"kpis\">\
             <div class=\"kpi\"><span class=\"v {}\">{}</span><span class=\"k\">parse success</span></div>\
             <div class=\"kpi\"><span class=\"v {}\">{}</span><span class=\"k\">match</span></div>\
             <div class=\"kpi\"><span class=\"v\">{}</span><span class=\"k\">cases</span></div>\
             <div class=\"kpi\"><span class=\"v {}\">{}</span><span class=\"k\">failing</span></div>\
             </div></section>",
            rate_class(t.parse_success_rate, t.failed),
            percent(t.parse_success_rate),
            rate_class(t.match_rate, t.failed),
            percent(t.match_rate),
            thousands(t.cases),
            if t.failed > 0 { "bad" } else { "good" },
            thousands(t.failed),
            p = escape(&run.parser),
        );
    }
    out.push_str("</div>\n<dl class=\"meta\">");
    let shard = r
        .shard
        .map(|s| format!("<div><dt>shard</dt><dd>{}/{}</dd></div>", s.index, s.count))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<div><dt>seed</dt><dd>{}</dd></div>\
         <div><dt>corpus</dt><dd><code title=\"{}\">{}</code> · {} case(s)</dd></div>\
         <div><dt>strategies</dt><dd>{}</dd></div>\
         <div><dt>random groupings</dt><dd>{} × ≤{} bytes</dd></div>\
         <div><dt>conform</dt><dd>{}</dd></div>\
         <div><dt>generated at</dt><dd>{}</dd></div>{shard}",
        r.seed,
        escape(&r.corpus.digest),
        escape(short_digest(&r.corpus.digest)),
        thousands(r.corpus.cases),
        escape(&r.strategies.join(", ")),
        r.chunking.random_groupings,
        r.chunking.random_max_chunk,
        escape(&r.tool.version),
        escape(generated_at(r)),
    );
    out.push_str("</dl>\n");
    if !r.corpus.errors.is_empty() {
        let _ = write!(
            out,
            "<div class=\"callout callout-bad\"><strong>{} corpus file(s) could not be loaded</strong><ul>",
            r.corpus.errors.len()
        );
        for e in &r.corpus.errors {
            let _ = write!(
                out,
                "<li><code>{}</code>: {}</li>",
                escape(&e.path),
                escape(&e.message)
            );
        }
        out.push_str("</ul></div>\n");
    }
    out.push_str("</header>\n");
}

/// Changes listed before the rest fold under a disclosure (rate changes sort first).
const OPEN_CHANGES: usize = 10;

fn change_table(out: &mut String, list: &[&Change]) {
    out.push_str("<table class=\"data\"><thead><tr><th>parser</th><th>case or format</th><th>change</th></tr></thead><tbody>");
    for c in list {
        let _ = write!(
            out,
            "<tr><td class=\"parser-cell\">{}</td><td><code>{}</code></td><td>{}</td></tr>",
            escape(&c.parser),
            escape(&c.subject),
            escape(&c.change)
        );
    }
    out.push_str("</tbody></table>");
}

/// Rate changes first (they summarise many cases), then cases; the tail behind a disclosure.
fn change_rows(out: &mut String, list: &[Change], what: &str) {
    let mut sorted: Vec<&Change> = list.iter().collect();
    sorted.sort_by_key(|c| !c.subject.starts_with("format:"));
    let (open, rest) = sorted.split_at(sorted.len().min(OPEN_CHANGES));
    change_table(out, open);
    if !rest.is_empty() {
        let _ = write!(
            out,
            "<details><summary>{} more {what}</summary>",
            rest.len()
        );
        change_table(out, rest);
        out.push_str("</details>");
    }
}

fn regressions(out: &mut String, c: &crate::harness::report::Comparison) {
    out.push_str("<section id=\"regressions\">");
    if c.regressions.is_empty() {
        out.push_str(
            "<div class=\"callout callout-ok\">No regressions against the baseline.</div>",
        );
    } else {
        let _ = write!(
            out,
            "<div class=\"callout callout-bad\"><h2>Regressions against the baseline ({})</h2>",
            c.regressions.len()
        );
        change_rows(out, &c.regressions, "regression(s)");
        out.push_str("</div>");
    }
    if !c.fixes.is_empty() {
        let _ = write!(
            out,
            "<details><summary>Fixes against the baseline ({})</summary>",
            c.fixes.len()
        );
        change_rows(out, &c.fixes, "fix(es)");
        out.push_str("</details>");
    }
    if !c.new_cases.is_empty() || !c.removed_cases.is_empty() {
        let _ = write!(
            out,
            "<p class=\"muted\">{} new case(s), {} removed case(s) since the baseline.</p>",
            c.new_cases.len(),
            c.removed_cases.len()
        );
    }
    out.push_str("</section>\n");
}

/// One point of a series: the rate with its numerator and denominator.
type Sample = Option<(f64, usize, usize)>;

fn parse_sample(t: Option<&TotalsOut>) -> Sample {
    let t = t?;
    Some((t.parse_success_rate?, t.parse_ok, t.parse_replays))
}

fn match_sample(t: Option<&TotalsOut>) -> Sample {
    let t = t?;
    Some((t.match_rate?, t.match_ok, t.match_replays))
}

fn trends(out: &mut String, reports: &[&Report]) {
    // Parsers in the latest report's order first, then any that only older reports have.
    let mut parsers: Vec<&str> = Vec::new();
    for r in reports.iter().rev() {
        for run in &r.runs {
            if !parsers.contains(&run.parser.as_str()) {
                parsers.push(&run.parser);
            }
        }
    }
    let runs: Vec<Vec<Option<&Run>>> = parsers
        .iter()
        .map(|p| {
            reports
                .iter()
                .map(|r| r.runs.iter().find(|x| x.parser == *p))
                .collect()
        })
        .collect();
    let mut formats: Vec<&str> = runs
        .iter()
        .flatten()
        .flatten()
        .flat_map(|r| r.formats.keys().map(String::as_str))
        .collect();
    formats.sort_unstable();
    formats.dedup();
    // Panels: overall per parser (when there is more than one format), then each format with
    // its parsers side by side, so that parsers compare at a glance.
    // Each panel carries, per report, the identity of the cases behind its rates: points of
    // different corpora are not joined (a change is marked), since their rates do not compare.
    type Panel<'a> = (&'a str, usize, Vec<Option<&'a TotalsOut>>, Vec<Option<u64>>);
    let mut panels: Vec<Panel> = Vec::new();
    if formats.len() > 1 {
        for (p, rs) in runs.iter().enumerate() {
            panels.push((
                "all formats",
                p,
                rs.iter().map(|r| r.map(|r| &r.totals)).collect(),
                rs.iter()
                    .map(|r| r.map(|r| corpus_key(r.cases.iter())))
                    .collect(),
            ));
        }
    }
    for f in &formats {
        for (p, rs) in runs.iter().enumerate() {
            if rs.iter().flatten().any(|r| r.formats.contains_key(*f)) {
                panels.push((
                    f,
                    p,
                    rs.iter()
                        .map(|r| r.and_then(|r| r.formats.get(*f)))
                        .collect(),
                    rs.iter()
                        .map(|r| {
                            r.filter(|r| r.formats.contains_key(*f))
                                .map(|r| corpus_key(r.cases.iter().filter(|c| c.format == *f)))
                        })
                        .collect(),
                ));
            }
        }
    }
    let labels = x_labels(reports);
    out.push_str("<section id=\"trends\"><h2>Rates over time</h2>\n<p class=\"muted\">Parse success: replays of <code>y_</code> and unlabelled cases that ended without an error. Match: <code>y_</code> replays equal to their expectation. One point per report; hover a point for its numbers. A dotted vertical line marks a report whose cases differ from the previous one's (another corpus): the lines do not join across it.</p>\n<div class=\"charts\">\n");
    for (name, p, totals, corpora) in panels {
        let parse: Vec<Sample> = totals.iter().map(|t| parse_sample(*t)).collect();
        let matched: Vec<Sample> = totals.iter().map(|t| match_sample(*t)).collect();
        let sub = if parsers.len() > 1 {
            format!(
                "<span class=\"sub\" title=\"{0}\">{0}</span>",
                escape(parsers[p])
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "<figure class=\"chart\"><figcaption>{}{sub}</figcaption>{}</figure>",
            escape(name),
            chart(name, &labels, &parse, &matched, &corpora)
        );
    }
    out.push_str("</div>\n</section>\n");
}

/// The identity of a set of cases: their ids and digests (equal keys, equal cases).
fn corpus_key<'a>(cases: impl Iterator<Item = &'a CaseOut>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut pairs: Vec<(&str, &str)> = cases.map(|c| (c.id.as_str(), c.digest.as_str())).collect();
    pairs.sort_unstable();
    // SipHash with fixed keys: the same cases give the same key in every report of the page.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pairs.hash(&mut h);
    h.finish()
}

/// The reports (by position) whose corpus differs from that of the previous report that has
/// one: where a series starts again.
fn corpus_changes(corpora: &[Option<u64>]) -> Vec<bool> {
    let mut last = None;
    corpora
        .iter()
        .map(|k| {
            let changed = k.is_some() && last.is_some() && *k != last;
            if k.is_some() {
                last = *k;
            }
            changed
        })
        .collect()
}

/// One label per report: full timestamp (tooltips) and a short tick label.
fn x_labels(reports: &[&Report]) -> Vec<(String, String)> {
    let times: Vec<&str> = reports.iter().map(|r| generated_at(r)).collect();
    let dated = times
        .iter()
        .all(|t| t.len() >= 16 && t.is_char_boundary(16));
    let one_day = dated && times.iter().all(|t| t.get(..10) == times[0].get(..10));
    times
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let short = if !dated {
                format!("#{}", i + 1)
            } else if one_day {
                t[11..16].to_string()
            } else {
                t[5..10].to_string()
            };
            let long = if t.is_empty() {
                format!("report #{}", i + 1)
            } else {
                human_time(t)
            };
            (long, short)
        })
        .collect()
}

const W: f64 = 400.0;
const H: f64 = 220.0;
const LEFT: f64 = 46.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 42.0;

/// A line chart of two rates (0–100 %) over the reports, as inline SVG; `corpora` identifies
/// each report's cases (a change starts new lines and is marked).
fn chart(
    name: &str,
    labels: &[(String, String)],
    parse: &[Sample],
    matched: &[Sample],
    corpora: &[Option<u64>],
) -> String {
    let n = labels.len();
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |i: usize| {
        if n <= 1 {
            LEFT + pw / 2.0
        } else {
            LEFT + 10.0 + (pw - 20.0) * i as f64 / (n - 1) as f64
        }
    };
    let y = |v: f64| TOP + ph * (1.0 - v.clamp(0.0, 1.0));
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{} rates over time\" xmlns=\"http://www.w3.org/2000/svg\">",
        escape(name)
    );
    // Horizontal grid and y ticks.
    for k in 0..=4 {
        let v = k as f64 / 4.0;
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}%</text>",
            W - RIGHT,
            LEFT - 6.0,
            y(v) + 3.5,
            k * 25,
            y = y(v)
        );
    }
    // Axes.
    let _ = write!(
        s,
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{:.1}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
        TOP + ph,
        W - RIGHT,
        TOP + ph,
        TOP + ph
    );
    // X ticks: at most about seven labels, always the latest.
    let step = n.saturating_sub(1).div_ceil(6).max(1);
    for (i, label) in labels.iter().enumerate() {
        let last = i + 1 == n;
        let labelled = last || (i % step == 0 && n - 1 - i >= step.div_ceil(2));
        let xi = x(i);
        let _ = write!(
            s,
            "<line class=\"axis\" x1=\"{xi:.1}\" x2=\"{xi:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
            TOP + ph,
            TOP + ph + if labelled { 4.0 } else { 2.0 }
        );
        if labelled {
            let _ = write!(
                s,
                "<text class=\"tick\" x=\"{xi:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                TOP + ph + 15.0,
                escape(&label.1)
            );
        }
    }
    let _ = write!(
        s,
        "<text class=\"axis-title\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">report (generated at, UTC)</text>",
        LEFT + pw / 2.0,
        H - 6.0
    );
    // Legend with the latest values.
    let latest = |ser: &[Sample]| percent(ser.last().copied().flatten().map(|v| v.0));
    let _ = write!(
        s,
        "<g class=\"legend\"><line class=\"line s-parse\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"14\" y2=\"14\"/>\
         <circle class=\"pt s-parse\" cx=\"{:.1}\" cy=\"14\" r=\"3.5\"/>\
         <text x=\"{:.1}\" y=\"18\">parse success {}</text>\
         <line class=\"line s-match\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"14\" y2=\"14\"/>\
         <rect class=\"pt s-match\" x=\"{:.1}\" y=\"10.5\" width=\"7\" height=\"7\"/>\
         <text x=\"{:.1}\" y=\"18\">match {}</text></g>",
        LEFT + 18.0,
        LEFT + 9.0,
        LEFT + 24.0,
        latest(parse),
        LEFT + 190.0,
        LEFT + 208.0,
        LEFT + 195.5,
        LEFT + 214.0,
        latest(matched),
    );
    let changes = corpus_changes(corpora);
    for (i, _) in changes.iter().enumerate().filter(|(_, c)| **c) {
        let xi = (x(i - 1) + x(i)) / 2.0;
        let _ = write!(
            s,
            "<line class=\"corpus-change\" x1=\"{xi:.1}\" x2=\"{xi:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"><title>{}: other cases than the report before</title></line>",
            TOP + ph,
            escape(&labels[i].0)
        );
    }
    // Both rates often sit at 100 %: lines go first (parse under the dashed match line), then
    // the hollow match squares, then the parse dots inside them, so both stay visible.
    let (dot, half) = if n > 60 { (1.6, 2.6) } else { (2.8, 4.5) };
    let series = [
        (parse, "s-parse", "parse success"),
        (matched, "s-match", "match"),
    ];
    for (ser, class, _) in series {
        // A null rate (no denominator, or the format absent from that report) breaks the line.
        let mut segment: Vec<String> = Vec::new();
        let flush = |seg: &mut Vec<String>, s: &mut String| {
            if seg.len() > 1 {
                let _ = write!(
                    s,
                    "<polyline class=\"line {class}\" points=\"{}\"/>",
                    seg.join(" ")
                );
            }
            seg.clear();
        };
        for (i, v) in ser.iter().enumerate() {
            if changes[i] {
                flush(&mut segment, &mut s);
            }
            match v {
                Some((r, _, _)) => segment.push(format!("{:.1},{:.1}", x(i), y(*r))),
                None => flush(&mut segment, &mut s),
            }
        }
        flush(&mut segment, &mut s);
    }
    for (ser, class, what) in series.iter().rev() {
        for (i, v) in ser.iter().enumerate() {
            let Some((r, ok, of)) = v else { continue };
            let tip = format!(
                "{} · {what} {} ({} of {} replays)",
                labels[i].0,
                percent(Some(*r)),
                thousands(*ok),
                thousands(*of)
            );
            let (cx, cy) = (x(i), y(*r));
            if *class == "s-parse" {
                let _ = write!(
                    s,
                    "<circle class=\"pt {class}\" cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{dot}\"><title>{}</title></circle>",
                    escape(&tip)
                );
            } else {
                let _ = write!(
                    s,
                    "<rect class=\"pt {class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{w}\" height=\"{w}\"><title>{}</title></rect>",
                    cx - half,
                    cy - half,
                    escape(&tip),
                    w = half * 2.0
                );
            }
        }
    }
    if parse.iter().all(Option::is_none) && matched.iter().all(Option::is_none) {
        let _ = write!(
            s,
            "<text class=\"empty\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no rate: no y_ or unlabelled replays</text>",
            LEFT + pw / 2.0,
            TOP + ph / 2.0
        );
    }
    s.push_str("</svg>");
    s
}

fn meter(r: Option<f64>, failed: usize) -> String {
    match r {
        None => "<td class=\"num na\">–</td>".into(),
        Some(v) => format!(
            "<td class=\"num {}\"><span class=\"meter\"><span style=\"width:{:.1}%\"></span></span>{}</td>",
            rate_class(r, failed),
            (v * 100.0).clamp(0.0, 100.0),
            percent(r)
        ),
    }
}

fn totals_row(out: &mut String, name: &str, t: &TotalsOut, all: bool) {
    let v = if t.violations.is_empty() {
        "<span class=\"muted\">none</span>".to_string()
    } else {
        t.violations
            .iter()
            .map(|(k, n)| format!("<span class=\"tag\">{} {n}</span>", escape(k.as_str())))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = write!(
        out,
        "<tr class=\"{}{}\"><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num{}\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>{}{}<td>{v}</td></tr>",
        if all { "all" } else { "" },
        if t.failed > 0 { " failing" } else { "" },
        escape(name),
        thousands(t.cases),
        thousands(t.passed),
        if t.failed > 0 { " bad" } else { "" },
        thousands(t.failed),
        thousands(t.xfail),
        thousands(t.xpass),
        thousands(t.replays),
        meter(t.parse_success_rate, t.failed),
        meter(t.match_rate, t.failed),
    );
}

fn latest_tables(out: &mut String, r: &Report) {
    out.push_str("<section id=\"formats\"><h2>Latest run per format</h2>\n");
    for run in &r.runs {
        if r.runs.len() > 1 {
            let _ = writeln!(out, "<h3 class=\"parser\">{}</h3>", escape(&run.parser));
        }
        out.push_str("<div class=\"scroll\"><table class=\"data formats\"><thead><tr><th>format</th><th class=\"num\">cases</th><th class=\"num\">passed</th><th class=\"num\">failed</th><th class=\"num\">xfail</th><th class=\"num\">xpass</th><th class=\"num\">replays</th><th class=\"num\">parse success</th><th class=\"num\">match</th><th>violations (cases)</th></tr></thead><tbody>");
        for (f, t) in &run.formats {
            totals_row(out, f, t, false);
        }
        if run.formats.len() > 1 {
            totals_row(out, "all", &run.totals, true);
        }
        out.push_str("</tbody></table></div>\n");
        if let Some(line) = run.totals.cut_class_line() {
            let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&line));
        }
    }
    out.push_str("</section>\n");
}

/// Cut offsets as a page shows them: `[3, 9] / [1]`, or the whole input.
pub fn cuts_text(cuts: &[Vec<usize>]) -> String {
    if cuts.iter().all(Vec::is_empty) {
        return "none (the whole input)".into();
    }
    cuts.iter()
        .map(|turn| {
            format!(
                "[{}]",
                turn.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

fn status_badge(status: &str) -> String {
    let class = match status {
        "pass" => "st-pass",
        "fail" => "st-fail",
        "xfail" => "st-xfail",
        "skipped" => "st-skip",
        _ => "st-other",
    };
    format!("<span class=\"status {class}\">{}</span>", escape(status))
}

fn failure_card(out: &mut String, c: &CaseOut) {
    let _ = write!(
        out,
        "<article class=\"failure\"><header>{} <code class=\"id\">{}</code> <span class=\"muted\">{} · {} · {} replay(s)</span></header>",
        status_badge(c.status.as_str()),
        escape(&c.id),
        escape(&c.format),
        escape(c.label.as_str()),
        thousands(c.replays)
    );
    if c.status == CaseStatus::Xpass {
        out.push_str("<p class=\"note\">Passes now: remove its known-failure mark.</p>");
    }
    for v in &c.violations {
        let under = v
            .strategy
            .map(|s| format!(" under <b>{}</b>", escape(s.as_str())))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<div class=\"violation\"><div class=\"inv\"><span class=\"tag bad\">{}</span>{under} · {} failing replay(s)</div>\
             <pre class=\"msg\">{}</pre>\
             <div class=\"kv\"><span class=\"k\">minimal cuts</span><code>{}</code></div>\
             <div class=\"kv\"><span class=\"k\">replay</span><code class=\"cmd\">{}</code></div></div>",
            escape(v.invariant.as_str()),
            thousands(v.failing_replays),
            escape(&v.message),
            escape(&cuts_text(&v.cuts)),
            escape(&v.replay)
        );
    }
    if !c.notes.is_empty() {
        out.push_str("<ul class=\"notes\">");
        for n in &c.notes {
            let _ = write!(out, "<li>{}</li>", escape(n));
        }
        out.push_str("</ul>");
    }
    out.push_str("</article>\n");
}

fn failures(out: &mut String, r: &Report) {
    out.push_str("<section id=\"failures\"><h2>Current failures</h2>\n");
    for run in &r.runs {
        let failing: Vec<&CaseOut> = run.cases.iter().filter(|c| c.status.is_failing()).collect();
        let who = if r.runs.len() > 1 {
            format!(" of <span class=\"parser\">{}</span>", escape(&run.parser))
        } else {
            String::new()
        };
        if failing.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"callout callout-ok\">No failing cases{who}: every invariant holds.</p>"
            );
        } else {
            let _ = writeln!(out, "<h3>{} failing case(s){who}</h3>", failing.len());
            for c in failing.iter().take(MAX_FAILURES) {
                failure_card(out, c);
            }
            more(out, failing.len());
        }
        token_split(out, run, &who);
    }
    out.push_str("</section>\n");
}

fn more(out: &mut String, listed: usize) {
    if listed > MAX_FAILURES {
        let _ = writeln!(
            out,
            "<p class=\"muted\">… and {} more in report.json.</p>",
            listed - MAX_FAILURES
        );
    }
}

/// The cases an external parser breaks only when a special token is cut: listed apart.
fn token_split(out: &mut String, run: &Run, who: &str) {
    let split = run.token_split_cases();
    if split.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3>{} case(s){who} break only when a special token is cut</h3>\
         <p class=\"muted\">Reported apart, not failed: a server decodes special tokens whole, \
         so its parser never sees one split.</p><ul class=\"notes\">",
        split.len()
    );
    for c in split.iter().take(MAX_FAILURES) {
        let _ = write!(
            out,
            "<li><code class=\"id\">{}</code> <span class=\"muted\">{}</span>: {}</li>",
            escape(&c.id),
            escape(&c.format),
            escape(&c.token_split_invariants())
        );
    }
    out.push_str("</ul>\n");
    more(out, split.len());
}

/// One case across the parsers of a report: each parser's case, or `None` when not run.
struct MatrixRow<'a> {
    id: &'a str,
    format: &'a str,
    cells: Vec<Option<&'a CaseOut>>,
}

/// Cases on which every parser gave the same status.
struct AgreeGroup<'a> {
    statuses: Vec<Option<&'a str>>,
    per_format: BTreeMap<&'a str, usize>,
    count: usize,
}

/// The comparison matrix of a report's runs: disagreeing rows (grouped by their status
/// pattern, then by id), and the agreeing cases grouped by status.
fn report_matrix(runs: &[Run]) -> (Vec<MatrixRow<'_>>, Vec<AgreeGroup<'_>>) {
    let mut rows: BTreeMap<&str, MatrixRow> = BTreeMap::new();
    for (p, run) in runs.iter().enumerate() {
        for c in &run.cases {
            let row = rows.entry(c.id.as_str()).or_insert_with(|| MatrixRow {
                id: &c.id,
                format: &c.format,
                cells: vec![None; runs.len()],
            });
            row.cells[p] = Some(c);
        }
    }
    let mut disagree: Vec<(Vec<Option<&str>>, MatrixRow)> = Vec::new();
    let mut agree: BTreeMap<Vec<Option<&str>>, AgreeGroup> = BTreeMap::new();
    for row in rows.into_values() {
        let statuses: Vec<Option<&str>> = row
            .cells
            .iter()
            .map(|c| c.map(|c| c.status.as_str()))
            .collect();
        if statuses.windows(2).all(|w| w[0] == w[1]) {
            let g = agree.entry(statuses.clone()).or_insert_with(|| AgreeGroup {
                statuses,
                per_format: BTreeMap::new(),
                count: 0,
            });
            g.count += 1;
            *g.per_format.entry(row.format).or_default() += 1;
        } else {
            disagree.push((statuses, row));
        }
    }
    disagree.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.id.cmp(b.1.id)));
    (
        disagree.into_iter().map(|(_, r)| r).collect(),
        agree.into_values().collect(),
    )
}

fn matrix_cell(c: Option<&CaseOut>) -> String {
    match c {
        None => format!("<td>{}</td>", status_badge("skipped")),
        Some(c) => {
            let mut invariants: Vec<&str> =
                c.violations.iter().map(|v| v.invariant.as_str()).collect();
            invariants.dedup();
            let inv = if invariants.is_empty() {
                String::new()
            } else {
                format!(
                    "<span class=\"small muted\">{}</span>",
                    escape(&invariants.join(", "))
                )
            };
            format!("<td>{}{inv}</td>", status_badge(c.status.as_str()))
        }
    }
}

fn matrix_section(out: &mut String, runs: &[Run]) {
    let (disagree, agree) = report_matrix(runs);
    let _ = write!(
        out,
        "<section id=\"matrix\"><h2>Comparison matrix</h2>\n<p class=\"muted\">{} case(s) where the parsers disagree, listed first; cases on which all agree are grouped by status.</p>\n\
         <div class=\"scroll\"><table class=\"data matrix\"><thead><tr><th>case</th>",
        thousands(disagree.len())
    );
    for run in runs {
        let _ = write!(
            out,
            "<th class=\"parser-cell\">{}</th>",
            escape(&run.parser)
        );
    }
    out.push_str("</tr></thead><tbody>");
    for row in disagree.iter().take(MAX_MATRIX_ROWS) {
        let _ = write!(
            out,
            "<tr><th scope=\"row\"><code class=\"id\">{}</code> <span class=\"small muted\">{}</span></th>",
            escape(row.id),
            escape(row.format)
        );
        for c in &row.cells {
            out.push_str(&matrix_cell(*c));
        }
        out.push_str("</tr>");
    }
    if disagree.len() > MAX_MATRIX_ROWS {
        let _ = write!(
            out,
            "<tr><td colspan=\"{}\" class=\"muted\">… and {} more disagreeing case(s) in report.json</td></tr>",
            runs.len() + 1,
            disagree.len() - MAX_MATRIX_ROWS
        );
    }
    for g in &agree {
        let formats = g
            .per_format
            .iter()
            .map(|(f, k)| format!("{k} {f}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            out,
            "<tr class=\"agree\"><th scope=\"row\">all agree: {} case(s) <span class=\"small muted\">{}</span></th>",
            thousands(g.count),
            escape(&formats)
        );
        for s in &g.statuses {
            let _ = write!(out, "<td>{}</td>", status_badge(s.unwrap_or("skipped")));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div></section>\n");
}

fn history_table(out: &mut String, reports: &[&Report]) {
    out.push_str("<section id=\"history\"><h2>Reports</h2>\n<div class=\"scroll\"><table class=\"data\"><thead><tr><th>generated at</th><th>conform</th><th class=\"num\">seed</th><th>corpus</th><th class=\"num\">cases</th><th class=\"num\">failing</th><th class=\"num\">parse success</th><th class=\"num\">match</th></tr></thead><tbody>");
    for r in reports.iter().rev().take(MAX_HISTORY_ROWS) {
        // Rates of the first parser: the reference, when several were compared.
        let t = r.runs.first().map(|x| &x.totals);
        let failed = failing_count(r);
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num{}\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&human_time(generated_at(r))),
            escape(&r.tool.version),
            r.seed,
            escape(short_digest(&r.corpus.digest)),
            thousands(r.corpus.cases),
            if failed > 0 { " bad" } else { "" },
            thousands(failed),
            percent(t.and_then(|t| t.parse_success_rate)),
            percent(t.and_then(|t| t.match_rate)),
        );
    }
    out.push_str("</tbody></table></div>");
    if reports.len() > MAX_HISTORY_ROWS {
        let _ = write!(
            out,
            "<p class=\"muted\">… and {} older report(s) (in the charts).</p>",
            reports.len() - MAX_HISTORY_ROWS
        );
    }
    out.push_str("</section>\n");
}

/// The page's only stylesheet; system fonts, so nothing is fetched.
const STYLE: &str = r#"
:root{--bg:#f6f7f9;--card:#fff;--fg:#1c2330;--muted:#5d6778;--line:#e2e6ec;--grid:#eceff3;
--c-parse:#2563eb;--c-match:#d97706;--good:#157a3c;--good-bg:#e6f4ea;--bad:#b42318;--bad-bg:#fdecea;
--warn:#9a6700;--warn-bg:#fff4d6;--other:#6941c6;--other-bg:#f1ecfd;--code-bg:#f1f3f6}
@media (prefers-color-scheme:dark){:root{--bg:#0f1318;--card:#171c23;--fg:#e3e7ee;--muted:#98a2b3;
--line:#2a313b;--grid:#222932;--c-parse:#6ea0ff;--c-match:#f0a84a;--good:#5cc98a;--good-bg:#173324;
--bad:#ff8a80;--bad-bg:#3a1d1b;--warn:#f2c14e;--warn-bg:#3a3016;--other:#b69cff;--other-bg:#2a2140;--code-bg:#1f252e}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:24px 28px 40px}
h1{font-size:26px;margin:0;letter-spacing:-.01em}
h2{font-size:19px;margin:0 0 6px}
h3{font-size:15px;margin:18px 0 8px}
section{margin-top:28px}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
code{background:var(--code-bg);padding:1px 5px;border-radius:4px;overflow-wrap:anywhere}
.muted{color:var(--muted)}
.small{font-size:12px}
.top{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:20px 22px}
.top>p{margin:4px 0 14px}
.title{display:flex;align-items:center;gap:14px}
.verdict{font-weight:600;font-size:13px;padding:3px 10px;border-radius:999px}
.verdict.ok{color:var(--good);background:var(--good-bg)}
.verdict.bad{color:var(--bad);background:var(--bad-bg)}
.runs{display:grid;grid-template-columns:repeat(auto-fit,minmax(340px,460px));gap:12px}
.run{margin:0;border:1px solid var(--line);border-radius:8px;padding:10px 14px}
.run h2.parser{font-size:13px;font-weight:600;color:var(--muted);margin:0 0 6px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.kpis{display:grid;grid-template-columns:repeat(4,auto);justify-content:space-between;gap:8px 14px}
.kpi .k{white-space:nowrap}
.kpi .v{display:block;font-size:22px;font-weight:650;font-variant-numeric:tabular-nums}
.kpi .k{font-size:12px;color:var(--muted)}
.good{color:var(--good)}.bad{color:var(--bad)}.warn{color:var(--warn)}.na{color:var(--muted)}.plain{color:inherit}
.meta{display:flex;flex-wrap:wrap;gap:6px 26px;margin:16px 0 0}
.meta div{display:flex;gap:6px}.meta dt{color:var(--muted)}.meta dd{margin:0}
.callout{border-radius:8px;padding:12px 16px;margin:12px 0 0;border:1px solid var(--line)}
.callout-ok{background:var(--good-bg);color:var(--good);border-color:transparent}
.callout-bad{background:var(--bad-bg);border-color:transparent}
.callout-bad h2{color:var(--bad)}
.callout table{background:transparent}
details{margin-top:10px}summary{cursor:pointer;color:var(--muted)}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:14px}
.chart{margin:0;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px 4px}
.chart figcaption{font-weight:600;font-size:13px;display:flex;gap:8px;align-items:baseline;min-width:0}
.chart figcaption .sub{font:500 11.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:var(--muted);white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.chart svg{width:100%;height:auto;display:block}
.grid{stroke:var(--grid);stroke-width:1}
.axis{stroke:var(--muted);stroke-width:1}
.tick{fill:var(--muted);font-size:10.5px;font-variant-numeric:tabular-nums}
.axis-title,.empty{fill:var(--muted);font-size:10.5px}
.legend text{fill:var(--fg);font-size:11.5px}
.line{fill:none;stroke-width:2;stroke-linejoin:round;stroke-linecap:round}
.corpus-change{stroke:var(--muted);stroke-width:1.5;stroke-dasharray:2 3}
.line.s-parse{stroke:var(--c-parse);stroke-width:3}
.line.s-match{stroke:var(--c-match);stroke-dasharray:5 3}
.pt.s-parse{fill:var(--c-parse)}
.pt.s-match{fill:var(--card);stroke:var(--c-match);stroke-width:1.8}
.scroll{overflow-x:auto}
table.data{width:100%;border-collapse:collapse;background:var(--card);border:1px solid var(--line);border-radius:8px;font-variant-numeric:tabular-nums}
.data th,.data td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
.data thead th{font-size:12px;color:var(--muted);font-weight:600;background:var(--code-bg)}
.data tbody tr:last-child>*{border-bottom:0}
.data .num{text-align:right;white-space:nowrap}
.data tr.all{font-weight:600}
table.formats{table-layout:fixed;min-width:860px}
table.formats th:first-child{width:15%}
table.formats th:nth-child(8),table.formats th:nth-child(9){width:13%}
table.formats th:last-child{width:22%}
.data tr.failing th{color:var(--bad)}
.meter{display:inline-block;width:56px;height:6px;border-radius:3px;background:var(--grid);margin-right:8px;vertical-align:middle;overflow:hidden}
.meter span{display:block;height:100%;background:currentColor}
.tag{display:inline-block;font-size:12px;padding:0 6px;border-radius:4px;background:var(--code-bg);white-space:nowrap}
.tag.bad{background:var(--bad-bg);color:var(--bad);font-weight:600}
.parser-cell,.parser{overflow-wrap:anywhere}
h3.parser{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13.5px}
.status{display:inline-block;font-size:12px;font-weight:600;padding:0 7px;border-radius:4px}
.st-pass{color:var(--good);background:var(--good-bg)}
.st-fail{color:var(--bad);background:var(--bad-bg)}
.st-xfail,.st-skip{color:var(--muted);background:var(--code-bg)}
.st-other{color:var(--other);background:var(--other-bg)}
.matrix tr.agree th{font-weight:500;color:var(--muted)}
.matrix th,.matrix td{padding:4px 10px}
.matrix th[scope=row] code{white-space:nowrap;overflow-wrap:normal;background:none;padding:0}
.matrix td .small{margin-left:6px}
.failure{background:var(--card);border:1px solid var(--line);border-left:4px solid var(--bad);border-radius:8px;padding:10px 14px;margin:0 0 10px}
.failure header{display:flex;flex-wrap:wrap;align-items:baseline;gap:8px}
.failure code.id{font-weight:600}
.violation{margin-top:8px;padding-top:8px;border-top:1px dashed var(--line)}
.violation .inv{color:var(--muted)}
.violation .inv .tag{margin-right:4px}
pre.msg{margin:6px 0;padding:8px 10px;background:var(--code-bg);border-radius:6px;white-space:pre-wrap;overflow-wrap:anywhere}
.kv{display:flex;gap:10px;align-items:baseline;margin:3px 0}
.kv .k{min-width:92px;color:var(--muted);font-size:12px}
.note{color:var(--warn);margin:6px 0}
.notes{margin:6px 0 0;padding-left:18px;color:var(--muted)}
footer{margin-top:36px;color:var(--muted);font-size:12px;text-align:center}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::chunking::Strategy;
    use crate::harness::corpus::Label;
    use crate::harness::invariants::Invariant;
    use crate::harness::report::{
        Chunking, Comparison, CorpusInfo, SCHEMA_VERSION, Timings, Tool, ViolationOut, finish_run,
    };

    fn case(id: &str, format: &str, status: &str) -> CaseOut {
        let pass = status == "pass";
        CaseOut {
            id: id.into(),
            format: format.into(),
            label: Label::Accept,
            status: serde_json::from_value(serde_json::json!(status)).unwrap(),
            digest: "d".into(),
            replays: 10,
            error_free: if pass { 10 } else { 8 },
            matched: if pass { 10 } else { 6 },
            violations: if pass {
                vec![]
            } else {
                vec![ViolationOut {
                    invariant: Invariant::SplitInvariance,
                    strategy: Some(Strategy::Bytes),
                    cuts: vec![vec![3, 7]],
                    failing_replays: 2,
                    message: "whole gives <a & \"b\"> here".into(),
                    replay: format!("conform parse {id} --cuts 3,7"),
                    cut_class: None,
                    path: None,
                    got: Vec::new(),
                }]
            },
            notes: vec![],
            completion: None,
            token_split_replays: 0,
            token_split_violations: Vec::new(),
            coalesced_violations: Vec::new(),
            options: Default::default(),
            request: Default::default(),
        }
    }

    fn report(at: Option<&str>, runs: Vec<(&str, Vec<CaseOut>)>) -> Report {
        let cases = runs.first().map_or(0, |r| r.1.len());
        Report {
            schema_version: SCHEMA_VERSION,
            tool: Tool {
                name: "conform".into(),
                version: "9.9.9".into(),
            },
            seed: 42,
            strategies: vec!["whole".into(), "bytes".into()],
            chunking: Chunking {
                random_groupings: 8,
                random_max_chunk: 16,
                two_cut_cap: 512,
                bursts: 4,
                burst_max_tokens: 8,
                tokenizer: "o200k_base".into(),
                tokenizers: Default::default(),
            },
            shard: None,
            whole: None,
            partial: None,
            corpus: CorpusInfo {
                digest: "ab".repeat(32),
                cases,
                errors: vec![],
            },
            runs: runs
                .into_iter()
                .map(|(p, cs)| finish_run(p.into(), cs))
                .collect(),
            comparison: None,
            adapters: None,
            timings: at.map(|t| Timings {
                generated_at: t.into(),
                total_seconds: 1.0,
                per_case_seconds: BTreeMap::new(),
            }),
        }
    }

    fn one(at: &str, status: &str) -> Report {
        report(
            Some(at),
            vec![(
                "builtin",
                vec![
                    case("corpus/k/y_a.txt", "kimi_k2", "pass"),
                    case("corpus/k/y_b.txt", "kimi_k2", status),
                    case("corpus/o/y_c.txt", "openai_sse", "pass"),
                ],
            )],
        )
    }

    #[test]
    fn cases_that_break_only_on_split_tokens_are_listed_apart() {
        let mut c = case("corpus/kimi_k2/y_a.txt", "kimi_k2", "pass");
        c.token_split_replays = 12;
        c.token_split_violations = vec![ViolationOut {
            invariant: Invariant::SplitInvariance,
            strategy: Some(Strategy::Bytes),
            cuts: vec![vec![3]],
            failing_replays: 12,
            message: "differs".into(),
            replay: "conform parse".into(),
            cut_class: None,
            path: None,
            got: Vec::new(),
        }];
        let html = render(&[report(
            Some("2026-11-22T00:00:00Z"),
            vec![("cmd:x", vec![c])],
        )]);
        assert!(html.contains("No failing cases"), "it is not a failure");
        assert!(html.contains("1 case(s) break only when a special token is cut"));
        assert!(
            html.contains("y_a.txt</code> <span class=\"muted\">kimi_k2</span>: split_invariance")
        );
    }

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(
            escape(r#"<a href='x'>&"</a>"#),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        let mut r = one("2026-01-01T00:00:00Z", "fail");
        r.runs[0].cases[1].id = "corpus/k/y_<script>&\".txt".into();
        r.runs[0].parser = "cmd:python3 <evil> & 'x'".into();
        let page = render(&[r]);
        assert!(!page.contains("<script>"), "raw case id leaked");
        assert!(!page.contains("<evil>"));
        assert!(!page.contains("<a & \"b\">"));
        assert!(page.contains("y_&lt;script&gt;&amp;&quot;.txt"));
        assert!(page.contains("whole gives &lt;a &amp; &quot;b&quot;&gt; here"));
        assert!(page.contains("cmd:python3 &lt;evil&gt; &amp; &#39;x&#39;"));
    }

    #[test]
    fn a_single_report_renders_a_single_point_per_series_and_its_failures() {
        let page = render(&[one("2026-01-01T00:00:00Z", "fail")]);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(!page.contains("<script"), "no JavaScript");
        assert!(!page.contains("<link") && !page.contains("@import") && !page.contains("url("));
        assert!(!page.contains("<polyline"), "one point is not a line");
        // all formats + kimi_k2 + openai_sse, two series each.
        assert_eq!(page.matches("</title></circle>").count(), 3);
        assert_eq!(page.matches("</title></rect>").count(), 3);
        assert!(page.contains("<title>2026-01-01 00:00 UTC · parse success"));
        assert!(page.contains("1 failing case(s)"));
        assert!(page.contains("corpus/k/y_b.txt"));
        assert!(page.contains("[3, 7]"));
        assert!(page.contains("conform parse corpus/k/y_b.txt --cuts 3,7"));
        assert!(page.contains("abababababab"), "digest prefix");
        assert!(page.contains("9.9.9") && page.contains(">42<"));
        assert!(!page.contains("id=\"matrix\""));
        assert!(!page.contains("id=\"regressions\""));
    }

    #[test]
    fn a_rate_below_full_is_not_red_when_nothing_fails() {
        // An unlabelled transcript that ends in an error, as a truncated seed does: its
        // replays lower parse success, but no case fails.
        let mut broken = case("corpus/k/seed.jsonl#truncated", "kimi_k2", "pass");
        broken.label = Label::Unlabelled;
        broken.error_free = 0;
        let page = render(&[report(
            Some("2026-01-01T00:00:00Z"),
            vec![(
                "builtin",
                vec![case("corpus/k/y_a.txt", "kimi_k2", "pass"), broken],
            )],
        )]);
        assert!(page.contains(">50.0%<"), "the rate is still shown");
        assert!(page.contains("class=\"v plain\">50.0%"));
        assert!(page.contains("class=\"num plain\"><span class=\"meter\">"));
        assert!(!page.contains("class=\"v bad\"") && !page.contains("class=\"num bad\""));
        assert_eq!(rate_class(Some(0.5), 1), "bad");
        assert_eq!(rate_class(Some(0.97), 1), "warn");
        assert_eq!(rate_class(Some(1.0), 0), "good");
    }

    #[test]
    fn a_change_of_corpus_is_marked_and_not_joined() {
        let at = |day: u32, digest: &str| {
            let mut c = case("corpus/k/y_a.txt", "kimi_k2", "pass");
            c.digest = digest.into();
            report(
                Some(&format!("2026-01-0{day}T00:00:00Z")),
                vec![("builtin", vec![c])],
            )
        };
        let same = render(&[at(1, "d1"), at(2, "d1"), at(3, "d1")]);
        assert!(!same.contains("class=\"corpus-change\""));
        assert_eq!(same.matches("<polyline class=\"line s-parse\"").count(), 1);
        let changed = render(&[at(1, "d1"), at(2, "d1"), at(3, "d2"), at(4, "d2")]);
        assert_eq!(changed.matches("class=\"corpus-change\"").count(), 1);
        // Two segments of two points each: the cases of 01-03 are not those of 01-02.
        assert_eq!(
            changed.matches("<polyline class=\"line s-parse\"").count(),
            2
        );
        assert_eq!(
            corpus_changes(&[Some(1), None, Some(1), Some(2)]),
            [false, false, false, true]
        );
    }

    #[test]
    fn several_reports_are_charted_in_time_order() {
        let page = render(&[
            one("2026-01-03T00:00:00Z", "fail"),
            one("2026-01-01T00:00:00Z", "pass"),
            one("2026-01-02T00:00:00Z", "pass"),
        ]);
        assert_eq!(page.matches("<polyline class=\"line s-parse\"").count(), 3);
        let first = page.find(">01-01<").unwrap();
        let last = page.find(">01-03<").unwrap();
        assert!(first < page.find(">01-02<").unwrap() && page.find(">01-02<").unwrap() < last);
        // The latest (Jan 3) is the one detailed: it has the failure.
        assert!(page.contains("1 failing case(s)"));
        assert!(page.contains("3 report(s) in the history"));
        // Without timings on every report, input order is kept.
        let mut undated = one("x", "pass");
        undated.timings = None;
        let dated = one("2026-01-01T00:00:00Z", "fail");
        let order: Vec<bool> = chronological(&[undated, dated])
            .iter()
            .map(|r| r.timings.is_some())
            .collect();
        assert_eq!(order, [false, true]);
    }

    #[test]
    fn null_rates_break_the_line_and_show_as_a_dash() {
        let r1 = one("2026-01-01T00:00:00Z", "pass");
        let r2 = {
            let mut r = one("2026-01-02T00:00:00Z", "pass");
            // Only n_ cases: neither rate has a denominator.
            for c in &mut r.runs[0].cases {
                c.label = Label::Reject;
            }
            let cases = std::mem::take(&mut r.runs[0].cases);
            r.runs[0] = finish_run("builtin".into(), cases);
            r
        };
        let r3 = one("2026-01-03T00:00:00Z", "pass");
        assert_eq!(r2.runs[0].totals.match_rate, None);
        let page = render(&[r1, r2.clone(), r3]);
        assert!(!page.contains("<polyline"), "the gap leaves single points");
        assert_eq!(page.matches("</title></circle>").count(), 6);
        let only_null = render(&[r2]);
        assert!(only_null.contains("no rate: no y_ or unlabelled replays"));
        assert!(only_null.contains("parse success –"));
        assert!(only_null.contains("<td class=\"num na\">–</td>"));
    }

    #[test]
    fn the_matrix_appears_only_with_several_runs_and_puts_disagreements_first() {
        assert!(!render(&[one("2026-01-01T00:00:00Z", "fail")]).contains("id=\"matrix\""));
        let r = report(
            Some("2026-01-01T00:00:00Z"),
            vec![
                (
                    "builtin",
                    vec![
                        case("c1", "kimi_k2", "pass"),
                        case("c2", "kimi_k2", "pass"),
                        case("c3", "kimi_k2", "pass"),
                    ],
                ),
                (
                    "cmd:x",
                    vec![case("c1", "kimi_k2", "pass"), case("c2", "kimi_k2", "fail")],
                ),
            ],
        );
        let (disagree, agree) = report_matrix(&r.runs);
        assert_eq!(
            disagree.iter().map(|d| d.id).collect::<Vec<_>>(),
            ["c3", "c2"],
            "None sorts first: not run, then fail"
        );
        assert!(disagree[0].cells[1].is_none());
        assert_eq!(agree.len(), 1);
        assert_eq!((agree[0].count, agree[0].statuses[0]), (1, Some("pass")));
        let page = render(&[r]);
        let m = page.find("id=\"matrix\"").expect("matrix section");
        let section = &page[m..];
        assert!(section.find(">c3<").unwrap() < section.find("all agree: 1 case(s)").unwrap());
        assert!(section.contains("skipped"));
        assert!(page.contains("<span class=\"sub\" title=\"cmd:x\">cmd:x</span>"));
    }

    #[test]
    fn regressions_come_first_and_reports_are_collected_from_directories() {
        let mut r = one("2026-01-01T00:00:00Z", "fail");
        r.comparison = Some(Comparison {
            regressions: vec![Change {
                parser: "builtin".into(),
                subject: "corpus/k/y_b.txt".into(),
                change: "pass → fail".into(),
            }],
            ..Comparison::default()
        });
        let page = render(std::slice::from_ref(&r));
        let reg = page.find("Regressions against the baseline (1)").unwrap();
        assert!(reg < page.find("id=\"trends\"").unwrap());
        assert!(reg < page.find("id=\"failures\"").unwrap());

        let dir = tempfile::tempdir().unwrap();
        for d in ["2026-01-02", "2026-01-01"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
            std::fs::write(dir.path().join(d).join("report.json"), r.to_json()).unwrap();
        }
        assert_eq!(collect(&[dir.path().to_path_buf()]).unwrap().len(), 2);
        let bad = dir.path().join("broken.json");
        std::fs::write(&bad, "{").unwrap();
        let empty = tempfile::tempdir().unwrap();
        let err = collect(&[bad.clone(), empty.path().to_path_buf()]).unwrap_err();
        assert!(
            err.contains("broken.json") && err.contains("no report.json"),
            "{err}"
        );
    }
}
