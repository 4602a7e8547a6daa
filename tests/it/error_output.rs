//! What a user reads when kbuild fails: the message, each cause once, then the hint.

use crate::common::kbuild::{fixture, run};

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
