//! metadata.json as `kernels` 0.17 reads it, plus kbuild's own `kbuild` section (the capability
//! → dtypes table), which `kernels` ignores like any key it does not know.

use serde::{Deserialize, Serialize};

use super::digest::VariantDigest;

/// `backend` of metadata.json.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackendInfo {
    #[serde(rename = "type")]
    pub backend_type: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub archs: Option<Vec<String>>,
}

/// Git state of a source tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GitStatus {
    pub commit: String,
    pub dirty: bool,
}

/// The tool that produced the build (`kernel-builder` is the key `kernels` reads).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BuilderVersion {
    pub version: String,
    /// Whether the builder's own source tree was dirty (written by kernel-builder, not kbuild).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dirty: Option<bool>,
}

/// Build provenance in the shape `kernels` parses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Provenance {
    #[serde(rename = "kernel-builder")]
    pub builder: BuilderVersion,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernel: Option<GitStatus>,
}

/// An entry of `kernel-depends` as kernel-builder writes it (kernels-data's `KernelDependency`):
/// `{"repo-id": "org/kernel", "version": 1}` or `{"repo-id": "org/kernel", "revision": "…"}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct KernelDependencyEntry {
    pub repo_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub revision: Option<String>,
}

/// The dtypes one compiled CUDA capability carries.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CapabilityDtypes {
    /// `9.0`, `9.0a`.
    pub capability: String,
    /// Torch names: `float32`, `float16`, `bfloat16`.
    pub dtypes: Vec<String>,
}

/// kbuild's section of metadata.json: what `_capabilities.py` checks at run time, in a form
/// tools read without running Python.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KbuildSection {
    /// In build order (oldest capability first).
    pub capabilities: Vec<CapabilityDtypes>,
    /// The capability whose PTX is embedded, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ptx: Option<String>,
    /// Who ran nvcc's device passes: [`NVCC_STEPS`] or [`ONE_NVCC`]. The device code's bytes
    /// differ between the two (kbuild's steps put `cicc`'s PTX in a canonical order), so
    /// `kbuild verify --rebuild` rebuilds the way recorded here.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub nvcc: Option<String>,
}

/// [`KbuildSection::nvcc`] of a variant whose CUDA units ran as kbuild's steps.
pub const NVCC_STEPS: &str = "steps";
/// [`KbuildSection::nvcc`] of a variant built with one nvcc per CUDA unit.
pub const ONE_NVCC: &str = "one nvcc per unit";

/// What [`KbuildSection::nvcc`] records for a build whose CUDA units ran as kbuild's steps
/// (`true`) or as one nvcc per unit.
pub fn nvcc_record(steps: bool) -> &'static str {
    if steps { NVCC_STEPS } else { ONE_NVCC }
}

/// Whether a recorded [`KbuildSection::nvcc`] says kbuild's steps ran (`Some(true)`), one nvcc
/// per unit (`Some(false)`), or nothing kbuild writes (`None`: an older kbuild, another tool).
pub fn steps_recorded(nvcc: Option<&str>) -> Option<bool> {
    match nvcc {
        Some(NVCC_STEPS) => Some(true),
        Some(ONE_NVCC) => Some(false),
        _ => None,
    }
}

/// One variant's metadata.json.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct Metadata {
    pub name: String,
    pub id: String,
    pub version: u32,
    pub license: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub upstream: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source: Option<String>,
    pub python_depends: Vec<String>,
    /// Hub kernels this kernel loads at run time; written even when empty, as kernel-builder
    /// does (kernels resolves and locks them).
    #[serde(default)]
    pub kernel_depends: Vec<KernelDependencyEntry>,
    pub backend: BackendInfo,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub digest: Option<VariantDigest>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub provenance: Option<Provenance>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kbuild: Option<KbuildSection>,
}

impl Metadata {
    /// Parse metadata.json. `kernels-data` decides whether `kernels` accepts it (kernel name,
    /// backend, URLs); kbuild's model then reads it whole, including the provenance and the
    /// `kbuild` section that kernels-data 0.16 does not know. The message is the parser's.
    pub fn parse(bytes: &[u8]) -> Result<Metadata, String> {
        serde_json::from_slice::<kernels_data::metadata::Metadata>(bytes)
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Plain strings, numbers and maps only: serializing cannot fail.
        let mut text = serde_json::to_string_pretty(self).expect("metadata always serializes");
        text.push('\n');
        text
    }
}
