//! What went wrong in a failing case, in words an engine's maintainer files bugs with
//! (`specs/engines.md` §3): each failing case of a report is put in one class, derived from
//! its status and its violations' invariants and messages, checked against the case's
//! expectation and conform's own reading of the transcript where the message alone is not
//! enough. Where conform's rule is a choice engines legitimately make differently (ids, text
//! after the calls, warnings, error names), the case is marked `policy`, apart from bugs.

use super::corpus::{Case, Label};
use super::invariants::Invariant;
use super::report::{CaseOut, CaseStatus, ViolationOut};
use super::serving::{Got, GotCall};
use crate::event::{ErrorKind, Event, ToolCall, WarningKind, excerpt};
use crate::formats;
use crate::formats::request::ToolChoice;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

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
    /// The engine has no error channel: an input that must be rejected gives the right calls
    /// and text and no error.
    Errors,
    /// The engine (this variant) does not split reasoning: the think block stays in the text.
    Reasoning,
    /// Calls to tools the request does not declare are dropped (their markup left as text).
    UndeclaredTools,
    /// The engine ends every started call with the stream: a call the expectation leaves
    /// unterminated is closed and kept.
    CallEnd,
    /// The text differs only in whitespace.
    Whitespace,
    /// The expected text holds the turn's stop token, which the server consumes.
    StopToken,
    /// A deviation conform's parser recovers with a warning (an accepted case whose
    /// expectation names warnings) that the engine does not recover: it returns the input
    /// verbatim as text, or the expected calls with text of the deviating part dropped.
    Leniency,
    /// The engine does not type values by the tool's schema: a number, boolean or null the
    /// schema types (and the wire leaves untyped) comes back as the string the model wrote.
    Typing,
    /// The input crosses one of conform's limits (nesting depth, key length…), which are
    /// conform's configuration, not the format's: an engine that reads it is not wrong.
    /// Always applied, as warnings are.
    Limits,
    /// The engine's reasoning parser for the format starts inside reasoning whatever the
    /// request says (vLLM's MiniMax-M2 parser: the model always thinks, its template opens the
    /// block in the prompt): a transcript without a close tag, which such a model never writes,
    /// is read as reasoning whole. Declared per format (`thinks_always@FORMAT`).
    ThinksAlways,
    /// The server constrains a `required` or named tool choice's output to the payload's
    /// grammar (structured outputs): an output the grammar forbids (prose, invalid JSON,
    /// text after the payload) never reaches its parser, so what the parser makes of one is
    /// not judged. A payload cut by the end of the output is still judged.
    Guided,
    /// The adapter does not serve the case's tool choice (`required`, a named tool or `none`):
    /// it drives every request as `auto`, so the case was not run as its server would run it
    /// and nothing it returned is judged. Also, whatever the engine declares, a format check
    /// of an external parser that names no serving path: conform before 2026-11-27 fed it
    /// every byte, splitting special tokens no server splits.
    Unserved,
    /// The server constrains a forced call (`required`, a named tool) to the format's own
    /// markup (SGLang's structural tags, for a detector that owns its format), so a case whose
    /// output is the JSON payload of another server's schema never reaches this parser.
    GuidedNative,
    /// Always applied: a server's detokenizer decodes the model's bytes with replacement, so
    /// its parser never sees invalid UTF-8; what an engine makes of the U+FFFD it is handed
    /// instead is not judged against an expectation of the raw bytes.
    Decoded,
    /// Always applied: the case's expectation is conform's reading under format options its
    /// folder's `conform.toml` sets (a strict leniency, another model's channel policy, a
    /// typing mode) that no request carries, and adapters are not sent options; what holds
    /// under any reading (stream/batch parity, the delta contract, bounds) is still judged.
    Options,
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
            PolicyKind::Errors => "errors",
            PolicyKind::Reasoning => "reasoning",
            PolicyKind::UndeclaredTools => "undeclared_tools",
            PolicyKind::CallEnd => "call_end",
            PolicyKind::Whitespace => "whitespace",
            PolicyKind::StopToken => "stop_token",
            PolicyKind::Leniency => "leniency",
            PolicyKind::Typing => "typing",
            PolicyKind::Limits => "limits",
            PolicyKind::Guided => "guided",
            PolicyKind::ThinksAlways => "thinks_always",
            PolicyKind::Unserved => "unserved",
            PolicyKind::GuidedNative => "guided_native",
            PolicyKind::Decoded => "decoded",
            PolicyKind::Options => "options",
        }
    }

    /// The policy an engine.json `policy` key declares (`end_of_call` and `incomplete_calls`
    /// are older names of `call_end`); `None` for a key that is only a note.
    pub fn from_key(key: &str) -> Option<PolicyKind> {
        Some(match key {
            "ids" => PolicyKind::Ids,
            "text_after_calls" => PolicyKind::TextAfterCalls,
            "errors" => PolicyKind::Errors,
            "reasoning" => PolicyKind::Reasoning,
            "undeclared_tools" => PolicyKind::UndeclaredTools,
            "call_end" | "end_of_call" | "incomplete_calls" => PolicyKind::CallEnd,
            "whitespace" => PolicyKind::Whitespace,
            "stop_token" => PolicyKind::StopToken,
            "leniency" => PolicyKind::Leniency,
            "typing" => PolicyKind::Typing,
            "guided" => PolicyKind::Guided,
            "unserved" => PolicyKind::Unserved,
            "guided_native" => PolicyKind::GuidedNative,
            "thinks_always" => PolicyKind::ThinksAlways,
            _ => return None,
        })
    }

    /// What conform applies when no engine declares its policies: the rules every engine
    /// settles its own way (ids, text after the calls) and what `--compare` leaves out.
    pub fn defaults() -> BTreeSet<PolicyKind> {
        [
            PolicyKind::Ids,
            PolicyKind::TextAfterCalls,
            PolicyKind::Warnings,
            PolicyKind::ErrorKinds,
        ]
        .into()
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaseContext {
    /// The format's delimiters (the markup-leak check's list).
    pub markers: Vec<String>,
    /// One entry per turn.
    pub turns: Vec<TurnContext>,
    /// The policies the engine declares (`None`: [`PolicyKind::defaults`]); warnings and
    /// error kinds are always policies.
    pub policies: Option<BTreeSet<PolicyKind>>,
    /// The case's label.
    pub label: Option<Label>,
    /// Every pair of reasoning tags the format reads, open and close (kimi_k2's `<think>`
    /// and Kimi-VL's `◁think▷`; kimi_k3's `think` channel); empty without a wrapper.
    pub reasoning_pairs: Vec<(String, String)>,
    /// The token ending a reasoning tag that an engine may consume with it (kimi_k3's
    /// `<|sep|>` after `<|close|>think`), when the format has one.
    pub reasoning_sep: Option<String>,
    /// The format's stop tokens (consumed by a server before its parser).
    pub stop_tokens: Vec<String>,
    /// The names of the tools the case declares.
    pub tools: Vec<String>,
    /// Each declared tool's parameters schema, by name.
    pub schemas: BTreeMap<String, serde_json::Value>,
    /// The case's size in bytes (all turns): the smallest case of a bug shows it.
    pub bytes: usize,
    /// The first turn's transcript (invalid UTF-8 replaced), for a bug report.
    pub transcript: String,
    /// The first turn's expectation as JSON text, for a bug report.
    pub expected: Option<String>,
    /// The request's tool choice, when the case sets one.
    pub tool_choice: Option<ToolChoice>,
    /// Whether the case sets where reasoning starts by a format option
    /// (`*.reasoning.starts_inside`) that no request mode expresses (Kimi K3's raw transcripts,
    /// which carry their own message and channel openers): no server hands its parser such an
    /// output, since its template always opens a channel in the prompt. A start a request can
    /// say is the case's `starting_state`, which adapters are sent.
    pub start_by_option: bool,
    /// Whether the case is read under format options (`[options]` of a `conform.toml`) at all.
    pub by_option: bool,
    /// Whether some replay of the case matched its expectation (set per failing case): an
    /// engine that reads the input right delivered one way and not another has a chunking
    /// bug, not a reading of its own.
    pub matched_somewhere: bool,
}

/// One turn's context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnContext {
    /// The expectation's text, if it has one.
    pub expected_text: Option<String>,
    /// The text conform's parser emits after the turn's last call ends (empty without calls).
    pub text_after_calls: String,
    /// The text conform's parser emits after the turn's first call starts: text between call
    /// blocks and after them (empty without calls). An engine that keeps only the text before
    /// its first call block drops all of it.
    pub text_from_first_call: String,
    /// The expectation's calls, if it states them.
    pub expected_calls: Option<Vec<ToolCall>>,
    /// The error kind the expectation names, if any.
    pub expected_error: Option<String>,
    /// Whether the expectation names warnings, or conform's parser warns on the turn: conform
    /// reads it only by recovering a deviation from the format.
    pub deviation: bool,
    /// The turn's transcript as a server hands it to its parser (up to its stop token;
    /// invalid UTF-8 replaced).
    pub served: String,
    /// Whether the turn's bytes are not valid UTF-8 (a server decodes them with replacement).
    pub invalid_utf8: bool,
    /// The expectation's reasoning, if it states one.
    pub expected_reasoning: Option<String>,
    /// The text conform's parser reads from the turn (under the case's options and request):
    /// what a case without an expectation (a recorded transcript) is compared on.
    pub conform_text: String,
    /// Whether conform's parser finds the turn ending inside a call (`unterminated`): the
    /// output was cut there, by `max_tokens` or otherwise.
    pub ends_inside_call: bool,
    /// The parameters conform's parser finds given twice in one call (its
    /// `duplicate_parameter` warnings): engines settle which value counts their own way.
    pub duplicated_keys: Vec<String>,
    /// The parameters conform's parser finds written without the `string` attribute their
    /// format's template always writes (its `missing_string_attribute` warnings): conform
    /// types them by the schema, engines read them as JSON, else as the text (the DSML fact
    /// sheets), and neither reading is the format's.
    pub attributeless_keys: Vec<String>,
    /// For a turn where conform finds call markup inside reasoning (`call_in_reasoning`): the
    /// calls and text conform's parser reads with `reasoning.implicit_reasoning_end` on, the
    /// reading of an engine that ends reasoning at a call's markup.
    pub drafted: Option<Drafted>,
}

/// A turn read with a call's markup ending reasoning ([`TurnContext::drafted`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drafted {
    /// The calls, those drafted inside reasoning among them.
    pub calls: Vec<ToolCall>,
    /// The text.
    pub text: String,
}

impl TurnContext {
    /// The text the turn should give: the expectation's, else conform's reading (an
    /// expectation that leaves the text unstated, a recorded transcript).
    fn want_text(&self) -> &str {
        self.expected_text.as_deref().unwrap_or(&self.conform_text)
    }
}

impl CaseContext {
    /// The context of a loaded case (its format's markers and conform's reading of it).
    pub fn of(case: &Case) -> CaseContext {
        let Some(format) = formats::by_id(case.format) else {
            return CaseContext::default();
        };
        // conform's reading as the case is judged: under its options and request modes.
        let mut parser = formats::modes::parser(format, &case.tools, &case.options, &case.request)
            .unwrap_or_else(|_| (format.new_parser)(&case.tools));
        let turns = case
            .turns
            .iter()
            .enumerate()
            .map(|(t, data)| {
                let mut events = formats::run_chunks(parser.as_mut(), [data.as_slice()]);
                parser.finish(&mut events);
                let expect = case.expects.get(t).and_then(Option::as_ref);
                let drafted = events
                    .iter()
                    .any(|e| {
                        matches!(e, Event::Warning { kind, .. }
                            if kind == WarningKind::CallInReasoning.as_str())
                    })
                    .then(|| drafted_reading(case, format, data))
                    .flatten();
                TurnContext {
                    drafted,
                    expected_text: expect.and_then(|e| e.text.clone()),
                    text_after_calls: text_after_last_call(&events),
                    text_from_first_call: text_from_first_call(&events),
                    expected_calls: expect.and_then(|e| e.calls.clone()),
                    expected_error: expect.and_then(|e| match &e.error {
                        Some(Some(k)) => Some(k.kind.as_str().to_string()),
                        _ => e
                            .errors
                            .as_ref()
                            .and_then(|v| v.first())
                            .map(|k| k.as_str().to_string()),
                    }),
                    // An expectation may leave warnings unstated (a typing case of a format
                    // whose template always writes the attribute the case leaves out): conform's
                    // own warnings say it recovered a deviation all the same.
                    deviation: expect
                        .is_some_and(|e| e.warnings.as_ref().is_some_and(|w| !w.is_empty()))
                        || events.iter().any(|e| matches!(e, Event::Warning { .. })),
                    served: served_text(data, format.stop_tokens),
                    invalid_utf8: std::str::from_utf8(data).is_err(),
                    expected_reasoning: expect.and_then(|e| e.reasoning.clone()),
                    conform_text: text_of(&events),
                    ends_inside_call: events.iter().any(|e| {
                        matches!(
                            e,
                            Event::Error {
                                kind: ErrorKind::Unterminated,
                                ..
                            }
                        )
                    }),
                    duplicated_keys: warned_keys(&events, WarningKind::DuplicateParameter),
                    attributeless_keys: warned_keys(&events, WarningKind::MissingStringAttribute),
                }
            })
            .collect();
        CaseContext {
            markers: (format.markers)(&case.tools),
            turns,
            policies: None,
            label: Some(case.label),
            reasoning_pairs: match (format.reasoning, format.channel_reasoning) {
                (Some(r), _) => r
                    .pairs
                    .iter()
                    .map(|(o, c)| (o.to_string(), c.to_string()))
                    .collect(),
                (None, Some((open, close, _))) => vec![(open.to_string(), close.to_string())],
                (None, None) => Vec::new(),
            },
            reasoning_sep: format.channel_reasoning.map(|(_, _, sep)| sep.to_string()),
            stop_tokens: format.stop_tokens.iter().map(|t| t.to_string()).collect(),
            tools: case.tools.defs.iter().map(|d| d.name.clone()).collect(),
            schemas: case
                .tools
                .defs
                .iter()
                .map(|d| (d.name.clone(), d.parameters.clone()))
                .collect(),
            bytes: case.len(),
            transcript: case
                .turns
                .first()
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .unwrap_or_default(),
            expected: case
                .expects
                .first()
                .and_then(Option::as_ref)
                .map(expectation_json),
            tool_choice: case.request.tool_choice.clone(),
            start_by_option: case
                .options
                .keys()
                .any(|k| k.ends_with("reasoning.starts_inside"))
                && case.request.starting_state.is_none()
                && case.request.thinking.is_none(),
            by_option: !case.options.is_empty(),
            matched_somewhere: false,
        }
    }

    /// Whether the request's tool choice is `required` or a named tool: a server constrains
    /// the output to a JSON payload (guided decoding).
    pub fn guided(&self) -> bool {
        matches!(
            self.tool_choice,
            Some(ToolChoice::Required | ToolChoice::Named(_))
        )
    }

    /// `text` without its reasoning blocks (an unclosed one to the end, and everything before
    /// a close tag whose open tag the prompt held), when the format has a reasoning wrapper.
    pub fn unreasoned(&self, text: &str) -> Option<String> {
        let pairs = self.pairs();
        if pairs.is_empty() {
            return None;
        }
        // An engine may consume the separator with the tag: either way it is the tag's.
        let sep = self.reasoning_sep.as_deref().unwrap_or_default();
        Some(pairs.iter().fold(text.to_string(), |t, (o, c)| {
            without_reasoning(&t, o, c, sep)
        }))
    }

    /// The reasoning tag pairs, none empty.
    fn pairs(&self) -> Vec<(&str, &str)> {
        self.reasoning_pairs
            .iter()
            .filter(|(o, c)| !o.is_empty() && !c.is_empty())
            .map(|(o, c)| (o.as_str(), c.as_str()))
            .collect()
    }

    /// Where `text` first closes reasoning (any of the wrapper's close tags).
    fn first_close(&self, text: &str) -> Option<usize> {
        self.pairs().iter().filter_map(|(_, c)| text.find(c)).min()
    }

    /// Whether `text` shows one of the reasoning wrapper's tags.
    fn shows_reasoning_tag(&self, text: &str) -> bool {
        self.pairs()
            .iter()
            .any(|(o, c)| text.contains(o) || text.contains(c))
    }

    /// Whether the engine declares `p` (or, without declarations, whether it is a default).
    pub fn has(&self, p: PolicyKind) -> bool {
        matches!(
            p,
            PolicyKind::Warnings
                | PolicyKind::ErrorKinds
                | PolicyKind::Limits
                | PolicyKind::Decoded
                | PolicyKind::Options
        ) || self
            .policies
            .as_ref()
            .map_or_else(|| PolicyKind::defaults().contains(&p), |s| s.contains(&p))
    }

    /// The context of a case known only by its format (no expectation, no transcript).
    pub fn of_format(format: &str) -> CaseContext {
        CaseContext {
            markers: formats::by_id(format)
                .map(|f| (f.markers)(&crate::tools::Tools::default()))
                .unwrap_or_default(),
            ..CaseContext::default()
        }
    }
}

/// A transcript as a server hands it to its parser: up to its first stop token.
/// A turn read as an engine that ends reasoning at a call's markup reads it: conform's parser
/// with `reasoning.implicit_reasoning_end` on (`None` where the format has no such option).
fn drafted_reading(case: &Case, format: &formats::Format, data: &[u8]) -> Option<Drafted> {
    let mut options = case.options.as_ref().clone();
    options.insert("reasoning.implicit_reasoning_end".into(), true);
    let mut p = formats::modes::parser(format, &case.tools, &options, &case.request).ok()?;
    let mut events = formats::run_chunks(p.as_mut(), [data]);
    p.finish(&mut events);
    let r = crate::event::ParseResult::fold(&events);
    Some(Drafted {
        calls: r.calls,
        text: r.text,
    })
}

fn served_text(data: &[u8], stop_tokens: &[&str]) -> String {
    let text = String::from_utf8_lossy(data);
    let end = stop_tokens
        .iter()
        .filter(|t| !t.is_empty())
        .filter_map(|t| text.find(*t))
        .min()
        .unwrap_or(text.len());
    text[..end].to_string()
}

