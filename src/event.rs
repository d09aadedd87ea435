//! The streaming contract: events a parser emits, and the result folded from them.

use crate::lexers::json::{JsonConfig, JsonError, JsonErrorKind, parse_complete};
use crate::names::wire_names;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The shared vocabulary of error kinds; each format's spec says which ones it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// Arguments are not valid JSON (or not a JSON object).
    InvalidJson,
    /// Arguments are empty or whitespace only.
    EmptyArguments,
    /// A call has no function name.
    MissingName,
    /// A call names a tool that the tool definitions do not declare.
    UnknownTool,
    /// Arguments do not validate against the tool's JSON Schema.
    SchemaViolation,
    /// Markup is out of place or ill-formed.
    MalformedMarkup,
    /// The stream ended inside a construct that needed an end.
    Unterminated,
    /// The bytes are not valid UTF-8.
    InvalidUtf8,
    /// An SSE or provider delta stream violates its protocol.
    InvalidStream,
    /// An explicit size or nesting limit was exceeded.
    LimitExceeded,
    /// A turn that had to contain a tool call contained none.
    NoToolBlocks,
    /// A session reached its limit of consecutive mistakes.
    MaxMistakes,
}

impl ErrorKind {}

wire_names! {
    ErrorKind {
        InvalidJson => "invalid_json",
        EmptyArguments => "empty_arguments",
        MissingName => "missing_name",
        UnknownTool => "unknown_tool",
        SchemaViolation => "schema_violation",
        MalformedMarkup => "malformed_markup",
        Unterminated => "unterminated",
        InvalidUtf8 => "invalid_utf8",
        InvalidStream => "invalid_stream",
        LimitExceeded => "limit_exceeded",
        NoToolBlocks => "no_tool_blocks",
        MaxMistakes => "max_mistakes",
    }
}

