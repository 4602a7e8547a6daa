//! Hints that say what happened: a build stopped by Ctrl-C while linking says a signal stopped
//! the linker (not "the linker's output above says what failed"), and a `kbuild.lock` that is
//! not UTF-8 says so (not "check the permissions and free space").

use std::time::{Duration, Instant};

use crate::common::fake_cc::make_executable;
use crate::common::kbuild::{fixture, kbuild, run};

#[test]
fn ctrl_c_during_the_link_is_said_to_be_a_signal() {
    let project = fixture("relu-v5");
    let root = project.path();
    let marker = root.join("linking");
    // g++ for everything, but a link (`-shared`) first says so and waits.
    let cxx = root.join("slow-link-g++");
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = -shared ]; then touch '{}'; sleep 60; fi\n\
         done\nexec g++ \"$@\"\n",
        marker.display()
    );
    std::fs::write(&cxx, script).unwrap();
    make_executable(&cxx);
    let child = kbuild(root)
        .args(["build", "--backend", "cpu"])
        .env("CXX", &cxx)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the link never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        !stderr.contains("the linker's output above says what failed"),
        "{stderr}"
    );
    assert!(stderr.contains("a signal stopped the linker"), "{stderr}");
}

#[test]
fn a_kbuild_lock_that_is_not_utf8_says_so() {
    let project = fixture("relu-v5");
    let root = project.path();
    std::fs::write(root.join("kbuild.lock"), b"version = 1\n\xff\xfe\n").unwrap();
    let out = run(kbuild(root).args(["build", "--dry-run"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stderr.contains("free space"), "{stderr}");
    assert!(stderr.contains("is not UTF-8 text"), "{stderr}");
}
