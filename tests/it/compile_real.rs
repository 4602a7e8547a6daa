//! The real compilers: g++ (always present here) and the pip nvcc (skipped when absent).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::fake_cc::{gencode, job, write};
use kbuild::compile::{CompileSettings, CompileSummary, compile_all};
use kbuild::plan::{CompileJob, Lang};
use kbuild::process::{self, CommandSpec};
use kbuild::report::Recorder;
use kbuild::schedule::NvccMode;

fn build(root: &Path, jobs: &[CompileJob]) -> CompileSummary {
    let settings = CompileSettings::local(root.join("cache"), 2, NvccMode::Steps);
    compile_all(jobs, &settings, &Recorder::default()).unwrap()
}

/// `<compiler> --version`, standing in for the planner's compiler id.
fn version_of(compiler: &Path) -> String {
    let mut spec = CommandSpec::new(compiler);
    spec.arg("--version");
    let out = process::run(&spec).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn gxx_header_change_recompiles_only_the_dependent_unit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "include/shared.h",
        "#pragma once\ninline int shared() { return 1; }\n",
    );
    write(root, "include/a.h", "#pragma once\nconstexpr int A = 2;\n");
    write(
        root,
        "a.cpp",
        "#include \"shared.h\"\n#include \"a.h\"\nint a() { return shared() + A; }\n",
    );
    write(
        root,
        "b.cpp",
        "#include \"shared.h\"\n#ifdef NEVER_DEFINED\n#include \"b_only_sometimes.h\"\n#endif\nint b() { return shared(); }\n",
    );
    write(
        root,
        "include/b_only_sometimes.h",
        "#error not included here\n",
    );
    let gxx = PathBuf::from("g++");
    let id = version_of(&gxx);
    let jobs: Vec<CompileJob> = ["a.cpp", "b.cpp"]
        .iter()
        .map(|name| CompileJob {
            compiler_id: id.clone(),
            ..job(root, &gxx, name)
        })
        .collect();

    let first = build(root, &jobs);
    assert_eq!(first.compiled, ["a.cpp", "b.cpp"]);
    let nm = Command::new("nm")
        .arg(root.join("obj/a.o"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&nm.stdout).contains("_Z1av"));

    assert_eq!(build(root, &jobs).cached, ["a.cpp", "b.cpp"]);

    write(root, "include/a.h", "#pragma once\nconstexpr int A = 3;\n");
    let after_a = build(root, &jobs);
    assert_eq!(
        (after_a.compiled, after_a.cached),
        (vec!["a.cpp".to_string()], vec!["b.cpp".to_string()])
    );

    // Not in g++'s depfile (its #ifdef is false), but found by the include scan.
    write(
        root,
        "include/b_only_sometimes.h",
        "#error still not included\n",
    );
    assert_eq!(build(root, &jobs).compiled, ["b.cpp"]);

    write(
        root,
        "include/shared.h",
        "#pragma once\ninline int shared() { return 5; }\n",
    );
    assert_eq!(build(root, &jobs).compiled, ["a.cpp", "b.cpp"]);
}

/// The pip nvcc: `$KBUILD_TEST_NVCC`, else the project's `.venv` (made by scripts/setup).
pub(crate) fn find_nvcc() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KBUILD_TEST_NVCC") {
        return Some(PathBuf::from(p));
    }
    let repo_venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
    std::fs::read_dir(&repo_venv).ok().and_then(|entries| {
        entries
            .flatten()
            .map(|e| e.path().join("site-packages/nvidia/cu13/bin/nvcc"))
            .find(|p| p.is_file())
    })
}

#[test]
fn nvcc_builds_a_cubin_per_capability_and_ptx_for_the_newest() {
    let nvcc = find_nvcc()
        .expect("no nvcc: run scripts/setup (it installs cuda-toolkit[nvcc] into .venv) or set KBUILD_TEST_NVCC");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "k.cu",
        "#include \"scale.cuh\"\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n#include \"sm80.cuh\"\n#endif\n\
         __global__ void k(float* x) { x[threadIdx.x] *= SCALE; }\n",
    );
    write(root, "include/scale.cuh", "#define SCALE 2.0f\n");
    write(root, "include/sm80.cuh", "// sm80 only\n");
    let cuda_job = CompileJob {
        lang: Lang::Cuda,
        gencodes: vec![
            gencode(7, 5, false),
            gencode(8, 0, false),
            gencode(9, 0, true),
        ],
        compiler_id: version_of(&nvcc),
        defines: vec![("CUDA_KERNEL".to_string(), None)],
        ..job(root, &nvcc, "k.cu")
    };
    let jobs = [cuda_job];
    assert_eq!(build(root, &jobs).compiled, ["k.cu"]);

    let cuobjdump = nvcc.with_file_name("cuobjdump");
    let list = |what: &str| {
        let out = Command::new(&cuobjdump)
            .arg(what)
            .arg(root.join("obj/k.o"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let elf = list("--list-elf");
    for sm in ["sm_75", "sm_80", "sm_90"] {
        assert_eq!(elf.matches(&format!("{sm}.cubin")).count(), 1, "{elf}");
    }
    assert_eq!(elf.lines().count(), 3, "{elf}");
    let ptx = list("--list-ptx");
    assert!(
        ptx.contains("sm_90.ptx") && ptx.lines().count() == 1,
        "{ptx}"
    );

    assert_eq!(build(root, &jobs).cached, ["k.cu"]);
    write(root, "include/sm80.cuh", "// sm80 only, changed\n");
    assert_eq!(build(root, &jobs).compiled, ["k.cu"]);
}
