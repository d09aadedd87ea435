//! `roundtrip`: arbitrary tool calls → the format's renderer → arbitrary cuts → parse.
//!
//! Input layout (see `src/cli/fuzz/layout.rs`): a format selector, cuts, the text and up to 8
//! calls whose names, ids, servers and nested JSON arguments are strings in which single bytes
//! expand to markup (`<`, `&`, `]]>`, quotes, `<|`, non-ASCII…). When the renderer refuses the
//! calls (its format cannot carry them) the input is skipped; otherwise the whole and the cut
//! parse must give back exactly the text and the calls, with no error, and warn alike. Tool
//! definitions are made from the calls, so formats that check names and schemas accept them.

#![no_main]

#[allow(dead_code)]
#[path = "../../src/cli/fuzz/checks.rs"]
mod checks;
#[allow(dead_code)]
#[path = "../../src/cli/fuzz/layout.rs"]
mod layout;

use arbitrary::{Arbitrary, Unstructured};
use conform::formats::REGISTRY;
use libfuzzer_sys::fuzz_target;

/// Text and calls for one format, decoded with the shared layout.
#[derive(Debug)]
struct Input(layout::RoundtripInput);

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Input(layout::decode_roundtrip(u.bytes(u.len())?)))
    }
    fn arbitrary_take_rest(u: Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Input(layout::decode_roundtrip(u.take_rest())))
    }
}

fuzz_target!(|input: Input| {
    if REGISTRY.is_empty() {
        return;
    }
    let Input(inp) = input;
    let format = REGISTRY[inp.format as usize % REGISTRY.len()];
    let r = checks::check_roundtrip(format, &inp.text, &inp.calls, |len| inp.cuts.resolve(len));
    if let Err(e) = r {
        panic!("{}: {e}", format.id);
    }
});
