//! Running one compiler process: through the launcher, under the memory gate, writing
//! temporary outputs beside the final ones.

use std::path::{Path, PathBuf};

use crate::plan::CompileJob;
use crate::process::{Cancel, CommandSpec, diagnostics};
use crate::report::Reporter;
use crate::schedule::{JobError, RunChoice};

use super::error::{CompileError, job_error};
use super::gate::run_gated;
use super::guess;
use super::nvcc::StepCache;
use super::settings::CompileSettings;

/// What a unit's compile runs and writes.
pub(crate) struct CompileInputs<'a> {
    /// How the unit runs, as the schedule chose.
    pub(crate) run: &'a RunChoice,
    /// The one-compiler command writing the temporary outputs.
    pub(crate) command: &'a CommandSpec,
    pub(crate) tmp: &'a TempOutputs,
    /// The command shown in errors.
    pub(crate) shown: &'a str,
    /// nvcc's device passes kept from earlier builds (CUDA units run as nvcc's steps).
    pub(crate) step_cache: Option<&'a StepCache>,
    /// What the build learned so far, asked as its device passes start.
    pub(crate) learned: super::nvcc::split::Learned<'a>,
}

/// Run `spec`, the one compiler process of `job`, under the memory gate (learned by the
/// object, else guessed from its preprocessed size). Returns what the compiler printed.
pub(crate) fn run_one(
    job: &CompileJob,
    settings: &CompileSettings,
    spec: &CommandSpec,
    inputs: &CompileInputs,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Result<String, JobError<CompileError>> {
    let gate = settings.memory.as_deref();
    let key = gate.map(|g| g.key(&job.object, None));
    let guess = gate.and_then(|g| {
        guess::cxx_peak_guess(job, g, settings.jobs, &inputs.tmp.object, reporter, cancel)
    });
    let output = run_gated(spec, gate, key.as_ref(), guess, cancel)
        .map_err(|f| job_error(job, inputs.shown, f))?;
    Ok(diagnostics(&output.stdout, &output.stderr))
}

/// `spec` run through `launcher` (its program becomes the launcher's first argument).
pub(crate) fn launched(launcher: Option<&Path>, spec: CommandSpec) -> CommandSpec {
    let Some(launcher) = launcher else {
        return spec;
    };
    let mut args = vec![spec.program.into_os_string()];
    args.extend(spec.args);
    CommandSpec {
        program: launcher.to_path_buf(),
        args,
        ..spec
    }
}

/// Temporary object and depfile names next to the final ones, removed if still there on drop.
pub(crate) struct TempOutputs {
    pub(crate) object: PathBuf,
    pub(crate) depfile: PathBuf,
}

impl TempOutputs {
    pub(crate) fn new(job: &CompileJob) -> Self {
        // Keep the real extension last: nvcc picks behaviour from output suffixes.
        let tmp = |p: &Path| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            p.with_file_name(format!(
                "{}{}",
                crate::files::temp_prefix("tmp"),
                name.unwrap_or_default()
            ))
        };
        TempOutputs {
            object: tmp(&job.object),
            depfile: tmp(&job.depfile),
        }
    }
}

impl Drop for TempOutputs {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.object);
        let _ = std::fs::remove_file(&self.depfile);
    }
}
