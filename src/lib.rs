//! conform: reference streaming parsers for LLM tool-call formats, and a harness that replays
//! corpora under many chunkings to find the bugs in parsers.
//!
//! Data flows one way: [`lexers`] → [`formats`] → `backends` → `harness` → `outputs`; the CLI
//! sits on top. The last three and the CLI need the default `cli` feature; without it
//! (`default-features = false`) the crate is the parser layer alone: the lexers, the formats,
//! the event model ([`event`]) and tool definitions ([`tools`]). The strict_xml format
//! validates calls against JSON Schemas and comes with the `schema` feature (part of `cli`).
//!
//! # Streaming one transcript
//!
//! A server feeds each delta it decodes to the format's parser as it arrives; the parser emits
//! events as soon as they are certain, whatever the cuts (`specs/streaming.md`):
//!
//! ```
//! use conform::event::{Event, ParseResult};
//! use conform::formats;
//! use conform::tools::Tools;
//!
//! let format = formats::by_id("kimi_k2").expect("a registered format");
//! let tools = Tools::default(); // kimi_k2 names its tools itself: no definitions needed
//! let mut parser = (format.new_parser)(&tools);
//!
//! let transcript = "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0\
//!     <|tool_call_argument_begin|>{\"path\": \"src/main.rs\"}<|tool_call_end|>\
//!     <|tool_calls_section_end|>";
//! let mut events = Vec::new();
//! // Deltas of 7 bytes: cuts fall inside the special tokens and the JSON.
//! for delta in transcript.as_bytes().chunks(7) {
//!     let before = events.len();
//!     parser.feed(delta, &mut events);
//!     for event in &events[before..] {
//!         match event {
//!             Event::CallStart { index, name, .. } => println!("call {index}: {name}"),
//!             Event::ArgsDelta { index, json } => println!("call {index} arguments += {json}"),
//!             Event::CallEnd { index } => println!("call {index} complete"),
//!             _ => {}
//!         }
//!     }
//! }
//! parser.finish(&mut events);
//!
//! // The fold is what the deltas add up to.
//! let result = ParseResult::fold(&events);
//! assert!(result.is_success());
//! assert_eq!(result.text, "Checking.");
//! for call in &result.calls {
//!     println!("{}({})", call.name, call.arguments);
//! }
//! assert_eq!(result.calls[0].name, "read_file");
//! assert_eq!(result.calls[0].arguments["path"], "src/main.rs");
//! ```
//!
//! A server that forwards deltas without building an event list implements [`event::Sink`]
//! itself; `examples/server_loop.rs` turns the events into OpenAI-style `tool_calls` deltas.

#![deny(missing_docs)]

#[cfg(feature = "cli")]
pub mod backends;
pub mod event;
pub mod formats;
#[cfg(feature = "cli")]
pub mod harness;
pub mod lexers;
mod names;
#[cfg(feature = "cli")]
pub mod outputs;
pub mod tools;
