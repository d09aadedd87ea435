//! `conform report diff|merge|render|html`: work on saved reports.

use super::{EXIT_FAIL, EXIT_OK, Stdout, usage_error};
use clap::Subcommand;
use conform::harness::report;
use conform::outputs::table::{self, Colour};
use conform::outputs::{html, report_dir};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(Subcommand)]
pub(crate) enum ReportCommand {
    /// Compare two reports case by case and per format (exit 1 on regressions).
    Diff {
        /// The earlier report.json.
        old: PathBuf,
        /// The later report.json.
        new: PathBuf,
    },
    /// Merge shard reports into the report an unsharded run would write (every parser kept;
    /// a missing shard, a shard twice or a shard of another corpus is refused).
    Merge {
        /// The shard reports.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Where to write the merged report.json.
        #[arg(short, long)]
        output: PathBuf,
        /// Merge even when shards are missing: the report then says which it holds.
        #[arg(long)]
        partial: bool,
    },
    /// Write report.md and junit.xml (and report.json) for a saved report into a directory.
    Render {
        /// The report.json.
        report: PathBuf,
        /// The directory to write into.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Write a self-contained HTML page (rates over time, current failures) to DIR/index.html.
    Html {
        /// report.json files, or directories searched for report.json files (a history).
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// The directory to write index.html into.
        #[arg(short, long)]
        output: PathBuf,
    },
}

/// `conform report …`: work on saved reports.
pub(crate) fn run(c: ReportCommand) -> u8 {
    match c {
        ReportCommand::Diff { old, new } => {
            let (old, new) = match (report_dir::read(&old), report_dir::read(&new)) {
                (Ok(o), Ok(n)) => (o, n),
                (Err(e), _) | (_, Err(e)) => return usage_error(e),
            };
            let c = report::compare(&old, &new);
            let colour = Colour::detect(std::io::stdout().is_terminal());
            let text = table::comparison(&c, colour);
            if text.is_empty() {
                out!("no differences in case statuses or rates");
            } else {
                let _ = write!(Stdout, "{text}");
            }
            if c.regressions.is_empty() {
                EXIT_OK
            } else {
                EXIT_FAIL
            }
        }
        ReportCommand::Merge {
            reports,
            output,
            partial,
        } => {
            let mut parts = Vec::new();
            for p in &reports {
                match report_dir::read(p) {
                    Ok(r) => parts.push(r),
                    Err(e) => return usage_error(e),
                }
            }
            let names: Vec<String> = reports.iter().map(|p| p.display().to_string()).collect();
            match report::merge(&parts, &names, partial) {
                Ok(m) => match report_dir::write_atomic(&output, m.to_json().as_bytes()) {
                    Ok(()) => {
                        err!(
                            "merged {} report(s) into {} ({} case(s))",
                            parts.len(),
                            output.display(),
                            m.corpus.cases
                        );
                        if let Some(p) = &m.partial {
                            err!(
                                "warning: a partial merge of {}: the cases of the missing \
                                 shards were not judged, and the report says so",
                                p.describe()
                            );
                        }
                        EXIT_OK
                    }
                    Err(e) => usage_error(e),
                },
                Err(e) => usage_error(e),
            }
        }
        ReportCommand::Render {
            report: path,
            output,
        } => match report_dir::read(&path) {
            Ok(r) => match report_dir::prepare(&output)
                .and_then(|locked| report_dir::write_reports(&locked, &r, None))
            {
                Ok(()) => EXIT_OK,
                Err(e) => usage_error(e),
            },
            Err(e) => usage_error(e),
        },
        ReportCommand::Html { reports, output } => {
            let written = html::collect(&reports).and_then(|history| {
                report_dir::write_atomic(
                    &output.join("index.html"),
                    html::render(&history).as_bytes(),
                )
                .map(|()| history.len())
            });
            match written {
                Ok(n) => {
                    err!(
                        "wrote {} from {n} report(s)",
                        output.join("index.html").display()
                    );
                    EXIT_OK
                }
                Err(e) => usage_error(e),
            }
        }
    }
}
