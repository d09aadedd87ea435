//! The invariants every replay is checked against (`specs/streaming.md`, `specs/report.md`), as
//! pure functions of outcomes.

use super::corpus::{Expectation, Label};
use crate::event::{ParseResult, excerpt, json_eq, order_list};
use crate::names::wire_names;
use serde::Serialize;
use std::borrow::Cow;

/// An invariant id, as named in reports.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Invariant {
    /// Every chunking gives the result of the whole transcript.
    SplitInvariance,
    /// For a parser with a non-streaming and a streaming path: the streaming replays give the
    /// non-streaming path's result (blamed, as `split_invariance` is, on the side that differs
    /// from the expectation).
    StreamBatchParity,
    /// Events keep the per-call contract of `specs/streaming.md`.
    DeltaContract,
    /// Text and reasoning of an error-free parse contain no delimiter of the format.
    NoMarkupLeak,
    /// y_: the result equals the expectation; n_: an error of the expected kind.
    Expectation,
    /// Rendering the parsed calls and parsing them again gives them back.
    Roundtrip,
    /// Content containing `]]>` renders as split CDATA and parses back under every cut.
    CdataSplit,
    /// Values follow the format's machine-readable typing table.
    TypeInference,
    /// No panic; limits give `limit_exceeded`.
    Bounded,
    /// The same input gives the same events twice.
    Deterministic,
    /// A parser fed interleaved with another instance's stream gives the result it gives alone:
    /// parsers share no state.
    StreamIsolation,
}

impl Invariant {}

wire_names! {
    Invariant {
        SplitInvariance => "split_invariance",
        StreamBatchParity => "stream_batch_parity",
        DeltaContract => "delta_contract",
        NoMarkupLeak => "no_markup_leak",
        Expectation => "expectation",
        Roundtrip => "roundtrip",
        CdataSplit => "cdata_split",
        TypeInference => "type_inference",
        Bounded => "bounded",
        Deterministic => "deterministic",
        StreamIsolation => "stream_isolation",
    }
}

/// What is compared when a parser's results are judged (`--compare`, `specs/adapter.md` §6).
///
/// conform's own parsers are held to everything. A parser that is not conform's is judged on
/// calls, text and error-versus-no-error by default: its warnings are its own names for its own
/// leniencies, its ids may be generated where the wire carries none, and its error kinds are
/// its own vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compare {
    /// Warning kinds are compared.
    pub warnings: bool,
    /// Ids are compared even where the wire carries none, so a generated id is a difference.
    pub ids: bool,
    /// Error kinds are compared; otherwise only whether there is an error.
    pub error_kinds: bool,
}

impl Compare {
    /// Everything compared: the rule for conform's own parsers.
    pub const ALL: Compare = Compare {
        warnings: true,
        ids: true,
        error_kinds: true,
    };
    /// The default for external parsers.
    pub const EXTERNAL: Compare = Compare {
        warnings: false,
        ids: false,
        error_kinds: false,
    };

