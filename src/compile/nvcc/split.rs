//! A CUDA unit compiled as nvcc's own steps (`nvcc_steps.rs`), run by kbuild: the unit's
//! worker runs steps in its own job slot, and more steps run beside it, each in a slot taken
//! from the build's jobserver (or, without one, up to the unit's `--threads` share). How many
//! threads a device pass splits over is decided as it starts (`schedule::pass_split`); its
//! extra threads take no slot ([`split_over`]), at low priority for a split the schedule planned.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::cubin::{NVCC_PTXAS_UNSPLIT, canonical_count, cubin_output, with_ptxas_count};
use super::race::{Race, run_racing};
use super::step_cache::{Lookup, StepCache};
use super::steps::{Step, StepKind, StepPaths, Unsupported, plan_steps};
pub(crate) use super::threads::{cicc_split, unsplit};
use super::threads::{split_over, split_threads};
use crate::compile::error::{CompileError, io_error, job_error};
use crate::compile::gate::run_gated_measured;
use crate::jobserver::Jobserver;
use crate::plan::{CompileJob, Lang};
use crate::process::{Cancel, CommandFailure, CommandSpec, diagnostics, run_cancellable};
use crate::report::Reporter;
use crate::schedule::memory::MemoryGate;
use crate::schedule::{DevicePass, JobError, PtxasCosts, RunChoice, pass_split};

/// How long an idle step worker sleeps before it looks at the cancel again.
const IDLE: Duration = Duration::from_millis(20);

/// How a split compile ended.
pub(super) enum Split {
    /// The object and depfile are written; what the steps printed (warnings), in step order.
    Done { said: String },
    /// Not split (the unit compiles with one nvcc): why.
    NotSplit(Unsupported),
}

/// Where a split compile writes and which slots its steps may use.
pub(super) struct SplitRun<'a> {
    pub job: &'a CompileJob,
    /// How the unit runs, as the schedule chose (threads, split, critical).
    pub choice: &'a RunChoice,
    /// The one-nvcc command writing the temporary object and depfile (`--dryrun` asks it for
    /// its steps).
    pub command: &'a CommandSpec,
    /// The temporary object and depfile, renamed into place by the caller.
    pub object: &'a Path,
    pub depfile: &'a Path,
    /// The command that compiles the unit in one nvcc: shown in errors (it reproduces them).
    pub shown: &'a str,
    pub jobserver: Option<&'a Jobserver>,
    /// The build's memory gate: each step waits for its learned peak to fit.
    pub memory: Option<&'a MemoryGate>,
    /// The device step cache: a device pass it holds does not run.
    pub step_cache: Option<&'a StepCache>,
    /// What the build learned so far, asked as each device pass starts.
    pub learned: Learned<'a>,
    /// Says which passes were reused (`-v`) and which entries were damaged.
    pub reporter: &'a dyn Reporter,
}

/// `command` as `nvcc --dryrun --keep --keep-dir <keep_dir>`, its `cicc` and `ptxas` given a
/// thread count (1 unless the schedule split `cicc`), set again when a pass starts
/// ([`split_over`]). `ptxas`'s is also what `fatbinary` records of its options, as it does for
/// one nvcc ([`unsplit`]).
fn dryrun_command(command: &CommandSpec, keep_dir: &Path) -> CommandSpec {
    let mut dryrun = command.clone();
    let mut args = vec!["--dryrun".into(), "--keep".into(), "--keep-dir".into()];
    args.push(keep_dir.as_os_str().to_owned());
    let counted = split_threads(&dryrun).is_some();
    args.append(&mut dryrun.args);
    if !counted {
        args.push(cicc_split(1).into());
    }
    args.push(NVCC_PTXAS_UNSPLIT.into());
    dryrun.args = args;
    dryrun
}

