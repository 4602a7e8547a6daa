//! Staging: a variant is written to a temp dir beside its target and swapped into place (the
//! build holds the output directory's lock meanwhile, see `orchestrator::BuildLock`). Temporaries
//! carry the writer's pid (`.stage-<pid>-…`, `.old-<pid>-…`, `.tmp-<pid>-…`) so that
//! [`sweep_stale`] can clear what a killed build left behind.

use std::io;
use std::path::{Path, PathBuf};

use super::error::PackageError;
use crate::files::{is_stale_temp, temp_prefix};

fn io(path: &Path) -> impl FnOnce(io::Error) -> PackageError + '_ {
    move |source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A staging directory beside `target`; dropped (and removed) unless committed.
pub struct Stage {
    dir: tempfile::TempDir,
    target: PathBuf,
}

impl Stage {
    /// Create `<parent>/.stage-<pid>-<name>-XXXX` on the same filesystem as `target`.
    pub fn new(target: &Path) -> Result<Self, PackageError> {
        let parent = target.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}{name}-", temp_prefix("stage")))
            .tempdir_in(parent)
            .map_err(io(parent))?;
        Ok(Stage {
            dir,
            target: target.to_path_buf(),
        })
    }

    /// Where to write the variant's files.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Replace the target with the staged directory. Where the filesystem can, the two are
    /// exchanged in one step (`renameat2` with `RENAME_EXCHANGE`), so that at every instant
    /// the target is the old variant or the new one; elsewhere the old one is moved aside
    /// first, and a kill between the two renames leaves it in `.old-<pid>-…/<name>`, from where
    /// [`sweep_stale`] puts it back.
    pub fn commit(self) -> Result<(), PackageError> {
        self.commit_with(exchange)
    }

    /// [`Stage::commit`] with the exchange given: tests pass one that fails as a filesystem
    /// without `RENAME_EXCHANGE` does, to run the fallback where the real call never fails.
    fn commit_with(
        self,
        exchange: impl FnOnce(&Path, &Path) -> io::Result<()>,
    ) -> Result<(), PackageError> {
        let staged = self.dir.keep();
        let result = match exchange(&staged, &self.target) {
            // `staged` now holds the previous variant.
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !self.target.exists() => {
                std::fs::rename(&staged, &self.target)
            }
            Err(e) if exchange_unsupported(&e) => swap_with_renames(&staged, &self.target),
            Err(e) => Err(e),
        };
        // Either the previous variant or the unused stage; a failure here only leaves a
        // directory the next build sweeps.
        let _ = std::fs::remove_dir_all(&staged);
        result.map_err(io(&self.target))
    }
}

/// Swap two paths atomically.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let (a, b) = (c(a)?, c(b)?);
    // The raw system call, not glibc's `renameat2` wrapper: that symbol is GLIBC_2.28, and the
    // wheel's binary runs on glibc 2.17 (manylinux2014). Kernels without it answer ENOSYS,
    // which the caller handles as it handles EINVAL (two renames).
    // SAFETY: both are valid NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// The kernel or the filesystem has no `RENAME_EXCHANGE`: older kernels (`ENOSYS`), most
/// network and FUSE filesystems (`EINVAL`, `EOPNOTSUPP`), and overlayfs, which answers `EXDEV`
/// for directories of a lower layer although both paths are in one directory.
fn exchange_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
        || matches!(
            e.raw_os_error(),
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EXDEV)
        )
}

/// Two renames: the target aside into `.old-<pid>-XXXX/<name>`, the stage into place; the old
/// one is put back if the second fails. On return `staged` holds the previous variant (or is
/// gone), like after an exchange.
fn swap_with_renames(staged: &Path, target: &Path) -> io::Result<()> {
    let parent = target.parent().unwrap_or(Path::new("."));
    let aside = tempfile::Builder::new()
        .prefix(&temp_prefix("old"))
        .tempdir_in(parent)?
        .keep();
    let old = aside.join(target.file_name().unwrap_or_default());
    std::fs::rename(target, &old)?;
    if let Err(e) = std::fs::rename(staged, target) {
        let _ = std::fs::rename(&old, target);
        let _ = std::fs::remove_dir_all(&aside);
        return Err(e);
    }
    let _ = std::fs::rename(&old, staged);
    let _ = std::fs::remove_dir_all(&aside);
    Ok(())
}

