//! Units of work run in parallel under one budget: at most `jobs` at a time (or as many as a
//! [`Jobserver`] gives slots for), in the order asked for, and on the first failure (or
//! SIGINT/SIGTERM, see `process::catch_interrupts`) the running siblings are cancelled (their
//! process trees killed) and nothing new starts.

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::jobserver::{Jobserver, Slot};
use crate::process::Cancel;
use crate::report::{Reporter, UnitOutcome};

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
    /// Re-ranks the units not started yet as units finish, from what they measured
    /// (`schedule::learn`); `None`: the order holds.
    pub rerank: Option<&'a dyn Rerank>,
}

/// What reorders a run's waiting units once one has compiled: it learns from `elapsed`, the
/// time unit `finished` took, and may reorder `waiting` (indices into the units, the next to
/// start first). Returns what it did, for `-v`.
pub trait Rerank: Sync {
    fn finished(&self, finished: usize, elapsed: Duration, waiting: &mut [usize])
    -> Option<String>;

    /// Unit `unit` starts now (what it has compiled so far counts against what it is
    /// predicted to take).
    fn started(&self, _unit: usize) {}
}

impl std::fmt::Debug for dyn Rerank + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rerank")
    }
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
        waiting: Mutex::new(if schedule.order.len() == units.len() {
            schedule.order.iter().rev().copied().collect()
        } else {
            (0..units.len()).rev().collect()
        }),
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
    /// The units not started yet, the next to start last (popped).
    waiting: Mutex<Vec<usize>>,
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
            let Some(i) = lock(&self.waiting).pop() else {
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
        if let Some(js) = self.schedule.jobserver {
            js.unit_started();
        }
        if let Some(rerank) = self.schedule.rerank {
            rerank.started(i);
        }
        let started = Instant::now();
        let result = (self.work)(unit, &self.cancel);
        let elapsed = started.elapsed();
        if let (Ok(UnitOutcome::Compiled), Some(rerank)) = (&result, self.schedule.rerank) {
            // Before the slot goes back: the worker that takes it starts the re-ranked next.
            let mut waiting = lock(&self.waiting);
            // `waiting` pops from its end: the next to start is last.
            waiting.reverse();
            let said = rerank.finished(i, elapsed, &mut waiting);
            waiting.reverse();
            drop(waiting);
            if let Some(said) = said {
                self.reporter.verbose(&said);
            }
        }
        if let Some(js) = self.schedule.jobserver {
            js.unit_finished();
        }
        drop(slot);
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
    use crate::report::Recorder;

    struct Named(String);

    impl Unit for Named {
        fn label(&self) -> &str {
            &self.0
        }
    }

    /// Starts the last waiting unit next.
    struct LastFirst;

    impl Rerank for LastFirst {
        fn finished(&self, finished: usize, _: Duration, waiting: &mut [usize]) -> Option<String> {
            if waiting.is_empty() {
                return None;
            }
            waiting.rotate_right(1);
            Some(format!("after {finished}: {waiting:?}"))
        }
    }

    #[test]
    fn units_waiting_start_in_the_order_a_rerank_gives_them_once_one_compiled() {
        let units: Vec<Named> = (0..4).map(|i| Named(format!("u{i}"))).collect();
        let started = Mutex::new(Vec::new());
        let schedule = Schedule {
            jobs: 1,
            rerank: Some(&LastFirst),
            ..Schedule::default()
        };
        let recorder = Recorder::default();
        run_scheduled(&units, &schedule, &recorder, |unit, _| {
            lock(&started).push(unit.0.clone());
            Ok::<_, JobError<()>>(UnitOutcome::Compiled)
        })
        .unwrap();
        // u0 first; then the last waiting each time: u3 of [1, 2, 3], u2 of [1, 2], u1.
        assert_eq!(*lock(&started), ["u0", "u3", "u2", "u1"]);
        let said = recorder.take();
        assert!(
            said.iter().any(|l| l.contains("after 0: [3, 1, 2]")),
            "{said:?}"
        );
    }
}
