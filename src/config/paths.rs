//! Paths written in build.toml: the lexical checks (relative, inside the root, no duplicate) and
//! the record of each one for `validate`'s filesystem check.

use std::path::{Component, Path, PathBuf};

use super::error::{ConfigError, ErrorKind};
use super::reader::{KeySpec, Sp, Table};

/// A path written in build.toml: what it should be and where it is written.
pub(crate) struct PathRef {
    /// Normalised, relative to the root.
    pub path: PathBuf,
    pub written: Sp<String>,
    pub kind: PathKind,
}

/// What a path must point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathKind {
    /// A `src` entry.
    Source,
    /// An `include` entry.
    IncludeDir,
}

/// `include`: directories relative to the root.
pub(crate) fn include_dirs(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
    paths: &mut Vec<PathRef>,
) -> Result<Vec<PathBuf>, ConfigError> {
    match t.strings(s)? {
        Some(list) => path_list(t, s, list, PathKind::IncludeDir, paths),
        None => Ok(Vec::new()),
    }
}

/// Check each entry lexically (relative, inside the root), record it for the filesystem check.
/// An entry naming a path listed before (`a.cu`, `./a.cu`) is dropped with a warning.
pub(crate) fn path_list(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
    list: Sp<Vec<Sp<String>>>,
    kind: PathKind,
    paths: &mut Vec<PathRef>,
) -> Result<Vec<PathBuf>, ConfigError> {
    if kind == PathKind::Source && list.v.is_empty() {
        return Err(t.invalid(
            &list.span,
            format!("`{}` in `{}` is empty", s.name, t.name),
            format!(
                "list the files to compile (headers may be listed too): `{}`",
                s.example
            ),
        ));
    }
    let what = match kind {
        PathKind::Source => "source",
        PathKind::IncludeDir => "include directory",
    };
    let mut out: Vec<PathBuf> = Vec::with_capacity(list.v.len());
    // A set, not `out.contains`: HF projects list thousands of sources (aiter's 3,400 took
    // seconds to check pairwise).
    let mut seen = std::collections::HashSet::with_capacity(list.v.len());
    for written in list.v {
        let path = normalize(t, &written, kind)?;
        if !seen.insert(path.clone()) {
            t.warn_duplicate(&written, s, what);
            continue;
        }
        out.push(path.clone());
        paths.push(PathRef {
            path,
            written,
            kind,
        });
    }
    Ok(out)
}

/// `./a/../b.cu` → `b.cu`; absolute paths and paths above the root are errors. The root itself
/// (`.`) is a valid include directory, written `.` in the model.
fn normalize(
    t: &Table<'_, '_>,
    written: &Sp<String>,
    kind: PathKind,
) -> Result<PathBuf, ConfigError> {
    let path_error = |message: String, hint: &str| {
        t.src
            .error(&written.span, ErrorKind::Path, message, hint.to_string())
    };
    if written.v.trim().is_empty() {
        return Err(path_error(
            format!("empty path in `{}`", t.name),
            "remove the empty entry",
        ));
    }
    let relative_hint = "write paths relative to the project root (the directory of build.toml)";
    let p = Path::new(&written.v);
    if p.is_absolute() || written.v.starts_with('/') || written.v.starts_with('\\') {
        return Err(path_error(
            format!("`{}` is an absolute path", written.v),
            relative_hint,
        ));
    }
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(path_error(
                        format!("`{}` is outside the project", written.v),
                        "kbuild compiles and hashes only files under the project root: move or \
                         copy the file into the project",
                    ));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(path_error(
                    format!("`{}` is an absolute path", written.v),
                    relative_hint,
                ));
            }
        }
    }
    if out.as_os_str().is_empty() && kind == PathKind::IncludeDir {
        return Ok(PathBuf::from("."));
    }
    if out.as_os_str().is_empty() {
        return Err(path_error(
            format!("`{}` names the project root itself", written.v),
            relative_hint,
        ));
    }
    Ok(out)
}
