//! The defines and include paths of HF kernel-builder's CMake build: `csrc` on every unit's
//! include path, `ENABLE_FP8` for CUDA units, the op namespace and the backend for every unit
//! (docs/config-strictness.md lists where kbuild still differs).

use serde_json::Value;

use crate::common::kbuild::{fixture, kbuild, python_ok, run, stdout_json};

/// The dry-run plan of `root` (every backend) as JSON.
fn dry_run_plan(root: &std::path::Path) -> Value {
    let out = run(kbuild(root).args(["build", "--dry-run", "--json"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_json(&out)
}

/// The compile job of the variant of `backend` whose label starts with `source`.
fn job<'a>(plan: &'a Value, backend: &str, source: &str) -> &'a Value {
    let variant = plan["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["backend"] == backend)
        .unwrap_or_else(|| panic!("no {backend} variant in {plan}"));
    variant["compile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["label"].as_str().unwrap().starts_with(source))
        .unwrap_or_else(|| panic!("no job for {source} in {variant}"))
}

/// `NAME` or `NAME=VALUE` for each define of the job.
fn defines(job: &Value) -> Vec<String> {
    let pairs = job["defines"].as_array().unwrap().iter();
    pairs
        .map(|d| match d[1].as_str() {
            Some(value) => format!("{}={value}", d[0].as_str().unwrap()),
            None => d[0].as_str().unwrap().to_string(),
        })
        .collect()
}

#[test]
fn cuda_units_get_enable_fp8_and_every_unit_the_op_namespace_and_backend() {
    let project = fixture("csrc-layout");
    let plan = dry_run_plan(project.path());
    let cuda_id = plan["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["backend"] == "cuda")
        .map(|v| v["id"].as_str().unwrap().to_string())
        .unwrap();

    let cu = job(&plan, "cuda", "csrc/cumsum.cu");
    let cu_defines = defines(cu);
    for want in [
        "ENABLE_FP8",
        "USE_CUDA=1",
        "CUDA_KERNEL",
        "Py_LIMITED_API=3",
        "NDEBUG",
        &format!("TORCH_EXTENSION_NAME={cuda_id}"),
    ] {
        assert!(
            cu_defines.iter().any(|d| d == want),
            "{want}: {cu_defines:?}"
        );
    }
    let flags: Vec<&str> = cu["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(flags[0], "-forward-unknown-to-host-compiler", "{flags:?}");

    // The bindings of the CUDA variant: USE_CUDA and the backend, but fp8 is `.cu` only.
    let binding = defines(job(&plan, "cuda", "torch-ext/torch_binding.cpp"));
    assert!(binding.iter().any(|d| d == "USE_CUDA=1"), "{binding:?}");
    assert!(!binding.iter().any(|d| d == "ENABLE_FP8"), "{binding:?}");

    // A cpu kernel unit: the op namespace and CPU_KERNEL, nothing of CUDA's.
    let cpu = defines(job(&plan, "cpu", "cpu/cumsum_cpu.cpp"));
    assert!(cpu.iter().any(|d| d == "CPU_KERNEL"), "{cpu:?}");
    assert!(
        cpu.iter()
            .any(|d| d.starts_with("TORCH_EXTENSION_NAME=_cumsum_cpu_")),
        "{cpu:?}"
    );
    for absent in ["ENABLE_FP8", "USE_CUDA=1", "CUDA_KERNEL", "USE_C10D_NCCL"] {
        assert!(!cpu.iter().any(|d| d == absent), "{absent}: {cpu:?}");
    }
}

#[test]
fn host_and_cuda_units_share_the_standard_hf_picks_for_the_torch() {
    let project = fixture("csrc-layout");
    let plan = dry_run_plan(project.path());
    let host = job(&plan, "cpu", "cpu/cumsum_cpu.cpp")["std"]
        .as_str()
        .unwrap();
    let cuda = job(&plan, "cuda", "csrc/cumsum.cu")["std"]
        .as_str()
        .unwrap();
    // g++ in the GNU dialect as CMake asks it, nvcc the plain one; the same level.
    let level = host.strip_prefix("gnu++").expect(host);
    assert_eq!(cuda, format!("c++{level}"));
    assert!(["17", "20", "23"].contains(&level), "{host}");
}

#[test]
fn csrc_comes_first_on_every_units_include_path() {
    let project = fixture("csrc-layout");
    let root = project.path();
    let plan = dry_run_plan(root);
    let csrc = root.join("csrc");
    for (backend, source) in [
        ("cpu", "torch-ext/torch_binding.cpp"),
        ("cpu", "cpu/cumsum_cpu.cpp"),
        ("cuda", "torch-ext/torch_binding.cpp"),
        ("cuda", "csrc/cumsum.cu"),
    ] {
        let dirs = &job(&plan, backend, source)["include_dirs"];
        assert_eq!(
            dirs[0],
            csrc.to_str().unwrap(),
            "{source} [{backend}]: {dirs}"
        );
    }
    // Not the project root: HF's build does not search it either.
    let relu = fixture("relu-v5");
    let plan = dry_run_plan(relu.path());
    let dirs = &job(&plan, "cpu", "relu_cpu/relu_cpu.cpp")["include_dirs"];
    let root = relu.path().to_str().unwrap();
    assert!(
        !dirs.as_array().unwrap().iter().any(|d| d == root),
        "{dirs}"
    );
}

/// megablocks' bindings include `cumsum.h` from `csrc` by bare name, deep-gemm includes
/// `utils/….hpp` from outside `csrc`: both build as HF builds them, and the op computes.
#[test]
fn a_project_with_hf_csrc_layout_builds_and_loads_on_cpu() {
    let project = fixture("csrc-layout");
    let root = project.path();
    let out = run(kbuild(root).args(["build", "--backend", "cpu", "--json"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = format!(
        "import pathlib, torch, kernels\n\
         k = kernels.get_local_kernel(pathlib.Path({:?}), backend='cpu')\n\
         x = torch.randn(100)\n\
         torch.testing.assert_close(k.cumsum(x), torch.cumsum(x, 0))\n\
         print('ok')",
        root.display().to_string()
    );
    assert_eq!(python_ok(&script, &[]).trim(), "ok");
}
