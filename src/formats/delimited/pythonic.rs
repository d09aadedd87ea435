//! `pythonic`: a Python list of calls with keyword arguments, `[get_weather(city="Paris"),
//! get_time()]`, as Llama 3.2 / Llama 4 write it (`specs/pythonic.md`).
//!
//! The list is read by the streaming Python reader ([`crate::lexers::python`]) through the
//! family driver, which also finds Llama 4's `<|python_start|>` / `<|python_end|>` wrapper and
//! the end-of-turn tokens. Calls are emitted when the list closes: a syntax error anywhere in
//! the list voids all of its calls, so none can be known good before the end.

use crate::event::{ErrorKind, Sink, ToolCall, WarningKind};
use crate::formats::config::config;
use crate::formats::core::entry::{self, Entry};
use crate::formats::delimited::{
    Cx, Driver, Grammar, Limits, TextStep, ValueEnd, ValueReader, is_ws,
};
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::lexers::python::{PyLimits, PyListReader, PyStep, Quotes, write_literal};
use crate::tools::Tools;
use serde_json::Value;

/// `<|python_start|>`: (Llama 4) opens the call list.
pub const PYTHON_START: &str = "<|python_start|>";
/// `<|python_end|>`: (Llama 4) closes it.
pub const PYTHON_END: &str = "<|python_end|>";
/// End-of-turn and end-of-message tokens of Llama 4 and Llama 3: terminators, dropped.
pub const TERMINATORS: [&str; 4] = ["<|eot|>", "<|eot_id|>", "<|eom|>", "<|eom_id|>"];
/// The delimiters, in the order the grammar numbers them.
pub const MARKERS: [&str; 6] = [
    PYTHON_START,
    PYTHON_END,
    TERMINATORS[0],
    TERMINATORS[1],
    TERMINATORS[2],
    TERMINATORS[3],
];

config! {
    /// Options and limits. A call with a non-literal argument is an error (`malformed_markup`),
    /// not a repair.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A list laid out as Python allows but the call templates never write
            /// `[f(a=1, b=2), g()]` (whitespace right after `[` or `(`, before a call's `(` or a
            /// keyword's `=`; a comma after the last call; a comment) is read, with warning
            /// `python_layout`; off → `malformed_markup`, no calls from that list. Every engine's
            /// pattern refuses such a list and leaves it as text (vLLM's `TOOL_CALL_REGEX`).
            python_layout,
            /// Dialect (off by default): a call list that starts after prose, or after another
            /// list, is read as calls, the prose before it kept as text, as SGLang, Dynamo and
            /// the SGLang gateway read one anywhere in the output (Llama 4 writing prose before
            /// `<|python_start|>`, vllm#22917), instead of as text (`specs/pythonic.md` R1).
            calls_after_text,
        }
        /// Size and nesting limits (`max_args_bytes` bounds the whole list).
        pub limits: Limits,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            python_layout: true,
            calls_after_text: false,
            limits: Limits::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Only whitespace so far: a list may start.
    Start,
    /// Right after `<|python_start|>`: a list may start after whitespace.
    Wrapped,
    /// The list is being read.
    List,
    /// After the list.
    After,
    /// Prose: lists are text.
    Text,
    /// After a syntax error in the list, up to the next delimiter.
    Skip,
}

struct Pythonic {
    state: State,
    /// [`Config::calls_after_text`].
    calls_after_text: bool,
    /// [`Config::python_layout`].
    python_layout: bool,
}

/// The call list as a value of the driver (shared with `olmo3`'s bare call lists).
pub(crate) struct ListValue {
    r: PyListReader,
    spoiled: bool,
    at: u64,
    /// For a JSON-literal dialect: whether a call written with Python's `True`/`False`/`None`
    /// is read (warning `python_literal`) or refused (`malformed_markup`); `None`: the
    /// dialect's literals are Python's.
    python_literals: Option<bool>,
    /// Whether a list laid out as no template writes it is read (warning `python_layout`) or
    /// refused (`malformed_markup`); `None`: the layout is not judged.
    python_layout: Option<bool>,
}

