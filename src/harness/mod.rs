//! Corpus loading, chunkings, replay, invariants and minimization.
//!
//! The harness knows formats only through the registry: it never names one.

pub mod bpe;
pub mod bugs;
pub mod chunking;
pub mod classify;
pub mod corpus;
pub mod digest;
pub mod files;
pub mod format_checks;
pub mod invariants;
pub mod judged;
pub mod known;
pub mod minimize;
pub mod parsers;
pub mod ranks;
pub mod report;
pub mod run;
pub mod select;
pub mod serving;
pub mod session;
pub mod tokens;
pub mod vocab;
