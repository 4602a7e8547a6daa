//! The build orchestrator: config → toolchain → plan → compile → link → package.
//!
//! [`Builder::prepare`] loads the project, discovers the toolchain and makes the plan (all a
//! dry run needs); [`Builder::execute`] takes the output directory's lock and runs plans. A
//! build for several toolchains (one per torch) makes one plan per toolchain and executes them
//! together: their compile jobs share one runner and one budget.

mod paths;
mod costs;
mod prepare;
mod fresh;
mod lock;

pub use prepare::{ToolchainChoice, choose_toolchains, discover_toolchain};
pub use lock::BuildLock;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use serde::Serialize;

use crate::compile::{self, CompileError, CompileSettings};
use crate::config::{self, Backend, ConfigError, Project};
use crate::depends::{self, DepsError};
use crate::hint::Hint;
use crate::schedule::{JobBudget, Order};
use crate::jobserver::Jobserver;
use crate::link::{self, LinkError};
use crate::package::{self, Installed, PackageError};
use crate::plan::{
    self, BuildPlan, CompileJob, Lang, PlanError, PlanSettings, Skipped, VariantPlan,
};
use crate::process::{Interrupted, catch_interrupts, check_interrupted};
use crate::report::Reporter;
use crate::toolchain::{FactCache, Toolchain, ToolchainError, ToolchainSettings};
use crate::managed::InstallError;

/// What to build and how, resolved from the command line.
#[derive(Debug, Clone)]
pub struct BuildSettings {
    pub project_dir: PathBuf,
    pub toolchain: ToolchainSettings,
    /// `--backend`: empty means every backend of build.toml this machine can build.
    pub backends: Vec<String>,
    pub budget: JobBudget,
    /// Default: `<project>/build`.
    pub out_dir: Option<PathBuf>,
    /// Op namespace suffix instead of the source identity's hash.
    pub unique_id: Option<String>,
    /// `--torch`: one toolchain per version; empty means kbuild.lock's, else the default Python.
    pub torch: Vec<String>,
    /// `--variant`: build only these; empty means all.
    pub variants: Vec<String>,
    /// Runs every compiler (`sccache`); not part of the object cache's key.
    pub compiler_launcher: Option<PathBuf>,
    /// What to write besides `build/<variant>/`.
    pub outputs: Outputs,
}

/// Formats written from each built variant, besides its directory.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// One wheel per variant into this directory.
    pub wheel_dir: Option<PathBuf>,
    /// One `<name>-<variant>.tar.gz` per variant into this directory.
    pub artifact_dir: Option<PathBuf>,
}

