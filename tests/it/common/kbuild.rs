//! The kbuild binary, the project's Python, fixtures: the one place a `kbuild` command is built.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python with torch + kernels that scripts/setup installs (`KBUILD_TEST_PYTHON` overrides).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("KBUILD_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let p = repo().join(".venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup (or set KBUILD_TEST_PYTHON)",
        p.display()
    );
    p
}

/// The pip CUDA's bin directory (nvcc, cuobjdump) next to the test Python's torch.
pub fn cuda_bin() -> PathBuf {
    let out = Command::new(python())
        .args([
            "-c",
            "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))",
        ])
        .output()
        .expect("python runs");
    let site = String::from_utf8_lossy(&out.stdout).trim().to_string();
    PathBuf::from(site).join("nvidia/cu13/bin")
}

/// The `kbuild` binary under test, with nothing set.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kbuild"))
}

/// A `kbuild -C <project>` command using the test Python.
pub fn kbuild(project: &Path) -> Command {
    let mut cmd = bin();
    cmd.arg("-C").arg(project);
    cmd.env("KBUILD_PYTHON", python());
    cmd.env_remove("VIRTUAL_ENV");
    // Compilers' colours only where a test asks for them (a CI may force colour for all).
    cmd.env_remove("CLICOLOR_FORCE");
    cmd
}

/// Copy `tests/fixtures/<name>` into a fresh temp dir (outside any git checkout).
pub fn fixture(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_dir(&repo().join("tests/fixtures").join(name), tmp.path());
    tmp
}

pub fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.expect("walk fixture");
        let rel = entry.path().strip_prefix(from).expect("prefix");
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).expect("mkdir");
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

/// Run and return the output, printing it so a failing test shows what happened.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("command starts");
    eprintln!(
        "--- {:?}\n--- status {}\n--- stdout\n{}\n--- stderr\n{}",
        cmd,
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `git ARGS` in `root` as a test user; panics with its output on failure.
pub fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Run a Python snippet with the test Python; panics with its output on failure.
pub fn python_ok(code: &str, envs: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(python());
    cmd.args(["-c", code]).env("HF_HUB_OFFLINE", "1");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    assert!(out.status.success(), "python failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stdout_json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// A venv of its own (its own site-packages, where pip installs) that sees the toolchain venv's
/// packages (torch, pip, pytest) through a `.pth`; returns its python and site-packages.
/// `venv --system-site-packages` would not do: made from a venv's python, it exposes the base
/// interpreter's packages, not the venv's.
pub fn venv_seeing_toolchain(dir: &Path) -> (PathBuf, PathBuf) {
    let out = run(Command::new(python())
        .args(["-m", "venv", "--without-pip"])
        .arg(dir));
    assert!(out.status.success());
    let purelib = |py: &Path| {
        let out = run(Command::new(py).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ]));
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    };
    let venv_python = dir.join("bin/python");
    let site = purelib(&venv_python);
    std::fs::write(
        site.join("_kbuild_toolchain.pth"),
        format!("{}\n", purelib(&python()).display()),
    )
    .unwrap();
    (venv_python, site)
}

/// `PATH` with a directory (made in `dir`) first that holds an `nvidia-smi` reporting one GPU
/// of `capability`: what kbuild asks a GPU machine (the test machine has none).
pub fn path_with_gpu(dir: &Path, capability: &str) -> std::ffi::OsString {
    path_with_nvidia_smi(&dir.join("gpu-bin"), &format!("echo {capability}"))
}

/// `PATH` with a directory (made in `dir`) first that holds an `nvidia-smi` finding no GPU, as
/// the driver's tool says on a machine without one: the same on this machine and a GPU one.
pub fn path_without_gpu(dir: &Path) -> std::ffi::OsString {
    path_with_nvidia_smi(
        &dir.join("no-gpu-bin"),
        "echo 'No devices were found' >&2; exit 6",
    )
}

fn path_with_nvidia_smi(bin_dir: &Path, body: &str) -> std::ffi::OsString {
    std::fs::create_dir_all(bin_dir).unwrap();
    let smi = bin_dir.join("nvidia-smi");
    std::fs::write(&smi, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut paths = vec![bin_dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}
