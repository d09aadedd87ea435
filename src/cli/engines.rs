//! `conform engines-report`: the engines matrix page from the files `scripts/engines` wrote.

use super::{EXIT_OK, usage_error};
use conform::harness::classify::CaseContext;
use conform::harness::corpus::{self, LoadOptions};
use conform::harness::report;
use conform::outputs::{engines, report_dir};
use std::path::Path;

/// `conform engines-report DIR`: README.md and index.html of the engines matrix.
pub(crate) fn run(dir: &Path, corpus_paths: &[String]) -> u8 {
    let m = match engines::load(dir) {
        Ok(m) => m,
        Err(e) => return usage_error(e),
    };
    let corpus = corpus::load(corpus_paths, &LoadOptions::default());
    let by_id: std::collections::HashMap<&str, &corpus::Case> =
        corpus.cases.iter().map(|c| (c.id.as_str(), c)).collect();
    let contexts = std::sync::Mutex::new(std::collections::HashMap::new());
    let context = |c: &report::CaseOut| {
        let mut cache = contexts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .entry(c.id.clone())
            .or_insert_with(|| match by_id.get(c.id.as_str()) {
                Some(case) => CaseContext::of(case),
                None => CaseContext::of_format(&c.format),
            })
            .clone()
    };
    let pages = engines::pages(&m, &context);
    let footer = format!(
        "Written by conform {} from {} (specs/engines.md).",
        env!("CARGO_PKG_VERSION"),
        dir.join("manifest.json").display()
    );
    let mut files = vec![
        (dir.join("README.md"), engines::markdown(&pages.markdown)),
        (
            dir.join("index.html"),
            engines::html_page(&pages.html, &footer),
        ),
    ];
    files.push((dir.join("BUGS.md"), engines::markdown(&pages.bugs)));
    files.push((
        dir.join("bugs.json"),
        serde_json::to_string_pretty(&pages.bugs_json).unwrap_or_default() + "\n",
    ));
    for (name, blocks) in &pages.failures {
        files.push((
            dir.join(name).join("FAILURES.md"),
            engines::markdown(blocks),
        ));
    }
    for (path, text) in files {
        if let Err(e) = report_dir::write_atomic(&path, text.as_bytes()) {
            return usage_error(e);
        }
    }
    err!(
        "wrote {} and {}",
        dir.join("README.md").display(),
        dir.join("index.html").display()
    );
    EXIT_OK
}
