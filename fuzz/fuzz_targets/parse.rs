//! `parse`: arbitrary bytes, cut anywhere, into any registered format's parser.
//!
//! Input layout (see `src/cli/fuzz/layout.rs`): `[format][n][n × cut u16 LE][transcript…]`.
//! Oracle (shared with `conform fuzz-case`): no panic; the whole feed and the cut feed keep the
//! delta contract; both give equal results (text, calls, error kinds) and warning kinds.
//! Parsers are linear and bounded, so libFuzzer's `-timeout` and `-rss_limit_mb` catch hangs
//! and unbounded memory.

#![no_main]

#[allow(dead_code)]
#[path = "../../src/cli/fuzz/checks.rs"]
mod checks;
#[allow(dead_code)]
#[path = "../../src/cli/fuzz/layout.rs"]
mod layout;
#[allow(dead_code)]
mod tools {
    include!(concat!(env!("OUT_DIR"), "/tools.rs"));
}

use arbitrary::{Arbitrary, Unstructured};
use conform::formats::REGISTRY;
use conform::tools::Tools;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// A format selector, a cut list and a transcript, decoded with the shared layout so that
/// `conform fuzz-seeds` can write corpus transcripts as seeds.
#[derive(Debug)]
struct Input(layout::ParseInput);

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Input(layout::decode_parse(u.bytes(u.len())?)))
    }
    fn arbitrary_take_rest(u: Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Input(layout::decode_parse(u.take_rest())))
    }
}

/// Each registered format's corpus tool definitions, by registry position.
fn tools() -> &'static [Tools] {
    static TOOLS: OnceLock<Vec<Tools>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        REGISTRY
            .iter()
            .map(|f| {
                tools::CORPUS_TOOLS
                    .iter()
                    .find(|(id, _)| *id == f.id)
                    .and_then(|(_, t)| Tools::from_json(t).ok())
                    .unwrap_or_default()
            })
            .collect()
    })
}

fuzz_target!(|input: Input| {
    if REGISTRY.is_empty() {
        return;
    }
    let Input(inp) = input;
    let i = inp.format as usize % REGISTRY.len();
    let cuts = inp.cuts.resolve(inp.transcript.len());
    if let Err(e) = checks::check_parse(REGISTRY[i], &tools()[i], &inp.transcript, &cuts) {
        panic!("{}: {e}\ncuts {cuts:?}", REGISTRY[i].id);
    }
});
