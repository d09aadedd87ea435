//! A server-side loop: the model's decoded deltas go into a conform parser, OpenAI-style
//! `chat.completion.chunk` deltas come out, one JSON line per input delta that produced
//! something: `content`, `reasoning_content`, and `tool_calls` entries carrying the call's
//! `index`, then its `id`, `type` and `function.name` once, then `function.arguments` fragments.
//! A last chunk carries the `finish_reason`. Errors and warnings of the parser go to stderr.
//!
//! ```text
//! cargo run --example server_loop --no-default-features [-- [FORMAT [FILE|-] [DELTA_BYTES]]]
//! ```
//!
//! Defaults: `kimi_k2`, a transcript of the bundled corpus, 5-byte deltas. `-` reads stdin.
//! The tool definitions are the `tools.json` beside FILE, if any (none for stdin).

use conform::event::{Event, Sink};
use conform::formats::{self, StreamParser};
use conform::tools::Tools;
use serde_json::{Map, Value, json};
use std::io::{self, Read, Write};
use std::path::Path;
use std::process::ExitCode;

/// The transcript served when no FILE is given.
const DEFAULT_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/corpus/kimi_k2/y_section_two_sections.txt"
);

/// Collects what one input delta produced and writes it as one chunk: a server sends a chunk
/// per decoded delta, so argument fragments of the same call within it are joined.
struct ChunkWriter<W: Write> {
    out: W,
    content: String,
    reasoning: String,
    tool_calls: Vec<Value>,
    /// Calls started so far: a turn with calls finishes with `tool_calls`.
    calls: usize,
    /// Errors the parser reported, for the exit code.
    errors: usize,
}

impl<W: Write> Sink for ChunkWriter<W> {
    fn push(&mut self, event: Event) {
        match event {
            Event::Text { text } => self.text(&text),
            Event::Reasoning { text } => self.reasoning(&text),
            Event::ArgsDelta { index, json } => self.args_delta(index, &json),
            Event::CallStart {
                index, id, name, ..
            } => {
                self.calls += 1;
                // OpenAI clients need an id on the first delta: the server makes one where the
                // wire carries none (the parser never invents one).
                let id = id.unwrap_or_else(|| format!("call_{index}"));
                self.tool_calls.push(json!({
                    "index": index,
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }));
            }
            Event::Error { kind, message } => {
                self.errors += 1;
                eprintln!("error {kind}: {message}");
            }
            Event::Warning { message, .. } => eprintln!("warning: {message}"),
            // A call's end has no delta of its own; kinds added later carry nothing to forward.
            _ => {}
        }
    }

    fn args_delta(&mut self, index: usize, json: &str) {
        if let Some(last) = self.tool_calls.last_mut()
            && last["index"] == index
            && let Some(Value::String(args)) = last.pointer_mut("/function/arguments")
        {
            args.push_str(json);
            return;
        }
        self.tool_calls
            .push(json!({"index": index, "function": {"arguments": json}}));
    }

    fn text(&mut self, text: &str) {
        self.content.push_str(text);
    }

    fn reasoning(&mut self, text: &str) {
        self.reasoning.push_str(text);
    }
}

