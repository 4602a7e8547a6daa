//! Fetching a header tree into kbuild's cache: the fetch as data (a dry run prints it), the
//! command that performs it, and the staged move into place.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{DepsError, Release, cutlass};
use crate::config::{Dependency, Location};
use crate::process::{self, CommandSpec};

/// A header tree to download into kbuild's cache, as plain data (a dry run prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fetch {
    pub dependency: Dependency,
    /// Where it comes from (`"source": "pypi"` or `"git"` in JSON, beside its fields).
    #[serde(flatten)]
    pub source: FetchSource,
    /// The cache entry it becomes.
    pub into: PathBuf,
    /// The `depends` entry that asked for it, for errors.
    #[serde(skip)]
    pub location: Location,
}

/// Where a fetched header tree comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum FetchSource {
    /// A PyPI requirement (`nvidia-cutlass==3.6.0.0`) installed by the build's Python, so its
    /// pip settings (index, proxy, certificates) apply.
    Pypi {
        requirement: String,
        python: PathBuf,
        /// The header tree inside the installed files (`cutlass_library/source`).
        tree: PathBuf,
    },
    /// A shallow clone of one tag of a git repository: how kernel-builder's Nix gets the
    /// releases PyPI lacks.
    Git { url: String, tag: String },
}

impl FetchSource {
    /// What the fetch does, for an error message: ``cloning `v3.9.2` of `URL` ``.
    pub(super) fn action(&self) -> String {
        match self {
            FetchSource::Pypi {
                requirement,
                python,
                ..
            } => format!("fetching `{requirement}` with `{}`", python.display()),
            FetchSource::Git { url, tag } => format!("cloning `{tag}` of `{url}`"),
        }
    }

    /// The command that downloads into `dest`, and where the header tree then is.
    fn command(&self, dest: &Path) -> (CommandSpec, PathBuf) {
        match self {
            FetchSource::Pypi {
                requirement,
                python,
                tree,
            } => {
                let mut pip = pip_install(python, requirement);
                pip.args(["--no-compile", "--only-binary", ":all:"])
                    .args(["--disable-pip-version-check", "--no-input", "--target"])
                    .arg(dest);
                (pip, dest.join(tree))
            }
            FetchSource::Git { url, tag } => {
                let mut git = git_clone(url, tag);
                // `--quiet`: on failure git's own error is all the message needs.
                git.arg("--quiet").arg(dest);
                // Without a terminal prompt a repository that wants credentials fails at once
                // instead of waiting for a password nobody types.
                git.env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
                (git, dest.to_path_buf())
            }
        }
    }
}

impl fmt::Display for FetchSource {
    /// The download as a person would type it, without the destination.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchSource::Pypi {
                requirement,
                python,
                ..
            } => write!(f, "{}", pip_install(python, requirement)),
            FetchSource::Git { url, tag } => write!(f, "{}", git_clone(url, tag)),
        }
    }
}

/// `PYTHON -m pip install --no-deps REQUIREMENT`.
fn pip_install(python: &Path, requirement: &str) -> CommandSpec {
    let mut pip = CommandSpec::new(python);
    pip.args(["-m", "pip", "install", "--no-deps", requirement]);
    pip
}

/// `git clone --depth 1 --branch TAG URL`, the destination still to add.
pub(super) fn git_clone(url: &str, tag: &str) -> CommandSpec {
    let mut git = CommandSpec::new("git");
    git.args(["clone", "--depth", "1", "--branch", tag, url]);
    git
}

/// Download `fetch` into a staging directory beside the cache entry, check that it holds the
/// release asked for, and rename its header tree into place. Another build that fetched it
/// meanwhile wins; a failed fetch leaves nothing in the cache.
pub fn fetch(fetch: &Fetch) -> Result<(), DepsError> {
    let unsupported = || DepsError::Unsupported {
        location: fetch.location.clone(),
        dependency: fetch.dependency,
    };
    let Dependency::Cutlass { major, minor } = fetch.dependency else {
        return Err(unsupported());
    };
    let release = Release::of(major, minor).ok_or_else(unsupported)?;
    let parent = fetch.into.parent().unwrap_or(&fetch.into);
    let io = |source| DepsError::Io {
        path: parent.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(parent).map_err(io)?;
    let staging = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(parent)
        .map_err(io)?;
    let (command, tree) = fetch.source.command(&staging.path().join("download"));
    process::run(&command).map_err(|failure| DepsError::FetchFailed {
        fetch: Box::new(fetch.clone()),
        output: failure.diagnostics(),
        failure: Box::new(failure),
    })?;
    let found = cutlass::tree_version(&tree);
    if found != Some((major, minor)) {
        return Err(DepsError::FetchedTreeWrong {
            fetch: Box::new(fetch.clone()),
            release,
            found,
        });
    }
    // The cache keeps headers, not a repository: the clone's history is of no use to a build.
    let git_dir = tree.join(".git");
    if git_dir.exists() {
        std::fs::remove_dir_all(&git_dir).map_err(|source| DepsError::Io {
            path: git_dir.clone(),
            source,
        })?;
    }
    if let Err(source) = std::fs::rename(&tree, &fetch.into)
        && cutlass::tree_version(&fetch.into) != Some((major, minor))
    {
        return Err(DepsError::Io {
            path: fetch.into.clone(),
            source,
        });
    }
    Ok(())
}
