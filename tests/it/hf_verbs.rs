//! The verbs users bring from HF's kernel-builder run kbuild's commands (`upload`,
//! `build-and-upload`, `build-and-copy`, `update-build`, `check-abi`, `check-builds`,
//! `fill-card`), and a verb kbuild does not know gets the nearest one.

use crate::common::hub::{Hub, TOKEN};
use crate::common::kbuild::{bin, fixture, kbuild, run};
use crate::common::redact::Redact;
use crate::common::variant::project_with_variant;

#[test]
fn upload_is_publish() {
    let hub = Hub::start(&[]);
    let (project, _build) = project_with_variant();
    let out = run(bin()
        .arg("-C")
        .arg(project.path())
        .args(["upload", "--repo-id", "org/relu", "--json"])
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", project.path().join(".hf-home"))
        .env("HF_TOKEN", TOKEN));
    assert!(out.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["repo"], "org/relu");
    assert_eq!(hub.commits_made(), 2);
}

#[test]
fn build_and_upload_builds_then_publishes_what_it_built() {
    let hub = Hub::start(&[]);
    let project = fixture("silu-noarch");
    let root = project.path();
    let out = run(kbuild(root)
        .args(["build-and-upload", "--repo-id", "org/silu"])
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", root.join(".hf-home"))
        .env("HF_TOKEN", TOKEN));
    assert!(out.status.success());
    assert!(root.join("build/torch-cpu/metadata.json").is_file());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().last().is_some_and(|l| l
            .trim_start()
            .starts_with("Load kernels.get_kernel(\"org/silu\"")),
        "{stderr}"
    );
    assert_eq!(hub.commits_made(), 2);
}

#[test]
fn build_and_copy_update_build_check_abi_and_check_builds_are_kbuilds_verbs() {
    let project = fixture("silu-noarch");
    let root = project.path();
    assert!(run(kbuild(root).args(["build-and-copy"])).status.success());
    assert!(root.join("build/torch-cpu/metadata.json").is_file());
    for verb in ["check-abi", "check-builds"] {
        let out = run(kbuild(root).arg(verb));
        assert!(out.status.success(), "{verb}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Checked "),
            "{verb}"
        );
    }
    let v4 = fixture("relu-v4");
    let out = run(kbuild(v4.path()).args(["update-build", "--check"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs updating to edition 5"));
}

#[test]
fn an_unknown_verb_suggests_the_nearest_one() {
    let mut shown = String::new();
    for verb in ["uplod", "fil-card", "devlop"] {
        let out = run(bin().arg(verb));
        assert_eq!(out.status.code(), Some(2));
        shown.push_str(&Redact::new().stderr(&out));
    }
    insta::assert_snapshot!(shown);
}
