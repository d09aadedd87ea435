//! `mistral_v11`: Mistral tokenizer v11+ calls, `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{json}` (v11)
//! and `[TOOL_CALLS]NAME[ARGS]{json}` (v13+), repeated (`specs/mistral_v11.md`).
//!
//! No delimiter ends a call: its arguments end where their JSON object ends, which the
//! object reader finds string-aware, so `[TOOL_CALLS]` inside an argument string is content.

use crate::event::{ErrorKind, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::delimited::{
    Cx, Driver, Grammar, Limits, ObjectReader, Stop, TextStep, ValueEnd,
};
use crate::formats::reasoning::Syntax;
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// `[TOOL_CALLS]`: starts a call; the name follows.
pub const TOOL_CALLS: &str = "[TOOL_CALLS]";
/// `[ARGS]`: ends the header; the JSON arguments follow.
pub const ARGS: &str = "[ARGS]";
/// `[CALL_ID]`: (v11) the call id follows.
pub const CALL_ID: &str = "[CALL_ID]";
/// The delimiters, in the order the grammar numbers them.
pub const MARKERS: [&str; 3] = [TOOL_CALLS, ARGS, CALL_ID];

const M_TOOL_CALLS: usize = 0;
const M_ARGS: usize = 1;

config! {
    /// Leniency options and limits; every recovered deviation is one named option.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// `[TOOL_CALLS]NAME{…}` without `[ARGS]` (the control token stripped by a decoder that
            /// skips special tokens, as in vLLM's own tests) is read with the name ending at the first
            /// `{`, with a warning.
            missing_args_marker,
            /// Whitespace around a call's name or id (`[TOOL_CALLS] f [CALL_ID] a1 [ARGS]`: the
            /// template writes none; SGLang's detector does not read such a call) is trimmed,
            /// with warning `header_whitespace`; off → `malformed_markup`, the call dropped.
            header_whitespace,
        }
        /// Size and nesting limits.
        pub limits: Limits,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            missing_args_marker: true,
            header_whitespace: true,
            limits: Limits::default(),
        }
    }
}

enum State {
    Text,
    /// After `[TOOL_CALLS]`: the name so far.
    Name(String),
    /// After `[CALL_ID]`: the name (`None`: missing) and the id so far.
    Id(Option<String>, String),
    /// The arguments of this call (`None`: it already failed) are being read.
    Args(Option<usize>),
    /// Only whitespace after `[ARGS]`, then something that is not a JSON object.
    ArgsBlank(Option<usize>),
    /// After an error, up to the next `[TOOL_CALLS]`.
    Skip,
}

struct MistralV11 {
    cfg: Config,
    state: State,
    /// Whether the current call's name or id had whitespace around it.
    padded: bool,
}

impl MistralV11 {
    /// A name or id trimmed (noting whether it was padded), `None` when empty.
    fn non_empty(&mut self, s: &str) -> Option<String> {
        let t = s.trim();
        self.padded |= !t.is_empty() && t.len() != s.len();
        (!t.is_empty()).then(|| t.to_string())
    }

    /// Starts the call (when it has a name) and opens its arguments.
    fn open_args(&mut self, cx: &mut Cx, name: Option<&str>, id: Option<&str>, out: &mut dyn Sink) {
        let padded = std::mem::take(&mut self.padded);
        let index = match name {
            // A refused header's arguments are still read, to be dropped.
            Some(_)
                if padded
                    && !cx.lenient(
                        self.cfg.header_whitespace,
                        WarningKind::HeaderWhitespace,
                        "whitespace around a call's name or id",
                        out,
                    ) =>
            {
                None
            }
            Some(n) => Some(cx.start_call(n, id, out)),
            None => {
                cx.error(ErrorKind::MissingName, "a call without a name", out);
                None
            }
        };
        cx.open(ObjectReader::boxed(index, false, &cx.limits));
        self.state = State::Args(index);
    }

    /// The header text before `{` when `[ARGS]` is missing.
    fn args_without_marker(
        &mut self,
        cx: &mut Cx,
        name: Option<String>,
        id: Option<String>,
        out: &mut dyn Sink,
    ) -> bool {
        if !cx.lenient(
            self.cfg.missing_args_marker,
            WarningKind::MissingArgsMarker,
            "arguments without [ARGS]",
            out,
        ) {
            self.state = State::Skip;
            return false;
        }
        self.open_args(cx, name.as_deref(), id.as_deref(), out);
        true
    }

