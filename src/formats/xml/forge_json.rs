//! forge_json: Forge's earlier XML+JSON hybrid (ADR-0002; spec in `specs/forge_json.md`).
//!
//! `<tool>{"server_name":…,"tool_name":…,"arguments":{…}}</tool>` inside prose. The shared XML
//! tokenizer finds the `<tool>`/`</tool>` framing; after `<tool>` it pauses and the body goes
//! to the incremental JSON parser with stop byte `<`, so a `</tool>` inside a JSON string is
//! content. The call is announced (`CallStart` + one `ArgsDelta`) when the JSON body is
//! complete, since `tool_name` may follow `arguments` in the object, and ends at `</tool>`.

use crate::event::{ErrorKind, Event, Sink, ToolCall};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::{Format, RenderFn, StreamParser};
use crate::lexers::json::{Feed, JsonConfig, JsonErrorKind, JsonParser};
use crate::lexers::utf8::{Utf8Decoder, Utf8Piece};
use crate::lexers::xml::{Ctl, EntityMode, Token, XmlConfig, XmlErrorKind, XmlTokenizer};
use crate::tools::Tools;
use serde_json::{Map, Value};

/// The server a call gets when its JSON has no `server_name`.
pub const DEFAULT_SERVER: &str = "local";

config! {
    /// Parser options (limits only: the format has no recovered deviations).
    #[derive(Debug, Clone)]
    pub struct Config {
        options {
        }
        /// Maximum JSON nesting (`limit_exceeded`).
        pub max_depth: usize,
        /// Maximum bytes of one JSON body (`limit_exceeded`).
        pub max_call_bytes: u64,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_depth: 128,
            max_call_bytes: 32 * 1024 * 1024,
        }
    }
}

enum Mode {
    /// Prose, read by the tokenizer.
    Prose,
    /// After `<tool>`: whitespace so far; `{` or `[` makes a call, anything else a mention.
    Pending { raw: String },
    /// Reading the JSON body.
    Body { json: Box<JsonParser>, fed: u64 },
    /// The body was complete and announced; only `</tool>` may follow.
    AwaitClose,
    /// A failed call: swallowed up to the next `</tool>`.
    Skip,
}

struct Host {
    cfg: Config,
    mode: Mode,
    index: usize,
}

fn prose_ctl() -> Ctl {
    Ctl {
        depth: Some(0),
        ..Ctl::go()
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl Host {
    fn error(&mut self, kind: ErrorKind, msg: String, out: &mut dyn Sink) {
        out.push(Event::error(kind, msg));
        self.mode = Mode::Skip;
    }

    fn on_token(&mut self, t: Token<'_>, off: u64, out: &mut dyn Sink) -> Ctl {
        match self.mode {
            Mode::Prose => match t {
                Token::Text(s) => out.text(s),
                Token::Start {
                    name: "tool",
                    attrs: [],
                    self_closing: false,
                    raw,
                } => {
                    self.mode = Mode::Pending {
                        raw: raw.to_string(),
                    };
                    return Ctl {
                        pause: true,
                        ..prose_ctl()
                    };
                }
                Token::Start { raw, .. } | Token::End { raw, .. } | Token::Error { raw, .. } => {
                    out.text(raw)
                }
                Token::SectionStart(s) => out.text(s.open()),
                Token::SectionText(_, s) => out.text(s),
                Token::SectionEnd(s) => out.text(s.close()),
                Token::Eof { .. } => {}
            },
            Mode::AwaitClose => match t {
                Token::End { name: "tool", .. } => {
                    out.push(Event::CallEnd {
                        index: self.index - 1,
                    });
                    self.mode = Mode::Prose;
                }
                Token::Text(s) if s.bytes().all(is_ws) => {}
                Token::Error {
                    kind: XmlErrorKind::Truncated,
                    ..
                } => self.error(
                    ErrorKind::Unterminated,
                    format!("stream ended inside the closing tag, at byte {off}"),
                    out,
                ),
                Token::Eof { .. } => {
                    out.push(Event::error(
                        ErrorKind::Unterminated,
                        format!("no </tool> before the end, at byte {off}"),
                    ));
                    self.mode = Mode::Prose;
                }
                _ => self.error(
                    ErrorKind::MalformedMarkup,
                    format!("expected </tool> after the JSON body at byte {off}"),
                    out,
                ),
            },
            Mode::Skip => {
                if matches!(t, Token::End { name: "tool", .. } | Token::Eof { .. }) {
                    self.mode = Mode::Prose;
                }
            }
            // The tokenizer is not fed in these modes.
            Mode::Pending { .. } | Mode::Body { .. } => {}
        }
        prose_ctl()
    }

    /// Validates a complete body and announces the call.
    fn complete(&mut self, v: Value, off: u64, out: &mut dyn Sink) {
        let Value::Object(mut m) = v else {
            return self.error(
                ErrorKind::InvalidJson,
                format!("the body is not a JSON object, at byte {off}"),
                out,
            );
        };
        let name = match m.get("tool_name") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return self.error(
                    ErrorKind::MissingName,
                    format!("no string tool_name in the body ending at byte {off}"),
                    out,
                );
            }
        };
        let server = match m.get("server_name") {
            None => DEFAULT_SERVER.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                return self.error(
                    ErrorKind::InvalidJson,
                    format!("server_name is not a string, body ending at byte {off}"),
                    out,
                );
            }
        };
        let args = match m.remove("arguments") {
            None => Value::Object(Map::new()),
            Some(a @ Value::Object(_)) => a,
            Some(_) => {
                return self.error(
                    ErrorKind::InvalidJson,
                    format!("arguments is not a JSON object, body ending at byte {off}"),
                    out,
                );
            }
        };
        out.push(Event::CallStart {
            index: self.index,
            id: None,
            name,
            server: Some(server),
        });
        // Written at its size and the value freed before the sink copies the text: a huge
        // argument is otherwise held three times at once.
        let text = crate::event::json_exact(&args);
        drop(args);
        out.args_delta(self.index, std::str::from_utf8(&text).unwrap_or("{}"));
        self.index += 1;
        self.mode = Mode::AwaitClose;
    }
}

