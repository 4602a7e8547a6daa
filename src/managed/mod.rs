//! Managed toolchains: one virtual environment per torch × compute (a CUDA version, or cpu)
//! under the user's cache directory, provisioned from PyPI (through uv when it is on PATH, else
//! `python3 -m venv` and pip) and pinned in the project's `kbuild.lock`. A build for several
//! torch versions finds its Pythons here.

mod add;
mod install;
mod lock;
mod spec;

pub use add::add;
pub use install::{InstallRequest, Installed, install};
pub use lock::{LOCK_FILE, LockFile, LockedToolchain};
pub use spec::{Compute, ToolchainSpec, major_minor};

use std::path::{Path, PathBuf};

use crate::hint::Hint;
use crate::process::{CommandFailure, on_new_line};

/// File inside an installed toolchain that records it (a lock entry); written last, so a
/// directory without it is an interrupted install.
pub const MARKER: &str = "kbuild-toolchain.toml";

/// A failure to provision, find or remove a managed toolchain.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("`{option} {value}` is not a version (expected `MAJOR.MINOR`, e.g. `2.14`)")]
    BadVersion { option: &'static str, value: String },
    #[error(
        "kbuild does not know which CUDA toolkit torch {torch}'s PyPI wheels need (it knows torch {known})"
    )]
    UnknownTorch { torch: String, known: String },
    #[error("torch {torch}'s PyPI wheels are built for CUDA {needs}, not CUDA {asked}")]
    CudaMismatch {
        torch: String,
        needs: String,
        asked: String,
    },
    #[error("PyPI has no nvcc for CUDA {cuda} (`nvidia-cuda-nvcc-cu12` ships none)")]
    NoPypiNvcc { cuda: String },
    #[error(
        "no directory for toolchains: none of `KBUILD_CACHE_DIR`, `XDG_CACHE_HOME`, `HOME` is set"
    )]
    NoCacheDir,
    #[error("cannot {action} `{}`", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse `{}`", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("`{}` is lock format version {found}; this kbuild reads version 1", path.display())]
    LockVersion { path: PathBuf, found: u32 },
    #[error("installing toolchain `{name}`: {step} failed{}", on_new_line(output))]
    Step {
        name: String,
        step: &'static str,
        /// What the installer printed (stderr, then stdout), the last lines.
        output: String,
        #[source]
        failure: Box<CommandFailure>,
    },
    #[error("no `--torch` given and no toolchains in `{}`", path.display())]
    NothingToInstall { path: PathBuf },
    #[error("toolchain `{name}` is not installed (installed: {installed})")]
    NotInstalled { name: String, installed: String },
    #[error("toolchain `{name}` is installed in `{}` already", dir.display())]
    AlreadyInstalled { name: String, dir: PathBuf },
    #[error("several toolchains have torch {torch}: {names}")]
    AmbiguousTorch { torch: String, names: String },
}

impl Hint for InstallError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            InstallError::BadVersion { option, .. } => {
                format!("write `{option}` as `MAJOR.MINOR`, e.g. `--torch 2.14 --cuda 13.0`")
            }
            InstallError::UnknownTorch { .. } => {
                "use one of the torch versions listed, or install the toolchain yourself and pass \
                 its Python with `--python`"
                    .into()
            }
            InstallError::CudaMismatch { needs, .. } => {
                format!("use `--cuda {needs}` (or leave `--cuda` out)")
            }
            InstallError::NoPypiNvcc { cuda } => format!(
                "install torch for CUDA {cuda} from PyTorch's index (`--index-url \
                 https://download.pytorch.org/whl/cu{}`) and build with a CUDA {cuda} toolkit you \
                 installed: `kbuild build --nvcc <path>` or `CUDA_HOME`",
                cuda.replace('.', "")
            ),
            InstallError::NoCacheDir => "set `KBUILD_CACHE_DIR` to a writable directory".into(),
            InstallError::Io { source, .. } if source.kind() == std::io::ErrorKind::InvalidData => {
                "the file is not UTF-8 text: fix it, or delete it and run `kbuild toolchain \
                 install --torch …` again"
                    .into()
            }
            InstallError::Io { .. } => {
                "check the permissions and free space of the directory (`KBUILD_CACHE_DIR` moves \
                 the toolchains)"
                    .into()
            }
            InstallError::Parse { .. } | InstallError::LockVersion { .. } => {
                "fix the file, or delete it and run `kbuild toolchain install --torch …` again"
                    .into()
            }
            InstallError::Step { .. } => {
                "the installer's output is above; check the network or package index, then run \
                 the same `kbuild toolchain install` again (it starts afresh)"
                    .into()
            }
            InstallError::NothingToInstall { .. } => {
                "name one: `kbuild toolchain install --torch 2.14`".into()
            }
            InstallError::NotInstalled { name, .. } => {
                format!(
                    "install it: `kbuild toolchain install` (from kbuild.lock) or `--torch`; `{name}` names it"
                )
            }
            InstallError::AlreadyInstalled { name, .. } => {
                format!("use it as it is, or remove it first (`kbuild toolchain remove {name}`)")
            }
            InstallError::AmbiguousTorch { .. } => {
                "remove the ones you do not want (`kbuild toolchain remove NAME`) or keep one \
                 entry per torch in kbuild.lock"
                    .into()
            }
        })
    }
}

