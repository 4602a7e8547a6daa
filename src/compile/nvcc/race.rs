//! A `ptxas` that started on one thread, while other units still waited for the slots, can
//! turn out to be what the build waits for: once no unit waits to start and its unit's share
//! of the slots is three threads or more (`schedule::pass_split`), a copy of it, split over
//! that share at low priority, races it from the same input, and whichever finishes first is
//! kept. Split or not, `ptxas` writes the same cubin but for the thread count it records,
//! which kbuild writes back as 1 (`cubin.rs`), so the bytes are the same either way. Only
//! `ptxas` races: its one output is named by `-o`, while `cicc` also writes beside its PTX.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

use super::cubin::cubin_output;
use super::steps::{Step, StepKind};
use crate::process::{Cancel, CommandFailure, CommandSpec};
use crate::schedule::PassSplit;

/// How long a pass runs before a copy may race it: a shorter one ends before a copy gains.
const RACE_AFTER: Duration = Duration::from_secs(2);

/// How often the race looks at the slots and at its runners.
const POLL: Duration = Duration::from_millis(100);

/// The fewest threads a racing copy gets: with two, niced beside the original's one, it
/// would barely gain.
const MIN_RACE_THREADS: usize = 3;

/// What a race needs from the unit's steps.
pub(super) struct Race<'a> {
    /// The split a pass would get now (`schedule::pass_split`).
    pub split_now: &'a (dyn Fn() -> PassSplit + Sync),
    /// Runs a command on N threads under the build's memory gate (the step's own key).
    pub run: &'a (dyn Fn(&CommandSpec, usize, &Cancel) -> Result<Output, CommandFailure> + Sync),
    /// `spec` split over N threads (niced beyond one).
    pub split_over: &'a (dyn Fn(&CommandSpec, usize) -> CommandSpec + Sync),
    /// Says with `-v` what was raced, and which copy was kept.
    pub say: &'a (dyn Fn(String) + Sync),
}

/// Run `spec`, `step`'s command as it started with `threads`, racing a split copy of it when
/// it is a `ptxas` on one thread and the slots go idle while it runs (see the module).
pub(super) fn run_racing(
    spec: &CommandSpec,
    step: &Step,
    threads: usize,
    race: &Race,
    cancel: &Cancel,
) -> Result<Output, CommandFailure> {
    let output = cubin_output(step).filter(|_| step.kind == StepKind::Ptxas && threads == 1);
    let Some(output) = output else {
        return (race.run)(spec, threads, cancel);
    };
    let original = Cancel::new();
    let copy = Cancel::new();
    let copy_output = race_path(&output);
    let started = Instant::now();
    std::thread::scope(|scope| {
        let first = scope.spawn(|| (race.run)(spec, 1, &original));
        let mut racer: Option<(ScopedJoinHandle<_>, usize)> = None;
        let mut raced = false;
        loop {
            if cancel.is_cancelled() {
                original.cancel();
                copy.cancel();
            }
            if first.is_finished() {
                break;
            }
            if racer.as_ref().is_some_and(|(r, _)| r.is_finished()) {
                let (r, threads) = racer.take().expect("checked above");
                match r.join() {
                    Ok(Ok(out)) => {
                        original.cancel();
                        let _ = first.join();
                        return won_by_copy(out, &copy_output, &output, threads, step, race);
                    }
                    // The copy failed (memory, a signal): the original goes on alone.
                    _ => (race.say)(format!("`{}`: its racing copy stopped", step.label)),
                }
            }
            if !raced && started.elapsed() >= RACE_AFTER {
                let split = (race.split_now)();
                if split.threads >= MIN_RACE_THREADS {
                    raced = true;
                    let racing = with_output(spec, &output, &copy_output);
                    let racing = (race.split_over)(&racing, split.threads);
                    (race.say)(format!(
                        "`{}` raced by a copy {} after {:.1}s on one thread",
                        step.label,
                        split.late.as_deref().unwrap_or("split"),
                        started.elapsed().as_secs_f64()
                    ));
                    let (copy, threads) = (&copy, split.threads);
                    racer = Some((
                        scope.spawn(move || (race.run)(&racing, threads, copy)),
                        threads,
                    ));
                }
            }
            std::thread::sleep(POLL);
        }
        copy.cancel();
        if let Some((r, _)) = racer {
            let _ = r.join();
            (race.say)(format!(
                "`{}`: the pass that started first finished first; its copy stopped",
                step.label
            ));
        }
        let _ = std::fs::remove_file(&copy_output);
        first.join().unwrap_or_else(|_| Err(cancelled(spec)))
    })
}

/// The copy finished first: its cubin takes the original's place.
fn won_by_copy(
    out: Output,
    copy_output: &Path,
    output: &Path,
    threads: usize,
    step: &Step,
    race: &Race,
) -> Result<Output, CommandFailure> {
    if let Err(e) = std::fs::rename(copy_output, output) {
        return Err(CommandFailure::Spawn {
            program: output.to_path_buf(),
            command: format!("rename {} {}", copy_output.display(), output.display()),
            source: e,
        });
    }
    (race.say)(format!(
        "`{}`: its copy split over {threads} threads finished first and was kept",
        step.label
    ));
    Ok(out)
}

fn cancelled(spec: &CommandSpec) -> CommandFailure {
    CommandFailure::Cancelled {
        command: spec.to_string(),
    }
}

