//! What to build, as plain data: variants, compile jobs, capabilities and dtypes.
//!
//! A `BuildPlan` is made from a validated project and a discovered toolchain; it can be printed
//! (`kbuild build --dry-run`) and tested without running any compiler.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::config::{Backend, Capability, DType};

/// Everything one `kbuild build` does.
#[derive(Debug, Clone, Serialize)]
pub struct BuildPlan {
    /// Project root (absolute).
    pub root: PathBuf,
    /// Where variants land: `<root>/build` unless overridden.
    pub out_dir: PathBuf,
    /// Scratch space for objects, generated headers and the cache: `<out_dir>/.kbuild`.
    pub work_dir: PathBuf,
    pub variants: Vec<VariantPlan>,
    /// Backends named in build.toml that this build does not produce, with the reason.
    pub skipped: Vec<Skipped>,
}

/// A backend left out of the build, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub backend: Backend,
    pub reason: String,
}

/// One `build/<variant>/` directory.
#[derive(Debug, Clone, Serialize)]
pub struct VariantPlan {
    /// e.g. `torch215-cxx11-cu132-x86_64-linux`.
    pub name: String,
    pub backend: Backend,
    /// Op namespace, extension module name and metadata `id`: `_<python_name>_<backend>_<hash>`.
    pub id: String,
    /// Python package name (`ltx_kernels`).
    pub python_name: String,
    /// Capabilities compiled into the CUDA extension (empty for cpu/noarch).
    pub capabilities: Vec<Capability>,
    /// The dtypes each compiled capability carries.
    pub dtypes: BTreeMap<Capability, Vec<DType>>,
    /// Directory with generated headers (`registration.h`, `kbuild_dtypes.h`), on every include path.
    pub generated_include: PathBuf,
    /// Object files are written here.
    pub obj_dir: PathBuf,
    pub compile: Vec<CompileJob>,
    /// `None` for noarch variants.
    pub link: Option<LinkJob>,
    /// Python files copied into the variant: (source, path relative to the variant).
    pub python_files: Vec<(PathBuf, PathBuf)>,
}

/// Source language of a compile job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// `.cu` through nvcc.
    Cuda,
    /// `.cpp`/`.cc`/`.cxx` through the host C++ compiler.
    Cxx,
}

/// One `-gencode`: SASS for `sm`, or PTX for `compute` when `ptx` is set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Gencode {
    pub capability: Capability,
    /// Also embed PTX for this capability (the newest one gets it, for forward compatibility).
    pub ptx: bool,
}

/// Compile one source file to one object: everything the command line needs, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct CompileJob {
    /// Short label for progress output (path relative to the root).
    pub label: String,
    pub lang: Lang,
    /// nvcc for `Lang::Cuda`, the host C++ compiler for `Lang::Cxx`.
    pub compiler: PathBuf,
    /// For nvcc: the host compiler it drives (`-ccbin`), when known.
    pub host_compiler: Option<PathBuf>,
    pub source: PathBuf,
    pub object: PathBuf,
    /// Make-style dependency file written by the compiler (`-MD -MF`).
    pub depfile: PathBuf,
    /// `-std=` value, e.g. `c++20`.
    pub std: String,
    /// Project include dirs (`-I`), generated headers included; searched by the object cache's
    /// include scan.
    pub include_dirs: Vec<PathBuf>,
    /// Toolchain include dirs (`-isystem`: torch, Python, CUDA): no warnings from them, and the
    /// object cache does not scan them (the compiler's dependency output covers them).
    pub system_include_dirs: Vec<PathBuf>,
    /// `-DNAME` or `-DNAME=VALUE`.
    pub defines: Vec<(String, Option<String>)>,
    /// Flags from build.toml for this compiler (`cuda-flags` for nvcc, `cxx-flags` for g++).
    pub flags: Vec<String>,
    /// For nvcc: host flags passed through `-Xcompiler` (`cxx-flags`, `-fPIC`).
    pub host_flags: Vec<String>,
    /// CUDA targets (empty for `Lang::Cxx`).
    pub gencodes: Vec<Gencode>,
    /// nvcc `--threads` (parallel device passes inside one job).
    pub nvcc_threads: u32,
    /// Identifies the compiler build (its `--version` output); part of the cache key.
    pub compiler_id: String,
}

/// Link the extension shared object.
#[derive(Debug, Clone, Serialize)]
pub struct LinkJob {
    /// The host C++ compiler used as linker driver.
    pub linker: PathBuf,
    pub objects: Vec<PathBuf>,
    /// `<work>/<variant>/<id>.abi3.so`, moved into the variant by the packager.
    pub output: PathBuf,
    pub lib_dirs: Vec<PathBuf>,
    /// `-l` arguments, e.g. `c10`, `torch`, `:libcudart.so.13`.
    pub libs: Vec<String>,
    /// Extra arguments (rpath and the like).
    pub flags: Vec<String>,
}

mod make;

pub use make::{
    DEFAULT_CAPABILITIES, PlanError, PlanSettings, Tools, make_plan, python_files, select_backends,
    source_identity, variant_name,
};
