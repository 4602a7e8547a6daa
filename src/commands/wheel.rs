//! `kbuild wheel`: `kbuild build --wheel` under its own name, as `maturin build` is for wheels;
//! without `--backend` it builds what can run here (`dev_loop::runnable_here`), as `develop`.

use std::path::Path;

use crate::cli::{BuildArgs, BuildOptions};
use crate::error::Result;
use crate::report::{Printer, Reporter};

/// Run `kbuild wheel`: build, then one wheel per variant.
pub fn run(project_dir: &Path, mut options: BuildOptions, printer: &Printer) -> Result<()> {
    if let Some((narrowed, note)) =
        super::dev_loop::runnable_here(project_dir, &options.flags.select)
    {
        printer.info(&note);
        options.flags.select = narrowed;
    }
    let args = BuildArgs {
        options,
        dry_run: false,
        wheel: true,
        artifact: false,
    };
    super::build::run(project_dir, args, printer)
}
