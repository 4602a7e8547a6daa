//! How many threads a device pass (`cicc`, `ptxas`) splits its work over, decided when it
//! starts, since only then is it known which units are still running: the schedule's split
//! (`splits.rs`, from predicted costs), or more once no unit waits to start. From then on every
//! slot a finished unit leaves would idle; the units still running share the slots, each pass
//! taking its unit's share. A unit whose cost nothing predicted (its size in a constant) that
//! starts last and long thus gets the cores the others leave, pass by pass; one its siblings'
//! measured costs say the build waits for alone takes every slot at once. A `ptxas` whose PTX
//! predicts several times the build's typical one (`ptxas_costs.rs`) splits by that much as it
//! starts, whether or not units wait.

use super::ptxas_costs::Heavy;
use crate::jobserver::Jobserver;

/// A device pass that can split its work over threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevicePass {
    Cicc,
    Ptxas,
}

/// `ptxas` threads at most: it writes its thread count into every cubin
/// (`.note.nv.tkinfo`: `-split-compile 7`), which kbuild writes back as `1` in place
/// (`compile/nvcc/cubin.rs`), so that the bytes do not depend on the split: one digit.
pub const PTXAS_MAX_THREADS: usize = 9;

/// The threads a device pass runs on, and why when more than the schedule chose.
#[derive(Debug, Clone, PartialEq)]
pub struct PassSplit {
    pub threads: usize,
    /// The threads beyond the pass's own slot take no slot and run at low priority (a split
    /// the schedule planned while other units run beside it); `false` for the unit's share of
    /// the slots once no unit waits, which only the units running share: at normal priority,
    /// so that a loaded machine's other processes do not starve the pass the build waits for.
    pub background: bool,
    /// Said with `-v` when the pass splits more than the schedule planned.
    pub late: Option<String>,
}

