//! `kbuild build`: resolve settings, run the builder (or print its plan), print the result.

use std::path::Path;
use std::time::Instant;

use super::settings::settings;
use super::{print, print_json};
use crate::cli::BuildArgs;
use crate::error::Result;
use crate::orchestrator::{Builder, dry_run_text, memory_line};
use crate::plan::BuildPlan;
use crate::report::{Printer, Reporter};

/// Run `kbuild build`.
pub fn run(project_dir: &Path, args: BuildArgs, printer: &Printer) -> Result<()> {
    let started = Instant::now();
    let builder = Builder::new(settings(project_dir, &args), printer);
    if args.dry_run {
        let prepared = builder.prepare()?;
        super::print_notes(&prepared, printer);
        let plans = prepared.plans;
        let budget = builder.budget();
        printer.stage(
            "Budget",
            &format!("-j{}, {}", budget.jobs, memory_line(budget.memory)),
        );
        return match plans.as_slice() {
            [plan] => print_plan(plan, args.options.json),
            _ if args.options.json => print_json("the plans", &plans),
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
    if args.options.json {
        print_json("the build summary", &report)?;
    }
    Ok(())
}

fn print_plan(plan: &BuildPlan, json: bool) -> Result<()> {
    if json {
        return print_json("the plan", plan);
    }
    print(&dry_run_text(plan))
}
