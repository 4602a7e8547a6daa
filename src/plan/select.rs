//! Which of build.toml's backends this build produces, and why the others are left out.

use super::{PlanError, Skipped};
use crate::config::{Backend, Framework, Project};
use crate::toolchain::TorchInfo;

/// The backends to build, in build.toml's order, and the ones skipped (with the reason).
#[derive(Debug, Clone)]
pub struct Selection {
    pub chosen: Vec<Backend>,
    pub skipped: Vec<Skipped>,
}

/// Why kbuild cannot build `backend` for this project here, if it cannot. Noarch (pure Python)
/// variants build for every backend; compiled ones need kbuild support and, for cuda, CUDA torch.
fn unbuildable(
    project: &Project,
    torch: Option<&TorchInfo>,
    backend: Backend,
) -> Option<PlanError> {
    if matches!(project.framework, Framework::TorchNoarch(_)) {
        return None;
    }
    if !backend.is_supported() {
        return Some(PlanError::BackendUnsupported {
            backend: backend.to_string(),
        });
    }
    match torch {
        Some(t) if backend == Backend::Cuda && t.cuda.is_none() => Some(PlanError::CpuOnlyTorch {
            torch: t.version.clone(),
        }),
        _ => None,
    }
}

/// Which backends to build for `requested` (`--backend`; empty: every buildable one). `torch` is
/// `None` for noarch projects, which need no toolchain.
pub fn select_backends(
    project: &Project,
    torch: Option<&TorchInfo>,
    requested: &[String],
) -> Result<Selection, PlanError> {
    if matches!(project.framework, Framework::TvmFfi(_)) {
        return Err(PlanError::TvmFfiUnsupported);
    }
    let listed: Vec<Backend> = project.general.backends.clone();
    let mut chosen = Vec::new();
    let mut skipped = Vec::new();
    if !requested.is_empty() {
        for name in requested {
            let Some(backend) = listed.iter().copied().find(|b| b.as_str() == name) else {
                return Err(PlanError::BackendNotInProject {
                    backend: name.clone(),
                    listed: listed
                        .iter()
                        .map(|b| format!("\"{b}\""))
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            };
            if let Some(err) = unbuildable(project, torch, backend) {
                return Err(err);
            }
            if !chosen.contains(&backend) {
                chosen.push(backend);
            }
        }
        for backend in listed {
            if !chosen.contains(&backend) {
                skipped.push(Skipped {
                    backend,
                    reason: "not selected with `--backend`".into(),
                    deselected: true,
                });
            }
        }
        return Ok(Selection { chosen, skipped });
    }
    for backend in listed {
        match unbuildable(project, torch, backend) {
            Some(PlanError::BackendUnsupported { .. }) => skipped.push(Skipped {
                backend,
                reason: format!(
                    "kbuild does not build the `{backend}` backend (only cpu and cuda)"
                ),
                deselected: false,
            }),
            Some(PlanError::CpuOnlyTorch { torch }) => skipped.push(Skipped {
                backend,
                reason: format!("torch {torch} is CPU-only"),
                deselected: false,
            }),
            Some(_) => {}
            None if !chosen.contains(&backend) => chosen.push(backend),
            None => {}
        }
    }
    if chosen.is_empty() {
        let reasons = skipped
            .iter()
            .map(|s| format!("{}: {}", s.backend, s.reason))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(PlanError::NothingToBuild { reasons });
    }
    Ok(Selection { chosen, skipped })
}
