//! `kbuild init`: the generated project builds for cpu, its own pytest passes against the build
//! (through `kbuild develop`, as its README says), and existing files are never replaced silently.

use std::process::Command;

use crate::common::kbuild::{bin, kbuild, run, venv_seeing_toolchain};

fn init(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    run(bin().arg("init").arg(dir).args(args))
}

#[test]
fn init_then_cpu_build_then_the_generated_pytest_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("my-kernel");
    let out = init(&root, &["--license", "mit"]);
    assert!(out.status.success());
    insta::assert_snapshot!(std::fs::read_to_string(root.join("build.toml")).unwrap());
    for file in [
        "torch-ext/my_kernel/__init__.py",
        "tests/test_my_kernel.py",
        "csrc/scale_cuda.cu",
        ".github/workflows/build.yml",
        ".gitignore",
        "README.md",
    ] {
        assert!(root.join(file).is_file(), "{file} was not written");
    }

    let out = run(kbuild(&root).args(["build", "--backend", "cpu"]));
    assert!(out.status.success(), "the generated project does not build");
    let venv = tempfile::tempdir().unwrap();
    let (py, _) = venv_seeing_toolchain(&venv.path().join("venv"));
    let out = run(kbuild(&root)
        .args(["develop", "--backend", "cpu", "--python"])
        .arg(&py));
    assert!(out.status.success());
    let tests = run(Command::new(&py)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .env("HF_HUB_OFFLINE", "1")
        .current_dir(&root));
    let stdout = String::from_utf8_lossy(&tests.stdout);
    assert!(tests.status.success(), "the generated tests failed");
    assert!(stdout.contains("4 passed"), "{stdout}");
}

#[test]
fn init_refuses_to_replace_a_file_and_names_it_unless_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("relu2");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("README.md"), "mine\n").unwrap();
    let out = init(&root, &["--backends", "cpu"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("README.md` exists already") && stderr.contains("--overwrite"),
        "{stderr}"
    );
    assert!(
        !root.join("build.toml").exists(),
        "nothing is written on refusal"
    );

    let out = init(&root, &["--backends", "cpu", "--overwrite"]);
    assert!(out.status.success());
    assert_ne!(
        std::fs::read_to_string(root.join("README.md")).unwrap(),
        "mine\n"
    );
    let toml = std::fs::read_to_string(root.join("build.toml")).unwrap();
    assert!(toml.contains("backends = [\"cpu\"]") && !toml.contains("cuda"));
    assert!(!root.join("csrc/scale_cuda.cu").exists());
}

#[test]
fn init_refuses_an_invalid_name_with_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let out = init(tmp.path(), &["--name", "My_Kernel"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error: invalid kernel name `My_Kernel`")
            && stderr.contains("hint:")
            && stderr.contains("`--name my-kernel`"),
        "{stderr}"
    );
    let out = init(tmp.path(), &["--name", "ok", "--backends", "rocm"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot scaffold the backend `rocm`"));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn init_json_lists_the_project_it_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("two-ops");
    let out = init(&root, &["--backends", "cpu", "--json"]);
    assert!(out.status.success());
    let redact = crate::common::redact::Redact::new().path(tmp.path(), "[tmp]");
    insta::assert_json_snapshot!("init_json", redact.stdout_json(&out, &[]));
}

#[test]
fn init_with_repo_writes_the_hub_repo_id_and_hfs_owner_slash_name_form_does_too() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("k");
    let out = init(&root, &["--repo", "my-org/my-kernel", "--backends", "cpu"]);
    assert!(out.status.success());
    let toml = std::fs::read_to_string(root.join("build.toml")).unwrap();
    insta::assert_snapshot!(toml);
    let out = run(kbuild(&root).arg("check-config"));
    assert!(out.status.success(), "the generated build.toml is invalid");

    // HF's `kernel-builder init --name owner/repo`.
    let hf = tmp.path().join("hf");
    let out = init(&hf, &["--name", "my-org/relu2", "--backends", "cpu"]);
    assert!(out.status.success());
    let toml = std::fs::read_to_string(hf.join("build.toml")).unwrap();
    assert!(toml.contains("name = \"relu2\""), "{toml}");
    assert!(
        toml.contains("[general.hub]\nrepo-id = \"my-org/relu2\"\n"),
        "{toml}"
    );
    let readme = std::fs::read_to_string(hf.join("README.md")).unwrap();
    assert!(readme.contains("kbuild publish                 # branch v1 of my-org/relu2"));

    let out = init(&tmp.path().join("bad"), &["--repo", "no-slash"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`no-slash` is not a Hub repository id")
            && stderr.contains("--repo my-org/my-kernel"),
        "{stderr}"
    );
}
