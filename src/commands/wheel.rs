//! `kbuild wheel`: `kbuild build --wheel` under its own name, as `maturin build` is for wheels.

use std::path::Path;

use crate::cli::BuildArgs;
use crate::error::Result;
use crate::report::Printer;

/// Run `kbuild wheel`: build, then one wheel per variant.
pub fn run(project_dir: &Path, mut args: BuildArgs, printer: &Printer) -> Result<()> {
    args.wheel = true;
    super::build::run(project_dir, args, printer)
}