/// The kind of a `Warning`: the deviation a parser recovered, named after the leniency option
/// that allows it (see each format's `Config`), or a note a typing attaches to a value. Parsers
/// name warnings with this enum; events, expectations and reports carry its string form
/// ([`as_str`](WarningKind::as_str)), which an external parser may extend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum WarningKind {
    /// Text between calls inside a section, kept as text.
    TextInSection,
    /// Whitespace around a call header, trimmed.
    HeaderWhitespace,
    /// Arguments written as a JSON string holding an object, unwrapped.
    StringArguments,
    /// A call without its end marker, closed by what follows.
    MissingCallEnd,
    /// A section still open at the end of the stream, closed there.
    MissingSectionEnd,
    /// A call outside any section, in an implicit one.
    MissingSectionBegin,
    /// A singular section marker read as the plural one.
    SingularSectionMarker,
    /// A plural argument marker read as the singular one.
    PluralArgumentMarker,
    /// A section end outside any section, dropped.
    StraySectionEnd,
    /// A call end outside any call, dropped.
    StrayCallEnd,
    /// `parameters` in place of `arguments`.
    ParametersKey,
    /// A call object without arguments, given `{}`.
    MissingArguments,
    /// A single call object in place of an array.
    ObjectNotArray,
    /// A call without its arguments marker, read up to the arguments.
    MissingArgsMarker,
    /// Events before or without `message_start`, processed.
    AllowMissingMessageStart,
    /// A call without an id, kept without one.
    AllowMissingId,
    /// Arguments given whole in a block's start, taken.
    AcceptInputInStart,
    /// A block index that is not the next one, accepted.
    AllowBlockIndexGap,
    /// A second stop of a block, ignored.
    IgnoreDuplicateStop,
    /// Blocks still open at the message's stop, closed there.
    CloseBlocksAtMessageStop,
    /// A stream with its stop reason but no `message_stop`, accepted.
    AllowMissingMessageStop,
    /// A last SSE event without its blank line, used.
    AcceptUnterminatedEvent,
    /// A call's id or name sent again, ignored.
    AllowRepeatedHeader,
    /// A new id on an index that has a call, starting a new call.
    SplitCallsOnNewId,
    /// The same id on two indices, giving two calls.
    AllowDuplicateId,
    /// Argument fragments before the call's name, held until it comes.
    BufferArgsBeforeName,
    /// A tool-call entry without an index, placed by its id.
    InferMissingIndex,
    /// Empty arguments, taken as `{}`.
    EmptyArgumentsAsObject,
    /// A `stop` finish reason ending open calls.
    EndCallsAtStop,
    /// Open calls ended by the end of the stream without a finish reason.
    EndCallsAtStreamEnd,
    /// A stream with its finish reason but no `[DONE]`, accepted.
    AllowMissingDone,
    /// Choices other than the first, ignored.
    IgnoreExtraChoices,
    /// Text between parameters of a call, dropped.
    AllowTextBetweenParams,
    /// A bare `&`, kept.
    AllowBareAmpersand,
    /// An unknown entity, kept literally.
    AllowUnknownEntities,
    /// Attributes on call elements, ignored.
    IgnoreAttributes,
    /// A call message ended by another message terminator, or the reverse.
    CallTerminator,
    /// A message cut by the next header, ended there.
    MissingEnd,
    /// A header without its start, read as an assistant header.
    MissingStart,
    /// A recipient outside `functions.`, a call named by the whole recipient.
    BuiltinRecipient,
    /// Reasoning still open at the end of the turn, kept as reasoning.
    UnterminatedReasoning,
    /// Call markup inside reasoning, kept as reasoning.
    CallInReasoning,
    /// A reasoning close tag outside any block, dropped.
    StrayReasoningEnd,
    /// A name or key ended by a newline instead of `>`.
    MissingGt,
    /// A close tag the grammar cannot continue after, kept as value content.
    CloseTagInValue,
    /// A call outside any block, read as a call.
    MissingWrapper,
    /// A call closed by its block's close, without its own.
    MissingCallClose,
    /// Text after the last block, kept as text.
    TextAfterCalls,
    /// Text between calls inside a block, kept as text.
    TextInBlock,
    /// The two characters `\n` where a newline belongs, read as one.
    EscapedNewline,
    /// Single-quoted attribute values, read.
    SingleQuotes,
    /// A parameter without its `string` attribute, typed by the schema.
    MissingStringAttribute,
    /// A call of an undeclared tool: its values stay strings (a note, not an option).
    UnknownTool,
    /// A parameter the tool does not declare: kept as a string (a note).
    UnknownParameter,
    /// A parameter given twice: the last one counts (a note).
    DuplicateParameter,
    /// A tool schema the typing cannot read (a note).
    UnreadableSchema,
    /// A value the schema's type does not allow as written (a note).
    SchemaTypeMismatch,
    /// A value none of the parameter's types reads: kept as a string (a note).
    TypeMismatch,
    /// `null` for a parameter that does not allow null (a note).
    NullNotAllowed,
    /// `None` or `nil` read as null (option `typing.null_aliases`).
    NullAlias,
    /// A value in Python literal syntax, read (option `typing.python_literals`).
    PythonLiteral,
    /// The format's delimiters around a guided payload, stripped (option `guided.markup_around_payload`).
    MarkupAroundPayload,
    /// Text after a complete guided payload, kept as text (option `guided.text_after_payload`).
    TextAfterPayload,
    /// A call marker inside reasoning, ending it there (option `reasoning.implicit_reasoning_end`).
    ImplicitReasoningEnd,
    /// Whitespace inside a marker (a namespace token and its tag, `<|open|> tools <|sep|>`), read as the marker.
    SpacedMarker,
    /// An unquoted attribute value, read up to the tag's end.
    UnquotedAttribute,
    /// Text beside child elements, kept under `$text`.
    MixedContent,
    /// Another spelling of a delimiter, read as markup (option `marker_variants`).
    MarkerVariant,
    /// A call whose body is a JSON object, read as its arguments (option `json_invoke_body`).
    JsonInvokeBody,
    /// A self-closing call, read as a call without arguments (option `self_closing_invoke`).
    SelfClosingInvoke,
    /// A call written `call:NAME(…)`, read as `call:NAME{…}` (gemma4 option `paren_call`).
    ParenCall,
    /// A call header without its `call` word, read (gemma4 option `missing_call_prefix`).
    MissingCallPrefix,
    /// An unquoted word read as a string (gemma4 option `unquoted_string`).
    UnquotedString,
    /// A marker outside the construct it belongs to, dropped (gemma4 option `stray_marker`).
    StrayMarker,
    /// Output after a stop token, dropped (gemma4 option `text_after_stop`).
    TextAfterStop,
    /// Text outside every channel of a channel format, kept as text.
    TextOutsideChannel,
    /// A doubled namespaced name `a.a`, read as the declared tool `a` (option `doubled_name`).
    NameNormalised,
    /// A message cut by the next header without its end token (option `missing_message_end`).
    MissingMessageEnd,
    /// A call whose message recipient names another tool; the call's own name wins.
    RecipientMismatch,
    /// Calls inside a wrapper (a Markdown fence, `[TOOL_CALLS]`, `<tool_call>`), read (xlam option `json_wrapper`).
    JsonWrapper,
    /// A call's name run straight into its first tag, without the newline the template writes (option `compact_form`).
    CompactForm,
    /// Whitespace between a section's opening marker and its JSON array (option `section_whitespace`).
    SectionWhitespace,
    /// Python the template never writes in a call list: whitespace after `[` or `(` or before
    /// `(` or `=`, a comma after the last call, a comment (option `python_layout`).
    PythonLayout,
}

