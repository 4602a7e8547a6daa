//! Valid build.toml files: an edition 5 project and an edition-less v4 project written like
//! huggingface/kernels-community ones parse into the expected model, through the library and
//! through `kbuild check-config`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kbuild::config::{
    self, Backend, Capability, DType, Edition, Framework, KernelDependency, KernelPin, StableAbi,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn cap(s: &str) -> Capability {
    s.parse().unwrap()
}

fn kbuild(project: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbuild"))
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
    assert_eq!(p.general.cuda.minver.as_deref(), Some("12.4"));
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
    let out = Command::new(env!("CARGO_BIN_EXE_kbuild"))
        .arg("check-config")
        .current_dir(fixture("v4"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok: build.toml (v4, no edition): kernel `activation` v1, 3 kernels, backends cuda, metal\n"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("warning: build.toml:50:11: kernel `activation_rocm` is for backend `rocm`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: add `rocm` to `backends`"),
        "{stderr}"
    );
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
    assert_eq!(n.pyext, ["py", "json"]);
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
minver = "0.17.0"

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
    assert_eq!(p.general.minver.as_deref(), Some("0.17.0"));
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
    assert_eq!(abi.for_backend(Backend::Cuda), Some("2.10"));
    assert_eq!(abi.for_backend(Backend::Cpu), None);
    assert_eq!(p.kernels[0].cuda_minver.as_deref(), Some("12.8"));
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
