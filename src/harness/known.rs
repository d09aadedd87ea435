//! Known failures: cases marked as expected to fail for a parser (the xfail-strict ratchet).
//!
//! The file is plain text, read by the runner, never code:
//!
//! ```text
//! # Lines before any section apply to the built-in parsers.
//! corpus/kimi_k2/y_example.txt      # why it fails, and the issue that tracks it
//! [cmd:python3 examples/adapters/python/kimi_adapter.py]
//! corpus/kimi_k2/y_split_marker.txt # the adapter does not hold back partial markers
//! ```
//!
//! A marked case that fails counts as `xfail`; a marked case that passes is `xpass`, which
//! fails the run until the mark is removed, so a fix can never go unnoticed.

use std::collections::BTreeMap;
use std::path::Path;

/// The parser sections of a known-failures file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownFailures {
    /// parser → case id → reason.
    by_parser: BTreeMap<String, BTreeMap<String, String>>,
}

impl KnownFailures {
    /// Parses the text of a known-failures file.
    pub fn parse(text: &str) -> Result<KnownFailures, String> {
        let mut k = KnownFailures::default();
        let mut parser = "builtin".to_string();
        for (n, raw) in text.lines().enumerate() {
            let (entry, reason) = match raw.split_once(" #") {
                Some((e, r)) => (e.trim(), r.trim()),
                None if raw.trim_start().starts_with('#') => continue,
                None => (raw.trim(), ""),
            };
            if entry.is_empty() {
                continue;
            }
            if let Some(section) = entry.strip_prefix('[') {
                parser = section
                    .strip_suffix(']')
                    .ok_or_else(|| format!("line {}: unclosed section {entry:?}", n + 1))?
                    .trim()
                    .to_string();
                continue;
            }
            k.by_parser
                .entry(parser.clone())
                .or_default()
                .insert(entry.to_string(), reason.to_string());
        }
        Ok(k)
    }

    /// Reads a known-failures file, naming it in errors.
    pub fn load(path: &Path) -> Result<KnownFailures, String> {
        let text = super::files::read_regular_to_string(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Adds every entry of `other`.
    pub fn extend(&mut self, other: KnownFailures) {
        for (p, m) in other.by_parser {
            self.by_parser.entry(p).or_default().extend(m);
        }
    }

    /// Whether `case_id` is marked as a known failure of `parser`.
    pub fn contains(&self, parser: &str, case_id: &str) -> bool {
        self.by_parser
            .get(parser)
            .is_some_and(|m| m.contains_key(case_id))
    }

    /// Marked case ids of `parser` that the run did not see (stale marks).
    pub fn unseen<'a>(&'a self, parser: &str, seen: &[&str]) -> Vec<&'a str> {
        self.by_parser
            .get(parser)
            .map(|m| {
                m.keys()
                    .map(String::as_str)
                    .filter(|id| !seen.contains(id))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_comments_and_reasons() {
        let k = KnownFailures::parse(
            "# header\ncorpus/a.txt # reason a\n\n[cmd:python3 x.py]\ncorpus/b.txt\n",
        )
        .unwrap();
        assert!(k.contains("builtin", "corpus/a.txt"));
        assert!(!k.contains("builtin", "corpus/b.txt"));
        assert!(k.contains("cmd:python3 x.py", "corpus/b.txt"));
        assert!(KnownFailures::parse("[oops").is_err());
    }
}
