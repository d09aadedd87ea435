//! One bug, once (`specs/engines.md` §5): failing cases of an engine fingerprinted into root
//! causes. A fingerprint is the format, the serving path that shows it and the deciding
//! difference normalised ("arguments end with `<｜tool▁call▁end｜>`", "every `]` removed
//! from the text", "panic: byte index N is not a char boundary"), read from what the replay
//! returned against what the case expects; cases with the same fingerprint are one bug.

use super::classify::{BugClass, CaseContext};
use super::invariants::Invariant;
use super::report::{CaseOut, CaseStatus, ViolationOut};
use super::serving::{Got, ReplayPath};
use serde::Serialize;

/// The root cause of a failing case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Fingerprint {
    /// The format id.
    pub format: String,
    /// Where it shows: `stream=false`, `streaming`, `both paths` (or `—` for a parser without
    /// declared paths).
    pub path: String,
    /// The bug class.
    pub class: BugClass,
    /// The deciding difference, normalised: the bug's title.
    pub detail: String,
}

impl Fingerprint {
    /// A one-line title: the difference, the format and the path.
    pub fn title(&self) -> String {
        format!("{}: {} ({})", self.format, self.detail, self.path)
    }
}

/// The fingerprint of a failing case classified as a bug, decided by violation `by`.
pub fn fingerprint(
    c: &CaseOut,
    class: BugClass,
    by: Option<&ViolationOut>,
    ctx: &CaseContext,
) -> Fingerprint {
    Fingerprint {
        format: c.format.clone(),
        path: path_of(c, class, by),
        class,
        detail: detail(c, class, by, ctx),
    }
}

/// Which serving paths fail: those of the violations in the case's class.
fn path_of(c: &CaseOut, class: BugClass, by: Option<&ViolationOut>) -> String {
    if matches!(
        c.status,
        CaseStatus::Crash | CaseStatus::Timeout | CaseStatus::ProtocolError
    ) {
        // The note names the strategy that broke down: a chunking streams.
        let streamed = c.notes.iter().any(|n| n.contains(" under "));
        let declared = c.notes.iter().any(|n| n.contains("--path "));
        return match (declared, streamed) {
            (false, _) => "—".into(),
            (true, true) => "streaming".into(),
            (true, false) => "stream=false".into(),
        };
    }
    let _ = class;
    let paths: Vec<Option<ReplayPath>> = c
        .violations
        .iter()
        .filter(|v| by.is_some_and(|b| same_kind(b, v)))
        .map(|v| v.path)
        .collect();
    let batch = paths.contains(&Some(ReplayPath::Batch));
    let stream = paths.contains(&Some(ReplayPath::Stream));
    match (batch, stream) {
        (true, true) => "both paths".into(),
        (true, false) => "stream=false".into(),
        (false, true) => "streaming".into(),
        (false, false) => "—".into(),
    }
}

/// Whether two violations tell the same kind of difference (the same invariant and the same
/// message prefix), so that one on each path is one bug on both.
fn same_kind(a: &ViolationOut, b: &ViolationOut) -> bool {
    let head = |m: &str| m.split([' ', ':']).take(2).collect::<Vec<_>>().join(" ");
    a.invariant == b.invariant && head(&a.message) == head(&b.message)
}

