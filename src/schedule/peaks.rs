//! The one model of how much memory a compiler process needs at its peak, which the memory
//! gate (`memory.rs`) reserves before the process starts: what it reached last time with a
//! margin, else what a sibling capability of the same step reached, else a guess from the
//! bytes it reads (nvcc's steps from the files earlier steps wrote, a C++ unit from its
//! preprocessed size), else a conservative [`UNKNOWN_PEAK`]; and whether that conservative
//! size binds the build's `-j`.

/// What a compiler process never measured and not guessed reserves: one nvcc front end (cicc)
/// over torch's headers was measured at 2.9 GB, the most of any step.
pub const UNKNOWN_PEAK: u64 = 3 << 30;

/// What a process never measured reserves at most before its input's size is counted: the
/// process itself and the libraries it maps.
const BASE_PEAK: u64 = 64 << 20;

/// What a preprocessor never measured reserves: its input is the source, whose headers are not
/// known yet (over torch's headers `gcc -E` peaks at 280 MB).
const PREPROCESS_PEAK: u64 = 512 << 20;

/// What a compiler process does, as far as its memory goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A preprocessor (the host's or a capability's): its input's headers are not known yet.
    Preprocess,
    /// nvcc's device front end, `cicc`, over a preprocessed unit.
    DeviceFrontEnd,
    /// nvcc's host front end, `cudafe++`, over a preprocessed unit.
    HostFrontEnd,
    /// `ptxas` over a PTX file.
    Assemble,
    /// The host compiler over a preprocessed unit (a C++ unit, or `cudafe++`'s output).
    HostCompile,
    /// `fatbinary` over the cubins and PTX.
    Fatbinary,
    /// Putting finished bytes into an object: the fatbinary as an object, the partial link.
    Package,
}

/// The peak to reserve for `work` never measured that reads `input` bytes. The factors sit
/// above what was measured: `cicc` 84x (a 2.8 MB unit) to 146x (19.6 MB over torch's headers)
/// its preprocessed input, `cudafe++` 69x to 107x, the host compile 63x to 77x its `cudafe++`
/// output and a C++ unit 50x (`<ATen/ATen.h>`) to 91x (`<torch/extension.h>`) its
/// preprocessed size (g++ 12, torch 2.15), `ptxas` 69x its PTX.
pub fn guess(work: Work, input: u64) -> u64 {
    let per_byte = match work {
        Work::Preprocess => return PREPROCESS_PEAK,
        Work::DeviceFrontEnd => 160,
        Work::HostFrontEnd | Work::Assemble => 128,
        Work::HostCompile => 112,
        Work::Fatbinary => 4,
        Work::Package => 2,
    };
    BASE_PEAK.saturating_add(input.saturating_mul(per_byte))
}

/// What a process is expected to need: its `recorded` peak with an eighth more (a changed
/// source may need a little more); never measured, the caller's `guess`, else
/// [`UNKNOWN_PEAK`], but at most a quarter over its `sibling`'s peak, the largest of the same
/// step of the same unit for another capability (the same source: peaks within 5% for `cicc`,
/// 30% for the far smaller `ptxas`).
pub fn estimate(recorded: Option<u64>, sibling: Option<u64>, guess: Option<u64>) -> u64 {
    if let Some(peak) = recorded {
        return peak + peak / 8;
    }
    let guess = guess.unwrap_or(UNKNOWN_PEAK);
    match sibling {
        Some(peak) => guess.min(peak + peak / 4),
        None => guess,
    }
}

/// What a process split over `threads` (a device pass's `-split-compile`) is expected to need,
/// given its `estimate` on one thread's terms and the caller's `guess` from its input. A split
/// pass needs more than an unsplit one (nvcc 13.2, one 4.8 MB PTX: `ptxas` 147 MB on 1 thread,
/// 266 MB on 2, 375 MB on 16; `cicc` over its unit 106, 141 and 164 MB on 1, 2 and 8), and its
/// record may be of a run on one thread, so it reserves at least the guess, which covers those
/// (`ptxas` 128x its PTX: 682 MB there).
pub fn on_threads(estimate: u64, guess: Option<u64>, threads: usize) -> u64 {
    match guess {
        Some(guess) if threads > 1 => estimate.max(guess),
        _ => estimate,
    }
}

/// Whether memory binds `-j` for processes never measured: `jobs` of [`UNKNOWN_PEAK`] do not
/// fit `budget`, so reserving it would hold others back, and a budget that holds two
/// preprocessors is worth running one to guess closer (below that the process runs alone
/// either way, after a preprocessor alone). The one place this is decided.
pub fn memory_binds_jobs(budget: u64, jobs: usize) -> bool {
    UNKNOWN_PEAK.saturating_mul(jobs as u64) > budget
        && guess(Work::Preprocess, 0).saturating_mul(2) <= budget
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_process_reserves_at_least_the_guess_from_its_input() {
        let recorded_unsplit = estimate(Some(147 << 20), None, Some(682 << 20));
        assert_eq!(
            on_threads(recorded_unsplit, Some(682 << 20), 1),
            recorded_unsplit
        );
        assert_eq!(on_threads(recorded_unsplit, Some(682 << 20), 16), 682 << 20);
        assert_eq!(
            on_threads(900 << 20, Some(682 << 20), 16),
            900 << 20,
            "a larger record"
        );
        assert_eq!(
            on_threads(900 << 20, None, 16),
            900 << 20,
            "no guess: the record"
        );
    }

    #[test]
    fn memory_binds_jobs_when_conservative_sizes_do_not_fit_but_two_preprocessors_do() {
        assert!(!memory_binds_jobs(24 << 30, 8), "8 x 3 GiB fit 24 GiB");
        assert!(memory_binds_jobs(24 << 30, 9));
        assert!(memory_binds_jobs(24 << 30, usize::MAX), "no overflow");
        assert!(memory_binds_jobs(1 << 30, 2));
        assert!(
            !memory_binds_jobs((1 << 30) - 1, 2),
            "not two preprocessors"
        );
    }
}
