//! `pip install .` and `pip install git+file://…` of a kernel project build through kbuild's
//! PEP 517 backend (written by `kbuild create-pyproject`): real pip, build isolation on, no index.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::kbuild::{bin, fixture, kbuild, run, venv_seeing_toolchain};

/// pip of `py` with kbuild found through `$KBUILD`, offline.
fn pip(py: &Path) -> Command {
    let mut cmd = Command::new(py);
    cmd.args(["-m", "pip", "--disable-pip-version-check"])
        .env("KBUILD", env!("CARGO_BIN_EXE_kbuild"))
        .env("PIP_NO_INDEX", "1")
        .env_remove("KBUILD_PYTHON")
        .env_remove("VIRTUAL_ENV");
    cmd
}

/// Every file under `dir`, relative, with its bytes, sorted.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// The installed files a wheel's own contents account for (pip adds INSTALLER, REQUESTED,
/// direct_url.json and rewrites RECORD).
fn package_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let pip_own = ["INSTALLER", "REQUESTED", "direct_url.json", "RECORD"];
    let keep = |p: &PathBuf| !pip_own.iter().any(|f| p.ends_with(f));
    tree(dir).into_iter().filter(|(p, _)| keep(p)).collect()
}

#[test]
fn pip_install_of_a_project_through_the_kbuild_backend_installs_the_wheel_kbuild_wheel_writes() {
    let project = fixture("relu-v5");
    let root = project.path();
    let venv = tempfile::tempdir().unwrap();
    let (py, _) = venv_seeing_toolchain(&venv.path().join("venv"));
    let out = run(bin().arg("-C").arg(root).arg("create-pyproject"));
    assert!(out.status.success(), "create-pyproject failed");

    let dist = venv.path().join("dist");
    let out = run(kbuild(root)
        .args(["wheel", "--backend", "cpu", "--python"])
        .arg(&py)
        .arg("--dist-dir")
        .arg(&dist));
    assert!(out.status.success());
    let [wheel] = std::fs::read_dir(&dist)
        .unwrap()
        .flatten()
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();

    // `pip wheel .`: the backend's wheel is kbuild wheel's, byte for byte.
    let built = venv.path().join("pip-wheel");
    let out = run(pip(&py)
        .args(["wheel", "--no-deps", "-C", "backend=cpu", "-w"])
        .arg(&built)
        .arg(root));
    assert!(out.status.success(), "pip wheel . failed");
    let from_pip = built.join(wheel.file_name());
    assert_eq!(
        std::fs::read(&from_pip).unwrap(),
        std::fs::read(wheel.path()).unwrap()
    );

    // `pip install .` and of the kbuild wheel install the same files.
    let (by_source, by_wheel) = (venv.path().join("t-src"), venv.path().join("t-whl"));
    let out = run(pip(&py)
        .args([
            "install",
            "--no-deps",
            "--no-compile",
            "-C",
            "backend=cpu",
            "--target",
        ])
        .arg(&by_source)
        .arg(root));
    assert!(out.status.success(), "pip install . failed");
    let out = run(pip(&py)
        .args(["install", "--no-deps", "--no-compile", "--target"])
        .arg(&by_wheel)
        .arg(wheel.path()));
    assert!(out.status.success());
    let (source_files, wheel_files) = (package_files(&by_source), package_files(&by_wheel));
    let names =
        |files: &[(PathBuf, Vec<u8>)]| files.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&source_files), names(&wheel_files));
    assert!(
        source_files == wheel_files,
        "the installed files differ in content"
    );
    assert!(by_source.join("relu/__init__.py").is_file());

    // `pip install git+file://…` builds a fresh clone the same way.
    let git = |args: &[&str]| {
        let out = run(Command::new("git").args(args).current_dir(root));
        assert!(out.status.success(), "git {args:?}");
    };
    std::fs::remove_dir_all(root.join("build")).unwrap();
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "relu",
    ]);
    let by_git = venv.path().join("t-git");
    let url = format!("git+file://{}", root.display());
    let out = run(pip(&py)
        .args([
            "install",
            "--no-deps",
            "--no-compile",
            "-C",
            "backend=cpu",
            "--target",
        ])
        .arg(&by_git)
        .arg(&url));
    assert!(out.status.success(), "pip install git+file:// failed");
    assert!(by_git.join("relu/__init__.py").is_file());
    let metadata = |dir: &Path| {
        let files = package_files(dir);
        files
            .into_iter()
            .filter(|(p, _)| p.ends_with("METADATA") || p.ends_with("WHEEL"))
            .count()
    };
    assert_eq!(metadata(&by_git), 2);
}
