//! The no-op fast path. After a build, `<work_dir>/fresh.json` records what was built (a hash of
//! the plans and of the metadata each variant carries) and the state of every file the build
//! read or wrote: build.toml, every source and header of every object, the Python files, the
//! objects, the extensions and every file of each `build/<variant>/`. The next build with the
//! same plans whose files all look the same (size, mtime, ctime, inode) has nothing to do: it
//! compiles, links, hashes and copies nothing. Any difference sends the build down the full
//! path, whose content-hash caches decide what really changed, and which records anew.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::compile;
use crate::config::Project;
use crate::package::{self, GitStatus};
use crate::plan::BuildPlan;
use crate::toolchain::{FileStamp, kbuild_stamp};

/// Bump when what a record covers changes: old records then never match.
const RECORD_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Record {
    version: u32,
    key: String,
    files: Vec<FileStamp>,
    /// Each variant directory and how many files it held: a file added there is a change too.
    trees: Vec<(PathBuf, usize)>,
}

/// What the build is: the kbuild binary, the plans (nvcc's `--threads` and `--jobserver`, a
/// matter of speed, left out, as is `--split-compile`) and each variant's metadata (which
/// records `nvcc`, who runs the device passes: [`device_passes`]).
pub(super) fn key(project: &Project, plans: &[BuildPlan], nvcc: &str) -> String {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(&RECORD_VERSION.to_le_bytes());
    field(&serde_json::to_vec(&kbuild_stamp()).unwrap_or_default());
    for plan in plans {
        field(&serde_json::to_vec(&plan).unwrap_or_default());
        for variant in &plan.variants {
            let metadata = package::metadata_for(project, variant, kernel_git(plan), nvcc);
            field(metadata.to_json().as_bytes());
        }
    }
    hex::encode(h.finalize())
}

/// Who runs the CUDA units' device passes, as metadata.json records it.
pub(super) fn device_passes(mode: crate::schedule::NvccMode) -> &'static str {
    package::nvcc_record(mode.runs_steps())
}

/// The provenance a variant's metadata records for `plan`'s sources.
pub(super) fn kernel_git(plan: &BuildPlan) -> Option<GitStatus> {
    plan.source.commit.clone().map(|commit| GitStatus {
        commit,
        dirty: plan.source.dirty,
    })
}

fn record_path(work_dir: &Path) -> PathBuf {
    work_dir.join("fresh.json")
}

/// Whether the last build recorded in `work_dir` was this one (`key`) and nothing it read or
/// wrote has changed since.
pub(super) fn is_fresh(work_dir: &Path, key: &str) -> bool {
    let Ok(bytes) = std::fs::read(record_path(work_dir)) else {
        return false;
    };
    let Ok(record) = serde_json::from_slice::<Record>(&bytes) else {
        return false;
    };
    record.version == RECORD_VERSION
        && record.key == key
        && record
            .trees
            .iter()
            .all(|(dir, count)| tree_files(dir).len() == *count)
        && record.files.iter().all(FileStamp::is_current)
}

/// Drop the record: the build about to run may change outputs and fail halfway.
pub(super) fn forget(work_dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(record_path(work_dir)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Where the build is recorded and where the object cache it reads dependencies from lives.
pub(super) struct Places<'a> {
    pub work_dir: &'a Path,
    pub cache_dir: &'a Path,
    /// kbuild's cache directory, as the object cache aliases it.
    pub kbuild_cache: Option<&'a Path>,
}

/// Record the build that just succeeded. Nothing is recorded (`false`) when an input changed
/// after the build `started` (the build may have used the old content) or an object has no
/// cache entry.
pub(super) fn record(
    places: &Places,
    key: &str,
    project: &Project,
    plans: &[BuildPlan],
    started: SystemTime,
) -> std::io::Result<bool> {
    let mut inputs: BTreeSet<PathBuf> = BTreeSet::from([project.manifest.clone()]);
    let mut outputs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut trees = Vec::new();
    for plan in plans {
        for variant in &plan.variants {
            inputs.extend(variant.python_files.iter().map(|(src, _)| src.clone()));
            let Some(deps) = compile::recorded_dependencies(
                &variant.compile,
                places.cache_dir,
                places.kbuild_cache,
            ) else {
                return Ok(false);
            };
            inputs.extend(deps);
            outputs.extend(variant.compile.iter().map(|j| j.object.clone()));
            outputs.extend(variant.link.iter().map(|l| l.output.clone()));
            let dir = plan.out_dir.join(&variant.name);
            let files = tree_files(&dir);
            trees.push((dir, files.len()));
            outputs.extend(files);
        }
    }
    // Generated headers are inputs of the compile but outputs of this build.
    let (own, inputs): (BTreeSet<PathBuf>, BTreeSet<PathBuf>) = inputs
        .into_iter()
        .partition(|p| p.starts_with(places.work_dir));
    outputs.extend(own);
    let inputs: Vec<FileStamp> = inputs.iter().map(|p| FileStamp::of(p)).collect();
    if inputs.iter().any(|s| s.changed_since(started)) {
        return Ok(false);
    }
    let mut files = inputs;
    files.extend(outputs.iter().map(|p| FileStamp::of(p)));
    let record = Record {
        version: RECORD_VERSION,
        key: key.to_string(),
        files,
        trees,
    };
    let json = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    crate::files::write_atomic(&record_path(places.work_dir), &json)?;
    Ok(true)
}

/// Every entry under a variant directory (files, and links, which the packager never writes).
fn tree_files(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| !e.file_type().is_dir())
        .map(walkdir::DirEntry::into_path)
        .collect()
}
