//! `kbuild publish` against a Hub that fails on purpose (the local server's fault injection):
//! between commits, by never answering, by asking to wait, by losing the answer to a commit
//! that landed; and against tokens that an HTTP header cannot carry.

use std::time::{Duration, Instant};

use crate::common::hub::{Hub, TOKEN};
use crate::common::variant::{CPU_VARIANT, project_with_variant, redigest, write_second_variant};
use crate::publish_cli::{redacted, streams, without_delays};
use serde_json::Value;

const REPO: &str = "org/relu";

fn get_json(hub: &Hub, path: &str) -> Value {
    let (status, body) = hub.request("GET", path, b"");
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

fn v1_metadata(hub: &Hub) -> String {
    let path = format!("/kernels/org/relu/resolve/v1/build/{CPU_VARIANT}/metadata.json");
    let (status, body) = hub.request("GET", &path, b"");
    assert_eq!(status, 200, "{body}");
    body
}

fn branches(hub: &Hub) -> Vec<String> {
    get_json(hub, "/api/kernels/org/relu/refs")["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_failure_between_commits_leaves_the_branch_at_the_old_build_and_a_rerun_moves_it_once() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let paths = [(project.path(), "[project]")];
    hub.publish(&build, &["--repo", REPO, "--json"]).success();
    let old_tree = get_json(&hub, "/api/kernels/org/relu/tree/v1?recursive=true");
    let old_metadata = v1_metadata(&hub);

    // A new build of the variant plus a second one: five commits of two files each.
    let variant = build.join(CPU_VARIANT);
    std::fs::write(variant.join("__init__.py"), "from ._ops import ops\n").unwrap();
    redigest(&variant);
    write_second_variant(&build);
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", "2")];
    let log_before = hub.log().len();
    // The first commit lands, the next one fails on every attempt.
    hub.arm("commit:500:5:1");
    let run = hub.publish_with(&build, &["--repo", REPO], &env);
    assert!(!run.ok, "{}", run.stderr);
    run.assert_no_token();
    // Nothing changed on `v1`: 1 of 5 commits are staged.
    insta::assert_snapshot!(
        "failure_between_commits_stderr",
        without_delays(&redacted(&run.stderr, &hub, &paths))
    );
    let failed_run: Vec<String> = hub.log()[log_before..].to_vec();
    assert!(
        !failed_run.iter().any(|l| l.contains("/branch/v1 ")),
        "the failed run touched `v1`: {failed_run:?}"
    );
    assert_eq!(
        get_json(&hub, "/api/kernels/org/relu/tree/v1?recursive=true"),
        old_tree
    );
    assert_eq!(v1_metadata(&hub), old_metadata);

    let run = hub.publish_with(&build, &["--repo", REPO], &env).success();
    // Resuming from branch `kbuild-staging-v1-…`, then moving `v1` once.
    insta::assert_snapshot!(
        "rerun_after_failure_stderr",
        redacted(&run.stderr, &hub, &paths)
    );
    let metadata: Value = serde_json::from_str(&v1_metadata(&hub)).unwrap();
    let local: Value =
        serde_json::from_slice(&std::fs::read(variant.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(metadata["digest"], local["digest"]);
    let tree = get_json(&hub, "/api/kernels/org/relu/tree/v1/build?recursive=true");
    let files = tree
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "file");
    assert_eq!(files.count(), 10, "{tree}");
    assert_eq!(
        branches(&hub),
        ["main", "v1"],
        "the staging branch is removed"
    );
}

#[test]
fn a_server_that_never_answers_times_out_with_a_line_per_retry_naming_the_endpoint() {
    let hub = Hub::start(&["--fail", "info:hang:100"]);
    let (project, build) = project_with_variant();
    let started = Instant::now();
    let run = hub.publish_with(
        &build,
        &["--repo", REPO],
        &[
            ("HF_TOKEN", TOKEN),
            ("KBUILD_HUB_TIMEOUT", "1"),
            ("KBUILD_HUB_DEADLINE", "60"),
        ],
    );
    assert!(!run.ok);
    run.assert_no_token();
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "took {:?}",
        started.elapsed()
    );
    // Four retries, each a line naming the endpoint, then the error with a hint to raise
    // `KBUILD_HUB_TIMEOUT`.
    insta::assert_snapshot!(
        "server_never_answers_stderr",
        without_delays(&redacted(
            &run.stderr,
            &hub,
            &[(project.path(), "[project]")]
        ))
    );
}

#[test]
fn the_deadline_ends_the_retries_of_a_step() {
    let hub = Hub::start(&["--fail", "refs:hang:100"]);
    let (_project, build) = project_with_variant();
    let env = [
        ("HF_TOKEN", TOKEN),
        ("KBUILD_HUB_TIMEOUT", "1"),
        ("KBUILD_HUB_DEADLINE", "2"),
    ];
    let started = Instant::now();
    let run = hub.publish_with(&build, &["--repo", REPO], &env);
    assert!(!run.ok);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        run.stderr.contains("timed out after 1 s ("),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("(5 attempts)"), "{}", run.stderr);
}

#[test]
fn a_hung_commit_is_retried_after_the_upload_timeout_and_lands_once() {
    let hub = Hub::start(&["--fail", "commit:hang,for=20s"]);
    let (_project, build) = project_with_variant();
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_HUB_UPLOAD_TIMEOUT", "3")];
    let run = hub
        .publish_with(&build, &["--repo", REPO, "--json"], &env)
        .success();
    insta::assert_snapshot!(
        "hung_commit_stderr",
        without_delays(&redacted(&run.stderr, &hub, &[]))
    );
    assert_eq!(hub.commits_made(), 2, "{:?}", hub.log());
}

#[test]
fn retry_after_on_a_503_is_waited_for() {
    let hub = Hub::start(&["--fail", "refs:503,retry-after=2"]);
    let (_project, build) = project_with_variant();
    let started = Instant::now();
    let run = hub.publish(&build, &["--repo", REPO, "--json"]).success();
    assert!(started.elapsed() >= Duration::from_secs(2));
    // The server's 2 s, not a backoff of kbuild's own: no delay is redacted here.
    insta::assert_snapshot!("retry_after_stderr", redacted(&run.stderr, &hub, &[]));
}

#[test]
fn a_commit_whose_answer_was_lost_is_found_on_the_branch_and_not_sent_again() {
    let hub = Hub::start(&["--fail", "commit:lose-response"]);
    let (_project, build) = project_with_variant();
    let run = hub.publish(&build, &["--repo", REPO, "--json"]).success();
    insta::assert_snapshot!(
        "lost_answer_stderr",
        without_delays(&redacted(&run.stderr, &hub, &[]))
    );
    let log = hub.log();
    let commits: Vec<&String> = log.iter().filter(|l| l.contains("/commit/")).collect();
    assert_eq!(
        commits.len(),
        2,
        "one commit to `v1`, one card: {commits:?}"
    );
    assert!(commits[0].contains("[response lost] -> 200"), "{commits:?}");
    let refs = get_json(&hub, "/api/kernels/org/relu/refs");
    let v1 = refs["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "v1")
        .unwrap();
    assert_eq!(run.json()["commits"][0]["oid"], v1["targetCommit"]);
}

#[test]
fn a_lost_answer_to_a_new_pull_request_opens_no_second_one() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    hub.publish(&build, &["--repo", REPO, "--json"]).success();
    let variant = build.join(CPU_VARIANT);
    std::fs::write(variant.join("__init__.py"), "from ._ops import ops\n").unwrap();
    redigest(&variant);
    hub.arm("commit:lose-response");
    let run = hub
        .publish(&build, &["--repo", REPO, "--json", "--create-pr"])
        .success();
    let summary = run.json();
    assert_eq!(summary["commits"][0]["pr_num"], 1, "{}", run.stdout);
    // One pull request per commit made (the variant's, and the card's on `main`), none twice.
    let refs = get_json(&hub, "/api/kernels/org/relu/refs?include_prs=1");
    assert_eq!(
        refs["pullRequests"].as_array().unwrap().len(),
        summary["commits"].as_array().unwrap().len(),
        "{refs}\n{}",
        run.stderr
    );
}

/// The output of a run whose token was refused, for a snapshot. The server must not have been
/// asked anything (the token is refused before any request), and no part of it may leak.
fn refused_token(
    hub: &Hub,
    run: &crate::common::hub::Run,
    secret: &str,
    paths: &[(&std::path::Path, &str)],
) -> String {
    assert!(!run.ok);
    assert!(
        !run.stderr.contains(secret) && !run.stdout.contains(secret),
        "the token leaked: {}",
        run.stderr
    );
    assert!(hub.log().is_empty(), "{:?}", hub.log());
    streams(run, hub, paths)
}

#[test]
fn tokens_with_control_or_non_ascii_characters_are_refused_saying_what_is_wrong() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let paths = [(project.path(), "[project]")];
    let secret = "kbuildTestSecret";
    let with_escape = format!("hf_{secret}\u{1b}tail");
    let run = hub.publish_with(&build, &["--repo", REPO], &[("HF_TOKEN", &with_escape)]);
    // It holds a control character at position 20.
    insta::assert_snapshot!(
        "token_with_control_character",
        refused_token(&hub, &run, secret, &paths)
    );
    let with_quote = format!("\u{201c}hf_{secret}\u{201d}");
    let run = hub.publish_with(&build, &["--repo", REPO], &[("HF_TOKEN", &with_quote)]);
    // It holds a non-ASCII character at position 1.
    insta::assert_snapshot!(
        "token_with_non_ascii_character",
        refused_token(&hub, &run, secret, &paths)
    );
}

