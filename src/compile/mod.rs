//! Compile jobs: command construction (data), one runner (jobs limit, first failure stops the
//! rest), and the object cache keyed on source, headers, flags and compiler.

mod cache;
mod command;
mod depfile;
mod dist;
mod guess;
mod namespace;
mod namespace_use;
mod nvcc_steps;
mod ptx;
mod redis;
mod remote;
mod reuse;
mod split;
mod step_cache;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use cache::nvcc_env_flags;
pub use command::{command_for, preprocess_command_for};
pub use depfile::{parse_depfile, scan_includes};
pub use redis::{check_url as check_remote_url, parse_reply as parse_redis_reply};
pub use remote::{RemoteSettings, RemoteUrlError};

use crate::hint::Hint;
use crate::jobserver::Jobserver;
use crate::memory::MemoryGate;
use crate::plan::{CompileJob, Lang};
use crate::process::{
    Cancel, CommandFailure, CommandSpec, Interrupted, Measured, check_interrupted, describe_status,
    diagnostics, on_new_line, run_measured,
};
use crate::report::{Reporter, UnitOutcome};
use crate::schedule::NvccMode;
use crate::schedule::{JobError, Schedule, Unit, run_scheduled};
use cache::{Cache, Manifest};
use remote::{RemoteCache, RemoteKey};
use reuse::{Reuse, Serving};
use step_cache::StepCache;

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
    /// The build's job slots: with [`NvccMode::Steps`] each step of a unit's pipeline runs in
    /// one, with [`NvccMode::Jobserver`] nvcc's device passes take them; each job holds one of
    /// its slots while it runs.
    pub jobserver: Option<Arc<Jobserver>>,
    /// Indices into the jobs, in the order they start; empty: as given.
    pub order: Vec<usize>,
    /// How CUDA units run nvcc, decided once for the build. With [`NvccMode::Steps`] a unit
    /// whose pipeline kbuild does not know still compiles with one nvcc.
    pub nvcc: NvccMode,
    /// The build's memory gate: every compiler process (a unit's one compiler, or each of
    /// nvcc's steps) waits until its learned peak fits, and its peak is learned. `None`: no
    /// budget is known, and only the job slots limit the processes.
    pub memory: Option<Arc<MemoryGate>>,
    /// The remote object cache shared with other checkouts and machines, when configured
    /// (`KBUILD_REMOTE_CACHE`).
    pub remote: Option<RemoteSettings>,
    /// sccache, to distribute units over sccache-dist's build servers (`KBUILD_DIST`); CUDA
    /// units then need [`NvccMode::Threads`] (one nvcc each, which sccache splits).
    pub dist: Option<PathBuf>,
}

impl CompileSettings {
    /// `jobs` jobs with their object cache in `cache_dir`, nvcc run as `nvcc`, and nothing else:
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
            nvcc,
            memory: None,
            remote: None,
            dist: None,
        }
    }
}

/// Which units ran a compiler and which came from the cache (labels, in job order).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompileSummary {
    pub compiled: Vec<String>,
    pub cached: Vec<String>,
    /// Of the cached units, those whose objects came from the remote cache.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remote: Vec<String>,
    /// nvcc's device passes of the compiled units that the device step cache held, as
    /// `<unit>: <step>` (`relu.cu [cuda]: cicc compute_80`): they did not run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reused_steps: Vec<String>,
    /// The units whose object got the new op namespace written over the old one instead of a
    /// compile under it: cached ones, and compiled ones whose compile was the probe that found
    /// where the old one lies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reapplied: Vec<String>,
    /// Per job, in job order: how long its compiler ran; `None` when it came from the cache.
    #[serde(skip)]
    pub compile_times: Vec<Option<Duration>>,
}