/// Compile `run.job` as separate nvcc steps; `NotSplit` when nvcc's plan for it is not one
/// kbuild knows (nothing is written then).
pub(super) fn compile_split(
    run: &SplitRun,
    cancel: &Cancel,
) -> Result<Split, JobError<CompileError>> {
    let job = run.job;
    let keep = KeepDir::new(run.object)?;
    let printed = match run_cancellable(&dryrun_command(run.command, &keep.0), cancel) {
        Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
        Err(CommandFailure::Cancelled { .. } | CommandFailure::Interrupted { .. }) => {
            return Err(JobError::Cancelled);
        }
        // The one-nvcc compile then reports what is wrong, as it always has.
        Err(failure) => {
            let why = format!("`nvcc --dryrun` failed: {failure}");
            return Ok(Split::NotSplit(Unsupported(why)));
        }
    };
    let paths = StepPaths {
        keep_dir: keep.0.clone(),
        object: run.object.to_path_buf(),
        depfile: run.depfile.to_path_buf(),
        symbol: symbol_for(&job.label),
        module_id: module_id_for(&job.label, &job.source),
    };
    let mut plan = match plan_steps(&printed, &paths) {
        Ok(plan) => plan,
        Err(why) => return Ok(Split::NotSplit(why)),
    };
    plan.steps = plan.steps.into_iter().map(with_ptxas_count).collect();
    let written = [&plan.fatbin_c, &plan.fatbin_asm].into_iter();
    for (path, text) in written.chain(&plan.module_id) {
        std::fs::write(path, text).map_err(|e| io_error(path, e))?;
    }
    let width = match run.jobserver {
        Some(js) => js.slots(),
        None => run.choice.nvcc_threads as usize,
    };
    let slots = Slots {
        jobserver: run.jobserver,
        scheduled: run.choice.split.as_ref().map(|s| s.threads),
        capabilities: job.gencodes.len().max(1),
        width: width.max(1),
        critical: run.choice.critical,
        unit: (job.label.as_str(), run.reporter),
        memory: run
            .memory
            .map(|gate| (gate, job.object.as_path(), keep.0.as_path())),
        device: run.step_cache.map(|cache| Device {
            cache,
            keep_dir: &keep.0,
            job,
            reporter: run.reporter,
        }),
        learned: run.learned,
        keep_dir: &keep.0,
    };
    match run_steps(&plan.steps, &slots, cancel) {
        Ok(said) => Ok(Split::Done { said }),
        Err(None) => Err(JobError::Cancelled),
        Err(Some(failed)) => {
            let (i, failure) = *failed;
            Err(match failure {
                // Which step's program is missing is worth saying; nvcc's would be found.
                CommandFailure::Spawn {
                    program, source, ..
                } => JobError::Failed(CompileError::Spawn {
                    label: format!("{} ({})", job.label, plan.steps[i].label),
                    program,
                    lang: Lang::Cuda,
                    source,
                }),
                // The one-nvcc command is shown: it reproduces the failure, and the step's
                // temporary files are gone.
                failure => job_error(job, run.shown, failure),
            })
        }
    }
}

/// The unit a label names, as every build names it: `<source relative to the project>
/// [<backend>]`; a build of several torch versions tags it with the variant instead
/// (`orchestrator::prepare`), which must not change the code.
fn unit_of(label: &str) -> &str {
    label.rsplit_once(" [").map_or(label, |(unit, _)| unit)
}

/// The hidden symbol of a unit's device code (it stays in the `.so`'s `.symtab`): unique per
/// unit within a variant, and from the unit's path in the project only, so that the `.so` is the
/// same whatever directory, object name or torch tag the build had.
fn symbol_for(label: &str) -> String {
    let digest = Sha256::digest(unit_of(label).as_bytes());
    format!("kbuild_fatbin_{}", &hex::encode(digest)[..16])
}

/// The module id `cudafe++` and the device passes read, shaped as nvcc's
/// (`_<8 hex>_<length>_<file name>_<8 hex>`). From the unit's path in the project only, not an
/// absolute path, the object's name or the label's torch tag: another checkout, and a build for
/// other capabilities (the object's name carries them), read the same id, so the device step
/// cache, which keys a pass by the content of the files it reads, serves their passes, and the
/// code (whose anonymous-namespace names carry the id) is the same. Unique per unit within a
/// variant, which is all it needs: without relocatable device code (never split) each object's
/// device code is a module of its own, and the host names it makes are hidden.
fn module_id_for(label: &str, source: &Path) -> String {
    let digest = hex::encode(Sha256::digest(unit_of(label).as_bytes()));
    let name = source.file_name().unwrap_or_default().to_string_lossy();
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("_{}_{}_{name}_{}", &digest[..8], name.len(), &digest[8..16])
}

