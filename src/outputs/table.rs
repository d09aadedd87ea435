//! The terminal summary: a per-format table, then regressions and failing cases with their
//! reproducers.

use crate::harness::corpus::CorpusError;
use crate::harness::report::{CaseStatus, Comparison, Run, TotalsOut, percent};
use comfy_table::{Cell, Color, ContentArrangement, Table, presets};
use std::fmt::Write;

/// Whether to colour the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// Plain text.
    Never,
    /// ANSI colours.
    Always,
}

impl Colour {
    /// Colour only on a terminal, and never when `NO_COLOR` is set (no-color.org).
    pub fn detect(is_terminal: bool) -> Colour {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        if is_terminal && !no_color {
            Colour::Always
        } else {
            Colour::Never
        }
    }

    fn codes(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Colour::Always => ("\x1b[31m", "\x1b[2m", "\x1b[0m"),
            Colour::Never => ("", "", ""),
        }
    }
}

fn violations_cell(t: &TotalsOut) -> String {
    if t.violations.is_empty() {
        return "none".into();
    }
    t.violations
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The per-format table of one parser's run.
pub fn format_table(run: &Run, colour: Colour) -> String {
    let mut table = Table::new();
    table
        .load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(vec![
            "format",
            "cases",
            "failed",
            "replays",
            "parse success",
            "match",
            "violations (cases)",
        ]);
    if colour == Colour::Never {
        table.force_no_tty();
    } else {
        table.enforce_styling();
    }
    let row = |name: &str, t: &TotalsOut| {
        let failed = if t.xfail > 0 {
            format!("{} (+{} known)", t.failed, t.xfail)
        } else {
            t.failed.to_string()
        };
        let failed = Cell::new(failed);
        let failed = if colour == Colour::Always && t.failed > 0 {
            failed.fg(Color::Red)
        } else {
            failed
        };
        vec![
            Cell::new(name),
            Cell::new(t.cases),
            failed,
            Cell::new(t.replays),
            Cell::new(percent(t.parse_success_rate)),
            Cell::new(percent(t.match_rate)),
            Cell::new(violations_cell(t)),
        ]
    };
    for (name, t) in &run.formats {
        table.add_row(row(name, t));
    }
    if run.formats.len() != 1 {
        table.add_row(row("all", &run.totals));
    }
    let mut out = table.to_string();
    if let Some(line) = run.totals.cut_class_line() {
        out.push('\n');
        out.push_str(&line);
    }
    out
}

/// Regressions and fixes against a baseline, regressions first.
pub fn comparison(c: &Comparison, colour: Colour) -> String {
    let (red, _, reset) = colour.codes();
    let mut out = String::new();
    for r in &c.regressions {
        let _ = writeln!(
            out,
            "{red}REGRESSION{reset} {} ({}): {}",
            r.subject, r.parser, r.change
        );
    }
    for f in &c.fixes {
        let _ = writeln!(out, "fixed {} ({}): {}", f.subject, f.parser, f.change);
    }
    if !c.new_cases.is_empty() || !c.removed_cases.is_empty() {
        let _ = writeln!(
            out,
            "{} new case(s), {} removed case(s) since the baseline",
            c.new_cases.len(),
            c.removed_cases.len()
        );
    }
    out
}

/// The failing cases of a run, each with its violations, minimized cuts and replay command.
pub fn failures(run: &Run, colour: Colour) -> String {
    let (red, dim, reset) = colour.codes();
    let mut out = String::new();
    for c in run.cases.iter().filter(|c| c.status.is_failing()) {
        let _ = writeln!(
            out,
            "{red}{}{reset} {} [{}]",
            c.status.as_str().to_uppercase(),
            c.id,
            c.format
        );
        if c.status == CaseStatus::Xpass {
            let _ = writeln!(
                out,
                "  passes now: remove it from the known failures of {}",
                run.parser
            );
        }
        for v in &c.violations {
            let how = match &v.strategy {
                Some(s) => format!(" under {s} ({} replay(s))", v.failing_replays),
                None => String::new(),
            };
            let _ = writeln!(out, "  {}{how}: {}", v.invariant, v.message);
            if v.cuts.iter().any(|c| !c.is_empty()) {
                let cuts: Vec<String> = v.cuts.iter().map(|c| format!("{c:?}")).collect();
                let _ = writeln!(out, "    minimal cuts: {}", cuts.join(" / "));
            }
            let _ = writeln!(out, "    {dim}replay:{reset} {}", v.replay);
        }
        for n in &c.notes {
            if c.status != CaseStatus::Fail {
                let _ = writeln!(out, "  {n}");
            }
        }
    }
    // One line each: report.json has their minimized cuts and replay commands.
    let split = run.token_split_cases();
    for c in &split {
        let _ = writeln!(
            out,
            "SPLIT TOKEN {} [{}]: {}",
            c.id,
            c.format,
            c.token_split_invariants()
        );
    }
    if !split.is_empty() {
        let _ = writeln!(
            out,
            "{} case(s) break only when a special token is cut: reported apart, not failed, as a \
             server decodes special tokens whole (minimal cuts and replays in report.json)",
            split.len()
        );
    }
    out
}

/// Corpus files that could not be loaded.
pub fn corpus_errors(errors: &[CorpusError]) -> String {
    let mut out = String::new();
    for e in errors {
        let _ = writeln!(out, "corpus error: {e}");
    }
    out
}
