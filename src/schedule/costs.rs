//! What each compile job costs, known before it runs, so that the longest start first and the
//! tail is split (`splits::plan_splits`, chosen in `choice.rs`):
//! - `<work_dir>/costs.json`: the wall time of every job a compiler ran for in this work
//!   directory, keyed by its object (one per source and variant);
//! - `<KBUILD_CACHE_DIR>/costs/v1.json`: the same times keyed by what the job compiles (its
//!   source's content and its capabilities, not the torch it builds for), so another work dir,
//!   a CI runner restoring the cache, or the same project's other variants know them;
//! - the same times shared through the remote cache (`KBUILD_REMOTE_CACHE`,
//!   `compile::fetch_costs`) for the units neither record knows, so a CI runner's or another
//!   machine's first build knows them ([`Costs::add_remote`], [`shared_times`]);
//! - else a prediction from a cheap pass over the source and the project headers it includes
//!   ([`predict`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::files::scan_includes;
use crate::plan::{CompileJob, Lang};

/// Bump when the meaning of a recorded time changes: old records are then ignored.
const COSTS_VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    version: u32,
    /// Object path (relative to the work directory where it lies below it), or for the shared
    /// record a hash of what the job compiles → seconds.
    seconds: BTreeMap<String, f64>,
}

impl Record {
    /// The times in `path`; none when there is no record or it cannot be read (a missing
    /// record only costs the ordering).
    fn read(path: &Path) -> BTreeMap<String, f64> {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Record>(&bytes).ok())
            .filter(|r| r.version == COSTS_VERSION)
            .map(|r| r.seconds)
            .unwrap_or_default()
    }

    fn write(path: &Path, seconds: BTreeMap<String, f64>) -> std::io::Result<()> {
        let record = Record {
            version: COSTS_VERSION,
            seconds,
        };
        let json = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        crate::files::write_atomic(path, &json)
    }
}

/// Where a job's cost came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Known {
    /// Timed by a build in this work directory.
    Recorded,
    /// Timed by a build elsewhere that shares kbuild's cache.
    Shared,
    /// Timed by a build that shares the remote cache.
    Remote,
    /// Never timed: [`predict`]ed.
    Predicted,
}

/// The known costs of one work directory and kbuild's cache (`default`: none known).
#[derive(Debug, Default)]
pub struct Costs {
    work_dir: PathBuf,
    seconds: BTreeMap<String, f64>,
    /// `<cache>/costs/v1.json`, when kbuild has a cache directory.
    shared_path: Option<PathBuf>,
    shared: BTreeMap<String, f64>,
    /// From the remote cache, by the same keys as `shared`.
    remote: BTreeMap<String, f64>,
}

impl Costs {
    /// The costs recorded in `work_dir` and in the cache directory `cache_dir`.
    pub fn load(work_dir: &Path, cache_dir: Option<&Path>) -> Self {
        let shared_path = cache_dir.map(|dir| dir.join("costs").join("v1.json"));
        Costs {
            work_dir: work_dir.to_path_buf(),
            seconds: Record::read(&path(work_dir)),
            shared: shared_path.as_deref().map(Record::read).unwrap_or_default(),
            shared_path,
            remote: BTreeMap::new(),
        }
    }

