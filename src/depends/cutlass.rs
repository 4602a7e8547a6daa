//! CUTLASS releases: which one each `cutlass_X_Y` means, where it is fetched from, and what a
//! tree on disk holds.

use std::path::{Path, PathBuf};

use super::source::{FetchSource, git_clone};

/// The repository a release PyPI lacks is cloned from, unless `KBUILD_CUTLASS_GIT` names
/// another (a mirror, or a local repository).
pub const DEFAULT_GIT_URL: &str = "https://github.com/NVIDIA/cutlass";

/// The release kernel-builder pins for each `cutlass_X_Y` (its Nix package set), and whether
/// PyPI's `nvidia-cutlass` has it (as `<release>.0`, headers under `cutlass_library/source`).
/// PyPI stopped at 4.2, and skipped 3.9 and 4.0, so those come from a clone of the release tag.
const RELEASES: [(u32, u32, &str, bool); 8] = [
    (2, 10, "2.10.0", false),
    (3, 5, "3.5.1", true),
    (3, 6, "3.6.0", true),
    (3, 8, "3.8.0", true),
    (3, 9, "3.9.2", false),
    (4, 0, "4.0.0", false),
    (4, 4, "4.4.2", false),
    (4, 5, "4.5.2", false),
];

/// One CUTLASS release as a `depends` entry asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub major: u32,
    pub minor: u32,
    /// The full release kernel-builder uses (`3.6.0`): the cache directory and git tag.
    pub version: &'static str,
    on_pypi: bool,
}

impl Release {
    /// The release kernel-builder pins for `cutlass_<major>_<minor>`; `None` for a pair it does
    /// not know (build.toml's parser admits only known ones).
    pub fn of(major: u32, minor: u32) -> Option<Self> {
        RELEASES
            .iter()
            .find(|(ma, mi, _, _)| (*ma, *mi) == (major, minor))
            .map(|&(major, minor, version, on_pypi)| Release {
                major,
                minor,
                version,
                on_pypi,
            })
    }

    /// The PyPI requirement that provides its headers, when PyPI has it.
    pub fn pypi(&self) -> Option<String> {
        self.on_pypi
            .then(|| format!("nvidia-cutlass=={}.0", self.version))
    }

    /// The git tag of the release: `v3.9.2`.
    pub fn tag(&self) -> String {
        format!("v{}", self.version)
    }

    /// Where a fetch gets the release: PyPI through `python`'s pip when PyPI has it, else a
    /// shallow clone of its tag from `git_url`.
    pub fn fetch_source(&self, git_url: &str, python: &Path) -> FetchSource {
        match self.pypi() {
            Some(requirement) => FetchSource::Pypi {
                requirement,
                python: python.to_path_buf(),
                tree: PathBuf::from("cutlass_library/source"),
            },
            None => FetchSource::Git {
                url: git_url.to_string(),
                tag: self.tag(),
            },
        }
    }

    /// The shell command that clones this release from `git_url` to `into`, where kbuild's
    /// cache (or `CUTLASS_HOME`) looks for it.
    pub fn clone_command(&self, git_url: &str, into: &Path) -> String {
        let mut git = git_clone(git_url, &self.tag());
        git.arg(into);
        git.to_string()
    }
}

/// The include directories of a CUTLASS tree (a clone, or the `source` directory of the PyPI
/// wheel): its headers and the `cutlass/util` helpers that CUTLASS's install also ships.
pub fn include_dirs(root: &Path) -> Vec<PathBuf> {
    vec![root.join("include"), root.join("tools/util/include")]
}

/// `major.minor` from `include/cutlass/version.h` of a tree, or `None` when the tree has no
/// readable version header.
pub fn tree_version(root: &Path) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(root.join("include/cutlass/version.h")).ok()?;
    let define = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.trim().strip_prefix("#define")?.trim_start();
            let value = rest.strip_prefix(name)?;
            // `CUTLASS_MAJOR 3`, not `CUTLASS_MAJOR_VERSION ...`.
            value.starts_with([' ', '\t']).then_some(())?;
            value.trim().parse::<u32>().ok()
        })
    };
    Some((define("CUTLASS_MAJOR")?, define("CUTLASS_MINOR")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_follow_kernel_builder_and_only_pypi_ones_get_a_requirement() {
        let r = Release::of(3, 6).unwrap();
        assert_eq!(r.version, "3.6.0");
        assert_eq!(r.pypi().as_deref(), Some("nvidia-cutlass==3.6.0.0"));
        let r = Release::of(4, 0).unwrap();
        assert_eq!(r.version, "4.0.0");
        assert_eq!(r.pypi(), None);
        assert_eq!(Release::of(1, 0), None);
        assert_eq!(
            r.clone_command(DEFAULT_GIT_URL, Path::new("/c/4.0.0")),
            "git clone --depth 1 --branch v4.0.0 https://github.com/NVIDIA/cutlass /c/4.0.0"
        );
    }

    #[test]
    fn releases_pypi_lacks_are_fetched_by_cloning_their_tag() {
        let python = Path::new("/venv/bin/python");
        let git = Release::of(3, 9)
            .unwrap()
            .fetch_source("file:///m/cutlass", python);
        assert_eq!(
            git,
            FetchSource::Git {
                url: "file:///m/cutlass".into(),
                tag: "v3.9.2".into()
            }
        );
        assert_eq!(
            git.to_string(),
            "git clone --depth 1 --branch v3.9.2 file:///m/cutlass"
        );
        let pypi = Release::of(3, 6)
            .unwrap()
            .fetch_source("file:///m/cutlass", python);
        assert!(matches!(pypi, FetchSource::Pypi { .. }), "{pypi:?}");
    }

    #[test]
    fn tree_version_reads_the_major_and_minor_defines() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(tree_version(dir.path()), None);
        std::fs::create_dir_all(dir.path().join("include/cutlass")).unwrap();
        std::fs::write(
            dir.path().join("include/cutlass/version.h"),
            "#pragma once\n#define CUTLASS_MAJOR_VERSION_X 9\n#define CUTLASS_MAJOR 3\n\
             #define CUTLASS_MINOR 8\n#define CUTLASS_PATCH 0\n",
        )
        .unwrap();
        assert_eq!(tree_version(dir.path()), Some((3, 8)));
    }
}
