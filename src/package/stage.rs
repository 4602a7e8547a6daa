//! Staging: a variant is written to a temp dir beside its target and renamed into place (the
//! build holds the output directory's lock meanwhile, see `build::BuildLock`).

use std::path::{Path, PathBuf};

use super::error::PackageError;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PackageError + '_ {
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
    /// Create `<parent>/.stage-<name>-XXXX` on the same filesystem as `target`.
    pub fn new(target: &Path) -> Result<Self, PackageError> {
        let parent = target.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = tempfile::Builder::new()
            .prefix(&format!(".stage-{name}-"))
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

    /// Replace the target with the staged directory. The previous target is moved aside first
    /// and restored if the final rename fails, so the target is never half-written.
    pub fn commit(self) -> Result<(), PackageError> {
        let staged = self.dir.keep();
        let old = if self.target.exists() {
            let parent = self.target.parent().unwrap_or(Path::new("."));
            let aside = tempfile::Builder::new()
                .prefix(".old-")
                .tempdir_in(parent)
                .map_err(io(parent))?
                .keep();
            let old = aside.join("variant");
            std::fs::rename(&self.target, &old).map_err(io(&self.target))?;
            Some((aside, old))
        } else {
            None
        };
        if let Err(e) = std::fs::rename(&staged, &self.target) {
            if let Some((_, old)) = &old {
                let _ = std::fs::rename(old, &self.target);
            }
            let _ = std::fs::remove_dir_all(&staged);
            return Err(io(&self.target)(e));
        }
        if let Some((aside, _)) = old {
            let _ = std::fs::remove_dir_all(aside);
        }
        Ok(())
    }
}

/// Write `contents` to `path` only when it differs, through a temp file and a rename.
pub fn write_if_changed(path: &Path, contents: &[u8]) -> Result<bool, PackageError> {
    if std::fs::read(path).is_ok_and(|old| old == contents) {
        return Ok(false);
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent).map_err(io(parent))?;
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
}
