//! The object cache: one JSON manifest per object records what the object was built from
//! (compiler, normalized command line, and the content hash of the source and every header).
//! An object is fresh when the manifest, the object and every recorded dependency still match.
//!
//! Paths under kbuild's own cache directory (`KBUILD_CACHE_DIR`: fetched CUTLASS trees, managed
//! toolchains) are written in the key as `$KBUILD_CACHE_DIR/…`: the same headers and compilers
//! under another cache directory compile the same objects, so moving it rebuilds nothing.
//!
//! The op namespace (`-DTORCH_EXTENSION_NAME=<id>`, new with every commit) is keyed only for
//! the objects that can see it: the key writes the define without its value, and the manifest
//! records the value and whether the object depends on it, as its compiler saw it
//! (`namespace_use.rs`: a file that spells the name, a flag that names it, else what the
//! preprocessor wrote, asked the first time another id is wanted). An object whose
//! preprocessed source does not hold the id compiles to the same code whatever the id, so a new
//! commit reuses it; one that depends on it (the bindings, through `TORCH_LIBRARY_EXPAND`)
//! compiles again — unless the op namespace can be re-applied to its object: a host C++ object
//! whose every byte from the id is known (the manifest's `reapply`, found by a probe compile the
//! first time a build wants another id of the same length) gets a new id of that length written
//! over the old one (`namespace.rs`) instead of a compiler run.
//!
//! An id's length changes when `_dirty` comes or goes. So that an edit loop does not recompile
//! the bindings at each switch, an object that may be re-applied is kept aside, with its entry,
//! when a build wants an id of another length: one copy per unit and length
//! (`<entry>.ns<length>.json` and its object, in this directory, which `kbuild clean` removes),
//! put back in place when a build wants that length again and the copy is still fresh but for
//! the id.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::namespace::{self, Next, Patchability, ReapplyError};
pub(crate) use super::namespace_use::NAMESPACE_DEFINE;
use super::namespace_use::NamespaceUse;
use crate::plan::CompileJob;
use crate::process::CommandSpec;

/// Bump when the manifest format or the key's meaning changes: old entries then miss. 4: op
/// namespace use by `namespace_use`; 5: canonical PTX (`ptx.rs`); 6: [`DEVICE_STEPS`].
const MANIFEST_VERSION: u32 = 6;

/// The key's last word for a CUDA unit run as kbuild's steps, whose device code (canonical
/// PTX) one nvcc's never stands in for, nor the other way round.
const DEVICE_STEPS: &str = "<kbuild: device passes as kbuild's steps>";

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
    /// The op namespace the object was compiled with (`TORCH_EXTENSION_NAME`'s value).
    namespace: Option<String>,
    /// Whether the object depends on the op namespace. Not in `key`: like `reapply`, learned
    /// about the object after it was built.
    namespace_use: NamespaceUse,
    /// Whether a new op namespace can be re-applied to the object instead of compiling it
    /// (`namespace.rs`); `None`: not checked (it does not depend on the id, or not yet).
    /// Not in `key`: like `object_hash`, a fact about the object, not about what it was built
    /// from.
    #[serde(default)]
    reapply: Option<Patchability>,
    /// Hash over all of the above but `object_hash`, `namespace_use` and `reapply`: the cache
    /// key of this object.
    key: String,
}

impl Manifest {
    /// The op namespace the object was compiled with, when [`namespace::survey`] found it
    /// patchable once a compile under [`namespace::probe_id`] finds where the id lies
    /// ([`Manifest::learned`]), and that has not happened yet.
    pub(crate) fn wants_probe(&self) -> Option<&str> {
        match self.reapply {
            Some(Patchability::Unprobed) => self.namespace.as_deref(),
            _ => None,
        }
    }

    /// Record where the object holds its op namespace, as a probe compile found it
    /// ([`namespace::learn`]).
    pub(crate) fn learned(&mut self, patchability: Patchability) {
        self.reapply = Some(patchability);
    }

