//! `conform bench`: parser throughput, whole and in small chunks, for every registered format
//! with a renderer, and the incremental JSON parser against serde_json.
//!
//! Benchmarks, not timed tests: figures go in the README with the command that produced them.

use clap::Args;
use comfy_table::{Table, presets};
use conform::event::{Event, Sink, ToolCall};
use conform::formats::{self, Format, StreamParser, run_chunks};
use conform::lexers::json::{JsonConfig, JsonParser};
use conform::lexers::utf8::{Utf8Decoder, Utf8Piece};
use conform::tools::Tools;
use serde_json::{Value, json};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Options of `conform bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Largest transcript size in bytes (sizes are 1 KB, 100 KB, 1 MB and 10 MB up to it).
    #[arg(long, default_value_t = 10_000_000, value_parser = crate::cli::count(1, 1 << 28))]
    pub max_size: usize,
    /// Chunk size of the chunked feed, in bytes.
    #[arg(long, default_value_t = 4, value_parser = crate::cli::count(1, 1 << 28))]
    pub chunk: usize,
    /// Only these formats (comma-separated) [default: all with a renderer].
    #[arg(long, value_delimiter = ',')]
    pub formats: Option<Vec<String>>,
    /// Skip the re-parse-every-delta baseline (it is quadratic by design, so slow).
    #[arg(long)]
    pub no_baseline: bool,
    /// Time spent per measurement, in milliseconds (the best batch is kept).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub millis: u64,
}

const SIZES: [usize; 4] = [1_000, 100_000, 1_000_000, 10_000_000];

/// Code-like text with quotes, backslashes, tabs, non-ASCII and markup-looking characters.
fn content(len: usize) -> String {
    let line = "    let s = \"quote \\\"inner\\\" C:\\\\dir\"; // héllo → ✓ 😀 if a < b && c > d { x[1] = 2; }\n\t<div class=\"x\">&amp;</div>\n";
    let mut s = String::with_capacity(len + line.len());
    while s.len() < len {
        s.push_str(line);
    }
    s
}

/// Tools every renderer accepts for the benchmark call.
pub(crate) fn bench_tools() -> Tools {
    Tools::from_json(
        r#"[{"type":"function","function":{"name":"write_to_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}}]"#,
    )
    .unwrap_or_default()
}

/// A transcript of about `size` bytes: a sentence and one call writing a large file.
pub(crate) fn transcript(format: &Format, tools: &Tools, size: usize) -> Result<Vec<u8>, String> {
    let render = format.render.ok_or("no renderer")?;
    // Formats differ in what a call carries (an id, a server): take the first shape they accept.
    let shapes = [
        (Some("0"), None),
        (None, None),
        (None, Some("local")),
        (Some("0"), Some("local")),
    ];
    let make = |n: usize| {
        let mut last = Err(String::new());
        for (id, server) in shapes {
            let call = ToolCall {
                name: "write_to_file".into(),
                id: id.map(Into::into),
                server: server.map(Into::into),
                arguments: json!({"path": "src/main.rs", "content": content(n)}),
            };
            last = render("I'll write the file.\n", &[call], tools);
            if last.is_ok() {
                break;
            }
        }
        last
    };
    let probe = make(size)?;
    // Aim at `size` bytes of transcript whatever the format's overhead and escaping.
    let scaled = (size as f64 * size as f64 / probe.len().max(1) as f64) as usize;
    make(scaled.max(1))
}

/// How a benchmark consumes what a parser delivers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Consumer {
    /// Counts the bytes of text and argument fragments: what is measured is the parser alone.
    Count,
    /// Writes them to an output buffer that is sent (here emptied) every 64 KiB, as a server
    /// streaming to its client does.
    Forward,
    /// Collects owned `Event`s in a `Vec`, dropped after each feed.
    Collect,
}

/// Size of [`Consumer::Forward`]'s output buffer.
const OUT_BUF: usize = 1 << 16;

/// The sink of [`Consumer::Count`] and [`Consumer::Forward`].
struct BenchSink {
    forward: bool,
    buf: Vec<u8>,
    bytes: usize,
    events: usize,
}

impl Sink for BenchSink {
    fn push(&mut self, _event: Event) {
        self.events += 1;
    }

    #[inline]
    fn args_delta(&mut self, _index: usize, json: &str) {
        self.take(json);
    }

    #[inline]
    fn text(&mut self, text: &str) {
        self.take(text);
    }
}

impl BenchSink {
    #[inline]
    fn take(&mut self, s: &str) {
        self.bytes += s.len();
        if self.forward {
            for piece in s.as_bytes().chunks(OUT_BUF) {
                if self.buf.len() + piece.len() > OUT_BUF {
                    black_box(&self.buf);
                    self.buf.clear();
                }
                self.buf.extend_from_slice(piece);
            }
        }
    }
}

/// Feeds chunks to `p`, consuming what each feed delivers the way `how` says.
fn consume<'a>(
    p: &mut dyn StreamParser,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    how: Consumer,
) {
    if how == Consumer::Collect {
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out);
            black_box(&out);
            out.clear();
        }
        p.finish(&mut out);
        black_box(&out);
        return;
    }
    let mut sink = BenchSink {
        forward: how == Consumer::Forward,
        buf: Vec::with_capacity(OUT_BUF),
        bytes: 0,
        events: 0,
    };
    for c in chunks {
        p.feed(c, &mut sink);
    }
    p.finish(&mut sink);
    black_box((&sink.buf, sink.bytes, sink.events));
}

/// Nanoseconds per feed of `chunk` bytes, from a cost in seconds for `len` bytes.
fn per_feed(secs: f64, len: usize, chunk: usize) -> f64 {
    secs * 1e9 / len.div_ceil(chunk) as f64
}

/// A parser that only hands each chunk back as one argument fragment: what the contract costs
/// by itself (the call, the ASCII check every parser makes, the delivery).
#[derive(Default)]
struct Forward {
    utf8: Utf8Decoder,
}

impl StreamParser for Forward {
    fn feed(&mut self, chunk: &[u8], out: &mut dyn Sink) {
        self.utf8.feed(chunk, &mut |p| {
            if let Utf8Piece::Text(s) = p {
                out.args_delta(0, s);
            }
        });
    }

    fn finish(&mut self, _out: &mut dyn Sink) {}
}

/// Prints the cost of the streaming contract alone, the floor under every chunked figure.
fn delivery_floor(budget: Duration, chunk: usize, size: usize) {
    let data = content(size.min(10_000_000)).into_bytes();
    for (how, name) in [
        (Consumer::Count, "counted"),
        (Consumer::Forward, "forwarded"),
        (Consumer::Collect, "collected as owned events"),
    ] {
        let secs = time(budget, || {
            consume(&mut Forward::default(), data.chunks(chunk), how)
        });
        out!(
            "Delivery floor, {name}: a parser that only passes each {chunk}-byte chunk on as an \
             argument fragment costs {:.1} ns per feed ({:.2} ns/byte, {} MB/s).",
            per_feed(secs, data.len(), chunk),
            secs * 1e9 / data.len() as f64,
            mbps(data.len(), secs)
        );
    }
}

/// Seconds per run of `f`: the best batch average over the time budget.
fn time(budget: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let mut best = f64::MAX;
    let start = Instant::now();
    while start.elapsed() < budget || best == f64::MAX {
        let t = Instant::now();
        let mut n = 0u32;
        while t.elapsed() < budget / 5 || n == 0 {
            f();
            n += 1;
        }
        best = best.min(t.elapsed().as_secs_f64() / f64::from(n));
    }
    best
}

fn mbps(bytes: usize, secs: f64) -> String {
    format!("{:.0}", bytes as f64 / 1e6 / secs)
}

fn human(n: usize) -> String {
    match n {
        n if n >= 1_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.0} KB", n as f64 / 1e3),
        n => format!("{n} B"),
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .force_no_tty()
        .set_header(header.to_vec());
    t
}

/// Runs the benchmark and prints its tables.
pub fn run(a: BenchArgs) -> u8 {
    let budget = Duration::from_millis(a.millis.max(10));
    let tools = bench_tools();
    let chunk = a.chunk.max(1);
    let mut t = table(&[
        "format",
        "transcript",
        "whole MB/s",
        &format!("{chunk}-byte MB/s"),
        "chunked / whole",
        "ns per feed beyond whole",
        "forwarded: chunked / whole",
        "owned events: chunked / whole",
    ]);
    for f in formats::REGISTRY {
        if let Some(only) = &a.formats
            && !only.iter().any(|o| o == f.id)
        {
            continue;
        }
        for &size in SIZES.iter().filter(|&&s| s <= a.max_size) {
            let data = match transcript(f, &tools, size) {
                Ok(d) => d,
                Err(why) => {
                    err!("{}: skipped ({why})", f.id);
                    break;
                }
            };
            let mut check = (f.new_parser)(&tools);
            let events = run_chunks(check.as_mut(), data.chunks(chunk));
            let r = conform::event::ParseResult::fold(&events);
            if !r.errors.is_empty() || r.calls.len() != 1 {
                err!(
                    "{}: the benchmark transcript does not parse: {:?}",
                    f.id,
                    r.errors
                );
                return 1;
            }
            let cost = |size: usize, how| {
                time(budget, || {
                    let mut p = (f.new_parser)(&tools);
                    consume(p.as_mut(), data.chunks(size), how);
                })
            };
            let ratio = |how| cost(chunk, how) / cost(data.len(), how);
            let whole = cost(data.len(), Consumer::Count);
            let chunked = cost(chunk, Consumer::Count);
            let forwarded = ratio(Consumer::Forward);
            let owned = ratio(Consumer::Collect);
            t.add_row(vec![
                f.id.to_string(),
                human(data.len()),
                mbps(data.len(), whole),
                mbps(data.len(), chunked),
                format!("{:.2}×", chunked / whole),
                format!("{:.1}", per_feed(chunked - whole, data.len(), chunk)),
                format!("{forwarded:.2}×"),
                format!("{owned:.2}×"),
            ]);
        }
    }
    out!("Parsers (one call whose arguments hold a file of code, rendered by each format):");
    out!("{t}");
    delivery_floor(budget, chunk, a.max_size);
    if a.formats
        .as_ref()
        .is_none_or(|f| f.iter().any(|f| f == "openai_sse"))
    {
        openai_deltas_section(budget, &tools);
    }
    json_section(budget, chunk, a.no_baseline);
    0
}

/// An OpenAI Chat Completions stream whose one call carries `args` in deltas of `delta` bytes
/// of arguments each, as providers stream them.
fn openai_stream(args: &str, delta: usize) -> Vec<u8> {
    let chunk = |d: Value| {
        let c = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                       "model": "gpt-4o", "choices": [{"index": 0, "delta": d, "finish_reason": null}]});
        format!("data: {c}\n\n")
    };
    let mut s = chunk(json!({"role": "assistant", "content": null}));
    s.push_str(&chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_bench", "type": "function",
        "function": {"name": "write_to_file", "arguments": ""}}]}),
    ));
    for piece in fragments(args, delta) {
        s.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
        ));
    }
    let fin = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                     "model": "gpt-4o", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    s.push_str(&format!("data: {fin}\n\ndata: [DONE]\n\n"));
    s.into_bytes()
}

/// Issue 4's case: a 1 MB argument streamed as OpenAI deltas of 4 bytes of arguments each,
/// fed whole and in network-sized reads.
fn openai_deltas_section(budget: Duration, tools: &Tools) {
    let Some(f) = formats::by_id("openai_sse") else {
        return;
    };
    let args = json!({"path": "src/main.rs", "content": content(1_000_000)}).to_string();
    let stream = openai_stream(&args, 4);
    let mut check = (f.new_parser)(tools);
    let r = conform::event::ParseResult::fold(&run_chunks(check.as_mut(), [stream.as_slice()]));
    if !r.errors.is_empty() || r.calls.len() != 1 {
        err!(
            "openai_sse: the delta stream does not parse: {:?}",
            r.errors
        );
        return;
    }
    let mut t = table(&["feed", "stream", "stream MB/s", "argument MB/s", "time"]);
    for (name, size) in [
        ("whole stream", stream.len()),
        ("16 KiB reads", 16 * 1024),
        ("1460-byte TCP segments", 1460),
        ("one SSE event per read", 0),
    ] {
        let events: Vec<&[u8]> = if size == 0 {
            stream.split_inclusive(|&b| b == b'\n').collect()
        } else {
            stream.chunks(size).collect()
        };
        let secs = time(budget, || {
            let mut p = (f.new_parser)(tools);
            consume(p.as_mut(), events.iter().copied(), Consumer::Count);
        });
        t.add_row(vec![
            name.to_string(),
            human(stream.len()),
            mbps(stream.len(), secs),
            mbps(args.len(), secs),
            format!("{:.1} ms", secs * 1e3),
        ]);
    }
    out!(
        "openai_sse: a {} argument in {} deltas of 4 bytes each:",
        human(args.len()),
        args.len().div_ceil(4)
    );
    out!("{t}");
}

/// Cuts `s` into pieces of about `n` bytes at char boundaries.
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

fn ours(pieces: &[&str], p: &mut JsonParser) -> Option<Value> {
    p.reset();
    for piece in pieces {
        let _ = p.feed(piece);
    }
    p.finish().ok().flatten()
}

/// A deterministic mixed document of about 1 MB: nested objects, arrays, numbers, literals.
fn mixed() -> String {
    let mut n: u64 = 7;
    let mut items = Vec::new();
    let mut len = 0;
    while len < 1_000_000 {
        n = n
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let k = n >> 33;
        let item = json!({
            "id": k, "name": format!("item-{k}"), "price": (k % 100_000) as f64 / 100.0,
            "tags": ["a", "déf", format!("t{}", k % 13)], "ok": k.is_multiple_of(2), "none": null,
            "nested": {"xs": [k % 7, [1.5, {"deep": [true, false]}]], "note": "q \" b \\ n \n"}
        });
        len += item.to_string().len() + 1;
        items.push(item);
    }
    json!({ "items": items }).to_string()
}

fn json_section(budget: Duration, chunk: usize, no_baseline: bool) {
    let mut t = table(&[
        "arguments",
        "bytes",
        "serde_json Value MB/s",
        "ours build whole",
        &format!("ours build {chunk}-byte"),
        "ours validate whole",
        "ours / serde_json time",
    ]);
    let string_heavy = json!({"path": "src/main.rs", "content": content(100_000)}).to_string();
    let big = json!({"path": "src/main.rs", "content": content(1_000_000)}).to_string();
    for (name, doc) in [
        ("string-heavy 100 KB", string_heavy.clone()),
        ("string-heavy 1 MB", big),
        ("mixed 1 MB", mixed()),
    ] {
        let whole = [doc.as_str()];
        let pieces = fragments(&doc, chunk);
        let mut build = JsonParser::new(JsonConfig::default());
        let mut check = JsonParser::new(JsonConfig {
            build_value: false,
            ..JsonConfig::default()
        });
        let serde = time(budget, || {
            black_box(serde_json::from_str::<Value>(black_box(&doc)).ok());
        });
        let bw = time(budget, || {
            black_box(ours(&whole, &mut build));
        });
        let b4 = time(budget, || {
            black_box(ours(&pieces, &mut build));
        });
        let cw = time(budget, || {
            black_box(ours(&whole, &mut check));
        });
        t.add_row(vec![
            name.to_string(),
            doc.len().to_string(),
            mbps(doc.len(), serde),
            mbps(doc.len(), bw),
            mbps(doc.len(), b4),
            mbps(doc.len(), cw),
            format!("{:.2}×", bw / serde),
        ]);
    }
    out!("Incremental JSON against serde_json on complete input:");
    out!("{t}");
    if no_baseline {
        return;
    }
    // The field's approach: re-parse the accumulated arguments after every delta.
    let doc = string_heavy;
    let pieces = fragments(&doc, chunk);
    let start = Instant::now();
    let mut acc = String::new();
    for p in &pieces {
        acc.push_str(p);
        black_box(serde_json::from_str::<Value>(black_box(&acc)).ok());
    }
    let reparse = start.elapsed().as_secs_f64();
    let mut parser = JsonParser::new(JsonConfig::default());
    let ours_time = time(budget, || {
        black_box(ours(&pieces, &mut parser));
    });
    out!(
        "{} KB of arguments in {chunk}-byte deltas: re-parsing the accumulated text per delta (serde_json) {:.2} s; conform's incremental parser {:.3} ms ({:.0}× faster)",
        doc.len() / 1000,
        reparse,
        ours_time * 1e3,
        reparse / ours_time
    );
}
