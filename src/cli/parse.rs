//! `conform parse`: one transcript under one chunking, its events and folded result as JSON.

use super::{EXIT_FAIL, EXIT_OK, TokenArgs, adapter_options, count, seconds, usage_error};
use clap::Args;
use conform::backends::adapter::AdapterOptions;
use conform::backends::{AnyBackend, Outcome, ServingPath, adapter};
use conform::formats;
use conform::harness::chunking::Cuts;
use conform::harness::chunking::{ChunkingParams, Strategy};
use conform::harness::corpus::{self, LoadOptions};
use conform::harness::invariants::Compare;
use conform::harness::select::{Choice, Selection, select_cuts};
use conform::harness::{serving, session};
use std::time::Duration;

#[derive(Args)]
pub(crate) struct ParseArgs {
    /// The transcript file (`.txt`, `.jsonl` with --line, or `.session.json`).
    file: String,
    /// The format [default: from the directory name].
    #[arg(long)]
    format: Option<String>,
    /// The line id, for a `.jsonl` file.
    #[arg(long)]
    line: Option<String>,
    /// Cut offsets, comma-separated; for a session one list per turn separated by `/`.
    #[arg(long, conflicts_with_all = ["recorded", "strategy"])]
    cuts: Option<String>,
    /// Replay the case's recorded deltas (its `.deltas.json` sidecar).
    #[arg(long, conflicts_with = "strategy")]
    recorded: bool,
    /// Replay one chunking of this strategy, made as `conform run` makes it.
    #[arg(long)]
    strategy: Option<String>,
    /// Which chunking of --strategy, from 0.
    #[arg(long, default_value_t = 0, requires = "strategy", value_parser = count(0, 1 << 24))]
    chunking: usize,
    /// Attach token ids to --cuts or --recorded (every cut must be a token boundary).
    #[arg(long)]
    token_ids: bool,
    /// Master seed of the seeded strategies.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    tokens: TokenArgs,
    /// Print only the folded result, not every event.
    #[arg(long)]
    result_only: bool,
    /// The parser: `builtin` or `cmd:COMMAND`, as for `conform run` (an adapter's events are
    /// folded as they arrive: the result and any delta-contract breach are printed).
    #[arg(long, default_value = "builtin")]
    parser: String,
    /// Seconds an adapter may take to answer.
    #[arg(long, default_value = "10", value_parser = seconds)]
    timeout: Duration,
    /// Set an option of a built-in parser, `FORMAT.NAME=true|false` (repeatable; overrides
    /// the corpus directory's conform.toml; `conform formats --options` lists them).
    #[arg(long = "option", value_name = "FORMAT.NAME=BOOL")]
    options: Vec<String>,
    /// Set a request mode, `KEY=VALUE` (repeatable; overrides the case's and the directory's
    /// `[request]`), as `conform run --request` does.
    #[arg(long = "request", value_name = "KEY=VALUE")]
    requests: Vec<String>,
    /// The serving path of an adapter that declares paths: `batch` (its non-streaming
    /// parser) or `stream` (its streaming parser), as the `replay:` lines of a run name it.
    #[arg(long, value_name = "batch|stream")]
    path: Option<ServingPath>,
    /// Replay a roundtrip, as `conform run` checks it: parse the transcript whole, render the
    /// result as the model writes it (the format's renderer under the case's request), and
    /// replay that rendering instead (under --cuts, --strategy… as given); it is printed too.
    #[arg(long, conflicts_with = "recorded")]
    roundtrip: bool,
}

/// The case with each turn replaced by the rendering of what `parser` makes of it whole
/// (the input of a roundtrip replay), or why there is none.
fn rendered_case(
    case: &corpus::Case,
    format: &formats::Format,
    parser: &str,
    opts: &AdapterOptions,
    path: Option<ServingPath>,
) -> Result<corpus::Case, String> {
    let backend = AnyBackend::start(parser, opts)?;
    let whole: Vec<Cuts> = case.turns.iter().map(|_| Cuts::At(Vec::new())).collect();
    let turns = match backend.backend().replay_on(
        path,
        format,
        &case.tools,
        &case.options,
        &case.request,
        &case.turns,
        &whole,
    ) {
        Outcome::Done(turns) => turns,
        Outcome::Panicked(m) => return Err(format!("the parser panicked on the input: {m}")),
        Outcome::Broke(_, m) => return Err(format!("the parser broke on the input: {m}")),
        _ => return Err("the parser gave no result for the input".into()),
    };
    // Ids the wire does not carry are the parser's own: no model writes them.
    let cmp = if backend.backend().is_builtin() {
        Compare::ALL
    } else {
        Compare::EXTERNAL
    };
    let mut out = case.clone();
    for ((t, turn), data) in turns.iter().enumerate().zip(&case.turns) {
        let r = cmp.view(&turn.result, data).0;
        let rendered =
            formats::modes::render(format, &case.options, &case.request, &r, &case.tools)
                .map_err(|e| format!("turn {}: the renderer refuses: {e}", t + 1))?;
        out.turns[t] = rendered.bytes;
    }
    Ok(out)
}

