//! The tagged-parameter family's one machinery: `qwen3_coder`, `seed_oss`, `glm45`, `glm47`,
//! `minimax_m2`, `deepseek_v32`, `deepseek_v4`, `deepseek_v41`, `minimax_m3` and `step3` are each a
//! [`Grammar`] (their delimiters and tag forms) and a [`Config`] (their leniencies) over this
//! parser.
//!
//! Values are raw text between tags, never escaped; their JSON type comes from the tool's
//! schema through [`crate::formats::typing`]. A value whose schema says string is streamed as it
//! arrives; any other value is held until its closing tag and typed then. Delimiters are found
//! by the shared [`MarkerScanner`] (one over all of a grammar's delimiters outside values, one
//! over the value close inside them, where nothing else is a delimiter — or, in a grammar whose
//! delimiters all start with a namespace token, over all of them; a delimiter that means
//! nothing in the current state is text), so a delimiter cut across chunks is held back, never
//! rescanned, and the whole parse is linear for every chunking. A namespace token followed by
//! whitespace hands itself back to its scanner once the tag shows (`spacing`): at most a
//! delimiter's length is scanned twice. Nested values (`Grammar::nested`) are collected as
//! they arrive and read by [`elements`] at their close.
//!
//! The structural close rule (`specs/qwen3_coder.md`): where the grammar says so, a value's
//! closing tag ends the value only when what follows it (after whitespace) continues the call
//! (the next parameter, the call's end, the block's end) or the stream ends; otherwise the
//! closing tag and the whitespace held after it are content, with warning
//! `close_tag_in_value`. The held whitespace is the only look-ahead, kept once, never rescanned.

pub mod deepseek_v32;
pub mod deepseek_v4;
pub mod deepseek_v41;
pub mod elements;
pub mod glm45;
pub mod glm47;
pub mod minimax_m2;
pub mod minimax_m3;
pub mod qwen3_coder;
pub mod seed_oss;
pub mod step3;

use crate::event::{ErrorKind, Event, Sink, ToolCall, WarningKind, excerpt};
use crate::formats::config::config;
use crate::formats::core::decoded::{self, DecodedText};
use crate::formats::options::Table;
use crate::formats::options::{Nest, Nested};
use crate::formats::reasoning::{self, Reasoned, Syntax};
use crate::formats::typing::{
    Lookup, MAX_VALUE_DEPTH, ParamType, SchemaTypes, TypingOptions, read_json, type_value,
};
use crate::formats::{Format, SpecialToken, StreamParser, Typing};
use crate::lexers::has_byte;
use crate::lexers::marker::{MarkerScanner, Token};
use crate::lexers::python::{Quotes, write_literal};
use crate::lexers::utf8::Utf8Decoder;
use crate::tools::Tools;
use elements::{ReadOptions, Schemas, Tree};
use serde_json::Value;

/// What a delimiter means to the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Opens a block of calls (`<tool_call>`, `<minimax:tool_call>`).
    BlockOpen,
    /// Closes a block.
    BlockClose,
    /// Opens one call; its name (or attributes) follows up to `>` (`<function=`, `<invoke name=`).
    CallOpen,
    /// Closes one call (`</function>`, `</invoke>`).
    CallClose,
    /// Opens one parameter; its key (or attributes) follows (`<parameter=`, `<arg_key>`).
    ParamOpen,
    /// Ends a key written as element text (`</arg_key>`).
    KeyClose,
    /// Opens a value after its key (`<arg_value>`).
    ValueOpen,
    /// Closes a value (`</parameter>`, `</arg_value>`).
    ValueClose,
    /// An end-of-turn token dropped outside calls (`<seed:eos>`).
    Drop,
    /// Opens a call's wrapper inside a block (Step-3's `<｜tool_call_begin｜>`): the call's type
    /// follows, up to [`Role::TypeSep`], and must be [`Native::call_type`].
    CallWrapOpen,
    /// Ends a wrapped call's type (`<｜tool_sep｜>`); the call itself follows.
    TypeSep,
    /// Closes a call's wrapper (`<｜tool_call_end｜>`).
    CallWrapClose,
    /// The namespace token alone (`]<]minimax[>[`), in a grammar whose every delimiter starts
    /// with it: matched only where no delimiter follows at once. Whitespace and then a tag make
    /// it that tag spaced out (`spaced_marker`); anything else is no markup (text in prose,
    /// `malformed_markup` in a call). Its presence also says that the token never occurs in
    /// content: inside a value every delimiter is markup.
    Namespace,
}

/// How a call names its function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallForm {
    /// `<function=NAME>` … `</function>`: the name runs to `>`.
    Eq,
    /// `<invoke name="NAME">` … `</invoke>`: a quoted attribute value, then `>`.
    Attr,
    /// `<tool_call>NAME⏎…</tool_call>`: the block is the call; the name runs to a newline, the
    /// first key or the block's end.
    Bare,
}

/// How a parameter names its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamForm {
    /// `<parameter=KEY>VALUE</parameter>`.
    Eq,
    /// `<parameter name="KEY" [string="true|false"]>VALUE</parameter>`.
    Attr,
    /// `<arg_key>KEY</arg_key>⏎<arg_value>VALUE</arg_value>`.
    KeyValue,
    /// `<KEY>VALUE</KEY>`: the parameter open is followed by the key up to `>`, the value close
    /// by the same key and `>` (MiniMax-M3).
    Named,
}

/// A format of the family: its delimiters and tag forms.
#[derive(Debug)]
pub struct Grammar {
    /// Every delimiter with its role (literals with one first byte, `<` or the namespace
    /// token's; where one is a prefix of another the longest that matches wins).
    pub markers: &'static [(&'static str, Role)],
    /// How calls are written.
    pub call: CallForm,
    /// How parameters are written.
    pub param: ParamForm,
    /// A value close ends the value only before the next parameter, the call's end or the
    /// stream's end (else it is content); `false`: the first value close ends it.
    pub structural: bool,
    /// The block's close also confirms a value close (the call's own close being absent).
    pub follow_block_close: bool,
    /// The template pads every value with one newline on each side, stripped when parsing.
    pub pad: bool,
    /// Parameters carry a `string="true|false"` attribute that decides their typing.
    pub string_attr: bool,
    /// Values may hold child elements (`ParamForm::Named` tags nested to any depth: objects,
    /// `item` lists), read by the schema once the parameter closes ([`elements`]).
    pub nested: bool,
    /// The warning (or, option off, the error) when the stream ends inside a block after
    /// complete calls.
    pub block_end_warning: WarningKind,
    /// The reasoning wrapper the format's models write, split by the shared layer in front of
    /// the parser ([`boxed`]); `None`: no reasoning.
    pub reasoning: Option<&'static Syntax>,
    /// Shapes the format's models write as their own, read without a warning; in other grammars
    /// the same shapes are leniencies of [`Config`] (`missing_wrapper`, `json_invoke_body`,
    /// `reasoning.implicit_reasoning_end`).
    pub native: Native,
    /// Other spellings of the delimiters seen in the wild (another dialect of the same model
    /// family, an ASCII look-alike), each with its role: markup only under the option
    /// `marker_variants`, otherwise not delimiters at all.
    pub variants: &'static [(&'static str, Role)],
}

/// What a grammar's models write natively beyond the family's common forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Native {
    /// The block is optional: an attribute-form call open outside any block opens a call
    /// (DeepSeek-V4.1 writes invokes without their `calls` block).
    pub optional_block: bool,
    /// A call's body may be one JSON object holding its arguments instead of parameters
    /// (DeepSeek-V4.1's JSON invocation bodies).
    pub json_body: bool,
    /// A call marker inside reasoning ends the reasoning there and is parsed as a call
    /// (DeepSeek-V4.1 opens its calls block inside `<think>`).
    pub calls_end_reasoning: bool,
    /// Each call sits in a wrapper ([`Role::CallWrapOpen`] TYPE [`Role::TypeSep`] call
    /// [`Role::CallWrapClose`]) whose type must be this word (Step-3 writes
    /// `<｜tool_call_begin｜>function<｜tool_sep｜>`); another type is `malformed_markup`.
    /// `None`: the grammar has no call wrapper.
    pub call_type: Option<&'static str>,
    /// A bare call's name runs straight into its first tag or the block's close, no newline
    /// after it (GLM-4.7's template); in a grammar without it (GLM-4.5's template writes the
    /// newline) that shape is the leniency `compact_form`.
    pub compact_name: bool,
}

impl Native {
    /// Nothing beyond the family's common forms.
    pub const NONE: Native = Native {
        optional_block: false,
        json_body: false,
        calls_end_reasoning: false,
        call_type: None,
        compact_name: false,
    };
}

impl Grammar {
    fn marker(&self, role: Role) -> &'static str {
        self.markers
            .iter()
            .find(|m| m.1 == role)
            .map_or("", |m| m.0)
    }

    /// Every delimiter starts with a namespace token that never occurs in content.
    fn namespaced(&self) -> bool {
        self.markers.iter().any(|m| m.1 == Role::Namespace)
    }
}

