//! What to build, as plain data: variants, compile jobs, capabilities and dtypes.
//!
//! A `BuildPlan` is made from a validated project and one discovered toolchain
//! ([`make_plan`]); it can be printed (`kbuild build --dry-run`) and tested without running any
//! compiler. Backend selection, the source identity and job construction live in submodules.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::config::{Backend, Capability, DType};
use crate::depends::Fetch;
use crate::hint::Hint;

/// Everything one `kbuild build` does.
#[derive(Debug, Clone, Serialize)]
pub struct BuildPlan {
    /// Project root (absolute).
    pub root: PathBuf,
    /// Where variants land: `<root>/build` unless overridden.
    pub out_dir: PathBuf,
    /// Scratch space for objects, generated headers and the cache: `<out_dir>/.kbuild`.
    pub work_dir: PathBuf,
    /// The state of the sources the variants are built from (git commit or content hash).
    pub source: SourceIdentity,
    pub variants: Vec<VariantPlan>,
    /// Backends named in build.toml that this build does not produce, with the reason.
    pub skipped: Vec<Skipped>,
    /// Dependency headers (CUTLASS) to download into kbuild's cache before compiling.
    pub fetches: Vec<Fetch>,
    /// What the plan left out of build.toml's request and why (capabilities this nvcc does not
    /// build, kernels below their `cuda-minver`), one line each; the build goes on.
    pub notes: Vec<String>,
}

/// A backend left out of the build, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub backend: Backend,
    pub reason: String,
    /// Left out by `--backend`: what was asked for, so no warning.
    #[serde(skip)]
    pub deselected: bool,
}

/// One `build/<variant>/` directory.
#[derive(Debug, Clone, Serialize)]
pub struct VariantPlan {
    /// e.g. `torch215-cxx11-cu132-x86_64-linux`, or `torch-stable-abi210-cpu-x86_64-linux` for
    /// a stable-ABI build.
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
    /// metadata.json `backend.archs` as kernel-builder writes it (`12.1+PTX` where PTX is
    /// embedded), sorted as strings; empty when the variant records none.
    pub archs: Vec<String>,
    /// The newest capability whose PTX is embedded.
    pub ptx: Option<Capability>,
    /// With `--cuda-capabilities`: the `archs` of the project's whole matrix, of which this
    /// variant holds only `archs`; `None` when it holds the whole matrix (publish refuses a
    /// partial variant unless `--allow-partial`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrix_archs: Option<Vec<String>>,
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
    /// The manylinux policy the extension is made to meet after linking (`manylinux_2_28`);
    /// `None`: as linked (`--manylinux none`).
    pub manylinux: Option<String>,
}

/// Build options resolved from the command line.
#[derive(Debug, Clone)]
pub struct PlanSettings {
    pub out_dir: PathBuf,
    /// Backends asked for on the command line; empty means every buildable one.
    pub backends: Vec<String>,
    /// Op namespace suffix instead of the source identity's hash.
    pub unique_id: Option<String>,
    /// The manylinux policy extensions are linked to meet (`None`: as linked).
    pub manylinux: Option<String>,
    /// `--cuda-capabilities`, resolved (`native` looked up): the capabilities to build; `None`
    /// for the project's whole matrix.
    pub cuda_capabilities: Option<Vec<Capability>>,
    /// `CXXFLAGS`: after each unit's own host flags, so they win (`-O0 -g`).
    pub cxx_flags: Vec<String>,
}

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("`--backend {backend}` is not in build.toml (`backends = [{listed}]`)")]
    BackendNotInProject { backend: String, listed: String },
    #[error("`--backend {backend}`: kbuild builds only `cpu` and `cuda`")]
    BackendUnsupported { backend: String },
    #[error("the `cuda` backend needs a CUDA build of torch, but torch {torch} is CPU-only")]
    CpuOnlyTorch { torch: String },
    #[error(
        "{location}: kernel `{kernel}`: nvcc {nvcc} cannot build capability {capability} (it supports {supported})"
    )]
    CapabilityUnsupported {
        /// Where the capability is written in build.toml.
        location: crate::config::Location,
        kernel: String,
        capability: Capability,
        nvcc: String,
        supported: String,
    },
    #[error("`[torch] stable-abi` targets torch {target}, newer than the build's torch {torch}")]
    StableAbiNewerThanTorch { target: String, torch: String },
    #[error(
        "{location}: kernel `{kernel}`: none of `cuda-capabilities` ({listed}) can be built with nvcc {nvcc} (it builds {supported})"
    )]
    NoBuildableCapability {
        /// Where `cuda-capabilities` is written.
        location: Box<crate::config::Location>,
        kernel: String,
        listed: String,
        nvcc: String,
        supported: String,
    },
    #[error("{}{what} {found} is {} than `{key} = \"{bound}\"` in `{table}`", location_prefix(bound), bound_side.comparison())]
    OutOfBounds {
        /// `torch` or `CUDA`.
        what: &'static str,
        /// The toolchain's version.
        found: String,
        bound_side: BoundSide,
        bound: Box<crate::config::Version>,
        key: &'static str,
        table: &'static str,
    },
    /// `--cuda-capabilities native` on a machine whose GPUs cannot be listed.
    #[error("`--cuda-capabilities native`: no GPU found on this machine: {why}")]
    NoGpu { why: String },
    /// `--cuda-capabilities` that no CUDA kernel of the project runs on.
    #[error(
        "`--cuda-capabilities {selected}`: no CUDA kernel of build.toml runs there (kernels: {kernels})"
    )]
    SelectionMissesEveryKernel { selected: String, kernels: String },
    #[error("`[tvm-ffi]` kernels are not built by kbuild: it builds Torch extensions")]
    TvmFfiUnsupported,
    #[error("nothing to build: no backend of build.toml can be built here ({reasons})")]
    NothingToBuild { reasons: String },
    #[error("cannot read `{}` to compute the source hash", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file or directory of the Python package that cannot be read.
    #[error("cannot read `{}`, which is part of the Python package", path.display())]
    PythonUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A link in the Python package that leads out of the project.
    #[error("`{}` links to `{}`, outside the project", link.display(), target.display())]
    PythonLinkOutside { link: PathBuf, target: PathBuf },
    /// A FIFO, socket or device in the Python package.
    #[error("`{}` in the Python package is a {kind}, not a regular file", path.display())]
    PythonNotRegular { path: PathBuf, kind: &'static str },
    /// A name in the Python package that a Hub repository cannot hold.
    #[error("`{}` in the Python package has a name that is not valid UTF-8", path.display())]
    PythonNonUtf8 { path: PathBuf },
}

