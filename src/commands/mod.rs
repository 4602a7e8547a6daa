//! One module per verb: clap args → resolved settings → one library call → print.

pub mod build;
pub mod build_and_upload;
pub mod check;
pub mod check_config;
pub mod clean;
pub mod completions;
pub mod create_pyproject;
pub mod dev_loop;
pub mod develop;
pub mod fill_card;
pub mod hash;
pub mod init;
pub mod list_variants;
mod output;
pub mod pack;
pub mod publish;
pub mod settings;
pub mod sign;
pub mod test;
pub mod toolchain;
pub mod update_config;
pub mod verify;
pub mod wheel;

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::error::Result;
use crate::report::{Printer, Verbosity};
pub use output::wants_json;
use output::{print, print_json, print_notes};

/// Dispatch a parsed command line.
pub fn run(mut cli: Cli) -> Result<ExitCode> {
    let verbosity = if cli.global.quiet {
        Verbosity::Quiet
    } else if cli.global.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    // `init` makes a project: its DIR is relative to `-C` as given, never to one found above.
    let given = cli.global.project.clone();
    let project = settings::project_dir(&given);
    cli.global.project = project.clone();
    let json = wants_json(&cli);
    match cli.command {
        Command::Build(args) => {
            let printer = Printer::new(verbosity, json);
            build::run(&project, args, &printer)?;
        }
        Command::Develop(args) => develop::run(&project, args, &Printer::new(verbosity, false))?,
        Command::Test(args) => return test::run(&project, args, &Printer::new(verbosity, false)),
        Command::Wheel(args) => {
            let printer = Printer::new(verbosity, args.json);
            wheel::run(&project, args, &printer)?;
        }
        Command::Check(args) => {
            let printer = Printer::new(verbosity, args.json);
            return check::run(&project, &args, &printer);
        }
        Command::Pack(args) => {
            let printer = Printer::new(verbosity, args.json);
            pack::run(&project, &args, &printer)?;
        }
        Command::ListVariants(args) => {
            let printer = Printer::new(verbosity, args.json);
            list_variants::run(&project, args, &printer)?;
        }
        Command::CheckConfig(args) => {
            let printer = Printer::new(verbosity, args.json);
            return check_config::run(&project, &args, verbosity, &printer);
        }
        Command::UpdateConfig(args) => update_config::run(&project, &args)?,
        Command::Publish(args) => {
            let printer = Printer::new(verbosity, args.json);
            return publish::run(&cli.global, &args, &printer);
        }
        Command::BuildAndUpload(args) => {
            let printer = Printer::new(verbosity, args.options.json);
            return build_and_upload::run(&cli.global, args, &printer);
        }
        Command::Toolchain(args) => {
            let printer = Printer::new(verbosity, json);
            toolchain::run(&project, args.command, &printer)?;
        }
        Command::Clean(args) => clean::run(&project, &args, &Printer::new(verbosity, args.json))?,
        Command::FillCard(args) => {
            fill_card::run(&project, &args, &Printer::new(verbosity, false))?
        }
        Command::Hash(args) => hash::run(&project, &args, &Printer::new(verbosity, args.json))?,
        Command::Sign(args) => sign::run(&project, &args, &Printer::new(verbosity, args.json))?,
        Command::Verify(args) => verify::run(&project, &args, &Printer::new(verbosity, args.json))?,
        Command::CreatePyproject(args) => {
            create_pyproject::run(&project, &args, &Printer::new(verbosity, false))?
        }
        Command::Init(args) => init::run(&given, &args, &Printer::new(verbosity, args.json))?,
        Command::Completions(args) => completions::run(&args)?,
    }
    Ok(ExitCode::SUCCESS)
}
