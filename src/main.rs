//! kbuild's binary: parse, dispatch, print the error chain and a hint, exit.

#![warn(clippy::too_many_lines)]

use std::process::ExitCode;

use clap::Parser;
use kbuild::cli::Cli;

fn main() -> ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == kbuild::reaper::ARG)
    {
        return kbuild::reaper::watch();
    }
    kbuild::reaper::enable();
    let code = run();
    kbuild::reaper::done();
    code
}

fn run() -> ExitCode {
    let cli = Cli::parse();
    let json = kbuild::commands::wants_json(&cli);
    let verbose = cli.global.verbose;
    match kbuild::commands::run(cli) {
        Ok(code) => code,
        Err(kbuild::error::Error::Stdout { source })
            if kbuild::report::is_closed_stdout(&source) =>
        {
            ExitCode::from(kbuild::report::CLOSED_STDOUT_EXIT)
        }
        Err(err) => {
            let report = err.report();
            eprint!("{}", report.text(verbose, kbuild::report::stderr_color()));
            if json {
                // Scripts read the failure on stdout too; if that fails, stderr already has it.
                let _ = kbuild::report::stdout(&report.json());
            }
            // Whatever stage noticed it, a build stopped by a signal exits as killed by it.
            match kbuild::process::interrupted() {
                Some(signal) => ExitCode::from(signal.exit_code()),
                None => ExitCode::FAILURE,
            }
        }
    }
}
