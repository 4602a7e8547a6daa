//! Units of work run in parallel under one budget: at most `jobs` at a time (or as many as a
//! [`Jobserver`] gives slots for), in the order asked for, and on the first failure (or
//! SIGINT/SIGTERM, see `process::catch_interrupts`) the running siblings are cancelled (their
//! process trees killed) and nothing new starts.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::jobserver::{Jobserver, Slot};
use crate::memory::MemoryBudget;
use crate::process::Cancel;
use crate::report::{Reporter, UnitOutcome};

/// How much parallelism a build may use and how its jobs start, decided once from `-j`, the
/// cores, the memory and the scheduling levers (resolved by the command from the environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct JobBudget {
    /// Compiler processes running at once.
    pub jobs: usize,
    /// Threads nvcc's device passes may use in total, split between the jobs running at once.
    pub nvcc_threads: usize,
    /// Which compile job starts first. `KBUILD_SCHEDULE=fifo`: in plan order.
    pub order: Order,
    /// How CUDA units run nvcc, as asked for; the build narrows it to what its toolchains and
    /// launcher allow ([`NvccMode::allowed`]) once, before planning.
    pub nvcc: NvccMode,
    /// The memory the build's compiler processes may hold at once (`memory::MemoryGate`
    /// admits each); `None` when it cannot be found out (then only `jobs` limits them).
    pub memory: Option<MemoryBudget>,
}

/// The order jobs start in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// As planned.
    Fifo,
    /// By the last build's wall time, longest first (jobs it did not time before all of them).
    LongestFirst,
}

/// How CUDA units run nvcc: the one decision behind `--threads`, `--jobserver` and kbuild's
/// own steps, made once per build and carried in the settings of the plan and the compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NvccMode {
    /// kbuild runs each unit's nvcc pipeline as separate steps (read from `nvcc --dryrun`)
    /// under the build's job slots: the host compile beside the device passes. A unit whose
    /// pipeline kbuild does not know still compiles with one nvcc (`-v` says why).
    Steps,
    /// One nvcc per unit; its device passes get a fixed `--threads` share.
    Threads,
    /// One nvcc per unit; its device passes take slots from the build's jobserver
    /// (`--jobserver`). Opt-in (`KBUILD_JOBSERVER=1`): nvcc 13.0-13.2 accept the jobserver but
    /// then run a unit's device passes one at a time with free tokens in the pipe, under GNU
    /// make too (`tests/it/build_schedule.rs` pins that down).
    Jobserver,
}

impl NvccMode {
    /// The mode a build can use: a compiler launcher gets one nvcc per unit (sccache splits
    /// nvcc its own way), and nvcc's jobserver needs every nvcc of the build to have
    /// `--jobserver`. Returns the mode and, when it differs from `self`, why.
    pub fn allowed(self, launcher: bool, nvcc_has_jobserver: bool) -> (NvccMode, Option<String>) {
        match self {
            NvccMode::Steps if launcher => (
                NvccMode::Threads,
                Some("a compiler launcher (or `KBUILD_DIST`) runs one nvcc per unit".into()),
            ),
            NvccMode::Jobserver if !nvcc_has_jobserver => (
                NvccMode::Threads,
                Some("this nvcc has no `--jobserver`".into()),
            ),
            mode => (mode, None),
        }
    }

    /// The mode's name, as `--json` and `KBUILD_NVCC` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            NvccMode::Steps => "steps",
            NvccMode::Threads => "threads",
            NvccMode::Jobserver => "jobserver",
        }
    }

    /// What `-v` says about the mode.
    pub fn describe(self) -> &'static str {
        match self {
            NvccMode::Steps => {
                "nvcc's steps run as jobs of their own (host compile beside the device passes)"
            }
            NvccMode::Threads => "nvcc's device passes get a fixed `--threads` share",
            NvccMode::Jobserver => "nvcc's device passes share the build's jobserver",
        }
    }
}

impl JobBudget {
    /// `requested` jobs (`-j`), else one per core; nvcc threads from cores; the memory the
    /// machine (or its cgroup) has available unless `memory` says; jobs longest first and
    /// nvcc as steps unless the caller says otherwise. Memory does not cut the job slots:
    /// the gate admits each process by what it was measured to need.
    pub fn for_machine(requested: Option<usize>, memory: Option<MemoryBudget>) -> Self {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        JobBudget {
            jobs: requested.unwrap_or(cores).max(1),
            nvcc_threads: cores,
            order: Order::LongestFirst,
            nvcc: NvccMode::Steps,
            memory: memory.or_else(MemoryBudget::detect),
        }
    }

