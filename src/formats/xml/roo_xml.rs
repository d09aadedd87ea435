//! roo_xml: the Roo Code / Cline XML tool protocol (`specs/roo_xml.md`).
//!
//! `I'll create it.⏎<write_to_file>⏎<path>hello.txt</path>⏎<content>⏎Hello⏎</content>⏎</write_to_file>`:
//! tool and parameter names come from `tools.json`, values are raw strings, prose around calls
//! is text. Built on the shared XML tokenizer: parameter values are read in its raw-until mode,
//! and the `</content>` rescue is a look-ahead over the tokens that follow a close tag.

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::formats::StreamParser;
use crate::formats::config::config;
use crate::formats::xml::prose::{
    ProseParser, TokenHandler, Turn, is_bare_end, is_bare_start, is_xml_ws, prose_format,
    push_piece, raw_of, raw_until,
};
use crate::lexers::xml::{Ctl, Token};
use crate::tools::Tools;
use serde_json::Value;

config! {
    /// Parser settings; see the table in `specs/roo_xml.md` §7.
    #[derive(Debug, Clone)]
    pub struct Config {
        options {
            /// Leniency (R3.4, default off): drop non-whitespace text and foreign tags between
            /// parameters with a warning, as Roo does, instead of rejecting the call.
            allow_text_between_params,
        }
        /// Parameters closed by the `</P>` look-ahead of R4.4 and trimmed of one line break only.
        pub rescue_params: Vec<String>,
        /// Tags whose content is reasoning: text, with every tag inside inert (R2.3).
        pub reasoning_tags: Vec<String>,
        /// Largest parameter value in bytes (R4.7).
        pub max_param_bytes: usize,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            allow_text_between_params: false,
            rescue_params: vec!["content".into()],
            reasoning_tags: vec!["thinking".into(), "think".into()],
            max_param_bytes: 16 << 20,
        }
    }
}

/// A tool as this format sees it.
#[derive(Debug, Clone)]
struct Tool {
    name: String,
    params: Vec<String>,
    required: Vec<String>,
}

