//! What a `kbuild pack` or `kbuild wheel` killed while writing left in the dist directory (a
//! `.tmp-<pid>-*` file of a process that is gone) is removed by the next one; a live process's
//! temporary stays.

use std::path::Path;

use crate::common::kbuild::{fixture, kbuild, run};

/// A pid that no process has now.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Leftovers of a dead writer and a live one's temporary in `dist`: their paths.
fn leftovers(dist: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    std::fs::create_dir_all(dist).unwrap();
    let dead = dist.join(format!(".tmp-{}-a1b2c3", dead_pid()));
    let live = dist.join(format!(".tmp-{}-d4e5f6", std::process::id()));
    std::fs::write(&dead, vec![0u8; 1 << 20]).unwrap();
    std::fs::write(&live, b"in use").unwrap();
    (dead, live)
}

#[test]
fn the_next_wheel_or_pack_removes_what_a_killed_one_left_in_dist() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let dist = root.join("dist");
    let (dead, live) = leftovers(&dist);
    assert!(run(kbuild(root).arg("wheel")).status.success());
    assert!(!dead.exists(), "the dead writer's temporary is still there");
    assert!(live.exists(), "a live writer's temporary was removed");

    let (dead, _) = leftovers(&dist);
    assert!(run(kbuild(root).arg("pack")).status.success());
    assert!(!dead.exists(), "the dead writer's temporary is still there");
    assert!(live.exists());
}
