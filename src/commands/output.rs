//! How commands print: a result on stdout (through the seam in `report`), notes on stderr.

use crate::cli::{Cli, Command, SignArgs, ToolchainCommand, VerifyArgs};
use crate::error::Result;
use crate::report::Printer;

/// The notes of a plan that is shown rather than run (a build says them when it runs).
pub(super) fn print_notes(prepared: &crate::orchestrator::Prepared, printer: &Printer) {
    use crate::report::Reporter as _;
    for note in prepared.notes() {
        printer.info(&format!("note: {note}"));
    }
}

/// Print `value` as pretty JSON on stdout.
pub(super) fn print_json(what: &'static str, value: &impl serde::Serialize) -> Result<()> {
    let json = serde_json::to_string_pretty(value)
        .map_err(|source| crate::error::Error::Json { what, source })?;
    print(&format!("{json}\n"))
}

/// Print a command's result on stdout (through the seam in `report`).
pub(super) fn print(text: &str) -> Result<()> {
    crate::report::stdout(text).map_err(|source| crate::error::Error::Stdout { source })
}

/// Whether the command line asks for `--json` (a failure is then reported on stdout too).
pub fn wants_json(cli: &Cli) -> bool {
    match &cli.command {
        Command::Build(args) => args.options.json,
        Command::Wheel(args) => args.json,
        Command::Check(args) => args.json,
        Command::Pack(args) => args.json,
        Command::ListVariants(args) => args.json,
        Command::CheckConfig(args) => args.json,
        Command::UpdateConfig(args) => args.json,
        Command::Publish(args) => args.json,
        Command::BuildAndUpload(args) => args.options.json,
        Command::Toolchain(args) => matches!(&args.command, ToolchainCommand::List(l) if l.json),
        Command::Clean(args) => args.json,
        Command::Hash(args) => args.json,
        Command::Verify(VerifyArgs { json, .. }) | Command::Sign(SignArgs { json, .. }) => *json,
        Command::Init(args) => args.json,
        Command::Develop(_)
        | Command::Test(_)
        | Command::Completions(_)
        | Command::CreatePyproject(_)
        | Command::FillCard(_) => false,
    }
}
