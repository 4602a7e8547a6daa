//! Which units nvcc splits (`--split-compile`): the tail units that would leave job slots
//! idle, and the critical ones no order hides, from a simulation of the start order.

use serde::Serialize;

/// nvcc `--split-compile` for one unit: its device passes split their work over `threads`
/// threads, because the schedule would otherwise leave cores idle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitCompile {
    /// The threads each device pass uses (`--split-compile=N`): it holds one job slot, and the
    /// threads beyond it run at low priority on the cores the jobs leave idle
    /// (`compile::split`); a unit compiled by one nvcc uses as many as it finds free slots for.
    pub threads: u32,
    /// Why (shown by `--dry-run` and `-v`).
    pub why: String,
}

/// Which units to split, given each unit's predicted `costs` (seconds), the `order` they
/// start in, `slots` job slots and each unit's `width` (slots its own passes already fill,
/// e.g. one per capability). Simulates the start order on the slots (longest-first list
/// scheduling, a unit in one slot) and splits a unit when
/// - the tail: other slots run out of work before the middle of its run, so they would idle
///   while it runs; its passes get those slots;
/// - or it is critical: it alone is predicted longer than the floor (all work / slots), so no
///   order hides it; its passes get its share of the slots (cost / floor).
pub fn plan_splits(
    costs: &[f64],
    widths: &[usize],
    order: &[usize],
    slots: usize,
) -> Vec<Option<SplitCompile>> {
    let mut splits = vec![None; costs.len()];
    if slots < 2 || costs.is_empty() {
        return splits;
    }
    let runs = simulate(costs, order, slots);
    let mut last_end = vec![0.0f64; slots];
    for run in runs.iter().flatten() {
        last_end[run.slot] = last_end[run.slot].max(run.end);
    }
    let total: f64 = costs.iter().sum();
    let floor = total / slots as f64;
    for (i, run) in runs.iter().enumerate() {
        let Some(run) = run else { continue };
        let middle = (run.start + run.end) / 2.0;
        let idle = (0..slots)
            .filter(|&s| s != run.slot && last_end[s] <= middle)
            .count();
        let share = if floor > 0.0 {
            ((costs[i] / floor).ceil() as usize).min(slots)
        } else {
            1
        };
        let width = widths.get(i).copied().unwrap_or(1).max(1);
        let (slots_for, why) = if costs[i] > floor * 1.05 && share > 1 + idle {
            let why = format!(
                "predicted {:.1}s, longer than the whole build's floor {floor:.1}s \
                 (all units' {total:.1}s / {slots} slots): it takes {share} slots",
                costs[i]
            );
            (share, why)
        } else {
            let why = format!(
                "in the tail: {idle} of {slots} job slots have no other unit to run for most \
                 of its predicted {:.1}s",
                costs[i]
            );
            (1 + idle, why)
        };
        let threads = slots_for / width;
        if threads >= 2 {
            splits[i] = Some(SplitCompile {
                threads: threads as u32,
                why,
            });
        }
    }
    splits
}

/// Where and when a unit runs in [`simulate`].
#[derive(Debug, Clone, Copy)]
struct SimRun {
    slot: usize,
    start: f64,
    end: f64,
}

/// Units started in `order`, each in the slot that frees first.
fn simulate(costs: &[f64], order: &[usize], slots: usize) -> Vec<Option<SimRun>> {
    let mut free_at = vec![0.0f64; slots];
    let mut runs = vec![None; costs.len()];
    let order: Vec<usize> = if order.len() == costs.len() {
        order.to_vec()
    } else {
        (0..costs.len()).collect()
    };
    for i in order {
        let (slot, &start) = free_at
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .unwrap_or((0, &0.0));
        let end = start + costs[i].max(0.0);
        free_at[slot] = end;
        runs[i] = Some(SimRun { slot, start, end });
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_left_alone_at_the_end_is_split_over_the_idle_slots() {
        // Three equal units on two slots: the third runs alone.
        let splits = plan_splits(&[10.0, 10.0, 10.0], &[1, 1, 1], &[0, 1, 2], 2);
        assert_eq!(splits[0], None);
        assert_eq!(splits[1], None);
        let third = splits[2].as_ref().expect("the tail unit is split");
        assert_eq!(third.threads, 2);
        assert!(
            third.why.starts_with("in the tail: 1 of 2"),
            "{}",
            third.why
        );
    }

    #[test]
    fn a_unit_longer_than_the_floor_is_split_by_its_share_and_balanced_units_are_not() {
        // 8 slots kept busy by 7 units of 40 s beside one of 60 s: floor 340 / 8 = 42.5 s.
        let mut costs = vec![60.0];
        costs.extend([40.0; 7]);
        let order: Vec<usize> = (0..costs.len()).collect();
        let splits = plan_splits(&costs, &[1; 8], &order, 8);
        let first = splits[0].as_ref().expect("the critical unit is split");
        assert_eq!(first.threads, 2, "{}", first.why);
        assert!(first.why.contains("floor 42.5s"), "{}", first.why);
        assert!(splits[1..].iter().all(Option::is_none), "{splits:?}");
        // The same unit beside little work: the idle slots decide.
        let mut costs = vec![60.0];
        costs.extend([5.0; 7]);
        let splits = plan_splits(&costs, &[1; 8], &order, 8);
        assert_eq!(splits[0].as_ref().map(|s| s.threads), Some(8));
        assert_eq!(plan_splits(&[4.0; 8], &[1; 8], &order, 4), vec![None; 8]);
        // Its passes already fill three slots: three threads each would be nine.
        assert_eq!(
            plan_splits(&[10.0], &[3], &[0], 4),
            vec![None],
            "one unit of 3 capabilities on 4 slots"
        );
        assert_eq!(plan_splits(&[10.0], &[1], &[0], 1), vec![None]);
    }
}