/// A compile that failed: the command, its status and the compiler's diagnostics.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The compiler ran and failed.
    #[error("compiling `{label}` failed: `{command}` {}{}", describe_status(*status), on_new_line(stderr))]
    CommandFailed {
        label: String,
        command: String,
        status: ExitStatus,
        /// stderr then stdout, trimmed to the last lines.
        stderr: String,
    },
    /// The compiler could not be started.
    #[error("compiling `{label}` failed: cannot run `{}`", program.display())]
    Spawn {
        label: String,
        program: PathBuf,
        lang: Lang,
        #[source]
        source: std::io::Error,
    },
    /// The compiler succeeded but its dependency file is missing or unreadable.
    #[error("compiling `{label}`: cannot read the dependency file `{}` the compiler wrote: {message}", path.display())]
    Depfile {
        label: String,
        path: PathBuf,
        message: String,
    },
    /// A file the unit depends on has a path that is not UTF-8 (shown lossily).
    #[error("compiling `{label}`: the dependency `{name}` has a path that is not valid UTF-8")]
    NonUtf8Dependency { label: String, name: String },
    /// SIGINT/SIGTERM stopped the compilers.
    #[error("compiling stopped: {0}")]
    Interrupted(Interrupted),
    /// `KBUILD_REMOTE_CACHE` does not name a usable server.
    #[error(transparent)]
    RemoteUrl(#[from] RemoteUrlError),
    /// Writing an object or a cache entry failed.
    #[error("cannot write `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CompileError {
    /// The error for a failed command run for unit `label`; `None` when it was cancelled.
    pub fn from_failure(label: &str, lang: Lang, failure: CommandFailure) -> Option<Self> {
        let label = label.to_string();
        Some(match failure {
            CommandFailure::Spawn {
                program, source, ..
            } => CompileError::Spawn {
                label,
                program,
                lang,
                source,
            },
            CommandFailure::Exited {
                command,
                status,
                ref stdout,
                ref stderr,
            } => CompileError::CommandFailed {
                stderr: diagnostics(stdout, stderr),
                label,
                command,
                status,
            },
            CommandFailure::Cancelled { .. } | CommandFailure::Interrupted { .. } => return None,
        })
    }
}

// Not `#[from]`: that would also make the signal the error's source, said twice.
impl From<Interrupted> for CompileError {
    fn from(signal: Interrupted) -> Self {
        CompileError::Interrupted(signal)
    }
}

impl Hint for CompileError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            CompileError::CommandFailed { status, .. } if status.code().is_none() => {
                "the compiler was killed; if by the out-of-memory killer (see `dmesg`), build with \
                 fewer parallel jobs, e.g. `kbuild build -j 1`"
                    .to_string()
            }
            CompileError::CommandFailed { .. } => {
                "fix the error reported above; the command line shown reproduces it".to_string()
            }
            CompileError::Spawn {
                lang: Lang::Cuda, ..
            } => {
                "install nvcc next to torch (`pip install \"cuda-toolkit[nvcc,cccl]==<torch's CUDA \
                  version>\"`), or pass `--nvcc PATH`"
                    .to_string()
            }
            CompileError::Spawn {
                lang: Lang::Cxx, ..
            } => "install a C++ compiler (`apt install g++`), or set `CXX` to one".to_string(),
            CompileError::Depfile { .. } => {
                "the compiler must support `-MD -MF FILE`; check that the configured compiler is \
                 nvcc or a gcc-compatible C++ compiler"
                    .to_string()
            }
            CompileError::NonUtf8Dependency { .. } => {
                "rename the directory or file to a UTF-8 name: kbuild reads the compiler's \
                 dependency file, which holds every header path, as UTF-8 text"
                    .to_string()
            }
            CompileError::Interrupted(_) => {
                "run the build again to finish it: objects compiled so far are kept".to_string()
            }
            CompileError::RemoteUrl(_) => {
                "set `KBUILD_REMOTE_CACHE` to `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (a `@`, \
                 `:` or `/` in the login written as `%40`, `%3A`, `%2F`), or unset it to build \
                 with the local cache only"
                    .to_string()
            }
            CompileError::Io { .. } => {
                "check free disk space and permissions of the build directory".to_string()
            }
        })
    }
}

