//! The device step cache: what nvcc's device passes (`cicc`, `ptxas`) wrote, kept under the
//! object cache (`<cache_dir>/steps/`) by everything they read, so that a unit compiled again
//! for other capabilities (the full matrix after `--cuda-capabilities 8.0`) runs only the
//! passes of the capabilities it never compiled; its host side and `fatbinary` run again, as
//! the capability list they see changed.
//!
//! A pass's key is its command line with each file of nvcc's keep directory named by its role
//! (an input by its content hash, an output by its place: the names differ between a
//! one-capability and a many-capability nvcc, and the directory differs with every compile),
//! the content of any other file it names, the program's identity and nvcc's. Keying on the
//! inputs' content is what makes a reused pass safe: the preprocessed source holds all that
//! `__CUDA_ARCH_LIST__` changed (CCCL's arch-dependent namespaces), and the module id that
//! names anonymous-namespace kernels is read from the file kbuild writes, so a new id is a new
//! key. kbuild makes that id from the unit's label alone (`split.rs`), the same in every
//! checkout and for every capability list, so those builds share passes.
//!
//! The outputs are stored with the keep-dir paths in their text (the stub's `# 1 "…"` lines)
//! written as placeholders, and put back with this compile's paths. Every output's hash is
//! checked before use: an entry that fails is removed and the pass runs. A build that stored
//! entries trims the cache to [`LIMIT_BYTES`], dropping those unused longest.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::steps::{Step, StepKind, outputs};

/// The first line of every entry; bump the number when the format or the key's meaning changes.
/// 2: a `cicc` output is stored in the canonical order (`ptx.rs`), whatever split made it.
const MAGIC: &[u8] = b"kbuild device step 2\n";

/// How much the step cache of one work directory holds at most.
pub(crate) const LIMIT_BYTES: u64 = 1 << 30;

/// How paths under kbuild's cache directory are written in the key (as the object cache does).
const CACHE_DIR_ALIAS: &str = "$KBUILD_CACHE_DIR";

/// Brackets a placeholder in a stored output; an output holding it is stored as is.
const MARK: char = '\u{1}';

/// The device passes of one build's units, kept in `<cache_dir>/steps/`.
pub(crate) struct StepCache {
    dir: PathBuf,
    /// kbuild's cache directory (`KBUILD_CACHE_DIR`), written as [`CACHE_DIR_ALIAS`] in keys.
    kbuild_cache: Option<String>,
    limit: u64,
    /// Passes reused in this build: unit label, step index, step label.
    hits: Mutex<Vec<(String, usize, String)>>,
    stored: AtomicBool,
}

/// One device pass as the cache sees it.
pub(crate) struct Pass {
    key: String,
    /// The keep-dir files the pass names (inputs and outputs), in command-line order: the
    /// placeholders of its outputs' text.
    names: Vec<String>,
    /// The files it writes, in command-line order.
    outputs: Vec<PathBuf>,
    keep_dir: String,
}

/// What the cache had for a pass.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Its outputs are in place: the pass need not run.
    Hit,
    Miss,
    /// The entry failed its check (why) and is removed: the pass runs.
    Damaged(String),
}

/// The line after [`MAGIC`]: the key and each output's stored bytes (`None`: not written).
#[derive(Serialize, Deserialize)]
struct Header {
    key: String,
    outputs: Vec<Option<Blob>>,
}

#[derive(Serialize, Deserialize)]
struct Blob {
    len: u64,
    sha256: String,
    /// Stored with placeholders for the keep-dir paths it named.
    text: bool,
}

impl StepCache {
    /// The step cache beside the object cache's manifests in `cache_dir`.
    pub(crate) fn new(cache_dir: &Path, kbuild_cache: Option<&Path>) -> Self {
        let kbuild_cache = kbuild_cache
            .map(|d| std::path::absolute(d).unwrap_or(d.to_path_buf()))
            .and_then(|d| d.to_str().map(str::to_string))
            .filter(|d| !d.is_empty());
        StepCache {
            dir: cache_dir.join("steps"),
            kbuild_cache,
            limit: LIMIT_BYTES,
            hits: Mutex::new(Vec::new()),
            stored: AtomicBool::new(false),
        }
    }

