//! What the dev loop (`develop`, `wheel`, `test`) builds when the command line names no backend,
//! variant or capability: what can run on this machine (`plan::runnable_here`). `kbuild build`
//! keeps building everything: it is the release command, and what it left out would be
//! missing from the Hub.

use std::path::Path;

use crate::cli::SelectArgs;
use crate::plan::CudaCapabilities;

/// `select` narrowed to what can run here, and the one line that says so; `None` when the
/// command line chose, or nothing changes.
pub fn runnable_here(project_dir: &Path, select: &SelectArgs) -> Option<(SelectArgs, String)> {
    let chosen = !select.backends.is_empty() || !select.variants.is_empty();
    if chosen || select.cuda_capabilities.is_some() {
        return None;
    }
    // A build.toml that does not load is reported by the build itself, with its location.
    let project = crate::config::load(project_dir).ok()?;
    let here = crate::plan::runnable_here(&project)?;
    let mut narrowed = select.clone();
    if let Some(backends) = here.backends {
        narrowed.backends = backends.iter().map(|b| b.as_str().to_string()).collect();
    }
    if let Some(caps) = here.capabilities {
        narrowed.cuda_capabilities = Some(CudaCapabilities::List(caps));
    }
    Some((narrowed, here.note))
}
