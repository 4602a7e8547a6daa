//! The build's memory budget: how much memory its compiler processes may hold at once, found
//! once (`--memory`, `KBUILD_MEMORY`, else the cgroup's limit less its usage and the machine's
//! `MemAvailable`, whichever is smaller), and the gate every compiler process passes before
//! it starts: it reserves the peak that process reached last time (`memory.json` in the work
//! directory, learned like `costs.json` learns times) or, for one never measured, its caller's
//! guess (each of nvcc's steps guesses from the size of what it reads) or a conservative
//! [`UNKNOWN_PEAK`](peaks::UNKNOWN_PEAK), as the one model in `peaks.rs` estimates it. A
//! process waits while the others' reservations leave too little, and they are let in in the
//! order they asked: a big one (the schedule starts the longest units first) is not overtaken
//! by smaller ones that keep fitting beside the running ones. One bigger than the whole budget
//! runs alone. So a small machine runs fewer compilers at once instead of having them killed.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::peaks;
use crate::config::Capability;
use crate::plan::CompileJob;
use crate::process::Cancel;

/// Bump when the meaning of a recorded peak changes: old records are then ignored.
const RECORD_VERSION: u32 = 1;

/// How long a process waiting for memory sleeps between looks at the cancel.
const POLL: Duration = Duration::from_millis(20);

/// How much memory the build's compilers may hold at once, and where that number came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryBudget {
    pub bytes: u64,
    pub source: BudgetSource,
}

/// Where a [`MemoryBudget`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetSource {
    /// `--memory SIZE` or `KBUILD_MEMORY=SIZE`.
    Given,
    /// The memory cgroup kbuild runs in (v2 `memory.max`, v1 `memory.limit_in_bytes`, of it
    /// or an ancestor) less what the cgroup already uses; smaller than `MemAvailable`.
    Cgroup,
    /// `MemAvailable` of `/proc/meminfo`.
    MemAvailable,
}

impl MemoryBudget {
    /// The memory this process may use now: the tightest cgroup's headroom or `MemAvailable`,
    /// whichever is smaller; `None` when neither can be read.
    pub fn detect() -> Option<MemoryBudget> {
        let cgroup = std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|text| cgroup_headroom(&text, Path::new("/sys/fs/cgroup")));
        let available = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| mem_available(&text));
        match (cgroup, available) {
            (Some(c), Some(a)) if c < a => Some(MemoryBudget {
                bytes: c,
                source: BudgetSource::Cgroup,
            }),
            (_, Some(a)) => Some(MemoryBudget {
                bytes: a,
                source: BudgetSource::MemAvailable,
            }),
            (Some(c), None) => Some(MemoryBudget {
                bytes: c,
                source: BudgetSource::Cgroup,
            }),
            (None, None) => None,
        }
    }

    /// A budget of `bytes` given on the command line or in the environment.
    pub fn given(bytes: u64) -> MemoryBudget {
        MemoryBudget {
            bytes,
            source: BudgetSource::Given,
        }
    }

    /// `12.0 GiB (the cgroup's limit less its usage)`, as `-v` and `--dry-run` say it.
    pub fn describe(&self) -> String {
        let from = match self.source {
            BudgetSource::Given => "`--memory`",
            BudgetSource::Cgroup => "the cgroup's limit less its usage",
            BudgetSource::MemAvailable => "`MemAvailable`",
        };
        format!("{} ({from})", format_size(self.bytes))
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The smallest headroom (limit less usage) of the memory cgroups in `proc_cgroup` (the text
/// of `/proc/self/cgroup`) and their ancestors, under the cgroup mount `root`; `None` when no
/// level has a limit. v1's memory hierarchy is at `root/memory`, v2's at `root` or
/// `root/unified` (a hybrid mount).
pub fn cgroup_headroom(proc_cgroup: &str, root: &Path) -> Option<u64> {
    let mut tightest: Option<u64> = None;
    for line in proc_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let levels = if id == "0" && controllers.is_empty() {
            [root.to_path_buf(), root.join("unified")]
                .into_iter()
                .map(|mount| (mount, ["memory.max", "memory.current"]))
                .collect::<Vec<_>>()
        } else if controllers.split(',').any(|c| c == "memory") {
            let files = ["memory.limit_in_bytes", "memory.usage_in_bytes"];
            vec![(root.join("memory"), files)]
        } else {
            continue;
        };
        for (mount, [limit, usage]) in levels {
            let mut dir = mount.join(path.trim_start_matches('/'));
            while dir.starts_with(&mount) {
                if let Some(room) = headroom(&dir.join(limit), &dir.join(usage)) {
                    tightest = Some(tightest.map_or(room, |t| t.min(room)));
                }
                if !dir.pop() {
                    break;
                }
            }
        }
    }
    tightest
}

/// `limit` less `usage` (both files of one cgroup); `None` without a limit (`max`, or v1's
/// "unlimited", a number near `i64::MAX`) or when either cannot be read.
fn headroom(limit: &Path, usage: &Path) -> Option<u64> {
    let limit: u64 = std::fs::read_to_string(limit).ok()?.trim().parse().ok()?;
    if limit >= 1 << 62 {
        return None;
    }
    let usage: u64 = std::fs::read_to_string(usage).ok()?.trim().parse().ok()?;
    Some(limit.saturating_sub(usage))
}

/// A size as `--memory` and `KBUILD_MEMORY` take it: bytes, or a number with a unit (`K`,
/// `M`, `G`, `T`, binary multiples; `KiB`, `GB`… read alike), e.g. `8G`, `1.5GiB`, `512M`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`: write bytes or a number with K, M, G or T, \
                 e.g. `8G`"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size: write e.g. `8G`, `1.5G` or `512M`"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("`{text}` is not a usable memory size"));
    }
    Ok(bytes as u64)
}