/// Numbers and quoted parts of a message replaced, so that messages of one cause compare
/// equal (`byte index 7 is not a char boundary` → `byte index N is not a char boundary`).
pub fn normalise(msg: &str) -> String {
    let mut out = String::new();
    let mut in_digits = false;
    for ch in msg.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(ch);
        }
    }
    // Quoted excerpts (`'日本'`, `"…"`) say which input, not which bug.
    let mut res = String::new();
    let mut quote: Option<char> = None;
    for ch in out.chars() {
        match quote {
            Some(q) if ch == q => {
                quote = None;
                res.push(ch);
            }
            Some(_) => {}
            None if ch == '"' || ch == '\'' || ch == '`' => {
                quote = Some(ch);
                res.push(ch);
                res.push('…');
            }
            None => res.push(ch),
        }
    }
    // A parenthesised list (`call N (get_weather)`, `(bytes N..N)`) says which case, not
    // which bug.
    let mut flat = String::new();
    let mut depth = 0usize;
    for ch in res.chars() {
        match ch {
            '(' => {
                if depth == 0 {
                    flat.push_str("(…)");
                }
                depth += 1;
            }
            ')' if depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            _ => flat.push(ch),
        }
    }
    flat.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn detail(c: &CaseOut, class: BugClass, by: Option<&ViolationOut>, ctx: &CaseContext) -> String {
    let Some(v) = by else {
        return crash_detail(c);
    };
    let turn = turn_of(&v.message);
    let got = v.got.get(turn);
    let tc = ctx.turns.get(turn);
    let want_text = tc.and_then(|t| t.expected_text.as_deref());
    match class {
        BugClass::Crash => {
            let msg = v.message.split_once(": ").map_or(&v.message[..], |x| x.1);
            format!("panics: {}", panic_text(msg))
        }
        BugClass::MarkupLeaked => {
            let text = got.map_or(&v.message[..], |g| g.text.as_str());
            let m = ctx
                .markers
                .iter()
                .filter(|m| !m.is_empty() && text.contains(m.as_str()))
                .min_by_key(|m| text.find(m.as_str()))
                .cloned()
                .unwrap_or_else(|| "markup".into());
            format!("`{m}` left in the text")
        }
        BugClass::CallLost => match got {
            Some(g) if g.calls.is_empty() => "every call dropped".into(),
            Some(_) => "a call dropped".into(),
            None => "call dropped".into(),
        },
        BugClass::ArgumentsWrong => arguments_detail(v, got, ctx),
        BugClass::TextLost => match (got, want_text) {
            (Some(g), Some(w)) => text_loss(&g.text, w),
            // No expected text (an `i_` case): the paths disagree, and neither is the norm.
            (Some(g), None) if v.invariant == Invariant::StreamBatchParity => {
                if !g.calls.is_empty() && !strip(&v.message).contains("whole gives \"\" here") {
                    "streaming reads calls where stream=false returns text".into()
                } else {
                    "the text differs between streaming and stream=false".into()
                }
            }
            (Some(g), None) if g.text.is_empty() => "text dropped".into(),
            _ => "text lost".into(),
        },
        BugClass::ErrorVerdict => {
            let msg = strip(&v.message);
            if msg.starts_with("must parse without error") {
                // The adapter's client assembly: streamed arguments that are not an object.
                if msg.contains("invalid_json") || msg.contains("empty_arguments") {
                    "streamed arguments are not a JSON object".into()
                } else {
                    format!("error on valid input: {}", normalise(first_clause(msg)))
                }
            } else if matches!(
                v.invariant,
                Invariant::SplitInvariance | Invariant::StreamBatchParity
            ) {
                "errors differ between the paths".into()
            } else {
                let calls = got.map_or(0, |g| g.calls.len());
                if calls > 0 {
                    "malformed input made into a call".into()
                } else {
                    "malformed input accepted without an error".into()
                }
            }
        }
        BugClass::Other => other_detail(v, got, ctx),
    }
}

/// The violation's turn (0 unless a session prefix says otherwise).
fn turn_of(msg: &str) -> usize {
    msg.strip_prefix("turn ")
        .and_then(|r| r.split_once(':'))
        .and_then(|(n, _)| n.parse::<usize>().ok())
        .map_or(0, |n| n.saturating_sub(1))
}

fn strip(msg: &str) -> &str {
    match msg.strip_prefix("turn ").and_then(|r| r.split_once(": ")) {
        Some((_, rest)) => rest,
        None => msg,
    }
}

fn first_clause(msg: &str) -> &str {
    msg.split([';', ':']).next().unwrap_or(msg)
}

fn crash_detail(c: &CaseOut) -> String {
    let note = c
        .notes
        .iter()
        .find(|n| n.starts_with(c.status.as_str()))
        .or(c.notes.first())
        .map_or("", String::as_str);
    let what = match c.status {
        CaseStatus::Timeout => return "hangs (no answer in time)".into(),
        CaseStatus::ProtocolError => "breaks the protocol",
        _ => "crashes",
    };
    let reason = note.split("; replay:").next().unwrap_or(note);
    let reason = reason.split_once(": ").map_or(reason, |x| x.1);
    if reason.contains("panicked") || reason.contains("panic") {
        format!("panics: {}", panic_text(reason))
    } else {
        format!("{what}: {}", normalise(&cut_chars(reason, 120)))
    }
}

/// The part of a panic message that names the cause (after "panicked at FILE:LINE:").
fn panic_text(msg: &str) -> String {
    let tail = msg
        .rsplit_once(".rs:")
        .map(|(_, t)| t.trim_start_matches(|c: char| c.is_ascii_digit() || c == ':' || c == ' '))
        .unwrap_or(msg);
    let tail = tail.split(" of `").next().unwrap_or(tail);
    normalise(&cut_chars(tail, 100))
}