    /// Reads `--compare`: comma-separated `warnings`, `ids`, `error_kinds`, or `all` / `none`
    /// (calls, text and error-versus-no-error are always compared).
    pub fn parse(s: &str) -> Result<Compare, String> {
        let mut c = Compare::EXTERNAL;
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match w {
                "all" => c = Compare::ALL,
                "none" => c = Compare::EXTERNAL,
                "warnings" => c.warnings = true,
                "ids" => c.ids = true,
                "error_kinds" => c.error_kinds = true,
                other => {
                    return Err(format!(
                        "unknown --compare word {other:?} (known: warnings, ids, error_kinds, all, none)"
                    ));
                }
            }
        }
        Ok(c)
    }

    /// The result as this policy sees it: ids the wire does not carry (they do not occur in
    /// `transcript`) dropped when ids are not compared, with a note for each generated id that
    /// is empty, not unique in the turn, or not a printable token.
    pub fn view<'a>(
        &self,
        result: &'a ParseResult,
        transcript: &[u8],
    ) -> (Cow<'a, ParseResult>, Option<String>) {
        if self.ids || result.calls.iter().all(|c| c.id.is_none()) {
            return (Cow::Borrowed(result), None);
        }
        let mut problem = None;
        let mut seen = std::collections::HashSet::new();
        let mut r = result.clone();
        for (i, c) in r.calls.iter_mut().enumerate() {
            let Some(id) = c.id.as_deref() else { continue };
            if !id.is_empty() && memchr::memmem::find(transcript, id.as_bytes()).is_some() {
                continue;
            }
            let shape_ok =
                !id.is_empty() && id.len() <= 256 && id.chars().all(|ch| ch.is_ascii_graphic());
            if problem.is_none() && (!shape_ok || !seen.insert(id.to_string())) {
                problem = Some(format!(
                    "call {i}: the generated id {id:?} is {}",
                    if shape_ok {
                        "not unique in the turn"
                    } else {
                        "not a printable token of 1 to 256 ASCII characters"
                    }
                ));
            }
            c.id = None;
        }
        (Cow::Owned(r), problem)
    }

    fn same_errors(&self, a: &ParseResult, b: &ParseResult) -> bool {
        if self.error_kinds {
            a.error_kinds() == b.error_kinds()
        } else {
            a.errors.is_empty() == b.errors.is_empty()
        }
    }
}

/// Why a turn's result does not meet its expectation, or `None` when it does.
pub fn expectation_mismatch(
    label: Label,
    expect: Option<&Expectation>,
    result: &ParseResult,
    cmp: Compare,
) -> Option<String> {
    let kinds = result.error_kinds();
    if let Some(e) = expect {
        if let Some(text) = &e.text
            && *text != result.text
        {
            return Some(format!(
                "text is {} but the expectation says {}",
                excerpt(&result.text),
                excerpt(text)
            ));
        }
        // `None`: an adapter that reports no reasoning is not judged on it.
        if let (Some(want), Some(got)) = (&e.reasoning, &result.reasoning)
            && want != got
        {
            return Some(format!(
                "reasoning is {} but the expectation says {}",
                excerpt(got),
                excerpt(want)
            ));
        }
        if let Some(calls) = &e.calls {
            if calls.len() != result.calls.len() {
                return Some(format!(
                    "{} call(s) parsed ({}) but the expectation has {} ({})",
                    result.calls.len(),
                    names(&result.calls),
                    calls.len(),
                    names(calls)
                ));
            }
            for (i, (got, want)) in result.calls.iter().zip(calls).enumerate() {
                if got != want {
                    return Some(format!(
                        "call {i} differs: parsed {} but the expectation says {}",
                        describe(got),
                        describe(want)
                    ));
                }
            }
        }
        // `None`: a parser that reports a result and no events has no order to judge.
        if let (Some(want), Some(got)) = (&e.order, &result.order)
            && want != got
        {
            return Some(format!(
                "the order of reasoning, text and calls is {} but the expectation says {}",
                order_list(got),
                order_list(want)
            ));
        }
        if let Some(want) = &e.errors
            && (if cmp.error_kinds {
                *want != kinds
            } else {
                want.is_empty() != kinds.is_empty()
            })
        {
            return Some(format!(
                "errors are [{}] but the expectation says {:?}",
                kinds_list(result),
                want.iter().map(|k| k.as_str()).collect::<Vec<_>>()
            ));
        }
        if let Some(w) = e.warnings.as_ref().filter(|_| cmp.warnings) {
            let got: Vec<&str> = result.warnings.iter().map(|w| w.kind.as_str()).collect();
            if got != w.iter().map(String::as_str).collect::<Vec<_>>() {
                return Some(format!(
                    "warnings are {got:?} but the expectation says {w:?}"
                ));
            }
        }
        if let Some(c) = &e.completion
            && c.as_deref() != result.completion.as_deref()
        {
            return Some(format!(
                "completion is {:?} but the expectation says {c:?}",
                result.completion
            ));
        }
        if e.errors.is_some() && !kinds.is_empty() {
            // The exact list was checked above, so these errors are the expected ones.
            return None;
        }
        match &e.error {
            Some(Some(want))
                if !kinds.contains(&want.kind) && (cmp.error_kinds || kinds.is_empty()) =>
            {
                return Some(if kinds.is_empty() {
                    format!("no error, but the expectation says {}", want.kind)
                } else {
                    format!(
                        "errors are {} but the expectation says {}",
                        kinds_list(result),
                        want.kind
                    )
                });
            }
            Some(Some(_)) => return None,
            _ => {}
        }
    }
    if label == Label::Accept && !kinds.is_empty() {
        return Some(format!(
            "must parse without error but got {}: {}",
            kinds_list(result),
            result.errors[0].message
        ));
    }
    None
}

