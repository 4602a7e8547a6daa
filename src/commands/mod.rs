//! One module per verb: clap args → resolved settings → one library call → print.

pub mod build;
pub mod check;
pub mod check_config;
pub mod clean;
pub mod develop;
pub mod hash;
pub mod init;
pub mod list_variants;
pub mod pack;
pub mod publish;
pub mod settings;
pub mod toolchain;
pub mod wheel;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::{Cli, Command, ToolchainCommand};
use crate::error::Result;
use crate::report::{Printer, Verbosity};

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
    let project = project_dir(&given);
    cli.global.project = project.clone();
    match cli.command {
        Command::Build(args) => {
            let printer = Printer::new(verbosity, args.json);
            build::run(&project, args, &printer)?;
        }
        Command::Develop(args) => develop::run(&project, args, &Printer::new(verbosity, false))?,
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
        Command::Publish(args) => {
            let printer = Printer::new(verbosity, args.json);
            return publish::run(&cli.global, &args, &printer);
        }
        Command::Toolchain(args) => {
            let json = matches!(&args.command, ToolchainCommand::List(l) if l.json);
            let printer = Printer::new(verbosity, json);
            toolchain::run(&project, args.command, &printer)?;
        }
        Command::Clean(args) => clean::run(&project, &args, &Printer::new(verbosity, args.json))?,
        Command::Hash(args) => hash::run(&project, &args, &Printer::new(verbosity, args.json))?,
        Command::Init(args) => init::run(&given, &args, &Printer::new(verbosity, args.json))?,
        Command::Completions(args) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            // Generated into memory: clap_complete panics when its writer fails.
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut cmd, "kbuild", &mut script);
            print(&String::from_utf8_lossy(&script))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `-C` when given, else the nearest directory holding build.toml from the working directory
/// up (`.` when that is the working directory itself or none is found).
fn project_dir(given: &Path) -> PathBuf {
    if !given.as_os_str().is_empty() {
        return given.to_path_buf();
    }
    let cwd = std::env::current_dir().ok();
    match crate::config::find_project_root(Path::new(".")) {
        Some(root) if Some(&root) != cwd.as_ref() => root,
        _ => PathBuf::from("."),
    }
}

/// Print `value` as pretty JSON on stdout.
fn print_json(what: &'static str, value: &impl serde::Serialize) -> Result<()> {
    let json = serde_json::to_string_pretty(value)
        .map_err(|source| crate::error::Error::Json { what, source })?;
    print(&format!("{json}\n"))
}

/// Print a command's result on stdout (through the seam in `report`).
fn print(text: &str) -> Result<()> {
    crate::report::stdout(text).map_err(|source| crate::error::Error::Stdout { source })
}
