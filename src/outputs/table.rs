//! The terminal summary: a per-format table, then the failing cases with their reproducers.

use super::summary::{Totals, percent, summarize};
use crate::harness::corpus::CorpusError;
use crate::harness::run::{CaseReport, Status};
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
}

fn violations_cell(t: &Totals) -> String {
    if t.violations.is_empty() {
        return "none".into();
    }
    t.violations
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The per-format table.
pub fn format_table(cases: &[CaseReport], colour: Colour) -> String {
    let (per, all) = summarize(cases);
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
    let row = |name: &str, t: &Totals| {
        let failed = Cell::new(t.failed);
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
            Cell::new(percent(t.parse_rate())),
            Cell::new(percent(t.match_rate())),
            Cell::new(violations_cell(t)),
        ]
    };
    for (name, t) in &per {
        table.add_row(row(name, t));
    }
    if per.len() > 1 {
        table.add_row(row("all", &all));
    }
    table.to_string()
}

/// The failing cases, each with its violations, minimized cuts and replay command.
pub fn failures(cases: &[CaseReport], colour: Colour) -> String {
    let mut out = String::new();
    let (red, dim, reset) = if colour == Colour::Always {
        ("\x1b[31m", "\x1b[2m", "\x1b[0m")
    } else {
        ("", "", "")
    };
    for c in cases.iter().filter(|c| c.status == Status::Fail) {
        let _ = writeln!(out, "{red}FAIL{reset} {} [{}]", c.id, c.format);
        for v in &c.violations {
            let how = match v.strategy {
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
