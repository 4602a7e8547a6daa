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
use super::error::RemoteUrlError;
use super::namespace::Patchability;
use super::namespace_use::NamespaceUse;
use super::redis::{Address, Client, RedisError};
use super::settings::RemoteSettings;
use crate::plan::CompileJob;
use crate::process::CommandSpec;
use crate::report::Reporter;

/// Bump when an entry's format or the key's meaning changes. v2: an entry serves any op
/// namespace only when the preprocessor said so (v1 went by the spelling of the files).
const PREFIX: &str = "kbuild:v2";

/// What the remote knows about one compile (paths normalized).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// HMAC-SHA256 with the team's secret over the key the entry is stored under and the entry
    /// without this field ([`sign`]); written and required only with a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hmac: Option<String>,
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
    /// The team's secret entries are signed with.
    secret: Option<String>,
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
            secret: settings.secret.clone(),
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
        let Some(entry) = self.entry(job, key, reporter) else {
            return Lookup::Miss;
        };
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

    /// The entry for `key` (under its op namespace, else under any), when there is one that is
    /// well formed and, with a secret, signed with it.
    fn entry(&self, job: &CompileJob, key: &RemoteKey, reporter: &dyn Reporter) -> Option<Entry> {
        let exact = format!("{PREFIX}:entry:{}", key.exact);
        let any = (key.any_namespace.as_ref()).map(|k| format!("{PREFIX}:any-namespace:{k}"));
        let (stored, bytes) = match self.get(job, &exact, reporter) {
            Some(bytes) => (exact, bytes),
            None => {
                let any = any?;
                let bytes = self.get(job, &any, reporter)?;
                (any, bytes)
            }
        };
        let Ok(entry) = serde_json::from_slice::<Entry>(&bytes) else {
            self.corrupt(job, "its entry is not valid JSON", reporter);
            return None;
        };
        if stored.contains(":any-namespace:") && !entry.any_namespace {
            self.corrupt(job, "an entry for any op namespace names one", reporter);
            return None;
        }
        if let Some(secret) = &self.secret
            && entry.hmac.as_deref() != Some(sign(secret, &stored, &entry).as_str())
        {
            let why = "it is not signed with `KBUILD_REMOTE_CACHE_SECRET`";
            self.corrupt(job, why, reporter);
            return None;
        }
        Some(entry)
    }

    /// `entry` as stored under `key`: signed when there is a secret.
    fn stored_as(&self, key: &str, entry: &Entry) -> Option<Vec<u8>> {
        let mut signed = entry.clone();
        signed.hmac = (self.secret.as_ref()).map(|secret| sign(secret, key, entry));
        serde_json::to_vec(&signed).ok()
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
            hmac: None,
        };
        let object_key = format!("{PREFIX}:object:{}", entry.object_sha256);
        let mut keys = vec![format!("{PREFIX}:entry:{}", key.exact)];
        let any = key.any_namespace.as_ref().filter(|_| entry.any_namespace);
        keys.extend(any.map(|any| format!("{PREFIX}:any-namespace:{any}")));
        let mut stored = self.client.set(&object_key, &object);
        for key in &keys {
            let Some(json) = self.stored_as(key, &entry) else {
                return;
            };
            stored = stored.and_then(|()| self.client.set(key, &json));
        }
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

/// The signature of `entry` stored under `key`: HMAC-SHA256 (RFC 2104) with `secret` over the
/// key and the entry without its signature, hex.
fn sign(secret: &str, key: &str, entry: &Entry) -> String {
    let mut unsigned = entry.clone();
    unsigned.hmac = None;
    // Strings, lists and flags only: serializing cannot fail.
    let json = serde_json::to_vec(&unsigned).unwrap_or_default();
    let message = [key.as_bytes(), b"\0", &json].concat();
    hex::encode(hmac_sha256(secret.as_bytes(), &message))
}

pub(super) fn hmac_sha256(secret: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if secret.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(secret));
    } else {
        block[..secret.len()].copy_from_slice(secret);
    }
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::hmac_sha256;

    #[test]
    fn hmac_sha256_is_rfc_4231s() {
        // RFC 4231, test cases 1 and 6 (a key longer than the block).
        let mac = hmac_sha256(&[0x0b; 20], b"Hi There");
        assert_eq!(
            hex::encode(mac),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        let long = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(long),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }
}
