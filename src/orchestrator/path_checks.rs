//! Checks of a build's paths before anything is written: the output directory must lie outside
//! what the build reads (else every new variant would package the old ones and the cache), and
//! the paths compilers write into dependency files must be UTF-8 (kbuild reads those as text).

use std::path::{Path, PathBuf};

use super::error::BuildError;
use crate::config::{Framework, Project};

/// Refuse an output directory inside the Python package or a source or include directory,
/// and, for a project that compiles, a project or output path that is not UTF-8. The project root itself may hold the
/// output directory (the default `<root>/build`): the build reads only the files build.toml
/// lists, and `include = ["."]` finds headers by name.
pub fn check_paths(project: &Project, out_dir: &Path) -> Result<(), BuildError> {
    // Only compiled projects run compilers, whose dependency files hold these paths.
    let compiled = matches!(project.framework, Framework::Torch(_));
    for (what, path) in [
        ("project", &project.root),
        ("output", &out_dir.to_path_buf()),
    ] {
        if compiled && path.to_str().is_none() {
            return Err(BuildError::NonUtf8Path {
                what,
                path: path.clone(),
            });
        }
    }
    let out = resolve(out_dir);
    for (dir, what) in read_dirs(project) {
        let dir = resolve(&project.root.join(&dir));
        if dir != project.root && out.starts_with(&dir) {
            return Err(BuildError::OutDirInSources {
                out_dir: out_dir.to_path_buf(),
                dir: dir
                    .strip_prefix(&project.root)
                    .unwrap_or(&dir)
                    .to_path_buf(),
                what,
            });
        }
    }
    Ok(())
}

/// The directories a build reads from, relative to the root, with what they are.
fn read_dirs(project: &Project) -> Vec<(PathBuf, &'static str)> {
    let package = Path::new(project.framework.extension_dir()).join(project.general.python_name());
    let mut dirs = vec![(package, "the Python package every variant copies")];
    let (framework_src, framework_include): (&[PathBuf], &[PathBuf]) = match &project.framework {
        Framework::Torch(t) => (&t.src, &t.include),
        Framework::TvmFfi(t) => (&t.src, &t.include),
        Framework::TorchNoarch(_) => (&[], &[]),
    };
    let sources = project
        .kernels
        .iter()
        .flat_map(|k| &k.src)
        .chain(framework_src);
    for src in sources {
        if let Some(parent) = src.parent().filter(|p| !p.as_os_str().is_empty()) {
            dirs.push((parent.to_path_buf(), "a source directory"));
        }
    }
    let includes = project
        .kernels
        .iter()
        .flat_map(|k| &k.include)
        .chain(framework_include);
    for include in includes {
        dirs.push((include.clone(), "an include directory"));
    }
    dirs
}

/// `path` with links resolved as far as it exists (an output directory may not exist yet).
fn resolve(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let parts: Vec<_> = absolute.components().collect();
    for split in (1..=parts.len()).rev() {
        let Ok(real) = parts[..split].iter().collect::<PathBuf>().canonicalize() else {
            continue;
        };
        // What does not exist holds no links: `..` and `.` are resolved by name.
        return parts[split..].iter().fold(real, |mut p, part| {
            match part {
                std::path::Component::ParentDir => {
                    p.pop();
                }
                std::path::Component::Normal(name) => p.push(name),
                _ => {}
            }
            p
        });
    }
    absolute
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_resolves_through_its_existing_parent() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let real = dir.path().canonicalize().unwrap().join("real/a/b");
        assert_eq!(resolve(&dir.path().join("link/a/b")), real);
        assert_eq!(resolve(&dir.path().join("link/./a/../a/b")), real);
    }
}