/// `1.5 GiB`, `512 MiB`, `900 KiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u32, &str); 3] = [(30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in UNITS {
        let scale = (1u64 << shift) as f64;
        if bytes as f64 >= scale {
            let value = bytes as f64 / scale;
            return if shift == 30 {
                format!("{value:.1} {unit}")
            } else {
                format!("{value:.0} {unit}")
            };
        }
    }
    format!("{bytes} B")
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    version: u32,
    /// Object path (relative to the work directory where it lies below it), with `#step` for
    /// one step of nvcc's pipeline → the peak resident memory its process tree reached.
    peak_bytes: BTreeMap<String, u64>,
}

/// A step of a unit's compile as the gate keys it: what runs and, for a step run once per
/// capability, the capability (read once by the capability codec from the word in the step's
/// command, when the step is read) with that word (`cicc compute_90a`, `ptxas sm_90a`,
/// `preprocess 900`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepName {
    /// What runs: `cicc`, `cudafe++`, `host compile`.
    what: String,
    /// The capability the step is for, and the word its command names it by.
    capability: Option<(Capability, String)>,
}

impl StepName {
    /// A step run once per unit (`cudafe++`, `host compile`, a unit's `preprocess`).
    pub fn new(what: &str) -> Self {
        StepName {
            what: what.to_string(),
            capability: None,
        }
    }

    /// `what` for the capability the step's command names by `word` (`compute_90a`, `sm_90a`,
    /// `__CUDA_ARCH__`'s `900`); a word that names none is only part of the step's name.
    pub fn for_capability(what: &str, word: &str) -> Self {
        match step_capability(word) {
            Some(capability) => StepName {
                what: what.to_string(),
                capability: Some((capability, word.to_string())),
            },
            None => StepName::new(&format!("{what} {word}")),
        }
    }

    /// The record key's prefix of this step's siblings (`cicc `), for a step of one capability.
    fn family_prefix(&self) -> Option<String> {
        self.capability.as_ref().map(|_| format!("{} ", self.what))
    }
}

/// Tests spell a step as messages show it (`ptxas sm_90`); the build never reads a label back.
#[cfg(test)]
impl From<&str> for StepName {
    fn from(label: &str) -> Self {
        match label.rsplit_once(' ') {
            Some((what, word)) => StepName::for_capability(what, word),
            None => StepName::new(label),
        }
    }
}

#[cfg(test)]
impl From<String> for StepName {
    fn from(label: String) -> Self {
        StepName::from(label.as_str())
    }
}