/// Compile every job whose object is not fresh, `settings.jobs` at a time, and report each
/// unit. No compiler runs for an object whose source, headers, flags and compiler are
/// unchanged. Stops at the first failure.
pub fn compile_all(
    jobs: &[CompileJob],
    settings: &CompileSettings,
    reporter: &dyn Reporter,
) -> Result<CompileSummary, CompileError> {
    let cache = Cache::new(&settings.cache_dir, settings.kbuild_cache.as_deref());
    let steps = (settings.nvcc == NvccMode::Steps)
        .then(|| StepCache::new(&settings.cache_dir, settings.kbuild_cache.as_deref()));
    let remote = settings.remote.as_ref().map(RemoteCache::new).transpose()?;
    let dist = (settings.dist.as_deref()).and_then(|sccache| dist::connect(sccache, reporter));
    let schedule = Schedule {
        jobs: dist_jobs(settings, dist.as_ref(), reporter),
        jobserver: settings.jobserver.as_deref(),
        order: settings.order.clone(),
    };
    let result = run_scheduled(jobs, &schedule, reporter, |job, cancel| {
        let caches = Caches {
            local: &cache,
            steps: steps.as_ref(),
            remote: remote.as_ref(),
            dist: dist.as_ref().map(|d| d.sccache.as_path()),
        };
        compile_one(job, &caches, settings, reporter, cancel)
    });
    // Checked first: a compiler that the terminal's Ctrl-C reached before kbuild noticed it
    // fails too, and that failure is not the news.
    check_interrupted()?;
    if let Some(steps) = &steps
        && let Err(e) = steps.sweep()
    {
        reporter.warn(&format!(
            "cannot trim the device step cache in `{}`: {e}",
            settings.cache_dir.join("steps").display()
        ));
    }
    let finished = result?;
    let mut summary = CompileSummary::default();
    for (job, done) in jobs.iter().zip(finished) {
        match done.outcome {
            UnitOutcome::Cached => summary.cached.push(job.label.clone()),
            _ => summary.compiled.push(job.label.clone()),
        }
        summary
            .compile_times
            .push((done.outcome == UnitOutcome::Compiled).then_some(done.elapsed));
    }
    if let Some(steps) = &steps {
        let units: Vec<&str> = jobs.iter().map(|j| j.label.as_str()).collect();
        summary.reused_steps = steps.hits(&units);
    }
    let reapplied = cache.reapplied();
    summary.reapplied = (jobs.iter())
        .filter(|j| reapplied.contains(&j.label))
        .map(|j| j.label.clone())
        .collect();
    if let Some(remote) = &remote {
        let hits = remote.hits();
        summary.remote = jobs
            .iter()
            .filter(|j| hits.contains(&j.label))
            .map(|j| j.label.clone())
            .collect();
        if !summary.remote.is_empty() {
            reporter.info(&format!(
                "{} of {} objects came from the remote cache",
                summary.remote.len(),
                jobs.len()
            ));
        }
    }
    Ok(summary)
}

/// How many units run at once: with sccache-dist's servers their cores on top of ours, unless
/// a jobserver (kbuild's nvcc steps) hands out the slots, which stay this machine's.
fn dist_jobs(
    settings: &CompileSettings,
    dist: Option<&dist::Dist>,
    reporter: &dyn Reporter,
) -> usize {
    let Some(dist) = dist else {
        return settings.jobs;
    };
    let jobs = match settings.jobserver {
        None => settings.jobs + dist.cpus,
        Some(_) => settings.jobs,
    };
    reporter.info(&format!(
        "distributing C++ and CUDA units over {} sccache-dist build server(s) with {} cores: up \
         to {jobs} units at once",
        dist.servers, dist.cpus
    ));
    jobs
}

/// Every file the objects of `jobs` were last built from (sources and headers, as the object
/// cache in `cache_dir` records them, under `kbuild_cache` as it is now); `None` when an object
/// has no cache entry.
pub fn recorded_dependencies(
    jobs: &[CompileJob],
    cache_dir: &Path,
    kbuild_cache: Option<&Path>,
) -> Option<Vec<PathBuf>> {
    let cache = Cache::new(cache_dir, kbuild_cache);
    let mut all = Vec::new();
    for job in jobs {
        all.extend(cache.recorded_dependencies(job)?);
    }
    Some(all)
}