/// A build that failed, at the stage that failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Config(Box<ConfigError>),
    #[error(transparent)]
    Toolchain(Box<ToolchainError>),
    #[error(transparent)]
    Deps(Box<DepsError>),
    #[error(transparent)]
    Plan(Box<PlanError>),
    #[error(transparent)]
    Compile(Box<CompileError>),
    #[error(transparent)]
    Link(Box<LinkError>),
    #[error(transparent)]
    Package(Box<PackageError>),
    #[error(transparent)]
    Toolchains(Box<InstallError>),
    /// No managed toolchain for a requested torch, and the default Python has another.
    #[error("no toolchain for torch {wanted}: none is installed and `{}` has torch {found}", python.display())]
    TorchNotFound {
        wanted: String,
        python: PathBuf,
        found: String,
    },
    /// `--variant` names a variant this build does not make.
    #[error("`--variant {name}` is not built here (variants: {valid})")]
    UnknownVariant { name: String, valid: String },
    /// Two toolchains would write the same variant.
    #[error("two toolchains both build variant `{name}`")]
    DuplicateVariant { name: String },
    /// `--out-dir` inside a directory the build reads.
    #[error(
        "the output directory `{}` is inside `{}`, {what}",
        out_dir.display(),
        dir.display()
    )]
    OutDirInSources {
        out_dir: PathBuf,
        /// Relative to the project root.
        dir: PathBuf,
        what: &'static str,
    },
    /// A path compilers write into dependency files, which kbuild reads as UTF-8 text.
    #[error("the {what} path `{}` is not valid UTF-8", path.display())]
    NonUtf8Path { what: &'static str, path: PathBuf },
    /// SIGINT/SIGTERM stopped the build between two steps.
    #[error("the build stopped: {0}")]
    Interrupted(Interrupted),
    /// The output directory's lock could not be taken.
    #[error("cannot {action} `{}`", path.display())]
    Lock {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The record of the last build (the no-op fast path) could not be removed.
    #[error("cannot remove `{}`", path.display())]
    Record {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Hint for BuildError {
    fn hint(&self) -> Option<String> {
        match self {
            BuildError::Config(e) => e.hint(),
            BuildError::Toolchain(e) => e.hint(),
            BuildError::Deps(e) => e.hint(),
            BuildError::Plan(e) => e.hint(),
            BuildError::Compile(e) => e.hint(),
            BuildError::Link(e) => e.hint(),
            BuildError::Package(e) => e.hint(),
            BuildError::Toolchains(e) => e.hint(),
            BuildError::TorchNotFound { wanted, .. } => Some(format!(
                "install it: `kbuild toolchain install --torch {wanted}`, or pass `--python` with \
                 a torch {wanted} interpreter"
            )),
            BuildError::UnknownVariant { .. } => Some(
                "use one of the variants listed; `--torch` and `--backend` decide which are built"
                    .into(),
            ),
            BuildError::DuplicateVariant { .. } => Some(
                "ask for one toolchain per torch version (`--torch`, kbuild.lock), or build the \
                 clashing backend with `--backend`"
                    .into(),
            ),
            BuildError::OutDirInSources { .. } => Some(
                "pass an `--out-dir` outside the project's sources and Python package (or leave \
                 it out for `build/`): builds there would be copied into every new variant"
                    .into(),
            ),
            BuildError::NonUtf8Path { .. } => Some(
                "rename the directory (or move the project) to a UTF-8 path: kbuild reads the \
                 compilers' dependency files, which hold these paths, as UTF-8 text"
                    .into(),
            ),
            BuildError::Interrupted(_) => Some(
                "run the build again to finish it: variants in place are whole, old or new".into(),
            ),
            BuildError::Lock { .. } | BuildError::Record { .. } => Some(
                "check that the output directory (`--out-dir`) can be created and written".into(),
            ),
        }
    }
}

// Stage errors are boxed to keep `Result<T, BuildError>` small; `?` converts through these.
macro_rules! from_stage {
    ($($variant:ident => $ty:ty),* $(,)?) => {$(
        impl From<$ty> for BuildError {
            fn from(e: $ty) -> Self {
                BuildError::$variant(Box::new(e))
            }
        }
    )*};
}

from_stage! {
    Config => ConfigError,
    Toolchain => ToolchainError,
    Deps => DepsError,
    Plan => PlanError,
    Compile => CompileError,
    Link => LinkError,
    Package => PackageError,
    Toolchains => InstallError,
}

// Not `#[from]`: that would also make the signal the error's source, said twice.
impl From<Interrupted> for BuildError {
    fn from(signal: Interrupted) -> Self {
        BuildError::Interrupted(signal)
    }
}

/// One variant a build wrote (or found unchanged).
#[derive(Debug, Clone, Serialize)]
pub struct VariantReport {
    pub name: String,
    pub path: PathBuf,
    pub id: String,
    pub backend: Backend,
    pub capabilities: Vec<String>,
    /// `false` when an identical variant was already in place and left untouched.
    pub written: bool,
    /// The wheel written from it, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<PathBuf>,
    /// The artifact written from it, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<PathBuf>,
}

/// What a build did (`kbuild build --json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    pub variants: Vec<VariantReport>,
    pub skipped: Vec<Skipped>,
    /// Labels of the units a compiler ran for, and of those that came from the cache.
    pub compiled: Vec<String>,
    pub cached: Vec<String>,
    /// How the compile jobs were run; absent when nothing needed compiling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleReport>,
    pub seconds: f64,
}

/// How a build ran its compile jobs.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleReport {
    /// Compiler processes at once (`-j`).
    pub jobs: usize,
    /// nvcc's device passes took their slots from the build's jobserver.
    pub jobserver: bool,
    /// The order the jobs started in.
    pub order: Order,
    /// CUDA units ran nvcc's pipeline as separate steps (`KBUILD_NVCC_STEPS`).
    pub nvcc_steps: bool,
}

/// Everything known before anything runs: enough for `--dry-run` and `list-variants`.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub project: Project,
    pub toolchain: Toolchain,
    pub plan: BuildPlan,
}

