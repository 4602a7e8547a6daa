//! A `ptxas` sized by its input as it starts. A unit's cost can be invisible to a source scan
//! (a size constant that unrolls loops or instantiates templates), but not to the PTX `cicc`
//! wrote for it: `ptxas` runs in time proportional to it (nvcc 13.2, the synthetic bench's
//! units of 0.28 to 4.8 MB of PTX: 0.82 to 0.89 µs of CPU per byte). Each `ptxas` of the build
//! that finishes gives its CPU seconds per byte; one starting later is predicted from its PTX's
//! size at the median rate. Predicted at least [`HEAVY`] times the build's typical `ptxas` (the
//! median of the finished ones), it splits over that many threads at once, at normal priority
//! (`schedule::pass_split`): the heaviest passes then share the cores in proportion to their
//! work from their start, instead of one core each until the others finish and leave them the
//! idle ones too late (the bench's synthetic first build on 16 cores: its heaviest `ptxas`
//! started on one thread while units waited, 10.6 s, the build's last 6 s).

use std::sync::Mutex;

/// Finished `ptxas` passes needed before any is sized. One is enough: the heaviest units start
/// first and their `ptxas` soon after the first of the build finishes (the synthetic bench on
/// 16 cores: four of the five heaviest started within 0.7 s of the first finishing, before the
/// second did); [`HEAVY`] keeps a single measure's noise from splitting passes alike.
const MIN_MEASURED: usize = 1;

/// How many typical `ptxas` a pass must be predicted to cost to split: below that the others
/// finish about when it does.
const HEAVY: f64 = 2.0;

/// CPU seconds a pass must be predicted to take to split: a shorter one ends before more
/// threads gain anything.
const MIN_CPU: f64 = 2.0;

/// What the build's finished `ptxas` passes measured: each one's PTX bytes and CPU seconds.
#[derive(Debug, Default)]
pub struct PtxasCosts {
    done: Mutex<Vec<(u64, f64)>>,
}

/// A `ptxas` predicted heavy: the threads its predicted work asks for, and why (for `-v`).
#[derive(Debug, Clone, PartialEq)]
pub struct Heavy {
    pub threads: usize,
    pub why: String,
}

impl PtxasCosts {
    /// A `ptxas` over `ptx_bytes` of PTX finished after `cpu_seconds` of CPU (all its threads).
    pub fn finished(&self, ptx_bytes: u64, cpu_seconds: f64) {
        if ptx_bytes > 0 && cpu_seconds > 0.0 {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            done.push((ptx_bytes, cpu_seconds));
        }
    }

    /// The threads a `ptxas` over `ptx_bytes` asks for by its predicted CPU time against the
    /// typical finished one's; `None` when not [`HEAVY`] (or too little is measured).
    pub fn heavy(&self, ptx_bytes: u64) -> Option<Heavy> {
        let done = self.done.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if done.len() < MIN_MEASURED || ptx_bytes == 0 {
            return None;
        }
        let rate = median(done.iter().map(|&(bytes, cpu)| cpu / bytes as f64))?;
        let typical = median(done.iter().map(|&(_, cpu)| cpu))?;
        let predicted = rate * ptx_bytes as f64;
        let times = predicted / typical;
        if predicted < MIN_CPU || times < HEAVY {
            return None;
        }
        Some(Heavy {
            threads: times.floor() as usize,
            why: format!(
                "its PTX ({:.1} MB) predicts {predicted:.1}s of CPU, {times:.1}x the typical \
                 `ptxas` of this build ({typical:.1}s, {} finished)",
                ptx_bytes as f64 / 1e6,
                done.len()
            ),
        })
    }
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(match values.len() % 2 {
        1 => values[mid],
        _ => (values[mid - 1] + values[mid]) / 2.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ptxas_over_several_times_the_typical_ptx_asks_for_threads_in_proportion() {
        let costs = PtxasCosts::default();
        // Nothing measured: nothing to size by. One: 1 µs per byte, the typical pass 1 s.
        assert_eq!(costs.heavy(5_000_000), None);
        costs.finished(1_000_000, 1.0);
        assert_eq!(costs.heavy(5_000_000).map(|h| h.threads), Some(5));
        assert_eq!(costs.heavy(1_900_000), None, "1.9x the typical");
        // Two: the typical pass 1.5 s.
        costs.finished(2_000_000, 2.0);
        let heavy = costs.heavy(6_000_000).expect("6 s against a typical 1.5 s");
        assert_eq!(heavy.threads, 4);
        assert!(
            heavy
                .why
                .contains("6.0 MB) predicts 6.0s of CPU, 4.0x the typical"),
            "{}",
            heavy.why
        );
        // Twice the typical but under two seconds of CPU, or under twice the typical: none.
        costs.finished(500, 0.0005);
        costs.finished(600, 0.0006);
        assert_eq!(costs.heavy(1_800_000), None, "1.8 s");
        let fresh = PtxasCosts::default();
        fresh.finished(3_000_000, 3.0);
        fresh.finished(4_000_000, 4.0);
        assert_eq!(fresh.heavy(5_000_000), None, "5 s against a typical 3.5 s");
        assert_eq!(fresh.heavy(7_000_000).map(|h| h.threads), Some(2));
    }

    #[test]
    fn passes_that_measured_nothing_are_not_counted() {
        let costs = PtxasCosts::default();
        costs.finished(0, 1.0);
        costs.finished(1_000_000, 0.0);
        assert_eq!(costs.heavy(9_000_000), None, "none counted");
        costs.finished(1_000_000, 1.0);
        assert!(costs.heavy(9_000_000).is_some());
    }
}