impl WarningKind {}

wire_names! {
    WarningKind {
        TextInSection => "text_in_section",
        HeaderWhitespace => "header_whitespace",
        StringArguments => "string_arguments",
        MissingCallEnd => "missing_call_end",
        MissingSectionEnd => "missing_section_end",
        MissingSectionBegin => "missing_section_begin",
        SingularSectionMarker => "singular_section_marker",
        PluralArgumentMarker => "plural_argument_marker",
        StraySectionEnd => "stray_section_end",
        StrayCallEnd => "stray_call_end",
        ParametersKey => "parameters_key",
        MissingArguments => "missing_arguments",
        ObjectNotArray => "object_not_array",
        MissingArgsMarker => "missing_args_marker",
        AllowMissingMessageStart => "allow_missing_message_start",
        AllowMissingId => "allow_missing_id",
        AcceptInputInStart => "accept_input_in_start",
        AllowBlockIndexGap => "allow_block_index_gap",
        IgnoreDuplicateStop => "ignore_duplicate_stop",
        CloseBlocksAtMessageStop => "close_blocks_at_message_stop",
        AllowMissingMessageStop => "allow_missing_message_stop",
        AcceptUnterminatedEvent => "accept_unterminated_event",
        AllowRepeatedHeader => "allow_repeated_header",
        SplitCallsOnNewId => "split_calls_on_new_id",
        AllowDuplicateId => "allow_duplicate_id",
        BufferArgsBeforeName => "buffer_args_before_name",
        InferMissingIndex => "infer_missing_index",
        EmptyArgumentsAsObject => "empty_arguments_as_object",
        EndCallsAtStop => "end_calls_at_stop",
        EndCallsAtStreamEnd => "end_calls_at_stream_end",
        AllowMissingDone => "allow_missing_done",
        IgnoreExtraChoices => "ignore_extra_choices",
        AllowTextBetweenParams => "allow_text_between_params",
        AllowBareAmpersand => "allow_bare_ampersand",
        AllowUnknownEntities => "allow_unknown_entities",
        IgnoreAttributes => "ignore_attributes",
        CallTerminator => "call_terminator",
        MissingEnd => "missing_end",
        MissingStart => "missing_start",
        BuiltinRecipient => "builtin_recipient",
        UnterminatedReasoning => "unterminated_reasoning",
        CallInReasoning => "call_in_reasoning",
        StrayReasoningEnd => "stray_reasoning_end",
        MissingGt => "missing_gt",
        CloseTagInValue => "close_tag_in_value",
        MissingWrapper => "missing_wrapper",
        MissingCallClose => "missing_call_close",
        TextAfterCalls => "text_after_calls",
        TextInBlock => "text_in_block",
        EscapedNewline => "escaped_newline",
        SingleQuotes => "single_quotes",
        MissingStringAttribute => "missing_string_attribute",
        UnknownTool => "unknown_tool",
        UnknownParameter => "unknown_parameter",
        DuplicateParameter => "duplicate_parameter",
        UnreadableSchema => "unreadable_schema",
        SchemaTypeMismatch => "schema_type_mismatch",
        TypeMismatch => "type_mismatch",
        NullNotAllowed => "null_not_allowed",
        NullAlias => "null_alias",
        PythonLiteral => "python_literal",
        MarkupAroundPayload => "markup_around_payload",
        TextAfterPayload => "text_after_payload",
        ImplicitReasoningEnd => "implicit_reasoning_end",
        SpacedMarker => "spaced_marker",
        UnquotedAttribute => "unquoted_attribute",
        MixedContent => "mixed_content",
        MarkerVariant => "marker_variant",
        JsonInvokeBody => "json_invoke_body",
        SelfClosingInvoke => "self_closing_invoke",
        ParenCall => "paren_call",
        MissingCallPrefix => "missing_call_prefix",
        UnquotedString => "unquoted_string",
        StrayMarker => "stray_marker",
        TextAfterStop => "text_after_stop",
        TextOutsideChannel => "text_outside_channel",
        NameNormalised => "name_normalised",
        MissingMessageEnd => "missing_message_end",
        RecipientMismatch => "recipient_mismatch",
        JsonWrapper => "json_wrapper",
        CompactForm => "compact_form",
        SectionWhitespace => "section_whitespace",
        PythonLayout => "python_layout",
    }
}

