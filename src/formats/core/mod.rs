//! What every format shares, whatever its family: the contract a format fulfils
//! (`contract.rs`), a format declared by its data (`entry.rs`), options declared once (`config.rs`) and gathered into a settable table
//! (`options.rs`), the reasoning layer (`reasoning.rs`), typing by a tool's JSON Schema
//! (`typing.rs`), and the UTF-8 side of a text parser (`decoded.rs`).

pub mod config;
pub(crate) mod contract;
pub(crate) mod decoded;
pub(crate) mod entry;
pub mod options;
pub(crate) mod read_back;
pub mod reasoning;
pub mod request;
#[cfg(test)]
pub(crate) mod testkit;
pub mod typing;