/// An expectation as a bug report shows it: text, calls and error, as JSON.
fn expectation_json(e: &super::corpus::Expectation) -> String {
    let mut v = serde_json::Map::new();
    if let Some(t) = &e.text {
        v.insert("text".into(), t.clone().into());
    }
    if let Some(r) = &e.reasoning {
        v.insert("reasoning".into(), r.clone().into());
    }
    if let Some(c) = &e.calls {
        v.insert("calls".into(), serde_json::to_value(c).unwrap_or_default());
    }
    match &e.error {
        Some(Some(k)) => {
            v.insert("error".into(), k.kind.as_str().into());
        }
        Some(None) => {
            v.insert("error".into(), serde_json::Value::Null);
        }
        None => {}
    }
    serde_json::Value::Object(v).to_string()
}

/// The text events after the last `call_end`, concatenated (empty when no call ends).
fn text_after_last_call(events: &[Event]) -> String {
    let Some(last) = events
        .iter()
        .rposition(|e| matches!(e, Event::CallEnd { .. }))
    else {
        return String::new();
    };
    text_of(&events[last + 1..])
}

fn text_from_first_call(events: &[Event]) -> String {
    let Some(first) = events
        .iter()
        .position(|e| matches!(e, Event::CallStart { .. }))
    else {
        return String::new();
    };
    text_of(&events[first..])
}

fn text_of(events: &[Event]) -> String {
    events
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
    let with_matches;
    let ctx = if case.matched > 0 && !ctx.matched_somewhere {
        with_matches = CaseContext {
            matched_somewhere: true,
            ..ctx.clone()
        };
        &with_matches
    } else {
        ctx
    };
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
    if let Some(p) = declared_policy(v, ctx, &tc, v.got.get(turn)) {
        return CaseClass::Policy(p);
    }
    match v.invariant {
        Invariant::NoMarkupLeak => bug(B::MarkupLeaked),
        Invariant::Bounded if msg.contains("panicked") => bug(B::Crash),
        Invariant::CdataSplit | Invariant::TypeInference => bug(B::ArgumentsWrong),
        Invariant::Expectation => expectation_class(msg, &tc, ctx),
        // A streaming replay against the non-streaming result: the same difference, by path.
        Invariant::SplitInvariance | Invariant::StreamBatchParity => split_class(msg, &ctx.markers),
        Invariant::Roundtrip => roundtrip_class(msg, ctx),
        Invariant::DeltaContract
        | Invariant::Deterministic
        | Invariant::Bounded
        | Invariant::StreamIsolation => bug(B::Other),
    }
}

/// The policy an engine declared that explains a violation, judged on what the replay
/// returned (`got`) against the case's expectation; `None` for a bug. A policy never hides
/// markup in a call's name or id, nor a call made from rejected input whose arguments are
/// not a JSON object or hold markup.
fn declared_policy(
    v: &ViolationOut,
    ctx: &CaseContext,
    tc: &TurnContext,
    got: Option<&Got>,
) -> Option<PolicyKind> {
    // A format check an external parser was fed byte by byte (a report of an older conform).
    if matches!(
        v.invariant,
        Invariant::TypeInference | Invariant::CdataSplit
    ) && v.path.is_none()
        && (v.replay.contains("--parser cmd:") || v.replay.contains("--parser 'cmd:"))
    {
        return Some(PolicyKind::Unserved);
    }
    // A request the adapter did not serve: nothing to judge.
    if ctx.has(PolicyKind::Unserved)
        && ctx
            .tool_choice
            .as_ref()
            .is_some_and(|t| *t != ToolChoice::Auto)
    {
        return Some(PolicyKind::Unserved);
    }
    // conform's limits are its configuration: reading past them is not an engine's bug.
    if v.invariant == Invariant::Expectation
        && tc.expected_error.as_deref() == Some("limit_exceeded")
    {
        return Some(PolicyKind::Limits);
    }
    let reject = ctx.label == Some(Label::Reject);
    // An output a guided request's grammar forbids: rejected, or read only by recovering a
    // deviation; a payload cut short (`unterminated`) is still judged.
    if ctx.guided()
        && ctx.has(PolicyKind::Guided)
        && (reject || tc.deviation || !schema_shaped(ctx, tc))
        && tc.expected_error.as_deref() != Some("unterminated")
    {
        return Some(PolicyKind::Guided);
    }
    // A forced call the server constrains to the format's own markup: a JSON-payload case is
    // an output this server never produces.
    if ctx.guided() && ctx.has(PolicyKind::GuidedNative) {
        return Some(PolicyKind::GuidedNative);
    }
    // A model that always thinks writes its close tag before any call: a transcript that
    // makes a call without closing reasoning first is no output of it, for an engine whose
    // parser starts inside reasoning (and did: it shows reasoning; a variant without a
    // reasoning parser is judged).
    if ctx.has(PolicyKind::ThinksAlways)
        && v.invariant == Invariant::Expectation
        && got
            .and_then(|g| g.reasoning.as_deref())
            .is_some_and(|r| !r.trim().is_empty())
    {
        let closes = ctx.first_close(&tc.served);
        let first_call = ctx
            .markers
            .iter()
            .filter(|m| !m.is_empty() && !ctx.pairs().iter().any(|(o, c)| m == o || m == c))
            .filter_map(|m| tc.served.find(m.as_str()))
            .min();
        if first_call.is_some_and(|f| closes.is_none_or(|c| c > f)) {
            return Some(PolicyKind::ThinksAlways);
        }
    }
    // Where reasoning starts, set by an option the request does not carry: the engine's
    // reasoning parser was not told of the prompt the output answers.
    if ctx.start_by_option
        && ctx.has(PolicyKind::Reasoning)
        && !matches!(v.invariant, Invariant::Bounded | Invariant::DeltaContract)
    {
        return Some(PolicyKind::Reasoning);
    }
    // A reading set by format options the engine was not sent: judged only on what holds
    // under any reading.
    if ctx.by_option
        && matches!(
            v.invariant,
            Invariant::Expectation
                | Invariant::Roundtrip
                | Invariant::NoMarkupLeak
                | Invariant::TypeInference
        )
    {
        return Some(PolicyKind::Options);
    }
    if v.invariant == Invariant::Roundtrip
        && ctx.has(PolicyKind::Reasoning)
        && roundtrip_reasoning(strip_turn(&v.message).1, ctx)
    {
        return Some(PolicyKind::Reasoning);
    }
    let got = got?;
    // A guided payload cut short (max_tokens): a server may return nothing it cannot read as
    // the payload (vLLM's `required` path drops content that does not validate), the finish
    // reason telling the client; a call made of the cut payload is still judged.
    if ctx.guided()
        && ctx.has(PolicyKind::Guided)
        && tc.expected_error.as_deref() == Some("unterminated")
        && v.invariant == Invariant::Expectation
        && got.calls.is_empty()
        && got.text.trim().is_empty()
    {
        return Some(PolicyKind::Guided);
    }
    // A call cut by max_tokens (or an output otherwise ending inside a call): a streaming
    // parser cannot take back the name or fragments it sent, and a non-streaming one may
    // return the output it cannot read as content; the finish reason tells the client.
    // Judged: the calls before the cut and the text before it.
    if ctx.has(PolicyKind::CallEnd)
        && (tc.expected_error.as_deref() == Some("unterminated")
            || (tc.expected_error.is_none() && tc.ends_inside_call))
        && matches!(
            v.invariant,
            Invariant::Expectation
                | Invariant::NoMarkupLeak
                | Invariant::StreamBatchParity
                | Invariant::DeltaContract
        )
        && cut_reading(ctx, tc, got)
    {
        return Some(PolicyKind::CallEnd);
    }
    // Bytes a server would have decoded with replacement: what the engine made of the U+FFFD
    // is its reading of other input, unless it made markup or a non-object into a call.
    if tc.invalid_utf8
        && v.invariant == Invariant::Expectation
        && got.calls.iter().all(|c| well_formed(c, &ctx.markers))
    {
        return Some(PolicyKind::Decoded);
    }
    // The whole output taken as reasoning by a reasoning parser whose template always opens
    // it in the prompt (Step-3's): an output with no think tag at all is one this deployment
    // never sees, since its model always thinks first.
    if ctx.has(PolicyKind::Reasoning)
        && !ctx.shows_reasoning_tag(&tc.served)
        && got.calls.is_empty()
        && got.text.trim().is_empty()
        && !tc.served.trim().is_empty()
        && got
            .reasoning
            .as_deref()
            .is_some_and(|r| same_words(r, &tc.served))
    {
        return Some(PolicyKind::Reasoning);
    }
    // A thinking model's guided output served by a variant without a reasoning parser: the
    // think block reaches the payload's validation and sinks it (vLLM returns nothing). The
    // deployment is wrong, not the parser; the reasoning variant judges the case.
    if ctx.guided()
        && ctx.has(PolicyKind::Reasoning)
        && ctx
            .pairs()
            .iter()
            .any(|(_, close)| tc.served.contains(close))
        && got.reasoning.as_deref().is_none_or(str::is_empty)
        && got.calls.iter().all(|c| !holds_marker(c, &ctx.markers))
    {
        return Some(PolicyKind::Reasoning);
    }
    let (_, msg) = strip_turn(&v.message);

    let undeclared = ctx.has(PolicyKind::UndeclaredTools) && drops_undeclared(ctx, tc, got);
    if ctx.has(PolicyKind::Leniency)
        && !ctx.matched_somewhere
        && matches!(
            v.invariant,
            Invariant::Expectation | Invariant::NoMarkupLeak
        )
        && unrecovered_deviation(ctx, tc, got)
    {
        return Some(PolicyKind::Leniency);
    }
    // A variant that does not split reasoning, on a turn with a think block: its stream and
    // batch readers may differ on the block's text, which its reasoning parser would have
    // taken out before either saw it.
    if ctx.has(PolicyKind::Reasoning)
        && matches!(
            v.invariant,
            Invariant::SplitInvariance | Invariant::StreamBatchParity
        )
        && msg.starts_with("text differs from byte ")
        && got.reasoning.as_deref().is_none_or(str::is_empty)
        && ctx.shows_reasoning_tag(&tc.served)
        && got.calls.iter().all(|c| well_formed(c, &ctx.markers))
        && ctx
            .unreasoned(&got.text)
            .is_some_and(|t| !markup_in(&t, &ctx.markers))
    {
        return Some(PolicyKind::Reasoning);
    }
    // A variant that does not split reasoning (its tags left in the text, none reported):
    // what its tool parser makes of a think block — a call drafted inside it made, text
    // beside it read another way — is its deployment's, whose reasoning parser would have
    // taken the block out first. A call made of markup stays a bug.
    if ctx.has(PolicyKind::Reasoning)
        && matches!(
            v.invariant,
            Invariant::Expectation | Invariant::NoMarkupLeak
        )
        && got.reasoning.as_deref().is_none_or(str::is_empty)
        && ctx.shows_reasoning_tag(&got.text)
        && ctx
            .unreasoned(&got.text)
            .is_some_and(|t| !markup_in(&t, &ctx.markers))
        && got.calls.iter().all(|c| well_formed(c, &ctx.markers))
    {
        return Some(PolicyKind::Reasoning);
    }
    // A call the model drafted inside reasoning, made: the engine ends reasoning at a call's
    // markup (vLLM's parser engine: "`<tool_call>` as implicit reasoning end"; conform's own
    // option `reasoning.implicit_reasoning_end`, native to DeepSeek-V4.1) or lifts the call
    // out of it. Its calls are exactly that reading's; its text is the expected one or what
    // that reading leaves of it in order (cut after the calls only under
    // `text_after_calls`), its reasoning what the expected reasoning keeps in order; no
    // markup or reasoning tag anywhere. A call made of markup stays a bug.
    if ctx.has(PolicyKind::Reasoning)
        && v.invariant == Invariant::Expectation
        && let Some(d) = &tc.drafted
        && !got.calls.is_empty()
        && got.calls.len() == d.calls.len()
        && got
            .calls
            .iter()
            .zip(&d.calls)
            .all(|(g, w)| exact_call(g, w))
        && !markup_in(&got.text, &ctx.markers)
        && !ctx.shows_reasoning_tag(&got.text)
        && (same_words(&got.text, tc.want_text())
            || same_words(&got.text, &d.text)
            || (ctx.has(PolicyKind::TextAfterCalls) && keeps_in_order(&d.text, &got.text)))
        && got.reasoning.as_deref().is_none_or(|r| {
            !markup_in(r, &ctx.markers)
                && !ctx.shows_reasoning_tag(r)
                && keeps_in_order(tc.expected_reasoning.as_deref().unwrap_or_default(), r)
        })
    {
        return Some(PolicyKind::Reasoning);
    }
    // No error channel: an input that must be rejected comes back verbatim as text, no call
    // made of it (harmony's n_plain_text_only: output without any header, shown as content).
    if reject
        && ctx.has(PolicyKind::Errors)
        && matches!(
            v.invariant,
            Invariant::Expectation | Invariant::NoMarkupLeak
        )
        && got.calls.is_empty()
        && got.errors.is_empty()
        && !tc.served.trim().is_empty()
        && same_words(&got.text, &tc.served)
    {
        return Some(PolicyKind::Errors);
    }
    // No error channel: the calls of an input that must be rejected partly or wholly dropped
    // (a payload that does not parse as a whole, read by none of its calls), nothing made
    // up and the text the expected one: the engine's reading of rejected input.
    if reject
        && ctx.has(PolicyKind::Errors)
        && v.invariant == Invariant::Expectation
        && calls_counts(msg, " call(s) parsed (", "but the expectation has ")
            .is_some_and(|(g, w)| g < w)
        && exact_subsequence(&got.calls, tc.expected_calls.as_deref().unwrap_or(&[]))
        && (same_words(&got.text, tc.want_text())
            || (!got.text.trim().is_empty()
                && unspaced(&got.text) == unspaced(&without_markers(&tc.served, &ctx.markers))))
    {
        return Some(PolicyKind::Errors);
    }
    // Names the model wrote with whitespace around them (a header or tag spaced out), kept
    // verbatim where conform trims them: the calls otherwise the expected ones.
    if ctx.has(PolicyKind::Whitespace)
        && v.invariant == Invariant::Expectation
        && msg.starts_with("call ")
        && let Some(want) = tc.expected_calls.as_deref()
        && got.calls.len() == want.len()
        && got.calls.iter().any(|g| g.name != g.name.trim())
        && got.calls.iter().zip(want).all(|(g, w)| {
            let trimmed = GotCall {
                name: g.name.trim().to_string(),
                ..g.clone()
            };
            exact_call(&trimmed, w)
        })
    {
        return Some(PolicyKind::Whitespace);
    }
    // Streaming and stream=false differing only in whitespace, the streamed text the expected
    // one but for it (the whole input is judged on its own).
    if ctx.has(PolicyKind::Whitespace)
        && matches!(
            v.invariant,
            Invariant::StreamBatchParity | Invariant::SplitInvariance
        )
        && msg.starts_with("text differs")
        && same_words(&got.text, tc.want_text())
    {
        return Some(PolicyKind::Whitespace);
    }
    match v.invariant {
        Invariant::Expectation if msg.starts_with("text is ") => {
            let want = tc.expected_text.as_deref()?;
            let got_text = got.text.as_str();
            if ctx.has(PolicyKind::StopToken) {
                let cut = ctx
                    .stop_tokens
                    .iter()
                    .filter_map(|t| want.find(t.as_str()))
                    .min();
                if let Some(k) = cut
                    && same_words(got_text, &want[..k])
                {
                    return Some(PolicyKind::StopToken);
                }
            }
            if thinks_always_reading(ctx, tc, got, want) {
                return Some(PolicyKind::ThinksAlways);
            }
            if ctx.has(PolicyKind::Reasoning)
                && ctx.shows_reasoning_tag(got_text)
                && ctx
                    .unreasoned(got_text)
                    .is_some_and(|t| same_words(&t, want))
            {
                return Some(PolicyKind::Reasoning);
            }
            // A parser that does not split reasoning but takes its tags out: the reasoning
            // and the text run together, every character kept, in either order (text written
            // before the think block comes first).
            if reasoning_run_together(ctx, tc, got, want) {
                return Some(PolicyKind::Reasoning);
            }
            if text_before_block_as_reasoning(ctx, tc, got, want) {
                return Some(PolicyKind::Reasoning);
            }
            if ctx.has(PolicyKind::Whitespace) && same_words(got_text, want) {
                return Some(PolicyKind::Whitespace);
            }
            if undeclared {
                return Some(PolicyKind::UndeclaredTools);
            }
            // No error channel: input conform rejects shown as text, no call: its markup taken
            // out and nothing else lost, or the expected text kept with some of what conform
            // drops with its error (a stray word between messages), nothing added (the
            // served input's text in order). Rejected input conform shows none of is not
            // judged on a part of it.
            let expected = tc.expected_calls.as_ref().map_or(0, Vec::len);
            let unmarked = without_markers(&tc.served, &ctx.markers);
            if reject
                && ctx.has(PolicyKind::Errors)
                && got.errors.is_empty()
                && got.calls.is_empty()
                && (expected == 0 || shown_whole(ctx, tc, got))
                && !markup_in(got_text, &ctx.markers)
                && keeps_in_order(got_text, want)
                && (unspaced(got_text) == unspaced(&unmarked)
                    || (!want.trim().is_empty() && keeps_in_order(&unmarked, got_text))
                    || whole_segments(got_text, &tc.served, &ctx.markers)
                    || kept_tail(got_text, want, &tc.served))
            {
                return Some(PolicyKind::Errors);
            }
            None
        }
        // Reasoning that never closes, ended by the engine at a call's markup and the call
        // made: the implicit end of reasoning some formats specify (step3, kimi_k3), an
        // engine's reading where the format leaves it open.
        Invariant::Expectation if msg.starts_with("reasoning is ") => {
            let want = tc.expected_reasoning.as_deref()?;
            let got_r = got.reasoning.as_deref().unwrap_or_default();
            if ctx.has(PolicyKind::Whitespace) && same_words(got_r, want) {
                return Some(PolicyKind::Whitespace);
            }
            let rest = want
                .strip_prefix(got_r.trim_end())
                .or_else(|| want.strip_prefix(got_r))?;
            let closes = ctx.pairs().iter().any(|(_, c)| tc.served.contains(c));
            (ctx.has(PolicyKind::Reasoning)
                && !closes
                && !got.calls.is_empty()
                && markup_in(rest, &ctx.markers))
            .then_some(PolicyKind::Reasoning)
        }
        Invariant::Expectation if msg.starts_with("call ") && msg.contains(" differs") => {
            let want = tc.expected_calls.as_ref()?;
            if ctx.has(PolicyKind::Leniency)
                && !ctx.matched_somewhere
                && another_duplicate_reading(ctx, tc, got, want)
            {
                return Some(PolicyKind::Leniency);
            }
            let declared = ctx.has(PolicyKind::Typing);
            let typed_apart = got.calls.len() == want.len()
                && got.calls.iter().zip(want).all(|(g, w)| {
                    let schema = ctx.schemas.get(&w.name);
                    g.name == w.name
                        && serde_json::from_str::<serde_json::Value>(&g.arguments).is_ok_and(|a| {
                            typed_otherwise_or_json(
                                &w.arguments,
                                &a,
                                schema,
                                declared,
                                &tc.attributeless_keys,
                            )
                        })
                });
            typed_apart.then_some(PolicyKind::Typing)
        }
        Invariant::Expectation if msg.contains(" call(s) parsed (") => {
            if undeclared {
                return Some(PolicyKind::UndeclaredTools);
            }
            (reject
                && got.errors.is_empty()
                && ctx.has(PolicyKind::Errors)
                && (read_well(ctx, got) || shown_whole(ctx, tc, got)))
            .then_some(PolicyKind::Errors)
        }
        Invariant::NoMarkupLeak => {
            if undeclared {
                return Some(PolicyKind::UndeclaredTools);
            }
            // The markup is the reasoning's own text (a call written as data inside a think
            // block), shown as text by a variant that does not split reasoning, or the model's
            // open tag inside reasoning a thinking request's prompt opened.
            if let Some(want) = tc.expected_text.as_deref()
                && (text_before_block_as_reasoning(ctx, tc, got, want)
                    || reasoning_run_together(ctx, tc, got, want))
            {
                return Some(PolicyKind::Reasoning);
            }
            // Only the reasoning wrapper left in the text: without its blocks, no markup.
            let rest = ctx.unreasoned(&got.text)?;
            let only_reasoning = ctx.shows_reasoning_tag(&got.text)
                && !ctx
                    .markers
                    .iter()
                    .any(|m| !m.is_empty() && rest.contains(m.as_str()));
            (ctx.has(PolicyKind::Reasoning) && only_reasoning).then_some(PolicyKind::Reasoning)
        }
        Invariant::Expectation
            if reject
                && (msg.starts_with("no error, but the expectation says")
                    || msg.starts_with("must be rejected")
                    || msg.starts_with("errors are [] but")) =>
        {
            let expected = tc.expected_calls.as_ref().map_or(0, Vec::len);
            let clean = got.calls.iter().all(|c| !holds_marker(c, &ctx.markers));
            if ctx.has(PolicyKind::CallEnd)
                && tc.expected_error.as_deref() == Some("unterminated")
                && got.calls.len() > expected
                && clean
                && got.calls[expected..]
                    .iter()
                    .all(|c| is_object(&c.arguments))
            {
                return Some(PolicyKind::CallEnd);
            }
            (ctx.has(PolicyKind::Errors)
                && clean
                && (got.calls.len() <= expected || read_well(ctx, got)))
            .then_some(PolicyKind::Errors)
        }
        // A typing-table row (`rule R: "007" typed as "007" but the table says 7`) the engine
        // left as the text the model wrote: policy `typing`, as for a case's call.
        Invariant::TypeInference if ctx.has(PolicyKind::Typing) => {
            let (_, want) = msg.rsplit_once(" but the table says ")?;
            let want: serde_json::Value = serde_json::from_str(want).ok()?;
            let [call] = got.calls.as_slice() else {
                return None;
            };
            let args: serde_json::Value = serde_json::from_str(&call.arguments).ok()?;
            let value = match args.as_object() {
                Some(o) if o.len() == 1 => o.values().next()?,
                _ => return None,
            };
            only_untyped(&want, value).then_some(PolicyKind::Typing)
        }
        _ => None,
    }
}

