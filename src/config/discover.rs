//! Which directory is the project: the nearest one holding build.toml, from the working
//! directory up, as cargo finds Cargo.toml. `-C` names it outright and skips the walk.

use std::path::{Path, PathBuf};

/// The nearest of `start` and its ancestors that holds a `build.toml` file; `None` when none
/// does. `start` is made absolute first, so `..` in it counts as written.
pub fn find_project_root(start: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(start).ok()?;
    start
        .ancestors()
        .find(|dir| dir.join("build.toml").is_file())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_build_toml_above_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let outer = tmp.path().join("outer");
        let inner = outer.join("vendor/inner");
        std::fs::create_dir_all(inner.join("csrc/deep")).unwrap();
        std::fs::write(outer.join("build.toml"), "").unwrap();
        std::fs::write(inner.join("build.toml"), "").unwrap();
        assert_eq!(find_project_root(&inner.join("csrc/deep")), Some(inner));
        assert_eq!(find_project_root(&outer.join("vendor")), Some(outer));
    }

    #[test]
    fn a_directory_named_build_toml_does_not_count() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("p/build.toml")).unwrap();
        let found = find_project_root(&tmp.path().join("p"));
        assert!(
            found.as_ref().is_none_or(|d| !d.starts_with(tmp.path())),
            "{found:?}"
        );
    }
}
