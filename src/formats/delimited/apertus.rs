//! `apertus`: Swiss AI Apertus, `<|tools_prefix|>[{"NAME": {…}}, …]<|tools_suffix|>` with
//! reasoning in `<|inner_prefix|>…<|inner_suffix|>` (`specs/apertus.md`).
//!
//! ```text
//! <|inner_prefix|>Need weather.<|inner_suffix|>I will check.<|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>
//! ```
//!
//! A grammar over the family driver: the array is read by the driver's call-array reader with
//! keyed call objects (`{"NAME": ARGUMENTS}`), so each call streams as it arrives and the
//! delimiters inside JSON strings are content; reasoning is the shared layer's.

use crate::event::{ErrorKind, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::delimited::{
    CallArrayReader, Cx, Driver, EnvelopeOptions, Grammar, Limits, TextStep, ValueEnd, is_ws,
};
use crate::formats::reasoning::Syntax;
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// `<|tools_prefix|>`: the array of calls follows.
pub const TOOLS_PREFIX: &str = "<|tools_prefix|>";
/// `<|tools_suffix|>`: ends the array of calls.
pub const TOOLS_SUFFIX: &str = "<|tools_suffix|>";
/// `<|inner_prefix|>`: opens the reasoning.
pub const INNER_PREFIX: &str = "<|inner_prefix|>";
/// `<|inner_suffix|>`: closes the reasoning.
pub const INNER_SUFFIX: &str = "<|inner_suffix|>";
/// The delimiters, in the order the grammar numbers them.
pub const MARKERS: [&str; 2] = [TOOLS_PREFIX, TOOLS_SUFFIX];

config! {
    /// Leniency options and limits; every recovered deviation is one named option.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A complete array of calls not followed by `<|tools_suffix|>` (the end of the output,
            /// text, or the next `<|tools_prefix|>`) keeps its calls with a warning: the array's `]`
            /// closed them (vLLM accepts the missing suffix too).
            missing_section_end,
            /// Whitespace between `<|tools_prefix|>` and the array's `[` is read with warning
            /// `section_whitespace`: Apertus' template writes the array right after the marker,
            /// and SGLang's detector looks for `<|tools_prefix|>[` (no call without it).
            section_whitespace,
        }
        /// Size and nesting limits.
        pub limits: Limits,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            missing_section_end: true,
            section_whitespace: true,
            limits: Limits::default(),
        }
    }
}

/// Apertus' call object: `{"NAME": {…}}`.
const ELEMENT: EnvelopeOptions = EnvelopeOptions {
    args_keys: &[("", None)],
    has_id: false,
    missing_arguments: false,
    string_arguments: false,
    text_unless_named: false,
    keyed: true,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Outside a tool section.
    Text,
    /// After `<|tools_prefix|>`, before the array.
    Prefix,
    /// After `<|tools_prefix|>` and whitespace (warned), before the array.
    PrefixSpaced,
    /// The array is being read.
    Array,
    /// The array was read; `<|tools_suffix|>` should follow.
    AfterArray,
    /// After an error, up to the next delimiter.
    Skip,
}

struct Apertus {
    cfg: Config,
    state: State,
}

impl Apertus {
    fn open_section(&mut self, cx: &mut Cx) {
        cx.drop_whitespace();
        self.state = State::Prefix;
    }

    /// Text right after `<|tools_prefix|>`: the array, perhaps after whitespace.
    fn array_start(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        let lead = t.bytes().take_while(|&b| is_ws(b)).count();
        if lead > 0 && self.state == State::Prefix {
            let on = cx.lenient(
                self.cfg.section_whitespace,
                WarningKind::SectionWhitespace,
                &format!("whitespace between {TOOLS_PREFIX} and the array"),
                out,
            );
            if !on {
                self.state = State::Skip;
                return TextStep::Taken;
            }
        }
        if lead == t.len() {
            // The warning is given once: the array may follow in the next piece.
            self.state = State::PrefixSpaced;
            return TextStep::Taken;
        }
        cx.open(CallArrayReader::boxed(ELEMENT));
        self.state = State::Array;
        TextStep::Value(lead)
    }

