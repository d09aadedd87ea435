//! `junit.xml`: one test suite per parser and format, one test case per transcript.

use crate::harness::report::Report;
use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};

/// Renders the JUnit XML of a report.
pub fn render(r: &Report) -> Result<String, String> {
    let mut report = quick_junit::Report::new("conform");
    for run in &r.runs {
        let many = r.runs.len() > 1;
        for format in run.formats.keys() {
            let name = if many {
                format!("{format} ({})", run.parser)
            } else {
                format.clone()
            };
            let mut suite = TestSuite::new(name);
            for c in run.cases.iter().filter(|c| &c.format == format) {
                let status = match c.status.as_str() {
                    "pass" => TestCaseStatus::success(),
                    "xfail" => {
                        let mut s = TestCaseStatus::skipped();
                        s.set_message("known failure");
                        s
                    }
                    other => {
                        let kind = if matches!(other, "fail" | "xpass") {
                            NonSuccessKind::Failure
                        } else {
                            NonSuccessKind::Error
                        };
                        let mut s = TestCaseStatus::non_success(kind);
                        s.set_type(other);
                        let headline = match (other, c.violations.first()) {
                            ("xpass", _) => "passes now: remove its known-failure mark".to_string(),
                            (_, Some(v)) => format!("{}: {}", v.invariant, v.message),
                            (_, None) => c.notes.first().cloned().unwrap_or_else(|| other.into()),
                        };
                        s.set_message(headline);
                        let mut body = String::new();
                        for v in &c.violations {
                            body.push_str(&format!(
                                "{} ({} failing replay(s)): {}\nreplay: {}\n",
                                v.invariant, v.failing_replays, v.message, v.replay
                            ));
                        }
                        for n in &c.notes {
                            body.push_str(n);
                            body.push('\n');
                        }
                        s.set_description(body);
                        s
                    }
                };
                let mut tc = TestCase::new(c.id.clone(), status);
                tc.set_classname(format!("conform.{format}"));
                suite.add_test_case(tc);
            }
            report.add_test_suite(suite);
        }
    }
    if let Some(why) = r.judged_nothing() {
        // A CI view of a run that judged nothing must not be green: one error says why.
        let mut suite = TestSuite::new("conform");
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
        s.set_type("nothing_judged");
        s.set_message(why);
        let mut tc = TestCase::new("nothing was judged", s);
        tc.set_classname("conform.run");
        suite.add_test_case(tc);
        report.add_test_suite(suite);
    }
    if !r.corpus.errors.is_empty() {
        let mut suite = TestSuite::new("corpus");
        for e in &r.corpus.errors {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_type("corpus_error");
            s.set_message(e.message.clone());
            let mut tc = TestCase::new(e.path.clone(), s);
            tc.set_classname("conform.corpus");
            suite.add_test_case(tc);
        }
        report.add_test_suite(suite);
    }
    report
        .to_string()
        .map_err(|e| format!("cannot write JUnit XML: {e}"))
}
