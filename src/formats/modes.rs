//! A format's parser under a request's modes (`specs/corpus.md` §1.2): what a server that
//! received the request hands its parser, reproduced for conform's own.
//!
//! - `starting_state` (or the `thinking` switch, through the format's [`Thinking`]) sets the
//!   reasoning layer's `starts_inside` option: `reasoning` on, `response` off; a format whose
//!   reasoning is a channel of its own grammar (kimi_k3) takes it through its `enabled` and
//!   `starts_inside` switches instead;
//! - `tool_choice = "none"`: the server parses no calls, so the output goes to the text reader
//!   (behind the format's reasoning layer): call markup is text;
//! - `tool_choice = "required"` or a named tool: guided decoding made the output a JSON
//!   payload, read by the one guided reader (`delimited::guided`) behind the reasoning layer;
//! - `finish_reason = "length"`: `max_tokens` cut the output, so a call still open at its end
//!   was cut, not finished: the [`Cut`] layer makes it `unterminated`.
//!
//! Sits above the families (like the registry): it puts any format's output through the shared
//! readers.

use crate::event::{ErrorKind, Event, ParseResult, Sink};
use crate::formats::core::decoded::{self, DecodedText};
use crate::formats::core::request::{FinishReason, Request, StartingState, Thinking, ToolChoice};
use crate::formats::delimited::guided;
use crate::formats::reasoning::{self, Reasoned};
use crate::formats::{Format, OptionInfo, OptionValues, StreamParser};
use crate::lexers::utf8::Utf8Decoder;
use crate::tools::Tools;

/// The reasoning layer's option the starting state sets.
const STARTS_INSIDE: &str = "reasoning.starts_inside";
/// The thinking switch of a format whose reasoning is a channel of its own grammar (kimi_k3),
/// named as the shared layer's `enabled`.
const ENABLED: &str = "reasoning.enabled";

/// A parser of `format` with `options` over its defaults, reading the output as `request`
/// says a server would; an unknown option, a mode the format cannot take, or an option that
/// contradicts the request is an error naming it.
pub fn parser(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
) -> Result<Box<dyn StreamParser>, String> {
    let (options, guided_opts) = split_guided(format, options)?;
    let options = request_options(format, &options, request)?;
    let inner: Box<dyn StreamParser> = match request.tool_choice() {
        ToolChoice::Auto => {
            if !guided_opts.is_empty() {
                return Err(format!(
                    "{}: the guided.* options apply only under tool_choice=required or a named tool",
                    format.id
                ));
            }
            format.parser(tools, &options)?
        }
        other => {
            if !format.guided {
                return Err(format!(
                    "{}: tool_choice={} does not apply: the format's output is not the model's own text (the tool choice acted upstream)",
                    format.id,
                    other.to_json()
                ));
            }
            let text: Box<dyn StreamParser> = match &other {
                ToolChoice::Named(name) => {
                    if !tools.defs.iter().any(|d| d.name == *name) {
                        return Err(format!(
                            "tool_choice names the tool {name:?}, which the case's tools.json does not declare"
                        ));
                    }
                    Box::new(guided::parser(
                        guided::Choice::Named(name.clone()),
                        guided::config(&guided_opts)?,
                        (format.markers)(tools),
                        request.finish_reason(),
                    ))
                }
                ToolChoice::Required => Box::new(guided::parser(
                    guided::Choice::Required,
                    guided::config(&guided_opts)?,
                    (format.markers)(tools),
                    request.finish_reason(),
                )),
                _ => {
                    if !guided_opts.is_empty() {
                        return Err(format!(
                            "{}: the guided.* options apply only under tool_choice=required or a named tool",
                            format.id
                        ));
                    }
                    Box::new(TextOnly::default())
                }
            };
            match format.reasoning {
                Some(syntax) => Box::new(Reasoned::new(
                    text,
                    syntax,
                    reasoning_config(format, syntax, &options)?,
                )),
                None => text,
            }
        }
    };
    Ok(match request.finish_reason() {
        FinishReason::Stop => inner,
        FinishReason::Length => Box::new(Cut {
            inner,
            buf: Vec::new(),
        }),
    })
}

/// Checks that `format` can be read under `request` with `options` (a corpus case's request):
/// the error [`parser`] would give, without keeping the parser.
pub fn check(
    format: &Format,
    tools: &Tools,
    options: &OptionValues,
    request: &Request,
) -> Result<(), String> {
    parser(format, tools, options, request).map(|_| ())
}