/// What the step workers share.
struct Board {
    started: Vec<bool>,
    done: Vec<bool>,
    /// A step failed or was cancelled: nothing new starts.
    stop: bool,
    failure: Option<(usize, CommandFailure)>,
    said: Vec<(usize, String)>,
    /// The unit's own job slot (held by its runner worker) is not running a step.
    own_free: bool,
}

impl Board {
    /// The not-started steps whose dependencies are done (with `apart`, their
    /// [`Step::apart_from`] too).
    fn ready_steps<'s>(
        &'s self,
        steps: &'s [Step],
        apart: bool,
    ) -> impl Iterator<Item = usize> + 's {
        (0..steps.len()).filter(move |&i| {
            let step = &steps[i];
            !self.started[i]
                && step.deps.iter().all(|&d| self.done[d])
                && !(apart && step.apart_from.is_some_and(|a| !self.done[a]))
        })
    }

    /// The ready step on the longest chain first.
    fn ready(&self, steps: &[Step], apart: bool) -> Option<usize> {
        self.ready_steps(steps, apart)
            .max_by_key(|&i| (steps[i].priority, std::cmp::Reverse(i)))
    }

    /// Nothing is left for a worker to start.
    fn finished(&self) -> bool {
        self.stop || self.started.iter().all(|s| *s)
    }
}

/// The slot a step runs in.
enum Held<'a> {
    /// No slots are counted (no jobserver: the workers are the limit).
    Uncounted,
    /// The unit's own slot.
    Own,
    Token(#[allow(dead_code)] crate::jobserver::Slot<'a>),
}

/// Why the build waits for a unit alone, if it does, asked as a pass starts.
pub(crate) type WaitedFor<'a> = dyn Fn() -> Option<String> + Sync + 'a;

/// What the build learned so far, asked as each device pass of a unit starts.
#[derive(Clone, Copy)]
pub(crate) struct Learned<'a> {
    /// Why the build waits for the unit alone (`schedule::Siblings::waited_for`).
    pub waited_for: Option<&'a WaitedFor<'a>>,
    /// The build's `ptxas` passes: what each started one reads and each finished one cost per
    /// byte of PTX; each `ptxas` that runs adds its own.
    pub ptxas: Option<&'a PtxasCosts>,
}

/// What the steps of one unit run under.
struct Slots<'a> {
    jobserver: Option<&'a Jobserver>,
    /// The threads the schedule split the unit's device passes over (`RunChoice::split`);
    /// more once no unit waits to start (`schedule::pass_split`).
    scheduled: Option<u32>,
    /// The unit's capabilities: each runs its own device passes.
    capabilities: usize,
    /// Steps at once at most.
    width: usize,
    /// The unit is critical ([`CompileJob::critical`]): its `cicc` starts beside `cudafe++`.
    critical: bool,
    /// The unit's label, and where `-v` says that its front ends were kept apart.
    unit: (&'a str, &'a dyn Reporter),
    /// The build's memory gate, the unit's object (its steps' peaks are learned under it) and
    /// nvcc's `--keep-dir` (what a step never measured reads there sizes its guess).
    memory: Option<(&'a MemoryGate, &'a Path, &'a Path)>,
    device: Option<Device<'a>>,
    /// What the build learned so far ([`SplitRun::learned`]).
    learned: Learned<'a>,
    /// nvcc's `--keep-dir`, where the passes read and write.
    keep_dir: &'a Path,
}

impl Slots<'_> {
    /// Whether the unit keeps its front ends apart (`cicc` after `cudafe++`, as one nvcc runs
    /// them, so that the memory of both, 4.3 GB over torch's headers, is not held at once by
    /// every unit): unless it is critical or the last unit compiling (one edited `.cu`), where
    /// running them side by side shortens the build. Without a jobserver nothing says which
    /// unit is last: side by side.
    fn front_ends_apart(&self) -> bool {
        !self.critical && self.jobserver.is_some_and(|js| !js.last_unit())
    }
}

