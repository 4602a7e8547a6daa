//! The CUDA capability matrix: which capabilities a variant and each kernel compile for, and
//! the dtypes each capability carries.

use std::collections::{BTreeMap, BTreeSet};

use super::PlanError;
use crate::config::{Backend, Capability, DType, Kernel, Location, Project};
use crate::toolchain::Nvcc;

/// The capabilities built when neither `[kbuild.cuda-capabilities]` nor a kernel names any
/// (the common set of current data-centre and consumer GPUs, filtered by what nvcc supports).
pub const DEFAULT_CAPABILITIES: &[(u32, u32)] =
    &[(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)];

/// The capability matrix and per-capability dtypes for the CUDA variant.
pub(super) fn cuda_matrix(project: &Project) -> BTreeMap<Capability, Vec<DType>> {
    if !project.kbuild.capabilities.is_empty() {
        return project.kbuild.capabilities.clone();
    }
    let declared: BTreeSet<Capability> = project
        .kernels
        .iter()
        .filter(|k| k.backend == Backend::Cuda)
        .filter_map(|k| k.cuda_capabilities.clone())
        .flatten()
        .collect();
    let caps: Vec<Capability> = if declared.is_empty() {
        DEFAULT_CAPABILITIES
            .iter()
            .map(|&(major, minor)| Capability {
                major,
                minor,
                suffix: None,
            })
            .collect()
    } else {
        declared.into_iter().collect()
    };
    caps.into_iter().map(|c| (c, DType::ALL.to_vec())).collect()
}

/// The capabilities one CUDA kernel compiles for.
pub(super) fn kernel_capabilities(
    kernel: &Kernel,
    matrix: &BTreeMap<Capability, Vec<DType>>,
    explicit_matrix: bool,
    locations: &BTreeMap<Capability, Location>,
    nvcc: &Nvcc,
) -> Result<Vec<Capability>, PlanError> {
    let (caps, explicit): (Vec<Capability>, bool) = match &kernel.cuda_capabilities {
        Some(list) if explicit_matrix => (
            list.iter()
                .copied()
                .filter(|c| matrix.contains_key(c))
                .collect(),
            true,
        ),
        Some(list) => (list.clone(), true),
        None => (matrix.keys().copied().collect(), explicit_matrix),
    };
    let mut out = Vec::new();
    for cap in caps {
        if nvcc.supports(&cap) {
            out.push(cap);
        } else if explicit {
            let location = kernel
                .cuda_capabilities
                .iter()
                .flatten()
                .position(|c| *c == cap)
                .and_then(|i| kernel.capability_locations.get(i).cloned())
                .or_else(|| locations.get(&cap).cloned())
                .unwrap_or_else(|| kernel.location.clone());
            return Err(PlanError::CapabilityUnsupported {
                location,
                kernel: kernel.name.clone(),
                capability: cap,
                nvcc: format!("{}.{}", nvcc.version.0, nvcc.version.1),
                supported: nvcc
                    .supported
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}
