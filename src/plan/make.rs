//! Turning a validated project and one discovered toolchain into a `BuildPlan`.

use std::collections::BTreeMap;

use super::jobs::fill_compiled_variant;
use super::{
    BuildPlan, PlanError, PlanSettings, VariantPlan, python_files, select_backends, source_identity,
};
use crate::config::{Backend, Framework, Project};
use crate::toolchain::{Toolchain, TorchInfo};

/// `torch215-cxx11-cu132-x86_64-linux`, `torch215-cxx11-cpu-x86_64-linux`, or `torch-<backend>`
/// for noarch projects.
pub fn variant_name(project: &Project, torch: Option<&TorchInfo>, backend: Backend) -> String {
    let Some(torch) = torch.filter(|_| !matches!(project.framework, Framework::TorchNoarch(_)))
    else {
        return format!("torch-{backend}");
    };
    let (major, minor) = torch.major_minor();
    let abi = if torch.cxx11_abi { "cxx11" } else { "cxx98" };
    let compute = match (backend, torch.cuda_major_minor()) {
        (Backend::Cuda, Some((cmaj, cmin))) => format!("cu{cmaj}{cmin}"),
        _ => backend.as_str().to_string(),
    };
    format!(
        "torch{major}{minor}-{abi}-{compute}-{}-{}",
        std::env::consts::ARCH,
        std::env::consts::OS
    )
}

/// Plan every variant `settings.backends` selects for this toolchain: names, op namespaces,
/// generated headers, compile and link jobs, capabilities and dtypes.
pub fn make_plan(
    project: &Project,
    toolchain: &Toolchain,
    settings: &PlanSettings,
) -> Result<BuildPlan, PlanError> {
    let selection = select_backends(project, toolchain.torch_info(), &settings.backends)?;
    let work_dir = settings.out_dir.join(".kbuild");
    let source = source_identity(project)?;
    // A chosen id names the build as given: no `_dirty` suffix.
    let (hash, dirty) = match &settings.unique_id {
        Some(id) => (id.clone(), false),
        None => (source.hash.clone(), source.dirty),
    };
    let python_name = project.general.python_name();
    let python_files = python_files(project)?;
    let mut variants = Vec::new();
    for backend in selection.chosen {
        let name = variant_name(project, toolchain.torch_info(), backend);
        let id = format!(
            "_{python_name}_{backend}_{hash}{}",
            if dirty { "_dirty" } else { "" }
        );
        let vwork = work_dir.join(&name);
        let mut variant = VariantPlan {
            name,
            backend,
            id,
            python_name: python_name.clone(),
            capabilities: Vec::new(),
            dtypes: BTreeMap::new(),
            generated_include: vwork.join("include"),
            obj_dir: vwork.join("obj"),
            compile: Vec::new(),
            link: None,
            python_files: python_files.clone(),
        };
        match (&project.framework, &toolchain.torch) {
            (Framework::Torch(bindings), Some(torch)) => fill_compiled_variant(
                project,
                bindings,
                toolchain,
                torch,
                settings,
                &vwork,
                &mut variant,
            )?,
            // Pure Python: archs are declared, not compiled (HF: `torch-noarch.cuda_capabilities`).
            (Framework::TorchNoarch(noarch), _) if backend == Backend::Cuda => {
                variant.capabilities = noarch.cuda_capabilities.clone();
            }
            _ => {}
        }
        variants.push(variant);
    }
    Ok(BuildPlan {
        root: project.root.clone(),
        out_dir: settings.out_dir.clone(),
        work_dir,
        source,
        variants,
        skipped: selection.skipped,
    })
}