/// The starting state `request` gives `format` (its own, else its thinking switch's).
pub fn starting_state(format: &Format, request: &Request) -> Option<StartingState> {
    Thinking::starting_state(format.thinking.as_ref(), request)
}

/// Every option of `format`: its own table's, and the guided reader's (`guided.NAME`) for a
/// format whose output can be read as a guided payload.
pub fn option_list(format: &Format) -> Vec<OptionInfo> {
    let mut list = format.options.list();
    if format.guided {
        list.extend(guided::option_list());
    }
    list
}

/// `options` without the guided reader's, and those apart (names without the prefix).
fn split_guided(
    format: &Format,
    options: &OptionValues,
) -> Result<(OptionValues, OptionValues), String> {
    let mut own = OptionValues::new();
    let mut g = OptionValues::new();
    for (name, &on) in options {
        match name.strip_prefix("guided.") {
            Some(rest) if format.guided => {
                g.insert(rest.to_string(), on);
            }
            _ => {
                own.insert(name.clone(), on);
            }
        }
    }
    Ok((own, g))
}

/// `options` with the reasoning layer's `starts_inside` the request's starting state sets; an
/// explicit option that says otherwise is an error naming both.
fn request_options(
    format: &Format,
    options: &OptionValues,
    request: &Request,
) -> Result<OptionValues, String> {
    let state = starting_state(format, request);
    if format.reasoning.is_none() && format.options.list().iter().any(|o| o.name == ENABLED) {
        return channel_options(format, options, state);
    }
    let want = match state {
        None | Some(StartingState::None) => return Ok(options.clone()),
        Some(StartingState::Reasoning) => true,
        Some(StartingState::Response) => false,
    };
    let has_layer = format
        .options
        .list()
        .iter()
        .any(|o| o.name == STARTS_INSIDE);
    if !has_layer {
        return if want {
            Err(format!(
                "{}: starting_state=reasoning does not apply: the format has no reasoning layer whose block the prompt could open",
                format.id
            ))
        } else {
            // No reasoning to be inside of: the output starts in the response anyway.
            Ok(options.clone())
        };
    }
    if let Some(&set) = options.get(STARTS_INSIDE)
        && set != want
    {
        return Err(format!(
            "the option {}.{STARTS_INSIDE}={set} contradicts the request's starting_state={} (drop one)",
            format.id,
            state.map_or("none", StartingState::as_str)
        ));
    }
    let mut out = options.clone();
    out.insert(STARTS_INSIDE.to_string(), want);
    Ok(out)
}

/// The starting state of a format whose reasoning is a channel of its own (no shared layer):
/// `reasoning` is thinking on with the prompt's `think` opened (`enabled`, `starts_inside`),
/// `response` is thinking off (the prompt opened the response channel: `enabled` off). `none`
/// is the absent key, the format's default reading (a raw transcript with its own openers is
/// the option `reasoning.starts_inside = false`). An explicit option that says otherwise is an
/// error naming both.
fn channel_options(
    format: &Format,
    options: &OptionValues,
    state: Option<StartingState>,
) -> Result<OptionValues, String> {
    let sets: &[(&str, bool)] = match state {
        None | Some(StartingState::None) => return Ok(options.clone()),
        Some(StartingState::Reasoning) => &[(ENABLED, true), (STARTS_INSIDE, true)],
        Some(StartingState::Response) => &[(ENABLED, false)],
    };
    let mut out = options.clone();
    for &(name, want) in sets {
        if let Some(&set) = options.get(name)
            && set != want
        {
            return Err(format!(
                "the option {}.{name}={set} contradicts the request's starting_state={} (drop one)",
                format.id,
                state.map_or("none", StartingState::as_str)
            ));
        }
        out.insert(name.to_string(), want);
    }
    Ok(out)
}

/// What [`render`] wrote: the transcript, and whether it carries the reasoning (so that the
/// roundtrip compares it).
pub struct Rendered {
    /// The transcript.
    pub bytes: Vec<u8>,
    /// The reasoning was written (the format splits it with the shared layer).
    pub with_reasoning: bool,
}

