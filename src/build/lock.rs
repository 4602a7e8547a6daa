//! The lock that keeps two builds from writing the same output directory.

use std::fs::File;
use std::path::Path;

use super::BuildError;
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