/// The forge_json streaming parser.
pub struct Parser {
    dec: Utf8Decoder,
    tok: XmlTokenizer,
    host: Host,
}

impl Parser {
    /// A parser for one session.
    pub fn new(config: Config) -> Parser {
        Parser {
            dec: Utf8Decoder::new(),
            tok: XmlTokenizer::new(XmlConfig {
                entities: EntityMode::Raw,
                ..XmlConfig::default()
            }),
            host: Host {
                cfg: config,
                mode: Mode::Prose,
                index: 0,
            },
        }
    }
}

/// Feeds decoded text, switching between the tokenizer and the JSON parser.
fn feed_str(tok: &mut XmlTokenizer, host: &mut Host, mut s: &str, out: &mut dyn Sink) {
    while !s.is_empty() {
        match &mut host.mode {
            Mode::Pending { raw } => {
                let ws = s.bytes().take_while(|&b| is_ws(b)).count();
                raw.push_str(&s[..ws]);
                tok.skip(ws);
                s = &s[ws..];
                if s.is_empty() {
                    return;
                }
                if s.starts_with('{') || s.starts_with('[') {
                    let json = JsonParser::new(JsonConfig {
                        max_depth: host.cfg.max_depth,
                        stop_byte: Some(b'<'),
                        build_value: true,
                    });
                    host.mode = Mode::Body {
                        json: Box::new(json),
                        fed: 0,
                    };
                } else {
                    let raw = std::mem::take(raw);
                    out.text(&raw);
                    host.mode = Mode::Prose;
                }
            }
            Mode::Body { json, fed } => {
                // The per-chunk path of a body streamed in small pieces: a piece that only
                // continues a JSON string (a `<` in it is content) needs nothing else.
                if json.continue_string_inlined(s) {
                    let off = tok.offset();
                    *fed += s.len() as u64;
                    tok.skip(s.len());
                    if *fed > host.cfg.max_call_bytes {
                        host.error(
                            ErrorKind::LimitExceeded,
                            format!("JSON body over max_call_bytes at byte {off}"),
                            out,
                        );
                    }
                    return;
                }
                let start_fed = *fed;
                let off = tok.offset();
                let r = json.feed(s);
                match r {
                    Ok(Feed::NeedMore) => {
                        *fed += s.len() as u64;
                        tok.skip(s.len());
                        s = "";
                        if *fed > host.cfg.max_call_bytes {
                            host.error(
                                ErrorKind::LimitExceeded,
                                format!("JSON body over max_call_bytes at byte {off}"),
                                out,
                            );
                        }
                    }
                    Ok(Feed::Stopped(i)) => {
                        tok.skip(i);
                        s = &s[i..];
                        let at = tok.offset();
                        // The body's last piece counts too, however it was cut.
                        if *fed + i as u64 > host.cfg.max_call_bytes {
                            host.error(
                                ErrorKind::LimitExceeded,
                                format!("JSON body over max_call_bytes at byte {off}"),
                                out,
                            );
                            continue;
                        }
                        match json.finish() {
                            Ok(Some(v)) => host.complete(v, at, out),
                            Ok(None) => host.complete(Value::Null, at, out),
                            Err(e) => host.error(
                                ErrorKind::InvalidJson,
                                format!("JSON body incomplete at '<': {e}"),
                                out,
                            ),
                        }
                    }
                    Err(e) => {
                        // Past the limit before its failing byte, the body is over the limit
                        // whatever the cut (a cut there would have said so first).
                        let kind = if e.kind == JsonErrorKind::DepthLimit
                            || e.offset > host.cfg.max_call_bytes
                        {
                            ErrorKind::LimitExceeded
                        } else {
                            ErrorKind::InvalidJson
                        };
                        // Resume the tokenizer (swallowing up to `</tool>`) where JSON failed.
                        let mut k = (e.offset.saturating_sub(start_fed) as usize).min(s.len());
                        while !s.is_char_boundary(k) {
                            k += 1;
                        }
                        tok.skip(k);
                        s = &s[k..];
                        host.error(kind, format!("{e} (body at byte {off})"), out);
                    }
                }
            }
            _ => {
                let used = tok.feed(s, &mut |t, off| host.on_token(t, off, out));
                s = &s[used..];
            }
        }
    }
}

