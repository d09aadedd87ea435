//! Throughput of the streaming XML tokenizer and the forge formats, whole input vs 4-byte
//! chunks, on a 10 MB `write_to_file` in CDATA and in entity-escaped text.
//!
//! Run with `cargo run --release --example xml_bench`.

use conform::formats::{StreamParser, forge_json, forge_xml};
use conform::lexers::xml::{Ctl, XmlConfig, XmlTokenizer};
use conform::tools::Tools;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn content() -> String {
    let line = "    if (a < b && c > d) { x = \"]]\"; } // héllo → ✓\n";
    let mut s = String::new();
    while s.len() < 10_000_000 {
        s.push_str(line);
    }
    s
}

fn best(mut f: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn report(name: &str, doc: &[u8], mut run: impl FnMut(&[u8], usize)) {
    let whole = best(|| run(doc, doc.len()));
    let four = best(|| run(doc, 4));
    let mb = doc.len() as f64 / 1e6;
    println!(
        "{name:<28} {mb:>6.1} MB  whole {:>8.1} ms ({:>7.1} MB/s)  4-byte {:>8.1} ms  ratio {:>5.2}",
        whole.as_secs_f64() * 1e3,
        mb / whole.as_secs_f64(),
        four.as_secs_f64() * 1e3,
        four.as_secs_f64() / whole.as_secs_f64()
    );
}

fn parse(mut p: Box<dyn StreamParser>, doc: &[u8], chunk: usize) {
    let mut out = Vec::new();
    for c in doc.chunks(chunk) {
        p.feed(c, &mut out);
    }
    p.finish(&mut out);
    black_box(out);
}

fn main() {
    let body = content();
    let cdata = format!(
        "<tool><tool_name>write_to_file</tool_name><arguments><path>a</path><content><![CDATA[{}]]></content></arguments></tool>",
        body.replace("]]>", "]]]]><![CDATA[>")
    );
    let escaped = format!(
        "<tool><tool_name>write_to_file</tool_name><arguments><path>a</path><content>{}</content></arguments></tool>",
        quick_xml::escape::partial_escape(&body)
    );
    let json = format!(
        "<tool>{}</tool>",
        serde_json::json!({"tool_name": "write_to_file", "arguments": {"path": "a", "content": body}})
    );
    let tools = Tools::default();
    for (name, doc) in [("tokenizer cdata", &cdata), ("tokenizer escaped", &escaped)] {
        report(name, doc.as_bytes(), |d, k| {
            let mut t = XmlTokenizer::new(XmlConfig::default());
            let mut n = 0usize;
            let mut sink = |_t: conform::lexers::xml::Token<'_>, _o: u64| {
                n += 1;
                Ctl::go()
            };
            // Cut at char boundaries: the tokenizer takes &str.
            let s = std::str::from_utf8(d).unwrap();
            let mut i = 0;
            while i < s.len() {
                let mut j = (i + k).min(s.len());
                while !s.is_char_boundary(j) {
                    j += 1;
                }
                t.feed(&s[i..j], &mut sink);
                i = j;
            }
            t.finish(&mut sink);
            black_box(n);
        });
    }
    report("forge_xml cdata", cdata.as_bytes(), |d, k| {
        parse(
            Box::new(forge_xml::Parser::new(Default::default(), &tools)),
            d,
            k,
        )
    });
    report("forge_xml escaped", escaped.as_bytes(), |d, k| {
        parse(
            Box::new(forge_xml::Parser::new(Default::default(), &tools)),
            d,
            k,
        )
    });
    report("forge_json", json.as_bytes(), |d, k| {
        parse(Box::new(forge_json::Parser::new(Default::default())), d, k)
    });
}