/// The capability a step's command names by `word`, as nvcc's steps spell it: `compute_90a`,
/// `sm_90a`, or `__CUDA_ARCH__`'s `900`.
fn step_capability(word: &str) -> Option<Capability> {
    Capability::from_nvcc_name(word).or_else(|| Capability::from_cuda_arch(word))
}

impl std::fmt::Display for StepName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.capability {
            Some((_, word)) => write!(f, "{} {word}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

/// A compiler process the gate admits: the object it works on and, for one step of a unit's
/// pipeline, the step. Records spell it `object#step` ([`std::fmt::Display`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessKey {
    /// The object, relative to the work directory where it lies below it; or the unit's key
    /// in kbuild's cache.
    object: String,
    /// The step; `None`: the unit's one compiler.
    step: Option<StepName>,
}

impl ProcessKey {
    /// The same step of the process of another object (the unit's key in kbuild's cache).
    fn of_object(&self, object: String) -> Self {
        ProcessKey {
            object,
            ..self.clone()
        }
    }

    /// Whether the record key `record` (of the same map) is this step of the same object for
    /// another (or the same) capability: it starts `object#what ` and the rest is a
    /// capability's word. Records are the one place a key is text read back: their file's.
    fn is_sibling_record(&self, record: &str) -> bool {
        let Some(prefix) = self.sibling_prefix() else {
            return false;
        };
        (record.strip_prefix(&prefix)).is_some_and(|word| step_capability(word).is_some())
    }

    /// `object#what ` for a step of one capability: where its siblings' records start.
    fn sibling_prefix(&self) -> Option<String> {
        let family = self.step.as_ref()?.family_prefix()?;
        Some(format!("{}#{family}", self.object))
    }
}

impl std::fmt::Display for ProcessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.step {
            Some(step) => write!(f, "{}#{step}", self.object),
            None => f.write_str(&self.object),
        }
    }
}

/// The gate compiler processes pass before they start, and what they are learned to need.
#[derive(Debug)]
pub struct MemoryGate {
    budget: MemoryBudget,
    work_dir: PathBuf,
    /// Peaks of the last builds, then this build's as processes end.
    peaks: Mutex<BTreeMap<String, u64>>,
    /// The peaks every work directory sharing kbuild's cache learned ([`MemoryGate::shared`]).
    shared: Option<Shared>,
    queue: Mutex<Queue>,
    /// Signalled when memory is given back or the head of the queue changes.
    freed: Condvar,
    /// What ran alone because it needs more than the whole budget: (key, estimate).
    alone: Mutex<Vec<(String, u64)>>,
}

/// `<cache>/memory/v1.json`: peaks keyed by what a unit compiles (its language, source content
/// and capabilities, as `costs/v1.json` keys times) and the step, so that a fresh work
/// directory of the same sources (`kbuild clean`, another checkout, a CI run that keeps the
/// cache) starts from them instead of guesses.
#[derive(Debug)]
struct Shared {
    path: PathBuf,
    peaks: Mutex<BTreeMap<String, u64>>,
    /// Each object's unit key ([`MemoryGate::name_unit`]), by its key in this work directory.
    units: Mutex<BTreeMap<String, String>>,
    /// What this build learned, written over the file's latest content on save.
    learned: Mutex<BTreeMap<String, u64>>,
}

/// The bytes reserved by the processes running now, and the processes waiting, in the order
/// they asked (by ticket).
#[derive(Debug, Default)]
struct Queue {
    reserved: u64,
    waiting: VecDeque<u64>,
    next_ticket: u64,
}

/// Memory reserved for one process, given back when dropped.
#[derive(Debug)]
pub struct Reservation<'a> {
    gate: &'a MemoryGate,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut queue = lock(&self.gate.queue);
        queue.reserved = queue.reserved.saturating_sub(self.bytes);
        self.gate.freed.notify_all();
    }
}

impl MemoryGate {
    /// A gate for `budget` with the peaks recorded in `work_dir` (none when the record is
    /// missing or unreadable: that only costs conservative estimates).
    pub fn load(budget: MemoryBudget, work_dir: &Path) -> Self {
        let peaks = read_peaks(&record_path(work_dir));
        MemoryGate {
            budget,
            work_dir: work_dir.to_path_buf(),
            peaks: Mutex::new(peaks),
            shared: None,
            queue: Mutex::new(Queue::default()),
            freed: Condvar::new(),
            alone: Mutex::new(Vec::new()),
        }
    }

