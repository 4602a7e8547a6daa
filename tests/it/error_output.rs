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
