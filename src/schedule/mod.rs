//! How the build's jobs run, decided in one place: the budget (`-j`, cores, memory, the
//! levers; `budget.rs`), what each job costs (`costs.rs`), the order they start in and each
//! job's run choice with the splits (`choice.rs`, `splits.rs`), memory admission (`memory.rs`)
//! with the one model of what a process needs (`peaks.rs`), and the runner that starts them
//! (`runner.rs`).

mod budget;
mod choice;
pub mod costs;
pub mod memory;
pub mod peaks;
mod runner;
mod splits;

pub use budget::{JobBudget, NvccMode, Order};
pub use choice::{RunChoice, Scheduled, choose};
pub use runner::{Finished, JobError, Schedule, Unit, run_jobs, run_scheduled};
pub use splits::{SplitCompile, plan_splits};
