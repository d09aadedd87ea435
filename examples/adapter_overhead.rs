//! Requests per second through the adapter pipe, for a trivial adapter that echoes the text.
//!
//! `cargo run --release --example adapter_overhead [-- 'cmd:python3 tests/adapters/echo.py']`

use conform::backends::adapter::{Adapter, AdapterOptions, ParserSpec, parse_parser_spec};
use conform::backends::{Backend, Outcome};
use conform::formats;
use conform::harness::chunking::Cuts;
use conform::tools::Tools;
use rayon::prelude::*;
use std::time::{Duration, Instant};

fn main() {
    let spec = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "cmd:python3 tests/adapters/echo.py".into());
    let Ok(ParserSpec::Command(argv)) = parse_parser_spec(&spec) else {
        eprintln!("expected cmd:COMMAND, got {spec:?}");
        std::process::exit(2);
    };
    let format = formats::by_id("kimi_k2").expect("kimi_k2 is registered");
    let tools = Tools::default();
    let transcript = "The quick brown fox jumps over the lazy dog. "
        .repeat(23)
        .into_bytes(); // ~1 KB
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("adapter: {spec}; transcript {} bytes", transcript.len());
    for jobs in [1, cores] {
        let opts = AdapterOptions {
            jobs,
            timeout: Duration::from_secs(10),
            ..AdapterOptions::default()
        };
        let adapter = match Adapter::start(&spec, argv.clone(), opts) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        };
        for (label, cuts) in [
            ("whole", Cuts::At(Vec::new())),
            (
                "16-byte chunks",
                Cuts::At((16..transcript.len()).step_by(16).collect()),
            ),
            ("every byte", Cuts::EveryByte),
        ] {
            let n = 4000;
            let turns = std::slice::from_ref(&transcript);
            let cuts = std::slice::from_ref(&cuts);
            let run = |_| match adapter.replay(
                format,
                &tools,
                &Default::default(),
                &Default::default(),
                turns,
                cuts,
            ) {
                Outcome::Done(_) => {}
                other => panic!("the adapter failed: {other:?}"),
            };
            (0..200).into_par_iter().for_each(run); // warm-up: start every child
            let t = Instant::now();
            (0..n).into_par_iter().for_each(run);
            let secs = t.elapsed().as_secs_f64();
            println!(
                "jobs {jobs}: {label:>15}: {:>7.0} requests/s ({:.0} µs each)",
                n as f64 / secs,
                secs * 1e6 / n as f64
            );
        }
    }
}
