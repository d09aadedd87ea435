//! The `conform` command line: parses the arguments and hands the subcommand to `cli`.

#[macro_use]
mod cli;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

/// Large blocks go back to the system when freed. glibc otherwise raises its mmap threshold
/// each time a large block is freed (up to 32 MiB), after which blocks of that size come from
/// the heap arenas of rayon's threads and stay resident once freed: a run over a 10 MB
/// transcript kept 1.5× more memory resident than it used.
fn return_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

fn main() -> ExitCode {
    return_large_blocks();
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // Help and version go to stdout, errors to stderr; either may be full or closed.
            let to = if e.use_stderr() { "stderr" } else { "stdout" };
            let printed = e.print().and_then(|()| std::io::stdout().flush());
            return match printed {
                Ok(()) => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(cli::EXIT_USAGE)),
                Err(w) => {
                    let _ = writeln!(std::io::stderr(), "error: cannot write to {to}: {w}");
                    ExitCode::from(cli::EXIT_USAGE)
                }
            };
        }
    };
    // A panic outside a replay is a bug: its message is printed even once the replay hook
    // (which keeps messages for the replay's report) is installed.
    let code = std::panic::catch_unwind(|| cli::dispatch(cli.command)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        err!("error: conform panicked (a bug; please report it): {msg}");
        101
    });
    // Output that did not reach stdout or stderr (a full disk, a closed pipe) fails the
    // command with exit 2; the message goes where it still can (stderr, unless that failed).
    let flushed = std::io::stdout().flush();
    let failed = match cli::STDOUT_ERROR
        .get()
        .map(|e| e.to_string())
        .or(flushed.err().map(|e| e.to_string()))
    {
        Some(e) => {
            err!("error: cannot write to stdout: {e}");
            true
        }
        None => false,
    };
    if failed || cli::STDERR_ERROR.get().is_some() {
        ExitCode::from(cli::EXIT_USAGE)
    } else {
        ExitCode::from(code)
    }
}
