//! The CUDA capabilities of a variant: which capabilities each kernel compiles for (with PTX
//! where it is embedded), the `archs` metadata.json records, and the dtypes each capability
//! carries.
//!
//! Two rules decide a kernel's capabilities. A project with kbuild's `[kbuild.cuda-capabilities]`
//! matrix builds exactly that matrix (a kernel's own list narrows it; a capability nvcc cannot
//! build is an error), with PTX for the newest. Every other project follows HF kernel-builder
//! (`preamble.cmake`, `cuda_kernel_component` in `kernel.cmake`): a kernel's `cuda-capabilities`
//! is intersected loosely with the default set of the nvcc's CUDA version, entries that do not
//! survive are dropped with one note, and a kernel without a list builds that default set, PTX
//! only for its newest capability.

use std::collections::{BTreeMap, BTreeSet};

use super::{Gencode, PlanError, capabilities};
use crate::config::{Backend, Capability, DType, Kernel, Project};
use crate::toolchain::Nvcc;

/// kernel-builder's `CUDA_DEFAULT_KERNEL_ARCHS` by CUDA version (`preamble.cmake`): the
/// capabilities a kernel without `cuda-capabilities` builds, and the targets a kernel's list is
/// intersected with. The last one of each set also gets PTX (`12.1+PTX`).
const HF_DEFAULT_CUDA_13: &[(u32, u32)] = &[
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 9),
    (9, 0),
    (10, 0),
    (11, 0),
    (12, 0),
    (12, 1),
];
const HF_DEFAULT_CUDA_12_8: &[(u32, u32)] = &[
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 9),
    (9, 0),
    (10, 0),
    (10, 1),
    (12, 0),
];
const HF_DEFAULT_OLDER: &[(u32, u32)] = &[
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 9),
    (9, 0),
];

/// HF's default capabilities for CUDA `version` (`major.minor`), oldest first; the last one is
/// the one built with PTX.
pub fn hf_default_capabilities(version: (u32, u32)) -> Vec<Capability> {
    let set = if version >= (13, 0) {
        HF_DEFAULT_CUDA_13
    } else if version >= (12, 8) {
        HF_DEFAULT_CUDA_12_8
    } else {
        HF_DEFAULT_OLDER
    };
    set.iter()
        .map(|&(major, minor)| Capability {
            major,
            minor,
            suffix: None,
        })
        .collect()
}

/// What the CUDA kernels of one variant compile for.
#[derive(Debug, Clone, Default)]
pub(super) struct VariantArchs {
    /// The `-gencode`s of each kernel that is built, by kernel name. A kernel missing here is
    /// skipped: its `cuda-minver` is above this nvcc, as HF skips it.
    pub per_kernel: BTreeMap<String, Vec<Gencode>>,
    /// Every capability compiled into the variant, oldest first.
    pub capabilities: Vec<Capability>,
    /// The dtypes each capability carries.
    pub dtypes: BTreeMap<Capability, Vec<DType>>,
    /// metadata.json `backend.archs` as kernel-builder writes it: each kernel's capabilities,
    /// `+PTX` where PTX is embedded, deduplicated and sorted as strings.
    pub archs: Vec<String>,
    /// The newest capability whose PTX is embedded.
    pub ptx: Option<Capability>,
    /// One line for the user when capabilities were left out or kernels skipped.
    pub notes: Vec<String>,
    /// With `--cuda-capabilities`: the `archs` of the whole matrix, which this variant holds
    /// only part of; `None` when it holds the whole matrix.
    pub matrix_archs: Option<Vec<String>>,
    /// With `--cuda-capabilities` leaving part of the matrix out: each kernel's gencodes in the
    /// whole matrix (`per_kernel` before narrowing); empty otherwise.
    pub matrix_per_kernel: BTreeMap<String, Vec<Gencode>>,
}

