//! What went wrong in a failing case, in words an engine's maintainer files bugs with
//! (`specs/engines.md` §3): each failing case of a report is put in one class, derived from
//! its status and its violations' invariants and messages, checked against the case's
//! expectation and conform's own reading of the transcript where the message alone is not
//! enough. Where conform's rule is a choice engines legitimately make differently (ids, text
//! after the calls, warnings, error names), the case is marked `policy`, apart from bugs.

use super::corpus::Case;
use super::invariants::Invariant;
use super::report::{CaseOut, CaseStatus, ViolationOut};
use crate::event::{Event, excerpt};
use crate::formats;
use serde::Serialize;

/// A bug class, most telling first: a case showing several is put in the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BugClass {
    /// The parser crashed, hung, panicked or broke the adapter protocol.
    Crash,
    /// The format's markup came out as text.
    MarkupLeaked,
    /// Fewer calls than expected (or than the whole input gives).
    CallLost,
    /// A call with the right name and the wrong arguments.
    ArgumentsWrong,
    /// Less text than expected (or than the whole input gives).
    TextLost,
    /// An error on valid input, or none on malformed input.
    ErrorVerdict,
    /// Anything else: extra calls or text, wrong names, reasoning, the delta contract,
    /// determinism.
    Other,
}

/// A rule of conform's that engines legitimately settle their own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// The calls are right but for an id the wire carries that the engine replaced.
    Ids,
    /// The text is right up to the last call; the text after it is dropped.
    TextAfterCalls,
    /// Warnings differ (their names are conform's).
    Warnings,
    /// Both report an error, of different kinds (their names are conform's).
    ErrorKinds,
}

/// One failing case's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "class")]
pub enum CaseClass {
    /// A bug of the parser.
    Bug(BugClass),
    /// A legitimate difference of policy.
    Policy(PolicyKind),
}

impl BugClass {
    /// Every class, in order.
    pub const ALL: [BugClass; 7] = [
        BugClass::Crash,
        BugClass::MarkupLeaked,
        BugClass::CallLost,
        BugClass::ArgumentsWrong,
        BugClass::TextLost,
        BugClass::ErrorVerdict,
        BugClass::Other,
    ];

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            BugClass::Crash => "crash",
            BugClass::MarkupLeaked => "markup_leaked",
            BugClass::CallLost => "call_lost",
            BugClass::ArgumentsWrong => "arguments_wrong",
            BugClass::TextLost => "text_lost",
            BugClass::ErrorVerdict => "error_verdict",
            BugClass::Other => "other",
        }
    }

    /// What the class means, for a page.
    pub fn describe(self) -> &'static str {
        match self {
            BugClass::Crash => "crash, timeout or protocol error",
            BugClass::MarkupLeaked => "markup leaked into the text",
            BugClass::CallLost => "call lost",
            BugClass::ArgumentsWrong => "arguments wrong",
            BugClass::TextLost => "text lost",
            BugClass::ErrorVerdict => "error on valid input, or none on malformed input",
            BugClass::Other => "other",
        }
    }
}

impl PolicyKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Ids => "ids",
            PolicyKind::TextAfterCalls => "text_after_calls",
            PolicyKind::Warnings => "warnings",
            PolicyKind::ErrorKinds => "error_kinds",
        }
    }
}

impl CaseClass {
    /// `text_lost`, or `policy:ids`.
    pub fn label(self) -> String {
        match self {
            CaseClass::Bug(b) => b.as_str().to_string(),
            CaseClass::Policy(p) => format!("policy:{}", p.as_str()),
        }
    }
}

/// What the classifier knows of a case beyond the report: the format's delimiters, and per
/// turn the expected text and the text conform's own parser finds after the last call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseContext {
    /// The format's delimiters (the markup-leak check's list).
    pub markers: Vec<String>,
    /// One entry per turn.
    pub turns: Vec<TurnContext>,
}

/// One turn's context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnContext {
    /// The expectation's text, if it has one.
    pub expected_text: Option<String>,
    /// The text conform's parser emits after the turn's last call ends (empty without calls).
    pub text_after_calls: String,
}

