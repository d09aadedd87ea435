//! A renderer's read-back check: does the parser read the rendering back as the text and calls
//! it was rendered from?
//!
//! Folding the rendering ([`fold_chunks`](super::contract::fold_chunks)) and comparing the
//! calls by value holds each call's argument text and then its value beside the rendering and
//! the calls rendered: for a 10 MB argument two copies more than the check needs, at the
//! moment the whole input's result is also alive (the peak of a large case's run,
//! `docs/performance.md`). Here the arguments are compared by their text instead, as the lean
//! replays compare them: every renderer writes a call's arguments as their compact JSON, and
//! the parser delivers that text back, so the text each call's fragments form is hashed as it
//! streams by and compared with the hash of the compact JSON of the call rendered. Only when
//! that does not settle it (the parser delivered other text for the same value, say with
//! spaces, or the calls differ) is the rendering folded again and compared by value, exactly
//! as before: what the fast path accepts is what the value comparison accepts, and everything
//! it cannot tell goes to the value comparison.

use super::contract::{StreamParser, fold_chunks};
use crate::event::{Event, FOLD_MAX_DEPTH, Folder, ParseResult, Sink, ToolCall};
use crate::lexers::json::{JsonConfig, JsonParser};
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};

/// What reading a rendering back found.
#[derive(Debug)]
pub struct ReadBack {
    /// The parser's result. Its calls (and so its `completion`) are left out when they were
    /// compared by their text: read `same_calls` for them.
    pub result: ParseResult,
    /// The calls read back are the calls rendered, as `==` compares them.
    pub same_calls: bool,
}

/// Parses `rendered` with a fresh parser from `parser` and says whether its calls are `calls`
/// (and what else it read): [`fold_chunks`] and `result.calls == calls`, without holding the
/// arguments twice more when their text settles it.
pub fn read_back(
    mut parser: impl FnMut() -> Box<dyn StreamParser>,
    rendered: &[u8],
    calls: &[ToolCall],
) -> ReadBack {
    if let Some(r) = by_text(&mut *parser(), rendered, calls) {
        return r;
    }
    let result = fold_chunks(&mut *parser(), [rendered]);
    let same_calls = result.calls == calls;
    ReadBack { result, same_calls }
}

/// The fast path: `Some` only when every call's text equals the compact JSON of the call
/// rendered at its place (with the same name, id and server), so the values are equal too.
fn by_text(parser: &mut dyn StreamParser, rendered: &[u8], calls: &[ToolCall]) -> Option<ReadBack> {
    // Keys drawn per check: a rendering cannot be made to collide with another's hash.
    let state = RandomState::new();
    let mut sink = TextSink {
        folder: Folder::default(),
        state: &state,
        open: BTreeMap::new(),
        ended: BTreeMap::new(),
    };
    parser.feed(rendered, &mut sink);
    parser.finish(&mut sink);
    let TextSink {
        mut folder, ended, ..
    } = sink;
    let got = folder.take_ended_indexed();
    let mut result = folder.finish();
    if got.len() != calls.len() {
        return None;
    }
    for ((index, g), want) in got.iter().zip(calls) {
        let text = ended.get(index)?.as_ref()?;
        let same = g.name == want.name
            && g.id == want.id
            && g.server == want.server
            && want.arguments.is_object()
            && *text == expected(&state, want);
        if !same {
            return None;
        }
    }
    result.completion = None;
    Some(ReadBack {
        result,
        same_calls: true,
    })
}

/// The hash of the compact JSON of `call`'s arguments, with its name, id and server.
fn expected(state: &RandomState, call: &ToolCall) -> u64 {
    let mut text = args_text(state, call);
    // Writing into a hasher does not fail, and a `Value` always serializes.
    let _ = serde_json::to_writer(&mut text, &call.arguments);
    text.into_hasher().finish()
}

/// A hasher fed in pieces whose result does not depend on how the bytes were cut: they are
/// hashed in blocks of a fixed size. Shared with the lean replays' call digests.
pub(crate) struct BlockHasher {
    hasher: std::hash::DefaultHasher,
    block: [u8; 64],
    filled: usize,
}

