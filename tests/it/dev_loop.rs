//! The dev loop builds what can run here: `develop` and `wheel` with no `--backend` build cpu
//! alone on a machine without a GPU, CUDA for this machine's GPUs (`native`) on one with, and
//! say so in one line; `build`, the release command, still builds every backend.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::kbuild::{bin, kbuild, path_with_gpu, path_without_gpu, run};
use crate::common::redact::Redact;

/// A fresh `kbuild init` project (cuda and cpu) in `dir`.
fn new_project(dir: &Path) -> PathBuf {
    let root = dir.join("my-kernel");
    assert!(run(bin().arg("init").arg(&root)).status.success());
    root
}

fn stderr_of(cmd: &mut Command, root: &Path) -> (String, String) {
    let out = run(cmd);
    assert!(out.status.success());
    let redact = Redact::new().python().path(root, "[project]");
    (
        redact.stderr(&out),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn develop_without_a_gpu_builds_cpu_only_and_says_so_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let root = new_project(tmp.path());
    let (stderr, stdout) = stderr_of(
        kbuild(&root)
            .env("PATH", path_without_gpu(tmp.path()))
            .args(["develop", "--dry-run"]),
        &root,
    );
    insta::assert_snapshot!(stderr);
    assert!(stdout.contains("-cpu-"), "{stdout}");
    assert!(
        !stdout.contains("scale_cuda.cu"),
        "cuda is planned: {stdout}"
    );
}

#[test]
fn develop_with_a_gpu_builds_cuda_for_that_gpu_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = new_project(tmp.path());
    let (stderr, stdout) = stderr_of(
        kbuild(&root)
            .env("PATH", path_with_gpu(tmp.path(), "8.6"))
            .args(["develop", "--dry-run"]),
        &root,
    );
    insta::assert_snapshot!(stderr);
    assert!(stdout.contains("arch=compute_86"), "{stdout}");
    assert!(!stdout.contains("compute_90"), "the whole matrix: {stdout}");
}

#[test]
fn develop_keeps_what_the_command_line_chose() {
    let tmp = tempfile::tempdir().unwrap();
    let root = new_project(tmp.path());
    let out = run(kbuild(&root)
        .env("PATH", path_with_gpu(tmp.path(), "8.6"))
        .args(["develop", "--dry-run", "--cuda-capabilities", "9.0"]));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("note: building"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("arch=compute_90"));
}

#[test]
fn build_without_backend_still_plans_every_backend_and_the_whole_matrix() {
    let tmp = tempfile::tempdir().unwrap();
    let root = new_project(tmp.path());
    let out = run(kbuild(&root)
        .env("PATH", path_without_gpu(tmp.path()))
        .args(["build", "--dry-run"]));
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("scale_cuda.cu") && stdout.contains("scale_cpu.cpp"));
    assert!(stdout.contains("compute_75") && stdout.contains("compute_120"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("note: building"));
}

#[test]
fn wheel_without_a_gpu_writes_the_cpu_wheel_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = new_project(tmp.path());
    let out = run(kbuild(&root)
        .env("PATH", path_without_gpu(tmp.path()))
        .args(["wheel"]));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(
        notes,
        ["note: building cpu only (no GPU found); pass `--backend cuda` for the CUDA matrix"]
    );
    let wheels: Vec<String> = std::fs::read_dir(root.join("dist"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    assert!(wheels[0].contains("cpu"), "{wheels:?}");
}
