//! Snapshots of the files kbuild generates, and the behaviour of the generated Python.

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
        archs: vec!["7.5".into(), "8.0".into(), "9.0+PTX".into()],
        ptx: Some(cap(9, 0)),
        matrix_archs: None,
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
            manylinux: None,
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
        archs: vec![],
        ptx: None,
        ..cuda_variant()
    }
}

#[test]
fn registration_header_snapshot() {
    insta::assert_snapshot!(package::registration_h().unwrap());
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
    let out = crate::common::kbuild::python_ok(&code, &[]);
    assert!(out.trim().ends_with("ok"), "{out}");
}

/// `cuda_variant()` with real inputs (an `__init__.py` and a stand-in extension), so that it
/// can be installed.
fn installable_cuda_variant(inputs: &std::path::Path) -> VariantPlan {
    let mut variant = cuda_variant();
    let init = inputs.join("__init__.py");
    std::fs::write(
        &init,
        "from ._ops import ops\n\n__all__ = [\"relu\", \"gelu\"]\n",
    )
    .unwrap();
    variant.python_files = vec![(init, "__init__.py".into())];
    let so = inputs.join(format!("{}.abi3.so", variant.id));
    std::fs::write(&so, b"\x7fELF stand-in\0").unwrap();
    if let Some(link) = &mut variant.link {
        link.output = so;
    }
    variant
}

#[test]
fn an_installed_variant_reads_back_equal_with_its_capability_table() {
    let inputs = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let project = kbuild::config::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/relu-v5"),
    )
    .unwrap();
    let variant = installable_cuda_variant(inputs.path());
    let git = Some(package::GitStatus {
        commit: "0123abc".into(),
        dirty: false,
    });
    let metadata = package::metadata_for(&project, &variant, git, package::NVCC_STEPS);

    let installed = package::install_variant(&variant, out.path(), metadata.clone()).unwrap();
    assert_eq!(installed.outcome, package::Installed::Written);
    let read = package::BuiltVariant::read(&out.path().join(&variant.name)).unwrap();
    assert_eq!(read, installed.variant);

    let table: Vec<(&str, Vec<&str>)> = read
        .capabilities
        .iter()
        .map(|c| {
            let dtypes = c.dtypes.iter().map(String::as_str).collect();
            (c.capability.as_str(), dtypes)
        })
        .collect();
    assert_eq!(
        table,
        [
            ("7.5", vec!["float32", "float16"]),
            ("8.0", vec!["float32", "float16", "bfloat16"]),
            ("9.0", vec!["float32", "float16", "bfloat16"]),
        ]
    );
    assert_eq!(read.ptx.as_deref(), Some("9.0"));
    assert_eq!(read.archs, ["7.5", "8.0", "9.0+PTX"]);
    assert_eq!(
        read.files,
        [
            "__init__.py",
            "_capabilities.py",
            "_ltx_kernels_cuda_abc1234.abi3.so",
            "_ops.py",
            "metadata.json"
        ]
    );
    assert_eq!(read.ops, ["relu", "gelu"]);
    assert!(!read.dirty());

    // The same plan again leaves the variant in place.
    let again = package::install_variant(&variant, out.path(), metadata).unwrap();
    assert_eq!(again.outcome, package::Installed::Unchanged);
    assert_eq!(again.variant, read);
}
