//! The contract every format fulfils: the push parser, what the harness knows of a format,
//! and the one way a parser is driven.

use crate::event::{Event, Folder, ParseResult, Sink, ToolCall};
use crate::formats::core::request::Thinking;
use crate::tools::Tools;
use std::collections::BTreeMap;

/// A push parser for one turn (or one session) of a format's stream.
///
/// The contract is in `specs/streaming.md`: chunks may be cut anywhere, including inside a
/// UTF-8 character or a marker; the events are the same whatever the cuts.
pub trait StreamParser: Send {
    /// Feeds the next chunk of the transcript, appending the events it completes to `out`.
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink);
    /// Ends the current turn: flushes held-back input and reports what was left open.
    /// The parser may then be fed the next turn of the same session.
    fn finish(&mut self, out: &mut dyn Sink);
    /// True when the next byte fed would be read as plain text, outside any markup of the
    /// format: only there does the reasoning layer ([`reasoning`](crate::formats::reasoning)) look for an open tag. The
    /// default (`false`) keeps a format that does not say so out of reach of the layer.
    fn at_text(&self) -> bool {
        false
    }
}

/// A boxed parser is a parser: the reasoning layer can wrap what a format's option table built.
impl StreamParser for Box<dyn StreamParser> {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        (**self).feed(chunk, out);
    }
    fn finish(&mut self, out: &mut dyn Sink) {
        (**self).finish(out);
    }
    fn at_text(&self) -> bool {
        (**self).at_text()
    }
}

/// Renders text and calls into a transcript of the format; `Err` says why it cannot.
pub type RenderFn = fn(text: &str, calls: &[ToolCall], tools: &Tools) -> Result<Vec<u8>, String>;

/// Everything the harness needs to know about a format.
pub struct Format {
    /// The stable id: names corpus directories and appears in reports.
    pub id: &'static str,
    /// One line saying what the format is.
    pub summary: &'static str,
    /// Makes a parser with the format's default configuration.
    pub new_parser: fn(&Tools) -> Box<dyn StreamParser>,
    /// Renders calls back into the format, when the format has a renderer.
    pub render: Option<RenderFn>,
    /// The delimiters of the format, for the `markers` chunking and the markup-leak check.
    pub markers: fn(&Tools) -> Vec<String>,
    /// For formats that carry text in CDATA: a one-call transcript whose string argument holds
    /// `text` in CDATA (with `]]>` split), and the call it must parse to (`cdata_split`).
    pub cdata: Option<CdataProbe>,
    /// For formats that type element text: the machine-readable typing table (`type_inference`).
    pub typing: Option<Typing>,
    /// Every special token of the model's vocabulary that can appear in its output (the
    /// format's delimiters among them, when they are special). A server decodes each whole, so
    /// its parser never sees one split: when an external parser is judged, replays that cut
    /// inside one are reported apart and do not fail the case; the `tokens` chunking never
    /// cuts inside one. Empty for formats whose delimiters are ordinary text.
    pub special_tokens: &'static [SpecialToken],
    /// Its model family's vocabulary, the one the special tokens' ids belong to: an id of the
    /// harness's vocabulary table (`qwen2`, `deepseek_v3`, `o200k_harmony`…;
    /// `specs/tokenizers.md`), which cuts the token-aligned replays unless `--tokenizer` is
    /// given. `None`: no vocabulary of the format's models can be had, and `o200k_base` (the
    /// declared fallback) cuts them.
    pub vocabulary: Option<&'static str>,
    /// The tokens that end the model's turn, which a server consumes (its stop handling or
    /// detokenizer) before its parser sees the text: an external parser is handed the turn up
    /// to the first of them (`specs/engines.md` §3). Empty where the format declares none.
    pub stop_tokens: &'static [&'static str],
    /// The reasoning wrapper the format's models write (`<think>…</think>`…), when
    /// `new_parser` puts the shared reasoning layer in front of the parser
    /// (`reasoning::wrap`); its tags are delimiters for the markup-leak check in text and in
    /// reasoning. `None` for formats without one, or whose parser splits reasoning itself
    /// (harmony's `analysis` channel): their reasoning is checked against all `markers`.
    pub reasoning: Option<&'static Syntax>,
    /// The format's options (leniencies and switches): listed by `conform formats --options`,
    /// set by `--option FORMAT.NAME=…` and a corpus directory's `conform.toml`.
    pub options: &'static dyn FormatOptions,
    /// What the format's chat template does with the request's thinking switch (the starting
    /// state each value gives, `formats::modes`); `None`: the switch does not change how
    /// conform reads the output (it is still sent to adapters).
    pub thinking: Option<Thinking>,
    /// Whether the output is the model's own text, so that the request's tool choice can put
    /// it through the text reader (`none`) or the guided-JSON reader (`required`, a named
    /// tool); false for provider event streams and message channels (`specs/corpus.md` §1.2).
    pub guided: bool,
    /// For a format whose parser splits reasoning in its own grammar (kimi_k3's `think`
    /// channel, no shared [`Syntax`]): the channel's opening and closing tags and the token
    /// that ends a tag (which an engine may consume with it). An engine that does not split
    /// reasoning leaves the channel in the text, which the `reasoning` policy allows.
    pub channel_reasoning: Option<(&'static str, &'static str, &'static str)>,
}