/// One thing a streaming parser observed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// Visible text, outside tool markup.
    ///
    /// Strings in events are inline up to 24 bytes: streaming deltas are mostly tiny, and a
    /// heap allocation per delta would cost more than parsing the delta.
    Text {
        /// The text.
        text: CompactString,
    },
    /// A tool call begins; `index` counts from 0 in stream order.
    CallStart {
        /// The call's position in the stream, from 0.
        index: usize,
        /// The call id the wire carries, if any (conform never invents one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The function name.
        name: String,
        /// The server (namespace) the wire names for the function, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    /// The next fragment of a call's arguments, as JSON text.
    ArgsDelta {
        /// The call the fragment belongs to.
        index: usize,
        /// The fragment: the call's deltas concatenated are its arguments' JSON text.
        json: CompactString,
    },
    /// The call is complete; its concatenated deltas are its arguments.
    CallEnd {
        /// The call that ended.
        index: usize,
    },
    /// The model's reasoning (chain of thought), outside tool markup and apart from the text.
    Reasoning {
        /// The reasoning text.
        text: CompactString,
    },
    /// The input deviated from the spec but was recovered; `kind` names the leniency option.
    Warning {
        /// The name of the leniency option that recovered the deviation.
        kind: String,
        /// What deviated, and where.
        message: String,
    },
    /// The input violates the spec.
    Error {
        /// Which rule was violated.
        kind: ErrorKind,
        /// What is wrong, and where.
        message: String,
    },
}

impl Event {
    /// Shorthand for a `Text` event.
    pub fn text(s: impl Into<CompactString>) -> Event {
        Event::Text { text: s.into() }
    }

    /// Shorthand for a `Reasoning` event.
    pub fn reasoning(s: impl Into<CompactString>) -> Event {
        Event::Reasoning { text: s.into() }
    }

    /// Shorthand for an `Error` event.
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Event {
        Event::Error {
            kind,
            message: message.into(),
        }
    }

    /// The error for an invalid UTF-8 sequence at stream byte `offset`: every format reports
    /// it in these words and goes on with U+FFFD in its place.
    pub fn invalid_utf8(offset: u64) -> Event {
        Event::error(
            ErrorKind::InvalidUtf8,
            format!("invalid UTF-8 at byte {offset}"),
        )
    }

    /// Shorthand for a `Warning` event.
    pub fn warning(kind: WarningKind, message: impl Into<String>) -> Event {
        Event::Warning {
            kind: kind.as_str().to_string(),
            message: message.into(),
        }
    }
}

/// Where a parser delivers its events: a `Vec<Event>` collects them, a server can forward them.
///
/// Argument fragments and text arrive borrowed through [`args_delta`](Sink::args_delta) and
/// [`text`](Sink::text), so a consumer that writes them straight to its output pays for no
/// event value per chunk; `specs/streaming.md` ("Delivery and its cost") says why that matters.
pub trait Sink {
    /// Takes one event.
    fn push(&mut self, event: Event);

    /// Takes the next fragment of call `index`'s arguments (an `ArgsDelta`).
    #[inline]
    fn args_delta(&mut self, index: usize, json: &str) {
        self.push(Event::ArgsDelta {
            index,
            json: json.into(),
        });
    }

    /// Takes visible text (a `Text`); empty text is no event.
    #[inline]
    fn text(&mut self, text: &str) {
        if !text.is_empty() {
            self.push(Event::text(text));
        }
    }

    /// Takes reasoning (a `Reasoning`); empty reasoning is no event.
    #[inline]
    fn reasoning(&mut self, text: &str) {
        if !text.is_empty() {
            self.push(Event::reasoning(text));
        }
    }
}

/// Folds events as a parser emits them, so that a check reading a parser's result keeps no
/// event list beside it (for a huge argument, a third copy of it).
impl Sink for Folder {
    #[inline]
    fn push(&mut self, event: Event) {
        Folder::push(self, &event);
    }

    #[inline]
    fn args_delta(&mut self, index: usize, json: &str) {
        self.push_args(index, json);
    }
}

impl Sink for Vec<Event> {
    #[inline]
    fn push(&mut self, event: Event) {
        Vec::push(self, event);
    }

    /// Merges text into a preceding `Text` event, so collected event lists stay short.
    fn text(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        if let Some(Event::Text { text }) = self.last_mut() {
            text.push_str(s);
        } else {
            Vec::push(self, Event::text(s));
        }
    }

    /// Merges reasoning into a preceding `Reasoning` event, like text.
    fn reasoning(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        if let Some(Event::Reasoning { text }) = self.last_mut() {
            text.push_str(s);
        } else {
            Vec::push(self, Event::reasoning(s));
        }
    }
}

/// A complete tool call, as folded from events or written in an expectation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolCall {
    /// The function name.
    pub name: String,
    /// The call id, when the format carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The server (namespace) of the tool, when the format carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The arguments as a JSON value.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl PartialEq for ToolCall {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.id == other.id
            && self.server == other.server
            && json_eq(&self.arguments, &other.arguments)
    }
}

/// One error as kept in a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// The shared error kind.
    pub kind: ErrorKind,
    /// A human-readable explanation, with the byte offset where it applies.
    pub message: String,
}

