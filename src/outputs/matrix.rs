//! The comparison matrix of several parsers over the same cases, in the spirit of
//! JSONTestSuite's result tables: rows are cases, columns are parsers, cells are statuses.
//!
//! Cases on which every parser gave the same status are grouped, so the rows a reader has to
//! look at are the ones where parsers disagree.

use super::table::Colour;
use crate::harness::invariants::Invariant;
use crate::harness::run::{CaseReport, Status};
use comfy_table::{Cell, Color, ContentArrangement, Table, presets};
use serde::Serialize;
use std::collections::BTreeMap;

/// One parser's verdict on one case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MatrixCell {
    /// The case status, or `None` when the parser did not run the case (format unsupported).
    pub status: Option<Status>,
    /// The invariants the parser broke on the case, in report order.
    pub invariants: Vec<Invariant>,
}

impl MatrixCell {
    /// The cell as text: `pass`, `fail (split_invariance)`, `crash`, `skipped`.
    pub fn label(&self) -> String {
        match self.status {
            None => "skipped".into(),
            Some(s) if self.invariants.is_empty() => s.as_str().into(),
            Some(s) => format!(
                "{} ({})",
                s.as_str(),
                self.invariants
                    .iter()
                    .map(|i| i.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// One case across every parser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MatrixRow {
    /// The case id.
    pub id: String,
    /// The format id.
    pub format: &'static str,
    /// How the case is judged.
    pub label: crate::harness::corpus::Label,
    /// One cell per parser, in the order of [`Matrix::parsers`].
    pub cells: Vec<MatrixCell>,
}

/// Cases sharing the same status under every parser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MatrixGroup {
    /// The status per parser shared by every row of the group (`None`: not run).
    pub statuses: Vec<Option<Status>>,
    /// True when every parser gave the same status.
    pub agree: bool,
    /// The cases, in id order.
    pub rows: Vec<MatrixRow>,
}

/// Several parsers' results side by side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Matrix {
    /// The parsers, in `--parser` order: the columns.
    pub parsers: Vec<String>,
    /// Disagreeing groups first, then agreeing ones; within each, groups in status order.
    pub groups: Vec<MatrixGroup>,
}

impl Matrix {
    /// Number of cases where the parsers disagree.
    pub fn disagreements(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| !g.agree)
            .map(|g| g.rows.len())
            .sum()
    }
}

/// Builds the matrix from each parser's case reports.
pub fn matrix(results: &[(String, Vec<CaseReport>)]) -> Matrix {
    let mut rows: BTreeMap<&str, MatrixRow> = BTreeMap::new();
    let n = results.len();
    for (p, (_, reports)) in results.iter().enumerate() {
        for r in reports {
            let row = rows.entry(r.id.as_str()).or_insert_with(|| MatrixRow {
                id: r.id.clone(),
                format: r.format,
                label: r.label,
                cells: vec![
                    MatrixCell {
                        status: None,
                        invariants: Vec::new(),
                    };
                    n
                ],
            });
            row.cells[p] = MatrixCell {
                status: Some(r.status),
                invariants: r.violations.iter().map(|v| v.invariant).collect(),
            };
        }
    }
    let mut groups: BTreeMap<(bool, Vec<Option<Status>>), Vec<MatrixRow>> = BTreeMap::new();
    for row in rows.into_values() {
        let statuses: Vec<Option<Status>> = row.cells.iter().map(|c| c.status).collect();
        let agree = statuses.windows(2).all(|w| w[0] == w[1]);
        groups.entry((agree, statuses)).or_default().push(row);
    }
    Matrix {
        parsers: results.iter().map(|(p, _)| p.clone()).collect(),
        groups: groups
            .into_iter()
            .map(|((agree, statuses), rows)| MatrixGroup {
                statuses,
                agree,
                rows,
            })
            .collect(),
    }
}

fn status_colour(s: Option<Status>) -> Color {
    match s {
        Some(Status::Pass) => Color::Green,
        Some(Status::Fail) => Color::Red,
        None => Color::Grey,
        Some(_) => Color::Yellow,
    }
}

/// The matrix as a terminal table: every disagreeing case on its own row, then one row per
/// group of cases on which all parsers agree.
pub fn render(m: &Matrix, colour: Colour) -> String {
    let mut table = Table::new();
    table
        .load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled);
    let mut header = vec!["case".to_string()];
    header.extend(m.parsers.iter().cloned());
    table.set_header(header);
    if colour == Colour::Never {
        table.force_no_tty();
    } else {
        table.enforce_styling();
    }
    let paint = |text: String, s: Option<Status>| {
        let c = Cell::new(text);
        if colour == Colour::Always {
            c.fg(status_colour(s))
        } else {
            c
        }
    };
    for g in m.groups.iter().filter(|g| !g.agree) {
        for r in &g.rows {
            let mut cells = vec![Cell::new(&r.id)];
            cells.extend(r.cells.iter().map(|c| paint(c.label(), c.status)));
            table.add_row(cells);
        }
    }
    for g in m.groups.iter().filter(|g| g.agree) {
        let mut per_format: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &g.rows {
            *per_format.entry(r.format).or_default() += 1;
        }
        let formats = per_format
            .iter()
            .map(|(f, k)| format!("{k} {f}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut cells = vec![Cell::new(format!("all agree: {formats} case(s)"))];
        cells.extend(
            g.statuses
                .iter()
                .map(|&s| paint(s.map_or("skipped", Status::as_str).to_string(), s)),
        );
        table.add_row(cells);
    }
    format!(
        "{table}\n{} case(s) where the parsers disagree\n",
        m.disagreements()
    )
}

/// Rows listed one by one in Markdown before the rest are only counted.
const MARKDOWN_ROWS: usize = 100;

/// The matrix as a Markdown table: cases where the parsers disagree, then one row per group of
/// cases on which they all agree.
pub fn markdown(m: &Matrix) -> String {
    let mut out = String::new();
    out.push_str("| case |");
    for p in &m.parsers {
        out.push_str(&format!(" {} |", super::markdown::code_cell(p)));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(m.parsers.len()));
    out.push('\n');
    let mut listed = 0;
    for g in m.groups.iter().filter(|g| !g.agree) {
        for r in &g.rows {
            listed += 1;
            if listed > MARKDOWN_ROWS {
                continue;
            }
            out.push_str(&format!("| {} |", super::markdown::code_cell(&r.id)));
            for c in &r.cells {
                out.push_str(&format!(" {} |", c.label()));
            }
            out.push('\n');
        }
    }
    if listed > MARKDOWN_ROWS {
        out.push_str(&format!(
            "| … {} more disagreeing case(s) in report.json |{}\n",
            listed - MARKDOWN_ROWS,
            " |".repeat(m.parsers.len())
        ));
    }
    for g in m.groups.iter().filter(|g| g.agree) {
        out.push_str(&format!("| all agree: {} case(s) |", g.rows.len()));
        for s in &g.statuses {
            out.push_str(&format!(" {} |", s.map_or("skipped", Status::as_str)));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "\n{} case(s) where the parsers disagree.\n",
        m.disagreements()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::run::Violation;

    fn report(id: &str, status: Status, inv: Option<Invariant>) -> CaseReport {
        let mut r = CaseReport::new(id.into(), "kimi_k2", crate::harness::corpus::Label::Accept);
        r.status = status;
        r.violations = inv
            .into_iter()
            .map(|invariant| Violation {
                invariant,
                strategy: None,
                cuts: Vec::new(),
                failing_replays: 1,
                cut_class: None,
                message: String::new(),
                replay: String::new(),
                path: None,
                got: Vec::new(),
            })
            .collect();
        r.replays = 1;
        r.error_free = 1;
        r.matched = 1;
        r
    }

    #[test]
    fn agreeing_cases_are_grouped_and_disagreements_come_first() {
        let a = vec![
            report("c1", Status::Pass, None),
            report("c2", Status::Pass, None),
            report("c3", Status::Pass, None),
            report("c4", Status::Fail, Some(Invariant::Expectation)),
        ];
        let b = vec![
            report("c1", Status::Pass, None),
            report("c2", Status::Fail, Some(Invariant::SplitInvariance)),
            report("c3", Status::Crash, None),
        ];
        let m = matrix(&[("builtin".into(), a), ("cmd:x".into(), b)]);
        assert_eq!(m.parsers, vec!["builtin", "cmd:x"]);
        assert_eq!(m.disagreements(), 3);
        let first = &m.groups[0];
        assert!(!first.agree);
        let agreed: Vec<_> = m.groups.iter().filter(|g| g.agree).collect();
        assert_eq!(agreed.len(), 1);
        assert_eq!(agreed[0].rows[0].id, "c1");
        let c4 = m
            .groups
            .iter()
            .flat_map(|g| &g.rows)
            .find(|r| r.id == "c4")
            .unwrap();
        assert_eq!(c4.cells[1].status, None, "not run by the second parser");
        let text = render(&m, Colour::Never);
        assert!(text.contains("fail (split_invariance)"), "{text}");
        assert!(text.contains("all agree: 1 kimi_k2 case(s)"), "{text}");
        assert!(text.contains("skipped"), "{text}");
        assert!(text.contains("3 case(s) where the parsers disagree"));
    }
}
