//! The toolchain facts cache: what Python (with torch), nvcc and the C++ compiler answered about
//! themselves, each answer stored with the state of the files that could change it.
//!
//! Asking torch takes seconds (Python starts and imports torch) and every compiler probe starts a
//! process, so a build that changed nothing would spend most of its time here. An answer is
//! reused while every file it was recorded with (the interpreter, torch's installed files, the
//! `sys.path` directories, the compiler binaries) has the same size, mtime, ctime and inode, and
//! the question (tool path, arguments, the environment variables that steer the tool) is the
//! same. A failed probe is never stored, and neither is an answer whose files changed while it
//! was being asked.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Bump when the meaning of a question or an answer changes: old stores are then dropped.
const STORE_VERSION: u32 = 1;

/// What a file looked like: enough to notice a rewrite, a replacement or a relinked symlink
/// (symlinks are followed, and another file has another inode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileState {
    pub size: u64,
    pub mtime_ns: i128,
    /// Changes on every write, even when the writer restores the mtime (`cp -p`, `tar`).
    pub ctime_ns: i128,
    pub ino: u64,
}

/// A path and its state (`None`: it did not exist, which is a fact worth keeping too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub path: PathBuf,
    pub state: Option<FileState>,
}

impl FileStamp {
    /// The state of `path` now, following symlinks.
    pub fn of(path: &Path) -> Self {
        let state = std::fs::metadata(path).ok().map(|m| FileState {
            size: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
            ino: m.ino(),
        });
        FileStamp {
            path: path.to_path_buf(),
            state,
        }
    }

    /// Whether the file still looks as it did when this stamp was taken.
    pub fn is_current(&self) -> bool {
        *self == FileStamp::of(&self.path)
    }

    /// Whether the file was written at or after `time` (then what was read of it may predate
    /// the write, and the stamp must not vouch for it).
    pub fn changed_since(&self, time: SystemTime) -> bool {
        let since = time
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        self.state
            .as_ref()
            .is_some_and(|s| s.mtime_ns >= since || s.ctime_ns >= since)
    }
}

/// The kbuild binary itself: a rebuilt kbuild may ask its questions differently.
pub fn kbuild_stamp() -> FileStamp {
    let exe = std::env::current_exe().unwrap_or_default();
    FileStamp::of(&exe)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    answer: String,
    stamps: Vec<FileStamp>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    version: u32,
    kbuild: Option<FileStamp>,
    entries: BTreeMap<String, Entry>,
}

/// Answers of toolchain probes, loaded from and saved to one JSON file (or kept in memory).
pub struct FactCache {
    file: Option<PathBuf>,
    store: Mutex<Store>,
    changed: AtomicBool,
}

impl FactCache {
    /// The cache stored in `file`; an unreadable or outdated file counts as empty.
    pub fn open(file: &Path) -> Self {
        let kbuild = Some(kbuild_stamp());
        let store = std::fs::read(file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Store>(&bytes).ok())
            .filter(|s| s.version == STORE_VERSION && s.kbuild == kbuild)
            .unwrap_or(Store {
                version: STORE_VERSION,
                kbuild,
                entries: BTreeMap::new(),
            });
        FactCache {
            file: Some(file.to_path_buf()),
            store: Mutex::new(store),
            changed: AtomicBool::new(false),
        }
    }

    /// A cache that forgets everything when dropped (tests, commands without a build directory).
    pub fn in_memory() -> Self {
        FactCache {
            file: None,
            store: Mutex::new(Store::default()),
            changed: AtomicBool::new(false),
        }
    }

    /// The answer to `question`: remembered while its files are unchanged, else from `ask`,
    /// which returns the answer and the files it depends on.
    pub fn answer<E>(
        &self,
        question: &str,
        ask: impl FnOnce() -> Result<(String, Vec<PathBuf>), E>,
    ) -> Result<String, E> {
        if let Some(entry) = lock(&self.store).entries.get(question)
            && entry.stamps.iter().all(FileStamp::is_current)
        {
            return Ok(entry.answer.clone());
        }
        let asked_at = SystemTime::now();
        let (answer, files) = ask()?;
        let stamps: Vec<FileStamp> = files.iter().map(|f| FileStamp::of(f)).collect();
        let mut store = lock(&self.store);
        if stamps.iter().any(|s| s.changed_since(asked_at)) {
            store.entries.remove(question);
        } else {
            store.entries.insert(
                question.to_string(),
                Entry {
                    answer: answer.clone(),
                    stamps,
                },
            );
        }
        self.changed.store(true, Ordering::Relaxed);
        Ok(answer)
    }