/// Runs builds with one set of settings, reporting progress to `reporter`.
pub struct Builder<'r> {
    settings: BuildSettings,
    reporter: &'r dyn Reporter,
}

impl<'r> Builder<'r> {
    pub fn new(settings: BuildSettings, reporter: &'r dyn Reporter) -> Self {
        Builder { settings, reporter }
    }

    /// Load build.toml (reporting its warnings); config errors surface before anything is
    /// written.
    pub fn load(&self) -> Result<Project, BuildError> {
        let project = config::load(&self.settings.project_dir)?;
        for warning in &project.warnings {
            self.reporter.warn(&warning.to_string());
        }
        Ok(project)
    }

    /// Where `project`'s variants go: `--out-dir`, else `<project>/build`.
    fn out_dir(&self, project: &Project) -> PathBuf {
        match &self.settings.out_dir {
            Some(dir) => std::path::absolute(dir).unwrap_or_else(|_| dir.clone()),
            None => project.root.join("build"),
        }
    }

    /// The plan for `project` built with `toolchain`; reports the backends it skips.
    pub fn plan(&self, project: &Project, toolchain: &Toolchain) -> Result<BuildPlan, BuildError> {
        paths::check_paths(project, &self.out_dir(project))?;
        let settings = PlanSettings {
            out_dir: self.out_dir(project),
            backends: self.settings.backends.clone(),
            unique_id: self.settings.unique_id.clone(),
            budget: self.settings.budget,
        };
        let plan = plan::make_plan(project, toolchain, &settings)?;
        for s in &plan.skipped {
            self.reporter
                .warn(&format!("skipping backend `{}`: {}", s.backend, s.reason));
        }
        for note in &plan.notes {
            self.reporter.info(&format!("note: {note}"));
        }
        Ok(plan)
    }

    /// Load the project, discover its toolchain and plan the build. Toolchain facts remembered
    /// by an earlier build are used, but nothing is written.
    pub fn prepare(&self) -> Result<Prepared, BuildError> {
        self.prepare_with_facts().map(|(prepared, _)| prepared)
    }

    /// [`Builder::prepare`], also returning the toolchain facts cache of the output directory
    /// (`<out_dir>/.kbuild/toolchain.json`) with what this build had to ask anew.
    fn prepare_with_facts(&self) -> Result<(Prepared, FactCache), BuildError> {
        let project = self.load()?;
        let facts = FactCache::open(&self.out_dir(&project).join(".kbuild/toolchain.json"));
        let toolchain = discover_toolchain(
            &project,
            &self.settings.toolchain,
            &self.settings.backends,
            None,
            &facts,
            self.reporter,
        )?;
        let plan = self.plan(&project, &toolchain)?;
        let prepared = Prepared {
            project,
            toolchain,
            plan,
        };
        Ok((prepared, facts))
    }

    /// Load the project and plan it once per toolchain (one per requested torch, see
    /// [`choose_toolchains`]), keeping only the `--variant`s asked for.
    pub fn prepare_all(&self) -> Result<(Project, Vec<BuildPlan>), BuildError> {
        self.prepare_all_with_facts()
            .map(|(project, plans, _)| (project, plans))
    }

