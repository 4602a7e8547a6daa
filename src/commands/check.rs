//! `kbuild check`: the Hub's rules on built variants, one line per violation.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{print, print_json};
use crate::check::{CheckOptions, check_path, human, rules_count};
use crate::cli::CheckArgs;
use crate::error::Result;
use crate::package::UnpackLimits;
use crate::report::{Printer, Reporter};

/// Run `kbuild check`; exits 1 when any rule is violated.
pub fn run(project_dir: &Path, args: &CheckArgs, printer: &Printer) -> Result<ExitCode> {
    let path = args
        .path
        .clone()
        .unwrap_or_else(|| project_dir.join("build"));
    let opts = CheckOptions {
        manylinux: (args.manylinux != "none").then(|| args.manylinux.clone()),
        cuobjdump: args.cuobjdump.clone().or_else(find_cuobjdump),
        lenient: false,
        unpack: UnpackLimits::from_env(|k| std::env::var(k).ok())?,
    };
    for restored in crate::package::restore_moved_aside(&path) {
        printer.warn(&crate::package::restored_note(&restored));
    }
    let checks = check_path(&path, &opts)?;
    if args.json {
        print_json("the check's findings", &checks)?;
    } else {
        print(&human(&checks))?;
    }
    let failed = checks.iter().any(|c| !c.findings.is_empty());
    if !failed {
        let what = format!(
            "{} variant(s) in {}, {} rules: ok",
            checks.len(),
            path.display(),
            rules_count(&checks)
        );
        printer.stage("Checked", &what);
        let mut rules: Vec<&str> = checks.iter().flat_map(|c| c.rules.clone()).collect();
        rules.sort_unstable();
        rules.dedup();
        printer.verbose(&format!("rules checked: {}", rules.join(", ")));
        let skipped: Vec<&str> = [
            opts.manylinux
                .is_none()
                .then_some("manylinux (`--manylinux none`)"),
            opts.cuobjdump.is_none().then_some("archs (no cuobjdump)"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !skipped.is_empty() {
            printer.verbose(&format!("rules skipped: {}", skipped.join(", ")));
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `cuobjdump` on PATH, else next to `nvcc` on PATH or under `CUDA_HOME`.
fn find_cuobjdump() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("cuobjdump"))
        .find(|p| p.is_file())
}
