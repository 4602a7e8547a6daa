//! The object cache: one JSON manifest per object records what the object was built from
//! (compiler, normalized command line, and the content hash of the source and every header).
//! An object is fresh when the manifest, the object and every recorded dependency still match.
//!
//! Paths under kbuild's own cache directory (`KBUILD_CACHE_DIR`: fetched CUTLASS trees, managed
//! toolchains) are written in the key as `$KBUILD_CACHE_DIR/…`: the same headers and compilers
//! under another cache directory compile the same objects, so moving it rebuilds nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::plan::CompileJob;
use crate::process::CommandSpec;

/// Bump when the manifest format or the key's meaning changes: old entries then miss.
const MANIFEST_VERSION: u32 = 2;

/// How paths under kbuild's cache directory are written in the key.
const CACHE_DIR_ALIAS: &str = "$KBUILD_CACHE_DIR";

/// What one object was built from.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    version: u32,
    label: String,
    compiler_id: String,
    /// Hash of the command line with the object and depfile paths normalized out.
    argv_hash: String,
    /// That command line, word by word: `-v` names the words that changed.
    argv: Vec<String>,
    object_hash: String,
    /// The source first, then every header: absolute paths with their content hashes.
    deps: Vec<Dep>,
    /// Hash over all of the above: the cache key of this object.
    key: String,
}

/// A file the object was built from; `path` is written with the cache directory aliased.
#[derive(Debug, Serialize, Deserialize)]
struct Dep {
    path: PathBuf,
    hash: String,
}

/// A compile's command line as the key sees it (see [`Cache::argv`]).
pub(crate) struct Argv {
    pub(crate) words: Vec<String>,
    pub(crate) hash: String,
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
    /// kbuild's cache directory, whose paths the key writes as [`CACHE_DIR_ALIAS`].
    kbuild_cache: Option<PathBuf>,
    hashes: Mutex<HashMap<PathBuf, Option<String>>>,
}

impl Cache {
    pub(crate) fn new(dir: &Path, kbuild_cache: Option<&Path>) -> Self {
        Cache {
            dir: dir.to_path_buf(),
            kbuild_cache: kbuild_cache.map(|d| std::path::absolute(d).unwrap_or(d.to_path_buf())),
            hashes: Mutex::new(HashMap::new()),
        }
    }

    /// `path` with kbuild's cache directory written as [`CACHE_DIR_ALIAS`].
    fn alias(&self, path: &Path) -> PathBuf {
        match self.kbuild_cache.as_deref().map(|c| path.strip_prefix(c)) {
            Some(Ok(rest)) => Path::new(CACHE_DIR_ALIAS).join(rest),
            _ => path.to_path_buf(),
        }
    }

    /// An aliased path as it is on this machine now.
    fn unalias(&self, path: &Path) -> PathBuf {
        match (path.strip_prefix(CACHE_DIR_ALIAS), &self.kbuild_cache) {
            (Ok(rest), Some(cache)) => cache.join(rest),
            _ => path.to_path_buf(),
        }
    }

    /// The command line as the key sees it: the output paths, which differ between the
    /// temporary names a compile writes to and the final ones, normalized out; nvcc's
    /// `--threads N` and `--jobserver`, which change how fast the object is made, not what it
    /// is (another `-j` must not recompile), left out; kbuild's cache directory aliased; and for
    /// nvcc the `NVCC_PREPEND_FLAGS` / `NVCC_APPEND_FLAGS` it reads from the environment.
    pub(crate) fn argv(
        &self,
        job: &CompileJob,
        spec: &CommandSpec,
        nvcc_env: &[(String, String)],
    ) -> Argv {
        let text = |p: &std::ffi::OsStr| self.alias_text(&p.to_string_lossy());
        let mut words = vec![text(spec.program.as_os_str())];
        let mut args = spec.args.iter();
        while let Some(arg) = args.next() {
            let arg = arg.as_os_str();
            if arg == "--threads" {
                args.next();
            } else if arg == "--jobserver" {
                continue;
            } else if arg == job.object.as_os_str() {
                words.push("<object>".into());
            } else if arg == job.depfile.as_os_str() {
                words.push("<depfile>".into());
            } else {
                words.push(text(arg));
            }
        }
        for (k, v) in &spec.env {
            words.push(format!("{}={}", k.to_string_lossy(), text(v)));
        }
        if let Some(cwd) = &spec.cwd {
            words.push(format!("cwd={}", text(cwd.as_os_str())));
        }
        if job.lang == crate::plan::Lang::Cuda {
            words.extend(nvcc_env.iter().map(|(k, v)| format!("{k}={v}")));
        }
        let mut h = Sha256::new();
        for word in &words {
            h.update((word.len() as u64).to_le_bytes());
            h.update(word.as_bytes());
        }
        let hash = hex::encode(h.finalize());
        Argv { words, hash }
    }