/// Renders a result as the model writes it under `request` and `options`, so that parsing the
/// rendering under the same request and options gives it back (the roundtrip): the reasoning
/// first, in the format's tags — only the close when the output starts inside reasoning (the
/// template opened it), so the turn ends it — then the text and calls as the request makes
/// the model write them: the format's renderer (`auto`), the text alone (`none`), or the
/// guided payload (`required`, a named tool). `Err` says why it cannot.
pub fn render(
    format: &Format,
    options: &OptionValues,
    request: &Request,
    result: &ParseResult,
    tools: &Tools,
) -> Result<Rendered, String> {
    let (own, _) = split_guided(format, options)?;
    let own = request_options(format, &own, request)?;
    let (text, calls) = (result.text.as_str(), result.calls.as_slice());
    let body: Vec<u8> = match request.tool_choice() {
        ToolChoice::Auto => {
            let render = format.render.ok_or("the format has no renderer")?;
            render(text, calls, tools)?
        }
        ToolChoice::None => {
            if !calls.is_empty() {
                return Err("tool_choice=none carries no calls".into());
            }
            text.as_bytes().to_vec()
        }
        ToolChoice::Required => {
            guided::render(&guided::Choice::Required, text, calls)?.into_bytes()
        }
        ToolChoice::Named(n) => {
            guided::render(&guided::Choice::Named(n), text, calls)?.into_bytes()
        }
    };
    let Some(syntax) = format.reasoning else {
        return Ok(Rendered {
            bytes: body,
            with_reasoning: false,
        });
    };
    let cfg = reasoning_config(format, syntax, &own)?;
    if !cfg.enabled {
        return Ok(Rendered {
            bytes: body,
            with_reasoning: false,
        });
    }
    let reasoning = result.reasoning_text();
    if let Some(t) = syntax.tag_in(reasoning) {
        return Err(format!("the reasoning contains the reasoning tag {t}"));
    }
    let (open, close) = syntax.pairs[0];
    let mut prefix = Vec::with_capacity(reasoning.len() + open.len() + close.len());
    if cfg.starts_inside {
        // The template opened the block: the model writes the reasoning and its close.
        prefix.extend_from_slice(reasoning.as_bytes());
        prefix.extend_from_slice(close.as_bytes());
    } else if !reasoning.is_empty() {
        prefix.extend_from_slice(open.as_bytes());
        prefix.extend_from_slice(reasoning.as_bytes());
        prefix.extend_from_slice(close.as_bytes());
    }
    // The reasoning goes in front of the body in place: a second buffer with the body copied
    // into it held the rendering twice (89 MB more for a million kimi_k2 calls, whose
    // rendering has no reasoning at all).
    let mut bytes = body;
    if !prefix.is_empty() {
        bytes.reserve_exact(prefix.len());
        bytes.splice(0..0, prefix);
    }
    Ok(Rendered {
        bytes,
        with_reasoning: true,
    })
}

/// The reasoning layer's configuration for `syntax` with the `reasoning.*` entries of
/// `options` over its defaults.
fn reasoning_config(
    format: &Format,
    syntax: &reasoning::Syntax,
    options: &OptionValues,
) -> Result<reasoning::Config, String> {
    let mut cfg = syntax.config();
    for (name, &on) in options {
        let Some(rest) = name.strip_prefix("reasoning.") else {
            continue;
        };
        let opt = reasoning::Config::OPTIONS
            .iter()
            .find(|o| o.name == rest)
            .ok_or_else(|| format!("{}: unknown option {name:?}", format.id))?;
        (opt.set)(&mut cfg, on);
    }
    Ok(cfg)
}

/// The output as a server that parses no calls hands it on (`tool_choice = "none"`): text,
/// decoded, with call markup as it came.
#[derive(Default)]
pub struct TextOnly {
    utf8: Utf8Decoder,
}

impl DecodedText for TextOnly {
    fn decoder(&mut self) -> &mut Utf8Decoder {
        &mut self.utf8
    }
    fn feed_str(&mut self, s: &str, out: &mut dyn Sink) {
        out.text(s);
    }
    fn spoil(&mut self) {}
}

impl StreamParser for TextOnly {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        match self.utf8.ascii(chunk) {
            Some(s) => out.text(s),
            None => decoded::feed_utf8(self, chunk, out),
        }
    }
    fn finish(&mut self, out: &mut dyn Sink) {
        decoded::finish_utf8(self, out);
        self.utf8 = Utf8Decoder::new();
    }
    fn at_text(&self) -> bool {
        true
    }
}

