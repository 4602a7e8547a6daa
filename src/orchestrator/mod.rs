//! The build orchestrator: prepare → fetch dependencies → compile → package → record.
//!
//! [`prepare`] is the one preparation path (load build.toml, choose and discover the
//! toolchains, decide how nvcc runs, plan, select `--variant`s): a dry run, `list-variants`
//! and `develop` select from its [`Prepared`]. [`Builder::execute`] takes the output
//! directory's lock and runs the stages on it; a build for several toolchains (one per torch)
//! compiles every plan's jobs in one run under one budget.

mod build_lock;
mod build_report;
mod error;
mod fresh;
mod path_checks;
mod prepare;
mod settings;

pub use build_lock::BuildLock;
pub use build_report::{
    BuildReport, ScheduleReport, VariantReport, dry_run_json, dry_run_text, memory_line,
    skipped_once,
};
pub use error::BuildError;
pub use prepare::{Prepared, prepare};
pub use settings::{BuildSettings, Outputs};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::compile::{self, CompileSettings, CompileSummary, RemoteSettings};
use crate::config::Project;
use crate::depends;
use crate::jobserver::Jobserver;
use crate::link;
use crate::package::{self, Installed};
use crate::plan::{BuildPlan, CompileJob};
use crate::process::{catch_interrupts, check_interrupted};
use crate::report::Reporter;
use crate::schedule::costs::Costs;
use crate::schedule::memory::{self, MemoryGate, format_size};
use crate::schedule::peaks;
use crate::schedule::{Order, Scheduled};
use build_report::variant_report;

/// Runs builds with one set of settings, reporting progress to `reporter`.
pub struct Builder<'r> {
    settings: BuildSettings,
    reporter: &'r dyn Reporter,
}

impl<'r> Builder<'r> {
    pub fn new(settings: BuildSettings, reporter: &'r dyn Reporter) -> Self {
        Builder { settings, reporter }
    }

    /// The parallelism and memory the build runs under.
    pub fn budget(&self) -> crate::schedule::JobBudget {
        self.settings.budget
    }

    /// The one preparation path: see [`prepare`].
    pub fn prepare(&self) -> Result<Prepared, BuildError> {
        prepare(&self.settings, self.reporter)
    }

    /// Prepare and execute: the whole `kbuild build`.
    pub fn build(&self) -> Result<BuildReport, BuildError> {
        let started = Instant::now();
        let prepared = self.prepare()?;
        if let Err(e) = prepared.facts.save() {
            self.reporter.warn(&format!(
                "cannot save the toolchain facts of `{}` (the next build asks the tools again): {e}",
                prepared.project.root.display()
            ));
        }
        self.execute(&prepared, started)
    }

