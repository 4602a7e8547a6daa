//! `kbuild publish` against the local Hub server: what it uploads, deletes, skips and refuses.

use std::path::Path;

use crate::common::hub::{Hub, Run, TOKEN};
use crate::common::variant::{
    CPU_VARIANT, VariantSpec, project_with_variant, redigest, write_second_variant, write_variant,
};
use serde_json::{Value, json};

const REPO: &str = "org/relu";

/// `text` with what differs between runs and machines replaced, for snapshots: the local Hub's
/// address as `[hub]`, each of `paths` (longest first) by its name, and commit ids, whole or
/// shortened, as `[oid]` (a staging branch's name ends in one).
pub(crate) fn redacted(text: &str, hub: &Hub, paths: &[(&Path, &str)]) -> String {
    let mut paths = paths.to_vec();
    paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.as_os_str().len()));
    let mut text = text.replace(&hub.url, "[hub]");
    for (path, name) in paths {
        text = text.replace(&path.display().to_string(), name);
    }
    without_commit_ids(&text)
}

/// Words of 7 or more lowercase hex digits, at least one a digit, as `[oid]`.
fn without_commit_ids(text: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        let is_id =
            word.len() >= 7 && word.chars().all(hex) && word.chars().any(|c| c.is_ascii_digit());
        out.push_str(if is_id { "[oid]" } else { word });
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Retry delays, which have random jitter, as `[delay]`: `retrying in [delay]: …`.
pub(crate) fn without_delays(text: &str) -> String {
    const AT: &str = "retrying in ";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(AT) {
        let after = &rest[at + AT.len()..];
        let end = after.find(" s").map_or(0, |e| e + " s".len());
        out.push_str(&rest[..at]);
        out.push_str(AT);
        out.push_str("[delay]");
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The `--json` summary with every string [`redacted`].
pub(crate) fn redacted_json(value: &Value, hub: &Hub, paths: &[(&Path, &str)]) -> Value {
    match value {
        Value::String(s) => Value::String(redacted(s, hub, paths)),
        Value::Array(items) => items.iter().map(|v| redacted_json(v, hub, paths)).collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), redacted_json(v, hub, paths)))
            .collect(),
        other => other.clone(),
    }
}

/// Both streams of a run, [`redacted`], for one snapshot.
pub(crate) fn streams(run: &Run, hub: &Hub, paths: &[(&Path, &str)]) -> String {
    format!(
        "--- stdout\n{}--- stderr\n{}",
        redacted(&run.stdout, hub, paths),
        redacted(&run.stderr, hub, paths)
    )
}

fn publish_json(hub: &Hub, build: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--repo", REPO, "--json"];
    args.extend_from_slice(extra);
    hub.publish(build, &args).success().json()
}

#[test]
fn first_publish_creates_repo_branch_and_card() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let s = publish_json(&hub, &build, &[]);
    assert_eq!(s["repo_created"], true);
    assert_eq!(s["branch"], "v1");
    assert_eq!(s["branch_created"], true);
    assert_eq!(s["card"], "added");
    assert_eq!(s["added"].as_array().unwrap().len(), 5, "{s}");
    insta::assert_json_snapshot!("first_publish_json", redacted_json(&s, &hub, &[]));
    // Files on v1, card on main.
    assert_eq!(hub.commits_made(), 2);
    let (status, body) = hub.request(
        "GET",
        "/api/kernels/org/relu/tree/v1/build?recursive=true",
        b"",
    );
    assert_eq!(status, 200);
    assert!(
        body.contains(&format!("build/{CPU_VARIANT}/metadata.json")),
        "{body}"
    );
    let (status, card) = hub.request("GET", "/kernels/org/relu/resolve/main/README.md", b"");
    assert_eq!(status, 200);
    // Loads with `get_kernel("org/relu", version=1)`.
    insta::assert_snapshot!("first_publish_card", card);
}

