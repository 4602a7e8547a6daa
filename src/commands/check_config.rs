//! `kbuild check-config`: validate build.toml without building anything.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::CheckConfigArgs;
use crate::config::{self, Edition, Project};
use crate::error::{Error, Result};
use crate::report::{Reporter, Verbosity};

/// Load the project's build.toml, print its warnings, then a summary (or the model as JSON).
pub fn run(
    project_dir: &Path,
    args: &CheckConfigArgs,
    verbosity: Verbosity,
    reporter: &dyn Reporter,
) -> Result<ExitCode> {
    let project = config::load(project_dir)?;
    for w in &project.warnings {
        reporter.warn(&w.with_hint());
    }
    let out = if args.json {
        serde_json::to_string_pretty(&project).map_err(|source| Error::Json {
            what: "the model",
            source,
        })?
    } else if verbosity != Verbosity::Quiet {
        summary(project_dir, &project)
    } else {
        return Ok(ExitCode::SUCCESS);
    };
    super::print(&format!("{out}\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// `ok: build.toml (edition 5): kernel `ltx-kernels` v1, 3 kernels, backends cuda, cpu`.
pub fn summary(project_dir: &Path, project: &Project) -> String {
    let manifest = project_dir.join("build.toml");
    let shown = manifest.strip_prefix(".").unwrap_or(&manifest);
    let edition = match project.edition {
        Edition::V4 => "v4, no edition",
        Edition::V5 => "edition 5",
    };
    let n = project.kernels.len();
    let backends: Vec<&str> = project
        .general
        .backends
        .iter()
        .map(|b| b.as_str())
        .collect();
    let mut line = format!(
        "ok: {} ({edition}): kernel `{}` v{}, {n} kernel{}, backends {}",
        shown.display(),
        project.general.name,
        project.general.version,
        if n == 1 { "" } else { "s" },
        backends.join(", "),
    );
    if !project.kbuild.capabilities.is_empty() {
        let caps: Vec<String> = project
            .kbuild
            .capabilities
            .keys()
            .map(|c| c.to_string())
            .collect();
        line.push_str(&format!(", capabilities {}", caps.join(", ")));
    }
    line
}
