//! build.toml is found from a subdirectory, as cargo finds Cargo.toml; `-C` names the project
//! outright.

use crate::common::kbuild::{bin, fixture, python, run};

#[test]
fn build_in_a_subdirectory_finds_the_projects_build_toml() {
    let project = fixture("relu-v5");
    let root = project.path();
    let sub = root.join("relu_cpu");
    let out = run(bin()
        .args(["build", "--backend", "cpu", "--dry-run", "--json"])
        .env("KBUILD_PYTHON", python())
        .env_remove("VIRTUAL_ENV")
        .current_dir(&sub));
    assert!(out.status.success(), "build from a subdirectory failed");
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let out_dir = plan["out_dir"].as_str().unwrap_or_default();
    assert!(
        out_dir.starts_with(root.canonicalize().unwrap().to_str().unwrap())
            || out_dir.starts_with(root.to_str().unwrap()),
        "variants go to the project's build/, not the subdirectory's: {plan}"
    );
    assert!(!sub.join("build").exists());
}

#[test]
fn an_explicit_project_wins_over_the_walk() {
    let project = fixture("relu-v5");
    let sub = project.path().join("relu_cpu");
    let out = run(bin()
        .args(["-C", ".", "check-config"])
        .env("KBUILD_PYTHON", python())
        .current_dir(&sub));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no `build.toml` in `.`"), "{stderr}");
    let out = run(bin().arg("check-config").current_dir(&sub));
    assert!(out.status.success());
}