/// The device step cache, as the steps of one unit use it.
struct Device<'a> {
    cache: &'a StepCache,
    /// nvcc's `--keep-dir`, where the passes read and write.
    keep_dir: &'a Path,
    job: &'a CompileJob,
    reporter: &'a dyn Reporter,
}

/// Run `steps` in dependency order. With a jobserver, each running step holds a slot: the
/// unit's own one (which its runner worker holds) or one taken from the jobserver, so the
/// steps of all units share the build's slots; without one, up to `width` run at once. With a
/// memory gate each step, holding its slot, waits until its learned peak fits. On a failure
/// the build's `cancel` fires (as for any failed unit) and the failed step comes back;
/// `Err(None)` when cancelled from outside.
fn run_steps(
    steps: &[Step],
    slots: &Slots,
    cancel: &Cancel,
) -> Result<String, Option<Box<(usize, CommandFailure)>>> {
    let board = Mutex::new(Board {
        started: vec![false; steps.len()],
        done: vec![false; steps.len()],
        stop: false,
        failure: None,
        said: Vec::new(),
        own_free: true,
    });
    let wake = Condvar::new();
    std::thread::scope(|scope| {
        for _ in 0..slots.width.min(steps.len()) {
            let (board, wake) = (&board, &wake);
            scope.spawn(move || step_worker(steps, slots, board, wake, cancel));
        }
    });
    let board = board.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(failed) = board.failure {
        return Err(Some(Box::new(failed)));
    }
    if board.stop || board.done.iter().any(|d| !d) {
        return Err(None);
    }
    let mut said = board.said;
    said.sort_by_key(|(i, _)| *i);
    let said: Vec<String> = said.into_iter().map(|(_, s)| s).collect();
    Ok(said.join("\n"))
}

fn step_worker(
    steps: &[Step],
    slots: &Slots,
    board: &Mutex<Board>,
    wake: &Condvar,
    cancel: &Cancel,
) {
    let lock = || board.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        // Wait for a step to be ready before taking a slot: an idle worker holds none.
        let own = {
            let mut b = lock();
            loop {
                if b.finished() || cancel.is_cancelled() {
                    return;
                }
                if b.ready(steps, slots.front_ends_apart()).is_some() {
                    break;
                }
                b = wake
                    .wait_timeout(b, IDLE)
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
            std::mem::take(&mut b.own_free)
        };
        let held = match (own, slots.jobserver) {
            (true, _) => Held::Own,
            (false, None) => Held::Uncounted,
            (false, Some(js)) => {
                // Given up once nothing is left to start: the slots the units hold come back
                // only when their steps end.
                let stop = || cancel.is_cancelled() || lock().finished();
                match js.acquire_unless(stop) {
                    Ok(Some(slot)) => Held::Token(slot),
                    // Nothing left, cancelled, or an unreadable jobserver: the unit's own slot
                    // and the other workers finish the steps.
                    Ok(None) | Err(_) => return,
                }
            }
        };
        let claimed = {
            let mut b = lock();
            let apart = slots.front_ends_apart();
            match b.ready(steps, apart) {
                Some(i) if !b.stop => {
                    b.started[i] = true;
                    Some((i, apart))
                }
                _ => None,
            }
        };
        let Some((i, apart)) = claimed else {
            give_back(held, board, wake);
            continue;
        };
        if apart && let Some(after) = steps[i].apart_from {
            let (label, reporter) = slots.unit;
            reporter.verbose(&format!(
                "`{label}`: `{}` started after `{}`, as one nvcc runs them (not the longest \
                 unit: the memory of both front ends would add up to the other units')",
                steps[i].label, steps[after].label,
            ));
        }
        let result = run_or_reuse(steps, i, slots, cancel);
        give_back(held, board, wake);
        finish_step(&mut lock(), i, result, cancel);
        wake.notify_all();
    }
}