/// The capabilities of every CUDA kernel of `project` for this nvcc, narrowed to `selected`
/// (`--cuda-capabilities`) when given.
pub(super) fn cuda_archs(
    project: &Project,
    nvcc: &Nvcc,
    selected: Option<&[Capability]>,
) -> Result<VariantArchs, PlanError> {
    let kernels: Vec<&Kernel> = project
        .kernels
        .iter()
        .filter(|k| k.backend == Backend::Cuda)
        .collect();
    let nvcc_version = format!("{}.{}", nvcc.version.0, nvcc.version.1);
    let mut out = VariantArchs::default();
    let mut skipped = Vec::new();
    let mut built = Vec::new();
    for kernel in kernels {
        match &kernel.cuda_minver {
            Some(min) if version_of(nvcc.version) < *min => {
                skipped.push(format!("`{}` ({min})", kernel.name));
            }
            _ => built.push(kernel),
        }
    }
    if !skipped.is_empty() {
        out.notes.push(format!(
            "kernels skipped because nvcc {nvcc_version} is older than their `cuda-minver`, as \
             kernel-builder skips them: {}",
            skipped.join(", ")
        ));
    }
    let matrix = &project.kbuild.capabilities;
    if matrix.is_empty() {
        hf_rule(&built, nvcc, &nvcc_version, &mut out)?;
    } else {
        kbuild_rule(project, &built, nvcc, &nvcc_version, &mut out)?;
    }
    if let Some(selected) = selected {
        narrow_to_selection(&mut out, selected)?;
    }
    let all: BTreeSet<Capability> = out
        .per_kernel
        .values()
        .flatten()
        .map(|g| g.capability)
        .collect();
    out.capabilities = all.into_iter().collect();
    out.dtypes = out
        .capabilities
        .iter()
        .map(|c| {
            let dtypes = matrix.get(c).cloned();
            (*c, dtypes.unwrap_or_else(|| DType::ALL.to_vec()))
        })
        .collect();
    let archs: BTreeSet<String> = out.per_kernel.values().flatten().map(arch_string).collect();
    out.archs = archs.into_iter().collect();
    out.ptx = out
        .per_kernel
        .values()
        .flatten()
        .filter(|g| g.ptx)
        .map(|g| g.capability)
        .max();
    Ok(out)
}

/// Keep of each kernel only the gencodes that serve `selected`, skip (with a note) the kernels
/// none of whose serves it, as kernel-builder's loose intersection skips them; remember the
/// whole matrix's `archs` when anything was left out.
fn narrow_to_selection(out: &mut VariantArchs, selected: &[Capability]) -> Result<(), PlanError> {
    let all_archs = archs_in_order(out.per_kernel.values().flatten());
    let mut skipped = Vec::new();
    let mut kept = BTreeMap::new();
    for (name, gencodes) in &out.per_kernel {
        match narrow(gencodes, selected) {
            narrowed if narrowed.is_empty() => {
                skipped.push(format!("`{name}` ({})", join_gencodes(gencodes)))
            }
            narrowed => {
                kept.insert(name.clone(), narrowed);
            }
        }
    }
    if kept.is_empty() && !out.per_kernel.is_empty() {
        return Err(PlanError::SelectionMissesEveryKernel {
            selected: capabilities::join(selected),
            kernels: skipped.join(", "),
        });
    }
    if !skipped.is_empty() {
        out.notes.push(format!(
            "kernels skipped because none of their capabilities runs on `--cuda-capabilities {}`: {}",
            capabilities::join(selected),
            skipped.join(", ")
        ));
    }
    let matrix = std::mem::replace(&mut out.per_kernel, kept);
    let archs = archs_in_order(out.per_kernel.values().flatten());
    if archs != all_archs {
        out.notes.push(format!(
            "`--cuda-capabilities {}`: this variant holds {} of the project's {}; `kbuild \
             publish` refuses it unless given `--allow-partial`",
            capabilities::join(selected),
            archs.join(", "),
            all_archs.join(", "),
        ));
        out.matrix_archs = Some(all_archs.into_iter().collect());
        out.matrix_per_kernel = matrix;
    }
    Ok(())
}

