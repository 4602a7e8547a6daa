//! Compile jobs: command construction (data), one runner (jobs limit, first failure stops the
//! rest), and the object cache keyed on source, headers, flags and compiler.

mod cache;
mod command;
mod depfile;
mod dist;
mod error;
mod gate;
mod guess;
mod namespace;
mod namespace_use;
mod nvcc;
mod redis;
mod remote;
mod remote_costs;
mod reuse;
mod runner;
mod settings;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub use crate::files::scan_includes;
pub use cache::nvcc_env_flags;
pub use command::{command_for, preprocess_command_for};
pub use depfile::parse_depfile;
pub use error::{CompileError, RemoteUrlError, compiler_hint};
pub use redis::{check_url as check_remote_url, parse_reply as parse_redis_reply};
pub use remote_costs::{fetch_costs, share_costs};
use runner::launched;
pub use settings::{CompileSettings, RemoteSettings};

use crate::plan::{CompileJob, Lang};
use crate::process::{Cancel, check_interrupted};
use crate::report::{Reporter, UnitOutcome};
use crate::schedule::{JobError, PtxasCosts, RunChoice, Schedule, Siblings, Unit, run_scheduled};
use cache::{Cache, Manifest};
use error::io_error;
use nvcc::StepCache;
use remote::{RemoteCache, RemoteKey};
use reuse::{Caches, Reuse, Serving};
use runner::{CompileInputs, TempOutputs};

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

/// Compile every job whose object is not fresh, `settings.jobs` at a time, and report each
/// unit. No compiler runs for an object whose source, headers, flags and compiler are
/// unchanged. Stops at the first failure.
pub fn compile_all(
    jobs: &[CompileJob],
    settings: &CompileSettings,
    reporter: &dyn Reporter,
) -> Result<CompileSummary, CompileError> {
    let cache = Cache::new(&settings.cache_dir, settings.kbuild_cache.as_deref());
    let units = units_of(jobs, settings);
    let steps = (units.iter().any(|u| u.run.nvcc_steps))
        .then(|| StepCache::new(&settings.cache_dir, settings.kbuild_cache.as_deref()));
    let remote = settings.remote.as_ref().map(RemoteCache::new).transpose()?;
    let dist = (settings.dist.as_deref()).and_then(|sccache| dist::connect(sccache, reporter));
    let siblings = Siblings::new(jobs);
    let ptxas = PtxasCosts::default();
    let schedule = schedule_of(settings, dist.as_ref(), &siblings, reporter);
    let result = run_scheduled(&units, &schedule, reporter, |unit, cancel| {
        let caches = Caches {
            local: &cache,
            steps: steps.as_ref(),
            remote: remote.as_ref(),
            dist: dist.as_ref().map(|d| d.sccache.as_path()),
        };
        let waited_for = || siblings.waited_for(unit.index);
        let learned = nvcc::split::Learned {
            waited_for: (siblings.any()).then_some(&waited_for as &nvcc::split::WaitedFor),
            ptxas: Some(&ptxas),
        };
        compile_one(unit, &caches, learned, settings, reporter, cancel)
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

/// Each job with how it runs (the schedule's choice, else one plain compiler process).
fn units_of<'a>(jobs: &'a [CompileJob], settings: &CompileSettings) -> Vec<Scheduled<'a>> {
    (jobs.iter().enumerate())
        .map(|(i, job)| Scheduled {
            index: i,
            run: (settings.runs.get(i).cloned())
                .unwrap_or_else(|| RunChoice::of(job, settings.nvcc, 1)),
            job,
        })
        .collect()
}

/// How the runner hands out the units: `settings`' order and jobserver, as many at once as
/// [`dist_jobs`] says, the waiting ones re-ranked by what their `siblings` (units alike but for
/// their numbers) measured once they compile.
fn schedule_of<'a>(
    settings: &'a CompileSettings,
    dist: Option<&dist::Dist>,
    siblings: &'a Siblings,
    reporter: &dyn Reporter,
) -> Schedule<'a> {
    Schedule {
        jobs: dist_jobs(settings, dist, reporter),
        jobserver: settings.jobserver.as_deref(),
        order: settings.order.clone(),
        rerank: siblings
            .any()
            .then_some(siblings as &dyn crate::schedule::Rerank),
    }
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

fn compile_one(
    unit: &Scheduled,
    caches: &Caches,
    learned: nvcc::split::Learned,
    settings: &CompileSettings,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Result<UnitOutcome, JobError<CompileError>> {
    // CUDA units too: sccache splits nvcc itself and ships its steps (cudafe++, cicc, ptxas,
    // the host compile) to the servers; the schedule runs them as one nvcc each.
    let (job, run) = (unit.job, &unit.run);
    let launcher = settings.launcher.as_deref().or(caches.dist);
    let argv = caches.local.argv(
        job,
        &command_for(job, run),
        &settings.nvcc_env,
        run.nvcc_steps,
    );
    let serving = Serving {
        job,
        run,
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
    let spec = command_to_run(unit, &tmp, launcher, settings);
    // Shown (with `-v` and in errors) as the command that writes the final paths: it reproduces
    // the compile exactly, and the temporary names mean nothing to a reader.
    let shown = launched(launcher, command_for(job, run)).to_string();
    reporter.verbose(&shown);
    let started = SystemTime::now();
    let inputs = CompileInputs {
        run,
        command: &spec,
        tmp: &tmp,
        shown: &shown,
        step_cache: caches.steps,
        learned,
    };
    let said = run_compiler(job, settings, &inputs, reporter, cancel)?;
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

/// The command that compiles `unit` into the temporary outputs `tmp`, through `launcher`, with
/// what is not part of the command shown: coloured diagnostics, the build's jobserver.
fn command_to_run(
    unit: &Scheduled,
    tmp: &TempOutputs,
    launcher: Option<&Path>,
    settings: &CompileSettings,
) -> crate::process::CommandSpec {
    let (job, run) = (unit.job, &unit.run);
    let writing_tmp = CompileJob {
        object: tmp.object.clone(),
        depfile: tmp.depfile.clone(),
        ..job.clone()
    };
    let mut spec = launched(launcher, command_for(&writing_tmp, run));
    // Not in the key or the command shown: colour changes no byte the compiler writes.
    if crate::report::stderr_color() {
        command::color_diagnostics(&mut spec, job.lang);
    }
    // Not in the command shown: the pipe it names exists only inside this build.
    if let (true, Some(jobserver)) = (run.nvcc_jobserver, &settings.jobserver) {
        jobserver.share_with(&mut spec);
    }
    spec
}

/// Run the compile of `job` (its command and temporary outputs in `inputs`), the one dispatch
/// per language: nvcc's own way for CUDA (`nvcc/`), one process under the memory gate for
/// C++. Returns what the compiler printed.
fn run_compiler(
    job: &CompileJob,
    settings: &CompileSettings,
    inputs: &CompileInputs,
    reporter: &dyn Reporter,
    cancel: &Cancel,
) -> Result<String, JobError<CompileError>> {
    match job.lang {
        Lang::Cuda => nvcc::compile(job, settings, inputs, reporter, cancel),
        Lang::Cxx => runner::run_one(job, settings, inputs.command, inputs, reporter, cancel),
    }
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

/// A job with how it runs: what the runner hands out.
struct Scheduled<'a> {
    /// The job's index in the build's jobs (and its siblings').
    index: usize,
    job: &'a CompileJob,
    run: RunChoice,
}

impl Unit for Scheduled<'_> {
    fn label(&self) -> &str {
        &self.job.label
    }
}