/// Run step `i`, unless the device step cache has its outputs (put in place then); a device
/// pass that ran is stored.
fn run_or_reuse(
    steps: &[Step],
    i: usize,
    slots: &Slots,
    cancel: &Cancel,
) -> Result<std::process::Output, CommandFailure> {
    let step = &steps[i];
    let device = slots.device.as_ref();
    let pass = device.and_then(|d| {
        let pass = d.cache.pass(step, d.keep_dir, &d.job.compiler_id)?;
        Some((d, pass))
    });
    if let Some((d, pass)) = &pass {
        match d.cache.restore(pass) {
            Lookup::Hit => {
                d.cache.reused(&d.job.label, i, &step.label);
                d.reporter.verbose(&format!(
                    "`{}`: `{}` reused from the device step cache",
                    d.job.label, step.label
                ));
                return Ok(std::process::Output {
                    status: std::process::ExitStatus::default(),
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                });
            }
            Lookup::Damaged(why) => d.reporter.warn(&format!(
                "the device step cache entry for `{}` of `{}` is damaged: {why}; removed, the \
                 pass runs again",
                step.label, d.job.label
            )),
            Lookup::Miss => {}
        }
    }
    let result = run_started(step, slots, cancel);
    if result.is_ok() {
        canonical_ptx(step, slots.unit);
        canonical_cubin(step, slots.unit);
    }
    if let (Ok(_), Some((d, pass))) = (&result, &pass)
        && let Err(e) = d.cache.store(pass)
    {
        d.reporter.warn(&format!(
            "cannot keep `{}` of `{}` in the device step cache (it runs again next time): {e}",
            step.label, d.job.label
        ));
    }
    result
}

/// Put the PTX a `cicc` step wrote in the canonical order ([`super::ptx`]), so that `ptxas`
/// and `fatbinary` read the same bytes whether or not (and how many ways) `cicc` split its work.
/// A file it cannot rewrite stays as `cicc` wrote it (valid, only not reproducible across splits),
/// with a warning.
fn canonical_ptx(step: &Step, (label, reporter): (&str, &dyn Reporter)) {
    let Some(ptx) = step.ptx_output() else {
        return;
    };
    let rewrite = || -> std::io::Result<()> {
        let text = std::fs::read_to_string(&ptx)?;
        match super::ptx::canonical(&text) {
            Some(canonical) if canonical != text => std::fs::write(&ptx, canonical),
            Some(_) => Ok(()),
            None => {
                reporter.verbose(&format!(
                    "`{label}`: `{}` wrote PTX of a shape kbuild does not reorder; kept as \
                     written (a split of it may build other bytes)",
                    step.label
                ));
                Ok(())
            }
        }
    };
    if let Err(e) = rewrite() {
        reporter.warn(&format!(
            "`{label}`: cannot put the PTX of `{}` ({}) in its canonical order: {e}; kept as \
             written",
            step.label,
            ptx.display()
        ));
    }
}

/// Run `step` (as `spec`, on `threads` threads) once the memory gate (if any) admits it,
/// learning its peak under the unit's object and the step's label; never measured, or split,
/// it reserves (at least) what its input's size suggests.
fn run_step(
    spec: &CommandSpec,
    threads: usize,
    step: &Step,
    slots: &Slots,
    cancel: &Cancel,
) -> Result<std::process::Output, CommandFailure> {
    let ptxas = (slots.learned.ptxas).filter(|_| step.kind == StepKind::Ptxas);
    let ptx_bytes = ptxas.map_or(0, |_| step.input_bytes(slots.keep_dir));
    let measured = match slots.memory {
        None => run_gated_measured(spec, None, None, None, threads, cancel),
        Some((gate, object, keep_dir)) => {
            let key = gate.key(object, Some(&step.label));
            let guess = step.peak_guess(keep_dir);
            run_gated_measured(spec, Some(gate), Some(&key), Some(guess), threads, cancel)
        }
    }?;
    if let Some(costs) = ptxas {
        costs.finished(ptx_bytes, measured.cpu_seconds);
    }
    Ok(measured.output)
}