#[test]
fn republishing_an_unchanged_build_makes_no_commit_and_says_so() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    publish_json(&hub, &build, &[]);
    let seen = hub.log().len();

    let run = hub.publish(&build, &["--repo", REPO]).success();
    insta::assert_snapshot!(
        "unchanged_build_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
    let s = publish_json(&hub, &build, &[]);
    assert_eq!(s["up_to_date"], true);
    assert_eq!(s["commits"], json!([]));
    assert_eq!(s["bytes"], 0);
    let writes: Vec<String> = hub.log()[seen..]
        .iter()
        .filter(|l| !l.starts_with("GET "))
        .cloned()
        .collect();
    assert!(writes.is_empty(), "an unchanged build sent: {writes:?}");
}

#[test]
fn one_changed_file_uploads_only_that_file() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    publish_json(&hub, &build, &[]);

    let variant = build.join(CPU_VARIANT);
    std::fs::write(
        variant.join("_capabilities.py"),
        "CAPABILITY_DTYPES = {}\nPTX_CAPABILITY = None\n# rebuilt\n",
    )
    .unwrap();
    redigest(&variant);
    let s = publish_json(&hub, &build, &[]);
    // The changed file and the metadata.json whose digest records it.
    let updated: Vec<&str> = s["updated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        updated,
        [
            format!("build/{CPU_VARIANT}/_capabilities.py"),
            format!("build/{CPU_VARIANT}/metadata.json")
        ]
    );
    assert_eq!(s["added"], json!([]));
    assert_eq!(s["deleted"], json!([]));
    assert_eq!(s["unchanged"], 3);
    assert_eq!(s["commits"].as_array().unwrap().len(), 1);
    assert_eq!(s["commits"][0]["files"], 2);
    insta::assert_json_snapshot!("one_changed_file_json", redacted_json(&s, &hub, &[]));
}

#[test]
fn a_file_removed_from_the_variant_is_deleted_remotely_and_nothing_outside_it() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let variant = build.join(CPU_VARIANT);
    std::fs::write(variant.join("layers.py"), "class Relu: pass\n").unwrap();
    redigest(&variant);
    publish_json(&hub, &build, &[]);
    // Someone else's file on the branch, outside the variant.
    let other = tempfile::tempdir().unwrap();
    let other_build = other.path().join("build");
    write_second_variant(&other_build);
    publish_json(&hub, &other_build, &[]);

    std::fs::remove_file(variant.join("layers.py")).unwrap();
    redigest(&variant);
    let s = publish_json(&hub, &build, &[]);
    assert_eq!(
        s["deleted"],
        json!([format!("build/{CPU_VARIANT}/layers.py")])
    );
    let (_, tree) = hub.request(
        "GET",
        "/api/kernels/org/relu/tree/v1/build?recursive=true",
        b"",
    );
    assert!(!tree.contains("layers.py"), "{tree}");
    assert!(
        tree.contains("build/torch-cpu/metadata.json"),
        "other variants stay: {tree}"
    );
}

#[test]
fn create_pr_opens_a_pull_request_instead_of_committing() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    publish_json(&hub, &build, &[]);
    let (_, refs_before) = hub.request("GET", "/api/kernels/org/relu/refs", b"");

    let variant = build.join(CPU_VARIANT);
    std::fs::write(
        variant.join("__init__.py"),
        "from ._ops import ops\n__all__ = [\"relu\"]\n",
    )
    .unwrap();
    redigest(&variant);
    let s = publish_json(&hub, &build, &["--create-pr"]);
    let pr = &s["commits"][0];
    assert_eq!(pr["pr_num"], 1, "{s}");
    assert!(pr["pr_url"].as_str().unwrap().ends_with("/discussions/1"));

    let (_, refs) = hub.request("GET", "/api/kernels/org/relu/refs?include_prs=1", b"");
    let refs: serde_json::Value = serde_json::from_str(&refs).unwrap();
    assert_eq!(refs["pullRequests"][0]["ref"], "refs/pr/1");
    // The branch itself did not move.
    let before: serde_json::Value = serde_json::from_str(&refs_before).unwrap();
    assert_eq!(refs["branches"], before["branches"]);
}

