//! `report.md`: a summary that fits a CI step summary or a pull-request comment.

use crate::harness::report::percent;
use crate::harness::report::{CaseStatus, Change, Report, Run};
use std::fmt::Write;

/// Failing cases listed in full before the rest are only counted (comments have size limits).
const MAX_LISTED: usize = 50;

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn changes(out: &mut String, title: &str, list: &[Change]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(out, "### {title} ({})\n", list.len());
    for c in list.iter().take(MAX_LISTED) {
        let _ = writeln!(out, "- `{}` ({}): {}", c.subject, c.parser, c.change);
    }
    if list.len() > MAX_LISTED {
        let _ = writeln!(out, "- … and {} more", list.len() - MAX_LISTED);
    }
    out.push('\n');
}

fn run_table(out: &mut String, run: &Run) {
    let _ = writeln!(
        out,
        "| format | cases | failed | xfail | replays | parse success | match | violations |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---|");
    let mut rows: Vec<(&str, &crate::harness::report::TotalsOut)> =
        run.formats.iter().map(|(k, v)| (k.as_str(), v)).collect();
    if rows.len() > 1 {
        rows.push(("**all**", &run.totals));
    }
    for (name, t) in rows {
        let v = if t.violations.is_empty() {
            "none".to_string()
        } else {
            t.violations
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} | {v} |",
            t.cases,
            t.failed,
            t.xfail,
            t.replays,
            percent(t.parse_success_rate),
            percent(t.match_rate)
        );
    }
    if let Some(line) = run.totals.cut_class_line() {
        let _ = writeln!(out, "\n{line}");
    }
    out.push('\n');
}

/// Renders the Markdown report: headline, regressions first, per-format tables, failures.
pub fn render(r: &Report, matrix: Option<&str>) -> String {
    let mut out = String::new();
    let failed: usize = r.runs.iter().map(|x| x.totals.failed).sum();
    let regressions = r.comparison.as_ref().map_or(0, |c| c.regressions.len());
    let verdict = if failed == 0 && regressions == 0 {
        "✅ all invariants hold"
    } else {
        "❌ failures"
    };
    let _ = writeln!(out, "## conform: {verdict}\n");
    for run in &r.runs {
        let _ = writeln!(
            out,
            "**{}**: parse success **{}**, match **{}** over {} case(s) and {} replay(s); {} failing.",
            run.parser,
            percent(run.totals.parse_success_rate),
            percent(run.totals.match_rate),
            run.totals.cases,
            run.totals.replays,
            run.totals.failed
        );
    }
    let _ = writeln!(
        out,
        "\nseed {} · strategies {} · corpus `{}` · conform {}\n",
        r.seed,
        r.strategies.join(", "),
        &r.corpus.digest[..r.corpus.digest.len().min(12)],
        r.tool.version
    );
    if let Some(c) = &r.comparison {
        changes(&mut out, "Regressions", &c.regressions);
    }
    if !r.corpus.errors.is_empty() {
        let _ = writeln!(out, "### Corpus errors ({})\n", r.corpus.errors.len());
        for e in &r.corpus.errors {
            let _ = writeln!(out, "- `{}`: {}", e.path, esc(&e.message));
        }
        out.push('\n');
    }
    for run in &r.runs {
        if r.runs.len() > 1 {
            let _ = writeln!(out, "### Parser `{}`\n", run.parser);
        }
        run_table(&mut out, run);
    }
    if let Some(m) = matrix {
        let _ = writeln!(out, "### Comparison matrix\n\n{m}\n");
    }
    for run in &r.runs {
        let split = run.token_split_cases();
        if !split.is_empty() {
            let _ = writeln!(
                out,
                "### `{}`: {} case(s) break only when a special token is cut\n\nReported apart and \
                 not failed: a server decodes special tokens whole, so its parser never sees one \
                 split. Minimal cuts and replay commands are in report.json.\n",
                run.parser,
                split.len()
            );
            for c in split.iter().take(MAX_LISTED) {
                let _ = writeln!(
                    out,
                    "- `{}` [{}]: {}",
                    c.id,
                    c.format,
                    c.token_split_invariants()
                );
            }
            if split.len() > MAX_LISTED {
                let _ = writeln!(out, "- … and {} more", split.len() - MAX_LISTED);
            }
            out.push('\n');
        }
        let failing: Vec<_> = run.cases.iter().filter(|c| c.status.is_failing()).collect();
        if failing.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "### Failures of `{}` ({})\n",
            run.parser,
            failing.len()
        );
        for c in failing.iter().take(MAX_LISTED) {
            let _ = writeln!(out, "- **{}** `{}` [{}]", c.status, c.id, c.format);
            if c.status == CaseStatus::Xpass {
                let _ = writeln!(out, "  - passes now: remove its known-failure mark");
            }
            for v in &c.violations {
                let _ = writeln!(out, "  - {}: {}", v.invariant, esc(&v.message));
                let _ = writeln!(out, "    `{}`", v.replay);
            }
            for n in &c.notes {
                let _ = writeln!(out, "  - {}", esc(n));
            }
        }
        if failing.len() > MAX_LISTED {
            let _ = writeln!(
                out,
                "- … and {} more (see report.json)",
                failing.len() - MAX_LISTED
            );
        }
        out.push('\n');
    }
    if let Some(c) = &r.comparison {
        changes(&mut out, "Fixes", &c.fixes);
        if !c.new_cases.is_empty() || !c.removed_cases.is_empty() {
            let _ = writeln!(
                out,
                "{} new case(s), {} removed case(s) since the baseline.\n",
                c.new_cases.len(),
                c.removed_cases.len()
            );
        }
    }
    if !r.chunking.tokenizers.is_empty() {
        // Which vocabulary cut each format's token-aligned replays (specs/tokenizers.md).
        let _ = writeln!(
            out,
            "<details><summary>Tokenizers ({})</summary>\n\n| format id | tokenizer |\n|---|---|",
            r.chunking.tokenizer
        );
        for (f, t) in &r.chunking.tokenizers {
            let _ = writeln!(out, "| {f} | {} |", esc(t));
        }
        out.push_str("\n</details>\n\n");
    }
    out
}
