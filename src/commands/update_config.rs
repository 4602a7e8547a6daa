//! `kbuild update-config`: rewrite a v4 build.toml as edition 5 (or, `--dry-run`/`--check`,
//! say whether it needs it).

use std::path::Path;

use super::{print, print_json};
use crate::cli::UpdateConfigArgs;
use crate::error::{Error, Result};
use crate::update_config::{ConfigUpdate, UpdateMode, UpdateStatus, update_config};

/// Run `kbuild update-config`; under `--check` a v4 file is an error after the report.
pub fn run(project_dir: &Path, args: &UpdateConfigArgs) -> Result<()> {
    let mode = if args.check {
        UpdateMode::Check
    } else if args.dry_run {
        UpdateMode::DryRun
    } else {
        UpdateMode::Write
    };
    let update = update_config(project_dir, mode)?;
    if args.json {
        print_json("the update", &update)?;
    } else {
        print(&text(project_dir, &update))?;
    }
    if mode == UpdateMode::Check && update.status == UpdateStatus::NeedsUpdate {
        return Err(Error::ConfigOutdated {
            path: update.manifest,
        });
    }
    Ok(())
}

/// `build.toml: v4 -> edition 5 (written)` and the changed lines, `-` old and `+` new.
fn text(project_dir: &Path, update: &ConfigUpdate) -> String {
    let manifest = project_dir.join("build.toml");
    let shown = manifest.strip_prefix(".").unwrap_or(&manifest).display();
    let what = match update.status {
        UpdateStatus::Updated => "v4 -> edition 5 (written)",
        UpdateStatus::NeedsUpdate => "v4, needs edition 5 (not written)",
        UpdateStatus::UpToDate => return format!("{shown}: edition 5, up to date\n"),
    };
    let mut out = format!("{shown}: {what}\n");
    for hunk in &update.changes {
        out.push_str(&format!("{shown}:{}:\n", hunk.line));
        for line in &hunk.removed {
            out.push_str(&format!("-{line}\n"));
        }
        for line in &hunk.added {
            out.push_str(&format!("+{line}\n"));
        }
    }
    out
}