    /// [`Builder::prepare_all`], also returning the toolchain facts cache with what this build
    /// had to ask anew.
    fn prepare_all_with_facts(&self) -> Result<(Project, Vec<BuildPlan>, FactCache), BuildError> {
        let project = self.load()?;
        let facts = FactCache::open(&self.out_dir(&project).join(".kbuild/toolchain.json"));
        let choices = choose_toolchains(
            &project.root,
            &self.settings.toolchain,
            &self.settings.torch,
        )?;
        let mut plans = Vec::new();
        for choice in &choices {
            let toolchain = discover_toolchain(
                &project,
                &choice.settings,
                &self.settings.backends,
                choice.torch.as_deref(),
                &facts,
                self.reporter,
            )?;
            plans.push(self.plan(&project, &toolchain)?);
        }
        select_variants(&mut plans, &self.settings.variants)?;
        Ok((project, plans, facts))
    }

    /// Prepare and execute: the whole `kbuild build`.
    pub fn build(&self) -> Result<BuildReport, BuildError> {
        let started = Instant::now();
        let (project, plans, facts) = self.prepare_all_with_facts()?;
        if let Err(e) = facts.save() {
            self.reporter.warn(&format!(
                "cannot save the toolchain facts of `{}` (the next build asks the tools again): {e}",
                project.root.display()
            ));
        }
        self.execute(&project, &plans, started)
    }

