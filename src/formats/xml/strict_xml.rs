//! strict_xml: AccessLint's strict XML tool calls (`specs/strict_xml.md`).
//!
//! `<read_file>{"path": "a.ts"}</read_file>` or `<read_file><path>a.ts</path></read_file>`:
//! only tools of `tools.json`, arguments validated against their JSON Schemas, and a mistake
//! counter over the turns of a session (three consecutive failing turns give `max_mistakes`).
//! Built on the shared XML tokenizer (raw mode) and the incremental JSON parser: a JSON body is
//! read in raw-until mode, and a `</NAME>` met while the JSON parser is inside a string is
//! string content.

use crate::event::{ErrorKind, Event, Sink, ToolCall};
use crate::formats::StreamParser;
use crate::formats::config::config;
use crate::formats::xml::prose::{
    ProseParser, TokenHandler, Turn, is_bare_end, is_bare_start, is_xml_ws, prose_format,
    push_piece, raw_of, raw_until,
};
use crate::lexers::json::{JsonConfig, JsonErrorKind, JsonParser};
use crate::lexers::xml::{Ctl, Token};
use crate::tools::Tools;
use serde_json::{Map, Value};
use std::sync::Arc;

config! {
    /// Parser settings; see the table in `specs/strict_xml.md` §6. The format has no leniency
    /// options: it is strict by definition.
    #[derive(Debug, Clone)]
    pub struct Config {
        options {
            /// A turn without any call is `no_tool_blocks` (S5.1).
            require_tool_call,
        }
        /// Consecutive failing turns that give `max_mistakes` (S5.2); 0 disables the counter.
        pub max_mistakes: u32,
        /// Tags whose content is reasoning: text, with every tag inside inert (S1.2).
        pub reasoning_tags: Vec<String>,
        /// Largest call body in bytes (S3.9).
        pub max_call_bytes: usize,
        /// Largest body of an unknown element held back to decide text vs. unknown tool (S2.3).
        pub max_unknown_body_bytes: usize,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            require_tool_call: true,
            max_mistakes: 3,
            reasoning_tags: vec!["thinking".into(), "think".into()],
            max_call_bytes: 16 << 20,
            max_unknown_body_bytes: 1 << 20,
        }
    }
}

/// A tool: its name, schema, compiled validator and which properties are typed (S3.5).
struct Tool {
    name: String,
    validator: Arc<jsonschema::Validator>,
    /// Properties whose schema `type` does not allow a string: XML values are parsed as JSON.
    typed: Vec<String>,
}

fn allows_string(schema: &Value) -> bool {
    match schema.get("type") {
        None => true,
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(a)) => a.iter().any(|t| t == "string"),
        Some(_) => true,
    }
}

