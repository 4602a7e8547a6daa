//! How to run the compile jobs: what the orchestrator decided for this build.

use std::path::PathBuf;
use std::sync::Arc;

use crate::jobserver::Jobserver;
use crate::schedule::memory::MemoryGate;
use crate::schedule::{NvccMode, RunChoice};

/// How to run the compile jobs.
#[derive(Debug, Clone)]
pub struct CompileSettings {
    /// Parallel jobs (`JobBudget::jobs`).
    pub jobs: usize,
    /// Where the object cache keeps its manifests (`<work_dir>/cache`).
    pub cache_dir: PathBuf,
    /// kbuild's cache directory (`KBUILD_CACHE_DIR`): paths under it are keyed relative to it,
    /// so another cache directory with the same contents compiles nothing.
    pub kbuild_cache: Option<PathBuf>,
    /// `NVCC_PREPEND_FLAGS` / `NVCC_APPEND_FLAGS` as the environment sets them ([`nvcc_env_flags`]):
    /// nvcc reads them itself, so they are part of every CUDA object's key.
    pub nvcc_env: Vec<(String, String)>,
    /// Program every compiler runs under (`sccache`, `ccache`). Not part of the object cache's
    /// key: it must not change what the compiler produces, and switching it on should not
    /// rebuild what kbuild already has.
    pub launcher: Option<PathBuf>,
    /// The build's job slots: a unit run as nvcc's steps runs each step in one, an nvcc with
    /// `--jobserver` takes them for its device passes; each job holds one of its slots while
    /// it runs.
    pub jobserver: Option<Arc<Jobserver>>,
    /// Indices into the jobs, in the order they start; empty: as given.
    pub order: Vec<usize>,
    /// How each job runs (one per job, chosen by `schedule::choose`); a job without one runs
    /// as [`RunChoice::of`] with `nvcc` and one thread.
    pub runs: Vec<RunChoice>,
    /// How CUDA units run nvcc for jobs `runs` does not cover.
    pub nvcc: NvccMode,
    /// The build's memory gate: every compiler process (a unit's one compiler, or each of
    /// nvcc's steps) waits until its learned peak fits, and its peak is learned. `None`: no
    /// budget is known, and only the job slots limit the processes.
    pub memory: Option<Arc<MemoryGate>>,
    /// The remote object cache shared with other checkouts and machines, when configured
    /// (`KBUILD_REMOTE_CACHE`).
    pub remote: Option<RemoteSettings>,
    /// sccache, to distribute units over sccache-dist's build servers (`KBUILD_DIST`); CUDA
    /// units then run one nvcc each (which sccache splits).
    pub dist: Option<PathBuf>,
}

impl CompileSettings {
    /// `jobs` jobs with their object cache in `cache_dir`, nvcc run as `nvcc` (one thread, no
    /// split: [`RunChoice::of`]), and nothing else:
    /// no launcher, jobserver, memory gate, remote cache or build servers, jobs in the order
    /// given, no `NVCC_*_FLAGS`. Set the rest with struct update syntax.
    pub fn local(cache_dir: PathBuf, jobs: usize, nvcc: NvccMode) -> Self {
        CompileSettings {
            jobs,
            cache_dir,
            kbuild_cache: None,
            nvcc_env: Vec::new(),
            launcher: None,
            jobserver: None,
            order: Vec::new(),
            runs: Vec::new(),
            nvcc,
            memory: None,
            remote: None,
            dist: None,
        }
    }
}

/// Where the remote cache is and what the paths it stores are relative to. `Debug` hides the
/// URL's login.
#[derive(Clone)]
pub struct RemoteSettings {
    /// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (from `KBUILD_REMOTE_CACHE`).
    pub url: String,
    /// Named directories that differ between checkouts and machines (`project`, `work`,
    /// `cache`): a path below one is stored as `<name>/rest`.
    pub roots: Vec<(String, PathBuf)>,
    /// The team's secret (`KBUILD_REMOTE_CACHE_SECRET`): entries are signed with it, and only
    /// entries signed with it are used.
    pub secret: Option<String>,
}

impl std::fmt::Debug for RemoteSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSettings")
            .field("url", &crate::redact::url(&self.url))
            .field("roots", &self.roots)
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .finish()
    }
}
