//! `kbuild check`: passes a good variant, and names the rule, the file and the fix for a bad
//! digest, a missing file, a foreign DT_NEEDED, an RPATH into the build machine, wrong `archs`,
//! and (on this Debian toolchain) the manylinux symbol version a CPU build picks up.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common::kbuild::{bin, fixture, kbuild, run};
use crate::common::redact::Redact;
use crate::common::variant::{VariantSpec, redigest, write_variant};

/// A real shared object from a one-line C file, built with `cc` and `extra` link arguments.
fn shared_object(dir: &Path, name: &str, extra: &[&str]) -> Vec<u8> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, "int kbuild_check_probe(void) { return 1; }\n").unwrap();
    let out_path = dir.join(format!("{name}.so"));
    let out = run(Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out_path)
        .arg(&src)
        .args(extra));
    assert!(out.status.success(), "cc failed");
    std::fs::read(out_path).unwrap()
}

/// A variant whose extension is a real (libc-only) shared object.
fn good_variant(build: &Path, spec: VariantSpec<'_>) -> std::path::PathBuf {
    let tmp = tempfile::tempdir().unwrap();
    let so = shared_object(tmp.path(), "plain", &[]);
    write_variant(
        build,
        &VariantSpec {
            so: Some(so),
            ..spec
        },
    )
}

fn check(path: &Path, args: &[&str]) -> Output {
    run(bin().arg("check").arg(path).args(args))
}

fn findings(out: &Output) -> Vec<Value> {
    let json: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    json.as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn check_passes_a_good_variant_and_names_a_bad_digest() {
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    let dir = good_variant(&build, VariantSpec::default());
    let out = check(&build, &["--json"]);
    assert!(out.status.success());
    assert_eq!(findings(&out), Vec::<Value>::new());

    std::fs::write(dir.join("__init__.py"), "import os\n").unwrap();
    let out = check(&build, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let found = findings(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["rule"], "digest");
    assert_eq!(found[0]["file"], "metadata.json");
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("File hash mismatch for __init__.py")
    );
}

#[test]
fn a_passing_check_says_how_many_variants_and_rules_it_checked() {
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    good_variant(&build, VariantSpec::default());
    // A cuobjdump named: whether one is on PATH does not change the output.
    let out = run(bin()
        .args(["-v", "check", "--cuobjdump", "/bin/false"])
        .arg(&build));
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr)
        .unwrap()
        .replace(&project.path().display().to_string(), "[project]");
    insta::assert_snapshot!(stderr);
}

#[test]
fn check_reports_a_foreign_library_an_rpath_and_a_missing_file() {
    let project = tempfile::tempdir().unwrap();
    let libs = tempfile::tempdir().unwrap();
    shared_object(libs.path(), "libforeign", &[]);
    let so = shared_object(
        libs.path(),
        "ext",
        &[
            "-L",
            libs.path().to_str().unwrap(),
            "-Wl,--no-as-needed",
            "-lforeign",
            "-Wl,-rpath,/home/builder/lib",
        ],
    );
    let build = project.path().join("build");
    let dir = write_variant(
        &build,
        &VariantSpec {
            so: Some(so),
            ..VariantSpec::default()
        },
    );
    let out = check(&build, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));

    std::fs::remove_file(dir.join("_ops.py")).unwrap();
    redigest(&dir);
    let out = check(&build, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_json_snapshot!(
        "check_json_names_rule_file_message_and_fix",
        Redact::new().path(&build, "[build]").stdout_json(&out, &[])
    );
}