    /// Also read and feed kbuild's cache record of peaks (`<cache_dir>/memory/v1.json`) for the
    /// units [`MemoryGate::name_unit`] names.
    pub fn shared(mut self, cache_dir: &Path) -> Self {
        let path = cache_dir.join("memory").join("v1.json");
        self.shared = Some(Shared {
            peaks: Mutex::new(read_peaks(&path)),
            path,
            units: Mutex::new(BTreeMap::new()),
            learned: Mutex::new(BTreeMap::new()),
        });
        self
    }

    /// Name what the unit compiling `object` compiles (its key in the cache's record).
    pub fn name_unit(&self, object: &Path, unit: String) {
        if let Some(shared) = &self.shared {
            lock(&shared.units).insert(self.key(object, None).object, unit);
        }
    }

    /// The cache record's key for the process `key` of this work directory, if its unit is named.
    fn shared_key(&self, key: &ProcessKey) -> Option<(&Shared, ProcessKey)> {
        let shared = self.shared.as_ref()?;
        let unit = lock(&shared.units).get(&key.object)?.clone();
        Some((shared, key.of_object(unit)))
    }

    /// The budget this gate keeps to.
    pub fn budget(&self) -> MemoryBudget {
        self.budget
    }

    /// The key of the process compiling `object` (`step`: one step of its pipeline, e.g.
    /// `cicc compute_90`; `None`: its one compiler).
    pub fn key(&self, object: &Path, step: Option<&StepName>) -> ProcessKey {
        let object = object.strip_prefix(&self.work_dir).unwrap_or(object);
        ProcessKey {
            object: object.to_string_lossy().into_owned(),
            step: step.cloned(),
        }
    }

    /// What the process `key` is expected to need ([`peaks::estimate`]): its last peak, else
    /// the caller's `guess` (nvcc's steps guess from the size of what they read) capped by
    /// what the same step needed for another capability of the unit.
    pub fn estimate(&self, key: &ProcessKey, guess: Option<u64>) -> u64 {
        match self.recorded(key) {
            Some(peak) => peaks::estimate(Some(peak), None, guess),
            None => peaks::estimate(None, self.sibling_peak(key), guess),
        }
    }