fn tools_of(tools: &Tools) -> Vec<Tool> {
    tools
        .defs
        .iter()
        .map(|d| Tool {
            name: d.name.clone(),
            params: d.param_names().map(str::to_string).collect(),
            required: d
                .parameters
                .get("required")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// Where the parser is inside a turn.
#[derive(Debug)]
enum St {
    /// Outside calls.
    Prose,
    /// Inside a reasoning block (tokenizer in raw-until mode): all text.
    Reasoning,
    /// Inside a call, between parameters.
    Between,
    /// Inside a parameter value (raw-until `</P>`); `over` once it exceeded the limit.
    Value {
        param: String,
        buf: String,
        over: bool,
    },
    /// After a rescue parameter's `</P>`: is the next thing the tool's close or a parameter?
    Lookahead {
        param: String,
        buf: String,
        hold: String,
    },
    /// A broken call: raw until `</NAME>`, discarded.
    Skip,
    /// Leniency: a foreign element dropped up to its close, then back between parameters.
    SkipElem,
}

/// The call being parsed.
#[derive(Debug)]
struct Call {
    tool: usize,
    index: usize,
    seen: Vec<String>,
    warned: bool,
}

/// Per-turn state and the token handler.
struct Core {
    cfg: Config,
    tools: Vec<Tool>,
    st: St,
    turn: Turn,
    call: Option<Call>,
}

/// The roo_xml streaming parser (one session of turns).
pub struct Parser(ProseParser<Core>);

impl Parser {
    /// A parser for the tools of `tools`.
    pub fn new(config: Config, tools: &Tools) -> Parser {
        Parser(ProseParser::new(Core {
            cfg: config,
            tools: tools_of(tools),
            st: St::Prose,
            turn: Turn::new(),
            call: None,
        }))
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

    fn tool_name(&self) -> &str {
        self.call
            .as_ref()
            .and_then(|c| self.tools.get(c.tool))
            .map_or("", |t| t.name.as_str())
    }

    fn is_own_param(&self, name: &str) -> bool {
        self.call
            .as_ref()
            .and_then(|c| self.tools.get(c.tool))
            .is_some_and(|t| t.params.iter().any(|p| p == name))
    }

    fn is_rescue(&self, param: &str) -> bool {
        self.cfg.rescue_params.iter().any(|p| p == param)
    }

    /// Abandons the current call with an error and skips to its close tag.
    fn fail(&mut self, kind: ErrorKind, msg: String, out: &mut dyn Sink) -> Ctl {
        out.push(Event::error(kind, msg));
        self.st = St::Skip;
        let name = self.tool_name().to_string();
        raw_until(&name)
    }

    fn prose(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        match t {
            Token::Start { name, raw, .. } => {
                let live = !self.turn.md.in_code();
                if live && is_bare_start(name, raw) {
                    if let Some(ti) = self.tools.iter().position(|x| x.name == name) {
                        out.push(Event::CallStart {
                            index: self.turn.next_index,
                            id: None,
                            name: name.to_string(),
                            server: None,
                        });
                        self.call = Some(Call {
                            tool: ti,
                            index: self.turn.next_index,
                            seen: Vec::new(),
                            warned: false,
                        });
                        self.turn.next_index += 1;
                        self.st = St::Between;
                        return Ctl::go();
                    }
                    if self.cfg.reasoning_tags.iter().any(|r| r == name) {
                        self.text(raw, out);
                        self.st = St::Reasoning;
                        return raw_until(name);
                    }
                }
                self.text(raw, out);
            }
            _ => {
                let _ = at;
                self.turn.prose_token(t, out);
            }
        }
        Ctl::go()
    }

    fn between(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        match t {
            Token::Text(s) if s.chars().all(is_xml_ws) => Ctl::go(),
            Token::Start {
                name,
                raw,
                self_closing,
                ..
            } => {
                if is_bare_start(name, raw) && self.is_own_param(name) {
                    if self
                        .call
                        .as_ref()
                        .is_some_and(|c| c.seen.iter().any(|p| p == name))
                    {
                        return self.fail(
                            ErrorKind::MalformedMarkup,
                            format!(
                                "duplicate parameter <{name}> in <{}> at byte {at}",
                                self.tool_name()
                            ),
                            out,
                        );
                    }
                    self.st = St::Value {
                        param: name.to_string(),
                        buf: String::new(),
                        over: false,
                    };
                    return raw_until(name);
                }
                let elem = (!self_closing).then_some(name);
                self.stray(raw, elem, at, out)
            }
            Token::End { name, raw } => {
                if is_bare_end(self.tool_name(), raw) && name == self.tool_name() {
                    self.close_call(at, out);
                    Ctl::go()
                } else {
                    self.stray(raw, None, at, out)
                }
            }
            Token::Eof { .. } => Ctl::go(),
            _ => {
                let raw = raw_of(&t);
                self.stray(raw, None, at, out)
            }
        }
    }

    /// Something other than a parameter between parameters (R3.4).
    fn stray(&mut self, raw: &str, elem: Option<&str>, at: u64, out: &mut dyn Sink) -> Ctl {
        let tool = self.tool_name().to_string();
        if self.cfg.allow_text_between_params {
            if let Some(c) = &mut self.call
                && !c.warned
            {
                c.warned = true;
                out.push(Event::warning(
                    WarningKind::AllowTextBetweenParams,
                    format!("dropped {raw:?} between parameters of <{tool}> at byte {at}"),
                ));
            }
            if let Some(e) = elem {
                self.st = St::SkipElem;
                return raw_until(e);
            }
            return Ctl::go();
        }
        self.fail(
            ErrorKind::MalformedMarkup,
            format!("unexpected {raw:?} between parameters of <{tool}> at byte {at}"),
            out,
        )
    }

    fn complete_param(&mut self, param: &str, buf: &str, out: &mut dyn Sink) {
        let value = if self.is_rescue(param) {
            let v = buf
                .strip_prefix("\r\n")
                .or_else(|| buf.strip_prefix('\n'))
                .unwrap_or(buf);
            v.strip_suffix("\r\n")
                .or_else(|| v.strip_suffix('\n'))
                .unwrap_or(v)
        } else {
            buf.trim_matches(is_xml_ws)
        };
        if let Some(c) = &mut self.call {
            let sep = if c.seen.is_empty() { "{" } else { "," };
            // `{sep}"param":"value"` written once at its size: formatting the escaped value
            // (itself in a doubling buffer) held a 10 MB parameter four times at once.
            let (k, v) = (crate::event::json_len(param), crate::event::json_len(value));
            let mut text = Vec::with_capacity(sep.len() + k + 1 + v);
            text.extend_from_slice(sep.as_bytes());
            let _ = serde_json::to_writer(&mut text, param);
            text.push(b':');
            let _ = serde_json::to_writer(&mut text, value);
            out.args_delta(c.index, std::str::from_utf8(&text).unwrap_or_default());
            c.seen.push(param.to_string());
        }
        self.st = St::Between;
    }

    fn close_call(&mut self, at: u64, out: &mut dyn Sink) {
        self.st = St::Prose;
        self.turn.md.markup();
        let Some(c) = self.call.take() else { return };
        let Some(tool) = self.tools.get(c.tool) else {
            return;
        };
        let missing: Vec<&str> = tool
            .required
            .iter()
            .filter(|r| !c.seen.contains(r))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            out.push(Event::error(
                ErrorKind::SchemaViolation,
                format!(
                    "<{}> closed at byte {at} without required parameter(s) {}",
                    tool.name,
                    missing.join(", ")
                ),
            ));
            return;
        }
        let close = if c.seen.is_empty() { "{}" } else { "}" };
        out.args_delta(c.index, close);
        out.push(Event::CallEnd { index: c.index });
    }

    /// Collects a piece of a parameter value: the per-chunk path of a streamed call.
    #[inline]
    fn value_text(&mut self, s: &str, at: u64, out: &mut dyn Sink) {
        let St::Value { buf, over, .. } = &mut self.st else {
            return;
        };
        if *over {
            return;
        }
        if buf.len() + s.len() > self.cfg.max_param_bytes {
            self.value_too_long(at, out);
        } else {
            push_piece(buf, s);
        }
    }

    /// A parameter value passed `max_param_bytes`: reported now; the value is then skipped to
    /// its close, and the call to `</NAME>` (the mode changes at the close, not inside raw
    /// text).
    #[cold]
    fn value_too_long(&mut self, at: u64, out: &mut dyn Sink) {
        let max = self.cfg.max_param_bytes;
        let St::Value { param, buf, over } = &mut self.st else {
            return;
        };
        out.push(Event::error(
            ErrorKind::LimitExceeded,
            format!("parameter <{param}> exceeds max_param_bytes ({max}) at byte {at}"),
        ));
        *over = true;
        *buf = String::new();
    }

    fn value(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        let St::Value { param, buf, over } = &mut self.st else {
            return Ctl::go();
        };
        match t {
            Token::Text(s) => self.value_text(s, at, out),
            Token::End { raw, .. } => {
                if *over {
                    self.st = St::Skip;
                    let name = self.tool_name().to_string();
                    return raw_until(&name);
                }
                let param = std::mem::take(param);
                let buf = std::mem::take(buf);
                if self.is_rescue(&param) {
                    self.st = St::Lookahead {
                        param,
                        buf,
                        hold: raw.to_string(),
                    };
                } else {
                    self.complete_param(&param, &buf, out);
                }
            }
            _ => {}
        }
        Ctl::go()
    }

    fn lookahead(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        let St::Lookahead { param, buf, hold } = &mut self.st else {
            return Ctl::go();
        };
        let closes = match &t {
            Token::Text(s) if s.chars().all(is_xml_ws) => {
                hold.push_str(s);
                if buf.len() + hold.len() > self.cfg.max_param_bytes {
                    let msg = format!(
                        "parameter <{param}> exceeds max_param_bytes ({}) at byte {at}",
                        self.cfg.max_param_bytes
                    );
                    return self.fail(ErrorKind::LimitExceeded, msg, out);
                }
                return Ctl::go();
            }
            Token::Start { name, raw, .. } => is_bare_start(name, raw) && self.is_own_param(name),
            Token::End { name, raw } => {
                is_bare_end(self.tool_name(), raw) && *name == self.tool_name()
            }
            _ => false,
        };
        let St::Lookahead { param, buf, hold } = std::mem::replace(&mut self.st, St::Prose) else {
            return Ctl::go();
        };
        if closes {
            self.complete_param(&param, &buf, out);
            return self.between(t, at, out);
        }
        // Not a close after all: the held `</P>`, whitespace and this token are content.
        let mut buf = buf;
        buf.push_str(&hold);
        buf.push_str(match t {
            Token::SectionStart(sec) => sec.open(),
            _ => raw_of(&t),
        });
        let over = buf.len() > self.cfg.max_param_bytes;
        if over {
            out.push(Event::error(
                ErrorKind::LimitExceeded,
                format!(
                    "parameter <{param}> exceeds max_param_bytes ({}) at byte {at}",
                    self.cfg.max_param_bytes
                ),
            ));
            buf = String::new();
        }
        let ctl = raw_until(&param);
        self.st = St::Value { param, buf, over };
        ctl
    }

    fn end_turn(&mut self, out: &mut dyn Sink) {
        let st = std::mem::replace(&mut self.st, St::Prose);
        match st {
            St::Prose => {
                if let Some(msg) = self
                    .turn
                    .cut_tool_tag(self.tools.iter().map(|t| t.name.as_str()))
                {
                    out.push(Event::error(ErrorKind::Unterminated, msg));
                }
            }
            St::Between | St::Value { .. } | St::Lookahead { .. } | St::SkipElem => {
                out.push(Event::error(
                    ErrorKind::Unterminated,
                    format!("turn ended inside <{}>", self.tool_name()),
                ));
            }
            St::Skip | St::Reasoning => {}
        }
        self.turn.reset();
        self.call = None;
    }
}

impl TokenHandler for Core {
    /// Streamed text of a parameter value (most tokens of a large call) is collected here;
    /// every other token goes to [`Core::dispatch`].
    #[inline(always)]
    fn token(&mut self, t: Token<'_>, at: u64, out: &mut dyn Sink) -> Ctl {
        if let (St::Value { .. }, Token::Text(s), false) = (&self.st, &t, self.turn.finishing) {
            self.value_text(s, at, out);
            return Ctl::go();
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
        // A value is delivered when its parameter closes (§5), and its text changes no mode.
        matches!(self.st, St::Value { over: false, .. })
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
            // At the end of a turn, what is left of a call is reported once as unterminated.
            _ if self.turn.finishing => Ctl::go(),
            St::Between => self.between(t, at, out),
            St::Value { .. } => self.value(t, at, out),
            St::Lookahead { .. } => self.lookahead(t, at, out),
            St::Skip => {
                if let Token::End { .. } = t {
                    self.st = St::Prose;
                    self.turn.md.markup();
                    self.call = None;
                }
                Ctl::go()
            }
            St::SkipElem => {
                if let Token::End { .. } = t {
                    self.st = St::Between;
                }
                Ctl::go()
            }
        }
    }
}

/// Renders text and calls as a roo_xml transcript (`specs/roo_xml.md` §8).
pub fn render(text: &str, calls: &[ToolCall], tools: &Tools) -> Result<Vec<u8>, String> {
    use std::fmt::Write as _;
    let cfg = Config::default();
    let mut s = text.to_string();
    for c in calls {
        let tool = tools
            .get(&c.name)
            .ok_or_else(|| format!("tool {:?} is not in tools.json", c.name))?;
        if c.id.is_some() || c.server.is_some() {
            return Err("roo_xml carries no call id or server".into());
        }
        let args = c
            .arguments
            .as_object()
            .ok_or("arguments must be a JSON object")?;
        let params: Vec<&str> = tool.param_names().collect();
        s.push('<');
        s.push_str(&c.name);
        s.push_str(">\n");
        for (k, v) in args {
            let v = v
                .as_str()
                .ok_or_else(|| format!("argument {k:?} is not a string"))?;
            if !params.contains(&k.as_str()) {
                return Err(format!("{k:?} is not a parameter of {}", c.name));
            }
            let close = format!("</{k}>");
            if cfg.rescue_params.iter().any(|p| p == k) {
                if v.ends_with('\r') {
                    return Err(format!("{k:?} ends with \\r, which the trimming rule eats"));
                }
                for (i, _) in v.match_indices(&close) {
                    let after = v[i + close.len()..].trim_start_matches(is_xml_ws);
                    let closer = after.starts_with(&format!("</{}>", c.name))
                        || params.iter().any(|p| after.starts_with(&format!("<{p}>")));
                    if closer {
                        return Err(format!("{k:?} contains {close} followed by a closing tag"));
                    }
                }
                // Written in place: a formatted copy of a 10 MB value would sit beside it.
                let _ = write!(s, "<{k}>\n{v}\n{close}\n");
            } else {
                if v.trim_matches(is_xml_ws) != v {
                    return Err(format!(
                        "{k:?} has surrounding whitespace, which is trimmed"
                    ));
                }
                if v.contains(&close) {
                    return Err(format!("{k:?} contains {close}"));
                }
                let _ = writeln!(s, "<{k}>{v}{close}");
            }
        }
        s.push_str("</");
        s.push_str(&c.name);
        s.push('>');
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
        return Err("the rendered transcript does not parse back (text not inert?)".into());
    }
    Ok(s.into_bytes())
}

fn markers(tools: &Tools) -> Vec<String> {
    let mut m = Vec::new();
    for d in &tools.defs {
        m.push(format!("<{}>", d.name));
        m.push(format!("</{}>", d.name));
        for p in d.param_names() {
            m.push(format!("<{p}>"));
            m.push(format!("</{p}>"));
        }
    }
    m.sort();
    m.dedup();
    m
}

prose_format!(
    "roo_xml",
    "Roo Code / Cline XML tool protocol: <tool><param>value</param></tool> in prose"
);

#[cfg(test)]
mod tests;