fn tools_of(tools: &Tools) -> Vec<Tool> {
    tools
        .defs
        .iter()
        .map(|d| Tool {
            name: d.name.clone(),
            validator: d.validator().clone(),
            typed: d
                .parameters
                .get("properties")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter(|(_, s)| !allows_string(s))
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// Where the parser is inside a turn.
enum St {
    /// Outside calls.
    Prose,
    /// Inside a reasoning block (raw-until its close): text.
    Reasoning,
    /// After `<NAME>` of a known tool: which form follows?
    Open,
    /// JSON form (raw-until `</NAME>`) from stream offset `at`; `over` once the body exceeded
    /// the limit.
    Json {
        json: Box<JsonParser>,
        over: bool,
        at: u64,
    },
    /// Parameter form, between parameters.
    Between,
    /// Parameter form, inside a value (raw-until `</P>`).
    Value {
        param: String,
        buf: String,
        over: bool,
    },
    /// A failed call: raw until `</NAME>`, discarded.
    Skip,
    /// After an unknown `<X>`: held until the first non-whitespace decides.
    UnknownOpen { name: String, held: String },
    /// An unknown `<X>` whose body so far is a JSON object prefix: held (tag included) while
    /// the JSON parser accepts it; tags inside JSON strings are string content.
    UnknownBody {
        name: String,
        held: String,
        json: Box<JsonParser>,
    },
}

/// The call being parsed.
struct Call {
    tool: usize,
    index: usize,
    args: Map<String, Value>,
    size: usize,
    /// The JSON form streams the whole body; the parameter form still owes its `}`.
    json_form: bool,
    /// JSON-form body text not yet sent as a delta (sent in batches of [`DELTA_BATCH`]).
    pending: String,
}

/// JSON-form bodies stream as `ArgsDelta` fragments of at least this many bytes (the last one
/// shorter), so that a stream cut into tiny pieces does not cost one event per piece.
const DELTA_BATCH: usize = 1024;

impl Call {
    /// Streams a piece of a JSON-form body: into the batch, which goes out as one delta once
    /// it holds [`DELTA_BATCH`] bytes.
    #[inline(always)]
    fn send(&mut self, s: &str, out: &mut dyn Sink) {
        if s.len() >= DELTA_BATCH {
            return self.send_long(s, out);
        }
        push_piece(&mut self.pending, s);
        if self.pending.len() >= DELTA_BATCH {
            out.args_delta(self.index, &self.pending);
            self.pending.clear();
        }
    }

    /// [`Call::send`] for a piece that fills a batch by itself (a body fed whole is one
    /// piece): the same deltas, but a piece with nothing pending goes out where it lies, and a
    /// batch that took one in is let go. Copied into `pending`, a 10 MB body was held a second
    /// time until its call closed (a cleared `String` keeps its capacity), beside the value
    /// the JSON parser builds of it (`docs/performance.md`, h/mem6).
    #[cold]
    #[inline(never)]
    fn send_long(&mut self, s: &str, out: &mut dyn Sink) {
        if self.pending.is_empty() {
            out.args_delta(self.index, s);
            return;
        }
        self.pending.push_str(s);
        out.args_delta(self.index, &self.pending);
        self.pending = String::new();
    }
}

/// Per-turn and per-session state, and the token handler.
struct Core {
    cfg: Config,
    tools: Vec<Tool>,
    st: St,
    turn: Turn,
    call: Option<Call>,
    /// The turn produced an error.
    turn_failed: bool,
    /// The turn started a call.
    turn_called: bool,
    /// Consecutive failing turns (the session's mistake counter).
    mistakes: u32,
}

/// The strict_xml streaming parser: one session of turns, `finish` after each.
pub struct Parser(ProseParser<Core>);

impl Parser {
    /// A parser (a new session) for the tools of `tools`.
    pub fn new(config: Config, tools: &Tools) -> Parser {
        Parser(ProseParser::new(Core {
            tools: tools_of(tools),
            cfg: config,
            call: None,
            st: St::Prose,
            turn: Turn::new(),
            turn_failed: false,
            turn_called: false,
            mistakes: 0,
        }))
    }

    /// The session's count of consecutive failing turns.
    pub fn mistakes(&self) -> u32 {
        self.0.core.mistakes
    }

    /// Resets the mistake counter (for a host that got guidance from the user, as Cline does).
    pub fn reset_mistakes(&mut self) {
        self.0.core.mistakes = 0;
    }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        self.0.feed(chunk, out);
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        self.0.finish(out);
    }
}

impl Core {
    fn text(&mut self, s: &str, out: &mut dyn Sink) {
        self.turn.text(s, out);
    }

    fn error(&mut self, kind: ErrorKind, msg: String, out: &mut dyn Sink) {
        self.turn_failed = true;
        out.push(Event::error(kind, msg));
    }

    fn tool_name(&self) -> String {
        self.call
            .as_ref()
            .and_then(|c| self.tools.get(c.tool))
            .map_or_else(String::new, |t| t.name.clone())
    }

    /// Abandons the current call with an error and skips to its close tag.
    fn fail(&mut self, kind: ErrorKind, msg: String, out: &mut dyn Sink) -> Ctl {
        self.error(kind, msg, out);
        self.st = St::Skip;
        raw_until(&self.tool_name())
    }

    /// Counts `n` more body bytes against the limit; false (after reporting) when over.
    fn grow(&mut self, n: usize, at: u64, out: &mut dyn Sink) -> bool {
        let max = self.cfg.max_call_bytes;
        let Some(c) = &mut self.call else {
            return true;
        };
        let was_over = c.size > max;
        c.size = c.size.saturating_add(n);
        if c.size <= max {
            return true;
        }
        if was_over {
            return false;
        }
        let name = self.tool_name();
        self.error(
            ErrorKind::LimitExceeded,
            format!("<{name}> body exceeds max_call_bytes ({max}) at byte {at}"),
            out,
        );
        false
    }

    fn prose(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        match t {
            Token::Start {
                name,
                raw,
                self_closing,
                ..
            } => {
                let live = !self.turn.md.in_code();
                let tool = self.tools.iter().position(|x| x.name == name);
                if live && let Some(ti) = tool {
                    if !is_bare_start(name, raw) {
                        self.error(
                            ErrorKind::MalformedMarkup,
                            format!("tool tag {raw:?} at byte {at} must be a bare <{name}>"),
                            out,
                        );
                        self.turn.md.markup();
                        if self_closing {
                            return Ctl::go();
                        }
                        self.st = St::Skip;
                        return raw_until(name);
                    }
                    out.push(Event::CallStart {
                        index: self.turn.next_index,
                        id: None,
                        name: name.to_string(),
                        server: None,
                    });
                    self.turn_called = true;
                    self.call = Some(Call {
                        tool: ti,
                        index: self.turn.next_index,
                        args: Map::new(),
                        size: 0,
                        json_form: false,
                        pending: String::new(),
                    });
                    self.turn.next_index += 1;
                    self.st = St::Open;
                    return Ctl::go();
                }
                if live && is_bare_start(name, raw) {
                    if self.cfg.reasoning_tags.iter().any(|r| r == name) {
                        self.text(raw, out);
                        self.st = St::Reasoning;
                        return raw_until(name);
                    }
                    self.st = St::UnknownOpen {
                        name: name.to_string(),
                        held: raw.to_string(),
                    };
                    return Ctl::go();
                }
                self.text(raw, out);
            }
            _ => self.turn.prose_token(t, out),
        }
        Ctl::go()
    }

    fn unknown_open(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        let St::UnknownOpen { name, held } = &mut self.st else {
            return Ctl::go();
        };
        if let Token::Text(s) = t {
            let rest = s.trim_start_matches(is_xml_ws);
            if rest.is_empty() && held.len() < 4096 {
                held.push_str(s);
                return Ctl::go();
            }
            if rest.starts_with('{') {
                let name = std::mem::take(name);
                let held = std::mem::take(held);
                self.st = St::UnknownBody {
                    name,
                    held,
                    json: Box::new(JsonParser::new(JsonConfig::default())),
                };
                return self.unknown_body(t, at, out);
            }
        }
        // Not a call: the held tag is text, and this token is prose again.
        let held = std::mem::take(held);
        self.st = St::Prose;
        self.text(&held, out);
        self.prose(t, at, out)
    }

    fn unknown_body(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        let max = self.cfg.max_unknown_body_bytes;
        let St::UnknownBody { name, held, json } = &mut self.st else {
            return Ctl::go();
        };
        let raw = raw_of(&t);
        let is_close =
            matches!(t, Token::End { name: n, raw } if n == name.as_str() && is_bare_end(n, raw));
        if matches!(t, Token::Eof { .. }) {
            return Ctl::go();
        }
        if is_close && !json.in_string() {
            let is_object = matches!(json.finish(), Ok(Some(Value::Object(_))));
            let St::UnknownBody { name, held, .. } = std::mem::replace(&mut self.st, St::Prose)
            else {
                return Ctl::go();
            };
            if is_object {
                self.turn.md.markup();
                self.error(
                    ErrorKind::UnknownTool,
                    format!("<{name}> at byte {at} is not a tool of tools.json"),
                    out,
                );
            } else {
                self.text(&held, out);
                self.text(raw, out);
            }
            return Ctl::go();
        }
        // Markup outside a JSON string, or text the JSON parser rejects: not a call.
        let markup = !matches!(t, Token::Text(_));
        let fed = (!markup || json.in_string()).then(|| json.feed(raw).map(drop));
        // A JSON prefix nested past the reader's depth is still a call's body: a limit, as
        // for a body over the size limit.
        let too_deep = matches!(&fed, Some(Err(e)) if e.kind == JsonErrorKind::DepthLimit);
        if matches!(fed, Some(Ok(()))) || too_deep {
            held.push_str(raw);
            if held.len() > max || too_deep {
                let name = name.clone();
                self.st = St::Skip;
                let msg = if too_deep {
                    format!("body of <{name}> nests deeper than the JSON depth limit at byte {at}")
                } else {
                    format!("body of <{name}> exceeds max_unknown_body_bytes ({max}) at byte {at}")
                };
                self.error(ErrorKind::LimitExceeded, msg, out);
                return raw_until(&name);
            }
            return Ctl::go();
        }
        let St::UnknownBody { held, .. } = std::mem::replace(&mut self.st, St::Prose) else {
            return Ctl::go();
        };
        self.text(&held, out);
        if markup {
            self.prose(t, at, out)
        } else {
            self.text(raw, out);
            Ctl::go()
        }
    }

    fn open(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        let name = self.tool_name();
        match t {
            Token::Text(s) if s.chars().all(is_xml_ws) => Ctl::go(),
            Token::Text(s) if s.trim_start_matches(is_xml_ws).starts_with('{') => {
                self.st = St::Json {
                    json: Box::new(JsonParser::new(JsonConfig::default())),
                    over: false,
                    at,
                };
                if let Some(c) = &mut self.call {
                    c.json_form = true;
                }
                // Raw until `</NAME>` whether the first piece parses or fails (then skipped).
                let ctl = raw_until(&name);
                self.json_text(s, at, out);
                ctl
            }
            Token::Start { .. } | Token::End { .. } => self.between(t, at, out),
            _ => self.fail(
                ErrorKind::MalformedMarkup,
                format!(
                    "<{name}> at byte {at} must hold a JSON object or parameter elements, not {:?}",
                    raw_of(&t)
                ),
                out,
            ),
        }
    }

    /// A piece of a JSON-form body; streamed as a delta once it parses so far. The common
    /// case (plain string body within the limit) is taken here, small enough to inline into
    /// the token loop; the rest by [`Core::json_text_slow`], which does the same checks in
    /// full.
    #[inline(always)]
    fn json_text(&mut self, s: &str, at: u64, out: &mut dyn Sink) {
        if let (
            St::Json {
                json, over: false, ..
            },
            Some(c),
        ) = (&mut self.st, &mut self.call)
            && c.size.saturating_add(s.len()) <= self.cfg.max_call_bytes
            && json.continue_string_short(s)
        {
            c.size += s.len();
            c.send(s, out);
            return;
        }
        self.json_text_slow(s, at, out);
    }

    #[inline(never)]
    fn json_text_slow(&mut self, s: &str, at: u64, out: &mut dyn Sink) {
        // A piece crossing the limit: the JSON before the limit is read first, so that an
        // error there wins over the limit whatever the chunking made of the piece (whole
        // input reads it in a piece of its own).
        let room = match (&self.st, &self.call) {
            (St::Json { over: false, .. }, Some(c)) => {
                self.cfg.max_call_bytes.saturating_sub(c.size)
            }
            _ => usize::MAX,
        };
        let within = if s.len() > room {
            let mut k = room;
            while !s.is_char_boundary(k) {
                k -= 1;
            }
            Some(&s[..k])
        } else {
            None
        };
        let ok = within.is_none() && self.grow(s.len(), at, out);
        let St::Json {
            json,
            over,
            at: body,
        } = &mut self.st
        else {
            return;
        };
        let body_at = *body;
        if *over {
            return;
        }
        let fed = match within {
            Some(prefix) => match json.feed(prefix) {
                Ok(_) => {
                    *over = true;
                    self.grow(s.len(), at, out);
                    return;
                }
                Err(e) => Err(e),
            },
            None if !ok => {
                *over = true;
                return;
            }
            None if json.continue_string(s) => Ok(()),
            None => json.feed(s).map(drop),
        };
        match fed {
            Ok(()) => {
                if let Some(c) = &mut self.call {
                    c.send(s, out);
                }
            }
            Err(e) => {
                // Named from the body's start, the same under every chunking.
                let msg = format!(
                    "<{}> body from byte {body_at}: {e} of the body (byte {} of the stream)",
                    self.tool_name(),
                    body_at + e.offset
                );
                // Nesting past the reader's depth is a limit, as in every JSON format.
                let kind = if e.kind == JsonErrorKind::DepthLimit {
                    ErrorKind::LimitExceeded
                } else {
                    ErrorKind::InvalidJson
                };
                self.error(kind, msg, out);
                self.st = St::Skip;
            }
        }
    }

    fn json(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        match t {
            Token::Text(s) => {
                self.json_text(s, at, out);
                Ctl::go()
            }
            Token::End { raw, .. } => {
                let St::Json { json, over, .. } = &mut self.st else {
                    return Ctl::go();
                };
                if *over {
                    self.st = St::Prose;
                    self.turn.md.markup();
                    self.call = None;
                    return Ctl::go();
                }
                if json.in_string() {
                    // `</NAME>` inside a JSON string is content (S3.2).
                    self.json_text(raw, at, out);
                    return raw_until(&self.tool_name());
                }
                let res = json.finish();
                let name = self.tool_name();
                self.st = St::Prose;
                self.turn.md.markup();
                match res {
                    Ok(Some(v @ Value::Object(_))) => self.close_with(v, at, out),
                    Ok(_) => {
                        self.call = None;
                        self.error(
                            ErrorKind::InvalidJson,
                            format!("<{name}> body is not a JSON object (byte {at})"),
                            out,
                        );
                    }
                    Err(e) => {
                        self.call = None;
                        self.error(
                            ErrorKind::InvalidJson,
                            format!("<{name}> body ends at byte {at}: {e}"),
                            out,
                        );
                    }
                }
                Ctl::go()
            }
            _ => Ctl::go(),
        }
    }

    fn between(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        let name = self.tool_name();
        match t {
            Token::Text(s) if s.chars().all(is_xml_ws) => Ctl::go(),
            Token::Start {
                name: p,
                raw,
                self_closing: false,
                ..
            } if is_bare_start(p, raw) => {
                if self.call.as_ref().is_some_and(|c| c.args.contains_key(p)) {
                    return self.fail(
                        ErrorKind::MalformedMarkup,
                        format!("duplicate parameter <{p}> in <{name}> at byte {at}"),
                        out,
                    );
                }
                self.st = St::Value {
                    param: p.to_string(),
                    buf: String::new(),
                    over: false,
                };
                raw_until(p)
            }
            Token::End { name: n, raw } if n == name && is_bare_end(&name, raw) => {
                let args = self
                    .call
                    .as_mut()
                    .map(|c| std::mem::take(&mut c.args))
                    .unwrap_or_default();
                self.st = St::Prose;
                self.turn.md.markup();
                self.close_with(Value::Object(args), at, out);
                Ctl::go()
            }
            _ => self.fail(
                ErrorKind::MalformedMarkup,
                format!(
                    "unexpected {:?} between parameters of <{name}> at byte {at}",
                    raw_of(&t)
                ),
                out,
            ),
        }
    }

    fn value(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        match t {
            Token::Text(s) => {
                let ok = self.grow(s.len(), at, out);
                if let St::Value { buf, over, .. } = &mut self.st
                    && !*over
                {
                    if ok {
                        buf.push_str(s);
                    } else {
                        *over = true;
                        *buf = String::new();
                    }
                }
                Ctl::go()
            }
            Token::End { .. } => {
                let St::Value { param, buf, over } = std::mem::replace(&mut self.st, St::Between)
                else {
                    return Ctl::go();
                };
                if over {
                    self.st = St::Skip;
                    return raw_until(&self.tool_name());
                }
                let text = buf.trim_matches(is_xml_ws);
                let typed = self
                    .call
                    .as_ref()
                    .and_then(|c| self.tools.get(c.tool))
                    .is_some_and(|tool| tool.typed.contains(&param));
                let v = if typed {
                    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into()))
                } else {
                    Value::String(text.into())
                };
                if let Some(c) = &mut self.call {
                    let sep = if c.args.is_empty() { "{" } else { "," };
                    out.args_delta(c.index, &format!("{sep}{}:{}", json_str(&param), v));
                    c.args.insert(param, v);
                }
                Ctl::go()
            }
            _ => Ctl::go(),
        }
    }

    /// Validates the complete arguments and ends the call, or reports the violation.
    fn close_with(&mut self, args: Value, at: u64, out: &mut dyn Sink) {
        let Some(c) = self.call.take() else { return };
        let Some(tool) = self.tools.get(c.tool) else {
            return;
        };
        let errs: Vec<String> = tool
            .validator
            .iter_errors(&args)
            .take(3)
            .map(|e| e.to_string())
            .collect();
        let problem = (!errs.is_empty()).then(|| errs.join("; "));
        let has_params = args.as_object().is_some_and(|m| !m.is_empty());
        // The value served validation only: freed before the sink copies the text (a 10 MB
        // argument would otherwise be held three times at once).
        drop(args);
        if let Some(p) = problem {
            let msg = format!("<{}> closed at byte {at}: {p}", tool.name);
            self.error(ErrorKind::SchemaViolation, msg, out);
            return;
        }
        // The parameter form streamed `{"P":v…` (or nothing); the JSON form its body.
        if c.json_form {
            if !c.pending.is_empty() {
                out.args_delta(c.index, &c.pending);
            }
        } else {
            let close = if has_params { "}" } else { "{}" };
            out.args_delta(c.index, close);
        }
        out.push(Event::CallEnd { index: c.index });
    }

    fn end_turn(&mut self, out: &mut dyn Sink) {
        let st = std::mem::replace(&mut self.st, St::Prose);
        match st {
            St::Prose => {
                if let Some(msg) = self
                    .turn
                    .cut_tool_tag(self.tools.iter().map(|t| t.name.as_str()))
                {
                    self.error(ErrorKind::Unterminated, msg, out);
                }
            }
            St::Open | St::Json { .. } | St::Between | St::Value { .. } => {
                let msg = format!("turn ended inside <{}>", self.tool_name());
                self.error(ErrorKind::Unterminated, msg, out);
            }
            St::UnknownOpen { held, .. } | St::UnknownBody { held, .. } => self.text(&held, out),
            St::Skip | St::Reasoning => {}
        }
        if self.cfg.require_tool_call && !self.turn_called && !self.turn_failed {
            self.error(
                ErrorKind::NoToolBlocks,
                "the turn contains no tool call".into(),
                out,
            );
        }
        if self.turn_failed {
            self.mistakes = self.mistakes.saturating_add(1);
            if self.cfg.max_mistakes > 0 && self.mistakes >= self.cfg.max_mistakes {
                out.push(Event::error(
                    ErrorKind::MaxMistakes,
                    format!(
                        "{} consecutive failing turns (limit {})",
                        self.mistakes, self.cfg.max_mistakes
                    ),
                ));
            }
        } else {
            self.mistakes = 0;
        }
        self.turn.reset();
        self.call = None;
        self.turn_failed = false;
        self.turn_called = false;
    }
}

