//! Throughput of `conform::lexers::json` against `serde_json::from_str::<Value>`.
//!
//! Run with `cargo run --release --example json_bench`.

use conform::lexers::json::{JsonConfig, JsonParser};
use serde_json::{Value, json};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A deterministic generator, so every run measures the same documents.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// A tool-call arguments object dominated by one long string of code-like text.
fn string_heavy() -> String {
    let line = "    let s = \"quote \\\"inner\\\" path C:\\\\dir\\\\file\"; // héllo wörld → ✓ 😀\n\tif a < b && c > d { return Err(\"tab\\tnew\\nline\"); }\n";
    let mut content = String::new();
    while content.len() < 100_000 {
        content.push_str(line);
    }
    serde_json::to_string(&json!({"path": "src/x.rs", "content": content})).unwrap()
}

/// About 1 MB of nested objects, arrays, numbers, short strings and literals.
fn mixed() -> String {
    let mut r = Lcg(7);
    let mut items = Vec::new();
    let mut text_len = 0;
    while text_len < 1_000_000 {
        let n = r.next();
        let item = json!({
            "id": n,
            "name": format!("item-{n}"),
            "price": (n % 100_000) as f64 / 100.0,
            "delta": -((n % 977) as i64),
            "ratio": (n as f64) * 1e-12,
            "tags": ["a", "bc", "déf", format!("t{}", n % 13)],
            "ok": n.is_multiple_of(2),
            "none": null,
            "nested": {"xs": [n % 7, n % 11, n % 13, [1.5, 2.25, {"deep": [true, false]}]],
                       "note": "quote \" and backslash \\ and newline \n"}
        });
        text_len += item.to_string().len() + 1;
        items.push(item);
    }
    serde_json::to_string(&json!({"items": items})).unwrap()
}

/// Cuts `s` into pieces of about `n` bytes at char boundaries, as UTF-8 reassembly delivers them.
fn fragments(s: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + n).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}

/// MB/s of `f` over `bytes` bytes, taking the best of several timed batches.
fn rate(bytes: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let mut iters = 0u32;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(200) {
            f();
            iters += 1;
        }
        best = best.min(t.elapsed() / iters);
    }
    bytes as f64 / 1e6 / best.as_secs_f64()
}

fn ours(pieces: &[&str], config: JsonConfig, p: &mut JsonParser) -> Option<Value> {
    p.reset();
    for piece in pieces {
        p.feed(piece).unwrap();
    }
    let v = p.finish().unwrap();
    debug_assert!(config.build_value == v.is_some());
    v
}

fn main() {
    let build = JsonConfig::default();
    let check = JsonConfig {
        build_value: false,
        ..JsonConfig::default()
    };
    println!(
        "{:<14} {:>10} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "document",
        "bytes",
        "serde MB/s",
        "build whole",
        "build 4-byte",
        "valid whole",
        "valid 4-byte"
    );
    for (name, doc) in [("string-heavy", string_heavy()), ("mixed", mixed())] {
        let whole = [doc.as_str()];
        let four = fragments(&doc, 4);
        let want: Value = serde_json::from_str(&doc).unwrap();
        let mut pb = JsonParser::new(build);
        let mut pc = JsonParser::new(check);
        assert_eq!(ours(&four, build, &mut pb), Some(want));
        let serde = rate(doc.len(), || {
            black_box(serde_json::from_str::<Value>(black_box(&doc)).unwrap());
        });
        let bw = rate(doc.len(), || {
            black_box(ours(&whole, build, &mut pb));
        });
        let b4 = rate(doc.len(), || {
            black_box(ours(&four, build, &mut pb));
        });
        let cw = rate(doc.len(), || {
            black_box(ours(&whole, check, &mut pc));
        });
        let c4 = rate(doc.len(), || {
            black_box(ours(&four, check, &mut pc));
        });
        println!(
            "{name:<14} {:>10} {serde:>12.0} {bw:>12.0} {b4:>12.0} {cw:>12.0} {c4:>12.0}",
            doc.len()
        );
    }
}
