//! The lock that keeps two builds from writing the same output directory, and the sweep of
//! what killed builds left there, which only the lock's holder may do.

use std::fs::File;
use std::path::Path;

use super::error::BuildError;
use crate::files::is_stale_temp;
use crate::package::{self, Swept};
use crate::report::Reporter;

/// Exclusive right to write an output directory; released on drop.
pub struct BuildLock {
    _file: File,
}

impl BuildLock {
    /// Take `<out_dir>/.kbuild/lock`, waiting (and saying so) while another build holds it.
    pub fn acquire(out_dir: &Path, reporter: &dyn Reporter) -> Result<Self, BuildError> {
        let dir = out_dir.join(".kbuild");
        let failed = |action: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| BuildError::Lock {
                action,
                path,
                source,
            }
        };
        std::fs::create_dir_all(&dir).map_err(failed("create", &dir))?;
        let path = dir.join("lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(failed("open", &path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                reporter.warn(&format!(
                    "waiting for another kbuild that is writing `{}`",
                    out_dir.display()
                ));
                file.lock().map_err(failed("lock", &path))?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(failed("lock", &path)(e)),
        }
        Ok(BuildLock { _file: file })
    }
}

impl BuildLock {
    /// Remove the temporaries of dead builds: staging and moved-aside variant directories in
    /// `out_dir` (a variant a killed build moved aside and never replaced is put back), and
    /// `.tmp-<pid>-*` files (objects, depfiles, cache entries, headers) and directories (nvcc's
    /// steps) under `work_dir`.
    /// Those of live processes are left alone. Says what it did with `-v`.
    pub fn sweep(&self, out_dir: &Path, work_dir: &Path, reporter: &dyn Reporter) {
        for swept in package::sweep_stale(out_dir) {
            match swept {
                Swept::Removed(path) => reporter.verbose(&format!(
                    "removed `{}`, left by a killed build",
                    path.display()
                )),
                Swept::Restored(path) => reporter.warn(&package::restored_note(&path)),
            }
        }
        // Files, and the directories of nvcc's steps (`.tmp-<pid>-<object>.steps`), whole.
        let stale: Vec<walkdir::DirEntry> = walkdir::WalkDir::new(work_dir)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| !e.file_type().is_symlink() && is_stale_temp(e.file_name(), "tmp"))
            .collect();
        for entry in stale {
            let removed = if entry.file_type().is_dir() {
                std::fs::remove_dir_all(entry.path())
            } else {
                std::fs::remove_file(entry.path())
            };
            if removed.is_ok() {
                reporter.verbose(&format!(
                    "removed `{}`, left by a killed build",
                    entry.path().display()
                ));
            }
        }
    }
}
