//! The remote object cache a team and its CI share (`KBUILD_REMOTE_CACHE=redis://…`): the
//! local cache's entries, with every path made relative to a named root (the project, the work
//! directory, kbuild's cache directory), so two checkouts or machines with the same toolchain
//! share objects and different toolchains (another compiler id, other flags) never meet.
//!
//! Three kinds of values, all under a versioned prefix:
//! - `entry:<key>`, key = compiler id + normalized command line + the source's content: JSON
//!   listing every header (normalized path + content hash) and the object's SHA-256;
//! - `any-namespace:<key>`, the same key with the op namespace's value left out, for objects
//!   whose preprocessed source does not hold the id (the kernels; asked of the preprocessor of
//!   the checkout that shares it, `namespace_use.rs`): they compile the same under every
//!   commit's id, so a checkout at another commit fetches them too (its headers and flags are
//!   checked as for any entry, so its preprocessor would write the same);
//! - `object:<sha256>`: the object's bytes, checked against that digest before use.
//!
//! A remote that cannot be reached (or refuses the login, or stops answering) is said once and
//! then left alone: the build goes on with the local cache only. A key whose value is of
//! another type is a miss for that unit only. Its URL is shown with the login hidden
//! ([`crate::redact::url`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cache::{self, Manifest};
use super::namespace::Patchability;
use super::namespace_use::NamespaceUse;
use super::redis::{Address, Client, RedisError};
use crate::plan::CompileJob;
use crate::process::CommandSpec;
use crate::report::Reporter;

/// Bump when an entry's format or the key's meaning changes. v2: an entry serves any op
/// namespace only when the preprocessor said so (v1 went by the spelling of the files).
const PREFIX: &str = "kbuild:v2";

/// Where the remote cache is and what the paths it stores are relative to. `Debug` hides the
/// URL's login.
#[derive(Clone)]
pub struct RemoteSettings {
    /// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (from `KBUILD_REMOTE_CACHE`).
    pub url: String,
    /// Named directories that differ between checkouts and machines (`project`, `work`,
    /// `cache`): a path below one is stored as `<name>/rest`.
    pub roots: Vec<(String, PathBuf)>,
}

impl std::fmt::Debug for RemoteSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSettings")
            .field("url", &crate::redact::url(&self.url))
            .field("roots", &self.roots)
            .finish()
    }
}

/// The remote's address is not a URL kbuild can use. The URL is not shown: where its login
/// ends is not known in a URL kbuild cannot read, and the reason names the part that is wrong.
#[derive(Debug, thiserror::Error)]
#[error("`KBUILD_REMOTE_CACHE` is not a usable remote cache: {why}")]
pub struct RemoteUrlError {
    pub why: String,
}

/// What the remote knows about one compile (paths normalized).
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    label: String,
    object_sha256: String,
    /// Every file the object was built from but the source (its content is in the key).
    deps: Vec<(String, String)>,
    /// Where the object holds its op namespace, as the checkout that compiled it found out
    /// (`namespace.rs`): a checkout that fetches it can re-apply the next one without probing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reapply: Option<Patchability>,
    /// The object's preprocessed source does not hold its id: it serves any op namespace.
    #[serde(default)]
    any_namespace: bool,
    /// Whether the preprocessor put the id into the object's code, when it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    preprocessed_holds: Option<bool>,
}

/// A unit's keys on the remote: with its op namespace, and (when its command has one) without
/// the namespace's value, which only objects that serve any namespace are stored under.
#[derive(Debug, Clone)]
pub(crate) struct RemoteKey {
    exact: String,
    any_namespace: Option<String>,
}

/// What came of a lookup.
pub(crate) enum Lookup {
    /// The object's bytes, digest checked, the local paths it was built from, and where it
    /// holds its op namespace when the remote knows.
    Hit {
        object: Vec<u8>,
        deps: Vec<PathBuf>,
        reapply: Option<Patchability>,
        preprocessed_holds: Option<bool>,
    },
    /// Nothing usable: compile.
    Miss,
}

/// A connection to the remote cache for one build.
pub(crate) struct RemoteCache {
    client: Client,
    /// The URL with its login hidden, as every message shows it.
    shown: String,
    roots: Vec<(String, PathBuf)>,
    down: AtomicBool,
    /// Labels of the units whose objects came from the remote.
    hits: Mutex<Vec<String>>,
}

