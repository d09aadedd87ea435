//! Leniency as typed configuration: every `bool` option of a format's `Config` as one row of a
//! table (name, default, reason, setter), so the command line and a corpus directory's
//! `conform.toml` list and set options of any format without code per format.
//!
//! A format's `Config` declares its options with [`config!`]: the doc comment of each option is
//! its reason, written once for rustdoc and for `conform formats --options`. The format then
//! exposes a [`Table`] (its default configuration, its options, those of nested
//! configurations such as the reasoning layer, and how a parser is built) as
//! [`Format::options`](super::Format::options).

use super::StreamParser;
use super::reasoning::{self, Reasoned};
use crate::tools::Tools;
use std::collections::BTreeMap;

/// One `bool` option of a configuration type `C`: a leniency (a recovered deviation, reported
/// with a warning of the same name) or a switch such as `reasoning.enabled`.
pub struct Opt<C> {
    /// The option's name, as in `--option FORMAT.NAME=…` (the field's name).
    pub name: &'static str,
    /// Why the option exists and what it does: the field's doc comment.
    pub reason: &'static str,
    /// Reads the option from a configuration.
    pub get: fn(&C) -> bool,
    /// Sets the option in a configuration.
    pub set: fn(&mut C, bool),
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

/// The options of a nested configuration (the reasoning layer's, the schema typing's), under
/// a prefix of the outer configuration `C`.
pub trait Nested<C>: Sync {
    /// Appends the nested options, named `prefix.name`, with their values in `c`.
    fn list(&self, c: &C, out: &mut Vec<OptionInfo>);
    /// Sets the option `name` (with its prefix) in `c`; false when it is not one of these.
    fn set(&self, c: &mut C, name: &str, on: bool) -> bool;
}

/// A configuration `R` reached through field `prefix` of `C`.
pub struct Nest<C: 'static, R: 'static> {
    /// The field's name: options are `prefix.name`.
    pub prefix: &'static str,
    /// The options of `R`.
    pub options: &'static [Opt<R>],
    /// The field.
    pub field: fn(&C) -> &R,
    /// The field, to set it.
    pub field_mut: fn(&mut C) -> &mut R,
}

impl<C: 'static, R: 'static> Nested<C> for Nest<C, R> {
    fn list(&self, c: &C, out: &mut Vec<OptionInfo>) {
        let r = (self.field)(c);
        out.extend(self.options.iter().map(|o| OptionInfo {
            name: format!("{}.{}", self.prefix, o.name),
            default: (o.get)(r),
            reason: tidy(o.reason),
        }));
    }

    fn set(&self, c: &mut C, name: &str, on: bool) -> bool {
        let Some(rest) = name
            .strip_prefix(self.prefix)
            .and_then(|r| r.strip_prefix('.'))
        else {
            return false;
        };
        match self.options.iter().find(|o| o.name == rest) {
            Some(o) => {
                (o.set)((self.field_mut)(c), on);
                true
            }
            None => false,
        }
    }
}

/// A format's options: its default configuration, the options of `C` and of its nested
/// configurations, and how a parser is made from a configuration.
pub struct Table<C: 'static> {
    /// The format's default configuration (formats sharing a `Config` differ here).
    pub default: fn() -> C,
    /// The options of `C` itself ([`config!`] makes `C::OPTIONS`).
    pub options: &'static [Opt<C>],
    /// Options of configurations inside `C`.
    pub nested: &'static [&'static dyn Nested<C>],
    /// For a format whose parser is wrapped by the reasoning layer outside its `Config`
    /// ([`reasoning::wrap`]): the syntax, whose options are then `reasoning.NAME`.
    pub reasoning: Option<&'static reasoning::Syntax>,
    /// Makes the format's parser (without the reasoning layer of `reasoning`).
    pub build: fn(C, &Tools) -> Box<dyn StreamParser>,
}

/// The reasoning layer's options as a nested table of a format that keeps them outside its
/// `Config`.
static LAYER: Nest<reasoning::Config, reasoning::Config> = Nest {
    prefix: "reasoning",
    options: reasoning::Config::OPTIONS,
    field: |c| c,
    field_mut: |c| c,
};