    fn alias(&self, text: &str) -> String {
        match &self.kbuild_cache {
            Some(cache) => text.replace(cache.as_str(), CACHE_DIR_ALIAS),
            None => text.to_string(),
        }
    }

    fn entry_path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    /// `step` as a pass the cache can keep: a device pass whose files in `keep_dir` (nvcc's
    /// `--keep-dir`) it can tell apart as inputs and outputs. `nvcc_id` names the toolkit.
    pub(crate) fn pass(&self, step: &Step, keep_dir: &Path, nvcc_id: &str) -> Option<Pass> {
        if !matches!(step.kind, StepKind::Cicc | StepKind::Ptxas) {
            return None;
        }
        let keep = keep_dir.to_str()?.to_string();
        let spec = &step.spec;
        let mut argv = vec![spec.program.to_str()?.to_string()];
        for arg in &spec.args {
            argv.push(arg.to_str()?.to_string());
        }
        let mut key = Key::default();
        key.part(MAGIC);
        key.part(nvcc_id.as_bytes());
        key.part(self.alias(&argv[0]).as_bytes());
        key.part(program_identity(&spec.program)?.as_bytes());
        let mut pass = Pass {
            key: String::new(),
            names: Vec::new(),
            outputs: Vec::new(),
            keep_dir: keep,
        };
        self.key_args(&argv, outputs(step.kind, &argv), &mut key, &mut pass)?;
        // Not `PATH`: the program is keyed by its identity, and a device pass starts none.
        for (name, value) in spec.env.iter().filter(|(n, _)| n != "PATH") {
            let value = self.alias(value.to_str()?);
            key.part(format!("{}={value}", name.to_str()?).as_bytes());
        }
        if let Some(cwd) = &spec.cwd {
            key.part(format!("cwd={}", self.alias(cwd.to_str()?)).as_bytes());
        }
        pass.key = key.finish();
        Some(pass)
    }

    /// Key the words of `argv` after the program: keep-dir files by role (`declared` are the
    /// outputs), other files named by absolute path with their content, and no thread count
    /// (`-split-compile`: how fast, not what). `None` for a word the cache cannot place.
    fn key_args(
        &self,
        argv: &[String],
        declared: Vec<String>,
        key: &mut Key,
        pass: &mut Pass,
    ) -> Option<()> {
        let mut args = argv[1..].iter();
        while let Some(arg) = args.next() {
            if arg == "-split-compile" {
                args.next();
                continue;
            }
            if arg.starts_with("-split-compile=") || arg.starts_with("--split-compile=") {
                continue;
            }
            let in_keep = arg
                .strip_prefix(pass.keep_dir.as_str())
                .is_some_and(|rest| rest.starts_with('/'));
            if in_keep {
                let path = Path::new(arg);
                if declared.contains(arg) {
                    // Written before the pass ran: another step writes it too.
                    if path.exists() {
                        return None;
                    }
                    key.part(b"<output>");
                    pass.outputs.push(path.to_path_buf());
                } else {
                    key.part(b"<input>");
                    key.part(hash(&std::fs::read(path).ok()?).as_bytes());
                }
                pass.names.push(arg.clone());
            } else if arg.contains(pass.keep_dir.as_str()) {
                return None; // a keep-dir file inside a word: its role is unknown
            } else {
                key.part(self.alias(arg).as_bytes());
                if Path::new(arg).is_absolute() && Path::new(arg).is_file() {
                    key.part(hash(&std::fs::read(arg).ok()?).as_bytes());
                }
            }
        }
        Some(())
    }

