//! `kbuild publish --create-pr`: runs of one build that race end with one open pull request per
//! branch (each run whose own is not the oldest closes it), and a re-run that finds the build
//! already in its pull request says so without reporting a commit of 0 files.

use serde_json::Value;

use crate::common::hub::{Hub, TOKEN};
use crate::common::variant::{CPU_VARIANT, VariantSpec, redigest, write_variant};

const REPO: &str = "org/relu";

/// The open pull requests on the server, by the branch they target.
fn open_prs_by_target(hub: &Hub) -> std::collections::BTreeMap<String, Vec<u64>> {
    let path = "/api/kernels/org/relu/discussions?type=pull_request&status=open";
    let (status, body) = hub.request("GET", path, b"");
    assert_eq!(status, 200, "{body}");
    let listing: Value = serde_json::from_str(&body).unwrap();
    let mut by_target = std::collections::BTreeMap::new();
    for pr in listing["discussions"].as_array().unwrap() {
        let target = pr["targetBranch"].as_str().unwrap_or("?").to_string();
        let num = pr["num"].as_u64().unwrap();
        by_target.entry(target).or_insert_with(Vec::new).push(num);
    }
    by_target
}

/// A project whose variant's extension takes `size` bytes (LFS), published once to `v1`.
fn published_project(hub: &Hub, size: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    let so: Vec<u8> = (0..size as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let spec = VariantSpec {
        so: Some(so),
        ..Default::default()
    };
    write_variant(&build, &spec);
    hub.publish(&build, &["--repo", REPO, "--skip-check"])
        .success();
    (project, build)
}

#[test]
fn racing_create_pr_runs_of_one_build_leave_one_open_pull_request_per_branch() {
    // Started together on a slow link (200 kB/s), all three look for a pull request before any
    // has opened one.
    let hub = Hub::start(&["--read-rate", "200000"]);
    let (_project, build) = published_project(&hub, 300_000);
    let variant = build.join(CPU_VARIANT);
    std::fs::write(
        variant.join("__init__.py"),
        "from ._ops import ops\n# new\n",
    )
    .unwrap();
    redigest(&variant);
    let args = ["--repo", REPO, "--skip-check", "--create-pr", "--json"];
    let runs: Vec<_> = std::thread::scope(|s| {
        let racers: Vec<_> = (0..3)
            .map(|_| s.spawn(|| hub.publish(&build, &args)))
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let open = open_prs_by_target(&hub);
    for (target, prs) in &open {
        assert_eq!(prs.len(), 1, "open against {target}: {prs:?}");
    }
    assert!(open.contains_key("refs/heads/v1"), "{open:?}");
    let kept = open["refs/heads/v1"][0];
    for run in runs {
        let run = run.success();
        let reported = run.json()["commits"][0]["pr_num"].as_u64();
        assert_eq!(reported, Some(kept), "{}", run.stderr);
    }
}

#[test]
fn a_create_pr_rerun_whose_pull_request_holds_the_build_reports_no_commit() {
    let hub = Hub::start(&[]);
    let (_project, build) = published_project(&hub, 1000);
    let variant = build.join(CPU_VARIANT);
    std::fs::write(
        variant.join("__init__.py"),
        "from ._ops import ops\n# new\n",
    )
    .unwrap();
    redigest(&variant);
    let env = [("HF_TOKEN", TOKEN)];
    let args = ["--repo", REPO, "--skip-check", "--create-pr"];
    hub.publish_with(&build, &args, &env).success();
    let again = hub.publish_with(&build, &args, &env).success();
    assert!(
        again
            .stderr
            .contains("already holds this build: no commit made"),
        "{}",
        again.stderr
    );
    assert!(!again.stderr.contains("Committed"), "{}", again.stderr);
}
