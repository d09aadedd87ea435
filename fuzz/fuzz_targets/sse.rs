//! `sse`: the SSE layer fed arbitrary bytes, cut anywhere.
//!
//! Input layout: `[n][n × cut u16 LE][stream…]`. Oracle: no panic, and the items (events with
//! their type, data, id, offset and termination; errors with kind, offset and message) of the
//! cut feed equal those of the whole feed, under the default configuration and under tiny
//! limits (so the line and event limits and unknown-field leniency are exercised too).

#![no_main]

#[allow(dead_code)]
#[path = "../../src/cli/fuzz/layout.rs"]
mod layout;

use arbitrary::{Arbitrary, Unstructured};
use conform::lexers::sse::{SseConfig, SseItem, SseParser};
use libfuzzer_sys::fuzz_target;

/// Cuts and the stream, decoded with the shared layout.
#[derive(Debug)]
struct Input(layout::RawCuts, Vec<u8>);

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let (cuts, text) = layout::decode_cut_text(u.bytes(u.len())?);
        Ok(Input(cuts, text))
    }
    fn arbitrary_take_rest(u: Unstructured<'a>) -> arbitrary::Result<Self> {
        let (cuts, text) = layout::decode_cut_text(u.take_rest());
        Ok(Input(cuts, text))
    }
}

fn items<'a>(config: &SseConfig, pieces: impl IntoIterator<Item = &'a [u8]>) -> Vec<SseItem> {
    let mut p = SseParser::new(config.clone());
    let mut out = Vec::new();
    for piece in pieces {
        p.feed(piece, &mut |i| out.push(i));
    }
    p.finish(&mut |i| out.push(i));
    out
}

fuzz_target!(|input: Input| {
    let Input(raw_cuts, stream) = input;
    let cuts = raw_cuts.resolve(stream.len());
    let tiny = SseConfig {
        max_line_bytes: 24,
        max_event_bytes: 64,
        reject_unknown_fields: false,
    };
    for config in [SseConfig::default(), tiny] {
        let whole = items(&config, [&stream[..]]);
        let cut = items(&config, layout::pieces(&stream, &cuts));
        assert_eq!(
            whole, cut,
            "cuts {cuts:?} change the items under {config:?}"
        );
    }
});
