//! `kbuild build`: config → toolchain → plan → compile → link → package.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::cli::{BuildArgs, ToolchainArgs};
use crate::compile::{self, CompileSettings, command_for};
use crate::config::{Backend, Framework, Project};
use crate::error::Error;
use crate::link::{link, link_command};
use crate::package::{self, BuildLock, GitStatus, Installed};
use crate::plan::{self, BuildPlan, PlanSettings, Tools};
use crate::report::{Printer, Reporter};
use crate::toolchain::{find_cxx, find_nvcc, find_python};
use crate::{Result, config};

/// `kbuild build` after argument resolution.
#[derive(Debug, Clone)]
pub struct BuildSettings {
    pub project_dir: PathBuf,
    pub toolchain: ToolchainArgs,
    pub backends: Vec<String>,
    pub jobs: usize,
    pub out_dir: Option<PathBuf>,
    pub unique_id: Option<String>,
    pub dry_run: bool,
    pub json: bool,
}

impl BuildSettings {
    /// CLI > environment > defaults.
    pub fn resolve(project_dir: &Path, args: BuildArgs) -> Self {
        BuildSettings {
            project_dir: project_dir.to_path_buf(),
            toolchain: args.toolchain,
            backends: args.backends,
            jobs: args.jobs.unwrap_or_else(compile::default_jobs).max(1),
            out_dir: args.out_dir,
            unique_id: args.unique_id,
            dry_run: args.dry_run,
            json: args.json,
        }
    }
}

/// What discovery found, for `list-variants` and `--json` (all `None` for noarch projects).
#[derive(Debug, Default, Serialize)]
pub struct ToolchainFacts {
    pub python: Option<PathBuf>,
    pub torch: Option<String>,
    pub cuda: Option<String>,
    pub nvcc: Option<String>,
}

/// Discover the tools the chosen backends need and make the plan.
pub fn plan_build(
    project: &Project,
    toolchain: &ToolchainArgs,
    backends: &[String],
    out_dir: PathBuf,
    unique_id: Option<String>,
    jobs: usize,
    reporter: &dyn Reporter,
) -> Result<(BuildPlan, ToolchainFacts)> {
    let mut facts = ToolchainFacts::default();
    // Noarch (pure-Python) projects need no toolchain at all.
    let compiled = matches!(project.framework, Framework::Torch(_));
    let torch = if compiled {
        let python = find_python(toolchain.python.as_deref(), &project.root)?;
        let torch = python.torch_info()?;
        facts.python = Some(python.path.clone());
        facts.torch = Some(torch.version.clone());
        facts.cuda = torch.cuda.clone();
        reporter.verbose(&format!(
            "python {} ({}), torch {} (cuda {})",
            python.path.display(),
            python.origin,
            torch.version,
            torch.cuda.as_deref().unwrap_or("none")
        ));
        Some(torch)
    } else {
        None
    };
    let (chosen, skipped) = plan::select_backends(project, torch.as_ref(), backends)?;
    for s in &skipped {
        reporter.warn(&format!("skipping backend `{}`: {}", s.backend, s.reason));
    }
    let cxx = if compiled {
        let cxx = find_cxx()?;
        for w in &cxx.warnings {
            reporter.warn(w);
        }
        Some(cxx)
    } else {
        None
    };
    let nvcc = match &torch {
        Some(torch) if chosen.contains(&Backend::Cuda) => {
            let nvcc = find_nvcc(toolchain.nvcc.as_deref(), torch)?;
            for w in &nvcc.warnings {
                reporter.warn(w);
            }
            reporter.verbose(&format!("nvcc {} ({})", nvcc.path.display(), nvcc.origin));
            facts.nvcc = Some(nvcc.id.clone());
            Some(nvcc)
        }
        _ => None,
    };
    let tools = Tools { torch, cxx, nvcc };
    let settings = PlanSettings {
        out_dir,
        backends: backends.to_vec(),
        unique_id,
        jobs,
    };
    let plan = plan::make_plan(project, &tools, &settings, &chosen, skipped)?;
    Ok((plan, facts))
}

/// One variant in the `--json` summary.
#[derive(Debug, Serialize)]
struct VariantSummary {
    name: String,
    path: PathBuf,
    id: String,
    backend: Backend,
    capabilities: Vec<String>,
    written: bool,
}

#[derive(Debug, Serialize)]
struct BuildSummary {
    variants: Vec<VariantSummary>,
    skipped: Vec<plan::Skipped>,
    compiled: Vec<String>,
    cached: Vec<String>,
    seconds: f64,
}

