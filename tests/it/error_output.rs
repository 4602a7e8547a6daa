//! What a user reads when kbuild fails: the message, each cause once, then the hint.

use crate::common::kbuild::{fixture, kbuild, python, run};

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
