//! Hand-made build variants for the publish and verify tests.

use std::path::{Path, PathBuf};

use kernels_data::digest::{Digest, DigestAlgorithm};
use serde_json::{Value, json};

/// Name of the CPU variant for the installed torch (`torch215-cxx11-cpu-x86_64-linux`).
pub const CPU_VARIANT: &str = "torch215-cxx11-cpu-x86_64-linux";

/// The Python API of the test kernel: `relu(x)` over the `relu(out, input)` op.
const INIT_PY: &str = r#"import torch

from ._ops import ops


def relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    ops.relu(out, x)
    return out


__all__ = ["relu"]
"#;

/// A hand-made variant (what `kbuild build` writes): `__init__.py`, `_ops.py`, the extension
/// and metadata.json with its digest.
pub struct VariantSpec<'a> {
    pub dir_name: &'a str,
    pub kernel_name: &'a str,
    pub id: &'a str,
    pub version: usize,
    pub backend: &'a str,
    /// Extension bytes (`<id>.abi3.so`); `None` writes a stand-in binary.
    pub so: Option<Vec<u8>>,
    pub extra_metadata: Value,
}

impl Default for VariantSpec<'_> {
    fn default() -> Self {
        VariantSpec {
            dir_name: CPU_VARIANT,
            kernel_name: "relu",
            id: "_relu_cpu_abc1234",
            version: 1,
            backend: "cpu",
            so: None,
            extra_metadata: json!({}),
        }
    }
}

pub fn write_variant(build_dir: &Path, spec: &VariantSpec<'_>) -> PathBuf {
    let dir = build_dir.join(spec.dir_name);
    std::fs::create_dir_all(&dir).unwrap();
    let id = spec.id;
    std::fs::write(dir.join("__init__.py"), INIT_PY).unwrap();
    std::fs::write(
        dir.join("_ops.py"),
        format!(
            "import torch\nfrom . import {id}\nops = torch.ops.{id}\n\n\ndef add_op_namespace_prefix(op_name: str):\n    \
             return f\"{id}::{{op_name}}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("_capabilities.py"),
        "CAPABILITY_DTYPES: dict[str, tuple[str, ...]] = {}\nPTX_CAPABILITY = None\n",
    )
    .unwrap();
    let so = spec
        .so
        .clone()
        .unwrap_or_else(|| format!("\x7fELF stand-in for {id}\0\0").into_bytes());
    std::fs::write(dir.join(format!("{id}.abi3.so")), so).unwrap();
    let mut metadata = json!({
        "name": spec.kernel_name,
        "id": id,
        "version": spec.version,
        "license": "apache-2.0",
        "python-depends": [],
        "backend": {"type": spec.backend},
        // What `kbuild build` records: publish refuses variants another builder made.
        "provenance": {"kernel-builder": {"version": "kbuild 0.1.0"}},
    });
    if let (Some(m), Some(extra)) = (metadata.as_object_mut(), spec.extra_metadata.as_object()) {
        m.extend(extra.clone());
    }
    std::fs::write(dir.join("metadata.json"), metadata.to_string()).unwrap();
    redigest(&dir);
    dir
}

/// Recompute metadata.json's digest after changing a variant's files (what a rebuild does).
pub fn redigest(dir: &Path) {
    let path = dir.join("metadata.json");
    let mut metadata: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let digest = Digest::hash_variant(DigestAlgorithm::SHA256, dir).unwrap();
    metadata["digest"] = serde_json::to_value(&digest).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&metadata).unwrap()).unwrap();
}

/// A project directory holding `build/` with one CPU variant.
pub fn project_with_variant() -> (tempfile::TempDir, PathBuf) {
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    write_variant(&build, &VariantSpec::default());
    (project, build)
}

/// A second variant beside `project_with_variant`'s, in `build/torch-cpu` under another op
/// namespace: what another machine would have published to the same repo.
pub fn write_second_variant(build_dir: &Path) -> PathBuf {
    write_variant(
        build_dir,
        &VariantSpec {
            dir_name: "torch-cpu",
            id: "_relu_cpu_fff0000",
            ..VariantSpec::default()
        },
    )
}
