//! How many threads `nvcc`'s device passes split their work over (`--split-compile` and the
//! forms `cicc` and `ptxas` spell it): set on a pass's command as it starts, at low priority
//! beyond one thread, and set to one for a unit compiled by one nvcc.

use super::cubin::NVCC_PTXAS_UNSPLIT;
use crate::process::CommandSpec;

/// nvcc's option that splits only `cicc`'s work over `threads` (`--split-compile` would split
/// `ptxas` too, which writes its options, the thread count among them, into every cubin: the
/// same unit built at another `-j` would differ). `cicc` split or not writes the same PTX.
pub(crate) fn cicc_split(threads: impl std::fmt::Display) -> String {
    format!("-Xcicc=-split-compile={threads}")
}

/// Niceness of a split device pass (`cicc`, `ptxas`): its threads run on the cores the
/// build's jobs leave idle, behind the host side (`cudafe++`, the host compile) beside them.
const SPLIT_NICE: i32 = 10;

/// `spec`, a device pass with a `--split-compile` count, split over `threads`, at low priority
/// ([`SPLIT_NICE`]) when that is more than one. The pass holds only the slot it runs in: its
/// other threads take none, so the host compiles and the other units' steps never wait behind
/// them, and the threads of two heavy units' passes share the idle cores instead of the first
/// to start taking them all. (Taking free slots for its threads, paged-attention's first build
/// on a 16-core GPU box ran one heavy unit's `cicc` on 11 threads and the other's on 1, 136 s,
/// and no host compile started until a `cicc` ended.)
pub(super) fn split_over(spec: &CommandSpec, threads: usize) -> CommandSpec {
    if split_threads(spec).is_none() {
        return spec.clone();
    }
    let threads = threads.max(1);
    let mut out = with_split_threads(spec, threads);
    if threads > 1 {
        out.nice = SPLIT_NICE;
    }
    out
}

/// `spec`, a unit compiled by one nvcc, with every `--split-compile` count set to 1: `cicc`
/// split N ways writes its PTX in an order that depends on N (`ptx.rs`), which kbuild puts
/// back in one order only when it runs the steps itself; one nvcc embeds what `cicc` wrote,
/// so it runs unsplit and builds the same bytes at any `-j` on any machine.
pub(crate) fn unsplit(spec: &CommandSpec) -> CommandSpec {
    let mut out = match split_threads(spec) {
        Some(_) => with_split_threads(spec, 1),
        None => spec.clone(),
    };
    // Its `ptxas` records the count in the cubin as kbuild's steps do ([`super::cubin`]).
    out.args.push(NVCC_PTXAS_UNSPLIT.into());
    out
}

/// The threads `spec` asks for with `--split-compile=N`, `-split-compile=N` (ptxas, cicc),
/// `-split-compile N` (cicc) or nvcc's `-Xcicc=-split-compile=N`.
pub(super) fn split_threads(spec: &CommandSpec) -> Option<usize> {
    let args: Vec<&str> = spec.args.iter().map(|a| a.to_str().unwrap_or("")).collect();
    args.iter()
        .enumerate()
        .filter_map(
            |(i, a)| match a.trim_start_matches("-Xcicc=").split_once('=') {
                Some(("--split-compile" | "-split-compile", n)) => n.parse().ok(),
                None if *a == "-split-compile" => args.get(i + 1)?.parse().ok(),
                _ => None,
            },
        )
        .max()
}

/// `spec` with every `--split-compile` count set to `threads`.
fn with_split_threads(spec: &CommandSpec, threads: usize) -> CommandSpec {
    let mut out = spec.clone();
    let mut count_next = false;
    for arg in out.args.iter_mut() {
        let text = arg.to_str().unwrap_or("");
        let (xcicc, word) = match text.strip_prefix("-Xcicc=") {
            Some(word) => ("-Xcicc=", word),
            None => ("", text),
        };
        if count_next {
            *arg = threads.to_string().into();
            count_next = false;
        } else if let Some((flag @ ("--split-compile" | "-split-compile"), _)) =
            word.split_once('=')
        {
            *arg = format!("{xcicc}{flag}={threads}").into();
        } else {
            count_next = text == "-split-compile";
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobserver::Jobserver;

    fn spec(args: &[&str]) -> CommandSpec {
        let mut spec = CommandSpec::new("tool");
        spec.args(args);
        spec
    }

    fn args(spec: &CommandSpec) -> Vec<String> {
        spec.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_split_device_pass_runs_its_threads_beyond_its_slot_at_low_priority_taking_no_slot() {
        let js = Jobserver::new(4).unwrap();
        let held: Vec<_> = (0..4)
            .map(|_| js.acquire_unless(|| false).unwrap())
            .collect();
        assert_eq!(js.tokens_available(), 0);
        // Every slot is held (the pass's own among them): it still runs the threads it is
        // given, niced, and takes nothing from the pipe.
        let cicc = spec(&["-arch", "compute_90", "-split-compile", "1", "x.cpp1.ii"]);
        let split = split_over(&cicc, 4);
        assert_eq!(
            args(&split),
            ["-arch", "compute_90", "-split-compile", "4", "x.cpp1.ii"]
        );
        assert_eq!(split.nice, SPLIT_NICE);
        assert_eq!(js.tokens_available(), 0);
        drop(held);
        let ptxas = spec(&["-arch=sm_90", "-split-compile=1"]);
        assert_eq!(
            args(&split_over(&ptxas, 3)),
            ["-arch=sm_90", "-split-compile=3"]
        );
        // One thread: at normal priority.
        let one = split_over(&ptxas, 1);
        assert_eq!((args(&one)[1].as_str(), one.nice), ("-split-compile=1", 0));
        let plain = spec(&["-arch=sm_90", "x.ptx"]);
        assert_eq!(split_over(&plain, 4), plain, "no count to set");
    }

    #[test]
    fn one_nvcc_runs_its_device_passes_unsplit() {
        let cicc = spec(&["-arch", "compute_90", "-split-compile", "8", "x.cpp1.ii"]);
        assert_eq!(
            args(&unsplit(&cicc)),
            [
                "-arch",
                "compute_90",
                "-split-compile",
                "1",
                "x.cpp1.ii",
                NVCC_PTXAS_UNSPLIT
            ]
        );
        let nvcc = spec(&["-c", "x.cu", "-Xcicc=-split-compile=3"]);
        assert_eq!(
            args(&unsplit(&nvcc)),
            ["-c", "x.cu", "-Xcicc=-split-compile=1", NVCC_PTXAS_UNSPLIT]
        );
        let plain = spec(&["-c", "x.cu", "--cmdline= -split-compile=4 "]);
        assert_eq!(
            args(&unsplit(&plain)),
            [
                "-c",
                "x.cu",
                "--cmdline= -split-compile=4 ",
                NVCC_PTXAS_UNSPLIT
            ]
        );
    }
}
