//! Commands whose stdout is closed (`| head -0`) or full (`>/dev/full`): no panic (exit 101).
//! A closed reader ends the command quietly with 141; a full stdout is an error naming it.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::hub::{Hub, TOKEN};
use crate::common::variant::project_with_variant;

/// Run `cmd` with a stdout pipe whose reader is closed before kbuild writes.
fn with_closed_stdout(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kbuild");
    drop(child.stdout.take());
    let mut stderr = Vec::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    Output {
        status,
        stdout: Vec::new(),
        stderr,
    }
}

fn with_full_stdout(cmd: &mut Command) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    cmd.stdout(full).output().expect("run kbuild")
}

fn kbuild(project: &Path) -> Command {
    let mut cmd = crate::common::kbuild::bin();
    cmd.arg("-C").arg(project);
    cmd
}

fn noarch() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/silu-noarch")
}

fn commands() -> Vec<Vec<&'static str>> {
    vec![
        vec!["completions", "bash"],
        vec!["list-variants"],
        vec!["list-variants", "--json"],
        vec!["build", "--dry-run"],
        vec!["build", "--dry-run", "--json"],
        vec!["check-config", "--json"],
    ]
}

#[test]
fn a_closed_stdout_ends_each_command_quietly_without_a_panic() {
    for args in commands() {
        let out = with_closed_stdout(kbuild(&noarch()).args(&args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error:"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_full_stdout_is_an_error_that_says_so() {
    for args in commands() {
        let out = with_full_stdout(kbuild(&noarch()).args(&args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("error: cannot write to stdout")
                && stderr.contains("No space left on device"),
            "{args:?}: {stderr}"
        );
    }
}

fn publish(hub: &Hub, build: &Path) -> Command {
    let project = build.parent().unwrap();
    let mut cmd = kbuild(project);
    cmd.args(["publish", "--repo", "org/relu", "--json", "--build-dir"])
        .arg(build)
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", project.join(".hf-home-empty"))
        .env("HF_TOKEN", TOKEN);
    cmd
}

/// Decided: the commits are made first (stdout cannot be known to stay open until the summary
/// is printed), then the command exits 141 with a note on stderr that the publish completed.
#[test]
fn publish_json_into_a_closed_pipe_commits_then_exits_141_saying_it_published() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let out = with_closed_stdout(&mut publish(&hub, &build));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(
        stderr
            .contains("published to `org/relu` branch `v1`, but the summary could not be written"),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN));
    assert_eq!(hub.commits_made(), 2);
}

#[test]
fn publish_json_into_a_full_stdout_fails_after_publishing_and_says_both() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let out = with_full_stdout(&mut publish(&hub, &build));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("published to `org/relu`"), "{stderr}");
    assert!(stderr.contains("error: cannot write to stdout"), "{stderr}");
    assert!(!stderr.contains(TOKEN));
}
