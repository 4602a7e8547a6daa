//! `kbuild toolchain install|add|list|remove`: managed torch + CUDA environments from PyPI, or
//! one the user has.

use std::path::Path;

use super::print_json;
use crate::cli::{ToolchainAddArgs, ToolchainCommand, ToolchainInstallArgs};
use crate::error::Result;
use crate::managed::{
    self, InstallError, InstallRequest, LOCK_FILE, LockFile, ToolchainSpec, toolchains_dir,
};
use crate::orchestrator::BuildError;
use crate::report::{Printer, Reporter};
use crate::toolchain::find_python;

/// Run `kbuild toolchain …`.
pub fn run(project_dir: &Path, command: ToolchainCommand, printer: &Printer) -> Result<()> {
    let root = toolchains_dir()?;
    match command {
        ToolchainCommand::Install(args) => install(project_dir, &root, &args, printer),
        ToolchainCommand::Add(args) => add(project_dir, &root, &args, printer),
        ToolchainCommand::List(args) => {
            let installed = managed::installed(&root)?;
            if args.json {
                return print_json("the toolchains", &installed);
            }
            if installed.is_empty() {
                printer.info(&format!("no toolchains in `{}`", root.display()));
            }
            let mut text = String::new();
            for t in &installed {
                let torch = t.record.packages.iter().find(|p| p.starts_with("torch=="));
                let torch = torch.map_or("torch ?", |p| p.as_str());
                let dir = t.dir.display();
                text.push_str(&format!("{:<20} {torch:<16} {dir}\n", t.record.name));
            }
            super::print(&text)
        }
        ToolchainCommand::Remove(args) => {
            let dir = managed::remove(&root, &args.name)?;
            printer.stage("Removed", &dir.display().to_string());
            Ok(())
        }
    }
}

/// Install what `--torch` names, or every toolchain of kbuild.lock; then record the exact
/// versions in kbuild.lock when the directory is a project (it has build.toml).
fn install(
    project_dir: &Path,
    root: &Path,
    args: &ToolchainInstallArgs,
    printer: &Printer,
) -> Result<()> {
    let lock = LockFile::read(project_dir)?;
    let requests: Vec<InstallRequest> = if args.torch.is_empty() {
        let entries = lock
            .as_ref()
            .map(|l| l.toolchains.as_slice())
            .unwrap_or(&[]);
        if entries.is_empty() {
            Err(InstallError::NothingToInstall {
                path: project_dir.join(LOCK_FILE),
            })?;
        }
        entries
            .iter()
            .map(|e| InstallRequest::from_lock(e, args.python.clone()))
            .collect()
    } else {
        args.torch
            .iter()
            .map(|torch| {
                let spec = ToolchainSpec::new(torch, args.cuda.as_deref(), args.cpu)?;
                InstallRequest::new(
                    &spec,
                    args.index_url.clone(),
                    &args.with,
                    args.python.clone(),
                )
            })
            .collect::<Result<_, InstallError>>()?
    };
    let mut lock = lock.unwrap_or_default();
    for request in &requests {
        let installed = managed::install(root, request, printer)?;
        printer.finish();
        let status = if installed.installed_now {
            "Installed"
        } else {
            "Fresh"
        };
        printer.stage(status, &installed.managed.dir.display().to_string());
        lock.upsert(installed.managed.record);
    }
    if !args.no_lock && project_dir.join("build.toml").is_file() {
        let path = lock.write(project_dir)?;
        printer.stage("Locked", &path.display().to_string());
    }
    Ok(())
}

/// Register an existing environment as a toolchain and pin it in kbuild.lock when the directory
/// is a project.
fn add(project_dir: &Path, root: &Path, args: &ToolchainAddArgs, printer: &Printer) -> Result<()> {
    let python = find_python(args.python.as_deref(), project_dir).map_err(BuildError::from)?;
    let added = managed::add(root, &python.path)?;
    printer.stage(
        "Added",
        &format!("{} ({})", added.record.name, added.python.display()),
    );
    if !args.no_lock && project_dir.join("build.toml").is_file() {
        let mut lock = LockFile::read(project_dir)?.unwrap_or_default();
        lock.upsert(added.record);
        let path = lock.write(project_dir)?;
        printer.stage("Locked", &path.display().to_string());
    }
    Ok(())
}
