//! Every wire format, grouped by family; the tree is the architecture:
//!
//! - `core/`: what all formats share — the contract (`StreamParser`, `Format`), options, the
//!   reasoning layer, schema typing;
//! - `delimited/`: JSON (or a Python call list) between special markers, one driver;
//! - `tagged/`: parameters as tagged raw text typed by the tool's schema, one parser;
//! - `xml/`: XML inside prose, over the streaming XML tokenizer;
//! - `sse/`: provider event streams;
//! - `gemma/`: Gemma's `call:NAME{…}` calls with token-quoted arguments, one parser;
//! - a file of its own for a format with a grammar of its own (`harmony.rs`, `kimi_k3.rs`);
//! - `registry.rs`: every format, registered once ([`REGISTRY`]), above the families.
//!
//! Each format module stays reachable as `formats::<id>` (re-exported below). A format knows
//! the lexers and the event model; it never knows the harness.

pub mod core;
pub mod delimited;
pub mod gemma;
pub mod harmony;
pub mod kimi_k3;
pub mod modes;
pub mod muse_glimmer;
pub mod registry;
pub mod sse;
pub mod tagged;
pub mod xml;

pub use self::core::contract::{
    CdataProbe, Format, FormatOptions, OptionInfo, OptionValues, OptionsByFormat, RenderFn,
    SpecialToken, StreamParser, Typing, fold_chunks, run_chunks,
};
pub use self::core::read_back::{ReadBack, read_back};
pub use self::core::{config, options, reasoning, request, typing};
pub use delimited::{
    apertus, deepseek_v3, deepseek_v31, granite4, hermes, kimi_k2, llama3_json, mistral,
    mistral_v11, olmo3, pythonic, xlam,
};
pub use gemma::{functiongemma, gemma4};
pub use registry::{REGISTRY, by_id};
pub use sse::{anthropic_sse, openai_sse};
pub use tagged::{
    deepseek_v4, deepseek_v32, deepseek_v41, glm45, glm47, minimax_m2, minimax_m3, qwen3_coder,
    seed_oss, step3,
};
#[cfg(feature = "schema")]
pub use xml::strict_xml;
pub use xml::{forge_json, forge_xml, roo_xml};