/// What [`sweep_stale`] did with one leftover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swept {
    /// A temporary of a dead build, removed.
    Removed(PathBuf),
    /// A variant a killed build had moved aside, put back in place (it was missing).
    Restored(PathBuf),
}

/// Clear what killed builds left in `out_dir`: a variant moved aside and never replaced goes
/// back to its place; `.stage-*` and `.old-*` directories of dead processes are removed. Call
/// it only under the output directory's lock. Best effort: what cannot be removed stays.
pub fn sweep_stale(out_dir: &Path) -> Vec<Swept> {
    let mut done = Vec::new();
    let Ok(entries) = std::fs::read_dir(out_dir) else {
        return done;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let old = is_stale_temp(&name, "old");
        if !(old || is_stale_temp(&name, "stage")) {
            continue;
        }
        let path = entry.path();
        if old {
            for moved in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                let home = out_dir.join(moved.file_name());
                if !home.exists() && std::fs::rename(moved.path(), &home).is_ok() {
                    done.push(Swept::Restored(home));
                }
            }
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            done.push(Swept::Removed(path));
        }
    }
    done
}

/// [`sweep_stale`] for a command that reads `out_dir` without building (`check`, `pack`,
/// `publish`): a variant a killed build moved aside is put back before it is looked for. The
/// paths put back.
pub fn restore_moved_aside(out_dir: &Path) -> Vec<PathBuf> {
    let swept = sweep_stale(out_dir).into_iter();
    swept
        .filter_map(|s| match s {
            Swept::Restored(path) => Some(path),
            Swept::Removed(_) => None,
        })
        .collect()
}

/// What is said of a variant [`restore_moved_aside`] put back.
pub fn restored_note(path: &Path) -> String {
    format!(
        "restored `{}`, which a killed build had moved aside",
        path.display()
    )
}

/// Remove the `.tmp-<pid>-*` files that dead processes left directly in `dir` (a `kbuild pack`
/// or `kbuild wheel` killed while writing into the dist directory); those of live processes
/// stay. Best effort.
pub fn sweep_stale_temps(dir: &Path) -> Vec<Swept> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let stale = entries.flatten().filter(|e| {
        is_stale_temp(&e.file_name(), "tmp") && e.file_type().is_ok_and(|t| t.is_file())
    });
    stale
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .map(|e| Swept::Removed(e.path()))
        .collect()
}