impl BlockHasher {
    /// Goes on from `hasher` (which may already hold a call's name, id and server).
    pub(crate) fn new(hasher: std::hash::DefaultHasher) -> BlockHasher {
        BlockHasher {
            hasher,
            block: [0; 64],
            filled: 0,
        }
    }

    /// Feeds the next piece.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = (64 - self.filled).min(bytes.len());
            self.block[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
            self.filled += n;
            bytes = &bytes[n..];
            if self.filled == 64 {
                self.hasher.write(&self.block);
                self.filled = 0;
            }
        }
    }

    /// The hasher with every byte fed, for the caller to finish (or add to first).
    pub(crate) fn into_hasher(mut self) -> std::hash::DefaultHasher {
        self.hasher.write(&self.block[..self.filled]);
        self.hasher
    }
}

impl std::io::Write for BlockHasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The hash of a call's identity and argument text, fed in pieces, keyed by `state`.
fn args_text(state: &RandomState, call: &ToolCall) -> BlockHasher {
    let mut hasher = state.build_hasher();
    (&call.name, &call.id, &call.server).hash(&mut hasher);
    BlockHasher::new(hasher)
}

/// One open call's argument text as it streams by: hashed, and checked by a JSON reader that
/// builds nothing (the fold reads deeper text than [`FOLD_MAX_DEPTH`] as a string, not as the
/// value rendered).
struct OpenText {
    text: BlockHasher,
    check: JsonParser,
}

/// Folds everything but the calls' argument text, which it hashes. The folder gets `{}` for
/// each call's arguments, so the result's calls keep their place, name, id and server.
struct TextSink<'a> {
    folder: Folder,
    state: &'a RandomState,
    open: BTreeMap<usize, OpenText>,
    /// Each ended call's text hash by index: `None` when the text is not JSON the fold reads
    /// as a value.
    ended: BTreeMap<usize, Option<u64>>,
}

impl TextSink<'_> {
    fn args(&mut self, index: usize, json: &str) {
        match self.open.get_mut(&index) {
            Some(o) if self.folder.is_open(index) => {
                o.text.push(json.as_bytes());
                // Errors are sticky: the verdict is read at the end.
                let _ = o.check.feed(json);
            }
            // Not open: the fold notes it as it would.
            _ => self.folder.push_args(index, json),
        }
    }
}

