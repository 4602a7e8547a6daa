//! What a C++ unit never measured reserves at the memory gate when the conservative
//! [`UNKNOWN_PEAK`](crate::schedule::memory::UNKNOWN_PEAK) would hold other compilers back. nvcc's steps
//! guess from the files they read (`nvcc_steps`); a C++ unit is one compiler process whose
//! input (its source with every header, torch's included) exists only inside it. So its
//! preprocessor runs first, and the guess is the host compile's factor over what it wrote:
//! measured here (g++ 12, torch 2.15) a unit of only `<torch/library.h>` peaks at 76x its
//! preprocessed 5.4 MB, `<ATen/ATen.h>` 50x, `<torch/all.h>` 84x, `<torch/extension.h>` 91x;
//! the factor is 112x. This costs one preprocessor run per unit, once: afterwards its peak is
//! recorded. With room for `-j` such compilers at the conservative size, or a budget too small
//! for two preprocessors, nothing is run.

use std::path::Path;

use super::command::preprocess_command_for;
use super::gate::run_gated;
use super::nvcc::steps::StepKind;
use crate::plan::{CompileJob, Lang};
use crate::process::Cancel;
use crate::report::Reporter;
use crate::schedule::memory::{MemoryGate, format_size};

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
    // The preprocessor reserves what nvcc's does; a budget that cannot hold two of them is
    // too small to gain anything (the unit runs alone either way, after a preprocessor alone).
    let preprocess = StepKind::HostPreprocess.peak_guess(0);
    if job.lang != Lang::Cxx
        || gate.knows(&gate.key(&job.object, None))
        || !gate.unknown_peak_binds(jobs)
        || preprocess.saturating_mul(2) > gate.budget().bytes
    {
        return None;
    }
    let out = tmp_object.with_extension("ii");
    let spec = preprocess_command_for(job, &out);
    let key = gate.key(&job.object, Some("preprocess"));
    let ran = run_gated(&spec, Some(gate), Some(&key), Some(preprocess), cancel);
    let size = std::fs::metadata(&out).map(|m| m.len());
    let _ = std::fs::remove_file(&out);
    let (Ok(_), Ok(size)) = (ran, size) else {
        return None;
    };
    let guess = StepKind::HostCompile.peak_guess(size);
    reporter.verbose(&format!(
        "`{}` was never measured: preprocessed to {}, it reserves {} (not {}: -j {jobs} of \
         that would not fit the memory budget of {})",
        job.label,
        format_size(size),
        format_size(guess),
        format_size(crate::schedule::memory::UNKNOWN_PEAK),
        format_size(gate.budget().bytes),
    ));
    Some(guess)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::memory::{MemoryBudget, ProcessKey};

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
        let key = |text: &str| ProcessKey::parse(text);
        assert_eq!(gate.estimate(&key("obj/a.o"), None), 3_221_225_472);
        assert_eq!(
            gate.estimate(&key("obj/a.o"), Some(671_908_864)),
            671_908_864
        );
        gate.observe(&key("obj/a.o"), 800 << 20);
        assert_eq!(gate.estimate(&key("obj/a.o"), None), 943_718_400);
        gate.observe(&key("obj/k.o#cicc compute_75"), 160 << 20);
        gate.observe(&key("obj/k.o#cicc compute_80"), 200 << 20);
        let cicc_90 = key("obj/k.o#cicc compute_90a");
        assert_eq!(gate.estimate(&cicc_90, Some(3_203_108_864)), 262_144_000);
        assert_eq!(gate.estimate(&cicc_90, Some(100 << 20)), 104_857_600);
        assert_eq!(
            gate.estimate(&key("obj/k.o#ptxas sm_90"), None),
            3_221_225_472
        );

        // Whether the conservative size binds `-j`: 8 x 3 GiB fit 24 GiB, 9 do not.
        assert!(!gate.unknown_peak_binds(8));
        assert!(gate.unknown_peak_binds(9));
    }
}