#[test]
fn a_token_file_with_a_non_ascii_character_is_named() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let home = project.path().join("hf-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("token"), "hf_kbuild\u{a0}TestSecret\n").unwrap();
    let home_str = home.to_string_lossy().into_owned();
    let run = hub.publish_with(&build, &["--repo", REPO], &[("HF_HOME", &home_str)]);
    // The token from `[project]/hf-home/token` cannot be sent.
    insta::assert_snapshot!(
        "token_file_with_non_ascii_character",
        refused_token(&hub, &run, "TestSecret", &[(project.path(), "[project]")])
    );
}

#[test]
fn a_non_utf8_hf_token_is_an_error_not_a_missing_token() {
    use std::os::unix::ffi::OsStrExt as _;
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let out = crate::common::kbuild::bin()
        .arg("-C")
        .arg(project.path())
        .args(["publish", "--repo", REPO, "--build-dir"])
        .arg(&build)
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", project.path().join(".hf-home-empty"))
        .env(
            "HF_TOKEN",
            std::ffi::OsStr::from_bytes(b"hf_kbuildTestSecret\xff"),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("kbuildTestSecret"), "{stderr}");
    // The token from `HF_TOKEN` cannot be sent: it is not valid UTF-8.
    insta::assert_snapshot!(
        "non_utf8_token_stderr",
        redacted(&stderr, &hub, &[(project.path(), "[project]")])
    );
    assert!(hub.log().is_empty());
}

