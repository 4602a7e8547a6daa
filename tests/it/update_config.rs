//! `kbuild update-config` turns a v4 build.toml into edition 5 as HF's `kernel-builder
//! update-build` does (the same TOML plus `edition = 5`), keeping the file's comments and order,
//! and the result plans the same build.

use std::path::Path;

use crate::common::kbuild::{fixture, kbuild, run, stdout_json};
use crate::common::redact::Redact;

/// A v4 file as people write them: comments on their own lines and after values, blank lines.
const COMMENTED_V4: &str = r#"# relu, kept on the legacy format on purpose
[general]
name = "relu-legacy" # the Hub name
version = 1          # bump on breaking changes
license = "apache-2.0"
backends = [
  "cpu",
  "cuda", # the fast one
]

[general.hub]
repo-id = "kbuild-test/relu-legacy"

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

# The CUDA kernel comes before the CPU one, and stays there.
[kernel.relu]
backend = "cuda"
depends = ["torch"]
src = ["relu_cuda/relu.cu", "relu_cuda/relu_common.cuh"]
cuda-capabilities = ["7.5", "8.0", "9.0"]

[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = ["relu_cpu/relu_cpu.cpp"]
"#;

fn manifest(root: &Path) -> String {
    std::fs::read_to_string(root.join("build.toml")).unwrap()
}

/// What HF's update-build writes, as data: the v4 document with `general.edition = 5`.
fn hf_upgrade(v4: &str) -> toml::Table {
    let mut doc: toml::Table = toml::from_str(v4).unwrap();
    doc["general"]
        .as_table_mut()
        .unwrap()
        .insert("edition".into(), toml::Value::Integer(5));
    doc
}

#[test]
fn update_config_adds_edition_after_version_and_keeps_comments_and_order() {
    let project = fixture("relu-v4");
    let root = project.path();
    std::fs::write(root.join("build.toml"), COMMENTED_V4).unwrap();
    let out = run(kbuild(root).arg("update-config"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let redact = Redact::new().path(root, "[project]");
    insta::assert_snapshot!("update_config_stdout", redact.stdout(&out));
    let new = manifest(root);
    insta::assert_snapshot!("update_config_commented_v4", new);
    assert_eq!(
        toml::from_str::<toml::Table>(&new).unwrap(),
        hf_upgrade(COMMENTED_V4)
    );
}

#[test]
fn update_config_output_passes_check_config_and_plans_the_same_build() {
    let project = fixture("relu-v4");
    let root = project.path();
    let plan = || {
        let out = run(kbuild(root).args(["build", "--dry-run", "--json", "--backend", "cpu"]));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Outside git the source hash covers build.toml's bytes, and the op namespace (`id`,
        // `TORCH_EXTENSION_NAME`, the .so's name) is made from it: the one thing that differs.
        let json = stdout_json(&out);
        let hash = json["source"]["hash"].as_str().unwrap().to_string();
        let text = serde_json::to_string(&json)
            .unwrap()
            .replace(&hash, "[source-hash]");
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let before = plan();
    assert!(run(kbuild(root).arg("update-config")).status.success());
    let check = run(kbuild(root).args(["check-config", "--json"]));
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(stdout_json(&check)["edition"], "v5");
    assert_eq!(plan(), before, "the edition-5 file plans another build");
}

#[test]
fn update_config_restores_each_v5_fixture_from_its_v4_form() {
    let mut tried = 0;
    for name in [
        "relu-v5",
        "caps-hf",
        "csrc-layout",
        "torch-maxver",
        "silu-noarch",
        "gnu-unique",
    ] {
        let project = fixture(name);
        let root = project.path();
        let v5 = manifest(root);
        let v4: String = v5
            .lines()
            .filter(|l| l.trim() != "edition = 5")
            .map(|l| format!("{l}\n"))
            .collect();
        assert_ne!(v4, v5, "{name} has no `edition = 5` line");
        std::fs::write(root.join("build.toml"), &v4).unwrap();
        let out = run(kbuild(root).arg("update-config"));
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let upgraded: toml::Table = toml::from_str(&manifest(root)).unwrap();
        assert_eq!(
            upgraded,
            toml::from_str::<toml::Table>(&v5).unwrap(),
            "{name}"
        );
        assert_eq!(upgraded, hf_upgrade(&v4), "{name}");
        tried += 1;
    }
    assert_eq!(tried, 6);
}

#[test]
fn update_config_check_and_dry_run_write_nothing_and_check_fails_while_v4() {
    let project = fixture("relu-v4");
    let root = project.path();
    let v4 = manifest(root);
    let dry = run(kbuild(root).args(["update-config", "--dry-run", "--json"]));
    assert!(dry.status.success());
    assert_eq!(stdout_json(&dry)["status"], "needs-update");
    assert_eq!(stdout_json(&dry)["changes"][0]["added"][0], "edition = 5");
    let check = run(kbuild(root).args(["update-config", "--check"]));
    assert_eq!(check.status.code(), Some(1));
    let redact = Redact::new().path(root, "[project]");
    insta::assert_snapshot!("update_config_check_v4", redact.output(&check));
    assert_eq!(manifest(root), v4, "--dry-run or --check wrote build.toml");

    assert!(run(kbuild(root).arg("update-config")).status.success());
    let check = run(kbuild(root).args(["update-config", "--check", "--json"]));
    assert!(check.status.success());
    assert_eq!(stdout_json(&check)["status"], "up-to-date");
}

#[test]
fn update_config_refuses_edition_5_and_invalid_files_with_their_location() {
    let project = fixture("relu-v5");
    let root = project.path();
    let v5 = manifest(root);
    let out = run(kbuild(root).arg("update-config"));
    assert_eq!(out.status.code(), Some(1));
    let redact = Redact::new().path(root, "[project]");
    insta::assert_snapshot!("update_config_already_v5", redact.stderr(&out));
    assert_eq!(manifest(root), v5);

    let bad = v5
        .replace("edition = 5\n", "")
        .replace("version = 1", "version = \"one\"");
    std::fs::write(root.join("build.toml"), &bad).unwrap();
    let out = run(kbuild(root).arg("update-config"));
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("update_config_invalid_v4", redact.stderr(&out));
    assert_eq!(manifest(root), bad, "an invalid file was rewritten");
}