impl TokenHandler for Core {
    /// Text inside a call body (most tokens of a large call) goes straight to its handler;
    /// every other token to [`Core::dispatch`].
    #[inline(always)]
    fn token(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        if let Token::Text(s) = t
            && !self.turn.finishing
        {
            match self.st {
                St::Json { .. } => {
                    self.json_text(s, at, out);
                    return Ctl::go();
                }
                St::Value { .. } => return self.value(t, at, out),
                _ => {}
            }
        }
        self.dispatch(t, at, out)
    }

    fn turn(&mut self) -> &mut Turn {
        &mut self.turn
    }

    fn end_turn(&mut self, out: &mut dyn Sink) {
        Core::end_turn(self, out);
    }

    #[inline(always)]
    fn may_wait(&self) -> bool {
        // Its deltas go out in 1 KiB batches (S3.7), and its text changes no mode.
        matches!(self.st, St::Json { over: false, .. })
    }

    fn invalid_utf8(&mut self, offset: u64, out: &mut dyn Sink) {
        self.turn_failed = true;
        out.push(Event::invalid_utf8(offset));
    }
}

impl Core {
    /// Handles a token by parser state.
    #[inline(never)]
    fn dispatch(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        match self.st {
            St::Prose => self.prose(t, at, out),
            St::Reasoning => {
                if self.turn.reasoning_token(t, out) {
                    self.st = St::Prose;
                }
                Ctl::go()
            }
            St::UnknownOpen { .. } => self.unknown_open(t, at, out),
            St::UnknownBody { .. } => self.unknown_body(t, at, out),
            // At the end of a turn, what is left of a call is reported once as unterminated.
            _ if self.turn.finishing => Ctl::go(),
            St::Open => self.open(t, at, out),
            St::Json { .. } => self.json(t, at, out),
            St::Between => self.between(t, at, out),
            St::Value { .. } => self.value(t, at, out),
            St::Skip => {
                if let Token::End { .. } = t {
                    self.st = St::Prose;
                    self.turn.md.markup();
                    self.call = None;
                }
                Ctl::go()
            }
        }
    }
}

