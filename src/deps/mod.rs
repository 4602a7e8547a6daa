//! The C++ libraries a kernel's `depends` names, found or fetched without Nix.
//!
//! `torch` comes with the toolchain. `cutlass_X_Y` is the CUTLASS release kernel-builder pins
//! for X.Y, looked for in this order: `CUTLASS_HOME` (a CUTLASS tree, checked against X.Y),
//! kbuild's cache (`<cache>/cutlass/<release>`, a clone or an earlier fetch), then PyPI's
//! `nvidia-cutlass` for the releases it has. [`locate`] only looks (a dry run touches no
//! network); a header tree still to be fetched is a [`Fetch`] in the plan, which the build runs
//! before compiling ([`fetch`]). Anything missing is an error at its `depends` entry that says
//! what to install.

mod cutlass;

pub use cutlass::Release;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::{Backend, Dependency, Location, Project};
use crate::hint::Hint;
use crate::process::{self, CommandFailure, CommandSpec, on_new_line};

/// Where dependency headers are looked for, resolved from the environment.
#[derive(Debug, Clone, Default)]
pub struct DepsSettings {
    /// kbuild's cache: `KBUILD_CACHE_DIR`, else `$XDG_CACHE_HOME/kbuild`, else
    /// `~/.cache/kbuild`; `None` when none of them is set.
    pub cache_dir: Option<PathBuf>,
    /// `CUTLASS_HOME`: a CUTLASS tree that takes precedence over the cache.
    pub cutlass_home: Option<PathBuf>,
    /// `KBUILD_OFFLINE` set (to anything but `0` or empty): never fetch.
    pub offline: bool,
}

impl DepsSettings {
    /// The settings the environment gives.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let cache_dir = var("KBUILD_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("kbuild")))
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/kbuild")));
        DepsSettings {
            cache_dir,
            cutlass_home: var("CUTLASS_HOME").map(PathBuf::from),
            offline: var("KBUILD_OFFLINE").is_some_and(|v| v != "0"),
        }
    }
}

/// The headers of one dependency: where they are (or will be, once fetched).
#[derive(Debug, Clone, Serialize)]
pub struct DependencyHeaders {
    pub dependency: Dependency,
    /// Passed as `-isystem` to every unit of a kernel that lists the dependency.
    pub include_dirs: Vec<PathBuf>,
    /// How the headers got there: `CUTLASS_HOME`, the cache, or a fetch still to run.
    pub origin: Origin,
}

/// Where a dependency's headers come from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// A tree named by this environment variable.
    Env { variable: String, root: PathBuf },
    /// An entry of kbuild's cache.
    Cache { root: PathBuf },
    /// Not on disk yet: the build fetches it before compiling.
    Fetch(Fetch),
}

/// A header tree to download into kbuild's cache, as plain data (a dry run prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fetch {
    pub dependency: Dependency,
    /// `nvidia-cutlass==3.6.0.0`.
    pub requirement: String,
    /// The interpreter whose pip downloads it (the build's Python: its pip settings apply).
    pub python: PathBuf,
    /// The cache entry it becomes.
    pub into: PathBuf,
    /// The `depends` entry that asked for it, for errors.
    #[serde(skip)]
    pub location: Location,
}

/// Why no fetch can provide a missing release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoFetch {
    /// `KBUILD_OFFLINE` is set.
    Offline,
    /// PyPI's `nvidia-cutlass` does not have the release.
    NotOnPypi,
}

impl fmt::Display for NoFetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoFetch::Offline => f.write_str("fetching is off (`KBUILD_OFFLINE` is set)"),
            NoFetch::NotOnPypi => f.write_str("PyPI's `nvidia-cutlass` does not have it"),
        }
    }
}

