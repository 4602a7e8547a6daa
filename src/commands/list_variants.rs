//! `kbuild list-variants`: the variants `kbuild build` would produce with this toolchain,
//! planned by the same code as the build.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::settings::select_settings;
use super::{print, print_json};
use crate::cli::ListVariantsArgs;
use crate::config::Backend;
use crate::error::Result;
use crate::orchestrator::{Builder, skipped_once};
use crate::plan::Skipped;
use crate::report::Printer;
use crate::toolchain::Toolchain;

/// What `list-variants --json` prints.
#[derive(Debug, Serialize)]
pub struct VariantListing {
    /// One per torch the build selects (`--torch`, kbuild.lock, else the default Python).
    pub toolchains: Vec<ToolchainFacts>,
    pub variants: Vec<ListedVariant>,
    pub skipped: Vec<Skipped>,
}

/// What discovery found (all `None` for noarch projects).
#[derive(Debug, Default, Serialize)]
pub struct ToolchainFacts {
    pub python: Option<PathBuf>,
    pub torch: Option<String>,
    pub cuda: Option<String>,
    pub nvcc: Option<String>,
}

impl ToolchainFacts {
    fn of(toolchain: &Toolchain) -> Self {
        let torch = toolchain.torch.as_ref();
        ToolchainFacts {
            python: torch.map(|t| t.python.path.clone()),
            torch: torch.map(|t| t.info.version.clone()),
            cuda: torch.and_then(|t| t.info.cuda.clone()),
            nvcc: toolchain.nvcc.as_ref().map(|n| n.id.clone()),
        }
    }
}

/// One variant `list-variants` reports.
#[derive(Debug, Serialize)]
pub struct ListedVariant {
    pub name: String,
    pub backend: Backend,
    pub capabilities: Vec<String>,
    /// The torch it is built against (`None` for noarch projects).
    pub torch: Option<String>,
}

/// Run `kbuild list-variants`: the build's own preparation and selection.
pub fn run(project_dir: &Path, args: ListVariantsArgs, printer: &Printer) -> Result<()> {
    let settings = select_settings(project_dir, &args.toolchain, &args.select, None, None);
    let prepared = Builder::new(settings, printer).prepare()?;
    super::print_notes(&prepared, printer);
    let mut listing = VariantListing {
        toolchains: Vec::new(),
        variants: Vec::new(),
        skipped: skipped_once(&prepared.plans),
    };
    for (plan, toolchain) in prepared.plans.iter().zip(&prepared.toolchains) {
        listing.toolchains.push(ToolchainFacts::of(toolchain));
        listing
            .variants
            .extend(plan.variants.iter().map(|v| ListedVariant {
                name: v.name.clone(),
                backend: v.backend,
                capabilities: v.capabilities.iter().map(ToString::to_string).collect(),
                torch: ToolchainFacts::of(toolchain).torch,
            }));
    }
    if args.json {
        return print_json("the variant listing", &listing);
    }
    let mut text = String::new();
    for v in &listing.variants {
        if v.capabilities.is_empty() {
            text.push_str(&format!("{}\n", v.name));
        } else {
            let caps = v.capabilities.join(", ");
            text.push_str(&format!("{}  (capabilities {caps})\n", v.name));
        }
    }
    for s in &listing.skipped {
        text.push_str(&format!("skipped: {} ({})\n", s.backend, s.reason));
    }
    print(&text)
}