impl<W: Write> ChunkWriter<W> {
    fn new(out: W) -> Self {
        ChunkWriter {
            out,
            content: String::new(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            calls: 0,
            errors: 0,
        }
    }

    /// Writes the chunk of what was collected since the last one, if anything was.
    fn flush_chunk(&mut self) -> io::Result<()> {
        let mut delta = Map::new();
        if !self.content.is_empty() {
            delta.insert("content".into(), std::mem::take(&mut self.content).into());
        }
        if !self.reasoning.is_empty() {
            let reasoning = std::mem::take(&mut self.reasoning);
            delta.insert("reasoning_content".into(), reasoning.into());
        }
        if !self.tool_calls.is_empty() {
            let calls = std::mem::take(&mut self.tool_calls);
            delta.insert("tool_calls".into(), calls.into());
        }
        if delta.is_empty() {
            return Ok(());
        }
        self.write_chunk(Value::Object(delta), Value::Null)
    }

    fn write_chunk(&mut self, delta: Value, finish_reason: Value) -> io::Result<()> {
        let chunk = json!({
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        writeln!(self.out, "{chunk}")
    }
}

/// Serves one turn: every delta through the parser, a chunk per delta, then the finish chunk.
/// Returns the number of errors the parser reported.
fn serve<'a>(
    parser: &mut dyn StreamParser,
    deltas: impl IntoIterator<Item = &'a [u8]>,
    out: impl Write,
) -> io::Result<usize> {
    let mut w = ChunkWriter::new(out);
    for delta in deltas {
        parser.feed(delta, &mut w);
        w.flush_chunk()?;
    }
    parser.finish(&mut w);
    w.flush_chunk()?;
    let reason = if w.calls > 0 { "tool_calls" } else { "stop" };
    w.write_chunk(json!({}), reason.into())?;
    w.out.flush()?;
    Ok(w.errors)
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("server_loop: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<usize, String> {
    let id = args.first().map_or("kimi_k2", String::as_str);
    let file = args.get(1).map_or(DEFAULT_FILE, String::as_str);
    let size: usize = match args.get(2) {
        Some(n) => n
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or("DELTA_BYTES must be a positive integer")?,
        None => 5,
    };
    let format = formats::by_id(id).ok_or_else(|| format!("no format {id:?}"))?;
    let (transcript, tools) = if file == "-" {
        let mut bytes = Vec::new();
        io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| format!("stdin: {e}"))?;
        (bytes, Tools::default())
    } else {
        let bytes = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
        let tools_file = Path::new(file).with_file_name("tools.json");
        let tools = match std::fs::read_to_string(&tools_file) {
            Ok(text) => Tools::from_json(&text).map_err(|e| format!("{tools_file:?}: {e}"))?,
            Err(_) => Tools::default(),
        };
        (bytes, tools)
    };
    let mut parser = (format.new_parser)(&tools);
    serve(
        parser.as_mut(),
        transcript.chunks(size),
        io::stdout().lock(),
    )
    .map_err(|e| format!("stdout: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform::event::ParseResult;

    /// One call as a client assembles it from the chunks.
    #[derive(Debug, Default)]
    struct Assembled {
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    }

    /// Runs the loop and reassembles the stream as an OpenAI client does; checks each chunk's
    /// shape on the way (id and name once, on the call's first delta; one finish chunk, last).
    fn client_view(
        format: &formats::Format,
        tools: &Tools,
        transcript: &[u8],
        size: usize,
    ) -> (String, Vec<Assembled>, String) {
        let mut out = Vec::new();
        let mut parser = (format.new_parser)(tools);
        serve(parser.as_mut(), transcript.chunks(size), &mut out).unwrap();
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let (last, chunks) = lines.split_last().expect("a finish chunk");
        let finish = last["choices"][0]["finish_reason"]
            .as_str()
            .unwrap()
            .to_owned();
        let (mut content, mut calls) = (String::new(), Vec::<Assembled>::new());
        for chunk in chunks {
            let choice = &chunk["choices"][0];
            assert!(choice["finish_reason"].is_null(), "{chunk}");
            let delta = choice["delta"].as_object().unwrap();
            assert!(!delta.is_empty(), "an empty chunk: {chunk}");
            content += delta.get("content").and_then(Value::as_str).unwrap_or("");
            for tc in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = tc["index"].as_u64().unwrap() as usize;
                if index == calls.len() {
                    calls.push(Assembled::default());
                }
                let call = &mut calls[index];
                if let Some(name) = tc["function"]["name"].as_str() {
                    assert!(call.name.is_none(), "a second name: {chunk}");
                    call.name = Some(name.to_owned());
                    call.id = tc["id"].as_str().map(str::to_owned);
                }
                assert!(call.name.is_some(), "arguments before the name: {chunk}");
                call.arguments += tc["function"]["arguments"].as_str().unwrap();
            }
        }
        (content, calls, finish)
    }

    #[test]
    fn the_default_transcript_streams_two_calls() {
        let format = formats::by_id("kimi_k2").unwrap();
        let transcript = std::fs::read(DEFAULT_FILE).unwrap();
        let (content, calls, finish) = client_view(format, &Tools::default(), &transcript, 5);
        assert_eq!(content, "First the config.\nNow the lock file.\n");
        assert_eq!(finish, "tool_calls");
        let got: Vec<_> = calls
            .iter()
            .map(|c| (c.id.as_deref(), c.name.as_deref(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Some("0"),
                    Some("read_file"),
                    r#"{"filePath": "config.toml"}"#
                ),
                (
                    Some("1"),
                    Some("read_file"),
                    r#"{"filePath": "Cargo.lock"}"#
                ),
            ]
        );
    }

    #[test]
    fn text_alone_finishes_with_stop() {
        let format = formats::by_id("kimi_k2").unwrap();
        let (content, calls, finish) = client_view(format, &Tools::default(), b"Hello.", 2);
        assert_eq!(
            (content.as_str(), calls.len(), finish.as_str()),
            ("Hello.", 0, "stop")
        );
    }

    /// Every format, every `y_` transcript of its corpus, several delta sizes: what a client
    /// assembles from the chunks is what the parser's events fold to.
    #[test]
    fn chunks_add_up_to_the_parse_for_every_corpus_transcript() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
        let mut checked = 0;
        for format in formats::REGISTRY {
            let dir = root.join(format.id);
            let tools = std::fs::read_to_string(dir.join("tools.json"))
                .map(|t| Tools::from_json(&t).unwrap())
                .unwrap_or_default();
            let mut files: Vec<_> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().unwrap().to_string_lossy();
                    name.starts_with("y_") && name.ends_with(".txt")
                })
                .collect();
            files.sort();
            for file in files {
                let transcript = std::fs::read(&file).unwrap();
                let mut parser = (format.new_parser)(&tools);
                let whole =
                    ParseResult::fold(&formats::run_chunks(parser.as_mut(), [&transcript[..]]));
                if !whole.is_success() {
                    // The stream forwards a call's start before an error can drop it from
                    // the fold: only clean parses add up (the harness judges the rest).
                    continue;
                }
                // 1-byte deltas only where a line per byte stays cheap in a debug build.
                let tiny = if transcript.len() <= 2048 { 1 } else { 61 };
                for size in [tiny, 7, transcript.len().max(1)] {
                    let (content, calls, finish) = client_view(format, &tools, &transcript, size);
                    let at = format!("{} at {size}-byte deltas", file.display());
                    assert_eq!(content, whole.text, "{at}");
                    assert_eq!(calls.len(), whole.calls.len(), "{at}");
                    for (i, (got, want)) in calls.iter().zip(&whole.calls).enumerate() {
                        assert_eq!(got.name.as_deref(), Some(want.name.as_str()), "{at}");
                        let id = want.id.clone().unwrap_or_else(|| format!("call_{i}"));
                        assert_eq!(got.id.as_deref(), Some(id.as_str()), "{at}");
                        let args: Value = serde_json::from_str(&got.arguments).unwrap();
                        assert_eq!(args, want.arguments, "{at}");
                    }
                    let reason = if calls.is_empty() {
                        "stop"
                    } else {
                        "tool_calls"
                    };
                    assert_eq!(finish, reason, "{at}");
                }
                checked += 1;
            }
        }
        assert!(checked > 100, "only {checked} transcripts found");
    }
}
