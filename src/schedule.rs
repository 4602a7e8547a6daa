//! Units of work run in parallel under one budget: at most `jobs` at a time (or as many as a
//! [`Jobserver`] gives slots for), in the order asked for, and on the first failure (or
//! SIGINT/SIGTERM, see `process::catch_interrupts`) the running siblings are cancelled (their
//! process trees killed) and nothing new starts.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::jobserver::Jobserver;
use crate::process::Cancel;
use crate::report::{Reporter, UnitOutcome};

/// Peak memory of one nvcc job with torch headers (cicc measured at 2.9 GB).
const MEMORY_PER_JOB: u64 = 3 << 30;

/// How much parallelism a build may use, decided once from `-j`, the cores and the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct JobBudget {
    /// Compiler processes running at once.
    pub jobs: usize,
    /// Threads nvcc's device passes may use in total, split between the jobs running at once.
    pub nvcc_threads: usize,
    /// nvcc's device passes take their slots from the build's jobserver (`--jobserver`, where
    /// nvcc has it) instead of a fixed share of `nvcc_threads`. Off unless `KBUILD_JOBSERVER=1`:
    /// nvcc 13.0-13.2 accept the jobserver but then run a unit's device passes one at a time,
    /// with free tokens in the pipe (under GNU make too), so it made every multi-capability
    /// unit serial (`tests/it/build_schedule.rs` pins that down).
    pub jobserver: bool,
    /// Which compile job starts first. `KBUILD_SCHEDULE=fifo`: in plan order.
    pub order: Order,
    /// CUDA units run nvcc's pipeline as separate steps under the build's job slots (the host
    /// compile beside the device passes, each device pass a job of its own). On unless
    /// `KBUILD_NVCC_STEPS=0`.
    pub nvcc_steps: bool,
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

impl JobBudget {
    /// `requested` jobs (`-j`), else as many as cores and memory allow; nvcc threads from cores.
    /// The scheduling levers come from `KBUILD_JOBSERVER` (off by default) and
    /// `KBUILD_SCHEDULE` (longest first by default); the benchmark sets them one at a time.
    pub fn for_machine(requested: Option<usize>) -> Self {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        let env = |name: &str| std::env::var(name).unwrap_or_default();
        JobBudget {
            jobs: requested
                .unwrap_or_else(|| jobs_for(cores, mem_available()))
                .max(1),
            nvcc_threads: cores,
            jobserver: matches!(env("KBUILD_JOBSERVER").as_str(), "1" | "on" | "true"),
            order: match env("KBUILD_SCHEDULE").as_str() {
                "fifo" => Order::Fifo,
                _ => Order::LongestFirst,
            },
            nvcc_steps: !matches!(env("KBUILD_NVCC_STEPS").as_str(), "0" | "off" | "false"),
        }
    }

    /// nvcc `--threads` for each of `cuda_units` CUDA jobs: when fewer units than job slots
    /// run, the idle slots' cores go to the device passes of the ones that do.
    pub fn nvcc_threads_per_job(&self, cuda_units: usize) -> u32 {
        let running = self.jobs.clamp(1, cuda_units.max(1));
        (self.nvcc_threads / running).max(1) as u32
    }
}

/// Parallel jobs for `cores` cores and `mem_available` bytes of free memory (`None`: unknown):
/// one per core, but no more than memory allows at ~3 GiB per job. At least 1.
pub fn jobs_for(cores: usize, mem_available: Option<u64>) -> usize {
    let by_memory = mem_available.map_or(cores, |b| (b / MEMORY_PER_JOB) as usize);
    cores.min(by_memory).max(1)
}

fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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
    let cancel = Cancel::new();
    let next = AtomicUsize::new(0);
    let order: Vec<usize> = if schedule.order.len() == units.len() {
        schedule.order.clone()
    } else {
        (0..units.len()).collect()
    };
    let results: Mutex<Vec<Option<Finished>>> = Mutex::new(vec![None; units.len()]);
    let first_error: Mutex<Option<E>> = Mutex::new(None);
    let jobserver_broken = std::sync::Once::new();
    let workers = schedule.jobs.max(1).min(units.len());
    thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !cancel.is_cancelled() {
                    // The slot is taken before the unit: a unit waits for a slot, never the
                    // other way round, so the order holds.
                    let slot = match schedule.jobserver {
                        None => None,
                        Some(js) => match js.acquire(&cancel) {
                            Ok(Some(slot)) => Some(slot),
                            Ok(None) => break,
                            // Still at most `jobs` units, one per worker.
                            Err(e) => {
                                jobserver_broken.call_once(|| {
                                    reporter.warn(&format!(
                                        "the build's jobserver cannot be read ({e}): units run \
                                         without it"
                                    ))
                                });
                                None
                            }
                        },
                    };
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(unit) = order.get(i).map(|&i| (i, &units[i])) else {
                        drop(slot);
                        if let Some(js) = schedule.jobserver {
                            js.donate_implicit();
                        }
                        break;
                    };
                    let (i, unit) = unit;
                    let label = unit.label();
                    reporter.unit_started(label);
                    let started = Instant::now();
                    let result = work(unit, &cancel);
                    drop(slot);
                    let elapsed = started.elapsed();
                    match result {
                        Ok(outcome) => {
                            reporter.unit_finished(label, outcome, elapsed);
                            lock(&results)[i] = Some(Finished { outcome, elapsed });
                        }
                        Err(JobError::Cancelled) => {
                            reporter.verbose(&format!("stopped `{label}`: another unit failed"));
                        }
                        Err(JobError::Failed(err)) => {
                            reporter.unit_finished(label, UnitOutcome::Failed, elapsed);
                            lock(&first_error).get_or_insert(err);
                            cancel.cancel();
                        }
                    }
                }
            });
        }
    });
    if let Some(err) = lock(&first_error).take() {
        return Err(err);
    }
    // Without an error every unit ran to an outcome.
    Ok(lock(&results)
        .iter()
        .map(|r| {
            r.unwrap_or(Finished {
                outcome: UnitOutcome::Failed,
                elapsed: Duration::ZERO,
            })
        })
        .collect())
}

/// A poisoned lock only means another worker panicked; the panic propagates from the scope.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_limited_by_memory_and_at_least_one() {
        assert_eq!(jobs_for(16, Some(128 << 30)), 16);
        assert_eq!(jobs_for(16, Some(20 << 30)), 6);
        assert_eq!(jobs_for(2, Some(1 << 30)), 1);
        assert_eq!(jobs_for(4, None), 4);
    }

    #[test]
    fn idle_job_slots_give_their_cores_to_nvcc_threads() {
        let budget = JobBudget {
            jobs: 16,
            nvcc_threads: 16,
            jobserver: false,
            order: Order::Fifo,
            nvcc_steps: false,
        };
        assert_eq!(budget.nvcc_threads_per_job(3), 5);
        assert_eq!(budget.nvcc_threads_per_job(40), 1);
        assert_eq!(budget.nvcc_threads_per_job(0), 16);
    }
}
