//! `kbuild create-pyproject`: the files that make `pip install .` build through kbuild.

use std::path::Path;

use crate::cli::CreatePyprojectArgs;
use crate::error::Result;
use crate::report::{Printer, Reporter};

/// Run `kbuild create-pyproject`.
pub fn run(project_dir: &Path, args: &CreatePyprojectArgs, printer: &Printer) -> Result<()> {
    for path in crate::pyproject::create_pyproject(project_dir, args.overwrite)? {
        printer.stage("Wrote", &path.display().to_string());
    }
    Ok(())
}
