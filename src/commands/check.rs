//! `kbuild check`: the Hub's rules on built variants, one line per violation.

use std::path::Path;
use std::process::ExitCode;

use super::{print, print_json};
use crate::check::{CheckOptions, check_path, find_cuobjdump, human, rules_count};
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
    let cuobjdump = (args.cuobjdump.clone()).or_else(|| find_cuobjdump(project_dir, &path));
    let opts = CheckOptions {
        manylinux: (args.manylinux != "none").then(|| args.manylinux.clone()),
        cuobjdump,
        lenient: false,
        unpack: UnpackLimits::from_env(|k| crate::env::var(k).ok())?,
    };
    for restored in crate::package::restore_moved_aside(&path) {
        printer.warn(&crate::package::restored_note(&restored));
    }
    let checks = check_path(&path, &opts)?;
    if opts.cuobjdump.is_none() && checks.iter().any(|c| c.is_cuda()) {
        printer.warn(
            "the `archs` rule (metadata.json's archs against the extension's cubins) is skipped: \
             no `cuobjdump` on PATH, under `CUDA_HOME` or beside the nvcc builds use; install it \
             (`pip install \"cuda-toolkit[cuobjdump]\"`) or pass `--cuobjdump PATH`",
        );
    }
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
