//! A `ptxas` sized by its input as it starts. A unit's cost can be invisible to a source scan
//! (a size constant that unrolls loops or instantiates templates), but not to the PTX `cicc`
//! wrote for it: `ptxas` runs in time proportional to it (nvcc 13.2, the synthetic bench's
//! units of 0.28 to 4.8 MB of PTX: 0.82 to 0.89 µs of CPU per byte). A `ptxas` whose PTX is at
//! least [`HEAVY`] times the build's typical `ptxas` input (the median of those started so
//! far) and long enough to matter (its size at the CPU per byte the finished ones measured)
//! splits over that many threads at once, at normal priority
//! (`schedule::pass_split`): the heaviest passes then share the cores in proportion to their
//! work from their start, instead of one core each until the others finish and leave them the
//! idle ones too late (the bench's synthetic first build on 16 cores: its heaviest `ptxas`
//! started on one thread while units waited, 10.6 s, the build's last 6 s).

use std::sync::Mutex;

/// `ptxas` passes started before one is sized: fewer say too little of what is typical.
const MIN_SEEN: usize = 2;

/// How many times the typical `ptxas` input a pass's PTX must be to split: below that the
/// others finish about when it does.
const HEAVY: f64 = 2.0;

/// CPU seconds a pass must be predicted to take to split: a shorter one ends before more
/// threads gain anything.
const MIN_CPU: f64 = 2.0;

/// CPU seconds per byte of PTX assumed before any `ptxas` of the build finished: below what
/// was measured (0.82-0.89 µs on this project's 2-core machine, ~2 µs on a loaded 16-core
/// one), so that a pass is taken for long only when its size says so.
const FIRST_RATE: f64 = 0.5e-6;

/// The build's `ptxas` passes: each started one's PTX bytes, each finished one's bytes and
/// CPU seconds.
#[derive(Debug, Default)]
pub struct PtxasCosts {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default, Clone)]
struct Seen {
    started: Vec<u64>,
    finished: Vec<(u64, f64)>,
}

/// A `ptxas` predicted heavy: the threads its input asks for, and why (for `-v`).
#[derive(Debug, Clone, PartialEq)]
pub struct Heavy {
    pub threads: usize,
    pub why: String,
}

impl PtxasCosts {
    /// A `ptxas` over `ptx_bytes` of PTX starts: sized first ([`PtxasCosts::heavy`]), then
    /// counted among the started ones.
    pub fn start(&self, ptx_bytes: u64) -> Option<Heavy> {
        let heavy = self.heavy(ptx_bytes);
        if ptx_bytes > 0 {
            self.lock().started.push(ptx_bytes);
        }
        heavy
    }

    /// A `ptxas` over `ptx_bytes` of PTX finished after `cpu_seconds` of CPU (all its threads).
    pub fn finished(&self, ptx_bytes: u64, cpu_seconds: f64) {
        if ptx_bytes > 0 && cpu_seconds > 0.0 {
            self.lock().finished.push((ptx_bytes, cpu_seconds));
        }
    }

    /// The threads a `ptxas` over `ptx_bytes` asks for: its size over the typical (median)
    /// input of the `ptxas` passes started so far, when that is [`HEAVY`] and its predicted
    /// CPU time (at the median rate of the finished ones, else [`FIRST_RATE`]) is
    /// [`MIN_CPU`] or more; `None` otherwise, or before [`MIN_SEEN`] started.
    pub fn heavy(&self, ptx_bytes: u64) -> Option<Heavy> {
        let seen = self.lock().clone();
        if seen.started.len() < MIN_SEEN || ptx_bytes == 0 {
            return None;
        }
        let typical = median(seen.started.iter().map(|&b| b as f64))?;
        let times = ptx_bytes as f64 / typical;
        let measured = median(seen.finished.iter().map(|&(b, cpu)| cpu / b as f64));
        let predicted = measured.unwrap_or(FIRST_RATE) * ptx_bytes as f64;
        if predicted < MIN_CPU || times < HEAVY {
            return None;
        }
        let rate = match measured {
            Some(_) => format!(
                "the rate its {} finished `ptxas` measured",
                seen.finished.len()
            ),
            None => "a low rate, no `ptxas` finished yet".to_string(),
        };
        Some(Heavy {
            threads: times.floor() as usize,
            why: format!(
                "its PTX ({:.1} MB) is {times:.1}x the typical input of the {} `ptxas` of this \
                 build started so far ({:.1} MB) and predicts {predicted:.1}s of CPU at {rate}",
                ptx_bytes as f64 / 1e6,
                seen.started.len(),
                typical / 1e6,
            ),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
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
        // Fewer than two started: nothing to size by.
        assert_eq!(costs.start(1_000_000), None);
        assert_eq!(costs.heavy(8_000_000), None);
        assert_eq!(costs.start(2_000_000), None);
        // Typical 1.5 MB; none finished: 0.5 µs a byte.
        let heavy = costs.heavy(6_000_000).expect("4x the typical input, 3 s");
        assert_eq!(heavy.threads, 4);
        assert!(
            heavy
                .why
                .contains("(6.0 MB) is 4.0x the typical input of the 2 `ptxas`")
                && heavy
                    .why
                    .contains("(1.5 MB) and predicts 3.0s of CPU at a low rate"),
            "{}",
            heavy.why
        );
        assert_eq!(costs.heavy(3_900_000), None, "2.6x but 1.95 s");
        // Once one finished, its rate: 1 µs a byte.
        costs.finished(1_000_000, 1.0);
        let heavy = costs.heavy(3_900_000).expect("2.6x, 3.9 s");
        assert_eq!(heavy.threads, 2);
        assert!(
            heavy.why.contains("3.9s of CPU at the rate its 1 finished"),
            "{}",
            heavy.why
        );
        // Under twice the typical: none, however long.
        assert_eq!(costs.heavy(2_900_000), None);
    }

    #[test]
    fn a_started_pass_counts_toward_the_typical_after_it_is_sized() {
        let costs = PtxasCosts::default();
        costs.start(1_000_000);
        costs.start(1_000_000);
        costs.finished(1_000_000, 1.0);
        assert_eq!(costs.start(9_000_000).map(|h| h.threads), Some(9));
        costs.start(9_000_000);
        costs.start(9_000_000);
        // Now the typical input is 9 MB: another of 9 MB is typical.
        assert_eq!(costs.heavy(9_000_000), None);
        // Nothing measured counts nothing.
        costs.finished(0, 1.0);
        costs.finished(1_000_000, 0.0);
        assert_eq!(costs.lock().finished.len(), 1);
    }
}