/// The threads for `pass` of a unit as it starts: the `scheduled` split (`RunChoice::split`),
/// or more when
/// - no unit of the run waits to start: the unit's share of the jobserver's slots (slots /
///   units running / the unit's `capabilities`, each of which runs its own passes);
/// - and the build is `waited_for` the unit alone (`Siblings::waited_for`, why): every slot its
///   capability may use, since the others then finish before it whatever they get;
/// - or the pass is a `heavy` `ptxas` (`PtxasCosts::heavy`, whether or not units wait): the
///   threads its predicted work asks for, up to every slot its capability may use.
///
/// The most of these, at most the slots (and [`PTXAS_MAX_THREADS`] for `ptxas`). The threads
/// beyond the pass's own slot take none; a planned split's run at low priority
/// ([`PassSplit::background`]), the others at normal priority.
/// Without a jobserver nothing counts the slots: one thread.
pub fn pass_split(
    pass: DevicePass,
    scheduled: Option<u32>,
    capabilities: usize,
    jobserver: Option<&Jobserver>,
    waited_for: Option<String>,
    heavy: Option<Heavy>,
) -> PassSplit {
    let Some(js) = jobserver else {
        return PassSplit {
            threads: 1,
            late: None,
            background: false,
        };
    };
    let cap = match pass {
        DevicePass::Cicc => js.slots(),
        DevicePass::Ptxas => js.slots().min(PTXAS_MAX_THREADS),
    };
    let planned = (scheduled.unwrap_or(1) as usize).clamp(1, cap.max(1));
    let all = (js.slots() / capabilities.max(1)).min(cap);
    // Each reason for more threads than planned; the first of the most wins.
    let mut more: Vec<(usize, String)> = Vec::new();
    if let Some(running) = js.running_with_none_waiting() {
        if let Some(why) = waited_for {
            more.push((all, why));
        }
        let share = (js.slots() / running / capabilities.max(1)).min(cap);
        more.push((
            share,
            format!(
                "no unit waits to start, {running} running on {} slots, its share",
                js.slots()
            ),
        ));
    }
    if let Some(heavy) = heavy {
        more.push((heavy.threads.min(all), heavy.why));
    }
    let most = (more.into_iter())
        .filter(|(threads, _)| *threads > planned && *threads >= 2)
        .reduce(|a, b| if b.0 > a.0 { b } else { a });
    match most {
        Some((threads, why)) => PassSplit {
            threads,
            late: Some(format!(
                "split over {threads} threads (--split-compile): {why}"
            )),
            background: false,
        },
        None => PassSplit {
            threads: planned,
            late: None,
            background: planned > 1,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A jobserver of `slots` for a run of `units`, `started` of them started.
    fn run_of(slots: usize, units: usize, started: usize) -> Jobserver {
        let js = Jobserver::new(slots).unwrap();
        js.start_run(units);
        for _ in 0..started {
            js.unit_started();
        }
        js
    }

    #[test]
    fn once_no_unit_waits_a_pass_takes_its_units_share_of_the_slots() {
        let js = run_of(16, 20, 19);
        // One unit waits: the schedule's split holds.
        let split = pass_split(DevicePass::Cicc, Some(3), 1, Some(&js), None, None);
        assert_eq!((split.threads, split.late), (3, None));
        js.unit_started();
        for _ in 0..16 {
            js.unit_finished();
        }
        // Four running, none waiting: 16 / 4.
        let split = pass_split(DevicePass::Cicc, None, 1, Some(&js), None, None);
        assert_eq!((split.threads, split.background), (4, false));
        let why = split.late.expect("said with -v");
        assert!(
            why.contains("no unit waits to start, 4 running on 16 slots"),
            "{why}"
        );
        // Two capabilities: each of its passes gets half the unit's share.
        assert_eq!(
            pass_split(DevicePass::Cicc, None, 2, Some(&js), None, None).threads,
            2
        );
        for _ in 0..3 {
            js.unit_finished();
        }
        // The last unit: every slot, but ptxas at most 9 (its count is one digit).
        assert_eq!(
            pass_split(DevicePass::Cicc, None, 1, Some(&js), None, None).threads,
            16
        );
        assert_eq!(
            pass_split(DevicePass::Ptxas, None, 1, Some(&js), None, None).threads,
            9
        );
        assert_eq!(
            pass_split(DevicePass::Ptxas, None, 1, None, None, None).threads,
            1
        );
    }

    #[test]
    fn a_pass_of_the_unit_the_build_waits_for_takes_every_slot_once_no_unit_waits() {
        let js = run_of(16, 11, 10);
        let waits = || Some("the build waits for this unit: predicted 60.0s".to_string());
        // A unit still waits to start: the planned split holds.
        let split = pass_split(DevicePass::Ptxas, Some(6), 1, Some(&js), waits(), None);
        assert_eq!((split.threads, split.background), (6, true));
        js.unit_started();
        // All started, eleven running: its share would be one; it takes what ptxas may.
        let split = pass_split(DevicePass::Ptxas, Some(6), 1, Some(&js), waits(), None);
        assert_eq!(
            (split.threads, split.background),
            (PTXAS_MAX_THREADS, false)
        );
        let why = split.late.expect("said with -v");
        assert!(why.contains("the build waits for this unit"), "{why}");
        // cicc: every slot; two capabilities: half each.
        assert_eq!(
            pass_split(DevicePass::Cicc, None, 1, Some(&js), waits(), None).threads,
            16
        );
        assert_eq!(
            pass_split(DevicePass::Cicc, None, 2, Some(&js), waits(), None).threads,
            8
        );
        // Not waited for: its planned split.
        assert_eq!(
            pass_split(DevicePass::Ptxas, Some(6), 1, Some(&js), None, None).threads,
            6
        );
    }

    #[test]
    fn a_heavy_ptxas_takes_the_threads_its_work_asks_for_even_while_units_wait() {
        let js = run_of(16, 30, 16);
        let heavy = |threads| {
            Some(Heavy {
                threads,
                why: "its PTX (9.0 MB) predicts 9.0s of CPU".into(),
            })
        };
        // Units still wait: the heavy one splits anyway, at normal priority.
        let split = pass_split(DevicePass::Ptxas, None, 1, Some(&js), None, heavy(5));
        assert_eq!((split.threads, split.background), (5, false));
        let why = split.late.expect("said with -v");
        assert!(
            why.starts_with("split over 5 threads (--split-compile): its PTX (9.0 MB)"),
            "{why}"
        );
        // At most what ptxas may, and half of that for each of two capabilities.
        assert_eq!(
            pass_split(DevicePass::Ptxas, None, 1, Some(&js), None, heavy(40)).threads,
            PTXAS_MAX_THREADS
        );
        assert_eq!(
            pass_split(DevicePass::Ptxas, None, 2, Some(&js), None, heavy(40)).threads,
            8
        );
        // A planned split of more threads holds, in the background.
        let split = pass_split(DevicePass::Ptxas, Some(6), 1, Some(&js), None, heavy(3));
        assert_eq!(
            (split.threads, split.background, split.late),
            (6, true, None)
        );
        // No jobserver: one thread.
        assert_eq!(
            pass_split(DevicePass::Ptxas, None, 1, None, None, heavy(5)).threads,
            1
        );
    }

    #[test]
    fn a_planned_split_larger_than_the_share_is_kept_and_not_said() {
        let js = Jobserver::new(4).unwrap();
        js.start_run(2);
        js.unit_started();
        js.unit_started();
        let split = pass_split(DevicePass::Ptxas, Some(4), 1, Some(&js), None, None);
        assert_eq!(
            (split.threads, split.late, split.background),
            (4, None, true)
        );
        let js = Jobserver::new(2).unwrap();
        js.start_run(2);
        js.unit_started();
        js.unit_started();
        assert_eq!(
            pass_split(DevicePass::Cicc, None, 1, Some(&js), None, None).threads,
            1
        );
    }
}