/// Write `contents` to `path` only when it differs, through a temp file and a rename.
pub fn write_if_changed(path: &Path, contents: &[u8]) -> Result<bool, PackageError> {
    if std::fs::read(path).is_ok_and(|old| old == contents) {
        return Ok(false);
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let mut tmp = crate::files::temp_file_in(parent, "tmp").map_err(io(parent))?;
    std::io::Write::write_all(&mut tmp, contents).map_err(io(path))?;
    tmp.persist(path).map_err(|e| io(path)(e.error))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committing_a_stage_replaces_the_previous_variant_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("variant");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("old.txt"), "old").unwrap();

        let stage = Stage::new(&target).unwrap();
        std::fs::write(stage.path().join("new.txt"), "new").unwrap();
        stage.commit().unwrap();

        assert!(target.join("new.txt").exists());
        assert!(!target.join("old.txt").exists());
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no stage or old dirs left behind");
    }

    #[test]
    fn a_dropped_stage_leaves_the_previous_variant_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("variant");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("old.txt"), "old").unwrap();
        {
            let stage = Stage::new(&target).unwrap();
            std::fs::write(stage.path().join("half.txt"), "half").unwrap();
            // dropped without commit: a failed build
        }
        assert_eq!(
            std::fs::read_to_string(target.join("old.txt")).unwrap(),
            "old"
        );
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_fallback_swap_replaces_the_variant_and_leaves_the_old_one_in_the_stage() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("variant");
        let staged = tmp.path().join("staged");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("old.txt"), "old").unwrap();
        std::fs::create_dir_all(&staged).unwrap();
        std::fs::write(staged.join("new.txt"), "new").unwrap();
        swap_with_renames(&staged, &target).unwrap();
        assert!(target.join("new.txt").exists());
        assert!(staged.join("old.txt").exists());
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
    }

    /// Replace `variant/old.txt` by a stage holding `new.txt` with the exchange failing as
    /// `errno`; the directory's entries afterwards.
    fn commit_without_exchange(errno: i32) -> Vec<String> {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("variant");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("old.txt"), "old").unwrap();
        let stage = Stage::new(&target).unwrap();
        std::fs::write(stage.path().join("new.txt"), "new").unwrap();
        stage
            .commit_with(|_, _| Err(io::Error::from_raw_os_error(errno)))
            .unwrap();
        assert!(target.join("new.txt").exists(), "errno {errno}");
        assert!(!target.join("old.txt").exists(), "errno {errno}");
        let mut left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        left
    }

    #[test]
    fn without_rename_exchange_the_fallback_replaces_the_variant_and_leaves_nothing_behind() {
        for errno in [libc::EINVAL, libc::ENOSYS, libc::EOPNOTSUPP, libc::EXDEV] {
            assert_eq!(commit_without_exchange(errno), ["variant"], "errno {errno}");
        }
    }

    #[test]
    fn an_exchange_failing_otherwise_leaves_the_previous_variant_in_place() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("variant");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("old.txt"), "old").unwrap();
        let stage = Stage::new(&target).unwrap();
        let err = stage
            .commit_with(|_, _| Err(io::Error::from_raw_os_error(libc::EACCES)))
            .unwrap_err();
        assert!(matches!(err, PackageError::Io { .. }), "{err:?}");
        assert!(target.join("old.txt").exists());
    }

    #[test]
    fn sweeping_puts_back_a_variant_a_killed_build_moved_aside_and_removes_dead_stages() {
        let out = tempfile::tempdir().unwrap();
        // A build killed between the two renames: `torch-cpu` sits in `.old-*`, its stage
        // is left too. 99999999 is above the kernel's pid_max: that process is gone.
        let aside = out.path().join(".old-99999999-Ab12Cd/torch-cpu");
        std::fs::create_dir_all(&aside).unwrap();
        std::fs::write(aside.join("metadata.json"), "{}").unwrap();
        std::fs::create_dir_all(out.path().join(".stage-99999999-torch-cpu-Zz9")).unwrap();
        // A live build's stage (this process) and a variant are left alone.
        let live = Stage::new(&out.path().join("torch-cuda")).unwrap();
        std::fs::create_dir_all(out.path().join("torch-noarch")).unwrap();

        let swept = sweep_stale(out.path());
        assert!(swept.contains(&Swept::Restored(out.path().join("torch-cpu"))));
        assert!(out.path().join("torch-cpu/metadata.json").exists());
        let mut left: Vec<String> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let live_name = live
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(left, [live_name.as_str(), "torch-cpu", "torch-noarch"]);
    }

    #[test]
    fn a_variant_moved_aside_stays_aside_when_a_newer_one_is_in_place() {
        let out = tempfile::tempdir().unwrap();
        let aside = out.path().join(".old-99999999-Ab12Cd/torch-cpu");
        std::fs::create_dir_all(&aside).unwrap();
        std::fs::write(aside.join("stale.txt"), "").unwrap();
        std::fs::create_dir_all(out.path().join("torch-cpu")).unwrap();
        std::fs::write(out.path().join("torch-cpu/new.txt"), "").unwrap();
        sweep_stale(out.path());
        assert!(out.path().join("torch-cpu/new.txt").exists());
        assert!(!out.path().join("torch-cpu/stale.txt").exists());
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
    }
}
