//! Bit-reproducible outputs (issue #38): the same sources, toolchain and kbuild give the same
//! bytes in every file of `build/<variant>/`, every wheel and every artifact, whatever the
//! project's directory, the temporary directory, `HOME`, kbuild's cache (empty each time), `-j`
//! (at `-j 2` a lone CUDA unit splits its `cicc` over the free slot, at `-j 1` it does not) and
//! whether nvcc runs as kbuild's steps or as one process (each way in two directories); and no
//! file holds a path of the machine (the build directory, the Python environment). Real
//! nvcc (no GPU needed), real torch; one capability keeps it quick on 2 cores.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::kbuild::{copy_dir, kbuild, python_ok, repo, run};

/// The relu fixture for capability 8.0 only, its kernel asserting in device code (`__FILE__`
/// then reaches the device code through `__assert_fail`), copied to `dir`.
fn project_in(dir: &Path) -> PathBuf {
    copy_dir(&repo().join("tests/fixtures/relu-v5"), dir);
    let toml = dir.join("build.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let narrowed = text.replace(r#"["7.5", "8.0", "9.0"]"#, r#"["8.0"]"#);
    assert_ne!(narrowed, text, "the fixture's capabilities moved");
    std::fs::write(&toml, narrowed).unwrap();
    let cu = dir.join("relu_cuda/relu.cu");
    let text = std::fs::read_to_string(&cu).unwrap();
    let asserting = text
        .replacen(
            "#include <algorithm>",
            "#include <algorithm>\n#include <cassert>",
            1,
        )
        .replacen(
            "    out[i] = relu_scalar(in[i]);",
            "    assert(i < n);\n    out[i] = relu_scalar(in[i]);",
            1,
        );
    assert_eq!(asserting.matches("assert(").count(), 1, "{asserting}");
    std::fs::write(&cu, asserting).unwrap();
    dir.to_path_buf()
}

/// One build of the project under `root` (its own cache, `TMPDIR` and `HOME` there too):
/// `build`, then `wheel` and `pack`; every output file (relative path → bytes) but kbuild's
/// own work directory `build/.kbuild`.
fn build(root: &Path, jobs: &str, steps: bool) -> BTreeMap<String, Vec<u8>> {
    let project = project_in(&root.join("checkout").join("relu"));
    for dir in ["cache", "tmp", "home"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    // `wheel` builds every backend only when asked: without `--backend` it builds what runs here.
    for args in [
        vec!["build", "-j", jobs],
        vec!["wheel", "--backend", "cpu", "--backend", "cuda"],
        vec!["pack"],
    ] {
        let mut cmd = kbuild(&project);
        cmd.args(&args)
            .env("KBUILD_CACHE_DIR", root.join("cache"))
            .env("TMPDIR", root.join("tmp"))
            .env("HOME", root.join("home"))
            .env("KBUILD_NVCC_STEPS", if steps { "1" } else { "0" })
            .env_remove("KBUILD_REMOTE_CACHE")
            .env_remove("KBUILD_DIST");
        let out = run(&mut cmd);
        assert!(out.status.success(), "kbuild {args:?} failed");
    }
    let mut files = BTreeMap::new();
    for top in ["build", "dist"] {
        for entry in walkdir::WalkDir::new(project.join(top)) {
            let entry = entry.unwrap();
            let rel = entry.path().strip_prefix(&project).unwrap();
            if rel.starts_with("build/.kbuild") || !entry.file_type().is_file() {
                continue;
            }
            let bytes = std::fs::read(entry.path()).unwrap();
            files.insert(rel.to_string_lossy().into_owned(), bytes);
        }
    }
    files
}

/// The files that are not byte for byte the same (or are only on one side).
fn differing(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names
        .into_iter()
        .filter(|name| a.get(*name) != b.get(*name))
        .cloned()
        .collect()
}

fn assert_kinds(files: &BTreeMap<String, Vec<u8>>) {
    for wanted in [".abi3.so", "metadata.json", ".whl", ".tar.gz"] {
        let count = files.keys().filter(|f| f.ends_with(wanted)).count();
        assert_eq!(
            count,
            2,
            "one {wanted} per variant (cpu, cuda): {files:?}",
            files = files.keys()
        );
    }
}

#[test]
fn two_builds_in_other_directories_with_empty_caches_and_other_j_write_identical_files() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let second_root = second.path().join("somewhere/much/deeper");
    let a = build(first.path(), "2", true);
    let b = build(&second_root, "1", true);
    assert_kinds(&a);
    assert_eq!(
        differing(&a, &b),
        Vec::<String>::new(),
        "kbuild's steps, -j 2 vs -j 1"
    );
    // Nor does any machine path: not the build directory, not the Python environment's (torch's
    // headers put `__FILE__` into their inline functions' checks), so another machine's
    // environment at another path builds the same.
    let site = python_ok(
        "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))",
        &[],
    );
    for (name, bytes) in a.iter().filter(|(f, _)| f.ends_with(".so")) {
        let text = String::from_utf8_lossy(bytes);
        for path in [&*first.path().to_string_lossy(), site.trim()] {
            assert!(!text.contains(path), "`{path}` is in {name}");
        }
    }
    let so = a
        .keys()
        .find(|f| f.contains("_cuda_") && f.ends_with(".so"))
        .unwrap();
    let text = String::from_utf8_lossy(&a[so]);
    assert!(
        text.contains("relu_cuda/relu.cu"),
        "the device assert names its file: {so}"
    );
    assert!(
        text.contains("site-packages/torch/include/"),
        "torch's headers, named: {so}"
    );
}

#[test]
fn builds_with_one_nvcc_per_unit_write_identical_files_in_other_directories() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let a = build(first.path(), "2", false);
    let b = build(&second.path().join("elsewhere"), "1", false);
    assert_kinds(&a);
    assert_eq!(differing(&a, &b), Vec::<String>::new(), "one nvcc per unit");
}