/// Renders text and calls as a strict_xml turn in the JSON form (`specs/strict_xml.md` §7).
pub fn render(text: &str, calls: &[ToolCall], tools: &Tools) -> Result<Vec<u8>, String> {
    use std::fmt::Write as _;
    if calls.is_empty() {
        return Err("a strict_xml turn must contain a call (require_tool_call)".into());
    }
    let mut s = text.to_string();
    for c in calls {
        if tools.get(&c.name).is_none() {
            return Err(format!("tool {:?} is not in tools.json", c.name));
        }
        if c.id.is_some() || c.server.is_some() {
            return Err("strict_xml carries no call id or server".into());
        }
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        // Written in place: a formatted copy of a huge argument would sit beside it.
        let _ = write!(s, "<{}>{}</{}>", c.name, c.arguments, c.name);
    }
    let parser = || Box::new(Parser::new(Config::default(), tools)) as Box<dyn StreamParser>;
    let back = crate::formats::read_back(parser, s.as_bytes(), calls);
    let got = &back.result;
    // What `got == ParseResult { text, calls, .. }` says, without copying the calls.
    let same = got.text == text
        && got.reasoning_text().is_empty()
        && back.same_calls
        && got.errors.is_empty();
    if !same {
        return Err(format!(
            "the rendered turn does not parse back (text not inert, or arguments fail the schema: {:?})",
            got.errors.first().map(|e| &e.message)
        ));
    }
    Ok(s.into_bytes())
}

/// A string as JSON text (for argument deltas built one parameter at a time).
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn markers(tools: &Tools) -> Vec<String> {
    let mut m = Vec::new();
    for d in &tools.defs {
        m.push(format!("<{}>", d.name));
        m.push(format!("</{}>", d.name));
    }
    m
}

prose_format!(
    "strict_xml",
    "AccessLint strict XML: <tool>{json}</tool> or <tool><param>v</param></tool>, schema-checked, 3-strike sessions"
);

#[cfg(test)]
mod tests;