    fn marker_in_text(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        if m == M_TOOL_CALLS {
            cx.drop_whitespace();
            self.state = State::Name(String::new());
        } else {
            cx.error(
                ErrorKind::MalformedMarkup,
                &format!("{} outside a call", MARKERS[m]),
                out,
            );
        }
    }

    fn header_too_long(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        cx.error(
            ErrorKind::LimitExceeded,
            &format!(
                "a call header longer than {} bytes",
                cx.limits.max_header_bytes
            ),
            out,
        );
        self.state = State::Skip;
    }
}

impl Grammar for MistralV11 {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        match &mut self.state {
            State::Text => {
                cx.text(t, out);
            }
            State::Name(buf) | State::Id(_, buf) => {
                let brace = memchr::memchr(b'{', t.as_bytes());
                let upto = brace.unwrap_or(t.len());
                if buf.len() + upto > cx.limits.max_header_bytes {
                    self.header_too_long(cx, out);
                    return TextStep::Taken;
                }
                buf.push_str(&t[..upto]);
                if let Some(k) = brace {
                    let (name, id) = match std::mem::replace(&mut self.state, State::Skip) {
                        State::Name(n) => (self.non_empty(&n), None),
                        State::Id(n, id) => (n, self.non_empty(&id)),
                        _ => (None, None),
                    };
                    if self.args_without_marker(cx, name, id, out) {
                        return TextStep::Value(k);
                    }
                }
            }
            State::ArgsBlank(index) => {
                if index.is_some() {
                    cx.error(
                        ErrorKind::InvalidJson,
                        "arguments that are not a JSON object",
                        out,
                    );
                }
                self.state = State::Skip;
            }
            State::Args(_) | State::Skip => {}
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text => self.marker_in_text(cx, m, out),
            State::Name(buf) => match m {
                M_ARGS => {
                    let name = self.non_empty(&buf);
                    self.open_args(cx, name.as_deref(), None, out)
                }
                M_TOOL_CALLS => {
                    cx.error(
                        ErrorKind::MalformedMarkup,
                        "a call name without [ARGS] and arguments",
                        out,
                    );
                    self.marker_in_text(cx, m, out);
                }
                _ => self.state = State::Id(self.non_empty(&buf), String::new()),
            },
            State::Id(name, buf) => match m {
                M_ARGS => match self.non_empty(&buf) {
                    Some(id) => self.open_args(cx, name.as_deref(), Some(&id), out),
                    None => {
                        cx.error(ErrorKind::MalformedMarkup, "an empty [CALL_ID]", out);
                        self.state = State::Skip;
                    }
                },
                _ => {
                    cx.error(
                        ErrorKind::MalformedMarkup,
                        "a call id not followed by [ARGS]",
                        out,
                    );
                    if m == M_TOOL_CALLS {
                        self.marker_in_text(cx, m, out);
                    } else {
                        self.state = State::Skip;
                    }
                }
            },
            State::ArgsBlank(index) => {
                if index.is_some() {
                    cx.error(
                        ErrorKind::EmptyArguments,
                        "a call with empty arguments",
                        out,
                    );
                }
                if m == M_TOOL_CALLS {
                    self.marker_in_text(cx, m, out);
                } else {
                    self.state = State::Skip;
                }
            }
            State::Skip => {
                if m == M_TOOL_CALLS {
                    self.marker_in_text(cx, m, out);
                } else {
                    self.state = State::Skip;
                }
            }
            // The arguments are read by their reader, which never yields to a delimiter.
            State::Args(i) => self.state = State::Args(i),
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        let args = match self.state {
            State::Args(i) => i,
            _ => None,
        };
        self.state = match end {
            ValueEnd::Done { index } => {
                if let Some(i) = index {
                    cx.end_call(i, out);
                } else {
                    cx.hold_whitespace();
                }
                State::Text
            }
            ValueEnd::NotAValue => State::ArgsBlank(args),
            ValueEnd::Failed { kind, message, .. } => {
                cx.report(kind, &message, out);
                State::Skip
            }
            ValueEnd::Cut { index } | ValueEnd::Stopped(Stop { index, .. }) => {
                cx.cut_in_value(index, out);
                State::Text
            }
            ValueEnd::Unnamed(raw) => {
                cx.text(&raw, out);
                State::Text
            }
        };
    }