    /// Run `plans` (made for `project`, writing one output directory) under that directory's
    /// lock: generated headers, every compile job in one run, then link and package each
    /// variant. `started` is when the build began, for the report's time.
    pub fn execute(
        &self,
        project: &Project,
        plans: &[BuildPlan],
        started: Instant,
    ) -> Result<BuildReport, BuildError> {
        let reporter = self.reporter;
        let Some(first) = plans.first() else {
            return Ok(BuildReport {
                variants: Vec::new(),
                skipped: Vec::new(),
                compiled: Vec::new(),
                cached: Vec::new(),
                schedule: None,
                seconds: started.elapsed().as_secs_f64(),
            });
        };
        let lock = BuildLock::acquire(&first.out_dir, reporter)?;
        // From here on a signal cancels the running compilers (the runner kills their process
        // trees and removes their temporary objects) instead of orphaning them.
        let _signals = catch_interrupts();
        lock.sweep(&first.out_dir, &first.work_dir, reporter);
        // Wheels and artifacts are written from the installed variants: only a plain build can
        // stop at "nothing changed".
        let outputs = &self.settings.outputs;
        let key = fresh::key(project, plans);
        if outputs.wheel_dir.is_none()
            && outputs.artifact_dir.is_none()
            && fresh::is_fresh(&first.work_dir, &key)
        {
            return Ok(self.fresh_report(plans, started));
        }
        fresh::forget(&first.work_dir).map_err(|source| BuildError::Record {
            path: first.work_dir.join("fresh.json"),
            source,
        })?;
        let mut fetched: Vec<&depends::Fetch> = Vec::new();
        for fetch in plans.iter().flat_map(|p| &p.fetches) {
            if fetched.iter().all(|f| f.into != fetch.into) {
                let into = fetch.into.display();
                reporter.stage("Fetching", &format!("{} into {into}", fetch.source));
                depends::fetch(fetch)?;
                fetched.push(fetch);
            }
        }
        let mut jobs = Vec::new();
        for variant in plans.iter().flat_map(|p| &p.variants) {
            package::write_headers(variant)?;
            jobs.extend(variant.compile.iter().cloned());
        }
        let budget = self.settings.budget;
        let nvcc_steps = self.nvcc_steps(&jobs);
        let jobserver = self.jobserver(&mut jobs, nvcc_steps);
        let mut costs = costs::Costs::load(&first.work_dir);
        let order = match budget.order {
            Order::LongestFirst => costs.longest_first(&jobs),
            Order::Fifo => Vec::new(),
        };
        let schedule = ScheduleReport {
            jobs: budget.jobs,
            jobserver: jobs.iter().any(|j| j.nvcc_jobserver),
            order: budget.order,
            nvcc_steps,
        };
        if !jobs.is_empty() {
            let what = format!("{} v{}", project.general.name, project.general.version);
            let detail = format!("{what} ({} units, -j{})", jobs.len(), budget.jobs);
            reporter.stage("Compiling", &detail);
            reporter.verbose(&format!(
                "{}; jobs start {}",
                if schedule.nvcc_steps {
                    "nvcc's steps run as jobs of their own (host compile beside the device \
                     passes)"
                } else if schedule.jobserver {
                    "nvcc's device passes share the build's jobserver"
                } else {
                    "nvcc's device passes get a fixed `--threads` share"
                },
                match budget.order {
                    Order::LongestFirst => "longest first (the last build's times)",
                    Order::Fifo => "in plan order",
                }
            ));
        }
        let cache_dir = first.work_dir.join("cache");
        let compiled = compile::compile_all(
            &jobs,
            &CompileSettings {
                jobs: budget.jobs,
                cache_dir: cache_dir.clone(),
                launcher: self.settings.compiler_launcher.clone(),
                jobserver,
                order,
                nvcc_steps,
            },
            reporter,
        )?;
        if let Err(e) = costs.record(&jobs, &compiled.compile_times) {
            reporter.warn(&format!(
                "cannot record the compile times in `{}` (the next build starts its jobs in \
                 plan order): {e}",
                first.work_dir.display()
            ));
        }

        let mut variants = Vec::new();
        for plan in plans {
            for variant in &plan.variants {
                check_interrupted()?;
                if let Some(job) = &variant.link {
                    link::link(job, &format!("{}.abi3.so", variant.id), reporter)?;
                }
                check_interrupted()?;
                let metadata = package::metadata_for(project, variant, fresh::kernel_git(plan));
                let install = package::install_variant(variant, &plan.out_dir, metadata)?;
                let written = install.outcome == Installed::Written;
                let mut report = self.variant_report(variant, &plan.out_dir, written);
                if let Some(dir) = &self.settings.outputs.wheel_dir {
                    let wheel = package::write_wheel(&install.variant, dir)?;
                    reporter.stage("Wheel", &wheel.path.display().to_string());
                    report.wheel = Some(wheel.path);
                }
                if let Some(dir) = &self.settings.outputs.artifact_dir {
                    let path = package::write_artifact(&install.variant, dir)?;
                    reporter.stage("Artifact", &path.display().to_string());
                    report.artifact = Some(path);
                }
                variants.push(report);
            }
        }
        let places = fresh::Places {
            work_dir: &first.work_dir,
            cache_dir: &cache_dir,
        };
        let build_began = SystemTime::now()
            .checked_sub(started.elapsed())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        match fresh::record(&places, &key, project, plans, build_began) {
            Ok(true) => {}
            Ok(false) => reporter.verbose(
                "a source changed during the build: the next build checks everything again",
            ),
            Err(e) => reporter.warn(&format!(
                "cannot record the build in `{}` (the next build checks everything again): {e}",
                first.work_dir.display()
            )),
        }
        Ok(BuildReport {
            variants,
            skipped: skipped_once(plans),
            compiled: compiled.compiled,
            cached: compiled.cached,
            schedule: (!jobs.is_empty()).then_some(schedule),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Whether CUDA units run nvcc's pipeline as separate steps: asked for, no compiler
    /// launcher (sccache splits nvcc its own way), and a CUDA unit to compile.
    fn nvcc_steps(&self, jobs: &[CompileJob]) -> bool {
        self.settings.budget.nvcc_steps
            && self.settings.compiler_launcher.is_none()
            && jobs
                .iter()
                .any(|j| j.lang == Lang::Cuda && !j.nvcc_jobserver)
    }

    /// The jobserver the build's job slots come from, when nvcc's device passes share it
    /// (`--jobserver`) or kbuild runs nvcc's steps itself; if none can be made the units run
    /// without it (each nvcc up to its `--threads`).
    fn jobserver(&self, jobs: &mut [CompileJob], nvcc_steps: bool) -> Option<Arc<Jobserver>> {
        if !nvcc_steps && !jobs.iter().any(|j| j.nvcc_jobserver) {
            return None;
        }
        match Jobserver::new(self.settings.budget.jobs) {
            Ok(js) => Some(Arc::new(js)),
            Err(e) => {
                self.reporter.warn(&format!(
                    "cannot make a jobserver for nvcc ({e}): each nvcc runs its device passes \
                     on its own"
                ));
                for job in jobs.iter_mut() {
                    job.nvcc_jobserver = false;
                }
                None
            }
        }
    }

    /// A variant's line (`Packaged` when written, `Fresh` when already in place) and report.
    fn variant_report(
        &self,
        variant: &VariantPlan,
        out_dir: &Path,
        written: bool,
    ) -> VariantReport {
        let path = out_dir.join(&variant.name);
        let stage = if written { "Packaged" } else { "Fresh" };
        self.reporter.stage(stage, &path.display().to_string());
        VariantReport {
            name: variant.name.clone(),
            path,
            id: variant.id.clone(),
            backend: variant.backend,
            capabilities: variant
                .capabilities
                .iter()
                .map(ToString::to_string)
                .collect(),
            written,
            wheel: None,
            artifact: None,
        }
    }

    /// The report of a build that found everything as the last one left it.
    fn fresh_report(&self, plans: &[BuildPlan], started: Instant) -> BuildReport {
        let mut variants = Vec::new();
        let mut cached = Vec::new();
        for plan in plans {
            for variant in &plan.variants {
                cached.extend(variant.compile.iter().map(|j| j.label.clone()));
                variants.push(self.variant_report(variant, &plan.out_dir, false));
            }
        }
        self.reporter
            .verbose("nothing changed since the last build: no tool runs");
        BuildReport {
            variants,
            skipped: skipped_once(plans),
            compiled: Vec::new(),
            cached,
            schedule: None,
            seconds: started.elapsed().as_secs_f64(),
        }
    }
}

/// The backends the plans skip; every toolchain skips the same backends for the same reason,
/// so each is reported once.
fn skipped_once(plans: &[BuildPlan]) -> Vec<Skipped> {
    let mut all: Vec<Skipped> = Vec::new();
    for s in plans.iter().flat_map(|p| &p.skipped) {
        if !all
            .iter()
            .any(|a| a.backend == s.backend && a.reason == s.reason)
        {
            all.push(s.clone());
        }
    }
    all
}

/// Refuse two plans writing the same variant, then keep only `wanted` (all when empty); a name
/// no plan makes is an error listing the valid ones.
fn select_variants(plans: &mut [BuildPlan], wanted: &[String]) -> Result<(), BuildError> {
    let mut names: Vec<&str> = Vec::new();
    for variant in plans.iter().flat_map(|p| &p.variants) {
        if names.contains(&variant.name.as_str()) {
            return Err(BuildError::DuplicateVariant {
                name: variant.name.clone(),
            });
        }
        names.push(&variant.name);
    }
    if let Some(unknown) = wanted.iter().find(|w| !names.contains(&w.as_str())) {
        names.sort_unstable();
        return Err(BuildError::UnknownVariant {
            name: unknown.clone(),
            valid: names.join(", "),
        });
    }
    if !wanted.is_empty() {
        for plan in plans.iter_mut() {
            plan.variants.retain(|v| wanted.contains(&v.name));
        }
    }
    Ok(())
}
