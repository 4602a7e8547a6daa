//! `kbuild check` on what kbuild itself leaves in a build directory: the `.stage-*` a killed
//! build leaves is not a variant.

use serde_json::Value;

use crate::common::kbuild::{bin, copy_dir, run};
use crate::common::variant::{CPU_VARIANT, project_with_variant};

fn check_json(build: &std::path::Path) -> std::process::Output {
    run(bin()
        .arg("check")
        .arg(build)
        .args(["--manylinux", "none", "--json"]))
}

#[test]
fn a_leftover_stage_of_a_killed_build_does_not_fail_check() {
    let (_project, build) = project_with_variant();
    let before = check_json(&build);
    // A build killed while staging: a half-written copy of the variant, with its metadata.json.
    let stage = build.join(format!(".stage-99999999-{CPU_VARIANT}-Ab12Cd"));
    copy_dir(&build.join(CPU_VARIANT), &stage);
    std::fs::remove_file(stage.join("_ops.py")).unwrap();
    let after = check_json(&build);
    // The stand-in extension breaks the `abi` rule either way: what matters is that the stage
    // adds nothing.
    assert_eq!(after.status.code(), before.status.code());
    assert_eq!(
        String::from_utf8_lossy(&after.stdout),
        String::from_utf8_lossy(&before.stdout)
    );
    let checks: Value = serde_json::from_slice(&after.stdout).unwrap();
    let names: Vec<&str> = checks
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["variant"].as_str().unwrap())
        .collect();
    assert_eq!(names, [CPU_VARIANT]);
}
