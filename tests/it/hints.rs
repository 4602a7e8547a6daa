//! Hints that used to mislead or say nothing: each failure or silent fallback says what happened
//! and what to do.

use std::path::Path;

use crate::common::kbuild::{cuda_bin, fixture, kbuild, run, venv_seeing_toolchain};
use crate::common::redact::Redact;
use crate::common::variant::{VariantSpec, write_variant};

/// What `kbuild -C <project> ARGS…` shows, which must fail.
fn failing(project: &Path, args: &[&str]) -> String {
    let out = run(kbuild(project).args(args).env("LC_ALL", "C"));
    assert!(!out.status.success(), "`kbuild {args:?}` succeeded");
    Redact::new().path(project, "[project]").output(&out)
}

#[test]
fn hash_pack_publish_and_fill_card_before_any_build_say_build_first() {
    let project = fixture("relu-v5");
    let root = project.path();
    let mut shown = String::new();
    for args in [
        &["hash"][..],
        &["pack"],
        &["publish", "--dry-run"],
        &["fill-card"],
    ] {
        shown.push_str(&format!(
            "$ kbuild {}\n{}\n",
            args.join(" "),
            failing(root, args)
        ));
    }
    insta::assert_snapshot!(shown);
}

#[test]
fn a_misspelled_backend_key_is_an_unknown_key_with_the_one_meant() {
    let project = fixture("relu-v5");
    let root = project.path();
    let toml = std::fs::read_to_string(root.join("build.toml")).unwrap();
    let toml = toml.replace(
        "[kernel.relu_cpu]\nbackend = \"cpu\"",
        "[kernel.relu_cpu]\nbacknd = \"cpu\"",
    );
    std::fs::write(root.join("build.toml"), toml).unwrap();
    insta::assert_snapshot!(failing(root, &["check-config"]));
}

#[test]
fn a_missing_backend_key_suggests_the_backend_its_sources_are_for() {
    let project = fixture("relu-v5");
    let root = project.path();
    let toml = std::fs::read_to_string(root.join("build.toml")).unwrap();
    let toml = toml.replace(
        "[kernel.relu_cpu]\nbackend = \"cpu\"\n",
        "[kernel.relu_cpu]\n",
    );
    std::fs::write(root.join("build.toml"), toml).unwrap();
    let shown = failing(root, &["check-config"]);
    assert!(shown.contains("add `backend = \"cpu\"`"), "{shown}");
}

#[test]
fn a_cuda_home_without_nvcc_is_named_when_another_nvcc_is_used() {
    let project = fixture("relu-v5");
    let empty = tempfile::tempdir().unwrap();
    let out = run(kbuild(project.path())
        .args(["build", "--dry-run", "--backend", "cuda"])
        .env("CUDA_HOME", empty.path()));
    assert!(out.status.success());
    let stderr = Redact::new().path(empty.path(), "[cuda-home]").stderr(&out);
    let warning = stderr
        .lines()
        .find(|l| l.contains("CUDA_HOME"))
        .unwrap_or_else(|| panic!("no warning:\n{stderr}"));
    assert!(
        warning.starts_with(
            "warning: `CUDA_HOME` is set but `[cuda-home]/bin/nvcc` does not exist: using `"
        ) && warning.contains("(pip) instead"),
        "{warning}"
    );
}

/// A CUDA variant whose metadata claims sm_80 cubins, with an extension that holds none.
fn cuda_variant_without_cubins(project: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("plain.c");
    std::fs::write(&src, "int probe(void) { return 1; }\n").unwrap();
    let so = tmp.path().join("plain.so");
    let cc = run(std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src));
    assert!(cc.status.success());
    write_variant(
        &project.join("build"),
        &VariantSpec {
            dir_name: "torch215-cxx11-cu132-x86_64-linux",
            id: "_relu_cuda_abc1234",
            backend: "cuda",
            so: Some(std::fs::read(&so).unwrap()),
            extra_metadata: serde_json::json!({"backend": {"type": "cuda", "archs": ["8.0"]}}),
            ..VariantSpec::default()
        },
    );
}

#[test]
fn check_finds_cuobjdump_beside_the_builds_nvcc_and_says_when_the_archs_rule_is_skipped() {
    let project = fixture("relu-v5");
    let root = project.path();
    cuda_variant_without_cubins(root);
    assert!(cuda_bin().join("cuobjdump").is_file());
    let out = run(kbuild(root)
        .args(["check", "--json", "--manylinux", "none"])
        .env_remove("CUDA_HOME"));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<&str> = report[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .collect();
    assert_eq!(rules, ["archs"], "{report:#}");

    // No toolchain to ask: the rule is skipped, and the check says so.
    let out = run(kbuild(root)
        .args(["check", "--manylinux", "none"])
        .env("KBUILD_PYTHON", "/nonexistent/python")
        .env_remove("CUDA_HOME"));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: the `archs` rule") && stderr.contains("--cuobjdump PATH"),
        "{stderr}"
    );
}

#[test]
fn clean_says_it_removed_a_develop_link_and_develop_uninstall_removes_it_for_good() {
    let project = fixture("relu-v5");
    let root = project.path();
    let venv = tempfile::tempdir().unwrap();
    let (py, site) = venv_seeing_toolchain(&venv.path().join("venv"));
    let out = run(kbuild(root)
        .args(["develop", "--backend", "cpu", "--python"])
        .arg(&py));
    assert!(out.status.success());
    let pth = site.join("kbuild_develop_relu.pth");
    assert!(pth.is_file());

    let out = run(kbuild(root).arg("clean"));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let note = stderr.lines().find(|l| l.starts_with("note:"));
    insta::assert_snapshot!(note.unwrap_or(&stderr));

    let out = run(kbuild(root)
        .args(["develop", "--uninstall", "--python"])
        .arg(&py));
    assert!(out.status.success());
    assert!(!pth.exists(), "the .pth is still there");
    let stderr = Redact::new()
        .python()
        .path(&py, "[venv-python]")
        .stderr(&out);
    assert!(
        stderr.contains("Uninstalled `import relu` from [venv-python]"),
        "{stderr}"
    );
    let again = run(kbuild(root)
        .args(["develop", "--uninstall", "--python"])
        .arg(&py));
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to uninstall"));
}

/// nvcc's own `Unsupported gpu architecture` (the real nvcc 13.2 asked for 7.0, which CUDA 13
/// dropped): the hint names the capability as build.toml writes it and the last CUDA that
/// builds it.
#[test]
fn nvcc_unsupported_architecture_hint_names_the_capability_and_the_cuda_that_builds_it() {
    let nvcc = cuda_bin().join("nvcc");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.cu");
    std::fs::write(&src, "__global__ void k() {}\n").unwrap();
    let out = run(std::process::Command::new(&nvcc)
        .args(["-c", "-gencode", "arch=compute_70,code=sm_70", "-o"])
        .arg(dir.path().join("k.o"))
        .arg(&src));
    assert!(!out.status.success(), "nvcc 13 builds sm_70: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.contains("Unsupported gpu architecture 'compute_70'"),
        "{stderr}"
    );
    insta::assert_snapshot!(kbuild::compile::compiler_hint(&stderr).unwrap());
}