    /// The largest peak recorded for the same step of the same unit for another capability.
    fn sibling_peak(&self, key: &ProcessKey) -> Option<u64> {
        let largest = |peaks: &BTreeMap<String, u64>, key: &ProcessKey| {
            let prefix = key.sibling_prefix()?;
            peaks
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(&prefix))
                .filter(|(k, _)| key.is_sibling_record(k))
                .map(|(_, peak)| *peak)
                .max()
        };
        largest(&lock(&self.peaks), key).or_else(|| {
            let (shared, key) = self.shared_key(key)?;
            largest(&lock(&shared.peaks), &key)
        })
    }

    /// The peak the process `key` last reached: in this work directory, else in a build
    /// sharing kbuild's cache.
    fn recorded(&self, key: &ProcessKey) -> Option<u64> {
        lock(&self.peaks)
            .get(&key.to_string())
            .copied()
            .or_else(|| {
                let (shared, key) = self.shared_key(key)?;
                lock(&shared.peaks).get(&key.to_string()).copied()
            })
    }

    /// Whether the process `key` was ever measured (here or by a build sharing kbuild's cache).
    pub fn knows(&self, key: &ProcessKey) -> bool {
        self.recorded(key).is_some()
    }

    /// Whether this gate's budget binds `-j` `jobs` for processes never measured
    /// ([`peaks::memory_binds_jobs`]).
    pub fn memory_binds_jobs(&self, jobs: usize) -> bool {
        peaks::memory_binds_jobs(self.budget.bytes, jobs)
    }

    /// Wait until the process `key`, to run on `threads` threads, is the first of those
    /// waiting and fits beside the ones running, and reserve its estimate
    /// ([`MemoryGate::estimate`] with `guess`, at least the guess when split:
    /// [`peaks::on_threads`]). One that needs more than the whole budget is let in once nothing
    /// else runs (it is remembered for [`MemoryGate::ran_alone`]). `None` once `cancel` fires
    /// while waiting (its place in the queue goes to the next).
    pub fn admit(
        &self,
        key: &ProcessKey,
        guess: Option<u64>,
        threads: usize,
        cancel: &Cancel,
    ) -> Option<Reservation<'_>> {
        let mut queue = lock(&self.queue);
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.waiting.push_back(ticket);
        loop {
            if cancel.is_cancelled() {
                queue.waiting.retain(|&t| t != ticket);
                self.freed.notify_all();
                return None;
            }
            // Again at each look: a sibling may have been measured while this one waited.
            let need = peaks::on_threads(self.estimate(key, guess), guess, threads);
            let first = queue.waiting.front() == Some(&ticket);
            let fits = queue.reserved + need <= self.budget.bytes;
            if first && (fits || queue.reserved == 0) {
                if !fits {
                    lock(&self.alone).push((key.to_string(), need));
                }
                queue.waiting.pop_front();
                queue.reserved += need;
                // The next in line may fit beside this one.
                self.freed.notify_all();
                return Some(Reservation {
                    gate: self,
                    bytes: need,
                });
            }
            queue = self
                .freed
                .wait_timeout(queue, POLL)
                .map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }

    /// Remember that the process `key` reached `peak` bytes.
    pub fn observe(&self, key: &ProcessKey, peak: u64) {
        if peak > 0 {
            lock(&self.peaks).insert(key.to_string(), peak);
            if let Some((shared, key)) = self.shared_key(key) {
                lock(&shared.peaks).insert(key.to_string(), peak);
                lock(&shared.learned).insert(key.to_string(), peak);
            }
        }
    }

    /// The processes that needed more than the whole budget and so ran alone, with what
    /// each was expected to need, in the order they ran.
    pub fn ran_alone(&self) -> Vec<(String, u64)> {
        lock(&self.alone).clone()
    }

    /// Write the peaks (the last builds' and this one's) to the work directory's record.
    pub fn save(&self) -> std::io::Result<()> {
        write_peaks(&record_path(&self.work_dir), lock(&self.peaks).clone())?;
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let learned = lock(&shared.learned);
        if learned.is_empty() {
            return Ok(());
        }
        // Over the file's latest content: other builds sharing the cache may have saved since.
        let mut peaks = read_peaks(&shared.path);
        peaks.extend(learned.iter().map(|(k, v)| (k.clone(), *v)));
        write_peaks(&shared.path, peaks)
    }
}

/// Write `peaks` as a record file (atomically, its directory made if missing).
fn write_peaks(path: &Path, peaks: BTreeMap<String, u64>) -> std::io::Result<()> {
    let record = Record {
        version: RECORD_VERSION,
        peak_bytes: peaks,
    };
    let json = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
    crate::files::write_atomic(path, &json)
}

/// The peaks of a record file; none when it is missing, unreadable or of another version.
fn read_peaks(path: &Path) -> BTreeMap<String, u64> {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Record>(&bytes).ok())
        .filter(|r| r.version == RECORD_VERSION)
        .map(|r| r.peak_bytes)
        .unwrap_or_default()
}

/// Where the peaks of a work directory are recorded.
pub fn record_path(work_dir: &Path) -> PathBuf {
    work_dir.join("memory.json")
}

