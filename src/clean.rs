//! `kbuild clean`: remove what kbuild wrote into the output directory (variants, the work
//! directory `.kbuild/`, temporaries of killed builds) and, on request, the wheels and artifacts
//! in dist/. Anything else found there is kept and named. Runs under the build's lock.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::files::is_stale_temp;
use crate::hint::Hint;
use crate::orchestrator::{BuildError, BuildLock};
use crate::package::name::VariantName;
use crate::report::Reporter;

/// What to clean.
#[derive(Debug, Clone)]
pub struct CleanSettings {
    /// The build's output directory (`<project>/build` unless `--out-dir`).
    pub out_dir: PathBuf,
    /// Also clean this dist directory.
    pub dist_dir: Option<PathBuf>,
    /// List what would go, remove nothing.
    pub dry_run: bool,
}

/// What kind of kbuild output a removed path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Output {
    Variant,
    /// Inside `.kbuild/`: objects, caches, the develop link, records.
    Work,
    /// A staging or moved-aside directory of a killed build.
    Temporary,
    Wheel,
    Artifact,
}

/// One path removed (or, with `--dry-run`, to be removed).
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub path: PathBuf,
    pub kind: Output,
    pub bytes: u64,
}

/// A path kept because kbuild did not write it.
#[derive(Debug, Clone, Serialize)]
pub struct Kept {
    pub path: PathBuf,
    pub reason: &'static str,
}

/// What `clean` did.
#[derive(Debug, Clone, Serialize)]
pub struct CleanReport {
    pub dry_run: bool,
    pub removed: Vec<Removed>,
    pub kept: Vec<Kept>,
    /// The packages whose `kbuild develop` link went with `.kbuild/`: environments that
    /// developed them no longer import them (until the next `kbuild develop`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub develop_links: Vec<String>,
}

/// A failure of `kbuild clean`.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error(transparent)]
    Lock(Box<BuildError>),
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove `{}`", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Hint for CleanError {
    fn hint(&self) -> Option<String> {
        match self {
            CleanError::Lock(e) => e.hint(),
            CleanError::Read { .. } | CleanError::Remove { .. } => {
                Some("check the directory's permissions".into())
            }
        }
    }
}

/// The lock file stays: a build waiting on it would otherwise run beside one that made a new one.
const LOCK: &str = "lock";

/// Remove kbuild's outputs (see the module doc); with `dry_run`, only list them.
pub fn clean(settings: &CleanSettings, reporter: &dyn Reporter) -> Result<CleanReport, CleanError> {
    let mut report = CleanReport {
        dry_run: settings.dry_run,
        removed: Vec::new(),
        kept: Vec::new(),
        develop_links: Vec::new(),
    };
    let out_dir = &settings.out_dir;
    // Taken only when there is something to clean, so that a clean creates no build/.
    let _lock = if out_dir.is_dir() && !settings.dry_run {
        Some(BuildLock::acquire(out_dir, reporter).map_err(|e| CleanError::Lock(Box::new(e)))?)
    } else {
        None
    };
    if out_dir.is_dir() {
        classify_out_dir(out_dir, &mut report)?;
    }
    if let Some(dist) = settings.dist_dir.as_deref().filter(|d| d.is_dir()) {
        classify_dist_dir(dist, &mut report)?;
    }
    if !settings.dry_run {
        for removed in &report.removed {
            remove(&removed.path)?;
        }
        if let Some(dist) = &settings.dist_dir {
            // dist/ holds only what kbuild wrote: once empty it goes too (a failure is harmless).
            let _ = std::fs::remove_dir(dist);
        }
    }
    Ok(report)
}

fn entries(dir: &Path) -> Result<Vec<std::fs::DirEntry>, CleanError> {
    let read = |source| CleanError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .map_err(read)?
        .collect::<Result<_, _>>()
        .map_err(read)?;
    out.sort_by_key(|e| e.file_name());
    Ok(out)
}

fn classify_out_dir(out_dir: &Path, report: &mut CleanReport) -> Result<(), CleanError> {
    for entry in entries(out_dir)? {
        let (name, path) = (entry.file_name(), entry.path());
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let text = name.to_string_lossy();
        let kind = if is_dir && text == ".kbuild" {
            report.develop_links = develop_links(&path.join("develop"));
            for inner in entries(&path)? {
                if inner.file_name() != LOCK {
                    report.removed.push(removed(inner.path(), Output::Work));
                }
            }
            continue;
        } else if is_dir
            && VariantName::parse(&text).is_some()
            && path.join("metadata.json").is_file()
        {
            Some(Output::Variant)
        } else if is_stale_temp(&name, "stage")
            || is_stale_temp(&name, "old")
            || is_stale_temp(&name, "tmp")
        {
            Some(Output::Temporary)
        } else {
            None
        };
        match kind {
            Some(kind) => report.removed.push(removed(path, kind)),
            None => report.kept.push(Kept {
                path,
                reason: "not written by kbuild",
            }),
        }
    }
    Ok(())
}

/// The package names linked under `.kbuild/develop/<env>/` (each once).
fn develop_links(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(2)
        .max_depth(2)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path_is_symlink())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn classify_dist_dir(dist: &Path, report: &mut CleanReport) -> Result<(), CleanError> {
    for entry in entries(dist)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        let file = entry.file_type().is_ok_and(|t| t.is_file());
        // Wheels carry the variant in their local version (`relu-1+torch215.cxx11.cpu-…`),
        // artifacts end in the variant's name (`relu-torch215-cxx11-cpu-x86_64-linux.tar.gz`).
        let kind = if file && name.ends_with(".whl") && name.contains("+torch") {
            Some(Output::Wheel)
        } else if file && name.strip_suffix(".tar.gz").is_some_and(ends_in_variant) {
            Some(Output::Artifact)
        } else if is_stale_temp(&entry.file_name(), "tmp") {
            Some(Output::Temporary)
        } else {
            None
        };
        match kind {
            Some(kind) => report.removed.push(removed(entry.path(), kind)),
            None => report.kept.push(Kept {
                path: entry.path(),
                reason: "not a wheel or artifact of kbuild",
            }),
        }
    }
    Ok(())
}

/// Whether `stem` is `<name>-<variant>`.
fn ends_in_variant(stem: &str) -> bool {
    stem.match_indices('-')
        .any(|(i, _)| VariantName::parse(&stem[i + 1..]).is_some())
}

fn removed(path: PathBuf, kind: Output) -> Removed {
    let bytes = walkdir::WalkDir::new(&path)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    Removed { path, kind, bytes }
}

fn remove(path: &Path) -> Result<(), CleanError> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    result.map_err(|source| CleanError::Remove {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_and_wheels_are_told_from_other_archives() {
        assert!(ends_in_variant("relu-torch215-cxx11-cpu-x86_64-linux"));
        assert!(ends_in_variant("my-kernel-torch-universal"));
        assert!(!ends_in_variant("sources-2024"));
    }
}