    /// Where the object holds its op namespace, when known.
    pub(crate) fn reapply(&self) -> Option<&Patchability> {
        self.reapply.as_ref()
    }

    /// SHA-256 of the object, hex.
    pub(crate) fn object_hash(&self) -> &str {
        &self.object_hash
    }

    /// Whether the object depends on its op namespace, as far as known.
    pub(crate) fn namespace_use(&self) -> &NamespaceUse {
        &self.namespace_use
    }

    /// The op namespace the object was compiled with, when whether it depends on it is not
    /// known yet (its preprocessor was not asked: [`Manifest::found_namespace_use`]).
    pub(crate) fn unchecked_namespace(&self) -> Option<&str> {
        match self.namespace_use {
            NamespaceUse::Unchecked => self.namespace.as_deref(),
            _ => None,
        }
    }

    /// Record whether the preprocessor of the object's unit (of `lang`) put the id into its
    /// code (`holds`); the object (`object`, its bytes) is then surveyed for re-applying a new
    /// one, as for any object that depends on it.
    pub(crate) fn found_namespace_use(
        &mut self,
        lang: crate::plan::Lang,
        holds: bool,
        object: &[u8],
    ) {
        self.namespace_use = NamespaceUse::preprocessed(holds);
        if holds && self.reapply.is_none() {
            self.reapply = Some(namespace::survey(lang, object));
        }
    }

    /// Every file the object was built from (source first) with its content hash.
    pub(crate) fn deps(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.deps
            .iter()
            .map(|d| (d.path.as_path(), d.hash.as_str()))
    }
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
    /// The value of `-DTORCH_EXTENSION_NAME=…`, which `words` and `hash` leave out.
    pub(crate) namespace: Option<String>,
}

/// Whether an object can be reused, and if not, why (shown with `-v`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    Fresh,
    /// Reused although something changed, for the reason given (shown with `-v`).
    FreshBecause(String),
    /// Reusable once the op namespace `to` is written over `from` in the object
    /// ([`Cache::reapply`]).
    Reapply {
        from: String,
        to: String,
    },
    /// Likewise, once a compile under a probe id found where the object holds `from`
    /// ([`Cache::learned`]).
    Probe {
        from: String,
        to: String,
    },
    /// The op namespace changed from `from` to `to`, and whether the object depends on it is
    /// known once its preprocessor is asked ([`Cache::found_namespace_use`]).
    CheckUse {
        from: String,
        to: String,
    },
    Stale(String),
}

/// What the cache knows of one file: its content hash and whether it spells the namespace
/// define.
#[derive(Clone)]
struct FileFacts {
    hash: String,
    spells_namespace: bool,
}

/// Manifests live in one directory; file hashes are remembered for the length of one build so
/// the headers shared by every unit (torch's thousands) are read once.
pub(crate) struct Cache {
    dir: PathBuf,
    /// kbuild's cache directory, whose paths the key writes as [`CACHE_DIR_ALIAS`].
    kbuild_cache: Option<PathBuf>,
    hashes: Mutex<HashMap<PathBuf, Option<FileFacts>>>,
    /// Labels of the units whose op namespace was re-applied in this build.
    reapplied: Mutex<Vec<String>>,
}

