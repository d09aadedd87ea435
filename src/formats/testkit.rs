//! Test helpers shared by the formats' unit tests: replaying an input under cuts, the delta
//! contract on raw events, and proptest strategies.

use crate::event::{Event, ParseResult};
use crate::formats::{StreamParser, run_chunks};
use proptest::prelude::*;
use serde_json::Value;

/// Checks the streaming contract on one run's events (indices, order, deltas parse).
pub(crate) fn check_delta_contract(events: &[Event]) {
    let mut started = 0usize;
    let mut open: Option<(usize, String)> = None;
    for ev in events {
        match ev {
            Event::CallStart { index, .. } => {
                assert_eq!(*index, started, "indices count 0,1,2…: {events:?}");
                started += 1;
                open = Some((*index, String::new()));
            }
            Event::ArgsDelta { index, json } => {
                let (i, acc) = open.as_mut().expect("delta outside a call");
                assert_eq!(i, index);
                acc.push_str(json);
            }
            Event::CallEnd { index } => {
                let (i, acc) = open.take().expect("end outside a call");
                assert_eq!(i, *index);
                let v: serde_json::Value = serde_json::from_str(&acc)
                    .unwrap_or_else(|e| panic!("deltas {acc:?} are not JSON: {e}"));
                assert!(v.is_object(), "arguments {acc:?} are not an object");
            }
            Event::Error { .. } => {
                // A failed call never ends; a new call may start after it.
            }
            _ => {}
        }
    }
}

/// Feeds `input` whole, byte by byte, and cut once at every position (also inside UTF-8
/// characters), into fresh parsers from `make`; asserts every folded result equals the
/// whole one and every run keeps the delta contract. Returns the whole run's result.
pub(crate) fn every_cut(
    make: &dyn Fn() -> Box<dyn StreamParser>,
    input: &[u8],
) -> (ParseResult, Vec<Event>) {
    let run = |chunks: &[&[u8]]| {
        let mut p = make();
        let evs = run_chunks(p.as_mut(), chunks.iter().copied());
        check_delta_contract(&evs);
        evs
    };
    let whole_evs = run(&[input]);
    let whole = ParseResult::fold(&whole_evs);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    let r = ParseResult::fold(&run(&bytes));
    assert_eq!(
        r,
        whole,
        "byte-by-byte differs for {:?}",
        String::from_utf8_lossy(input)
    );
    assert_eq!(r.warnings.len(), whole.warnings.len());
    for cut in 1..input.len() {
        let r = ParseResult::fold(&run(&[&input[..cut], &input[cut..]]));
        assert_eq!(
            r,
            whole,
            "cut at {cut} differs for {:?}",
            String::from_utf8_lossy(input)
        );
    }
    (whole, whole_evs)
}

/// The pieces of `input` cut at `cuts`: arbitrary offsets (as proptest draws them), taken
/// modulo `input.len() + 1` and sorted, so sorted in-range cuts are kept as they are.
pub(crate) fn pieces_at<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cs: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cs.sort_unstable();
    let mut out = Vec::with_capacity(cs.len() + 1);
    let mut prev = 0;
    for c in cs {
        out.push(&input[prev..c]);
        prev = c;
    }
    out.push(&input[prev..]);
    out
}

/// Feeds `input` to `p` cut at `cuts` (as [`pieces_at`] reads them) and folds the events.
pub(crate) fn fold_cut(p: &mut dyn StreamParser, input: &[u8], cuts: &[usize]) -> ParseResult {
    ParseResult::fold(&run_chunks(p, pieces_at(input, cuts)))
}

/// Small JSON values, nested up to three levels, whose strings match `strings` (a regex).
pub(crate) fn arb_json(strings: &'static str) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        strings.prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