impl RemoteCache {
    pub(crate) fn new(settings: &RemoteSettings) -> Result<Self, RemoteUrlError> {
        let address = Address::parse(&settings.url).map_err(|why| RemoteUrlError { why })?;
        let mut roots = settings.roots.clone();
        // Deepest first: the work directory usually lies inside the project.
        roots.sort_by_key(|(_, p)| std::cmp::Reverse(p.as_os_str().len()));
        Ok(RemoteCache {
            client: Client::new(address),
            shown: crate::redact::url(&settings.url),
            roots,
            down: AtomicBool::new(false),
            hits: Mutex::new(Vec::new()),
        })
    }

    /// The labels served by the remote so far.
    pub(crate) fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The keys of `job` on the remote: what the compiler, its command line (paths normalized)
    /// and the source's content make; `None` when the source cannot be read.
    pub(crate) fn key(&self, job: &CompileJob, spec: &CommandSpec) -> Option<RemoteKey> {
        let (exact, any) = cache::remote_argv_hashes(job, spec, &|arg| self.normalize_arg(arg));
        let source = Sha256::digest(std::fs::read(&job.source).ok()?);
        let key = |argv: &str| {
            let mut h = Sha256::new();
            for part in [
                job.compiler_id.as_bytes(),
                argv.as_bytes(),
                self.normalize(&job.source).as_bytes(),
                &source[..],
            ] {
                h.update((part.len() as u64).to_le_bytes());
                h.update(part);
            }
            hex::encode(h.finalize())
        };
        Some(RemoteKey {
            exact: key(&exact),
            any_namespace: any.as_deref().map(key),
        })
    }

    /// The object for `key` when the remote has one whose every header matches this checkout
    /// and whose bytes match their digest.
    pub(crate) fn lookup(
        &self,
        job: &CompileJob,
        key: &RemoteKey,
        reporter: &dyn Reporter,
    ) -> Lookup {
        let exact = self.get(job, &format!("{PREFIX}:entry:{}", key.exact), reporter);
        let (bytes, any) = match (exact, &key.any_namespace) {
            (Some(bytes), _) => (bytes, false),
            (None, Some(any)) => {
                match self.get(job, &format!("{PREFIX}:any-namespace:{any}"), reporter) {
                    Some(bytes) => (bytes, true),
                    None => return Lookup::Miss,
                }
            }
            (None, None) => return Lookup::Miss,
        };
        let Ok(entry) = serde_json::from_slice::<Entry>(&bytes) else {
            self.corrupt(job, "its entry is not valid JSON", reporter);
            return Lookup::Miss;
        };
        if any && !entry.any_namespace {
            self.corrupt(job, "an entry for any op namespace names one", reporter);
            return Lookup::Miss;
        }
        let mut deps = vec![job.source.clone()];
        for (stored, hash) in &entry.deps {
            let path = self.localize(stored);
            if cache::hash_file(&path).ok().as_deref() != Some(hash.as_str()) {
                reporter.verbose(&format!(
                    "remote cache: `{}` differs here for `{}`",
                    path.display(),
                    job.label
                ));
                return Lookup::Miss;
            }
            deps.push(path);
        }
        let key = format!("{PREFIX}:object:{}", entry.object_sha256);
        let Some(object) = self.get(job, &key, reporter) else {
            return Lookup::Miss;
        };
        if hex::encode(Sha256::digest(&object)) != entry.object_sha256 {
            self.corrupt(job, "its object does not match its SHA-256", reporter);
            return Lookup::Miss;
        }
        self.hits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(job.label.clone());
        Lookup::Hit {
            object,
            deps,
            reapply: entry.reapply,
            preprocessed_holds: entry.preprocessed_holds,
        }
    }

    /// Share the object `job` just compiled, as `manifest` records it.
    pub(crate) fn store(
        &self,
        job: &CompileJob,
        key: &RemoteKey,
        manifest: &Manifest,
        reporter: &dyn Reporter,
    ) {
        if self.down.load(Ordering::Relaxed) {
            return;
        }
        let Ok(object) = std::fs::read(&job.object) else {
            return;
        };
        let entry = Entry {
            label: job.label.clone(),
            object_sha256: manifest.object_hash().to_string(),
            deps: manifest
                .deps()
                .filter(|(path, _)| *path != job.source)
                .map(|(path, hash)| (self.normalize(path), hash.to_string()))
                .collect(),
            reapply: manifest.reapply().cloned(),
            any_namespace: *manifest.namespace_use() == NamespaceUse::Unused,
            preprocessed_holds: match manifest.namespace_use() {
                NamespaceUse::Unused => Some(false),
                NamespaceUse::Preprocessed => Some(true),
                _ => None,
            },
        };
        let Ok(json) = serde_json::to_vec(&entry) else {
            return;
        };
        let object_key = format!("{PREFIX}:object:{}", entry.object_sha256);
        let any = key.any_namespace.as_ref().filter(|_| entry.any_namespace);
        let stored = self
            .client
            .set(&object_key, &object)
            .and_then(|()| {
                self.client
                    .set(&format!("{PREFIX}:entry:{}", key.exact), &json)
            })
            .and_then(|()| match any {
                Some(any) => self
                    .client
                    .set(&format!("{PREFIX}:any-namespace:{any}"), &json),
                None => Ok(()),
            });
        if let Err(e) = stored {
            self.failed(job, &e, reporter);
        }
    }

