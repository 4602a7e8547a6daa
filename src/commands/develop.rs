//! `kbuild develop`: build (one backend), then make that variant importable in the environment.

use std::path::Path;
use std::time::Instant;

use crate::orchestrator::Builder;
use crate::cli::{BuildArgs, DevelopArgs};
use crate::error::{Error, Result};
use crate::package::BuiltVariant;
use crate::report::{Printer, Reporter};
use crate::toolchain::find_python;

/// Run `kbuild develop`.
pub fn run(project_dir: &Path, args: DevelopArgs, printer: &Printer) -> Result<()> {
    let started = Instant::now();
    let build_args = BuildArgs {
        toolchain: args.toolchain.clone(),
        backends: args.backend.into_iter().collect(),
        jobs: args.jobs,
        out_dir: args.out_dir,
        unique_id: None,
        dry_run: false,
        json: false,
        wheel: false,
        artifact: false,
        dist_dir: None,
        torch: Vec::new(),
        variants: Vec::new(),
        compiler_launcher: None,
    };
    let builder = Builder::new(super::build::settings(project_dir, &build_args), printer);
    let prepared = builder.prepare()?;
    // The interpreter the build used (noarch builds use none): develop installs into it.
    let python = match &prepared.toolchain.torch {
        Some(torch) => torch.python.path.clone(),
        None => {
            let python = find_python(args.toolchain.python.as_deref(), &prepared.project.root);
            python.map_err(crate::orchestrator::BuildError::from)?.path
        }
    };
    let plans = std::slice::from_ref(&prepared.plan);
    let report = builder.execute(&prepared.project, plans, started)?;
    let [variant] = report.variants.as_slice() else {
        let variants = report.variants.iter().map(|v| v.name.clone()).collect();
        return Err(Error::NotOneVariant { variants });
    };
    let built = BuiltVariant::read(&variant.path)?;
    let developed = crate::develop::develop(&built, &python)?;
    printer.finish();
    printer.stage(
        "Developed",
        &format!(
            "`import {}` in {} now loads {}",
            developed.package,
            python.display(),
            variant.path.display()
        ),
    );
    Ok(())
}