config! {
    /// Leniencies (each recovered deviation is one named option) and limits.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Config {
        options {
            /// A function name or key ended by a newline instead of `>` (vllm#39771: one missing `>`
            /// killed every call) is read up to the newline, with a warning; off → `malformed_markup`.
            missing_gt,
            /// A value close the grammar cannot continue after is content, with a warning; off →
            /// `malformed_markup`.
            close_tag_in_value,
            /// A call outside any block is a call, with a warning: `<function=NAME>` only for a
            /// declared tool (Qwen3-Coder writes calls without `<tool_call>`; vLLM and llama.cpp
            /// accept them; prose writes such tags too), an attribute-form open (`<｜DSML｜invoke
            /// name=`, MiniMax-M3's namespaced `<invoke name=`) whatever the name (every
            /// DeepSeek-V4 engine accepts block-less invokes; Dynamo recovers M3's).
            missing_wrapper,
            /// The stream ending inside a block after complete calls keeps them, with a warning; off →
            /// `unterminated`.
            missing_block_end,
            /// The block's close right after a value, the call's own close missing, ends the call with
            /// a warning; off → `malformed_markup`.
            missing_call_close,
            /// Non-whitespace text after the last block is kept as text, with warning
            /// `text_after_calls` (templates say "no suffix"); off → `malformed_markup`.
            text_after_calls,
            /// Non-whitespace text inside a block between calls is kept as text, with a warning; off
            /// → `malformed_markup`.
            text_in_block,
            /// The two characters `\n` where a newline belongs between tags (GLM outputs; SGLang
            /// accepts them) are read as one, with a warning; off → `malformed_markup`.
            escaped_newline,
            /// Single-quoted attribute values (`name='f'`) are read, with a warning; off →
            /// `malformed_markup`.
            single_quotes,
            /// A parameter without its `string` attribute is typed by the schema, with a warning; off
            /// → `malformed_markup`.
            missing_string_attribute,
            /// An unquoted attribute value (`name=f`, which vLLM and tool-parser read for MiniMax-M3)
            /// is read up to `>`, with a warning; off → `malformed_markup`. On only for minimax_m3.
            unquoted_attribute,
            /// A namespace token, whitespace, then a tag (SGLang normalises MiniMax-M3's `NS <tag>`)
            /// is read as the tag, with a warning; off → the token is no markup.
            spaced_marker,
            /// Text beside child elements of an object value is kept under `$text` (vLLM and
            /// tool-parser), with a warning; off → `malformed_markup`.
            mixed_content,
            /// Values without a schema read `true`, `false` and `null` as JSON (SGLang's MiniMax-M3
            /// reading); off, they stay strings like every untyped value. Off by default.
            infer_untyped_scalars,
            /// A call whose body is one JSON object instead of parameters takes that object as its
            /// arguments, with a warning (SGLang, tool-parser and Dynamo read DeepSeek-V4 invokes
            /// so); off → `malformed_markup`. Off by default.
            json_invoke_body,
            /// A self-closing attribute-form call (`<｜DSML｜invoke name="f"/>`, SGLang's "shape V4
            /// emits for zero-arg tools") is a call with `{}`, with a warning; off →
            /// `malformed_markup`. Off by default.
            self_closing_invoke,
            /// The grammar's other spellings of its delimiters (`Grammar::variants`: DeepSeek-V4's
            /// `toolcalls` and ASCII `|DSML|`, the other V4/V4.1 dialect) are markup, with one
            /// warning per turn; off, they are not delimiters. Off by default.
            marker_variants,
            /// A call named `a.a` where `a` is a declared tool and `a.a` is not is a call of `a`,
            /// with warning `name_normalised` (Muse Glimmer's template renders a bare tool `a`
            /// as namespace `a.*`, so its model writes `a.a`; vLLM collapses it the same way).
            /// Off by default: elsewhere the name is what the model wrote.
            doubled_name,
            /// Whitespace around a bare call's name on its line (`<tool_call> f ⏎`: GLM's
            /// templates write none; SGLang drops such a call) is trimmed, with warning
            /// `header_whitespace`; off → `malformed_markup`.
            header_whitespace,
            /// A bare call's name running straight into its first tag, without the newline the
            /// grammar's template writes after it (GLM-4.7's compact form in GLM-4.5 output;
            /// SGLang and the gateway do not read it), is read, with warning `compact_form`;
            /// off → `malformed_markup`. A grammar whose models write that form
            /// ([`Native::compact_name`]) reads it without a warning.
            compact_form,
        }
        /// The schema typing's own leniencies.
        pub typing: TypingOptions,
        /// Longest value in bytes (`limit_exceeded` beyond).
        pub max_value_bytes: usize,
        /// Longest name, key or tag attribute text in bytes (`limit_exceeded` beyond).
        pub max_tag_bytes: usize,
        /// The reasoning layer's options, for a grammar that declares a wrapper. `starts_inside`
        /// is off: a server knows whether its template put the open tag in the prompt (GLM-4.7,
        /// MiniMax-M2 and DeepSeek-V3.2 thinking prompts do), the parser does not.
        pub reasoning: reasoning::Config,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            missing_gt: true,
            close_tag_in_value: true,
            missing_wrapper: false,
            missing_block_end: true,
            missing_call_close: true,
            text_after_calls: true,
            text_in_block: true,
            escaped_newline: true,
            single_quotes: true,
            missing_string_attribute: true,
            unquoted_attribute: false,
            spaced_marker: true,
            mixed_content: true,
            infer_untyped_scalars: false,
            json_invoke_body: false,
            self_closing_invoke: false,
            marker_variants: false,
            doubled_name: false,
            header_whitespace: true,
            compact_form: true,
            typing: TypingOptions::default(),
            max_value_bytes: 64 << 20,
            max_tag_bytes: 4096,
            reasoning: reasoning::Config::default(),
        }
    }
}

/// `a` when `name` is `a.a` (a namespace and a leaf of the same name).
pub fn doubled_leaf(name: &str) -> Option<&str> {
    let (ns, leaf) = name.split_once('.')?;
    (ns == leaf && !ns.is_empty()).then_some(ns)
}

/// Characters that may not appear in a function name (vLLM rejects them too).
fn bad_name(name: &str) -> bool {
    name.chars()
        .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | '{' | '}' | '"' | '\''))
}

/// Bytes a JSON string cannot hold as they are: `"`, `\\` and the control characters.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The offset of the first byte of `s` that needs a JSON escape.
#[inline]
fn first_escape(s: &str) -> Option<usize> {
    s.bytes().position(|b| NEEDS_ESCAPE[b as usize])
}

/// Appends `s` as JSON string body (without quotes).
pub fn escape_json_into(out: &mut String, s: &str) {
    let mut rest = s;
    while let Some(i) = first_escape(rest) {
        out.push_str(&rest[..i]);
        let b = rest.as_bytes()[i];
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 15) as usize] as char);
            }
        }
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

/// Whitespace-only text segments next to markup are not text; anything else is kept whole.
#[derive(Debug, Default)]
struct Segment {
    ws: String,
    content: bool,
    /// The segment's text was refused (one error): the rest of it is dropped.
    refused: bool,
}

/// The value's leading newline, while it is still undecided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lead {
    Start,
    SawCr,
    Done,
}

/// How a value becomes JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The raw text as a string, streamed.
    Stream,
    /// Held and typed by the schema.
    Typed(ParamType),
    /// Held and read as JSON (`string="false"`).
    Json,
    /// Held as elements (nested grammars) or as untyped text read by the element rules
    /// (`infer_untyped_scalars`), read by [`elements::read`] at the close.
    Tree,
}

#[derive(Debug)]
struct Param {
    key: String,
    mode: Mode,
    buf: String,
    bytes: usize,
    lead: Lead,
    hold: &'static str,
    /// The elements of a `Mode::Tree` value so far.
    tree: Option<Tree>,
    /// The schema types the value (`Mode::Tree` reads members by it).
    typed: bool,
}

#[derive(Debug)]
struct Call {
    name: String,
    index: usize,
    keys: Vec<String>,
    spoiled: bool,
    implicit: bool,
    /// Its arguments came as one JSON object (already sent).
    body: bool,
}

/// Where a JSON invoke body ends: the object's depth and string state, byte by byte, so a
/// delimiter inside one of its strings is data.
#[derive(Debug, Default)]
struct JsonBody {
    buf: String,
    depth: usize,
    in_str: bool,
    escaped: bool,
}

impl JsonBody {
    /// Takes bytes of `t` up to the object's end: the bytes used and whether it ended. Stops
    /// (not ended) at a nesting deeper than [`MAX_VALUE_DEPTH`], which the caller reports.
    fn take(&mut self, t: &str) -> (usize, bool) {
        for (i, b) in t.bytes().enumerate() {
            if self.in_str {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_str = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_str = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth > MAX_VALUE_DEPTH {
                        return (i + 1, false);
                    }
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        self.buf.push_str(&t[..=i]);
                        return (i + 1, true);
                    }
                }
                _ => {}
            }
        }
        self.buf.push_str(t);
        (t.len(), false)
    }
}

#[derive(Debug)]
enum St {
    /// Outside blocks.
    Text,
    /// `<function=` seen in text without a block: its name decides whether it is a call.
    ImplicitName(String),
    /// Inside a block, between calls.
    Block,
    /// After a call open: the name or attributes up to `>`; `implicit`: outside any block.
    CallName {
        buf: String,
        quote: Option<char>,
        implicit: bool,
    },
    /// After a bare block open: the name up to the first key or the block's end.
    BareName(String),
    /// After a call wrapper's open: the call's type up to the type separator.
    CallType(String),
    /// Inside a call, between parameters; text that is not whitespace collected.
    Call(String),
    /// After a parameter open: the key or attributes.
    Key { buf: String, quote: Option<char> },
    /// After a key's close, before its value's open; text that is not whitespace collected.
    KeyDone { key: String, junk: String },
    /// Inside a value.
    Value,
    /// After a value close, held with the whitespace after it until what follows decides.
    AfterClose(String),
    /// Inside a value of a nested grammar, after a parameter open: a child element's tag.
    ChildName(String),
    /// After a named value close: the tag it closes, up to `>`.
    CloseName(String),
    /// Inside a call's JSON object body.
    JsonBody(JsonBody),
    /// After an error inside a call: everything up to the call's end is dropped.
    Skip,
}