    /// What the jobs no record here knows compile ([`shared_key`]), each once: the keys to ask
    /// the remote cache for.
    pub fn unknown(&self, jobs: &[CompileJob]) -> Vec<String> {
        let mut keys: Vec<String> = (jobs.iter())
            .filter(|j| self.of(j).is_none())
            .filter_map(shared_key)
            .filter(|k| !self.shared.contains_key(k))
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Times the remote cache shared (key → seconds), used where no record here knows a job.
    pub fn add_remote(&mut self, seconds: BTreeMap<String, f64>) {
        self.remote.extend(seconds);
    }

    /// How many of `jobs` have their cost from each source, as `-v` says it: `4 timed by the
    /// last build here, 2 timed by a build sharing the remote cache`.
    pub fn origins(&self, jobs: &[CompileJob]) -> String {
        let mut counts: Vec<(Known, usize)> = Vec::new();
        for job in jobs {
            let known = self.estimate(job).1;
            match counts.iter_mut().find(|(k, _)| *k == known) {
                Some((_, n)) => *n += 1,
                None => counts.push((known, 1)),
            }
        }
        counts.sort_by_key(|(k, _)| *k as u8);
        let parts: Vec<String> = (counts.iter())
            .map(|(k, n)| match (k, n) {
                (Known::Predicted, 2..) => format!("{n} predicted from their sources"),
                _ => format!("{n} {}", k.describe()),
            })
            .collect();
        parts.join(", ")
    }

    fn key(&self, job: &CompileJob) -> String {
        let object = job
            .object
            .strip_prefix(&self.work_dir)
            .unwrap_or(&job.object);
        object.to_string_lossy().into_owned()
    }

    /// The last recorded cost of `job`, if it was timed in this work directory.
    pub(super) fn of(&self, job: &CompileJob) -> Option<f64> {
        self.seconds.get(&self.key(job)).copied()
    }

    /// `job`'s cost in seconds: timed here, else timed elsewhere, else predicted.
    pub(super) fn estimate(&self, job: &CompileJob) -> (f64, Known) {
        if let Some(s) = self.of(job) {
            return (s, Known::Recorded);
        }
        if let Some(key) = shared_key(job) {
            if let Some(s) = self.shared.get(&key) {
                return (*s, Known::Shared);
            }
            if let Some(s) = self.remote.get(&key) {
                return (*s, Known::Remote);
            }
        }
        (predict(job), Known::Predicted)
    }

    /// Indices of `jobs` in the order they should start, with each job's estimate: the jobs
    /// never timed first, longest predicted first, then the timed ones by descending cost
    /// (ties in plan order).
    ///
    /// Untimed first: a prediction is rougher than a time, and a long job started last is the
    /// one case longest-first exists to avoid; starting a short one early costs little.
    pub(super) fn longest_first(&self, jobs: &[CompileJob]) -> (Vec<usize>, Vec<(f64, Known)>) {
        let estimates: Vec<(f64, Known)> = jobs.iter().map(|j| self.estimate(j)).collect();
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by(|&a, &b| {
            let ((ca, ka), (cb, kb)) = (estimates[a], estimates[b]);
            let (pa, pb) = (ka == Known::Predicted, kb == Known::Predicted);
            pb.cmp(&pa).then(cb.total_cmp(&ca))
        });
        (order, estimates)
    }

    /// Remember how long the jobs a compiler ran for took (`times[i]` for `jobs[i]`; `None`
    /// leaves a job's earlier record) and write the records: the work directory's, then the
    /// cache's (merged with what other builds wrote there since it was read).
    pub fn record(
        &mut self,
        jobs: &[CompileJob],
        times: &[Option<Duration>],
    ) -> std::io::Result<()> {
        let mut shared = BTreeMap::new();
        for (job, time) in jobs.iter().zip(times) {
            if let Some(time) = time {
                self.seconds.insert(self.key(job), time.as_secs_f64());
                if let Some(key) = shared_key(job) {
                    shared.insert(key, time.as_secs_f64());
                }
            }
        }
        Record::write(&path(&self.work_dir), self.seconds.clone())?;
        match &self.shared_path {
            Some(path) if !shared.is_empty() => {
                let mut all = Record::read(path);
                all.extend(shared);
                Record::write(path, all)
            }
            _ => Ok(()),
        }
    }
}

/// The times `jobs` took this build (`times[i]` for `jobs[i]`) by what each compiles
/// ([`shared_key`]): what a build shares through the remote cache.
pub fn shared_times(jobs: &[CompileJob], times: &[Option<Duration>]) -> BTreeMap<String, f64> {
    (jobs.iter().zip(times))
        .filter_map(|(job, time)| Some((shared_key(job)?, (*time)?.as_secs_f64())))
        .collect()
}

/// A unit timed at least this share of the longest one's time is critical too
/// ([`critical_units`]): delaying its device passes would lengthen the build.
const CRITICAL_SHARE: f64 = 0.75;

/// Which jobs are critical ([`RunChoice::critical`](super::RunChoice)): the CUDA unit with the longest estimate
/// (the first of equals), and every CUDA unit whose time, like the longest one's, was measured
/// by a build and is at least [`CRITICAL_SHARE`] of it. Predictions from the source are too
/// rough to tell apart units of about the same size (paged-attention's three heavy units are
/// predicted 23.5-24.6 s; they take 20-70 s of `cicc`), so a first build runs one unit's front
/// ends side by side, not all of them at once.
pub(super) fn critical_units(jobs: &[CompileJob], estimates: &[(f64, Known)]) -> Vec<bool> {
    let cuda = |i: &usize| jobs[*i].lang == Lang::Cuda;
    let longest = (0..jobs.len())
        .filter(cuda)
        .max_by(|&a, &b| estimates[a].0.total_cmp(&estimates[b].0).then(b.cmp(&a)));
    let Some(longest) = longest else {
        return vec![false; jobs.len()];
    };
    let (top, top_known) = estimates[longest];
    (0..jobs.len())
        .map(|i| {
            let (cost, known) = estimates[i];
            i == longest
                || (cuda(&i)
                    && known != Known::Predicted
                    && top_known != Known::Predicted
                    && cost >= CRITICAL_SHARE * top)
        })
        .collect()
}

impl Known {
    /// Where the cost came from, as `-v` and `--dry-run` say it.
    pub(super) fn describe(self) -> &'static str {
        match self {
            Known::Recorded => "timed by the last build here",
            Known::Shared => "timed by a build sharing kbuild's cache",
            Known::Remote => "timed by a build sharing the remote cache",
            Known::Predicted => "predicted from its source",
        }
    }
}