/// Whether the replay shows a deviation the engine does not recover, and nothing else: an
/// accepted case whose expectation names warnings, replayed without an error into either
/// the served input verbatim as text and no call (nothing parsed, nothing lost), or the
/// expected calls (names and arguments) with text free of the format's markup.
fn unrecovered_deviation(ctx: &CaseContext, tc: &TurnContext, got: &Got) -> bool {
    if ctx.label != Some(Label::Accept) || !tc.deviation || !got.errors.is_empty() {
        return false;
    }
    if got.calls.is_empty() {
        // The deviating output left as text, or its calls not made and the text around them
        // kept (the call a format deviation left unfinished is dropped, nothing else lost).
        let text = match ctx.unreasoned(&got.text) {
            Some(t) if ctx.has(PolicyKind::Reasoning) => t,
            _ => got.text.clone(),
        };
        return !tc.served.trim().is_empty()
            && (same_words(&got.text, &tc.served)
                || (same_words(&text, tc.want_text()) && !markup_in(&text, &ctx.markers)));
    }
    let Some(want) = &tc.expected_calls else {
        return false;
    };
    // Some calls made, each exactly as expected and in order, the deviating part shown
    // verbatim as text (or dropped, the expected text kept): the deviation not recovered.
    let subsequence = got.calls.len() < want.len() && exact_subsequence(&got.calls, want);
    if subsequence && (tc.served.contains(got.text.trim()) || same_words(&got.text, tc.want_text()))
    {
        return true;
    }
    // A variant that keeps reasoning in the text (policy `reasoning`) may keep a think block.
    let text = match ctx.unreasoned(&got.text) {
        Some(t) if ctx.has(PolicyKind::Reasoning) => t,
        _ => got.text.clone(),
    };
    let markup = ctx
        .markers
        .iter()
        .any(|m| !m.is_empty() && text.contains(m.as_str()));
    // Each call made with its name and the arguments it recognised: the parameters the
    // deviation wrote (a missing attribute, a foreign spelling) dropped, nothing invented.
    let recognised = |g: &GotCall, w: &ToolCall| {
        let (Ok(serde_json::Value::Object(got)), serde_json::Value::Object(want)) = (
            serde_json::from_str::<serde_json::Value>(&g.arguments),
            &w.arguments,
        ) else {
            return false;
        };
        g.name == w.name && got.iter().all(|(k, v)| want.get(k) == Some(v))
    };
    !markup
        && got.calls.len() == want.len()
        && got.calls.iter().zip(want).all(|(g, w)| recognised(g, w))
}

/// Whether the replay's calls are the expected ones but for the value of a parameter the model
/// gave twice (the first value, both in an array, or none, where conform keeps the last): a
/// reading of the duplicate, not a lost or changed argument. Every other argument is exact.
fn another_duplicate_reading(
    ctx: &CaseContext,
    tc: &TurnContext,
    got: &Got,
    want: &[ToolCall],
) -> bool {
    use serde_json::Value;
    !tc.duplicated_keys.is_empty()
        && got.calls.len() == want.len()
        && got.calls.iter().zip(want).all(|(g, w)| {
            let (Ok(Value::Object(got_args)), Value::Object(want_args)) =
                (serde_json::from_str::<Value>(&g.arguments), &w.arguments)
            else {
                return false;
            };
            g.name == w.name
                && got_args.keys().all(|k| want_args.contains_key(k))
                && want_args.iter().all(|(k, v)| match got_args.get(k) {
                    Some(x) if x == v => true,
                    other => {
                        tc.duplicated_keys.contains(k)
                            && other.is_none_or(|x| written(x, &tc.served, &ctx.markers))
                    }
                })
        })
}

/// Whether a value is made of what the model wrote: strings and scalars found in the served
/// text (free of markup), or a list of them.
fn written(v: &serde_json::Value, served: &str, markers: &[String]) -> bool {
    use serde_json::Value;
    match v {
        Value::String(s) => !markup_in(s, markers) && served.contains(s.as_str()),
        Value::Array(items) => items.iter().all(|x| written(x, served, markers)),
        Value::Object(_) => false,
        scalar => served.contains(&scalar.to_string()),
    }
}

/// The keys the warnings of one kind name (each the first quoted string of its message).
fn warned_keys(events: &[Event], warning: WarningKind) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Warning { kind, message } if kind == warning.as_str() => first_quoted(message),
            _ => None,
        })
        .collect()
}

/// The first double-quoted string of a message (a key a warning names), unescaped.
fn first_quoted(message: &str) -> Option<String> {
    let at = message.find('"')?;
    serde_json::Deserializer::from_str(&message[at..])
        .into_iter::<String>()
        .next()?
        .ok()
}

/// Whether the replay's calls are the expected ones without those to undeclared tools (and
/// the expectation has some).
fn drops_undeclared(ctx: &CaseContext, tc: &TurnContext, got: &Got) -> bool {
    let Some(want) = &tc.expected_calls else {
        return false;
    };
    let declared: Vec<&ToolCall> = want
        .iter()
        .filter(|c| ctx.tools.contains(&c.name))
        .collect();
    declared.len() < want.len()
        && declared.len() == got.calls.len()
        && declared.iter().zip(&got.calls).all(|(w, g)| {
            w.name == g.name
                && serde_json::from_str::<serde_json::Value>(&g.arguments)
                    .ok()
                    .as_ref()
                    == Some(&w.arguments)
        })
}

/// Whether a roundtrip difference is only the reasoning wrapper's doing: reasoning rendered
/// with its open tag, read back inside it by a reasoning parser whose template opens
/// reasoning in the prompt; or, in a variant without a reasoning parser, rendered reasoning
/// tags shown as text. conform's rendering assumed another prompt; the engine is not wrong.
fn roundtrip_reasoning(msg: &str, ctx: &CaseContext) -> bool {
    if let Some(rest) = msg.strip_prefix("reasoning ")
        && let Some((want, back)) = rest.split_once(" came back as ")
    {
        // Both sides are quoted excerpts (`"…"`, maybe cut with `…`): compare them quoted.
        let back = back.split_once("; rendered: ").map_or(back, |(b, _)| b);
        let body = |q: &str| -> String {
            let q = q.trim().trim_start_matches('"');
            q.strip_suffix("…\"")
                .or_else(|| q.strip_suffix('"'))
                .unwrap_or(q)
                .to_string()
        };
        let (want, back) = (body(want), body(back));
        let opened = ctx.pairs().iter().any(|(o, _)| {
            let tag = format!("{o:?}");
            back.strip_prefix(&tag[1..tag.len() - 1])
                .is_some_and(|b| !b.is_empty() && (want.starts_with(b) || b.starts_with(&want)))
        });
        return opened;
    }
    if let Some(rest) = msg.strip_prefix("text ")
        && let Some((_, back)) = rest.split_once(" came back as ")
    {
        let back = back.split_once("; rendered: ").map_or(back, |(b, _)| b);
        return ctx.pairs().iter().any(|(o, c)| {
            [o, c].iter().any(|t| {
                let q = format!("{t:?}");
                back.contains(&q[1..q.len() - 1])
            })
        });
    }
    false
}

/// A parser that does not split reasoning but takes its tags out: the text is the expected
/// reasoning and text run together, every character kept, in either order (text written before
/// the think block comes first), and nothing is reasoning.
fn reasoning_run_together(ctx: &CaseContext, tc: &TurnContext, got: &Got, want: &str) -> bool {
    ctx.has(PolicyKind::Reasoning)
        && got.reasoning.as_deref().is_none_or(str::is_empty)
        && tc.expected_reasoning.as_deref().is_some_and(|r| {
            !r.trim().is_empty()
                && (unspaced(&got.text) == unspaced(&format!("{r}{want}"))
                    || unspaced(&got.text) == unspaced(&format!("{want}{r}")))
        })
}

/// A parser that starts inside reasoning for a thinking request (the template opens the block
/// in the prompt) takes the text the model wrote before its think block as reasoning: the
/// text is what the expected text has after the block, the reasoning the text before it and
/// the expected reasoning run together, every character kept, the model's own open tag
/// between them or not (written inside a block the prompt opened, it is the model's text), no
/// other markup. Nothing is lost; a client shows it as reasoning.
fn text_before_block_as_reasoning(
    ctx: &CaseContext,
    tc: &TurnContext,
    got: &Got,
    want: &str,
) -> bool {
    let (Some(got_r), Some(r)) = (got.reasoning.as_deref(), tc.expected_reasoning.as_deref())
    else {
        return false;
    };
    let Some(before) = unspaced(want)
        .strip_suffix(&unspaced(&got.text))
        .map(str::to_string)
    else {
        return false;
    };
    let (got_r, r) = (unspaced(got_r), unspaced(r));
    ctx.has(PolicyKind::Reasoning)
        && !before.is_empty()
        && !r.is_empty()
        && !markup_in(&got.text, &ctx.markers)
        && ctx.pairs().iter().any(|(open, _)| {
            let open = unspaced(open);
            (got_r == format!("{before}{r}") || got_r == format!("{before}{open}{r}"))
                && !markup_in(&got_r.replacen(&open, "", 1), &ctx.markers)
        })
}

/// For an engine whose parser starts inside reasoning whatever the request
/// ([`PolicyKind::ThinksAlways`]): whether its text is the expected text without the part the
/// model wrote before its first close tag (none: all of it), that part shown as reasoning.
fn thinks_always_reading(ctx: &CaseContext, tc: &TurnContext, got: &Got, want: &str) -> bool {
    if !ctx.has(PolicyKind::ThinksAlways) {
        return false;
    }
    let close = ctx.first_close(&tc.served).unwrap_or(tc.served.len());
    let (want, got_text) = (want.trim(), got.text.trim());
    let Some(moved) = want.strip_suffix(got_text) else {
        return false;
    };
    !moved.trim().is_empty()
        && keeps_in_order(&tc.served[..close], moved)
        && got
            .reasoning
            .as_deref()
            .is_some_and(|r| keeps_in_order(r, moved))
}

/// Whether `got` is the expected text, then the served input's tail after a closing bracket:
/// the rejected markup dropped up to where it visibly closes (`]`, `)`, `}`, `>`) and the text
/// after it kept, where conform drops that text with its error (a syntax error leaves it no
/// end of the markup to trust: pythonic R5).
fn kept_tail(got: &str, want: &str, served: &str) -> bool {
    let Some(tail) = got.strip_prefix(want) else {
        return false;
    };
    // The dropped part closes every bracket it opens: the engine cut at the markup's end,
    // not inside it.
    let balanced = |head: &str| {
        ["()", "[]", "{}"].iter().all(|pair| {
            let (o, c) = (pair.as_bytes()[0], pair.as_bytes()[1]);
            let mut depth = 0i64;
            head.bytes().all(|b| {
                depth += i64::from(b == o) - i64::from(b == c);
                depth >= 0
            }) && depth == 0
        })
    };
    !tail.trim().is_empty()
        && served
            .strip_suffix(tail)
            .is_some_and(|head| head.trim_end().ends_with([']', ')', '}', '>']) && balanced(head))
}

/// Whether every character of `want` (whitespace aside) appears in `got` in order: `got`
/// lost nothing of it, whatever it added.
fn keeps_in_order(got: &str, want: &str) -> bool {
    let mut g = got.chars().filter(|c| !c.is_whitespace());
    want.chars()
        .filter(|c| !c.is_whitespace())
        .all(|w| g.any(|c| c == w))
}

