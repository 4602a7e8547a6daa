//! The runner: parallel units under a jobs limit, first failure stops the rest, spawn errors.

use std::convert::Infallible;
use std::error::Error as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::fake_cc::{FakeCompiler, job, write};
use kbuild::compile::{CompileError, CompileSettings, compile_all};
use kbuild::hint::Hint;
use kbuild::report::{Recorder, UnitOutcome};
use kbuild::schedule::NvccMode;
use kbuild::schedule::{JobError, Unit, run_jobs};

fn settings(root: &Path, jobs: usize) -> CompileSettings {
    CompileSettings::local(root.join("cache"), jobs, NvccMode::Threads)
}

fn process_is_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        // A zombie is dead; it only waits for its (new) parent to reap it.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z'),
    }
}

#[test]
fn first_failure_stops_running_and_queued_units() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cc = FakeCompiler::new(root);
    write(root, "slow.cpp", "// SLEEP 30\n");
    write(root, "bad.cpp", "// SLEEP 1\n#error broken\n");
    write(root, "queued.cpp", "int q;\n");
    let jobs = vec![
        job(root, &cc.path, "slow.cpp"),
        job(root, &cc.path, "bad.cpp"),
        job(root, &cc.path, "queued.cpp"),
    ];
    let recorder = Recorder::default();
    let started = Instant::now();
    let err = compile_all(&jobs, &settings(root, 2), &recorder).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the slow unit was not killed: {:?}",
        started.elapsed()
    );

    let CompileError::CommandFailed { label, stderr, .. } = &err else {
        panic!("unexpected error: {err:?}");
    };
    assert_eq!(label, "bad.cpp");
    assert!(
        stderr.ends_with("bad.cpp:1: error: #error boom"),
        "{stderr}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("compiling `bad.cpp` failed: `"),
        "{message}"
    );
    assert!(message.contains("` exited with status 1\n"), "{message}");
    // The command shown reproduces the compile into the real object path.
    let object = root.join("obj/bad.o");
    assert!(
        message.contains(&format!(" -o {} ", object.display())),
        "{message}"
    );
    assert!(!message.contains(".tmp-"), "{message}");
    assert!(message.ends_with("error: #error boom"), "{message}");
    assert!(
        err.hint()
            .unwrap()
            .contains("command line shown reproduces it")
    );

    // The fake compiler's shell and the `sleep` it started were both killed. kbuild reaps the
    // shell; the `sleep`, killed with its process group, dies as soon as the kernel schedules it
    // (on a loaded machine a moment after `compile_all` returns), so it gets a few seconds: far
    // less than the 30 s it would sleep if it had not been killed.
    for file in ["slow.cpp.pid", "slow.cpp.sleeppid"] {
        let pid = std::fs::read_to_string(root.join(file)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !process_is_gone(&pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(process_is_gone(&pid), "{file}: process {pid} still runs");
    }
    assert_eq!(cc.take_compiled(), ["bad.cpp", "slow.cpp"]);
    let events = recorder.take();
    assert!(events.contains(&"Failed bad.cpp".to_string()), "{events:?}");
    assert!(
        !events.iter().any(|e| e.contains("queued.cpp")),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| e.starts_with("Compiled")),
        "{events:?}"
    );
}

#[test]
fn missing_compiler_is_a_spawn_error_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.cpp", "int a;\n");
    let missing = root.join("no-such-g++");
    let err = compile_all(
        &[job(root, &missing, "a.cpp")],
        &settings(root, 1),
        &Recorder::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CompileError::Spawn { .. }), "{err:?}");
    // The cause is the error's source, printed once by `main`, not repeated in the message.
    assert_eq!(
        err.to_string(),
        format!(
            "compiling `a.cpp` failed: cannot run `{}`",
            missing.display()
        )
    );
    assert_eq!(
        err.source().unwrap().to_string(),
        "No such file or directory (os error 2)"
    );
    assert!(err.hint().unwrap().contains("C++ compiler"));
}

#[test]
fn compiler_without_depfile_support_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.cpp", "int a;\n");
    // Writes the object but ignores -MF.
    let cc = root.join("nodeps");
    std::fs::write(
        &cc,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && touch \"$2\"; shift; done\n",
    )
    .unwrap();
    crate::common::fake_cc::make_executable(&cc);
    let err = compile_all(
        &[job(root, &cc, "a.cpp")],
        &settings(root, 1),
        &Recorder::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CompileError::Depfile { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("compiling `a.cpp`: cannot read the dependency file")
    );
    assert!(
        !root.join("obj/a.o").exists(),
        "no object without a cache entry"
    );
}

struct Work(&'static str);

impl Unit for Work {
    fn label(&self) -> &str {
        self.0
    }
}

#[test]
fn never_more_units_run_than_the_jobs_limit_and_outcomes_keep_their_order() {
    let units: Vec<Work> = ["a", "b", "c", "d", "e", "f"]
        .into_iter()
        .map(Work)
        .collect();
    let running = AtomicUsize::new(0);
    let peak = AtomicUsize::new(0);
    let outcomes = run_jobs(&units, 2, &Recorder::default(), |unit, _cancel| {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        running.fetch_sub(1, Ordering::SeqCst);
        Ok::<_, JobError<Infallible>>(if unit.0 < "c" {
            UnitOutcome::Cached
        } else {
            UnitOutcome::Compiled
        })
    })
    .unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    assert_eq!(
        outcomes,
        [
            UnitOutcome::Cached,
            UnitOutcome::Cached,
            UnitOutcome::Compiled,
            UnitOutcome::Compiled,
            UnitOutcome::Compiled,
            UnitOutcome::Compiled
        ]
    );
}

#[test]
fn every_unit_is_reported_started_and_finished() {
    let units: Vec<Work> = ["x", "y"].into_iter().map(Work).collect();
    let recorder = Recorder::default();
    run_jobs(&units, 1, &recorder, |_, _| {
        Ok::<_, JobError<Infallible>>(UnitOutcome::Compiled)
    })
    .unwrap();
    assert_eq!(
        recorder.take(),
        ["begin 2", "start x", "Compiled x", "start y", "Compiled y"]
    );
}
