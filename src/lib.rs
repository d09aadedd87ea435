//! conform: reference streaming parsers for LLM tool-call formats, and a harness that replays
//! corpora under many chunkings to find the bugs in parsers.
//!
//! Data flows one way: [`lexers`] → [`formats`] → [`backends`] → [`harness`] → [`outputs`]; the CLI sits on top.

#![deny(missing_docs)]

#[cfg(feature = "cli")]
pub mod backends;
pub mod event;
pub mod formats;
#[cfg(feature = "cli")]
pub mod harness;
pub mod lexers;
#[cfg(feature = "cli")]
pub mod outputs;
pub mod tools;
