//! Files kbuild generates from templates/: headers on the include path and Python glue.

use std::collections::BTreeMap;

use minijinja::{Environment, context};
use serde::Serialize;

use super::error::PackageError;
use super::metadata::{CapabilityDtypes, KbuildSection};
use crate::config::{Capability, DType};
use crate::plan::VariantPlan;

const REGISTRATION_H: &str = include_str!("../../templates/registration.h.j2");
const DTYPES_H: &str = include_str!("../../templates/kbuild_dtypes.h.j2");
const OPS_PY: &str = include_str!("../../templates/_ops.py.j2");
const CAPABILITIES_PY: &str = include_str!("../../templates/_capabilities.py.j2");

fn render(name: &str, template: &str, ctx: minijinja::Value) -> Result<String, PackageError> {
    let mut env = Environment::new();
    env.set_keep_trailing_newline(true);
    env.add_template(name, template)
        .and_then(|_| env.get_template(name)?.render(ctx))
        .map_err(|source| PackageError::Template {
            name: name.to_string(),
            source,
        })
}

/// `registration.h`: HF-compatible op registration macros. The same for every variant and op
/// namespace, so a new commit does not change a header every binding unit includes.
pub fn registration_h() -> Result<String, PackageError> {
    render("registration.h", REGISTRATION_H, context! {})
}

#[derive(Serialize)]
struct ArchDtypes {
    number: u32,
    capability: String,
    fp32: u8,
    fp16: u8,
    bf16: u8,
}

fn flags(capability: String, number: u32, dtypes: &[DType]) -> ArchDtypes {
    let has = |d| u8::from(dtypes.contains(&d));
    ArchDtypes {
        number,
        capability,
        fp32: has(DType::Float32),
        fp16: has(DType::Float16),
        bf16: has(DType::BFloat16),
    }
}

/// `kbuild_dtypes.h`: `KBUILD_HAS_<DTYPE>` per `__CUDA_ARCH__` from the capability matrix.
pub fn dtypes_h(variant: &VariantPlan) -> Result<String, PackageError> {
    // `9.0` and `9.0a` share `__CUDA_ARCH__ == 900`: their dtypes are merged.
    let mut by_arch: BTreeMap<u32, (Vec<String>, Vec<DType>)> = BTreeMap::new();
    for (cap, dtypes) in &variant.dtypes {
        let entry = by_arch.entry(cap.major * 100 + cap.minor * 10).or_default();
        entry.0.push(cap.to_string());
        entry.1.extend(dtypes.iter().copied());
    }
    let archs: Vec<ArchDtypes> = by_arch
        .into_iter()
        .rev()
        .map(|(n, (caps, dtypes))| flags(caps.join(", "), n, &dtypes))
        .collect();
    let all: Vec<DType> = if variant.dtypes.is_empty() {
        DType::ALL.to_vec()
    } else {
        variant.dtypes.values().flatten().copied().collect()
    };
    render(
        "kbuild_dtypes.h",
        DTYPES_H,
        context! { archs => archs, all => flags(String::new(), 0, &all) },
    )
}

/// `_ops.py`: `ops = torch.ops.<id>` and `add_op_namespace_prefix`.
pub fn ops_py(variant: &VariantPlan) -> Result<String, PackageError> {
    render(
        "_ops.py",
        OPS_PY,
        context! { id => &variant.id, compiled => variant.link.is_some() },
    )
}

/// The capability → dtypes table of a variant, as metadata.json and `_capabilities.py` carry
/// it; `None` when the variant compiles for no CUDA capability.
pub fn capability_table(variant: &VariantPlan) -> Option<KbuildSection> {
    let capabilities: Vec<CapabilityDtypes> = variant
        .dtypes
        .iter()
        .map(|(cap, dtypes)| {
            let mut names: Vec<String> = dtypes.iter().map(|d| d.as_str().to_string()).collect();
            names.dedup();
            CapabilityDtypes {
                capability: cap.to_string(),
                dtypes: names,
            }
        })
        .collect();
    let ptx = variant.ptx.as_ref().map(Capability::to_string);
    (!capabilities.is_empty() || ptx.is_some()).then_some(KbuildSection {
        capabilities,
        ptx,
        nvcc: None,
    })
}

/// `_capabilities.py`: the capability → dtypes table (the one metadata.json carries) and
/// `check_dtype`.
pub fn capabilities_py(variant: &VariantPlan) -> Result<String, PackageError> {
    let table = capability_table(variant);
    let matrix: Vec<(&str, &[String])> = table
        .iter()
        .flat_map(|t| &t.capabilities)
        .map(|c| (c.capability.as_str(), c.dtypes.as_slice()))
        .collect();
    let ptx = table.as_ref().and_then(|t| t.ptx.as_deref());
    render(
        "_capabilities.py",
        CAPABILITIES_PY,
        context! { matrix => matrix, ptx => ptx },
    )
}