    /// Put the outputs of `pass` in place from its entry, checked against their hashes.
    pub(crate) fn restore(&self, pass: &Pass) -> Lookup {
        let path = self.entry_path(&pass.key);
        let Ok(bytes) = std::fs::read(&path) else {
            return Lookup::Miss;
        };
        let files = match unpack(pass, &bytes) {
            Ok(files) => files,
            Err(why) => {
                let _ = std::fs::remove_file(&path);
                return Lookup::Damaged(format!("`{}` {why}", path.display()));
            }
        };
        for (out, content) in pass.outputs.iter().zip(files) {
            let written = content.map_or(Ok(()), |c| std::fs::write(out, c));
            if written.is_err() {
                return Lookup::Miss; // the pass then runs, and says what is wrong
            }
        }
        // The sweep drops the entries unused longest.
        let _ = std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        Lookup::Hit
    }

    /// Keep what `pass` just wrote. `Ok(false)`: not kept, as a binary output names the keep
    /// dir (it cannot be rewritten for another compile).
    pub(crate) fn store(&self, pass: &Pass) -> std::io::Result<bool> {
        let mut header = Header {
            key: pass.key.clone(),
            outputs: Vec::with_capacity(pass.outputs.len()),
        };
        let mut body = Vec::new();
        for out in &pass.outputs {
            let bytes = match std::fs::read(out) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    header.outputs.push(None);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Some((stored, text)) = encode(pass, bytes) else {
                return Ok(false);
            };
            header.outputs.push(Some(Blob {
                len: stored.len() as u64,
                sha256: hash(&stored),
                text,
            }));
            body.extend_from_slice(&stored);
        }
        let mut entry = MAGIC.to_vec();
        entry.extend(serde_json::to_vec(&header).map_err(std::io::Error::other)?);
        entry.push(b'\n');
        entry.extend(body);
        crate::files::write_atomic(&self.entry_path(&pass.key), &entry)?;
        self.stored.store(true, Ordering::Relaxed);
        Ok(true)
    }

    /// Record that step `index` (`label`) of unit `unit` was reused.
    pub(crate) fn reused(&self, unit: &str, index: usize, label: &dyn std::fmt::Display) {
        let mut hits = self.hits.lock().unwrap_or_else(|e| e.into_inner());
        hits.push((unit.to_string(), index, label.to_string()));
    }

    /// The passes reused in this build, as `<unit>: <step>`, in the order of `units` and then
    /// of the unit's steps.
    pub(crate) fn hits(&self, units: &[&str]) -> Vec<String> {
        let mut hits = self.hits.lock().unwrap_or_else(|e| e.into_inner()).clone();
        hits.sort_by_key(|(unit, index, _)| {
            let at = units.iter().position(|u| u == unit).unwrap_or(units.len());
            (at, *index)
        });
        hits.into_iter()
            .map(|(unit, _, label)| format!("{unit}: {label}"))
            .collect()
    }

    /// When this build stored entries and the cache holds more than its limit: remove the
    /// entries unused longest until it holds three quarters of it.
    pub(crate) fn sweep(&self) -> std::io::Result<()> {
        if !self.stored.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue; // a temporary: the build's lock sweeps those of dead builds
            }
            let meta = entry.metadata()?;
            let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            entries.push((used, meta.len(), entry.path()));
        }
        let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
        if total <= self.limit {
            return Ok(());
        }
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.limit / 4 * 3 {
                break;
            }
            std::fs::remove_file(&path)?;
            total -= len;
        }
        Ok(())
    }
}

/// A program's path, size and modification time: a new toolkit in the same place is another
/// program.
fn program_identity(program: &Path) -> Option<String> {
    let meta = std::fs::metadata(program).ok()?;
    let since = meta.modified().ok()?.duration_since(SystemTime::UNIX_EPOCH);
    Some(format!("{} {}", meta.len(), since.ok()?.as_nanos()))
}

