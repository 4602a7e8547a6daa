//! `--cuda-capabilities LIST|native` (`KBUILD_CUDA_CAPABILITIES`): a build for the GPUs at
//! hand, what its variant says it holds, the object cache across selections, and publish's
//! refusal of a partial variant.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::fake_cc::make_executable;
use crate::common::hub::Hub;
use crate::common::kbuild::{fixture, kbuild, run, stdout_json};

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// `build --dry-run --json --backend cuda` of `root` with `extra` arguments and environment.
fn cuda_plan(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> Value {
    let mut cmd = kbuild(root);
    cmd.args(["build", "--dry-run", "--json", "--backend", "cuda"])
        .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_json(&out)
}

fn labels(variant: &Value) -> Vec<String> {
    variant["compile"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["label"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn cuda_capabilities_narrow_the_variant_and_skip_kernels_that_do_not_run_there() {
    let project = fixture("caps-hf");
    let root = project.path();
    let full = cuda_plan(root, &[], &[]);
    assert!(
        full["variants"][0].get("matrix_archs").is_none(),
        "{full:#}"
    );

    // 12.0: `lambda` (the default set, 12.1+PTX on top) keeps its 12.0 SASS; `scale` (8.0,
    // 9.0) runs on no 12.x GPU and is skipped with a note.
    let plan = cuda_plan(root, &["--cuda-capabilities", "12.0"], &[]);
    let variant = &plan["variants"][0];
    assert_eq!(variant["archs"], json!(["12.0"]));
    assert_eq!(variant["capabilities"], json!(["12.0"]));
    // The same archs; `matrix_archs` (what notes and publish's refusal print) in numeric order.
    let mut matrix = strings(&variant["matrix_archs"]);
    assert_eq!(
        matrix.first().map(String::as_str),
        Some("7.5"),
        "{matrix:?}"
    );
    let mut archs = strings(&full["variants"][0]["archs"]);
    matrix.sort();
    archs.sort();
    assert_eq!(matrix, archs);
    assert_eq!(
        labels(variant),
        [
            "torch-ext/torch_binding.cpp [cuda]",
            "lambda_cuda/lambda.cu [cuda]"
        ]
    );
    // `lambda` is compiled with the whole matrix's `__CUDA_ARCH_LIST__`, so its 12.0 device
    // passes are the full build's (CCCL's namespaces are named after the list).
    let lambda = &variant["compile"][1];
    let list = "-D__CUDA_ARCH_LIST__=750\\,800\\,860\\,870\\,890\\,900\\,1000\\,1100\\,1200\\,1210";
    let flags = strings(&lambda["flags"]);
    assert!(
        flags.ends_with(&["-U__CUDA_ARCH_LIST__".to_string(), list.to_string()]),
        "{flags:?}"
    );
    let full_flags = full["variants"][0]["compile"][1]["flags"].to_string();
    assert!(!full_flags.contains("__CUDA_ARCH_LIST__"), "{full_flags}");
    let notes = strings(&plan["notes"]);
    assert!(
        notes.iter().any(|n| n.contains(
            "none of their capabilities runs on `--cuda-capabilities 12.0`: `scale` (8.0, 9.0)"
        )),
        "{notes:?}"
    );

    // The environment variable selects the same; an 8.6 GPU runs 8.0's SASS (HF's loose
    // intersection), and `lambda`'s own 8.6 build is the one it takes.
    let by_env = cuda_plan(root, &[], &[("KBUILD_CUDA_CAPABILITIES", "8.6")]);
    assert_eq!(by_env["variants"][0]["archs"], json!(["8.0", "8.6"]));
}

#[test]
fn a_selection_no_kernel_runs_on_is_an_error_naming_the_kernels() {
    let project = fixture("relu-v5");
    let out = run(kbuild(project.path()).args([
        "build",
        "--dry-run",
        "--backend",
        "cuda",
        "--cuda-capabilities",
        "12.0",
    ]));
    assert!(!out.status.success());
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stderr));
}

/// A directory holding only `nvidia-smi`, which prints `output` and exits with `status`.
fn fake_nvidia_smi(dir: &Path, output: &str, status: i32) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    let script = format!(
        "#!/bin/sh\n[ \"$1 $2\" = '--query-gpu=compute_cap --format=csv,noheader' ] || exit 9\nprintf '{output}'\nexit {status}\n"
    );
    std::fs::write(&smi, script).unwrap();
    make_executable(&smi);
    bin
}

fn path_with(first: &Path) -> String {
    format!(
        "{}:{}",
        first.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn native_asks_nvidia_smi_for_the_gpus_of_this_machine() {
    let project = fixture("relu-v5");
    let root = project.path();
    let tools = tempfile::tempdir().unwrap();
    let bin = fake_nvidia_smi(tools.path(), "9.0\\n8.0\\n9.0\\n", 0);
    let plan = cuda_plan(
        root,
        &["--cuda-capabilities", "native"],
        &[("PATH", &path_with(&bin))],
    );
    assert_eq!(plan["variants"][0]["archs"], json!(["8.0", "9.0"]));
    assert_eq!(
        plan["variants"][0]["matrix_archs"],
        json!(["7.5", "8.0", "9.0"])
    );

    // A driver that answers with no GPU is an error with a hint, and nothing is written.
    let none = fake_nvidia_smi(tools.path(), "No devices were found\\n", 6);
    let out = run(kbuild(root)
        .args([
            "build",
            "--backend",
            "cuda",
            "--cuda-capabilities",
            "native",
        ])
        .env("PATH", path_with(&none)));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`--cuda-capabilities native`: no GPU found on this machine"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: `native` asks the NVIDIA driver's `nvidia-smi`"),
        "{stderr}"
    );
    assert!(
        !root
            .join("build")
            .join("torch215-cxx11-cu132-x86_64-linux")
            .exists()
    );

    // A cpu build needs no GPU, so `native` asks nothing there.
    let out = run(kbuild(root)
        .args(["build", "--dry-run", "--backend", "cpu"])
        .args(["--cuda-capabilities", "native"])
        .env("PATH", path_with(&none)));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn build_cuda(root: &Path, extra: &[&str]) -> Value {
    let mut cmd = kbuild(root);
    cmd.args(["build", "--backend", "cuda", "--json", "--unique-id", "t"])
        .args(extra);
    let out = run(&mut cmd);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_json(&out)
}

fn metadata_archs(root: &Path) -> Value {
    let dir = root.join("build/torch215-cxx11-cu132-x86_64-linux");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("metadata.json")).unwrap()).unwrap();
    meta["backend"]["archs"].clone()
}