/// One warning as kept in a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarningInfo {
    /// The leniency option that recovered the deviation.
    pub kind: String,
    /// A human-readable explanation.
    pub message: String,
}

/// The fold of a run's events: what a consumer of the parser ends up with.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ParseResult {
    /// All `Text` events concatenated.
    pub text: String,
    /// All `Reasoning` events concatenated; `None` when the parser reported no reasoning at
    /// all (an adapter that does not report reasoning is not judged on it, `specs/adapter.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// One call per `CallStart` that reached its `CallEnd`, in start order.
    pub calls: Vec<ToolCall>,
    /// Recovered deviations, in order.
    pub warnings: Vec<WarningInfo>,
    /// Errors, in order.
    pub errors: Vec<ErrorInfo>,
    /// The `result` of an `attempt_completion` call, when the turn completed the task.
    // Shared, not copied: it can be as large as the transcript, and a large case's whole
    // input, its digest and its report all hold it (`docs/performance.md`, "Memory").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<std::sync::Arc<str>>,
    /// The ordered stream: reasoning, text and calls in the order the events gave them
    /// (`specs/streaming.md`, "The ordered stream"); `None` for a parser that reports a result
    /// and no events. Not serialized: it is a property of the events, folded from them.
    #[serde(default, skip_serializing)]
    pub order: Option<Vec<Part>>,
}

/// One part of a turn's ordered stream. Consecutive `Reasoning` events are one part, as are
/// consecutive `Text` events; each `CallStart` is a part of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Reasoning.
    Reasoning,
    /// Visible text.
    Text,
    /// A call (placed where it starts).
    Call,
}

impl Part {
    /// The wire name, as written in an expectation's `order`.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Reasoning => "reasoning",
            Part::Text => "text",
            Part::Call => "call",
        }
    }
}

/// An order for messages: `[reasoning, text, call, call]`, the first 16 parts.
pub fn order_list(order: &[Part]) -> String {
    let mut parts: Vec<&str> = order.iter().take(16).map(|p| p.as_str()).collect();
    if order.len() > 16 {
        parts.push("…");
    }
    format!("[{}]", parts.join(", "))
}

impl PartialEq for ParseResult {
    /// Equal when text, reasoning, calls and error kinds are equal (messages and warnings are
    /// not compared; no reasoning and empty reasoning are equal).
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
            && self.reasoning_text() == other.reasoning_text()
            && self.calls == other.calls
            && self.error_kinds() == other.error_kinds()
    }
}

impl ParseResult {
    /// Folds an event list into a result.
    ///
    /// Calls whose concatenated deltas are not valid JSON keep the raw text as a JSON string,
    /// so the mismatch stays visible; [`Folder::anomalies`] says why.
    pub fn fold(events: &[Event]) -> ParseResult {
        let mut f = Folder::default();
        for ev in events {
            f.push(ev);
        }
        f.finish()
    }

    /// The error kinds in order, for comparison.
    pub fn error_kinds(&self) -> Vec<ErrorKind> {
        self.errors.iter().map(|e| e.kind).collect()
    }

    /// The reasoning, empty when none was reported.
    pub fn reasoning_text(&self) -> &str {
        self.reasoning.as_deref().unwrap_or("")
    }

    /// True when the run ended without an error.
    pub fn is_success(&self) -> bool {
        self.errors.is_empty()
    }
}

/// An open call while folding: id, name, server and the arguments text so far.
#[derive(Debug)]
struct OpenCall {
    id: Option<String>,
    name: String,
    server: Option<String>,
    args: String,
}

/// Folds events one at a time, so a long stream never has to be kept as an event list.
///
/// It also notes every event that breaks the delta contract of `specs/streaming.md`; the
/// harness reports those as `delta_contract` violations.
#[derive(Debug, Default)]
pub struct Folder {
    result: ParseResult,
    /// Open calls by index: few at a time, so a stream of a million calls keeps no slot per call.
    open: std::collections::BTreeMap<usize, OpenCall>,
    /// Ended calls by start index (`ended[i]` is call `taken + i`), so the result lists calls
    /// in start order even when a later call ends first (interleaved native and in-content
    /// calls of openai_sse).
    ended: Vec<Option<ToolCall>>,
    /// Calls handed out by [`Folder::take_settled`]: `ended` starts at this index.
    taken: usize,
    /// Number of `CallStart` events seen: the index the next one must carry.
    started: usize,
    /// Delta-contract breaches seen so far, in order, each a human-readable sentence.
    pub anomalies: Vec<String>,
}

