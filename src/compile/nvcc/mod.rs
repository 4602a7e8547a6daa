//! nvcc's pieces: its pipeline read from `nvcc --dryrun` and run as separate steps
//! (`steps.rs`, `split.rs`), `cicc`'s PTX put in one order (`ptx.rs`), and the cache of its
//! device passes (`step_cache.rs`). A second
//! device compiler (hipcc for ROCm) is a sibling of this folder, dispatched on by
//! `compile::run_compiler`.

mod cubin;
mod ptx;
mod race;
pub(crate) mod split;
mod step_cache;
pub(crate) mod steps;
mod threads;

pub(crate) use step_cache::StepCache;

use crate::plan::CompileJob;
use crate::process::Cancel;
use crate::report::Reporter;
use crate::schedule::JobError;

use super::error::CompileError;
use super::runner::{CompileInputs, run_one};
use super::settings::CompileSettings;

/// Compile the CUDA unit `job`: as nvcc's separate steps when settings and the unit allow,
/// else as one nvcc (`cicc` unsplit: `split::unsplit`). Returns what
/// nvcc printed.
pub(crate) fn compile(
    job: &CompileJob,
    settings: &CompileSettings,
    inputs: &CompileInputs,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Result<String, JobError<CompileError>> {
    if let Some(said) = run_as_steps(job, settings, inputs, reporter, cancel)? {
        return Ok(said);
    }
    // One nvcc embeds the PTX as `cicc` wrote it: unsplit, so the bytes do not depend on the
    // slots free when it starts (kbuild's steps split and reorder the PTX, `ptx.rs`).
    let spec = split::unsplit(inputs.command);
    let (spec, _keep) = split::with_stable_names(job, spec, &inputs.tmp.object)?;
    run_one(job, settings, &spec, inputs, reporter, cancel)
}

/// Compile `job` as nvcc's separate steps when settings and the unit allow: `Some(what the
/// steps printed)`, or `None` when the unit compiles with one nvcc instead.
fn run_as_steps(
    job: &CompileJob,
    settings: &CompileSettings,
    inputs: &CompileInputs,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Result<Option<String>, JobError<CompileError>> {
    if !inputs.run.nvcc_steps {
        return Ok(None);
    }
    let run = split::SplitRun {
        job,
        choice: inputs.run,
        command: inputs.command,
        object: &inputs.tmp.object,
        depfile: &inputs.tmp.depfile,
        shown: inputs.shown,
        jobserver: settings.jobserver.as_deref(),
        memory: settings.memory.as_deref(),
        step_cache: inputs.step_cache,
        learned: inputs.learned,
        reporter,
    };
    match split::compile_split(&run, cancel)? {
        split::Split::Done { said } => Ok(Some(said)),
        split::Split::NotSplit(why) => {
            reporter.verbose(&format!("`{}` compiles with one nvcc: {why}", job.label));
            Ok(None)
        }
    }
}
