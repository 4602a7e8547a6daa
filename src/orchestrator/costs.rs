//! What each compile job cost the last time it ran: `<work_dir>/costs.json`, the wall time of
//! every job a compiler ran for, keyed by its object (one per source and variant). The next
//! build starts its jobs longest first, so the longest one does not start last and become the
//! tail the others wait for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::plan::CompileJob;

/// Bump when the meaning of a recorded time changes: old records are then ignored.
const COSTS_VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    version: u32,
    /// Object path (relative to the work directory where it lies below it) → seconds.
    seconds: BTreeMap<String, f64>,
}

/// The recorded costs of one work directory.
#[derive(Debug)]
pub(super) struct Costs {
    work_dir: PathBuf,
    seconds: BTreeMap<String, f64>,
}

impl Costs {
    /// The costs recorded in `work_dir`; none when there is no record or it cannot be read
    /// (a missing record only costs the ordering).
    pub(super) fn load(work_dir: &Path) -> Self {
        let seconds = std::fs::read(path(work_dir))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Record>(&bytes).ok())
            .filter(|r| r.version == COSTS_VERSION)
            .map(|r| r.seconds)
            .unwrap_or_default();
        Costs {
            work_dir: work_dir.to_path_buf(),
            seconds,
        }
    }

    fn key(&self, job: &CompileJob) -> String {
        let object = job
            .object
            .strip_prefix(&self.work_dir)
            .unwrap_or(&job.object);
        object.to_string_lossy().into_owned()
    }

    /// The last recorded cost of `job`, if it was timed.
    pub(super) fn of(&self, job: &CompileJob) -> Option<f64> {
        self.seconds.get(&self.key(job)).copied()
    }

    /// Indices of `jobs` in the order they should start: the jobs never timed first, in plan
    /// order, then the timed ones by descending cost (ties in plan order).
    ///
    /// Untimed first: such a job may be the longest of all (a new source, or the binding
    /// units, which parse torch's headers, in a first build), and a long job started last is
    /// the one case longest-first exists to avoid; starting a short one early costs little.
    pub(super) fn longest_first(&self, jobs: &[CompileJob]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        // `None` sorts before every `Some`; reversed, the largest cost comes first.
        order.sort_by(|&a, &b| {
            let (ca, cb) = (self.of(&jobs[a]), self.of(&jobs[b]));
            match (ca, cb) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => y.total_cmp(&x),
            }
        });
        order
    }

    /// Remember how long the jobs a compiler ran for took (`times[i]` for `jobs[i]`; `None`
    /// leaves a job's earlier record) and write the record.
    pub(super) fn record(
        &mut self,
        jobs: &[CompileJob],
        times: &[Option<Duration>],
    ) -> std::io::Result<()> {
        for (job, time) in jobs.iter().zip(times) {
            if let Some(time) = time {
                self.seconds.insert(self.key(job), time.as_secs_f64());
            }
        }
        let record = Record {
            version: COSTS_VERSION,
            seconds: self.seconds.clone(),
        };
        let json = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
        crate::files::write_atomic(&path(&self.work_dir), &json)
    }
}

fn path(work_dir: &Path) -> PathBuf {
    work_dir.join("costs.json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Lang;

    fn job(work: &Path, name: &str) -> CompileJob {
        CompileJob {
            label: name.into(),
            lang: Lang::Cxx,
            compiler: "c++".into(),
            host_compiler: None,
            source: work.join(name),
            object: work.join("obj").join(format!("{name}.o")),
            depfile: work.join("obj").join(format!("{name}.d")),
            std: "c++17".into(),
            include_dirs: Vec::new(),
            system_include_dirs: Vec::new(),
            defines: Vec::new(),
            flags: Vec::new(),
            host_flags: Vec::new(),
            gencodes: Vec::new(),
            nvcc_threads: 1,
            nvcc_jobserver: false,
            compiler_id: String::new(),
        }
    }

    #[test]
    fn untimed_jobs_start_first_then_the_longest() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        let jobs: Vec<CompileJob> = ["a", "b", "c", "d"].iter().map(|n| job(work, n)).collect();
        let secs = |s: f64| Some(Duration::from_secs_f64(s));
        let mut costs = Costs::load(work);
        assert_eq!(costs.longest_first(&jobs), [0, 1, 2, 3]);
        costs
            .record(&jobs, &[secs(1.0), None, secs(9.0), secs(3.0)])
            .unwrap();

        let costs = Costs::load(work);
        assert_eq!(costs.of(&jobs[2]), Some(9.0));
        assert_eq!(costs.longest_first(&jobs), [1, 2, 3, 0]);
    }

    #[test]
    fn a_cached_job_keeps_its_earlier_cost() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = [job(dir.path(), "a")];
        let mut costs = Costs::load(dir.path());
        costs
            .record(&jobs, &[Some(Duration::from_secs(5))])
            .unwrap();
        let mut costs = Costs::load(dir.path());
        costs.record(&jobs, &[None]).unwrap();
        assert_eq!(Costs::load(dir.path()).of(&jobs[0]), Some(5.0));
    }
}
