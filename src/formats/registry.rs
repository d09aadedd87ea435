//! The registry: every format once, in a fixed order; lookups by id, of a format and of its
//! options.

use crate::formats::options::{parse_assignment, unknown};
#[cfg(feature = "schema")]
use crate::formats::strict_xml;
use crate::formats::{
    Format, OptionValues, OptionsByFormat, anthropic_sse, apertus, deepseek_v3, deepseek_v4,
    deepseek_v31, deepseek_v32, deepseek_v41, forge_json, forge_xml, functiongemma, gemma4, glm45,
    glm47, granite4, harmony, hermes, kimi_k2, kimi_k3, llama3_json, minimax_m2, minimax_m3,
    mistral, mistral_v11, muse_glimmer, olmo3, openai_sse, pythonic, qwen3_coder, roo_xml,
    seed_oss, step3, xlam,
};

/// Every format, in a fixed order. Adding a format is one module and one line here.
pub static REGISTRY: &[&Format] = &[
    &kimi_k2::FORMAT,
    &openai_sse::FORMAT,
    &anthropic_sse::FORMAT,
    &roo_xml::FORMAT,
    #[cfg(feature = "schema")]
    &strict_xml::FORMAT,
    &forge_xml::FORMAT,
    &forge_json::FORMAT,
    // harmony before the later families: fuzz seeds name formats by registry position.
    &harmony::FORMAT,
    &hermes::FORMAT,
    &deepseek_v3::FORMAT,
    &deepseek_v31::FORMAT,
    &llama3_json::FORMAT,
    &mistral::FORMAT,
    &mistral_v11::FORMAT,
    &pythonic::FORMAT,
    &qwen3_coder::FORMAT,
    &seed_oss::FORMAT,
    &glm45::FORMAT,
    &glm47::FORMAT,
    &minimax_m2::FORMAT,
    &deepseek_v32::FORMAT,
    &deepseek_v4::FORMAT,
    &deepseek_v41::FORMAT,
    &gemma4::FORMAT,
    &functiongemma::FORMAT,
    &minimax_m3::FORMAT,
    &kimi_k3::FORMAT,
    &muse_glimmer::FORMAT,
    &granite4::FORMAT,
    &apertus::FORMAT,
    &step3::FORMAT,
    &olmo3::FORMAT,
    &xlam::FORMAT,
];

/// Looks a format up by id.
pub fn by_id(id: &str) -> Option<&'static Format> {
    REGISTRY.iter().copied().find(|f| f.id == id)
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
    let f = by_id(format).ok_or_else(|| {
        let ids: Vec<&str> = REGISTRY.iter().map(|f| f.id).collect();
        format!(
            "unknown format {format:?} in option {format}.{name}; known formats: {}",
            ids.join(", ")
        )
    })?;
    let list = crate::formats::modes::option_list(f);
    if list.iter().any(|o| o.name == name) {
        Ok(())
    } else {
        Err(format!("{format}: {}", unknown(name, &list)))
    }
}

/// `values` without the entries equal to the format's defaults: the options in force that a
/// report records.
pub fn differing(format: &str, values: &OptionValues) -> OptionValues {
    let Some(f) = by_id(format) else {
        return values.clone();
    };
    let list = crate::formats::modes::option_list(f);
    values
        .iter()
        .filter(|(n, v)| list.iter().any(|o| o.name == **n && o.default != **v))
        .map(|(n, v)| (n.clone(), *v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::WarningKind;
    use crate::tools::Tools;

    #[test]
    fn unknown_formats_and_options_are_refused_with_the_known_ones() {
        assert_eq!(check("kimi_k2", "text_in_section"), Ok(()));
        assert_eq!(check("kimi_k2", "reasoning.starts_inside"), Ok(()));
        assert_eq!(check("qwen3_coder", "typing.null_aliases"), Ok(()));
        let e = check("kimi", "x").unwrap_err();
        assert!(e.contains("known formats: kimi_k2, openai_sse"), "{e}");
        let e = check("kimi_k2", "nope").unwrap_err();
        assert!(e.contains("known options: text_in_section, "), "{e}");
        // forge_json has no options of its own: only the guided reader's.
        let e = check("forge_json", "nope").unwrap_err();
        assert!(e.contains("known options: guided.object_not_array"), "{e}");
        assert_eq!(check("forge_json", "guided.text_after_payload"), Ok(()));
        let e = check("openai_sse", "guided.text_after_payload").unwrap_err();
        assert!(e.contains("unknown option"), "{e}");
    }

    #[test]
    fn every_format_lists_unique_documented_options_whose_setters_round_trip() {
        for f in REGISTRY {
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
        for f in REGISTRY {
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
        WarningKind::RecipientMismatch,
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
            "deepseek_v4",
            "deepseek_v41",
            "minimax_m3",
            "muse_glimmer",
            "step3",
        ];
        match kind {
            "null_alias" => Some("typing.null_aliases"),
            "python_literal" if format == "olmo3" => Some("python_literals"),
            "python_literal" => Some("typing.python_literals"),
            "name_normalised" => Some("doubled_name"),
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
        for f in REGISTRY {
            let names: Vec<String> = f.options.list().into_iter().map(|o| o.name).collect();
            // openai_sse forwards the warnings of the kimi_k2 parser it runs on `content`.
            let inner: Vec<String> = if f.id == "openai_sse" {
                kimi_k2::FORMAT
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
                        *n == option
                            || *n == kind
                            || n.strip_prefix("reasoning.") == Some(option.as_str())
                            // muse_glimmer's ATEM body options.
                            || n.strip_prefix("tagged.") == Some(option.as_str())
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
