//! One module per wire format, each registered once in [`REGISTRY`] (`registry.rs`); the
//! contract a format fulfils is in `contract.rs`; a `Config`'s options are declared with
//! `config.rs`'s macro and gathered into a format's settable options by `options.rs`; most
//! formats declare their registry entry with `entry.rs`'s trait.
//!
//! A format knows the lexers and the event model; it never knows the harness.

pub mod config;
mod contract;
pub mod options;
pub mod registry;

pub use contract::{
    CdataProbe, Format, FormatOptions, OptionInfo, OptionValues, OptionsByFormat, RenderFn,
    SpecialToken, StreamParser, Typing, run_chunks,
};
pub use registry::{REGISTRY, by_id};

pub mod anthropic_sse;
mod decoded;
pub mod deepseek_v3;
pub mod deepseek_v31;
pub mod deepseek_v32;
pub mod delimited;
mod entry;
pub mod forge_json;
pub mod forge_xml;
pub mod glm45;
pub mod glm47;
pub mod harmony;
pub mod hermes;
pub mod kimi_k2;
pub mod llama3_json;
pub mod minimax_m2;
pub mod mistral;
pub mod mistral_v11;
pub mod openai_sse;
mod provider;
pub mod pythonic;
pub mod qwen3_coder;
pub mod reasoning;
pub mod roo_xml;
pub mod seed_oss;
#[cfg(feature = "schema")]
pub mod strict_xml;
pub mod tagged;
#[cfg(test)]
pub(crate) mod testkit;
pub mod typing;
mod xml_prose;
