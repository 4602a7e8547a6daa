//! A multi-commit publish to an existing branch moves the branch to the staged commits by
//! deleting and recreating it (the Hub has no "set branch"). When the recreate keeps failing the
//! branch is absent, and the error must say so; a re-run must bring it back with everything the
//! branch held before (variants published from elsewhere) plus the new build.

use serde_json::Value;

use crate::common::hub::{Hub, TOKEN};
use crate::common::variant::{CPU_VARIANT, VariantSpec, project_with_variant, write_variant};

const REPO: &str = "org/relu";

/// Paths under `build/` on `rev`, from the server's tree listing.
fn build_files(hub: &Hub, rev: &str) -> Vec<String> {
    let (status, body) = hub.request(
        "GET",
        &format!("/api/kernels/{REPO}/tree/{rev}/build?recursive=true"),
        b"",
    );
    assert_eq!(status, 200, "{body}");
    let entries: Value = serde_json::from_str(&body).unwrap();
    let mut files: Vec<String> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "file")
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    files.sort();
    files
}

fn branches(hub: &Hub) -> Vec<String> {
    let (_, body) = hub.request("GET", &format!("/api/kernels/{REPO}/refs"), b"");
    let refs: Value = serde_json::from_str(&body).unwrap();
    refs["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_branch_lost_while_moving_is_named_and_a_rerun_restores_it_with_its_other_variants() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    write_variant(
        &build,
        &VariantSpec {
            dir_name: "torch-cpu",
            id: "_relu_cpu_fff0000",
            ..VariantSpec::default()
        },
    );
    // `v1` holds one variant, published "from another machine".
    hub.publish(&build, &["--repo", REPO, "--variant", CPU_VARIANT])
        .success();
    let before = build_files(&hub, "v1");
    assert!(
        before
            .iter()
            .all(|p| p.starts_with(&format!("build/{CPU_VARIANT}/")))
    );

    // The other variant in several commits: staged (branch request 1 creates the staging
    // branch, 2 the move marker), then `v1` deleted (3) and its recreation fails on every try.
    hub.arm("branch:500:5:3");
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", "2")];
    let args = ["--repo", REPO, "--variant", "torch-cpu"];
    let run = hub.publish_with(&build, &args, &env);
    assert!(!run.ok);
    run.assert_no_token();
    assert!(
        run.stderr.contains(
            "`v1` is missing until the move is done: re-run `kbuild publish` to recreate it"
        ),
        "{}",
        run.stderr
    );
    assert!(!branches(&hub).contains(&"v1".to_string()));

    // A dry run says what the re-run will do and does nothing.
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let plan = hub.publish_with(&build, &dry, &env).success();
    assert!(
        plan.stderr
            .contains("Would restore branch `v1` from `kbuild-moving-v1`"),
        "{}",
        plan.stderr
    );
    assert!(!branches(&hub).contains(&"v1".to_string()));

    hub.publish_with(&build, &args, &env).success();
    let after = build_files(&hub, "v1");
    for path in &before {
        assert!(after.contains(path), "{path} was lost from v1: {after:?}");
    }
    assert!(
        after.iter().any(|p| p.starts_with("build/torch-cpu/")),
        "{after:?}"
    );
    assert!(
        branches(&hub)
            .iter()
            .all(|b| !b.starts_with("kbuild-staging-")),
        "{:?}",
        branches(&hub)
    );
}
