//! Checks a built variant before it leaves the machine: metadata.json parses, the digest matches
//! the files, the extension and `_ops.py` use the op namespace in metadata, and whether the build
//! came from a dirty tree.

use std::path::{Path, PathBuf};

use kernels_data::digest::Digest;
use kernels_data::metadata::Metadata;

use super::PackageError;

/// A variant that passed verification, with what publishing needs to know about it.
#[derive(Debug)]
pub struct VerifiedVariant {
    /// Directory name, e.g. `torch215-cxx11-cpu-x86_64-linux`.
    pub name: String,
    pub dir: PathBuf,
    /// Kernel name as in metadata (`ltx-kernels`).
    pub kernel_name: String,
    /// Op namespace (= extension module name).
    pub id: String,
    pub version: usize,
    pub license: String,
    /// `cuda`, `cpu`, ...
    pub backend: String,
    pub archs: Vec<String>,
    pub python_depends: Vec<String>,
    /// Built from a dirty git tree (`_dirty` id suffix or provenance says so).
    pub dirty: bool,
    /// Files to publish, relative to `dir`, `/`-separated, sorted: the digest's files plus
    /// metadata.json (and its sigstore bundle when present). Caches (`__pycache__`, `.pyc`) are
    /// not part of a variant.
    pub files: Vec<String>,
}

/// Verify one variant directory (`build/<variant>`).
pub fn verify_variant(dir: &Path) -> Result<VerifiedVariant, PackageError> {
    let metadata_path = dir.join("metadata.json");
    let bytes = std::fs::read(&metadata_path).map_err(|source| PackageError::Read {
        path: metadata_path.clone(),
        source,
    })?;
    let invalid = |message: String| PackageError::Metadata {
        path: metadata_path.clone(),
        message,
    };
    let metadata: Metadata = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    // kbuild's own model reads the provenance (kernels-data 0.16 predates it).
    let ours: super::Metadata =
        serde_json::from_slice(&bytes).map_err(|e| invalid(format!("`provenance`: {e}")))?;
    let expected = metadata
        .digest
        .as_ref()
        .ok_or_else(|| invalid("no `digest`: kernels cannot check this variant's files".into()))?;
    if !is_identifier(&metadata.id) {
        return Err(invalid(format!(
            "`id` `{}` is not a valid Python module name",
            metadata.id
        )));
    }

    let actual =
        Digest::hash_variant(expected.algorithm(), dir).map_err(|e| PackageError::Read {
            path: dir.to_path_buf(),
            source: std::io::Error::other(format!("{e:#}")),
        })?;
    if let Err(e) = expected.validate(&actual) {
        return Err(PackageError::Digest {
            dir: dir.to_path_buf(),
            violations: e.violations().iter().map(|v| format!("  {v}")).collect(),
        });
    }

    check_namespace(dir, &metadata.id, actual.files().keys())?;

    let mut files: Vec<String> = actual.files().keys().cloned().collect();
    files.push("metadata.json".into());
    if dir.join("metadata.json.sigstore").is_file() {
        files.push("metadata.json.sigstore".into());
    }
    files.sort();

    Ok(VerifiedVariant {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        dir: dir.to_path_buf(),
        kernel_name: metadata.name.to_string(),
        dirty: ours.is_dirty(),
        id: metadata.id,
        version: metadata.version,
        license: metadata.license,
        backend: metadata.backend.backend_type.to_string(),
        archs: metadata.backend.archs.unwrap_or_default(),
        python_depends: metadata.python_depends,
        files,
    })
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The `.so` files must be `<id>.*.so`, and `_ops.py` must import and use `torch.ops.<id>`.
fn check_namespace<'a>(
    dir: &Path,
    id: &str,
    files: impl Iterator<Item = &'a String>,
) -> Result<(), PackageError> {
    let mismatch = |path: PathBuf, found: &str| PackageError::Namespace {
        path,
        expected: id.to_string(),
        found: found.to_string(),
    };
    for file in files.filter(|f| !f.contains('/') && f.ends_with(".so")) {
        let module = file.split('.').next().unwrap_or_default();
        if module != id {
            return Err(mismatch(dir.join(file), module));
        }
    }
    let ops_path = dir.join("_ops.py");
    let ops = std::fs::read_to_string(&ops_path).map_err(|source| PackageError::Read {
        path: ops_path.clone(),
        source,
    })?;
    let mut uses = 0;
    for namespace in namespaces(&ops) {
        if namespace != id {
            return Err(mismatch(ops_path, namespace));
        }
        uses += 1;
    }
    if uses == 0 {
        return Err(PackageError::Metadata {
            path: ops_path,
            message: format!("no `torch.ops.{id}`: the ops of this variant are not reachable"),
        });
    }
    Ok(())
}

/// Every `torch.ops.<name>` and `from . import <name>` in `_ops.py`.
fn namespaces(ops: &str) -> impl Iterator<Item = &str> {
    let ident_end = |s: &str| {
        s.find(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
            .unwrap_or(s.len())
    };
    let mut out = Vec::new();
    for marker in ["torch.ops.", "from . import "] {
        let mut rest = ops;
        while let Some(at) = rest.find(marker) {
            let tail = &rest[at + marker.len()..];
            let name = &tail[..ident_end(tail)];
            if !name.is_empty() {
                out.push(name);
            }
            rest = tail;
        }
    }
    out.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_finds_ops_and_imports() {
        let src = "import torch\nfrom . import _relu_cpu_abc\nops = torch.ops._relu_cpu_abc\n\
                   def add_op_namespace_prefix(op_name: str):\n    return f\"_relu_cpu_abc::{op_name}\"\n";
        let found: Vec<&str> = namespaces(src).collect();
        assert_eq!(found, ["_relu_cpu_abc", "_relu_cpu_abc"]);
    }

    #[test]
    fn identifiers_are_python_module_names() {
        assert!(is_identifier("_relu_cpu_1a2b3c4"));
        assert!(!is_identifier("1abc"));
        assert!(!is_identifier("a-b"));
        assert!(!is_identifier(""));
    }
}
