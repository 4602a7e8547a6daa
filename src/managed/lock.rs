//! `kbuild.lock`: the toolchains a project builds with, pinned to exact package versions.
//!
//! ```toml
//! version = 1
//!
//! [[toolchain]]
//! name = "torch2.14-cu130"
//! torch = "2.14"
//! compute = "cu130"
//! requested = ["torch==2.14.*", "cuda-toolkit[nvcc,cccl,cuobjdump]==13.0.3"]
//! packages = ["cuda-toolkit==13.0.3", "nvidia-cuda-nvcc==13.0.88", "torch==2.14.0", …]
//! ```
//!
//! The same entry is written as `kbuild-toolchain.toml` inside the installed environment, where
//! it marks the installation complete.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::InstallError;

/// The lock file's name, at the project root.
pub const LOCK_FILE: &str = "kbuild.lock";

/// Bumped when the format changes incompatibly.
const LOCK_VERSION: u32 = 1;

const HEADER: &str = "# Written by `kbuild toolchain install`: the toolchains `kbuild build` uses.\n\
# Commit it; `kbuild toolchain install` with no `--torch` installs exactly these versions.\n";

/// One provisioned toolchain: what was asked for and the exact versions installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LockedToolchain {
    /// `torch2.14-cu130`.
    pub name: String,
    /// torch's `MAJOR.MINOR`.
    pub torch: String,
    /// `cu130` or `cpu`.
    pub compute: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_url: Option<String>,
    /// The requirements given to the installer.
    pub requested: Vec<String>,
    /// `name==version` of torch, the CUDA packages and the requested ones, as installed.
    pub packages: Vec<String>,
    /// Only in the marker of a toolchain `toolchain add` registered: the interpreter of the
    /// environment it names (never in kbuild.lock, which is the same on every machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<PathBuf>,
}

/// The whole `kbuild.lock`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    pub version: u32,
    #[serde(default, rename = "toolchain")]
    pub toolchains: Vec<LockedToolchain>,
}

impl Default for LockFile {
    fn default() -> Self {
        LockFile {
            version: LOCK_VERSION,
            toolchains: Vec::new(),
        }
    }
}

impl LockFile {
    /// `<project>/kbuild.lock`, or `None` when the project has none.
    pub fn read(project_dir: &Path) -> Result<Option<Self>, InstallError> {
        let path = project_dir.join(LOCK_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => parse(&path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(InstallError::Io {
                action: "read",
                path,
                source,
            }),
        }
    }

    /// Replace (or add) the entry named like `entry`, without an interpreter; entries stay
    /// sorted by name.
    pub fn upsert(&mut self, entry: LockedToolchain) {
        let entry = LockedToolchain {
            python: None,
            ..entry
        };
        self.toolchains.retain(|t| t.name != entry.name);
        self.toolchains.push(entry);
        self.toolchains.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// The entry for torch `MAJOR.MINOR`, if exactly one; several is an error naming them.
    pub fn for_torch(&self, torch_minor: &str) -> Result<Option<&LockedToolchain>, InstallError> {
        let matching: Vec<&LockedToolchain> = self
            .toolchains
            .iter()
            .filter(|t| t.torch == torch_minor)
            .collect();
        match matching.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            many => Err(InstallError::AmbiguousTorch {
                torch: torch_minor.to_string(),
                names: many
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Write `<project>/kbuild.lock` through a temp file and a rename.
    pub fn write(&self, project_dir: &Path) -> Result<PathBuf, InstallError> {
        let path = project_dir.join(LOCK_FILE);
        write_toml(&path, self)?;
        Ok(path)
    }
}

/// Read a marker or lock entry file.
pub(super) fn read_entry(path: &Path) -> Result<LockedToolchain, InstallError> {
    let text = std::fs::read_to_string(path).map_err(|source| InstallError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| InstallError::Parse {
        path: path.to_path_buf(),
        source: Box::new(source),
    })
}

fn parse(path: &Path, text: &str) -> Result<LockFile, InstallError> {
    let lock: LockFile = toml::from_str(text).map_err(|source| InstallError::Parse {
        path: path.to_path_buf(),
        source: Box::new(source),
    })?;
    if lock.version != LOCK_VERSION {
        return Err(InstallError::LockVersion {
            path: path.to_path_buf(),
            found: lock.version,
        });
    }
    Ok(lock)
}

/// Serialize `value` to `path` (with the header), staged beside it and renamed into place.
pub(super) fn write_toml(path: &Path, value: &impl Serialize) -> Result<(), InstallError> {
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| InstallError::Io {
            action,
            path,
            source,
        }
    };
    // Serializing our own plain structs cannot fail: every field is a string, number or list.
    let body = toml::to_string(value).expect("lock entries serialize");
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{HEADER}{body}")).map_err(io("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io("write", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, torch: &str) -> LockedToolchain {
        LockedToolchain {
            name: name.into(),
            torch: torch.into(),
            compute: "cu130".into(),
            index_url: None,
            requested: vec![format!("torch=={torch}.*")],
            packages: vec![format!("torch=={torch}.0")],
            python: None,
        }
    }

    #[test]
    fn lock_round_trips_sorted_and_replaces_entries_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut lock = LockFile::default();
        lock.upsert(entry("torch2.15-cu132", "2.15"));
        lock.upsert(entry("torch2.14-cu130", "2.14"));
        let mut newer = entry("torch2.14-cu130", "2.14");
        newer.packages = vec!["torch==2.14.1".into()];
        lock.upsert(newer.clone());
        lock.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert!(
            text.starts_with("# Written by `kbuild toolchain install`"),
            "{text}"
        );
        let read = LockFile::read(dir.path()).unwrap().unwrap();
        assert_eq!(read, lock);
        assert_eq!(read.toolchains[0], newer);
        assert_eq!(
            read.for_torch("2.15").unwrap().unwrap().name,
            "torch2.15-cu132"
        );
    }

    #[test]
    fn unknown_keys_and_versions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "version = 1\nextra = 2\n").unwrap();
        let err = LockFile::read(dir.path()).unwrap_err();
        assert!(err.to_string().contains("kbuild.lock"), "{err}");
        std::fs::write(dir.path().join(LOCK_FILE), "version = 7\n").unwrap();
        let err = LockFile::read(dir.path()).unwrap_err();
        assert!(err.to_string().contains("version 7"), "{err}");
    }
}
