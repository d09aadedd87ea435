//! Per-format and overall aggregates of a run: counts and rates.

use crate::harness::invariants::Invariant;
use crate::harness::run::{CaseReport, Status};
use serde::Serialize;
use std::collections::BTreeMap;

/// Counts for one format (or for all of them).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Cases replayed.
    pub cases: usize,
    /// Cases with every invariant holding.
    pub passed: usize,
    /// Cases with a broken invariant.
    pub failed: usize,
    /// Replays run.
    pub replays: usize,
    /// Replays of y_ and unlabelled cases (the parse success denominator).
    pub parse_replays: usize,
    /// Of those, replays that ended without an error.
    pub parse_ok: usize,
    /// Replays of y_ cases (the match denominator).
    pub match_replays: usize,
    /// Of those, replays equal to their expectation.
    pub match_ok: usize,
    /// Cases breaking each invariant.
    pub violations: BTreeMap<Invariant, usize>,
}

impl Totals {
    /// Adds one case.
    pub fn add(&mut self, c: &CaseReport) {
        self.cases += 1;
        match c.status {
            Status::Pass => self.passed += 1,
            Status::Fail => self.failed += 1,
        }
        self.replays += c.replays;
        if c.counts_for_parse_rate() {
            self.parse_replays += c.replays;
            self.parse_ok += c.error_free;
        }
        if c.counts_for_match_rate() {
            self.match_replays += c.replays;
            self.match_ok += c.matched;
        }
        for v in &c.violations {
            *self.violations.entry(v.invariant).or_default() += 1;
        }
    }

    /// Parse success rate in [0, 1], or `None` with no replay to count.
    pub fn parse_rate(&self) -> Option<f64> {
        rate(self.parse_ok, self.parse_replays)
    }

    /// Match rate in [0, 1], or `None` with no y_ replay.
    pub fn match_rate(&self) -> Option<f64> {
        rate(self.match_ok, self.match_replays)
    }
}

fn rate(num: usize, den: usize) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// A rate as a percentage with one decimal, never rounding a miss up to 100.0%.
pub fn percent(r: Option<f64>) -> String {
    match r {
        None => "–".into(),
        Some(x) if x < 1.0 && x > 0.999 => "99.9%".into(),
        Some(x) => format!("{:.1}%", x * 100.0),
    }
}

/// Totals per format (in id order) and overall.
pub fn summarize(cases: &[CaseReport]) -> (BTreeMap<&'static str, Totals>, Totals) {
    let mut per: BTreeMap<&'static str, Totals> = BTreeMap::new();
    let mut all = Totals::default();
    for c in cases {
        per.entry(c.format).or_default().add(c);
        all.add(c);
    }
    (per, all)
}
