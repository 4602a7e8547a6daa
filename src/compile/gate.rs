//! The one way a compiler process waits for memory: admitted by the build's memory gate,
//! its peak measured and learned.

use crate::process::{Cancel, CommandFailure, CommandSpec, Measured, run_measured};
use crate::schedule::memory::{MemoryGate, ProcessKey};

/// Run `spec` once `gate` admits the process `key` (learned by that key; never measured, it
/// reserves `guess`, else a conservative size), or at once without a gate. Cancelled while
/// waiting: as if cancelled while running.
pub(crate) fn run_gated(
    spec: &CommandSpec,
    gate: Option<&MemoryGate>,
    key: Option<&ProcessKey>,
    guess: Option<u64>,
    cancel: &Cancel,
) -> Result<std::process::Output, CommandFailure> {
    run_gated_measured(spec, gate, key, guess, 1, cancel).map(|m| m.output)
}

/// [`run_gated`] for a process on `threads` threads (a split device pass reserves at least
/// `guess`: `peaks::on_threads`), with what the process measured (its peak and CPU time).
pub(crate) fn run_gated_measured(
    spec: &CommandSpec,
    gate: Option<&MemoryGate>,
    key: Option<&ProcessKey>,
    guess: Option<u64>,
    threads: usize,
    cancel: &Cancel,
) -> Result<Measured, CommandFailure> {
    let (Some(gate), Some(key)) = (gate, key) else {
        return run_measured(spec, cancel);
    };
    let Some(_reserved) = gate.admit(key, guess, threads, cancel) else {
        return Err(match crate::process::interrupted() {
            Some(interrupted) => CommandFailure::Interrupted {
                command: spec.to_string(),
                interrupted,
            },
            None => CommandFailure::Cancelled {
                command: spec.to_string(),
            },
        });
    };
    let measured = run_measured(spec, cancel)?;
    gate.observe(key, measured.peak_bytes);
    Ok(measured)
}