fn path(work_dir: &Path) -> PathBuf {
    work_dir.join("costs.json")
}

/// What a job compiles, as the cache's record knows it: the language, the source's content and
/// the capabilities (with or without PTX). Not the flags: the same source built for another
/// torch costs about the same. `None` when the source cannot be read.
pub(super) fn shared_key(job: &CompileJob) -> Option<String> {
    let source = std::fs::read(&job.source).ok()?;
    let mut h = Sha256::new();
    h.update([job.lang as u8]);
    h.update((source.len() as u64).to_le_bytes());
    h.update(&source);
    for g in &job.gencodes {
        h.update(format!("{},{};", g.capability.sm(), g.ptx));
    }
    Some(hex::encode(&h.finalize()[..16]))
}

/// Seconds (on one core of the 2-core machine) of the parts of a compile [`predict`] counts,
/// fitted on `bench/first_build.py`'s generated project (one unit of 3 instantiations 1x, of
/// 48 1.7x, the torch binding 4.4x: bench/results/cpu-2026-11-25-first-build.json) and the
/// flagship's binding units. Only the ratios between units matter to the order and to
/// `plan_splits`, and a build's real times replace these after its first run.
mod weight {
    /// Any C++ compile: starting the compiler, a small source.
    pub const BASE: f64 = 0.5;
    /// Parsing torch's headers, once per host compile that includes them.
    pub const TORCH_HEADERS: f64 = 14.0;
    /// nvcc's host side of a `.cu` (cudafe++, the host compile of the CUDA runtime headers).
    pub const CUDA_HOST: f64 = 2.0;
    /// One device pass (cicc + ptxas) of a small kernel, per capability.
    pub const DEVICE_PASS: f64 = 1.0;
    /// Per KiB of the source and project headers, per host or device pass.
    pub const PER_KIB: f64 = 0.02;
    /// Per template instantiation or kernel launch, per device pass.
    pub const PER_INSTANCE: f64 = 0.04;
    /// Per template instantiation or kernel launch, in the host compile.
    pub const PER_INSTANCE_HOST: f64 = 0.02;
    /// A kept PTX costs a fraction of a device pass (no ptxas, but it is embedded).
    pub const PTX: f64 = 0.1;
}