/// Paths under `build/` on `v1`.
fn build_files(hub: &Hub) -> Vec<String> {
    let tree = get_json(hub, "/api/kernels/org/relu/tree/v1/build?recursive=true");
    let mut files: Vec<String> = tree
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "file")
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    files.sort();
    files
}

/// Older kbuild versions moved a branch by deleting and recreating it, behind a
/// `kbuild-moving-<branch>` marker at the staged head. A move that lost the branch is finished
/// by the next publish: the branch comes back with everything it held (variants published
/// from elsewhere) plus the new build.
#[test]
fn a_branch_an_older_kbuild_lost_while_moving_is_restored_with_its_other_variants() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let paths = [(project.path(), "[project]")];
    write_second_variant(&build);
    // `v1` holds one variant, published "from another machine".
    hub.publish(&build, &["--repo", REPO, "--variant", CPU_VARIANT])
        .success();
    let before = build_files(&hub);
    assert!(
        before
            .iter()
            .all(|p| p.starts_with(&format!("build/{CPU_VARIANT}/")))
    );
    // What an interrupted move of an older kbuild left: the marker, and no `v1`.
    let refs = get_json(&hub, "/api/kernels/org/relu/refs");
    let head = refs["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "v1")
        .unwrap()["targetCommit"]
        .as_str()
        .unwrap()
        .to_string();
    let body = serde_json::json!({"startingPoint": head}).to_string();
    let marker = "/api/kernels/org/relu/branch/kbuild-moving-v1";
    assert_eq!(hub.request("POST", marker, body.as_bytes()).0, 200);
    assert_eq!(
        hub.request("DELETE", "/api/kernels/org/relu/branch/v1", b"")
            .0,
        200
    );
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", "2")];
    let args = ["--repo", REPO, "--variant", "torch-cpu"];

    // A dry run says what the re-run will do and does nothing.
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let plan = hub.publish_with(&build, &dry, &env).success();
    // Would restore branch `v1` from `kbuild-moving-v1`.
    insta::assert_snapshot!("dry_run_after_lost_branch", streams(&plan, &hub, &paths));
    assert!(!branches(&hub).contains(&"v1".to_string()));

    hub.publish_with(&build, &args, &env).success();
    let after = build_files(&hub);
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

/// Branch requests (`POST`/`DELETE …/branch/…`) of a run, in order.
fn branch_requests(hub: &Hub, from: usize) -> Vec<String> {
    hub.log()[from..]
        .iter()
        .filter(|l| l.contains("/branch/"))
        .cloned()
        .collect()
}

#[test]
fn a_lost_answer_to_a_branch_create_or_delete_that_took_effect_is_not_a_failure() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    write_second_variant(&build);
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", "4")];
    // Learn which branch requests a staged publish makes, on a repository of its own.
    let probe = hub
        .publish_with(&build, &["--repo", "org/probe"], &env)
        .success();
    let calls = branch_requests(&hub, 0);
    assert!(
        calls.iter().any(|l| l.starts_with("POST "))
            && calls.iter().any(|l| l.starts_with("DELETE ")),
        "{calls:?}\n{}",
        probe.stderr
    );
    // Then lose the answer to each of them in turn: every run succeeds, with the same tree.
    let expected = get_json(&hub, "/api/kernels/org/probe/tree/v1?recursive=true");
    for (i, call) in calls.iter().enumerate() {
        let repo = format!("org/lost{i}");
        let before = hub.log().len();
        hub.arm(&format!("branch:lose-response:1:{i}"));
        let run = hub.publish_with(&build, &["--repo", &repo], &env);
        assert!(run.ok, "losing the answer to `{call}`:\n{}", run.stderr);
        run.assert_no_token();
        let lost: Vec<String> = branch_requests(&hub, before);
        assert!(
            lost.iter().any(|l| l.contains("[response lost]")),
            "{lost:?}"
        );
        let tree = get_json(&hub, &format!("/api/kernels/{repo}/tree/v1?recursive=true"));
        let paths = |t: &Value| -> Vec<String> {
            t.as_array()
                .unwrap()
                .iter()
                .map(|e| e["path"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(paths(&tree), paths(&expected), "losing `{call}`");
        let left: Vec<String> = branches_of(&hub, &repo)
            .into_iter()
            .filter(|b| b.starts_with("kbuild-"))
            .collect();
        assert!(left.is_empty(), "losing `{call}` left {left:?}");
    }
}

fn branches_of(hub: &Hub, repo: &str) -> Vec<String> {
    get_json(hub, &format!("/api/kernels/{repo}/refs"))["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn retry_after_on_502_and_503_is_honoured_for_preupload_and_commit() {
    let hub = Hub::start(&[
        "--fail",
        "preupload:502,retry-after=2",
        "--fail",
        "commit:503,retry-after=3",
    ]);
    let (_project, build) = project_with_variant();
    let started = Instant::now();
    let run = hub.publish(&build, &["--repo", REPO]).success();
    let waits: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("retrying in"))
        .collect();
    assert_eq!(waits.len(), 2, "{}", run.stderr);
    assert!(waits[0].contains("retrying in 2 s"), "{waits:?}");
    assert!(waits[1].contains("retrying in 3 s"), "{waits:?}");
    assert!(started.elapsed() >= Duration::from_secs(5));
}

#[test]
fn a_slow_but_steady_upload_outlasts_the_upload_timeout() {
    // 4 MiB/s: the 20 MiB extension takes about 5 s; the limit on silence is 3 s. (Loopback's
    // socket buffers take the last few MiB at once: at this rate they drain well within 3 s.)
    let hub = Hub::start(&["--read-rate", "4194304"]);
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    let so: Vec<u8> = (0..20 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    crate::common::variant::write_variant(
        &build,
        &crate::common::variant::VariantSpec {
            so: Some(so),
            ..Default::default()
        },
    );
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_HUB_UPLOAD_TIMEOUT", "3")];
    let started = Instant::now();
    let run = hub.publish_with(&build, &["--repo", REPO, "--skip-check"], &env);
    assert!(run.ok, "{}\n{:?}", run.stderr, hub.log());
    assert!(!run.stderr.contains("timed out"), "{}", run.stderr);
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        hub.log()
            .iter()
            .filter(|l| l.starts_with("PUT /_lfs/"))
            .count(),
        1,
        "one upload, no retry: {:?}",
        hub.log()
    );
}

#[test]
fn a_staged_publish_uploads_each_large_file_once_and_lands_it_by_reference() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    write_second_variant(&build);
    // Five commits of two files: staged, then landed on `v1` in one more commit.
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", "2")];
    hub.publish_with(&build, &["--repo", REPO], &env).success();
    let log = hub.log();
    let puts: Vec<&String> = log.iter().filter(|l| l.starts_with("PUT /_lfs/")).collect();
    // The two extensions (binary: LFS), each sent once although two commits name it.
    assert_eq!(puts.len(), 2, "{log:?}");
    assert!(hub.commits_made() >= 6, "{log:?}");
}
