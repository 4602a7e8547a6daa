//! `[torch] stable-abi`: built with HF's `TORCH_TARGET_VERSION`, named `torch-stable-abi…`, and
//! loaded by `kernels` with a torch newer than the target.

use std::path::Path;

use crate::common::kbuild::{fixture, kbuild, python_ok, run, stdout_json};
use crate::common::redact::Redact;

/// `TORCH_TARGET_VERSION` for torch 2.10: `(2 << 56) | (10 << 48)`.
const TARGET_2_10: &str = "0x20a000000000000";

fn variant_suffix() -> String {
    format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS)
}

/// Every define of the plan's compile jobs of `variant`, as `NAME` or `NAME=VALUE`.
fn defines(variant: &serde_json::Value) -> Vec<Vec<String>> {
    variant["compile"]
        .as_array()
        .expect("compile jobs")
        .iter()
        .map(|job| {
            job["defines"]
                .as_array()
                .expect("defines")
                .iter()
                .map(|d| match d[1].as_str() {
                    Some(v) => format!("{}={v}", d[0].as_str().unwrap()),
                    None => d[0].as_str().unwrap().to_string(),
                })
                .collect()
        })
        .collect()
}

fn set_stable_abi(root: &Path, table: &str) {
    let manifest = root.join("build.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let start = text.find("[torch.stable-abi]").unwrap();
    let end = start + text[start..].find("\n\n").unwrap();
    std::fs::write(
        &manifest,
        format!("{}{table}{}", &text[..start], &text[end..]),
    )
    .unwrap();
}

#[test]
fn stable_abi_variants_are_named_after_the_target_and_every_unit_targets_it() {
    let project = fixture("stable-abi-leaky");
    let out = run(kbuild(project.path()).args(["build", "--dry-run", "--json"]));
    assert!(out.status.success());
    let plan = stdout_json(&out);
    let variants = plan["variants"].as_array().unwrap();
    let names: Vec<&str> = variants
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    let suffix = variant_suffix();
    assert_eq!(
        names,
        [
            format!("torch-stable-abi210-cpu-{suffix}"),
            format!("torch-stable-abi210-cu132-{suffix}"),
        ]
    );
    for variant in variants {
        for unit in defines(variant) {
            let target = format!("TORCH_TARGET_VERSION={TARGET_2_10}");
            assert!(unit.contains(&target), "{unit:?}");
        }
    }
}

#[test]
fn a_backend_left_out_of_the_stable_abi_table_builds_with_the_full_abi() {
    let project = fixture("stable-abi-leaky");
    set_stable_abi(project.path(), "[torch.stable-abi]\ncuda = \"2.10\"");
    let out = run(kbuild(project.path()).args(["build", "--dry-run", "--json"]));
    assert!(out.status.success());
    let plan = stdout_json(&out);
    let cpu = &plan["variants"][0];
    assert_eq!(
        cpu["name"].as_str().unwrap(),
        format!("torch215-cxx11-cpu-{}", variant_suffix())
    );
    assert!(
        defines(cpu)
            .iter()
            .flatten()
            .all(|d| !d.starts_with("TORCH_TARGET_VERSION")),
        "{cpu}"
    );
    let cuda = &plan["variants"][1];
    assert!(
        cuda["name"]
            .as_str()
            .unwrap()
            .starts_with("torch-stable-abi210-cu")
    );
}

#[test]
fn stable_abi_cpu_variant_loads_through_kernels_with_a_newer_torch() {
    let project = fixture("stable-abi-leaky");
    let root = project.path();
    let out = run(kbuild(root).args(["build", "--backend", "cpu", "--json"]));
    assert!(out.status.success());
    // Portable as built on this machine: the Hub's rules, manylinux_2_28 included, with no flag.
    let checked = run(kbuild(root).arg("check"));
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let report = stdout_json(&out);
    let variant = Path::new(report["variants"][0]["path"].as_str().unwrap()).to_path_buf();
    assert_eq!(
        variant.file_name().unwrap().to_string_lossy(),
        format!("torch-stable-abi210-cpu-{}", variant_suffix())
    );
    // The binding's `#error` guard already proved the target at compile time; here the variant
    // must be what `kernels` picks for a torch newer than 2.10, and its op must compute.
    let code = format!(
        r#"
import pathlib, torch, kernels
from packaging.version import Version
assert Version(torch.__version__).release[:2] > (2, 10), torch.__version__
k = kernels.get_local_kernel(pathlib.Path({root:?}), backend="cpu")
x = torch.randn(4096)
expected = torch.nn.functional.leaky_relu(x, 0.125)
torch.testing.assert_close(k.leaky_relu(x, 0.125), expected, rtol=0, atol=0)
print(pathlib.Path(k.__file__).parent.name)
"#,
        root = root.display().to_string()
    );
    let loaded = python_ok(&code, &[]);
    assert_eq!(
        loaded.trim(),
        variant.file_name().unwrap().to_string_lossy()
    );
    let header = std::fs::read_to_string(
        root.join("build/.kbuild")
            .join(variant.file_name().unwrap())
            .join("include/registration.h"),
    )
    .unwrap();
    assert!(header.contains("#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE)"));
}

#[test]
fn a_stable_abi_target_newer_than_torch_is_refused_before_compiling() {
    let project = fixture("stable-abi-leaky");
    let root = project.path();
    set_stable_abi(root, "[torch.stable-abi]\ncpu = \"2.99\"\ncuda = \"2.10\"");
    let out = run(kbuild(root).args(["build", "--backend", "cpu"]));
    assert!(!out.status.success());
    insta::assert_snapshot!(Redact::new().path(root, "[project]").stderr(&out));
    assert!(!root.join("build").exists(), "a refused plan wrote build/");
}
