//! The build orchestrator: config → toolchain → plan → compile → link → package.
//!
//! [`Builder::prepare`] loads the project, discovers the toolchain and makes the plan (all a
//! dry run needs); [`Builder::execute`] takes the output directory's lock and runs plans. A
//! build for several toolchains (one per torch) makes one plan per toolchain and executes them
//! together: their compile jobs share one runner and one budget.

mod discover;
mod fresh;
mod lock;

pub use discover::discover_toolchain;
pub use lock::BuildLock;

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use serde::Serialize;

use crate::compile::{self, CompileError, CompileSettings};
use crate::config::{self, Backend, ConfigError, Project};
use crate::hint::Hint;
use crate::jobs::JobBudget;
use crate::link::{self, LinkError};
use crate::package::{self, Installed, PackageError};
use crate::plan::{self, BuildPlan, PlanError, PlanSettings, Skipped, VariantPlan};
use crate::report::Reporter;
use crate::toolchain::{FactCache, Toolchain, ToolchainError, ToolchainSettings};

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
}

/// A build that failed, at the stage that failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Config(Box<ConfigError>),
    #[error(transparent)]
    Toolchain(Box<ToolchainError>),
    #[error(transparent)]
    Plan(Box<PlanError>),
    #[error(transparent)]
    Compile(Box<CompileError>),
    #[error(transparent)]
    Link(Box<LinkError>),
    #[error(transparent)]
    Package(Box<PackageError>),
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
            BuildError::Plan(e) => e.hint(),
            BuildError::Compile(e) => e.hint(),
            BuildError::Link(e) => e.hint(),
            BuildError::Package(e) => e.hint(),
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
    Plan => PlanError,
    Compile => CompileError,
    Link => LinkError,
    Package => PackageError,
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
}

/// What a build did (`kbuild build --json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    pub variants: Vec<VariantReport>,
    pub skipped: Vec<Skipped>,
    /// Labels of the units a compiler ran for, and of those that came from the cache.
    pub compiled: Vec<String>,
    pub cached: Vec<String>,
    pub seconds: f64,
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

    /// Prepare and execute: the whole `kbuild build`.
    pub fn build(&self) -> Result<BuildReport, BuildError> {
        let started = Instant::now();
        let (prepared, facts) = self.prepare_with_facts()?;
        if let Err(e) = facts.save() {
            self.reporter.warn(&format!(
                "cannot save the toolchain facts under `{}` (the next build asks the tools again): {e}",
                prepared.plan.work_dir.display()
            ));
        }
        self.execute(
            &prepared.project,
            std::slice::from_ref(&prepared.plan),
            started,
        )
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
                seconds: started.elapsed().as_secs_f64(),
            });
        };
        let _lock = BuildLock::acquire(&first.out_dir, reporter)?;
        let key = fresh::key(project, plans);
        if fresh::is_fresh(&first.work_dir, &key) {
            return Ok(self.fresh_report(plans, started));
        }
        fresh::forget(&first.work_dir).map_err(|source| BuildError::Record {
            path: first.work_dir.join("fresh.json"),
            source,
        })?;
        let mut jobs = Vec::new();
        for variant in plans.iter().flat_map(|p| &p.variants) {
            package::write_headers(variant)?;
            jobs.extend(variant.compile.iter().cloned());
        }
        let budget = self.settings.budget;
        if !jobs.is_empty() {
            let what = format!("{} v{}", project.general.name, project.general.version);
            let detail = format!("{what} ({} units, -j{})", jobs.len(), budget.jobs);
            reporter.stage("Compiling", &detail);
        }
        let cache_dir = first.work_dir.join("cache");
        let compiled = compile::compile_all(
            &jobs,
            &CompileSettings {
                jobs: budget.jobs,
                cache_dir: cache_dir.clone(),
            },
            reporter,
        )?;

        let mut variants = Vec::new();
        for plan in plans {
            for variant in &plan.variants {
                if let Some(job) = &variant.link {
                    link::link(job, &format!("{}.abi3.so", variant.id), reporter)?;
                }
                let metadata = package::metadata_for(project, variant, fresh::kernel_git(plan));
                let installed = package::install_variant(variant, &plan.out_dir, metadata)?.outcome;
                let written = installed == Installed::Written;
                variants.push(self.variant_report(variant, &plan.out_dir, written));
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
            skipped: plans.iter().flat_map(|p| p.skipped.clone()).collect(),
            compiled: compiled.compiled,
            cached: compiled.cached,
            seconds: started.elapsed().as_secs_f64(),
        })
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
            skipped: plans.iter().flat_map(|p| p.skipped.clone()).collect(),
            compiled: Vec::new(),
            cached,
            seconds: started.elapsed().as_secs_f64(),
        }
    }
}