    /// A section opened by `<|tools_prefix|>` holds no array: what came instead ends it.
    fn no_array(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        cx.error(
            ErrorKind::InvalidJson,
            "<|tools_prefix|> is not followed by a JSON array",
            out,
        );
        self.state = State::Skip;
    }

    /// The array ended without its suffix; `why` says what came instead.
    fn unclosed(&mut self, why: &str, cx: &mut Cx, out: &mut dyn Sink) {
        cx.lenient(
            self.cfg.missing_section_end,
            WarningKind::MissingSectionEnd,
            &format!("the array of calls is not followed by {TOOLS_SUFFIX} ({why})"),
            out,
        );
    }
}

impl Grammar for Apertus {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        match self.state {
            State::Text => {
                cx.text(t, out);
            }
            State::AfterArray => {
                if !cx.is_blank(t) {
                    self.unclosed("text follows it", cx, out);
                    self.state = State::Text;
                }
                cx.text(t, out);
            }
            State::Prefix | State::PrefixSpaced => return self.array_start(cx, t, out),
            State::Array | State::Skip => {}
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        let prefix = m == 0;
        if matches!(self.state, State::Prefix | State::PrefixSpaced) {
            self.no_array(cx, out);
        }
        match (self.state, prefix) {
            (State::Text | State::Skip, true) => self.open_section(cx),
            (State::AfterArray, true) => {
                self.unclosed("another section opens", cx, out);
                self.open_section(cx);
            }
            (State::AfterArray | State::Skip, false) => {
                cx.hold_whitespace();
                self.state = State::Text;
            }
            (State::Text, false) => {
                cx.error(
                    ErrorKind::MalformedMarkup,
                    "<|tools_suffix|> outside a tool section",
                    out,
                );
            }
            // The array is read by its reader, which never yields to a delimiter.
            (State::Array | State::Prefix | State::PrefixSpaced, _) => {}
        }
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        self.state = match end {
            ValueEnd::Done { .. } => {
                cx.hold_whitespace();
                State::AfterArray
            }
            ValueEnd::NotAValue => {
                cx.error(
                    ErrorKind::InvalidJson,
                    "<|tools_prefix|> is not followed by a JSON array",
                    out,
                );
                State::Skip
            }
            ValueEnd::Failed { kind, message, .. } => {
                cx.report(kind, &message, out);
                State::Skip
            }
            ValueEnd::Cut { .. } | ValueEnd::Stopped(_) | ValueEnd::Unnamed(_) => {
                cx.unterminated("the stream ended inside the array of calls", out);
                State::Text
            }
        };
    }

    fn at_text(&self) -> bool {
        matches!(self.state, State::Text)
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        match self.state {
            State::AfterArray => self.unclosed("the output ends", cx, out),
            State::Prefix | State::PrefixSpaced => {
                cx.unterminated("the stream ended inside the array of calls", out)
            }
            _ => {}
        }
        self.state = State::Text;
    }
}

/// An apertus parser with the given options (without the reasoning layer).
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(
        Apertus {
            cfg,
            state: State::Text,
        },
        &MARKERS,
        cfg.limits,
    )
}

/// Renders text and calls as the Apertus template writes an assistant turn: text, then
/// `<|tools_prefix|>` and one JSON array of `{"NAME": ARGUMENTS}` objects, then
/// `<|tools_suffix|>`.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    if let Some(t) = REASONING.tag_in(text) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    let mut out = String::from(text);
    if calls.is_empty() {
        return Ok(out.into_bytes());
    }
    let mut items = Vec::new();
    for c in calls {
        if c.id.is_some() || c.server.is_some() {
            return Err("apertus carries no call ids or servers".into());
        }
        if c.name.is_empty() {
            return Err("a call needs a name".into());
        }
        crate::formats::delimited::json_header_fits(&c.name, "name")?;
        if !c.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        let mut o = serde_json::Map::new();
        o.insert(c.name.clone(), c.arguments.clone());
        items.push(serde_json::Value::Object(o));
    }
    out.push_str(TOOLS_PREFIX);
    out.push_str(&serde_json::Value::Array(items).to_string());
    out.push_str(TOOLS_SUFFIX);
    Ok(out.into_bytes())
}

