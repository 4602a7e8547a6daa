//! `command_for`: the exact command lines for nvcc and the host compiler.

use std::path::{Path, PathBuf};

use crate::common::fake_cc::gencode;
use kbuild::compile::{command_for, preprocess_command_for};
use kbuild::plan::{CompileJob, Lang};
use kbuild::schedule::RunChoice;

fn flagship_cuda_job() -> CompileJob {
    let site = Path::new("/venv/lib/python3.11/site-packages");
    CompileJob {
        label: "kernels/rms_norm.cu".to_string(),
        lang: Lang::Cuda,
        compiler: site.join("nvidia/cu13/bin/nvcc"),
        host_compiler: Some(PathBuf::from("/usr/bin/g++")),
        source: PathBuf::from("/proj/kernels/rms_norm.cu"),
        object: PathBuf::from("/proj/build/.kbuild/cu132/obj/rms_norm.o"),
        depfile: PathBuf::from("/proj/build/.kbuild/cu132/obj/rms_norm.d"),
        std: "c++20".to_string(),
        include_dirs: vec![
            PathBuf::from("/proj/build/.kbuild/cu132/include"),
            PathBuf::from("/proj/kernels"),
        ],
        system_include_dirs: vec![
            site.join("torch/include"),
            site.join("torch/include/torch/csrc/api/include"),
            PathBuf::from("/usr/include/python3.11"),
        ],
        defines: vec![
            ("_GLIBCXX_USE_CXX11_ABI".to_string(), Some("1".to_string())),
            (
                "TORCH_EXTENSION_NAME".to_string(),
                Some("_ltx_kernels_cuda_3f2a1b9".to_string()),
            ),
            ("Py_LIMITED_API".to_string(), Some("0x03090000".to_string())),
            ("CUDA_KERNEL".to_string(), None),
            ("NDEBUG".to_string(), None),
            ("ONNX_NAMESPACE".to_string(), Some("onnx_c2".to_string())),
        ],
        // As the planner fills them: torch's CMake CUDA flags, HF's host flags.
        flags: vec![
            "-Xcudafe".to_string(),
            "--diag_suppress=cc_clobber_ignored,--diag_suppress=bad_friend_decl".to_string(),
            "--expt-relaxed-constexpr".to_string(),
            "--expt-extended-lambda".to_string(),
        ],
        host_flags: vec!["-fPIC".to_string(), "-fno-gnu-unique".to_string()],
        gencodes: vec![
            gencode(7, 5, false),
            gencode(8, 0, false),
            gencode(9, 0, true),
        ],
        compiler_id: "nvcc 13.2.86".to_string(),
    }
}

fn binding_cxx_job() -> CompileJob {
    CompileJob {
        label: "torch-ext/torch_binding.cpp".to_string(),
        lang: Lang::Cxx,
        compiler: PathBuf::from("/usr/bin/g++"),
        host_compiler: None,
        source: PathBuf::from("/proj/torch-ext/torch_binding.cpp"),
        object: PathBuf::from("/proj/build/.kbuild/cpu/obj/torch_binding.o"),
        depfile: PathBuf::from("/proj/build/.kbuild/cpu/obj/torch_binding.d"),
        std: "c++20".to_string(),
        include_dirs: vec![PathBuf::from("/proj/build/.kbuild/cpu/include")],
        system_include_dirs: vec![PathBuf::from("/venv/torch/include")],
        defines: vec![
            (
                "TORCH_EXTENSION_NAME".to_string(),
                Some("_x_cpu_abc".to_string()),
            ),
            ("CPU_KERNEL".to_string(), None),
        ],
        flags: vec!["-Wall".to_string(), "-DMSG=\"two words\"".to_string()],
        host_flags: vec!["-fPIC".to_string()],
        gencodes: vec![],
        compiler_id: "g++ 12.2".to_string(),
    }
}

/// How the schedule runs these jobs: nvcc with two device-pass threads, no split.
fn two_threads() -> RunChoice {
    RunChoice {
        nvcc_threads: 2,
        ..RunChoice::plain(&binding_cxx_job())
    }
}

#[test]
fn nvcc_command_has_one_gencode_per_capability_and_ptx_for_the_newest() {
    insta::assert_snapshot!(command_for(&flagship_cuda_job(), &two_threads()).to_string());
}

#[test]
fn host_compiler_command_passes_pic_and_quotes_flags_with_spaces() {
    insta::assert_snapshot!(command_for(&binding_cxx_job(), &two_threads()).to_string());
}

/// What the memory gate preprocesses to size a C++ unit never measured: the compile's
/// standard, includes, defines and flags, with `-E` into the given file and no object or depfile.
#[test]
fn a_cxx_units_preprocessor_command_sees_what_its_compile_sees_and_writes_only_its_output() {
    let out = std::path::Path::new("/proj/build/.kbuild/v/obj/tmp.1.binding.cpp.ii");
    insta::assert_snapshot!(preprocess_command_for(&binding_cxx_job(), out).to_string());
}

#[test]
fn user_optimisation_level_replaces_the_default() {
    let mut job = flagship_cuda_job();
    job.host_flags.push("-O2".to_string());
    let args: Vec<String> = command_for(&job, &two_threads())
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(!args.contains(&"-O3".to_string()), "{args:?}");
    assert!(
        args.windows(2).any(|w| w == ["-Xcompiler", "-O2"]),
        "{args:?}"
    );

    let mut job = binding_cxx_job();
    job.flags.push("-Os".to_string());
    let args = command_for(&job, &two_threads()).args;
    assert!(!args.iter().any(|a| a == "-O3"), "{args:?}");
}

#[test]
fn architecture_specific_capability_keeps_its_suffix() {
    let mut job = flagship_cuda_job();
    let mut cap = gencode(9, 0, false);
    cap.capability.suffix = Some('a');
    job.gencodes = vec![cap];
    let line = command_for(&job, &two_threads()).to_string();
    assert!(
        line.contains(" -gencode arch=compute_90a,code=sm_90a --threads"),
        "{line}"
    );
}
