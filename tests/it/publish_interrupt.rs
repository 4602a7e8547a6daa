//! Publishes cut short (a failing Hub, Ctrl-C): the branch keeps the old build or gets the new
//! one whole; `main` is staged like any other branch; a branch is never left missing.

use std::os::unix::process::CommandExt as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::hub::{Hub, TOKEN};
use crate::common::variant::{CPU_VARIANT, project_with_variant, redigest, write_second_variant};

const REPO: &str = "org/relu";

fn tree(hub: &Hub, rev: &str) -> Option<Value> {
    let path = format!("/api/kernels/org/relu/tree/{rev}?recursive=true");
    let (status, body) = hub.request("GET", &path, b"");
    (status == 200).then(|| serde_json::from_str(&body).unwrap())
}

#[test]
fn a_multi_commit_publish_to_main_that_fails_midway_leaves_main_untouched() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let main_args = ["--repo", REPO, "--branch", "main"];
    hub.publish(&build, &main_args).success();
    let before = tree(&hub, "main").unwrap();

    let variant = build.join(CPU_VARIANT);
    std::fs::write(variant.join("__init__.py"), "from ._ops import ops\n").unwrap();
    redigest(&variant);
    write_second_variant(&build);
    // The first commit lands, the second fails on every attempt.
    hub.arm("commit:500:5:1");
    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", "2")];
    let run = hub.publish_with(&build, &main_args, &env);
    assert!(!run.ok, "{}", run.stderr);
    assert!(
        run.stderr.contains("nothing changed on `main`"),
        "{}",
        run.stderr
    );
    assert_eq!(tree(&hub, "main").unwrap(), before, "main was half-updated");

    // Once the Hub recovers, a re-run lands the whole build on main.
    let run = hub.publish_with(&build, &main_args, &env).success();
    assert!(run.stderr.contains("Resuming"), "{}", run.stderr);
    let after = tree(&hub, "main").unwrap();
    let files = after.as_array().unwrap().iter();
    let built = files.filter(|e| e["path"].as_str().unwrap().starts_with("build/"));
    assert_eq!(built.filter(|e| e["type"] == "file").count(), 10, "{after}");
}

/// Ctrl-C while the Hub holds the last step of a multi-commit publish (whichever request that
/// is: the landing commit, or the re-creation of a branch moved by deleting it).
#[test]
fn ctrl_c_at_the_last_step_of_a_publish_never_leaves_the_branch_missing() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    write_second_variant(&build);
    hub.publish(&build, &["--repo", REPO, "--variant", CPU_VARIANT])
        .success();
    let before = tree(&hub, "v1").unwrap();

    // Three staged commits of the other variant, then the last step hangs.
    hub.arm("commit:hang,for=60s:1:3");
    hub.arm("branch:hang,for=60s:1:3");
    let mut cmd = crate::common::kbuild::bin();
    // A test run started in the background by a non-interactive shell inherits SIGINT ignored,
    // and so would kbuild: give it the terminal's default, as a user's Ctrl-C finds it.
    // SAFETY: signal(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd
        .arg("-C")
        .arg(project.path())
        .args(["publish", "--build-dir"])
        .arg(&build)
        .args(["--repo", REPO, "--variant", "torch-cpu"])
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", project.path().join(".hf-home-empty"))
        .env("HF_TOKEN", TOKEN)
        .env("KBUILD_PUBLISH_BATCH_FILES", "2")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !hub.log().iter().any(|l| l.contains("-> hang")) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no request hung: {:?}",
            hub.log()
        );
        assert!(child.try_wait().unwrap().is_none(), "kbuild ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert_eq!(
        tree(&hub, "v1"),
        Some(before),
        "after Ctrl-C `v1` is gone or changed; requests: {:?}",
        hub.log()
    );
}