/// The streaming parser of one tagged-parameter format.
pub struct Parser {
    g: &'static Grammar,
    cfg: Config,
    types: SchemaTypes,
    has_tools: bool,
    /// All the grammar's delimiters: used outside values.
    scan: MarkerScanner,
    /// `scan`'s delimiters: text, role, and whether it is one of the grammar's variants.
    all: Vec<(&'static str, Role, bool)>,
    /// The delimiters of a value — the value close alone (and its variants), or, in a
    /// namespaced grammar, all — used inside values.
    vscan: MarkerScanner,
    /// `vscan`'s delimiters, as `all`.
    vall: Vec<(&'static str, Role, bool)>,
    /// A variant spelling was read as markup in this turn (warned once).
    variant_seen: bool,
    /// The byte every delimiter starts with: a piece of a value without it holds none.
    first: u8,
    /// Every member's schema, for the members of nested values.
    schemas: Schemas,
    /// The whitespace read after a bare namespace token, while its tag may still follow.
    spaced: Option<String>,
    /// That whitespace once a tag followed, until the tag's delimiter comes back from the
    /// scanner (markup: a warning; text where it means nothing: written as it came).
    respaced: Option<String>,
    utf8: Utf8Decoder,
    st: St,
    seg: Segment,
    in_block: bool,
    markup_seen: bool,
    after_block: bool,
    /// The segment after the last block so far has text.
    text_after: bool,
    next_index: usize,
    call: Option<Call>,
    param: Option<Param>,
    scratch: String,
}

impl Parser {
    /// A parser of `g` with options `cfg`; `tools` type the values.
    pub fn new(g: &'static Grammar, cfg: Config, tools: &Tools) -> Parser {
        let variants: &[(&str, Role)] = if cfg.marker_variants { g.variants } else { &[] };
        let all: Vec<(&'static str, Role, bool)> = (g.markers.iter().map(|&(m, r)| (m, r, false)))
            .chain(variants.iter().map(|&(m, r)| (m, r, true)))
            .collect();
        let vall: Vec<_> = all
            .iter()
            .copied()
            // Behind a namespace token every delimiter is markup, inside values too.
            .filter(|m| g.namespaced() || m.1 == Role::ValueClose)
            .collect();
        let texts = |v: &[(&'static str, Role, bool)]| v.iter().map(|m| m.0).collect::<Vec<_>>();
        Parser {
            g,
            cfg,
            types: SchemaTypes::new(tools),
            has_tools: !tools.is_empty(),
            scan: MarkerScanner::new(&texts(&all)),
            vscan: MarkerScanner::new(&texts(&vall)),
            all,
            vall,
            variant_seen: false,
            first: g.markers.first().map_or(b'<', |m| m.0.as_bytes()[0]),
            schemas: if g.nested {
                Schemas::new(tools)
            } else {
                Schemas::default()
            },
            spaced: None,
            respaced: None,
            utf8: Utf8Decoder::new(),
            st: St::Text,
            seg: Segment::default(),
            in_block: false,
            markup_seen: false,
            after_block: false,
            text_after: false,
            next_index: 0,
            call: None,
            param: None,
            scratch: String::new(),
        }
    }

    /// The scanner not in use in the current state.
    fn other_scanner(&mut self, in_value: bool) -> &mut MarkerScanner {
        if in_value {
            &mut self.scan
        } else {
            &mut self.vscan
        }
    }

    #[inline]
    fn feed_str(&mut self, mut s: &str, out: &mut dyn Sink) {
        // Inside a value, a piece without the delimiters' first byte is value text whatever
        // the scanner would say: the common streaming delta, without its machinery.
        if matches!(self.st, St::Value)
            && self.vscan.held().is_empty()
            && self.scan.held().is_empty()
            && self.spaced.is_none()
            && !has_byte(s.as_bytes(), self.first)
        {
            // The most common piece of all, taken here whole: value text with nothing for the
            // padding rule to decide, streamed as it came (within the limit, no escape).
            if let (Some(p), Some(c)) = (&mut self.param, &self.call)
                && p.mode == Mode::Stream
                && !c.spoiled
                && (!self.g.pad || (p.lead == Lead::Done && p.hold.is_empty()))
                && !s.is_empty()
                && !s.ends_with(['\n', '\r'])
                && p.bytes + s.len() <= self.cfg.max_value_bytes
                && first_escape(s).is_none()
            {
                p.bytes += s.len();
                return out.args_delta(c.index, s);
            }
            return self.value_text(s, out);
        }
        loop {
            let in_value = matches!(self.st, St::Value);
            // Bytes the other scanner held come first, through the scanner of this state.
            if !self.other_scanner(in_value).held().is_empty() {
                let held = self.other_scanner(in_value).take_held();
                self.feed_str(&held, out);
                continue;
            }
            if self.spaced.is_some() {
                if self.spacing(&mut s, in_value, out) {
                    continue;
                }
                break;
            }
            let t = if in_value {
                self.vscan.next(&mut s)
            } else {
                self.scan.next(&mut s)
            };
            match t {
                Some(t) => self.token(t, in_value, out),
                None => break,
            }
        }
    }

    /// After a bare namespace token: reads whitespace from what the scanner of this state
    /// holds and then from `s`, until a tag shows (handed back to the scanner behind the
    /// token: it is that tag, spaced out) or something else does (the token was no markup);
    /// `false` when the input ran out first.
    fn spacing(&mut self, s: &mut &str, in_value: bool, out: &mut dyn Sink) -> bool {
        let scanner = if in_value {
            &mut self.vscan
        } else {
            &mut self.scan
        };
        let held = scanner.take_held();
        let ns = self.g.marker(Role::Namespace);
        let Some(ws) = self.spaced.as_mut() else {
            return true;
        };
        // The held bytes (at most a delimiter's length) come before `s`.
        let (from_held, rest) = match held.find(|c: char| !c.is_ascii_whitespace()) {
            Some(k) => (true, &held[k..]),
            None => {
                ws.push_str(&held);
                let k = s
                    .find(|c: char| !c.is_ascii_whitespace())
                    .unwrap_or(s.len());
                ws.push_str(&s[..k]);
                *s = &s[k..];
                (false, *s)
            }
        };
        if from_held {
            ws.push_str(&held[..held.len() - rest.len()]);
        }
        if ws.len() > self.cfg.max_tag_bytes {
            let ws = self.spaced.take().unwrap_or_default();
            self.bare_namespace(&ws, out);
            if from_held {
                self.scanner_mut(in_value).unread(rest);
            }
            return true;
        }
        if rest.is_empty() {
            return false;
        }
        let ws = self.spaced.take().unwrap_or_default();
        if rest.starts_with('<') {
            self.respaced = Some(ws);
            let back = if from_held {
                format!("{ns}{rest}")
            } else {
                ns.to_string()
            };
            self.scanner_mut(in_value).unread(&back);
        } else {
            self.bare_namespace(&ws, out);
            if from_held {
                self.scanner_mut(in_value).unread(rest);
            }
        }
        true
    }

    fn scanner_mut(&mut self, in_value: bool) -> &mut MarkerScanner {
        if in_value {
            &mut self.vscan
        } else {
            &mut self.scan
        }
    }

    /// A namespace token followed by no tag (`ws`: the whitespace after it): text in prose, an
    /// error inside a call.
    fn bare_namespace(&mut self, ws: &str, out: &mut dyn Sink) {
        let ns = self.g.marker(Role::Namespace);
        match self.st {
            St::Text | St::ImplicitName(_) => {
                self.seg_text(ns, false, out);
                self.seg_text(ws, false, out);
            }
            St::Block => {
                self.seg_text(ns, true, out);
                self.seg_text(ws, true, out);
            }
            St::Skip => {}
            _ => {
                let msg = format!("{ns} without a tag inside a call");
                self.fail(ErrorKind::MalformedMarkup, &msg, out);
            }
        }
    }

    fn token(&mut self, t: Token<'_>, in_value: bool, out: &mut dyn Sink) {
        match t {
            Token::Text(s) => self.text(&s, out),
            Token::Marker(i) => {
                let (m, role, variant) = if in_value { self.vall[i] } else { self.all[i] };
                if variant && !self.variant_seen && self.is_markup(role) {
                    self.variant_seen = true;
                    out.push(Event::warning(
                        WarningKind::MarkerVariant,
                        format!("{m} read as {}", self.g.marker(role)),
                    ));
                }
                self.marker(m, role, out);
            }
        }
    }

    /// Whether a delimiter of `role` is markup in the current state (outside calls most are
    /// text; inside a JSON body's string every one is data).
    fn is_markup(&self, role: Role) -> bool {
        match &self.st {
            St::Text => match role {
                Role::BlockOpen | Role::Drop => true,
                Role::CallOpen => {
                    self.outside_call_opens()
                        || (self.cfg.missing_wrapper && self.g.call == CallForm::Eq)
                }
                _ => false,
            },
            St::Block => matches!(
                role,
                Role::CallOpen
                    | Role::BlockClose
                    | Role::Drop
                    | Role::CallWrapOpen
                    | Role::CallWrapClose
            ),
            St::JsonBody(b) => !b.in_str,
            _ => true,
        }
    }

    /// An attribute-form call open outside any block opens a call: natively, or as the
    /// leniency `missing_wrapper`.
    fn outside_call_opens(&self) -> bool {
        self.g.call == CallForm::Attr && (self.g.native.optional_block || self.cfg.missing_wrapper)
    }

    // ---- text segments ----

    /// Text outside calls: a segment's leading whitespace is held until something else shows
    /// it is text.
    fn seg_text(&mut self, s: &str, in_block: bool, out: &mut dyn Sink) {
        if self.seg.refused {
            return;
        }
        if self.seg.content {
            out.text(s);
            return;
        }
        match s.find(|c: char| !c.is_whitespace()) {
            None => self.seg.ws.push_str(s),
            Some(_) => {
                if in_block {
                    if !self.cfg.text_in_block {
                        out.push(Event::error(
                            ErrorKind::MalformedMarkup,
                            format!("text {} inside a block of calls", excerpt(s)),
                        ));
                        self.seg.ws.clear();
                        self.seg.refused = true;
                        return;
                    }
                    out.push(Event::warning(
                        WarningKind::TextInBlock,
                        format!("text {} between calls inside a block", excerpt(s)),
                    ));
                } else if self.after_block {
                    self.text_after = true;
                }
                self.seg.content = true;
                let ws = std::mem::take(&mut self.seg.ws);
                out.text(&ws);
                out.text(s);
            }
        }
    }

    /// Markup starts or ends a segment: a whitespace-only segment is dropped.
    fn boundary(&mut self) {
        self.seg = Segment::default();
        self.markup_seen = true;
    }

    // ---- dispatch ----

    fn text(&mut self, mut t: &str, out: &mut dyn Sink) {
        while !t.is_empty() {
            let body_starts = matches!(self.st, St::Call(_)) && self.json_body_starts(t);
            let used = match &mut self.st {
                St::Text => {
                    self.seg_text(t, false, out);
                    t.len()
                }
                St::Block => {
                    self.seg_text(t, true, out);
                    t.len()
                }
                St::Skip => t.len(),
                St::Value => {
                    self.value_text(t, out);
                    t.len()
                }
                St::ImplicitName(_) => self.implicit_name_text(t, out),
                St::CallName { .. } => self.call_name_text(t, out),
                St::ChildName(_) | St::CloseName(_) => self.element_tag_text(t, out),
                St::BareName(buf) => {
                    buf.push_str(t);
                    if buf.len() > self.cfg.max_tag_bytes {
                        self.fail(ErrorKind::LimitExceeded, "the call's name is too long", out);
                    }
                    t.len()
                }
                St::CallType(buf) => {
                    buf.push_str(t);
                    if buf.len() > self.cfg.max_tag_bytes {
                        self.fail(ErrorKind::LimitExceeded, "the call's type is too long", out);
                    }
                    t.len()
                }
                St::JsonBody(_) => self.json_body_text(t, out),
                St::Call(_) if body_starts => {
                    let k = t.len() - t.trim_start().len();
                    self.st = St::JsonBody(JsonBody::default());
                    k
                }
                St::Call(junk) | St::KeyDone { junk, .. } => {
                    let ws = t.trim_start_matches(|c: char| c.is_whitespace());
                    if !ws.is_empty() {
                        if self.g.param == ParamForm::KeyValue && self.cfg.escaped_newline {
                            junk.push_str(t);
                            if junk.len() > 64 {
                                let msg = format!("text {} between parameters", excerpt(junk));
                                self.fail(ErrorKind::MalformedMarkup, &msg, out);
                            }
                        } else {
                            let msg = format!("text {} between parameters", excerpt(t));
                            self.fail(ErrorKind::MalformedMarkup, &msg, out);
                        }
                    }
                    t.len()
                }
                St::Key { .. } => self.key_text(t, out),
                St::AfterClose(held) => {
                    if t.chars().all(char::is_whitespace) {
                        held.push_str(t);
                        if held.len() > self.cfg.max_value_bytes {
                            self.fail(ErrorKind::LimitExceeded, "a value is too long", out);
                        }
                        t.len()
                    } else {
                        self.reopen_value(out);
                        0
                    }
                }
            };
            t = &t[used..];
        }
    }

    fn marker(&mut self, m: &'static str, role: Role, out: &mut dyn Sink) {
        if role == Role::Namespace {
            // Its tag (or what else) follows: see `spacing`.
            if self.cfg.spaced_marker {
                self.spaced = Some(String::new());
            } else {
                self.bare_namespace("", out);
            }
            return;
        }
        let namespaced = self.g.namespaced();
        if let Some(ws) = self.respaced.take() {
            // The delimiter was written `NS`, whitespace, tag.
            let ns = self.g.marker(Role::Namespace);
            if !self.is_markup(role) {
                let in_block = matches!(self.st, St::Block);
                self.seg_text(ns, in_block, out);
                self.seg_text(&ws, in_block, out);
                self.seg_text(&m[ns.len()..], in_block, out);
                return;
            }
            out.push(Event::warning(
                WarningKind::SpacedMarker,
                format!("{ns} is followed by {} before its tag", excerpt(&ws)),
            ));
        }
        match &mut self.st {
            St::Text => match role {
                Role::BlockOpen => {
                    self.boundary();
                    self.text_after = false;
                    self.in_block = true;
                    self.st = match self.g.call {
                        CallForm::Bare => St::BareName(String::new()),
                        _ => St::Block,
                    };
                }
                Role::CallOpen if self.cfg.missing_wrapper && self.g.call == CallForm::Eq => {
                    self.st = St::ImplicitName(String::new());
                }
                Role::CallOpen if self.outside_call_opens() => {
                    if !self.g.native.optional_block {
                        out.push(Event::warning(
                            WarningKind::MissingWrapper,
                            format!("{m} outside {}", self.g.marker(Role::BlockOpen)),
                        ));
                    }
                    self.boundary();
                    self.st = St::CallName {
                        buf: String::new(),
                        quote: None,
                        implicit: true,
                    };
                }
                Role::Drop => {}
                _ => self.seg_text(m, false, out),
            },
            St::ImplicitName(buf) => {
                let buf = std::mem::take(buf);
                self.implicit_not_a_call(&buf, out);
                self.marker(m, role, out);
            }
            St::Block => match role {
                Role::CallOpen => {
                    self.boundary();
                    self.st = St::CallName {
                        buf: String::new(),
                        quote: None,
                        implicit: false,
                    };
                }
                Role::BlockClose => self.end_block(),
                Role::Drop => {}
                Role::CallWrapOpen => {
                    self.boundary();
                    self.st = St::CallType(String::new());
                }
                // The wrapper's close after its call's close (or a stray one): nothing to do.
                Role::CallWrapClose => self.boundary(),
                _ => self.seg_text(m, true, out),
            },
            St::CallType(buf) => {
                let ty = std::mem::take(buf);
                let want = self.g.native.call_type.unwrap_or_default();
                if role != Role::TypeSep {
                    let msg = format!("{m} inside a call's type (its separator missing?)");
                    self.fail(ErrorKind::MalformedMarkup, &msg, out);
                    self.marker(m, role, out);
                } else if ty.trim() != want {
                    let msg = format!("call type {} where {want:?} belongs", excerpt(&ty));
                    self.fail(ErrorKind::MalformedMarkup, &msg, out);
                } else {
                    self.boundary();
                    self.st = St::Block;
                }
            }
            St::Key { buf, .. }
                if self.g.param == ParamForm::KeyValue && role == Role::KeyClose =>
            {
                let key = buf.trim().to_string();
                self.st = St::KeyDone {
                    key,
                    junk: String::new(),
                };
            }
            St::CallName { .. } | St::Key { .. } | St::ChildName(_) | St::CloseName(_) => {
                let msg = format!("{m} inside a tag (a missing `>`?)");
                self.fail(ErrorKind::MalformedMarkup, &msg, out);
                self.marker(m, role, out);
            }
            St::BareName(buf) => match role {
                Role::ParamOpen | Role::BlockClose => {
                    let buf = std::mem::take(buf);
                    if self.bare_name(&buf, out) {
                        self.st = St::Call(String::new());
                        self.marker(m, role, out);
                    }
                }
                _ => {
                    let msg = format!("{m} inside the call's name");
                    self.fail(ErrorKind::MalformedMarkup, &msg, out);
                    self.marker(m, role, out);
                }
            },
            St::Call(junk) => {
                let junk = std::mem::take(junk);
                if !self.junk_ok(&junk, out) {
                    return self.marker(m, role, out);
                }
                match role {
                    Role::ParamOpen if self.call.as_ref().is_some_and(|c| c.body) => {
                        let msg = format!("{m} after the call's JSON body");
                        self.fail(ErrorKind::MalformedMarkup, &msg, out);
                        self.marker(m, role, out);
                    }
                    Role::ParamOpen => {
                        self.st = St::Key {
                            buf: String::new(),
                            quote: None,
                        }
                    }
                    Role::CallClose if self.g.call != CallForm::Bare => self.end_call(out),
                    Role::BlockClose if self.g.call == CallForm::Bare => {
                        self.end_call(out);
                        self.end_block();
                    }
                    Role::BlockClose if self.cfg.missing_call_close => {
                        out.push(Event::warning(
                            WarningKind::MissingCallClose,
                            format!("{m} closes a call that was not closed"),
                        ));
                        self.end_call(out);
                        self.end_block();
                    }
                    Role::CallWrapClose if self.cfg.missing_call_close => {
                        out.push(Event::warning(
                            WarningKind::MissingCallClose,
                            format!("{m} closes a call that was not closed"),
                        ));
                        self.end_call(out);
                        self.boundary();
                    }
                    _ => {
                        let msg = format!("{m} where a parameter or the call's end belongs");
                        self.fail(ErrorKind::MalformedMarkup, &msg, out);
                        self.marker(m, role, out);
                    }
                }
            }
            St::KeyDone { key, junk } => {
                let (key, junk) = (std::mem::take(key), std::mem::take(junk));
                if !self.junk_ok(&junk, out) {
                    return self.marker(m, role, out);
                }
                if role == Role::ValueOpen {
                    self.begin_param(&key, None, out);
                } else {
                    let msg = format!("{m} where a value's open tag belongs");
                    self.fail(ErrorKind::MalformedMarkup, &msg, out);
                    self.marker(m, role, out);
                }
            }
            St::Value => match role {
                Role::ValueClose if self.g.param == ParamForm::Named => {
                    self.st = St::CloseName(String::new());
                }
                Role::ValueClose if self.g.structural => {
                    self.st = St::AfterClose(m.to_string());
                }
                Role::ValueClose => self.close_value(out),
                Role::ParamOpen
                    if self.g.nested && self.param.as_ref().is_some_and(|p| p.tree.is_some()) =>
                {
                    self.st = St::ChildName(String::new());
                }
                _ if namespaced => {
                    let key = self.param.as_ref().map_or("", |p| p.key.as_str());
                    let msg = if role == Role::ParamOpen {
                        format!(
                            "an element inside {key:?}, a string parameter (it streams as text)"
                        )
                    } else {
                        format!("{m} inside the value of {key:?}, which is not closed")
                    };
                    self.fail(ErrorKind::MalformedMarkup, &msg, out);
                    self.marker(m, role, out);
                }
                _ => self.value_text(m, out),
            },
            St::JsonBody(b) if b.in_str => {
                self.json_body_text(m, out);
            }
            St::JsonBody(_) => {
                let msg = format!("{m} inside the call's JSON body, outside its strings");
                self.fail(ErrorKind::MalformedMarkup, &msg, out);
                self.marker(m, role, out);
            }
            St::AfterClose(_) => {
                let follows = match role {
                    Role::ParamOpen | Role::CallClose => true,
                    Role::BlockClose | Role::CallWrapClose => self.g.follow_block_close,
                    _ => false,
                };
                if follows {
                    self.close_value(out);
                    self.marker(m, role, out);
                } else {
                    self.reopen_value(out);
                    self.marker(m, role, out);
                }
            }
            St::Skip => match role {
                Role::CallClose if self.g.call != CallForm::Bare => {
                    self.call = None;
                    self.param = None;
                    self.st = St::Block;
                    self.end_implicit();
                }
                Role::BlockClose => {
                    self.call = None;
                    self.param = None;
                    self.end_block();
                }
                // A wrapped call's end ends a broken call whose own close is missing.
                Role::CallWrapClose => {
                    self.call = None;
                    self.param = None;
                    self.st = St::Block;
                    self.boundary();
                }
                // Behind a namespace token these are markup, never content: the broken call is
                // over, and they act in their own right.
                Role::CallOpen | Role::BlockOpen if namespaced => {
                    self.call = None;
                    self.param = None;
                    self.st = St::Block;
                    self.end_implicit();
                    if role == Role::BlockOpen && self.in_block {
                        self.end_block();
                    }
                    self.marker(m, role, out);
                }
                _ => {}
            },
        }
    }

    // ---- blocks and calls ----

    fn end_block(&mut self) {
        self.in_block = false;
        self.after_block = true;
        self.boundary();
        self.st = St::Text;
    }

    /// A call opened without a block ends the pseudo-block with it.
    fn end_implicit(&mut self) {
        if !self.in_block {
            self.after_block = true;
            self.boundary();
            self.st = St::Text;
        }
    }

    fn implicit_name_text(&mut self, t: &str, out: &mut dyn Sink) -> usize {
        let St::ImplicitName(buf) = &mut self.st else {
            return 0;
        };
        match t.find(['>', '\n']) {
            Some(k) if t.as_bytes()[k] == b'>' => {
                let mut name = std::mem::take(buf);
                name.push_str(&t[..k]);
                if !name.is_empty() && !bad_name(&name) && self.types.knows_tool(&name) {
                    out.push(Event::warning(
                        WarningKind::MissingWrapper,
                        format!(
                            "call of {name:?} without {}",
                            self.g.marker(Role::BlockOpen)
                        ),
                    ));
                    self.boundary();
                    self.start_call(name, true, out);
                } else {
                    name.push('>');
                    self.implicit_not_a_call(&name, out);
                }
                k + 1
            }
            Some(_) => {
                let b = std::mem::take(buf);
                self.implicit_not_a_call(&b, out);
                0
            }
            None => {
                buf.push_str(t);
                if buf.len() > self.cfg.max_tag_bytes {
                    let b = std::mem::take(buf);
                    self.implicit_not_a_call(&b, out);
                }
                t.len()
            }
        }
    }

    fn implicit_not_a_call(&mut self, rest: &str, out: &mut dyn Sink) {
        self.st = St::Text;
        let open = self.g.marker(Role::CallOpen);
        self.seg_text(open, false, out);
        self.seg_text(rest, false, out);
    }

    fn call_name_text(&mut self, t: &str, out: &mut dyn Sink) -> usize {
        let implicit = matches!(self.st, St::CallName { implicit: true, .. });
        let eq = self.g.call == CallForm::Eq;
        let (used, raw) = self.tag_text(t, eq, ("name", "a call's name is too long"), out);
        let Some(raw) = raw else {
            return used;
        };
        let mut self_closing = false;
        let name = match self.g.call {
            CallForm::Attr => {
                let attrs = match raw.trim_end().strip_suffix('/') {
                    Some(r) if self.cfg.self_closing_invoke => {
                        self_closing = true;
                        r
                    }
                    _ => &raw,
                };
                match self.attrs(attrs, false, out) {
                    Some((n, _)) => n,
                    None => return used,
                }
            }
            _ => raw,
        };
        if self.check_name(&name, out) {
            self.start_call(name.clone(), implicit, out);
            if self_closing {
                out.push(Event::warning(
                    WarningKind::SelfClosingInvoke,
                    format!("the call of {name:?} closes itself: no arguments"),
                ));
                self.end_call(out);
            }
        }
        used
    }

    /// A call's body begins with a JSON object where the grammar or the options allow one:
    /// before any parameter, its first byte `{`.
    fn json_body_starts(&self, t: &str) -> bool {
        (self.g.native.json_body || self.cfg.json_invoke_body)
            && t.trim_start().starts_with('{')
            && self
                .call
                .as_ref()
                .is_some_and(|c| c.keys.is_empty() && !c.body && !c.spoiled)
    }

    /// Text of a JSON body up to the object's end, which reads it as the call's arguments.
    fn json_body_text(&mut self, t: &str, out: &mut dyn Sink) -> usize {
        let St::JsonBody(b) = &mut self.st else {
            return 0;
        };
        let (used, ended) = b.take(t);
        if b.buf.len() > self.cfg.max_value_bytes {
            let msg = format!(
                "the call's JSON body is longer than {} bytes",
                self.cfg.max_value_bytes
            );
            self.fail(ErrorKind::LimitExceeded, &msg, out);
            return used;
        }
        if b.depth > MAX_VALUE_DEPTH {
            let msg = format!("the call's JSON body nests deeper than {MAX_VALUE_DEPTH}");
            self.fail(ErrorKind::LimitExceeded, &msg, out);
            return used;
        }
        if !ended {
            return used;
        }
        let buf = std::mem::take(&mut b.buf);
        let Some(Value::Object(args)) = read_json(&buf) else {
            let msg = format!("the call's body {} is not a JSON object", excerpt(&buf));
            self.fail(ErrorKind::MalformedMarkup, &msg, out);
            return used;
        };
        self.st = St::Call(String::new());
        let Some(c) = &mut self.call else {
            return used;
        };
        if !self.g.native.json_body {
            out.push(Event::warning(
                WarningKind::JsonInvokeBody,
                format!("{:?} has a JSON object for its body", c.name),
            ));
        }
        c.body = true;
        out.args_delta(c.index, &Value::Object(args).to_string());
        used
    }

    /// Reads `t` into the text of the tag being read (a call's name or a key: `what`, and the
    /// message when it is too long) up to the tag's end (`>`, or a newline where
    /// `newline_ends`): the bytes used, and the tag's text once it is complete and acceptable
    /// (`None` while the tag goes on, or after reporting why not).
    fn tag_text(
        &mut self,
        t: &str,
        newline_ends: bool,
        (what, too_long_msg): (&str, &str),
        out: &mut dyn Sink,
    ) -> (usize, Option<String>) {
        let max = self.cfg.max_tag_bytes;
        let (St::CallName { buf, quote, .. } | St::Key { buf, quote }) = &mut self.st else {
            return (0, None);
        };
        let (end, used) = match tag_end(t, quote, newline_ends) {
            Some((k, newline)) => {
                buf.push_str(&t[..k]);
                (Some(newline), k + 1)
            }
            None => {
                buf.push_str(t);
                (None, t.len())
            }
        };
        let too_long = buf.len() > max;
        let Some(newline) = end else {
            if too_long {
                self.fail(ErrorKind::LimitExceeded, too_long_msg, out);
            }
            return (used, None);
        };
        let raw = std::mem::take(buf);
        if too_long {
            self.fail(ErrorKind::LimitExceeded, too_long_msg, out);
            return (used, None);
        }
        if newline && !self.missing_gt(what, &raw, out) {
            return (used, None);
        }
        (used, Some(raw))
    }

    fn missing_gt(&mut self, what: &str, raw: &str, out: &mut dyn Sink) -> bool {
        if self.cfg.missing_gt {
            out.push(Event::warning(
                WarningKind::MissingGt,
                format!("the {what} {} ends at a newline, not `>`", excerpt(raw)),
            ));
            true
        } else {
            let msg = format!("the {what} {} has no `>`", excerpt(raw));
            self.fail(ErrorKind::MalformedMarkup, &msg, out);
            false
        }
    }

    fn check_name(&mut self, name: &str, out: &mut dyn Sink) -> bool {
        if name.is_empty() {
            self.fail(ErrorKind::MissingName, "a call has an empty name", out);
            false
        } else if bad_name(name) {
            let msg = format!("the name {} cannot be a function name", excerpt(name));
            self.fail(ErrorKind::MalformedMarkup, &msg, out);
            false
        } else {
            true
        }
    }

    /// A bare name: up to the first newline (or `\n` typed out), the rest whitespace.
    fn bare_name(&mut self, buf: &str, out: &mut dyn Sink) -> bool {
        let (name, rest, escaped) = match buf.find('\n') {
            Some(k) => (&buf[..k], &buf[k + 1..], false),
            None => match buf.find("\\n") {
                Some(k) => (&buf[..k], &buf[k + 2..], true),
                None => (buf, "", false),
            },
        };
        if escaped {
            if !self.cfg.escaped_newline {
                self.fail(
                    ErrorKind::MalformedMarkup,
                    "`\\n` typed out after the name",
                    out,
                );
                return false;
            }
            out.push(Event::warning(
                WarningKind::EscapedNewline,
                "`\\n` typed out after the call's name",
            ));
        }
        if !rest.replace("\\n", "").chars().all(char::is_whitespace) {
            let msg = format!("text {} after the call's name", excerpt(rest));
            self.fail(ErrorKind::MalformedMarkup, &msg, out);
            return false;
        }
        let trimmed = name.trim();
        if !self.check_name(trimmed, out) {
            return false;
        }
        // Each recovered shape is named (GLM's templates write neither), so an engine that
        // does not read it is judged as not recovering a deviation, not as losing a call.
        let compact = !escaped && !buf.contains('\n') && !self.g.native.compact_name;
        for (deviates, allowed, kind, what) in [
            (
                compact,
                self.cfg.compact_form,
                WarningKind::CompactForm,
                "no newline after the call's name",
            ),
            (
                trimmed.len() != name.len(),
                self.cfg.header_whitespace,
                WarningKind::HeaderWhitespace,
                "whitespace around the call's name",
            ),
        ] {
            if !deviates {
                continue;
            }
            if !allowed {
                self.fail(ErrorKind::MalformedMarkup, what, out);
                return false;
            }
            out.push(Event::warning(kind, format!("{what} {}", excerpt(name))));
        }
        self.start_call(trimmed.to_string(), false, out);
        true
    }

    fn start_call(&mut self, mut name: String, implicit: bool, out: &mut dyn Sink) {
        let doubled = self.cfg.doubled_name
            && !self.types.knows_tool(&name)
            && doubled_leaf(&name).is_some_and(|a| self.types.knows_tool(a));
        let index = self.next_index;
        self.next_index += 1;
        let written = doubled.then(|| name.clone());
        if doubled {
            name = doubled_leaf(&name).unwrap_or_default().to_string();
        }
        out.push(Event::CallStart {
            index,
            id: None,
            name: name.clone(),
            server: None,
        });
        if let Some(w) = written {
            out.push(Event::warning(
                WarningKind::NameNormalised,
                format!("{w:?} is read as the declared tool {name:?}"),
            ));
        }
        if self.has_tools && !self.types.knows_tool(&name) {
            out.push(Event::warning(
                WarningKind::UnknownTool,
                format!("{name:?} is not a declared tool; its values are kept as strings"),
            ));
        }
        self.call = Some(Call {
            name,
            index,
            keys: Vec::new(),
            spoiled: false,
            implicit,
            body: false,
        });
        self.st = St::Call(String::new());
    }

    fn end_call(&mut self, out: &mut dyn Sink) {
        if let Some(c) = self.call.take()
            && !c.spoiled
        {
            if !c.body {
                out.args_delta(c.index, if c.keys.is_empty() { "{}" } else { "}" });
            }
            out.push(Event::CallEnd { index: c.index });
            if c.implicit {
                self.st = St::Text;
                self.end_implicit();
                return;
            }
        }
        self.st = St::Block;
    }

    /// Text between parameters that is not whitespace: only typed-out `\n` may be there.
    fn junk_ok(&mut self, junk: &str, out: &mut dyn Sink) -> bool {
        if junk.is_empty() {
            return true;
        }
        if junk.replace("\\n", "").chars().all(char::is_whitespace) {
            out.push(Event::warning(
                WarningKind::EscapedNewline,
                "`\\n` typed out between tags",
            ));
            return true;
        }
        let msg = format!("text {} between parameters", excerpt(junk));
        self.fail(ErrorKind::MalformedMarkup, &msg, out);
        false
    }

    /// An error inside a call: the call is dropped and the rest of it skipped.
    fn fail(&mut self, kind: ErrorKind, msg: &str, out: &mut dyn Sink) {
        out.push(Event::error(kind, msg));
        if let Some(c) = &mut self.call {
            c.spoiled = true;
        }
        self.param = None;
        self.st = St::Skip;
    }

    // ---- parameters ----

    fn key_text(&mut self, t: &str, out: &mut dyn Sink) -> usize {
        let form = self.g.param;
        let St::Key { buf, .. } = &mut self.st else {
            return 0;
        };
        if form == ParamForm::KeyValue {
            buf.push_str(t);
            if buf.len() > self.cfg.max_tag_bytes {
                self.fail(ErrorKind::LimitExceeded, "a key is too long", out);
            }
            return t.len();
        }
        if form == ParamForm::Named {
            // The key is the tag: everything up to `>`, quotes and newlines included.
            let (used, key) = plain_tag(buf, t);
            let too_long = buf.len() > self.cfg.max_tag_bytes
                || key
                    .as_ref()
                    .is_some_and(|k| k.len() > self.cfg.max_tag_bytes);
            if too_long {
                self.fail(ErrorKind::LimitExceeded, "a key is too long", out);
            } else if let Some(key) = key {
                self.begin_param(&key, None, out);
            }
            return used;
        }
        let eq = form == ParamForm::Eq;
        let (used, raw) = self.tag_text(t, eq, ("key", "a key is too long"), out);
        let Some(raw) = raw else {
            return used;
        };
        match form {
            ParamForm::Attr => {
                if let Some((key, string)) = self.attrs(&raw, self.g.string_attr, out) {
                    self.begin_param(&key, string, out);
                }
            }
            _ => self.begin_param(&raw, None, out),
        }
        used
    }

    /// Reads `"NAME"` (and, where the grammar has it, ` string="true|false"`) from a tag's
    /// attribute text; `None` after reporting what is wrong.
    fn attrs(
        &mut self,
        raw: &str,
        string_attr: bool,
        out: &mut dyn Sink,
    ) -> Option<(String, Option<bool>)> {
        let bad = |p: &mut Parser, out: &mut dyn Sink| {
            let msg = format!("tag attributes {} cannot be read", excerpt(raw));
            p.fail(ErrorKind::MalformedMarkup, &msg, out);
            None
        };
        let mut single = false;
        let Some((name, mut rest)) = quoted(raw.trim_start(), &mut single) else {
            let bare = raw.trim();
            if self.cfg.unquoted_attribute
                && !string_attr
                && !bare.is_empty()
                && !bare.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            {
                out.push(Event::warning(
                    WarningKind::UnquotedAttribute,
                    format!("unquoted attribute value {}", excerpt(bare)),
                ));
                return Some((bare.to_string(), None));
            }
            return bad(self, out);
        };
        let mut string = None;
        loop {
            let r = rest.trim_start();
            if r.is_empty() {
                break;
            }
            if r.len() == rest.len() || !string_attr || string.is_some() {
                return bad(self, out);
            }
            let Some(v) = r.strip_prefix("string=") else {
                return bad(self, out);
            };
            let Some((val, after)) = quoted(v, &mut single) else {
                return bad(self, out);
            };
            string = match val.as_str() {
                "true" => Some(true),
                "false" => Some(false),
                _ => return bad(self, out),
            };
            rest = after;
        }
        if single {
            if !self.cfg.single_quotes {
                return bad(self, out);
            }
            out.push(Event::warning(
                WarningKind::SingleQuotes,
                format!("single-quoted attributes {}", excerpt(raw)),
            ));
        }
        Some((name, string))
    }

    fn begin_param(&mut self, key: &str, string: Option<bool>, out: &mut dyn Sink) {
        let Some(call) = &mut self.call else {
            return;
        };
        if key.is_empty() {
            self.fail(
                ErrorKind::MalformedMarkup,
                "a parameter has an empty key",
                out,
            );
            return;
        }
        if call.keys.iter().any(|k| k == key) {
            out.push(Event::warning(
                WarningKind::DuplicateParameter,
                format!("parameter {key:?} given twice; the last one counts"),
            ));
        }
        let lookup = self.types.lookup(&call.name, key);
        let name = call.name.clone();
        match &lookup {
            Lookup::UnknownParam if self.has_tools => out.push(Event::warning(
                WarningKind::UnknownParameter,
                format!("{name:?} declares no parameter {key:?}; kept as a string"),
            )),
            Lookup::Unreadable(e) => {
                out.push(Event::warning(WarningKind::UnreadableSchema, e.to_string()))
            }
            _ => {}
        }
        let pt = lookup.param_type();
        let typed = matches!(lookup, Lookup::Typed(_));
        let mode = if self.g.string_attr {
            match string {
                Some(s) => {
                    let schema_string = pt.has(crate::formats::typing::Kind::String);
                    if matches!(lookup, Lookup::Typed(_)) && s != schema_string {
                        out.push(Event::warning(
                            WarningKind::SchemaTypeMismatch,
                            format!(
                                "parameter {key:?} says string=\"{s}\" but its schema says {}",
                                pt.describe()
                            ),
                        ));
                    }
                    if s { Mode::Stream } else { Mode::Json }
                }
                None => {
                    if !self.cfg.missing_string_attribute {
                        let msg = format!("parameter {key:?} has no string attribute");
                        self.fail(ErrorKind::MalformedMarkup, &msg, out);
                        return;
                    }
                    out.push(Event::warning(
                        WarningKind::MissingStringAttribute,
                        format!("parameter {key:?} has no string attribute; typed by the schema"),
                    ));
                    if pt.is_string_only() {
                        Mode::Stream
                    } else {
                        Mode::Typed(pt)
                    }
                }
            }
        } else if self.g.nested && !(typed && pt.is_string_only()) {
            // Whether it holds elements shows only as it arrives.
            Mode::Tree
        } else if !typed && self.cfg.infer_untyped_scalars {
            Mode::Tree
        } else if pt.is_string_only() {
            Mode::Stream
        } else {
            Mode::Typed(pt)
        };
        let Some(call) = &mut self.call else {
            return;
        };
        let first = call.keys.is_empty();
        call.keys.push(key.to_string());
        if mode == Mode::Stream {
            self.scratch.clear();
            self.scratch.push_str(if first { "{\"" } else { ",\"" });
            escape_json_into(&mut self.scratch, key);
            self.scratch.push_str("\":\"");
            out.args_delta(call.index, &self.scratch);
        }
        self.param = Some(Param {
            key: key.to_string(),
            mode,
            buf: String::new(),
            bytes: 0,
            lead: if self.g.pad { Lead::Start } else { Lead::Done },
            hold: "",
            tree: (mode == Mode::Tree).then(Tree::default),
            typed,
        });
        self.st = St::Value;
    }

    // ---- nested elements ----

    /// A child element's tag or a named close's, up to `>`.
    fn element_tag_text(&mut self, t: &str, out: &mut dyn Sink) -> usize {
        let (St::ChildName(buf) | St::CloseName(buf)) = &mut self.st else {
            return 0;
        };
        let (used, tag) = plain_tag(buf, t);
        let max = self.cfg.max_tag_bytes;
        if buf.len() > max || tag.as_ref().is_some_and(|k| k.len() > max) {
            self.fail(
                ErrorKind::LimitExceeded,
                "an element's tag is too long",
                out,
            );
            return used;
        }
        let Some(tag) = tag else {
            return used;
        };
        if matches!(self.st, St::ChildName(_)) {
            self.open_child(&tag, out);
        } else {
            self.close_named(&tag, out);
        }
        used
    }

    fn open_child(&mut self, tag: &str, out: &mut dyn Sink) {
        let Some(p) = &mut self.param else {
            return;
        };
        let key = p.key.clone();
        let Some(tree) = &mut p.tree else {
            return;
        };
        if tag.is_empty() {
            let msg = format!("an element with an empty tag inside {key:?}");
            return self.fail(ErrorKind::MalformedMarkup, &msg, out);
        }
        if tree.depth() >= MAX_VALUE_DEPTH {
            let msg = format!("the value of {key:?} nests deeper than {MAX_VALUE_DEPTH} elements");
            return self.fail(ErrorKind::LimitExceeded, &msg, out);
        }
        p.bytes += tag.len();
        if p.bytes > self.cfg.max_value_bytes {
            let msg = format!(
                "the value of {key:?} is longer than {} bytes",
                self.cfg.max_value_bytes
            );
            return self.fail(ErrorKind::LimitExceeded, &msg, out);
        }
        tree.open(tag);
        self.st = St::Value;
    }

    /// A named close: it must name the innermost open element (the parameter's own last).
    fn close_named(&mut self, tag: &str, out: &mut dyn Sink) {
        let Some(p) = &mut self.param else {
            return;
        };
        let open = p.tree.as_ref().and_then(Tree::innermost).unwrap_or(&p.key);
        if tag != open {
            let ns = self.g.marker(Role::Namespace);
            let msg = format!("{ns}</{tag}> where {ns}</{open}> belongs");
            return self.fail(ErrorKind::MalformedMarkup, &msg, out);
        }
        match &mut p.tree {
            Some(tree) if tree.depth() > 0 => {
                tree.close();
                self.st = St::Value;
            }
            _ => self.close_value(out),
        }
    }

    /// Value text after the padding rule, streamed or held.
    #[inline]
    fn value_text(&mut self, t: &str, out: &mut dyn Sink) {
        let Some(p) = &mut self.param else {
            return;
        };
        // Most pieces: no padding rule, or one with nothing to decide (the value has begun,
        // nothing is held, and the piece does not end a line).
        if !self.g.pad || (p.lead == Lead::Done && p.hold.is_empty() && !t.ends_with(['\n', '\r']))
        {
            return self.emit(t, out);
        }
        let mut t = t;
        match p.lead {
            Lead::Start => {
                p.lead = Lead::Done;
                if let Some(r) = t.strip_prefix("\r\n").or_else(|| t.strip_prefix('\n')) {
                    t = r;
                } else if t == "\r" {
                    p.lead = Lead::SawCr;
                    return;
                }
            }
            Lead::SawCr => {
                p.lead = Lead::Done;
                match t.strip_prefix('\n') {
                    Some(r) => t = r,
                    None => self.emit("\r", out),
                }
            }
            Lead::Done => {}
        }
        if t.is_empty() {
            return;
        }
        let Some(p) = &mut self.param else {
            return;
        };
        if p.hold == "\r"
            && let Some(r) = t.strip_prefix('\n')
        {
            p.hold = "\r\n";
            t = r;
            if t.is_empty() {
                return;
            }
        }
        let hold = std::mem::take(&mut p.hold);
        if !hold.is_empty() {
            self.emit(hold, out);
        }
        let (body, tail) = if let Some(b) = t.strip_suffix("\r\n") {
            (b, "\r\n")
        } else if let Some(b) = t.strip_suffix('\n') {
            (b, "\n")
        } else if let Some(b) = t.strip_suffix('\r') {
            (b, "\r")
        } else {
            (t, "")
        };
        if !body.is_empty() {
            self.emit(body, out);
        }
        if let Some(p) = &mut self.param {
            p.hold = tail;
        }
    }

    #[inline]
    fn emit(&mut self, s: &str, out: &mut dyn Sink) {
        let (Some(p), Some(c)) = (&mut self.param, &self.call) else {
            return;
        };
        if s.is_empty() {
            return;
        }
        p.bytes += s.len();
        if p.bytes > self.cfg.max_value_bytes {
            let msg = format!(
                "the value of {:?} is longer than {} bytes",
                p.key, self.cfg.max_value_bytes
            );
            return self.fail(ErrorKind::LimitExceeded, &msg, out);
        }
        if p.mode == Mode::Stream {
            if c.spoiled {
                return;
            }
            // Most pieces need no escape: they go out as they came in.
            match first_escape(s) {
                None => out.args_delta(c.index, s),
                Some(i) => {
                    self.scratch.clear();
                    self.scratch.push_str(&s[..i]);
                    escape_json_into(&mut self.scratch, &s[i..]);
                    out.args_delta(c.index, &self.scratch);
                    self.release_scratch();
                }
            }
        } else if let Some(tree) = &mut p.tree {
            tree.text(s);
        } else {
            p.buf.push_str(s);
        }
    }

    /// The close was content after all: it and the whitespace held after it go to the value.
    fn reopen_value(&mut self, out: &mut dyn Sink) {
        let St::AfterClose(held) = std::mem::replace(&mut self.st, St::Value) else {
            return;
        };
        if !self.cfg.close_tag_in_value {
            let msg = format!("{} inside a value", excerpt(held.trim_end()));
            return self.fail(ErrorKind::MalformedMarkup, &msg, out);
        }
        out.push(Event::warning(
            WarningKind::CloseTagInValue,
            format!(
                "{} is followed by value text, so it is content",
                excerpt(held.trim_end())
            ),
        ));
        self.value_text(&held, out);
    }

    fn close_value(&mut self, out: &mut dyn Sink) {
        self.st = St::Call(String::new());
        let Some(mut p) = self.param.take() else {
            return;
        };
        match (p.lead, p.hold) {
            (Lead::SawCr, _) | (_, "\r") => {
                p.lead = Lead::Done;
                p.hold = "";
                self.param = Some(p);
                self.emit("\r", out);
                let Some(q) = self.param.take() else {
                    return;
                };
                p = q;
            }
            _ => {}
        }
        let Some(c) = &self.call else {
            return;
        };
        if c.spoiled {
            return;
        }
        let index = c.index;
        let first = c.keys.len() == 1;
        let value = match p.mode {
            Mode::Stream => {
                out.args_delta(index, "\"");
                return;
            }
            Mode::Typed(pt) => {
                let (v, note) = type_value(&p.buf, pt, self.cfg.typing);
                if let Some((kind, msg)) = note {
                    out.push(Event::warning(
                        kind,
                        format!("parameter {:?}: {msg}", p.key),
                    ));
                }
                v
            }
            Mode::Tree => {
                let root = p.tree.take().unwrap_or_default().into_root();
                let schema = if p.typed {
                    self.schemas.param(&c.name, &p.key)
                } else {
                    None
                };
                let opts = ReadOptions {
                    typing: self.cfg.typing,
                    mixed_content: self.cfg.mixed_content,
                    infer_untyped_scalars: self.cfg.infer_untyped_scalars,
                };
                let mut notes = Vec::new();
                let read = elements::read(&root, &p.key, schema, opts, &mut notes);
                drop(root);
                for (kind, msg) in notes {
                    out.push(Event::warning(kind, msg));
                }
                match read {
                    Ok(v) => v,
                    Err((kind, msg)) => return self.fail(kind, &msg, out),
                }
            }
            Mode::Json => match read_json(&p.buf) {
                Some(v) => v,
                None => {
                    out.push(Event::warning(
                        WarningKind::TypeMismatch,
                        format!(
                            "parameter {:?}: {} is not JSON; kept as a string",
                            p.key,
                            excerpt(&p.buf)
                        ),
                    ));
                    Value::String(p.buf.clone())
                }
            },
        };
        self.scratch.clear();
        self.scratch.push_str(if first { "{\"" } else { ",\"" });
        escape_json_into(&mut self.scratch, &p.key);
        self.scratch.push_str("\":");
        // The parameter's text and value are freed as soon as they are written, and the value
        // is written at its size: a 10 MB parameter was held four times at once.
        drop(p);
        let text = crate::event::json_exact(&value);
        drop(value);
        self.scratch
            .push_str(std::str::from_utf8(&text).unwrap_or("null"));
        drop(text);
        out.args_delta(index, &self.scratch);
        self.release_scratch();
    }

    /// Frees the scratch buffer once it held a large piece: it lives as long as the parser,
    /// and would keep the piece's size resident beside the sink's copy of it.
    fn release_scratch(&mut self) {
        if self.scratch.capacity() > 64 << 10 {
            self.scratch = String::new();
        }
    }

    fn end_turn(&mut self, out: &mut dyn Sink) {
        let st = std::mem::replace(&mut self.st, St::Text);
        if self.text_after && matches!(st, St::Text | St::ImplicitName(_)) {
            let msg = "text after the last call";
            if self.cfg.text_after_calls {
                out.push(Event::warning(WarningKind::TextAfterCalls, msg));
            } else {
                out.push(Event::error(ErrorKind::MalformedMarkup, msg));
            }
        }
        match st {
            St::Text => {
                if !self.markup_seen {
                    let ws = std::mem::take(&mut self.seg.ws);
                    out.text(&ws);
                }
            }
            St::ImplicitName(buf) => {
                self.implicit_not_a_call(&buf, out);
                if !self.markup_seen {
                    let ws = std::mem::take(&mut self.seg.ws);
                    out.text(&ws);
                }
            }
            St::Block => {
                let msg = format!(
                    "the stream ended inside a block ({} missing)",
                    self.g.marker(Role::BlockClose)
                );
                if self.cfg.missing_block_end {
                    out.push(Event::warning(self.g.block_end_warning, msg));
                } else {
                    out.push(Event::error(ErrorKind::Unterminated, msg));
                }
            }
            St::Skip => {}
            St::AfterClose(_) => {
                self.st = St::AfterClose(String::new());
                self.close_value(out);
                out.push(Event::error(
                    ErrorKind::Unterminated,
                    "the stream ended inside a call",
                ));
            }
            _ => out.push(Event::error(
                ErrorKind::Unterminated,
                "the stream ended inside a call",
            )),
        }
        self.st = St::Text;
        self.seg = Segment::default();
        self.in_block = false;
        self.markup_seen = false;
        self.after_block = false;
        self.text_after = false;
        self.next_index = 0;
        self.call = None;
        self.param = None;
        self.spaced = None;
        self.respaced = None;
        self.variant_seen = false;
    }
}

/// Reads `t` into `buf` up to the first `>`: the bytes used, and the tag's text once the `>`
/// came.
fn plain_tag(buf: &mut String, t: &str) -> (usize, Option<String>) {
    match t.find('>') {
        Some(k) => {
            buf.push_str(&t[..k]);
            (k + 1, Some(std::mem::take(buf)))
        }
        None => {
            buf.push_str(t);
            (t.len(), None)
        }
    }
}

/// The end of a tag's attribute text: the first `>` outside quotes, or (where `newline_ends`)
/// a newline first; `(offset, ended_by_newline)`. `quote` carries the quote state across
/// pieces.
fn tag_end(t: &str, quote: &mut Option<char>, newline_ends: bool) -> Option<(usize, bool)> {
    if newline_ends {
        return t.find(['>', '\n']).map(|k| (k, t.as_bytes()[k] == b'\n'));
    }
    for (i, c) in t.char_indices() {
        match (*quote, c) {
            (Some(q), c) if c == q => *quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => *quote = Some(c),
            (None, '>') => return Some((i, false)),
            _ => {}
        }
    }
    None
}

/// A value in `"…"` (or `'…'`, noted in `single`) at the start of `s`, and what follows it.
fn quoted<'a>(s: &'a str, single: &mut bool) -> Option<(String, &'a str)> {
    let q = s.chars().next()?;
    if q != '"' && q != '\'' {
        return None;
    }
    *single |= q == '\'';
    let end = s[1..].find(q)? + 1;
    Some((s[1..end].to_string(), &s[end + 1..]))
}

/// The nested options of every tagged format: the schema typing's (`typing.NAME`) and the
/// reasoning layer's (`reasoning.NAME`).
pub static NESTED: [&dyn Nested<Config>; 2] = [
    &Nest {
        prefix: "typing",
        options: TypingOptions::OPTIONS,
        field: |c: &Config| &c.typing,
        field_mut: |c: &mut Config| &mut c.typing,
    },
    &Nest {
        prefix: "reasoning",
        options: reasoning::Config::OPTIONS,
        field: |c: &Config| &c.reasoning,
        field_mut: |c: &mut Config| &mut c.reasoning,
    },
];

/// One format of the family: what sets it apart from the others. Everything else a format
/// registers (its parser, delimiters, renderer, options and [`Format`] entry) is the same
/// function of these, written once below.
pub trait Member: 'static {
    /// The format id.
    const ID: &'static str;
    /// One line for `conform formats`.
    const SUMMARY: &'static str;
    /// Its grammar (the reasoning wrapper included).
    const GRAMMAR: &'static Grammar;
    /// The vocabulary tokens its output may hold.
    const SPECIAL_TOKENS: &'static [SpecialToken];
    /// The tokens that end the turn, consumed by a server before its parser ([`Format::stop_tokens`]).
    const STOP_TOKENS: &'static [&'static str] = &[];
    /// Its model family's vocabulary (an id of `specs/tokenizers.md`'s table); `None`: none
    /// can be had, `o200k_base` cuts its replays.
    const VOCABULARY: Option<&'static str> = None;
    /// Its default options.
    fn config() -> Config {
        Config::default()
    }
    /// Writes calls as the model's chat template does.
    fn write_calls(out: &mut String, calls: &[ToolCall]);
    /// A call of `typing_probe` whose parameter `v` is written as exactly `raw`.
    fn typing_probe(raw: &str) -> Vec<u8>;
    /// Whether [`Member::typing_probe`] is written as the model writes calls (false for the
    /// DSML members, whose probe omits the `string` attribute the model always writes).
    const WIRE_TYPING_PROBE: bool = true;
    /// Its options, for `--option ID.NAME=…` and `conform.toml`.
    const OPTIONS: Table<Config> = Table {
        default: Self::config,
        options: Config::OPTIONS,
        nested: &NESTED,
        reasoning: None,
        build: build::<Self>,
    };
}

/// A parser of `M` with its default options.
fn new_parser<M: Member>(tools: &Tools) -> Box<dyn StreamParser> {
    boxed(M::GRAMMAR, M::config(), tools)
}

/// A parser of `M` with options `cfg`.
fn build<M: Member + ?Sized>(cfg: Config, tools: &Tools) -> Box<dyn StreamParser> {
    boxed(M::GRAMMAR, cfg, tools)
}

/// The delimiters of `M`.
fn markers<M: Member>(_tools: &Tools) -> Vec<String> {
    M::GRAMMAR.markers.iter().map(|m| m.0.to_string()).collect()
}

/// Renders text and calls as `M`'s chat template does, refusing what would not parse back.
pub fn render<M: Member>(text: &str, calls: &[ToolCall], tools: &Tools) -> Result<Vec<u8>, String> {
    render_checked(M::GRAMMAR, M::config(), text, calls, tools, &M::write_calls)
}

/// The registry entry of `M`.
pub const fn format<M: Member>() -> Format {
    Format {
        render: Some(render::<M>),
        typing: Some(Typing {
            table: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/typing.json")),
            transcript: M::typing_probe,
            key: "v",
            schema_tool: Some("typing_probe"),
            wire_probe: M::WIRE_TYPING_PROBE,
        }),
        special_tokens: M::SPECIAL_TOKENS,
        stop_tokens: M::STOP_TOKENS,
        vocabulary: M::VOCABULARY,
        reasoning: M::GRAMMAR.reasoning,
        ..Format::new(
            M::ID,
            M::SUMMARY,
            new_parser::<M>,
            markers::<M>,
            &M::OPTIONS,
        )
    }
}

/// The parser of `g` behind the reasoning layer when `g` declares a wrapper (options
/// `cfg.reasoning`): what a format registers.
pub fn boxed(g: &'static Grammar, cfg: Config, tools: &Tools) -> Box<dyn StreamParser> {
    let p = Parser::new(g, cfg, tools);
    match g.reasoning {
        Some(syntax) => Box::new(
            Reasoned::new(p, syntax, cfg.reasoning)
                .calls_end_reasoning(g.native.calls_end_reasoning),
        ),
        None => Box::new(p),
    }
}

impl DecodedText for Parser {
    fn decoder(&mut self) -> &mut Utf8Decoder {
        &mut self.utf8
    }

    fn feed_str(&mut self, s: &str, out: &mut dyn Sink) {
        Parser::feed_str(self, s, out);
    }

    fn spoil(&mut self) {
        if let Some(c) = &mut self.call {
            c.spoiled = true;
        }
    }
}

impl StreamParser for Parser {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        match self.utf8.ascii(chunk) {
            Some(s) => self.feed_str(s, out),
            None => decoded::feed_utf8(self, chunk, out),
        }
    }

    fn finish(&mut self, out: &mut dyn Sink) {
        decoded::finish_utf8(self, out);
        loop {
            let in_value = matches!(self.st, St::Value);
            if !self.other_scanner(in_value).held().is_empty() {
                let held = self.other_scanner(in_value).take_held();
                self.other_scanner(in_value).reset();
                self.feed_str(&held, out);
                continue;
            }
            if self.spaced.is_some() {
                let mut none = "";
                if !self.spacing(&mut none, in_value, out) {
                    // Cut off after the token and whitespace: text in prose, else the rest of
                    // a cut tag (the end of the turn says what was left open).
                    let ws = self.spaced.take().unwrap_or_default();
                    if matches!(self.st, St::Text | St::ImplicitName(_) | St::Block) {
                        self.bare_namespace(&ws, out);
                    }
                }
                continue;
            }
            let t = if in_value {
                self.vscan.finish()
            } else {
                self.scan.finish()
            };
            let Some(t) = t else {
                break;
            };
            // What the scanner still holds is a delimiter's beginning cut off by the end:
            // text in prose or a value, but inside markup only the rest of a cut tag.
            let in_markup = !matches!(
                self.st,
                St::Text | St::ImplicitName(_) | St::Value | St::AfterClose(_)
            );
            if !(in_markup && matches!(t, Token::Text(_))) {
                self.token(t, in_value, out);
            }
        }
        self.scan.reset();
        self.vscan.reset();
        self.end_turn(out);
    }

    fn at_text(&self) -> bool {
        // Outside blocks, and between a block's calls, where text is kept as text.
        matches!(self.st, St::Text | St::Block) && self.spaced.is_none() && self.respaced.is_none()
    }
}

/// Renders one value as the template writes it: strings verbatim, everything else as JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Renders one value as Jinja's `| string` does (Python repr: `True`, `None`, `{'a': 1}`),
/// for templates that write non-string values that way; strings verbatim.
pub fn python_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => {
            let mut out = String::new();
            write_literal(&mut out, other, Quotes::Repr);
            out
        }
    }
}