    /// nvcc `--threads` for each of `cuda_units` CUDA jobs: when fewer units than job slots
    /// run, the idle slots' cores go to the device passes of the ones that do.
    pub fn nvcc_threads_per_job(&self, cuda_units: usize) -> u32 {
        let running = self.jobs.clamp(1, cuda_units.max(1));
        (self.nvcc_threads / running).max(1) as u32
    }
}

/// nvcc `--split-compile` for one unit: its device passes split their work over `threads`
/// threads, because the schedule would otherwise leave cores idle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitCompile {
    /// The threads each device pass uses (`--split-compile=N`): it holds one job slot, and the
    /// threads beyond it run at low priority on the cores the jobs leave idle
    /// (`compile::split`); a unit compiled by one nvcc uses as many as it finds free slots for.
    pub threads: u32,
    /// Why (shown by `--dry-run` and `-v`).
    pub why: String,
}

/// Which units to split, given each unit's predicted `costs` (seconds), the `order` they
/// start in, `slots` job slots and each unit's `width` (slots its own passes already fill,
/// e.g. one per capability). Simulates the start order on the slots (longest-first list
/// scheduling, a unit in one slot) and splits a unit when
/// - the tail: other slots run out of work before the middle of its run, so they would idle
///   while it runs; its passes get those slots;
/// - or it is critical: it alone is predicted longer than the floor (all work / slots), so no
///   order hides it; its passes get its share of the slots (cost / floor).
pub fn plan_splits(
    costs: &[f64],
    widths: &[usize],
    order: &[usize],
    slots: usize,
) -> Vec<Option<SplitCompile>> {
    let mut splits = vec![None; costs.len()];
    if slots < 2 || costs.is_empty() {
        return splits;
    }
    let runs = simulate(costs, order, slots);
    let mut last_end = vec![0.0f64; slots];
    for run in runs.iter().flatten() {
        last_end[run.slot] = last_end[run.slot].max(run.end);
    }
    let total: f64 = costs.iter().sum();
    let floor = total / slots as f64;
    for (i, run) in runs.iter().enumerate() {
        let Some(run) = run else { continue };
        let middle = (run.start + run.end) / 2.0;
        let idle = (0..slots)
            .filter(|&s| s != run.slot && last_end[s] <= middle)
            .count();
        let share = if floor > 0.0 {
            ((costs[i] / floor).ceil() as usize).min(slots)
        } else {
            1
        };
        let width = widths.get(i).copied().unwrap_or(1).max(1);
        let (slots_for, why) = if costs[i] > floor * 1.05 && share > 1 + idle {
            let why = format!(
                "predicted {:.1}s, longer than the whole build's floor {floor:.1}s \
                 (all units' {total:.1}s / {slots} slots): it takes {share} slots",
                costs[i]
            );
            (share, why)
        } else {
            let why = format!(
                "in the tail: {idle} of {slots} job slots have no other unit to run for most \
                 of its predicted {:.1}s",
                costs[i]
            );
            (1 + idle, why)
        };
        let threads = slots_for / width;
        if threads >= 2 {
            splits[i] = Some(SplitCompile {
                threads: threads as u32,
                why,
            });
        }
    }
    splits
}

/// Where and when a unit runs in [`simulate`].
#[derive(Debug, Clone, Copy)]
struct SimRun {
    slot: usize,
    start: f64,
    end: f64,
}

/// Units started in `order`, each in the slot that frees first.
fn simulate(costs: &[f64], order: &[usize], slots: usize) -> Vec<Option<SimRun>> {
    let mut free_at = vec![0.0f64; slots];
    let mut runs = vec![None; costs.len()];
    let order: Vec<usize> = if order.len() == costs.len() {
        order.to_vec()
    } else {
        (0..costs.len()).collect()
    };
    for i in order {
        let (slot, &start) = free_at
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .unwrap_or((0, &0.0));
        let end = start + costs[i].max(0.0);
        free_at[slot] = end;
        runs[i] = Some(SimRun { slot, start, end });
    }
    runs
}

/// Something the runner can schedule: it only needs a label for progress and errors.
pub trait Unit: Sync {
    fn label(&self) -> &str;
}

/// How one unit of work did not finish.
#[derive(Debug)]
pub enum JobError<E> {
    /// Stopped because another unit failed; not itself an error.
    Cancelled,
    Failed(E),
}

