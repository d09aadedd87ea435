//! Provider event streams: OpenAI Chat Completions and Anthropic Messages SSE, over the SSE
//! layer (`lexers::sse`) and what both providers share (`provider.rs`).

pub mod anthropic_sse;
pub mod openai_sse;
pub(crate) mod provider;
