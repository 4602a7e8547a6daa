//! Valid build.toml files: an edition 5 project and an edition-less v4 project written like
//! huggingface/kernels-community ones parse into the expected model, through the library and
//! through `kbuild check-config`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use kbuild::config::{
    self, Backend, Capability, DType, Edition, Framework, KernelDependency, KernelPin, StableAbi,
    Version,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn cap(s: &str) -> Capability {
    s.parse().unwrap()
}

fn version(s: &str) -> Version {
    s.parse().unwrap()
}

fn kbuild(project: &Path, args: &[&str]) -> Output {
    crate::common::kbuild::bin()
        .arg("-C")
        .arg(project)
        .args(args)
        .output()
        .unwrap()
}

/// The `--json` model with the machine-specific root replaced.
fn json_model(project: &Path) -> String {
    let out = kbuild(project, &["check-config", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = project.canonicalize().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .replace(&root.display().to_string(), "[root]")
}

#[test]
fn edition5_project_parses_into_the_expected_model() {
    let p = config::load(&fixture("edition5")).unwrap();
    assert_eq!(p.edition, Edition::V5);
    assert_eq!(p.root, fixture("edition5").canonicalize().unwrap());
    assert_eq!(p.manifest, p.root.join("build.toml"));
    assert_eq!(p.general.name, "fused-norms");
    assert_eq!(p.general.python_name(), "fused_norms");
    assert_eq!(p.general.version, 1);
    assert_eq!(p.general.backends, [Backend::Cuda, Backend::Cpu]);
    assert_eq!(
        p.general.hub.repo_id.as_deref(),
        Some("kbuild-test/fused-norms")
    );
    assert_eq!(p.general.python_depends, ["einops"]);
    assert_eq!(
        p.general.kernel_depends,
        [KernelDependency {
            repo_id: "kernels-community/activation".into(),
            pin: KernelPin::Version(1)
        }]
    );
    assert_eq!(p.general.cuda.minver, Some(version("12.4")));
    assert_eq!(p.general.cuda.python_depends, ["nvidia-cutlass-dsl"]);
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    assert_eq!(
        torch.src,
        [
            PathBuf::from("torch-ext/torch_binding.cpp"),
            PathBuf::from("torch-ext/torch_binding.h")
        ]
    );
    assert_eq!(torch.cxx_flags, ["-O3"]);

    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        ["layer-norm", "norms-cpu", "rms-norm"],
        "sorted by name"
    );
    let rms = &p.kernels[2];
    assert_eq!(rms.backend, Backend::Cuda);
    assert_eq!(
        rms.src,
        [
            PathBuf::from("rms_norm/rms_norm.cu"),
            PathBuf::from("rms_norm/common.cuh")
        ]
    );
    assert_eq!(rms.include, [PathBuf::from("rms_norm")]);
    assert_eq!(rms.cuda_capabilities, Some(vec![cap("8.0"), cap("9.0")]));
    assert_eq!(rms.cuda_flags, ["-lineinfo"]);
    assert_eq!(
        rms.location.to_string(),
        format!("{}:25:1", p.manifest.display())
    );
    let lines: Vec<usize> = rms.capability_locations.iter().map(|l| l.line).collect();
    assert_eq!(lines, [30, 30]);
    assert_eq!(
        p.kernels[0].cuda_capabilities, None,
        "no list: the matrix applies"
    );
    assert_eq!(p.kernels[1].backend, Backend::Cpu);
    assert_eq!(p.kernels[1].cxx_flags, ["-march=x86-64-v2"]);

    let matrix: Vec<(String, Vec<DType>)> = p
        .kbuild
        .capabilities
        .iter()
        .map(|(c, d)| (c.to_string(), d.clone()))
        .collect();
    use DType::*;
    assert_eq!(
        matrix,
        [
            ("7.5".to_string(), vec![Float32, Float16]),
            ("8.0".to_string(), vec![Float32, Float16, BFloat16]),
            ("9.0".to_string(), vec![Float32, Float16, BFloat16]),
        ],
        "dtypes in canonical order whatever order they are written in"
    );
    assert_eq!(p.kbuild.locations[&cap("9.0")].line, 48);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn edition5_json_model_matches_the_snapshot() {
    insta::assert_snapshot!(json_model(&fixture("edition5")));
}

#[test]
fn v4_project_in_kernels_community_style_parses() {
    let p = config::load(&fixture("v4")).unwrap();
    assert_eq!(p.edition, Edition::V4);
    assert_eq!(p.general.name, "activation");
    assert_eq!(p.general.backends, [Backend::Cuda, Backend::Metal]);
    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["activation", "activation_metal", "activation_rocm"]);
    let caps = p.kernels[0].cuda_capabilities.clone().unwrap();
    assert_eq!(caps.len(), 11);
    assert_eq!(caps[10], cap("12.0"));
    assert_eq!(p.kernels[1].backend, Backend::Metal);
    assert!(p.kbuild.capabilities.is_empty(), "no [kbuild] table");
    // HF's kernel-builder skips kernels of backends that `backends` does not list: a warning.
    assert_eq!(p.warnings.len(), 1);
    let w = &p.warnings[0];
    assert_eq!((w.location.line, w.location.column), (50, 11));
    assert!(
        w.message
            .contains("kernel `activation_rocm` is for backend `rocm`")
    );
}

#[test]
fn v4_json_model_matches_the_snapshot() {
    insta::assert_snapshot!(json_model(&fixture("v4")));
}

#[test]
fn check_config_prints_a_one_line_summary() {
    let out = kbuild(&fixture("edition5"), &["check-config"]);
    assert!(out.status.success());
    let expected = format!(
        "ok: {} (edition 5): kernel `fused-norms` v1, 3 kernels, backends cuda, cpu, \
         capabilities 7.5, 8.0, 9.0\n",
        fixture("edition5").join("build.toml").display()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn check_config_shows_the_manifest_relative_to_the_working_directory() {
    let out = crate::common::kbuild::bin()
        .arg("check-config")
        .current_dir(fixture("v4"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok: build.toml (v4, no edition): kernel `activation` v1, 3 kernels, backends cuda, metal\n"
    );
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stderr));
}

#[test]
fn quiet_check_config_prints_only_warnings() {
    let out = kbuild(&fixture("edition5"), &["-q", "check-config"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(out.stderr.is_empty());
}

/// A minimal project in a temp dir with `toml` as build.toml.
fn temp_project(toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("torch-ext/torch_binding.cpp", "\n"),
        ("torch-ext/tiny/__init__.py", ""),
        ("kernels/k.cu", "\n"),
    ] {
        let p = dir.path().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    fs::write(dir.path().join("build.toml"), toml).unwrap();
    dir
}

#[test]
fn torch_noarch_project_reads_hf_spelling_of_capabilities() {
    let dir = temp_project(
        r#"[general]
name = "tiny"
version = 2
license = "mit"
backends = ["cuda", "xpu"]

[torch-noarch]
pyext = ["py", "json"]
cuda_capabilities = ["9.0", "10.0a"]
rocm_archs = ["gfx942"]
"#,
    );
    let p = config::load(dir.path()).unwrap();
    let Framework::TorchNoarch(n) = &p.framework else {
        panic!("expected [torch-noarch]")
    };
    assert_eq!(n.cuda_capabilities, [cap("9.0"), cap("10.0a")]);
    assert_eq!(n.rocm_archs, ["gfx942"]);
    assert_eq!(n.python_extensions(), ["py", "json"]);
    assert!(p.kernels.is_empty());
}

#[test]
fn edition5_reads_per_backend_stable_abi_and_revision_pins() {
    let dir = temp_project(
        r#"[general]
name = "tiny"
version = 1
edition = 5
license = "mit"
backends = ["cuda", "tpu"]

[[general.kernel-depends]]
repo-id = "kernels-community/einops"
revision = "34fa"

[general.cuda]
kernel-depends = [{ repo-id = "kernels-community/activation", version = 2 }]

[general.tpu]
python-depends = []

[torch]
src = ["torch-ext/torch_binding.cpp"]

[torch.stable-abi]
cuda = "2.10"

[kernel.k]
backend = "cuda"
depends = []
src = ["kernels/k.cu"]
cuda-minver = "12.8"
"#,
    );
    let p = config::load(dir.path()).unwrap();
    assert_eq!(p.general.backends, [Backend::Cuda, Backend::Tpu]);
    assert_eq!(
        p.general.kernel_depends[0].pin,
        KernelPin::Revision("34fa".into())
    );
    assert_eq!(p.general.cuda.kernel_depends[0].pin, KernelPin::Version(2));
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    let abi = torch.stable_abi.as_ref().unwrap();
    assert!(matches!(abi, StableAbi::PerBackend(_)));
    assert_eq!(abi.for_backend(Backend::Cuda), Some(&version("2.10")));
    assert_eq!(abi.for_backend(Backend::Cpu), None);
    assert_eq!(p.kernels[0].cuda_minver, Some(version("12.8")));
}

#[test]
fn parse_str_checks_paths_against_the_given_root() {
    let dir = temp_project("");
    let text = r#"[general]
name = "tiny"
version = 1
license = "mit"
backends = ["cpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]
"#;
    let p = config::parse_str(text, Path::new("virtual/build.toml"), dir.path()).unwrap();
    assert_eq!(p.general.backends, [Backend::Cpu]);
    let err = config::parse_str(
        &text.replace("torch_binding.cpp", "missing.cpp"),
        Path::new("virtual/build.toml"),
        dir.path(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), Some(config::ErrorKind::Path));
    assert_eq!(
        err.to_string(),
        "virtual/build.toml:8:8: source `torch-ext/missing.cpp` does not exist"
    );
}

/// `temp_project` plus `extra` files (path, contents).
fn temp_project_with(toml: &str, extra: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = temp_project(toml);
    for (path, text) in extra {
        let p = dir.path().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    dir
}

/// `[general]` of a project named `tiny` with `backends` and an optional `edition = 5`.
fn general(backends: &str, v5: bool) -> String {
    let edition = if v5 { "edition = 5\n" } else { "" };
    format!(
        "[general]\nname = \"tiny\"\nversion = 1\n{edition}license = \"mit\"\nbackends = {backends}\n"
    )
}

const TORCH: &str = "\n[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]\n";

/// `kbuild check-config` stderr with the temp dir replaced, for warning snapshots.
fn check_config_stderr(dir: &Path) -> String {
    let out = crate::common::kbuild::bin()
        .arg("check-config")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn project_root_is_a_valid_include_directory() {
    let dir = temp_project(&format!(
        "{}{TORCH}include = [\".\"]\n\n[kernel.k]\nbackend = \"cuda\"\ndepends = []\n\
         src = [\"kernels/k.cu\"]\ninclude = [\"./\", \"kernels\"]\n",
        general("[\"cuda\"]", false)
    ));
    let p = config::load(dir.path()).unwrap();
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    assert_eq!(torch.include, [PathBuf::from(".")]);
    assert_eq!(
        p.kernels[0].include,
        [PathBuf::from("."), PathBuf::from("kernels")]
    );
}

#[test]
fn major_version_zero_is_accepted() {
    let dir = temp_project(
        &format!("{}{TORCH}", general("[\"cpu\"]", false)).replace("version = 1", "version = 0"),
    );
    assert_eq!(config::load(dir.path()).unwrap().general.version, 0);
}

#[test]
fn source_listed_twice_is_compiled_once_with_a_warning() {
    let dir = temp_project(&format!(
        "{}{TORCH}\n[kernel.k]\nbackend = \"cuda\"\ndepends = [\"torch\", \"torch\"]\n\
         src = [\"kernels/k.cu\", \"./kernels/k.cu\"]\n",
        general("[\"cuda\", \"cuda\"]", false)
    ));
    let p = config::load(dir.path()).unwrap();
    assert_eq!(p.kernels[0].src, [PathBuf::from("kernels/k.cu")]);
    assert_eq!(p.kernels[0].depends, [config::Dependency::Torch]);
    assert_eq!(p.general.backends, [Backend::Cuda]);
    let lines: Vec<(usize, usize)> = p
        .warnings
        .iter()
        .map(|w| (w.location.line, w.location.column))
        .collect();
    assert_eq!(lines, [(5, 21), (12, 21), (13, 24)], "{:?}", p.warnings);
    insta::assert_snapshot!(check_config_stderr(dir.path()));
}

#[test]
fn every_hf_backend_is_valid_config_in_both_editions() {
    let all = "[\"cann\", \"cpu\", \"cuda\", \"metal\", \"neuron\", \"rocm\", \"tpu\", \"xpu\"]";
    for v5 in [false, true] {
        let dir = temp_project(&format!("{}{TORCH}", general(all, v5)));
        let p = config::load(dir.path()).unwrap();
        assert_eq!(p.general.backends, Backend::ALL, "edition 5: {v5}");
    }
}

#[test]
fn kernels_of_other_backends_keep_their_own_keys() {
    let dir = temp_project(&format!(
        "{}{TORCH}\n[kernel.k_rocm]\nbackend = \"rocm\"\ndepends = [\"torch\"]\n\
         src = [\"kernels/k.cu\"]\nrocm-archs = [\"gfx942\", \"gfx90a\"]\n\
         hip-flags = [\"-O3\"]\n\n[kernel.k_xpu]\nbackend = \"xpu\"\ndepends = [\"sycl_tla\"]\n\
         src = [\"kernels/k.cu\"]\nsycl-flags = [\"-fsycl\"]\n\n[kernel.k_metal]\n\
         backend = \"metal\"\ndepends = [\"metal-cpp\"]\nsrc = [\"kernels/k.cu\"]\n",
        general("[\"rocm\", \"xpu\", \"metal\"]", true)
    ));
    let p = config::load(dir.path()).unwrap();
    let by_name = |n: &str| p.kernels.iter().find(|k| k.name == n).unwrap();
    assert_eq!(by_name("k_rocm").rocm_archs, ["gfx942", "gfx90a"]);
    assert_eq!(by_name("k_rocm").hip_flags, ["-O3"]);
    assert_eq!(by_name("k_xpu").sycl_flags, ["-fsycl"]);
    assert_eq!(by_name("k_xpu").depends, [config::Dependency::SyclTla]);
    assert_eq!(by_name("k_metal").depends, [config::Dependency::MetalCpp]);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn tvm_ffi_project_is_read_with_its_package_in_tvm_ffi_ext() {
    let dir = temp_project_with(
        &format!(
            "{}\n[tvm-ffi]\nsrc = [\"tvm-ffi-ext/binding.cpp\"]\ncxx-flags = [\"-DX\"]\n\
             pyext = [\"py\"]\n\n[kernel.k]\nbackend = \"cuda\"\ndepends = []\n\
             src = [\"kernels/k.cu\"]\n",
            general("[\"cuda\"]", true)
        ),
        &[
            ("tvm-ffi-ext/binding.cpp", "\n"),
            ("tvm-ffi-ext/tiny/__init__.py", ""),
        ],
    );
    let p = config::load(dir.path()).unwrap();
    let Framework::TvmFfi(ffi) = &p.framework else {
        panic!("expected [tvm-ffi]")
    };
    assert_eq!(ffi.src, [PathBuf::from("tvm-ffi-ext/binding.cpp")]);
    assert_eq!(ffi.cxx_flags, ["-DX"]);
    assert_eq!(ffi.pyext.as_deref(), Some(&["py".to_string()][..]));
    assert_eq!(p.framework.extension_dir(), "tvm-ffi-ext");
    assert_eq!(p.kernels.len(), 1);
}

#[test]
fn build_refuses_a_tvm_ffi_project_with_one_error() {
    let dir = temp_project_with(
        &format!(
            "{}\n[tvm-ffi]\nsrc = [\"tvm-ffi-ext/binding.cpp\"]\n",
            general("[\"cpu\"]", true)
        ),
        &[
            ("tvm-ffi-ext/binding.cpp", "\n"),
            ("tvm-ffi-ext/tiny/__init__.py", ""),
        ],
    );
    let out = crate::common::kbuild::bin()
        .args(["build", "--dry-run"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stderr));
    assert!(!dir.path().join("build").exists());
}

#[test]
fn stable_abi_is_one_version_in_v4_and_per_backend_in_edition5() {
    let dir = temp_project(&format!(
        "{}{TORCH}stable-abi = \"2.9\"\n",
        general("[\"cuda\"]", false)
    ));
    let p = config::load(dir.path()).unwrap();
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    assert_eq!(torch.stable_abi, Some(StableAbi::All(version("2.9"))));
    assert_eq!(
        torch.stable_abi.as_ref().unwrap().for_backend(Backend::Xpu),
        Some(&version("2.9"))
    );

    let dir = temp_project(&format!(
        "{}{TORCH}\n[torch.stable-abi]\ncuda = \"2.10\"\nmetal = \"2.11\"\n",
        general("[\"cuda\", \"cpu\"]", true)
    ));
    let p = config::load(dir.path()).unwrap();
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    let abi = torch.stable_abi.as_ref().unwrap();
    assert_eq!(abi.for_backend(Backend::Cuda), Some(&version("2.10")));
    assert_eq!(abi.for_backend(Backend::Metal), Some(&version("2.11")));
    assert_eq!(abi.for_backend(Backend::Cpu), None, "unlisted: full ABI");
}

#[test]
fn bounds_are_versions_that_compare_numerically() {
    let dir = temp_project(&format!(
        "{}\n[general.cuda]\nminver = \"12.8\"\nmaxver = \"13.0\"\n{TORCH}minver = \"2.9\"\n\
         maxver = \"2.12\"\n\n[kernel.k]\nbackend = \"cuda\"\ndepends = []\n\
         src = [\"kernels/k.cu\"]\ncuda-minver = \"12.9\"\n",
        general("[\"cuda\"]", false)
    ));
    let p = config::load(dir.path()).unwrap();
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    let (tmin, tmax) = (torch.minver.clone().unwrap(), torch.maxver.clone().unwrap());
    assert!(tmin < version("2.10") && version("2.10") < tmax);
    assert_eq!(tmax.to_string(), "2.12", "shown as written");
    let cuda = &p.general.cuda;
    assert_eq!(cuda.maxver, Some(version("13")));
    assert!(cuda.minver.as_ref().unwrap() < p.kernels[0].cuda_minver.as_ref().unwrap());
}

#[test]
fn kernel_depends_of_general_and_backend_tables_combine_per_backend() {
    let dir = temp_project(&format!(
        "{}python-depends = [\"einops\"]\n\
         kernel-depends = [{{ repo-id = \"org/base\", version = 0 }}]\n\n\
         [general.cuda]\nkernel-depends = [{{ repo-id = \"org/cuda-only\", revision = \"abc1\" }}]\n\
         python-depends = [\"nvidia-cutlass-dsl\"]\n\n\
         [general.neuron]\npython-depends = [\"nki\"]\n\
         kernel-depends = [{{ repo-id = \"org/neuron-only\", version = 2 }}]\n\n\
         [general.xpu]\npython-depends = [\"onednn\"]\n{TORCH}",
        general("[\"cuda\", \"cpu\", \"neuron\", \"xpu\"]", true)
    ));
    let p = config::load(dir.path()).unwrap();
    let ids = |b| -> Vec<String> {
        p.general
            .kernel_depends_for(b)
            .into_iter()
            .map(|d| d.repo_id)
            .collect()
    };
    assert_eq!(ids(Backend::Cuda), ["org/base", "org/cuda-only"]);
    assert_eq!(ids(Backend::Cpu), ["org/base"]);
    assert_eq!(ids(Backend::Neuron), ["org/base", "org/neuron-only"]);
    assert_eq!(p.general.kernel_depends[0].pin, KernelPin::Version(0));
    assert_eq!(
        p.general.python_depends_for(Backend::Cuda),
        ["einops", "nvidia-cutlass-dsl"]
    );
    assert_eq!(
        p.general.python_depends_for(Backend::Xpu),
        ["einops", "onednn"]
    );
    assert_eq!(p.general.neuron.python_depends, ["nki"]);
}

#[test]
fn pyext_defaults_to_py_and_pyi_and_keeps_what_is_written() {
    let dir = temp_project(&format!("{}{TORCH}", general("[\"cpu\"]", false)));
    let p = config::load(dir.path()).unwrap();
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    assert_eq!(torch.pyext, None);
    assert_eq!(torch.python_extensions(), ["py", "pyi"]);

    let dir = temp_project(&format!(
        "{}{TORCH}pyext = [\"py\", \"json\", \"cuh\"]\n",
        general("[\"cpu\"]", false)
    ));
    let p = config::load(dir.path()).unwrap();
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    assert_eq!(torch.python_extensions(), ["py", "json", "cuh"]);
}

#[test]
fn cutlass_depends_carry_their_release() {
    let dir = temp_project(&format!(
        "{}{TORCH}\n[kernel.k]\nbackend = \"cuda\"\ndepends = [\"torch\", \"cutlass_3_9\", \
         \"cutlass_4_4\"]\nsrc = [\"kernels/k.cu\"]\n",
        general("[\"cuda\"]", true)
    ));
    let p = config::load(dir.path()).unwrap();
    use config::Dependency::*;
    assert_eq!(
        p.kernels[0].depends,
        [
            Torch,
            Cutlass { major: 3, minor: 9 },
            Cutlass { major: 4, minor: 4 }
        ]
    );
}

#[test]
fn capability_no_gpu_has_is_dropped_with_a_warning_and_old_ones_are_kept() {
    let dir = temp_project(&format!(
        "{}{TORCH}\n[kernel.k]\nbackend = \"cuda\"\ndepends = []\nsrc = [\"kernels/k.cu\"]\n\
         cuda-capabilities = [\"5.0\", \"8.0\", \"11.8\", \"9.0a\", \"8.0\"]\n",
        general("[\"cuda\"]", false)
    ));
    let p = config::load(dir.path()).unwrap();
    assert_eq!(
        p.kernels[0].cuda_capabilities,
        Some(vec![cap("5.0"), cap("8.0"), cap("9.0a")])
    );
    let cols: Vec<usize> = p.kernels[0]
        .capability_locations
        .iter()
        .map(|l| l.column)
        .collect();
    assert_eq!(cols, [22, 29, 44]);
    insta::assert_snapshot!(check_config_stderr(dir.path()));
}

#[test]
fn torch_table_without_sources_and_with_cxx_flags_is_valid_v4() {
    let dir = temp_project(&format!(
        "{}\n[torch]\nsrc = []\ncxx-flags = [\"-O2\"]\n\n[kernel.k]\nbackend = \"cuda\"\n\
         depends = []\nsrc = [\"kernels/k.cu\"]\n",
        general("[\"cuda\"]", false)
    ));
    let p = config::load(dir.path()).unwrap();
    let Framework::Torch(torch) = &p.framework else {
        panic!("expected [torch]")
    };
    assert!(torch.src.is_empty());
    assert_eq!(torch.cxx_flags, ["-O2"]);
}