impl Cache {
    pub(crate) fn new(dir: &Path, kbuild_cache: Option<&Path>) -> Self {
        Cache {
            dir: dir.to_path_buf(),
            kbuild_cache: kbuild_cache.map(|d| std::path::absolute(d).unwrap_or(d.to_path_buf())),
            hashes: Mutex::new(HashMap::new()),
            reapplied: Mutex::new(Vec::new()),
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

    /// The command line as the key sees it: [`command_words`] with kbuild's cache directory
    /// aliased, the op namespace kept in [`Argv::namespace`], [`DEVICE_STEPS`] for `steps`.
    pub(crate) fn argv(
        &self,
        job: &CompileJob,
        spec: &CommandSpec,
        nvcc_env: &[(String, String)],
        steps: bool,
    ) -> Argv {
        let text = |p: &str| self.alias_text(p);
        let (mut words, namespace) = command_words(job, spec, nvcc_env, &text);
        words.extend(steps.then(|| DEVICE_STEPS.to_string()));
        let hash = hash_words(&words);
        Argv {
            words,
            hash,
            namespace,
        }
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

    /// Content hash of a file and whether it spells the namespace define, remembered for this
    /// build; `None` when it cannot be read.
    fn file_facts(&self, path: &Path) -> Option<FileFacts> {
        if let Some(known) = lock(&self.hashes).get(path) {
            return known.clone();
        }
        let facts = read_file(path).ok().map(|bytes| FileFacts {
            hash: hex::encode(Sha256::digest(&bytes)),
            spells_namespace: spells(&bytes, NAMESPACE_DEFINE),
        });
        lock(&self.hashes).insert(path.to_path_buf(), facts.clone());
        facts
    }

    /// Can the object of `job` be reused as is?
    pub(crate) fn check(&self, job: &CompileJob, argv: &Argv) -> Freshness {
        match read_manifest(&self.manifest_path(job)) {
            Ok(m) => self.check_entry(job, &m, &job.object, argv),
            Err(why) => Freshness::Stale(why.to_string()),
        }
    }

    /// Can `object`, which the entry `m` of `job` records, be reused under `argv`?
    fn check_entry(&self, job: &CompileJob, m: &Manifest, object: &Path, argv: &Argv) -> Freshness {
        let stale = |why: &str| Freshness::Stale(why.to_string());
        if m.compiler_id != job.compiler_id {
            return stale("compiler changed");
        }
        if m.argv_hash != argv.hash {
            return Freshness::Stale(flags_changed(&m.argv, &argv.words));
        }
        match hash_file(object) {
            Ok(h) if h == m.object_hash => {}
            Ok(_) => return stale("object file was modified"),
            Err(_) => return stale("object file missing"),
        }
        for dep in &m.deps {
            let path = self.unalias(&dep.path);
            if self.file_facts(&path).map(|f| f.hash).as_deref() != Some(dep.hash.as_str()) {
                return Freshness::Stale(format!("`{}` changed", path.display()));
            }
        }
        if key(m) != m.key {
            return stale("cache entry inconsistent");
        }
        namespace_freshness(m, argv, |p| self.unalias(p))
    }

    /// The manifest and object paths of the copy of `job`'s object kept for op namespaces of
    /// `len` bytes.
    fn copy_paths(&self, job: &CompileJob, len: usize) -> (PathBuf, PathBuf) {
        let entry = self.manifest_path(job);
        let stem = entry.with_extension("");
        let with = |ext: &str| {
            let mut name = stem.clone().into_os_string();
            name.push(format!(".ns{len}{ext}"));
            PathBuf::from(name)
        };
        (with(".json"), with(".o"))
    }

    /// When `argv` wants an op namespace of another length than the object of `job` has, and
    /// that object spells it and may be re-applied: keep it (and its entry) aside as the copy for
    /// its length, replacing the one kept before. Returns the length it was kept for.
    pub(crate) fn keep_copy(
        &self,
        job: &CompileJob,
        argv: &Argv,
    ) -> std::io::Result<Option<usize>> {
        let Ok(m) = read_manifest(&self.manifest_path(job)) else {
            return Ok(None);
        };
        let (Some(id), Some(now)) = (&m.namespace, &argv.namespace) else {
            return Ok(None);
        };
        let worth = matches!(
            m.reapply,
            Some(Patchability::Patchable { .. } | Patchability::Unprobed)
        );
        if id.len() == now.len() || !m.namespace_use.depends() || !worth {
            return Ok(None);
        }
        let (entry, object) = self.copy_paths(job, id.len());
        crate::files::write_atomic(&object, &std::fs::read(&job.object)?)?;
        let json = serde_json::to_vec(&m).map_err(std::io::Error::other)?;
        crate::files::write_atomic(&entry, &json)?;
        Ok(Some(id.len()))
    }

    /// Whether the copy kept for `argv`'s op namespace's length ([`Cache::keep_copy`]) serves
    /// `argv`, as is or once re-applied: then it is put in place of the object of `job` and its
    /// entry, and what it needs is returned (never [`Freshness::Stale`]).
    pub(crate) fn restore_copy(&self, job: &CompileJob, argv: &Argv) -> Option<Freshness> {
        let len = argv.namespace.as_ref()?.len();
        let (entry, object) = self.copy_paths(job, len);
        let m = read_manifest(&entry).ok()?;
        let fresh = self.check_entry(job, &m, &object, argv);
        if matches!(fresh, Freshness::Stale(_)) {
            return None;
        }
        let moved = (std::fs::rename(&object, &job.object))
            .and_then(|()| std::fs::rename(&entry, self.manifest_path(job)));
        moved.is_ok().then_some(fresh)
    }

    /// Record where the object of `job`, compiled under `from`, holds it, as a probe compile
    /// started at `started` found ([`namespace::learn`]). Errs when the entry names another
    /// namespace or a file it was built from changed since `started` (the probe may have seen
    /// either version).
    pub(crate) fn learned(
        &self,
        job: &CompileJob,
        from: &str,
        found: Patchability,
        started: SystemTime,
    ) -> Result<(), ReapplyError> {
        let (path, mut m) = self.unchanged_since(job, from, started)?;
        m.reapply = Some(found);
        self.store(job, Some(&m))
            .map_err(|source| ReapplyError::Write { path, source })
    }

    /// Record whether the preprocessor of `job`, asked under the op namespace `id` at
    /// `started`, put it into the code (`holds`: [`Manifest::found_namespace_use`]); the entry
    /// was written under `from`. Errs when it names another namespace or a file it was built
    /// from changed since `started`. Returns the entry as recorded.
    pub(crate) fn found_namespace_use(
        &self,
        job: &CompileJob,
        from: &str,
        holds: bool,
        started: SystemTime,
    ) -> Result<Manifest, ReapplyError> {
        let (path, mut m) = self.unchanged_since(job, from, started)?;
        let object = std::fs::read(&job.object).map_err(|source| ReapplyError::Read {
            path: job.object.clone(),
            source,
        })?;
        if hex::encode(Sha256::digest(&object)) != m.object_hash {
            return Err(ReapplyError::Changed {
                path: job.object.clone(),
            });
        }
        m.found_namespace_use(job.lang, holds, &object);
        self.store(job, Some(&m))
            .map_err(|source| ReapplyError::Write { path, source })?;
        Ok(m)
    }

    /// The entry of `job` and its path, when it was written under the op namespace `from` and
    /// no file it records changed since `started`.
    fn unchanged_since(
        &self,
        job: &CompileJob,
        from: &str,
        started: SystemTime,
    ) -> Result<(PathBuf, Manifest), ReapplyError> {
        let path = self.manifest_path(job);
        let m = read_manifest(&path).map_err(|why| ReapplyError::Read {
            path: path.clone(),
            source: std::io::Error::other(why),
        })?;
        if let Some(path) = self.changed_since(&m, started) {
            return Err(ReapplyError::Changed { path });
        }
        if m.namespace.as_deref() != Some(from) {
            return Err(ReapplyError::Changed { path });
        }
        Ok((path, m))
    }

    /// The first file `m` records that changed (or vanished) since `started`.
    pub(crate) fn changed_since(&self, m: &Manifest, started: SystemTime) -> Option<PathBuf> {
        let changed = (m.deps.iter()).find(|d| {
            let modified = std::fs::metadata(self.unalias(&d.path)).and_then(|m| m.modified());
            !matches!(modified, Ok(t) if t <= started)
        });
        changed.map(|d| self.unalias(&d.path))
    }

    /// The files the object of `job` was last built from (source first), as its manifest
    /// records them; `None` without a readable manifest of this version.
    pub(crate) fn recorded_dependencies(&self, job: &CompileJob) -> Option<Vec<PathBuf>> {
        let m = read_manifest(&self.manifest_path(job)).ok()?;
        Some(m.deps.into_iter().map(|d| self.unalias(&d.path)).collect())
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
        let mut spelled_in = None;
        for path in deps {
            let modified = std::fs::metadata(path).and_then(|m| m.modified());
            match modified {
                Ok(t) if t <= started => {}
                _ => return Ok(None),
            }
            let Some(facts) = self.file_facts(path) else {
                return Ok(None);
            };
            if facts.spells_namespace && spelled_in.is_none() {
                spelled_in = Some(self.alias(path));
            }
            entries.push(Dep {
                path: self.alias(path),
                hash: facts.hash,
            });
        }
        let namespace_use = match &argv.namespace {
            Some(_) => NamespaceUse::of_compile(&argv.words, spelled_in),
            None => NamespaceUse::Unused,
        };
        let (object_hash, reapply) = match namespace_use.depends() {
            true => {
                let object = std::fs::read(&job.object)?;
                let reapply = namespace::survey(job.lang, &object);
                (hex::encode(Sha256::digest(&object)), Some(reapply))
            }
            false => (hash_file(&job.object)?, None),
        };
        let mut manifest = Manifest {
            version: MANIFEST_VERSION,
            label: job.label.clone(),
            compiler_id: job.compiler_id.clone(),
            argv_hash: argv.hash.clone(),
            argv: argv.words.clone(),
            object_hash,
            deps: entries,
            namespace: argv.namespace.clone(),
            namespace_use,
            reapply,
            key: String::new(),
        };
        manifest.key = key(&manifest);
        Ok(Some(manifest))
    }

    /// Write the op namespace `to` over `from` in the object of `job`, which [`Cache::check`]
    /// found reusable so ([`Freshness::Reapply`]), and record the object under `to`. On error
    /// the object and its entry are as they were, or the entry no longer matches the object
    /// (the next check compiles). Returns the entry as recorded.
    pub(crate) fn reapply(
        &self,
        job: &CompileJob,
        from: &str,
        to: &str,
    ) -> Result<Manifest, ReapplyError> {
        let path = self.manifest_path(job);
        let unreadable = |source| ReapplyError::Read {
            path: path.clone(),
            source,
        };
        let text = std::fs::read(&path).map_err(unreadable)?;
        let mut m = serde_json::from_slice::<Manifest>(&text)
            .map_err(|e| unreadable(std::io::Error::other(e)))?;
        if m.namespace.as_deref() != Some(from) {
            return Err(ReapplyError::Changed { path });
        }
        let recorded = m.reapply.take().ok_or(ReapplyError::NotPatchable)?;
        let done = namespace::reapply(&job.object, &m.object_hash, &recorded, (from, to))?;
        m.namespace = Some(to.to_string());
        m.object_hash = done.object_hash;
        m.reapply = Some(done.patchability);
        m.key = key(&m);
        self.store(job, Some(&m))
            .map_err(|source| ReapplyError::Write { path, source })?;
        lock(&self.reapplied).push(job.label.clone());
        Ok(m)
    }

    /// The labels of the units whose op namespace [`Cache::reapply`] re-applied.
    pub(crate) fn reapplied(&self) -> Vec<String> {
        lock(&self.reapplied).clone()
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

/// nvcc's `--split-compile=N` (or `-Xcicc=-split-compile=N`, what kbuild writes): how many
/// threads a device pass uses, a matter of speed that leaves the code the same
/// (`tests/it/split_compile.rs` compares the cubins).
fn is_split_compile(arg: &std::ffi::OsStr) -> bool {
    let arg = arg.as_encoded_bytes();
    arg.starts_with(b"--split-compile=") || arg.starts_with(b"-Xcicc=-split-compile=")
}

/// The flags nvcc itself reads from the environment (`NVCC_PREPEND_FLAGS`,
/// `NVCC_APPEND_FLAGS`, e.g. `-lineinfo`), set and not empty: they change its objects.
pub fn nvcc_env_flags() -> Vec<(String, String)> {
    ["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"]
        .into_iter()
        .filter_map(|name| {
            let value = crate::env::var(name)
                .ok()
                .filter(|v| !v.trim().is_empty())?;
            Some((name.to_string(), value))
        })
        .collect()
}

/// The words of a unit's command line as a cache key sees them, and its op namespace: each
/// path-bearing word passed through `text` (the local cache aliases its directory, the remote
/// one names the checkout's roots); the output paths named; nvcc's `--threads N`,
/// `--jobserver` and `--split-compile=N`, which change how fast the object is made, not what
/// it is, left out; `-DTORCH_EXTENSION_NAME=<id>` without its value (returned beside); and for
/// nvcc the `NVCC_*_FLAGS` it reads from the environment (`nvcc_env`).
fn command_words(
    job: &CompileJob,
    spec: &CommandSpec,
    nvcc_env: &[(String, String)],
    text: &dyn Fn(&str) -> String,
) -> (Vec<String>, Option<String>) {
    let text_of = |p: &std::ffi::OsStr| text(&p.to_string_lossy());
    let mut words = vec![text_of(spec.program.as_os_str())];
    let mut namespace = None;
    let define = format!("-D{NAMESPACE_DEFINE}=");
    let mut args = spec.args.iter();
    while let Some(arg) = args.next() {
        let arg = arg.as_os_str();
        if arg == "--threads" {
            args.next();
        } else if arg == "--jobserver" || is_split_compile(arg) {
            continue;
        } else if arg == job.object.as_os_str() {
            words.push("<object>".into());
        } else if arg == job.depfile.as_os_str() {
            words.push("<depfile>".into());
        } else if let Some(id) = arg.to_str().and_then(|a| a.strip_prefix(&define)) {
            namespace = Some(id.to_string());
            words.push(format!("{define}<op namespace>"));
        } else {
            words.push(text_of(arg));
        }
    }
    for (k, v) in &spec.env {
        words.push(format!("{}={}", k.to_string_lossy(), text_of(v)));
    }
    if let Some(cwd) = &spec.cwd {
        words.push(format!("cwd={}", text_of(cwd.as_os_str())));
    }
    if job.lang == crate::plan::Lang::Cuda {
        words.extend(nvcc_env.iter().map(|(k, v)| format!("{k}={v}")));
    }
    (words, namespace)
}

fn hash_words(words: &[String]) -> String {
    let mut h = Sha256::new();
    for word in words {
        h.update((word.len() as u64).to_le_bytes());
        h.update(word.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The hashes of a unit's command line as the remote cache keys it: [`command_words`] with
/// each word passed through `text` (the remote cache names the checkout's directories instead
/// of spelling them), first with the op namespace kept whole (only a checkout of the same id
/// shares it), then, when the command has one, without its value (for the objects none of
/// whose files spells it: they are the same under any id).
pub(crate) fn remote_argv_hashes(
    job: &CompileJob,
    spec: &CommandSpec,
    text: &dyn Fn(&str) -> String,
) -> (String, Option<String>) {
    let (mut words, namespace) = command_words(job, spec, &nvcc_env_flags(), text);
    let any = namespace.is_some().then(|| hash_words(&words));
    words.extend(namespace.map(|id| format!("-D{NAMESPACE_DEFINE}={id}")));
    (hash_words(&words), any)
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

/// Whether an object whose files and flags are unchanged can be reused under the op namespace
/// of `argv`: always when its preprocessed source does not hold the id (the define cannot
/// change its code; nvcc's `.note.nv.tkinfo` keeps the old value as a record of the command
/// line, nothing the code reads), once that is known; else under the namespace it was
/// compiled with, or under another once it is re-applied to the object when
/// [`namespace::can_reapply`] allows.
fn namespace_freshness(m: &Manifest, argv: &Argv, unalias: impl Fn(&Path) -> PathBuf) -> Freshness {
    let (Some(before), Some(now)) = (&m.namespace, &argv.namespace) else {
        return match m.namespace == argv.namespace {
            true => Freshness::Fresh,
            false => Freshness::Stale(format!("`{NAMESPACE_DEFINE}` added or removed")),
        };
    };
    if before == now {
        return Freshness::Fresh;
    }
    let (from, to) = (before.clone(), now.clone());
    match m.namespace_use.why(&unalias) {
        Some(why) => {
            let changed = format!("the op namespace changed (`{before}` -> `{now}`) and {why}");
            let reapply = (m.reapply.as_ref())
                .ok_or_else(|| "the object was not checked for re-applying it".to_string())
                .and_then(|recorded| namespace::can_reapply(recorded, before, now));
            match reapply {
                Ok(Next::Write) => Freshness::Reapply { from, to },
                Ok(Next::Probe) => Freshness::Probe { from, to },
                Err(why) => Freshness::Stale(format!("{changed}; {why}")),
            }
        }
        None if m.namespace_use == NamespaceUse::Unchecked => Freshness::CheckUse { from, to },
        None => Freshness::FreshBecause(format!(
            "its preprocessed source does not hold the op namespace, so the new op namespace \
             `{now}` (was `{before}`) does not change it"
        )),
    }
}

/// Does `text` hold `word` anywhere (code, comment or string: a cheap over-approximation of
/// whether the preprocessor can expand it)?
fn spells(text: &[u8], word: &str) -> bool {
    match std::str::from_utf8(text) {
        Ok(text) => text.contains(word),
        Err(_) => text.windows(word.len()).any(|w| w == word.as_bytes()),
    }
}

/// The entry at `path`, or why it cannot serve.
fn read_manifest(path: &Path) -> Result<Manifest, &'static str> {
    let text = std::fs::read(path).map_err(|_| "not built before")?;
    let m = serde_json::from_slice::<Manifest>(&text).map_err(|_| "cache entry unreadable")?;
    match m.version == MANIFEST_VERSION {
        true => Ok(m),
        false => Err("cache entry from another kbuild version"),
    }
}

fn key(m: &Manifest) -> String {
    let mut h = Sha256::new();
    let parts = [
        m.compiler_id.as_str(),
        m.argv_hash.as_str(),
        m.namespace.as_deref().unwrap_or(""),
    ];
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    for dep in &m.deps {
        let path = dep.path.as_os_str().as_encoded_bytes();
        h.update((path.len() as u64).to_le_bytes());
        h.update(path);
        h.update(dep.hash.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The largest file the cache reads (a header, an object): far above any real one.
const MAX_FILE: u64 = 4 << 30;

/// SHA-256 of the regular file `path`, hex. A path that names something else (`/dev/zero`, a
/// FIFO: a remote entry may name any path as a dependency) or a file over [`MAX_FILE`] is an
/// error at once, never an endless read or a wait for a writer.
pub(crate) fn hash_file(path: &Path) -> std::io::Result<String> {
    let file = crate::files::open_regular(path)?;
    let mut h = Sha256::new();
    let read = std::io::copy(&mut file.take(MAX_FILE + 1), &mut h)?;
    if read > MAX_FILE {
        return Err(too_large());
    }
    Ok(hex::encode(h.finalize()))
}

/// The bytes of the regular file `path`, as [`hash_file`] reads it.
fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::files::read_regular(path, MAX_FILE)
}

fn too_large() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!("it is larger than {}", crate::files::human_size(MAX_FILE)),
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
