//! Toolchain discovery for one build: the torch (with its Python), then the compilers the
//! selected backends need. A build for several torch versions discovers one toolchain per torch.

use super::BuildError;
use crate::config::{Backend, Framework, Project};
use crate::deps;
use crate::plan::select_backends;
use crate::report::Reporter;
use crate::toolchain::{Toolchain, ToolchainSettings, find_cxx, find_nvcc, find_torch};

/// The tools `project` needs for the backends `requested` selects (noarch projects need none).
pub fn discover_toolchain(
    project: &Project,
    settings: &ToolchainSettings,
    requested: &[String],
    reporter: &dyn Reporter,
) -> Result<Toolchain, BuildError> {
    if !matches!(project.framework, Framework::Torch(_)) {
        return Ok(Toolchain::default());
    }
    let torch = find_torch(settings.python.as_deref(), &project.root)?;
    reporter.verbose(&format!(
        "python {} ({}), torch {} (cuda {})",
        torch.python.path.display(),
        torch.python.origin,
        torch.info.version,
        torch.info.cuda.as_deref().unwrap_or("none")
    ));
    // nvcc is looked for only when the cuda backend will be built; the plan selects again from
    // the same inputs and reports what it skips.
    let selection = select_backends(project, Some(&torch.info), requested)?;
    let cxx = find_cxx()?;
    for w in &cxx.warnings {
        reporter.warn(w);
    }
    let nvcc = if selection.chosen.contains(&Backend::Cuda) {
        let nvcc = find_nvcc(settings.nvcc.as_deref(), &torch.info)?;
        for w in &nvcc.warnings {
            reporter.warn(w);
        }
        reporter.verbose(&format!("nvcc {} ({})", nvcc.path.display(), nvcc.origin));
        Some(nvcc)
    } else {
        None
    };
    let deps = deps::locate(
        project,
        &selection.chosen,
        &settings.deps,
        &torch.python.path,
    )?;
    Ok(Toolchain {
        torch: Some(torch),
        cxx: Some(cxx),
        nvcc,
        deps,
    })
}
