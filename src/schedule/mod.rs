//! How the build's jobs run, decided in one place: the budget (`-j`, cores, memory, the
//! levers; `budget.rs`), what each job costs (`costs.rs`), the order they start in and each
//! job's run choice with the splits (`choice.rs`, `splits.rs`), memory admission (`memory.rs`)
//! with the one model of what a process needs (`peaks.rs`), the runner that starts them
//! (`runner.rs`), what it learns from the units that finished (`learn.rs`) and from the
//! `ptxas` passes that finished (`ptxas_costs.rs`), and how a device pass splits once it
//! starts (`tail.rs`).

mod budget;
mod choice;
pub mod costs;
mod learn;
pub mod memory;
pub mod peaks;
mod ptxas_costs;
mod runner;
mod splits;
mod tail;

pub use budget::{JobBudget, NvccMode, Order};
pub use choice::{RunChoice, Scheduled, choose};
pub use learn::Siblings;
pub use ptxas_costs::{Heavy, PtxasCosts};
pub use runner::{Finished, JobError, Rerank, Schedule, Unit, run_jobs, run_scheduled};
pub use splits::{SplitCompile, plan_splits};
pub use tail::{DevicePass, PTXAS_MAX_THREADS, PassSplit, pass_split};
