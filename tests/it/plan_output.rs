//! What `kbuild build --dry-run` and `kbuild list-variants` print, text and `--json`, pinned
//! whole for the relu fixture's cpu backend (paths and the machine's compiler redacted).

use std::path::Path;
use std::process::Output;

use crate::common::kbuild::{fixture, kbuild, run, stdout_json};
use crate::common::redact::Redact;

/// Members whose values are the machine's, not the plan's.
const MACHINE_KEYS: &[&str] = &["compiler_id", "hash"];

fn dry_run(root: &Path, extra: &[&str]) -> Output {
    let out = run(kbuild(root)
        .args([
            "build",
            "--dry-run",
            "--backend",
            "cpu",
            "--unique-id",
            "snap",
        ])
        .args(extra));
    assert!(out.status.success());
    out
}

/// The project root, the test Python's paths and the host compiler the plan uses.
fn redactions(root: &Path) -> Redact {
    let plan = stdout_json(&dry_run(root, &["--json"]));
    let compiler = plan["variants"][0]["compile"][0]["compiler"]
        .as_str()
        .expect("a compile job names its compiler");
    Redact::new()
        .python()
        .path(root, "[project]")
        .text_of(compiler, "[c++]")
}

#[test]
fn dry_run_prints_each_variant_its_compile_commands_and_the_link() {
    let project = fixture("relu-v5");
    let root = project.path();
    let redact = redactions(root);
    // `-j` and the memory budget given: the machine's cores and free memory are not the plan's.
    let out = dry_run(root, &["-j", "2", "--memory", "8G"]);
    insta::assert_snapshot!(redact.output(&out));
    assert!(!root.join("build").exists(), "a dry run wrote build/");
}

#[test]
fn dry_run_json_is_the_plan_as_data() {
    let project = fixture("relu-v5");
    let root = project.path();
    let redact = redactions(root);
    let out = dry_run(root, &["--json"]);
    insta::assert_json_snapshot!(redact.stdout_json(&out, MACHINE_KEYS));
}

#[test]
fn list_variants_names_each_variant_with_its_capabilities() {
    let project = fixture("relu-v5");
    let root = project.path();
    let redact = Redact::new().python().path(root, "[project]");
    let out = run(kbuild(root).arg("list-variants"));
    assert!(out.status.success());
    insta::assert_snapshot!("list_variants_text", redact.output(&out));

    let out = run(kbuild(root).args(["list-variants", "--json"]));
    assert!(out.status.success());
    // The toolchain's versions are the machine's; the variant names derive from them.
    insta::assert_json_snapshot!(
        "list_variants_json",
        redact.stdout_json(&out, &["torch", "cuda", "nvcc"])
    );
}
