//! The one preparation path of every command that builds or lists: load build.toml, choose
//! one toolchain per requested torch (`--torch`, else kbuild.lock, else the default Python),
//! discover each, decide how nvcc runs, plan each, and keep the `--variant`s asked for. A dry
//! run, `list-variants` and `develop` select from what this returns; `build` executes it.

use std::path::PathBuf;

use super::error::BuildError;
use super::path_checks::check_paths;
use super::settings::BuildSettings;
use crate::compile::{self, RemoteSettings};
use crate::config::{self, Backend, Framework, Project};
use crate::depends;
use crate::managed::{self, InstallError, LockFile, major_minor, toolchains_dir};
use crate::plan::{self, BuildPlan, CompileJob, PlanSettings, select_backends};
use crate::report::Reporter;
use crate::schedule::costs::Costs;
use crate::schedule::{JobBudget, NvccMode, Scheduled};
use crate::toolchain::{
    FactCache, Nvcc, Toolchain, ToolchainSettings, find_cxx, find_nvcc, find_torch,
};

/// Everything known before anything runs: enough for `--dry-run`, `list-variants` and
/// `develop`'s choice, and what [`super::Builder::execute`] runs.
pub struct Prepared {
    pub project: Project,
    /// One plan per toolchain, holding only the `--variant`s asked for.
    pub plans: Vec<BuildPlan>,
    /// The toolchain each plan was made with (`toolchains[i]` for `plans[i]`).
    pub toolchains: Vec<Toolchain>,
    /// How CUDA units run nvcc in this build, decided once for every toolchain.
    pub nvcc: NvccMode,
    /// How every plan's compile jobs (plan, variant, job) run: the order they start in,
    /// longest first by the costs known or predicted, and each job's run choice
    /// (`schedule::choose`).
    pub schedule: Scheduled,
    /// The toolchain facts of the output directory, with what this run had to ask anew.
    pub facts: FactCache,
}

/// Prepare the build `settings` describe; toolchain facts remembered by an earlier build are
/// used, nothing is written.
pub fn prepare(settings: &BuildSettings, reporter: &dyn Reporter) -> Result<Prepared, BuildError> {
    let project = load(settings, reporter)?;
    let out_dir = settings.out_dir_of(&project);
    check_paths(&project, &out_dir)?;
    let facts = FactCache::open(&out_dir.join(".kbuild/toolchain.json"));
    let mut toolchains = Vec::new();
    for choice in choose_toolchains(&project.root, &settings.toolchain, &settings.torch)? {
        let toolchain =
            discover_toolchain(&project, &choice, &settings.backends, &facts, reporter)?;
        // The lock decides which torch builds: every command that selects says so alike.
        if let (true, Some(torch)) = (choice.locked, &toolchain.torch) {
            let (version, python) = (&torch.info.version, torch.python.path.display());
            reporter.stage(
                "Locked",
                &format!("torch {version} (kbuild.lock): {python}"),
            );
        }
        toolchains.push(toolchain);
    }
    let nvcc = nvcc_mode(settings, &toolchains, reporter);
    let plan_settings = PlanSettings {
        out_dir,
        backends: settings.backends.clone(),
        unique_id: settings.unique_id.clone(),
        manylinux: settings.manylinux.clone(),
        cuda_capabilities: cuda_capabilities(settings, &toolchains)?,
        cxx_flags: settings.cxx_flags.clone(),
    };
    let mut plans = Vec::new();
    for toolchain in &toolchains {
        plans.push(plan_one(&project, toolchain, &plan_settings)?);
    }
    select_variants(&mut plans, &settings.variants)?;
    label_with_torch(&mut plans);
    let budget = JobBudget {
        nvcc,
        ..settings.budget
    };
    let costs = known_costs(settings, &plans, reporter);
    let schedule = crate::schedule::choose(&plans, &budget, &costs);
    Ok(Prepared {
        schedule,
        project,
        plans,
        toolchains,
        nvcc,
        facts,
    })
}

/// What the plans' jobs cost, as far as known: timed in the work directory, in kbuild's cache,
/// else by a build sharing the remote cache (asked only for the jobs neither record knows).
fn known_costs(settings: &BuildSettings, plans: &[BuildPlan], reporter: &dyn Reporter) -> Costs {
    let cache_dir = settings.toolchain.deps.cache_dir.as_deref();
    let Some(first) = plans.first() else {
        return Costs::default();
    };
    let mut costs = Costs::load(&first.work_dir, cache_dir);
    let Some(remote) = remote_for_costs(settings) else {
        return costs;
    };
    let jobs: Vec<CompileJob> = (plans.iter().flat_map(|p| &p.variants))
        .flat_map(|v| v.compile.iter().cloned())
        .collect();
    match compile::fetch_costs(&remote, &costs.unknown(&jobs)) {
        Ok(seconds) => costs.add_remote(seconds),
        Err(e) => reporter.verbose(&format!(
            "remote cache `{}`: no shared compile times ({e})",
            crate::redact::url(&remote.url)
        )),
    }
    costs
}

