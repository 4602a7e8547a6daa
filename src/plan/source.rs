//! The identity of the sources a build is made from: the git commit (and whether the tree is
//! dirty) in a checkout, else a hash of every source file; and the Python files a variant ships.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::PlanError;
use crate::config::{Framework, Project};
use crate::process::{self, CommandSpec};

/// The state of the project's sources, asked of git (or hashed) once per build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceIdentity {
    /// Seven hex digits: the short HEAD commit in a git checkout, else a hash of the sources.
    pub hash: String,
    /// Tracked files under the project differ from HEAD (never set outside git).
    pub dirty: bool,
    /// The full HEAD commit, in a git checkout.
    pub commit: Option<String>,
}

/// In a git checkout: the HEAD commit, dirty when tracked files under the project changed;
/// elsewhere a hash of build.toml, the sources and the Python files.
pub fn source_identity(project: &Project) -> Result<SourceIdentity, PlanError> {
    if let Some((commit, dirty)) = git_state(&project.root) {
        return Ok(SourceIdentity {
            hash: commit[..7.min(commit.len())].to_string(),
            dirty,
            commit: Some(commit),
        });
    }
    let mut hasher = Sha256::new();
    let mut files: BTreeSet<PathBuf> = BTreeSet::new();
    files.insert(project.manifest.clone());
    for kernel in &project.kernels {
        files.extend(kernel.src.iter().map(|p| project.root.join(p)));
    }
    if let Framework::Torch(torch) = &project.framework {
        files.extend(torch.src.iter().map(|p| project.root.join(p)));
    }
    files.extend(python_files(project).into_iter().map(|(src, _)| src));
    for file in files {
        let bytes = std::fs::read(&file).map_err(|source| PlanError::Io {
            path: file.clone(),
            source,
        })?;
        hasher.update(
            file.strip_prefix(&project.root)
                .unwrap_or(&file)
                .to_string_lossy()
                .as_bytes(),
        );
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(SourceIdentity {
        hash: hex::encode(hasher.finalize())[..7].to_string(),
        dirty: false,
        commit: None,
    })
}

/// `(HEAD commit, dirty)`, or `None` outside a git checkout (or without git).
fn git_state(root: &Path) -> Option<(String, bool)> {
    let git = |args: &[&str]| {
        let mut spec = CommandSpec::new("git");
        spec.arg("-C").arg(root).args(args);
        process::run(&spec)
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    let status = git(&["status", "--porcelain", "--untracked-files=no", "--", "."])?;
    Some((commit, !status.is_empty()))
}

/// The extensions of `torch-ext/<name>/` files a variant ships, as HF's builds choose them. A
/// `[torch]` variant is installed by kernel-builder's CMake, which copies `*.py` and the `pyext`
/// entries other than `py` and `pyi` (so no `.pyi`, listed or not); a `[torch-noarch]` variant
/// copies its source set, the files with a `pyext` extension (default `py`, `pyi`).
pub fn shipped_extensions(project: &Project) -> Vec<String> {
    match &project.framework {
        Framework::Torch(torch) => {
            let mut exts = vec!["py".to_string()];
            exts.extend(
                torch
                    .pyext
                    .iter()
                    .flatten()
                    .filter(|e| *e != "py" && *e != "pyi")
                    .cloned(),
            );
            exts
        }
        Framework::TorchNoarch(noarch) => noarch
            .python_extensions()
            .into_iter()
            .map(String::from)
            .collect(),
        Framework::TvmFfi(_) => Vec::new(),
    }
}

/// Files of `torch-ext/<python_name>/` with a shipped extension (see [`shipped_extensions`];
/// never bytecode), with their place inside the variant.
pub fn python_files(project: &Project) -> Vec<(PathBuf, PathBuf)> {
    let dir = project
        .root
        .join("torch-ext")
        .join(project.general.python_name());
    let suffixes: Vec<String> = shipped_extensions(project)
        .iter()
        .map(|e| format!(".{e}"))
        .collect();
    let mut files: Vec<(PathBuf, PathBuf)> = walkdir::WalkDir::new(&dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            let name = e.file_name().to_string_lossy();
            !e.path()
                .components()
                .any(|c| c.as_os_str() == "__pycache__")
                && suffixes.iter().any(|s| name.ends_with(s.as_str()))
        })
        .filter_map(|e| {
            let rel = e.path().strip_prefix(&dir).ok()?.to_path_buf();
            Some((e.path().to_path_buf(), rel))
        })
        .collect();
    files.sort();
    files
}
