//! `kbuild build`: resolve settings, run the builder (or print its plan), print the result.

use std::path::Path;
use std::time::Instant;

use super::settings::settings;
use super::{print, print_json};
use crate::cli::BuildArgs;
use crate::error::Result;
use crate::orchestrator::{Builder, dry_run_json, dry_run_text, memory_line};
use crate::report::{Printer, Reporter};

/// Run `kbuild build`.
pub fn run(project_dir: &Path, args: BuildArgs, printer: &Printer) -> Result<()> {
    let started = Instant::now();
    let builder = Builder::new(settings(project_dir, &args), printer);
    if args.dry_run {
        let prepared = builder.prepare()?;
        super::print_notes(&prepared, printer);
        let budget = builder.budget();
        printer.stage(
            "Budget",
            &format!("-j{}, {}", budget.jobs, memory_line(budget.memory)),
        );
        let plans = &prepared.plans;
        let runs = prepared.schedule.per_plan(plans);
        return match (plans.as_slice(), args.options.json) {
            ([plan], true) => print_json("the plan", &dry_run_json(plan, runs[0])),
            (_, true) => {
                let all: Vec<_> = (plans.iter().zip(&runs))
                    .map(|(plan, runs)| dry_run_json(plan, runs))
                    .collect();
                print_json("the plans", &all)
            }
            _ => (plans.iter().zip(&runs))
                .try_for_each(|(plan, runs)| print(&dry_run_text(plan, runs))),
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