/// What serves the compiles of one build beside the compiler: this work directory's object
/// cache, the shared remote one, and sccache when units go to sccache-dist's servers.
struct Caches<'a> {
    local: &'a Cache,
    /// nvcc's device passes ([`NvccMode::Steps`] only).
    steps: Option<&'a StepCache>,
    remote: Option<&'a RemoteCache>,
    dist: Option<&'a Path>,
}

fn compile_one(
    job: &CompileJob,
    caches: &Caches,
    settings: &CompileSettings,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Result<UnitOutcome, JobError<CompileError>> {
    // CUDA units too: sccache splits nvcc itself and ships its steps (cudafe++, cicc, ptxas,
    // the host compile) to the servers; the build planned them as one nvcc each (`NvccMode`).
    let launcher = settings.launcher.as_deref().or(caches.dist);
    let argv = caches
        .local
        .argv(job, &command_for(job), &settings.nvcc_env);
    let serving = Serving {
        job,
        caches,
        argv: &argv,
        launcher,
        settings,
        reporter,
        cancel,
    };
    let (remote, known) = match reuse::reuse(&serving)? {
        Reuse::Done => return Ok(UnitOutcome::Cached),
        Reuse::Probed => return Ok(UnitOutcome::Compiled),
        Reuse::Compile { remote, known } => (remote, known),
    };

    // The compiler writes beside the final paths; they are renamed into place only on success,
    // so a failed or interrupted compile leaves the previous object and its cache entry intact.
    let tmp = TempOutputs::new(job);
    create_parents(job)?;
    let mut spec = launched(
        launcher,
        command_for(&CompileJob {
            object: tmp.object.clone(),
            depfile: tmp.depfile.clone(),
            ..job.clone()
        }),
    );
    // Not in the key or the command shown: colour changes no byte the compiler writes.
    if crate::report::stderr_color() {
        command::color_diagnostics(&mut spec, job.lang);
    }
    // Not in the command shown: the pipe it names exists only inside this build.
    if let (NvccMode::Jobserver, true, Some(jobserver)) =
        (settings.nvcc, job.nvcc_jobserver, &settings.jobserver)
    {
        jobserver.share_with(&mut spec);
    }
    // Shown (with `-v` and in errors) as the command that writes the final paths: it reproduces
    // the compile exactly, and the temporary names mean nothing to a reader.
    let shown = launched(launcher, command_for(job)).to_string();
    reporter.verbose(&shown);
    let started = SystemTime::now();
    let split = SplitInputs {
        command: &spec,
        tmp: &tmp,
        shown: &shown,
        step_cache: caches.steps,
    };
    let said = run_compiler(job, settings, &split, reporter, cancel)?;
    if !said.is_empty() {
        reporter.warn(&format!("`{}`:\n{said}", job.label));
    }

    let deps = dependencies(job, &tmp.depfile, spec.cwd.as_deref())?;
    rename(&tmp.depfile, &job.depfile)?;
    rename(&tmp.object, &job.object)?;
    drop(tmp);
    let manifest = (caches.local)
        .manifest(job, &argv, &deps, started)
        .map_err(|e| io_error(&job.object, e))?;
    let manifest = reuse::with_known(manifest, known);
    let manifest = reuse::checked_for_sharing(&serving, manifest, remote.is_some(), started)?;
    let shared = remote.as_ref().map(|(r, key)| (*r, key));
    record(job, caches.local, manifest, shared, reporter)?;
    Ok(UnitOutcome::Compiled)
}

/// Run the compile of `job` (its command and temporary outputs in `inputs`): as nvcc's steps
/// when settings and the unit allow, else as one process under the memory gate. Returns what
/// the compiler printed.
fn run_compiler(
    job: &CompileJob,
    settings: &CompileSettings,
    inputs: &SplitInputs,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Result<String, JobError<CompileError>> {
    if let Some(said) = split_run(job, settings, inputs, reporter, cancel)? {
        return Ok(said);
    }
    // One nvcc embeds the PTX as `cicc` wrote it: unsplit, so the bytes do not depend on the
    // slots free when it starts (kbuild's steps split and reorder the PTX, `ptx.rs`).
    let spec = split::unsplit(inputs.command);
    let (spec, _keep) = split::with_stable_names(job, spec, &inputs.tmp.object)?;
    let gate = settings.memory.as_deref();
    let key = gate.map(|g| g.key(&job.object, None));
    let guess = gate.and_then(|g| {
        guess::cxx_peak_guess(job, g, settings.jobs, &inputs.tmp.object, reporter, cancel)
    });
    let output = run_gated(&spec, gate, key.as_deref(), guess, cancel)
        .map_err(|f| job_error(job, inputs.shown, f))?;
    Ok(diagnostics(&output.stdout, &output.stderr))
}

/// Record the object `job` just compiled (its `manifest`, `None` when a dependency changed
/// while compiling) in the local cache and share it with the remote one (under `key`).
fn record(
    job: &CompileJob,
    cache: &Cache,
    manifest: Option<Manifest>,
    remote: Option<(&RemoteCache, &RemoteKey)>,
    reporter: &dyn Reporter,
) -> Result<(), JobError<CompileError>> {
    if manifest.is_none() {
        reporter.verbose(&format!(
            "`{}`: a dependency changed while compiling; it will compile again next time",
            job.label
        ));
    }
    cache
        .store(job, manifest.as_ref())
        .map_err(|e| io_error(&cache.manifest_path(job), e))?;
    if let (Some((remote, key)), Some(manifest)) = (remote, &manifest) {
        remote.store(job, key, manifest, reporter);
    }
    Ok(())
}

/// What a unit compiled as nvcc's steps runs and writes.
struct SplitInputs<'a> {
    /// The one-nvcc command writing the temporary outputs.
    command: &'a CommandSpec,
    tmp: &'a TempOutputs,
    /// The command shown in errors.
    shown: &'a str,
    step_cache: Option<&'a StepCache>,
}

/// Compile `job` as nvcc's separate steps when settings and the unit allow: `Some(what the
/// steps printed)`, or `None` when the unit compiles with one nvcc instead.
fn split_run(
    job: &CompileJob,
    settings: &CompileSettings,
    inputs: &SplitInputs,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Result<Option<String>, JobError<CompileError>> {
    if settings.nvcc != NvccMode::Steps || job.lang != Lang::Cuda {
        return Ok(None);
    }
    let run = split::SplitRun {
        job,
        command: inputs.command,
        object: &inputs.tmp.object,
        depfile: &inputs.tmp.depfile,
        shown: inputs.shown,
        jobserver: settings.jobserver.as_deref(),
        memory: settings.memory.as_deref(),
        step_cache: inputs.step_cache,
        reporter,
    };
    match split::compile_split(&run, cancel)? {
        split::Split::Done { said } => Ok(Some(said)),
        split::Split::NotSplit(why) => {
            reporter.verbose(&format!("`{}` compiles with one nvcc: {why}", job.label));
            Ok(None)
        }
    }
}

/// Run `spec` once `gate` admits the process `key` (learned by that key; never measured, it
/// reserves `guess`, else a conservative size), or at once without a gate. Cancelled while
/// waiting: as if cancelled while running.
pub(crate) fn run_gated(
    spec: &CommandSpec,
    gate: Option<&MemoryGate>,
    key: Option<&str>,
    guess: Option<u64>,
    cancel: &Cancel,
) -> Result<std::process::Output, CommandFailure> {
    let (Some(gate), Some(key)) = (gate, key) else {
        return run_measured(spec, cancel).map(|m| m.output);
    };
    let Some(_reserved) = gate.admit(key, guess, cancel) else {
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
    let Measured { output, peak_bytes } = run_measured(spec, cancel)?;
    gate.observe(key, peak_bytes);
    Ok(output)
}

/// `spec` run through `launcher` (its program becomes the launcher's first argument).
pub fn launched(launcher: Option<&Path>, spec: CommandSpec) -> CommandSpec {
    let Some(launcher) = launcher else {
        return spec;
    };
    let mut args = vec![spec.program.into_os_string()];
    args.extend(spec.args);
    CommandSpec {
        program: launcher.to_path_buf(),
        args,
        ..spec
    }
}

/// The unit's error for a failed command, naming `shown` as the command.
fn job_error(job: &CompileJob, shown: &str, failure: CommandFailure) -> JobError<CompileError> {
    match CompileError::from_failure(&job.label, job.lang, failure) {
        Some(CompileError::CommandFailed {
            label,
            status,
            stderr,
            ..
        }) => JobError::Failed(CompileError::CommandFailed {
            label,
            command: shown.to_string(),
            status,
            stderr,
        }),
        Some(err) => JobError::Failed(err),
        None => JobError::Cancelled,
    }
}

/// The source, every file in the compiler's depfile, and the project headers the include scan
/// finds (absolute, without duplicates, source first).
fn dependencies(
    job: &CompileJob,
    depfile: &Path,
    cwd: Option<&Path>,
) -> Result<Vec<PathBuf>, JobError<CompileError>> {
    let depfile_error = |message: String| {
        JobError::Failed(CompileError::Depfile {
            label: job.label.clone(),
            path: job.depfile.clone(),
            message,
        })
    };
    let bytes = std::fs::read(depfile).map_err(|e| depfile_error(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let lossy = String::from_utf8_lossy(e.as_bytes());
        let name = lossy
            .split_whitespace()
            .find(|w| w.contains('\u{FFFD}'))
            .unwrap_or_default()
            .to_string();
        JobError::Failed(CompileError::NonUtf8Dependency {
            label: job.label.clone(),
            name,
        })
    })?;
    let listed = parse_depfile(&text).map_err(depfile_error)?;
    let base = match cwd {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().map_err(|e| io_error(Path::new("."), e))?,
    };
    let absolute = |p: &Path| std::path::absolute(base.join(p)).unwrap_or_else(|_| base.join(p));
    let scanned = scan_includes(&job.source, &job.include_dirs, &job.system_include_dirs);
    let mut seen = std::collections::HashSet::new();
    Ok(std::iter::once(job.source.as_path())
        .chain(listed.iter().map(PathBuf::as_path))
        .chain(scanned.iter().map(PathBuf::as_path))
        .map(absolute)
        .filter(|p| seen.insert(p.clone()))
        .collect())
}

/// Temporary object and depfile names next to the final ones, removed if still there on drop.
struct TempOutputs {
    object: PathBuf,
    depfile: PathBuf,
}

impl TempOutputs {
    fn new(job: &CompileJob) -> Self {
        // Keep the real extension last: nvcc picks behaviour from output suffixes.
        let tmp = |p: &Path| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            p.with_file_name(format!(
                "{}{}",
                crate::files::temp_prefix("tmp"),
                name.unwrap_or_default()
            ))
        };
        TempOutputs {
            object: tmp(&job.object),
            depfile: tmp(&job.depfile),
        }
    }
}

impl Drop for TempOutputs {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.object);
        let _ = std::fs::remove_file(&self.depfile);
    }
}

/// The directories the object and depfile of `job` go in.
fn create_parents(job: &CompileJob) -> Result<(), CompileError> {
    for path in [&job.object, &job.depfile] {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        }
    }
    Ok(())
}

fn rename(from: &Path, to: &Path) -> Result<(), JobError<CompileError>> {
    std::fs::rename(from, to).map_err(|e| io_error(to, e).into())
}

fn io_error(path: &Path, source: std::io::Error) -> CompileError {
    CompileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Unit for CompileJob {
    fn label(&self) -> &str {
        &self.label
    }
}