    /// `text` with every occurrence of kbuild's cache directory written as the alias (it
    /// appears inside words too: `-I/…`, `--options-file=/…`).
    fn alias_text(&self, text: &str) -> String {
        match self.kbuild_cache.as_deref().and_then(Path::to_str) {
            Some(cache) if !cache.is_empty() => text.replace(cache, CACHE_DIR_ALIAS),
            _ => text.to_string(),
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
    pub(crate) fn check(&self, job: &CompileJob, argv: &Argv) -> Freshness {
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
        if m.argv_hash != argv.hash {
            return Freshness::Stale(flags_changed(&m.argv, &argv.words));
        }
        match hash_file(&job.object) {
            Ok(h) if h == m.object_hash => {}
            Ok(_) => return stale("object file was modified"),
            Err(_) => return stale("object file missing"),
        }
        for dep in &m.deps {
            let path = self.unalias(&dep.path);
            if self.file_hash(&path).as_deref() != Some(dep.hash.as_str()) {
                return Freshness::Stale(format!("`{}` changed", path.display()));
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
        (m.version == MANIFEST_VERSION)
            .then(|| m.deps.into_iter().map(|d| self.unalias(&d.path)).collect())
    }

    /// Build the manifest for an object just compiled from `deps` (source first). `None` when a
    /// dependency changed after `started` (or vanished): the compiler may have seen either
    /// version, so nothing is recorded and the next build compiles again.
    pub(crate) fn manifest(
        &self,
        job: &CompileJob,
        argv: &Argv,
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
                path: self.alias(path),
                hash,
            });
        }
        let key = key(&job.compiler_id, &argv.hash, &entries);
        Ok(Some(Manifest {
            version: MANIFEST_VERSION,
            label: job.label.clone(),
            compiler_id: job.compiler_id.clone(),
            argv_hash: argv.hash.clone(),
            argv: argv.words.clone(),
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

/// The flags nvcc itself reads from the environment (`NVCC_PREPEND_FLAGS`,
/// `NVCC_APPEND_FLAGS`, e.g. `-lineinfo`), set and not empty: they change its objects.
pub fn nvcc_env_flags() -> Vec<(String, String)> {
    ["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"]
        .into_iter()
        .filter_map(|name| {
            let value = std::env::var(name).ok().filter(|v| !v.trim().is_empty())?;
            Some((name.to_string(), value))
        })
        .collect()
}

/// `flags changed: \`-lineinfo\` added, \`-O3\` removed`: the words of the command line that
/// differ (as sets: a word that only moved is not named).
fn flags_changed(before: &[String], now: &[String]) -> String {
    let added: Vec<&String> = now.iter().filter(|w| !before.contains(w)).collect();
    let removed: Vec<&String> = before.iter().filter(|w| !now.contains(w)).collect();
    let list = |words: &[&String]| {
        words
            .iter()
            .map(|w| format!("`{w}`"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut parts = Vec::new();
    if !added.is_empty() {
        parts.push(format!("{} added", list(&added)));
    }
    if !removed.is_empty() {
        parts.push(format!("{} removed", list(&removed)));
    }
    match parts.is_empty() {
        true => "flags changed (their order)".into(),
        false => format!("flags changed: {}", parts.join(", ")),
    }
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

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut file, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
