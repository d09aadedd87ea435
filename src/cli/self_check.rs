//! `conform self-check`: the format-level invariants (cdata_split, type_inference) of a parser.

use super::{EXIT_FAIL, EXIT_OK, adapter_options, usage_error};
use conform::backends::AnyBackend;
use conform::backends::builtin::capture_panics;
use conform::formats;
use conform::harness::corpus;
use conform::harness::format_checks;
use std::time::Duration;

/// `conform self-check`.
pub(crate) fn run(only: Option<&str>, parser: &str, timeout: Duration) -> u8 {
    if let Some(f) = only
        && formats::by_id(f).is_none()
    {
        return usage_error(format!(
            "unknown format {f:?} (known: {})",
            corpus::known_formats()
        ));
    }
    let backend = match AnyBackend::start(parser, &adapter_options(None, timeout)) {
        Ok(b) => b,
        Err(e) => return usage_error(e),
    };
    capture_panics();
    let mut failed = false;
    for f in formats::REGISTRY
        .iter()
        .filter(|f| only.is_none_or(|o| o == f.id) && backend.backend().supports(f.id))
    {
        for r in format_checks::check_format(f, backend.backend()) {
            out!(
                "{:<28} {:<5} {} replay(s)",
                r.id,
                r.status.as_str(),
                r.replays
            );
            for v in &r.violations {
                failed = true;
                out!("  {}: {} (cuts {:?})", v.invariant, v.message, v.cuts);
            }
        }
    }
    if failed { EXIT_FAIL } else { EXIT_OK }
}
