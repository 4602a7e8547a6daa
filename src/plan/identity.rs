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
/// elsewhere a hash of build.toml and the compiled sources. The Python files are left out: the
/// hash names the op namespace compiled into every unit, and an edit of Python alone must not
/// recompile them (the variant's digest still tells two such variants apart).
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
    for file in files {
        hasher.update(
            file.strip_prefix(&project.root)
                .unwrap_or(&file)
                .to_string_lossy()
                .as_bytes(),
        );
        // The content, then its length: streamed, so a huge file costs time but not memory.
        let mut content = Sha256::new();
        let len = crate::files::stream_regular(&file, |block| content.update(block)).map_err(
            |source| PlanError::Io {
                path: file.clone(),
                source,
            },
        )?;
        hasher.update(len.to_le_bytes());
        hasher.update(content.finalize());
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
///
/// A link that stays inside the project is followed and ships its target's content (a file, or
/// a directory's files under the link's name); a link leading out of the project, a FIFO,
/// socket or device, a directory that cannot be read and a name that is not UTF-8 are errors
/// naming the path: leaving any of them out would ship a package that fails on import.
pub fn python_files(project: &Project) -> Result<Vec<(PathBuf, PathBuf)>, PlanError> {
    let dir = project
        .root
        .join(project.framework.extension_dir())
        .join(project.general.python_name());
    let suffixes: Vec<String> = shipped_extensions(project)
        .iter()
        .map(|e| format!(".{e}"))
        .collect();
    let is_cache = |e: &walkdir::DirEntry| {
        e.file_name() == "__pycache__"
            || (e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "pyc"))
    };
    let mut files = Vec::new();
    let walk = walkdir::WalkDir::new(&dir)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !is_cache(e));
    for entry in walk {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(&dir).to_path_buf();
            let source = match e.into_io_error() {
                Some(io) => io,
                // walkdir's only other error: a link back to a directory above it.
                None => {
                    std::io::Error::other("a symbolic link here leads back to a parent directory")
                }
            };
            PlanError::PythonUnreadable { path, source }
        })?;
        let path = entry.path();
        let rel = path.strip_prefix(&dir).unwrap_or(path);
        if rel.to_str().is_none() {
            return Err(PlanError::PythonNonUtf8 {
                path: path.to_path_buf(),
            });
        }
        if entry.path_is_symlink() {
            check_link_inside(path, &project.root)?;
        }
        // With links followed, the type is the target's.
        if let Some(kind) =
            crate::files::kind_of(entry.file_type()).filter(|_| !entry.file_type().is_dir())
        {
            return Err(PlanError::PythonNotRegular {
                path: path.to_path_buf(),
                kind,
            });
        }
        let shipped = suffixes
            .iter()
            .any(|s| entry.file_name().to_string_lossy().ends_with(s.as_str()));
        if entry.file_type().is_file() && shipped {
            files.push((path.to_path_buf(), rel.to_path_buf()));
        }
    }
    files.sort();
    Ok(files)
}

/// A link under the Python package must resolve inside the project root (already canonical).
fn check_link_inside(link: &Path, root: &Path) -> Result<(), PlanError> {
    let target = link
        .canonicalize()
        .map_err(|source| PlanError::PythonUnreadable {
            path: link.to_path_buf(),
            source,
        })?;
    if !target.starts_with(root) {
        return Err(PlanError::PythonLinkOutside {
            link: link.to_path_buf(),
            target,
        });
    }
    Ok(())
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