/// A job's cost in seconds, predicted from the source and the project headers it includes:
/// their size, how many templates they instantiate or kernels they launch, whether torch's
/// headers are parsed, and for CUDA per capability (a kept PTX counts a little more).
pub(super) fn predict(job: &CompileJob) -> f64 {
    let mut text = std::fs::read(&job.source).unwrap_or_default();
    for header in scan_includes(&job.source, &job.include_dirs, &job.system_include_dirs) {
        text.extend(std::fs::read(header).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&text);
    let kib = text.len() as f64 / 1024.0;
    let instances = instances(&text) as f64;
    let torch = ["<torch/", "<ATen/", "\"torch/", "<c10/"]
        .iter()
        .any(|p| text.contains(p));
    let host = weight::BASE + kib * weight::PER_KIB + instances * weight::PER_INSTANCE_HOST;
    let host = if torch {
        host + weight::TORCH_HEADERS
    } else {
        host
    };
    if job.lang == Lang::Cxx {
        return host;
    }
    let host = host + weight::CUDA_HOST;
    let passes: f64 = job
        .gencodes
        .iter()
        .map(|g| 1.0 + if g.ptx { weight::PTX } else { 0.0 })
        .sum();
    let device = weight::DEVICE_PASS + kib * weight::PER_KIB + instances * weight::PER_INSTANCE;
    host + passes * device
}

/// Explicit template instantiations (`template void f<…>(…);`, `template class …`) and
/// kernel launches (`<<<`) in `text`.
fn instances(text: &str) -> usize {
    let explicit = text
        .lines()
        .map(str::trim_start)
        .filter(|l| {
            l.strip_prefix("template")
                .is_some_and(|rest| rest.starts_with(char::is_whitespace))
                && !l["template".len()..].trim_start().starts_with('<')
        })
        .count();
    explicit + text.matches("<<<").count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Capability;
    use crate::plan::Gencode;

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
            compiler_id: String::new(),
        }
    }

    #[test]
    fn one_cuda_unit_is_critical_when_predicted_and_every_unit_timed_near_the_longest() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        let mut jobs: Vec<CompileJob> = ["bind.cpp", "v1.cu", "v2.cu", "cache.cu"]
            .iter()
            .map(|n| job(work, n))
            .collect();
        for j in &mut jobs[1..] {
            j.lang = Lang::Cuda;
        }
        assert_eq!(
            critical_units(&jobs[..1], &[(40.0, Known::Predicted)]),
            [false]
        );
        // Predicted: the binding looks longest, v1 and v2 alike: only v1 (the first of equals).
        let predicted = [
            (40.0, Known::Predicted),
            (24.6, Known::Predicted),
            (24.6, Known::Predicted),
            (23.5, Known::Predicted),
        ];
        assert_eq!(
            critical_units(&jobs, &predicted),
            [false, true, false, false]
        );
        // Timed: v1 and v2 within 75% of the longest, the cache kernels far below.
        let timed = [
            (20.0, Known::Recorded),
            (100.0, Known::Recorded),
            (108.0, Known::Recorded),
            (44.0, Known::Shared),
        ];
        assert_eq!(critical_units(&jobs, &timed), [false, true, true, false]);
        // A new unit, only predicted, next to a timed longest: not critical by a guess.
        let mixed = [
            (20.0, Known::Recorded),
            (100.0, Known::Predicted),
            (108.0, Known::Recorded),
            (44.0, Known::Recorded),
        ];
        assert_eq!(critical_units(&jobs, &mixed), [false, false, true, false]);
    }

    #[test]
    fn untimed_jobs_start_first_then_the_longest() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        let jobs: Vec<CompileJob> = ["a", "b", "c", "d"].iter().map(|n| job(work, n)).collect();
        let secs = |s: f64| Some(Duration::from_secs_f64(s));
        let mut costs = Costs::load(work, None);
        assert_eq!(costs.longest_first(&jobs).0, [0, 1, 2, 3]);
        costs
            .record(&jobs, &[secs(1.0), None, secs(9.0), secs(3.0)])
            .unwrap();

        let costs = Costs::load(work, None);
        assert_eq!(costs.of(&jobs[2]), Some(9.0));
        assert_eq!(costs.longest_first(&jobs).0, [1, 2, 3, 0]);
    }

    #[test]
    fn a_cached_job_keeps_its_earlier_cost() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = [job(dir.path(), "a")];
        let mut costs = Costs::load(dir.path(), None);
        costs
            .record(&jobs, &[Some(Duration::from_secs(5))])
            .unwrap();
        let mut costs = Costs::load(dir.path(), None);
        costs.record(&jobs, &[None]).unwrap();
        assert_eq!(Costs::load(dir.path(), None).of(&jobs[0]), Some(5.0));
    }

    fn cuda(work: &Path, name: &str, source: &str, capabilities: usize) -> CompileJob {
        std::fs::write(work.join(name), source).unwrap();
        let gencodes = (0..capabilities)
            .map(|i| Gencode {
                capability: format!("{}.0", 8 + i).parse::<Capability>().unwrap(),
                ptx: false,
            })
            .collect();
        CompileJob {
            lang: Lang::Cuda,
            gencodes,
            ..job(work, name)
        }
    }

    #[test]
    fn a_time_from_the_remote_counts_only_where_no_record_here_knows_the_job() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        let jobs = [
            cuda(work, "a.cu", "__global__ void a() {}\n", 1),
            cuda(work, "b.cu", "__global__ void b() {}\n", 1),
        ];
        let secs = |s: u64| Some(Duration::from_secs(s));
        Costs::load(work, None)
            .record(&jobs[..1], &[secs(5)])
            .unwrap();
        let mut costs = Costs::load(work, None);
        let b = shared_key(&jobs[1]).unwrap();
        assert_eq!(costs.unknown(&jobs), std::slice::from_ref(&b));
        let everything = (jobs.iter())
            .map(|j| (shared_key(j).unwrap(), 40.0))
            .collect();
        costs.add_remote(everything);
        assert_eq!(costs.estimate(&jobs[0]), (5.0, Known::Recorded));
        assert_eq!(costs.estimate(&jobs[1]), (40.0, Known::Remote));
        assert_eq!(
            costs.origins(&jobs),
            "1 timed by the last build here, 1 timed by a build sharing the remote cache"
        );
        assert_eq!(
            shared_times(&jobs, &[None, secs(7)]),
            BTreeMap::from([(b, 7.0)])
        );
    }

    #[test]
    fn a_first_build_predicts_more_instantiations_and_capabilities_cost_more() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        let many: String = (0..40)
            .map(|i| format!("template void run<{i}>(float*);\n"))
            .collect();
        let jobs = [
            cuda(work, "small.cu", "__global__ void k() {}\n", 1),
            cuda(work, "many.cu", &many, 1),
            cuda(work, "small3.cu", "__global__ void k() {}\n", 3),
            cuda(work, "launch.cu", "void f() { k<<<1, 1>>>(); }\n", 1),
        ];
        let (order, estimates) = Costs::load(work, None).longest_first(&jobs);
        assert_eq!(order, [1, 2, 3, 0], "{estimates:?}");
        assert!(estimates.iter().all(|e| e.1 == Known::Predicted));
        assert_eq!(instances(&many), 40);
        assert_eq!(instances("template <int N> void run(float*);"), 0);
    }

    #[test]
    fn times_recorded_in_the_cache_dir_are_known_to_another_work_dir_and_variant() {
        let (a, b, cache) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let job_a = cuda(a.path(), "k.cu", "__global__ void k() {}\n", 2);
        let mut costs = Costs::load(a.path(), Some(cache.path()));
        costs
            .record(
                std::slice::from_ref(&job_a),
                &[Some(Duration::from_secs(42))],
            )
            .unwrap();
        // The same source in another work dir, built with other flags (another torch).
        let mut job_b = cuda(b.path(), "k.cu", "__global__ void k() {}\n", 2);
        job_b.flags.push("-DTORCH_VERSION=211".into());
        let costs = Costs::load(b.path(), Some(cache.path()));
        assert_eq!(costs.estimate(&job_b), (42.0, Known::Shared));
        // Other capabilities, or another source, are another cost.
        let job_c = cuda(b.path(), "k.cu", "__global__ void k() {}\n", 1);
        assert_eq!(costs.estimate(&job_c).1, Known::Predicted);
        assert_eq!(
            Costs::load(b.path(), None).estimate(&job_b).1,
            Known::Predicted
        );
    }
}
