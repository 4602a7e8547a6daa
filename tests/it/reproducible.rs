//! Bit-reproducible outputs (issue #38): the same sources, toolchain and kbuild give the same
//! bytes in every file of `build/<variant>/`, every wheel and every artifact, whatever the
//! project's directory, the temporary directory, `HOME`, kbuild's cache (empty each time), `-j`
//! (at `-j 4` the plan splits the CUDA unit's `cicc` two ways, at `-j 1` it does not; its
//! device code is one that a split reorders, its PTX embedded) and
//! whether nvcc runs as kbuild's steps or as one process (each way in two directories); and no
//! file holds a path of the machine (the build directory, the Python environment). Real
//! nvcc (no GPU needed), real torch; one capability keeps it quick on 2 cores.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::kbuild::{copy_dir, kbuild, python_ok, repo, run};

/// The relu fixture (built for capability 8.0 only, `KBUILD_CUDA_CAPABILITIES`), its kernel asserting in device code (`__FILE__`
/// then reaches the device code through `__assert_fail`), copied to `dir`.
fn project_in(dir: &Path) -> PathBuf {
    copy_dir(&repo().join("tests/fixtures/relu-v5"), dir);
    let toml = dir.join("build.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    // The project's default capabilities, narrowed to 8.0 by `KBUILD_CUDA_CAPABILITIES`: its
    // PTX is embedded then (`8.0+PTX`), as the last of HF's default matrix is.
    let narrowed = text.replace("cuda-capabilities = [\"7.5\", \"8.0\", \"9.0\"]\n", "");
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
    std::fs::write(&cu, asserting + &SPLIT_REORDERS).unwrap();
    dir.to_path_buf()
}

/// Device code that `cicc -split-compile=N` writes back in another order than unsplit (the
/// comments on its demoted `__shared__` arrays and its declarations; nvcc 13.2: 64 instances
/// reorder, 8 do not): kbuild's steps put the PTX in one order (`compile/ptx.rs`), one nvcc per
/// unit runs unsplit.
static SPLIT_REORDERS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let mut code = String::from(
        "\n__device__ float kbuild_repro_bias[4];\n\
         template <int N> __device__ __noinline__ float kbuild_repro_step(float x) {\n\
         \x20 return x * N + kbuild_repro_bias[N % 4];\n}\n\
         template <int N> __global__ void kbuild_repro_kernel(float* o) {\n\
         \x20 __shared__ float scratch[32 * N];\n\
         \x20 scratch[threadIdx.x] = kbuild_repro_step<N>(o[threadIdx.x]);\n\
         \x20 __syncthreads();\n\
         \x20 o[threadIdx.x] = scratch[(threadIdx.x + 1) % 32];\n}\n",
    );
    for n in 1..=64 {
        code += &format!("template __global__ void kbuild_repro_kernel<{n}>(float*);\n");
    }
    code
});

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
            .env("KBUILD_CUDA_CAPABILITIES", "8.0")
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
    let a = build(first.path(), "4", true);
    let b = build(&second_root, "1", true);
    assert_kinds(&a);
    assert_eq!(
        differing(&a, &b),
        Vec::<String>::new(),
        "kbuild's steps, -j 4 (split) vs -j 1"
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
    let a = build(first.path(), "4", false);
    let b = build(&second.path().join("elsewhere"), "1", false);
    assert_kinds(&a);
    assert_eq!(differing(&a, &b), Vec::<String>::new(), "one nvcc per unit");
}

/// [`project_in`] `dir`, its CUDA kernel built for capability 8.0 by its build.toml (so that
/// `kbuild verify --rebuild` builds it so too).
fn one_capability_project_in(dir: &Path) -> PathBuf {
    let project = project_in(dir);
    let toml = project.join("build.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let kernel = "[kernel.relu]\n";
    assert!(text.contains(kernel), "{text}");
    let text = text.replacen(
        kernel,
        &format!("{kernel}cuda-capabilities = [\"8.0\"]\n"),
        1,
    );
    std::fs::write(&toml, text).unwrap();
    project
}

/// `kbuild build --backend cuda` of `project` (`-j 1`, its cache under `cache`), kbuild's
/// steps or one nvcc per unit; the CUDA extension's bytes and what kbuild printed.
fn cuda_so(project: &Path, cache: &Path, steps: bool) -> (Vec<u8>, String) {
    let out = run(kbuild(project)
        .args(["build", "--backend", "cuda", "-j", "1"])
        .env("KBUILD_CACHE_DIR", cache)
        .env("KBUILD_NVCC_STEPS", if steps { "1" } else { "0" })
        .env_remove("KBUILD_CUDA_CAPABILITIES")
        .env_remove("KBUILD_REMOTE_CACHE")
        .env_remove("KBUILD_DIST"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let so = walkdir::WalkDir::new(project.join("build"))
        .into_iter()
        .flatten()
        .find(|e| {
            let name = e.file_name().to_string_lossy();
            name.contains("_cuda_")
                && name.ends_with(".so")
                && !e.path().starts_with(project.join("build/.kbuild"))
        })
        .expect("the CUDA extension");
    (std::fs::read(so.path()).unwrap(), stderr)
}

#[test]
fn an_object_one_nvcc_built_is_not_reused_when_kbuilds_steps_build_the_unit() {
    let dir = tempfile::tempdir().unwrap();
    let project = one_capability_project_in(&dir.path().join("relu"));
    let cache = dir.path().join("cache");
    let (one_nvcc, _) = cuda_so(&project, &cache, false);
    let (steps, said) = cuda_so(&project, &cache, true);
    assert!(
        said.contains("(1 compiled, 1 fresh)"),
        "the CUDA unit compiles again:\n{said}"
    );
    let clean = tempfile::tempdir().unwrap();
    let elsewhere = one_capability_project_in(&clean.path().join("relu"));
    let (clean_steps, _) = cuda_so(&elsewhere, &clean.path().join("cache"), true);
    assert!(
        steps == clean_steps,
        "the steps' extension is the one an empty cache builds"
    );
    assert!(
        steps != one_nvcc,
        "this unit's device code is one the two ways order differently"
    );
    let (again, said) = cuda_so(&project, &cache, false);
    assert!(said.contains("(1 compiled, 1 fresh)"), "{said}");
    assert!(again == one_nvcc, "one nvcc again");

    // The variant records the way; a rebuild to verify it takes that way without being told.
    let variant = std::fs::read_dir(project.join("build"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().contains("-cu"))
        .unwrap();
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(variant.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(
        metadata["kbuild"]["nvcc"], "one nvcc per unit",
        "{metadata}"
    );
    let out = run(kbuild(&project)
        .arg("verify")
        .arg(&variant)
        .arg("--rebuild")
        .env("KBUILD_CACHE_DIR", &cache)
        .env_remove("KBUILD_NVCC_STEPS")
        .env_remove("KBUILD_REMOTE_CACHE")
        .env_remove("KBUILD_DIST"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("  rebuild: identical\n"),
        "{stdout}"
    );
}
