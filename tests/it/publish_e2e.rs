//! End to end: a real CPU kernel is published with `kbuild publish` to the local Hub server,
//! then a fresh Python process with an empty `HF_HOME` loads it with `kernels.get_kernel`.

use std::path::Path;
use std::process::Command;

use crate::common::hub::Hub;
use crate::common::kbuild::python;
use crate::common::variant::{VariantSpec, write_variant};

/// A minimal CPU relu extension: a TORCH_LIBRARY op plus a limited-API `PyInit_<id>`, like the
/// `.abi3.so` `kbuild build` produces.
const RELU_CPP: &str = r#"
#include <Python.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace {
void relu_cpu(at::Tensor& out, const at::Tensor& input) {
  TORCH_CHECK(input.scalar_type() == at::kFloat, "relu: expected float32");
  auto in = input.contiguous();
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
}
}  // namespace

#define KB_STR2(x) #x
#define KB_STR(x) KB_STR2(x)
#define KB_CAT2(a, b) a##b
#define KB_CAT(a, b) KB_CAT2(a, b)

TORCH_LIBRARY(TORCH_EXTENSION_NAME, m) {
  m.def("relu(Tensor! out, Tensor input) -> ()");
  m.impl("relu", c10::DispatchKey::CPU, &relu_cpu);
}

static struct PyModuleDef kb_module = {PyModuleDef_HEAD_INIT, KB_STR(TORCH_EXTENSION_NAME), nullptr, 0, nullptr};
extern "C" PyObject* KB_CAT(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&kb_module); }
"#;

/// Compile the relu extension as `<id>.abi3.so` with g++ against the test Python's torch.
pub(crate) fn compile_relu(id: &str, dir: &Path) -> Vec<u8> {
    let paths = Command::new(python())
        .args([
            "-c",
            "import sysconfig, torch.utils.cpp_extension as c\n\
             print('\\n'.join(c.include_paths() + [sysconfig.get_paths()['include']]))\n\
             print('LIB', c.library_paths()[0])",
        ])
        .output()
        .expect("ask python for torch's paths");
    assert!(
        paths.status.success(),
        "{}",
        String::from_utf8_lossy(&paths.stderr)
    );
    let text = String::from_utf8_lossy(&paths.stdout).into_owned();
    let (includes, lib): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| !l.starts_with("LIB "));
    let lib = lib[0].trim_start_matches("LIB ");
    let src = dir.join("relu.cpp");
    std::fs::write(&src, RELU_CPP).unwrap();
    let so = dir.join(format!("{id}.abi3.so"));
    let mut cmd = Command::new("g++");
    cmd.args([
        "-shared",
        "-fPIC",
        "-O1",
        "-std=c++20",
        "-D_GLIBCXX_USE_CXX11_ABI=1",
    ])
    .arg(format!("-DTORCH_EXTENSION_NAME={id}"))
    .args(["-DPy_LIMITED_API=0x03090000", "-DCPU_KERNEL"]);
    for inc in includes {
        cmd.arg(format!("-I{inc}"));
    }
    let out = cmd
        .arg(&src)
        .arg(format!("-L{lib}"))
        .args(["-lc10", "-ltorch_cpu", "-o"])
        .arg(&so)
        .output()
        .expect("run g++");
    assert!(
        out.status.success(),
        "g++ failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&so).unwrap()
}

const LOAD_AND_RUN: &str = r#"
import torch
import kernels
from huggingface_hub import HfApi

relu = kernels.get_kernel("org/relu", version=1, backend="cpu", trust_remote_code=True)
x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 3.0])
y = relu.relu(x)
assert torch.equal(y, torch.relu(x)), y
refs = HfApi().list_repo_refs("org/relu", repo_type="kernel")
assert "v1" in [b.name for b in refs.branches], refs
print("loaded", relu.__name__)
"#;

#[test]
fn published_cpu_kernel_loads_and_runs_with_kernels_get_kernel() {
    let hub = Hub::start(&[]);
    let project = tempfile::tempdir().unwrap();
    let id = "_relu_cpu_e2e0001";
    let so = compile_relu(id, project.path());
    let build = project.path().join("build");
    write_variant(
        &build,
        &VariantSpec {
            id,
            so: Some(so),
            ..VariantSpec::default()
        },
    );

    // g++ on this Debian machine pulls in a glibc 2.32 symbol; manylinux is `kbuild check`'s test.
    hub.publish(&build, &["--repo", "org/relu", "--manylinux", "none"])
        .success();
    let out = hub.python(LOAD_AND_RUN);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("loaded {id}")), "{stdout}");

    let misses: Vec<String> = hub
        .log()
        .into_iter()
        .filter(|l| l.ends_with("-> 404"))
        .collect();
    // The only expected 404 is kbuild's check whether the repository exists yet.
    assert_eq!(
        misses,
        ["GET /api/kernels/org/relu -> 404"],
        "routes the clients needed but got 404"
    );
}

/// The CI path: build the fixture with `kbuild build`, publish, load.
/// Needs `kbuild build` and `tests/fixtures/relu-v5`, which land with the lead's merge.
#[test]
fn fixture_built_by_kbuild_publishes_and_loads() {
    let hub = Hub::start(&[]);
    // A copy outside the git checkout: a dirty checkout would (rightly) need --allow-dirty.
    let out = tempfile::tempdir().unwrap();
    let fixture = out.path().join("relu");
    crate::common::kbuild::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/relu-v5"),
        &fixture,
    );
    let build = out.path().join("build");
    let status = crate::common::kbuild::bin()
        .arg("-C")
        .arg(&fixture)
        .args(["build", "--backend", "cpu", "--out-dir"])
        .arg(&build)
        .env("KBUILD_PYTHON", python())
        .status()
        .expect("run kbuild build");
    assert!(status.success(), "kbuild build of the fixture failed");

    // g++ on this Debian machine pulls in a glibc 2.32 symbol; manylinux is `kbuild check`'s test.
    hub.publish(&build, &["--repo", "org/relu", "--manylinux", "none"])
        .success();
    let out = hub.python(LOAD_AND_RUN);
    assert!(String::from_utf8_lossy(&out.stdout).contains("loaded"));
    let misses: Vec<String> = hub
        .log()
        .into_iter()
        .filter(|l| l.ends_with("-> 404"))
        .collect();
    assert_eq!(misses, ["GET /api/kernels/org/relu -> 404"]);
}
