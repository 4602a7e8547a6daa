//! `kbuild check` and `publish` on what a build directory may hold besides one clean build: the
//! `.stage-*` a killed build leaves is not a variant; variants built from different commits are
//! a `check` finding and a refused publish (unless `--allow-mixed`).

use serde_json::{Value, json};

use crate::common::hub::Hub;
use crate::common::kbuild::{bin, copy_dir, run};
use crate::common::redact::Redact;
use crate::common::variant::{
    CPU_VARIANT, VariantSpec, project_with_variant, redigest, write_variant,
};

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

/// A build holding the cpu variant built at commit `aaaa…` and a torch 2.14 one at `bbbb…`:
/// what a rebuild of one torch after a commit leaves.
fn mixed_build() -> (tempfile::TempDir, std::path::PathBuf) {
    let (project, build) = project_with_variant();
    let provenance = |c: char| {
        json!({"provenance": {
            "kernel-builder": {"version": "kbuild 0.1.0"},
            "kernel": {"commit": c.to_string().repeat(40), "dirty": false},
        }})
    };
    write_variant(
        &build,
        &VariantSpec {
            extra_metadata: provenance('a'),
            ..VariantSpec::default()
        },
    );
    write_variant(
        &build,
        &VariantSpec {
            dir_name: "torch214-cxx11-cpu-x86_64-linux",
            extra_metadata: provenance('b'),
            ..VariantSpec::default()
        },
    );
    (project, build)
}

#[test]
fn check_reports_variants_built_from_different_commits_as_a_rule() {
    let (_project, build) = mixed_build();
    let out = run(bin().arg("check").arg(&build).args(["--manylinux", "none"]));
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let mixed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("[same-commit]"))
        .collect();
    insta::assert_snapshot!(
        "check_reports_variants_built_from_different_commits",
        mixed.join("\n")
    );
}

#[test]
fn publish_refuses_variants_built_from_different_commits_unless_allow_mixed() {
    let (_project, build) = mixed_build();
    let hub = Hub::start(&[]);
    let refused = hub.publish(&build, &["--repo", "kbuild-test/mixed", "--dry-run"]);
    assert!(!refused.ok);
    insta::assert_snapshot!(
        "publish_refuses_variants_built_from_different_commits",
        Redact::new().path(&build, "[build]").text(&refused.stderr)
    );
    let allowed = hub.publish(
        &build,
        &["--repo", "kbuild-test/mixed", "--dry-run", "--allow-mixed"],
    );
    assert!(allowed.ok, "{}", allowed.stderr);
    assert!(allowed.stdout.contains("torch214-cxx11-cpu-x86_64-linux"));
}

/// The cpu variant as HF's kernel-builder would have written it: its provenance names it.
fn foreign_build() -> (tempfile::TempDir, std::path::PathBuf) {
    let (project, build) = project_with_variant();
    write_variant(
        &build,
        &VariantSpec {
            extra_metadata: json!({"provenance": {"kernel-builder": {"version": "0.5.0"}}}),
            ..VariantSpec::default()
        },
    );
    (project, build)
}

#[test]
fn publish_refuses_a_variant_kbuild_did_not_build_unless_allow_foreign() {
    let (_project, build) = foreign_build();
    let hub = Hub::start(&[]);
    let refused = hub.publish(&build, &["--repo", "kbuild-test/foreign", "--dry-run"]);
    assert!(!refused.ok);
    insta::assert_snapshot!(
        "publish_refuses_a_variant_kbuild_did_not_build",
        Redact::new().path(&build, "[build]").text(&refused.stderr)
    );
    let allowed = hub.publish(
        &build,
        &[
            "--repo",
            "kbuild-test/foreign",
            "--dry-run",
            "--allow-foreign",
        ],
    );
    assert!(allowed.ok, "{}", allowed.stderr);
}

/// Replace `file` by a hard link to a new file `outside/name` with the same content.
fn hard_link_out(file: &std::path::Path, outside: &std::path::Path, name: &str) {
    let target = outside.join(name);
    std::fs::copy(file, &target).unwrap();
    std::fs::remove_file(file).unwrap();
    std::fs::hard_link(&target, file).unwrap();
}

#[test]
fn publish_refuses_a_hard_link_in_any_variant_and_hash_write_refuses_to_vouch_for_one() {
    let outside = tempfile::tempdir().unwrap();
    let hub = Hub::start(&[]);
    let args = [
        "--repo",
        "kbuild-test/links",
        "--dry-run",
        "--allow-foreign",
    ];

    // In a variant that says kbuild built it (anyone can write that provenance), a link to a
    // token file with the digest rewritten over it by `kbuild hash --write`: the rewrite is
    // refused, and so is the publish of a digest written by other means.
    let (_project, build) = project_with_variant();
    let variant = build.join(CPU_VARIANT);
    let token = outside.path().join("vouched-token");
    std::fs::write(&token, "hf_secret_token").unwrap();
    std::fs::remove_file(variant.join("__init__.py")).unwrap();
    std::fs::hard_link(&token, variant.join("__init__.py")).unwrap();
    let hashed = run(bin().arg("hash").arg("--write").arg(&build));
    let said = String::from_utf8_lossy(&hashed.stderr);
    assert!(!hashed.status.success(), "{said}");
    assert!(said.contains("__init__.py` has 2 hard links"), "{said}");
    redigest(&variant);
    let published = hub.publish(&build, &args);
    assert!(!published.ok, "{}", published.stderr);
    assert!(published.stderr.contains("__init__.py` has 2 hard links"));
    assert!(!published.stderr.contains("hf_secret_token"));

    // In a variant another tool built, it is refused.
    let (_project, build) = foreign_build();
    let init = build.join(CPU_VARIANT).join("__init__.py");
    hard_link_out(&init, outside.path(), "b");
    let refused = hub.publish(&build, &args);
    assert!(!refused.ok);
    let redact = Redact::new()
        .path(&build, "[build]")
        .path(build.parent().unwrap(), "[project]");
    insta::assert_snapshot!(
        "publish_refuses_a_hard_link_in_a_foreign_variant",
        redact.text(&refused.stderr)
    );

    // In benchmarks/, a hard link to a token file is refused.
    let (project, build) = project_with_variant();
    let token = outside.path().join("token");
    std::fs::write(&token, "hf_secret").unwrap();
    std::fs::create_dir_all(project.path().join("benchmarks")).unwrap();
    std::fs::hard_link(&token, project.path().join("benchmarks/notes.txt")).unwrap();
    let refused = hub.publish(&build, &args);
    assert!(!refused.ok);
    assert!(
        refused
            .stderr
            .contains("benchmarks/notes.txt` has 2 hard links"),
        "{}",
        refused.stderr
    );
}
