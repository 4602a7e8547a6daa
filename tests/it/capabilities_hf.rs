//! HF kernel-builder semantics that kbuild follows for projects without a kbuild capability
//! matrix: capabilities intersected with what nvcc builds, version bounds, HF's default compiler
//! flags, `pyext`, `kernel-depends`, and `-fno-gnu-unique` (two kernels in one process).

use std::path::Path;

use crate::common::kbuild::{fixture, kbuild, python_ok, run, stdout_json};
use crate::common::redact::Redact;
use serde_json::{Value, json};

/// The cuda variant of `caps-hf` as `build --dry-run --json` plans it.
fn caps_hf_cuda_plan(root: &Path) -> Value {
    let out = run(kbuild(root).args(["build", "--dry-run", "--json", "--backend", "cuda"]));
    assert!(out.status.success());
    stdout_json(&out)
}

fn job<'a>(variant: &'a Value, label: &str) -> &'a Value {
    variant["compile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["label"] == label)
        .unwrap_or_else(|| panic!("no job `{label}` in {variant:#}"))
}

fn gencodes(job: &Value) -> Vec<String> {
    job["gencodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let cap = g["capability"].as_str().unwrap();
            if g["ptx"] == true {
                format!("{cap}+PTX")
            } else {
                cap.to_string()
            }
        })
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn listed_capabilities_nvcc_cannot_build_are_dropped_and_unlisted_kernels_get_hfs_default_set() {
    let project = fixture("caps-hf");
    let plan = caps_hf_cuda_plan(project.path());
    let variant = &plan["variants"][0];

    // 7.0 and 10.1 are gone (nvcc 13 builds neither); no PTX for an explicit list.
    assert_eq!(
        gencodes(job(variant, "scale_cuda/scale.cu [cuda]")),
        ["8.0", "9.0"]
    );
    // kernel-builder's CUDA >= 13 default set, PTX for the newest only.
    assert_eq!(
        gencodes(job(variant, "lambda_cuda/lambda.cu [cuda]")),
        [
            "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX"
        ]
    );
    // The kernel below its cuda-minver is skipped (its source is an `#error`).
    assert!(
        !variant["compile"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["label"].as_str().unwrap().contains("future")),
        "{variant:#}"
    );
    // metadata.json's archs as add_build_metadata.py writes them: a sorted set of strings.
    assert_eq!(
        variant["archs"],
        json!([
            "10.0", "11.0", "12.0", "12.1+PTX", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0"
        ])
    );
    assert_eq!(variant["ptx"], "12.1");
    let notes = strings(&plan["notes"]);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("kernel `scale`: 7.0, 10.1")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("`future` (99.0)")),
        "{notes:?}"
    );

    // Without --json the dropped capabilities are one note on stderr.
    let out = run(kbuild(project.path()).args(["build", "--dry-run", "--backend", "cuda"]));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("note: capabilities left out").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn cuda_units_get_the_flags_torchs_cmake_gives_hf_builds() {
    let project = fixture("caps-hf");
    let plan = caps_hf_cuda_plan(project.path());
    let cu = job(&plan["variants"][0], "lambda_cuda/lambda.cu [cuda]");
    let flags = strings(&cu["flags"]);
    for flag in [
        "--expt-extended-lambda",
        "--expt-relaxed-constexpr",
        "-Xcudafe",
    ] {
        assert!(
            flags.contains(&flag.to_string()),
            "{flag} missing: {flags:?}"
        );
    }
    // One `--diag_suppress=` per warning: nvcc splits -Xcudafe values at commas.
    let suppress = flags
        .iter()
        .find(|f| f.starts_with("--diag_suppress"))
        .unwrap();
    assert!(
        suppress
            .split(',')
            .all(|part| part.starts_with("--diag_suppress=")),
        "{suppress}"
    );
    // Host flags: torch's, then the reproducibility prefix maps (the Python environment,
    // Python's headers, the project: docs/reproducible.md).
    let host = strings(&cu["host_flags"]);
    assert_eq!(host[0], "-fPIC", "{host:?}");
    assert!(
        host[1..4]
            .iter()
            .all(|f| f.starts_with("-ffile-prefix-map=")),
        "{host:?}"
    );
    assert!(
        host[3].ends_with("=."),
        "the project's map comes last, so it wins: {host:?}"
    );
    assert_eq!(host[4..], ["-fno-gnu-unique"], "{host:?}");
    let defines: Vec<String> = cu["defines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d[0].as_str().unwrap().to_string())
        .collect();
    assert!(defines.contains(&"NDEBUG".to_string()), "{defines:?}");
    assert!(
        !defines.iter().any(|d| d.starts_with("__CUDA_NO_HALF")),
        "HF's CMake build defines none of the __CUDA_NO_HALF* macros: {defines:?}"
    );
    let binding = job(&plan["variants"][0], "torch-ext/torch_binding.cpp [cuda]");
    assert!(
        strings(&binding["flags"]).contains(&"-fno-gnu-unique".to_string()),
        "{binding:#}"
    );
}

#[test]
fn torch_variant_ships_py_and_the_listed_data_files_only() {
    let project = fixture("caps-hf");
    let root = project.path();
    let out = run(kbuild(root).args(["build", "--backend", "cpu", "--json"]));
    assert!(out.status.success());
    let variant = Path::new(stdout_json(&out)["variants"][0]["path"].as_str().unwrap()).to_owned();
    let mut shipped: Vec<String> = std::fs::read_dir(&variant)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".so"))
        .collect();
    shipped.sort();
    // kernel-builder's CMake installs `*.py` and the pyext entries other than py/pyi.
    assert_eq!(
        shipped,
        [
            "__init__.py",
            "_capabilities.py",
            "_ops.py",
            "metadata.json",
            "table.json"
        ]
    );
    let code = format!(
        r#"
import pathlib, torch, kernels
from kernels._rust import Metadata
root = pathlib.Path({root:?})
k = kernels.get_local_kernel(root, backend="cpu")
torch.testing.assert_close(k.scale(torch.ones(4), 3.0), torch.full((4,), 3.0))
assert k.table() == {{"factor": 3}}
meta = Metadata.read_from_file(pathlib.Path({variant:?}) / "metadata.json")
assert meta.kernel_depends == [], meta.kernel_depends
print("ok")
"#,
        root = root.display().to_string(),
        variant = variant.display().to_string(),
    );
    assert_eq!(python_ok(&code, &[]).trim(), "ok");
}

