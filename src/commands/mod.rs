//! One module per verb: clap args → resolved settings → pipeline calls.

pub mod publish;

use std::process::ExitCode;

use crate::Result;
use crate::cli::{Cli, Command};
use crate::report::{Printer, Verbosity};

/// Dispatch a parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    let verbosity = if cli.global.quiet {
        Verbosity::Quiet
    } else if cli.global.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    match cli.command {
        Command::Completions(args) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(args.shell, &mut cmd, "kbuild", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Build(_) => {
            let _printer = Printer::new(verbosity, false);
            // Config errors must surface before anything touches the output directory.
            let _project = crate::config::load(&cli.global.project)?;
            todo!("build pipeline lands here")
        }
        Command::Publish(args) => publish::run(&cli.global, &args, verbosity),
        other => {
            let _printer = Printer::new(verbosity, false);
            let _ = other;
            todo!("verbs are wired as the stages land")
        }
    }
}
