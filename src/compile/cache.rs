//! The object cache: one JSON manifest per object records what the object was built from
//! (compiler, normalized command line, and the content hash of the source and every header).
//! An object is fresh when the manifest, the object and every recorded dependency still match.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::plan::CompileJob;
use crate::process::CommandSpec;

/// Bump when the manifest format or the key's meaning changes: old entries then miss.
const MANIFEST_VERSION: u32 = 1;

/// What one object was built from.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    version: u32,
    label: String,
    compiler_id: String,
    /// Hash of the command line with the object and depfile paths normalized out.
    argv_hash: String,
    object_hash: String,
    /// The source first, then every header: absolute paths with their content hashes.
    deps: Vec<Dep>,
    /// Hash over all of the above: the cache key of this object.
    key: String,
}

impl Manifest {
    /// SHA-256 of the object, hex.
    pub(crate) fn object_hash(&self) -> &str {
        &self.object_hash
    }

    /// Every file the object was built from (source first) with its content hash.
    pub(crate) fn deps(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.deps
            .iter()
            .map(|d| (d.path.as_path(), d.hash.as_str()))
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Dep {
    path: PathBuf,
    hash: String,
}

/// Whether an object can be reused, and if not, why (shown with `-v`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    Fresh,
    Stale(String),
}

/// Manifests live in one directory; file hashes are remembered for the length of one build so
/// the headers shared by every unit (torch's thousands) are read once.
pub(crate) struct Cache {
    dir: PathBuf,
    hashes: Mutex<HashMap<PathBuf, Option<String>>>,
}

impl Cache {
    pub(crate) fn new(dir: &Path) -> Self {
        Cache {
            dir: dir.to_path_buf(),
            hashes: Mutex::new(HashMap::new()),
        }
    }

    /// `<cache_dir>/<hash of the object path>-<object name>.json`: one entry per object.
    pub(crate) fn manifest_path(&self, job: &CompileJob) -> PathBuf {
        let digest = Sha256::digest(job.object.as_os_str().as_encoded_bytes());
        let name = job
            .object
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.dir
            .join(format!("{}-{name}.json", &hex::encode(digest)[..16]))
    }

    /// Content hash of a file, remembered for this build; `None` when it cannot be read.
    fn file_hash(&self, path: &Path) -> Option<String> {
        if let Some(known) = lock(&self.hashes).get(path) {
            return known.clone();
        }
        let hash = hash_file(path).ok();
        lock(&self.hashes).insert(path.to_path_buf(), hash.clone());
        hash
    }

    /// Can the object of `job` be reused as is?
    pub(crate) fn check(&self, job: &CompileJob, argv_hash: &str) -> Freshness {
        let stale = |why: &str| Freshness::Stale(why.to_string());
        let Ok(text) = std::fs::read(self.manifest_path(job)) else {
            return stale("not built before");
        };
        let Ok(m) = serde_json::from_slice::<Manifest>(&text) else {
            return stale("cache entry unreadable");
        };
        if m.version != MANIFEST_VERSION {
            return stale("cache entry from another kbuild version");
        }
        if m.compiler_id != job.compiler_id {
            return stale("compiler changed");
        }
        if m.argv_hash != argv_hash {
            return stale("flags changed");
        }
        match hash_file(&job.object) {
            Ok(h) if h == m.object_hash => {}
            Ok(_) => return stale("object file was modified"),
            Err(_) => return stale("object file missing"),
        }
        for dep in &m.deps {
            if self.file_hash(&dep.path).as_deref() != Some(dep.hash.as_str()) {
                return Freshness::Stale(format!("`{}` changed", dep.path.display()));
            }
        }
        if key(&m.compiler_id, &m.argv_hash, &m.deps) != m.key {
            return stale("cache entry inconsistent");
        }
        Freshness::Fresh
    }

    /// The files the object of `job` was last built from (source first), as its manifest
    /// records them; `None` without a readable manifest of this version.
    pub(crate) fn recorded_dependencies(&self, job: &CompileJob) -> Option<Vec<PathBuf>> {
        let text = std::fs::read(self.manifest_path(job)).ok()?;
        let m = serde_json::from_slice::<Manifest>(&text).ok()?;
        (m.version == MANIFEST_VERSION).then(|| m.deps.into_iter().map(|d| d.path).collect())
    }

