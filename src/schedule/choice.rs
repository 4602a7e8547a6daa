//! How each compile job runs, chosen once for the build after planning: the order the jobs
//! start in, and per job nvcc's `--threads`, `--jobserver`, kbuild's own steps, the
//! `--split-compile` of the tail and the critical units. The plan says only what to compile;
//! compile reads the [`RunChoice`] and never decides again.

use serde::Serialize;

use super::budget::{JobBudget, NvccMode, Order};
use super::costs::{Costs, critical_units};
use super::splits::{SplitCompile, plan_splits};
use crate::plan::{BuildPlan, CompileJob, Lang};

/// How one compile job runs, chosen by [`choose`] (or [`RunChoice::of`]) and read by compile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunChoice {
    /// nvcc `--threads` (parallel device passes inside one nvcc).
    pub nvcc_threads: u32,
    /// nvcc takes a slot from the build's jobserver for each device pass beside its first
    /// (`--jobserver`); `nvcc_threads` then only caps how many it runs at once.
    pub nvcc_jobserver: bool,
    /// kbuild runs the unit's nvcc pipeline as separate steps ([`NvccMode::Steps`]); a unit
    /// whose pipeline kbuild does not know still compiles with one nvcc.
    #[serde(skip)]
    pub nvcc_steps: bool,
    /// nvcc `--split-compile` for a unit the schedule would otherwise leave the tail to. Not
    /// part of the object cache's key: the object's code is the same (the ELF notes record the
    /// command line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitCompile>,
    /// The unit is the longest of the build, or timed about as long: its `cicc` starts beside
    /// `cudafe++` instead of after it (a shorter chain, the memory of both front ends at once).
    /// Every other unit keeps them apart, as one nvcc does, unless it is the last unit
    /// compiling (`compile::nvcc::split`).
    #[serde(skip)]
    pub critical: bool,
}

impl RunChoice {
    /// One compiler process with one nvcc thread: how a job runs that no schedule chose for.
    pub fn plain(job: &CompileJob) -> Self {
        RunChoice::of(job, NvccMode::Threads, 1)
    }

    /// How `job` runs under `mode` with at most `threads` nvcc threads (capped by its
    /// capabilities), neither split nor critical: what [`choose`] starts from.
    pub fn of(job: &CompileJob, mode: NvccMode, threads: u32) -> Self {
        let cuda = job.lang == Lang::Cuda;
        let (threads, jobserver) = match cuda {
            true => (
                threads.min(job.gencodes.len().max(1) as u32),
                mode == NvccMode::Jobserver && job.gencodes.len() > 1,
            ),
            false => (1, false),
        };
        RunChoice {
            nvcc_threads: threads,
            nvcc_jobserver: jobserver,
            nvcc_steps: cuda && mode == NvccMode::Steps,
            split: None,
            critical: false,
        }
    }
}

/// The build's schedule: every compile job of its plans (flattened: plan, variant, job) with
/// the order they start in and how each runs.
#[derive(Debug, Clone, Default)]
pub struct Scheduled {
    /// Indices into the jobs, in the order they start.
    pub order: Vec<usize>,
    /// One per job.
    pub runs: Vec<RunChoice>,
    /// Where the jobs' costs came from, as `-v` says it ([`Costs::origins`]).
    pub costs_from: String,
}

impl Scheduled {
    /// Whether the build's job slots are handed out by a jobserver: kbuild runs a CUDA unit's
    /// steps, or an nvcc's device passes share the slots.
    pub fn shares_slots(&self) -> bool {
        self.runs.iter().any(|r| r.nvcc_steps || r.nvcc_jobserver)
    }

    /// Keep the jobs `keep` marks (one flag per job), in the same order.
    pub fn retain(&mut self, keep: &[bool]) {
        let mut new_index = vec![None; keep.len()];
        let mut next = 0;
        for (i, &kept) in keep.iter().enumerate() {
            if kept {
                new_index[i] = Some(next);
                next += 1;
            }
        }
        self.order = (self.order.iter())
            .filter_map(|&i| new_index.get(i).copied().flatten())
            .collect();
        let mut flags = keep.iter();
        self.runs.retain(|_| flags.next().copied().unwrap_or(false));
    }

    /// The run choices of each plan's jobs, `plans` being the ones scheduled.
    pub fn per_plan<'a>(&'a self, plans: &[BuildPlan]) -> Vec<&'a [RunChoice]> {
        let mut rest = self.runs.as_slice();
        let mut out = Vec::new();
        for plan in plans {
            let n: usize = plan.variants.iter().map(|v| v.compile.len()).sum();
            let (mine, after) = rest.split_at(n.min(rest.len()));
            out.push(mine);
            rest = after;
        }
        out
    }
}

/// The schedule of `plans` under `budget` (its `nvcc` narrowed to what the build allows):
/// the jobs in the order they should start (`budget.order`), each CUDA unit's nvcc threads
/// (the cores split between the CUDA units of its variant that run at once; under nvcc's
/// jobserver each may run every device pass, as slots allow), and, when kbuild runs nvcc's
/// steps, each job's `--split-compile` ([`plan_splits`]) and whether it is critical: all from
/// the `costs` known (the plans' work directory, kbuild's cache, the remote cache), else
/// predicted.
pub fn choose(plans: &[BuildPlan], budget: &JobBudget, costs: &Costs) -> Scheduled {
    if plans.is_empty() {
        return Scheduled::default();
    }
    let mut runs = Vec::new();
    for variant in plans.iter().flat_map(|p| &p.variants) {
        let cuda_units = variant.compile.iter().filter(|j| j.lang == Lang::Cuda);
        let threads = match budget.nvcc {
            NvccMode::Jobserver => budget.nvcc_threads.max(1) as u32,
            _ => budget.nvcc_threads_per_job(cuda_units.count()),
        };
        runs.extend((variant.compile.iter()).map(|j| RunChoice::of(j, budget.nvcc, threads)));
    }
    let jobs: Vec<CompileJob> = (plans.iter())
        .flat_map(|p| &p.variants)
        .flat_map(|v| v.compile.iter().cloned())
        .collect();
    let (order, estimates) = costs.longest_first(&jobs);
    let costs_from = costs.origins(&jobs);
    let order = match budget.order {
        Order::LongestFirst => order,
        Order::Fifo => (0..jobs.len()).collect(),
    };
    if budget.nvcc != NvccMode::Steps {
        return Scheduled {
            order,
            runs,
            costs_from,
        };
    }
    let seconds: Vec<f64> = estimates.iter().map(|e| e.0).collect();
    let widths: Vec<usize> = jobs.iter().map(|j| j.gencodes.len().max(1)).collect();
    let splits = plan_splits(&seconds, &widths, &order, budget.jobs);
    let critical = critical_units(&jobs, &estimates);
    for ((((run, job), split), estimate), critical) in (runs.iter_mut())
        .zip(&jobs)
        .zip(splits)
        .zip(&estimates)
        .zip(critical)
    {
        run.critical = critical;
        if job.lang == Lang::Cuda {
            run.split = split.map(|s| SplitCompile {
                why: format!("{} ({})", s.why, estimate.1.describe()),
                ..s
            });
        }
    }
    Scheduled {
        order,
        runs,
        costs_from,
    }
}