impl ListValue {
    /// A list reader at byte `at` of the stream.
    pub(crate) fn new(
        r: PyListReader,
        at: u64,
        python_literals: Option<bool>,
        python_layout: Option<bool>,
    ) -> ListValue {
        ListValue {
            r,
            spoiled: false,
            at,
            python_literals,
            python_layout,
        }
    }

    fn step(&mut self, step: PyStep, cx: &mut Cx, out: &mut dyn Sink) -> (usize, Option<ValueEnd>) {
        match step {
            PyStep::NeedMore => (0, None),
            PyStep::Done {
                consumed,
                calls,
                layout,
            } => {
                if let (Some(what), Some(on)) = (layout, self.python_layout)
                    && !self.spoiled
                    && !cx.lenient(
                        on,
                        WarningKind::PythonLayout,
                        &format!("{what} in the call list"),
                        out,
                    )
                {
                    self.spoiled = true;
                }
                if !self.spoiled {
                    for c in calls {
                        if c.python_literals
                            && let Some(on) = self.python_literals
                        {
                            let what = format!("call {:?} writes Python's True/False/None", c.name);
                            if !cx.lenient(on, WarningKind::PythonLiteral, &what, out) {
                                continue;
                            }
                        }
                        match c.arguments {
                            Ok(json) => {
                                let i = cx.start_call(&c.name, None, out);
                                out.args_delta(i, &json);
                                cx.end_call(i, out);
                            }
                            Err(why) => out.push(crate::event::Event::error(
                                ErrorKind::MalformedMarkup,
                                format!("{why} (call list at byte {})", self.at),
                            )),
                        }
                    }
                }
                (consumed, Some(ValueEnd::Done { index: None }))
            }
            PyStep::NotAList { consumed, raw } => (consumed, Some(ValueEnd::Unnamed(raw))),
            PyStep::Error {
                consumed,
                message,
                limit,
            } => (
                consumed,
                Some(ValueEnd::Failed {
                    kind: if limit {
                        ErrorKind::LimitExceeded
                    } else {
                        ErrorKind::MalformedMarkup
                    },
                    message: format!("{message} (call list at byte {})", self.at),
                    complete: false,
                }),
            ),
        }
    }
}

impl ValueReader for ListValue {
    fn feed(&mut self, s: &str, cx: &mut Cx, out: &mut dyn Sink) -> (usize, Option<ValueEnd>) {
        let step = self.r.feed(s);
        match self.step(step, cx, out) {
            (_, None) => (s.len(), None),
            done => done,
        }
    }

    fn eof(&mut self, cx: &mut Cx, out: &mut dyn Sink) -> ValueEnd {
        match self.r.finish() {
            PyStep::NotAList { raw, .. } => ValueEnd::Unnamed(raw),
            // A bare list complete at the end of the input.
            done @ PyStep::Done { .. } => match self.step(done, cx, out) {
                (_, Some(end)) => end,
                (_, None) => ValueEnd::Cut { index: None },
            },
            _ => ValueEnd::Cut { index: None },
        }
    }

    fn spoil(&mut self) {
        self.spoiled = true;
    }
}

impl Pythonic {
    /// Text where a list may start (after whitespace).
    fn list_or_text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        if !cx.is_holding() {
            cx.hold_whitespace();
        }
        let lead = t.bytes().take_while(|&b| is_ws(b)).count();
        cx.text(&t[..lead], out);
        if lead == t.len() {
            return TextStep::Taken;
        }
        if t.as_bytes()[lead] == b'[' {
            return self.open_list(cx, lead);
        }
        self.prose(cx, t, lead, out)
    }

    /// Prose from offset `from` of the piece `t`, or text after a list: text, unless the
    /// dialect reads a list in it.
    fn prose(&mut self, cx: &mut Cx, t: &str, from: usize, out: &mut dyn Sink) -> TextStep {
        let t = &t[from..];
        if self.calls_after_text
            && let Some(at) = t.find('[')
        {
            // Whatever the list turns out to be, the prose before it stays as written (only a
            // whitespace run between two lists is held, and dropped if the second is one).
            cx.text(&t[..at], out);
            return self.open_list(cx, from + at);
        }
        if cx.text(t, out) || self.state != State::After {
            self.state = State::Text;
        }
        TextStep::Taken
    }

    /// Opens the list reader at offset `at` of the text piece just handed over.
    fn open_list(&mut self, cx: &mut Cx, at: usize) -> TextStep {
        cx.open(Box::new(ListValue::new(
            PyListReader::new(PyLimits {
                max_bytes: cx.limits.max_args_bytes,
                max_depth: cx.limits.max_depth,
            }),
            cx.pos + at as u64,
            None,
            Some(self.python_layout),
        )));
        self.state = State::List;
        TextStep::Value(at)
    }
}

