//! The build's budget: how many processes run at once, the threads nvcc's device passes
//! share, the order jobs start in, how CUDA units run nvcc, and the memory they may hold.

use std::thread;

use serde::Serialize;

use super::memory::MemoryBudget;

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

    /// The mode the levers ask for: nvcc's jobserver (`KBUILD_JOBSERVER=1`) over one nvcc with
    /// `--threads` (`KBUILD_NVCC_STEPS=0`) over kbuild's own steps (the default).
    pub fn asked(jobserver: bool, no_steps: bool) -> NvccMode {
        match (jobserver, no_steps) {
            (true, _) => NvccMode::Jobserver,
            (false, true) => NvccMode::Threads,
            (false, false) => NvccMode::Steps,
        }
    }

    /// The mode's name, as `--json` and `KBUILD_NVCC` spell it.
    /// The mode that rebuilds a variant built with kbuild's steps (`Some(true)`) or one nvcc
    /// per unit (`Some(false)`), as its metadata.json records; `self` when it records neither.
    pub fn to_rebuild(self, steps: Option<bool>) -> NvccMode {
        match steps {
            Some(true) => NvccMode::Steps,
            Some(false) if self == NvccMode::Steps => NvccMode::Threads,
            _ => self,
        }
    }

    /// Whether kbuild runs the CUDA units' device passes as its own steps.
    pub fn runs_steps(self) -> bool {
        self == NvccMode::Steps
    }

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
}