#[test]
fn create_pr_reruns_reuse_the_open_pull_request_and_a_closed_one_is_not_reused() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    publish_json(&hub, &build, &[]);
    let variant = build.join(CPU_VARIANT);
    let change = |text: &str| {
        std::fs::write(variant.join("__init__.py"), text).unwrap();
        redigest(&variant);
    };
    let pr_nums = |s: &Value| -> Vec<Value> {
        s["commits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["pr_num"].clone())
            .collect()
    };
    change("from ._ops import ops\n# one\n");
    let first = publish_json(&hub, &build, &["--create-pr"]);
    // One against `v1`, one for the card against `main`.
    assert_eq!(pr_nums(&first), [json!(1), json!(2)], "{first}");
    // The same build again, then a changed one: both go to the same pull requests.
    let again = publish_json(&hub, &build, &["--create-pr"]);
    assert_eq!(pr_nums(&again), [json!(1), json!(2)], "{again}");
    assert_eq!(again["commits"][0]["files"], 0, "{again}");
    assert_eq!(again["commits"][1]["files"], 0, "{again}");
    change("from ._ops import ops\n# two\n");
    let updated = publish_json(&hub, &build, &["--create-pr"]);
    assert_eq!(pr_nums(&updated), [json!(1), json!(2)], "{updated}");
    let init = format!("/kernels/org/relu/resolve/refs%2Fpr%2F1/build/{CPU_VARIANT}/__init__.py");
    assert_eq!(
        hub.request("GET", &init, b"").1,
        "from ._ops import ops\n# two\n"
    );
    let (_, refs) = hub.request("GET", "/api/kernels/org/relu/refs?include_prs=1", b"");
    let refs: Value = serde_json::from_str(&refs).unwrap();
    assert_eq!(refs["pullRequests"].as_array().unwrap().len(), 2, "{refs}");

    // Once closed, a re-run opens a new one (the card's is still open and reused).
    let (status, body) = hub.request(
        "POST",
        "/api/kernels/org/relu/discussions/1/status",
        br#"{"status": "closed"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let reopened = publish_json(&hub, &build, &["--create-pr"]);
    assert_eq!(pr_nums(&reopened), [json!(3), json!(2)], "{reopened}");
}

#[test]
fn dry_run_prints_the_plan_and_writes_nothing() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let run = hub
        .publish(&build, &["--repo", REPO, "--dry-run"])
        .success();
    // Every file to add, the totals, and "Nothing was written.".
    insta::assert_snapshot!(
        "dry_run_output",
        streams(&run, &hub, &[(project.path(), "[project]")])
    );
    let writes: Vec<String> = hub
        .log()
        .into_iter()
        .filter(|l| !l.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "dry run wrote: {writes:?}");
    let (status, _) = hub.request("GET", "/api/kernels/org/relu", b"");
    assert_eq!(status, 404, "the repository must not exist after a dry run");
}

#[test]
fn dry_run_json_creates_nothing_and_says_what_it_would_create() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let s = publish_json(&hub, &build, &["--dry-run"]);
    assert_eq!(s["dry_run"], true);
    assert_eq!(s["repo_created"], false, "{s}");
    assert_eq!(s["branch_created"], false, "{s}");
    assert_eq!(s["repo_exists"], false, "{s}");
    assert_eq!(s["branch_exists"], false, "{s}");
    let (status, _) = hub.request("GET", "/api/kernels/org/relu", b"");
    assert_eq!(status, 404, "the repository must not exist after a dry run");
}

#[test]
fn server_errors_are_retried_until_the_commit_lands() {
    let hub = Hub::start(&["--fail", "commit:500:2"]);
    let (_project, build) = project_with_variant();
    let s = publish_json(&hub, &build, &[]);
    assert_eq!(s["commits"].as_array().unwrap().len(), 2);
    let failed = hub
        .log()
        .iter()
        .filter(|l| l.contains("/commit/") && l.ends_with("-> 500"))
        .count();
    assert_eq!(failed, 2);
}

#[test]
fn rate_limits_are_retried_too() {
    let hub = Hub::start(&["--fail", "refs:429:1", "--fail", "preupload:503:1"]);
    let (_project, build) = project_with_variant();
    publish_json(&hub, &build, &[]);
}