impl Sink for TextSink<'_> {
    fn push(&mut self, event: Event) {
        match &event {
            Event::CallStart {
                index,
                id,
                name,
                server,
            } => {
                let call = ToolCall {
                    name: name.clone(),
                    id: id.clone(),
                    server: server.clone(),
                    arguments: serde_json::Value::Null,
                };
                let check = JsonParser::new(JsonConfig {
                    max_depth: FOLD_MAX_DEPTH,
                    stop_byte: None,
                    build_value: false,
                });
                let text = args_text(self.state, &call);
                self.open.insert(*index, OpenText { text, check });
                self.folder.push(&event);
            }
            Event::ArgsDelta { index, json } => self.args(*index, json),
            Event::CallEnd { index } if self.folder.is_open(*index) => {
                if let Some(OpenText { text, mut check }) = self.open.remove(index) {
                    // Text the fold would not read as a value (not JSON, or deeper than it
                    // reads) is never settled by its hash.
                    let read = check.finish().is_ok();
                    self.ended
                        .insert(*index, read.then(|| text.into_hasher().finish()));
                    self.folder.push_args(*index, "{}");
                }
                self.folder.push(&event);
            }
            _ => self.folder.push(&event),
        }
    }

    fn args_delta(&mut self, index: usize, json: &str) {
        self.args(index, json);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::kimi_k2;
    use serde_json::json;

    fn kimi() -> Box<dyn StreamParser> {
        Box::new(kimi_k2::Parser::new(kimi_k2::Config::default()))
    }

    fn call(name: &str, id: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            name: name.into(),
            id: Some(id.into()),
            server: None,
            arguments: args,
        }
    }

    fn rendering(calls: &[(&str, &str, &str)]) -> Vec<u8> {
        let mut s = String::from("hi<|tool_calls_section_begin|>");
        for (name, id, args) in calls {
            s.push_str(&format!(
                "<|tool_call_begin|>functions.{name}:{id}<|tool_call_argument_begin|>{args}<|tool_call_end|>"
            ));
        }
        s.push_str("<|tool_calls_section_end|>");
        s.into_bytes()
    }

    #[test]
    fn calls_that_read_back_are_settled_by_their_text() {
        let want = [
            call("f", "0", json!({"a": 1, "b": [true, null], "c": "x\ny"})),
            call("g", "1", json!({})),
        ];
        let r = rendering(&[
            ("f", "0", r#"{"a":1,"b":[true,null],"c":"x\ny"}"#),
            ("g", "1", "{}"),
        ]);
        let fast = by_text(&mut *kimi(), &r, &want).expect("compact JSON is settled by text");
        assert!(fast.same_calls);
        assert_eq!(fast.result.text, "hi");
        assert!(fast.result.errors.is_empty());
        let b = read_back(kimi, &r, &want);
        assert!(b.same_calls);
    }

    #[test]
    fn a_wrong_rendering_is_still_caught() {
        let want = [call("f", "0", json!({"a": 1, "b": "x"}))];
        for (name, id, args) in [
            ("f", "0", r#"{"a":2,"b":"x"}"#),       // another value
            ("f", "0", r#"{"a":1,"b":"x","c":0}"#), // a key more
            ("g", "0", r#"{"a":1,"b":"x"}"#),       // another name
            ("f", "1", r#"{"a":1,"b":"x"}"#),       // another id
            ("f", "0", r#"{"a":1,"b":"x""#),        // not JSON
            ("f", "0", r#"[1]"#),                   // not an object
        ] {
            let r = rendering(&[(name, id, args)]);
            let b = read_back(kimi, &r, &want);
            let full = fold_chunks(&mut *kimi(), [&r[..]]);
            assert_eq!(b.same_calls, full.calls == want, "{args}");
            assert!(!b.same_calls, "{name} {id} {args}");
        }
        // A call missing, or one more.
        let r = rendering(&[]);
        assert!(!read_back(kimi, &r, &want).same_calls);
        let r = rendering(&[("f", "0", r#"{"a":1,"b":"x"}"#), ("f", "1", "{}")]);
        assert!(!read_back(kimi, &r, &want).same_calls);
    }

    #[test]
    fn other_text_for_the_same_value_goes_to_the_value_comparison() {
        let want = [call("f", "0", json!({"a": 1.5, "b": "é"}))];
        // Spaces, an escape, keys in another order (`==` on maps ignores it): not the
        // compact JSON, but the same value.
        for args in [r#"{ "a": 1.50, "b": "\u00e9" }"#, r#"{"b":"é","a":1.5}"#] {
            let r = rendering(&[("f", "0", args)]);
            assert!(by_text(&mut *kimi(), &r, &want).is_none(), "{args}");
            let b = read_back(kimi, &r, &want);
            assert!(b.same_calls, "{args}");
            assert_eq!(b.result.calls, want);
        }
    }

    #[test]
    fn the_text_hash_does_not_depend_on_the_cuts() {
        let state = RandomState::new();
        let c = call("f", "0", json!({"s": "x".repeat(300)}));
        let json = serde_json::to_string(&c.arguments).unwrap();
        for cut in [1, 7, 64, 65, 200] {
            let mut t = args_text(&state, &c);
            for piece in json.as_bytes().chunks(cut) {
                t.push(piece);
            }
            assert_eq!(t.into_hasher().finish(), expected(&state, &c), "cut {cut}");
        }
        let other = call("f", "1", c.arguments.clone());
        assert_ne!(expected(&state, &other), expected(&state, &c));
    }
}
