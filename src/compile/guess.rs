//! What a C++ unit never measured reserves at the memory gate when the conservative
//! [`UNKNOWN_PEAK`] would hold other compilers back. nvcc's steps guess from the files they
//! read (`nvcc/steps.rs`); a C++ unit is one compiler process whose input (its source with
//! every header, torch's included) exists only inside it. So its preprocessor runs first, and
//! the guess is the memory model's for a host compile over what it wrote
//! ([`peaks::guess`]). This costs one preprocessor run per unit, once: afterwards its peak is
//! recorded. Unless memory binds `-j` ([`peaks::memory_binds_jobs`]), nothing is run.

use std::path::Path;

use super::command::preprocess_command_for;
use super::gate::run_gated;
use crate::plan::{CompileJob, Lang};
use crate::process::Cancel;
use crate::report::Reporter;
use crate::schedule::memory::{MemoryGate, StepName, format_size};
use crate::schedule::peaks::{self, UNKNOWN_PEAK, Work};

/// The peak to reserve for compiling `job` when it is a C++ unit `gate` never measured and the
/// conservative size could bind with `jobs` jobs: the host compile's guess over its
/// preprocessed size (the preprocessor writes next to `tmp_object`, and the file is removed).
/// `None`: nothing to guess, or the preprocessor failed (the compile then says why).
pub(super) fn cxx_peak_guess(
    job: &CompileJob,
    gate: &MemoryGate,
    jobs: usize,
    tmp_object: &Path,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Option<u64> {
    if job.lang != Lang::Cxx
        || gate.knows(&gate.key(&job.object, None))
        || !gate.memory_binds_jobs(jobs)
    {
        return None;
    }
    let out = tmp_object.with_extension("ii");
    let spec = preprocess_command_for(job, &out);
    let key = gate.key(&job.object, Some(&StepName::new("preprocess")));
    let preprocess = peaks::guess(Work::Preprocess, 0);
    let ran = run_gated(&spec, Some(gate), Some(&key), Some(preprocess), cancel);
    let size = std::fs::metadata(&out).map(|m| m.len());
    let _ = std::fs::remove_file(&out);
    let (Ok(_), Ok(size)) = (ran, size) else {
        return None;
    };
    let guess = peaks::guess(Work::HostCompile, size);
    reporter.verbose(&format!(
        "`{}` was never measured: preprocessed to {}, it reserves {} (not {}: -j {jobs} of \
         that would not fit the memory budget of {})",
        job.label,
        format_size(size),
        format_size(guess),
        format_size(UNKNOWN_PEAK),
        format_size(gate.budget().bytes),
    ));
    Some(guess)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::nvcc::steps::StepKind;
    use crate::schedule::memory::MemoryBudget;

    /// What the memory gate reserves for representative processes, as numbers: one model or
    /// three, the estimates must stay these.
    #[test]
    fn the_peak_estimates_of_representative_processes_stay_the_same() {
        // nvcc's steps never measured, from what they read (the flagship's sizes).
        let guesses = [
            (StepKind::HostPreprocess, 0, 536_870_912),
            (StepKind::DevicePreprocess, 0, 536_870_912),
            (StepKind::Cicc, 19_600_000, 3_203_108_864),
            (StepKind::Cudafe, 2_000_000, 323_108_864),
            (StepKind::Ptxas, 7_000, 68_004_864),
            (StepKind::Fatbinary, 15_000, 67_168_864),
            (StepKind::EmbedFatbin, 15_000, 67_138_864),
            (StepKind::Combine, 3_000_000, 73_108_864),
            // A C++ unit of `<torch/library.h>`: 5.4 MB preprocessed.
            (StepKind::HostCompile, 5_400_000, 671_908_864),
        ];
        for (kind, input, expected) in guesses {
            assert_eq!(
                kind.peak_guess(input),
                expected,
                "{kind:?} over {input} bytes"
            );
        }

        // Measured: an eighth more; a sibling capability measured: a quarter over its largest.
        let dir = tempfile::tempdir().unwrap();
        let gate = MemoryGate::load(MemoryBudget::given(24 << 30), dir.path());
        let unit = gate.key(Path::new("obj/a.o"), None);
        let step = |what: &str, word: &str| {
            let name = StepName::for_capability(what, word);
            gate.key(Path::new("obj/k.o"), Some(&name))
        };
        assert_eq!(gate.estimate(&unit, None), 3_221_225_472);
        assert_eq!(gate.estimate(&unit, Some(671_908_864)), 671_908_864);
        gate.observe(&unit, 800 << 20);
        assert_eq!(gate.estimate(&unit, None), 943_718_400);
        gate.observe(&step("cicc", "compute_75"), 160 << 20);
        gate.observe(&step("cicc", "compute_80"), 200 << 20);
        let cicc_90 = step("cicc", "compute_90a");
        assert_eq!(gate.estimate(&cicc_90, Some(3_203_108_864)), 262_144_000);
        assert_eq!(gate.estimate(&cicc_90, Some(100 << 20)), 104_857_600);
        assert_eq!(gate.estimate(&step("ptxas", "sm_90"), None), 3_221_225_472);

        // Whether the conservative size binds `-j`: 8 x 3 GiB fit 24 GiB, 9 do not.
        assert!(!gate.memory_binds_jobs(8));
        assert!(gate.memory_binds_jobs(9));
    }
}