impl Hint for PlanError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            PlanError::BackendNotInProject { .. } | PlanError::BackendUnsupported { .. } => {
                "run `kbuild list-variants` to see what this project builds here".into()
            }
            PlanError::CpuOnlyTorch { .. } => format!(
                "install a CUDA build of torch (`{}`), or build only the CPU variant with `--backend cpu`",
                crate::toolchain::INSTALL_HINT
            ),
            PlanError::CapabilityUnsupported { .. } => {
                "remove the capability from build.toml or use an nvcc that supports it".into()
            }
            PlanError::StableAbiNewerThanTorch { target, .. } => format!(
                "build with torch {target} or newer (`--python` / `KBUILD_PYTHON`), or lower \
                 `stable-abi` in build.toml"
            ),
            PlanError::NoBuildableCapability { .. } => {
                "list a capability this nvcc builds, remove `cuda-capabilities` to build \
                 kernel-builder's default set, or use an nvcc that builds the listed ones"
                    .into()
            }
            PlanError::OutOfBounds {
                what,
                bound_side,
                bound,
                ..
            } => bounds::install_hint(what, *bound_side, bound),
            PlanError::NoGpu { .. } => {
                "`native` asks the NVIDIA driver's `nvidia-smi`: install the driver, or name the \
                 capabilities, e.g. `--cuda-capabilities 9.0` (`KBUILD_CUDA_CAPABILITIES=9.0`)"
                    .into()
            }
            PlanError::SelectionMissesEveryKernel { .. } => {
                "select a capability one of the kernels builds for, or leave out \
                 `--cuda-capabilities` to build the whole matrix"
                    .into()
            }
            PlanError::TvmFfiUnsupported => {
                "build this kernel with HF's kernel-builder, or port it to `[torch]`".into()
            }
            PlanError::NothingToBuild { .. } => {
                "add `cpu` or `cuda` to `backends` in build.toml, or install the missing toolchain"
                    .into()
            }
            PlanError::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::InvalidInput => {
                    "kbuild hashes regular files only: replace it with the file itself".into()
                }
                _ => "check the file's permissions".into(),
            },
            PlanError::PythonUnreadable { .. } => {
                "check its permissions (and links): every file under the Python package \
                 directory is copied into each variant"
                    .into()
            }
            PlanError::PythonLinkOutside { .. } => {
                "a variant ships files from inside the project only: copy the file into the \
                 package directory instead of linking to it, or remove the link"
                    .into()
            }
            PlanError::PythonNotRegular { .. } => {
                "remove it from the package directory: a variant holds regular files only".into()
            }
            PlanError::PythonNonUtf8 { .. } => {
                "rename it: Hub repositories and metadata.json hold UTF-8 paths only".into()
            }
        })
    }
}

/// Which side of a version bound a toolchain is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BoundSide {
    /// Below `minver`.
    TooOld,
    /// Above `maxver`.
    TooNew,
}

impl BoundSide {
    fn comparison(self) -> &'static str {
        match self {
            BoundSide::TooOld => "older",
            BoundSide::TooNew => "newer",
        }
    }
}

/// `build.toml:3:10: ` when the bound was read from build.toml.
fn location_prefix(version: &crate::config::Version) -> String {
    version
        .location()
        .map(|l| format!("{l}: "))
        .unwrap_or_default()
}

mod bounds;
mod capabilities;
mod identity;
mod jobs;
mod make;
mod matrix;
mod select;
mod unique_id;

pub use capabilities::{
    CapabilityArgError, CudaCapabilities, RunnableHere, native_capabilities, runnable_here,
};
pub use identity::{SourceIdentity, python_files, shipped_extensions, source_identity};
pub use make::{make_plan, variant_name};
pub use matrix::hf_default_capabilities;
pub use select::{Selection, select_backends};
pub use unique_id::{MAX_UNIQUE_ID, parse_unique_id};