fn join_gencodes(gencodes: &[Gencode]) -> String {
    gencodes
        .iter()
        .map(arch_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Each arch of `gencodes` once, oldest capability first (`7.5` before `10.0`, as numbers).
fn archs_in_order<'a>(gencodes: impl Iterator<Item = &'a Gencode>) -> Vec<String> {
    let ordered: BTreeSet<(Capability, bool)> = gencodes.map(|g| (g.capability, g.ptx)).collect();
    ordered
        .into_iter()
        .map(|(capability, ptx)| arch_string(&Gencode { capability, ptx }))
        .collect()
}

/// `9.0`, or `12.1+PTX` when the PTX is embedded too (kernel-builder's notation).
fn arch_string(gencode: &Gencode) -> String {
    gencode.capability.arch_name(gencode.ptx)
}

fn version_of((major, minor): (u32, u32)) -> crate::config::Version {
    // Two numbers joined by a dot always parse.
    format!("{major}.{minor}")
        .parse()
        .expect("major.minor is a version")
}

/// HF's rule: the loose intersection of each kernel's list with the default set, the default
/// set (PTX on its newest) for kernels without a list.
fn hf_rule(
    kernels: &[&Kernel],
    nvcc: &Nvcc,
    nvcc_version: &str,
    out: &mut VariantArchs,
) -> Result<(), PlanError> {
    let targets: Vec<Capability> = hf_default_capabilities(nvcc.version)
        .into_iter()
        .filter(|c| nvcc.supports(c))
        .collect();
    let newest = targets.last().copied();
    let mut dropped = Vec::new();
    for kernel in kernels {
        let gencodes: Vec<Gencode> = match &kernel.cuda_capabilities {
            None => targets
                .iter()
                .map(|&capability| Gencode {
                    capability,
                    ptx: Some(capability) == newest,
                })
                .collect(),
            Some(listed) => {
                let kept: Vec<Capability> = loose_intersection(listed, &targets)
                    .into_iter()
                    .filter(|c| nvcc.supports(c))
                    .collect();
                if kept.is_empty() {
                    return Err(PlanError::NoBuildableCapability {
                        location: Box::new(
                            kernel
                                .capability_locations
                                .first()
                                .unwrap_or(&kernel.location)
                                .clone(),
                        ),
                        kernel: kernel.name.clone(),
                        listed: join(listed),
                        nvcc: nvcc_version.to_string(),
                        supported: join(&targets),
                    });
                }
                let gone: Vec<Capability> = listed
                    .iter()
                    .filter(|c| !kept.contains(c))
                    .copied()
                    .collect();
                if !gone.is_empty() {
                    dropped.push(format!("`{}`: {}", kernel.name, join(&gone)));
                }
                kept.into_iter()
                    .map(|capability| Gencode {
                        capability,
                        ptx: false,
                    })
                    .collect()
            }
        };
        out.per_kernel.insert(kernel.name.clone(), gencodes);
    }
    if !dropped.is_empty() {
        out.notes.push(format!(
            "capabilities left out of kernel {} (nvcc {nvcc_version} builds {} here, as \
             kernel-builder intersects `cuda-capabilities` with its defaults)",
            dropped.join("; "),
            join(&targets)
        ));
    }
    Ok(())
}

/// kernel-builder's `cuda_archs_loose_intersection` (utils.cmake) for lists without `+PTX`
/// (build.toml cannot write it): `X.Ya`/`X.Yf` survives when `X.Y` is a target, and takes that
/// target; every other target takes the newest listed capability of its major that is not newer
/// than it (SASS runs on newer minors of its major only).
fn loose_intersection(listed: &[Capability], targets: &[Capability]) -> Vec<Capability> {
    let mut open: Vec<Capability> = targets.to_vec();
    let mut out: BTreeSet<Capability> = BTreeSet::new();
    for cap in listed.iter().filter(|c| c.suffix.is_some()) {
        let base = Capability {
            suffix: None,
            ..*cap
        };
        if targets.contains(&base) {
            open.retain(|t| *t != base);
            out.insert(*cap);
        }
    }
    for target in &open {
        let best = listed
            .iter()
            .filter(|c| c.suffix.is_none() && c.major == target.major && c.minor <= target.minor)
            .max();
        out.extend(best);
    }
    out.into_iter().collect()
}

/// kbuild's rule for projects with `[kbuild.cuda-capabilities]`: the matrix (narrowed by a
/// kernel's list), every capability buildable by this nvcc, PTX for the variant's newest.
fn kbuild_rule(
    project: &Project,
    kernels: &[&Kernel],
    nvcc: &Nvcc,
    nvcc_version: &str,
    out: &mut VariantArchs,
) -> Result<(), PlanError> {
    let matrix = &project.kbuild.capabilities;
    let mut per_kernel: BTreeMap<String, Vec<Capability>> = BTreeMap::new();
    for kernel in kernels {
        let caps: Vec<Capability> = match &kernel.cuda_capabilities {
            Some(list) => list
                .iter()
                .copied()
                .filter(|c| matrix.contains_key(c))
                .collect(),
            None => matrix.keys().copied().collect(),
        };
        if let Some(cap) = caps.iter().find(|c| !nvcc.supports(c)) {
            let location = kernel
                .cuda_capabilities
                .iter()
                .flatten()
                .position(|c| c == cap)
                .and_then(|i| kernel.capability_locations.get(i))
                .or_else(|| project.kbuild.locations.get(cap))
                .unwrap_or(&kernel.location)
                .clone();
            return Err(PlanError::CapabilityUnsupported {
                location,
                kernel: kernel.name.clone(),
                capability: *cap,
                nvcc: nvcc_version.to_string(),
                supported: join(&nvcc.supported),
            });
        }
        let mut caps = caps;
        caps.sort();
        caps.dedup();
        per_kernel.insert(kernel.name.clone(), caps);
    }
    let newest = per_kernel.values().flatten().max().copied();
    out.per_kernel = per_kernel
        .into_iter()
        .map(|(name, caps)| {
            let gencodes = caps
                .into_iter()
                .map(|capability| Gencode {
                    capability,
                    ptx: Some(capability) == newest,
                })
                .collect();
            (name, gencodes)
        })
        .collect();
    Ok(())
}

/// The gencodes of a kernel that serve `selected`: for each selected capability, what
/// kernel-builder's loose intersection takes from the kernel's own (an `X.Ya` build for `X.Y`,
/// else the newest of the same major not newer than it: SASS runs on newer minors of its
/// major). A gencode keeps its PTX. Empty: the kernel serves none of the selection.
fn narrow(gencodes: &[Gencode], selected: &[Capability]) -> Vec<Gencode> {
    let own: Vec<Capability> = gencodes.iter().map(|g| g.capability).collect();
    let kept = loose_intersection(&own, selected);
    gencodes
        .iter()
        .filter(|g| kept.contains(&g.capability))
        .cloned()
        .collect()
}

fn join(caps: &[Capability]) -> String {
    caps.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &str) -> Vec<Capability> {
        list.split_whitespace()
            .map(|c| Capability::parse_shape(c).unwrap())
            .collect()
    }

    fn shown(caps: &[Capability]) -> String {
        caps.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn loose_intersection_matches_kernel_builders_documented_example() {
        // utils.cmake: SRC 7.5;8.0;8.6;9.0;9.0a with TGT 8.0;8.9;9.0 gives 8.0;8.6;9.0a (its
        // comment also lists 9.0, but 9.0a takes the 9.0 target, so the code drops plain 9.0).
        let got = loose_intersection(&caps("7.5 8.0 8.6 9.0 9.0a"), &caps("8.0 8.9 9.0"));
        assert_eq!(shown(&got), "8.0 8.6 9.0a");
    }

    #[test]
    fn loose_intersection_drops_what_no_target_of_its_major_reaches() {
        let targets = hf_default_capabilities((13, 0));
        let got = loose_intersection(&caps("5.0 7.0 7.5 8.0 10.1 11.8 12.0"), &targets);
        assert_eq!(shown(&got), "7.5 8.0 12.0");
        // 7.0 alone is what the 7.5 target takes (an nvcc without sm_70 then drops it).
        assert_eq!(shown(&loose_intersection(&caps("7.0"), &targets)), "7.0");
    }

    #[test]
    fn hf_defaults_follow_the_cuda_version() {
        assert_eq!(
            shown(&hf_default_capabilities((13, 2))),
            "7.5 8.0 8.6 8.7 8.9 9.0 10.0 11.0 12.0 12.1"
        );
        assert_eq!(
            shown(&hf_default_capabilities((12, 9))),
            "7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0 10.0 10.1 12.0"
        );
        assert_eq!(
            shown(&hf_default_capabilities((12, 6))),
            "7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0"
        );
    }

    fn gencode(s: &str, ptx: bool) -> Gencode {
        Gencode {
            capability: Capability::parse_shape(s).unwrap(),
            ptx,
        }
    }

    #[test]
    fn narrowing_keeps_what_runs_on_the_selected_gpus() {
        let all = [
            gencode("7.5", false),
            gencode("8.0", false),
            gencode("9.0a", false),
            gencode("12.0", true),
        ];
        // An 8.6 GPU runs 8.0's SASS; a 9.0 GPU takes the 9.0a build.
        let got = narrow(&all, &caps("8.6 9.0"));
        assert_eq!(got, [gencode("8.0", false), gencode("9.0a", false)]);
        assert_eq!(narrow(&all, &caps("12.0")), [gencode("12.0", true)]);
        assert!(narrow(&all, &caps("10.0")).is_empty());
    }
}
