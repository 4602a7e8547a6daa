//! Toolchain discovery for one build: the torch (with its Python), then the compilers the
//! selected backends need. A build for several torch versions discovers one toolchain per torch:
//! [`choose_toolchains`] says where each one is.

use std::path::PathBuf;

use super::BuildError;
use crate::config::{Backend, Framework, Project};
use crate::depends;
use crate::plan::select_backends;
use crate::report::Reporter;
use crate::toolchain::{FactCache, Toolchain, ToolchainSettings, find_cxx, find_nvcc, find_torch};
use crate::managed::{self, InstallError, LockFile, major_minor, toolchains_dir};

/// Where one toolchain of a build comes from.
#[derive(Debug, Clone)]
pub struct ToolchainChoice {
    pub settings: ToolchainSettings,
    /// The torch `MAJOR.MINOR` asked for; the discovered torch must match it.
    pub torch: Option<String>,
}

/// One choice per requested torch (`--torch`, else the toolchains of kbuild.lock): the managed
/// toolchain for it when one is installed, else the default Python (`--python`, venv…), whose
/// torch must then be that version. With no torch requested: the default Python alone.
pub fn choose_toolchains(
    project_dir: &std::path::Path,
    settings: &ToolchainSettings,
    requested: &[String],
) -> Result<Vec<ToolchainChoice>, BuildError> {
    let lock = LockFile::read(project_dir)?;
    let mut torches: Vec<String> = requested.iter().map(|t| major_minor(t)).collect();
    if torches.is_empty() {
        torches = lock
            .iter()
            .flat_map(|l| &l.toolchains)
            .map(|t| t.torch.clone())
            .collect();
    }
    if torches.is_empty() {
        return Ok(vec![ToolchainChoice {
            settings: settings.clone(),
            torch: None,
        }]);
    }
    let root = toolchains_dir()?;
    let mut choices: Vec<ToolchainChoice> = Vec::new();
    for torch in torches {
        if choices.iter().any(|c| c.torch.as_ref() == Some(&torch)) {
            continue;
        }
        let python: Option<PathBuf> = match managed::for_torch(&root, lock.as_ref(), &torch) {
            Ok(found) => found.map(|m| m.python),
            // Locked but not installed here: the default Python may still be that torch.
            Err(InstallError::NotInstalled { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        choices.push(ToolchainChoice {
            settings: ToolchainSettings {
                python: python.or_else(|| settings.python.clone()),
                ..settings.clone()
            },
            torch: Some(torch),
        });
    }
    Ok(choices)
}

/// The tools `project` needs for the backends `requested` selects (noarch projects need none).
/// What the tools say about themselves comes from `facts` while they are unchanged.
pub fn discover_toolchain(
    project: &Project,
    settings: &ToolchainSettings,
    requested: &[String],
    expected_torch: Option<&str>,
    facts: &FactCache,
    reporter: &dyn Reporter,
) -> Result<Toolchain, BuildError> {
    if !matches!(project.framework, Framework::Torch(_)) {
        return Ok(Toolchain::default());
    }
    let torch = find_torch(settings.python.as_deref(), &project.root, facts)?;
    if let Some(wanted) = expected_torch {
        let (major, minor) = torch.info.major_minor();
        if format!("{major}.{minor}") != *wanted {
            return Err(BuildError::TorchNotFound {
                wanted: wanted.to_string(),
                python: torch.python.path.clone(),
                found: torch.info.version.clone(),
            });
        }
    }
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
    let deps = depends::locate(
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
