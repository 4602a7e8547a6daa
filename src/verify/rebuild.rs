//! `kbuild verify --rebuild`: build the variants again from the sources here, into a temporary
//! directory and under the op namespace they carry, and compare them file by file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use super::error::VerifyError;
use super::source::Located;
use crate::orchestrator::{BuildSettings, Builder};
use crate::package::{Metadata, PackageError};
use crate::report::Reporter;

/// How one file of a rebuilt variant compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Difference {
    /// Both have it, with other bytes.
    Differs,
    /// The variant verified has it, the rebuild does not.
    NotRebuilt,
    /// Only the rebuild has it.
    OnlyInRebuild,
}

/// A rebuilt variant against the one verified: the files that differ (none: identical).
#[derive(Debug, Clone, Serialize)]
pub struct Rebuilt {
    pub identical: bool,
    pub differences: BTreeMap<String, Difference>,
}

/// Rebuild `variants` from the project of `build` (its caches as they are: set
/// `KBUILD_CACHE_DIR` to an empty directory to compile every unit anew; never a remote cache)
/// and compare each with what the rebuild wrote. Variants of several op namespaces rebuild once
/// per namespace.
pub fn rebuild(
    variants: &[Located],
    build: &BuildSettings,
    reporter: &dyn Reporter,
) -> Result<Vec<Rebuilt>, VerifyError> {
    let mut by_id: BTreeMap<(String, Option<bool>), Vec<usize>> = BTreeMap::new();
    let mut backends = BTreeSet::new();
    for (i, variant) in variants.iter().enumerate() {
        let (unique_id, backend, steps) = recorded(variant)?;
        by_id.entry((unique_id, steps)).or_default().push(i);
        backends.insert(backend);
    }
    let mut out = vec![None; variants.len()];
    for ((unique_id, steps), members) in by_id {
        let temp = tempfile::tempdir().map_err(|source| VerifyError::Temp {
            path: std::env::temp_dir(),
            source,
        })?;
        let settings = BuildSettings {
            out_dir: Some(temp.path().to_path_buf()),
            unique_id: Some(unique_id),
            backends: backends.iter().cloned().collect(),
            remote_cache: None,
            outputs: Default::default(),
            budget: crate::schedule::JobBudget {
                nvcc: build.budget.nvcc.to_rebuild(steps),
                ..build.budget
            },
            ..build.clone()
        };
        Builder::new(settings, reporter)
            .build()
            .map_err(|e| VerifyError::Rebuild(Box::new(e)))?;
        let built = built_names(temp.path());
        for i in members {
            let variant = &variants[i];
            let again = temp.path().join(&variant.name);
            if !again.join("metadata.json").is_file() {
                return Err(VerifyError::NotRebuilt {
                    variant: variant.name.clone(),
                    built,
                });
            }
            out[i] = Some(compare(&variant.dir, &again)?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The suffix of the variant's op namespace (`_<name>_<backend>_<suffix>`) that `--unique-id`
/// sets, its backend, and whether kbuild's steps (`true`) or one nvcc per unit ran its device
/// passes, if it records that (`kbuild.nvcc`).
fn recorded(variant: &Located) -> Result<(String, String, Option<bool>), VerifyError> {
    let path = variant.dir.join("metadata.json");
    let bytes = std::fs::read(&path).map_err(|source| PackageError::Read {
        path: path.clone(),
        source,
    })?;
    let metadata = Metadata::parse(&bytes).map_err(|message| PackageError::Metadata {
        path: path.clone(),
        message,
    })?;
    let backend = metadata.backend.backend_type;
    let steps = crate::package::steps_recorded(metadata.kbuild.and_then(|k| k.nvcc).as_deref());
    let marker = format!("_{backend}_");
    match metadata.id.rfind(&marker) {
        Some(at) if at > 0 && at + marker.len() < metadata.id.len() => {
            Ok((metadata.id[at + marker.len()..].to_string(), backend, steps))
        }
        _ => Err(VerifyError::UnknownId {
            variant: variant.name.clone(),
            dir: path,
            backend,
            id: metadata.id,
        }),
    }
}

/// The variants a rebuild wrote into `dir`.
fn built_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("metadata.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every file of a variant as published (the signature, which a rebuild cannot make, and
/// Python's bytecode, which the interpreter writes after download, left out): relative path →
/// bytes. Links are followed (a Hub cache's snapshot is links).
fn files(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, VerifyError> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(true) {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(dir).to_path_buf();
            PackageError::Read {
                path,
                source: e.into(),
            }
        })?;
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let rel = rel.to_string_lossy().replace('\\', "/");
        let bytecode = rel.split('/').any(|p| p == "__pycache__") || rel.ends_with(".pyc");
        if !entry.file_type().is_file() || bytecode || rel == "metadata.json.sigstore" {
            continue;
        }
        let bytes = std::fs::read(entry.path()).map_err(|source| PackageError::Read {
            path: entry.path().to_path_buf(),
            source,
        })?;
        out.insert(rel, bytes);
    }
    Ok(out)
}

/// `verified` against `rebuilt`, file by file.
fn compare(verified: &Path, rebuilt: &Path) -> Result<Rebuilt, VerifyError> {
    let (a, b) = (files(verified)?, files(rebuilt)?);
    let mut differences = BTreeMap::new();
    for (path, bytes) in &a {
        match b.get(path) {
            None => {
                differences.insert(path.clone(), Difference::NotRebuilt);
            }
            Some(other) if other != bytes => {
                differences.insert(path.clone(), Difference::Differs);
            }
            Some(_) => {}
        }
    }
    for path in b.keys().filter(|p| !a.contains_key(*p)) {
        differences.insert(path.clone(), Difference::OnlyInRebuild);
    }
    Ok(Rebuilt {
        identical: differences.is_empty(),
        differences,
    })
}