impl<E> From<E> for JobError<E> {
    fn from(err: E) -> Self {
        JobError::Failed(err)
    }
}

/// How a run hands out its units: how many at once, through which jobserver, in which order.
#[derive(Debug, Clone, Default)]
pub struct Schedule<'a> {
    /// Units running at once (at least 1).
    pub jobs: usize,
    /// When set, every unit holds one of its slots while it runs, and the slots the runner
    /// does not hold go to the compilers that share it.
    pub jobserver: Option<&'a Jobserver>,
    /// Indices into the units, in the order they start; empty: as given.
    pub order: Vec<usize>,
}

/// How a unit ended and how long it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub outcome: UnitOutcome,
    pub elapsed: Duration,
}

/// Run `work` for every unit, at most `jobs` at a time, reporting each unit's start and end.
/// See [`run_scheduled`].
pub fn run_jobs<T, E, F>(
    units: &[T],
    jobs: usize,
    reporter: &dyn Reporter,
    work: F,
) -> Result<Vec<UnitOutcome>, E>
where
    T: Unit,
    E: Send,
    F: Fn(&T, &Cancel) -> Result<UnitOutcome, JobError<E>> + Sync,
{
    let schedule = Schedule {
        jobs,
        ..Schedule::default()
    };
    let finished = run_scheduled(units, &schedule, reporter, work)?;
    Ok(finished.iter().map(|f| f.outcome).collect())
}

/// Run `work` for every unit as `schedule` says, reporting each unit's start and end.
///
/// On the first failure the shared `Cancel` fires: running commands are killed, no new unit
/// starts, and that first error is returned. After SIGINT/SIGTERM the `Cancel` reads as fired
/// too: units stop, and the caller asks `process::interrupted` why. Results come back in the
/// order of `units`; a unit that never ran counts as `Failed`. A jobserver that cannot be
/// read is warned about once and bypassed (the workers still bound the run to `jobs`).
pub fn run_scheduled<T, E, F>(
    units: &[T],
    schedule: &Schedule,
    reporter: &dyn Reporter,
    work: F,
) -> Result<Vec<Finished>, E>
where
    T: Unit,
    E: Send,
    F: Fn(&T, &Cancel) -> Result<UnitOutcome, JobError<E>> + Sync,
{
    reporter.begin_units(units.len());
    if let Some(js) = schedule.jobserver {
        js.start_run(units.len());
    }
    let run = Run {
        units,
        schedule,
        reporter,
        work,
        cancel: Cancel::new(),
        next: AtomicUsize::new(0),
        order: if schedule.order.len() == units.len() {
            schedule.order.clone()
        } else {
            (0..units.len()).collect()
        },
        results: Mutex::new(vec![None; units.len()]),
        first_error: Mutex::new(None),
        jobserver_broken: std::sync::Once::new(),
    };
    let workers = schedule.jobs.max(1).min(units.len());
    thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| run.worker());
        }
    });
    if let Some(err) = lock(&run.first_error).take() {
        return Err(err);
    }
    // Without an error every unit ran to an outcome.
    Ok(lock(&run.results)
        .iter()
        .map(|r| {
            r.unwrap_or(Finished {
                outcome: UnitOutcome::Failed,
                elapsed: Duration::ZERO,
            })
        })
        .collect())
}

/// What the workers of one [`run_scheduled`] share.
struct Run<'a, T, E, F> {
    units: &'a [T],
    schedule: &'a Schedule<'a>,
    reporter: &'a dyn Reporter,
    work: F,
    cancel: Cancel,
    /// Index into `order` of the next unit to start.
    next: AtomicUsize,
    order: Vec<usize>,
    results: Mutex<Vec<Option<Finished>>>,
    first_error: Mutex<Option<E>>,
    jobserver_broken: std::sync::Once,
}