#[test]
fn noarch_variants_record_each_backends_kernel_depends_and_ship_only_pyext_files() {
    let project = fixture("depends-noarch");
    let root = project.path();
    let out = run(kbuild(root)
        .env("KBUILD_PYTHON", "/nonexistent/python")
        .arg("build"));
    assert!(out.status.success());
    let cuda: Value = serde_json::from_slice(
        &std::fs::read(root.join("build/torch-cuda/metadata.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        cuda["kernel-depends"],
        json!([
            {"repo-id": "kbuild-test/helper", "version": 2},
            {"repo-id": "kbuild-test/pinned", "revision": "v1.2.3"},
            {"repo-id": "kbuild-test/cuda-helper", "revision": "0123abc"},
        ])
    );
    // Noarch sources are filtered by pyext alone: `pyi` is not listed here, nor `txt`.
    assert!(root.join("build/torch-cpu/extra.json").is_file());
    assert!(!root.join("build/torch-cpu/__init__.pyi").exists());
    assert!(!root.join("build/torch-cpu/NOTES.txt").exists());
    let code = format!(
        r#"
import pathlib
from kernels._rust import Backend, Build, Metadata
root = pathlib.Path({root:?})
build = Build.open(root)
for backend, dir in [(Backend.CPU, "torch-cpu"), (Backend.CUDA, "torch-cuda")]:
    meta = Metadata.read_from_file(root / "build" / dir / "metadata.json")
    assert meta.kernel_depends == build.all_kernel_depends(backend), (dir, meta.kernel_depends)
print("ok")
"#,
        root = root.display().to_string(),
    );
    assert_eq!(python_ok(&code, &[]).trim(), "ok");
}

#[test]
fn torch_maxver_below_the_installed_torch_is_an_error_at_its_line_with_what_to_install() {
    let project = fixture("torch-maxver");
    let root = project.path();
    let out = run(kbuild(root).args(["build", "--dry-run", "--backend", "cpu"]));
    assert!(!out.status.success());
    let torch = python_ok("import torch; print(torch.__version__)", &[]);
    insta::assert_snapshot!(
        Redact::new()
            .python()
            .path(root, "[project]")
            .text_of(torch.trim(), "[torch-version]")
            .stderr(&out)
    );
    assert!(!root.join("build").exists(), "a refused build wrote build/");
}

#[test]
fn cuda_bounds_apply_to_the_cuda_backend_only() {
    let project = fixture("caps-hf");
    let root = project.path();
    let manifest = root.join("build.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace(
            "[general.hub]",
            "[general.cuda]\nmaxver = \"12.0\"\n\n[general.hub]",
        ),
    )
    .unwrap();
    let out = run(kbuild(root).args(["build", "--dry-run", "--backend", "cuda"]));
    assert!(!out.status.success());
    insta::assert_snapshot!(Redact::new().python().path(root, "[project]").stderr(&out));
    let out = run(kbuild(root).args(["build", "--dry-run", "--backend", "cpu"]));
    assert!(out.status.success());
}

/// Build the `gnu-unique` fixture as kernel `name` under `dir`.
fn tally_copy(dir: &Path, name: &str) {
    crate::common::kbuild::copy_dir(
        &crate::common::kbuild::repo().join("tests/fixtures/gnu-unique"),
        dir,
    );
    let manifest = dir.join("build.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("name = \"tally\"", &format!("name = \"{name}\"")),
    )
    .unwrap();
    std::fs::rename(
        dir.join("torch-ext/tally"),
        dir.join("torch-ext").join(name.replace('-', "_")),
    )
    .unwrap();
    let out = run(kbuild(dir).args(["build", "--backend", "cpu"]));
    assert!(out.status.success());
}

#[test]
fn two_kernels_with_gnu_unique_statics_each_count_from_one_in_one_process() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    tally_copy(one.path(), "tally-one");
    tally_copy(two.path(), "tally-two");
    let code = format!(
        r#"
import pathlib, kernels
a = kernels.get_local_kernel(pathlib.Path({one:?}), backend="cpu")
b = kernels.get_local_kernel(pathlib.Path({two:?}), backend="cpu")
assert [a.tally_local(), a.tally_local()] == [1, 2]
assert [a.tally_template(), a.tally_template()] == [1, 2]
# Shared GNU-unique symbols would make these 3.
assert b.tally_local() == 1, "tally-two's static local continued tally-one's count"
assert b.tally_template() == 1, "tally-two's template static continued tally-one's count"
print("ok")
"#,
        one = one.path().display().to_string(),
        two = two.path().display().to_string(),
    );
    assert_eq!(python_ok(&code, &[]).trim(), "ok");
}