/// Record how step `i` ended; the first failure of a step's own stops the unit and cancels
/// the build.
fn finish_step(
    b: &mut Board,
    i: usize,
    result: Result<std::process::Output, CommandFailure>,
    cancel: &Cancel,
) {
    match result {
        Ok(out) => {
            b.done[i] = true;
            let said = diagnostics(&out.stdout, &out.stderr);
            if !said.is_empty() {
                b.said.push((i, said));
            }
        }
        Err(failure) => {
            b.stop = true;
            let own = matches!(
                failure,
                CommandFailure::Exited { .. } | CommandFailure::Spawn { .. }
            );
            if own && b.failure.is_none() {
                b.failure = Some((i, failure));
                cancel.cancel();
            }
        }
    }
}

/// `step`'s command as it starts and its threads: a device pass split over the threads the
/// schedule gives it now ([`pass_split`]), said with `-v` when more than planned.
fn split_at_start(step: &Step, slots: &Slots) -> (CommandSpec, usize) {
    let pass = match step.kind {
        StepKind::Cicc => DevicePass::Cicc,
        StepKind::Ptxas => DevicePass::Ptxas,
        _ => return (step.spec.clone(), 1),
    };
    let heavy = match pass {
        DevicePass::Ptxas => {
            (slots.learned.ptxas).and_then(|c| c.start(step.input_bytes(slots.keep_dir)))
        }
        DevicePass::Cicc => None,
    };
    let split = pass_split(
        pass,
        slots.scheduled,
        slots.capabilities,
        slots.jobserver,
        slots.learned.waited_for.and_then(|why| why()),
        heavy,
    );
    if let Some(why) = &split.late {
        let (label, reporter) = slots.unit;
        reporter.verbose(&format!("`{label}`: `{}` {why}", step.label));
    }
    let mut spec = split_over(&step.spec, split.threads);
    if !split.background {
        spec.nice = 0;
    }
    (spec, split.threads)
}

/// Run `step` as it starts ([`split_at_start`]); a `ptxas` left on one thread is raced by a
/// split copy once the slots go idle ([`run_racing`]).
fn run_started(
    step: &Step,
    slots: &Slots,
    cancel: &Cancel,
) -> Result<std::process::Output, CommandFailure> {
    let (spec, threads) = split_at_start(step, slots);
    let split_now = || {
        pass_split(
            DevicePass::Ptxas,
            slots.scheduled,
            slots.capabilities,
            slots.jobserver,
            slots.learned.waited_for.and_then(|why| why()),
            None,
        )
    };
    let run = |spec: &CommandSpec, threads: usize, cancel: &Cancel| {
        run_step(spec, threads, step, slots, cancel)
    };
    let say = |said: String| {
        let (label, reporter) = slots.unit;
        reporter.verbose(&format!("`{label}`: {said}"));
    };
    let race = Race {
        split_now: &split_now,
        run: &run,
        split_over: &split_over,
        say: &say,
    };
    run_racing(&spec, step, threads, &race, cancel)
}

/// Write the thread count a `ptxas` step recorded in its cubin back as `1` ([`super::cubin`]),
/// so that the bytes do not depend on the split.
fn canonical_cubin(step: &Step, (label, reporter): (&str, &dyn Reporter)) {
    let Some(cubin) = cubin_output(step) else {
        return;
    };
    match canonical_count(&cubin) {
        Ok(true) => {}
        Ok(false) => reporter.verbose(&format!(
            "`{label}`: `{}` wrote no thread count kbuild knows in `{}`; kept as written (a \
             split of it may build other bytes)",
            step.label,
            cubin.display()
        )),
        Err(e) => reporter.warn(&format!(
            "`{label}`: cannot write the thread count of `{}` ({}) back as 1: {e}; kept as \
             written",
            step.label,
            cubin.display()
        )),
    }
}

/// Release the slot a step ran in (the unit's own one goes back to its workers).
fn give_back(held: Held, board: &Mutex<Board>, wake: &Condvar) {
    if let Held::Own = held {
        board.lock().unwrap_or_else(|e| e.into_inner()).own_free = true;
        wake.notify_all();
    }
}