impl Grammar for Pythonic {
    fn text(&mut self, cx: &mut Cx, t: &str, out: &mut dyn Sink) -> TextStep {
        match self.state {
            State::Start | State::Wrapped => return self.list_or_text(cx, t, out),
            State::After | State::Text => return self.prose(cx, t, 0, out),
            State::List | State::Skip => {}
        }
        TextStep::Taken
    }

    fn marker(&mut self, cx: &mut Cx, m: usize, out: &mut dyn Sink) {
        if self.state == State::Start {
            // Whitespace before the first delimiter is no call's neighbour: it is text.
            cx.flush(out);
        }
        self.state = match (self.state, m) {
            (State::Start, 0) => {
                cx.hold_whitespace();
                State::Wrapped
            }
            // Llama 4's prose before its wrapped list (vllm#22917), in the dialect that reads it.
            (State::Text | State::After, 0) if self.calls_after_text => {
                cx.hold_whitespace();
                State::Wrapped
            }
            // The wrapper's end, a terminator, or a wrapper after prose: dropped.
            _ => {
                cx.drop_whitespace();
                State::Text
            }
        };
    }

    fn value_end(&mut self, cx: &mut Cx, end: ValueEnd, out: &mut dyn Sink) {
        self.state = match end {
            ValueEnd::Done { .. } => {
                cx.hold_whitespace();
                State::After
            }
            ValueEnd::Unnamed(raw) => {
                cx.text(&raw, out);
                State::Text
            }
            ValueEnd::Failed { kind, message, .. } => {
                cx.drop_whitespace();
                cx.report(kind, &message, out);
                State::Skip
            }
            ValueEnd::Cut { .. } | ValueEnd::Stopped(_) => {
                cx.unterminated("the stream ended inside the call list", out);
                State::Text
            }
            ValueEnd::NotAValue => State::Text,
        };
    }

    fn finish(&mut self, cx: &mut Cx, out: &mut dyn Sink) {
        if self.state == State::Start {
            cx.flush(out);
        }
        self.state = State::Start;
    }
}

/// A pythonic parser with the given options.
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(
        Pythonic {
            state: State::Start,
            calls_after_text: cfg.calls_after_text,
            python_layout: cfg.python_layout,
        },
        &MARKERS,
        cfg.limits,
    )
}

const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// A Python name the call-list reader accepts (within its token limit).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut cs = s.chars();
    s.len() <= crate::lexers::python::MAX_TOKEN
        && cs.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && cs.all(|c| c == '_' || c.is_alphanumeric())
        && !KEYWORDS.contains(&s)
}

/// Renders calls as one Python list (Llama 3.2's form), followed by the text.
pub fn render(text: &str, calls: &[ToolCall], _tools: &Tools) -> Result<Vec<u8>, String> {
    if let Some(m) = MARKERS.iter().find(|m| text.contains(*m)) {
        return Err(format!("the text contains the marker {m}"));
    }
    if calls.is_empty() {
        if text.trim_start().starts_with('[') {
            return Err("text that starts with `[` may read as a call list".into());
        }
        return Ok(text.as_bytes().to_vec());
    }
    if !text.is_empty() && text.trim().is_empty() {
        return Err("whitespace-only text after calls is dropped by the parser".into());
    }
    let mut out = String::from("[");
    for (k, c) in calls.iter().enumerate() {
        if c.id.is_some() || c.server.is_some() {
            return Err("pythonic carries no call ids or servers".into());
        }
        if !c.name.split('.').all(is_identifier) {
            return Err(format!("the name {:?} is not a Python name", c.name));
        }
        let Value::Object(args) = &c.arguments else {
            return Err("arguments must be a JSON object".into());
        };
        if k > 0 {
            out.push_str(", ");
        }
        out.push_str(&c.name);
        out.push('(');
        for (j, (key, v)) in args.iter().enumerate() {
            if !is_identifier(key) {
                return Err(format!("the argument {key:?} is not a Python keyword name"));
            }
            if j > 0 {
                out.push_str(", ");
            }
            out.push_str(key);
            out.push('=');
            write_literal(&mut out, v, Quotes::Double);
        }
        out.push(')');
    }
    out.push(']');
    out.push_str(text);
    Ok(out.into_bytes())
}

