//! `depends = ["cutlass_X_Y"]`: kbuild provides the headers (PyPI's `nvidia-cutlass` fetched
//! into its cache, or `CUTLASS_HOME`), or stops at the `depends` entry saying what to install.
//! Releases PyPI lacks are cloned from git: `cutlass_git.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::kbuild::{cuda_bin, fixture, kbuild, python_ok, run, stdout_json};

/// A cache shared by the tests of this file and kept between runs, so CUTLASS 3.6 is fetched
/// from PyPI once (tests that must start empty use their own).
fn shared_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("kbuild-cache")
}

/// `kbuild` with only the dependency settings given here (none inherited from the shell).
fn kbuild_with(project: &Path, cache: &Path) -> Command {
    let mut cmd = kbuild(project);
    cmd.env("KBUILD_CACHE_DIR", cache)
        .env_remove("CUTLASS_HOME")
        .env_remove("KBUILD_CUTLASS_GIT")
        .env_remove("KBUILD_OFFLINE");
    cmd
}

/// `build.toml:LINE:COLUMN` of the `"cutlass_3_6"` entry of `[kernel.<kernel>]`.
fn depends_location(root: &Path, kernel: &str) -> String {
    let text = std::fs::read_to_string(root.join("build.toml")).unwrap();
    let table = text.find(&format!("[kernel.{kernel}]")).unwrap();
    let at = table + text[table..].find("\"cutlass_3_6\"").unwrap();
    let line = text[..at].lines().count();
    let column = at - text[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
    format!("build.toml:{line}:{column}")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn system_includes(job: &serde_json::Value) -> Vec<String> {
    job["system_include_dirs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_dry_run_plans_the_pypi_fetch_and_downloads_nothing() {
    let project = fixture("cutlass-version");
    let cache = tempfile::tempdir().unwrap();
    let out = run(kbuild_with(project.path(), cache.path()).args(["build", "--dry-run", "--json"]));
    assert!(out.status.success());
    let plan = stdout_json(&out);
    let entry = cache.path().join("cutlass/3.6.0");
    assert_eq!(plan["fetches"].as_array().unwrap().len(), 1, "{plan}");
    assert_eq!(plan["fetches"][0]["requirement"], "nvidia-cutlass==3.6.0.0");
    assert_eq!(plan["fetches"][0]["into"], entry.display().to_string());
    for variant in plan["variants"].as_array().unwrap() {
        for job in variant["compile"].as_array().unwrap() {
            let includes = system_includes(job);
            let has = includes.contains(&entry.join("include").display().to_string());
            // The bindings do not list `depends`; every kernel unit does.
            let binding = job["label"].as_str().unwrap().starts_with("torch-ext/");
            assert_eq!(has, !binding, "{job}");
        }
    }
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
}

#[test]
fn cutlass_from_pypi_compiles_into_a_cpu_kernel_that_loads_through_kernels() {
    let project = fixture("cutlass-version");
    let root = project.path();
    let out = run(kbuild_with(root, &shared_cache()).args(["build", "--backend", "cpu"]));
    assert!(out.status.success());
    let version_h = shared_cache().join("cutlass/3.6.0/include/cutlass/version.h");
    assert!(version_h.is_file(), "no {}", version_h.display());
    // 360: CUTLASS_VERSION of the 3.6.0 headers the kernel was compiled with.
    let code = format!(
        r#"
import pathlib, torch, kernels
k = kernels.get_local_kernel(pathlib.Path({root:?}), backend="cpu")
x = torch.randn(3, 5)
torch.testing.assert_close(k.add_cutlass_version(x), x + 360.0, rtol=0, atol=0)
print("ok")
"#,
        root = root.display().to_string()
    );
    assert_eq!(python_ok(&code, &[]).trim(), "ok");
}

#[test]
fn cutlass_from_pypi_compiles_with_nvcc_into_a_cuda_variant() {
    let project = fixture("cutlass-version");
    let root = project.path();
    let out = run(kbuild_with(root, &shared_cache()).args([
        "build",
        "--backend",
        "cuda",
        "--json",
        "--unique-id",
        "t",
    ]));
    assert!(out.status.success());
    let report = stdout_json(&out);
    let variant = PathBuf::from(report["variants"][0]["path"].as_str().unwrap());
    let listing = run(Command::new(cuda_bin().join("cuobjdump"))
        .arg("--list-elf")
        .arg(variant.join("_cutlass_version_cuda_t.abi3.so")));
    assert!(listing.status.success());
    assert!(String::from_utf8_lossy(&listing.stdout).contains("sm_90"));
    // Portable as built on this machine: the Hub's rules, manylinux_2_28 included, with no flag.
    let checked = run(kbuild_with(root, &shared_cache()).arg("check"));
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
}

#[test]
fn cutlass_home_is_used_offline_instead_of_the_cache() {
    let project = fixture("cutlass-version");
    let root = project.path();
    // A real CUTLASS 3.6 tree: the one the PyPI test fetched (fetch it here if it ran first).
    let tree = shared_cache().join("cutlass/3.6.0");
    if !tree.is_dir() {
        let out = run(kbuild_with(root, &shared_cache()).args(["build", "--backend", "cpu"]));
        assert!(out.status.success());
    }
    let empty = tempfile::tempdir().unwrap();
    let out = run(kbuild_with(root, empty.path())
        .env("CUTLASS_HOME", &tree)
        .env("KBUILD_OFFLINE", "1")
        .args(["build", "--dry-run", "--json", "--backend", "cpu"]));
    assert!(out.status.success());
    let plan = stdout_json(&out);
    assert_eq!(plan["fetches"], serde_json::json!([]));
    let kernel = &plan["variants"][0]["compile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["label"].as_str().unwrap().starts_with("version_cpu/"))
        .unwrap()
        .clone();
    let includes = system_includes(kernel);
    assert!(
        includes.contains(&tree.join("include").display().to_string()),
        "{includes:?}"
    );
    assert!(includes.contains(&tree.join("tools/util/include").display().to_string()));
}

#[test]
fn offline_without_cutlass_is_an_error_at_the_depends_entry_naming_what_to_install() {
    let project = fixture("cutlass-version");
    let root = project.path();
    let cache = tempfile::tempdir().unwrap();
    let out = run(kbuild_with(root, cache.path())
        .env("KBUILD_OFFLINE", "1")
        .args(["build", "--backend", "cpu"]));
    assert!(!out.status.success());
    let text = stderr(&out);
    let entry = cache.path().join("cutlass/3.6.0");
    assert!(
        text.contains(&format!(
            "{}: `cutlass_3_6`: no CUTLASS 3.6.0 headers: `CUTLASS_HOME` is not set, kbuild's \
             cache has no `{}`, and fetching is off (`KBUILD_OFFLINE` is set)",
            depends_location(root, "version_cpu"),
            entry.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("hint: unset `KBUILD_OFFLINE` to fetch `nvidia-cutlass==3.6.0.0`"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "git clone --depth 1 --branch v3.6.0 https://github.com/NVIDIA/cutlass {}",
            entry.display()
        )),
        "{text}"
    );
    assert!(!root.join("build").exists(), "a failed build wrote build/");
}

#[test]
fn cutlass_home_without_cutlass_is_an_error_at_the_depends_entry() {
    let project = fixture("cutlass-version");
    let root = project.path();
    let nowhere = root.join("no-such-cutlass");
    let out = run(kbuild_with(root, &shared_cache())
        .env("CUTLASS_HOME", &nowhere)
        .args(["build", "--dry-run", "--backend", "cpu"]));
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains(&format!(
            "{}: `cutlass_3_6` needs CUTLASS 3.6, but `CUTLASS_HOME` (`{}`) has no \
             `include/cutlass/version.h`",
            depends_location(root, "version_cpu"),
            nowhere.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("hint: point `CUTLASS_HOME` at a CUTLASS 3.6 tree"),
        "{text}"
    );
}

#[test]
fn a_release_pypi_lacks_is_planned_as_a_clone_of_its_tag_from_nvidia() {
    let project = fixture("cutlass-version");
    let root = project.path();
    let manifest = root.join("build.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("cutlass_3_6", "cutlass_4_0")).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = run(kbuild_with(root, cache.path()).args([
        "build",
        "--dry-run",
        "--json",
        "--backend",
        "cpu",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let plan = stdout_json(&out);
    assert_eq!(plan["fetches"][0]["source"], "git", "{plan}");
    assert_eq!(
        plan["fetches"][0]["url"],
        "https://github.com/NVIDIA/cutlass"
    );
    assert_eq!(plan["fetches"][0]["tag"], "v4.0.0");
    assert_eq!(
        plan["fetches"][0]["into"],
        cache.path().join("cutlass/4.0.0").display().to_string()
    );
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
}
