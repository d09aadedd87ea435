//! A conform adapter (specs/adapter.md, protocol 2) around openai-harmony's `StreamableParser`,
//! the reference implementation of the harmony format, for a differential check of conform's
//! `harmony` parser.
//!
//! Build and run (no network: the vocabulary is rebuilt from tiktoken-rs's embedded one):
//!
//! ```sh
//! cargo build --release --manifest-path examples/adapters/harmony_reference/Cargo.toml
//! conform run corpus/harmony --parser builtin \
//!     --parser 'cmd:examples/adapters/harmony_reference/target/release/harmony-reference-adapter'
//! ```
//!
//! The reference parser is token-driven: each turn's chunks are joined, the text is encoded with
//! o200k_harmony (special tokens as tokens) and fed token by token, so conform's chunkings do
//! not reach it (it is split-invariant by construction). Its messages are mapped with the
//! mapping of `specs/harmony.md` §1: a `functions.NAME` recipient is a call NAME, any other
//! recipient a call named by it, `analysis` is reasoning, other channels text. The library
//! knows no JSON: the adapter ends a call when its content is a JSON object, `empty_arguments`
//! when blank, `invalid_json` otherwise. A library error is `malformed_markup` and ends the
//! turn (the library cannot go on). No warnings: the library recovers nothing.
//!
//! A turn that begins with `<|start|>` is parsed with no initial role (the library then expects
//! `<|start|>`), any other with role `assistant` (it then expects the header): the library
//! accepts exactly one of the two per parser, and a server knows which its prompt needs.

#[path = "../../protocol/o200k.rs"]
mod o200k;
#[allow(dead_code)]
#[path = "../../protocol/protocol.rs"]
mod protocol;

use openai_harmony::chat::Role;
use openai_harmony::{HarmonyEncoding, HarmonyEncodingName, StreamableParser};
use protocol::{Answer, EngineClock, ev};
use serde_json::Value;

/// Loads o200k_harmony from a vocabulary file written into a directory of our own (removed
/// again once loaded), so that loading the encoding needs no download.
fn load_encoding() -> Result<HarmonyEncoding, String> {
    let dir = std::env::temp_dir().join(format!("harmony-reference-{}", std::process::id()));
    let enc = o200k::provide_o200k(&dir).and_then(|()| {
        openai_harmony::load_harmony_encoding(HarmonyEncodingName::HarmonyGptOss)
            .map_err(|e| e.to_string())
    });
    let _ = std::fs::remove_dir_all(&dir);
    enc
}

/// The events of one message being streamed.
struct Open {
    kind: Kind,
    args: String,
}

#[derive(Clone, PartialEq)]
enum Kind {
    Text,
    Reasoning,
    Call(usize),
}

struct Turn<'a> {
    enc: &'a HarmonyEncoding,
    events: Vec<Value>,
    open: Option<Open>,
    next_index: usize,
    seen_messages: usize,
}

impl Turn<'_> {
    /// Looks at the parser after a token: a content delta (the first one opens the message),
    /// a message that ended.
    fn observe(&mut self, p: &StreamableParser, at_eos: bool) {
        if p.messages().len() > self.seen_messages {
            self.seen_messages = p.messages().len();
            if self.open.is_none()
                && let Some(m) = p.messages().last()
            {
                // A message that ended without content (no delta opened it).
                self.begin(m.recipient.clone(), m.channel.clone());
            }
            self.close(at_eos);
        } else if let Some(d) = p.last_content_delta().ok().flatten() {
            if self.open.is_none() {
                self.begin(p.current_recipient(), p.current_channel());
            }
            self.delta(&d);
        }
    }

    fn begin(&mut self, recipient: Option<String>, channel: Option<String>) {
        let kind = match (recipient, channel) {
            (Some(r), _) => {
                let name = r.strip_prefix("functions.").unwrap_or(&r).to_string();
                let index = self.next_index;
                self.next_index += 1;
                self.events.push(ev::call_start(index, None, &name));
                Kind::Call(index)
            }
            (None, Some(c)) if c == "analysis" => Kind::Reasoning,
            _ => Kind::Text,
        };
        self.open = Some(Open {
            kind,
            args: String::new(),
        });
    }

    fn delta(&mut self, d: &str) {
        let Some(o) = self.open.as_mut() else { return };
        match o.kind {
            Kind::Text => self.events.push(ev::text(d)),
            Kind::Reasoning => self.events.push(ev::reasoning(d)),
            Kind::Call(index) => {
                // Leading whitespace is not part of the JSON text.
                let piece = if o.args.trim().is_empty() {
                    d.trim_start()
                } else {
                    d
                };
                o.args.push_str(d);
                if !piece.is_empty() {
                    self.events.push(ev::args_delta(index, piece));
                }
            }
        }
    }

    /// A message ended: a call whose content is a JSON object ends. At EOS (the library
    /// closes the open message) a call whose content is not one is `unterminated`.
    fn close(&mut self, at_eos: bool) {
        let Some(o) = self.open.take() else { return };
        if let Kind::Call(index) = o.kind {
            let complete = matches!(serde_json::from_str::<Value>(&o.args), Ok(Value::Object(_)));
            if at_eos && !complete {
                self.error(
                    "unterminated",
                    &format!("the stream ended inside call {index}"),
                );
            } else if o.args.trim().is_empty() {
                self.error(
                    "empty_arguments",
                    &format!("call {index} has empty arguments"),
                );
            } else {
                match serde_json::from_str::<Value>(&o.args) {
                    Ok(Value::Object(_)) => self.events.push(ev::call_end(index)),
                    _ => self.error(
                        "invalid_json",
                        &format!("call {index}'s arguments are not a JSON object"),
                    ),
                }
            }
        }
    }

    fn error(&mut self, kind: &str, message: &str) {
        self.events.push(ev::error(kind, message));
    }

    /// Feeds the turn's text token by token; `clock` times the library's parsing calls.
    fn run(mut self, text: &str, clock: &mut EngineClock) -> Vec<Value> {
        let role = (!text.starts_with("<|start|>")).then_some(Role::Assistant);
        let mut p = match StreamableParser::new(self.enc.clone(), role) {
            Ok(p) => p,
            Err(e) => {
                self.error("malformed_markup", &e.to_string());
                return self.events;
            }
        };
        for token in self.enc.tokenizer().encode_with_special_tokens(text) {
            if let Err(e) = clock.time(|| p.process(token)) {
                self.error("malformed_markup", &format!("openai-harmony: {e}"));
                return self.events;
            }
            self.observe(&p, false);
        }
        match clock.time(|| p.process_eos()) {
            Ok(_) => self.observe(&p, true),
            Err(e) => self.error("malformed_markup", &format!("openai-harmony at EOS: {e}")),
        }
        self.events
    }
}

fn main() {
    let enc = match load_encoding() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot load the o200k_harmony encoding: {e}");
            std::process::exit(1);
        }
    };
    let name = "openai-harmony 0.0.8 StreamableParser";
    protocol::serve(name, &["harmony"], |req| {
        let mut clock = EngineClock::default();
        let turns = req
            .turns
            .iter()
            .map(|t| {
                let turn = Turn {
                    enc: &enc,
                    events: Vec::new(),
                    open: None,
                    next_index: 0,
                    seen_messages: 0,
                };
                // The library reads whole text: the chunks' bytes joined, then tokenized.
                turn.run(&String::from_utf8_lossy(&t.chunks.concat()), &mut clock)
            })
            .collect();
        Ok((Answer::Events(turns), clock.nanos()))
    });
}