impl<C: 'static> FormatOptions for Table<C> {
    fn list(&self) -> Vec<OptionInfo> {
        let c = (self.default)();
        let mut out: Vec<OptionInfo> = self
            .options
            .iter()
            .map(|o| OptionInfo {
                name: o.name.to_string(),
                default: (o.get)(&c),
                reason: tidy(o.reason),
            })
            .collect();
        for n in self.nested {
            n.list(&c, &mut out);
        }
        if let Some(syntax) = self.reasoning {
            LAYER.list(&syntax.config(), &mut out);
        }
        out
    }

    fn parser(
        &self,
        tools: &Tools,
        values: &OptionValues,
    ) -> Result<Box<dyn StreamParser>, String> {
        let mut c = (self.default)();
        let mut layer = self.reasoning.map(|s| s.config());
        for (name, &on) in values {
            let known = if let Some(o) = self.options.iter().find(|o| o.name == *name) {
                (o.set)(&mut c, on);
                true
            } else {
                self.nested.iter().any(|n| n.set(&mut c, name, on))
                    || layer.as_mut().is_some_and(|l| LAYER.set(l, name, on))
            };
            if !known {
                return Err(unknown(name, &self.list()));
            }
        }
        let p = (self.build)(c, tools);
        Ok(match (self.reasoning, layer) {
            (Some(syntax), Some(cfg)) => Box::new(Reasoned::new(p, syntax, cfg)),
            _ => p,
        })
    }
}

/// The message for an option a format does not have.
fn unknown(name: &str, known: &[OptionInfo]) -> String {
    let names: Vec<&str> = known.iter().map(|o| o.name.as_str()).collect();
    if names.is_empty() {
        format!("unknown option {name:?}: the format has no options")
    } else {
        format!(
            "unknown option {name:?}; known options: {}",
            names.join(", ")
        )
    }
}

/// The options of a parser that has none (test parsers, formats made outside the registry):
/// it is built by the format's `new_parser` only.
pub struct NoOptions;

impl FormatOptions for NoOptions {
    fn list(&self) -> Vec<OptionInfo> {
        Vec::new()
    }

    fn parser(&self, _: &Tools, values: &OptionValues) -> Result<Box<dyn StreamParser>, String> {
        let name = values.keys().next().map_or("", String::as_str);
        Err(unknown(name, &[]))
    }
}

