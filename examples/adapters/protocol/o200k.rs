//! The o200k_base vocabulary without network, for the Rust adapters whose engines load it
//! through openai-harmony (the harmony reference, Dynamo's harmony parsers). Included by path
//! like `protocol.rs` beside it; it needs `tiktoken-rs` and `base64`.

use base64::Engine;
use std::path::{Path, PathBuf};

/// Points openai-harmony at an o200k_base.tiktoken written from tiktoken-rs's embedded
/// vocabulary into `dir`, so no download is attempted. The file is written once (through a
/// temporary name, so concurrent copies never read half a file) and reused by later runs.
pub fn provide_o200k(dir: &Path) -> Result<(), String> {
    let file = dir.join("o200k_base.tiktoken");
    if !file.exists() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let bpe = tiktoken_rs::o200k_base().map_err(|e| e.to_string())?;
        let mut text = String::new();
        for rank in 0..199_998u32 {
            let bytes = bpe
                .decode_bytes(&[rank])
                .map_err(|e| format!("rank {rank}: {e:?}"))?;
            text.push_str(&base64::engine::general_purpose::STANDARD.encode(bytes));
            text.push(' ');
            text.push_str(&rank.to_string());
            text.push('\n');
        }
        let tmp: PathBuf = dir.join(format!("o200k_base.tiktoken.{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &file).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    // SAFETY: called from main before any thread is started.
    unsafe { std::env::set_var("TIKTOKEN_ENCODINGS_BASE", dir) };
    Ok(())
}
