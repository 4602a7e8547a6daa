//! End to end: `kbuild build` on fixture projects with the real PyPI toolchain, loaded by the
//! real `kernels` package.

use std::path::Path;

use crate::common::kbuild::{cuda_bin, fixture, kbuild, python_ok, run, stdout_json};
use crate::common::redact::Redact;

const CPU_VARIANT_CHECK: &str = r#"
import pathlib, sys, torch, kernels
from kernels._rust import Digest, Metadata
root = pathlib.Path(sys.argv[1])
k = kernels.get_local_kernel(root, backend="cpu")
x = torch.randn(1000)
torch.testing.assert_close(k.relu(x), torch.clamp(x, min=0), rtol=0, atol=0)
variant = next((root / "build").glob("torch*-cpu-*"))
meta = Metadata.read_from_file(variant / "metadata.json")
# The same check kernels.verify.verify_variant makes after the signature.
meta.digest.validate(Digest.hash_variant(meta.digest.algorithm, variant))
print("ok", meta.id, meta.backend.backend_type)
"#;

fn compiled_labels(out: &std::process::Output) -> Vec<String> {
    let json = stdout_json(out);
    json["compiled"]
        .as_array()
        .expect("compiled list")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Load the project's cpu variant through `kernels` as `k` and run `body` (Python) against it.
fn check_cpu_op(root: &Path, body: &str) {
    let code = format!(
        "import pathlib, torch, kernels\nk = kernels.get_local_kernel(pathlib.Path({:?}), backend=\"cpu\")\n{body}\nprint(\"ok\")\n",
        root.display().to_string()
    );
    assert_eq!(python_ok(&code, &[]).trim(), "ok");
}

fn check_cpu_variant(root: &Path) -> String {
    python_ok(
        &format!(
            "import sys; sys.argv = ['x', {:?}]\n{CPU_VARIANT_CHECK}",
            root.display().to_string()
        ),
        &[],
    )
}

#[test]
fn cpu_build_loads_through_kernels_and_rebuilds_only_what_changed() {
    let project = fixture("relu-v5");
    let root = project.path();

    // First build: everything compiles, the variant loads and its op computes relu.
    let out = run(kbuild(root).args(["build", "--backend", "cpu", "--json"]));
    assert!(out.status.success());
    assert_eq!(compiled_labels(&out).len(), 2, "binding + cpu kernel");
    // The summary's shape; the id holds the sources' hash, `jobs` follows the machine's cores.
    insta::assert_json_snapshot!(
        "cpu_build_json_summary",
        Redact::new()
            .path(root, "[project]")
            .stdout_json(&out, &["id", "jobs", "memory", "seconds"])
    );
    let loaded = check_cpu_variant(root);
    assert!(loaded.contains("ok _relu_cpu_"), "{loaded}");
    assert!(loaded.trim().ends_with("cpu"), "{loaded}");

    // No-op rebuild: no compiler runs and the variant is left as it was.
    let variant = std::fs::read_dir(root.join("build"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with("-cpu-x86_64-linux")
        })
        .expect("cpu variant dir");
    let meta_before = std::fs::read(variant.join("metadata.json")).unwrap();
    let out = run(kbuild(root).args([
        "build",
        "--backend",
        "cpu",
        "--json",
        "--unique-id",
        "fixed",
    ]));
    assert!(out.status.success());
    let out = run(kbuild(root).args([
        "build",
        "--backend",
        "cpu",
        "--json",
        "--unique-id",
        "fixed",
    ]));
    assert!(out.status.success());
    assert!(
        compiled_labels(&out).is_empty(),
        "no-op rebuild ran a compiler"
    );
    assert_eq!(stdout_json(&out)["variants"][0]["written"], false);

    // A header change recompiles exactly its dependents (the binding includes torch_binding.h,
    // the cpu kernel does not).
    let header = root.join("torch-ext/torch_binding.h");
    let text = std::fs::read_to_string(&header).unwrap();
    std::fs::write(&header, format!("{text}\n// changed\n")).unwrap();
    let out = run(kbuild(root).args([
        "build",
        "--backend",
        "cpu",
        "--json",
        "--unique-id",
        "fixed",
    ]));
    assert!(out.status.success());
    assert_eq!(compiled_labels(&out), ["torch-ext/torch_binding.cpp [cpu]"]);

    // A compile error fails the build, shows the diagnostics, and keeps the previous variant.
    let meta_good = std::fs::read(variant.join("metadata.json")).unwrap();
    let src = root.join("relu_cpu/relu_cpu.cpp");
    std::fs::write(&src, "this is not C++;\n").unwrap();
    let out = run(kbuild(root).args(["build", "--backend", "cpu", "--unique-id", "fixed"]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("relu_cpu/relu_cpu.cpp"), "{stderr}");
    assert!(stderr.contains("error"), "{stderr}");
    assert_eq!(
        std::fs::read(variant.join("metadata.json")).unwrap(),
        meta_good
    );
    let leftovers: Vec<String> = std::fs::read_dir(root.join("build"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".stage") || n.starts_with(".old"))
        .collect();
    assert!(leftovers.is_empty(), "staging left behind: {leftovers:?}");
    assert_ne!(meta_before, Vec::<u8>::new());
}

#[test]
fn edition_less_v4_project_builds_and_loads() {
    let project = fixture("relu-v4");
    let root = project.path();
    let out = run(kbuild(root).args(["build", "--backend", "cpu"]));
    assert!(out.status.success());
    check_cpu_op(
        root,
        "x = torch.randn(64)\ntorch.testing.assert_close(k.relu(x), x.clamp(min=0))",
    );
}

#[test]
fn cuda_build_embeds_sm75_sm80_sm90_and_recompiles_only_header_dependents() {
    let project = fixture("relu-v5");
    let root = project.path();
    let out = run(kbuild(root).args(["build", "--backend", "cuda", "--json", "--unique-id", "t"]));
    assert!(out.status.success());
    let json = stdout_json(&out);
    assert_eq!(
        json["variants"][0]["capabilities"],
        serde_json::json!(["7.5", "8.0", "9.0"])
    );
    let variant = Path::new(json["variants"][0]["path"].as_str().unwrap()).to_path_buf();
    let so = variant.join("_relu_cuda_t.abi3.so");
    let listing = run(std::process::Command::new(cuda_bin().join("cuobjdump"))
        .arg("--list-elf")
        .arg(&so));
    assert!(listing.status.success());
    let text = String::from_utf8_lossy(&listing.stdout);
    for sm in ["sm_75", "sm_80", "sm_90"] {
        assert!(text.contains(sm), "{sm} missing from:\n{text}");
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(variant.join("metadata.json")).unwrap()).unwrap();
    // An explicit list embeds no PTX, as kernel-builder builds it.
    assert_eq!(
        meta["backend"]["archs"],
        serde_json::json!(["7.5", "8.0", "9.0"])
    );

    // relu_common.cuh is included by relu.cu only.
    let header = root.join("relu_cuda/relu_common.cuh");
    let text = std::fs::read_to_string(&header).unwrap();
    std::fs::write(&header, format!("{text}\n// changed\n")).unwrap();
    let out = run(kbuild(root).args(["build", "--backend", "cuda", "--json", "--unique-id", "t"]));
    assert!(out.status.success());
    assert_eq!(compiled_labels(&out), ["relu_cuda/relu.cu [cuda]"]);
}

#[test]
fn dry_run_prints_the_compile_commands_and_writes_nothing() {
    let project = fixture("relu-v5");
    let root = project.path();
    let out = run(kbuild(root).args(["build", "--dry-run"]));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("-gencode"), "{text}");
    assert!(text.contains("arch=compute_90,code=sm_90"), "{text}");
    assert!(text.contains("-DTORCH_EXTENSION_NAME=_relu_cpu_"), "{text}");
    assert!(text.contains("-l:libcudart.so.13"), "{text}");
    assert!(!root.join("build").exists(), "dry run wrote build/");
}

#[test]
fn backends_kbuild_cannot_build_are_listed_once_as_skipped() {
    let project = fixture("relu-v5");
    let root = project.path();
    let manifest = root.join("build.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace(
            r#"backends = ["cpu", "cuda"]"#,
            r#"backends = ["cpu", "cuda", "xpu"]"#,
        ),
    )
    .unwrap();
    let out = run(kbuild(root).args(["list-variants"]));
    assert!(out.status.success());
    // On stdout with the variants, not repeated as a warning on stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("xpu"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("skipped:").count(), 1, "{stdout}");
    assert!(
        stdout.contains("skipped: xpu (kbuild does not build the `xpu` backend"),
        "{stdout}"
    );
    assert!(
        stdout.contains("torch215-cxx11-cu132-x86_64-linux  (capabilities 7.5, 8.0, 9.0)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("torch215-cxx11-cpu-x86_64-linux"),
        "{stdout}"
    );
}

#[test]
fn a_build_with_backend_does_not_warn_about_the_backends_left_out() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let manifest = root.join("build.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(text.contains(r#"backends = ["cpu", "cuda"]"#), "{text}");
    let out = run(kbuild(root).args(["build", "--backend", "cpu"]));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("skipping"), "{stderr}");
    // `-v` still says what was left out.
    let out = run(kbuild(root).args(["-v", "build", "--backend", "cpu"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skipping backend `cuda`: not selected with `--backend`"),
        "{stderr}"
    );
}

#[test]
fn kernel_with_no_capability_this_nvcc_builds_is_an_error_at_its_line_and_writes_nothing() {
    let project = fixture("relu-v5");
    let root = project.path();
    let manifest = root.join("build.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    // CUDA 13 dropped sm_70 and renamed sm_101 to sm_110: both are real capabilities that
    // nvcc 13.2 cannot target.
    std::fs::write(
        &manifest,
        text.replace(r#"["7.5", "8.0", "9.0"]"#, r#"["7.0", "10.1"]"#),
    )
    .unwrap();
    let line = text
        .lines()
        .position(|l| l.starts_with("cuda-capabilities"))
        .unwrap()
        + 1;
    let out = run(kbuild(root).args(["build", "--backend", "cuda"]));
    assert!(!out.status.success());
    let stderr = Redact::new().python().path(root, "[project]").stderr(&out);
    assert!(stderr.contains(&format!("build.toml:{line}:")), "{stderr}");
    insta::assert_snapshot!(stderr);
    assert!(!root.join("build").exists(), "a failed plan wrote build/");
}

#[test]
fn noarch_project_needs_no_toolchain_and_loads_for_cpu() {
    let project = fixture("silu-noarch");
    let root = project.path();
    // No Python with torch on purpose: a pure-Python variant does not depend on the toolchain.
    let out = run(kbuild(root)
        .env("KBUILD_PYTHON", "/nonexistent/python")
        .args(["build", "--json"]));
    assert!(out.status.success());
    let names: Vec<String> = stdout_json(&out)["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["torch-cpu", "torch-cuda"]);
    check_cpu_op(
        root,
        "x = torch.randn(32)\ntorch.testing.assert_close(k.silu(x), torch.nn.functional.silu(x))",
    );
}

#[test]
fn a_second_build_waits_for_the_lock_on_the_same_output_directory() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let lock_dir = root.join("build/.kbuild");
    std::fs::create_dir_all(&lock_dir).unwrap();
    let lock = std::fs::File::create(lock_dir.join("lock")).unwrap();
    lock.lock().unwrap(); // another build holds build/

    let mut child = kbuild(root)
        .arg("build")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "build did not wait for the lock"
    );
    assert!(
        !root.join("build/torch-cpu").exists(),
        "wrote while another build held the lock"
    );
    lock.unlock().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("waiting for another kbuild"), "{stderr}");
    assert!(root.join("build/torch-cpu/metadata.json").exists());
}

fn fake_nvcc(dir: &Path, release: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("nvcc");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'Cuda compilation tools, release {release}, V{release}.1' ;;\n  --list-gpu-arch) printf 'compute_75\\ncompute_80\\ncompute_90\\n' ;;\n  *) exit 1 ;;\nesac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn nvcc_of_another_cuda_major_than_torch_is_refused_and_a_minor_mismatch_warns() {
    let project = fixture("relu-v5");
    let root = project.path();
    let tools = tempfile::tempdir().unwrap();

    let old = fake_nvcc(tools.path(), "12.8");
    let out = run(kbuild(root).args(["list-variants", "--nvcc"]).arg(&old));
    assert!(!out.status.success());
    insta::assert_snapshot!(
        "nvcc_of_another_cuda_major",
        Redact::new()
            .python()
            .path(tools.path(), "[tools]")
            .stderr(&out)
    );

    let minor = fake_nvcc(tools.path(), "13.0");
    let out = run(kbuild(root).args(["list-variants", "--nvcc"]).arg(&minor));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning:") && stderr.contains("CUDA 13.0 but torch"),
        "{stderr}"
    );
}