/// Where managed toolchains live: `$KBUILD_CACHE_DIR/toolchains`, else
/// `$XDG_CACHE_HOME/kbuild/toolchains`, else `~/.cache/kbuild/toolchains`.
pub fn toolchains_dir() -> Result<PathBuf, InstallError> {
    let var = |name| {
        crate::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = var("KBUILD_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("kbuild")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/kbuild")))
        .ok_or(InstallError::NoCacheDir)?;
    Ok(base.join("toolchains"))
}

/// An installed toolchain: its directory, its Python and its record.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Managed {
    pub dir: PathBuf,
    pub python: PathBuf,
    pub record: LockedToolchain,
}

impl Managed {
    fn at(dir: &Path) -> Option<Result<Self, InstallError>> {
        let marker = dir.join(MARKER);
        if !marker.is_file() {
            return None;
        }
        Some(lock::read_entry(&marker).map(|record| Managed {
            dir: dir.to_path_buf(),
            python: add::python_of(dir, &record),
            record,
        }))
    }
}

/// Every complete toolchain under `root`, by name.
pub fn installed(root: &Path) -> Result<Vec<Managed>, InstallError> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(InstallError::Io {
                action: "list",
                path: root.to_path_buf(),
                source,
            });
        }
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        if let Some(managed) = Managed::at(&entry.path()) {
            found.push(managed?);
        }
    }
    found.sort_by(|a, b| a.record.name.cmp(&b.record.name));
    Ok(found)
}

/// The installed toolchain called `name`.
pub fn find(root: &Path, name: &str) -> Result<Managed, InstallError> {
    match Managed::at(&root.join(name)) {
        Some(found) => found,
        None => Err(InstallError::NotInstalled {
            name: name.to_string(),
            installed: names(root)?,
        }),
    }
}

/// The installed toolchain for torch `MAJOR.MINOR`: the one `lock` names if there is a lock
/// entry, else the only one installed. `Ok(None)` when there is none.
pub fn for_torch(
    root: &Path,
    lock: Option<&LockFile>,
    torch_minor: &str,
) -> Result<Option<Managed>, InstallError> {
    if let Some(entry) = lock
        .map(|l| l.for_torch(torch_minor))
        .transpose()?
        .flatten()
    {
        return find(root, &entry.name).map(Some);
    }
    let mut matching: Vec<Managed> = installed(root)?
        .into_iter()
        .filter(|m| m.record.torch == torch_minor)
        .collect();
    match matching.len() {
        0 => Ok(None),
        1 => Ok(matching.pop()),
        _ => Err(InstallError::AmbiguousTorch {
            torch: torch_minor.to_string(),
            names: matching
                .iter()
                .map(|m| m.record.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Delete the installed toolchain `name` (its lock entry stays: the project still wants it).
pub fn remove(root: &Path, name: &str) -> Result<PathBuf, InstallError> {
    let dir = root.join(name);
    if !dir.is_dir() || name.contains('/') || name.starts_with('.') {
        return Err(InstallError::NotInstalled {
            name: name.to_string(),
            installed: names(root)?,
        });
    }
    std::fs::remove_dir_all(&dir).map_err(|source| InstallError::Io {
        action: "remove",
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

fn names(root: &Path) -> Result<String, InstallError> {
    let all: Vec<String> = installed(root)?
        .into_iter()
        .map(|m| m.record.name)
        .collect();
    Ok(if all.is_empty() {
        "none".into()
    } else {
        all.join(", ")
    })
}
