//! Embeds every `corpus/<format>/tools.json` so the `parse` target gives each format the tool
//! definitions its corpus uses, also where the source tree is not at hand (ClusterFuzzLite).

use std::fmt::Write;
use std::path::Path;

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    println!("cargo::rerun-if-changed={}", corpus.display());
    let mut entries: Vec<(String, String)> = Vec::new();
    if let Ok(dirs) = std::fs::read_dir(&corpus) {
        for d in dirs.flatten() {
            let tools = d.path().join("tools.json");
            println!("cargo::rerun-if-changed={}", tools.display());
            if let Ok(text) = std::fs::read_to_string(&tools) {
                entries.push((d.file_name().to_string_lossy().into_owned(), text));
            }
        }
    }
    entries.sort();
    let mut out = String::from("/// (format id, tools.json) of every corpus directory.\n");
    out.push_str("pub static CORPUS_TOOLS: &[(&str, &str)] = &[\n");
    for (id, text) in entries {
        let _ = writeln!(out, "    ({id:?}, {text:?}),");
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("tools.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}
