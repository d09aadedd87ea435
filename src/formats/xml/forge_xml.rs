//! forge_xml: Forge's pure-XML tool calls (ADR-0019, ADR-0024; spec in `specs/forge_xml.md`).
//!
//! `<tool><server_name>…</server_name><tool_name>…</tool_name><arguments>…</arguments></tool>`
//! inside prose. Arguments are XML elements: nested elements are objects, repeated elements are
//! arrays, element text is typed by [`infer_scalar`], CDATA is never typed. The shared streaming
//! tokenizer does the lexing; this host builds the arguments value incrementally and emits it
//! as one `ArgsDelta` when `</arguments>` closes (a later repeated element can still turn a
//! scalar into an array, so nothing earlier is final).

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::options::Table;
use crate::formats::typing::is_float_syntax;
use crate::formats::xml::prose::push_piece;
use crate::formats::{Format, StreamParser, Typing};
use crate::lexers::utf8::{Utf8Decoder, Utf8Piece};
use crate::lexers::xml::{Ctl, EntityMode, Section, Token, XmlConfig, XmlErrorKind, XmlTokenizer};
use crate::tools::Tools;
use serde_json::{Map, Number, Value};

/// The server a call gets when it has no `<server_name>` (Forge's default).
pub const DEFAULT_SERVER: &str = "local";

/// Strings longer than this are rendered in CDATA rather than entity-escaped (ADR-0024).
pub const CDATA_THRESHOLD: usize = 1000;

/// Strings with more markup characters (`<`, `&`) than this are rendered in CDATA.
pub const CDATA_MARKUP_CHARS: usize = 8;

config! {
    /// Parser options; every leniency emits `Warning{kind: <option name>}`.
    #[derive(Debug, Clone)]
    pub struct Config {
        options {
            /// A bare `&` in a call (`a && b`) is kept as `&`, as Forge's ampersand-fallback retry does.
            /// Default true. Off: `malformed_markup`.
            allow_bare_ampersand,
            /// An unknown entity in a call (`&nbsp;`) is kept literally, as Forge does. Default true.
            /// Off: `malformed_markup`.
            allow_unknown_entities,
            /// Attributes on `<tool>` or on any element of a call are ignored. Default false
            /// (`malformed_markup`): Forge's grammar has no attributes.
            ignore_attributes,
        }
        /// Maximum element nesting inside a call, `<tool>` included (`limit_exceeded`).
        pub max_depth: usize,
        /// Maximum bytes from `<tool>` to `</tool>` (`limit_exceeded`); a memory bound, not Forge's
        /// 10 MiB policy.
        pub max_call_bytes: u64,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            allow_bare_ampersand: true,
            allow_unknown_entities: true,
            ignore_attributes: false,
            max_depth: 64,
            max_call_bytes: 32 * 1024 * 1024,
        }
    }
}

const WS: [char; 4] = [' ', '\t', '\n', '\r'];

fn is_xml_ws(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// Types the text of an element that holds no CDATA (the ADR-0019 table; `specs/forge_xml.md`).
///
/// Recognised on the text trimmed of XML whitespace: `true`/`false`/`null` in any case; integer
/// syntax `[+-]?[0-9]+` that fits i64 or u64; decimal/exponent syntax that is finite in f64;
/// `[+-]?inf`, `[+-]?infinity`, `nan` in any case as the strings `"+Inf"`, `"-Inf"`, `"NaN"`.
/// Everything else (including integers beyond 64 bits and floats that overflow) is the string
/// exactly as written, untrimmed.
pub fn infer_scalar(text: &str) -> Value {
    let t = text.trim_matches(WS);
    if t.len() <= 9 {
        let l = t.to_ascii_lowercase();
        match l.as_str() {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            "null" => return Value::Null,
            "nan" => return Value::String("NaN".into()),
            "inf" | "+inf" | "infinity" | "+infinity" => return Value::String("+Inf".into()),
            "-inf" | "-infinity" => return Value::String("-Inf".into()),
            _ => {}
        }
    }
    let b = t.as_bytes();
    let digits = b
        .strip_prefix(b"+")
        .or_else(|| b.strip_prefix(b"-"))
        .unwrap_or(b);
    if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
        let unsigned = t.strip_prefix('+').unwrap_or(t);
        if let Ok(i) = unsigned.parse::<i64>() {
            return Value::Number(i.into());
        }
        if let Ok(u) = unsigned.parse::<u64>() {
            return Value::Number(u.into());
        }
        return Value::String(text.to_string());
    }
    if is_float_syntax(digits)
        && let Ok(f) = t.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_string())
}

