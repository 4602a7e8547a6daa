//! Staging branches that interrupted publishes left on the Hub (`kbuild-staging-…`, of any
//! build) are removed by the next publish to the repository once their last commit is a day
//! old; a recent one (a publish that may be going on now) stays.

use serde_json::Value;

use crate::common::hub::Hub;
use crate::common::variant::{CPU_VARIANT, project_with_variant, redigest};

const REPO: &str = "org/relu";

/// A branch `name` from `main` with one commit of its own (what a staged batch leaves); its
/// head commit id.
fn staging_branch(hub: &Hub, name: &str) -> String {
    let (status, body) = hub.request("POST", &format!("/api/kernels/{REPO}/branch/{name}"), b"{}");
    assert_eq!(status, 200, "{body}");
    let ndjson = concat!(
        r#"{"key":"header","value":{"summary":"staged batch 1/2"}}"#,
        "\n",
        r#"{"key":"file","value":{"path":"build/x/a.txt","encoding":"base64","content":"YQ=="}}"#
    );
    let (status, body) = hub.request(
        "POST",
        &format!("/api/kernels/{REPO}/commit/{name}"),
        ndjson.as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    let landed: Value = serde_json::from_str(&body).unwrap();
    landed["commitOid"].as_str().unwrap().to_string()
}

/// Make commit `id` look made in 2020 (the server reads the date from its record).
fn backdate(hub: &Hub, id: &str) {
    let record = hub
        .root
        .path()
        .join(format!("repos/kernels/{REPO}/commits/{id}.json"));
    let text = std::fs::read_to_string(&record).unwrap();
    let mut commit: Value = serde_json::from_str(&text).unwrap();
    commit["date"] = "2020-01-01T00:00:00.000Z".into();
    std::fs::write(&record, commit.to_string()).unwrap();
}

fn branches(hub: &Hub) -> String {
    hub.request("GET", &format!("/api/kernels/{REPO}/refs"), b"")
        .1
}

#[test]
fn the_next_publish_removes_staging_branches_a_day_old_and_keeps_recent_ones() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    hub.publish(&build, &["--repo", REPO]).success();
    let old = "kbuild-staging-v1-aaaaaaaaaaaa-bbbbbbbbbbbb";
    let recent = "kbuild-staging-v1-cccccccccccc-dddddddddddd";
    backdate(&hub, &staging_branch(&hub, old));
    staging_branch(&hub, recent);

    let variant = build.join(CPU_VARIANT);
    std::fs::write(
        variant.join("__init__.py"),
        "from ._ops import ops\n# next\n",
    )
    .unwrap();
    redigest(&variant);
    let run = hub.publish(&build, &["--repo", REPO]).success();
    let said = format!("Removed branch `{old}`, left by a publish interrupted");
    assert!(run.stderr.contains(&said), "{}", run.stderr);
    let refs = branches(&hub);
    assert!(!refs.contains(old), "{refs}");
    assert!(refs.contains(recent), "{refs}");
    // A dry run removes nothing.
    backdate(&hub, &staging_branch(&hub, old));
    hub.publish(&build, &["--repo", REPO, "--dry-run"])
        .success();
    assert!(branches(&hub).contains(old));
}