impl Folder {
    /// Takes the next event into account.
    pub fn push(&mut self, ev: &Event) {
        match ev {
            Event::Text { text } => {
                if !text.is_empty() {
                    self.part(Part::Text);
                }
                self.result.text.push_str(text)
            }
            Event::Reasoning { text } => {
                if !text.is_empty() {
                    self.part(Part::Reasoning);
                }
                self.result
                    .reasoning
                    .get_or_insert_with(String::new)
                    .push_str(text)
            }
            Event::CallStart {
                index,
                id,
                name,
                server,
            } => {
                if *index != self.started {
                    self.anomalies.push(format!(
                        "CallStart has index {index}, expected {}",
                        self.started
                    ));
                }
                self.started = self.started.max(index + 1);
                self.part(Part::Call);
                let call = OpenCall {
                    id: id.clone(),
                    name: name.clone(),
                    server: server.clone(),
                    args: String::new(),
                };
                if self.open.insert(*index, call).is_some() {
                    self.anomalies
                        .push(format!("second CallStart for open call {index}"));
                }
            }
            Event::ArgsDelta { index, json } => self.push_args(*index, json),
            Event::CallEnd { index } => {
                let Some(OpenCall {
                    id,
                    name,
                    server,
                    args,
                }) = self.open.remove(index)
                else {
                    self.anomalies
                        .push(format!("CallEnd for call {index}, which is not open"));
                    return;
                };
                let arguments = match read_json(&args, FOLD_MAX_DEPTH) {
                    // Rebuilt at its exact size: a map grown by inserts keeps room for three
                    // more entries, which a million folded calls pay in hundreds of megabytes.
                    Ok(Value::Object(m)) => Value::Object(m.into_iter().collect()),
                    // Deeper than conform reads: not the parser's breach of the contract. The
                    // text stays, so results still compare.
                    Err(e) if e.kind == JsonErrorKind::DepthLimit => Value::String(args),
                    Ok(_) | Err(_) => {
                        self.anomalies.push(format!(
                            "call {index} ({name}) ended but its fragments do not form a JSON object: {}",
                            excerpt(&args)
                        ));
                        Value::String(args)
                    }
                };
                let Some(slot) = index.checked_sub(self.taken) else {
                    // Before the calls already handed out: only a stream that broke the index
                    // order (an anomaly noted at its CallStart) gets here.
                    return;
                };
                if self.ended.len() <= slot {
                    self.ended.resize_with(slot + 1, || None);
                }
                self.ended[slot] = Some(ToolCall {
                    name,
                    id,
                    server,
                    arguments,
                });
            }
            Event::Warning { kind, message } => self.result.warnings.push(WarningInfo {
                kind: kind.clone(),
                message: message.clone(),
            }),
            Event::Error { kind, message } => self.result.errors.push(ErrorInfo {
                kind: *kind,
                message: message.clone(),
            }),
        }
    }

    /// Takes an `ArgsDelta` given by reference (no event is built for it).
    pub fn push_args(&mut self, index: usize, json: &str) {
        match self.open.get_mut(&index) {
            Some(c) => c.args.push_str(json),
            _ => self
                .anomalies
                .push(format!("ArgsDelta for call {index}, which is not open")),
        }
    }

    /// Appends a part to the ordered stream; text after text (reasoning after reasoning) is
    /// the same part, however the parser cut its events.
    fn part(&mut self, p: Part) {
        let order = self.result.order.get_or_insert_with(Vec::new);
        if p == Part::Call || order.last() != Some(&p) {
            order.push(p);
        }
    }

    /// Hands out, in start order, the ended calls no open call precedes: their place in the
    /// result is settled. A consumer that digests calls as they settle (a million-call stream)
    /// keeps none of them; [`Folder::finish`] then lists only the calls not handed out.
    pub fn take_settled(&mut self) -> Vec<ToolCall> {
        self.take_settled_indexed()
            .into_iter()
            .map(|(_, c)| c)
            .collect()
    }

    /// [`Folder::take_settled`], each call with the index its `CallStart` gave it.
    pub fn take_settled_indexed(&mut self) -> Vec<(usize, ToolCall)> {
        let first_open = self.open.keys().next().copied().unwrap_or(usize::MAX);
        let n = first_open.saturating_sub(self.taken).min(self.ended.len());
        self.take_first(n)
    }

    /// Hands out every ended call not handed out yet, with its index, in start order
    /// (calls still open are not: they never reached `CallEnd`).
    pub fn take_ended_indexed(&mut self) -> Vec<(usize, ToolCall)> {
        self.take_first(self.ended.len())
    }

    fn take_first(&mut self, n: usize) -> Vec<(usize, ToolCall)> {
        let base = self.taken;
        self.taken += n;
        self.ended
            .drain(..n)
            .enumerate()
            .filter_map(|(i, c)| c.map(|c| (base + i, c)))
            .collect()
    }

    /// Whether call `index` has started and not ended.
    pub fn is_open(&self, index: usize) -> bool {
        self.open.contains_key(&index)
    }

