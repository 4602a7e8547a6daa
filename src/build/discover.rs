//! Toolchain discovery for one build: the torch (with its Python), then the compilers the
//! selected backends need. A build for several torch versions discovers one toolchain per torch.

use super::BuildError;
use crate::config::{Backend, Framework, Project};
use crate::plan::select_backends;
use crate::report::Reporter;
use crate::toolchain::{FactCache, Toolchain, ToolchainSettings, find_cxx, find_nvcc, find_torch};

/// The tools `project` needs for the backends `requested` selects (noarch projects need none).
/// What the tools say about themselves comes from `facts` while they are unchanged.
pub fn discover_toolchain(
    project: &Project,
    settings: &ToolchainSettings,
    requested: &[String],
    facts: &FactCache,
    reporter: &dyn Reporter,
) -> Result<Toolchain, BuildError> {
    if !matches!(project.framework, Framework::Torch(_)) {
        return Ok(Toolchain::default());
    }
    let torch = find_torch(settings.python.as_deref(), &project.root, facts)?;
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
    let cxx = find_cxx(facts)?;
    for w in &cxx.warnings {
        reporter.warn(w);
    }
    let nvcc = if selection.chosen.contains(&Backend::Cuda) {
        let nvcc = find_nvcc(settings.nvcc.as_deref(), &torch.info, facts)?;
        for w in &nvcc.warnings {
            reporter.warn(w);
        }
        reporter.verbose(&format!("nvcc {} ({})", nvcc.path.display(), nvcc.origin));
        Some(nvcc)
    } else {
        None
    };
    Ok(Toolchain {
        torch: Some(torch),
        cxx: Some(cxx),
        nvcc,
    })
}