/// The remote cache's URL and secret, without roots: what the shared compile times need (their
/// keys hold no path); the compile stage adds the directories objects are stored relative to.
pub(super) fn remote_for_costs(settings: &BuildSettings) -> Option<RemoteSettings> {
    Some(RemoteSettings {
        url: settings.remote_cache.clone()?,
        roots: Vec::new(),
        secret: settings.remote_cache_secret.clone(),
    })
}

/// With several torch versions each unit says which variant it builds (`relu.cpp
/// [torch215-cpu]`): `[cpu]` alone names a unit of every torch's cpu variant.
fn label_with_torch(plans: &mut [BuildPlan]) {
    if plans.len() < 2 {
        return;
    }
    for variant in plans.iter_mut().flat_map(|p| &mut p.variants) {
        let backend = format!(" [{}]", variant.backend);
        let tag = format!(" [{}]", variant_tag(&variant.name));
        for job in &mut variant.compile {
            if let Some(unit) = job.label.strip_suffix(&backend) {
                job.label = format!("{unit}{tag}");
            }
        }
    }
}

/// A variant's name less its C++ ABI, architecture and OS, to tell the variants of one build
/// apart in its output: `torch215-cxx11-cu132-x86_64-linux` is `torch215-cu132`.
pub(super) fn variant_tag(name: &str) -> String {
    let parts: Vec<&str> = name.split('-').collect();
    if parts.len() < 4 {
        return name.to_string();
    }
    let kept: Vec<&str> = parts[..parts.len() - 2]
        .iter()
        .copied()
        .filter(|p| !p.starts_with("cxx"))
        .collect();
    kept.join("-")
}

/// `--cuda-capabilities` resolved; `native` asks for this machine's GPUs only when a CUDA
/// variant may be built (a `--backend cpu` build needs no GPU).
fn cuda_capabilities(
    settings: &BuildSettings,
    toolchains: &[Toolchain],
) -> Result<Option<Vec<config::Capability>>, BuildError> {
    let cuda_selected =
        settings.backends.is_empty() || settings.backends.iter().any(|b| b == "cuda");
    if !cuda_selected || toolchains.iter().all(|t| t.nvcc.is_none()) {
        return Ok(None);
    }
    Ok(settings.cuda_capabilities.resolve()?)
}

/// Load build.toml and report its warnings (with their hints); config errors surface before
/// anything is written.
fn load(settings: &BuildSettings, reporter: &dyn Reporter) -> Result<Project, BuildError> {
    let project = config::load(&settings.project_dir)?;
    for warning in &project.warnings {
        reporter.warn(&warning.with_hint());
    }
    Ok(project)
}

/// The plan for `project` built with `toolchain`. The backends it skips are reported by the
/// build (`list-variants` and `--dry-run` print them on stdout: a warning would repeat them);
/// its notes by whoever runs or shows it ([`Prepared::notes`]), so a no-op build repeats none.
fn plan_one(
    project: &Project,
    toolchain: &Toolchain,
    settings: &PlanSettings,
) -> Result<BuildPlan, BuildError> {
    Ok(plan::make_plan(project, toolchain, settings)?)
}

impl Prepared {
    /// The plans' notes (what the matrix or `--cuda-capabilities` left out), each once.
    pub fn notes(&self) -> Vec<&str> {
        let mut notes: Vec<&str> = Vec::new();
        for note in self.plans.iter().flat_map(|p| &p.notes) {
            if !notes.contains(&note.as_str()) {
                notes.push(note);
            }
        }
        notes
    }
}

/// The one decision of how CUDA units run nvcc: the mode asked for, narrowed to what the
/// compiler launcher and every toolchain's nvcc allow (`-v` says why it was narrowed).
/// `KBUILD_DIST` counts as a launcher whether or not its scheduler answers later: the plan
/// does not depend on the network, and a build that falls back compiles the same commands.
fn nvcc_mode(
    settings: &BuildSettings,
    toolchains: &[Toolchain],
    reporter: &dyn Reporter,
) -> NvccMode {
    let nvccs: Vec<&Nvcc> = toolchains.iter().filter_map(|t| t.nvcc.as_ref()).collect();
    let (mode, why) = settings.budget.nvcc.allowed(
        settings.compiler_launcher.is_some() || settings.dist.is_some(),
        nvccs.iter().all(|n| nvcc_has_jobserver(n)),
    );
    if let (Some(why), false) = (why, nvccs.is_empty()) {
        reporter.verbose(&format!("nvcc runs as `{}`: {why}", mode.as_str()));
    }
    mode
}

