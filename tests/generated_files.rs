//! Snapshots of the files kbuild generates, and the behaviour of the generated Python.

mod support;

use std::collections::BTreeMap;

use kbuild::config::{Backend, Capability, DType};
use kbuild::package;
use kbuild::plan::{LinkJob, VariantPlan};

fn cap(major: u32, minor: u32) -> Capability {
    Capability {
        major,
        minor,
        suffix: None,
    }
}

fn cuda_variant() -> VariantPlan {
    let mut dtypes = BTreeMap::new();
    dtypes.insert(cap(7, 5), vec![DType::Float32, DType::Float16]);
    dtypes.insert(cap(8, 0), DType::ALL.to_vec());
    dtypes.insert(cap(9, 0), DType::ALL.to_vec());
    VariantPlan {
        name: "torch215-cxx11-cu132-x86_64-linux".into(),
        backend: Backend::Cuda,
        id: "_ltx_kernels_cuda_abc1234".into(),
        python_name: "ltx_kernels".into(),
        capabilities: vec![cap(7, 5), cap(8, 0), cap(9, 0)],
        dtypes,
        generated_include: "/tmp/include".into(),
        obj_dir: "/tmp/obj".into(),
        compile: vec![],
        link: Some(LinkJob {
            linker: "g++".into(),
            objects: vec![],
            output: "/tmp/_ltx_kernels_cuda_abc1234.abi3.so".into(),
            lib_dirs: vec![],
            libs: vec![],
            flags: vec![],
        }),
        python_files: vec![],
    }
}

fn cpu_variant() -> VariantPlan {
    VariantPlan {
        name: "torch215-cxx11-cpu-x86_64-linux".into(),
        backend: Backend::Cpu,
        id: "_ltx_kernels_cpu_abc1234".into(),
        capabilities: vec![],
        dtypes: BTreeMap::new(),
        ..cuda_variant()
    }
}

#[test]
fn registration_header_snapshot() {
    insta::assert_snapshot!(package::registration_h(&cuda_variant()).unwrap());
}

#[test]
fn dtype_header_for_a_t4_without_bf16_snapshot() {
    insta::assert_snapshot!(package::dtypes_h(&cuda_variant()).unwrap());
}

#[test]
fn dtype_header_for_cpu_enables_every_dtype_snapshot() {
    insta::assert_snapshot!(package::dtypes_h(&cpu_variant()).unwrap());
}

#[test]
fn ops_py_snapshot() {
    insta::assert_snapshot!(package::ops_py(&cuda_variant()).unwrap());
}

#[test]
fn capabilities_py_snapshot() {
    insta::assert_snapshot!(package::capabilities_py(&cuda_variant()).unwrap());
}

#[test]
fn generated_dtype_check_maps_device_capabilities_to_the_cubin_the_driver_runs() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("_capabilities.py");
    std::fs::write(&module, package::capabilities_py(&cuda_variant()).unwrap()).unwrap();
    let code = format!(
        r#"
import importlib.util, torch
spec = importlib.util.spec_from_file_location("caps", {module:?})
caps = importlib.util.module_from_spec(spec); spec.loader.exec_module(caps)
assert caps.build_capability_for((7, 5)) == "7.5"
assert caps.build_capability_for((8, 6)) == "8.0"     # same major, highest minor <= device
assert caps.build_capability_for((9, 0)) == "9.0"
assert caps.build_capability_for((12, 0)) == "9.0"    # PTX of the newest, JIT-compiled
assert caps.build_capability_for((7, 0)) is None
fake = {{"cap": (7, 5)}}
torch.cuda.get_device_capability = lambda device=None: fake["cap"]
assert caps.supported_dtypes("cuda") == (torch.float32, torch.float16)
caps.check_dtype("cuda", torch.float16, "rms_norm")
try:
    caps.check_dtype("cuda", torch.bfloat16, "rms_norm")
    raise SystemExit("bf16 on 7.5 must raise")
except RuntimeError as e:
    msg = str(e)
    assert "rms_norm" in msg and "7.5" in msg and "bfloat16" in msg and "float32, float16" in msg, msg
    print(msg)
fake["cap"] = (9, 0)
caps.check_dtype("cuda", torch.bfloat16, "rms_norm")
caps.check_dtype("cpu", torch.bfloat16, "rms_norm")  # CPU tensors are never refused
print("ok")
"#,
        module = module.display().to_string()
    );
    let out = support::python_ok(&code, &[]);
    assert!(out.trim().ends_with("ok"), "{out}");
}