/// A dependency that cannot be provided, at the `depends` entry that names it.
#[derive(Debug, thiserror::Error)]
pub enum DepsError {
    #[error(
        "{location}: `cutlass_{}_{}` needs CUTLASS {}.{}, but `CUTLASS_HOME` (`{}`) {}",
        release.major, release.minor, release.major, release.minor, home.display(),
        describe_tree(*found)
    )]
    CutlassHomeMismatch {
        location: Location,
        release: Release,
        home: PathBuf,
        /// The `major.minor` the tree holds, `None` when it has no `include/cutlass/version.h`.
        found: Option<(u32, u32)>,
    },
    #[error(
        "{location}: `cutlass_{}_{}`: no CUTLASS {} headers: `CUTLASS_HOME` is not set, \
         kbuild's cache has no `{}`, and {why}",
        release.major, release.minor, release.version, entry.display()
    )]
    CutlassMissing {
        location: Location,
        release: Release,
        /// The cache entry that was looked for.
        entry: PathBuf,
        why: NoFetch,
    },
    #[error(
        "{location}: `{dependency}`: no CUTLASS headers: `CUTLASS_HOME` is not set and there is \
         no cache directory (none of `KBUILD_CACHE_DIR`, `XDG_CACHE_HOME`, `HOME` is set)"
    )]
    NoCacheDir {
        location: Location,
        dependency: Dependency,
    },
    #[error("{location}: `{dependency}`: kbuild does not provide this library")]
    Unsupported {
        location: Location,
        dependency: Dependency,
    },
    #[error(
        "{}: `{}`: fetching `{}` with `{}` failed{}",
        fetch.location, fetch.dependency, fetch.requirement, fetch.python.display(),
        on_new_line(output)
    )]
    FetchFailed {
        fetch: Box<Fetch>,
        /// What pip printed (stderr, then stdout).
        output: String,
        #[source]
        failure: Box<CommandFailure>,
    },
    #[error(
        "{}: `{}`: `{}` has no CUTLASS {}.{} headers under `cutlass_library/source`",
        fetch.location, fetch.dependency, fetch.requirement, release.major, release.minor
    )]
    FetchedTreeWrong { fetch: Box<Fetch>, release: Release },
    #[error("cannot write kbuild's dependency cache at `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn describe_tree(found: Option<(u32, u32)>) -> String {
    match found {
        Some((major, minor)) => format!("holds CUTLASS {major}.{minor}"),
        None => "has no `include/cutlass/version.h`".into(),
    }
}

impl Hint for DepsError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            DepsError::CutlassHomeMismatch { release, .. } => format!(
                "point `CUTLASS_HOME` at a CUTLASS {}.{} tree (`{}`), or unset it to use \
                 kbuild's cache",
                release.major,
                release.minor,
                release.clone_command(Path::new("cutlass"))
            ),
            DepsError::CutlassMissing {
                release,
                entry,
                why,
                ..
            } => {
                let clone = release.clone_command(entry);
                match (why, release.pypi()) {
                    (NoFetch::Offline, Some(req)) => format!(
                        "unset `KBUILD_OFFLINE` to fetch `{req}` from PyPI into the cache, or \
                         `{clone}`, or set `CUTLASS_HOME` to a CUTLASS {} tree",
                        release.version
                    ),
                    _ => format!(
                        "`{clone}`, or set `CUTLASS_HOME` to a CUTLASS {} tree",
                        release.version
                    ),
                }
            }
            DepsError::NoCacheDir { .. } => {
                "set `KBUILD_CACHE_DIR` to a writable directory, or `CUTLASS_HOME` to a \
                 CUTLASS tree"
                    .into()
            }
            DepsError::Unsupported { .. } => {
                "only kernels of the `cpu` and `cuda` backends are built here; remove the \
                 entry or build this kernel with HF's kernel-builder"
                    .into()
            }
            DepsError::FetchFailed { fetch, .. } | DepsError::FetchedTreeWrong { fetch, .. } => {
                format!(
                    "check that `{} -m pip` can reach PyPI (pip's own settings apply), or put \
                     the headers in place yourself: `{}`",
                    fetch.python.display(),
                    match fetch.dependency {
                        Dependency::Cutlass { major, minor } => Release::of(major, minor)
                            .map(|r| r.clone_command(&fetch.into))
                            .unwrap_or_else(|| format!("install `{}`", fetch.dependency)),
                        _ => format!("install `{}`", fetch.dependency),
                    }
                )
            }
            DepsError::Io { .. } => {
                "check that the cache directory is writable, or set `KBUILD_CACHE_DIR`".into()
            }
        })
    }
}

