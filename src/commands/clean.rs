//! `kbuild clean`: remove kbuild's outputs from build/ (and dist/ with `--dist`).

use std::path::Path;

use super::print_json;
use super::settings::dist_dir;
use crate::clean::{CleanSettings, clean};
use crate::cli::CleanArgs;
use crate::error::Result;
use crate::files::human_size;
use crate::report::{Printer, Reporter};

/// Run `kbuild clean`.
pub fn run(project_dir: &Path, args: &CleanArgs, printer: &Printer) -> Result<()> {
    let settings = CleanSettings {
        out_dir: args
            .out_dir
            .clone()
            .unwrap_or_else(|| project_dir.join("build")),
        dist_dir: args
            .dist
            .then(|| dist_dir(project_dir, args.dist_dir.as_deref())),
        dry_run: args.dry_run,
    };
    let report = clean(&settings, printer)?;
    for kept in &report.kept {
        printer.warn(&format!(
            "kept `{}`: {} (remove it yourself if it is not needed)",
            kept.path.display(),
            kept.reason
        ));
    }
    let verb = if args.dry_run {
        "Would remove"
    } else {
        "Removed"
    };
    for removed in &report.removed {
        printer.verbose(&format!("{verb} {}", removed.path.display()));
    }
    let bytes: u64 = report.removed.iter().map(|r| r.bytes).sum();
    let summary = format!(
        "{} path(s), {}{}",
        report.removed.len(),
        human_size(bytes),
        if args.dry_run { " (dry run)" } else { "" }
    );
    if args.dry_run && !args.json {
        for removed in &report.removed {
            super::print(&format!("{}\n", removed.path.display()))?;
        }
    }
    printer.stage(verb, &summary);
    if !report.develop_links.is_empty() {
        let packages = report.develop_links.join("`, `");
        let (removed, fails) = match args.dry_run {
            true => ("would remove", "would fail"),
            false => ("removed", "fails"),
        };
        printer.info(&format!(
            "note: {removed} the `kbuild develop` link of `{packages}`: `import {}` {fails} in \
             the environments that developed it until the next `kbuild develop` \
             (`kbuild develop --uninstall` removes it from an environment for good)",
            report.develop_links[0]
        ));
    }
    if args.json {
        print_json("the clean report", &report)?;
    }
    Ok(())
}