/// A poisoned lock only means another worker panicked; the panic propagates from its scope.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MemoryGate {
    /// The build's memory gate: the peaks learned in `work_dir`, and with kbuild's cache directory
    /// those learned for the same sources in other work directories (each job's unit named as
    /// `costs/v1.json` names it).
    pub fn for_build(
        budget: MemoryBudget,
        work_dir: &Path,
        cache_dir: Option<&Path>,
        jobs: &[CompileJob],
    ) -> MemoryGate {
        let gate = MemoryGate::load(budget, work_dir);
        let Some(dir) = cache_dir else {
            return gate;
        };
        let gate = gate.shared(dir);
        for job in jobs {
            if let Some(unit) = super::costs::shared_key(job) {
                gate.name_unit(&job.object, unit);
            }
        }
        gate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::peaks::UNKNOWN_PEAK;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The key a record spells `text` (`obj/a.o#cicc compute_90`), made as the build makes it.
    fn key_of(text: &str) -> ProcessKey {
        let (object, step) = match text.split_once('#') {
            Some((object, step)) => (object, Some(StepName::from(step))),
            None => (text, None),
        };
        ProcessKey {
            object: object.to_string(),
            step,
        }
    }

    fn budget(bytes: u64) -> MemoryBudget {
        MemoryBudget {
            bytes,
            source: BudgetSource::Given,
        }
    }

    #[test]
    fn sizes_read_with_binary_units_and_reject_nonsense() {
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("8X").unwrap_err().contains("unknown unit `x`"));
        assert!(parse_size("G").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(format_size(3 << 29), "1.5 GiB");
        assert_eq!(format_size(300 << 20), "300 MiB");
    }

    #[test]
    fn the_tightest_cgroup_level_sets_the_headroom() {
        let root = tempfile::tempdir().unwrap();
        let v1 = root.path().join("memory");
        let write = |dir: &Path, limit: &str, usage: &str| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("memory.limit_in_bytes"), limit).unwrap();
            std::fs::write(dir.join("memory.usage_in_bytes"), usage).unwrap();
        };
        write(&v1, "9223372036854771712\n", "100\n");
        write(&v1.join("outer"), "1000\n", "600\n");
        write(&v1.join("outer/inner"), "5000\n", "100\n");
        let text = "4:memory:/outer/inner\n0::/\n";
        assert_eq!(cgroup_headroom(text, root.path()), Some(400));

        let v2 = root.path().join("svc");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("memory.max"), "3000\n").unwrap();
        std::fs::write(v2.join("memory.current"), "1000\n").unwrap();
        std::fs::write(root.path().join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_headroom("0::/svc\n", root.path()), Some(2000));
        assert_eq!(cgroup_headroom("0::/\n", root.path()), None);
    }

    #[test]
    fn a_pass_split_over_threads_reserves_at_least_its_guess_though_its_record_is_smaller() {
        let dir = tempfile::tempdir().unwrap();
        let gate = MemoryGate::load(budget(4 << 30), dir.path());
        let key = key_of("obj/a.o#ptxas sm_90");
        gate.observe(&key, 147 << 20); // measured on one thread
        let cancel = Cancel::new();
        let unsplit = gate.admit(&key, Some(682 << 20), 1, &cancel).unwrap();
        assert_eq!(unsplit.bytes, (147 << 20) + (147 << 20) / 8);
        drop(unsplit);
        let split = gate.admit(&key, Some(682 << 20), 16, &cancel).unwrap();
        assert_eq!(split.bytes, 682 << 20);
    }

    #[test]
    fn processes_beyond_the_budget_wait_and_a_too_big_one_runs_alone() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Arc::new(MemoryGate::load(budget(10 << 30), dir.path()));
        for (key, peak) in [("a", 4u64 << 30), ("b", 4 << 30), ("huge", 20 << 30)] {
            gate.observe(&key_of(key), peak);
        }
        let cancel = Cancel::new();
        let a = gate.admit(&key_of("a"), None, 1, &cancel).unwrap();
        let b_admitted = Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| {
            let (gate, flag) = (&gate, &b_admitted);
            let _first_b = gate.admit(&key_of("b"), None, 1, &Cancel::new()).unwrap();
            s.spawn(move || {
                let _second_b = gate.admit(&key_of("b"), None, 1, &Cancel::new()).unwrap();
                flag.store(1, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(b_admitted.load(Ordering::SeqCst), 0, "4.5+4.5+4.5 GiB > 10");
            drop(a);
        });
        assert_eq!(b_admitted.load(Ordering::SeqCst), 1);
        let huge = gate.admit(&key_of("huge"), None, 1, &cancel).unwrap();
        assert_eq!(gate.ran_alone(), [("huge".to_string(), (45u64 << 30) / 2)]);
        let stop = Cancel::new();
        stop.cancel();
        assert!(
            gate.admit(&key_of("a"), None, 1, &stop).is_none(),
            "a cancelled wait ends"
        );
        drop(huge);
    }

    #[test]
    fn a_process_waiting_for_memory_is_not_overtaken_by_smaller_ones_asking_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let gate = MemoryGate::load(budget(10 << 30), dir.path());
        for (key, peak) in [("a", 4u64 << 30), ("big", 8 << 30), ("small", 1 << 30)] {
            gate.observe(&key_of(key), peak);
        }
        let order = Mutex::new(Vec::new());
        let a = gate.admit(&key_of("a"), None, 1, &Cancel::new()).unwrap();
        std::thread::scope(|s| {
            let (gate, order) = (&gate, &order);
            let admit = move |key: &'static str, hold: u64| {
                let held = gate.admit(&key_of(key), None, 1, &Cancel::new()).unwrap();
                lock(order).push(key);
                std::thread::sleep(Duration::from_millis(hold));
                drop(held);
            };
            s.spawn(move || admit("big", 200));
            std::thread::sleep(Duration::from_millis(100));
            // 4.5 + 1.125 GiB would fit beside `a`, but `big` (9 GiB) asked first.
            s.spawn(move || admit("small", 0));
            std::thread::sleep(Duration::from_millis(200));
            assert!(lock(order).is_empty(), "{:?}", lock(order));
            drop(a);
        });
        assert_eq!(*lock(&order), ["big", "small"]);

        // A waiter that gives up leaves the queue: the one behind it is not stuck.
        let held = gate.admit(&key_of("a"), None, 1, &Cancel::new()).unwrap();
        let stop = Cancel::new();
        std::thread::scope(|s| {
            s.spawn(|| assert!(gate.admit(&key_of("big"), None, 1, &stop).is_none()));
            std::thread::sleep(Duration::from_millis(100));
            stop.cancel();
        });
        // Were the cancelled ticket still first, `small` would wait: a watchdog ends that.
        let (done, watchdog) = (std::sync::atomic::AtomicBool::new(false), Cancel::new());
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..500 {
                    if done.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                watchdog.cancel();
            });
            let small = gate.admit(&key_of("small"), None, 1, &watchdog);
            done.store(true, Ordering::SeqCst);
            assert!(
                small.is_some(),
                "the waiter that gave up still blocks the queue"
            );
        });
        drop(held);
    }

    #[test]
    fn peaks_learned_in_one_work_directory_serve_another_through_the_cache() {
        let (cache, a, b) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let first = MemoryGate::load(budget(1 << 30), a.path()).shared(cache.path());
        first.name_unit(&a.path().join("obj/k.cu.o"), "unit-k".into());
        let key = first.key(
            &a.path().join("obj/k.cu.o"),
            Some(&StepName::for_capability("cicc", "compute_90")),
        );
        first.observe(&key, 800 << 20);
        // A process of an unnamed unit is recorded here only.
        first.observe(&first.key(&a.path().join("obj/x.o"), None), 100 << 20);
        first.save().unwrap();

        let second = MemoryGate::load(budget(1 << 30), b.path()).shared(cache.path());
        let object = b.path().join("build/obj/k.cu.o");
        let key = second.key(
            &object,
            Some(&StepName::for_capability("cicc", "compute_90")),
        );
        assert_eq!(second.estimate(&key, Some(1)), 1, "not named: the guess");
        second.name_unit(&object, "unit-k".into());
        assert_eq!(
            second.estimate(&key, Some(1)),
            900 << 20,
            "the other directory's peak"
        );
        let other = second.key(&object, Some(&StepName::for_capability("ptxas", "sm_90")));
        assert_eq!(second.estimate(&other, None), UNKNOWN_PEAK);
        // What this directory learns wins here, and reaches the cache beside the first's.
        second.observe(&key, 400 << 20);
        second.observe(&other, 80 << 20);
        second.save().unwrap();
        assert_eq!(second.estimate(&key, None), 450 << 20);
        let record: Record =
            serde_json::from_slice(&std::fs::read(cache.path().join("memory/v1.json")).unwrap())
                .unwrap();
        let peaks: Vec<(&str, u64)> = record
            .peak_bytes
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            peaks,
            [
                ("unit-k#cicc compute_90", 400 << 20),
                ("unit-k#ptxas sm_90", 80 << 20)
            ]
        );
    }

    #[test]
    fn a_step_never_measured_needs_at_most_what_it_needed_for_another_capability_of_the_unit() {
        let dir = tempfile::tempdir().unwrap();
        let gate = MemoryGate::load(budget(8 << 30), dir.path());
        let guess = Some(460 << 20);
        gate.observe(&key_of("obj/a.o#cicc compute_75"), 160 << 20);
        gate.observe(&key_of("obj/a.o#cicc compute_80"), 200 << 20);
        assert_eq!(
            gate.estimate(&key_of("obj/a.o#cicc compute_90"), guess),
            250 << 20
        );
        assert_eq!(
            gate.estimate(&key_of("obj/a.o#cicc compute_90a"), guess),
            250 << 20
        );
        assert_eq!(
            gate.estimate(&key_of("obj/a.o#cicc compute_90"), Some(100 << 20)),
            100 << 20
        );
        assert_eq!(
            gate.estimate(&key_of("obj/b.o#cicc compute_90"), guess),
            460 << 20
        );
        assert_eq!(
            gate.estimate(&key_of("obj/a.o#ptxas sm_90"), guess),
            460 << 20
        );
        gate.observe(&key_of("obj/a.o#host preprocess"), 50 << 20);
        assert_eq!(
            gate.estimate(&key_of("obj/a.o#host compile"), guess),
            460 << 20
        );
        let family = |what: &str, word: &str| StepName::for_capability(what, word).family_prefix();
        assert_eq!(family("preprocess", "900").as_deref(), Some("preprocess "));
        assert_eq!(family("preprocess", "1000").as_deref(), Some("preprocess "));
        assert_eq!(family("ptxas", "sm_90a").as_deref(), Some("ptxas "));
        assert_eq!(family("ptxas", "").as_deref(), None);
        assert_eq!(StepName::new("host compile").family_prefix(), None);
        assert_eq!(
            StepName::for_capability("ptxas", "").to_string(),
            "ptxas ",
            "a word that names no capability stays part of the name"
        );
        assert_eq!(
            key_of("obj/a.o#cicc compute_90").to_string(),
            "obj/a.o#cicc compute_90"
        );
    }

    #[test]
    fn a_waiting_step_shrinks_to_its_siblings_peak_once_one_is_measured_and_is_let_in() {
        let dir = tempfile::tempdir().unwrap();
        let gate = MemoryGate::load(budget(1 << 30), dir.path());
        let guess = Some(600 << 20);
        let first = gate
            .admit(&key_of("u#cicc compute_75"), guess, 1, &Cancel::new())
            .unwrap();
        let admitted = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _second = gate
                    .admit(&key_of("u#cicc compute_90"), guess, 1, &Cancel::new())
                    .unwrap();
                admitted.store(1, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(admitted.load(Ordering::SeqCst), 0, "600 + 600 MiB > 1 GiB");
            // The first ran at 300 MiB: the second now needs 375 MiB and fits beside it.
            gate.observe(&key_of("u#cicc compute_75"), 300 << 20);
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(
                admitted.load(Ordering::SeqCst),
                1,
                "let in while the first runs"
            );
        });
        drop(first);
    }

    #[test]
    fn peaks_are_recorded_per_object_and_step_and_unknown_ones_take_the_guess_or_a_conservative_size()
     {
        let dir = tempfile::tempdir().unwrap();
        let gate = MemoryGate::load(budget(1 << 30), dir.path());
        let key = gate.key(
            &dir.path().join("obj/a.cu.o"),
            Some(&StepName::for_capability("cicc", "compute_90")),
        );
        assert_eq!(key.to_string(), "obj/a.cu.o#cicc compute_90");
        assert_eq!(gate.estimate(&key, None), UNKNOWN_PEAK);
        assert_eq!(gate.estimate(&key, Some(500 << 20)), 500 << 20);
        assert!(!gate.knows(&key));
        gate.observe(&key, 800 << 20);
        assert!(gate.knows(&key));
        gate.save().unwrap();
        let again = MemoryGate::load(budget(1 << 30), dir.path());
        assert_eq!(
            again.estimate(&key, Some(500 << 20)),
            900 << 20,
            "measured wins"
        );
    }
}