/// Apertus' reasoning, `<|inner_prefix|>…<|inner_suffix|>` (special tokens; on by default). A
/// tool section inside it is an internal tool call, a call (the apertus_format docs: the inner
/// section holds "internal tool calls"), after which the reasoning goes on. The unused
/// `<think>`/`</think>` of its vocabulary are text, never reasoning (mlx-lm#1663).
pub static REASONING: Syntax = Syntax {
    pairs: &[(INNER_PREFIX, INNER_SUFFIX)],
    call_markers: &[TOOLS_PREFIX],
    on_by_default: true,
    call_ends: &[TOOLS_SUFFIX],
};

/// What sets apertus apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "apertus";
    const SUMMARY: &'static str = "Swiss AI Apertus: <|tools_prefix|>[{\"NAME\": {…}}, …]<|tools_suffix|>, reasoning <|inner_prefix|>…<|inner_suffix|>";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// Apertus' special tokens that can appear in output. Their ids are not verified (no
    /// package ships its tokenizer), so none is declared and `o200k_base` cuts the replays
    /// (`specs/apertus.md`, Tokens); each is still one token of the replay.
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken {
            text: TOOLS_PREFIX,
            id: None,
        },
        SpecialToken {
            text: TOOLS_SUFFIX,
            id: None,
        },
        SpecialToken {
            text: INNER_PREFIX,
            id: None,
        },
        SpecialToken {
            text: INNER_SUFFIX,
            id: None,
        },
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
    const LAYER: Option<&'static Syntax> = Some(&REASONING);
}

