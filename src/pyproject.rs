//! `kbuild create-pyproject`: make `pip install .` (and `pip install git+…`) of a kernel project
//! build through kbuild. It writes a `pyproject.toml` whose `[build-system]` names a PEP 517
//! backend kept in the project itself (`kbuild_backend.py`, through `backend-path`), which runs
//! `kbuild wheel`: the installed wheel is the one `kbuild wheel` writes.
//!
//! Why an in-tree backend rather than a `kbuild` package on an index (as maturin ships): kbuild
//! is a native binary that builds against the torch of the environment pip installs into, which
//! an isolated build environment would have to download again (gigabytes). An in-tree backend
//! needs nothing from an index (`requires = []`), works with pip's default build isolation,
//! finds kbuild on `PATH` (or `$KBUILD`) and that environment's torch through `sys.executable`.

use std::path::{Path, PathBuf};

use crate::hint::Hint;

/// The backend module, written beside pyproject.toml.
pub const BACKEND: &str = include_str!("../templates/pep517/kbuild_backend.py");

/// Its file name (the module `build-backend` names).
pub const BACKEND_FILE: &str = "kbuild_backend.py";

const PYPROJECT: &str = "# Written by `kbuild create-pyproject`: `pip install .` builds this kernel with \
`kbuild wheel`\n# (kbuild_backend.py says how it finds kbuild and torch).\n\
[build-system]\n\
requires = []\n\
build-backend = \"kbuild_backend\"\n\
backend-path = [\".\"]\n";

/// Why the files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PyprojectError {
    #[error("`{}` exists already", path.display())]
    Exists { path: PathBuf },
    #[error("`{}` has no build.toml: not a kernel project", dir.display())]
    NotAProject { dir: PathBuf },
    #[error("cannot write `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Hint for PyprojectError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            PyprojectError::Exists { .. } => {
                "pass `--overwrite` to replace it (a `[project]` table there is lost)".into()
            }
            PyprojectError::NotAProject { .. } => {
                "run it in the project's root, or pass `-C <project>`".into()
            }
            PyprojectError::Io { .. } => "check the permissions of the project directory".into(),
        })
    }
}

/// Write `pyproject.toml` and `kbuild_backend.py` into `project_dir`; existing ones only when
/// `overwrite`. Returns the paths written.
pub fn create_pyproject(
    project_dir: &Path,
    overwrite: bool,
) -> Result<Vec<PathBuf>, PyprojectError> {
    if !project_dir.join("build.toml").is_file() {
        return Err(PyprojectError::NotAProject {
            dir: project_dir.to_path_buf(),
        });
    }
    let files = [("pyproject.toml", PYPROJECT), (BACKEND_FILE, BACKEND)];
    let paths: Vec<PathBuf> = files.iter().map(|(f, _)| project_dir.join(f)).collect();
    if let Some(path) = paths.iter().find(|p| !overwrite && p.exists()) {
        return Err(PyprojectError::Exists { path: path.clone() });
    }
    for ((_, text), path) in files.iter().zip(&paths) {
        let io = |source| PyprojectError::Io {
            path: path.clone(),
            source,
        };
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)?;
    }
    Ok(paths)
}
