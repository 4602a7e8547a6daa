//! Where a fetched header tree comes from (PyPI or a git tag) and the command that downloads it.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::process::CommandSpec;

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
    pub(super) fn command(&self, dest: &Path) -> (CommandSpec, PathBuf) {
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
