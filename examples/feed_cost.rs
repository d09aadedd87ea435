//! One parse of a format's benchmark transcript (the one `conform bench` renders), for
//! instruction counts, which a busy machine does not disturb the way it disturbs time:
//!
//! ```text
//! cargo build --release --example feed_cost
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect='feed_cost::parse' \
//!     target/release/examples/feed_cost FORMAT CHUNK [SIZE]
//! ```
//!
//! `CHUNK` 0 feeds the transcript whole. (Instructions at 4 − instructions whole) / feeds is
//! the per-feed cost; only `parse` is counted, not the rendering of the transcript.

use conform::event::{Event, Sink, ToolCall};
use conform::formats;
use conform::tools::Tools;
use serde_json::json;
use std::hint::black_box;

/// Counts what it receives, like `conform bench`'s counting sink.
#[derive(Default)]
struct Count {
    bytes: usize,
    events: usize,
}

impl Sink for Count {
    fn push(&mut self, _event: Event) {
        self.events += 1;
    }
    #[inline]
    fn args_delta(&mut self, _index: usize, json: &str) {
        self.bytes += json.len();
    }
    #[inline]
    fn text(&mut self, text: &str) {
        self.bytes += text.len();
    }
}

fn content(len: usize) -> String {
    let line = "    let s = \"quote \\\"inner\\\" C:\\\\dir\"; // héllo → ✓ 😀 if a < b && c > d { x[1] = 2; }\n\t<div class=\"x\">&amp;</div>\n";
    line.repeat(len / line.len() + 1)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let id = args.get(1).map_or("kimi_k2", String::as_str);
    let chunk: usize = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(4);
    let size: usize = args
        .get(3)
        .and_then(|c| c.parse().ok())
        .unwrap_or(1_000_000);
    let f = formats::by_id(id).expect("a registered format");
    let tools = Tools::from_json(
        r#"[{"type":"function","function":{"name":"write_to_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}}]"#,
    )
    .unwrap_or_default();
    let render = f.render.expect("a renderer");
    let shapes = [
        (Some("0"), None),
        (None, None),
        (None, Some("local")),
        (Some("0"), Some("local")),
    ];
    let data = shapes
        .iter()
        .find_map(|(id, server)| {
            let call = ToolCall {
                name: "write_to_file".into(),
                id: id.map(Into::into),
                server: server.map(Into::into),
                arguments: json!({"path": "src/main.rs", "content": content(size)}),
            };
            render("I'll write the file.\n", &[call], &tools).ok()
        })
        .expect("renders");
    let chunk = if chunk == 0 { data.len() } else { chunk };
    parse(f, &tools, &data, chunk);
    eprintln!(
        "{id}: {} bytes, {} feeds",
        data.len(),
        data.len().div_ceil(chunk)
    );
}

/// The measured part: `--toggle-collect=feed_cost::parse`.
#[inline(never)]
fn parse(f: &formats::Format, tools: &Tools, data: &[u8], chunk: usize) {
    let mut p = (f.new_parser)(tools);
    let mut sink = Count::default();
    for c in data.chunks(chunk) {
        p.feed(c, &mut sink);
    }
    p.finish(&mut sink);
    black_box((sink.bytes, sink.events));
}
