//! `json`: the incremental JSON parser against serde_json.
//!
//! Input layout: `[n][n × cut u16 LE][text…]`; the bytes go through `std::str::from_utf8` first
//! (the parser takes `&str`). On complete input both parsers accept or reject together and agree
//! on the value; fed in pieces (cuts moved to the next character boundary) the parser gives the
//! same value or the same error kind; in validate-only mode it accepts the same inputs; and on a
//! valid document without duplicate keys the partial values grow monotonically, each a prefix of
//! the final value.

#![no_main]

#[allow(dead_code)]
#[path = "../../src/cli/fuzz/layout.rs"]
mod layout;

use arbitrary::{Arbitrary, Unstructured};
use conform::lexers::json::{JsonConfig, JsonParser, parse_complete};
use libfuzzer_sys::fuzz_target;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// Cuts and the JSON text, decoded with the shared layout.
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

/// Above this length partial values are checked on a sample of prefixes: each check clones the
/// value built so far, so checking every prefix is quadratic.
const EVERY_PREFIX_UP_TO: usize = 1024;

/// `a` is what a partial parse of `b` may show: strings by prefix, the last array element by
/// prefix, object members by key, everything else equal.
fn is_prefix_of(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => y.starts_with(x.as_str()),
        (Value::Array(x), Value::Array(y)) => {
            x.len() <= y.len()
                && x.iter().zip(y).enumerate().all(|(i, (p, q))| {
                    if i + 1 == x.len() {
                        is_prefix_of(p, q)
                    } else {
                        p == q
                    }
                })
        }
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .all(|(k, p)| y.get(k).is_some_and(|q| is_prefix_of(p, q))),
        _ => a == b,
    }
}

/// A serde visitor that fails on a repeated object key (where monotonicity is not promised).
struct NoDuplicateKeys;

impl<'de> Visitor<'de> for NoDuplicateKeys {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON without duplicate keys")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Seed)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            if !seen.insert(k) {
                return Err(serde::de::Error::custom("duplicate key"));
            }
            map.next_value_seed(Seed)?;
        }
        Ok(())
    }
}

struct Seed;

impl<'de> serde::de::DeserializeSeed<'de> for Seed {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(NoDuplicateKeys)
    }
}

fn has_duplicate_keys(text: &str) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    serde::de::DeserializeSeed::deserialize(Seed, &mut de).is_err()
}

fuzz_target!(|input: Input| {
    let Input(raw_cuts, bytes) = input;
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return;
    };
    let theirs = serde_json::from_str::<Value>(text);
    let ours = parse_complete(text, JsonConfig::default());
    match (&theirs, &ours) {
        (Ok(a), Ok(Some(b))) => assert_eq!(a, b, "values differ on {text:?}"),
        (Err(_), Err(_)) => {}
        _ => panic!("serde_json {theirs:?} vs ours {ours:?} on {text:?}"),
    }

    // Validate-only mode accepts exactly the same documents.
    let validate = JsonConfig {
        build_value: false,
        ..JsonConfig::default()
    };
    let v = parse_complete(text, validate);
    assert_eq!(
        v.is_ok(),
        ours.is_ok(),
        "validate-only disagrees on {text:?}"
    );

    // Pieces give the same value, or the same error kind.
    let mut cuts: Vec<usize> = raw_cuts
        .resolve(text.len())
        .into_iter()
        .map(|mut c| {
            while !text.is_char_boundary(c) {
                c += 1;
            }
            c
        })
        .filter(|&c| c < text.len())
        .collect();
    cuts.dedup();
    let mut p = JsonParser::new(JsonConfig::default());
    let mut fed = Ok(());
    for piece in layout::pieces(text.as_bytes(), &cuts) {
        let piece = std::str::from_utf8(piece).expect("cuts sit on character boundaries");
        if let Err(e) = p.feed(piece) {
            fed = Err(e);
            break;
        }
    }
    let cut = fed.and_then(|()| p.finish());
    match (&ours, &cut) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "cuts {cuts:?} change the value of {text:?}"),
        (Err(a), Err(b)) => assert_eq!(a.kind, b.kind, "cuts {cuts:?} change the error"),
        _ => panic!("cuts {cuts:?} change the outcome: {ours:?} vs {cut:?} on {text:?}"),
    }

    // The string fast path streaming callers try first changes nothing, validating or building.
    let parse = |build_value: bool, fast: bool| {
        let mut p = JsonParser::new(JsonConfig {
            build_value,
            ..JsonConfig::default()
        });
        for piece in layout::pieces(text.as_bytes(), &cuts) {
            let piece = std::str::from_utf8(piece).expect("cuts sit on character boundaries");
            if !(fast && p.continue_string(piece)) {
                p.feed(piece)?;
            }
        }
        let end = p.offset();
        p.finish().map(|v| (v, end))
    };
    for build in [false, true] {
        assert_eq!(
            parse(build, true),
            parse(build, false),
            "continue_string (build {build}) on {text:?}, cuts {cuts:?}"
        );
    }

    // Partial values are monotone on valid documents without duplicate keys.
    let Ok(want) = theirs else {
        return;
    };
    if has_duplicate_keys(text) {
        return;
    }
    let stride = text.len().div_ceil(EVERY_PREFIX_UP_TO).max(1);
    let mut p = JsonParser::new(JsonConfig::default());
    let mut prev: Option<Value> = None;
    let mut start = 0;
    let mut n = 0usize;
    for (i, c) in text.char_indices() {
        n += 1;
        let end = i + c.len_utf8();
        if n % stride != 0 && end != text.len() {
            continue;
        }
        p.feed(&text[start..end]).expect("a valid document feeds");
        start = end;
        let cur = p.partial_value();
        if let Some(a) = &prev {
            let b = cur.as_ref();
            assert!(
                b.is_some_and(|b| is_prefix_of(a, b)),
                "partial {a:?} then {b:?} at byte {end} of {text:?}"
            );
            assert!(
                is_prefix_of(a, &want),
                "partial {a:?} is no prefix of {want:?}"
            );
        }
        prev = cur;
    }
});