/// Renders `text` and then the calls as `write_calls` writes them, refusing what the format
/// cannot carry and any rendering that does not parse back (with `cfg`) to the same text and
/// calls.
pub fn render_checked(
    g: &'static Grammar,
    cfg: Config,
    text: &str,
    calls: &[ToolCall],
    tools: &Tools,
    write_calls: &dyn Fn(&mut String, &[ToolCall]),
) -> Result<Vec<u8>, String> {
    if let Some((m, _)) = g.markers.iter().find(|(m, _)| text.contains(m)) {
        return Err(format!("the text contains the delimiter {m}"));
    }
    if let Some(t) = g.reasoning.and_then(|r| r.tag_in(text)) {
        return Err(format!("the text contains the reasoning tag {t}"));
    }
    for c in calls {
        if c.id.is_some() || c.server.is_some() {
            return Err("the format carries no call ids and no servers".into());
        }
        if c.name.is_empty() || bad_name(&c.name) || c.name.contains("\\n") {
            return Err(format!("the name {:?} cannot be written", c.name));
        }
        let Some(args) = c.arguments.as_object() else {
            return Err("arguments must be a JSON object".into());
        };
        if args
            .keys()
            .any(|k| k.is_empty() || k.contains(['<', '>', '"', '\n']))
        {
            return Err("a key cannot be written in a tag".into());
        }
    }
    let mut out = String::from(text);
    if !calls.is_empty() {
        write_calls(&mut out, calls);
    }
    let r = crate::formats::read_back(|| boxed(g, cfg, tools), out.as_bytes(), calls);
    if !r.result.is_success() || r.result.text != text || !r.same_calls {
        return Err("the rendering does not parse back to the same text and calls".into());
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests;