/// A parser whose turn `max_tokens` cut (`finish_reason = "length"`): a call that only the end
/// of the turn closed (the format's missing-end leniency at the end of the stream) was cut,
/// not finished, so it gets `unterminated` instead of its `CallEnd`. Calls whose end the
/// output wrote end during `feed`, untouched.
pub struct Cut {
    inner: Box<dyn StreamParser>,
    /// The events the inner parser's `finish` emits, looked at before they go on.
    buf: Vec<Event>,
}

impl StreamParser for Cut {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        self.inner.feed(chunk, out);
    }
    fn finish(&mut self, out: &mut dyn Sink) {
        self.inner.finish(&mut self.buf);
        for ev in self.buf.drain(..) {
            match ev {
                Event::CallEnd { index } => out.push(Event::error(
                    ErrorKind::Unterminated,
                    format!(
                        "call {index} was still open when max_tokens cut the output (finish_reason=length): not run"
                    ),
                )),
                Event::Text { text } => out.text(&text),
                Event::Reasoning { text } => out.reasoning(&text),
                other => out.push(other),
            }
        }
    }
    fn at_text(&self) -> bool {
        self.inner.at_text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ParseResult;
    use crate::formats::{by_id, run_chunks};
    use serde_json::json;

    fn tools() -> Tools {
        Tools::from_json(
            r#"[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
                {"name":"get_time","parameters":{"type":"object","properties":{}}}]"#,
        )
        .unwrap()
    }

    fn req(v: serde_json::Value) -> Request {
        Request::from_json(&v).unwrap()
    }

    /// Parses whole, byte by byte and at every single cut, and checks they agree.
    fn parse(id: &str, options: &OptionValues, r: &Request, s: &str) -> ParseResult {
        let f = by_id(id).unwrap();
        let t = tools();
        let b = s.as_bytes();
        let mut p = parser(f, &t, options, r).unwrap();
        let whole = ParseResult::fold(&run_chunks(p.as_mut(), [b]));
        let mut p = parser(f, &t, options, r).unwrap();
        assert_eq!(
            ParseResult::fold(&run_chunks(p.as_mut(), b.chunks(1))),
            whole,
            "bytes: {s:?}"
        );
        for cut in 1..b.len() {
            let mut p = parser(f, &t, options, r).unwrap();
            let got = ParseResult::fold(&run_chunks(p.as_mut(), [&b[..cut], &b[cut..]]));
            assert_eq!(got, whole, "cut {cut}: {s:?}");
        }
        whole
    }

    fn kinds(r: &ParseResult) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn a_channel_format_takes_the_thinking_switch_through_its_own_options() {
        let none = OptionValues::new();
        let answer = "Hi<|close|>response<|sep|><|close|>message<|sep|>";
        // Thinking off: the prompt opened the response channel.
        let r = parse("kimi_k3", &none, &req(json!({"thinking": false})), answer);
        assert_eq!((r.text.as_str(), r.reasoning_text()), ("Hi", ""));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        // Thinking on (kimi_k3's default): the same bytes are read inside `think`.
        let r = parse("kimi_k3", &none, &req(json!({"thinking": true})), answer);
        assert_ne!(r.text.as_str(), "Hi");
        let thought = "plan<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>response<|sep|><|close|>message<|sep|>";
        let r = parse("kimi_k3", &none, &req(json!({"thinking": true})), thought);
        assert_eq!((r.text.as_str(), r.reasoning_text()), ("Hi", "plan"));
        let r = parse(
            "kimi_k3",
            &none,
            &req(json!({"starting_state": "reasoning"})),
            thought,
        );
        assert_eq!((r.text.as_str(), r.reasoning_text()), ("Hi", "plan"));
        // An option that says otherwise is an error naming both.
        let on: OptionValues = [("reasoning.enabled".to_string(), true)]
            .into_iter()
            .collect();
        let f = by_id("kimi_k3").unwrap();
        let e = check(f, &tools(), &on, &req(json!({"thinking": false}))).unwrap_err();
        assert!(
            e.contains("reasoning.enabled=true") && e.contains("response"),
            "{e}"
        );
    }

    #[test]
    fn the_starting_state_and_the_thinking_switch_set_starts_inside() {
        let none = OptionValues::new();
        let s = "plan</think>answer";
        let r = parse(
            "qwen3_coder",
            &none,
            &req(json!({"starting_state": "reasoning"})),
            s,
        );
        assert_eq!((r.reasoning_text(), r.text.as_str()), ("plan", "answer"));
        // qwen3_coder's template opens <think> with thinking on.
        let r = parse("qwen3_coder", &none, &req(json!({"thinking": true})), s);
        assert_eq!(r.reasoning_text(), "plan");
        let r = parse("qwen3_coder", &none, &req(json!({"thinking": false})), s);
        assert_eq!(
            (r.text.as_str(), kinds(&r)),
            ("plananswer", vec!["stray_reasoning_end"])
        );
        // The explicit starting state wins over the switch.
        let r = parse(
            "qwen3_coder",
            &none,
            &req(json!({"thinking": true, "starting_state": "response"})),
            s,
        );
        assert_eq!(r.reasoning_text(), "");
        // hermes (Qwen3 hybrid): thinking on leaves the output to write <think> itself.
        let r = parse("hermes", &none, &req(json!({"thinking": true})), s);
        assert_eq!(r.text, "plananswer");
    }

    #[test]
    fn modes_a_format_cannot_take_and_contradicting_options_are_errors() {
        let t = tools();
        let f = by_id("llama3_json").unwrap();
        let e = check(
            f,
            &t,
            &OptionValues::new(),
            &req(json!({"starting_state": "reasoning"})),
        )
        .unwrap_err();
        assert!(e.contains("no reasoning layer"), "{e}");
        assert!(
            check(
                f,
                &t,
                &OptionValues::new(),
                &req(json!({"starting_state": "response"}))
            )
            .is_ok()
        );
        let sse = by_id("openai_sse").unwrap();
        let e = check(
            sse,
            &t,
            &OptionValues::new(),
            &req(json!({"tool_choice": "required"})),
        )
        .unwrap_err();
        assert!(e.contains("not the model's own text"), "{e}");
        let h = by_id("hermes").unwrap();
        let e = check(
            h,
            &t,
            &OptionValues::new(),
            &req(json!({"tool_choice": {"name": "nope"}})),
        )
        .unwrap_err();
        assert!(e.contains("\"nope\""), "{e}");
        let o = OptionValues::from([("reasoning.starts_inside".to_string(), false)]);
        let e = check(h, &t, &o, &req(json!({"starting_state": "reasoning"}))).unwrap_err();
        assert!(e.contains("contradicts"), "{e}");
        let g = OptionValues::from([("guided.text_after_payload".to_string(), false)]);
        assert!(
            check(h, &t, &g, &Request::default())
                .unwrap_err()
                .contains("guided.*")
        );
        assert!(check(h, &t, &g, &req(json!({"tool_choice": "required"}))).is_ok());
    }

    #[test]
    fn tool_choice_none_reads_text_behind_the_reasoning_layer() {
        let r = req(json!({"tool_choice": "none"}));
        let s = "<think>hm</think>x <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> é";
        let got = parse("hermes", &OptionValues::new(), &r, s);
        assert_eq!(got.reasoning_text(), "hm");
        assert_eq!(
            got.text,
            "x <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> é"
        );
        assert!(got.calls.is_empty() && got.errors.is_empty());
        let f = by_id("hermes").unwrap();
        let mut p = parser(f, &tools(), &OptionValues::new(), &r).unwrap();
        let bad = ParseResult::fold(&run_chunks(p.as_mut(), [&b"a\xffb"[..]]));
        assert_eq!(bad.text, "a\u{FFFD}b");
        assert_eq!(bad.error_kinds(), [ErrorKind::InvalidUtf8]);
    }

    #[test]
    fn finish_reason_length_makes_a_call_only_the_end_closed_unterminated() {
        let open = "a<tool_call>{\"name\": \"get_time\", \"arguments\": {}}";
        let none = OptionValues::new();
        let stop = parse("hermes", &none, &Request::default(), open);
        assert_eq!(
            (stop.calls.len(), kinds(&stop)),
            (1, vec!["missing_call_end"])
        );
        let cut = parse(
            "hermes",
            &none,
            &req(json!({"finish_reason": "length"})),
            open,
        );
        assert!(cut.calls.is_empty());
        assert_eq!(cut.error_kinds(), [ErrorKind::Unterminated]);
        assert_eq!(cut.text, "a");
        let closed = format!("{open}</tool_call>more");
        let cut = parse(
            "hermes",
            &none,
            &req(json!({"finish_reason": "length"})),
            &closed,
        );
        assert_eq!((cut.calls.len(), cut.errors.len()), (1, 0));
    }

    /// Over the whole corpus: the calls `finish_reason=length` drops are exactly those the
    /// output left without an end, which the default parse keeps with a missing-end warning.
    #[test]
    fn length_drops_only_calls_the_corpus_leaves_without_an_end() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
        let length = req(json!({"finish_reason": "length"}));
        let ends = [
            "missing_call_end",
            "missing_block_end",
            "missing_call_close",
            "missing_section_end",
            "call_terminator",
            "missing_end",
            "end_calls_at_stream_end",
            "close_blocks_at_message_stop",
        ];
        let mut dropped = 0;
        for f in crate::formats::REGISTRY {
            let dir = root.join(f.id);
            let tools = std::fs::read_to_string(dir.join("tools.json"))
                .ok()
                .and_then(|t| Tools::from_json(&t).ok())
                .unwrap_or_default();
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_none_or(|x| x != "txt") {
                    continue;
                }
                let bytes = std::fs::read(&p).unwrap();
                let run = |r: &Request| {
                    let mut q = parser(f, &tools, &OptionValues::new(), r).unwrap();
                    ParseResult::fold(&run_chunks(q.as_mut(), [bytes.as_slice()]))
                };
                let (stop, cut) = (run(&Request::default()), run(&length));
                assert!(cut.calls.len() <= stop.calls.len(), "{}", p.display());
                if cut.calls.len() < stop.calls.len() {
                    dropped += 1;
                    assert!(
                        stop.warnings
                            .iter()
                            .any(|w| ends.contains(&w.kind.as_str())),
                        "{}: a call dropped under length without a missing end: {:?}",
                        p.display(),
                        stop.warnings
                    );
                    assert!(cut.error_kinds().contains(&ErrorKind::Unterminated));
                }
            }
        }
        assert!(
            dropped >= 5,
            "the corpus has cases cut inside a call: {dropped}"
        );
    }

    #[test]
    fn the_rendering_follows_the_request_and_parses_back() {
        let t = tools();
        let cases = [
            (
                "qwen3_coder",
                json!({"starting_state": "reasoning"}),
                "plan",
                "The answer.",
                vec![],
            ),
            (
                "qwen3_coder",
                json!({"starting_state": "reasoning"}),
                "",
                "No thought.",
                vec![],
            ),
            ("hermes", json!({}), "why", "x", vec![]),
            (
                "hermes",
                json!({"tool_choice": "none"}),
                "",
                "<tool_call>as text",
                vec![],
            ),
            (
                "hermes",
                json!({"tool_choice": "required"}),
                "r",
                "",
                vec![("get_time", json!({}))],
            ),
            (
                "qwen3_coder",
                json!({"tool_choice": {"name": "get_weather"}, "thinking": true}),
                "think",
                "",
                vec![("get_weather", json!({"city": "Paris"}))],
            ),
        ];
        for (id, r, reasoning, text, calls) in cases {
            let f = by_id(id).unwrap();
            let r = req(r);
            let want = ParseResult {
                text: text.into(),
                reasoning: Some(reasoning.into()),
                calls: calls
                    .into_iter()
                    .map(|(n, a)| crate::event::ToolCall {
                        name: n.into(),
                        id: None,
                        server: None,
                        arguments: a,
                    })
                    .collect(),
                ..ParseResult::default()
            };
            let out = render(f, &OptionValues::new(), &r, &want, &t).unwrap();
            assert!(out.with_reasoning);
            let s = String::from_utf8(out.bytes).unwrap();
            let got = parse(id, &OptionValues::new(), &r, &s);
            assert_eq!(got, want, "{id} {r}: {s:?}");
        }
        // The reasoning goes in front of the body, once (it is put there in place).
        let f = by_id("qwen3_coder").unwrap();
        let plain = ParseResult {
            text: "The answer.".into(),
            reasoning: Some("plan".into()),
            ..ParseResult::default()
        };
        for (r, want) in [
            (json!({}), "<think>plan</think>The answer."),
            (
                json!({"starting_state": "reasoning"}),
                "plan</think>The answer.",
            ),
        ] {
            let out = render(f, &OptionValues::new(), &req(r), &plain, &t).unwrap();
            assert_eq!(String::from_utf8(out.bytes).unwrap(), want);
        }
        // Text beside a guided payload cannot be written.
        let f = by_id("hermes").unwrap();
        let with_text = ParseResult {
            text: "hi".into(),
            ..ParseResult::default()
        };
        assert!(
            render(
                f,
                &OptionValues::new(),
                &req(json!({"tool_choice": "required"})),
                &with_text,
                &t
            )
            .is_err()
        );
    }
}