fn capabilities_py(root: &Path) -> String {
    let dir = root.join("build/torch215-cxx11-cu132-x86_64-linux");
    std::fs::read_to_string(dir.join("_capabilities.py")).unwrap()
}

#[test]
fn switching_between_one_capability_and_the_full_matrix_keeps_each_ones_objects() {
    let project = fixture("relu-v5");
    let root = project.path();

    let narrow = build_cuda(root, &["--cuda-capabilities", "8.0"]);
    assert_eq!(strings(&narrow["compiled"]).len(), 2, "{narrow:#}");
    assert_eq!(metadata_archs(root), json!(["8.0"]));
    let py = capabilities_py(root);
    assert!(py.contains("\"8.0\":") && !py.contains("\"9.0\":"), "{py}");

    // The full matrix compiles the CUDA unit for it; the binding object is shared.
    let full = build_cuda(root, &[]);
    assert_eq!(strings(&full["compiled"]), ["relu_cuda/relu.cu [cuda]"]);
    assert_eq!(metadata_archs(root), json!(["7.5", "8.0", "9.0"]));
    let py = capabilities_py(root);
    assert!(py.contains("\"7.5\":") && py.contains("\"9.0\":"), "{py}");

    // Back and forth: each selection's objects are still there, so no compiler runs.
    let again = build_cuda(root, &["--cuda-capabilities", "8.0"]);
    assert_eq!(strings(&again["compiled"]), Vec::<String>::new());
    assert_eq!(metadata_archs(root), json!(["8.0"]));
    let back = build_cuda(root, &[]);
    assert_eq!(strings(&back["compiled"]), Vec::<String>::new());
}

#[test]
fn publish_refuses_a_variant_built_for_part_of_the_matrix_unless_allow_partial() {
    let hub = Hub::start(&[]);
    let project = fixture("relu-v5");
    let root = project.path();
    let build = root.join("build");
    build_cuda(root, &["--cuda-capabilities", "9.0"]);
    let refused = hub.publish(&build, &["--repo", "kbuild-test/relu"]);
    assert!(!refused.ok);
    assert!(
        refused.stderr.contains(
            "refusing to publish variants built for part of the CUDA matrix: \
             `torch215-cxx11-cu132-x86_64-linux` holds 9.0 of 7.5, 8.0, 9.0"
        ),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("--allow-partial"),
        "{}",
        refused.stderr
    );
    assert!(
        hub.log().is_empty(),
        "nothing may be sent for a refused build"
    );
    hub.publish(&build, &["--repo", "kbuild-test/relu", "--allow-partial"])
        .success();

    // Rebuilt for the whole matrix, it publishes with no flag.
    build_cuda(root, &[]);
    hub.publish(&build, &["--repo", "kbuild-test/relu"])
        .success();
}

#[test]
fn the_partial_matrix_note_lists_capabilities_in_numeric_order() {
    let project = fixture("caps-hf");
    let out = run(kbuild(project.path()).args([
        "build",
        "--dry-run",
        "--backend",
        "cuda",
        "--cuda-capabilities",
        "8.0",
    ]));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let note = stderr
        .lines()
        .find(|l| l.contains("this variant holds"))
        .unwrap_or_else(|| panic!("no partial-matrix note:\n{stderr}"));
    insta::assert_snapshot!(note);
}

#[test]
fn the_partial_matrix_note_is_said_once_not_on_every_no_op_build() {
    let project = fixture("relu-v5");
    let root = project.path();
    let args = [
        "build",
        "--backend",
        "cuda",
        "--cuda-capabilities",
        "8.0",
        "--unique-id",
        "t",
    ];
    let note = "`--cuda-capabilities 8.0`: this variant holds 8.0 of the project's 7.5, 8.0, 9.0";
    let first = run(kbuild(root).args(args));
    assert!(first.status.success());
    assert!(String::from_utf8_lossy(&first.stderr).contains(note));
    let again = run(kbuild(root).args(args));
    assert!(again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!stderr.contains(note), "repeated on a no-op:\n{stderr}");
    let verbose = run(kbuild(root).arg("-v").args(args));
    assert!(String::from_utf8_lossy(&verbose.stderr).contains(note));
}

#[test]
fn other_spellings_of_a_capability_get_the_one_meant_and_a_bad_one_the_valid_list() {
    let project = fixture("relu-v5");
    let mut shown = String::new();
    for spelling in ["sm_80", "80", "8.0+PTX", "8.1"] {
        let out = run(kbuild(project.path()).args([
            "build",
            "--dry-run",
            "--cuda-capabilities",
            spelling,
        ]));
        assert_eq!(out.status.code(), Some(2), "{spelling}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        shown.push_str(stderr.lines().next().unwrap_or_default());
        shown.push('\n');
    }
    insta::assert_snapshot!(shown);
}