/// Where the racing copy writes: beside the original's output.
fn race_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".race");
    PathBuf::from(name)
}

/// `spec` writing `to` where it wrote `output` (its `-o` argument, as written or resolved
/// against its directory).
fn with_output(spec: &CommandSpec, output: &Path, to: &Path) -> CommandSpec {
    let mut out = spec.clone();
    let mut next_is_output = false;
    for arg in out.args.iter_mut() {
        if next_is_output {
            let named = Path::new(arg.as_os_str());
            let resolved = match &spec.cwd {
                Some(dir) if named.is_relative() => dir.join(named),
                _ => named.to_path_buf(),
            };
            if resolved == output {
                *arg = to.as_os_str().to_owned();
            }
        }
        next_is_output = arg == "-o" || arg == "--output-file";
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::process::run_cancellable;

    /// A `ptxas` stand-in whose speed follows its `-split-compile` count: one thread takes
    /// `slow` seconds, more take a tenth of a second; it writes its count to `-o`.
    fn fake_ptxas(dir: &Path, slow: u32) -> PathBuf {
        let path = dir.join("ptxas");
        let script = format!(
            "#!/bin/sh\nn=1; out=\nwhile [ $# -gt 0 ]; do case $1 in -split-compile=*) \
             n=${{1#-split-compile=}};; -o) out=$2; shift;; esac; shift; done\n\
             if [ $n = 1 ]; then sleep {slow}; else sleep 0.1; fi\necho $n > $out\n"
        );
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn ptxas_step(program: &Path, dir: &Path) -> Step {
        let args = ["-arch=sm_90", "-split-compile=1", "-o", "x.cubin"];
        Step::lone_ptxas(program, &args, dir)
    }

    /// Race `step` with `threads_now` threads free once it started; what was said, the
    /// cubin's text, and the threads each run was given (what the memory gate is told).
    fn race(step: &Step, threads_now: usize) -> (Vec<String>, String, Vec<usize>) {
        let said = Mutex::new(Vec::new());
        let ran_on = Mutex::new(Vec::new());
        let asked = AtomicUsize::new(0);
        let split_now = || {
            asked.fetch_add(1, Ordering::SeqCst);
            PassSplit {
                threads: threads_now,
                late: Some(format!("split over {threads_now} threads")),
                background: false,
            }
        };
        let run = |spec: &CommandSpec, threads: usize, cancel: &Cancel| {
            ran_on.lock().unwrap().push(threads);
            run_cancellable(spec, cancel)
        };
        let split_over = |spec: &CommandSpec, n: usize| {
            let mut out = spec.clone();
            for arg in out.args.iter_mut().filter(|a| *a == "-split-compile=1") {
                *arg = format!("-split-compile={n}").into();
            }
            out
        };
        let say = |s: String| said.lock().unwrap().push(s);
        let race = Race {
            split_now: &split_now,
            run: &run,
            split_over: &split_over,
            say: &say,
        };
        run_racing(&step.spec, step, 1, &race, &Cancel::new()).unwrap();
        assert!(asked.load(Ordering::SeqCst) > 0);
        let cubin = std::fs::read_to_string(step.spec.cwd.as_ref().unwrap().join("x.cubin"));
        let ran_on = ran_on.into_inner().unwrap();
        (said.into_inner().unwrap(), cubin.unwrap(), ran_on)
    }

    #[test]
    fn a_ptxas_on_one_thread_is_raced_by_a_split_copy_once_slots_idle_and_the_first_done_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let step = ptxas_step(&fake_ptxas(dir.path(), 30), dir.path());
        let started = Instant::now();
        let (said, cubin, ran_on) = race(&step, 4);
        assert_eq!(
            ran_on,
            [1, 4],
            "the original on one thread, the copy on four"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the original was not waited for"
        );
        assert_eq!(
            cubin.trim(),
            "4",
            "the copy's cubin took the original's place"
        );
        assert!(
            said[0].starts_with("`ptxas sm_90` raced by a copy split over 4 threads after"),
            "{said:?}"
        );
        assert!(
            said[1].contains("split over 4 threads finished first and was kept"),
            "{said:?}"
        );
        assert!(!dir.path().join("x.cubin.race").exists());

        // Too few idle slots: no copy; and a pass that ends first keeps its own cubin.
        let dir = tempfile::tempdir().unwrap();
        let step = ptxas_step(&fake_ptxas(dir.path(), 3), dir.path());
        let (said, cubin, ran_on) = race(&step, 2);
        assert_eq!(
            (said.len(), cubin.trim(), ran_on),
            (0, "1", vec![1]),
            "{said:?}"
        );
    }

    #[test]
    fn the_copy_writes_beside_the_original_output() {
        let mut spec = CommandSpec::new("ptxas");
        spec.args(["-arch=sm_90", "x.ptx", "-o", "x.cubin"]);
        spec.cwd = Some(PathBuf::from("/k"));
        let copy = with_output(&spec, Path::new("/k/x.cubin"), Path::new("/k/x.cubin.race"));
        let args: Vec<_> = copy.args.iter().map(|a| a.to_string_lossy()).collect();
        assert_eq!(args, ["-arch=sm_90", "x.ptx", "-o", "/k/x.cubin.race"]);
        assert_eq!(
            race_path(Path::new("/k/x.cubin")),
            Path::new("/k/x.cubin.race")
        );
    }
}