/// The text without its whitespace.
fn unspaced(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Equal but for whitespace: the same words in the same order.
fn same_words(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// The text with every `open…close` block taken out (an unclosed one to the end), each close
/// tag with the `sep` that may follow it.
fn without_reasoning(text: &str, open: &str, close: &str, sep: &str) -> String {
    let after_close = |s: &str| -> usize {
        if !sep.is_empty() && s.starts_with(sep) {
            sep.len()
        } else {
            0
        }
    };
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(open) {
        out.push_str(&rest[..i]);
        match rest[i..].find(close) {
            Some(j) => {
                rest = &rest[i + j + close.len()..];
                rest = &rest[after_close(rest)..];
            }
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    // A close tag alone (the template opened the block in the prompt) ends reasoning too.
    match out.rfind(close) {
        Some(k) => {
            let tail = &out[k + close.len()..];
            tail[after_close(tail)..].to_string()
        }
        None => out,
    }
}

/// Whether a call's name or id holds one of the format's delimiters.
/// Whether `got` is `want` but for scalars left as the text the model wrote: a number,
/// boolean or null of `want` that is a string in `got` spelling the same value (`"007"` for
/// 7, `"true"`). Never the other way: a string the engine decoded into a number is a bug.
fn only_untyped(want: &serde_json::Value, got: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (want, got) {
        (V::Object(w), V::Object(g)) => {
            w.len() == g.len()
                && w.iter()
                    .all(|(k, wv)| g.get(k).is_some_and(|gv| only_untyped(wv, gv)))
        }
        (V::Array(w), V::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(a, b)| only_untyped(a, b))
        }
        (V::Number(n), V::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .is_some_and(|x| Some(x) == n.as_f64()),
        (V::Bool(b), V::String(s)) => s.trim() == if *b { "true" } else { "false" },
        (V::Null, V::String(s)) => s.trim() == "null",
        (w, g) => w == g,
    }
}

/// Whether `got` is `want` but for values typed another way than conform types them, where
/// engines legitimately settle typing otherwise (`specs/engines.md` §3, `typing`): equal
/// numbers however written; a value left as the text the model wrote (always, for an engine
/// that declares it does not type by schema; else unless the schema types it plainly and the
/// model wrote the value's own JSON spelling: `"5"` for a plain `integer` is a bug); a value
/// typed where conform kept text, unless the schema plainly says `string` (the
/// string-corruption class stays a bug). Any other difference (another string, a lost key)
/// is not typing.
fn typed_otherwise(
    want: &serde_json::Value,
    got: &serde_json::Value,
    schema: Option<&serde_json::Value>,
    declared: bool,
) -> bool {
    use serde_json::Value as V;
    let plain = plain_type(schema);
    match (want, got) {
        (V::Object(w), V::Object(g)) => {
            w.len() == g.len()
                && w.iter().all(|(k, wv)| {
                    g.get(k)
                        .is_some_and(|gv| typed_otherwise(wv, gv, property(schema, k), declared))
                })
        }
        (V::Array(w), V::Array(g)) => {
            let items = schema.and_then(|s| s.get("items"));
            w.len() == g.len()
                && w.iter()
                    .zip(g)
                    .all(|(a, b)| typed_otherwise(a, b, items, declared))
        }
        (V::Number(a), V::Number(b)) => a.as_f64() == b.as_f64(),
        (w, g) if w == g => true,
        // A number no double holds (`1e400`, `inf`), kept as text by conform: any spelling of
        // its overflow (`Infinity`) is the engine's reading of a value JSON cannot carry.
        (V::String(a), V::String(b)) if non_finite(a) && non_finite(b) => true,
        // Whitespace at a string's edges: kept by conform, trimmed by many engines.
        (V::String(a), V::String(b)) => a.trim() == b.trim(),
        // Left as the model's text.
        (w, V::String(text)) if !w.is_string() => {
            if !spelled_as(w, text) {
                return false;
            }
            if declared {
                return true;
            }
            let canonical = serde_json::to_string(w).is_ok_and(|c| c == *text);
            !(canonical && plain.is_some_and(|t| t != "string"))
        }
        // Typed where conform kept the text.
        (V::String(_), _) => plain != Some("string"),
        // Typed both ways, differently (`1` for `true`): the schema decides only if plain.
        _ => plain.is_none(),
    }
}

/// [`typed_otherwise`] for a call's arguments, where each parameter of `attributeless` (written
/// without the `string` attribute that decides its type) may also be read as its text's JSON,
/// else as the text trimmed: the reading the DSML fact sheets give vLLM, Dynamo and
/// tool-parser, where conform types such a parameter by the schema instead.
fn typed_otherwise_or_json(
    want: &serde_json::Value,
    got: &serde_json::Value,
    schema: Option<&serde_json::Value>,
    declared: bool,
    attributeless: &[String],
) -> bool {
    use serde_json::Value as V;
    let (V::Object(w), V::Object(g)) = (want, got) else {
        return typed_otherwise(want, got, schema, declared);
    };
    if attributeless.is_empty() {
        return typed_otherwise(want, got, schema, declared);
    }
    let as_json = |wv: &V, gv: &V| {
        let V::String(text) = wv else {
            return false;
        };
        match serde_json::from_str::<V>(text.trim()) {
            Ok(V::Number(n)) => gv.as_f64().is_some_and(|x| Some(x) == n.as_f64()),
            Ok(v) => v == *gv,
            Err(_) => gv.as_str() == Some(text.trim()),
        }
    };
    w.len() == g.len()
        && w.iter().all(|(k, wv)| {
            g.get(k).is_some_and(|gv| {
                (attributeless.contains(k) && as_json(wv, gv))
                    || typed_otherwise(wv, gv, property(schema, k), declared)
            })
        })
}

/// Whether `text` spells a number that is not finite as a double (`1e400`, `Infinity`, `NaN`).
fn non_finite(text: &str) -> bool {
    text.trim().parse::<f64>().is_ok_and(|x| !x.is_finite())
}

/// Whether `text` is a spelling of `value` a model writes: the same number, a boolean or
/// null word in any case (`None`, `nil` too), or JSON text of the same container.
fn spelled_as(value: &serde_json::Value, text: &str) -> bool {
    use serde_json::Value as V;
    let t = text.trim();
    match value {
        V::Number(n) => t.parse::<f64>().ok().is_some_and(|x| Some(x) == n.as_f64()),
        V::Bool(b) => t.eq_ignore_ascii_case(if *b { "true" } else { "false" }),
        V::Null => ["null", "none", "nil"]
            .iter()
            .any(|w| t.eq_ignore_ascii_case(w)),
        // A container's text: its JSON, or text that is not JSON at all (a Python literal,
        // free text conform read its own way); JSON of another value is not its spelling.
        V::Object(_) | V::Array(_) => serde_json::from_str::<V>(t).map_or(true, |v| v == *value),
        V::String(_) => false,
    }
}

/// The single type a schema plainly gives (`{"type": "integer"}`), or `None` when it gives
/// none or a compound one (a type list, `anyOf`, `oneOf`, `allOf`, `$ref`, `enum`, `const`).
fn plain_type(schema: Option<&serde_json::Value>) -> Option<&str> {
    let s = schema?.as_object()?;
    if ["anyOf", "oneOf", "allOf", "$ref", "enum", "const", "not"]
        .iter()
        .any(|k| s.contains_key(*k))
    {
        return None;
    }
    s.get("type")?.as_str()
}

/// The schema of an object's property `key`, when the schema states one.
fn property<'a>(schema: Option<&'a serde_json::Value>, key: &str) -> Option<&'a serde_json::Value> {
    schema?.get("properties")?.get(key)
}

fn holds_marker(c: &GotCall, markers: &[String]) -> bool {
    markers.iter().filter(|m| !m.is_empty()).any(|m| {
        c.name.contains(m.as_str()) || c.id.as_deref().is_some_and(|i| i.contains(m.as_str()))
    })
}

/// Whether a replayed call is the expected one: the same name and arguments.
fn exact_call(g: &GotCall, w: &ToolCall) -> bool {
    g.name == w.name
        && serde_json::from_str::<serde_json::Value>(&g.arguments)
            .ok()
            .as_ref()
            == Some(&w.arguments)
}

/// Whether every call of `got` is one of `want`, name and arguments exact, in order.
fn exact_subsequence(got: &[GotCall], want: &[ToolCall]) -> bool {
    let mut rest = want.iter();
    got.iter().all(|g| rest.any(|w| exact_call(g, w)))
}

/// Whether `got` reads an output cut inside a call as a server may: the expected (complete)
/// calls made exactly and in order, at most one more (the cut call, its name free of markup,
/// its arguments whatever had arrived), and the expected text followed by nothing or by part
/// of the served output verbatim (the cut call returned as content).
fn cut_reading(ctx: &CaseContext, tc: &TurnContext, got: &Got) -> bool {
    let want = tc.expected_calls.as_deref().unwrap_or(&[]);
    if got.calls.len() < want.len() || got.calls.len() > want.len() + 1 {
        return false;
    }
    let exact = got.calls.iter().zip(want).all(|(g, w)| exact_call(g, w));
    if !exact || got.calls.iter().any(|c| holds_marker(c, &ctx.markers)) {
        return false;
    }
    let want_text = tc.want_text().trim();
    let text = got.text.trim();
    text.strip_prefix(want_text)
        .is_some_and(|rest| rest.trim().is_empty() || tc.served.contains(rest.trim()))
}

/// Whether a guided output is what a server's JSON schema lets the model write (vLLM's and
/// SGLang's, `tool_parsers/utils.py` and `function_call/utils.py`): for `required`, an array
/// of objects with exactly `name` and `parameters` (an object); for a named tool, the
/// arguments object itself. Reasoning before it is the reasoning parser's.
fn schema_shaped(ctx: &CaseContext, tc: &TurnContext) -> bool {
    use serde_json::Value as V;
    let payload = ctx
        .unreasoned(&tc.served)
        .unwrap_or_else(|| tc.served.clone());
    let Ok(v) = serde_json::from_str::<V>(payload.trim()) else {
        return false;
    };
    match ctx.tool_choice {
        Some(ToolChoice::Required) => v.as_array().is_some_and(|a| {
            !a.is_empty()
                && a.iter().all(|c| {
                    c.as_object().is_some_and(|o| {
                        o.len() == 2
                            && o.get("name").is_some_and(V::is_string)
                            && o.get("parameters").is_some_and(V::is_object)
                    })
                })
        }),
        Some(ToolChoice::Named(_)) => v.is_object(),
        _ => true,
    }
}

/// Whether an engine without an error channel read input conform rejects into calls all well
/// formed and text free of markup: its reading of the deviation, not a bug. A call made of
/// markup, or of arguments that are not an object, still is.
fn read_well(ctx: &CaseContext, got: &Got) -> bool {
    let text = match ctx.unreasoned(&got.text) {
        Some(t) if ctx.has(PolicyKind::Reasoning) => t,
        _ => got.text.clone(),
    };
    !got.calls.is_empty()
        && got.calls.iter().all(|c| well_formed(c, &ctx.markers))
        && !markup_in(&text, &ctx.markers)
}

/// Whether a call is one a client can dispatch as the model wrote it: a name, free of
/// markup, and arguments that are a JSON object with no markup in them.
fn well_formed(c: &GotCall, markers: &[String]) -> bool {
    !c.name.trim().is_empty()
        && !holds_marker(c, markers)
        && is_object(&c.arguments)
        && !markup_in(&c.arguments, markers)
}

/// Rejected input shown whole as text, its delimiters taken out, and no call made: an engine
/// without an error channel that refuses the whole payload (a JSON array with one invalid
/// element is invalid JSON) rather than keep the calls before the bad one, as conform does;
/// the client sees everything the model wrote.
fn shown_whole(ctx: &CaseContext, tc: &TurnContext, got: &Got) -> bool {
    got.calls.is_empty()
        && !got.text.trim().is_empty()
        && !markup_in(&got.text, &ctx.markers)
        && unspaced(&got.text) == unspaced(&without_markers(&tc.served, &ctx.markers))
}

/// `text` with every one of the format's delimiters taken out.
fn without_markers(text: &str, markers: &[String]) -> String {
    markers
        .iter()
        .filter(|m| !m.is_empty())
        .fold(text.to_string(), |t, m| t.replace(m.as_str(), ""))
}

/// Whether `got` is, but for whitespace, a run of whole pieces of `served` between its
/// delimiters: the body of a message an engine without an error channel shows rather than
/// drops (harmony's `<|channel|>summary<|message|>Short.<|end|>` shown as `Short.`), never
/// a fragment cut from inside one.
fn whole_segments(got: &str, served: &str, markers: &[String]) -> bool {
    const MOST: usize = 256;
    let want = unspaced(got);
    if want.is_empty() {
        return false;
    }
    let mut pieces = vec![served];
    for m in markers.iter().filter(|m| !m.is_empty()) {
        pieces = pieces.iter().flat_map(|p| p.split(m.as_str())).collect();
        if pieces.len() > MOST {
            return false;
        }
    }
    let pieces: Vec<String> = pieces.iter().map(|p| unspaced(p)).collect();
    (0..pieces.len()).any(|i| {
        let mut run = String::new();
        pieces[i..].iter().any(|p| {
            run.push_str(p);
            run == want
        })
    })
}

/// Whether `text` holds one of the format's delimiters.
fn markup_in(text: &str, markers: &[String]) -> bool {
    markers
        .iter()
        .any(|m| !m.is_empty() && text.contains(m.as_str()))
}

fn is_object(json: &str) -> bool {
    matches!(
        serde_json::from_str::<serde_json::Value>(json),
        Ok(serde_json::Value::Object(_))
    )
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

fn expectation_class(msg: &str, tc: &TurnContext, ctx: &CaseContext) -> CaseClass {
    use BugClass as B;
    let bug = CaseClass::Bug;
    let markers = &ctx.markers[..];
    let ctx_has_text_after = ctx.has(PolicyKind::TextAfterCalls);
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
            && ctx_has_text_after
            && [&tc.text_after_calls, &tc.text_from_first_call]
                .iter()
                .any(|after| {
                    drops_text_after_calls(got, full, after, ctx.has(PolicyKind::Whitespace))
                })
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
        // Markup inside an id is a bug, never a difference of ids.
        let ids = ctx.has(PolicyKind::Ids) && !leaks(described_id(got), markers);
        return call_difference(got, want, ids);
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

/// A roundtrip failure, classified by what differs: a call that came back the same but for
/// its id is the `ids` policy where declared (the engine numbers calls its own way), another
/// call difference is judged as an expectation's; text that came back with markup or shorter
/// is a leak or a loss; a rendering the engine rejects is an error verdict.
fn roundtrip_class(msg: &str, ctx: &CaseContext) -> CaseClass {
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
    // `… came back as …; rendered: "…"`: the two sides, without the rendering.
    let sides = |rest: &str| -> Option<(String, String)> {
        let (want, back) = rest.split_once(" came back as ")?;
        let back = back.split_once("; rendered: ").map_or(back, |(b, _)| b);
        Some((want.to_string(), back.trim_end_matches(';').to_string()))
    };
    if let Some(rest) = msg.strip_prefix("call ")
        && let Some((_, rest)) = rest.split_once(' ')
        && let Some((want, back)) = sides(rest)
    {
        // A value the engine could not type left as the text the rendering wrote (Seed-OSS's
        // template writes `None` and Python dicts): the `typing` policy, as for a case's call.
        if ctx.has(PolicyKind::Typing)
            && let (Some((wn, wa)), Some((bn, ba))) = (described(&want), described(&back))
            && wn == bn
            && wa != ba
            && typed_otherwise(&wa, &ba, ctx.schemas.get(&wn), true)
        {
            return CaseClass::Policy(PolicyKind::Typing);
        }
        return call_difference(&back, &want, ctx.has(PolicyKind::Ids));
    }
    if let Some(rest) = msg.strip_prefix("text ")
        && let Some((want, back)) = sides(rest)
    {
        // The rendering put the calls first (after its reasoning block, if any) and the
        // text after them, and the engine drops text after calls (policy
        // `text_after_calls`): the text came back empty.
        let calls_first = msg.split_once("; rendered: \"").is_some_and(|(_, r)| {
            let r = ctx
                .pairs()
                .iter()
                .find_map(|(open, close)| {
                    let k = r.strip_prefix(*open)?.find(*close)?;
                    Some(&r[open.len() + k + close.len()..])
                })
                .unwrap_or(r);
            ctx.markers
                .iter()
                .any(|m| !m.is_empty() && r.starts_with(m.as_str()))
        });
        if ctx.has(PolicyKind::TextAfterCalls) && back == "\"\"" && calls_first {
            return CaseClass::Policy(PolicyKind::TextAfterCalls);
        }
        // The text came back the same but for whitespace (a newline added before the calls).
        let words = |q: &str| serde_json::from_str::<String>(q).ok();
        if ctx.has(PolicyKind::Whitespace)
            && let (Some(w), Some(b)) = (words(&want), words(&back))
            && same_words(&w, &b)
        {
            return CaseClass::Policy(PolicyKind::Whitespace);
        }
        return bug(if leaks(&back, &ctx.markers) {
            B::MarkupLeaked
        } else if shorter(&back, &want) {
            B::TextLost
        } else {
            B::Other
        });
    }
    if msg.starts_with("the rendered transcript does not parse") {
        return bug(B::ErrorVerdict);
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

/// A described call's name and arguments (`name("{…}")`, an id ignored); `None` for an
/// excerpt cut short.
fn described(s: &str) -> Option<(String, serde_json::Value)> {
    let s = without_ids(s);
    let (name, rest) = s.split_once('(')?;
    let quoted = rest.strip_suffix(')')?;
    let args: String = serde_json::from_str(quoted).ok()?;
    Some((name.to_string(), serde_json::from_str(&args).ok()?))
}

/// The `id="…"` part of a described call (empty without one).
fn described_id(s: &str) -> &str {
    let Some(start) = s.find("(id=\"") else {
        return "";
    };
    let body = &s[start + 4..];
    let mut escaped = false;
    for (i, ch) in body.char_indices().skip(1) {
        match ch {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return &body[..=i],
            _ => escaped = false,
        }
    }
    body
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
fn drops_text_after_calls(got: &str, expected: &str, after: &str, whitespace: bool) -> bool {
    if after.trim().is_empty() {
        return false;
    }
    let Some(before) = expected.strip_suffix(after) else {
        return false;
    };
    // An engine that also trims whitespace around the calls (policy `whitespace`) may trim
    // the text before them at both ends.
    let trimmed = if whitespace {
        before.trim()
    } else {
        before.trim_end()
    };
    [before, before.trim_end(), trimmed]
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
            request: Default::default(),
        }
    }

    fn ctx(expected: &str, after: &str) -> CaseContext {
        CaseContext {
            markers: vec!["<|tool_call_begin|>".into(), "<tool_call>".into()],
            turns: vec![TurnContext {
                expected_text: Some(expected.into()),
                text_after_calls: after.into(),
                ..TurnContext::default()
            }],
            ..CaseContext::default()
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
        // A roundtrip is classified by what differs: an id the engine generated afresh is the
        // ids policy (defaults declare it), the text by what it lost or gained.
        let rt = |m: &str| class(Invariant::Roundtrip, m, &c);
        assert_eq!(
            rt(
                r#"call 0 get_time(id="9uKTpFfiA", "{}") came back as get_time(id="uGCFuuBKU", "{}"); rendered: "[TOOL_CALLS][…]""#
            ),
            "policy:ids"
        );
        assert_eq!(
            rt(r#"call 0 get_time(id="a", "{}") came back as put(id="b", "{}")"#),
            "other"
        );
        assert_eq!(
            rt(r#"text "Hi there" came back as "Hi"; rendered: "Hi there<x>""#),
            "text_lost"
        );
        assert_eq!(
            rt(r#"text "" came back as "<tool_call>{}"; rendered: "<tool_call>{}""#),
            "markup_leaked"
        );
        assert_eq!(
            rt("the rendered transcript does not parse: bad"),
            "error_verdict"
        );
        assert_eq!(
            class(
                Invariant::Roundtrip,
                r#"call 0 f(id="1", {}) came back as f(id="2", {})"#,
                &declaring(c.clone(), &[])
            ),
            "arguments_wrong"
        );
        // A session's turn prefix selects that turn's context.
        let two = CaseContext {
            markers: vec![],
            turns: vec![TurnContext::default(), ctx("A.B.", "B.").turns[0].clone()],
            ..CaseContext::default()
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

    #[test]
    fn text_between_call_blocks_dropped_with_the_text_after_them_is_the_same_policy() {
        // Two call blocks with text between: an engine that keeps only the text before its
        // first call block (vLLM's DeepSeek parsers) drops "Then. " and "Done." alike.
        let mut c = declaring(
            ctx("Hi. Then. Done.", "Done."),
            &[PolicyKind::TextAfterCalls],
        );
        let msg = text_msg("Hi.", "Hi. Then. Done.");
        assert!(!class(Invariant::Expectation, &msg, &c).starts_with("policy"));
        c.turns[0].text_from_first_call = " Then. Done.".into();
        assert_eq!(
            class(Invariant::Expectation, &msg, &c),
            "policy:text_after_calls"
        );
        // Text dropped from the middle only is still a bug.
        let msg = text_msg("Hi. Done.", "Hi. Then. Done.");
        assert!(!class(Invariant::Expectation, &msg, &c).starts_with("policy"));
    }

    fn got(text: &str, calls: &[(&str, Option<&str>, &str)]) -> Got {
        Got {
            text: text.into(),
            calls: calls
                .iter()
                .map(|(n, id, a)| GotCall {
                    name: (*n).into(),
                    id: id.map(Into::into),
                    arguments: (*a).into(),
                })
                .collect(),
            ..Got::default()
        }
    }

    fn with_got(inv: Invariant, msg: &str, g: Got) -> ViolationOut {
        ViolationOut {
            got: vec![g],
            ..v(inv, msg)
        }
    }

    fn declaring(mut c: CaseContext, p: &[PolicyKind]) -> CaseContext {
        c.policies = Some(p.iter().copied().collect());
        c
    }

    fn text_msg(got: &str, want: &str) -> String {
        format!(
            "text is {} but the expectation says {}",
            excerpt(got),
            excerpt(want)
        )
    }

    #[test]
    fn without_an_error_channel_a_rejected_input_passed_through_verbatim_is_policy() {
        let input = "The weather in Paris is sunny.";
        let mut c = ctx("", "");
        c.label = Some(Label::Reject);
        c.turns[0].served = input.into();
        c.turns[0].expected_error = Some("malformed_markup".into());
        let e = Invariant::Expectation;
        let label = |c: &CaseContext, v: &ViolationOut| classify_violation(v, c).label();
        let v = with_got(e, &text_msg(input, ""), got(input, &[]));
        assert_eq!(
            label(&declaring(c.clone(), &[PolicyKind::Errors]), &v),
            "policy:errors"
        );
        assert_eq!(label(&declaring(c.clone(), &[]), &v), "other");
        // Part of it, or a call made of it, is not passing it through.
        let v = with_got(e, &text_msg("The weather", ""), got("The weather", &[]));
        assert_eq!(
            label(&declaring(c.clone(), &[PolicyKind::Errors]), &v),
            "other"
        );
        let v = with_got(e, &text_msg(input, ""), got(input, &[("f", None, "{}")]));
        assert_eq!(label(&declaring(c, &[PolicyKind::Errors]), &v), "other");
    }

    #[test]
    fn only_scalars_left_as_their_text_are_typing() {
        use serde_json::json;
        let want = json!({"id": 12, "level": 7, "on": true, "x": null, "s": "a", "l": [1.5]});
        let got =
            json!({"id": 12, "level": "007", "on": "true", "x": "null", "s": "a", "l": ["1.5"]});
        assert!(only_untyped(&want, &got));
        // A string decoded into a number is the string-corruption bug, not typing.
        assert!(!only_untyped(&json!({"zip": "007"}), &json!({"zip": 7})));
        assert!(!only_untyped(&json!({"n": 7}), &json!({"n": "8"})));
        assert!(!only_untyped(&json!({"n": 7}), &json!({"n": "7", "m": 1})));
    }

    #[test]
    fn a_value_kept_as_its_text_is_typing_only_for_an_engine_that_declares_it() {
        let mut c = ctx("", "");
        c.turns[0].expected_calls = Some(vec![ToolCall {
            name: "f".into(),
            id: None,
            server: None,
            arguments: serde_json::json!({"level": 7}),
        }]);
        let msg = "call 0 differs: parsed f(\"{\\\"level\\\":\\\"007\\\"}\") but the expectation says f(\"{\\\"level\\\":7}\")";
        let v = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"level":"007"}"#)]),
        );
        let typing = declaring(c.clone(), &[PolicyKind::Typing]);
        assert_eq!(classify_violation(&v, &typing).label(), "policy:typing");
        // For an engine that types by schema, `007` for an integer is a reading conform settled
        // (engines legitimately keep the text)...
        c.schemas.insert(
            "f".into(),
            serde_json::json!({"properties": {"level": {"type": "integer"}}}),
        );
        assert_eq!(classify_violation(&v, &c).label(), "policy:typing");
        // ...but the plain spelling `7` left as text for a plainly typed integer is a bug.
        let plain = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"level":"7"}"#)]),
        );
        assert_ne!(classify_violation(&plain, &c).label(), "policy:typing");
        assert_eq!(classify_violation(&plain, &typing).label(), "policy:typing");
        // A union type, or none, is not plain: the engine's reading.
        c.schemas.insert(
            "f".into(),
            serde_json::json!({"properties": {"level": {"type": ["integer", "string"]}}}),
        );
        assert_eq!(classify_violation(&plain, &c).label(), "policy:typing");
        // Typing a value conform keeps as text is a bug only under a plain `string`.
        c.turns[0].expected_calls.as_mut().unwrap()[0].arguments =
            serde_json::json!({"level": "7"});
        let typed = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"level":7}"#)]),
        );
        assert_eq!(classify_violation(&typed, &c).label(), "policy:typing");
        c.schemas.insert(
            "f".into(),
            serde_json::json!({"properties": {"level": {"type": "string"}}}),
        );
        assert_ne!(classify_violation(&typed, &c).label(), "policy:typing");
        // Equal numbers however written are no difference.
        c.turns[0].expected_calls.as_mut().unwrap()[0].arguments =
            serde_json::json!({"level": 5.0});
        let five = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"level":5}"#)]),
        );
        assert_eq!(classify_violation(&five, &c).label(), "policy:typing");
        // Another value is still a bug.
        let wrong = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"level":"8"}"#)]),
        );
        assert_ne!(classify_violation(&wrong, &typing).label(), "policy:typing");
    }

    #[test]
    fn reading_past_conforms_limits_is_never_an_engines_bug() {
        let mut c = ctx("", "");
        c.label = Some(Label::Reject);
        c.turns[0].expected_error = Some("limit_exceeded".into());
        let e = with_got(
            Invariant::Expectation,
            "no error, but the expectation says limit_exceeded",
            got("", &[("f", None, "{}")]),
        );
        // No engine declares it: it always applies, as warnings do.
        assert_eq!(classify_violation(&e, &c).label(), "policy:limits");
        let leak = with_got(Invariant::NoMarkupLeak, "markup left", got("<x>", &[]));
        assert_ne!(classify_violation(&leak, &c).label(), "policy:limits");
        c.turns[0].expected_error = Some("invalid_json".into());
        assert_ne!(classify_violation(&e, &c).label(), "policy:limits");
    }

    #[test]
    fn an_output_a_guided_request_forbids_is_not_judged_where_the_server_constrains_it() {
        let mut c = ctx("{\"city\": Paris}", "");
        c.label = Some(Label::Reject);
        c.tool_choice = Some(ToolChoice::Required);
        c.turns[0].expected_error = Some("invalid_json".into());
        let made = with_got(
            Invariant::Expectation,
            "no error, but the expectation says invalid_json",
            got("", &[("get_weather", None, "\"{\\\"city\\\": Paris}\"")]),
        );
        let guided = declaring(c.clone(), &[PolicyKind::Guided]);
        assert_eq!(classify_violation(&made, &guided).label(), "policy:guided");
        assert_ne!(classify_violation(&made, &c).label(), "policy:guided");
        // A payload cut by the end of the output reaches the parser: judged.
        let mut cut = guided.clone();
        cut.turns[0].expected_error = Some("unterminated".into());
        assert_ne!(classify_violation(&made, &cut).label(), "policy:guided");
        // ... but returning nothing for it (the finish reason tells the client) is the
        // server's reading; not declared, it is judged.
        let nothing = with_got(
            Invariant::Expectation,
            &text_msg("", "[{\"name\": \"search\", \"parameters\": {\"q\": \"un"),
            got("", &[]),
        );
        assert_eq!(classify_violation(&nothing, &cut).label(), "policy:guided");
        let mut undeclared = cut.clone();
        undeclared.policies = Some(Default::default());
        assert_ne!(
            classify_violation(&nothing, &undeclared).label(),
            "policy:guided"
        );
        // Not a guided request: judged.
        let mut auto = guided.clone();
        auto.tool_choice = None;
        assert_ne!(classify_violation(&made, &auto).label(), "policy:guided");
    }

    #[test]
    fn a_format_check_fed_byte_by_byte_to_an_engine_is_not_judged() {
        let c = ctx("", "");
        let mut old = v(
            Invariant::TypeInference,
            "rule string_raw: \"Paris\" typed as nothing",
        );
        old.replay =
            "conform self-check --format glm47 --parser cmd:examples/adapters/vllm/run".into();
        assert_eq!(classify_violation(&old, &c).label(), "policy:unserved");
        let mut quoted = old.clone();
        quoted.replay =
            "conform self-check --format glm47 --parser 'cmd:examples/adapters/vllm/run --reasoning'"
                .into();
        assert_eq!(classify_violation(&quoted, &c).label(), "policy:unserved");
        let mut new = old.clone();
        new.path = Some(crate::harness::serving::ReplayPath::Stream);
        assert_ne!(classify_violation(&new, &c).label(), "policy:unserved");
    }

    #[test]
    fn a_tool_choice_the_adapter_does_not_serve_is_not_judged() {
        let mut c = ctx("x", "");
        let e = with_got(Invariant::Expectation, &text_msg("", "x"), got("", &[]));
        for choice in [ToolChoice::None, ToolChoice::Named("f".into())] {
            c.tool_choice = Some(choice);
            let unserved = declaring(c.clone(), &[PolicyKind::Unserved]);
            assert_eq!(classify_violation(&e, &unserved).label(), "policy:unserved");
            assert_ne!(classify_violation(&e, &c).label(), "policy:unserved");
        }
        c.tool_choice = Some(ToolChoice::Auto);
        let unserved = declaring(c, &[PolicyKind::Unserved]);
        assert_ne!(classify_violation(&e, &unserved).label(), "policy:unserved");
    }

    #[test]
    fn a_thinking_guided_output_without_a_reasoning_parser_is_the_deployments_doing() {
        let mut c = ctx("", "");
        c.label = Some(Label::Accept);
        c.tool_choice = Some(ToolChoice::Required);
        c.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        c.turns[0].served = "<think>hm</think>[{\"name\": \"f\", \"parameters\": {}}]".into();
        c.turns[0].expected_calls = Some(vec![ToolCall {
            name: "f".into(),
            id: None,
            server: None,
            arguments: serde_json::json!({}),
        }]);
        let nothing = with_got(
            Invariant::Expectation,
            "0 call(s) parsed (1 expected)",
            got("", &[]),
        );
        let plain = declaring(c.clone(), &[PolicyKind::Reasoning]);
        assert_eq!(
            classify_violation(&nothing, &plain).label(),
            "policy:reasoning"
        );
        assert_ne!(classify_violation(&nothing, &c).label(), "policy:reasoning");
        // A variant that split the reasoning and still lost the call is judged.
        let mut split = got("", &[]);
        split.reasoning = Some("hm".into());
        let lost = with_got(
            Invariant::Expectation,
            "0 call(s) parsed (1 expected)",
            split,
        );
        assert_ne!(
            classify_violation(&lost, &plain).label(),
            "policy:reasoning"
        );
    }

    fn one_call(name: &str) -> Option<Vec<ToolCall>> {
        Some(vec![ToolCall {
            name: name.into(),
            id: None,
            server: None,
            arguments: serde_json::json!({}),
        }])
    }

    #[test]
    fn a_guided_output_no_schema_allows_is_not_judged_and_one_it_allows_is() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::Guided]);
        c.label = Some(Label::Accept);
        c.tool_choice = Some(ToolChoice::Required);
        c.turns[0].expected_calls = one_call("f");
        let lost = with_got(
            Invariant::Expectation,
            "0 call(s) parsed (1 expected)",
            got("", &[]),
        );
        // `arguments` in place of the schema's `parameters`: never produced under the schema.
        for served in [
            r#"[{"arguments": {}, "name": "f"}]"#,
            r#"{"name": "f", "parameters": {}}"#,
            r#"<tool_call>[{"name": "f", "parameters": {}}]</tool_call>"#,
        ] {
            c.turns[0].served = served.into();
            assert_eq!(
                classify_violation(&lost, &c).label(),
                "policy:guided",
                "{served}"
            );
        }
        // The schema's own shape, lost, is a bug.
        c.turns[0].served = r#" [{"parameters": {}, "name": "f"}] "#.into();
        assert!(!classify_violation(&lost, &c).label().starts_with("policy"));
        // A named tool's schema is the arguments object.
        c.tool_choice = Some(ToolChoice::Named("f".into()));
        c.turns[0].served = "{}".into();
        assert!(!classify_violation(&lost, &c).label().starts_with("policy"));
        c.turns[0].served = "{} and text".into();
        assert_eq!(classify_violation(&lost, &c).label(), "policy:guided");
        // A server that constrains the call to the format's own markup never sees the payload.
        let native = declaring(c.clone(), &[PolicyKind::GuidedNative]);
        c.turns[0].served = "{}".into();
        assert_eq!(
            classify_violation(&lost, &native).label(),
            "policy:guided_native"
        );
        c.tool_choice = None;
        let native = declaring(c, &[PolicyKind::GuidedNative]);
        assert!(
            !classify_violation(&lost, &native)
                .label()
                .starts_with("policy")
        );
    }

    #[test]
    fn bytes_a_server_decodes_with_replacement_are_not_judged_unless_markup_became_a_call() {
        let mut c = declaring(ctx("", ""), &[]);
        c.label = Some(Label::Reject);
        c.turns[0].invalid_utf8 = true;
        let msg = "no error, but the expectation says invalid_utf8";
        let read = with_got(
            Invariant::Expectation,
            msg,
            got("caf\u{fffd}", &[("f", None, "{}")]),
        );
        assert_eq!(classify_violation(&read, &c).label(), "policy:decoded");
        let marked = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f<tool_call>", None, "{}")]),
        );
        assert!(
            !classify_violation(&marked, &c)
                .label()
                .starts_with("policy")
        );
        // Valid UTF-8: judged.
        c.turns[0].invalid_utf8 = false;
        assert!(!classify_violation(&read, &c).label().starts_with("policy"));
    }

    #[test]
    fn the_whole_output_as_reasoning_is_the_deployments_when_no_think_tag_was_written() {
        let mut c = ctx("", "");
        c.label = Some(Label::Accept);
        c.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        c.turns[0].served = "Hi <tool_call>{}</tool_call>".into();
        c.turns[0].expected_calls = one_call("f");
        let mut all = got("", &[]);
        all.reasoning = Some("Hi <tool_call>{}</tool_call>".into());
        let lost = with_got(Invariant::Expectation, "0 call(s) parsed (1 expected)", all);
        let r = declaring(c.clone(), &[PolicyKind::Reasoning]);
        assert_eq!(classify_violation(&lost, &r).label(), "policy:reasoning");
        assert!(!classify_violation(&lost, &c).label().starts_with("policy"));
        // A transcript that closes its reasoning: the engine had the tag to go by.
        let mut closed = r;
        closed.turns[0].served = "Hm</think>Hi <tool_call>{}</tool_call>".into();
        assert!(
            !classify_violation(&lost, &closed)
                .label()
                .starts_with("policy")
        );
    }

    #[test]
    fn typing_readings_conform_settled_are_not_judged() {
        let mut c = declaring(ctx("", ""), &[]);
        let call = |args: serde_json::Value| {
            Some(vec![ToolCall {
                name: "f".into(),
                id: None,
                server: None,
                arguments: args,
            }])
        };
        let msg = "call 0 differs: parsed f(…) but the expectation says f(…)";
        // A Python literal conform reads into an object, kept as text.
        c.turns[0].expected_calls = call(serde_json::json!({"o": {"a": true}}));
        let kept = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"o":"{'a': True}"}"#)]),
        );
        assert_eq!(classify_violation(&kept, &c).label(), "policy:typing");
        // JSON of another object is not its spelling.
        let other = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"o":"{\"a\": false}"}"#)]),
        );
        assert!(
            !classify_violation(&other, &c).label().starts_with("policy"),
            "{}",
            classify_violation(&other, &c).label()
        );
        // Whitespace at a string's edges.
        c.turns[0].expected_calls = call(serde_json::json!({"s": "  x\n"}));
        let trimmed = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"s":"  x"}"#)]),
        );
        assert_eq!(classify_violation(&trimmed, &c).label(), "policy:typing");
        let cut = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, r#"{"s":"  "}"#)]),
        );
        assert!(!classify_violation(&cut, &c).label().starts_with("policy"));
        // A number no double holds, kept as text either way: `1e400` or its overflow.
        c.turns[0].expected_calls = call(serde_json::json!({"n": "1e400"}));
        let overflow = |text: &str| {
            let args = serde_json::json!({ "n": text }).to_string();
            let v = with_got(Invariant::Expectation, msg, got("", &[("f", None, &args)]));
            classify_violation(&v, &c).label()
        };
        assert_eq!(overflow("Infinity"), "policy:typing");
        assert!(!overflow("1e40").starts_with("policy"));
        assert!(!overflow("Paris").starts_with("policy"));
    }

    #[test]
    fn reasoning_rendered_with_its_open_tag_and_read_back_inside_it_is_the_templates() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::Reasoning]);
        c.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        let v = with_got(
            Invariant::Roundtrip,
            r#"reasoning "plan a long…" came back as "<think>plan a…"; rendered: "<think>plan…""#,
            got("", &[]),
        );
        assert_eq!(classify_violation(&v, &c).label(), "policy:reasoning");
        let other = with_got(
            Invariant::Roundtrip,
            r#"reasoning "plan" came back as "<think>other"; rendered: "<think>plan</think>""#,
            got("", &[]),
        );
        assert!(
            !classify_violation(&other, &c).label().starts_with("policy"),
            "{}",
            classify_violation(&other, &c).label()
        );
    }

    #[test]
    fn an_unrecovered_deviation_may_drop_its_call_and_keep_the_text() {
        let mut c = declaring(ctx("Reading.", ""), &[PolicyKind::Leniency]);
        c.label = Some(Label::Accept);
        c.turns[0].deviation = true;
        c.turns[0].served = "Reading.<tool_call>{\"name\": \"f\"".into();
        c.turns[0].expected_calls = Some(vec![]);
        let msg = "0 call(s) parsed () but the expectation has 1 (f)";
        let dropped = with_got(Invariant::Expectation, msg, got("Reading.", &[]));
        assert_eq!(classify_violation(&dropped, &c).label(), "policy:leniency");
        let lost = with_got(Invariant::Expectation, msg, got("Read", &[]));
        assert!(!classify_violation(&lost, &c).label().starts_with("policy"));
    }

    #[test]
    fn rejected_input_shown_as_text_without_its_markup_is_the_engines_reading() {
        let mut c = declaring(ctx("ab", ""), &[PolicyKind::Errors]);
        c.label = Some(Label::Reject);
        c.turns[0].served = "a<tool_call>stray<tool_call>b".into();
        let shown = with_got(
            Invariant::Expectation,
            &text_msg("astrayb", "ab"),
            got("astrayb", &[]),
        );
        assert_eq!(classify_violation(&shown, &c).label(), "policy:errors");
        let lost = with_got(
            Invariant::Expectation,
            &text_msg("ab", "ab"),
            got("astray", &[]),
        );
        assert!(!classify_violation(&lost, &c).label().starts_with("policy"));
        // muse_glimmer n_text_outside_message: a stray word between two messages kept, the
        // header words conform drops with them not shown: the served text in order.
        c.markers = vec!["<|message|>".into(), "<|eom|>".into(), "<|start|>".into()];
        c.turns[0].served =
            " to=user<|message|>a<|eom|>stray<|start|>assistant to=user<|message|>b".into();
        let kept = with_got(
            Invariant::Expectation,
            &text_msg("astrayb", "ab"),
            got("astrayb", &[]),
        );
        assert_eq!(classify_violation(&kept, &c).label(), "policy:errors");
        // Text the input does not hold in that order: made up.
        let added = with_got(
            Invariant::Expectation,
            &text_msg("bstraya", "ab"),
            got("abstray", &[]),
        );
        assert!(!classify_violation(&added, &c).label().starts_with("policy"));
    }

    #[test]
    fn a_think_block_left_to_a_tool_parser_without_its_reasoning_parser_is_the_deployments() {
        let mut c = declaring(ctx("\nIt is noon.", ""), &[PolicyKind::Reasoning]);
        c.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        c.turns[0].served = "<think>Maybe <tool_call>{}</tool_call></think>\nIt is noon.".into();
        let drafted = with_got(
            Invariant::Expectation,
            &text_msg("<think>Maybe", "\nIt is noon."),
            got("<think>Maybe", &[("get_time", None, "{}")]),
        );
        assert_eq!(classify_violation(&drafted, &c).label(), "policy:reasoning");
        // Markup outside the block stays a bug; so does a call made of markup.
        let leaked = with_got(
            Invariant::NoMarkupLeak,
            "text contains \"<tool_call>\" at byte 20",
            got("<think>a</think> b <tool_call>", &[]),
        );
        assert_eq!(classify_violation(&leaked, &c).label(), "markup_leaked");
        let marked = with_got(
            Invariant::Expectation,
            &text_msg("<think>Maybe", "\nIt is noon."),
            got("<think>Maybe", &[("get_time", None, "\"<tool_call>\"")]),
        );
        assert!(
            !classify_violation(&marked, &c)
                .label()
                .starts_with("policy")
        );
        // The rendered think block shown as text by such a variant.
        let back = with_got(
            Invariant::Roundtrip,
            r#"text "Plan." came back as "</think>Plan."; rendered: "</think>Plan.""#,
            got("Plan.", &[]),
        );
        assert_eq!(classify_violation(&back, &c).label(), "policy:reasoning");
        // Its two readers differing on the block's text.
        let parity = with_got(
            Invariant::StreamBatchParity,
            "text differs from byte 0: whole gives \"x\" here, this chunking \"firstx\"",
            got("firstx", &[]),
        );
        c.turns[0].served = "<think>first</think>x".into();
        assert_eq!(classify_violation(&parity, &c).label(), "policy:reasoning");
        c.turns[0].served = "firstx".into();
        assert!(
            !classify_violation(&parity, &c)
                .label()
                .starts_with("policy")
        );
        // A roundtrip violation carries no replay result: judged on its message alone.
        let bare = v(
            Invariant::Roundtrip,
            r#"text "Plan." came back as "</think>Plan."; rendered: "</think>Plan.""#,
        );
        assert_eq!(classify_violation(&bare, &c).label(), "policy:reasoning");
    }

    #[test]
    fn an_unrecovered_deviation_may_show_its_part_verbatim_beside_the_other_calls() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::Leniency]);
        c.label = Some(Label::Accept);
        c.turns[0].deviation = true;
        c.turns[0].served =
            "<tool_call>{\"name\": \"a\"}<tool_call>{\"name\": \"b\"}</tool_call>".into();
        let call = |n: &str| ToolCall {
            name: n.into(),
            id: None,
            server: None,
            arguments: serde_json::json!({}),
        };
        c.turns[0].expected_calls = Some(vec![call("a"), call("b")]);
        let msg = "1 call(s) parsed (b) but the expectation has 2 (a, b)";
        let shown = with_got(
            Invariant::Expectation,
            msg,
            got("<tool_call>{\"name\": \"a\"}", &[("b", None, "{}")]),
        );
        assert_eq!(classify_violation(&shown, &c).label(), "policy:leniency");
        // Text that is not the output's own is not showing it.
        let made_up = with_got(
            Invariant::Expectation,
            msg,
            got("{\"name\": \"c\"}", &[("b", None, "{}")]),
        );
        assert!(
            !classify_violation(&made_up, &c)
                .label()
                .starts_with("policy")
        );
        // A call's arguments changed is not a subset of the expected calls.
        let changed = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("b", None, r#"{"x":1}"#)]),
        );
        assert!(
            !classify_violation(&changed, &c)
                .label()
                .starts_with("policy")
        );
    }

    #[test]
    fn text_after_the_calls_dropped_by_an_engine_that_also_trims_whitespace() {
        let mut c = declaring(
            ctx("  Checking.\n\n Done. \n", " Done. \n"),
            &[PolicyKind::TextAfterCalls, PolicyKind::Whitespace],
        );
        let msg = text_msg("Checking.", "  Checking.\n\n Done. \n");
        assert_eq!(
            class(Invariant::Expectation, &msg, &c),
            "policy:text_after_calls"
        );
        c.policies = Some([PolicyKind::TextAfterCalls].into());
        assert!(!class(Invariant::Expectation, &msg, &c).starts_with("policy"));
    }

    #[test]
    fn a_reasoning_start_no_request_mode_expresses_is_not_judged() {
        let mut c = declaring(ctx("ab", ""), &[PolicyKind::Reasoning]);
        c.start_by_option = true;
        let v = with_got(Invariant::Expectation, &text_msg("b", "ab"), got("b", &[]));
        assert_eq!(classify_violation(&v, &c).label(), "policy:reasoning");
        c.start_by_option = false;
        assert!(!classify_violation(&v, &c).label().starts_with("policy"));
    }

    #[test]
    fn rejected_input_whose_calls_an_engine_drops_is_its_reading_text_lost_is_not() {
        // mistral `[TOOL_CALLS][{…}` unclosed before the next marker: conform salvages both
        // calls with invalid_json; SGLang's batch parse of the payload fails and drops them.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Errors]);
        c.label = Some(Label::Reject);
        c.turns[0].expected_calls =
            Some([one_call("get_time").unwrap(), one_call("get_time").unwrap()].concat());
        let msg = "0 call(s) parsed () but the expectation has 2 (get_time, get_time)";
        let none = with_got(Invariant::Expectation, msg, got("", &[]));
        assert_eq!(classify_violation(&none, &c).label(), "policy:errors");
        let one = with_got(
            Invariant::Expectation,
            "1 call(s) parsed (get_time) but the expectation has 2 (get_time, get_time)",
            got("", &[("get_time", None, "{}")]),
        );
        assert_eq!(classify_violation(&one, &c).label(), "policy:errors");
        // A malformed call made, text shown or lost, an accepted case, or no such policy:
        // judged.
        let other = with_got(
            Invariant::Expectation,
            "1 call(s) parsed (get_time) but the expectation has 2 (get_time, get_time)",
            got("", &[("get_time", None, "\"{}\"")]),
        );
        assert!(!classify_violation(&other, &c).label().starts_with("policy"));
        let shown = with_got(Invariant::Expectation, msg, got("[{", &[]));
        assert!(!classify_violation(&shown, &c).label().starts_with("policy"));
        let mut accepted = c.clone();
        accepted.label = Some(Label::Accept);
        assert!(
            !classify_violation(&none, &accepted)
                .label()
                .starts_with("policy")
        );
        let undeclared = declaring(c.clone(), &[]);
        assert!(
            !classify_violation(&none, &undeclared)
                .label()
                .starts_with("policy")
        );
    }

    #[test]
    fn a_name_kept_with_the_spaces_the_model_wrote_around_it_is_whitespace() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::Whitespace]);
        c.turns[0].expected_calls = one_call("get_time");
        let msg =
            "call 0 differs: parsed  get_time (\"{}\") but the expectation says get_time(\"{}\")";
        let spaced = with_got(
            Invariant::Expectation,
            msg,
            got("", &[(" get_time ", None, "{}")]),
        );
        assert_eq!(classify_violation(&spaced, &c).label(), "policy:whitespace");
        let other = with_got(
            Invariant::Expectation,
            msg,
            got("", &[(" get_tim ", None, "{}")]),
        );
        assert!(!classify_violation(&other, &c).label().starts_with("policy"));
        let undeclared = declaring(c.clone(), &[]);
        assert!(
            !classify_violation(&spaced, &undeclared)
                .label()
                .starts_with("policy")
        );
    }

    #[test]
    fn rejected_input_shown_as_text_without_its_markup_and_no_call_made_is_errors() {
        // mistral `[TOOL_CALLS][{…},]`: vLLM shows the payload, its marker taken out.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Errors]);
        c.label = Some(Label::Reject);
        c.markers = vec!["[TOOL_CALLS]".into()];
        c.turns[0].served = "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}},]".into();
        c.turns[0].expected_calls = one_call("get_time");
        let msg = "0 call(s) parsed () but the expectation has 1 (get_time)";
        let shown = "[{\"name\": \"get_time\", \"arguments\": {}},]";
        let v = with_got(Invariant::Expectation, msg, got(shown, &[]));
        assert_eq!(classify_violation(&v, &c).label(), "policy:errors");
        let cut = with_got(Invariant::Expectation, msg, got("[{\"name\"", &[]));
        assert!(!classify_violation(&cut, &c).label().starts_with("policy"));
    }

    #[test]
    fn a_roundtrip_value_left_as_the_rendered_text_is_typing() {
        // Seed-OSS's template writes null as `None`; vLLM leaves what it cannot type as text.
        let c = declaring(ctx("", ""), &[PolicyKind::Typing]);
        let msg = r#"call 0 search("{\"query\":\"q\",\"limit\":null}") came back as search("{\"query\":\"q\",\"limit\":\"None\"}"); rendered: "…""#;
        assert_eq!(class(Invariant::Roundtrip, msg, &c), "policy:typing");
        // Another value is no spelling of it; a cut excerpt is not read.
        let other = r#"call 0 search("{\"query\":\"q\",\"limit\":null}") came back as search("{\"query\":\"q\",\"limit\":\"7\"}"); rendered: "…""#;
        assert!(!class(Invariant::Roundtrip, other, &c).starts_with("policy"));
        let cut = r#"call 0 search("{\"query\":\"q\",\"limit\":null}") came back as search("{\"query\":\"q\",\"li…"); rendered: "…""#;
        assert!(!class(Invariant::Roundtrip, cut, &c).starts_with("policy"));
        let plain = declaring(ctx("", ""), &[]);
        assert!(!class(Invariant::Roundtrip, msg, &plain).starts_with("policy"));
    }

    #[test]
    fn an_array_refused_whole_and_shown_as_text_is_errors_though_conform_keeps_a_call() {
        // mistral `[TOOL_CALLS][{get_time}, {search: invalid}]`: conform keeps get_time; vLLM
        // refuses the whole array and shows it without its marker.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Errors]);
        c.label = Some(Label::Reject);
        c.markers = vec!["[TOOL_CALLS]".into()];
        let payload = r#"[{"name": "get_time", "arguments": {}}, {"name": "search", "arguments": {"query": }}]"#;
        c.turns[0].served = format!("[TOOL_CALLS]{payload}");
        c.turns[0].expected_calls = one_call("get_time");
        c.turns[0].expected_text = Some(String::new());
        let calls = "0 call(s) parsed () but the expectation has 1 (get_time)";
        let v = with_got(Invariant::Expectation, calls, got(payload, &[]));
        assert_eq!(classify_violation(&v, &c).label(), "policy:errors");
        let text = with_got(
            Invariant::Expectation,
            &text_msg(payload, ""),
            got(payload, &[]),
        );
        assert_eq!(classify_violation(&text, &c).label(), "policy:errors");
        // Part of it shown is a loss.
        let part = &payload[..40];
        let v = with_got(Invariant::Expectation, calls, got(part, &[]));
        assert!(!classify_violation(&v, &c).label().starts_with("policy"));
    }

    #[test]
    fn a_rejected_message_body_shown_whole_is_errors_and_a_fragment_is_not() {
        // harmony: a message on a channel conform does not know is an error and dropped; an
        // engine without an error channel shows its body.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Errors]);
        c.label = Some(Label::Reject);
        c.markers = vec!["<|channel|>".into(), "<|message|>".into(), "<|end|>".into()];
        c.turns[0].served = "<|channel|>summary<|message|>Short answer.<|end|>".into();
        c.turns[0].expected_calls = Some(vec![]);
        c.turns[0].expected_text = Some(String::new());
        let msg = "text is \"Short answer.\" but the expectation says \"\"";
        let v = with_got(Invariant::Expectation, msg, got("Short answer.", &[]));
        assert_eq!(classify_violation(&v, &c).label(), "policy:errors");
        let msg = "text is \"Short\" but the expectation says \"\"";
        let cut = with_got(Invariant::Expectation, msg, got("Short", &[]));
        assert!(!classify_violation(&cut, &c).label().starts_with("policy"));
        // Without the policy, it is the engine's to answer for.
        let mut plain = c.clone();
        plain.policies = Some(BTreeSet::new());
        assert!(!classify_violation(&v, &plain).label().starts_with("policy"));
    }

    #[test]
    fn a_roundtrip_text_rendered_after_the_calls_and_dropped_is_text_after_calls() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::TextAfterCalls]);
        c.markers = vec!["<|tool_call>".into()];
        let msg = "text \"I'll create the file now.\" came back as \"\"; rendered: \"<|tool_call>call:write_file{…}<tool_call|>I'll create the file now.\"";
        assert_eq!(
            class(Invariant::Roundtrip, msg, &c),
            "policy:text_after_calls"
        );
        // Only whitespace added or taken: `whitespace`, for an engine that declares it.
        let spaced = declaring(c.clone(), &[PolicyKind::Whitespace]);
        let newline = "text \"Looking.\\n\" came back as \"Looking.\\n\\n\"; rendered: \"Looking.\\n<tool_call>…\"";
        assert_eq!(
            class(Invariant::Roundtrip, newline, &spaced),
            "policy:whitespace"
        );
        let cut =
            "text \"Looking.\\n\" came back as \"Look\"; rendered: \"Looking.\\n<tool_call>…\"";
        assert!(!class(Invariant::Roundtrip, cut, &spaced).starts_with("policy"));
        // After the rendering's reasoning block, the calls first: the same.
        let mut thinking = c.clone();
        thinking.reasoning_pairs = vec![("<|channel>thought".into(), "<channel|>".into())];
        let reasoned = "text \"Let me check.\" came back as \"\"; rendered: \"<|channel>thought\\nPlan.<channel|><|tool_call>call…\"";
        assert_eq!(
            class(Invariant::Roundtrip, reasoned, &thinking),
            "policy:text_after_calls"
        );
        let before = "text \"I'll create the file now.\" came back as \"\"; rendered: \"I'll create the file now.<|tool_call>…\"";
        assert!(!class(Invariant::Roundtrip, before, &c).starts_with("policy"));
        let undeclared = declaring(c.clone(), &[]);
        assert!(!class(Invariant::Roundtrip, msg, &undeclared).starts_with("policy"));
    }

    #[test]
    fn streaming_and_stream_false_differing_only_in_whitespace_is_whitespace() {
        let c = declaring(ctx("Two lookups at once.", ""), &[PolicyKind::Whitespace]);
        let msg = "text differs from byte 20: whole gives \"\" here, this chunking \"\\n\"";
        let v = with_got(
            Invariant::StreamBatchParity,
            msg,
            got("Two lookups at once.\n", &[]),
        );
        assert_eq!(classify_violation(&v, &c).label(), "policy:whitespace");
        let lost = with_got(Invariant::StreamBatchParity, msg, got("Two lookups", &[]));
        assert!(!classify_violation(&lost, &c).label().starts_with("policy"));
        let undeclared = declaring(c.clone(), &[]);
        assert!(
            !classify_violation(&v, &undeclared)
                .label()
                .starts_with("policy")
        );
    }

    #[test]
    fn a_call_cut_by_max_tokens_is_judged_on_what_came_before_the_cut() {
        let served = "Let me look.<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {\"a\": \"unfini";
        let mut c = declaring(ctx("Let me look.", ""), &[PolicyKind::CallEnd]);
        c.turns[0].served = served.into();
        c.turns[0].expected_error = Some("unterminated".into());
        c.turns[0].expected_calls = one_call("f");
        let tail = "<tool_call>{\"name\": \"g\", \"arguments\": {\"a\": \"unfini";
        let label =
            |inv: Invariant, text: &str, calls: &[(&str, Option<&str>, &str)], c: &CaseContext| {
                let v = with_got(inv, &text_msg(text, "Let me look."), got(text, calls));
                classify_violation(&v, c).label()
            };
        let e = Invariant::Expectation;
        // The cut call returned as content (stream=false), or streamed with what had arrived.
        let shown = format!("Let me look.{tail}");
        assert_eq!(
            label(e, &shown, &[("f", None, "{}")], &c),
            "policy:call_end"
        );
        assert_eq!(
            label(
                Invariant::DeltaContract,
                "Let me look.",
                &[("f", None, "{}"), ("g", None, "\"{\\\"a\\\": \\\"unfini\"")],
                &c
            ),
            "policy:call_end"
        );
        // What came before the cut is still judged: a complete call lost or changed, text lost.
        assert!(!label(e, &shown, &[], &c).starts_with("policy"));
        assert!(!label(e, &shown, &[("f", None, "{\"x\":1}")], &c).starts_with("policy"));
        assert!(!label(e, "Let me", &[("f", None, "{}")], &c).starts_with("policy"));
        // A recorded transcript without an expectation, ending inside a call: the same; one
        // that does not end inside a call, or an engine that does not declare it: judged.
        let mut recorded = c.clone();
        recorded.turns[0].expected_error = None;
        recorded.turns[0].expected_text = None;
        recorded.turns[0].conform_text = "Let me look.".into();
        recorded.turns[0].ends_inside_call = true;
        assert_eq!(
            label(e, &shown, &[("f", None, "{}")], &recorded),
            "policy:call_end"
        );
        recorded.turns[0].ends_inside_call = false;
        assert!(!label(e, &shown, &[("f", None, "{}")], &recorded).starts_with("policy"));
        let undeclared = declaring(c.clone(), &[]);
        assert!(!label(e, &shown, &[("f", None, "{}")], &undeclared).starts_with("policy"));
    }

    #[test]
    fn a_reading_set_by_options_the_engine_was_not_sent_is_judged_only_where_any_reading_holds() {
        let mut c = ctx("hi", "");
        let e = with_got(
            Invariant::Expectation,
            &text_msg("x hi", "hi"),
            got("x hi", &[]),
        );
        assert!(!classify_violation(&e, &c).label().starts_with("policy"));
        c.by_option = true;
        assert_eq!(classify_violation(&e, &c).label(), "policy:options");
        let parity = with_got(
            Invariant::StreamBatchParity,
            "text differs from byte 0: whole gives \"hi\" here, this chunking \"\"",
            got("", &[]),
        );
        assert!(
            !classify_violation(&parity, &c)
                .label()
                .starts_with("policy")
        );
    }

    #[test]
    fn reasoning_that_never_closes_may_end_at_a_call() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::Reasoning]);
        c.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        c.turns[0].served = "<think>first <tool_call>{}".into();
        c.turns[0].expected_reasoning = Some("first <tool_call>{}".into());
        let mut g = got("", &[("f", None, "{}")]);
        g.reasoning = Some("first ".into());
        let v = with_got(
            Invariant::Expectation,
            "reasoning is \"first \" but the expectation says …",
            g.clone(),
        );
        assert_eq!(classify_violation(&v, &c).label(), "policy:reasoning");
        // Reasoning that differs only in whitespace, for an engine that trims it.
        let mut g2 = got("", &[]);
        g2.reasoning = Some("first <tool_call>{}\n".into());
        let ws = with_got(
            Invariant::Expectation,
            "reasoning is \"first …\" but the expectation says …",
            g2,
        );
        assert!(!classify_violation(&ws, &c).label().starts_with("policy"));
        let trims = declaring(c.clone(), &[PolicyKind::Whitespace]);
        assert_eq!(classify_violation(&ws, &trims).label(), "policy:whitespace");
        // A think block that closes: the call inside it was reasoning, and making it is a bug.
        c.turns[0].served = "<think>first <tool_call>{}</think>".into();
        assert!(!classify_violation(&v, &c).label().starts_with("policy"));
    }

    #[test]
    fn a_reasoning_channel_left_in_the_text_may_lose_its_separator() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::Reasoning]);
        c.markers = vec!["<|open|>".into(), "<|close|>".into(), "<|sep|>".into()];
        c.reasoning_pairs = vec![("<|open|>think".into(), "<|close|>think".into())];
        c.reasoning_sep = Some("<|sep|>".into());
        for text in [
            "<|close|>think",
            "plan<|close|>think<|sep|>",
            "<|open|>think<|sep|>x<|close|>think",
        ] {
            let leak = with_got(
                Invariant::NoMarkupLeak,
                "text contains \"<|close|>\" at byte 0",
                got(text, &[]),
            );
            assert_eq!(
                classify_violation(&leak, &c).label(),
                "policy:reasoning",
                "{text}"
            );
        }
        let other = with_got(
            Invariant::NoMarkupLeak,
            "text contains \"<|open|>\" at byte 0",
            got("<|close|>think<|sep|>a<|open|>call", &[]),
        );
        assert_eq!(classify_violation(&other, &c).label(), "markup_leaked");
        // The channel's tags taken out and its body left before the text, every word kept.
        c.turns[0].expected_text = Some("Hi.".into());
        c.turns[0].expected_reasoning = Some("plan".into());
        let joined = with_got(
            Invariant::Expectation,
            &text_msg("planHi.", "Hi."),
            got("planHi.", &[]),
        );
        assert_eq!(classify_violation(&joined, &c).label(), "policy:reasoning");
        let short = with_got(
            Invariant::Expectation,
            &text_msg("planH", "Hi."),
            got("planH", &[]),
        );
        assert!(!classify_violation(&short, &c).label().starts_with("policy"));
    }

    #[test]
    fn a_typing_table_row_left_as_text_is_typing_only_for_an_engine_that_declares_it() {
        let c = ctx("", "");
        let msg = "rule leading_zeros: \"007\" typed as \"007\" but the table says 7";
        let v = with_got(
            Invariant::TypeInference,
            msg,
            got("", &[("probe", None, r#"{"key":"007"}"#)]),
        );
        let typing = declaring(c.clone(), &[PolicyKind::Typing]);
        assert_eq!(classify_violation(&v, &typing).label(), "policy:typing");
        assert_ne!(classify_violation(&v, &c).label(), "policy:typing");
        // Typed as another value, or a string decoded into a number, is still a bug.
        for wrong in [r#"{"key":8}"#, r#"{"key":"8"}"#] {
            let w = with_got(
                Invariant::TypeInference,
                msg,
                got("", &[("probe", None, wrong)]),
            );
            assert_ne!(classify_violation(&w, &typing).label(), "policy:typing");
        }
        let s = "rule zip: \"007\" typed as 7 but the table says \"007\"";
        let w = with_got(
            Invariant::TypeInference,
            s,
            got("", &[("probe", None, r#"{"key":7}"#)]),
        );
        assert_ne!(classify_violation(&w, &typing).label(), "policy:typing");
    }

    #[test]
    fn the_parameters_a_deviation_wrote_dropped_is_leniency_a_changed_value_is_not() {
        // deepseek_v41 parameters without their `string` attribute: conform types them by the
        // schema (warning missing_string_attribute); the gateway skips the ones it cannot match.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Leniency]);
        c.label = Some(Label::Accept);
        c.turns[0].deviation = true;
        c.turns[0].served = "<｜DSML｜ calls>…".into();
        c.turns[0].expected_calls = Some(vec![ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: serde_json::json!({"city": "Oslo", "days": 5}),
        }]);
        let msg = "call 0 differs: parsed get_weather(\"{}\") but the expectation says get_weather(\"{\\\"city\\\":\\\"Oslo\\\",\\\"days\\\":5}\")";
        let label = |args: &str, c: &CaseContext| {
            let v = with_got(
                Invariant::Expectation,
                msg,
                got("", &[("get_weather", None, args)]),
            );
            classify_violation(&v, c).label()
        };
        assert_eq!(label("{}", &c), "policy:leniency");
        assert_eq!(label(r#"{"city":"Oslo"}"#, &c), "policy:leniency");
        assert_ne!(label(r#"{"city":"Paris"}"#, &c), "policy:leniency");
        assert_ne!(label(r#"{"city":"Oslo","x":1}"#, &c), "policy:leniency");
        assert_ne!(label(r#""{}""#, &c), "policy:leniency");
        // Only for a deviation conform recovers.
        c.turns[0].deviation = false;
        assert_ne!(label("{}", &c), "policy:leniency");
    }

    #[test]
    fn another_reading_of_a_parameter_given_twice_is_leniency_a_made_up_value_is_not() {
        // minimax_m3 `city` written twice: conform keeps the last (warning
        // duplicate_parameter); SGLang collects both into a list, others keep the first.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Leniency]);
        c.label = Some(Label::Accept);
        c.turns[0].deviation = true;
        c.turns[0].served = "<invoke name=\"get_weather\"><city>Paris</city><city>Lyon</city><days>2</days></invoke>".into();
        c.turns[0].duplicated_keys = vec!["city".into()];
        c.turns[0].expected_calls = Some(vec![ToolCall {
            name: "get_weather".into(),
            id: None,
            server: None,
            arguments: serde_json::json!({"city": "Lyon", "days": 2}),
        }]);
        let label = |args: &str, c: &CaseContext| {
            let msg = format!(
                "call 0 differs: parsed get_weather({args:?}) but the expectation says get_weather(…)"
            );
            let v = with_got(
                Invariant::Expectation,
                &msg,
                got("", &[("get_weather", None, args)]),
            );
            classify_violation(&v, c).label()
        };
        assert_eq!(
            label(r#"{"city":["Paris","Lyon"],"days":2}"#, &c),
            "policy:leniency"
        );
        assert_eq!(label(r#"{"city":"Paris","days":2}"#, &c), "policy:leniency");
        assert_eq!(label(r#"{"days":2}"#, &c), "policy:leniency");
        // A value the model did not write, another argument changed, or one added: a bug.
        assert_ne!(label(r#"{"city":"Par","days":2}x"#, &c), "policy:leniency");
        assert_ne!(label(r#"{"city":"Rome","days":2}"#, &c), "policy:leniency");
        assert_ne!(label(r#"{"city":"Paris","days":3}"#, &c), "policy:leniency");
        assert_ne!(
            label(r#"{"city":"Paris","days":2,"x":1}"#, &c),
            "policy:leniency"
        );
        assert_ne!(
            label(r#"{"city":{"a":"Paris"},"days":2}"#, &c),
            "policy:leniency"
        );
        // Only for the key given twice, and never when some replay matched.
        c.turns[0].duplicated_keys = vec!["days".into()];
        assert_ne!(label(r#"{"city":"Paris","days":2}"#, &c), "policy:leniency");
        c.turns[0].duplicated_keys = vec!["city".into()];
        c.matched_somewhere = true;
        assert_ne!(label(r#"{"city":"Paris","days":2}"#, &c), "policy:leniency");
    }

    #[test]
    fn a_call_drafted_in_reasoning_and_made_is_the_engines_reading_when_nothing_else_differs() {
        // glm47 `<think>Maybe <tool_call>get_time</tool_call> no: I know it.</think>⏎It is
        // noon.`: vLLM's parser engine ends reasoning at `<tool_call>` and drops the text
        // after the call; Dynamo lifts the call out of the reasoning.
        let mut c = declaring(ctx("\nIt is noon.", ""), &[PolicyKind::Reasoning]);
        c.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        c.turns[0].expected_reasoning =
            Some("Maybe <tool_call>get_time</tool_call> no: I know it.".into());
        c.turns[0].drafted = Some(Drafted {
            calls: one_call("get_time").unwrap(),
            text: " no: I know it.\nIt is noon.".into(),
        });
        let label = |c: &CaseContext, g: Got| {
            let msg = "1 call(s) parsed (get_time) but the expectation has 0 ()";
            classify_violation(&with_got(Invariant::Expectation, msg, g), c).label()
        };
        let call = [("get_time", None, "{}")];
        let lifted = Got {
            reasoning: Some("Maybe  no: I know it.".into()),
            ..got("\nIt is noon.", &call)
        };
        assert_eq!(label(&c, lifted.clone()), "policy:reasoning");
        assert_eq!(
            label(&c, got(" no: I know it.\nIt is noon.", &call)),
            "policy:reasoning"
        );
        // The text after the call dropped: only for an engine that declares it.
        assert_ne!(label(&c, got("", &call)), "policy:reasoning");
        let both = declaring(
            c.clone(),
            &[PolicyKind::Reasoning, PolicyKind::TextAfterCalls],
        );
        assert_eq!(label(&both, got("", &call)), "policy:reasoning");
        // A stray reasoning tag in the text, another call, other arguments, reasoning not the
        // model's: bugs.
        let stray = Got {
            reasoning: Some("Maybe ".into()),
            ..got(" no.</think>\nIt is noon.", &call)
        };
        assert_ne!(label(&both, stray), "policy:reasoning");
        assert_ne!(
            label(&both, got("", &[("get_weather", None, "{}")])),
            "policy:reasoning"
        );
        assert_ne!(
            label(&both, got("", &[("get_time", None, "{\"a\":1}")])),
            "policy:reasoning"
        );
        let made_up = Got {
            reasoning: Some("Sure".into()),
            ..lifted
        };
        assert_ne!(label(&both, made_up), "policy:reasoning");
        // Without a call drafted in reasoning, nothing to read this way.
        let mut plain = both.clone();
        plain.turns[0].drafted = None;
        assert_ne!(label(&plain, got("", &call)), "policy:reasoning");
    }

    #[test]
    fn text_before_a_think_block_taken_as_reasoning_or_run_together_is_the_reasoning_reading() {
        // seed_oss `Hmm.⏎<seed:think>Still weighing`: vLLM starts a thinking request inside
        // reasoning; dynamo-v2 (no reasoning split) keeps both as text, the tag taken out.
        let mut c = declaring(ctx("Hmm.\n", ""), &[PolicyKind::Reasoning]);
        c.reasoning_pairs = vec![("<seed:think>".into(), "</seed:think>".into())];
        c.turns[0].expected_reasoning = Some("Still weighing".into());
        let label = |c: &CaseContext, g: Got| {
            let msg = text_msg(&g.text.clone(), "Hmm.\n");
            classify_violation(&with_got(Invariant::Expectation, &msg, g), c).label()
        };
        let as_reasoning = Got {
            reasoning: Some("Hmm.\nStill weighing".into()),
            ..got("", &[])
        };
        assert_eq!(label(&c, as_reasoning), "policy:reasoning");
        assert_eq!(
            label(&c, got("Hmm.\nStill weighing", &[])),
            "policy:reasoning"
        );
        // Something lost, or the tag left in the reasoning: bugs.
        let lost = Got {
            reasoning: Some("Still weighing".into()),
            ..got("", &[])
        };
        assert_ne!(label(&c, lost), "policy:reasoning");
        // The model's own open tag kept between them: it wrote it inside the block the prompt
        // opened. Any other markup, or the tag elsewhere, is a bug.
        let tagged = Got {
            reasoning: Some("Hmm.\n<seed:think>Still weighing".into()),
            ..got("", &[])
        };
        assert_eq!(label(&c, tagged), "policy:reasoning");
        let misplaced = Got {
            reasoning: Some("Hmm.\nStill weighing<seed:think>".into()),
            ..got("", &[])
        };
        assert_ne!(label(&c, misplaced), "policy:reasoning");
        // Text after the block kept, the text before it read as reasoning.
        let mut order = declaring(ctx("Let me see.Checking.", ""), &[PolicyKind::Reasoning]);
        order.reasoning_pairs = c.reasoning_pairs.clone();
        order.turns[0].expected_reasoning = Some("W.".into());
        let split = Got {
            reasoning: Some("Let me see.<seed:think>W.".into()),
            ..got("Checking.", &[])
        };
        let msg = text_msg("Checking.", "Let me see.Checking.");
        let v = with_got(Invariant::Expectation, &msg, split);
        assert_eq!(classify_violation(&v, &order).label(), "policy:reasoning");
        let cut = Got {
            reasoning: Some("Let me see.<seed:think>W.".into()),
            ..got("Check", &[])
        };
        let v = with_got(
            Invariant::Expectation,
            &text_msg("Check", "Let me see.Checking."),
            cut,
        );
        assert_ne!(classify_violation(&v, &order).label(), "policy:reasoning");
        assert_ne!(
            label(&declaring(c.clone(), &[]), got("Hmm.\nStill weighing", &[])),
            "policy:reasoning"
        );
    }

    #[test]
    fn call_markup_written_as_data_in_reasoning_shown_as_text_without_a_reasoning_split_is_policy()
    {
        // muse_glimmer: a `to=self` message holding call markup as data; SGLang without a
        // reasoning parser shows that message's text, markup and all, then the answer.
        let r = "<atem:function_calls>…</atem:function_calls>";
        let mut c = declaring(ctx("No call.", ""), &[PolicyKind::Reasoning]);
        c.markers = vec!["<atem:function_calls>".into()];
        c.turns[0].expected_reasoning = Some(r.into());
        let leak = |text: &str| {
            let msg = r#"text contains "<atem:function_calls>" at byte 0"#;
            with_got(Invariant::NoMarkupLeak, msg, got(text, &[]))
        };
        let shown = leak(&format!("{r}No call."));
        assert_eq!(classify_violation(&shown, &c).label(), "policy:reasoning");
        // Markup beyond the reasoning's own text is a leak.
        let more = leak(&format!("{r}<atem:function_calls>No call."));
        assert_eq!(classify_violation(&more, &c).label(), "markup_leaked");
        assert_eq!(
            classify_violation(&shown, &declaring(c.clone(), &[])).label(),
            "markup_leaked"
        );
    }

    #[test]
    fn rejected_markup_dropped_to_its_close_with_the_text_after_it_kept_is_errors_policy() {
        // pythonic `[get_time() get_time()] tail`: a syntax error; conform drops the list and
        // the rest of the text (R5), SGLang drops the list and keeps ` tail`.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Errors]);
        c.label = Some(Label::Reject);
        c.turns[0].served = "[get_time() get_time()] tail".into();
        let label = |text: &str, c: &CaseContext| {
            let msg = format!("text is {} but the expectation says \"\"", excerpt(text));
            classify_violation(&with_got(Invariant::Expectation, &msg, got(text, &[])), c).label()
        };
        assert_eq!(label(" tail", &c), "policy:errors");
        // Part of the markup left in the text, or text the model did not write: a bug.
        assert!(!label("get_time()] tail", &c).starts_with("policy"));
        assert!(!label(" tall", &c).starts_with("policy"));
        // An accepted case is judged on its text.
        c.label = Some(Label::Accept);
        assert!(!label(" tail", &c).starts_with("policy"));
    }

    #[test]
    fn text_read_as_reasoning_is_policy_only_where_the_engine_declares_the_model_always_thinks() {
        // vLLM's MiniMax-M2 parser starts inside reasoning: a transcript without `</think>`
        // comes back as reasoning whole.
        let mut c = ctx("Let me check.", "");
        c.turns[0].served = "Let me check.<minimax:tool_call>…".into();
        c.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        let msg = r#"text is "" but the expectation says "Let me check.""#;
        let mut moved = got("", &[]);
        moved.reasoning = Some("Let me check.".into());
        let v = with_got(Invariant::Expectation, msg, moved.clone());
        assert!(!classify_violation(&v, &c).label().starts_with("policy"));
        let c = declaring(c, &[PolicyKind::ThinksAlways]);
        assert_eq!(classify_violation(&v, &c).label(), "policy:thinks_always");
        // Text lost outright, or a transcript that closes reasoning, is still judged.
        let lost = with_got(Invariant::Expectation, msg, got("", &[]));
        assert!(!classify_violation(&lost, &c).label().starts_with("policy"));
        let mut closed = c.clone();
        closed.turns[0].served = "<think>x</think>Let me check.".into();
        assert!(
            !classify_violation(&v, &closed)
                .label()
                .starts_with("policy")
        );
        // Text before the close tag read as reasoning, the text after it kept.
        let mut order = c.clone();
        order.turns[0].expected_text = Some("Let me see.Checking.".into());
        order.turns[0].served = "Let me see.<think>W.</think>Checking.".into();
        let msg = r#"text is "Checking." but the expectation says "Let me see.Checking.""#;
        let mut split = got("Checking.", &[]);
        split.reasoning = Some("Let me see.W.".into());
        let v = with_got(Invariant::Expectation, msg, split);
        assert_eq!(
            classify_violation(&v, &order).label(),
            "policy:thinks_always"
        );
        let v = with_got(Invariant::Expectation, msg, got("Checking.", &[]));
        assert!(!classify_violation(&v, &order).label().starts_with("policy"));
        // A call before any close tag: no output of a model that always thinks.
        let mut early = c.clone();
        early.markers = vec!["<minimax:tool_call>".into()];
        early.turns[0].served =
            "<minimax:tool_call><invoke name=\"f\"></invoke></minimax:tool_call>".into();
        let msg = "call 0 differs: parsed f(\"{}\") but the expectation says f(…)";
        let plain = with_got(Invariant::Expectation, msg, got("", &[("f", None, "{}")]));
        assert!(
            !classify_violation(&plain, &early)
                .label()
                .starts_with("policy")
        );
        let mut reasoned = got("", &[("f", None, "{}")]);
        reasoned.reasoning = Some("<minimax:tool_call>".into());
        let v = with_got(Invariant::Expectation, msg, reasoned);
        assert_eq!(
            classify_violation(&v, &early).label(),
            "policy:thinks_always"
        );
        early.turns[0].served = format!("x</think>{}", early.turns[0].served);
        assert!(!classify_violation(&v, &early).label().starts_with("policy"));
    }

    #[test]
    fn a_parameter_without_its_string_attribute_read_as_json_is_typing_a_changed_one_is_not() {
        // deepseek_v4 with no `string` attribute (warning missing_string_attribute): conform
        // types by the schema (`string`), Dynamo reads the text as JSON, else trimmed.
        let mut c = ctx("", "");
        c.label = Some(Label::Accept);
        c.turns[0].deviation = true;
        c.turns[0].attributeless_keys = vec!["w".into(), "j".into(), "e".into(), "n".into()];
        c.schemas.insert(
            "typing".into(),
            serde_json::json!({"type": "object", "properties": {
                "w": {"type": "string"}, "j": {"type": "string"}, "e": {"type": "string"},
                "n": {"type": "integer"}, "k": {"type": "string"}}}),
        );
        c.turns[0].expected_calls = Some(vec![ToolCall {
            name: "typing".into(),
            id: None,
            server: None,
            arguments: serde_json::json!(
                {"w": "null", "j": "{\"a\": 1}", "e": "  x\n", "n": 5, "k": "null"}
            ),
        }]);
        let label = |args: &str, c: &CaseContext| {
            let msg = format!(
                "call 0 differs: parsed typing({args:?}) but the expectation says typing(…)"
            );
            let v = with_got(
                Invariant::Expectation,
                &msg,
                got("", &[("typing", None, args)]),
            );
            classify_violation(&v, c).label()
        };
        let json_read = r#"{"w":null,"j":{"a":1},"e":"x","n":5,"k":"null"}"#;
        assert_eq!(label(json_read, &c), "policy:typing");
        // A parameter written with its attribute (`k`) is still the schema's: null is a bug.
        let k_null = r#"{"w":null,"j":{"a":1},"e":"x","n":5,"k":null}"#;
        assert!(!label(k_null, &c).starts_with("policy"));
        // Another value, or a value no reading of the text gives, is a bug.
        assert!(
            !label(r#"{"w":null,"j":{"a":2},"e":"x","n":5,"k":"null"}"#, &c).starts_with("policy")
        );
        assert!(
            !label(r#"{"w":false,"j":{"a":1},"e":"x","n":5,"k":"null"}"#, &c).starts_with("policy")
        );
        // Without the warning, a string the schema types plainly turned into null is a bug.
        c.turns[0].attributeless_keys.clear();
        assert!(!label(json_read, &c).starts_with("policy"));
    }

    #[test]
    fn the_key_a_duplicate_parameter_warning_names_is_read_from_it() {
        for m in [
            "parameter \"city\" given twice; the last one counts",
            "argument \"city\" given twice; the last one counts",
            "the key \"city\" is given again at byte 7; the last one counts",
        ] {
            assert_eq!(first_quoted(m).as_deref(), Some("city"), "{m}");
        }
        assert_eq!(first_quoted("no key"), None);
    }

    #[test]
    fn an_expectation_without_text_is_judged_on_conforms_reading_of_it() {
        // deepseek_v4 parameters without their `string` attribute (conform warns): SGLang
        // drops the invoke on purpose, and the expectation states calls only.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Leniency]);
        c.label = Some(Label::Accept);
        c.turns[0].expected_text = None;
        c.turns[0].conform_text = "Saving.".into();
        c.turns[0].deviation = true;
        c.turns[0].served = "Saving.<｜DSML｜tool_calls>…".into();
        c.turns[0].expected_calls = one_call("f");
        let msg = "0 call(s) parsed () but the expectation has 1 (f)";
        let dropped = with_got(Invariant::Expectation, msg, got("Saving.", &[]));
        assert_eq!(classify_violation(&dropped, &c).label(), "policy:leniency");
        let lost = with_got(Invariant::Expectation, msg, got("", &[]));
        assert!(!classify_violation(&lost, &c).label().starts_with("policy"));
    }

    #[test]
    fn a_deviation_read_when_delivered_whole_but_dropped_in_deltas_is_a_bug_not_leniency() {
        // dynamo-parsers-v2 kimi_k2: a newline in the header (warning header_whitespace) is
        // read from the whole input, and the call is dropped from every token-aligned stream.
        let mut c = declaring(ctx("", ""), &[PolicyKind::Leniency]);
        c.label = Some(Label::Accept);
        c.turns[0].deviation = true;
        c.turns[0].served =
            "<|tool_calls_section_begin|><|tool_call_begin|>\nfunctions.f:0…".into();
        c.turns[0].expected_calls = one_call("f");
        let dropped = with_got(
            Invariant::Expectation,
            "0 call(s) parsed () but the expectation has 1 (f)",
            got("", &[]),
        );
        let mut out = case(CaseStatus::Fail, vec![dropped]);
        let label = |out: &CaseOut| classify_case(out, &c).unwrap().0.label();
        assert_eq!(label(&out), "policy:leniency");
        out.matched = 1;
        assert_eq!(label(&out), "call_lost");
    }

    #[test]
    fn a_deviation_the_engine_does_not_recover_is_leniency_only_when_nothing_is_mangled() {
        // kimi_k2 without its section begin: conform recovers the call (warning
        // missing_section_begin); vLLM returns the input verbatim as text.
        let input =
            "Go.<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>ok";
        let mut c = ctx("Go.ok", "ok");
        c.label = Some(Label::Accept);
        c.turns[0].deviation = true;
        c.turns[0].served = input.into();
        c.turns[0].expected_calls = Some(vec![ToolCall {
            name: "f".into(),
            id: None,
            server: None,
            arguments: serde_json::json!({}),
        }]);
        let lenient = declaring(c.clone(), &[PolicyKind::Leniency]);
        let label = |c: &CaseContext, v: &ViolationOut| classify_violation(v, c).label();
        let e = Invariant::Expectation;
        let verbatim = with_got(e, &text_msg(input, "Go.ok"), got(input, &[]));
        assert_eq!(label(&lenient, &verbatim), "policy:leniency");
        let leak = with_got(
            Invariant::NoMarkupLeak,
            "text contains \"<|tool_call_begin|>\" at byte 3",
            got(input, &[]),
        );
        assert_eq!(label(&lenient, &leak), "policy:leniency");
        // Not declared, not a recovered deviation, or something lost: a bug.
        assert_eq!(
            label(&declaring(c.clone(), &[]), &verbatim),
            "markup_leaked"
        );
        let mut strict = lenient.clone();
        strict.turns[0].deviation = false;
        assert_eq!(label(&strict, &verbatim), "markup_leaked");
        let cut = with_got(e, &text_msg("Go.", "Go.ok"), got("Go.", &[]));
        assert_eq!(label(&lenient, &cut), "text_lost");
        // The expected calls with the deviating text dropped is leniency; other arguments are not.
        let dropped = with_got(
            e,
            &text_msg("Go.", "Go.ok"),
            got("Go.", &[("f", None, "{}")]),
        );
        assert_eq!(label(&lenient, &dropped), "policy:leniency");
        let wrong = with_got(
            e,
            &text_msg("Go.", "Go.ok"),
            got("Go.", &[("f", None, "{\"a\":1}")]),
        );
        assert_eq!(label(&lenient, &wrong), "text_lost");
        let marked = with_got(
            e,
            &text_msg("Go.<tool_call>", "Go.ok"),
            got("Go.<tool_call>", &[("f", None, "{}")]),
        );
        assert_eq!(label(&lenient, &marked), "markup_leaked");
        // SGLang's minimax-append-think puts back the `<think>` the prompt opened: with the
        // `reasoning` policy declared too, the think block is not the markup that decides.
        let mut thinking = c.clone();
        thinking.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        thinking.markers.push("<think>".into());
        let v = with_got(
            e,
            &text_msg("<think>", "Go.ok"),
            got("<think>", &[("f", None, "{}")]),
        );
        let both = declaring(
            thinking.clone(),
            &[PolicyKind::Leniency, PolicyKind::Reasoning],
        );
        assert_eq!(label(&both, &v), "policy:leniency");
        let only = declaring(thinking, &[PolicyKind::Leniency]);
        assert_eq!(label(&only, &v), "markup_leaked");
    }

    #[test]
    fn declared_policies_explain_what_the_engine_returned_and_undeclared_ones_do_not() {
        let e = Invariant::Expectation;
        let label = |c: &CaseContext, v: &ViolationOut| classify_violation(v, c).label();
        // Whitespace: the same words.
        let c = ctx("Hi.", "");
        let v = with_got(e, &text_msg("Hi.\n\n", "Hi."), got("Hi.\n\n", &[]));
        assert_eq!(
            label(&declaring(c.clone(), &[PolicyKind::Whitespace]), &v),
            "policy:whitespace"
        );
        assert_eq!(label(&declaring(c.clone(), &[]), &v), "other");
        // The stop token the server consumed.
        let mut c = ctx("Sure.<|im_end|>", "");
        c.stop_tokens = vec!["<|im_end|>".into()];
        let v = with_got(e, &text_msg("Sure.", "Sure.<|im_end|>"), got("Sure.", &[]));
        assert_eq!(
            label(&declaring(c.clone(), &[PolicyKind::StopToken]), &v),
            "policy:stop_token"
        );
        assert_eq!(label(&declaring(c, &[]), &v), "text_lost");
        // A variant that does not split reasoning keeps the think block in its text.
        let mut c = ctx("Hi.", "");
        c.reasoning_pairs = vec![("<think>".into(), "</think>".into())];
        c.markers
            .extend(["<think>".to_string(), "</think>".to_string()]);
        let t = "<think>hmm</think>Hi.";
        let v = with_got(e, &text_msg(t, "Hi."), got(t, &[]));
        assert_eq!(
            label(&declaring(c.clone(), &[PolicyKind::Reasoning]), &v),
            "policy:reasoning"
        );
        assert_eq!(label(&declaring(c.clone(), &[]), &v), "markup_leaked");
        let leak = with_got(
            Invariant::NoMarkupLeak,
            "text contains \"<think>\" at byte 0",
            got(t, &[]),
        );
        assert_eq!(
            label(&declaring(c.clone(), &[PolicyKind::Reasoning]), &leak),
            "policy:reasoning"
        );
        // ... but not a tool marker beside it.
        let both = "<think>a</think><tool_call>";
        let leak = with_got(
            Invariant::NoMarkupLeak,
            "text contains \"<tool_call>\"",
            got(both, &[]),
        );
        assert_eq!(
            label(&declaring(c, &[PolicyKind::Reasoning]), &leak),
            "markup_leaked"
        );
    }

    #[test]
    fn no_error_channel_is_policy_only_when_nothing_was_made_of_the_bad_input() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::Errors, PolicyKind::CallEnd]);
        c.label = Some(Label::Reject);
        let msg = "no error, but the expectation says invalid_json";
        let none = with_got(Invariant::Expectation, msg, got("", &[]));
        assert_eq!(classify_violation(&none, &c).label(), "policy:errors");
        // Invalid input dispatched as a well-formed call is the engine's reading of it...
        let call = with_got(Invariant::Expectation, msg, got("", &[("f", None, "{}")]));
        assert_eq!(classify_violation(&call, &c).label(), "policy:errors");
        let counted = "1 call(s) parsed (f) but the expectation has 0 ()";
        let counted_call = with_got(
            Invariant::Expectation,
            counted,
            got("", &[("f", None, "{}")]),
        );
        assert_eq!(
            classify_violation(&counted_call, &c).label(),
            "policy:errors"
        );
        // ...but arguments that are not an object, or that hold markup, are a bug.
        for args in [r#""{'a': 1}""#, r#"["a"]"#, r#"{"a":"x<tool_call>"}"#] {
            let bad = with_got(Invariant::Expectation, msg, got("", &[("f", None, args)]));
            assert_eq!(
                classify_violation(&bad, &c).label(),
                "error_verdict",
                "{args}"
            );
            let bad = with_got(
                Invariant::Expectation,
                counted,
                got("", &[("f", None, args)]),
            );
            assert!(
                !classify_violation(&bad, &c).label().starts_with("policy"),
                "{args}"
            );
        }
        // So is markup left in the text beside it.
        let leaked = with_got(
            Invariant::Expectation,
            counted,
            got("<tool_call>", &[("f", None, "{}")]),
        );
        assert_ne!(classify_violation(&leaked, &c).label(), "policy:errors");
        // A name holding markup is a bug.
        c.turns[0].expected_calls = Some(vec![ToolCall {
            name: "f".into(),
            id: None,
            server: None,
            arguments: serde_json::json!({}),
        }]);
        let marked = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f<tool_call>", None, "{}")]),
        );
        assert_eq!(classify_violation(&marked, &c).label(), "error_verdict");
        // A call cut before its end that the engine closes with the stream.
        c.turns[0].expected_calls = None;
        c.turns[0].expected_error = Some("unterminated".into());
        let closed = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, "{\"a\":1}")]),
        );
        assert_eq!(classify_violation(&closed, &c).label(), "policy:call_end");
        // Without the declarations, bugs.
        let plain = CaseContext {
            policies: Some(BTreeSet::new()),
            ..c
        };
        assert_eq!(classify_violation(&none, &plain).label(), "error_verdict");
    }

    #[test]
    fn undeclared_tools_and_ids_holding_markup() {
        let mut c = declaring(ctx("", ""), &[PolicyKind::UndeclaredTools, PolicyKind::Ids]);
        c.tools = vec!["f".into()];
        let call = |n: &str| ToolCall {
            name: n.into(),
            id: None,
            server: None,
            arguments: serde_json::json!({"a": 1}),
        };
        c.turns[0].expected_calls = Some(vec![call("f"), call("nope")]);
        let msg = "1 call(s) parsed (f) but the expectation has 2 (f, nope)";
        let v = with_got(
            Invariant::Expectation,
            msg,
            got("", &[("f", None, "{\"a\":1}")]),
        );
        assert_eq!(
            classify_violation(&v, &c).label(),
            "policy:undeclared_tools"
        );
        let lost = with_got(Invariant::Expectation, msg, got("", &[("g", None, "{}")]));
        assert_eq!(classify_violation(&lost, &c).label(), "call_lost");
        let ids = r#"call 0 differs: parsed f(id="functions.f:0<|tool_call_begin|>", {"a":1}) but the expectation says f(id="0", {"a":1})"#;
        assert_eq!(classify_violation(&v_(ids), &c).label(), "arguments_wrong");
        let ok = r#"call 0 differs: parsed f(id="call_1", {"a":1}) but the expectation says f(id="0", {"a":1})"#;
        assert_eq!(classify_violation(&v_(ok), &c).label(), "policy:ids");
    }

    fn v_(msg: &str) -> ViolationOut {
        v(Invariant::Expectation, msg)
    }
}