/// The apertus format.
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

    fn warnings(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn the_sheet_example_with_reasoning() {
        let mk = || reasoning::wrap(parser(Config::default()), &REASONING);
        let r = every_cut(
            &mk,
            b"<|inner_prefix|>Need weather.<|inner_suffix|>I will check.<|tools_prefix|>[{\"get_weather\": {\"city\": \"Paris\"}}, {\"get_time\": {}}]<|tools_suffix|>",
        )
        .0;
        assert_eq!(r.reasoning_text(), "Need weather.");
        assert_eq!(r.text, "I will check.");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].name, "get_weather");
        assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(r.calls[1].arguments, json!({}));
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
        let r = every_cut(&mk, b"<think>x</think>y").0;
        assert_eq!(r.text, "<think>x</think>y");
    }

    #[test]
    fn whitespace_after_the_prefix_is_a_named_deviation() {
        let s = "a<|tools_prefix|> \n [{\"f\": {}}]\n<|tools_suffix|>b";
        let r = all_ways(s);
        assert_eq!((r.text.as_str(), r.calls.len()), ("ab", 1));
        assert_eq!(warnings(&r), ["section_whitespace"]);
        assert!(r.errors.is_empty());
        // Whitespace before the suffix alone is no deviation.
        let r = all_ways("<|tools_prefix|>[{\"f\": {}}] <|tools_suffix|>");
        assert!(r.warnings.is_empty() && r.calls.len() == 1, "{r:?}");
        let off = Config {
            section_whitespace: false,
            ..Config::default()
        };
        let r = every_cut(&|| Box::new(parser(off)), s.as_bytes()).0;
        assert_eq!((r.text.as_str(), r.calls.len()), ("ab", 0));
        assert_eq!(r.error_kinds(), vec![ErrorKind::MalformedMarkup]);
        // A prefix followed by whitespace and no array is still one error.
        let r = all_ways("<|tools_prefix|> <|tools_suffix|>x");
        assert_eq!(r.error_kinds(), vec![ErrorKind::InvalidJson]);
        assert_eq!(r.text, "x");
        let r = all_ways("<|tools_prefix|>  ");
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
    }

    #[test]
    fn internal_calls_inside_reasoning_run_and_the_block_goes_on() {
        let mk = || reasoning::wrap(parser(Config::default()), &REASONING);
        let r = every_cut(
            &mk,
            b"<|inner_prefix|>a<|tools_prefix|>[{\"f\": {\"s\": \"<|tools_suffix|><|inner_suffix|>\"}}]<|tools_suffix|>b<|inner_suffix|>c",
        )
        .0;
        assert_eq!(r.reasoning_text(), "ab");
        assert_eq!(r.text, "c");
        assert_eq!(
            r.calls[0].arguments,
            json!({"s": "<|tools_suffix|><|inner_suffix|>"})
        );
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
        // The turn pausing after an internal call leaves no unterminated reasoning; reasoning
        // written after the call does.
        let r = every_cut(
            &mk,
            b"<|inner_prefix|>a<|tools_prefix|>[{\"f\": {}}]<|tools_suffix|>\n",
        )
        .0;
        assert_eq!(r.calls.len(), 1);
        assert!(r.warnings.is_empty(), "{r:?}");
        let r = every_cut(
            &mk,
            b"<|inner_prefix|>a<|tools_prefix|>[{\"f\": {}}]<|tools_suffix|>more",
        )
        .0;
        assert_eq!(warnings(&r), ["unterminated_reasoning"]);
    }

    #[test]
    fn keyed_elements_markers_in_strings_and_escaped_names() {
        let r = all_ways(
            "<|tools_prefix|>[{\"f\\u0031\": {\"s\": \"<|tools_suffix|>]}\"}}]<|tools_suffix|>after",
        );
        assert_eq!(r.calls[0].name, "f1");
        assert_eq!(r.calls[0].arguments, json!({"s": "<|tools_suffix|>]}"}));
        assert_eq!(r.text, "after");
    }

    #[test]
    fn a_bad_element_is_one_error_and_the_array_goes_on() {
        for (bad, kind) in [
            ("{\"f\": [1]}", ErrorKind::InvalidJson),
            ("{\"f\": {}, \"g\": {}}", ErrorKind::InvalidJson),
            (
                "{\"name\": \"f\", \"arguments\": {}}",
                ErrorKind::InvalidJson,
            ),
            ("{}", ErrorKind::MissingName),
            ("{\"\": {}}", ErrorKind::MissingName),
        ] {
            let r = all_ways(&format!(
                "A<|tools_prefix|>[{bad}, {{\"ok\": {{}}}}]<|tools_suffix|>B"
            ));
            assert_eq!(r.error_kinds(), vec![kind], "{bad}");
            assert_eq!(r.calls.len(), 1, "{bad}");
            assert_eq!(r.calls[0].name, "ok");
            assert_eq!(r.text, "AB", "{bad}");
        }
    }

    #[test]
    fn broken_arrays() {
        for (s, kind, calls, text) in [
            (
                "<|tools_prefix|>[{\"f\": {\"a\": }}]<|tools_suffix|>x",
                ErrorKind::InvalidJson,
                0,
                "x",
            ),
            (
                "<|tools_prefix|>[{\"f\": {}},]<|tools_suffix|>",
                ErrorKind::InvalidJson,
                1,
                "",
            ),
            (
                "<|tools_prefix|>[1]<|tools_suffix|>",
                ErrorKind::InvalidJson,
                0,
                "",
            ),
            (
                "<|tools_prefix|>{\"f\": {}}<|tools_suffix|>",
                ErrorKind::InvalidJson,
                0,
                "",
            ),
            (
                "<|tools_prefix|>[{\"f\": {}}<|tools_suffix|>",
                ErrorKind::InvalidJson,
                1,
                "",
            ),
            (
                "<|tools_prefix|>[{\"f\": {\"a\": 1",
                ErrorKind::Unterminated,
                0,
                "",
            ),
            (
                "<|tools_prefix|>[{\"f\": {}}, ",
                ErrorKind::Unterminated,
                1,
                "",
            ),
            ("<|tools_prefix|>", ErrorKind::Unterminated, 0, ""),
            ("a<|tools_suffix|>b", ErrorKind::MalformedMarkup, 0, "ab"),
        ] {
            let r = all_ways(s);
            assert_eq!(r.error_kinds(), vec![kind], "{s}");
            assert_eq!(r.calls.len(), calls, "{s}");
            assert_eq!(r.text, text, "{s}");
        }
    }

    #[test]
    fn a_missing_suffix_keeps_the_calls_with_a_warning() {
        let r = all_ways("<|tools_prefix|>[{\"f\": {}}]");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(warnings(&r), ["missing_section_end"]);
        let r = all_ways("<|tools_prefix|>[{\"f\": {}}] then text");
        assert_eq!(r.text, " then text");
        assert_eq!(warnings(&r), ["missing_section_end"]);
        let r =
            all_ways("<|tools_prefix|>[{\"f\": {}}]<|tools_prefix|>[{\"g\": {}}]<|tools_suffix|>");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(warnings(&r), ["missing_section_end"]);
        let strict = Config {
            missing_section_end: false,
            ..Config::default()
        };
        let r = fold_cut(&mut parser(strict), b"<|tools_prefix|>[{\"f\": {}}]", &[]);
        assert_eq!(r.error_kinds(), vec![ErrorKind::MalformedMarkup]);
    }

    #[test]
    fn limits_and_the_renderer() {
        let deep = format!(
            "<|tools_prefix|>[{{\"f\": {{\"a\": {}{}}}}}]<|tools_suffix|>",
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(
            all_ways(&deep).error_kinds(),
            vec![ErrorKind::LimitExceeded]
        );
        let long = "n".repeat(Limits::default().max_header_bytes + 1);
        let r = all_ways(&format!(
            "<|tools_prefix|>[{{\"{long}\": {{}}}}]<|tools_suffix|>"
        ));
        assert_eq!(r.error_kinds(), vec![ErrorKind::LimitExceeded]);
        let call = |name: &str| ToolCall {
            name: name.into(),
            id: None,
            server: None,
            arguments: json!({}),
        };
        let t = Tools::default();
        assert!(render("", &[call(&long)], &t).is_err());
        assert!(render("", &[call(&long[1..])], &t).is_ok());
        assert!(render("<|inner_prefix|>", &[], &t).is_err());
        assert!(render("<|tools_suffix|>", &[], &t).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn rendered_calls_parse_back_under_cuts(
            text in "[^<]{0,12}",
            calls in proptest::collection::vec(("[a-z_]{1,8}", crate::formats::core::testkit::arb_json("[a-z<>|\\[\\]{}_ \"\\\\]{0,8}")), 0..3),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, v)| prop_call(name, None, v)).collect();
            let bytes = render(&text, &calls, &Tools::default()).unwrap();
            parses_back(&mut parser(Config::default()), &bytes, &cuts, &text, &calls)?;
        }

        #[test]
        fn whole_and_cycling_small_chunks_agree(
            parts in proptest::collection::vec(prop_oneof![
                Just(TOOLS_PREFIX.to_string()), Just(TOOLS_SUFFIX.to_string()), Just("[".to_string()),
                Just("]".to_string()), Just(", ".to_string()), Just("{\"f\": ".to_string()),
                Just("{\"a\": \"<|tools_suffix|>]\"}}".to_string()), Just("{}}".to_string()),
                Just("\"".to_string()), Just("\\".to_string()), Just(" \n".to_string()),
                Just("<|tools_".to_string()), Just("東京🌧".to_string()),
                "[a-z{}\\[\\]\":, <|>]{0,6}",
            ], 0..16),
            size in 1usize..5,
        ) {
            let s = parts.concat();
            let whole = fold_cut(&mut parser(Config::default()), s.as_bytes(), &[]);
            let mut cuts = Vec::new();
            let (mut at, mut k) = (0, 0);
            while at < s.len() {
                at += 1 + k % size;
                k += 1;
                cuts.push(at.min(s.len()));
            }
            let r = fold_cut(&mut parser(Config::default()), s.as_bytes(), &cuts);
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(r.warnings.len(), whole.warnings.len());
        }
    }
}