impl Format {
    /// A format with what every format has; the optional parts (renderer, probes, special
    /// tokens, vocabulary, reasoning wrapper) are `None` or empty, to be set with struct update
    /// syntax (`Format { render: Some(render), ..Format::new(…) }`).
    pub const fn new(
        id: &'static str,
        summary: &'static str,
        new_parser: fn(&Tools) -> Box<dyn StreamParser>,
        markers: fn(&Tools) -> Vec<String>,
        options: &'static dyn FormatOptions,
    ) -> Format {
        Format {
            id,
            summary,
            new_parser,
            render: None,
            markers,
            cdata: None,
            typing: None,
            special_tokens: &[],
            vocabulary: None,
            stop_tokens: &[],
            reasoning: None,
            options,
            thinking: None,
            guided: true,
            channel_reasoning: None,
        }
    }

    /// A parser with `values` set over the format's defaults (none: `new_parser`'s parser);
    /// an unknown option is an error naming the known ones.
    pub fn parser(
        &self,
        tools: &Tools,
        values: &OptionValues,
    ) -> Result<Box<dyn StreamParser>, String> {
        if values.is_empty() {
            Ok((self.new_parser)(tools))
        } else {
            self.options.parser(tools, values)
        }
    }
}

/// A special token of a model's vocabulary: its text and, where the tokenizer is public, its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialToken {
    /// The token's text as it appears in the decoded output.
    pub text: &'static str,
    /// The token's id in the model's tokenizer, when known.
    pub id: Option<u32>,
}

impl SpecialToken {
    /// A special token with a known id.
    pub const fn new(text: &'static str, id: u32) -> Self {
        SpecialToken { text, id: Some(id) }
    }
}

/// Renders a one-call transcript carrying `text` in CDATA, with the call it must parse to.
pub type CdataProbe = fn(text: &str) -> (Vec<u8>, ToolCall);

/// How a format types scalar text, for the `type_inference` invariant: its own table
/// (forge_xml), or the shared schema-typing table `specs/typing.json` read with each row's
/// schema.
pub struct Typing {
    /// JSON rows `{"xml": raw element text, "json": expected value, "rule": name}` (a file in
    /// `specs/`, included at build time so the spec and the check cannot drift apart).
    pub table: &'static str,
    /// A one-call transcript whose argument `key` is written as exactly this raw element text.
    pub transcript: fn(raw: &str) -> Vec<u8>,
    /// The argument that carries the value.
    pub key: &'static str,
    /// For formats typed by the tool's schema: the tool the transcript calls. Each row then
    /// carries a `schema`, which becomes the schema of that tool's parameter `key`.
    pub schema_tool: Option<&'static str>,
    /// Whether the probe transcript is written as the model writes its calls, so that an
    /// external parser is judged on it; `false` where the probe leaves out what the model
    /// always writes to reach the schema typing (DSML's `string` attribute).
    pub wire_probe: bool,
}

/// Runs a parser over chunks and returns its events: the one way every caller drives a parser.
pub fn run_chunks<'a>(
    parser: &mut dyn StreamParser,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<Event> {
    let mut out = Vec::new();
    for c in chunks {
        parser.feed(c, &mut out);
    }
    parser.finish(&mut out);
    out
}

/// Runs a parser over chunks and folds its events as they come: [`run_chunks`] then
/// [`ParseResult::fold`], without the event list.
pub fn fold_chunks<'a>(
    parser: &mut dyn StreamParser,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> ParseResult {
    let mut out = Folder::default();
    for c in chunks {
        parser.feed(c, &mut out);
    }
    parser.finish(&mut out);
    out.finish()
}

/// An option as listed: its full name, the format's default and why it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionInfo {
    /// `name`, or `prefix.name` for an option of a nested configuration.
    pub name: String,
    /// The value in the format's default configuration.
    pub default: bool,
    /// The option's documentation, one paragraph.
    pub reason: String,
}

/// Option values set over a format's defaults, by full name (sorted, so reports are stable).
pub type OptionValues = BTreeMap<String, bool>;

/// Option values of several formats, by format id.
pub type OptionsByFormat = BTreeMap<String, OptionValues>;

/// A format's options, whatever its configuration type: listed and applied uniformly.
pub trait FormatOptions: Sync {
    /// Every option with its default and reason, in declaration order.
    fn list(&self) -> Vec<OptionInfo>;
    /// A parser for `tools` with `values` set over the defaults; an unknown name is an error
    /// naming the known ones.
    fn parser(&self, tools: &Tools, values: &OptionValues)
    -> Result<Box<dyn StreamParser>, String>;
}

/// The reasoning wrapper a format's models write (declared here, beside `Format`, so that the
/// contract needs nothing of the reasoning layer that implements it; `reasoning.rs` splits it).
#[derive(Debug)]
pub struct Syntax {
    /// `(open, close)` tag pairs, the canonical one first; a block closes with its own pair's
    /// close tag (or any close tag, when the turn started inside the block).
    pub pairs: &'static [(&'static str, &'static str)],
    /// The format's markers that begin a call: inside reasoning they are reported
    /// (`call_in_reasoning`), never parsed.
    pub call_markers: &'static [&'static str],
    /// Whether the layer is on by default: on for the formats whose models think by default.
    pub on_by_default: bool,
    /// The markers that end a call section, for a format whose models call tools while they
    /// think (Apertus' "internal tool calls"): when not empty, a call marker inside reasoning
    /// opens a call that the format's parser reads, and the block resumes once that parser is
    /// back at text after one of these markers. Empty: `call_markers` inside reasoning are
    /// never calls.
    pub call_ends: &'static [&'static str],
}