    /// Write the cache back if an answer was asked anew (atomically: a concurrent build reads
    /// the old file or the new one).
    pub fn save(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        if !self.changed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let json = serde_json::to_vec_pretty(&*lock(&self.store)).map_err(std::io::Error::other)?;
        crate::files::write_atomic(file, &json)
    }
}

/// `NAME=value` for each variable (unset ones too, as `NAME` alone): part of a question whose
/// answer these variables can change.
pub fn env_part(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| match crate::env::var_os(name) {
            Some(v) => format!("{name}={}", v.to_string_lossy()),
            None => (*name).to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The directories of `PATH`: a compiler found through it changes when one of them gains or
/// loses an entry.
pub fn path_dirs() -> Vec<PathBuf> {
    crate::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn ask_counting<'a>(
        calls: &'a Cell<u32>,
        file: &'a Path,
    ) -> impl FnOnce() -> Result<(String, Vec<PathBuf>), ()> + 'a {
        move || {
            calls.set(calls.get() + 1);
            Ok((
                std::fs::read_to_string(file).unwrap(),
                vec![file.to_path_buf()],
            ))
        }
    }

    fn backdate(path: &Path) {
        let old = SystemTime::now() - std::time::Duration::from_secs(60);
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(old).unwrap();
    }

    #[test]
    fn an_answer_is_reused_across_builds_until_its_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "v1").unwrap();
        let store = dir.path().join("facts.json");
        let calls = Cell::new(0);

        let cache = FactCache::open(&store);
        assert_eq!(
            cache.answer("q", ask_counting(&calls, &tool)).unwrap(),
            "v1"
        );
        cache.save().unwrap();
        let cache = FactCache::open(&store);
        assert_eq!(
            cache.answer("q", ask_counting(&calls, &tool)).unwrap(),
            "v1"
        );
        assert_eq!(calls.get(), 1, "the second build asks nothing");

        std::fs::write(&tool, "v2").unwrap();
        backdate(&tool);
        assert_eq!(
            cache.answer("q", ask_counting(&calls, &tool)).unwrap(),
            "v2"
        );
        assert_eq!(calls.get(), 2, "a rewritten tool is asked again");
    }

    #[test]
    fn another_question_about_the_same_file_is_asked_on_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "v1").unwrap();
        let calls = Cell::new(0);
        let cache = FactCache::in_memory();
        cache.answer("q1", ask_counting(&calls, &tool)).unwrap();
        cache.answer("q2", ask_counting(&calls, &tool)).unwrap();
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn a_file_that_appears_invalidates_an_answer_recorded_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("later");
        let calls = Cell::new(0);
        let cache = FactCache::in_memory();
        let ask = |calls: &Cell<u32>| {
            calls.set(calls.get() + 1);
            Ok::<_, ()>(("a".to_string(), vec![missing.clone()]))
        };
        cache.answer("q", || ask(&calls)).unwrap();
        cache.answer("q", || ask(&calls)).unwrap();
        assert_eq!(calls.get(), 1);
        std::fs::write(&missing, "").unwrap();
        cache.answer("q", || ask(&calls)).unwrap();
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn a_file_written_while_asking_is_not_vouched_for() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "v1").unwrap();
        backdate(&tool);
        let cache = FactCache::in_memory();
        let calls = Cell::new(0);
        let ask = |calls: &Cell<u32>| {
            calls.set(calls.get() + 1);
            // File times come from a coarse clock: write clearly after the ask began.
            std::thread::sleep(std::time::Duration::from_millis(50));
            std::fs::write(&tool, "v2").unwrap();
            Ok::<_, ()>(("old".to_string(), vec![tool.clone()]))
        };
        cache.answer("q", || ask(&calls)).unwrap();
        cache.answer("q", || ask(&calls)).unwrap();
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn a_failed_probe_is_not_remembered() {
        let cache = FactCache::in_memory();
        let calls = Cell::new(0);
        let fail = || {
            calls.set(calls.get() + 1);
            Err::<(String, Vec<PathBuf>), _>("no")
        };
        assert!(cache.answer("q", fail).is_err());
        let fail = || {
            calls.set(calls.get() + 1);
            Err::<(String, Vec<PathBuf>), _>("no")
        };
        assert!(cache.answer("q", fail).is_err());
        assert_eq!(calls.get(), 2);
    }
}
