//! `kbuild develop`: select one variant as `build` does (then the one `kernels` would load with
//! the environment's torch), build it, then make it importable in the environment of the Python
//! it was built with.

use std::path::Path;
use std::time::Instant;

use super::dev_loop::runnable_here;
use super::print;
use super::settings::select_settings;
use crate::cli::DevelopArgs;
use crate::develop::{DevelopError, DevelopedHere, keep_one_variant};
use crate::error::Result;
use crate::orchestrator::{BuildSettings, Builder, dry_run_text};
use crate::package::BuiltVariant;
use crate::report::{Printer, Reporter};
use crate::toolchain::find_python;

/// Run `kbuild develop`.
pub fn run(project_dir: &Path, args: DevelopArgs, printer: &Printer) -> Result<()> {
    if args.uninstall {
        return uninstall(project_dir, &args, printer);
    }
    develop_here(project_dir, &args, printer).map(drop)
}

/// Select one variant (what can run here unless the command line chose), build it and make it
/// importable; `None` for a dry run, which prints the plan instead.
pub fn develop_here(
    project_dir: &Path,
    args: &DevelopArgs,
    printer: &Printer,
) -> Result<Option<DevelopedHere>> {
    let started = Instant::now();
    let select = match runnable_here(project_dir, &args.flags.select) {
        Some((narrowed, note)) => {
            printer.info(&note);
            narrowed
        }
        None => args.flags.select.clone(),
    };
    let settings = BuildSettings {
        out_dir: args.flags.out_dir.clone(),
        ..select_settings(
            project_dir,
            &args.flags.toolchain,
            &select,
            args.flags.jobs,
            args.flags.memory,
        )
    };
    let builder = Builder::new(settings, printer);
    let mut prepared = builder.prepare()?;
    let choice = keep_one_variant(
        &mut prepared,
        args.flags.toolchain.python.as_deref(),
        !args.flags.select.backends.is_empty(),
    )?;
    printer.stage(
        "Selected",
        &format!("{} for {}", choice.variant, choice.python.display()),
    );
    if args.dry_run {
        super::print_notes(&prepared, printer);
        let runs = prepared.schedule.per_plan(&prepared.plans);
        let mut plans = (prepared.plans.iter().zip(runs)).filter(|(p, _)| !p.variants.is_empty());
        plans.try_for_each(|(plan, runs)| print(&dry_run_text(plan, runs)))?;
        return Ok(None);
    }
    let report = builder.execute(&prepared, started)?;
    let [variant] = report.variants.as_slice() else {
        let variants = report.variants.iter().map(|v| v.name.clone()).collect();
        return Err(DevelopError::NotOneVariant { variants }.into());
    };
    let built = BuiltVariant::read(&variant.path)?;
    let developed = crate::develop::develop(&built, &choice.python)?;
    printer.finish();
    printer.stage(
        "Developed",
        &format!(
            "`import {}` in {} now loads {}",
            developed.package,
            choice.python.display(),
            variant.path.display()
        ),
    );
    let out_dir = variant.path.parent().unwrap_or(project_dir).to_path_buf();
    Ok(Some(DevelopedHere {
        python: choice.python,
        backend: choice.backend,
        out_dir,
    }))
}

/// `kbuild develop --uninstall`: the environment (chosen as develop chooses it) stops importing
/// the build.
fn uninstall(project_dir: &Path, args: &DevelopArgs, printer: &Printer) -> Result<()> {
    let project = crate::config::load(project_dir)?;
    let package = project.general.python_name();
    let python = find_python(args.flags.toolchain.python.as_deref(), &project.root)
        .map_err(DevelopError::from)?
        .path;
    let out_dir = (args.flags.out_dir.clone()).unwrap_or_else(|| project.root.join("build"));
    let done = crate::develop::uninstall(&out_dir, &package, &python)?;
    if done.removed.is_empty() {
        printer.info(&format!(
            "note: `{package}` was not developed into {}: nothing to uninstall",
            python.display()
        ));
        return Ok(());
    }
    for path in &done.removed {
        printer.verbose(&format!("removed {}", path.display()));
    }
    printer.stage(
        "Uninstalled",
        &format!("`import {package}` from {}", python.display()),
    );
    Ok(())
}