fn parse_cuts(spec: &str) -> Result<Vec<Vec<usize>>, String> {
    spec.split('/')
        .map(|turn| {
            turn.split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    s.trim()
                        .parse::<usize>()
                        .map_err(|_| format!("invalid cut offset {s:?}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|mut v| {
                    v.sort_unstable();
                    v.dedup();
                    v
                })
        })
        .collect()
}

/// `conform parse`.
pub(crate) fn run(a: ParseArgs) -> u8 {
    let options = match formats::registry::from_assignments(&a.options) {
        Ok(o) => o,
        Err(e) => return usage_error(e),
    };
    let request = match super::run::request_of(&a.requests) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let corpus = corpus::load(
        std::slice::from_ref(&a.file),
        &LoadOptions {
            format: a.format.clone(),
            options,
            request,
        },
    );
    if let Some(e) = corpus.errors.first() {
        return usage_error(e);
    }
    let case = match (&a.line, corpus.cases.as_slice()) {
        (None, [one]) => one,
        (Some(id), cases) => match cases.iter().find(|c| c.line_id.as_deref() == Some(id)) {
            Some(c) => c,
            None => return usage_error(format!("no line with id {id:?} in {}", a.file)),
        },
        (None, []) => return usage_error(format!("{} holds no case", a.file)),
        (None, _) => {
            return usage_error(format!(
                "{} holds several cases: choose one with --line",
                a.file
            ));
        }
    };
    let choice = match (&a.strategy, a.recorded, a.cuts.as_deref()) {
        (Some(s), _, _) => match s.parse::<Strategy>() {
            Ok(strategy) => Choice::Strategy {
                strategy,
                index: a.chunking,
            },
            Err(e) => return usage_error(e),
        },
        (None, true, _) => Choice::Recorded,
        (None, false, cuts) => match cuts.map(parse_cuts).transpose() {
            Ok(c) => Choice::Cuts(c.unwrap_or_default()),
            Err(e) => return usage_error(e),
        },
    };
    let tokenizer = match a.tokens.load() {
        Ok(t) => t,
        Err(e) => return usage_error(e),
    };
    let selection = Selection {
        choice,
        params: ChunkingParams {
            seed: a.seed,
            bursts: a.tokens.bursts,
            burst_max_tokens: a.tokens.burst_max_tokens,
            ..ChunkingParams::default()
        },
        tokenizer,
        token_ids: a.token_ids,
    };
    let Some(format) = formats::by_id(case.format) else {
        return usage_error(format!("unknown format {}", case.format));
    };
    // An external parser gets what a server hands it: each turn up to its stop token.
    let served = (a.parser != "builtin")
        .then(|| serving::served_case(case, format))
        .flatten();
    let case = served.as_ref().unwrap_or(case);
    let opts = adapter_options(None, a.timeout);
    let rendered = if a.roundtrip {
        if let Err(e) = adapter::parse_parser_spec(&a.parser) {
            return usage_error(e);
        }
        match rendered_case(case, format, &a.parser, &opts, a.path) {
            Ok(r) => Some(r),
            Err(e) => return usage_error(e),
        }
    } else {
        None
    };
    let case = rendered.as_ref().unwrap_or(case);
    // The format's vocabulary, loaded and checked here so that a bad file is an error naming
    // it rather than a quiet fallback.
    let needs_tokens = selection.token_ids
        || matches!(selection.choice, Choice::Strategy { strategy, .. } if strategy.token_aligned());
    if needs_tokens
        && selection.tokenizer.is_none()
        && let Err(e) = conform::harness::vocab::for_format(format)
    {
        return usage_error(e);
    }
    let cuts = match select_cuts(case, format, &selection) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    if let Err(e) = adapter::parse_parser_spec(&a.parser) {
        return usage_error(e);
    }
    match session::parse_one(case, &a.parser, &opts, &cuts, !a.result_only, a.path) {
        Ok((mut doc, ok)) => {
            if a.roundtrip {
                let texts: Vec<String> = case
                    .turns
                    .iter()
                    .map(|t| String::from_utf8_lossy(t).into_owned())
                    .collect();
                doc.insert("rendered", serde_json::json!(texts));
            }
            // Written as it is serialized: the document of a recording of millions of deltas
            // is never held whole as text.
            let mut w = std::io::BufWriter::with_capacity(1 << 16, crate::cli::Stdout);
            let _ = serde_json::to_writer_pretty(&mut w, &doc);
            let _ = std::io::Write::write_all(&mut w, b"\n");
            let _ = std::io::Write::flush(&mut w);
            if ok { EXIT_OK } else { EXIT_FAIL }
        }
        Err(e) => usage_error(e),
    }
}
