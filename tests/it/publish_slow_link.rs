//! Uploads over a slow link (`kbuild-hub-server --read-rate`) are bounded by silence, not by
//! their length: a commit carrying a text file inline (under the LFS threshold) and an LFS
//! object whose last bytes drain from the send buffer long after the connection took them each
//! finish in one attempt under an upload timeout far shorter than they take.

use std::time::{Duration, Instant};

use crate::common::hub::{Hub, TOKEN};
use crate::common::variant::{VariantSpec, project_with_variant, write_variant};

const REPO: &str = "org/relu";

/// The log lines of `method` requests whose path holds `part`.
fn requests(hub: &Hub, method: &str, part: &str) -> usize {
    let start = format!("{method} ");
    (hub.log().iter())
        .filter(|l| l.starts_with(&start) && l.contains(part))
        .count()
}

#[test]
fn an_inline_commit_on_a_slow_link_outlasts_the_upload_timeout() {
    // 6 MB of text: 8 MB of base64 in the commit's body, 20 s at 400 kB/s; the limit on silence
    // is 12 s.
    let hub = Hub::start(&["--read-rate", "400000"]);
    let (project, build) = project_with_variant();
    let benchmarks = project.path().join("benchmarks");
    std::fs::create_dir_all(&benchmarks).unwrap();
    let line = "step,seconds,throughput\n";
    std::fs::write(
        benchmarks.join("results.csv"),
        line.repeat(6_000_000 / line.len()),
    )
    .unwrap();
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_HUB_UPLOAD_TIMEOUT", "12")];
    let started = Instant::now();
    let run = hub.publish_with(&build, &["--repo", REPO], &env);
    let took = started.elapsed();
    assert!(run.ok, "{}\n{:?}", run.stderr, hub.log());
    assert!(!run.stderr.contains("timed out"), "{}", run.stderr);
    assert!(
        took >= Duration::from_secs(15),
        "the link was slow: {took:?}"
    );
    let commits = requests(&hub, "POST", "/commit/");
    assert_eq!(
        commits,
        hub.commits_made(),
        "no attempt failed: {:?}",
        hub.log()
    );
}

#[test]
fn an_lfs_object_whose_last_bytes_drain_slowly_outlasts_the_upload_timeout() {
    // 1 MiB at 50 kB/s: 20 s. Loopback's send buffer takes all of it within a second; the rest
    // is the buffer draining, with a limit on silence of 4 s.
    let hub = Hub::start(&["--read-rate", "51200"]);
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    let so: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let spec = VariantSpec {
        so: Some(so),
        ..Default::default()
    };
    write_variant(&build, &spec);
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_HUB_UPLOAD_TIMEOUT", "4")];
    let started = Instant::now();
    let run = hub.publish_with(&build, &["--repo", REPO, "--skip-check"], &env);
    let took = started.elapsed();
    assert!(run.ok, "{}\n{:?}", run.stderr, hub.log());
    assert!(!run.stderr.contains("timed out"), "{}", run.stderr);
    assert!(
        took >= Duration::from_secs(15),
        "the link was slow: {took:?}"
    );
    assert_eq!(
        requests(&hub, "PUT", "/_lfs/"),
        1,
        "one upload: {:?}",
        hub.log()
    );
}