fn is_array_schema(s: &Value) -> bool {
    match s.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
        _ => false,
    }
}

/// The schema of member `key` of an object schema, and whether it is an array (then the
/// element schema is `items`).
fn member_schema(parent: Option<&Value>, key: &str) -> (Option<Value>, bool) {
    let Some(s) = parent
        .and_then(|p| p.get("properties"))
        .and_then(|p| p.get(key))
    else {
        return (None, false);
    };
    if is_array_schema(s) {
        (s.get("items").cloned(), true)
    } else {
        (Some(s.clone()), false)
    }
}

/// Adds one child element's value: repetition (or an array schema) makes an array.
fn add_child(map: &mut Map<String, Value>, key: &str, value: Value, array: bool) {
    match map.get_mut(key) {
        Some(Value::Array(a)) => a.push(value),
        Some(old) => {
            let first = old.take();
            *old = Value::Array(vec![first, value]);
        }
        None => {
            map.insert(
                key.to_string(),
                if array {
                    Value::Array(vec![value])
                } else {
                    value
                },
            );
        }
    }
}

/// One open element inside `<arguments>` (the first frame is `<arguments>` itself).
struct Frame {
    name: String,
    map: Map<String, Value>,
    text: String,
    cdata: bool,
    kids: bool,
    schema: Option<Value>,
    array: bool,
}

impl Frame {
    fn new(name: &str, schema: Option<Value>, array: bool) -> Frame {
        Frame {
            name: name.to_string(),
            map: Map::new(),
            text: String::new(),
            cdata: false,
            kids: false,
            schema,
            array,
        }
    }

    fn has_content(&self) -> bool {
        self.cdata || !is_xml_ws(&self.text)
    }