    /// The name of open call `index`.
    pub fn open_name(&self, index: usize) -> Option<&str> {
        self.open.get(&index).map(|c| c.name.as_str())
    }

    /// Ends the fold; calls still open are dropped (they never reached `CallEnd`).
    pub fn finish(mut self) -> ParseResult {
        self.result.order.get_or_insert_with(Vec::new);
        self.result.calls = std::mem::take(&mut self.ended)
            .into_iter()
            .flatten()
            .collect();
        self.result.completion = completion_of(&self.result.calls);
        self.result
    }

    /// Like [`Folder::finish`], also returning the contract breaches seen.
    pub fn finish_with_anomalies(mut self) -> (ParseResult, Vec<String>) {
        let anomalies = std::mem::take(&mut self.anomalies);
        (self.finish(), anomalies)
    }
}

/// The deepest arguments the fold reads, and the adapter protocol with them (outermost
/// container = 1). conform's own parsers stop at 128 levels (`limit_exceeded`); an external
/// parser may accept more, and its calls are judged up to this depth instead of being refused
/// by serde_json's 128. Not deeper: `Value`'s clone, comparison, serialization and drop
/// recurse, and must fit a 2 MiB thread stack (rayon's default) even unoptimized (the same
/// bound as [`PARTIAL_MAX_DEPTH`](crate::lexers::json::PARTIAL_MAX_DEPTH)).
pub const FOLD_MAX_DEPTH: usize = 512;

/// Reads one JSON document with conform's own reader, nesting at most `max_depth` levels.
pub fn read_json(text: &str, max_depth: usize) -> Result<Value, JsonError> {
    let cfg = JsonConfig {
        max_depth,
        ..JsonConfig::default()
    };
    parse_complete(text, cfg).map(Option::unwrap_or_default)
}

/// The compact JSON of a value, written into a buffer of its exact size: `to_string` grows its
/// buffer by doubling, so a 10 MB argument's text could take 16 MB (`docs/performance.md`).
pub fn json_exact<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(json_len(v));
    // Writing to a `Vec` does not fail, and a `Value` or a string always serializes.
    let _ = serde_json::to_writer(&mut out, v);
    out
}

/// The length of a value's compact JSON, counted without writing it.
pub fn json_len<T: Serialize + ?Sized>(v: &T) -> usize {
    /// Counts the bytes a serialization writes.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    let _ = serde_json::to_writer(&mut n, v);
    n.0
}

/// The first 80 characters of `s`, for messages.
pub fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(80).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    format!("{out:?}")
}

/// The name of the tool whose call completes the task (seed 002).
pub const COMPLETION_TOOL: &str = "attempt_completion";

/// The task-completion text: the `result` argument of the last `attempt_completion` call.
pub fn completion_of(calls: &[ToolCall]) -> Option<std::sync::Arc<str>> {
    calls
        .iter()
        .rev()
        .find(|c| c.name == COMPLETION_TOOL)
        .and_then(|c| c.arguments.get("result"))
        .and_then(|v| v.as_str())
        // One allocation: a `String` made into an `Arc<str>` is copied again.
        .map(std::sync::Arc::from)
}

