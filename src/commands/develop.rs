//! `kbuild develop`: select one variant as `build` does (then the one `kernels` would load with
//! the environment's torch), build it, then make it importable in the environment of the Python
//! it was built with.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::dev_loop::runnable_here;
use super::print;
use super::settings::select_settings;
use crate::cli::DevelopArgs;
use crate::develop::{kernels_backend, same_file};
use crate::error::{Error, Result};
use crate::orchestrator::{BuildError, BuildSettings, Builder, Prepared, dry_run_text};
use crate::package::BuiltVariant;
use crate::report::{Printer, Reporter};
use crate::toolchain::find_python;

/// Run `kbuild develop`.
pub fn run(project_dir: &Path, args: DevelopArgs, printer: &Printer) -> Result<()> {
    let started = Instant::now();
    let select = match runnable_here(project_dir, &args.select) {
        Some((narrowed, note)) => {
            printer.info(&note);
            narrowed
        }
        None => args.select.clone(),
    };
    let settings = BuildSettings {
        out_dir: args.out_dir.clone(),
        ..select_settings(
            project_dir,
            &args.toolchain,
            &select,
            args.jobs,
            args.memory,
        )
    };
    let builder = Builder::new(settings, printer);
    let mut prepared = builder.prepare()?;
    let choice = keep_one_variant(
        &mut prepared,
        args.toolchain.python.as_deref(),
        !args.select.backends.is_empty(),
    )?;
    printer.stage(
        "Selected",
        &format!("{} for {}", choice.variant, choice.python.display()),
    );
    if args.dry_run {
        super::print_notes(&prepared, printer);
        let plans = prepared.plans.iter().filter(|p| !p.variants.is_empty());
        return plans.map(dry_run_text).try_for_each(|text| print(&text));
    }
    let report = builder.execute(&prepared, started)?;
    let [variant] = report.variants.as_slice() else {
        let variants = report.variants.iter().map(|v| v.name.clone()).collect();
        return Err(Error::NotOneVariant { variants });
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
    Ok(())
}

/// The variant develop installs and the interpreter it goes into.
struct Choice {
    variant: String,
    python: PathBuf,
}

/// Narrow the prepared build to the one variant develop installs, before anything is built:
/// the only one selected; else those built with the environment's own Python (`--python`, the
/// active venv, ./.venv); else, unless `--backend` was given, the backend `kernels` loads with
/// that torch. The interpreter is the one the variant was built with (noarch variants use
/// none: the environment's).
fn keep_one_variant(
    prepared: &mut Prepared,
    python: Option<&Path>,
    backend_given: bool,
) -> Result<Choice> {
    let own = || find_python(python, &prepared.project.root).map_err(BuildError::from);
    let built_with = |i: usize| {
        let torch = prepared.toolchains[i].torch.as_ref();
        torch.map(|t| t.python.path.clone())
    };
    // (plan, variant) of every variant still selected.
    let all: Vec<(usize, usize)> = (prepared.plans.iter().enumerate())
        .flat_map(|(i, plan)| (0..plan.variants.len()).map(move |j| (i, j)))
        .collect();
    let names = |chosen: &[(usize, usize)]| -> Vec<String> {
        let name = |&(i, j): &(usize, usize)| prepared.plans[i].variants[j].name.clone();
        chosen.iter().map(name).collect()
    };
    let mut chosen = all.clone();
    if chosen.len() > 1 {
        let own = own()?.path;
        chosen.retain(|&(i, _)| built_with(i).is_some_and(|p| same_file(&p, &own)));
    }
    if chosen.len() > 1 && !backend_given {
        chosen.retain(|&(i, j)| {
            let backend = prepared.plans[i].variants[j].backend;
            Some(backend) == kernels_backend(&prepared.toolchains[i])
        });
    }
    let &[(i, j)] = chosen.as_slice() else {
        return Err(Error::NotOneVariant {
            variants: names(&all),
        });
    };
    let python = match built_with(i) {
        Some(path) => path,
        None => own()?.path,
    };
    let variant = prepared.plans[i].variants[j].name.clone();
    for (k, plan) in prepared.plans.iter_mut().enumerate() {
        plan.variants.retain(|v| k == i && v.name == variant);
    }
    Ok(Choice { variant, python })
}
