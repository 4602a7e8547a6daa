//! `kbuild wheel`: `kbuild build --wheel` under its own name, as `maturin build` is for wheels.

use std::path::Path;

use crate::cli::{BuildArgs, BuildOptions};
use crate::error::Result;
use crate::report::Printer;

/// Run `kbuild wheel`: build, then one wheel per variant.
pub fn run(project_dir: &Path, options: BuildOptions, printer: &Printer) -> Result<()> {
    let args = BuildArgs {
        options,
        dry_run: false,
        wheel: true,
        artifact: false,
    };
    super::build::run(project_dir, args, printer)
}
