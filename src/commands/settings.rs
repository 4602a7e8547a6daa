//! Arguments → settings for the commands that build: CLI > environment > defaults, resolved
//! once here so `build`, `wheel`, `develop` and `list-variants` select and schedule alike.

use std::path::{Path, PathBuf};

use crate::cli::{BuildArgs, SelectArgs, ToolchainArgs};
use crate::depends::DepsSettings;
use crate::orchestrator::{BuildSettings, Outputs};
use crate::schedule::memory::MemoryBudget;
use crate::schedule::{JobBudget, NvccMode, Order};
use crate::toolchain::ToolchainSettings;

/// The policy builds meet by default: the Hub's.
pub const DEFAULT_MANYLINUX: &str = "manylinux_2_28";

/// `kbuild build` after argument resolution: CLI > environment > defaults.
pub fn settings(project_dir: &Path, build: &BuildArgs) -> BuildSettings {
    let args = &build.options;
    let dist = || dist_dir(project_dir, args.dist_dir.as_deref());
    BuildSettings {
        out_dir: args.flags.out_dir.clone(),
        unique_id: args.unique_id.clone(),
        outputs: Outputs {
            wheel_dir: build.wheel.then(dist),
            artifact_dir: build.artifact.then(dist),
        },
        compiler_launcher: args.compiler_launcher.clone(),
        manylinux: (args.manylinux != "none").then(|| args.manylinux.clone()),
        ..select_settings(
            project_dir,
            &args.flags.toolchain,
            &args.flags.select,
            args.flags.jobs,
            args.flags.memory,
        )
    }
}

/// What `build`, `develop` and `list-variants` resolve alike: the toolchain, the selection
/// and the budget (`--memory` or `KBUILD_MEMORY`, else what the machine has), whose scheduling
/// levers come from the environment (`KBUILD_SCHEDULE=fifo`, `KBUILD_NVCC_STEPS=0`,
/// `KBUILD_JOBSERVER=1`; the benchmark sets them one at a time), and `CXXFLAGS`, added to every
/// unit's host compile (a debug or `-g` build).
pub fn select_settings(
    project_dir: &Path,
    toolchain: &ToolchainArgs,
    select: &SelectArgs,
    jobs: Option<usize>,
    memory: Option<u64>,
) -> BuildSettings {
    let env = |name: &str| crate::env::var(name).unwrap_or_default();
    let on = |name: &str| matches!(env(name).as_str(), "1" | "on" | "true");
    let off = |name: &str| matches!(env(name).as_str(), "0" | "off" | "false");
    let budget = JobBudget {
        order: match env("KBUILD_SCHEDULE").as_str() {
            "fifo" => Order::Fifo,
            _ => Order::LongestFirst,
        },
        nvcc: NvccMode::asked(on("KBUILD_JOBSERVER"), off("KBUILD_NVCC_STEPS")),
        ..JobBudget::for_machine(jobs, memory.map(MemoryBudget::given))
    };
    BuildSettings {
        project_dir: project_dir.to_path_buf(),
        toolchain: toolchain_settings(toolchain),
        backends: select.backends.clone(),
        budget,
        out_dir: None,
        unique_id: None,
        torch: select.torch.clone(),
        variants: select.variants.clone(),
        cuda_capabilities: select.cuda_capabilities.clone().unwrap_or_default(),
        cxx_flags: shlex::split(&env("CXXFLAGS")).unwrap_or_default(),
        compiler_launcher: None,
        outputs: Outputs::default(),
        manylinux: Some(DEFAULT_MANYLINUX.into()),
        remote_cache: Some(env("KBUILD_REMOTE_CACHE")).filter(|url| !url.is_empty()),
        remote_cache_secret: Some(env("KBUILD_REMOTE_CACHE_SECRET")).filter(|s| !s.is_empty()),
        dist: Some(env("KBUILD_DIST"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
    }
}

/// `--dist-dir`, else `<project>/dist`; absolute, as it is printed.
pub fn dist_dir(project_dir: &Path, dist_dir: Option<&Path>) -> PathBuf {
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

/// `-C` when given, else the nearest directory holding build.toml from the working directory
/// up (`.` when that is the working directory itself or none is found).
pub fn project_dir(given: &Path) -> PathBuf {
    if !given.as_os_str().is_empty() {
        return given.to_path_buf();
    }
    let cwd = std::env::current_dir().ok();
    match crate::config::find_project_root(Path::new(".")) {
        Some(root) if Some(&root) != cwd.as_ref() => root,
        _ => PathBuf::from("."),
    }
}
