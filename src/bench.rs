//! `conform bench`: throughput of the parsers, whole and in small chunks.

use clap::Args;

/// Options of `conform bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Only sizes up to this many bytes (default: all of 1 KB, 100 KB, 1 MB, 10 MB).
    #[arg(long)]
    pub max_size: Option<usize>,
}

/// Runs the benchmark and prints a table.
pub fn run(_a: BenchArgs) -> u8 {
    eprintln!("bench: not yet");
    0
}
