//! The C++ libraries a kernel's `depends` names, found or fetched without Nix.
//!
//! `torch` comes with the toolchain. `cutlass_X_Y` is the CUTLASS release kernel-builder pins
//! for X.Y, looked for in this order: `CUTLASS_HOME` (a CUTLASS tree, checked against X.Y),
//! kbuild's cache (`<cache>/cutlass/<release>`, a clone or an earlier fetch), then a fetch into
//! that cache: PyPI's `nvidia-cutlass` for the releases it has, else a shallow clone of the
//! release tag (as kernel-builder's Nix gets it). [`locate`] only looks (a dry run touches no
//! network); a header tree still to be fetched is a [`Fetch`] in the plan, which the build runs
//! before compiling ([`fetch()`]). Anything missing is an error at its `depends` entry that says
//! what to run.

mod cutlass;
mod fetch;
mod source;

pub use cutlass::{DEFAULT_GIT_URL, Release};
pub use fetch::{Fetch, fetch};
pub use source::FetchSource;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::{Backend, Dependency, Location, Project};
use crate::hint::Hint;
use crate::process::{CommandFailure, on_new_line};

/// Where dependency headers are looked for, resolved from the environment.
#[derive(Debug, Clone)]
pub struct DepsSettings {
    /// kbuild's cache: `KBUILD_CACHE_DIR`, else `$XDG_CACHE_HOME/kbuild`, else
    /// `~/.cache/kbuild`; `None` when none of them is set.
    pub cache_dir: Option<PathBuf>,
    /// `CUTLASS_HOME`: a CUTLASS tree that takes precedence over the cache.
    pub cutlass_home: Option<PathBuf>,
    /// `KBUILD_OFFLINE` set (to anything but `0` or empty): never fetch.
    pub offline: bool,
    /// `KBUILD_CUTLASS_GIT`: the repository that CUTLASS releases PyPI lacks are cloned from
    /// (default [`DEFAULT_GIT_URL`]).
    pub cutlass_git: String,
}

impl Default for DepsSettings {
    fn default() -> Self {
        DepsSettings {
            cache_dir: None,
            cutlass_home: None,
            offline: false,
            cutlass_git: DEFAULT_GIT_URL.into(),
        }
    }
}

