//! SIGINT/SIGTERM to `kbuild build` while compilers run (issue #9): the compilers' process trees
//! are killed as on a first failure, their temporary objects removed, and kbuild exits with
//! 128 + the signal.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::kbuild::{fixture, kbuild};

/// A C++ compiler that answers toolchain probes through the real `g++`, and for a compile
/// (`-c`) writes a partial object to `-o`, records its pid and that of a child `sleep` in
/// `pids`, and waits for the child: a slow compile with a process tree under it.
fn slow_compiler(dir: &Path, pids: &Path) -> PathBuf {
    let path = dir.join("slowcxx");
    std::fs::write(
        &path,
        format!(
            r#"#!/bin/sh
obj= prev= compile=
for a in "$@"; do
  [ "$prev" = "-o" ] && obj=$a
  [ "$a" = "-c" ] && compile=1
  prev=$a
done
[ -z "$compile" ] && exec g++ "$@"
echo partial > "$obj"
echo $$ >> '{pids}'
sleep 300 &
echo $! >> '{pids}'
wait
"#,
            pids = pids.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Gone, or a zombie (the container's init may not reap orphans).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// Where `pid`'s threads wait (state and kernel wait channel) and which of `compilers` live.
fn stuck_state(pid: u32, compilers: &[u32]) -> String {
    let read = |path: String| std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let tid = task.file_name().to_string_lossy().into_owned();
            let stat = read(format!("/proc/{pid}/task/{tid}/stat"));
            let state = stat.rfind(')').map_or("", |i| stat[i + 1..].trim_start());
            let wchan = read(format!("/proc/{pid}/task/{tid}/wchan"));
            lines.push(format!(
                "thread {tid}: {} wchan {wchan}",
                state.split(' ').next().unwrap_or("?")
            ));
        }
    }
    for c in compilers {
        lines.push(format!("compiler process {c} gone: {}", process_gone(*c)));
    }
    lines.join("\n")
}

fn temporaries(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy();
            name.starts_with(".tmp-") || name.starts_with(".stage-") || name.starts_with(".old-")
        })
        .map(|e| e.into_path())
        .collect()
}

fn interrupt_build(signal: i32, expected_code: i32) {
    let project = fixture("relu-v5");
    let root = project.path();
    let tools = tempfile::tempdir().unwrap();
    let pids_file = tools.path().join("pids");
    let cxx = slow_compiler(tools.path(), &pids_file);

    let mut cmd = kbuild(root);
    // A shell starts background commands with SIGINT ignored, and kbuild keeps an ignored
    // signal ignored (as `nohup` expects): give kbuild the default disposition, whatever the
    // test runner inherited, so that the test checks kbuild's own handling.
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd
        .args(["build", "--backend", "cpu", "-j", "2"])
        .env("CXX", &cxx)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both units compiling: two compilers, each with its `sleep`.
    let started = Instant::now();
    let pids: Vec<u32> = loop {
        let pids: Vec<u32> = std::fs::read_to_string(&pids_file)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.len() == 4 {
            break pids;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "kbuild ended before compiling"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the compilers never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let objects = root.join("build/.kbuild");
    assert!(
        !temporaries(&objects).is_empty(),
        "no partial objects written"
    );

    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let stopped = Instant::now();
    let out = loop {
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap();
        }
        if stopped.elapsed() > Duration::from_secs(20) {
            // Say where each of kbuild's threads waits and which compiler processes are left,
            // before killing it.
            let state = stuck_state(child.id(), &pids);
            let _ = child.kill();
            panic!("kbuild still ran 20 s after the signal\n{state}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert_eq!(out.status.code(), Some(expected_code), "{stderr}");
    let name = if signal == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    assert!(
        stderr.contains(&format!("compiling stopped: interrupted by {name}")),
        "{stderr}"
    );
    for pid in &pids {
        assert!(process_gone(*pid), "compiler process {pid} outlived kbuild");
    }
    assert_eq!(temporaries(&objects), Vec::<PathBuf>::new());
    assert!(!root.join("build/torch215-cxx11-cpu-x86_64-linux").exists());
}

#[test]
fn sigint_kills_the_running_compilers_removes_their_objects_and_exits_130() {
    interrupt_build(libc::SIGINT, 130);
}

#[test]
fn sigterm_kills_the_running_compilers_removes_their_objects_and_exits_143() {
    interrupt_build(libc::SIGTERM, 143);
}