/// nvcc 13 accepts `--jobserver` (older ones reject the option).
fn nvcc_has_jobserver(nvcc: &Nvcc) -> bool {
    nvcc.version >= (13, 0)
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

/// Where one toolchain of a build comes from.
#[derive(Debug, Clone)]
pub struct ToolchainChoice {
    pub settings: ToolchainSettings,
    /// The torch `MAJOR.MINOR` asked for; the discovered torch must match it.
    pub torch: Option<String>,
    /// `torch` comes from kbuild.lock, not `--torch` (the hint when it is missing differs).
    pub locked: bool,
}

/// One choice per requested torch (`--torch`, else the toolchains of kbuild.lock): the managed
/// toolchain for it when one is installed, else the default Python (`--python`, venv…), whose
/// torch must then be that version. With no torch requested: the default Python alone.
pub fn choose_toolchains(
    project_dir: &std::path::Path,
    settings: &ToolchainSettings,
    requested: &[String],
) -> Result<Vec<ToolchainChoice>, BuildError> {
    let lock = LockFile::read(project_dir)?;
    let mut torches: Vec<String> = requested.iter().map(|t| major_minor(t)).collect();
    let locked = torches.is_empty();
    if locked {
        torches = lock
            .iter()
            .flat_map(|l| &l.toolchains)
            .map(|t| t.torch.clone())
            .collect();
    }
    if torches.is_empty() {
        return Ok(vec![ToolchainChoice {
            settings: settings.clone(),
            torch: None,
            locked: false,
        }]);
    }
    let root = toolchains_dir()?;
    let mut choices: Vec<ToolchainChoice> = Vec::new();
    for torch in torches {
        if choices.iter().any(|c| c.torch.as_ref() == Some(&torch)) {
            continue;
        }
        let python: Option<PathBuf> = match managed::for_torch(&root, lock.as_ref(), &torch) {
            Ok(found) => found.map(|m| m.python),
            // Locked but not installed here: the default Python may still be that torch.
            Err(InstallError::NotInstalled { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        choices.push(ToolchainChoice {
            settings: ToolchainSettings {
                python: python.or_else(|| settings.python.clone()),
                ..settings.clone()
            },
            torch: Some(torch),
            locked,
        });
    }
    Ok(choices)
}

/// The tools `project` needs for the backends `requested` selects (noarch projects need none).
/// What the tools say about themselves comes from `facts` while they are unchanged.
pub fn discover_toolchain(
    project: &Project,
    choice: &ToolchainChoice,
    requested: &[String],
    facts: &FactCache,
    reporter: &dyn Reporter,
) -> Result<Toolchain, BuildError> {
    if !matches!(project.framework, Framework::Torch(_)) {
        return Ok(Toolchain::default());
    }
    let settings = &choice.settings;
    let torch = find_torch(settings.python.as_deref(), &project.root, facts)?;
    if let Some(wanted) = &choice.torch {
        let (major, minor) = torch.info.major_minor();
        if format!("{major}.{minor}") != *wanted {
            return Err(BuildError::TorchNotFound {
                wanted: wanted.to_string(),
                python: torch.python.path.clone(),
                found: torch.info.version.clone(),
                locked: choice.locked,
            });
        }
    }
    reporter.verbose(&format!(
        "python {} ({}), torch {} (cuda {})",
        torch.python.path.display(),
        torch.python.origin,
        torch.info.version,
        torch.info.cuda.as_deref().unwrap_or("none")
    ));
    // nvcc is looked for only when the cuda backend will be built; the plan selects again from
    // the same inputs and reports what it skips.
    let selection = select_backends(project, Some(&torch.info), requested)?;
    let cxx = find_cxx(facts)?;
    for w in &cxx.warnings {
        reporter.warn(w);
    }
    let nvcc = if selection.chosen.contains(&Backend::Cuda) {
        let nvcc = find_nvcc(settings.nvcc.as_deref(), &torch.info, facts)?;
        for w in &nvcc.warnings {
            reporter.warn(w);
        }
        reporter.verbose(&format!("nvcc {} ({})", nvcc.path.display(), nvcc.origin));
        Some(nvcc)
    } else {
        None
    };
    let deps = depends::locate(
        project,
        &selection.chosen,
        &settings.deps,
        &torch.python.path,
    )?;
    Ok(Toolchain {
        torch: Some(torch),
        cxx: Some(cxx),
        nvcc,
        deps,
    })
}

#[cfg(test)]
mod tests {
    use super::variant_tag;

    #[test]
    fn a_variant_tag_is_its_torch_and_backend() {
        assert_eq!(
            variant_tag("torch215-cxx11-cu132-x86_64-linux"),
            "torch215-cu132"
        );
        assert_eq!(
            variant_tag("torch214-cxx11-cpu-x86_64-linux"),
            "torch214-cpu"
        );
        assert_eq!(
            variant_tag("torch-stable-abi210-cpu-x86_64-linux"),
            "torch-stable-abi210-cpu"
        );
        assert_eq!(variant_tag("torch-universal"), "torch-universal");
    }
}