/// JSON equality where numbers compare by value (`1` equals `1.0`) and object key order is ignored.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x == y {
                return true;
            }
            match (x.as_i128(), y.as_i128()) {
                (Some(p), Some(q)) => p == q,
                _ => match (x.as_f64(), y.as_f64()) {
                    (Some(p), Some(q)) => p == q,
                    _ => false,
                },
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_exact_writes_to_string_s_text_at_its_size() {
        let v = serde_json::json!({"a": "x \" é\n".repeat(1000), "b": [1, 2.5, null]});
        let got = super::json_exact(&v);
        assert_eq!(got, serde_json::to_vec(&v).unwrap());
        assert_eq!(got.capacity(), got.len());
        assert_eq!(super::json_len(&v), got.len());
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn a_vec_sink_collects_borrowed_pieces_as_events() {
        let mut out: Vec<Event> = Vec::new();
        let sink: &mut dyn Sink = &mut out;
        sink.text("a");
        sink.text("");
        sink.text("b");
        sink.push(Event::CallEnd { index: 0 });
        sink.text("c");
        sink.reasoning("r");
        sink.reasoning("");
        sink.reasoning("s");
        sink.args_delta(1, "{}");
        assert_eq!(
            out,
            vec![
                Event::text("ab"),
                Event::CallEnd { index: 0 },
                Event::text("c"),
                Event::reasoning("rs"),
                Event::ArgsDelta {
                    index: 1,
                    json: "{}".into()
                },
            ]
        );
    }

    #[test]
    fn fold_orders_reasoning_text_and_calls() {
        let start = |index| Event::CallStart {
            index,
            id: None,
            name: "f".into(),
            server: None,
        };
        let evs = vec![
            Event::reasoning("a"),
            Event::reasoning("b"),
            // Empty text is no part; text after text is the same part.
            Event::text(""),
            Event::text("x"),
            Event::text("y"),
            start(0),
            Event::CallEnd { index: 0 },
            start(1),
            Event::CallEnd { index: 1 },
            Event::text("z"),
            Event::reasoning("c"),
        ];
        let r = ParseResult::fold(&evs);
        use Part::*;
        assert_eq!(
            r.order.as_deref(),
            Some(&[Reasoning, Text, Call, Call, Text, Reasoning][..])
        );
        assert_eq!(
            order_list(r.order.as_deref().unwrap()),
            "[reasoning, text, call, call, text, reasoning]"
        );
        // A fold of no events has an empty order; a result-only parser has none.
        assert_eq!(ParseResult::fold(&[]).order, Some(vec![]));
        let wire: ParseResult =
            serde_json::from_str(r#"{"text":"","calls":[],"warnings":[],"errors":[]}"#).unwrap();
        assert_eq!(wire.order, None);
    }

    #[test]
    fn fold_keeps_only_ended_calls() {
        let evs = vec![
            Event::text("hi "),
            Event::CallStart {
                index: 0,
                id: Some("0".into()),
                name: "a".into(),
                server: None,
            },
            Event::ArgsDelta {
                index: 0,
                json: "{\"x\":".into(),
            },
            Event::ArgsDelta {
                index: 0,
                json: "1}".into(),
            },
            Event::CallEnd { index: 0 },
            Event::CallStart {
                index: 1,
                id: None,
                name: "b".into(),
                server: None,
            },
            Event::error(ErrorKind::InvalidJson, "bad"),
        ];
        let r = ParseResult::fold(&evs);
        assert_eq!(r.text, "hi ");
        assert_eq!(r.reasoning, None);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].arguments, json!({"x": 1}));
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        let r = ParseResult::fold(&[
            Event::reasoning("a"),
            Event::text("t"),
            Event::reasoning("b"),
        ]);
        assert_eq!(r.reasoning.as_deref(), Some("ab"));
    }

    #[test]
    fn arguments_as_deep_as_the_fold_reads_are_no_contract_breach_and_fit_a_thread_stack() {
        let nest = |depth: usize| {
            let mut s = "[".repeat(depth - 1);
            s.insert_str(0, "{\"a\":");
            s.push_str(&"]".repeat(depth - 1));
            s.push('}');
            s
        };
        let fold = |args: &str| {
            let mut f = Folder::default();
            f.push(&Event::CallStart {
                index: 0,
                id: None,
                name: "f".into(),
                server: None,
            });
            f.push(&Event::ArgsDelta {
                index: 0,
                json: args.into(),
            });
            f.push(&Event::CallEnd { index: 0 });
            f.finish_with_anomalies()
        };
        // serde_json stops at 128 levels; the fold must not blame the parser for that.
        let deep = nest(FOLD_MAX_DEPTH);
        assert!(serde_json::from_str::<Value>(&deep).is_err());
        // What the harness does with a result (clone, compare, serialize, drop) must not
        // overflow a 2 MiB thread stack (rayon's and the test harness's default) even
        // unoptimized.
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let (r, anomalies) = fold(&deep);
                assert_eq!(anomalies, Vec::<String>::new());
                assert!(r.calls[0].arguments.is_object());
                let copy = r.clone();
                assert!(json_eq(&copy.calls[0].arguments, &r.calls[0].arguments));
                assert!(serde_json::to_string(&r).unwrap().len() > 2 * FOLD_MAX_DEPTH);
            })
            .unwrap()
            .join()
            .unwrap();
        // Deeper still: kept as text, and still no contract breach.
        let deeper = nest(FOLD_MAX_DEPTH + 1);
        let (r, anomalies) = fold(&deeper);
        assert_eq!(anomalies, Vec::<String>::new());
        assert_eq!(r.calls[0].arguments, Value::String(deeper));
        // Fragments that are not JSON still are.
        assert_eq!(fold("{\"a\":").1.len(), 1);
    }

    #[test]
    fn json_eq_compares_numbers_by_value_and_ignores_key_order() {
        assert!(json_eq(
            &json!({"a": 1, "b": [2.0]}),
            &json!({"b": [2], "a": 1.0})
        ));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": "1"})));
        assert!(!json_eq(&json!([1, 2]), &json!([2, 1])));
    }

    #[test]
    fn completion_is_the_result_of_attempt_completion() {
        let calls = vec![ToolCall {
            name: COMPLETION_TOOL.into(),
            id: None,
            server: None,
            arguments: json!({"result": "done"}),
        }];
        assert_eq!(completion_of(&calls).as_deref(), Some("done"));
    }
}
