//! The fatbinary's compression (docs/binary-size.md): `--compress-mode=size` on every `.cu` unit
//! where the variant's CUDA is 13 or newer (the toolchain here: nvcc 13.2), unless the kernel's
//! own `cuda-flags` choose a mode.

use serde_json::Value;

use crate::common::kbuild::{fixture, kbuild, run, stdout_json};

/// The flags of the CUDA variant's `csrc/cumsum.cu` job in the dry-run plan of `root`.
fn cu_flags(root: &std::path::Path) -> Vec<String> {
    let out = run(kbuild(root).args(["build", "--backend", "cuda", "--dry-run", "--json"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = stdout_json(&out);
    let job = plan["variants"][0]["compile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["label"].as_str().unwrap().starts_with("csrc/cumsum.cu"))
        .unwrap_or_else(|| panic!("no cumsum.cu job in {plan}"))
        .clone();
    let flags = job["flags"].as_array().unwrap().iter();
    flags.map(|f| f.as_str().unwrap().to_string()).collect()
}

#[test]
fn cuda_13_units_compress_the_fatbin_for_size() {
    let project = fixture("csrc-layout");
    let flags = cu_flags(project.path());
    let modes: Vec<&String> = flags
        .iter()
        .filter(|f| f.contains("compress-mode"))
        .collect();
    assert_eq!(modes, ["--compress-mode=size"], "{flags:?}");
}

#[test]
fn a_kernels_own_compress_mode_replaces_the_default() {
    let project = fixture("csrc-layout");
    let toml = project.path().join("build.toml");
    let text = std::fs::read_to_string(&toml).unwrap().replace(
        "cuda-capabilities = [\"9.0\"]",
        "cuda-capabilities = [\"9.0\"]\ncuda-flags = [\"--compress-mode=none\"]",
    );
    std::fs::write(&toml, text).unwrap();
    let flags = cu_flags(project.path());
    let modes: Vec<&String> = flags
        .iter()
        .filter(|f| f.contains("compress-mode"))
        .collect();
    assert_eq!(modes, ["--compress-mode=none"], "{flags:?}");
}