fn invalid(tok: &mut XmlTokenizer, host: &mut Host, offset: u64, out: &mut dyn Sink) {
    feed_str(tok, host, "\u{FFFD}", out);
    out.push(Event::invalid_utf8(offset));
    if matches!(host.mode, Mode::Body { .. } | Mode::AwaitClose) {
        host.mode = Mode::Skip;
    }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        let Parser { dec, tok, host } = self;
        if let Some(s) = dec.ascii(chunk) {
            return feed_str(tok, host, s, out);
        }
        dec.feed(chunk, &mut |p| match p {
            Utf8Piece::Text(s) => feed_str(tok, host, s, out),
            Utf8Piece::Invalid { offset } => invalid(tok, host, offset, out),
        });
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        let Parser { dec, tok, host } = self;
        dec.finish(&mut |p| {
            if let Utf8Piece::Invalid { offset } = p {
                invalid(tok, host, offset, out);
            }
        });
        match std::mem::replace(&mut host.mode, Mode::Prose) {
            Mode::Pending { raw } => out.text(&raw),
            Mode::Body { .. } => out.push(Event::error(
                ErrorKind::Unterminated,
                format!("stream ended inside a <tool> body at byte {}", tok.offset()),
            )),
            m => host.mode = m,
        }
        tok.finish(&mut |t, off| host.on_token(t, off, out));
        host.mode = Mode::Prose;
        host.index = 0;
    }
}

/// Renders text then each call as `<tool>{"server_name":…,"tool_name":…,"arguments":…}</tool>`.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    let mut out = text.as_bytes().to_vec();
    for c in calls {
        if c.id.is_some() {
            return Err("forge_json calls carry no id".into());
        }
        let server = c
            .server
            .as_deref()
            .ok_or("forge_json calls always have a server (default \"local\")")?;
        if c.name.is_empty() {
            return Err("empty tool name".into());
        }
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        // `{"server_name","tool_name","arguments"}` written in place, the arguments neither
        // copied into a body value nor into a growing buffer (a 10 MB argument took 40 MB).
        let head = format!(
            "<tool>{{\"server_name\":{},\"tool_name\":{},\"arguments\":",
            Value::from(server),
            Value::from(c.name.as_str())
        );
        out.reserve_exact(head.len() + crate::event::json_len(&c.arguments) + "}</tool>".len());
        out.extend_from_slice(head.as_bytes());
        serde_json::to_writer(&mut out, &c.arguments).map_err(|e| e.to_string())?;
        out.extend_from_slice(b"}</tool>");
    }
    // Prose that itself looks like markup can swallow what follows: check the reading.
    let parser = || Box::new(Parser::new(Config::default())) as Box<dyn StreamParser>;
    let r = crate::formats::read_back(parser, &out, calls);
    if !r.result.is_success() || r.result.text != text || !r.same_calls {
        return Err("the rendering does not parse back to the same text and calls".into());
    }
    Ok(out)
}

/// What sets forge_json apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "forge_json";
    const SUMMARY: &'static str =
        "Forge XML+JSON hybrid: <tool>{\"server_name\",\"tool_name\",\"arguments\"}</tool>";
    const MARKERS: &'static [&'static str] = &["<tool>", "</tool>"];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(Parser::new(cfg));
}

/// The forge_json format.
pub static FORMAT: Format = entry::format::<Declared>();

#[cfg(test)]
mod tests;