/// The headers of every library that a kernel of `backends` lists in `depends` (each library
/// once, reported at its first entry). `python` is the interpreter a fetch would use. Looks
/// only: nothing is downloaded.
pub fn locate(
    project: &Project,
    backends: &[Backend],
    settings: &DepsSettings,
    python: &Path,
) -> Result<Vec<DependencyHeaders>, DepsError> {
    let mut found: Vec<DependencyHeaders> = Vec::new();
    let entries = project
        .kernels
        .iter()
        .filter(|k| backends.contains(&k.backend))
        .flat_map(|k| k.depends.iter().zip(&k.depends_locations));
    for (&dependency, location) in entries {
        if dependency == Dependency::Torch || found.iter().any(|h| h.dependency == dependency) {
            continue;
        }
        let unsupported = || DepsError::Unsupported {
            location: location.clone(),
            dependency,
        };
        let Dependency::Cutlass { major, minor } = dependency else {
            return Err(unsupported());
        };
        let release = Release::of(major, minor).ok_or_else(unsupported)?;
        let origin = locate_cutlass(dependency, release, location, settings, python)?;
        let root = match &origin {
            Origin::Env { root, .. } | Origin::Cache { root } => root,
            Origin::Fetch(fetch) => &fetch.into,
        };
        found.push(DependencyHeaders {
            dependency,
            include_dirs: cutlass::include_dirs(root),
            origin,
        });
    }
    Ok(found)
}

fn locate_cutlass(
    dependency: Dependency,
    release: Release,
    location: &Location,
    settings: &DepsSettings,
    python: &Path,
) -> Result<Origin, DepsError> {
    let wanted = (release.major, release.minor);
    if let Some(home) = &settings.cutlass_home {
        let found = cutlass::tree_version(home);
        if found != Some(wanted) {
            return Err(DepsError::CutlassHomeMismatch {
                location: location.clone(),
                release,
                home: home.clone(),
                found,
            });
        }
        return Ok(Origin::Env {
            variable: "CUTLASS_HOME".into(),
            root: home.clone(),
        });
    }
    let Some(cache) = &settings.cache_dir else {
        return Err(DepsError::NoCacheDir {
            location: location.clone(),
            dependency,
        });
    };
    let entry = cache.join("cutlass").join(release.version);
    if cutlass::tree_version(&entry) == Some(wanted) {
        return Ok(Origin::Cache { root: entry });
    }
    let missing = |why| DepsError::CutlassMissing {
        location: location.clone(),
        release,
        entry: entry.clone(),
        why,
    };
    let Some(requirement) = release.pypi() else {
        return Err(missing(NoFetch::NotOnPypi));
    };
    if settings.offline {
        return Err(missing(NoFetch::Offline));
    }
    Ok(Origin::Fetch(Fetch {
        dependency,
        requirement,
        python: python.to_path_buf(),
        into: entry.clone(),
        location: location.clone(),
    }))
}

/// Download `fetch.requirement` with pip into a staging directory beside the cache entry and
/// move its header tree into place. Another build that fetched it meanwhile wins.
pub fn fetch(fetch: &Fetch) -> Result<(), DepsError> {
    let unsupported = || DepsError::Unsupported {
        location: fetch.location.clone(),
        dependency: fetch.dependency,
    };
    let Dependency::Cutlass { major, minor } = fetch.dependency else {
        return Err(unsupported());
    };
    let release = Release::of(major, minor).ok_or_else(unsupported)?;
    let parent = fetch.into.parent().unwrap_or(&fetch.into);
    let io = |source| DepsError::Io {
        path: parent.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(parent).map_err(io)?;
    let staging = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(parent)
        .map_err(io)?;
    let target = staging.path().join("wheel");
    let mut pip = CommandSpec::new(&fetch.python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-compile",
        "--only-binary",
        ":all:",
    ])
    .args(["--disable-pip-version-check", "--no-input", "--target"])
    .arg(&target)
    .arg(&fetch.requirement);
    process::run(&pip).map_err(|failure| DepsError::FetchFailed {
        fetch: Box::new(fetch.clone()),
        output: failure.diagnostics(),
        failure: Box::new(failure),
    })?;
    let tree = target.join("cutlass_library/source");
    if cutlass::tree_version(&tree) != Some((major, minor)) {
        return Err(DepsError::FetchedTreeWrong {
            fetch: Box::new(fetch.clone()),
            release,
        });
    }
    if let Err(source) = std::fs::rename(&tree, &fetch.into)
        && cutlass::tree_version(&fetch.into) != Some((major, minor))
    {
        return Err(DepsError::Io {
            path: fetch.into.clone(),
            source,
        });
    }
    Ok(())
}
