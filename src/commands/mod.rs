//! One module per verb: clap args → resolved settings → pipeline calls.

pub mod build;
pub mod check_config;
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
    let project = cli.global.project.clone();
    match cli.command {
        Command::Build(args) => {
            let printer = Printer::new(verbosity, args.json);
            build::run(build::BuildSettings::resolve(&project, args), &printer)?;
        }
        Command::ListVariants(args) => {
            let printer = Printer::new(verbosity, args.json);
            build::list_variants(&project, &args.toolchain, args.json, &printer)?;
        }
        Command::CheckConfig(args) => {
            let printer = Printer::new(verbosity, args.json);
            return check_config::run(&project, &args, verbosity, &printer);
        }
        Command::Publish(args) => return publish::run(&cli.global, &args, verbosity),
        Command::Completions(args) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(args.shell, &mut cmd, "kbuild", &mut std::io::stdout());
        }
    }
    Ok(ExitCode::SUCCESS)
}