/// A doc comment's lines as one paragraph.
fn tidy(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Parses `FORMAT.NAME=true|false` (the `--option` syntax) into the format id, the option's
/// name and its value; the format and the name are checked by [`check`].
pub fn parse_assignment(s: &str) -> Result<(String, String, bool), String> {
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected FORMAT.NAME=true|false"))?;
    let (format, name) = key
        .trim()
        .split_once('.')
        .ok_or_else(|| format!("{s:?}: expected FORMAT.NAME=true|false"))?;
    let on = match value.trim() {
        "true" => true,
        "false" => false,
        v => return Err(format!("{s:?}: the value {v:?} is not true or false")),
    };
    Ok((format.to_string(), name.to_string(), on))
}

/// Reads `--option` arguments (`FORMAT.NAME=true|false`, repeatable; a later one wins),
/// checking every format and option.
pub fn from_assignments<S: AsRef<str>>(args: &[S]) -> Result<OptionsByFormat, String> {
    let mut out = OptionsByFormat::new();
    for a in args {
        let (format, name, on) = parse_assignment(a.as_ref())?;
        check(&format, &name)?;
        out.entry(format).or_default().insert(name, on);
    }
    Ok(out)
}

/// Checks that `format` is a registered format with an option `name`; the error lists the
/// known formats or the format's known options.
pub fn check(format: &str, name: &str) -> Result<(), String> {
    let f = super::by_id(format).ok_or_else(|| {
        let ids: Vec<&str> = super::REGISTRY.iter().map(|f| f.id).collect();
        format!(
            "unknown format {format:?} in option {format}.{name}; known formats: {}",
            ids.join(", ")
        )
    })?;
    let list = f.options.list();
    if list.iter().any(|o| o.name == name) {
        Ok(())
    } else {
        Err(format!("{format}: {}", unknown(name, &list)))
    }
}

/// `values` without the entries equal to the format's defaults: the options in force that a
/// report records.
pub fn differing(format: &str, values: &OptionValues) -> OptionValues {
    let Some(f) = super::by_id(format) else {
        return values.clone();
    };
    let list = f.options.list();
    values
        .iter()
        .filter(|(n, v)| list.iter().any(|o| o.name == **n && o.default != **v))
        .map(|(n, v)| (n.clone(), *v))
        .collect()
}

/// Declares a format's `Config` with its `bool` options in a `options { … }` block (each with
/// its doc comment, the option's reason) before the other fields, and makes `Config::OPTIONS`,
/// the table of those options.
macro_rules! config {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            options {
                $( $(#[doc = $doc:literal])+ $opt:ident, )*
            }
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[doc = $doc])+ pub $opt: bool, )*
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// Every `bool` option of this configuration, with its doc comment as its reason.
            pub const OPTIONS: &'static [$crate::formats::options::Opt<$name>] = &[
                $( $crate::formats::options::Opt {
                    name: stringify!($opt),
                    reason: concat!($($doc, "\n"),+),
                    get: |c| c.$opt,
                    set: |c, on| c.$opt = on,
                }, )*
            ];
        }
    };
}
pub(crate) use config;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::WarningKind;

    #[test]
    fn assignments_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_assignment("kimi_k2.text_in_section=false"),
            Ok(("kimi_k2".into(), "text_in_section".into(), false))
        );
        assert_eq!(
            parse_assignment("tagged.reasoning.enabled = true"),
            Ok(("tagged".into(), "reasoning.enabled".into(), true))
        );
        assert!(
            parse_assignment("kimi_k2.x=yes")
                .unwrap_err()
                .contains("not true or false")
        );
        assert!(parse_assignment("kimi_k2=true").is_err());
        assert!(parse_assignment("kimi_k2.x").is_err());
    }

    #[test]
    fn unknown_formats_and_options_are_refused_with_the_known_ones() {
        assert_eq!(check("kimi_k2", "text_in_section"), Ok(()));
        assert_eq!(check("kimi_k2", "reasoning.starts_inside"), Ok(()));
        assert_eq!(check("qwen3_coder", "typing.null_aliases"), Ok(()));
        let e = check("kimi", "x").unwrap_err();
        assert!(e.contains("known formats: kimi_k2, openai_sse"), "{e}");
        let e = check("kimi_k2", "nope").unwrap_err();
        assert!(e.contains("known options: text_in_section, "), "{e}");
        let e = check("forge_json", "nope").unwrap_err();
        assert!(e.contains("has no options"), "{e}");
    }

    #[test]
    fn every_format_lists_unique_documented_options_whose_setters_round_trip() {
        for f in super::super::REGISTRY {
            let list = f.options.list();
            let mut names: Vec<&str> = list.iter().map(|o| o.name.as_str()).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), list.len(), "{}: duplicate option names", f.id);
            for o in &list {
                assert!(o.reason.len() > 20, "{}.{} has no reason", f.id, o.name);
                assert!(!o.reason.contains('\n'), "{}.{}", f.id, o.name);
                // Setting an option to its default keeps the default parser; to the other
                // value, it builds (the e2e tests show it changes verdicts).
                for v in [o.default, !o.default] {
                    let values = OptionValues::from([(o.name.clone(), v)]);
                    assert!(f.options.parser(&Tools::default(), &values).is_ok());
                }
            }
            let bad = OptionValues::from([("no_such_option".to_string(), true)]);
            assert!(
                f.options.parser(&Tools::default(), &bad).is_err(),
                "{}",
                f.id
            );
        }
    }

    #[test]
    fn the_table_with_every_default_spelled_out_parses_like_new_parser() {
        use crate::formats::run_chunks;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
        for f in super::super::REGISTRY {
            let dir = root.join(f.id);
            let tools = std::fs::read_to_string(dir.join("tools.json"))
                .ok()
                .and_then(|t| Tools::from_json(&t).ok())
                .unwrap_or_default();
            let all: OptionValues = f
                .options
                .list()
                .into_iter()
                .map(|o| (o.name, o.default))
                .collect();
            let mut seen = 0;
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_none_or(|x| x != "txt") {
                    continue;
                }
                let bytes = std::fs::read(&p).unwrap();
                let chunks: Vec<&[u8]> = bytes.chunks(7).collect();
                let plain = run_chunks((f.new_parser)(&tools).as_mut(), chunks.clone());
                let mut p2 = f.parser(&tools, &all).unwrap();
                let tabled = run_chunks(p2.as_mut(), chunks);
                assert_eq!(plain, tabled, "{}", p.display());
                seen += 1;
            }
            assert!(seen > 0, "{}: no corpus case", f.id);
        }
    }

    /// Warning kinds that are notes on a value, not deviations an option allows.
    const NOTES: &[WarningKind] = &[
        WarningKind::UnknownTool,
        WarningKind::UnknownParameter,
        WarningKind::DuplicateParameter,
        WarningKind::UnreadableSchema,
        WarningKind::SchemaTypeMismatch,
        WarningKind::TypeMismatch,
        WarningKind::NullNotAllowed,
    ];

    /// The option that allows a warning of `kind` in `format`, when its name is not the kind's.
    fn renamed(format: &str, kind: &str) -> Option<&'static str> {
        let tagged = [
            "qwen3_coder",
            "seed_oss",
            "glm45",
            "glm47",
            "minimax_m2",
            "deepseek_v32",
        ];
        match kind {
            "null_alias" => Some("typing.null_aliases"),
            "python_literal" => Some("typing.python_literals"),
            // The tagged family's block end is named after what the grammar calls the block.
            "missing_call_end" | "missing_section_end" if tagged.contains(&format) => {
                Some("missing_block_end")
            }
            _ => None,
        }
    }

    #[test]
    fn every_warning_of_the_corpus_names_an_option_of_its_format_or_is_a_note() {
        use crate::event::Event;
        use crate::formats::run_chunks;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
        for f in super::super::REGISTRY {
            let names: Vec<String> = f.options.list().into_iter().map(|o| o.name).collect();
            // openai_sse forwards the warnings of the kimi_k2 parser it runs on `content`.
            let inner: Vec<String> = if f.id == "openai_sse" {
                super::super::kimi_k2::FORMAT
                    .options
                    .list()
                    .into_iter()
                    .map(|o| o.name)
                    .collect()
            } else {
                Vec::new()
            };
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
                for ev in run_chunks((f.new_parser)(&tools).as_mut(), [bytes.as_slice()]) {
                    let Event::Warning { kind, .. } = ev else {
                        continue;
                    };
                    let option = renamed(f.id, &kind).map_or(kind.clone(), str::to_string);
                    let known = names.iter().chain(&inner).any(|n| {
                        *n == option || n.strip_prefix("reasoning.") == Some(option.as_str())
                    }) || NOTES.iter().any(|k| k.as_str() == kind);
                    assert!(known, "{}: warning {kind} names no option", p.display());
                }
            }
        }
    }

    #[test]
    fn an_option_set_through_the_table_reaches_the_parser() {
        use crate::event::ParseResult;
        use crate::formats::{by_id, run_chunks};
        let cut = b"<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}";
        let parse = |name: &str, on: bool| {
            let f = by_id("kimi_k2").unwrap();
            let values = OptionValues::from([(name.to_string(), on)]);
            let mut p = f.parser(&Tools::default(), &values).unwrap();
            ParseResult::fold(&run_chunks(p.as_mut(), [&cut[..]]))
        };
        assert_eq!(parse("missing_call_end", true).calls.len(), 1);
        assert_eq!(parse("missing_call_end", false).calls.len(), 0);
        // A nested option of the reasoning layer, outside kimi_k2's own Config.
        let think = |on: bool| {
            let f = by_id("kimi_k2").unwrap();
            let values = OptionValues::from([("reasoning.starts_inside".to_string(), on)]);
            let mut p = f.parser(&Tools::default(), &values).unwrap();
            ParseResult::fold(&run_chunks(p.as_mut(), [&b"hmm</think>Hi"[..]]))
        };
        assert_eq!(think(true).reasoning.as_deref(), Some("hmm"));
        assert_eq!(think(true).text, "Hi");
        assert_eq!(think(false).text, "hmmHi");
        // And one of a Config's nested configuration (the tagged family's typing).
        let tools = Tools::from_json(
            r#"[{"name":"f","parameters":{"type":"object","properties":{"v":{"type":["integer","null"]}}}}]"#,
        )
        .unwrap();
        let typed = |on: bool| {
            let f = by_id("qwen3_coder").unwrap();
            let values = OptionValues::from([("typing.null_aliases".to_string(), on)]);
            let mut p = f.parser(&tools, &values).unwrap();
            let t = b"<tool_call>\n<function=f>\n<parameter=v>\nNone\n</parameter>\n</function>\n</tool_call>";
            ParseResult::fold(&run_chunks(p.as_mut(), [&t[..]]))
        };
        assert_eq!(typed(true).calls[0].arguments["v"], serde_json::Value::Null);
        assert_eq!(typed(false).calls[0].arguments["v"], "None");
    }

    #[test]
    fn a_setter_changes_only_its_option() {
        use crate::formats::kimi_k2::Config;
        for o in Config::OPTIONS {
            let mut c = Config::default();
            let before = (o.get)(&c);
            (o.set)(&mut c, !before);
            assert_eq!((o.get)(&c), !before, "{}", o.name);
            for other in Config::OPTIONS.iter().filter(|x| x.name != o.name) {
                assert_eq!(
                    (other.get)(&c),
                    (other.get)(&Config::default()),
                    "{}",
                    other.name
                );
            }
        }
    }

    #[test]
    fn only_values_differing_from_the_defaults_are_in_force() {
        let v = OptionValues::from([
            ("text_in_section".to_string(), true),
            ("stray_section_end".to_string(), false),
        ]);
        assert_eq!(
            differing("kimi_k2", &v),
            OptionValues::from([("stray_section_end".to_string(), false)])
        );
    }
}
