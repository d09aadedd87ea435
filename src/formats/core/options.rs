//! Leniency as typed configuration: a format's options — those of its `Config` (made by
//! `config!` (`config.rs`)) and of nested configurations such as the reasoning
//! layer's — as one [`Table`], so the command line and a corpus directory's `conform.toml`
//! list and set options of any format without code per format. A format exposes its table as
//! [`Format::options`](crate::formats::Format::options); lookups by format id are in `registry.rs`.

use crate::formats::config::Opt;
use crate::formats::reasoning::{self, Reasoned};
use crate::formats::{FormatOptions, OptionInfo, OptionValues, StreamParser};
use crate::tools::Tools;

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
    /// The options of `C` itself (`config!` makes `C::OPTIONS`).
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

impl<C: 'static> Table<C> {
    /// The table of a format whose options are those of `C` alone (no nested configuration,
    /// no reasoning layer outside `C`); the others are set with struct update syntax.
    pub const fn new(
        default: fn() -> C,
        options: &'static [Opt<C>],
        build: fn(C, &Tools) -> Box<dyn StreamParser>,
    ) -> Table<C> {
        Table {
            default,
            options,
            nested: &[],
            reasoning: None,
            build,
        }
    }
}

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
        Ok(self.layered(c, layer, tools))
    }
}

impl<C: 'static> Table<C> {
    /// The format's parser with its default options.
    pub fn default_parser(&self, tools: &Tools) -> Box<dyn StreamParser> {
        self.layered((self.default)(), self.reasoning.map(|s| s.config()), tools)
    }

    /// The parser of `c`, behind the reasoning layer of `reasoning` with options `layer`.
    fn layered(
        &self,
        c: C,
        layer: Option<reasoning::Config>,
        tools: &Tools,
    ) -> Box<dyn StreamParser> {
        let p = (self.build)(c, tools);
        match (self.reasoning, layer) {
            (Some(syntax), Some(cfg)) => Box::new(Reasoned::new(p, syntax, cfg)),
            _ => p,
        }
    }
}

/// The message for an option a format does not have.
pub(crate) fn unknown(name: &str, known: &[OptionInfo]) -> String {
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
/// name and its value; the format and the name are checked by
/// [`check`](crate::formats::registry::check).
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
