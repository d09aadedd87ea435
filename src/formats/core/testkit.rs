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

/// A call of the render → parse properties: a value that is not an object becomes the
/// arguments `{"v": value}` (arguments are an object on every wire).
pub(crate) fn prop_call(name: String, id: Option<String>, v: Value) -> crate::event::ToolCall {
    crate::event::ToolCall {
        name,
        id,
        server: None,
        arguments: if v.is_object() {
            v
        } else {
            serde_json::json!({ "v": v })
        },
    }
}

/// The render → parse property: `bytes`, rendered from `text` and `calls`, parse back under
/// `cuts` to exactly them, without an error.
pub(crate) fn parses_back(
    p: &mut dyn StreamParser,
    bytes: &[u8],
    cuts: &[usize],
    text: &str,
    calls: &[crate::event::ToolCall],
) -> Result<(), TestCaseError> {
    let r = fold_cut(p, bytes, cuts);
    prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
    prop_assert_eq!(r.text.as_str(), text);
    prop_assert_eq!(r.calls.as_slice(), calls);
    Ok(())
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

/// The pieces of `input` cut into chunks of the given sizes in turn, cycling (a size of 0
/// counts as 1): a stream of small deltas of varying length.
pub(crate) fn cycled_chunks<'a>(input: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    for &n in sizes.iter().cycle() {
        if at >= input.len() {
            break;
        }
        let end = (at + n.max(1)).min(input.len());
        out.push(&input[at..end]);
        at = end;
    }
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

/// Parses `input` whole, byte by byte, and cut once at each of the first `limit` positions,
/// through `fold(input, cuts)`; asserts every result (completion included) equals the whole
/// one, and returns it.
pub(crate) fn agree_under_cuts(
    fold: &dyn Fn(&[u8], &[usize]) -> ParseResult,
    input: &[u8],
    limit: usize,
) -> ParseResult {
    let whole = fold(input, &[]);
    let same = |r: ParseResult, what: &str| {
        assert_eq!(r, whole, "{what}");
        assert_eq!(r.completion, whole.completion, "{what}");
    };
    let bytes: Vec<usize> = (1..input.len()).collect();
    same(fold(input, &bytes), "byte by byte");
    for c in 0..=input.len().min(limit) {
        same(fold(input, &[c]), &format!("cut at {c}"));
    }
    whole
}

/// A call named by `[a-z_]{1,10}`, with an id from `ids` and up to three arguments whose
/// strings match `strings` (a regex).
pub(crate) fn arb_call(
    ids: impl Strategy<Value = Option<String>>,
    strings: &'static str,
) -> impl Strategy<Value = crate::event::ToolCall> {
    (
        "[a-z_]{1,10}",
        ids,
        proptest::collection::btree_map("[a-z]{1,5}", arb_json(strings), 0..4),
    )
        .prop_map(|(name, id, args)| crate::event::ToolCall {
            name,
            id,
            server: None,
            arguments: Value::Object(args.into_iter().collect()),
        })
}

/// The properties of a provider stream's parser, as proptests in the calling test module:
/// what `$render(text, calls)` writes parses back under random cuts (texts match `$text`,
/// calls come from `$call`), and arbitrary or mutated bytes never panic and give under any
/// cuts what they give whole. `$fold(bytes, cuts)` parses with the default options.
macro_rules! stream_properties {
    ($fold:expr, $render:expr, $call:expr, $text:literal) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn roundtrip_under_random_cuts(text in $text, calls in proptest::collection::vec($call, 0..3),
                                           cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
                let bytes = $render(&text, &calls).unwrap();
                let r = $fold(&bytes, &cuts);
                prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
                prop_assert_eq!(r.text, text);
                prop_assert_eq!(r.calls, calls);
            }

            #[test]
            fn arbitrary_bytes_never_panic_and_are_split_invariant(
                bytes in proptest::collection::vec(prop_oneof![
                    Just(b'\n'), Just(b'{'), Just(b'}'), Just(b'"'), Just(b':'), any::<u8>()], 0..80),
                cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
                prop_assert_eq!($fold(&bytes, &cuts), $fold(&bytes, &[]));
            }

            #[test]
            fn mutated_streams_never_panic_and_are_split_invariant(
                calls in proptest::collection::vec($call, 1..3),
                edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
                cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
                let mut bytes = $render("hi", &calls).unwrap();
                for (at, b) in edits {
                    let i = at % bytes.len();
                    bytes[i] = b;
                }
                prop_assert_eq!($fold(&bytes, &cuts), $fold(&bytes, &[]));
            }
        }
    };
}
pub(crate) use stream_properties;