    fn at_text(&self) -> bool {
        matches!(self.state, State::Text)
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        match std::mem::replace(&mut self.state, State::Text) {
            State::Name(_) | State::Id(..) => {
                cx.unterminated("the stream ended inside a call header", out)
            }
            State::ArgsBlank(Some(_)) => {
                cx.unterminated("the stream ended before a call's arguments", out)
            }
            _ => {}
        }
    }
}

/// A mistral_v11 parser with the given options.
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(
        MistralV11 {
            cfg,
            state: State::Text,
            padded: false,
        },
        &MARKERS,
        cfg.limits,
    )
}

/// Whether `s` can be written as a name or id between the control tokens.
fn writable(s: &str) -> bool {
    !s.is_empty()
        && s.trim() == s
        && !s.contains('{')
        && !MARKERS.iter().any(|m| s.contains(m))
        && s.len() <= Limits::default().max_header_bytes
}

/// Renders text and calls as the v11 encoder does: text, then per call
/// `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{…}` (`[CALL_ID]ID` only for calls with an id).
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    if let Some(t) = REASONING.tag_in(text) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    let mut out = String::from(text);
    for c in calls {
        if c.server.is_some() {
            return Err("mistral_v11 has no server field".into());
        }
        if !writable(&c.name) {
            return Err(format!("the name {:?} cannot be written", c.name));
        }
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        out.push_str(TOOL_CALLS);
        out.push_str(&c.name);
        if let Some(id) = &c.id {
            if !writable(id) {
                return Err(format!("the id {id:?} cannot be written"));
            }
            out.push_str(CALL_ID);
            out.push_str(id);
        }
        out.push_str(ARGS);
        out.push_str(&c.arguments.to_string());
    }
    Ok(out.into_bytes())
}

/// Magistral's reasoning blocks, as in `mistral` (the same control tokens); a call written
/// inside one is reasoning, never a call (`specs/mistral_v11.md`, Reasoning).
pub use crate::formats::mistral::REASONING;

/// What sets mistral_v11 apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "mistral_v11";
    const SUMMARY: &'static str = "Mistral v11+: [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{json} (v11) / [TOOL_CALLS]NAME[ARGS]{json} (v13+)";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// Tekken control tokens that can appear in v11+ output (ids from mistral-common's tests).
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] = &["</s>"];
    const VOCABULARY: Option<&'static str> = Some("tekken_v11");
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken::new("</s>", 2),
        SpecialToken::new(TOOL_CALLS, 9),
        SpecialToken::new(ARGS, 32),
        SpecialToken::new(CALL_ID, 33),
        SpecialToken {
            text: "[THINK]",
            id: None,
        },
        SpecialToken {
            text: "[/THINK]",
            id: None,
        },
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
    const LAYER: Option<&'static Syntax> = Some(&REASONING);
}