    fn value(self) -> Value {
        if self.kids {
            Value::Object(self.map)
        } else if self.cdata {
            Value::String(self.text)
        } else {
            infer_scalar(&self.text)
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Server,
    Name,
}

/// A confirmed call in progress.
struct Call {
    start: u64,
    server: Option<String>,
    name: Option<String>,
    field: Option<(Field, String)>,
    started: bool,
    args_done: bool,
    stack: Vec<Frame>,
}

enum Mode {
    Prose,
    /// After `<tool>` with only whitespace so far: a call or a mention of `<tool>`.
    Pending {
        raw: String,
        start: u64,
        attrs: bool,
    },
    Call(Box<Call>),
    /// A failed call: everything up to the next `</tool>` is swallowed.
    Skip,
}

type Fail = (ErrorKind, String);

fn fail(kind: ErrorKind, off: u64, what: &str) -> Fail {
    (kind, format!("{what} at byte {off}"))
}

struct Host {
    cfg: Config,
    tools: Tools,
    mode: Mode,
    index: usize,
}

fn prose_ctl() -> Ctl {
    Ctl {
        entities: Some(EntityMode::Raw),
        depth: Some(0),
        ..Ctl::go()
    }
}

impl Host {
    /// Text and CDATA of an argument (most tokens of a large call) are appended here; every
    /// other token goes to [`Host::dispatch`]. Always inlined: it is most of a small feed's
    /// work, and a call per token costs more than its body.
    #[inline(always)]
    fn on_token(&mut self, t: Token<'_>, off: u64, out: &mut dyn Sink) -> Ctl {
        if let Mode::Call(call) = &mut self.mode
            && off.saturating_sub(call.start) <= self.cfg.max_call_bytes
        {
            match t {
                Token::Text(s) if chars(call, s, off).is_ok() => return Ctl::go(),
                Token::SectionText(Section::CData, s) => {
                    cdata_chars(call, s);
                    return Ctl::go();
                }
                _ => {}
            }
        }
        self.dispatch(t, off, out)
    }

    /// Handles a token by mode.
    #[inline(never)]
    fn dispatch(&mut self, t: Token<'_>, off: u64, out: &mut dyn Sink) -> Ctl {
        loop {
            match &mut self.mode {
                Mode::Prose => return self.prose(t, off, out),
                Mode::Skip => {
                    match t {
                        Token::End { name: "tool", .. } | Token::Eof { .. } => {
                            self.mode = Mode::Prose;
                            return prose_ctl();
                        }
                        _ => return Ctl::go(),
                    };
                }
                Mode::Pending { raw, start, attrs } => {
                    let keep = match &t {
                        Token::Text(s) => is_xml_ws(s),
                        _ => false,
                    };
                    if keep && (raw.len() as u64) < self.cfg.max_call_bytes {
                        if let Token::Text(s) = t {
                            raw.push_str(s);
                        }
                        return Ctl::go();
                    }
                    let confirm = matches!(
                        t,
                        Token::Start {
                            name: "server_name" | "tool_name" | "arguments",
                            ..
                        }
                    );
                    if confirm {
                        let (start, attrs) = (*start, *attrs);
                        self.mode = Mode::Call(Box::new(Call {
                            start,
                            server: None,
                            name: None,
                            field: None,
                            started: false,
                            args_done: false,
                            stack: Vec::new(),
                        }));
                        if attrs && let Err(e) = self.attrs_ok(start, out) {
                            return self.failed(e, out);
                        }
                        let mut c = self.call_token(t, off, out);
                        if c.entities.is_none() && matches!(self.mode, Mode::Call(_)) {
                            c.entities = Some(EntityMode::Decode);
                        }
                        return c;
                    }
                    let raw = std::mem::take(raw);
                    out.text(&raw);
                    self.mode = Mode::Prose;
                }
                Mode::Call(_) => return self.call_token(t, off, out),
            }
        }
    }

    fn attrs_ok(&self, off: u64, out: &mut dyn Sink) -> Result<(), Fail> {
        if self.cfg.ignore_attributes {
            out.push(Event::warning(
                WarningKind::IgnoreAttributes,
                format!("attributes ignored at byte {off}"),
            ));
            Ok(())
        } else {
            Err(fail(
                ErrorKind::MalformedMarkup,
                off,
                "attributes in a call",
            ))
        }
    }

    fn prose(&mut self, t: Token<'_>, off: u64, out: &mut dyn Sink) -> Ctl {
        match t {
            Token::Text(s) => out.text(s),
            Token::Start {
                name: "tool",
                attrs,
                self_closing: false,
                raw,
            } => {
                self.mode = Mode::Pending {
                    raw: raw.to_string(),
                    start: off,
                    attrs: !attrs.is_empty(),
                };
                return Ctl {
                    depth: Some(1),
                    ..Ctl::go()
                };
            }
            Token::Start { raw, .. } | Token::End { raw, .. } | Token::Error { raw, .. } => {
                out.text(raw)
            }
            Token::SectionStart(s) => out.text(s.open()),
            Token::SectionText(_, s) => out.text(s),
            Token::SectionEnd(s) => out.text(s.close()),
            Token::Eof { .. } => {}
        }
        prose_ctl()
    }

    fn failed(&mut self, (kind, message): Fail, out: &mut dyn Sink) -> Ctl {
        out.push(Event::error(kind, message));
        self.mode = Mode::Skip;
        Ctl::go()
    }

    fn call_token(&mut self, t: Token<'_>, off: u64, out: &mut dyn Sink) -> Ctl {
        let closing_eof = matches!(t, Token::Eof { .. });
        match self.call_step(t, off, out) {
            Ok(true) => {
                self.mode = Mode::Prose;
                prose_ctl()
            }
            Ok(false) => Ctl::go(),
            Err(e) => {
                let c = self.failed(e, out);
                if closing_eof {
                    self.mode = Mode::Prose;
                }
                c
            }
        }
    }

    /// Handles one token inside a call; `Ok(true)` when `</tool>` completed it.
    fn call_step(&mut self, t: Token<'_>, off: u64, out: &mut dyn Sink) -> Result<bool, Fail> {
        let Mode::Call(call) = &mut self.mode else {
            return Ok(false);
        };
        let cfg = &self.cfg;
        if off.saturating_sub(call.start) > cfg.max_call_bytes {
            return Err(fail(
                ErrorKind::LimitExceeded,
                off,
                "call longer than max_call_bytes",
            ));
        }
        match t {
            Token::Text(s) => chars(call, s, off)?,
            Token::Error { kind, raw } => match kind {
                XmlErrorKind::BareAmp if cfg.allow_bare_ampersand => {
                    out.push(Event::warning(
                        WarningKind::AllowBareAmpersand,
                        format!("bare '&' kept at byte {off}"),
                    ));
                    chars(call, raw, off)?;
                }
                XmlErrorKind::UnknownEntity if cfg.allow_unknown_entities => {
                    out.push(Event::warning(
                        WarningKind::AllowUnknownEntities,
                        format!("unknown entity {raw} kept at byte {off}"),
                    ));
                    chars(call, raw, off)?;
                }
                XmlErrorKind::DepthLimit => {
                    return Err(fail(ErrorKind::LimitExceeded, off, "nesting too deep"));
                }
                XmlErrorKind::Unclosed(_) | XmlErrorKind::Truncated => {
                    return Err(fail(ErrorKind::Unterminated, off, "stream ended in a call"));
                }
                k => return Err(fail(ErrorKind::MalformedMarkup, off, k.message())),
            },
            Token::SectionStart(Section::CData) => {
                if call.field.is_none() {
                    let Some(top) = call.stack.last_mut() else {
                        return Err(fail(ErrorKind::MalformedMarkup, off, "CDATA inside <tool>"));
                    };
                    if top.kids {
                        return Err(fail(
                            ErrorKind::MalformedMarkup,
                            off,
                            "CDATA beside child elements",
                        ));
                    }
                    top.cdata = true;
                }
            }
            Token::SectionText(Section::CData, s) => cdata_chars(call, s),
            Token::SectionStart(Section::Decl) => {
                return Err(fail(
                    ErrorKind::MalformedMarkup,
                    off,
                    "declaration inside a call",
                ));
            }
            Token::SectionStart(_) | Token::SectionText(..) | Token::SectionEnd(_) => {}
            Token::Start {
                name,
                attrs,
                self_closing,
                ..
            } => {
                if !attrs.is_empty() {
                    if cfg.ignore_attributes {
                        out.push(Event::warning(
                            WarningKind::IgnoreAttributes,
                            format!("attributes ignored at byte {off}"),
                        ));
                    } else {
                        return Err(fail(
                            ErrorKind::MalformedMarkup,
                            off,
                            "attributes in a call",
                        ));
                    }
                }
                if call.field.is_some() {
                    return Err(fail(
                        ErrorKind::MalformedMarkup,
                        off,
                        "element inside a name",
                    ));
                }
                if let Some(top) = call.stack.last_mut() {
                    if top.has_content() {
                        return Err(fail(
                            ErrorKind::MalformedMarkup,
                            off,
                            "text beside child elements",
                        ));
                    }
                    top.kids = true;
                    top.text = String::new();
                    let (schema, array) = member_schema(top.schema.as_ref(), name);
                    if self_closing {
                        add_child(&mut top.map, name, Value::String(String::new()), array);
                    } else {
                        call.stack.push(Frame::new(name, schema, array));
                    }
                    return Ok(false);
                }
                if call.args_done {
                    return Err(fail(
                        ErrorKind::MalformedMarkup,
                        off,
                        "element after </arguments>",
                    ));
                }
                match name {
                    "server_name" | "tool_name" => {
                        let f = if name == "server_name" {
                            Field::Server
                        } else {
                            Field::Name
                        };
                        let dup = match f {
                            Field::Server => call.server.is_some(),
                            Field::Name => call.name.is_some(),
                        };
                        if dup || call.started {
                            return Err(fail(
                                ErrorKind::MalformedMarkup,
                                off,
                                "repeated or late name element",
                            ));
                        }
                        if self_closing {
                            set_field(call, f, "");
                        } else {
                            call.field = Some((f, String::new()));
                        }
                    }
                    "arguments" => {
                        let schema = start_call(call, &self.tools, &mut self.index, off, out)?;
                        if self_closing {
                            out.args_delta(self.index - 1, "{}");
                            call.args_done = true;
                        } else {
                            call.stack.push(Frame::new("arguments", schema, false));
                        }
                    }
                    _ => {
                        return Err(fail(
                            ErrorKind::MalformedMarkup,
                            off,
                            &format!("unexpected element <{name}> in <tool>"),
                        ));
                    }
                }
            }
            Token::End { name, .. } => {
                if let Some((f, text)) = call.field.take() {
                    let want = if f == Field::Server {
                        "server_name"
                    } else {
                        "tool_name"
                    };
                    if name != want {
                        return Err(fail(ErrorKind::MalformedMarkup, off, "mismatched end tag"));
                    }
                    set_field(call, f, &text);
                    return Ok(false);
                }
                if let Some(top) = call.stack.last() {
                    if top.name != name {
                        return Err(fail(
                            ErrorKind::MalformedMarkup,
                            off,
                            &format!("</{name}> closes <{}>", top.name),
                        ));
                    }
                    let Some(frame) = call.stack.pop() else {
                        return Ok(false);
                    };
                    if let Some(parent) = call.stack.last_mut() {
                        let (key, array) = (frame.name.clone(), frame.array);
                        add_child(&mut parent.map, &key, frame.value(), array);
                    } else {
                        if !frame.kids && frame.has_content() {
                            return Err(fail(
                                ErrorKind::MalformedMarkup,
                                off,
                                "<arguments> holds text, not elements",
                            ));
                        }
                        let json = serde_json::to_string(&Value::Object(frame.map))
                            .unwrap_or_else(|_| "{}".into());
                        out.args_delta(self.index - 1, &json);
                        call.args_done = true;
                    }
                    return Ok(false);
                }
                if name != "tool" {
                    return Err(fail(
                        ErrorKind::MalformedMarkup,
                        off,
                        &format!("unexpected </{name}> in <tool>"),
                    ));
                }
                if !call.started {
                    start_call(call, &self.tools, &mut self.index, off, out)?;
                }
                if !call.args_done {
                    out.args_delta(self.index - 1, "{}");
                }
                out.push(Event::CallEnd {
                    index: self.index - 1,
                });
                return Ok(true);
            }
            Token::Eof { .. } => {
                return Err(fail(
                    ErrorKind::Unterminated,
                    off,
                    "stream ended inside <tool>",
                ));
            }
        }
        Ok(false)
    }

    fn invalid_utf8(&mut self, offset: u64, out: &mut dyn Sink) {
        out.push(Event::invalid_utf8(offset));
        if matches!(self.mode, Mode::Call(_)) {
            self.mode = Mode::Skip;
        }
    }
}

fn set_field(call: &mut Call, f: Field, text: &str) {
    let v = text.trim_matches(WS).to_string();
    match f {
        Field::Server => call.server = Some(v),
        Field::Name => call.name = Some(v),
    }
}

/// Emits `CallStart`; returns the tool's parameter schema for array typing.
fn start_call(
    call: &mut Call,
    tools: &Tools,
    index: &mut usize,
    off: u64,
    out: &mut dyn Sink,
) -> Result<Option<Value>, Fail> {
    let name = match call.name.as_deref() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => {
            return Err(fail(
                ErrorKind::MissingName,
                off,
                "no <tool_name> before <arguments> or </tool>",
            ));
        }
    };
    let schema = tools.get(&name).map(|d| d.parameters.clone());
    out.push(Event::CallStart {
        index: *index,
        id: None,
        name,
        server: Some(
            call.server
                .clone()
                .unwrap_or_else(|| DEFAULT_SERVER.to_string()),
        ),
    });
    *index += 1;
    call.started = true;
    Ok(schema)
}

/// Character data inside a call: a name, an argument element, or (whitespace only) between.
fn chars(call: &mut Call, s: &str, off: u64) -> Result<(), Fail> {
    if let Some((at, c)) = forbidden_char(s) {
        // One rule for a raw character and its reference (`&#0;`): XML forbids both (F17).
        return Err(fail(
            ErrorKind::MalformedMarkup,
            off + at as u64,
            &format!(
                "U+{:04X}, a character XML forbids, in element text",
                c as u32
            ),
        ));
    }
    if let Some((_, f)) = call.field.as_mut() {
        f.push_str(s);
    } else if let Some(top) = call.stack.last_mut() {
        if top.kids {
            if !is_xml_ws(s) {
                return Err(fail(
                    ErrorKind::MalformedMarkup,
                    off,
                    "text beside child elements",
                ));
            }
        } else {
            push_piece(&mut top.text, s);
        }
    } else if !is_xml_ws(s) {
        return Err(fail(
            ErrorKind::MalformedMarkup,
            off,
            "text directly inside <tool>",
        ));
    }
    Ok(())
}

/// The first character of `s` the XML `Char` production forbids (C0 controls other than tab,
/// line feed and carriage return; U+FFFE and U+FFFF), with its byte offset.
fn forbidden_char(s: &str) -> Option<(usize, char)> {
    // Fast: most text has no byte below 0x20 but whitespace, and no 0xEF lead byte.
    if !s
        .bytes()
        .any(|b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || b == 0xEF)
    {
        return None;
    }
    s.char_indices().find(|&(_, c)| {
        (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}')
    })
}

/// Appends CDATA text to the field or element being read.
fn cdata_chars(call: &mut Call, s: &str) {
    if let Some((_, f)) = call.field.as_mut() {
        f.push_str(s);
    } else if let Some(top) = call.stack.last_mut() {
        push_piece(&mut top.text, s);
    }
}

/// The forge_xml streaming parser.
pub struct Parser {
    dec: Utf8Decoder,
    tok: XmlTokenizer,
    host: Host,
}

impl Parser {
    /// A parser for one session; `tools` supplies array-typed parameters.
    pub fn new(config: Config, tools: &Tools) -> Parser {
        let tok = XmlTokenizer::new(XmlConfig {
            entities: EntityMode::Raw,
            max_depth: config.max_depth,
            ..XmlConfig::default()
        });
        Parser {
            dec: Utf8Decoder::new(),
            tok,
            host: Host {
                cfg: config,
                tools: tools.clone(),
                mode: Mode::Prose,
                index: 0,
            },
        }
    }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        let Parser { dec, tok, host } = self;
        if let Some(s) = dec.whole(chunk) {
            tok.feed(s, &mut |t, off| host.on_token(t, off, out));
            return;
        }
        dec.feed(chunk, &mut |p| match p {
            Utf8Piece::Text(s) => {
                tok.feed(s, &mut |t, off| host.on_token(t, off, out));
            }
            Utf8Piece::Invalid { offset } => {
                tok.feed("\u{FFFD}", &mut |t, off| host.on_token(t, off, out));
                host.invalid_utf8(offset, out);
            }
        });
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        let Parser { dec, tok, host } = self;
        dec.finish(&mut |p| {
            if let Utf8Piece::Invalid { offset } = p {
                tok.feed("\u{FFFD}", &mut |t, off| host.on_token(t, off, out));
                host.invalid_utf8(offset, out);
            }
        });
        tok.finish(&mut |t, off| host.on_token(t, off, out));
        host.mode = Mode::Prose;
        host.index = 0;
    }
}

