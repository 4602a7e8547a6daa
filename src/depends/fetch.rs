//! Fetching a header tree into kbuild's cache: the fetch as data (a dry run prints it) and the
//! staged move into place.

use std::path::PathBuf;

use serde::Serialize;

use super::source::FetchSource;
use super::{DepsError, Release, cutlass};
use crate::config::{Dependency, Location};
use crate::process;

/// A header tree to download into kbuild's cache, as plain data (a dry run prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fetch {
    pub dependency: Dependency,
    /// Where it comes from (`"source": "pypi"` or `"git"` in JSON, beside its fields).
    #[serde(flatten)]
    pub source: FetchSource,
    /// The cache entry it becomes.
    pub into: PathBuf,
    /// The `depends` entry that asked for it, for errors.
    #[serde(skip)]
    pub location: Location,
}

/// Download `fetch` into a staging directory beside the cache entry, check that it holds the
/// release asked for, and rename its header tree into place. Another build that fetched it
/// meanwhile wins; a failed fetch leaves nothing in the cache.
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
    let (command, tree) = fetch.source.command(&staging.path().join("download"));
    process::run(&command).map_err(|failure| DepsError::FetchFailed {
        fetch: Box::new(fetch.clone()),
        output: failure.diagnostics(),
        failure: Box::new(failure),
    })?;
    let found = cutlass::tree_version(&tree);
    if found != Some((major, minor)) {
        return Err(DepsError::FetchedTreeWrong {
            fetch: Box::new(fetch.clone()),
            release,
            found,
        });
    }
    // The cache keeps headers, not a repository: the clone's history is of no use to a build.
    let git_dir = tree.join(".git");
    if git_dir.exists() {
        std::fs::remove_dir_all(&git_dir).map_err(|source| DepsError::Io {
            path: git_dir.clone(),
            source,
        })?;
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