impl DepsSettings {
    /// The settings the environment gives: `KBUILD_CACHE_DIR` (else `XDG_CACHE_HOME`, `HOME`),
    /// `CUTLASS_HOME`, `KBUILD_OFFLINE`, and `KBUILD_CUTLASS_GIT` (the repository CUTLASS
    /// releases PyPI lacks are cloned from: a URL, a path, or `file://`).
    pub fn from_env() -> Self {
        let var = |name: &str| crate::env::var_os(name).filter(|v| !v.is_empty());
        let cache_dir = var("KBUILD_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("kbuild")))
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/kbuild")));
        DepsSettings {
            cache_dir,
            cutlass_home: var("CUTLASS_HOME").map(PathBuf::from),
            offline: var("KBUILD_OFFLINE").is_some_and(|v| v != "0"),
            cutlass_git: var("KBUILD_CUTLASS_GIT")
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_else(|| DEFAULT_GIT_URL.into()),
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
        /// Where the hint's `git clone` gets the release (boxed: keeps the error small).
        git_url: Box<str>,
    },
    #[error(
        "{}: `cutlass_{}_{}`: no CUTLASS {} headers: `CUTLASS_HOME` is not set, kbuild's cache \
         has no `{}`, and fetching is off (`KBUILD_OFFLINE` is set)",
        fetch.location, release.major, release.minor, release.version, fetch.into.display()
    )]
    CutlassOffline {
        release: Release,
        /// The fetch that `KBUILD_OFFLINE` stopped: its source and the cache entry looked for.
        fetch: Box<Fetch>,
        /// Where the hint's `git clone` gets the release.
        git_url: String,
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
        "{}: `{}`: {} failed{}",
        fetch.location, fetch.dependency, fetch.source.action(), on_new_line(output)
    )]
    FetchFailed {
        fetch: Box<Fetch>,
        /// What pip or git printed (stderr, then stdout).
        output: String,
        #[source]
        failure: Box<CommandFailure>,
    },
    #[error(
        "{}: `{}` needs CUTLASS {}.{}, but the tree that `{}` fetched {}",
        fetch.location, fetch.dependency, release.major, release.minor, fetch.source,
        describe_tree(*found)
    )]
    FetchedTreeWrong {
        fetch: Box<Fetch>,
        release: Release,
        /// What its `include/cutlass/version.h` says, as for `CUTLASS_HOME`.
        found: Option<(u32, u32)>,
    },
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
            DepsError::CutlassHomeMismatch {
                release, git_url, ..
            } => format!(
                "point `CUTLASS_HOME` at a CUTLASS {}.{} tree (`{}`), or unset it to use \
                 kbuild's cache",
                release.major,
                release.minor,
                release.clone_command(git_url, Path::new("cutlass"))
            ),
            DepsError::CutlassOffline {
                release,
                fetch,
                git_url,
            } => {
                let clone = release.clone_command(git_url, &fetch.into);
                let unset = match &fetch.source {
                    FetchSource::Pypi { requirement, .. } => {
                        format!("fetch `{requirement}` from PyPI")
                    }
                    FetchSource::Git { .. } => "clone it".into(),
                };
                format!(
                    "unset `KBUILD_OFFLINE` to {unset} into the cache, or `{clone}`, or set \
                     `CUTLASS_HOME` to a CUTLASS {} tree",
                    release.version
                )
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
            DepsError::FetchFailed { fetch, .. } => fetch_hint(fetch, false),
            DepsError::FetchedTreeWrong { fetch, .. } => fetch_hint(fetch, true),
            DepsError::Io { .. } => {
                "check that the cache directory is writable, or set `KBUILD_CACHE_DIR`".into()
            }
        })
    }
}

/// What to do when `fetch` failed (`wrong_tree`: it ran, but brought another release): fix
/// what it needs, or put the headers in place by hand.
fn fetch_hint(fetch: &Fetch, wrong_tree: bool) -> String {
    let release = match fetch.dependency {
        Dependency::Cutlass { major, minor } => Release::of(major, minor),
        _ => None,
    };
    let Some(release) = release else {
        return format!("install `{}` yourself", fetch.dependency);
    };
    let (check, url) = match &fetch.source {
        FetchSource::Pypi { python, .. } => (
            format!(
                "check that `{} -m pip` can reach PyPI (pip's own settings apply)",
                python.display()
            ),
            DEFAULT_GIT_URL,
        ),
        FetchSource::Git { url, tag } if wrong_tree => (
            format!(
                "check that `{url}` is a CUTLASS repository whose tag `{tag}` is CUTLASS {} \
                 (`KBUILD_CUTLASS_GIT` names it)",
                release.version
            ),
            DEFAULT_GIT_URL,
        ),
        FetchSource::Git { url, tag } => (
            format!(
                "check that `git` is installed and can reach `{url}`, which has the tag `{tag}`"
            ),
            url.as_str(),
        ),
    };
    format!(
        "{check}, or put the headers in place yourself: `{}`, or set `CUTLASS_HOME` to a \
         CUTLASS {} tree",
        release.clone_command(url, &fetch.into),
        release.version
    )
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
                git_url: settings.cutlass_git.as_str().into(),
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
    let fetch = Fetch {
        dependency,
        source: release.fetch_source(&settings.cutlass_git, python),
        into: entry,
        location: location.clone(),
    };
    if settings.offline {
        return Err(DepsError::CutlassOffline {
            release,
            fetch: Box::new(fetch),
            git_url: settings.cutlass_git.clone(),
        });
    }
    Ok(Origin::Fetch(fetch))
}
