//! `kbuild init`: write a new kernel project from the templates, then say what to run next.

use std::path::Path;

use super::print_json;
use crate::cli::InitArgs;
use crate::error::Result;
use crate::init::{InitSettings, init};
use crate::report::{Printer, Reporter};

/// Run `kbuild init`; `base` is `-C` when given (DIR is relative to it), else empty.
pub fn run(base: &Path, args: &InitArgs, printer: &Printer) -> Result<()> {
    let settings = InitSettings {
        dir: base.join(&args.dir),
        name: args.name.clone(),
        repo: args.repo.clone(),
        backends: args.backends.clone(),
        license: args.license.clone(),
        overwrite: args.overwrite,
    };
    let done = init(&settings)?;
    if args.json {
        return print_json("the new project", &done);
    }
    for file in &done.files {
        printer.verbose(&format!("wrote {file}"));
    }
    let what = format!(
        "`{}` ({}) in {}",
        done.name,
        done.backends.join(", "),
        done.dir.display()
    );
    printer.stage("Created", &what);
    let cd = if args.dir == Path::new(".") && base.as_os_str().is_empty() {
        String::new()
    } else {
        format!("cd {} && ", done.dir.display())
    };
    printer.info(&format!("next: {cd}kbuild test"));
    Ok(())
}