/// The mistral_v11 format.
pub static FORMAT: Format = entry::format::<Declared>();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::core::testkit::{every_cut, fold_cut, parses_back, prop_call};
    use crate::formats::reasoning;
    use proptest::prelude::*;
    use serde_json::json;

    fn all_ways(s: &str) -> ParseResult {
        every_cut(&|| Box::new(parser(Config::default())), s.as_bytes()).0
    }

    #[test]
    fn think_blocks_are_reasoning_and_a_call_inside_one_does_not_run() {
        let mk = || reasoning::wrap(parser(Config::default()), &REASONING);
        let call = "[TOOL_CALLS]f[ARGS]{\"a\": \"[/THINK]\"}";
        let r = every_cut(&mk, format!("[THINK]plan[/THINK]{call}").as_bytes()).0;
        assert_eq!(r.reasoning_text(), "plan");
        assert_eq!(r.calls[0].arguments, json!({"a": "[/THINK]"}));
        // Inside reasoning nothing is JSON: the first close tag ends the block.
        let r = every_cut(&mk, b"[THINK][TOOL_CALLS]f[ARGS]{}[/THINK]ok").0;
        assert_eq!(r.reasoning_text(), "[TOOL_CALLS]f[ARGS]{}");
        assert!(r.calls.is_empty());
        assert_eq!(r.text, "ok");
        assert_eq!(r.warnings[0].kind, "call_in_reasoning");
    }

    #[test]
    fn v11_and_v13_calls_with_text_after() {
        let r = all_ways(
            "Checking.[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"[TOOL_CALLS]x[ARGS]\"}[TOOL_CALLS]get_time[ARGS] {} \nDone.",
        );
        assert_eq!(r.text, "Checking. \nDone.");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].id.as_deref(), Some("a1B2c3D4e"));
        assert_eq!(r.calls[0].arguments, json!({"city": "[TOOL_CALLS]x[ARGS]"}));
        assert_eq!(r.calls[1].id, None);
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    }

    #[test]
    fn a_padded_name_or_id_is_trimmed_with_a_warning_or_refused() {
        for s in [
            "[TOOL_CALLS] get_time [ARGS]{}",
            "[TOOL_CALLS]get_time[CALL_ID] a1B2c3D4e [ARGS]{}",
            "[TOOL_CALLS] get_time {}",
        ] {
            let r = all_ways(s);
            assert_eq!(r.calls[0].name, "get_time", "{s}");
            assert!(
                r.warnings.iter().any(|w| w.kind == "header_whitespace"),
                "{s}: {r:?}"
            );
            let strict = Config {
                header_whitespace: false,
                ..Config::default()
            };
            let r = every_cut(&|| Box::new(parser(strict)), s.as_bytes()).0;
            assert!(r.calls.is_empty(), "{s}");
            assert_eq!(r.error_kinds(), vec![ErrorKind::MalformedMarkup], "{s}");
        }
    }

    #[test]
    fn bad_calls_drop_only_themselves() {
        let ok = "[TOOL_CALLS]ok[ARGS]{}";
        for (bad, kind) in [
            ("[TOOL_CALLS] [ARGS]{}", ErrorKind::MissingName),
            ("[TOOL_CALLS]f[ARGS]", ErrorKind::EmptyArguments),
            ("[TOOL_CALLS]f[ARGS][1]", ErrorKind::InvalidJson),
            ("[TOOL_CALLS]f[ARGS]{\"a\": 1,}", ErrorKind::InvalidJson),
            ("[TOOL_CALLS]f", ErrorKind::MalformedMarkup),
        ] {
            let r = all_ways(&format!("{bad}{ok}"));
            assert_eq!(r.error_kinds(), vec![kind], "{bad}");
            assert_eq!(r.calls.len(), 1, "{bad}");
            assert_eq!(r.calls[0].name, "ok");
        }
    }

    #[test]
    fn missing_args_marker_and_end_of_stream() {
        let r = all_ways("[TOOL_CALLS]add{\"a\": 3.5, \"b\": 4}");
        assert_eq!(r.calls[0].name, "add");
        assert_eq!(r.warnings[0].kind, "missing_args_marker");
        let r = all_ways("[TOOL_CALLS]f[ARGS]{\"a\": [1");
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
        let r = all_ways("[TOOL_CALLS]f[ARG");
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn rendered_calls_parse_back_under_cuts(
            text in "[^\\[]{0,12}",
            calls in proptest::collection::vec(("[a-z_]{1,8}", proptest::option::of("[a-zA-Z0-9]{9}"), crate::formats::core::testkit::arb_json("[a-z\\[\\]_ \"\\\\]{0,8}")), 0..3),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, id, v)| prop_call(name, id, v)).collect();
            let bytes = render(&text, &calls, &Tools::default()).unwrap();
            parses_back(&mut parser(Config::default()), &bytes, &cuts, &text, &calls)?;
        }

        #[test]
        fn soup_is_split_invariant(
            parts in proptest::collection::vec(prop_oneof![
                Just(TOOL_CALLS.to_string()), Just(ARGS.to_string()), Just(CALL_ID.to_string()),
                Just("{\"a\": \"[TOOL_CALLS]\"}".to_string()), Just("\"".to_string()),
                Just(" \n".to_string()), Just("[TOOL".to_string()), "[a-z{}\":, \\[\\]]{0,6}",
            ], 0..16),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
        ) {
            let s = parts.concat();
            let whole = fold_cut(&mut parser(Config::default()), s.as_bytes(), &[]);
            let r = fold_cut(&mut parser(Config::default()), s.as_bytes(), &cuts);
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(r.warnings.len(), whole.warnings.len());
        }
    }
}
