//! metadata.json as `kernels` 0.17 reads it, with the digest from HF's `kernels-data` crate.

use std::path::Path;

use kernels_data::digest::{Digest, DigestAlgorithm};
use serde::{Deserialize, Serialize};

use super::PackageError;

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

/// One variant's metadata.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    pub backend: BackendInfo,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub digest: Option<Digest>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub provenance: Option<Provenance>,
}

impl Metadata {
    /// Hash every file of `variant_dir` (except metadata.json) the way `kernels` verifies it.
    pub fn set_digest(&mut self, variant_dir: &Path) -> Result<(), PackageError> {
        let digest = Digest::hash_variant(DigestAlgorithm::SHA256, variant_dir).map_err(|e| {
            PackageError::Hash {
                dir: variant_dir.to_path_buf(),
                reason: format!("{e:#}"),
            }
        })?;
        self.digest = Some(digest);
        Ok(())
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("metadata always serializes");
        text.push('\n');
        text
    }

    /// Whether the build came from a dirty tree: the `_dirty` id suffix, or provenance says the
    /// kernel source or the builder was dirty (what kernels 0.17 warns about).
    pub fn is_dirty(&self) -> bool {
        self.id.ends_with("_dirty")
            || self.provenance.as_ref().is_some_and(|p| {
                p.kernel.as_ref().is_some_and(|k| k.dirty) || p.builder.dirty == Some(true)
            })
    }
}