    fn get(&self, job: &CompileJob, key: &str, reporter: &dyn Reporter) -> Option<Vec<u8>> {
        if self.down.load(Ordering::Relaxed) {
            return None;
        }
        match self.client.get(key) {
            Ok(value) => value,
            Err(e) => {
                self.failed(job, &e, reporter);
                None
            }
        }
    }

    /// A request for `job` failed: a key of another type is that unit's miss (its compile
    /// replaces it: `SET` takes any type); anything else stops the remote for the build.
    fn failed(&self, job: &CompileJob, error: &RedisError, reporter: &dyn Reporter) {
        if error.about_one_key() {
            self.corrupt(job, &error.to_string(), reporter);
        } else {
            self.went_down(error, reporter);
        }
    }

    /// Say once that the remote is gone, and why, and stop asking it. Quiet when a signal
    /// stopped the wait: the build stops too.
    fn went_down(&self, error: &RedisError, reporter: &dyn Reporter) {
        if self.down.swap(true, Ordering::Relaxed) || matches!(error, RedisError::Interrupted) {
            return;
        }
        let hint = match error {
            RedisError::Login(_) => {
                "check the login in `KBUILD_REMOTE_CACHE`: `redis://:PASSWORD@HOST` for the \
                 server's `requirepass`, `redis://USER:PASSWORD@HOST` for an ACL user (a `@`, \
                 `:` or `/` in either written as `%40`, `%3A`, `%2F`)"
            }
            RedisError::Silent => {
                "the server accepts connections but does not answer: check that it is not \
                 stopped or overloaded, or unset `KBUILD_REMOTE_CACHE`"
            }
            RedisError::Refused(_) => {
                "the server refuses kbuild's `GET`/`SET` on `kbuild:*` keys: check the user's \
                 ACL and the server's memory and replica settings, or unset `KBUILD_REMOTE_CACHE`"
            }
            RedisError::Protocol(_) => {
                "check that `KBUILD_REMOTE_CACHE` names a Redis server (not another service on \
                 that port), or unset it"
            }
            RedisError::Io(_) | RedisError::Interrupted => {
                "check that the server is up and reachable, or unset `KBUILD_REMOTE_CACHE`"
            }
        };
        reporter.warn(&format!(
            "remote cache `{}` failed: {error}; building with the local cache only\nhint: {hint}",
            self.shown
        ));
    }

    fn corrupt(&self, job: &CompileJob, why: &str, reporter: &dyn Reporter) {
        let why = crate::redact::urls_in(why);
        reporter.warn(&format!(
            "remote cache entry for `{}` is corrupt ({why}); compiling it here and replacing \
             the entry",
            job.label
        ));
    }

    /// `path` as stored: `<root>/rest` below a named root, else as it is.
    fn normalize(&self, path: &Path) -> String {
        for (name, root) in &self.roots {
            if let Ok(rest) = path.strip_prefix(root) {
                return format!("<{name}>/{}", rest.display());
            }
        }
        path.display().to_string()
    }

    /// A stored path in this checkout.
    fn localize(&self, stored: &str) -> PathBuf {
        for (name, root) in &self.roots {
            if let Some(rest) = stored.strip_prefix(&format!("<{name}>/")) {
                return root.join(rest);
            }
        }
        PathBuf::from(stored)
    }

    /// An argument with each root's path replaced by its name (`-I/x/proj/include` →
    /// `-I<project>/include`).
    fn normalize_arg(&self, arg: &str) -> String {
        let mut out = arg.to_string();
        for (name, root) in &self.roots {
            if let Some(root) = root.to_str().filter(|r| !r.is_empty()) {
                out = out.replace(root, &format!("<{name}>"));
            }
        }
        out
    }
}