fn kinds_list(r: &ParseResult) -> String {
    r.error_kinds()
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(calls: &[crate::event::ToolCall]) -> String {
    calls
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(c: &crate::event::ToolCall) -> String {
    let mut s = format!("{}(", c.name);
    if let Some(id) = &c.id {
        s.push_str(&format!("id={id:?}, "));
    }
    if let Some(sv) = &c.server {
        s.push_str(&format!("server={sv:?}, "));
    }
    s.push_str(&excerpt(&c.arguments.to_string()));
    s.push(')');
    s
}

/// Why two results of the same input differ, or `None` when they are equal; unlike
/// `ParseResult`'s equality it also compares warning kinds (when `cmp` says so), which must not
/// depend on cuts either.
pub fn result_difference(whole: &ParseResult, other: &ParseResult, cmp: Compare) -> Option<String> {
    if whole.text != other.text {
        let at = first_difference(&whole.text, &other.text);
        return Some(format!(
            "text differs from byte {at}: whole gives {} here, this chunking {}",
            excerpt(whole.text.get(at..).unwrap_or("")),
            excerpt(other.text.get(at..).unwrap_or(""))
        ));
    }
    if whole.reasoning_text() != other.reasoning_text() {
        let (a, b) = (whole.reasoning_text(), other.reasoning_text());
        let at = first_difference(a, b);
        return Some(format!(
            "reasoning differs from byte {at}: whole gives {} here, this chunking {}",
            excerpt(a.get(at..).unwrap_or("")),
            excerpt(b.get(at..).unwrap_or(""))
        ));
    }
    if whole.calls.len() != other.calls.len() {
        return Some(format!(
            "whole gives {} call(s) ({}), this chunking {} ({})",
            whole.calls.len(),
            names(&whole.calls),
            other.calls.len(),
            names(&other.calls)
        ));
    }
    for (i, (a, b)) in whole.calls.iter().zip(&other.calls).enumerate() {
        if a != b {
            return Some(format!(
                "call {i}: whole gives {}, this chunking {}",
                describe(a),
                describe(b)
            ));
        }
    }
    // The ordered stream (`specs/streaming.md`): the same parts in another order are another
    // stream, which a client renders differently. Judged only where both came from events.
    if let (Some(a), Some(b)) = (&whole.order, &other.order)
        && a != b
    {
        return Some(format!(
            "the order of reasoning, text and calls differs: whole gives {}, this chunking {}",
            order_list(a),
            order_list(b)
        ));
    }
    if !cmp.same_errors(whole, other) {
        return Some(format!(
            "errors: whole gives [{}], this chunking [{}]",
            kinds_list(whole),
            kinds_list(other)
        ));
    }
    if !cmp.warnings {
        return None;
    }
    let wk: Vec<&str> = whole.warnings.iter().map(|w| w.kind.as_str()).collect();
    let ok: Vec<&str> = other.warnings.iter().map(|w| w.kind.as_str()).collect();
    if wk != ok {
        return Some(format!(
            "warnings: whole gives {wk:?}, this chunking {ok:?}"
        ));
    }
    None
}

/// The byte offset (a character boundary of both) where two strings start to differ.
fn first_difference(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map(|((i, _), _)| i)
        .unwrap_or(a.len().min(b.len()))
}

/// The first delimiter found in the text, if any.
///
/// A delimiter that the expected text itself contains is inert markup by the format's rules
/// (a tool tag inside a code fence, a spaced tag) and is not a leak (`specs/corpus.md`).
pub fn markup_leak(text: &str, markers: &[String], expected_text: Option<&str>) -> Option<String> {
    markers
        .iter()
        .filter(|m| !m.is_empty() && !expected_text.is_some_and(|t| t.contains(m.as_str())))
        .find_map(|m| {
            text.find(m.as_str())
                .map(|at| format!("text contains {m:?} at byte {at}"))
        })
}

/// Why a re-parse of rendered calls differs from what was rendered, or `None`; the reasoning
/// is compared when the rendering carries it (`with_reasoning`).
pub fn roundtrip_difference(
    want: &ParseResult,
    got: &ParseResult,
    with_reasoning: bool,
) -> Option<String> {
    if !got.errors.is_empty() {
        return Some(format!(
            "the rendered transcript does not parse: {}",
            got.errors[0].message
        ));
    }
    if want.text != got.text {
        return Some(format!(
            "text {} came back as {}",
            excerpt(&want.text),
            excerpt(&got.text)
        ));
    }
    if with_reasoning && want.reasoning_text() != got.reasoning_text() {
        return Some(format!(
            "reasoning {} came back as {}",
            excerpt(want.reasoning_text()),
            excerpt(got.reasoning_text())
        ));
    }
    if want.calls.len() != got.calls.len() {
        return Some(format!(
            "{} call(s) rendered, {} parsed back",
            want.calls.len(),
            got.calls.len()
        ));
    }
    for (i, (a, b)) in want.calls.iter().zip(&got.calls).enumerate() {
        if a.name != b.name
            || a.id != b.id
            || a.server != b.server
            || !json_eq(&a.arguments, &b.arguments)
        {
            return Some(format!(
                "call {i} {} came back as {}",
                describe(a),
                describe(b)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorInfo, ErrorKind, ToolCall};
    use crate::harness::corpus::ExpectedError;
    use serde_json::json;

    fn result(text: &str, calls: Vec<ToolCall>, errors: Vec<ErrorKind>) -> ParseResult {
        ParseResult {
            text: text.into(),
            calls,
            errors: errors
                .into_iter()
                .map(|kind| ErrorInfo {
                    kind,
                    message: "m".into(),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            name: name.into(),
            id: None,
            server: None,
            arguments: args,
        }
    }

    #[test]
    fn accept_needs_no_error_and_equal_fields() {
        let e = Expectation {
            text: Some("hi".into()),
            calls: Some(vec![call("f", json!({"a": 1}))]),
            ..Default::default()
        };
        let ok = result("hi", vec![call("f", json!({"a": 1.0}))], vec![]);
        assert_eq!(
            expectation_mismatch(Label::Accept, Some(&e), &ok, Compare::ALL),
            None
        );
        let bad = result("hi", vec![call("f", json!({"a": 2}))], vec![]);
        assert!(expectation_mismatch(Label::Accept, Some(&e), &bad, Compare::ALL).is_some());
        let err = result(
            "hi",
            vec![call("f", json!({"a": 1}))],
            vec![ErrorKind::InvalidJson],
        );
        assert!(expectation_mismatch(Label::Accept, Some(&e), &err, Compare::ALL).is_some());
        assert!(expectation_mismatch(Label::Accept, None, &err, Compare::ALL).is_some());
    }

    #[test]
    fn reject_needs_the_expected_kind() {
        let e = Expectation {
            error: Some(Some(ExpectedError {
                kind: ErrorKind::MissingName,
            })),
            ..Default::default()
        };
        let r = result("", vec![], vec![ErrorKind::InvalidJson]);
        assert!(expectation_mismatch(Label::Reject, Some(&e), &r, Compare::ALL).is_some());
        let r = result("", vec![], vec![ErrorKind::MissingName]);
        assert_eq!(
            expectation_mismatch(Label::Reject, Some(&e), &r, Compare::ALL),
            None
        );
    }

    #[test]
    fn reasoning_is_judged_when_reported_and_compared_across_chunkings() {
        let e = Expectation {
            reasoning: Some("plan".into()),
            ..Default::default()
        };
        let mut r = result("", vec![], vec![]);
        // Not reported (an adapter without reasoning): not judged.
        assert_eq!(
            expectation_mismatch(Label::Accept, Some(&e), &r, Compare::ALL),
            None
        );
        r.reasoning = Some("plan".into());
        assert_eq!(
            expectation_mismatch(Label::Accept, Some(&e), &r, Compare::ALL),
            None
        );
        r.reasoning = Some("".into());
        assert!(expectation_mismatch(Label::Accept, Some(&e), &r, Compare::ALL).is_some());
        let mut other = r.clone();
        other.reasoning = Some("plaN".into());
        assert!(
            result_difference(&r, &other, Compare::ALL)
                .unwrap()
                .starts_with("reasoning differs from byte 0")
        );
        other.reasoning = None;
        assert_eq!(result_difference(&r, &other, Compare::ALL), None);
    }

    #[test]
    fn differences_name_the_first_divergence() {
        let a = result("abc", vec![], vec![]);
        let b = result("abd", vec![], vec![]);
        assert!(
            result_difference(&a, &b, Compare::ALL)
                .unwrap()
                .contains("byte 2")
        );
        assert_eq!(result_difference(&a, &a.clone(), Compare::ALL), None);
        assert!(markup_leak("x<|a|>", &["<|a|>".into()], None).is_some());
        assert!(markup_leak("x<|a|>", &["<|a|>".into()], Some("x<|a|>")).is_none());
    }

    #[test]
    fn compare_words_and_generated_ids() {
        assert_eq!(Compare::parse("").unwrap(), Compare::EXTERNAL);
        assert_eq!(Compare::parse("all").unwrap(), Compare::ALL);
        let c = Compare::parse("warnings, ids").unwrap();
        assert!(c.warnings && c.ids && !c.error_kinds);
        assert!(Compare::parse("colour").unwrap_err().contains("colour"));

        let call = |id: &str| crate::event::ToolCall {
            name: "f".into(),
            id: Some(id.into()),
            server: None,
            arguments: serde_json::json!({}),
        };
        let r = ParseResult {
            calls: vec![call("wire_1"), call("gen_a")],
            ..Default::default()
        };
        let wire = b"...wire_1...";
        let (v, problem) = Compare::EXTERNAL.view(&r, wire);
        assert_eq!(
            v.calls[0].id.as_deref(),
            Some("wire_1"),
            "carried by the wire"
        );
        assert_eq!(v.calls[1].id, None, "generated: set aside");
        assert_eq!(problem, None);
        let (v, _) = Compare::ALL.view(&r, wire);
        assert_eq!(v.calls[1].id.as_deref(), Some("gen_a"));

        let twice = ParseResult {
            calls: vec![call("gen"), call("gen")],
            ..Default::default()
        };
        assert!(
            Compare::EXTERNAL
                .view(&twice, b"")
                .1
                .unwrap()
                .contains("not unique")
        );
        let blank = ParseResult {
            calls: vec![call("a b")],
            ..Default::default()
        };
        assert!(
            Compare::EXTERNAL
                .view(&blank, b"")
                .1
                .unwrap()
                .contains("printable")
        );

        let a = ParseResult {
            errors: vec![crate::event::ErrorInfo {
                kind: crate::event::ErrorKind::InvalidJson,
                message: String::new(),
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.errors[0].kind = crate::event::ErrorKind::MalformedMarkup;
        assert!(result_difference(&a, &b, Compare::ALL).is_some());
        assert_eq!(result_difference(&a, &b, Compare::EXTERNAL), None);
        assert!(result_difference(&a, &ParseResult::default(), Compare::EXTERNAL).is_some());
    }
}
