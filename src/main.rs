//! kbuild's binary: parse, dispatch, print the error chain and a hint, exit.

use std::process::ExitCode;

use clap::Parser;
use kbuild::cli::Cli;
use kbuild::hint::Hint;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match kbuild::commands::run(cli) {
        Ok(code) => code,
        Err(kbuild::error::Error::Stdout { source })
            if kbuild::report::is_closed_stdout(&source) =>
        {
            ExitCode::from(kbuild::report::CLOSED_STDOUT_EXIT)
        }
        Err(err) => {
            eprintln!("error: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            if let Some(hint) = err.hint() {
                eprintln!("  hint: {hint}");
            }
            // Whatever stage noticed it, a build stopped by a signal exits as killed by it.
            match kbuild::process::interrupted() {
                Some(signal) => ExitCode::from(signal.exit_code()),
                None => ExitCode::FAILURE,
            }
        }
    }
}