#[test]
fn persistent_failure_removes_the_new_branch_and_exits_nonzero() {
    let hub = Hub::start(&["--fail", "commit:500:100"]);
    let (project, build) = project_with_variant();
    let run = hub.publish(&build, &["--repo", REPO]);
    assert!(!run.ok);
    run.assert_no_token();
    // Failed after 5 attempts, and the new branch `v1` was removed again.
    insta::assert_snapshot!(
        "persistent_failure_stderr",
        without_delays(&redacted(
            &run.stderr,
            &hub,
            &[(project.path(), "[project]")]
        ))
    );
    let (_, refs) = hub.request("GET", "/api/kernels/org/relu/refs", b"");
    assert!(
        !refs.contains("\"v1\""),
        "half-published branch left behind: {refs}"
    );
}

#[test]
fn rejected_token_is_a_clear_error_without_the_token() {
    let hub = Hub::start(&["--require-token", "hf_the_right_one"]);
    let (project, build) = project_with_variant();
    let run = hub.publish(&build, &["--repo", REPO]);
    assert!(!run.ok);
    assert_eq!(run.code, Some(1));
    run.assert_no_token();
    // Authentication failed (401), with a hint that the token was rejected.
    insta::assert_snapshot!(
        "rejected_token_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
}

#[test]
fn read_only_token_gets_a_message_about_write_access() {
    let hub = Hub::start(&["--require-token", "hf_writer", "--read-token", TOKEN]);
    let (project, build) = project_with_variant();
    let run = hub.publish(&build, &["--repo", REPO]);
    assert!(!run.ok);
    run.assert_no_token();
    // Permission denied (403): use a token with the `write` role.
    insta::assert_snapshot!(
        "read_only_token_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
}

#[test]
fn token_file_under_hf_home_is_used_and_never_printed() {
    let hub = Hub::start(&["--require-token", TOKEN]);
    let (project, build) = project_with_variant();
    let home = project.path().join("hf-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("token"), format!("{TOKEN}\n")).unwrap();
    let home = home.to_string_lossy().into_owned();
    let run = hub
        .publish_with(
            &build,
            &["--repo", REPO, "-v", "--json"],
            &[("HF_HOME", &home)],
        )
        .success();
    assert_eq!(run.json()["commits"].as_array().unwrap().len(), 2);
}

#[test]
fn missing_token_is_refused_before_contacting_the_hub() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let run = hub.publish_with(&build, &["--repo", REPO], &[]);
    assert!(!run.ok);
    insta::assert_snapshot!(
        "missing_token_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
    assert!(hub.log().is_empty());
}

#[test]
fn dirty_build_needs_allow_dirty() {
    let hub = Hub::start(&[]);
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    write_variant(
        &build,
        &VariantSpec {
            id: "_relu_cpu_abc1234_dirty",
            ..VariantSpec::default()
        },
    );
    let run = hub.publish(&build, &["--repo", REPO]);
    assert!(!run.ok);
    // A warning that the tree was dirty, and an error pointing at `--allow-dirty`.
    insta::assert_snapshot!(
        "dirty_build_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
    assert!(
        hub.log().is_empty(),
        "nothing may be sent for a refused build"
    );
    hub.publish(&build, &["--repo", REPO, "--allow-dirty"])
        .success();
}

#[test]
fn variants_that_disagree_on_the_version_are_refused() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    write_variant(
        &build,
        &VariantSpec {
            dir_name: "torch-cpu",
            id: "_relu_cpu_fff0000",
            version: 2,
            ..VariantSpec::default()
        },
    );
    let run = hub.publish(&build, &["--repo", REPO]);
    assert!(!run.ok);
    insta::assert_snapshot!(
        "version_disagreement_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
}

#[test]
fn tampered_variant_fails_verification_naming_the_file() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    std::fs::write(
        build.join(CPU_VARIANT).join("_ops.py"),
        "import torch\nops = torch.ops._relu_cpu_abc1234\n",
    )
    .unwrap();
    let run = hub.publish(&build, &["--repo", REPO]);
    assert!(!run.ok);
    // Variant `torch215-…` failed verification: file hash mismatch for `_ops.py`.
    insta::assert_snapshot!(
        "tampered_variant_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
}

#[test]
fn only_the_selected_variant_is_published_and_others_are_left_alone() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    write_second_variant(&build);
    let s = publish_json(&hub, &build, &["--variant", "torch-cpu"]);
    assert_eq!(s["variants"], json!(["torch-cpu"]));
    assert!(
        s["added"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.as_str().unwrap().starts_with("build/torch-cpu/"))
    );

    let run = hub.publish(&build, &["--repo", REPO, "--variant", "nope"]);
    assert!(!run.ok);
    // Names the variants there are: torch-cpu, torch215-….
    insta::assert_snapshot!(
        "unknown_variant_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
}

#[test]
fn large_publishes_are_split_into_several_commits() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let s = hub
        .publish_with(
            &build,
            &["--repo", REPO, "--json"],
            &[("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", "2")],
        )
        .success()
        .json();
    // Five variant files in three commits, then the card.
    let commits = s["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 4, "{s}");
    let (_, tree) = hub.request(
        "GET",
        "/api/kernels/org/relu/tree/v1/build?recursive=true",
        b"",
    );
    assert_eq!(tree.matches("\"type\":\"file\"").count(), 5, "{tree}");
}

#[test]
fn legacy_model_repos_use_the_model_routes() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    publish_json(&hub, &build, &["--repo-type", "model"]);
    let (status, _) = hub.request(
        "GET",
        &format!("/org/relu/resolve/v1/build/{CPU_VARIANT}/_ops.py"),
        b"",
    );
    assert_eq!(status, 200);
    let (status, _) = hub.request("GET", "/api/kernels/org/relu", b"");
    assert_eq!(status, 404);
}

#[test]
fn interrupted_multi_commit_publish_leaves_the_branch_alone_and_a_rerun_finishes_it() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    write_second_variant(&build);
    publish_json(&hub, &build, &["--variant", CPU_VARIANT]);

    // Three commits of two files for `torch-cpu`: the first lands, the second keeps failing.
    hub.arm("commit:500:5:1");
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", "2")];
    let run = hub.publish_with(&build, &["--repo", REPO], &env);
    assert!(!run.ok);
    run.assert_no_token();
    // Nothing changed on `v1`: 1 of 3 commits are staged on `kbuild-staging-v1-…`; a re-run
    // continues from the staged commits.
    insta::assert_snapshot!(
        "interrupted_staging_stderr",
        without_delays(&redacted(
            &run.stderr,
            &hub,
            &[(project.path(), "[project]")]
        ))
    );

    let s = hub
        .publish_with(&build, &["--repo", REPO, "--json"], &env)
        .success()
        .json();
    // `v1` never held the staged commit: all of `torch-cpu` is still new to it.
    assert_eq!(s["added"].as_array().unwrap().len(), 5, "{s}");
    assert_eq!(s["unchanged"], 5);
    assert_eq!(s["card"], "updated");
}

#[test]
fn private_repositories_are_created_private() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    publish_json(&hub, &build, &["--private"]);
    let (status, _) = hub.request("GET", "/api/kernels/org/relu", b"");
    assert_eq!(status, 401, "anonymous reads of a private repo must fail");
}

#[test]
fn benchmarks_are_published_and_replaced_as_a_whole() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let bench = project.path().join("benchmarks");
    std::fs::create_dir_all(bench.join("__pycache__")).unwrap();
    std::fs::write(bench.join("benchmark_relu.py"), "def bench(): pass\n").unwrap();
    std::fs::write(bench.join("old.py"), "x = 1\n").unwrap();
    std::fs::write(bench.join("__pycache__/old.cpython-311.pyc"), "cache").unwrap();
    let s = publish_json(&hub, &build, &[]);
    let added: Vec<&str> = s["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(added.contains(&"benchmarks/benchmark_relu.py"));
    assert!(
        !added.iter().any(|p| p.contains("__pycache__")),
        "{added:?}"
    );

    std::fs::remove_file(bench.join("old.py")).unwrap();
    let s = publish_json(&hub, &build, &[]);
    assert_eq!(s["deleted"], json!(["benchmarks/old.py"]));
}

#[test]
fn publishing_to_main_puts_files_and_card_in_one_commit() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let s = publish_json(&hub, &build, &["--branch", "main"]);
    assert_eq!(s["card"], "added");
    assert_eq!(s["commits"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(s["commits"][0]["files"], 6);
    assert_eq!(
        publish_json(&hub, &build, &["--branch", "main"])["up_to_date"],
        true
    );
}
