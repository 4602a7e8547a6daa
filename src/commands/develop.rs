//! `kbuild develop`: select one variant as `build` does, build it, then make it importable in
//! the environment of the Python it was built with.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::settings::select_settings;
use crate::cli::DevelopArgs;
use crate::error::{Error, Result};
use crate::orchestrator::{BuildError, BuildSettings, Builder, Prepared};
use crate::package::BuiltVariant;
use crate::report::{Printer, Reporter};
use crate::toolchain::find_python;

/// Run `kbuild develop`.
pub fn run(project_dir: &Path, args: DevelopArgs, printer: &Printer) -> Result<()> {
    let started = Instant::now();
    let settings = BuildSettings {
        out_dir: args.out_dir.clone(),
        ..select_settings(
            project_dir,
            &args.toolchain,
            &args.select,
            args.jobs,
            args.memory,
        )
    };
    let builder = Builder::new(settings, printer);
    let mut prepared = builder.prepare()?;
    let python = keep_one_variant(&mut prepared, args.toolchain.python.as_deref())?;
    let report = builder.execute(&prepared, started)?;
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

/// Narrow the prepared build to the one variant develop installs, before anything is built:
/// the only one selected, else the only one built with the environment's own Python
/// (`--python`, the active venv, ./.venv). Returns the interpreter to install into: the one the
/// variant was built with (noarch variants use none: the environment's).
fn keep_one_variant(prepared: &mut Prepared, python: Option<&Path>) -> Result<PathBuf> {
    let own = || find_python(python, &prepared.project.root).map_err(BuildError::from);
    let built_with = |i: usize| {
        let torch = prepared.toolchains[i].torch.as_ref();
        torch.map(|t| t.python.path.clone())
    };
    let selected: Vec<usize> = (0..prepared.plans.len())
        .filter(|&i| !prepared.plans[i].variants.is_empty())
        .collect();
    let names = |plans: &[usize]| -> Vec<String> {
        let variants = plans.iter().flat_map(|&i| &prepared.plans[i].variants);
        variants.map(|v| v.name.clone()).collect()
    };
    let mut chosen = selected.clone();
    if names(&chosen).len() > 1 {
        let own = own()?.path;
        chosen.retain(|&i| built_with(i).is_some_and(|p| same_file(&p, &own)));
    }
    let (&[i], [_]) = (chosen.as_slice(), names(&chosen).as_slice()) else {
        return Err(Error::NotOneVariant {
            variants: names(&selected),
        });
    };
    let python = match built_with(i) {
        Some(path) => path,
        None => own()?.path,
    };
    prepared.plans.iter_mut().enumerate().for_each(|(j, plan)| {
        if j != i {
            plan.variants.clear();
        }
    });
    Ok(python)
}

/// The same interpreter path. Not resolved through links: a venv's `bin/python` links to the
/// base interpreter that every venv of it shares.
fn same_file(a: &Path, b: &Path) -> bool {
    std::path::absolute(a).ok() == std::path::absolute(b).ok()
}