    /// Run the prepared plans (all writing one output directory) under that directory's lock:
    /// unless nothing changed since the last build, fetch dependencies, compile every job in
    /// one run, then link and package each variant, and record the build. `started` is when
    /// the build began, for the report's time.
    pub fn execute(
        &self,
        prepared: &Prepared,
        started: Instant,
    ) -> Result<BuildReport, BuildError> {
        let (project, plans) = (&prepared.project, prepared.plans.as_slice());
        let Some(first) = plans.first() else {
            return Ok(BuildReport::empty(started));
        };
        // Once for all toolchains; a backend left out with `--backend` was asked for.
        for s in skipped_once(plans) {
            let line = format!("skipping backend `{}`: {}", s.backend, s.reason);
            if s.deselected {
                self.reporter.verbose(&line);
            } else {
                self.reporter.warn(&line);
            }
        }
        let lock = BuildLock::acquire(&first.out_dir, self.reporter)?;
        // From here on a signal cancels the running compilers (the runner kills their process
        // trees and removes their temporary objects) instead of orphaning them.
        let _signals = catch_interrupts();
        lock.sweep(&first.out_dir, &first.work_dir, self.reporter);
        let nvcc = fresh::device_passes(prepared.nvcc);
        let key = fresh::key(project, plans, nvcc);
        // Wheels and artifacts are written from the installed variants: only a plain build can
        // stop at "nothing changed".
        let fresh = self.settings.outputs.is_empty() && fresh::is_fresh(&first.work_dir, &key);
        // Said once, when they shape a build: a no-op repeats them only with `-v`.
        for note in prepared.notes() {
            match fresh {
                true => self.reporter.verbose(&format!("note: {note}")),
                false => self.reporter.info(&format!("note: {note}")),
            }
        }
        if fresh {
            return Ok(BuildReport::fresh(plans, started, self.reporter));
        }
        fresh::forget(&first.work_dir).map_err(|source| BuildError::Record {
            path: first.work_dir.join("fresh.json"),
            source,
        })?;
        self.fetch_depends(plans)?;
        let (compiled, schedule) = self.compile(prepared, first)?;
        let variants = self.package(project, plans, nvcc)?;
        self.record(project, plans, &key, started);
        Ok(BuildReport {
            variants,
            skipped: skipped_once(plans),
            compiled: compiled.compiled,
            cached: compiled.cached,
            reused_steps: compiled.reused_steps,
            reapplied: compiled.reapplied,
            schedule,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Fetch the dependency header trees the plans need (each once).
    fn fetch_depends(&self, plans: &[BuildPlan]) -> Result<(), BuildError> {
        let mut fetched: Vec<&depends::Fetch> = Vec::new();
        for fetch in plans.iter().flat_map(|p| &p.fetches) {
            if fetched.iter().all(|f| f.into != fetch.into) {
                let into = fetch.into.display();
                self.reporter
                    .stage("Fetching", &format!("{} into {into}", fetch.source));
                depends::fetch(fetch)?;
                fetched.push(fetch);
            }
        }
        Ok(())
    }

    /// Write each variant's generated headers, then compile every job of every plan in one run,
    /// longest first by the last build's times, and record this build's times.
    fn compile(
        &self,
        prepared: &Prepared,
        first: &BuildPlan,
    ) -> Result<(CompileSummary, Option<ScheduleReport>), BuildError> {
        let mut jobs: Vec<CompileJob> = Vec::new();
        for variant in prepared.plans.iter().flat_map(|p| &p.variants) {
            package::write_headers(variant)?;
            jobs.extend(variant.compile.iter().cloned());
        }
        let budget = self.settings.budget;
        let cache_dir = self.settings.toolchain.deps.cache_dir.as_deref();
        let mut costs = Costs::load(&first.work_dir, cache_dir);
        let cuda = jobs.iter().any(|j| j.lang == crate::plan::Lang::Cuda);
        let schedule = ScheduleReport {
            jobs: budget.jobs,
            order: budget.order,
            nvcc: cuda.then_some(prepared.nvcc),
            memory: budget.memory,
            split: build_report::splits(&jobs, &prepared.schedule.runs),
        };
        let memory = budget
            .memory
            .map(|b| Arc::new(MemoryGate::for_build(b, &first.work_dir, cache_dir, &jobs)));
        if !jobs.is_empty() {
            let costs_from = &prepared.schedule.costs_from;
            self.report_compiling(&prepared.project, &jobs, &schedule, costs_from);
        }
        let settings = CompileSettings {
            jobs: budget.jobs,
            cache_dir: first.work_dir.join("cache"),
            kbuild_cache: self.settings.toolchain.deps.cache_dir.clone(),
            nvcc_env: compile::nvcc_env_flags(),
            launcher: self.settings.compiler_launcher.clone(),
            jobserver: self.jobserver(&prepared.schedule),
            order: prepared.schedule.order.clone(),
            runs: prepared.schedule.runs.clone(),
            nvcc: prepared.nvcc,
            memory: memory.clone(),
            remote: self.remote_settings(prepared, first),
            dist: self.settings.dist.clone(),
        };
        let compiled = compile::compile_all(&jobs, &settings, self.reporter);
        if let Some(gate) = &memory {
            self.learned_memory(gate, &first.work_dir);
        }
        let compiled = compiled?;
        if let Err(e) = costs.record(&jobs, &compiled.compile_times) {
            self.reporter.warn(&format!(
                "cannot record the compile times in `{}` (the next build starts its jobs in \
                 plan order): {e}",
                first.work_dir.display()
            ));
        }
        if let Some(remote) = &settings.remote {
            self.share_costs(remote, &jobs, &compiled.compile_times);
        }
        Ok((compiled, (!jobs.is_empty()).then_some(schedule)))
    }

    /// Say which processes ran alone because they need more than the whole memory budget,
    /// and record the peaks the compilers reached (also after a failed compile: what ran to
    /// its end was measured).
    fn learned_memory(&self, gate: &MemoryGate, work_dir: &std::path::Path) {
        let budget = gate.budget();
        for (key, need) in gate.ran_alone() {
            self.reporter.warn(&format!(
                "`{key}` needs about {}, more than the memory budget of {}: it ran alone",
                format_size(need),
                budget.describe()
            ));
        }
        if let Err(e) = gate.save() {
            self.reporter.warn(&format!(
                "cannot record the compilers' peak memory in `{}` (the next build guesses \
                 again: nvcc's steps from what they read, other compilers {}): {e}",
                memory::record_path(work_dir).display(),
                format_size(peaks::UNKNOWN_PEAK)
            ));
        }
    }

    /// Share the times the units compiled here took through the remote cache, for the first
    /// builds of other machines (`compile::share_costs`). A remote that fails only loses them.
    fn share_costs(
        &self,
        remote: &RemoteSettings,
        jobs: &[CompileJob],
        times: &[Option<std::time::Duration>],
    ) {
        let seconds = crate::schedule::costs::shared_times(jobs, times);
        if seconds.is_empty() {
            return;
        }
        match compile::share_costs(remote, &seconds) {
            Ok(()) => self.reporter.verbose(&format!(
                "remote cache: shared the compile times of {} units",
                seconds.len()
            )),
            Err(e) => self.reporter.verbose(&format!(
                "remote cache `{}`: compile times not shared ({e})",
                crate::redact::url(&remote.url)
            )),
        }
    }

    /// The `Compiling` line, and with `-v` how the jobs run.
    fn report_compiling(
        &self,
        project: &Project,
        jobs: &[CompileJob],
        schedule: &ScheduleReport,
        costs_from: &str,
    ) {
        let what = format!("{} v{}", project.general.name, project.general.version);
        let detail = format!("{what} ({} units, -j{})", jobs.len(), schedule.jobs);
        self.reporter.stage("Compiling", &detail);
        let order = match schedule.order {
            Order::LongestFirst => {
                "longest first (times of earlier builds, else predicted from the sources)"
            }
            Order::Fifo => "in plan order",
        };
        let nvcc = schedule.nvcc.map(|m| format!("{}; ", m.describe()));
        self.reporter
            .verbose(&format!("{}jobs start {order}", nvcc.unwrap_or_default()));
        if !costs_from.is_empty() {
            self.reporter.verbose(&format!("costs: {costs_from}"));
        }
        self.reporter.verbose(&memory_line(schedule.memory));
        for split in &schedule.split {
            self.reporter.verbose(&format!(
                "split `{}` (--split-compile={}): {}",
                split.label, split.threads, split.why
            ));
        }
    }

    /// Where the remote object cache is, with the directories that differ between checkouts
    /// and machines named, so its entries hold no path of this one.
    fn remote_settings(&self, prepared: &Prepared, first: &BuildPlan) -> Option<RemoteSettings> {
        let remote = prepare::remote_for_costs(&self.settings)?;
        let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or(p.to_path_buf());
        let mut roots = vec![
            ("project".to_string(), absolute(&prepared.project.root)),
            ("work".to_string(), absolute(&first.work_dir)),
        ];
        if let Some(dir) = &self.settings.toolchain.deps.cache_dir {
            roots.push(("cache".to_string(), absolute(dir)));
        }
        Some(RemoteSettings { roots, ..remote })
    }

    /// The jobserver the build's job slots come from, when kbuild runs nvcc's steps or nvcc's
    /// device passes share it and a CUDA unit is to be compiled. If none can be made, each
    /// unit runs its device passes in its own slot (each nvcc up to its `--threads`).
    fn jobserver(&self, schedule: &Scheduled) -> Option<Arc<Jobserver>> {
        if !schedule.shares_slots() {
            return None;
        }
        match Jobserver::new(self.settings.budget.jobs) {
            Ok(js) => Some(Arc::new(js)),
            Err(e) => {
                self.reporter.warn(&format!(
                    "cannot make a jobserver for nvcc ({e}): each nvcc runs its device passes \
                     on its own"
                ));
                None
            }
        }
    }

    /// Link each variant's extension, install the variant (staged, renamed into place), and
    /// write the wheels and artifacts asked for.
    fn package(
        &self,
        project: &Project,
        plans: &[BuildPlan],
        nvcc: &str,
    ) -> Result<Vec<VariantReport>, BuildError> {
        let outputs = &self.settings.outputs;
        // What a killed `kbuild wheel` or `--artifact` build left in the dist directory.
        for dir in [&outputs.wheel_dir, &outputs.artifact_dir]
            .into_iter()
            .flatten()
        {
            for swept in package::sweep_stale_temps(dir) {
                self.reporter
                    .verbose(&format!("{swept:?}: left by a killed build"));
            }
        }
        let mut variants = Vec::new();
        for plan in plans {
            for variant in &plan.variants {
                check_interrupted()?;
                if let Some(job) = &variant.link {
                    let mut label = format!("{}.abi3.so", variant.id);
                    if plans.len() > 1 {
                        label = format!("{label} [{}]", prepare::variant_tag(&variant.name));
                    }
                    link::link(job, &label, self.reporter)?;
                }
                check_interrupted()?;
                let metadata =
                    package::metadata_for(project, variant, fresh::kernel_git(plan), nvcc);
                let install = package::install_variant(variant, &plan.out_dir, metadata)?;
                package::record_partial(&plan.out_dir, variant)?;
                let written = install.outcome == Installed::Written;
                let mut report = variant_report(variant, &plan.out_dir, written, self.reporter);
                if let Some(dir) = &outputs.wheel_dir {
                    let wheel = package::write_wheel(&install.variant, dir)?;
                    self.reporter
                        .stage("Wheel", &wheel.path.display().to_string());
                    report.wheel = Some(wheel.path);
                }
                if let Some(dir) = &outputs.artifact_dir {
                    let path = package::write_artifact(&install.variant, dir)?;
                    self.reporter.stage("Artifact", &path.display().to_string());
                    report.artifact = Some(path);
                }
                variants.push(report);
            }
        }
        Ok(variants)
    }

    /// Record what this build read and wrote, for the next build's no-op check; a failure only
    /// costs that check.
    fn record(&self, project: &Project, plans: &[BuildPlan], key: &str, started: Instant) {
        let Some(first) = plans.first() else { return };
        let cache_dir: PathBuf = first.work_dir.join("cache");
        let places = fresh::Places {
            work_dir: &first.work_dir,
            cache_dir: &cache_dir,
            kbuild_cache: self.settings.toolchain.deps.cache_dir.as_deref(),
        };
        let build_began = SystemTime::now()
            .checked_sub(started.elapsed())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        match fresh::record(&places, key, project, plans, build_began) {
            Ok(true) => {}
            Ok(false) => self.reporter.verbose(
                "a source changed during the build: the next build checks everything again",
            ),
            Err(e) => self.reporter.warn(&format!(
                "cannot record the build in `{}` (the next build checks everything again): {e}",
                first.work_dir.display()
            )),
        }
    }
}
