//! Writes o200k_base's ordinary tokens in conform's compact form to `OUT_DIR/o200k.bin`, which
//! `src/harness/tokens.rs` embeds (`docs/performance.md`, "Memory").
//!
//! tiktoken-rs stays the source of the ranks, but building its `CoreBPE` at run time to read
//! them peaked at ~60 MiB while a transcript was loaded; here it is built once, at build time.
//! The file is, per token in rank order: its rank (u32 LE), its length (u16 LE), its bytes.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(feature = "cli")]
    o200k();
}

#[cfg(feature = "cli")]
fn o200k() {
    use std::path::PathBuf;
    // o200k_base's special tokens: tiktoken-rs decodes them to their text, but they are no
    // ordinary token.
    const SPECIAL: [u32; 2] = [199_999, 200_018];
    let bpe = tiktoken_rs::o200k_base().expect("tiktoken-rs's embedded o200k_base");
    let mut out = Vec::with_capacity(4 << 20);
    // The ordinary ranks are 0, 1, … up to the first the vocabulary does not have.
    for rank in 0..(1u32 << 22) {
        if SPECIAL.contains(&rank) {
            continue;
        }
        let Ok(bytes) = bpe.decode_bytes(&[rank]) else {
            break;
        };
        let len = u16::try_from(bytes.len()).expect("an o200k token is under 64 KiB");
        out.extend_from_slice(&rank.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&bytes);
    }
    let dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(dir.join("o200k.bin"), out).expect("OUT_DIR is writable");
}