impl CaseContext {
    /// The context of a loaded case (its format's markers and conform's reading of it).
    pub fn of(case: &Case) -> CaseContext {
        let Some(format) = formats::by_id(case.format) else {
            return CaseContext::default();
        };
        let mut parser = (format.new_parser)(&case.tools);
        let turns = case
            .turns
            .iter()
            .enumerate()
            .map(|(t, data)| {
                let mut events = formats::run_chunks(parser.as_mut(), [data.as_slice()]);
                parser.finish(&mut events);
                TurnContext {
                    expected_text: case
                        .expects
                        .get(t)
                        .and_then(Option::as_ref)
                        .and_then(|e| e.text.clone()),
                    text_after_calls: text_after_last_call(&events),
                }
            })
            .collect();
        CaseContext {
            markers: (format.markers)(&case.tools),
            turns,
        }
    }

    /// The context of a case known only by its format (no expectation, no transcript).
    pub fn of_format(format: &str) -> CaseContext {
        CaseContext {
            markers: formats::by_id(format)
                .map(|f| (f.markers)(&crate::tools::Tools::default()))
                .unwrap_or_default(),
            turns: Vec::new(),
        }
    }
}

/// The text events after the last `call_end`, concatenated (empty when no call ends).
fn text_after_last_call(events: &[Event]) -> String {
    let Some(last) = events
        .iter()
        .rposition(|e| matches!(e, Event::CallEnd { .. }))
    else {
        return String::new();
    };
    events[last + 1..]
        .iter()
        .filter_map(|e| match e {
            Event::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The class of a failing case, with the violation that decided it (none for a crash,
/// timeout or protocol error, whose reason is in the case's notes); `None` for a case that
/// does not fail.
pub fn classify_case<'a>(
    case: &'a CaseOut,
    ctx: &CaseContext,
) -> Option<(CaseClass, Option<&'a ViolationOut>)> {
    match case.status {
        CaseStatus::Crash | CaseStatus::Timeout | CaseStatus::ProtocolError => {
            return Some((CaseClass::Bug(BugClass::Crash), None));
        }
        s if !s.is_failing() => return None,
        _ => {}
    }
    let classes: Vec<(CaseClass, &ViolationOut)> = case
        .violations
        .iter()
        .map(|v| (classify_violation(v, ctx), v))
        .collect();
    let bug = classes
        .iter()
        .filter(|(c, _)| matches!(c, CaseClass::Bug(_)))
        .min_by_key(|(c, _)| *c);
    match bug.or_else(|| classes.iter().min_by_key(|(c, _)| *c)) {
        Some((c, v)) => Some((*c, Some(*v))),
        // Failing without a violation: an unexpected pass of a known failure, or a corpus error.
        None => Some((CaseClass::Bug(BugClass::Other), None)),
    }
}

/// The class of one violation.
pub fn classify_violation(v: &ViolationOut, ctx: &CaseContext) -> CaseClass {
    use BugClass as B;
    let (turn, msg) = strip_turn(&v.message);
    let tc = ctx.turns.get(turn).cloned().unwrap_or_default();
    let bug = CaseClass::Bug;
    match v.invariant {
        Invariant::NoMarkupLeak => bug(B::MarkupLeaked),
        Invariant::Bounded if msg.contains("panicked") => bug(B::Crash),
        Invariant::CdataSplit | Invariant::TypeInference => bug(B::ArgumentsWrong),
        Invariant::Expectation => expectation_class(msg, &tc, &ctx.markers),
        Invariant::SplitInvariance => split_class(msg, &ctx.markers),
        Invariant::Roundtrip => roundtrip_class(msg),
        Invariant::DeltaContract | Invariant::Deterministic | Invariant::Bounded => bug(B::Other),
    }
}

/// `turn 2: …` → (1, `…`); other messages are turn 0.
fn strip_turn(msg: &str) -> (usize, &str) {
    if let Some(rest) = msg.strip_prefix("turn ")
        && let Some((n, tail)) = rest.split_once(": ")
        && let Ok(n) = n.parse::<usize>()
        && n > 0
    {
        return (n - 1, tail);
    }
    (0, msg)
}

fn expectation_class(msg: &str, tc: &TurnContext, markers: &[String]) -> CaseClass {
    use BugClass as B;
    let bug = CaseClass::Bug;
    if let Some(rest) = msg.strip_prefix("text is ") {
        let (got, want) = split_pair(
            rest,
            " but the expectation says ",
            tc.expected_text.as_deref(),
        );
        if leaks(got, markers) {
            return bug(B::MarkupLeaked);
        }
        if let Some(full) = &tc.expected_text
            && drops_text_after_calls(got, full, &tc.text_after_calls)
        {
            return CaseClass::Policy(PolicyKind::TextAfterCalls);
        }
        return bug(if shorter(got, want) {
            B::TextLost
        } else {
            B::Other
        });
    }
    if let Some((got, want)) = calls_counts(msg, " call(s) parsed (", "but the expectation has ") {
        return bug(if got < want { B::CallLost } else { B::Other });
    }
    if let Some(rest) = msg.strip_prefix("call ")
        && let Some((_, pair)) = rest.split_once(" differs: parsed ")
    {
        let (got, want) = split_pair(pair, " but the expectation says ", None);
        return call_difference(got, want, true);
    }
    if msg.starts_with("warnings are ") {
        return CaseClass::Policy(PolicyKind::Warnings);
    }
    if let Some(rest) = msg.strip_prefix("errors are [") {
        // `errors are [a, b] but the expectation says ["c"]`: both sides erring is a naming
        // difference; one side empty is a verdict difference.
        let (got, want) = rest
            .split_once("] but the expectation says ")
            .unwrap_or((rest, ""));
        let want_empty = want.trim() == "[]";
        return if !got.trim().is_empty() && !want_empty && !want.is_empty() {
            CaseClass::Policy(PolicyKind::ErrorKinds)
        } else {
            bug(B::ErrorVerdict)
        };
    }
    if msg.starts_with("no error, but the expectation says")
        || msg.starts_with("must be rejected")
        || msg.starts_with("must parse without error")
    {
        return bug(B::ErrorVerdict);
    }
    if msg.starts_with("completion is ") {
        return bug(B::ArgumentsWrong);
    }
    bug(B::Other)
}

fn split_class(msg: &str, markers: &[String]) -> CaseClass {
    use BugClass as B;
    let bug = CaseClass::Bug;
    if let Some(rest) = msg.strip_prefix("text differs from byte ")
        && let Some((_, pair)) = rest.split_once(": whole gives ")
    {
        let (whole, chunked) = split_pair(pair, " here, this chunking ", None);
        return bug(if leaks(chunked, markers) {
            B::MarkupLeaked
        } else if shorter(chunked, whole) {
            B::TextLost
        } else {
            B::Other
        });
    }
    if let Some(rest) = msg.strip_prefix("whole gives ")
        && let Some((whole, chunked)) = calls_counts(rest, " call(s) (", "this chunking ")
    {
        return bug(if chunked < whole {
            B::CallLost
        } else {
            B::Other
        });
    }
    if let Some(rest) = msg.strip_prefix("call ")
        && let Some((_, pair)) = rest.split_once(": whole gives ")
    {
        let (whole, chunked) = split_pair(pair, ", this chunking ", None);
        return call_difference(chunked, whole, false);
    }
    if msg.starts_with("errors: ") {
        return bug(B::ErrorVerdict);
    }
    bug(B::Other)
}

fn roundtrip_class(msg: &str) -> CaseClass {
    use BugClass as B;
    let bug = CaseClass::Bug;
    if let Some((head, _)) = msg.split_once(" parsed back")
        && let Some((rendered, back)) = head.split_once(" call(s) rendered, ")
        && let (Ok(r), Ok(b)) = (
            rendered.trim().parse::<usize>(),
            back.trim().parse::<usize>(),
        )
    {
        return bug(if b < r { B::CallLost } else { B::Other });
    }
    if msg.starts_with("call ") && msg.contains(" came back as ") {
        return bug(B::ArgumentsWrong);
    }
    bug(B::Other)
}

/// Two described calls (`name(id="…", {…})`): the same but for ids is the `ids` policy (when
/// `ids_policy`), the same name is wrong arguments, another name is `other`.
fn call_difference(got: &str, want: &str, ids_policy: bool) -> CaseClass {
    if ids_policy && without_ids(got) == without_ids(want) {
        return CaseClass::Policy(PolicyKind::Ids);
    }
    let name = |s: &str| s.split('(').next().unwrap_or("").to_string();
    CaseClass::Bug(if name(got) == name(want) {
        BugClass::ArgumentsWrong
    } else {
        BugClass::Other
    })
}

/// A described call without its `id="…", ` part.
fn without_ids(s: &str) -> String {
    let Some(start) = s.find("(id=\"") else {
        return s.to_string();
    };
    let body = &s[start + 5..];
    // The id is a Debug-quoted string: skip to its unescaped closing quote.
    let mut escaped = false;
    for (i, ch) in body.char_indices() {
        match ch {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => {
                let rest = body[i + 1..].strip_prefix(", ").unwrap_or(&body[i + 1..]);
                return format!("{}({rest}", &s[..start]);
            }
            _ => escaped = false,
        }
    }
    s.to_string()
}

/// `A<sep>B`, split at the separator; with the full second value known, at the place where its
/// excerpt ends the message (so a separator inside the first value cannot mislead).
fn split_pair<'a>(s: &'a str, sep: &str, second: Option<&str>) -> (&'a str, &'a str) {
    if let Some(full) = second {
        let tail = format!("{sep}{}", excerpt(full));
        if let Some(head) = s.strip_suffix(tail.as_str()) {
            return (head, &s[head.len() + sep.len()..]);
        }
    }
    s.split_once(sep).unwrap_or((s, ""))
}

/// `N<a>…<b>M (…)` → (N, M), for the call-count messages.
fn calls_counts(msg: &str, a: &str, b: &str) -> Option<(usize, usize)> {
    let (n, rest) = msg.split_once(a)?;
    let n: usize = n.trim().parse().ok()?;
    let (_, tail) = rest.split_once(b)?;
    let m: usize = tail.split(' ').next()?.trim().parse().ok()?;
    Some((n, m))
}

/// Whether an excerpt (a Debug-quoted string) holds one of the markers.
fn leaks(quoted: &str, markers: &[String]) -> bool {
    markers.iter().filter(|m| !m.is_empty()).any(|m| {
        let q = format!("{m:?}");
        quoted.contains(&q[1..q.len() - 1])
    })
}

/// An excerpt's characters (quotes and escapes counted as written) and whether it was cut.
fn excerpt_len(quoted: &str) -> (usize, bool) {
    let inner = quoted
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(quoted);
    match inner.strip_suffix('…') {
        Some(cut) => (cut.chars().count(), true),
        None => (inner.chars().count(), false),
    }
}

/// Whether excerpt `a` is certainly shorter than excerpt `b` (`a` whole, `b` cut or longer).
fn shorter(a: &str, b: &str) -> bool {
    let ((la, cut_a), (lb, cut_b)) = (excerpt_len(a), excerpt_len(b));
    !cut_a && (cut_b || la < lb)
}

/// Whether `got` (an excerpt) is the expected text without the text conform finds after the
/// last call (or without it and the whitespace before it).
fn drops_text_after_calls(got: &str, expected: &str, after: &str) -> bool {
    if after.trim().is_empty() {
        return false;
    }
    let Some(before) = expected.strip_suffix(after) else {
        return false;
    };
    [before, before.trim_end()]
        .iter()
        .any(|b| excerpt(b) == got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::corpus::Label;

    fn v(invariant: Invariant, message: &str) -> ViolationOut {
        ViolationOut {
            invariant,
            strategy: None,
            cuts: vec![],
            failing_replays: 1,
            message: message.into(),
            replay: "conform parse …".into(),
            cut_class: None,
            path: None,
            got: Vec::new(),
        }
    }

    fn case(status: CaseStatus, violations: Vec<ViolationOut>) -> CaseOut {
        CaseOut {
            id: "corpus/kimi_k2/y_a.txt".into(),
            format: "kimi_k2".into(),
            label: Label::Accept,
            status,
            digest: String::new(),
            replays: 3,
            error_free: 3,
            matched: 0,
            violations,
            notes: vec![],
            completion: None,
            token_split_replays: 0,
            token_split_violations: vec![],
            coalesced_violations: Vec::new(),
            options: Default::default(),
        }
    }

    fn ctx(expected: &str, after: &str) -> CaseContext {
        CaseContext {
            markers: vec!["<|tool_call_begin|>".into(), "<tool_call>".into()],
            turns: vec![TurnContext {
                expected_text: Some(expected.into()),
                text_after_calls: after.into(),
            }],
        }
    }

    fn class(inv: Invariant, msg: &str, c: &CaseContext) -> String {
        classify_violation(&v(inv, msg), c).label()
    }

    #[test]
    fn text_messages_tell_leaks_losses_and_dropped_trailing_text() {
        let c = ctx("Hi.Done.", "Done.");
        let exp = |got: &str| {
            format!(
                "text is {} but the expectation says {}",
                excerpt(got),
                excerpt("Hi.Done.")
            )
        };
        assert_eq!(
            class(Invariant::Expectation, &exp("Hi.<tool_call>{"), &c),
            "markup_leaked"
        );
        assert_eq!(
            class(Invariant::Expectation, &exp("Hi."), &c),
            "policy:text_after_calls"
        );
        assert_eq!(class(Invariant::Expectation, &exp(""), &c), "text_lost");
        assert_eq!(class(Invariant::Expectation, &exp("H"), &c), "text_lost");
        assert_eq!(
            class(Invariant::Expectation, &exp("Hi.Done. And more"), &c),
            "other"
        );
        // Without text after the calls, a shorter text is lost, not a policy.
        let c2 = ctx("Hi.Done.", "");
        assert_eq!(class(Invariant::Expectation, &exp("Hi."), &c2), "text_lost");
    }

    #[test]
    fn call_messages_tell_lost_calls_arguments_names_and_ids() {
        let c = CaseContext::default();
        let e = Invariant::Expectation;
        assert_eq!(
            class(e, "0 call(s) parsed () but the expectation has 1 (get)", &c),
            "call_lost"
        );
        assert_eq!(
            class(
                e,
                "2 call(s) parsed (get, get) but the expectation has 1 (get)",
                &c
            ),
            "other"
        );
        assert_eq!(
            class(
                e,
                r#"call 0 differs: parsed get({"a":2}) but the expectation says get({"a":1})"#,
                &c
            ),
            "arguments_wrong"
        );
        assert_eq!(
            class(
                e,
                r#"call 0 differs: parsed put({"a":1}) but the expectation says get({"a":1})"#,
                &c
            ),
            "other"
        );
        assert_eq!(
            class(
                e,
                r#"call 0 differs: parsed get(id="call_9", {"a":1}) but the expectation says get(id="functions.get:0", {"a":1})"#,
                &c
            ),
            "policy:ids"
        );
        assert_eq!(
            class(
                e,
                r#"call 0 differs: parsed get({"a":1}) but the expectation says get(id="functions.get:0", {"a":1})"#,
                &c
            ),
            "policy:ids"
        );
        assert_eq!(
            class(
                e,
                r#"call 0 differs: parsed get(id="x", {"a":2}) but the expectation says get(id="y", {"a":1})"#,
                &c
            ),
            "arguments_wrong"
        );
        assert_eq!(
            class(
                e,
                "completion is None but the expectation says Some(\"x\")",
                &c
            ),
            "arguments_wrong"
        );
        assert_eq!(
            class(
                e,
                "call 1: the generated id \"a\" is not unique in the turn",
                &c
            ),
            "other"
        );
    }

    #[test]
    fn error_messages_tell_verdicts_from_names() {
        let c = CaseContext::default();
        let e = Invariant::Expectation;
        assert_eq!(
            class(e, "must be rejected, but parsed without error", &c),
            "error_verdict"
        );
        assert_eq!(
            class(e, "no error, but the expectation says invalid_json", &c),
            "error_verdict"
        );
        assert_eq!(
            class(e, "must parse without error but got invalid_json: bad", &c),
            "error_verdict"
        );
        assert_eq!(
            class(
                e,
                r#"errors are [malformed_markup] but the expectation says ["invalid_json"]"#,
                &c
            ),
            "policy:error_kinds"
        );
        assert_eq!(
            class(
                e,
                r#"errors are [] but the expectation says ["invalid_json"]"#,
                &c
            ),
            "error_verdict"
        );
        assert_eq!(
            class(
                e,
                r#"warnings are [] but the expectation says ["lenient"]"#,
                &c
            ),
            "policy:warnings"
        );
    }

    #[test]
    fn split_and_other_invariants() {
        let c = ctx("x", "");
        let s = Invariant::SplitInvariance;
        assert_eq!(
            class(
                s,
                r#"text differs from byte 3: whole gives "" here, this chunking "<|tool_call_begin|>f""#,
                &c
            ),
            "markup_leaked"
        );
        assert_eq!(
            class(
                s,
                r#"text differs from byte 3: whole gives "abc" here, this chunking """#,
                &c
            ),
            "text_lost"
        );
        assert_eq!(
            class(s, "whole gives 1 call(s) (f), this chunking 0 ()", &c),
            "call_lost"
        );
        assert_eq!(
            class(s, "whole gives 1 call(s) (f), this chunking 2 (f, f)", &c),
            "other"
        );
        assert_eq!(
            class(
                s,
                r#"call 0: whole gives f({"a":1}), this chunking f({"a":"1"})"#,
                &c
            ),
            "arguments_wrong"
        );
        assert_eq!(
            class(
                s,
                "errors: whole gives [], this chunking [invalid_json]",
                &c
            ),
            "error_verdict"
        );
        assert_eq!(
            class(
                Invariant::NoMarkupLeak,
                "text contains \"<x>\" at byte 0",
                &c
            ),
            "markup_leaked"
        );
        assert_eq!(
            class(Invariant::DeltaContract, "args after call_end", &c),
            "other"
        );
        assert_eq!(
            class(Invariant::Bounded, "the parser panicked: boom", &c),
            "crash"
        );
        assert_eq!(
            class(
                Invariant::Roundtrip,
                "1 call(s) rendered, 0 parsed back",
                &c
            ),
            "call_lost"
        );
        assert_eq!(
            class(
                Invariant::Roundtrip,
                r#"call 0 f({}) came back as f({"a":1})"#,
                &c
            ),
            "arguments_wrong"
        );
        // A session's turn prefix selects that turn's context.
        let two = CaseContext {
            markers: vec![],
            turns: vec![TurnContext::default(), ctx("A.B.", "B.").turns[0].clone()],
        };
        let msg = format!(
            "turn 2: text is {} but the expectation says {}",
            excerpt("A."),
            excerpt("A.B.")
        );
        assert_eq!(
            class(Invariant::Expectation, &msg, &two),
            "policy:text_after_calls"
        );
    }

    #[test]
    fn a_case_takes_its_most_telling_bug_and_is_policy_only_when_all_are() {
        let c = ctx("Hi.Done.", "Done.");
        let policy = v(
            Invariant::Expectation,
            &format!(
                "text is {} but the expectation says {}",
                excerpt("Hi."),
                excerpt("Hi.Done.")
            ),
        );
        let lost = v(
            Invariant::SplitInvariance,
            "whole gives 1 call(s) (f), this chunking 0 ()",
        );
        let leak = v(
            Invariant::NoMarkupLeak,
            "text contains \"<tool_call>\" at byte 0",
        );
        let only_policy = case(CaseStatus::Fail, vec![policy.clone()]);
        assert_eq!(
            classify_case(&only_policy, &c).map(|(k, _)| k.label()),
            Some("policy:text_after_calls".into())
        );
        let mixed = case(CaseStatus::Fail, vec![policy, lost, leak.clone()]);
        let (k, by) = classify_case(&mixed, &c).unwrap();
        assert_eq!(k, CaseClass::Bug(BugClass::MarkupLeaked));
        assert_eq!(by, Some(&leak));
        assert_eq!(
            classify_case(&case(CaseStatus::Timeout, vec![]), &c),
            Some((CaseClass::Bug(BugClass::Crash), None))
        );
        assert_eq!(classify_case(&case(CaseStatus::Pass, vec![]), &c), None);
        assert_eq!(
            classify_case(&case(CaseStatus::Xfail, vec![leak]), &c),
            None
        );
    }

    #[test]
    fn context_reads_the_text_after_the_last_call_with_conforms_parser() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("hermes");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("y_after.txt"),
            "Hi.<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>Done.",
        )
        .unwrap();
        let corpus = crate::harness::corpus::load(
            &[d.display().to_string()],
            &crate::harness::corpus::LoadOptions::default(),
        );
        let case = &corpus.cases[0];
        let c = CaseContext::of(case);
        assert_eq!(c.turns[0].text_after_calls, "Done.");
        assert!(c.markers.iter().any(|m| m == "<tool_call>"));
    }
}
