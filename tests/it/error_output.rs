//! What a user reads when kbuild fails: the message, each cause once, then the hint.

use std::path::Path;

use crate::common::kbuild::{fixture, kbuild, python, python_ok, run};
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

/// stdout of `kbuild ARGS…`, which must fail, parsed as JSON.
fn failing_json(args: &[&str]) -> (serde_json::Value, String) {
    let out = run(crate::common::kbuild::bin()
        .args(args)
        .env_remove("VIRTUAL_ENV"));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let json = serde_json::from_str(&stdout).expect("stdout is JSON");
    (json, stdout)
}

#[test]
fn json_failure_prints_the_error_its_causes_and_hint_on_stdout() {
    let project = fixture("silu-noarch");
    let root = project.path().to_str().unwrap();
    let (_, stdout) = failing_json(&["build", "-C", root, "--out-dir", "/proc/nope", "--json"]);
    insta::assert_snapshot!(stdout);
}

#[test]
fn every_json_command_reports_its_failure_on_stdout() {
    for args in [
        &["build", "--json"][..],
        &["wheel", "--json"],
        &["list-variants", "--json"],
        &["check-config", "--json"],
        &["pack", "--json"],
        &["publish", "--dry-run", "--json"],
        &["check", "--json"],
    ] {
        let mut args = args.to_vec();
        args.extend(["-C", "/proc/nope"]);
        let (report, _) = failing_json(&args);
        let error = &report["error"];
        assert!(error["message"].is_string(), "{args:?}: {report}");
        assert!(error["causes"].is_array(), "{args:?}: {report}");
    }
}

#[test]
fn check_of_a_missing_path_says_it_does_not_exist_and_what_path_may_be() {
    let project = fixture("silu-noarch");
    let root = project.path().to_str().unwrap();
    let stderr = failing(&["check", "-C", root, "nonexist"]);
    insta::assert_snapshot!(stderr);
}

#[test]
fn check_of_a_directory_of_artifacts_points_at_one_of_them_not_at_build_dir() {
    let project = fixture("silu-noarch");
    let root = project.path();
    assert!(run(kbuild(root).args(["wheel"])).status.success());
    assert!(run(kbuild(root).args(["pack"])).status.success());
    let out = run(kbuild(root).arg("check").arg(root.join("dist")));
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr)
        .unwrap()
        .replace(&root.display().to_string(), "[project]");
    assert!(!stderr.contains("--build-dir"), "{stderr}");
    insta::assert_snapshot!(stderr);
}

#[test]
fn a_locked_toolchain_that_is_not_installed_hints_plain_toolchain_install() {
    let project = fixture("relu-v5");
    let root = project.path();
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(
        root.join("kbuild.lock"),
        "version = 1\n\n[[toolchain]]\nname = \"torch2.14-cpu\"\ntorch = \"2.14\"\n\
         compute = \"cpu\"\nrequested = [\"torch==2.14.*\"]\npackages = [\"torch==2.14.0\"]\n",
    )
    .unwrap();
    let out = run(kbuild(root)
        .args(["build", "--dry-run"])
        .env("KBUILD_CACHE_DIR", cache.path()));
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr)
        .unwrap()
        .replace(&python().display().to_string(), "[python]");
    let torch = torch_found(&stderr);
    insta::assert_snapshot!(stderr.replace(&torch, "[torch]"));
}

/// The version after "has torch " in `text` (the test Python's torch).
fn torch_found(text: &str) -> String {
    let start = text.find("has torch ").expect("names the torch found") + "has torch ".len();
    text[start..].split_whitespace().next().unwrap().to_string()
}
