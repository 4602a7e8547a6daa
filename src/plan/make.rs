//! Turning a validated project and one discovered toolchain into a `BuildPlan`.

use std::collections::BTreeMap;

use super::bounds::check_torch;
use super::jobs::fill_compiled_variant;
use super::{
    BuildPlan, PlanError, PlanSettings, VariantPlan, python_files, select_backends, source_identity,
};
use crate::config::{Backend, Framework, Project};
use crate::depends::Origin;
use crate::toolchain::{Toolchain, TorchInfo};

/// `torch215-cxx11-cu132-x86_64-linux`, `torch215-cxx11-cpu-x86_64-linux`, or `torch-<backend>`
/// for noarch projects. A backend built against the stable ABI is named after its target, with
/// no C++ ABI tag (kernel-builder's `generate_build_name`): `torch-stable-abi210-cu132-…`, which
/// `kernels` loads with any torch at least that new.
pub fn variant_name(project: &Project, torch: Option<&TorchInfo>, backend: Backend) -> String {
    let Some(torch) = torch.filter(|_| !matches!(project.framework, Framework::TorchNoarch(_)))
    else {
        return format!("torch-{backend}");
    };
    let compute = match (backend, torch.cuda_major_minor()) {
        (Backend::Cuda, Some((cmaj, cmin))) => format!("cu{cmaj}{cmin}"),
        _ => backend.as_str().to_string(),
    };
    let (arch, os) = (std::env::consts::ARCH, std::env::consts::OS);
    let stable_abi = match &project.framework {
        Framework::Torch(t) => t.stable_abi.as_ref().and_then(|s| s.for_backend(backend)),
        _ => None,
    };
    if let Some(target) = stable_abi {
        let (major, minor) = target.major_minor();
        return format!("torch-stable-abi{major}{minor}-{compute}-{arch}-{os}");
    }
    let (major, minor) = torch.major_minor();
    let abi = if torch.cxx11_abi { "cxx11" } else { "cxx98" };
    format!("torch{major}{minor}-{abi}-{compute}-{arch}-{os}")
}

/// Plan every variant `settings.backends` selects for this toolchain: names, op namespaces,
/// generated headers, compile and link jobs, capabilities and dtypes.
pub fn make_plan(
    project: &Project,
    toolchain: &Toolchain,
    settings: &PlanSettings,
) -> Result<BuildPlan, PlanError> {
    let selection = select_backends(project, toolchain.torch_info(), &settings.backends)?;
    if let Some(torch) = toolchain.torch_info() {
        check_torch(project, torch)?;
    }
    let work_dir = settings.out_dir.join(".kbuild");
    let source = source_identity(project)?;
    // A chosen id names the build as given: no `_dirty` suffix.
    let suffix = match &settings.unique_id {
        Some(id) => id.clone(),
        None if source.dirty => format!("{}_dirty", source.hash),
        None => source.hash.clone(),
    };
    let python_files = python_files(project)?;
    let mut variants = Vec::new();
    let mut notes = Vec::new();
    for backend in selection.chosen {
        let mut variant = empty_variant(project, toolchain, backend, &suffix, &work_dir);
        variant.python_files = python_files.clone();
        let vwork = work_dir.join(&variant.name);
        match (&project.framework, &toolchain.torch) {
            (Framework::Torch(bindings), Some(torch)) => notes.extend(fill_compiled_variant(
                project,
                bindings,
                toolchain,
                torch,
                settings,
                &vwork,
                &mut variant,
            )?),
            // Pure Python: archs are declared, not compiled (HF: `torch-noarch.cuda_capabilities`,
            // written to metadata.json as listed).
            (Framework::TorchNoarch(noarch), _) if backend == Backend::Cuda => {
                variant.capabilities = noarch.cuda_capabilities.clone();
                variant.archs = noarch
                    .cuda_capabilities
                    .iter()
                    .map(ToString::to_string)
                    .collect();
            }
            _ => {}
        }
        variants.push(variant);
    }
    let fetches = toolchain.deps.iter().filter_map(|h| match &h.origin {
        Origin::Fetch(fetch) => Some(fetch.clone()),
        _ => None,
    });
    Ok(BuildPlan {
        root: project.root.clone(),
        out_dir: settings.out_dir.clone(),
        work_dir,
        source,
        variants,
        skipped: selection.skipped,
        fetches: fetches.collect(),
        notes,
    })
}

/// A variant of `backend` with its name, op namespace (`_<package>_<backend>_<suffix>`) and
/// scratch directories, before its jobs are planned.
fn empty_variant(
    project: &Project,
    toolchain: &Toolchain,
    backend: Backend,
    suffix: &str,
    work_dir: &std::path::Path,
) -> VariantPlan {
    let python_name = project.general.python_name();
    let name = variant_name(project, toolchain.torch_info(), backend);
    let vwork = work_dir.join(&name);
    VariantPlan {
        id: format!("_{python_name}_{backend}_{suffix}"),
        name,
        backend,
        python_name,
        capabilities: Vec::new(),
        dtypes: BTreeMap::new(),
        archs: Vec::new(),
        ptx: None,
        matrix_archs: None,
        generated_include: vwork.join("include"),
        obj_dir: vwork.join("obj"),
        compile: Vec::new(),
        link: None,
        python_files: Vec::new(),
    }
}
