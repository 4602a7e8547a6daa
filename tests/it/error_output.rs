//! What a user reads when kbuild fails: the message, each cause once, then the hint.

use std::path::Path;

use crate::common::kbuild::{fixture, kbuild, python_ok, run};
use crate::common::redact::Redact;

/// stderr of `kbuild ARGS…`, which must fail.
fn failing(args: &[&str]) -> String {
    let out = run(crate::common::kbuild::bin()
        .args(args)
        .env_remove("VIRTUAL_ENV"));
    assert!(!out.status.success());
    String::from_utf8(out.stderr).expect("stderr is UTF-8")
}

#[test]
fn build_in_a_missing_directory_names_it_once() {
    insta::assert_snapshot!(failing(&["build", "-C", "/proc/nope"]));
}

#[test]
fn unwritable_output_directory_prints_its_cause_once() {
    // A pure-Python project: the failure is the output directory, not a missing toolchain.
    let project = fixture("silu-noarch");
    let root = project.path().to_str().unwrap();
    let stderr = failing(&["build", "-C", root, "--out-dir", "/proc/nope"]);
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
    insta::assert_snapshot!(stderr);
}

/// What `kbuild -C <project> ARGS…` (the test Python) shows, which must fail: exit status,
/// stdout and stderr, with the project, the test Python's paths and `extra` redacted.
fn failing_in(project: &Path, args: &[&str], extra: Redact) -> String {
    // The C locale: the compiler's quotes are ASCII whatever the machine's locale.
    let out = run(kbuild(project).args(args).env("LC_ALL", "C"));
    assert!(!out.status.success(), "`kbuild {args:?}` succeeded");
    extra.python().path(project, "[project]").output(&out)
}

#[test]
fn a_python_that_does_not_exist_is_named_with_where_it_came_from() {
    let project = fixture("relu-v5");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &["build", "--python", "/nonexistent/python"],
        Redact::new()
    ));
}

#[test]
fn a_python_whose_torch_probe_prints_nothing_is_refused() {
    let project = fixture("relu-v5");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &["list-variants", "--python", "/bin/true"],
        Redact::new()
    ));
}

#[test]
fn a_torch_version_without_a_toolchain_says_how_to_install_it() {
    let project = fixture("relu-v5");
    let cache = tempfile::tempdir().unwrap();
    let torch = python_ok("import torch; print(torch.__version__)", &[]);
    let out = run(kbuild(project.path())
        .args(["build", "--torch", "2.99"])
        .env("KBUILD_CACHE_DIR", cache.path()));
    assert!(!out.status.success());
    insta::assert_snapshot!(
        Redact::new()
            .python()
            .text_of(torch.trim(), "[torch-version]")
            .output(&out)
    );
}

#[test]
fn an_unknown_variant_lists_the_variants_built_here() {
    let project = fixture("relu-v5");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &["build", "--variant", "torch215-cxx11-cu999-x86_64-linux"],
        Redact::new()
    ));
}

#[test]
fn an_unknown_backend_quotes_the_backends_of_build_toml() {
    let project = fixture("relu-v5");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &["build", "--backend", "rocm"],
        Redact::new()
    ));
}

#[test]
fn an_out_dir_inside_a_source_directory_is_refused_before_building() {
    let project = fixture("relu-v5");
    let inside = project.path().join("relu_cpu/out");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &[
            "build",
            "--backend",
            "cpu",
            "--out-dir",
            inside.to_str().unwrap()
        ],
        Redact::new()
    ));
    assert!(!inside.exists());
}

#[test]
fn a_compile_error_shows_the_compiler_command_status_and_diagnostics() {
    let project = fixture("relu-v5");
    let root = project.path();
    std::fs::write(root.join("relu_cpu/relu_cpu.cpp"), "int relu_cpu( {\n").unwrap();
    // One job and `-q`: no progress lines or timings, and the failing unit is the same each run.
    let args = [
        "build",
        "-q",
        "--backend",
        "cpu",
        "-j",
        "1",
        "--unique-id",
        "snap",
    ];
    let plan = crate::common::kbuild::stdout_json(&run(kbuild(root)
        .args(args)
        .args(["--dry-run", "--json"])));
    let compiler = plan["variants"][0]["compile"][0]["compiler"]
        .as_str()
        .unwrap()
        .to_string();
    insta::assert_snapshot!(failing_in(
        root,
        &args,
        Redact::new().text_of(&compiler, "[c++]")
    ));
}

#[test]
fn pack_and_check_without_a_build_say_to_build_first() {
    let project = fixture("relu-v5");
    let root = project.path();
    insta::assert_snapshot!(
        "pack_without_build_dir",
        failing_in(root, &["pack"], Redact::new())
    );
    insta::assert_snapshot!(
        "check_without_build_dir",
        failing_in(root, &["check"], Redact::new())
    );
    std::fs::create_dir(root.join("build")).unwrap();
    insta::assert_snapshot!(
        "pack_with_an_empty_build_dir",
        failing_in(root, &["pack"], Redact::new())
    );
    insta::assert_snapshot!(
        "check_with_an_empty_build_dir",
        failing_in(root, &["check"], Redact::new())
    );
}

#[test]
fn removing_a_toolchain_that_is_not_installed_lists_the_installed_ones() {
    let project = fixture("relu-v5");
    let cache = tempfile::tempdir().unwrap();
    let out = run(kbuild(project.path())
        .args(["toolchain", "remove", "torch2.99-cu130"])
        .env("KBUILD_CACHE_DIR", cache.path()));
    assert!(!out.status.success());
    insta::assert_snapshot!(Redact::new().output(&out));
}

#[test]
fn an_unknown_option_is_a_usage_error_with_exit_code_2() {
    let out = run(crate::common::kbuild::bin().args(["build", "--frobnicate"]));
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(Redact::new().output(&out));
}
