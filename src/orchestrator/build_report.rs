//! What a build did, as `kbuild build --json` prints it, and the lines it reports per variant.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::compile::command_for;
use crate::config::Backend;
use crate::link::link_command;
use crate::plan::{BuildPlan, CompileJob, Skipped, VariantPlan};
use crate::report::Reporter;
use crate::schedule::memory::{MemoryBudget, format_size};
use crate::schedule::peaks::UNKNOWN_PEAK;
use crate::schedule::{NvccMode, Order, RunChoice};

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
    /// nvcc's device passes of the compiled units that the device step cache held, as
    /// `<unit>: <step>`: they did not run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reused_steps: Vec<String>,
    /// The units whose object got the new op namespace written over the old one
    /// (`compile/namespace.rs`) instead of a compile under it: cached ones, and compiled ones
    /// whose one compile was the probe that found where the old one lies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reapplied: Vec<String>,
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
    /// The order the jobs started in.
    pub order: Order,
    /// How CUDA units ran nvcc (`steps`, `threads` or `jobserver`); absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvcc: Option<NvccMode>,
    /// The memory the compilers could hold at once, and where that number came from; absent
    /// when it could not be found out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryBudget>,
    /// The units given nvcc's `--split-compile`, in job order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<SplitReport>,
}

/// A unit given nvcc's `--split-compile`, and why.
#[derive(Debug, Clone, Serialize)]
pub struct SplitReport {
    pub label: String,
    pub threads: u32,
    pub why: String,
}

/// The split units among `jobs` (run as `runs` say).
pub fn splits(jobs: &[CompileJob], runs: &[RunChoice]) -> Vec<SplitReport> {
    jobs.iter()
        .zip(runs)
        .filter_map(|(j, run)| {
            run.split.as_ref().map(|s| SplitReport {
                label: j.label.clone(),
                threads: s.threads,
                why: s.why.clone(),
            })
        })
        .collect()
}

/// How `-v` and `--dry-run` state the memory budget.
pub fn memory_line(budget: Option<MemoryBudget>) -> String {
    match budget {
        Some(b) => format!(
            "memory budget {budget}: a compiler process starts once the peak it reached last \
             build fits beside the running ones (never measured: nvcc's steps guess from the \
             size of what they read, C++ units from their preprocessed size where {unknown} \
             each would hold others back, other compilers {unknown})",
            budget = b.describe(),
            unknown = format_size(UNKNOWN_PEAK)
        ),
        None => "memory budget unknown (no cgroup limit or `MemAvailable` could be read, \
                 no `--memory`): only `-j` limits the compilers"
            .to_string(),
    }
}

impl BuildReport {
    /// The report of a build with nothing to build.
    pub fn empty(started: Instant) -> Self {
        BuildReport {
            variants: Vec::new(),
            skipped: Vec::new(),
            compiled: Vec::new(),
            cached: Vec::new(),
            reused_steps: Vec::new(),
            reapplied: Vec::new(),
            schedule: None,
            seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// The report of a build that found everything as the last one left it.
    pub fn fresh(plans: &[BuildPlan], started: Instant, reporter: &dyn Reporter) -> Self {
        let mut variants = Vec::new();
        let mut cached = Vec::new();
        for plan in plans {
            for variant in &plan.variants {
                cached.extend(variant.compile.iter().map(|j| j.label.clone()));
                variants.push(variant_report(variant, &plan.out_dir, false, reporter));
            }
        }
        reporter.verbose("nothing changed since the last build: no tool runs");
        BuildReport {
            variants,
            skipped: skipped_once(plans),
            compiled: Vec::new(),
            cached,
            reused_steps: Vec::new(),
            reapplied: Vec::new(),
            schedule: None,
            seconds: started.elapsed().as_secs_f64(),
        }
    }
}

/// A variant's line (`Packaged` when written; `Fresh`, shown with `-v` only, when already in
/// place) and report.
pub fn variant_report(
    variant: &VariantPlan,
    out_dir: &Path,
    written: bool,
    reporter: &dyn Reporter,
) -> VariantReport {
    let path = out_dir.join(&variant.name);
    if written {
        reporter.stage("Packaged", &path.display().to_string());
    } else {
        reporter.fresh(&path.display().to_string());
    }
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

/// The backends the plans skip; every toolchain skips the same backends for the same reason,
/// so each is reported once.
pub fn skipped_once(plans: &[BuildPlan]) -> Vec<Skipped> {
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

/// The plan as `kbuild build --dry-run` prints it: the output directory, what is skipped and
/// fetched, and per variant its capabilities' dtypes and every command it would run.
pub fn dry_run_text(plan: &BuildPlan, runs: &[RunChoice]) -> String {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let mut t = String::new();
    let mut runs = runs.iter();
    let _ = writeln!(t, "output: {}", plan.out_dir.display());
    for s in &plan.skipped {
        let _ = writeln!(t, "skipped backend {}: {}", s.backend, s.reason);
    }
    for f in &plan.fetches {
        let _ = writeln!(t, "fetch {} into {}", f.source, f.into.display());
    }
    for variant in &plan.variants {
        let _ = writeln!(t, "\nvariant {} (id {})", variant.name, variant.id);
        for (cap, dtypes) in &variant.dtypes {
            let names: Vec<&str> = dtypes.iter().map(|d| d.as_str()).collect();
            let _ = writeln!(t, "  capability {cap}: {}", names.join(", "));
        }
        for job in &variant.compile {
            let run = runs
                .next()
                .cloned()
                .unwrap_or_else(|| RunChoice::plain(job));
            let _ = writeln!(t, "  compile {}\n    {}", job.label, command_for(job, &run));
            if let Some(split) = &run.split {
                let _ = writeln!(
                    t,
                    "    split --split-compile={}: {}",
                    split.threads, split.why
                );
            }
        }
        if let Some(job) = &variant.link {
            let _ = writeln!(t, "  link\n    {}", link_command(job, &job.output));
        }
    }
    t
}

/// The plan as `kbuild build --dry-run --json` prints it: the plan's data, each compile job
/// with how it runs (`nvcc_threads`, `nvcc_jobserver`, `split`) beside what it compiles.
pub fn dry_run_json(plan: &BuildPlan, runs: &[RunChoice]) -> serde_json::Value {
    let mut value = serde_json::to_value(plan).unwrap_or_default();
    let mut runs = runs.iter();
    let variants = value.get_mut("variants").and_then(|v| v.as_array_mut());
    for variant in variants.into_iter().flatten() {
        let jobs = variant.get_mut("compile").and_then(|c| c.as_array_mut());
        for job in jobs.into_iter().flatten() {
            let (Some(job), Some(run)) = (job.as_object_mut(), runs.next()) else {
                continue;
            };
            if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(run) {
                job.extend(fields);
            }
        }
    }
    value
}