impl<T, E, F> Run<'_, T, E, F>
where
    T: Unit,
    E: Send,
    F: Fn(&T, &Cancel) -> Result<UnitOutcome, JobError<E>> + Sync,
{
    /// One worker: take a slot, then the next unit, run it; until none is left or one failed.
    fn worker(&self) {
        while !self.cancel.is_cancelled() {
            // The slot is taken before the unit: a unit waits for a slot, never the other way
            // round, so the order holds.
            let Some(slot) = self.slot() else { break };
            let i = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(&i) = self.order.get(i) else {
                drop(slot);
                if let Some(js) = self.schedule.jobserver {
                    js.donate_implicit();
                }
                break;
            };
            self.run_unit(i, slot);
        }
    }

    /// A jobserver slot (`Some(None)` without a jobserver, or once it cannot be read: still
    /// at most `jobs` units, one per worker); `None` when the run is over.
    fn slot(&self) -> Option<Option<Slot<'_>>> {
        let Some(js) = self.schedule.jobserver else {
            return Some(None);
        };
        match js.acquire(&self.cancel) {
            Ok(Some(slot)) => Some(Some(slot)),
            Ok(None) => None,
            Err(e) => {
                self.jobserver_broken.call_once(|| {
                    self.reporter.warn(&format!(
                        "the build's jobserver cannot be read ({e}): units run without it"
                    ))
                });
                Some(None)
            }
        }
    }

    /// Run unit `i` holding `slot`, and record how it ended.
    fn run_unit(&self, i: usize, slot: Option<Slot<'_>>) {
        let unit = &self.units[i];
        let label = unit.label();
        self.reporter.unit_started(label);
        let started = Instant::now();
        let result = (self.work)(unit, &self.cancel);
        if let Some(js) = self.schedule.jobserver {
            js.unit_finished();
        }
        drop(slot);
        let elapsed = started.elapsed();
        match result {
            Ok(outcome) => {
                self.reporter.unit_finished(label, outcome, elapsed);
                lock(&self.results)[i] = Some(Finished { outcome, elapsed });
            }
            Err(JobError::Cancelled) => {
                self.reporter
                    .verbose(&format!("stopped `{label}`: another unit failed"));
            }
            Err(JobError::Failed(err)) => {
                self.reporter
                    .unit_finished(label, UnitOutcome::Failed, elapsed);
                lock(&self.first_error).get_or_insert(err);
                self.cancel.cancel();
            }
        }
    }
}

/// A poisoned lock only means another worker panicked; the panic propagates from the scope.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_job_slots_give_their_cores_to_nvcc_threads() {
        let budget = JobBudget {
            jobs: 16,
            nvcc_threads: 16,
            order: Order::Fifo,
            nvcc: NvccMode::Threads,
            memory: None,
        };
        assert_eq!(budget.nvcc_threads_per_job(3), 5);
        assert_eq!(budget.nvcc_threads_per_job(40), 1);
        assert_eq!(budget.nvcc_threads_per_job(0), 16);
    }

    #[test]
    fn a_unit_left_alone_at_the_end_is_split_over_the_idle_slots() {
        // Three equal units on two slots: the third runs alone.
        let splits = plan_splits(&[10.0, 10.0, 10.0], &[1, 1, 1], &[0, 1, 2], 2);
        assert_eq!(splits[0], None);
        assert_eq!(splits[1], None);
        let third = splits[2].as_ref().expect("the tail unit is split");
        assert_eq!(third.threads, 2);
        assert!(
            third.why.starts_with("in the tail: 1 of 2"),
            "{}",
            third.why
        );
    }

    #[test]
    fn a_unit_longer_than_the_floor_is_split_by_its_share_and_balanced_units_are_not() {
        // 8 slots kept busy by 7 units of 40 s beside one of 60 s: floor 340 / 8 = 42.5 s.
        let mut costs = vec![60.0];
        costs.extend([40.0; 7]);
        let order: Vec<usize> = (0..costs.len()).collect();
        let splits = plan_splits(&costs, &[1; 8], &order, 8);
        let first = splits[0].as_ref().expect("the critical unit is split");
        assert_eq!(first.threads, 2, "{}", first.why);
        assert!(first.why.contains("floor 42.5s"), "{}", first.why);
        assert!(splits[1..].iter().all(Option::is_none), "{splits:?}");
        // The same unit beside little work: the idle slots decide.
        let mut costs = vec![60.0];
        costs.extend([5.0; 7]);
        let splits = plan_splits(&costs, &[1; 8], &order, 8);
        assert_eq!(splits[0].as_ref().map(|s| s.threads), Some(8));
        assert_eq!(plan_splits(&[4.0; 8], &[1; 8], &order, 4), vec![None; 8]);
        // Its passes already fill three slots: three threads each would be nine.
        assert_eq!(
            plan_splits(&[10.0], &[3], &[0], 4),
            vec![None],
            "one unit of 3 capabilities on 4 slots"
        );
        assert_eq!(plan_splits(&[10.0], &[1], &[0], 1), vec![None]);
    }
}
