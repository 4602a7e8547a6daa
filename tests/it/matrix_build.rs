//! Several toolchains in one build directory: `--torch`, `--variant`, variants that merge in
//! `build/` and on the Hub without deleting each other, and reproducible bytes.

use std::path::{Path, PathBuf};

use crate::common::hub::Hub;
use crate::common::kbuild::{fixture, kbuild, python, run, stdout_json};
use crate::common::variant::{CPU_VARIANT, VariantSpec, project_with_variant, write_variant};

/// `build/<variant>/` of a cpu-only `--unique-id` build of `project`; returns its path.
fn build_cpu(project: &Path, extra: &[&str]) -> PathBuf {
    let mut cmd = kbuild(project);
    cmd.args([
        "build",
        "--backend",
        "cpu",
        "--unique-id",
        "repro",
        "--json",
    ])
    .args(extra);
    let out = run(&mut cmd);
    assert!(out.status.success(), "build failed");
    PathBuf::from(stdout_json(&out)["variants"][0]["path"].as_str().unwrap())
}

/// Every file under `dir`, relative, with its bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all: Vec<(PathBuf, Vec<u8>)> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect();
    all.sort();
    all
}

#[test]
fn the_same_sources_in_two_directories_build_byte_identical_variants() {
    let first = fixture("relu-v5");
    let second = fixture("relu-v5");
    let a = files(&build_cpu(first.path(), &[]));
    let b = files(&build_cpu(second.path(), &[]));
    let names: Vec<&Path> = a.iter().map(|(p, _)| p.as_path()).collect();
    assert!(
        names
            .iter()
            .any(|p| p.to_string_lossy().ends_with(".abi3.so"))
            && names.contains(&Path::new("metadata.json")),
        "{names:?}"
    );
    for ((path, bytes_a), (_, bytes_b)) in a.iter().zip(&b) {
        assert!(
            bytes_a == bytes_b,
            "{} differs between the two builds",
            path.display()
        );
    }
    assert_eq!(a.len(), b.len());
    let so = a
        .iter()
        .find(|(p, _)| p.to_string_lossy().ends_with(".so"))
        .unwrap();
    let root = first.path().to_string_lossy().into_owned();
    assert!(
        !so.1.windows(root.len()).any(|w| w == root.as_bytes()),
        "the extension embeds the project path {root}"
    );
}

#[test]
fn a_build_of_one_variant_leaves_the_others_in_build_alone() {
    let project = fixture("relu-v5");
    let build = project.path().join("build");
    let other = write_variant(
        &build,
        &VariantSpec {
            dir_name: "torch299-cxx11-cpu-x86_64-linux",
            id: "_relu_cpu_0ther00",
            ..VariantSpec::default()
        },
    );
    let before = files(&other);
    let names = run(kbuild(project.path()).args(["list-variants", "--json"]));
    let cpu = stdout_json(&names)["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .find(|n| n.contains("-cpu-"))
        .unwrap();
    let built = build_cpu(project.path(), &["--variant", &cpu]);
    assert_eq!(built, build.join(&cpu));
    assert_eq!(files(&other), before);
}

#[test]
fn an_unknown_variant_is_refused_listing_the_valid_ones() {
    let project = fixture("relu-v5");
    let mut cmd = kbuild(project.path());
    let out = run(cmd.args(["build", "--backend", "cpu", "--variant", "torch1-nope"]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`--variant torch1-nope` is not built here (variants: torch")
            && stderr.contains("-cpu-x86_64-linux)"),
        "{stderr}"
    );
    assert!(!project.path().join("build").exists());
}

#[test]
fn torch_without_a_toolchain_for_it_says_how_to_install_one() {
    let project = fixture("relu-v5");
    let cache = tempfile::tempdir().unwrap();
    let mut cmd = kbuild(project.path());
    cmd.env("KBUILD_CACHE_DIR", cache.path());
    let out = run(cmd.args(["build", "--backend", "cpu", "--torch", "2.9", "--dry-run"]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no toolchain for torch 2.9: none is installed")
            && stderr.contains("kbuild toolchain install --torch 2.9"),
        "{stderr}"
    );
}

#[test]
fn torch_picks_the_managed_toolchain_for_that_version() {
    let project = fixture("relu-v5");
    let cache = tempfile::tempdir().unwrap();
    // A managed toolchain whose Python is the test Python (torch 2.15): what `toolchain
    // install --torch 2.15` leaves, without the download.
    let dir = cache.path().join("toolchains/torch2.15-cpu");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let shim = dir.join("bin/python");
    std::fs::write(
        &shim,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", python().display()),
    )
    .unwrap();
    crate::common::fake_cc::make_executable(&shim);
    std::fs::write(
        dir.join("kbuild-toolchain.toml"),
        "name = \"torch2.15-cpu\"\ntorch = \"2.15\"\ncompute = \"cpu\"\n\
         requested = [\"torch==2.15.*\"]\npackages = [\"torch==2.15.0\"]\n",
    )
    .unwrap();
    let mut cmd = kbuild(project.path());
    cmd.env("KBUILD_CACHE_DIR", cache.path())
        .env("KBUILD_PYTHON", "/nonexistent/python");
    let out = run(cmd.args([
        "-v",
        "build",
        "--backend",
        "cpu",
        "--torch",
        "2.15",
        "--dry-run",
    ]));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&dir.join("bin/python").display().to_string()),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("variant torch215-cxx11-cpu-"));
}

#[test]
fn variants_published_from_different_machines_merge_on_the_hub() {
    let hub = Hub::start(&[]);
    let (_a, build_a) = project_with_variant();
    let (_b, build_b) = project_with_variant();
    std::fs::remove_dir_all(build_b.join(CPU_VARIANT)).unwrap();
    write_variant(
        &build_b,
        &VariantSpec {
            dir_name: "torch214-cxx11-cpu-x86_64-linux",
            id: "_relu_cpu_abc1234",
            ..VariantSpec::default()
        },
    );
    hub.publish(&build_a, &["--repo", "org/relu"]).success();
    let second = hub
        .publish(&build_b, &["--repo", "org/relu", "--json"])
        .success()
        .json();
    assert_eq!(second["deleted"], serde_json::json!([]), "{second}");
    let (_, tree) = hub.request(
        "GET",
        "/api/kernels/org/relu/tree/v1/build?recursive=true",
        b"",
    );
    assert!(
        tree.contains(&format!("build/{CPU_VARIANT}/metadata.json"))
            && tree.contains("build/torch214-cxx11-cpu-x86_64-linux/metadata.json"),
        "{tree}"
    );
}
