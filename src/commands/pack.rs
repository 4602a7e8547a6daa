//! `kbuild pack`: each built variant as `<name>-<variant>.tar.gz`.

use std::path::Path;

use super::print_json;
use crate::cli::PackArgs;
use crate::error::Result;
use crate::report::{Printer, Reporter};

/// Run `kbuild pack`.
pub fn run(project_dir: &Path, args: &PackArgs, printer: &Printer) -> Result<()> {
    let build_dir = args
        .build_dir
        .clone()
        .unwrap_or_else(|| project_dir.join("build"));
    crate::error::built(
        &build_dir,
        "name the directory holding build/<variant>/ with `--build-dir`",
    )?;
    let dist_dir = super::settings::dist_dir(project_dir, args.dist_dir.as_deref());
    for restored in crate::package::restore_moved_aside(&build_dir) {
        printer.warn(&crate::package::restored_note(&restored));
    }
    let packed = crate::package::pack(&build_dir, &args.variants, &dist_dir)?;
    for p in &packed {
        printer.stage("Artifact", &p.path.display().to_string());
    }
    printer.finish();
    if args.json {
        print_json("the written artifacts", &packed)?;
    }
    Ok(())
}
