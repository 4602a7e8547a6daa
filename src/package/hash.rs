//! `kbuild hash`: recompute a built variant's digest the way `kernels` verifies it on load,
//! compare it with the one in metadata.json, and on request write it there.

use std::path::{Path, PathBuf};

use kernels_data::digest::DigestAlgorithm;
use serde::Serialize;

use super::digest::{VariantDigest, open_regular, variant_files};
use super::error::PackageError;
use super::metadata::Metadata;
use super::stage::write_if_changed;

/// How a variant's files compare with its recorded digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HashStatus {
    /// metadata.json's digest is what the files hash to.
    Match,
    /// It is not (see `violations`).
    Mismatch,
    /// metadata.json has no digest (kernels refuses such a variant).
    Missing,
    /// metadata.json now holds the recomputed digest (`--write`; it differed or was missing).
    Written,
}

/// One variant's digest, recomputed.
#[derive(Debug, Clone, Serialize)]
pub struct HashCheck {
    pub variant: String,
    pub dir: PathBuf,
    pub status: HashStatus,
    /// What differs, in the words of `kernels` (`File hash mismatch for …`).
    pub violations: Vec<String>,
    /// The digest the files hash to now.
    pub digest: VariantDigest,
    /// A `metadata.json.sigstore` that rewriting made stale.
    pub stale_signature: Option<PathBuf>,
}

/// Recompute the digest of the variant at `path`, or of every variant in the build directory
/// `path`; with `write`, put the recomputed digest into each metadata.json that differs.
pub fn hash_variants(path: &Path, write: bool) -> Result<Vec<HashCheck>, PackageError> {
    let dirs = if path.join("metadata.json").exists() {
        vec![path.to_path_buf()]
    } else {
        variant_dirs(path)?
    };
    dirs.iter().map(|dir| hash_variant(dir, write)).collect()
}

/// The directories of `build_dir` that hold a metadata.json, sorted.
fn variant_dirs(build_dir: &Path) -> Result<Vec<PathBuf>, PackageError> {
    let entries = std::fs::read_dir(build_dir).map_err(|source| PackageError::Read {
        path: build_dir.to_path_buf(),
        source,
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|d| d.join("metadata.json").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(PackageError::NoVariants {
            dir: build_dir.to_path_buf(),
            missing: Vec::new(),
        });
    }
    Ok(dirs)
}

fn hash_variant(dir: &Path, write: bool) -> Result<HashCheck, PackageError> {
    let path = dir.join("metadata.json");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut open_regular(&path)?, &mut bytes).map_err(|source| {
        PackageError::Read {
            path: path.clone(),
            source,
        }
    })?;
    let invalid = |message: String| PackageError::Metadata {
        path: path.clone(),
        message,
    };
    let mut metadata = Metadata::parse(&bytes).map_err(invalid)?;
    let algorithm = metadata
        .digest
        .as_ref()
        .map_or(DigestAlgorithm::SHA256, |d| d.algorithm);
    let files = variant_files(dir)?;
    let actual = VariantDigest::hash(algorithm, &files.hashed)?;
    let (mut status, violations) = match &metadata.digest {
        None => (HashStatus::Missing, Vec::new()),
        Some(expected) => {
            let v = expected.violations(&actual);
            let status = if v.is_empty() {
                HashStatus::Match
            } else {
                HashStatus::Mismatch
            };
            (status, v)
        }
    };
    let mut stale_signature = None;
    if write && status != HashStatus::Match {
        // A digest written over a hard-linked file would vouch for another file's content (a
        // token's): publish refuses such a file, and so does the rewrite.
        for file in files.hashed.iter().chain(&files.metadata) {
            super::tree::check_single_link(&file.path)?;
        }
        let original: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        metadata.digest = Some(actual.clone());
        write_if_changed(&path, rewritten(&metadata, original)?.as_bytes())?;
        status = HashStatus::Written;
        let sig = dir.join("metadata.json.sigstore");
        stale_signature = sig.exists().then_some(sig);
    }
    Ok(HashCheck {
        variant: dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        dir: dir.to_path_buf(),
        status,
        violations,
        digest: actual,
        stale_signature,
    })
}

/// metadata.json with the new digest: in kbuild's layout when kbuild's model holds every field
/// the file has, unchanged, else the file's own fields with `digest` replaced (keys then sorted), so that
/// fields kbuild does not know survive.
fn rewritten(metadata: &Metadata, mut original: serde_json::Value) -> Result<String, PackageError> {
    let json_err = |e: serde_json::Error| PackageError::Metadata {
        path: PathBuf::from("metadata.json"),
        message: e.to_string(),
    };
    let ours = serde_json::to_value(metadata).map_err(json_err)?;
    let digest = ours.get("digest").cloned().unwrap_or_default();
    if let Some(map) = original.as_object_mut() {
        map.insert("digest".into(), digest);
    }
    // kbuild's model may add fields with their defaults (`kernel-depends: []`); it must not
    // lose or change any.
    let kept_whole = original
        .as_object()
        .is_some_and(|map| map.iter().all(|(k, v)| ours.get(k) == Some(v)));
    if kept_whole {
        return Ok(metadata.to_json());
    }
    let mut text = serde_json::to_string_pretty(&original).map_err(json_err)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(dir: &Path, extra: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("__init__.py"), "x = 1\n").unwrap();
        let meta = format!(
            r#"{{"name": "relu", "id": "_relu_cpu_1", "version": 1, "license": "mit",
               "python-depends": [], "backend": {{"type": "cpu"}}{extra}}}"#
        );
        std::fs::write(dir.join("metadata.json"), meta).unwrap();
    }

    #[test]
    fn a_missing_digest_is_reported_then_written_and_then_matches() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("torch215-cxx11-cpu-x86_64-linux");
        variant(&dir, "");
        let checks = hash_variants(tmp.path(), false).unwrap();
        assert_eq!(checks[0].status, HashStatus::Missing);
        assert_eq!(
            hash_variants(&dir, true).unwrap()[0].status,
            HashStatus::Written
        );
        assert_eq!(
            hash_variants(&dir, false).unwrap()[0].status,
            HashStatus::Match
        );
        let text = std::fs::read_to_string(dir.join("metadata.json")).unwrap();
        assert!(
            text.starts_with("{\n  \"name\": \"relu\""),
            "kbuild's layout: {text}"
        );
    }

    #[test]
    fn fields_kbuild_does_not_know_survive_a_rewrite() {
        let tmp = tempfile::tempdir().unwrap();
        variant(tmp.path(), r#", "future-field": {"a": 1}"#);
        assert_eq!(
            hash_variants(tmp.path(), true).unwrap()[0].status,
            HashStatus::Written
        );
        let text = std::fs::read_to_string(tmp.path().join("metadata.json")).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["future-field"]["a"], 1);
        assert_eq!(json["digest"]["algorithm"], "sha256");
    }
}
