//! Variants built for part of the project's CUDA matrix (`--cuda-capabilities`). The build
//! records each one beside its variant, in `<out>/.kbuild/<variant>/partial.json` (the variant
//! itself holds only what kernels reads), and publish refuses them unless `--allow-partial`: a
//! Hub release built for one GPU would fail on every other.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PackageError;
use crate::hint::Hint;
use crate::plan::VariantPlan;

/// What a partial variant holds and what the whole matrix would have held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialVariant {
    pub name: String,
    /// metadata.json `backend.archs` of the variant.
    pub archs: Vec<String>,
    /// The `archs` of the project's whole matrix.
    pub matrix_archs: Vec<String>,
}

/// Variants publish was asked to send that hold part of the matrix.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to publish variants built for part of the CUDA matrix: {}",
    describe(variants)
)]
pub struct NarrowVariants {
    pub variants: Vec<PartialVariant>,
}

impl Hint for NarrowVariants {
    fn hint(&self) -> Option<String> {
        Some(
            "rebuild without `--cuda-capabilities` (and without `KBUILD_CUDA_CAPABILITIES`) \
             for the whole matrix, or pass `--allow-partial` to publish them as they are"
                .into(),
        )
    }
}

fn describe(variants: &[PartialVariant]) -> String {
    variants
        .iter()
        .map(|v| {
            format!(
                "`{}` holds {} of {}",
                v.name,
                v.archs.join(", "),
                v.matrix_archs.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn marker(out_dir: &Path, variant: &str) -> PathBuf {
    out_dir.join(".kbuild").join(variant).join("partial.json")
}

/// Record whether `variant`, installed under `out_dir`, holds part of the matrix (write the
/// marker) or all of it (remove a marker an earlier narrow build left).
pub fn record_partial(out_dir: &Path, variant: &VariantPlan) -> Result<(), PackageError> {
    let path = marker(out_dir, &variant.name);
    write_marker(&path, variant).map_err(|source| PackageError::Io { path, source })
}

fn write_marker(path: &Path, variant: &VariantPlan) -> std::io::Result<()> {
    let Some(matrix_archs) = &variant.matrix_archs else {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    };
    let partial = PartialVariant {
        name: variant.name.clone(),
        archs: variant.archs.clone(),
        matrix_archs: matrix_archs.clone(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_vec_pretty(&partial).map_err(std::io::Error::other)?;
    crate::files::write_atomic(path, &json)
}

/// Refuse the variants named (directories under `build_dir`) that a `--cuda-capabilities`
/// build left partial, unless `allow_partial`. A variant without a marker (a full build, or one
/// unpacked from an artifact) passes.
pub fn check_partial<'a>(
    build_dir: &Path,
    names: impl IntoIterator<Item = &'a str>,
    allow_partial: bool,
) -> Result<(), NarrowVariants> {
    if allow_partial {
        return Ok(());
    }
    let variants: Vec<PartialVariant> = names
        .into_iter()
        .filter_map(|name| std::fs::read(marker(build_dir, name)).ok())
        .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
        .collect();
    match variants.is_empty() {
        true => Ok(()),
        false => Err(NarrowVariants { variants }),
    }
}