// ---- renderer ----------------------------------------------------------------------------

fn is_xml_name(k: &str) -> bool {
    let b = k.as_bytes();
    let start = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b':' || c >= 0x80;
    !b.is_empty()
        && start(b[0])
        && b.iter()
            .all(|&c| start(c) || c.is_ascii_digit() || c == b'-' || c == b'.')
}

fn cdata(s: &str) -> String {
    format!("<![CDATA[{}]]>", s.replace("]]>", "]]]]><![CDATA[>"))
}

/// Renders a string so that it parses back exactly: entities first, CDATA when the text would
/// be typed, is long, or is full of markup characters.
fn render_string(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    let typed = infer_scalar(s) != Value::String(s.to_string());
    let markup = s.bytes().filter(|&b| b == b'<' || b == b'&').count();
    if typed || s.len() > CDATA_THRESHOLD || markup > CDATA_MARKUP_CHARS {
        cdata(s)
    } else {
        escape_text(s)
    }
}

/// Escapes text for element content: `<`, `>`, `&`, and CR (which XML end-of-line handling
/// would turn into LF) as references. One pass, copying the runs between them (measured
/// 2026-11-25 at 1 MB: as fast as quick-xml's `partial_escape` on markup-dense code, about 1.5×
/// on prose), so the parsers need no XML crate.
fn escape_text(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    let mut from = 0;
    while let Some(i) = bytes[from..]
        .iter()
        .position(|&b| matches!(b, b'<' | b'>' | b'&' | b'\r'))
    {
        let at = from + i;
        out.push_str(&s[from..at]);
        out.push_str(match bytes[at] {
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'&' => "&amp;",
            _ => "&#13;",
        });
        from = at + 1;
    }
    out.push_str(&s[from..]);
    out
}