/// What sets pythonic apart; its registry entry follows.
struct Declared;

impl Entry for Declared {
    const ID: &'static str = "pythonic";
    const SUMMARY: &'static str = "Python call list (Llama 3.2 / 4): [get_weather(city=\"Paris\"), get_time()], optionally in <|python_start|>…<|python_end|>";
    const MARKERS: &'static [&'static str] = &MARKERS;
    /// Llama 4 and Llama 3 special tokens that can appear in output, with their ids.
    /// The turn's end, consumed by the server before its tool parser.
    const STOP_TOKENS: &'static [&'static str] =
        &["<|eot|>", "<|eom|>", "<|eot_id|>", "<|eom_id|>"];
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[
        SpecialToken::new("<|eom|>", 200007),
        SpecialToken::new("<|eot|>", 200008),
        SpecialToken::new(PYTHON_START, 200016),
        SpecialToken::new(PYTHON_END, 200017),
        SpecialToken::new("<|eom_id|>", 128008),
        SpecialToken::new("<|eot_id|>", 128009),
    ];
    const RENDER: Option<RenderFn> = Some(render);
    type Config = Config;
    const PARSER: fn(Config) -> Box<dyn StreamParser> = |cfg| Box::new(parser(cfg));
}

/// The pythonic format.
pub static FORMAT: Format = entry::format::<Declared>();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::core::testkit::{every_cut, fold_cut};
    use proptest::prelude::*;
    use serde_json::json;

    fn all_ways(s: &str) -> ParseResult {
        every_cut(&|| Box::new(parser(Config::default())), s.as_bytes()).0
    }

    #[test]
    fn list_at_the_start_with_wrapper_and_terminator() {
        let r = all_ways(
            "<|python_start|>[get_weather(city=\"San Francisco\", metric='celsius'), get_time()]<|python_end|><|eot|>",
        );
        assert_eq!(r.text, "");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(
            r.calls[0].arguments,
            json!({"city": "San Francisco", "metric": "celsius"})
        );
        assert!(r.errors.is_empty());
        let r = all_ways(" \n[f(a=-5, b=[1, (2, 3)])] and some text");
        assert_eq!(r.text, " and some text");
        assert_eq!(r.calls[0].arguments, json!({"a": -5, "b": [1, [2, 3]]}));
    }

    #[test]
    fn lists_in_prose_and_brackets_that_are_not_calls_are_text() {
        for s in [
            "Let me check: [get_weather(city='Paris')]",
            "[Note] this is prose",
            "[] nothing",
            "[1, 2, 3]",
        ] {
            let r = all_ways(s);
            assert!(r.calls.is_empty() && r.errors.is_empty(), "{s}");
            assert_eq!(r.text, s);
        }
    }

    #[test]
    fn the_calls_after_text_dialect_reads_a_list_anywhere() {
        let cfg = Config {
            calls_after_text: true,
            ..Config::default()
        };
        let read = |s: &str| every_cut(&|| Box::new(parser(cfg)), s.as_bytes()).0;
        let r = read("Let me check: [get_weather(city='Paris')] done");
        assert_eq!(r.text, "Let me check:  done");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
        // Two lists, the whitespace between them dropped as between any calls.
        let r = read("[a()] \n [b(x=1)]");
        assert_eq!(r.text, "");
        assert_eq!(r.calls.len(), 2);
        let r = read("[a()] and [b()] end");
        assert_eq!(r.text, " and  end");
        assert_eq!(r.calls.len(), 2);
        // Llama 4 writing prose before its wrapper.
        let r = read("Sure. <|python_start|>[f(a=1)]<|python_end|><|eot|>");
        assert_eq!((r.text.as_str(), r.calls.len()), ("Sure. ", 1));
        // Brackets that are no call list stay prose, and nothing else changes.
        for s in ["See [Note] and [1, 2] here", "[] x", "a [b c"] {
            let r = read(s);
            assert!(r.calls.is_empty() && r.errors.is_empty(), "{s}");
            assert_eq!(r.text, s);
        }
        let r = read("text [f(a=foo), g(b=1)] tail");
        assert_eq!(r.error_kinds(), vec![ErrorKind::MalformedMarkup]);
        assert_eq!((r.text.as_str(), r.calls.len()), ("text  tail", 1));
        // Off (the default), the same outputs are prose.
        assert!(
            all_ways("Let me check: [get_weather(city='Paris')]")
                .calls
                .is_empty()
        );
    }

    #[test]
    fn a_call_name_over_the_token_limit_is_limit_exceeded_and_a_long_word_text() {
        let long = "a".repeat(crate::lexers::python::MAX_TOKEN + 500);
        for s in [
            format!("[{long}(x=1)]"),
            format!("[{long} (x=1)] more"),
            format!("[tools.{long}(x=1)]"),
            format!("[{long}.f(x=1)]"),
            format!("[f(x=1), {long}()]"),
        ] {
            let r = all_ways(&s);
            assert_eq!(
                r.error_kinds(),
                vec![ErrorKind::LimitExceeded],
                "{:?}",
                r.errors
            );
            assert!(r.calls.is_empty());
        }
        // Not followed by `(`: a bracketed word, text as any other.
        for s in [format!("[{long}]"), format!("see [{long} and more]")] {
            let r = all_ways(&s);
            assert!(r.errors.is_empty(), "{:?}", r.errors);
            assert_eq!(r.text, s);
        }
    }

    #[test]
    fn bad_calls_and_broken_lists() {
        let r = all_ways("[f(a=foo), g(b=1)]");
        assert_eq!(r.error_kinds(), vec![ErrorKind::MalformedMarkup]);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].name, "g");
        let r = all_ways("[f(a=1) g(b=1)] tail");
        assert_eq!(r.error_kinds(), vec![ErrorKind::MalformedMarkup]);
        assert!(r.calls.is_empty());
        let r = all_ways("[f(a='x");
        assert_eq!(r.error_kinds(), vec![ErrorKind::Unterminated]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn rendered_calls_parse_back_under_cuts(
            text in "( [a-z.]{1,10})?",
            calls in proptest::collection::vec(("[a-z_]{1,8}".prop_filter("a Python name, not a keyword", |n| is_identifier(n)), proptest::collection::btree_map("[a-z]{1,5}", crate::formats::core::testkit::arb_json("[a-z'\"\\\\()\\[\\], \n]{0,8}"), 0..3)), 1..3),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|(name, args)| ToolCall {
                name, id: None, server: None,
                arguments: Value::Object(args.into_iter().filter(|(k, _)| is_identifier(k)).collect()),
            }).collect();
            let bytes = render(&text, &calls, &Tools::default()).unwrap();
            let r = fold_cut(&mut parser(Config::default()), &bytes, &cuts);
            prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
            prop_assert_eq!(r.text, text);
            prop_assert_eq!(r.calls, calls);
        }

        #[test]
        fn soup_is_split_invariant(
            parts in proptest::collection::vec(prop_oneof![
                Just(PYTHON_START.to_string()), Just(PYTHON_END.to_string()), Just("<|eot|>".to_string()),
                Just("[f(".to_string()), Just("a='<|eot|>'".to_string()), Just(")]".to_string()),
                Just(", ".to_string()), Just("\"".to_string()), Just(" \n".to_string()), Just("<|py".to_string()),
                "[a-z0-9'\"\\[\\](),= <|>]{0,6}",
            ], 0..16),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
            calls_after_text in any::<bool>(),
        ) {
            let s = parts.concat();
            let cfg = Config { calls_after_text, ..Config::default() };
            let whole = fold_cut(&mut parser(cfg), s.as_bytes(), &[]);
            let r = fold_cut(&mut parser(cfg), s.as_bytes(), &cuts);
            prop_assert_eq!(&r, &whole);
            prop_assert_eq!(r.warnings.len(), whole.warnings.len());
        }
    }
}
