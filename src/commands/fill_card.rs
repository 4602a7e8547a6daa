//! `kbuild fill-card`: the card `kbuild publish` would put on the Hub as `README.md`, rendered
//! from the build: the project's `CARD.md` as HF's kernel-builder renders it, else kbuild's.

use std::path::Path;

use crate::cli::FillCardArgs;
use crate::error::Result;
use crate::package::UnpackLimits;
use crate::publish::PublishError;
use crate::publish::card::{Card, ProjectCard};
use crate::publish::local::{self, LocalOptions};
use crate::report::{Printer, Reporter};

/// Run `kbuild fill-card`.
pub fn run(project_dir: &Path, args: &FillCardArgs, printer: &Printer) -> Result<()> {
    // As publish: build.toml names the repository when the directory has one.
    let hub = match project_dir.join("build.toml").is_file() {
        true => crate::config::load(project_dir)?.general.hub,
        false => Default::default(),
    };
    let repo = (args.repo.clone())
        .or(hub.repo_id)
        .ok_or(PublishError::NoRepo)?;
    let build_dir = (args.build_dir.clone()).unwrap_or_else(|| project_dir.join("build"));
    crate::error::built(&build_dir, "pass `--build-dir`")?;
    let options = LocalOptions {
        unpack: UnpackLimits::from_env(|k| crate::env::var(k).ok())?,
        allow_mixed: true,
        allow_foreign: true,
    };
    let build = local::collect(&build_dir, &[], None, &options)?;
    let branch = (hub.branch).unwrap_or(format!("v{}", build.version));
    let mut card = Card::from_variants(&build.variants, &repo, &branch)?;
    card.has_benchmark = project_dir.join("benchmarks/benchmark.py").is_file();
    let template = ProjectCard::find(project_dir)?;
    let text = card.render(template.as_ref())?;
    let Some(output) = &args.output else {
        return super::print(&text);
    };
    std::fs::write(output, &text).map_err(|source| PublishError::WriteCard {
        path: output.clone(),
        source,
    })?;
    let from = match &template {
        Some(t) => t.path.display().to_string(),
        None => "kbuild's card".to_string(),
    };
    printer.stage("Filled", &format!("{} from {from}", output.display()));
    Ok(())
}
