//! The regular files of a directory tree, found without following links: what a variant may
//! hold and what publish may upload. A symbolic link, device, FIFO or socket anywhere in the tree
//! (or the tree's root being one) is an error naming its path, because following it would ship
//! whatever it points at (a token file, `/etc/passwd`) or block on a FIFO.

use std::fs::FileType;
use std::path::{Path, PathBuf};

use crate::hint::Hint;

/// Why a tree cannot be read as plain files.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// A symbolic link, where only regular files and directories may be.
    #[error("`{}` is a symbolic link", path.display())]
    Link { path: PathBuf },
    /// A device, FIFO or socket.
    #[error("`{}` is a {kind}, not a regular file", path.display())]
    Special { path: PathBuf, kind: &'static str },
    /// The root is a regular file (or something else that is not a directory).
    #[error("`{}` is not a directory", path.display())]
    NotDirectory { path: PathBuf },
    /// A file with other names elsewhere (a hard link): it may be any file of the machine.
    #[error("`{}` has {links} hard links: it is also another file, maybe outside the directory", path.display())]
    HardLink { path: PathBuf, links: u64 },
    /// A name that is not UTF-8 cannot be a path in a Hub repository.
    #[error("`{}` has a file name that is not valid UTF-8", path.display())]
    NonUtf8 { path: PathBuf },
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Hint for TreeError {
    fn hint(&self) -> Option<String> {
        match self {
            TreeError::Link { .. } => Some(
                "kbuild uploads regular files only and never follows links: replace the link \
                 with a copy of the file it points at, or remove it"
                    .into(),
            ),
            TreeError::Special { .. } => {
                Some("remove it: kbuild uploads regular files only".into())
            }
            TreeError::NotDirectory { .. } => {
                Some("a directory is expected here: move the file out of the way".into())
            }
            TreeError::NonUtf8 { .. } => Some("rename the file to a UTF-8 name".into()),
            TreeError::HardLink { .. } => Some(
                "kbuild never uploads or vouches for a hard-linked file: replace the link with a \
                 copy (`cp --remove-destination`), or rebuild the variant with `kbuild build`"
                    .into(),
            ),
            TreeError::Read { .. } => Some("check the directory's permissions".into()),
        }
    }
}

/// A regular file found under a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// Relative to the root, `/`-separated.
    pub rel: String,
    pub path: PathBuf,
}

/// Every regular file under `root`, sorted by relative path. `keep(rel, is_dir)` leaves out an
/// entry (and for a directory, everything below it) when it returns false; what is left out is
/// not checked either, since it is never read. Anything kept that is not a regular file or a
/// directory is an error.
pub fn regular_files(
    root: &Path,
    keep: impl Fn(&str, bool) -> bool,
) -> Result<Vec<TreeFile>, TreeError> {
    let meta = std::fs::symlink_metadata(root).map_err(|source| TreeError::Read {
        path: root.to_path_buf(),
        source,
    })?;
    check_type(root, meta.file_type())?;
    if !meta.is_dir() {
        return Err(TreeError::NotDirectory {
            path: root.to_path_buf(),
        });
    }
    let mut out = Vec::new();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| match relative(root, e.path()) {
            Ok(rel) => keep(&rel, e.file_type().is_dir()),
            // Kept, so that the loop reports it.
            Err(_) => true,
        });
    for entry in walk {
        let entry = entry.map_err(|e| TreeError::Read {
            path: e.path().unwrap_or(root).to_path_buf(),
            source: e
                .into_io_error()
                .unwrap_or_else(|| std::io::Error::other("the directory tree changed while read")),
        })?;
        // walkdir reports the type of the entry itself (lstat), not of a link's target.
        check_type(entry.path(), entry.file_type())?;
        if entry.file_type().is_file() {
            out.push(TreeFile {
                rel: relative(root, entry.path())?,
                path: entry.into_path(),
            });
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// Regular files and directories pass; everything else is named.
pub fn check_type(path: &Path, file_type: FileType) -> Result<(), TreeError> {
    if file_type.is_symlink() {
        return Err(TreeError::Link {
            path: path.to_path_buf(),
        });
    }
    match crate::files::kind_of(file_type) {
        None | Some("directory") => Ok(()),
        Some(kind) => Err(TreeError::Special {
            path: path.to_path_buf(),
            kind,
        }),
    }
}

/// Refuse `path` when it has more than one hard link: its content is also another file's, one
/// that publishing was never asked for (a link to a token file ships the token).
pub fn check_single_link(path: &Path) -> Result<(), TreeError> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::symlink_metadata(path).map_err(|source| TreeError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_file() && meta.nlink() > 1 {
        return Err(TreeError::HardLink {
            path: path.to_path_buf(),
            links: meta.nlink(),
        });
    }
    Ok(())
}

fn relative(root: &Path, path: &Path) -> Result<String, TreeError> {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let mut parts = Vec::new();
    for part in rel.components() {
        parts.push(
            part.as_os_str()
                .to_str()
                .ok_or_else(|| TreeError::NonUtf8 {
                    path: path.to_path_buf(),
                })?,
        );
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rels(files: &[TreeFile]) -> Vec<&str> {
        files.iter().map(|f| f.rel.as_str()).collect()
    }

    #[test]
    fn regular_files_are_listed_relative_and_sorted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
        std::fs::write(dir.path().join("b.py"), "").unwrap();
        std::fs::write(dir.path().join("sub/deeper/a.py"), "").unwrap();
        let files = regular_files(dir.path(), |_, _| true).unwrap();
        assert_eq!(rels(&files), ["b.py", "sub/deeper/a.py"]);
        assert_eq!(files[1].path, dir.path().join("sub/deeper/a.py"));
    }

    #[test]
    fn a_link_to_a_file_or_a_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("token"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("token"), dir.path().join("notes.txt"))
            .unwrap();
        match regular_files(dir.path(), |_, _| true) {
            Err(TreeError::Link { path }) => assert_eq!(path, dir.path().join("notes.txt")),
            other => panic!("expected a link error, got {other:?}"),
        }

        std::fs::remove_file(dir.path().join("notes.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("data")).unwrap();
        match regular_files(dir.path(), |_, _| true) {
            Err(TreeError::Link { path }) => assert_eq!(path, dir.path().join("data")),
            other => panic!("expected a link error, got {other:?}"),
        }
    }

    #[test]
    fn a_root_that_is_a_link_is_an_error_even_when_it_points_at_a_directory() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("benchmarks");
        std::os::unix::fs::symlink(outside.path(), &root).unwrap();
        assert!(matches!(
            regular_files(&root, |_, _| true),
            Err(TreeError::Link { path }) if path == root
        ));
    }

    #[test]
    fn entries_left_out_are_neither_listed_nor_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".cache")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join(".cache/passwd")).unwrap();
        std::fs::write(dir.path().join("bench.py"), "").unwrap();
        let files = regular_files(dir.path(), |rel, _| !rel.starts_with('.')).unwrap();
        assert_eq!(rels(&files), ["bench.py"]);
    }
}