/// `spec`, one nvcc compiling `job` (no launcher in front), keeping its intermediate files in a
/// directory of the unit's own, removed when the returned guard drops: kept, nvcc names them
/// after the source (`relu.cudafe1.cpp`) instead of `tmpxft_<pid>_…`, and the host object's
/// file symbol and static-initializer function are named after that file, so two builds of
/// the unit write the same object. Anything else (a C++ unit, a launcher) as it is.
pub(crate) fn with_stable_names(
    job: &CompileJob,
    mut spec: CommandSpec,
    object: &Path,
) -> Result<(CommandSpec, Option<KeepDir>), CompileError> {
    if job.lang != Lang::Cuda || spec.program != job.compiler {
        return Ok((spec, None));
    }
    let keep = KeepDir::new(object)?;
    spec.args.extend(["--keep".into(), "--keep-dir".into()]);
    spec.args.push(keep.0.as_os_str().to_owned());
    Ok((spec, Some(keep)))
}

/// nvcc's `--keep-dir` for one unit: beside its object, removed when the compile ends.
pub(crate) struct KeepDir(PathBuf);

impl KeepDir {
    /// `<temporary object>.steps`: pid-tagged like the object, so a killed build's is swept.
    fn new(object: &Path) -> Result<Self, CompileError> {
        let mut dir = object.as_os_str().to_owned();
        dir.push(".steps");
        let dir = PathBuf::from(dir);
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        Ok(KeepDir(dir))
    }
}

impl Drop for KeepDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: &[&str]) -> CommandSpec {
        let mut spec = CommandSpec::new("tool");
        spec.args(args);
        spec
    }

    #[test]
    fn a_unit_keeping_its_front_ends_apart_starts_cicc_only_after_cudafe() {
        use super::super::steps::StepKind;
        let step = |kind, deps: Vec<usize>, apart_from| Step {
            kind,
            label: format!("{kind:?}").into(),
            spec: spec(&[]),
            deps,
            apart_from,
            priority: 0,
        };
        let steps = [
            step(StepKind::HostPreprocess, vec![], None),
            step(StepKind::Cudafe, vec![0], None),
            step(StepKind::DevicePreprocess, vec![], None),
            step(StepKind::Cicc, vec![2], Some(1)),
        ];
        let mut board = Board {
            started: vec![true, true, true, false],
            done: vec![true, false, true, false],
            stop: false,
            failure: None,
            said: Vec::new(),
            own_free: true,
        };
        assert_eq!(
            board.ready(&steps, false),
            Some(3),
            "side by side: cicc is ready"
        );
        assert_eq!(
            board.ready(&steps, true),
            None,
            "apart: cicc waits for cudafe++"
        );
        board.done[1] = true;
        assert_eq!(board.ready(&steps, true), Some(3));
    }

    #[test]
    fn the_module_id_is_an_identifier_named_after_the_unit_and_the_same_in_every_checkout() {
        let id = module_id_for(
            "paged-attention/cache_kernels.cu [cuda]",
            Path::new("/a/cache_kernels.cu"),
        );
        let digest = hex::encode(Sha256::digest(b"paged-attention/cache_kernels.cu"));
        assert_eq!(
            id,
            format!("_{}_16_cache_kernels_cu_{}", &digest[..8], &digest[8..16])
        );
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        let elsewhere = module_id_for(
            "paged-attention/cache_kernels.cu [cuda]",
            Path::new("/b/cache_kernels.cu"),
        );
        assert_eq!(elsewhere, id, "another checkout");
        let tagged = module_id_for(
            "paged-attention/cache_kernels.cu [torch215-cu132]",
            Path::new("/a/cache_kernels.cu"),
        );
        assert_eq!(tagged, id, "a build of several torch versions");
        assert_eq!(
            symbol_for("paged-attention/cache_kernels.cu [torch215-cu132]"),
            symbol_for("paged-attention/cache_kernels.cu [cuda]")
        );
        let other = module_id_for(
            "other/cache_kernels.cu [cuda]",
            Path::new("/a/cache_kernels.cu"),
        );
        assert_ne!(other, id, "another unit");
        let odd = module_id_for("x/ü-1.cu [cuda]", Path::new("/a/ü-1.cu"));
        assert!(odd.contains("_6___1_cu_"), "{odd}");
    }
}