/// The bytes to store for an output and whether they hold placeholders: as written when they
/// do not name the keep dir, else text with its keep-dir paths as placeholders; `None` for a
/// binary (or placeholder-holding) output that names it.
fn encode(pass: &Pass, bytes: Vec<u8>) -> Option<(Vec<u8>, bool)> {
    let keep = pass.keep_dir.as_bytes();
    if !bytes.windows(keep.len()).any(|w| w == keep) {
        return Some((bytes, false));
    }
    if bytes.starts_with(b"\x7fELF") {
        return None;
    }
    let text = String::from_utf8(bytes)
        .ok()
        .filter(|t| !t.contains(MARK))?;
    let mut names: Vec<(usize, &String)> = pass.names.iter().enumerate().collect();
    names.sort_by_key(|(_, name)| std::cmp::Reverse(name.len()));
    let mut text = text;
    for (i, name) in names {
        text = replace_path(&text, name, &placeholder(&i.to_string()), false);
    }
    let text = replace_path(&text, &pass.keep_dir, &placeholder("keep"), true);
    Some((text.into_bytes(), true))
}

/// Stored text with this compile's paths in place of the placeholders.
fn decode(pass: &Pass, text: &str) -> String {
    let mut text = text.replace(&placeholder("keep"), &pass.keep_dir);
    for (i, name) in pass.names.iter().enumerate() {
        text = text.replace(&placeholder(&i.to_string()), name);
    }
    text
}

fn placeholder(what: &str) -> String {
    format!("{MARK}kbuild:{what}{MARK}")
}

/// `text` with each occurrence of the path `from` that stands alone (no path character
/// before or after it; with `dir`, a `/` may follow) replaced by `to`.
fn replace_path(text: &str, from: &str, to: &str, dir: bool) -> String {
    let path_char = |c: char| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '/');
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in text.match_indices(from) {
        if at < last {
            continue;
        }
        let before = text[..at].chars().next_back();
        let after = text[at + from.len()..].chars().next();
        let alone = !before.is_some_and(path_char)
            && (!after.is_some_and(path_char) || (dir && after == Some('/')));
        if alone {
            out.push_str(&text[last..at]);
            out.push_str(to);
            last = at + from.len();
        }
    }
    out.push_str(&text[last..]);
    out
}

/// The outputs an entry holds (`None`: the pass did not write it), each checked against the
/// hash stored with it; `Err(why)` when the entry is damaged or not this pass's.
fn unpack(pass: &Pass, bytes: &[u8]) -> Result<Vec<Option<Vec<u8>>>, String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("does not start as an entry of this kbuild")?;
    let end = rest
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("has no header")?;
    let header: Header =
        serde_json::from_slice(&rest[..end]).map_err(|e| format!("has a bad header: {e}"))?;
    if header.key != pass.key || header.outputs.len() != pass.outputs.len() {
        return Err("belongs to another pass".into());
    }
    let mut body = &rest[end + 1..];
    let mut files = Vec::with_capacity(header.outputs.len());
    for blob in header.outputs {
        let Some(blob) = blob else {
            files.push(None);
            continue;
        };
        let len = usize::try_from(blob.len).map_err(|e| e.to_string())?;
        if body.len() < len {
            return Err("is cut short".into());
        }
        let (stored, after) = body.split_at(len);
        body = after;
        if hash(stored) != blob.sha256 {
            return Err("does not match its hash".into());
        }
        files.push(Some(match blob.text {
            true => {
                let text = std::str::from_utf8(stored).map_err(|e| e.to_string())?;
                decode(pass, text).into_bytes()
            }
            false => stored.to_vec(),
        }));
    }
    match body.is_empty() {
        true => Ok(files),
        false => Err("holds more than its header says".into()),
    }
}

/// SHA-256 over length-prefixed parts.
#[derive(Default)]
struct Key(Sha256);

