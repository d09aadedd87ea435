//! The `conform` command line: parses the arguments and hands the subcommand to `cli`.

mod cli;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // A panic outside a replay is a bug: its message is printed even once the replay hook
    // (which keeps messages for the replay's report) is installed.
    let code = std::panic::catch_unwind(|| cli::dispatch(cli.command)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        eprintln!("error: conform panicked (a bug; please report it): {msg}");
        101
    });
    // Output that did not reach stdout (a full disk, a closed pipe) fails the command.
    let flushed = std::io::stdout().flush();
    match cli::STDOUT_ERROR
        .get()
        .map(|e| e.to_string())
        .or(flushed.err().map(|e| e.to_string()))
    {
        Some(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            ExitCode::from(cli::EXIT_USAGE)
        }
        None => ExitCode::from(code),
    }
}