#[test]
fn check_compares_archs_with_the_cubins_cuobjdump_lists() {
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    good_variant(
        &build,
        VariantSpec {
            dir_name: "torch215-cxx11-cu130-x86_64-linux",
            backend: "cuda",
            extra_metadata: json!({"backend": {"type": "cuda", "archs": ["7.5", "9.0+PTX"]}}),
            ..VariantSpec::default()
        },
    );
    // A stand-in for cuobjdump: what `cuobjdump --list-elf` prints for sm_75 and sm_80 cubins.
    let tool = project.path().join("cuobjdump");
    std::fs::write(
        &tool,
        "#!/bin/sh\necho 'ELF file    1: ext.1.sm_75.cubin'\necho 'ELF file    2: ext.2.sm_80.cubin'\n",
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = check(&build, &["--json", "--cuobjdump", tool.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let found = findings(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["rule"], "archs");
    assert_eq!(
        found[0]["message"],
        "metadata.json says archs [7.5, 9.0], but the extension holds cubins for [7.5, 8.0]"
    );
}

/// The fixture linked as is on this Debian machine (`build --manylinux none`): only the glibc
/// 2.32 symbol breaks manylinux_2_28, and `check --manylinux none` (as for a local-only build)
/// passes; the artifact checks the same. The default build binds it and passes.
#[test]
fn a_build_as_linked_fails_manylinux_only_on_libc_single_threaded_and_the_default_build_passes() {
    let project = fixture("relu-v5");
    let out = run(kbuild(project.path()).args([
        "build",
        "--backend",
        "cpu",
        "--artifact",
        "--manylinux",
        "none",
    ]));
    assert!(out.status.success());
    let out = run(kbuild(project.path()).args(["check", "--json"]));
    assert_eq!(out.status.code(), Some(1));
    let found = findings(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["rule"], "manylinux");
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("`__libc_single_threaded@GLIBC_2.32`"),
        "{found:?}"
    );
    let out = run(kbuild(project.path()).args(["check", "--manylinux", "none"]));
    assert!(out.status.success());
    let artifact = std::fs::read_dir(project.path().join("dist"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let out = check(&artifact, &["--manylinux", "none"]);
    assert!(out.status.success());
    let out = run(kbuild(project.path()).args(["build", "--backend", "cpu"]));
    assert!(out.status.success());
    let out = run(kbuild(project.path()).args(["check"]));
    assert!(
        out.status.success(),
        "the default build is not manylinux_2_28"
    );
}

#[test]
fn publish_refuses_a_foreign_library_unless_skip_check() {
    let project = tempfile::tempdir().unwrap();
    let libs = tempfile::tempdir().unwrap();
    shared_object(libs.path(), "libforeign", &[]);
    let so = shared_object(
        libs.path(),
        "ext",
        &[
            "-L",
            libs.path().to_str().unwrap(),
            "-Wl,--no-as-needed",
            "-lforeign",
        ],
    );
    let build = project.path().join("build");
    write_variant(
        &build,
        &VariantSpec {
            so: Some(so),
            ..VariantSpec::default()
        },
    );
    let hub = crate::common::hub::Hub::start(&[]);
    let refused = hub.publish(&build, &["--repo", "org/relu"]);
    assert!(!refused.ok);
    assert!(
        refused.stderr.contains("[needed] links `libforeign.so`"),
        "{}",
        refused.stderr
    );
    assert_eq!(hub.commits_made(), 0);
    hub.publish(&build, &["--repo", "org/relu", "--skip-check"])
        .success();
    assert!(hub.commits_made() > 0);
}

#[test]
fn check_reads_a_wheel_and_names_its_foreign_library() {
    let project = tempfile::tempdir().unwrap();
    let libs = tempfile::tempdir().unwrap();
    shared_object(libs.path(), "libforeign", &[]);
    let so = shared_object(
        libs.path(),
        "ext",
        &[
            "-L",
            libs.path().to_str().unwrap(),
            "-Wl,--no-as-needed",
            "-lforeign",
        ],
    );
    let build = project.path().join("build");
    let dir = write_variant(
        &build,
        &VariantSpec {
            so: Some(so),
            ..VariantSpec::default()
        },
    );
    let variant = kbuild::package::BuiltVariant::read(&dir).unwrap();
    let wheel = kbuild::package::write_wheel(&variant, &project.path().join("dist")).unwrap();
    let out = check(&wheel.path, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let found = findings(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["rule"], "needed");
    assert_eq!(found[0]["file"], "_relu_cpu_abc1234.abi3.so");
}

/// An arch-specific variant (`9.0a`: wgmma, setmaxnreg…) holds an `sm_90a` cubin; the real nvcc
/// builds one into a shared object and the real cuobjdump lists it: `archs = ["9.0a"]` matches.
#[test]
fn check_passes_an_arch_specific_cubin_declared_with_its_suffix() {
    let project = tempfile::tempdir().unwrap();
    let bin_dir = crate::common::kbuild::cuda_bin();
    let src = project.path().join("k.cu");
    std::fs::write(
        &src,
        "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n",
    )
    .unwrap();
    let so = project.path().join("k.so");
    let out = run(Command::new(bin_dir.join("nvcc"))
        .args(["-shared", "-Xcompiler", "-fPIC", "-cudart", "none"])
        .args(["-gencode", "arch=compute_90a,code=sm_90a", "-o"])
        .arg(&so)
        .arg(&src));
    assert!(out.status.success(), "nvcc failed: {out:?}");
    let build = project.path().join("build");
    write_variant(
        &build,
        &VariantSpec {
            dir_name: "torch215-cxx11-cu130-x86_64-linux",
            backend: "cuda",
            so: Some(std::fs::read(&so).unwrap()),
            extra_metadata: json!({"backend": {"type": "cuda", "archs": ["9.0a"]}}),
            ..VariantSpec::default()
        },
    );
    let cuobjdump = bin_dir.join("cuobjdump");
    let out = check(
        &build,
        &["--json", "--cuobjdump", cuobjdump.to_str().unwrap()],
    );
    assert_eq!(findings(&out), Vec::<Value>::new());
    assert_eq!(out.status.code(), Some(0));
}
