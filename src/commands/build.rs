//! `kbuild build`: resolve settings, run the builder (or print its plan), print the result.

use std::path::Path;
use std::time::Instant;

use super::{print, print_json};
use crate::orchestrator::{BuildSettings, Builder, Outputs};
use crate::cli::{BuildArgs, ToolchainArgs};
use crate::compile::command_for;
use crate::depends::DepsSettings;
use crate::error::Result;
use crate::schedule::JobBudget;
use crate::link::link_command;
use crate::plan::BuildPlan;
use crate::report::{Printer, Reporter};
use crate::toolchain::ToolchainSettings;

/// `kbuild build` after argument resolution: CLI > environment > defaults.
pub fn settings(project_dir: &Path, args: &BuildArgs) -> BuildSettings {
    BuildSettings {
        project_dir: project_dir.to_path_buf(),
        toolchain: toolchain_settings(&args.toolchain),
        backends: args.backends.clone(),
        budget: JobBudget::for_machine(args.jobs),
        out_dir: args.out_dir.clone(),
        unique_id: args.unique_id.clone(),
        outputs: Outputs {
            wheel_dir: args
                .wheel
                .then(|| dist_dir(project_dir, args.dist_dir.as_deref())),
            artifact_dir: args
                .artifact
                .then(|| dist_dir(project_dir, args.dist_dir.as_deref())),
        },
        torch: args.torch.clone(),
        variants: args.variants.clone(),
        compiler_launcher: args.compiler_launcher.clone(),
    }
}

/// `--dist-dir`, else `<project>/dist`; absolute, as it is printed.
pub fn dist_dir(project_dir: &Path, dist_dir: Option<&Path>) -> std::path::PathBuf {
    let dir = dist_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| project_dir.join("dist"));
    std::path::absolute(&dir).unwrap_or(dir)
}

/// Where to look for Python and nvcc.
pub fn toolchain_settings(args: &ToolchainArgs) -> ToolchainSettings {
    ToolchainSettings {
        python: args.python.clone(),
        nvcc: args.nvcc.clone(),
        deps: DepsSettings::from_env(),
    }
}

/// Run `kbuild build`.
pub fn run(project_dir: &Path, args: BuildArgs, printer: &Printer) -> Result<()> {
    let started = Instant::now();
    let builder = Builder::new(settings(project_dir, &args), printer);
    if args.dry_run {
        let (_, plans) = builder.prepare_all()?;
        return match plans.as_slice() {
            [plan] => print_plan(plan, args.json),
            _ if args.json => print_json("the plans", &plans),
            _ => plans.iter().try_for_each(|plan| print_plan(plan, false)),
        };
    }
    let report = builder.build()?;
    printer.finish();
    printer.stage(
        "Finished",
        &format!(
            "{} variant(s) in {:.1}s ({} compiled, {} fresh)",
            report.variants.len(),
            started.elapsed().as_secs_f64(),
            report.compiled.len(),
            report.cached.len()
        ),
    );
    if args.json {
        print_json("the build summary", &report)?;
    }
    Ok(())
}

fn print_plan(plan: &BuildPlan, json: bool) -> Result<()> {
    if json {
        return print_json("the plan", plan);
    }
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let mut t = String::new();
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
            let _ = writeln!(t, "  compile {}\n    {}", job.label, command_for(job));
        }
        if let Some(job) = &variant.link {
            let _ = writeln!(t, "  link\n    {}", link_command(job, &job.output));
        }
    }
    print(&t)
}