/// Run `kbuild build`.
pub fn run(settings: BuildSettings, printer: &Printer) -> Result<()> {
    let started = Instant::now();
    // Config errors must surface before anything touches the output directory.
    let project = config::load(&settings.project_dir)?;
    for warning in &project.warnings {
        printer.warn(&warning.to_string());
    }
    let out_dir = settings
        .out_dir
        .clone()
        .map(|d| std::path::absolute(&d).unwrap_or(d))
        .unwrap_or_else(|| project.root.join("build"));
    let (plan, _) = plan_build(
        &project,
        &settings.toolchain,
        &settings.backends,
        out_dir,
        settings.unique_id.clone(),
        settings.jobs,
        printer,
    )?;

    if settings.dry_run {
        print_plan(&plan, settings.json);
        return Ok(());
    }

    let _lock = BuildLock::acquire(&plan.out_dir, printer)?;
    let mut jobs = Vec::new();
    for variant in &plan.variants {
        package::write_headers(variant)?;
        jobs.extend(variant.compile.iter().cloned());
    }
    if !jobs.is_empty() {
        printer.stage(
            "Compiling",
            &format!(
                "{} v{} ({} units, -j{})",
                project.general.name,
                project.general.version,
                jobs.len(),
                settings.jobs
            ),
        );
    }
    let summary = compile::compile_all(
        &jobs,
        &CompileSettings {
            jobs: settings.jobs,
            cache_dir: plan.work_dir.join("cache"),
        },
        printer,
    )?;

    let kernel_git = plan::source_identity(&project)
        .ok()
        .and_then(|(_, dirty, commit)| commit.map(|commit| GitStatus { commit, dirty }));
    let mut variants = Vec::new();
    for variant in &plan.variants {
        if let Some(job) = &variant.link {
            link(job, &format!("{}.abi3.so", variant.id), printer)?;
        }
        let metadata = package::metadata_for(&project, variant, kernel_git.clone());
        let installed = package::install_variant(variant, &plan.out_dir, metadata)?.outcome;
        let path = plan.out_dir.join(&variant.name);
        printer.stage(
            if installed == Installed::Written {
                "Packaged"
            } else {
                "Fresh"
            },
            &path.display().to_string(),
        );
        variants.push(VariantSummary {
            name: variant.name.clone(),
            path,
            id: variant.id.clone(),
            backend: variant.backend,
            capabilities: variant
                .capabilities
                .iter()
                .map(ToString::to_string)
                .collect(),
            written: installed == Installed::Written,
        });
    }
    printer.finish();
    let seconds = started.elapsed().as_secs_f64();
    printer.stage(
        "Finished",
        &format!(
            "{} variant(s) in {seconds:.1}s ({} compiled, {} fresh)",
            variants.len(),
            summary.compiled.len(),
            summary.cached.len()
        ),
    );
    if settings.json {
        let out = BuildSummary {
            variants,
            skipped: plan.skipped.clone(),
            compiled: summary.compiled,
            cached: summary.cached,
            seconds,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| Error::other(e.to_string(), None))?
        );
    }
    Ok(())
}

fn print_plan(plan: &BuildPlan, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(plan).expect("plans always serialize")
        );
        return;
    }
    println!("output: {}", plan.out_dir.display());
    for s in &plan.skipped {
        println!("skipped backend {}: {}", s.backend, s.reason);
    }
    for variant in &plan.variants {
        println!("\nvariant {} (id {})", variant.name, variant.id);
        for (cap, dtypes) in &variant.dtypes {
            let names: Vec<&str> = dtypes.iter().map(|d| d.as_str()).collect();
            println!("  capability {cap}: {}", names.join(", "));
        }
        for job in &variant.compile {
            println!("  compile {}\n    {}", job.label, command_for(job));
        }
        if let Some(job) = &variant.link {
            println!("  link\n    {}", link_command(job, &job.output));
        }
    }
}

/// What `list-variants --json` prints.
#[derive(Debug, Serialize)]
pub struct VariantListing {
    #[serde(flatten)]
    pub toolchain: ToolchainFacts,
    pub variants: Vec<ListedVariant>,
    pub skipped: Vec<plan::Skipped>,
}

/// One variant `list-variants` reports.
#[derive(Debug, Serialize)]
pub struct ListedVariant {
    pub name: String,
    pub backend: Backend,
    pub capabilities: Vec<String>,
}

/// `kbuild list-variants`: what this toolchain would produce for the project.
pub fn list_variants(
    project_dir: &Path,
    toolchain: &ToolchainArgs,
    json: bool,
    printer: &Printer,
) -> Result<()> {
    let project = config::load(project_dir)?;
    let (plan, facts) = plan_build(
        &project,
        toolchain,
        &[],
        project.root.join("build"),
        Some("listing".into()),
        1,
        printer,
    )?;
    let listing = VariantListing {
        toolchain: facts,
        variants: plan
            .variants
            .iter()
            .map(|v| ListedVariant {
                name: v.name.clone(),
                backend: v.backend,
                capabilities: v.capabilities.iter().map(ToString::to_string).collect(),
            })
            .collect(),
        skipped: plan.skipped,
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&listing)
                .map_err(|e| Error::other(e.to_string(), None))?
        );
        return Ok(());
    }
    for v in &listing.variants {
        if v.capabilities.is_empty() {
            println!("{}", v.name);
        } else {
            println!("{}  (capabilities {})", v.name, v.capabilities.join(", "));
        }
    }
    for s in &listing.skipped {
        println!("skipped: {} ({})", s.backend, s.reason);
    }
    Ok(())
}