impl Key {
    fn part(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

fn hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::CommandSpec;

    /// A cicc-like pass in `keep` whose files are named `<stem>.*`, run by `program`.
    fn cicc(program: &Path, keep: &Path, stem: &str) -> Step {
        let file = |ext: &str| keep.join(format!("{stem}.{ext}"));
        let mut spec = CommandSpec::new(program);
        spec.args(["-arch", "compute_80", "--module_id_file_name"]);
        spec.arg(keep.join("k.module_id"));
        spec.arg("--stub_file_name").arg(file("cudafe1.stub.c"));
        spec.arg("--gen_c_file_name").arg(file("cudafe1.c"));
        spec.args(["-split-compile", "4"]);
        spec.arg(file("cpp1.ii")).arg("-o").arg(file("ptx"));
        spec.env = vec![("PATH".into(), keep.as_os_str().into())];
        Step {
            kind: StepKind::Cicc,
            label: "cicc compute_80".into(),
            spec,
            deps: Vec::new(),
            apart_from: None,
            priority: 0,
        }
    }

    /// A keep dir holding the pass's inputs.
    fn keep_dir(root: &Path, name: &str, stem: &str, module_id: &str) -> PathBuf {
        let keep = root.join(name);
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::write(keep.join("k.module_id"), module_id).unwrap();
        std::fs::write(
            keep.join(format!("{stem}.cpp1.ii")),
            "__global__ void k() {}",
        )
        .unwrap();
        keep
    }

    /// What the pass would write: a stub naming its own path and a keep-dir file, and PTX.
    fn run_pass(keep: &Path, stem: &str) {
        let stub = keep.join(format!("{stem}.cudafe1.stub.c"));
        let text = format!(
            "# 1 \"{}\"\n#include \"{}/k.fatbin.c\"\n",
            stub.display(),
            keep.display()
        );
        std::fs::write(&stub, text).unwrap();
        std::fs::write(keep.join(format!("{stem}.ptx")), ".target sm_80\n").unwrap();
    }

    fn setup() -> (tempfile::TempDir, PathBuf, StepCache) {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("cicc");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        let cache = StepCache::new(&dir.path().join("cache"), None);
        (dir, program, cache)
    }

    #[test]
    fn a_pass_is_reused_under_another_keep_dir_and_file_names_with_its_paths_rewritten() {
        let (dir, program, cache) = setup();
        let one = keep_dir(dir.path(), "one.steps", "k", "_id_1");
        let first = cache
            .pass(&cicc(&program, &one, "k"), &one, "nvcc 13.2")
            .unwrap();
        assert_eq!(cache.restore(&first), Lookup::Miss);
        run_pass(&one, "k");
        assert!(cache.store(&first).unwrap());

        // A many-capability nvcc names the files after the capability, in another keep dir.
        let many = keep_dir(dir.path(), "many.steps", "k.compute_80", "_id_1");
        let step = cicc(&program, &many, "k.compute_80");
        let second = cache.pass(&step, &many, "nvcc 13.2").unwrap();
        assert_eq!(second.key, first.key);
        assert_eq!(cache.restore(&second), Lookup::Hit);
        let stub = many.join("k.compute_80.cudafe1.stub.c");
        assert_eq!(
            std::fs::read_to_string(&stub).unwrap(),
            format!(
                "# 1 \"{}\"\n#include \"{}/k.fatbin.c\"\n",
                stub.display(),
                many.display()
            )
        );
        let ptx = std::fs::read_to_string(many.join("k.compute_80.ptx")).unwrap();
        assert_eq!(ptx, ".target sm_80\n");
        assert!(!many.join("k.compute_80.cudafe1.c").exists(), "not written");
    }

    #[test]
    fn another_module_id_source_or_toolkit_is_another_pass() {
        let (dir, program, cache) = setup();
        let keep = keep_dir(dir.path(), "a.steps", "k", "_id_1");
        let key = |keep: &Path, nvcc: &str| {
            let step = cicc(&program, keep, "k");
            cache.pass(&step, keep, nvcc).unwrap().key
        };
        let base = key(&keep, "nvcc 13.2");
        assert_ne!(key(&keep, "nvcc 13.1"), base);
        let other_id = keep_dir(dir.path(), "b.steps", "k", "_id_2");
        assert_ne!(key(&other_id, "nvcc 13.2"), base);
        std::fs::write(keep.join("k.cpp1.ii"), "__global__ void k2() {}").unwrap();
        assert_ne!(key(&keep, "nvcc 13.2"), base);
        // The thread count and `PATH` are not part of it.
        let same = keep_dir(dir.path(), "c.steps", "k", "_id_1");
        let mut step = cicc(&program, &same, "k");
        step.spec.env.clear();
        let at = step.spec.args.iter().position(|a| a == "4").unwrap();
        step.spec.args[at] = "1".into();
        let one_thread = cache.pass(&step, &same, "nvcc 13.2").unwrap().key;
        assert_eq!(one_thread, key(&same, "nvcc 13.2"));
        // An output already there (written by another step) makes the pass one not kept.
        std::fs::write(same.join("k.ptx"), "").unwrap();
        assert!(cache.pass(&step, &same, "nvcc 13.2").is_none());
    }

    #[test]
    fn a_damaged_entry_is_removed_and_the_pass_runs() {
        let (dir, program, cache) = setup();
        let keep = keep_dir(dir.path(), "a.steps", "k", "_id_1");
        let pass = cache
            .pass(&cicc(&program, &keep, "k"), &keep, "nvcc")
            .unwrap();
        run_pass(&keep, "k");
        assert!(cache.store(&pass).unwrap());
        let entry = cache.entry_path(&pass.key);
        let mut bytes = std::fs::read(&entry).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 1;
        std::fs::write(&entry, &bytes).unwrap();
        std::fs::write(keep.join("k.ptx"), "what ptxas would read").unwrap();
        match cache.restore(&pass) {
            Lookup::Damaged(why) => assert!(why.contains("does not match its hash"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(!entry.exists());
        assert_eq!(cache.restore(&pass), Lookup::Miss);
        let ptx = std::fs::read_to_string(keep.join("k.ptx")).unwrap();
        assert_eq!(ptx, "what ptxas would read", "nothing of it was used");
        // Cut short, or another pass's entry under this key: damaged too.
        std::fs::write(&entry, MAGIC).unwrap();
        assert!(matches!(cache.restore(&pass), Lookup::Damaged(_)));
    }

    #[test]
    fn a_binary_output_that_names_the_keep_dir_is_not_kept() {
        let (dir, program, cache) = setup();
        let keep = keep_dir(dir.path(), "a.steps", "k", "_id_1");
        let pass = cache
            .pass(&cicc(&program, &keep, "k"), &keep, "nvcc")
            .unwrap();
        let mut elf = b"\x7fELF\x02".to_vec();
        elf.extend(keep.to_str().unwrap().as_bytes());
        std::fs::write(keep.join("k.ptx"), elf).unwrap();
        assert!(!cache.store(&pass).unwrap());
        assert_eq!(cache.restore(&pass), Lookup::Miss);
    }

    #[test]
    fn a_build_that_stored_entries_trims_the_cache_to_its_limit_oldest_first() {
        let (dir, program, mut cache) = setup();
        let mut entries = Vec::new();
        for (i, id) in ["_a", "_b", "_c"].into_iter().enumerate() {
            let keep = keep_dir(dir.path(), &format!("{i}.steps"), "k", id);
            let pass = cache
                .pass(&cicc(&program, &keep, "k"), &keep, "nvcc")
                .unwrap();
            run_pass(&keep, "k");
            assert!(cache.store(&pass).unwrap());
            let entry = cache.entry_path(&pass.key);
            let used =
                SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 * (i as u64 + 1));
            let file = std::fs::File::options().write(true).open(&entry).unwrap();
            file.set_modified(used).unwrap();
            entries.push(entry);
        }
        let size = std::fs::metadata(&entries[0]).unwrap().len();
        cache.limit = size * 2;
        cache.sweep().unwrap();
        let left: Vec<bool> = entries.iter().map(|e| e.exists()).collect();
        assert_eq!(left, [false, false, true], "the two used longest ago go");
    }

    #[test]
    fn only_whole_paths_are_replaced() {
        let text = "/k/a.c /k/a.cpp \"/k/a.c\" x/k/a.c /k/a.c/ /k/b";
        assert_eq!(
            replace_path(text, "/k/a.c", "A", false),
            "A /k/a.cpp \"A\" x/k/a.c /k/a.c/ /k/b"
        );
        assert_eq!(replace_path("/k/b /kk /k", "/k", "K", true), "K/b /kk K");
    }
}
