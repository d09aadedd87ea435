//! A run that judged no case must not pass: it says why it judged nothing instead.

/// Why a run judged no case, or `None` when every parser judged at least one.
///
/// `paths` are the corpus paths given, `loaded` the cases loaded from them (before sharding),
/// `refused` the corpus errors met loading them (case files refused for their own content, a
/// `tools.json`, a `conform.toml` or a sidecar), `shard` the `K/N` option and `judged` each
/// parser's name with the cases it judged.
pub fn nothing_judged(
    paths: &[String],
    loaded: usize,
    refused: usize,
    shard: Option<&str>,
    judged: &[(&str, usize)],
) -> Option<String> {
    if loaded == 0 && refused > 0 {
        return Some(format!(
            "no case was judged: every case under {} was refused (see the {refused} error(s) \
             above)",
            paths.join(", ")
        ));
    }
    if loaded == 0 {
        return Some(format!(
            "no case was judged: {} hold(s) no loadable case file (.txt, .jsonl, .session.json)",
            paths.join(", ")
        ));
    }
    if let Some(s) = shard
        && judged.iter().all(|(_, n)| *n == 0)
    {
        return Some(format!(
            "no case was judged: shard {s} holds none of the {loaded} case(s) (use fewer shards)"
        ));
    }
    judged.iter().find(|(_, n)| *n == 0).map(|(parser, _)| {
        format!(
            "no case was judged by the parser {parser}: it supports none of the formats of the {loaded} case(s)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_why_nothing_was_judged() {
        let p = ["corpus/".to_string()];
        let m = nothing_judged(&p, 0, 0, None, &[("builtin", 0)]).unwrap();
        assert!(m.contains("corpus/ hold(s) no loadable case"), "{m}");
        let m = nothing_judged(&p, 0, 2, None, &[("builtin", 0)]).unwrap();
        assert!(
            m.contains("every case under corpus/ was refused (see the 2 error"),
            "{m}"
        );
        let m = nothing_judged(&p, 3, 0, Some("4/4"), &[("builtin", 0)]).unwrap();
        assert!(m.contains("shard 4/4 holds none of the 3"), "{m}");
        let m = nothing_judged(&p, 3, 0, None, &[("builtin", 3), ("cmd:x", 0)]).unwrap();
        assert!(m.contains("cmd:x"), "{m}");
        assert_eq!(nothing_judged(&p, 3, 1, None, &[("builtin", 3)]), None);
    }
}