fn cut_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// How the text lost part of itself: one character removed everywhere, cut short, dropped.
fn text_loss(got: &str, want: &str) -> String {
    if got.is_empty() {
        return "text dropped".into();
    }
    if want.starts_with(got) {
        return "text cut short".into();
    }
    if want.ends_with(got) {
        return "the start of the text dropped".into();
    }
    // Every occurrence of one character removed (SGLang's `]`).
    let mut removed: Vec<char> = want.chars().filter(|c| !got.contains(*c)).collect();
    removed.sort_unstable();
    removed.dedup();
    if let [c] = removed[..]
        && want.chars().filter(|x| *x != c).eq(got.chars())
    {
        return format!("every `{c}` removed from the text");
    }
    "part of the text dropped".into()
}

/// The expected arguments of call `i` of the turn, as JSON.
fn expected_args(ctx: &CaseContext, turn: usize, i: usize) -> Option<serde_json::Value> {
    ctx.turns
        .get(turn)?
        .expected_calls
        .as_ref()?
        .get(i)
        .map(|c| c.arguments.clone())
}

fn arguments_detail(v: &ViolationOut, got: Option<&Got>, ctx: &CaseContext) -> String {
    let msg = strip(&v.message);
    let index = msg
        .strip_prefix("call ")
        .and_then(|r| r.split([' ', ':']).next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    // The check stops at its first failing row: the row names the bug.
    if v.invariant == Invariant::TypeInference
        && let Some(rule) = msg
            .strip_prefix("rule ")
            .and_then(|r| r.split_once(':'))
            .map(|(rule, _)| rule)
    {
        return format!("a value not typed as the typing table says (rule `{rule}`)");
    }
    if matches!(
        v.invariant,
        Invariant::TypeInference | Invariant::CdataSplit
    ) {
        return format!("{} broken", v.invariant.as_str());
    }
    let Some(g) = got.and_then(|g| g.calls.get(index)) else {
        return "arguments differ".into();
    };
    let Some(want) = expected_args(ctx, turn_of(&v.message), index) else {
        return "arguments differ from the whole input's".into();
    };
    let got_v: serde_json::Value = match serde_json::from_str(&g.arguments) {
        Ok(x) => x,
        Err(_) => return "arguments are not JSON".into(),
    };
    // A string value that ends with the format's markup (or holds it).
    if let (Some(go), Some(wo)) = (got_v.as_object(), want.as_object()) {
        for (k, wv) in wo {
            match (go.get(k), wv) {
                (Some(serde_json::Value::String(gs)), serde_json::Value::String(ws))
                    if gs != ws && gs.starts_with(ws.as_str()) =>
                {
                    let extra = &gs[ws.len()..];
                    return match ctx
                        .markers
                        .iter()
                        .find(|m| !m.is_empty() && extra.contains(m.as_str()))
                    {
                        Some(m) => format!("a string argument ends with markup (`{m}`)"),
                        None => "a string argument has text appended".into(),
                    };
                }
                (Some(gv), wv) if gv != wv && json_kind(gv) != json_kind(wv) => {
                    return "an argument's JSON type differs from the schema's".into();
                }
                (None, _) => return "an argument key lost".into(),
                _ => {}
            }
        }
        if go.len() > wo.len() {
            return "an argument key added".into();
        }
    }
    if let Some(gs) = got_v.as_str() {
        return string_arguments(gs, &want);
    }
    let text = g.arguments.as_str();
    if let Some(m) = ctx
        .markers
        .iter()
        .find(|m| !m.is_empty() && text.contains(m.as_str()))
    {
        return format!("arguments hold markup (`{m}`)");
    }
    "argument values differ".into()
}

/// What arguments that came back as a string are: the expected object encoded twice, text
/// that only looks like an object (streamed fragments that never made valid JSON: the reason
/// says why, e.g. a number JSON cannot carry), or a string in place of an object.
fn string_arguments(gs: &str, want: &serde_json::Value) -> String {
    match serde_json::from_str::<serde_json::Value>(gs) {
        Ok(v) if &v == want => "arguments double-encoded as a JSON string".into(),
        Ok(_) => "arguments are a string".into(),
        Err(e) if gs.trim_start().starts_with('{') => {
            if e.to_string().starts_with("number out of range") {
                "arguments hold a number beyond JSON's range (not valid JSON)".into()
            } else if e.is_eof() {
                "arguments are truncated JSON".into()
            } else {
                "arguments are not valid JSON".into()
            }
        }
        Err(_) => "arguments are a string".into(),
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

fn other_detail(v: &ViolationOut, got: Option<&Got>, ctx: &CaseContext) -> String {
    let msg = strip(&v.message);
    match v.invariant {
        Invariant::DeltaContract => {
            return format!("delta contract: {}", normalise(first_clause(msg)));
        }
        Invariant::Deterministic => return "two replays of one input differ".into(),
        Invariant::Roundtrip => {
            return format!(
                "its own rendering does not parse back: {}",
                normalise(first_clause(msg))
            );
        }
        _ => {}
    }
    if msg.contains(" call(s) parsed (") || msg.contains(" call(s) (") {
        // Input that must be rejected, dispatched all the same.
        if ctx.label == Some(super::corpus::Label::Reject) {
            return "a malformed call dispatched".into();
        }
        return "an extra call".into();
    }
    if msg.starts_with("call ") {
        if let Some(g) = got
            && let Some(c) = g.calls.iter().find(|c| {
                ctx.markers
                    .iter()
                    .any(|m| !m.is_empty() && c.name.contains(m.as_str()))
            })
        {
            let m = ctx
                .markers
                .iter()
                .find(|m| !m.is_empty() && c.name.contains(m.as_str()))
                .cloned()
                .unwrap_or_default();
            return format!("a call named with markup (`{m}`)");
        }
        return "a call's name differs".into();
    }
    if msg.starts_with("text") {
        return "extra text".into();
    }
    if msg.starts_with("reasoning") {
        return "reasoning differs".into();
    }
    normalise(first_clause(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_normalised_to_their_cause() {
        assert_eq!(
            normalise("byte index 7 is not a char boundary; it is inside '日' (bytes 6..9)"),
            "byte index N is not a char boundary; it is inside '…' (…)"
        );
        assert_eq!(
            panic_text(
                "the engine panicked: panicked at src/pythonic.rs:120:31: byte index 11 is not a char boundary; it is inside '本' (bytes 10..13) of `[search(q='日本')]`"
            ),
            "byte index N is not a char boundary; it is inside '…' (…)"
        );
    }

    #[test]
    fn text_losses_are_told_apart() {
        assert_eq!(
            text_loss("[a, [b", "[a], [b]"),
            "every `]` removed from the text"
        );
        assert_eq!(text_loss("", "x"), "text dropped");
        assert_eq!(text_loss("ab", "abc"), "text cut short");
        assert_eq!(text_loss("bc", "abc"), "the start of the text dropped");
    }

    #[test]
    fn a_parity_failure_without_an_expected_text_blames_neither_path() {
        let case: CaseOut = serde_json::from_value(serde_json::json!({
            "id": "corpus/llama3_json/i_newline_separated_calls.txt", "format": "llama3_json",
            "label": "i", "status": "fail", "digest": "", "replays": 2, "error_free": 2,
            "matched": 1, "violations": [], "notes": []
        }))
        .unwrap();
        let v = |msg: &str, calls: usize| ViolationOut {
            invariant: Invariant::StreamBatchParity,
            strategy: None,
            cuts: vec![],
            failing_replays: 1,
            message: msg.into(),
            replay: String::new(),
            cut_class: None,
            path: Some(ReplayPath::Stream),
            got: vec![Got {
                calls: (0..calls)
                    .map(|_| super::super::serving::GotCall {
                        name: "f".into(),
                        id: None,
                        arguments: "{}".into(),
                    })
                    .collect(),
                ..Got::default()
            }],
        };
        let ctx = CaseContext::of_format("llama3_json");
        let title = |v: &ViolationOut| detail(&case, BugClass::TextLost, Some(v), &ctx);
        let calls = v(
            r#"text differs from byte 0: whole gives "{\"name\"…" here, this chunking """#,
            2,
        );
        assert_eq!(
            title(&calls),
            "streaming reads calls where stream=false returns text"
        );
        let text = v(
            r#"text differs from byte 0: whole gives "a;" here, this chunking ";""#,
            0,
        );
        assert_eq!(
            title(&text),
            "the text differs between streaming and stream=false"
        );
    }

    #[test]
    fn string_arguments_say_what_the_string_is() {
        let want = serde_json::json!({"n": "1e400", "a": 1});
        assert_eq!(
            string_arguments(r#"{"a":1,"n":"1e400"}"#, &want),
            "arguments double-encoded as a JSON string"
        );
        // A bare 1e400 is the only flaw: the title must not claim a string was sent.
        assert_eq!(
            string_arguments(r#"{"a":1,"n":1e400}"#, &want),
            "arguments hold a number beyond JSON's range (not valid JSON)"
        );
        assert_eq!(
            string_arguments(r#"{"a":1,"n":"#, &want),
            "arguments are truncated JSON"
        );
        assert_eq!(
            string_arguments(r#"{"a":1}</tool_call>"#, &want),
            "arguments are not valid JSON"
        );
        assert_eq!(string_arguments("Paris", &want), "arguments are a string");
    }
}
