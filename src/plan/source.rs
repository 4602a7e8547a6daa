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

/// `(HEAD commit, dirty)`, or `None` outside a git checkout (or without git, or before the
/// first commit). One `git status` answers both: every build asks, so one process, not two.
fn git_state(root: &Path) -> Option<(String, bool)> {
    let mut spec = CommandSpec::new("git");
    spec.arg("-C").arg(root).args([
        "status",
        "--porcelain=v2",
        "--branch",
        "--untracked-files=no",
        "--",
        ".",
    ]);
    // A status refresh would take `index.lock`: a build must not write the user's repository
    // (nor fail a `git commit` running beside it).
    spec.env.push(("GIT_OPTIONAL_LOCKS".into(), "0".into()));
    let out = process::run(&spec).ok()?;
    parse_status(&String::from_utf8_lossy(&out.stdout))
}

/// `# branch.oid <commit>` gives the commit; any line that is not a `#` header is a change.
fn parse_status(text: &str) -> Option<(String, bool)> {
    let commit = text
        .lines()
        .find_map(|l| l.strip_prefix("# branch.oid "))
        .filter(|oid| oid.chars().all(|c| c.is_ascii_hexdigit()))?;
    let dirty = text.lines().any(|l| !l.is_empty() && !l.starts_with('#'));
    Some((commit.to_string(), dirty))
}

/// Files of `torch-ext/<python_name>/` (no bytecode), with their place inside the variant.
pub fn python_files(project: &Project) -> Vec<(PathBuf, PathBuf)> {
    let dir = project
        .root
        .join("torch-ext")
        .join(project.general.python_name());
    let mut files: Vec<(PathBuf, PathBuf)> = walkdir::WalkDir::new(&dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            !e.path()
                .components()
                .any(|c| c.as_os_str() == "__pycache__")
                && e.path().extension().is_none_or(|x| x != "pyc")
        })
        .filter_map(|e| {
            let rel = e.path().strip_prefix(&dir).ok()?.to_path_buf();
            Some((e.path().to_path_buf(), rel))
        })
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_status_gives_the_commit_and_whether_the_tree_is_dirty() {
        let clean = "# branch.oid 71154b7cfd938ddd32ab8cae6546de70a58451b0\n# branch.head speed\n";
        assert_eq!(
            parse_status(clean),
            Some(("71154b7cfd938ddd32ab8cae6546de70a58451b0".into(), false))
        );
        let dirty = format!("{clean}1 .M N... 100644 100644 100644 a b src/x.rs\n");
        assert_eq!(parse_status(&dirty).map(|(_, d)| d), Some(true));
    }

    #[test]
    fn a_repository_without_commits_has_no_git_identity() {
        assert_eq!(
            parse_status("# branch.oid (initial)\n# branch.head main\n"),
            None
        );
    }
}
