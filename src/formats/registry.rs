//! The registry: every format once, in a fixed order, and lookup by id.

use super::{
    Format, anthropic_sse, deepseek_v3, deepseek_v31, deepseek_v32, forge_json, forge_xml, glm45,
    glm47, harmony, hermes, kimi_k2, llama3_json, minimax_m2, mistral, mistral_v11, openai_sse,
    pythonic, qwen3_coder, roo_xml, seed_oss, strict_xml,
};

/// Every format, in a fixed order. Adding a format is one module and one line here.
pub static REGISTRY: &[&Format] = &[
    &kimi_k2::FORMAT,
    &openai_sse::FORMAT,
    &anthropic_sse::FORMAT,
    &roo_xml::FORMAT,
    &strict_xml::FORMAT,
    &forge_xml::FORMAT,
    &forge_json::FORMAT,
    // harmony before the later families: fuzz seeds name formats by registry position.
    &harmony::FORMAT,
    &hermes::FORMAT,
    &deepseek_v3::FORMAT,
    &deepseek_v31::FORMAT,
    &llama3_json::FORMAT,
    &mistral::FORMAT,
    &mistral_v11::FORMAT,
    &pythonic::FORMAT,
    &qwen3_coder::FORMAT,
    &seed_oss::FORMAT,
    &glm45::FORMAT,
    &glm47::FORMAT,
    &minimax_m2::FORMAT,
    &deepseek_v32::FORMAT,
];

/// Looks a format up by id.
pub fn by_id(id: &str) -> Option<&'static Format> {
    REGISTRY.iter().copied().find(|f| f.id == id)
}
