//! Format-agnostic lexers: incremental JSON, streaming XML, SSE, and UTF-8 reassembly.
//!
//! Nothing here knows a tool-call format.

pub mod json;
pub mod markdown;
pub mod sse;
pub mod utf8;
pub mod xml;
