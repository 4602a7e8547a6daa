//! `kill -9` of kbuild while real compilers run (issue #26 item 11): no c++, cc1plus or `as`
//! of the build survives it. SIGKILL cannot be caught, so this is the watcher's work (`reaper`)
//! and the parent-death signal, not kbuild's interrupt handling.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::kbuild::{fixture, kbuild};

/// `(pid, ppid, pgrp, comm)` of every live (non-zombie) process.
fn processes() -> Vec<(u32, u32, u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if rest.len() < 4 || rest[0] == "Z" || rest[0] == "X" {
            continue;
        }
        let num = |i: usize| rest[i].parse::<u32>().unwrap_or(0);
        out.push((pid, num(1), num(2), comm));
    }
    out
}

/// The live processes below `root`, as `(pid, pgrp, comm)`.
fn descendants(root: u32) -> Vec<(u32, u32, String)> {
    let all = processes();
    let mut found = vec![root];
    let mut out = Vec::new();
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid, pgrp, comm) in &all {
            if found.contains(ppid) && !found.contains(pid) {
                found.push(*pid);
                out.push((*pid, *pgrp, comm.clone()));
                grew = true;
            }
        }
    }
    out
}

#[test]
fn kill_9_of_kbuild_leaves_no_compiler_running() {
    let project = fixture("relu-v5");
    let mut child = kbuild(project.path())
        .args(["build", "--backend", "cpu", "-j", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let kbuild_pid = child.id();
    let started = Instant::now();
    // A cc1plus compiling a unit of the fixture (the toolchain's own probes run cc1plus too).
    let compiling = |pid: u32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("torch-ext"))
    };
    let compilers = loop {
        let below = descendants(kbuild_pid);
        if below
            .iter()
            .any(|(pid, _, comm)| comm == "cc1plus" && compiling(*pid))
        {
            break below;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300) && child.try_wait().unwrap().is_none(),
            "no cc1plus started under kbuild"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // The groups kbuild's children are in, but not kbuild's own (that of this test too).
    let own = processes()
        .into_iter()
        .find(|(pid, ..)| *pid == std::process::id())
        .map(|(_, _, pgrp, _)| pgrp);
    let groups: Vec<u32> = compilers
        .iter()
        .map(|(_, pgrp, _)| *pgrp)
        .filter(|g| Some(*g) != own)
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    let survivors = loop {
        let survivors: Vec<(u32, u32, u32, String)> = processes()
            .into_iter()
            .filter(|(pid, _, pgrp, _)| {
                compilers.iter().any(|(p, _, _)| p == pid) || groups.contains(pgrp)
            })
            .collect();
        if survivors.is_empty() || Instant::now() > deadline {
            break survivors;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        survivors.is_empty(),
        "still running 10 s after kill -9 of kbuild: {survivors:?} (compilers were {compilers:?})"
    );
}