    /// Build the manifest for an object just compiled from `deps` (source first). `None` when a
    /// dependency changed after `started` (or vanished): the compiler may have seen either
    /// version, so nothing is recorded and the next build compiles again.
    pub(crate) fn manifest(
        &self,
        job: &CompileJob,
        argv_hash: &str,
        deps: &[PathBuf],
        started: SystemTime,
    ) -> std::io::Result<Option<Manifest>> {
        let mut entries = Vec::with_capacity(deps.len());
        for path in deps {
            let modified = std::fs::metadata(path).and_then(|m| m.modified());
            match modified {
                Ok(t) if t <= started => {}
                _ => return Ok(None),
            }
            let Some(hash) = self.file_hash(path) else {
                return Ok(None);
            };
            entries.push(Dep {
                path: path.clone(),
                hash,
            });
        }
        let key = key(&job.compiler_id, argv_hash, &entries);
        Ok(Some(Manifest {
            version: MANIFEST_VERSION,
            label: job.label.clone(),
            compiler_id: job.compiler_id.clone(),
            argv_hash: argv_hash.to_string(),
            object_hash: hash_file(&job.object)?,
            deps: entries,
            key,
        }))
    }

    /// Write (atomically) or, with `None`, remove the manifest of `job`.
    pub(crate) fn store(
        &self,
        job: &CompileJob,
        manifest: Option<&Manifest>,
    ) -> std::io::Result<()> {
        let path = self.manifest_path(job);
        let Some(manifest) = manifest else {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        };
        let json = serde_json::to_vec(manifest).map_err(std::io::Error::other)?;
        crate::files::write_atomic(&path, &json)
    }
}

/// Hash of everything on the command line but the output paths, which differ between the
/// temporary names a compile writes to and the final ones, and nvcc's `--threads N` and
/// `--jobserver`, which change how fast the object is made, not what it is (another `-j` must
/// not recompile).
/// nvcc's `--split-compile=N`: how many threads a device pass uses, a matter of speed that
/// leaves the code the same (`tests/it/split_compile.rs` compares the cubins).
fn is_split_compile(arg: &std::ffi::OsStr) -> bool {
    arg.as_encoded_bytes().starts_with(b"--split-compile=")
}

pub(crate) fn argv_hash(job: &CompileJob, spec: &CommandSpec) -> String {
    argv_hash_with(job, spec, &|arg| std::borrow::Cow::Borrowed(arg))
}

/// [`argv_hash`] with every argument (and the working directory) passed through `normalize`
/// first: the remote cache names the checkout's directories instead of spelling them.
pub(crate) fn argv_hash_with(
    job: &CompileJob,
    spec: &CommandSpec,
    normalize: &dyn for<'a> Fn(&'a [u8]) -> std::borrow::Cow<'a, [u8]>,
) -> String {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(&normalize(spec.program.as_os_str().as_encoded_bytes()));
    let mut args = spec.args.iter();
    while let Some(arg) = args.next() {
        let arg = arg.as_os_str();
        if arg == "--threads" {
            args.next();
        } else if arg == "--jobserver" || is_split_compile(arg) {
            continue;
        } else if arg == job.object.as_os_str() {
            field(b"<object>");
        } else if arg == job.depfile.as_os_str() {
            field(b"<depfile>");
        } else {
            field(&normalize(arg.as_encoded_bytes()));
        }
    }
    for (k, v) in &spec.env {
        field(k.as_encoded_bytes());
        field(v.as_encoded_bytes());
    }
    if let Some(cwd) = &spec.cwd {
        field(&normalize(cwd.as_os_str().as_encoded_bytes()));
    }
    hex::encode(h.finalize())
}

fn key(compiler_id: &str, argv_hash: &str, deps: &[Dep]) -> String {
    let mut h = Sha256::new();
    for part in [compiler_id, argv_hash] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    for dep in deps {
        let path = dep.path.as_os_str().as_encoded_bytes();
        h.update((path.len() as u64).to_le_bytes());
        h.update(path);
        h.update(dep.hash.as_bytes());
    }
    hex::encode(h.finalize())
}

pub(crate) fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut file, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
