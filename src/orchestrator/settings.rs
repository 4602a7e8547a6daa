//! What a build is asked to do, resolved from the command line (CLI > environment > defaults).

use std::path::PathBuf;

use crate::config::Project;
use crate::schedule::JobBudget;
use crate::toolchain::ToolchainSettings;

/// What to build and how, resolved from the command line.
#[derive(Debug, Clone)]
pub struct BuildSettings {
    pub project_dir: PathBuf,
    pub toolchain: ToolchainSettings,
    /// `--backend`: empty means every backend of build.toml this machine can build.
    pub backends: Vec<String>,
    /// Parallelism, job order and the nvcc mode asked for.
    pub budget: JobBudget,
    /// Default: `<project>/build`.
    pub out_dir: Option<PathBuf>,
    /// Op namespace suffix instead of the source identity's hash.
    pub unique_id: Option<String>,
    /// `--torch`: one toolchain per version; empty means kbuild.lock's, else the default Python.
    pub torch: Vec<String>,
    /// `--variant`: build only these; empty means all.
    pub variants: Vec<String>,
    /// `--cuda-capabilities`: what CUDA variants hold (`native` not looked up yet).
    pub cuda_capabilities: crate::plan::CudaCapabilities,
    /// `CXXFLAGS`: added to every unit's host compiler flags (and to nvcc's `-Xcompiler`).
    pub cxx_flags: Vec<String>,
    /// Runs every compiler (`sccache`); not part of the object cache's key.
    pub compiler_launcher: Option<PathBuf>,
    /// What to write besides `build/<variant>/`.
    pub outputs: Outputs,
    /// The manylinux policy extensions are made to meet (`--manylinux`; `None`: as linked).
    pub manylinux: Option<String>,
    /// The remote object cache's URL (`KBUILD_REMOTE_CACHE`), shared by checkouts and CI.
    pub remote_cache: Option<String>,
    /// The team's secret its entries are signed with (`KBUILD_REMOTE_CACHE_SECRET`).
    pub remote_cache_secret: Option<String>,
    /// sccache, to compile units on sccache-dist's build servers (`KBUILD_DIST`); CUDA units
    /// then run one nvcc each, which sccache splits (as under any launcher).
    pub dist: Option<PathBuf>,
}

impl BuildSettings {
    /// Where `project`'s variants go: `--out-dir`, else `<project>/build`.
    pub fn out_dir_of(&self, project: &Project) -> PathBuf {
        match &self.out_dir {
            Some(dir) => std::path::absolute(dir).unwrap_or_else(|_| dir.clone()),
            None => project.root.join("build"),
        }
    }
}

/// Formats written from each built variant, besides its directory.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// One wheel per variant into this directory.
    pub wheel_dir: Option<PathBuf>,
    /// One `<name>-<variant>.tar.gz` per variant into this directory.
    pub artifact_dir: Option<PathBuf>,
}

impl Outputs {
    /// Nothing but the variant directories is asked for.
    pub fn is_empty(&self) -> bool {
        self.wheel_dir.is_none() && self.artifact_dir.is_none()
    }
}