fn render_member(
    key: &str,
    v: &Value,
    schema: Option<&Value>,
    out: &mut String,
) -> Result<(), String> {
    if !is_xml_name(key) {
        return Err(format!("key {key:?} is not an XML name"));
    }
    let own = schema
        .and_then(|p| p.get("properties"))
        .and_then(|p| p.get(key));
    match v {
        Value::Array(items) => {
            let declared = own.is_some_and(is_array_schema);
            if items.is_empty() {
                return Err(format!("empty array {key:?} has no XML form"));
            }
            if items.len() < 2 && !declared {
                return Err(format!(
                    "one-element array {key:?} needs a schema with type array"
                ));
            }
            let item_schema = own.and_then(|s| s.get("items"));
            for it in items {
                render_element(key, it, item_schema, out)?;
            }
            Ok(())
        }
        _ => render_element(key, v, own, out),
    }
}

fn render_element(
    key: &str,
    v: &Value,
    schema: Option<&Value>,
    out: &mut String,
) -> Result<(), String> {
    out.push('<');
    out.push_str(key);
    out.push('>');
    match v {
        Value::Object(m) => {
            if m.is_empty() {
                return Err(format!("empty object {key:?} has no XML form"));
            }
            out.push('\n');
            for (k, x) in m {
                render_member(k, x, schema, out)?;
            }
        }
        Value::Array(_) => return Err(format!("nested array in {key:?} has no XML form")),
        Value::String(s) => out.push_str(&render_string(s)),
        Value::Number(n) => {
            let s = n.to_string();
            if !crate::event::json_eq(&infer_scalar(&s), v) {
                return Err(format!("number {s} does not read back"));
            }
            out.push_str(&s);
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => out.push_str("null"),
    }
    out.push_str("</");
    out.push_str(key);
    out.push_str(">\n");
    Ok(())
}

/// Renders text then calls; every call must have a server, no id, and object arguments.
pub fn render(text: &str, calls: &[ToolCall], tools: &Tools) -> Result<Vec<u8>, String> {
    let mut out = String::from(text);
    for c in calls {
        if c.id.is_some() {
            return Err("forge_xml calls carry no id".into());
        }
        let server = c
            .server
            .as_deref()
            .ok_or("forge_xml calls always have a server (default \"local\")")?;
        for (what, v) in [("name", c.name.as_str()), ("server", server)] {
            if v.trim_matches(WS) != v {
                return Err(format!("{what} {v:?} has surrounding whitespace"));
            }
        }
        if c.name.is_empty() {
            return Err("empty tool name".into());
        }
        let Value::Object(args) = &c.arguments else {
            return Err("arguments must be a JSON object".into());
        };
        let schema = tools.get(&c.name).map(|d| &d.parameters);
        out.push_str("<tool>\n<server_name>");
        out.push_str(&render_string_name(server));
        out.push_str("</server_name>\n<tool_name>");
        out.push_str(&render_string_name(&c.name));
        out.push_str("</tool_name>\n<arguments>\n");
        for (k, v) in args {
            render_member(k, v, schema, &mut out)?;
        }
        out.push_str("</arguments>\n</tool>");
    }
    // The format has ambiguities no local rule catches (prose that itself looks like markup):
    // parse the result back and refuse what does not read back exactly.
    let parser = || Box::new(Parser::new(Config::default(), tools)) as Box<dyn StreamParser>;
    let r = crate::formats::read_back(parser, out.as_bytes(), calls);
    if !r.result.is_success() || r.result.text != text || !r.same_calls {
        return Err("the rendering does not parse back to the same text and calls".into());
    }
    Ok(out.into_bytes())
}

/// Names are never typed, so only escaping is needed.
fn render_string_name(s: &str) -> String {
    escape_text(s)
}

fn markers(_t: &Tools) -> Vec<String> {
    [
        "<tool>",
        "</tool>",
        "<server_name>",
        "</server_name>",
        "<tool_name>",
        "</tool_name>",
        "<arguments>",
        "</arguments>",
        "<![CDATA[",
        "]]>",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn new_parser(tools: &Tools) -> Box<dyn StreamParser> {
    Box::new(Parser::new(Config::default(), tools))
}

/// The forge_xml format's options, for `--option forge_xml.NAME=…` and `conform.toml`.
static OPTION_TABLE: Table<Config> = Table::new(Config::default, Config::OPTIONS, |c, t| {
    Box::new(Parser::new(c, t))
});
/// The forge_xml format.
pub static FORMAT: Format = Format {
    render: Some(render),
    cdata: Some(cdata_probe),
    typing: Some(Typing {
        table: include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/specs/forge_xml_typing.json"
        )),
        transcript: typing_probe,
        key: "v",
        schema_tool: None,
        wire_probe: true,
    }),
    ..Format::new(
        "forge_xml",
        "Forge pure XML: <tool><server_name/><tool_name/><arguments>elements</arguments></tool>",
        new_parser,
        markers,
        &OPTION_TABLE,
    )
};

/// A call whose `content` travels in CDATA, for the `cdata_split` invariant.
fn cdata_probe(text: &str) -> (Vec<u8>, ToolCall) {
    let t = format!(
        "<tool><server_name>local</server_name><tool_name>write_file</tool_name><arguments><content>{}</content></arguments></tool>",
        cdata(text)
    );
    let call = ToolCall {
        name: "write_file".into(),
        id: None,
        server: Some("local".into()),
        arguments: serde_json::json!({ "content": text }),
    };
    (t.into_bytes(), call)
}

/// A call whose argument `v` is exactly `raw`, for the `type_inference` invariant.
fn typing_probe(raw: &str) -> Vec<u8> {
    format!(
        "<tool><server_name>local</server_name><tool_name>t</tool_name><arguments><v>{raw}</v></arguments></tool>"
    )
    .into_bytes()
}

#[cfg(test)]
mod tests;
