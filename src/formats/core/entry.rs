//! A format declared by its own data (id, summary, delimiters, configuration, parser,
//! renderer): its registry [`Format`], default parser, delimiter list and option [`Table`]
//! follow from these, written once here. The tagged family declares its members the same way
//! over a grammar (`tagged::Member`).

use crate::formats::config::Settable;
use crate::formats::options::{Nested, Table};
use crate::formats::reasoning::Syntax;
use crate::formats::{Format, RenderFn, SpecialToken, StreamParser};
use crate::tools::Tools;

/// What sets a format apart, for a format whose delimiters are a fixed list and whose parser
/// is made from its configuration alone.
pub trait Entry: 'static {
    /// The format id.
    const ID: &'static str;
    /// One line for `conform formats`.
    const SUMMARY: &'static str;
    /// The delimiters, the same whatever the tools.
    const MARKERS: &'static [&'static str];
    /// The vocabulary tokens its output may hold.
    const SPECIAL_TOKENS: &'static [SpecialToken] = &[];
    /// The tokens that end the turn, consumed by a server before its parser ([`Format::stop_tokens`]).
    const STOP_TOKENS: &'static [&'static str] = &[];
    /// Its model family's vocabulary ([`Format::vocabulary`]: an id of the harness's
    /// vocabulary table, `specs/tokenizers.md`); `None`: no vocabulary of its models can be
    /// had, `o200k_base` cuts its replays.
    const VOCABULARY: Option<&'static str> = None;
    /// Renders calls back into the format, when it has a renderer.
    const RENDER: Option<RenderFn> = None;
    /// The configuration: its `bool` options are the format's, its default the format's.
    type Config: Settable + Default;
    /// Makes a parser with options `cfg` (without the reasoning layer of
    /// [`LAYER`](Entry::LAYER)).
    const PARSER: fn(Self::Config) -> Box<dyn StreamParser>;
    /// The reasoning wrapper its models write, when the reasoning layer is put in front of the
    /// parser outside `Config` (options `reasoning.NAME`).
    const LAYER: Option<&'static Syntax> = None;
    /// Options of configurations inside `Config`, listed as `prefix.NAME`.
    const NESTED: &'static [&'static dyn Nested<Self::Config>] = &[];
    /// The reasoning wrapper its models write ([`Format::reasoning`]): `LAYER`'s, unless the
    /// parser splits reasoning inside `Config`.
    const REASONING: Option<&'static Syntax> = Self::LAYER;
    /// The format's options, for `--option ID.NAME=…` and `conform.toml`.
    const OPTIONS: Table<Self::Config> = Table {
        default: Self::Config::default,
        options: <Self::Config as Settable>::OPTIONS,
        nested: Self::NESTED,
        reasoning: Self::LAYER,
        build: build::<Self>,
    };
}

/// A parser of `E` with options `cfg`.
fn build<E: Entry + ?Sized>(cfg: E::Config, _tools: &Tools) -> Box<dyn StreamParser> {
    (E::PARSER)(cfg)
}

/// A parser of `E` with its default options.
fn new_parser<E: Entry>(tools: &Tools) -> Box<dyn StreamParser> {
    E::OPTIONS.default_parser(tools)
}

/// The delimiters of `E`.
fn markers<E: Entry>(_tools: &Tools) -> Vec<String> {
    E::MARKERS.iter().map(|m| m.to_string()).collect()
}

/// The registry entry of `E`; what it does not declare (probes) is set with struct update
/// syntax.
pub const fn format<E: Entry>() -> Format {
    Format {
        render: E::RENDER,
        special_tokens: E::SPECIAL_TOKENS,
        stop_tokens: E::STOP_TOKENS,
        vocabulary: E::VOCABULARY,
        reasoning: E::REASONING,
        ..Format::new(
            E::ID,
            E::SUMMARY,
            new_parser::<E>,
            markers::<E>,
            &E::OPTIONS,
        )
    }
}
