//! The validated build.toml model that the rest of the pipeline consumes (plain data).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use super::capability::Capability;
use super::location::Location;
use super::version::Version;

/// A kernel project: its root directory and its validated build.toml.
#[derive(Debug, Clone, Serialize)]
pub struct Project {
    /// Directory holding build.toml (absolute).
    pub root: PathBuf,
    /// Path of the build.toml (absolute).
    pub manifest: PathBuf,
    /// Which build.toml format the file uses.
    pub edition: Edition,
    pub general: General,
    pub framework: Framework,
    /// Kernels sorted by name.
    pub kernels: Vec<Kernel>,
    /// kbuild's own `[kbuild]` extension.
    pub kbuild: KbuildExt,
    /// Things that are allowed (HF kernel-builder accepts them) but probably not meant.
    pub warnings: Vec<ConfigWarning>,
}

/// The build.toml format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Edition {
    /// Edition-less HF kernel-builder v4 format.
    V4,
    /// `edition = 5` in `[general]`.
    V5,
}

/// `[general]`.
#[derive(Debug, Clone, Serialize)]
pub struct General {
    /// Kernel name (`ltx-kernels`): HF's rule, lowercase letters, digits and `-`.
    pub name: String,
    /// The major version (`0` is allowed, as in HF's schema).
    pub version: u32,
    pub license: String,
    pub upstream: Option<String>,
    pub source: Option<String>,
    /// Backends in the order written.
    pub backends: Vec<Backend>,
    pub hub: Hub,
    pub python_depends: Vec<String>,
    /// `kernel-depends` (edition 5): Hub kernels this kernel loads at runtime.
    pub kernel_depends: Vec<KernelDependency>,
    /// `[general.cuda]`.
    pub cuda: CudaGeneral,
    /// `[general.neuron]`.
    pub neuron: BackendGeneral,
    /// `[general.xpu]`.
    pub xpu: BackendGeneral,
    /// `[general.tpu]` (edition 5).
    pub tpu: BackendGeneral,
}

impl General {
    /// The Python package name: `-` replaced by `_`.
    pub fn python_name(&self) -> String {
        self.name.replace('-', "_")
    }

    /// `python-depends` of `[general]` followed by those of `backend`'s table, as kernel-builder
    /// collects them for a variant (it reads the cuda, tpu and xpu tables, not neuron's).
    pub fn python_depends_for(&self, backend: Backend) -> Vec<String> {
        let own: &[String] = match backend {
            Backend::Cuda => &self.cuda.python_depends,
            Backend::Tpu => &self.tpu.python_depends,
            Backend::Xpu => &self.xpu.python_depends,
            _ => &[],
        };
        self.python_depends.iter().chain(own).cloned().collect()
    }

    /// `kernel-depends` of `[general]` followed by those of `backend`'s table, as kernel-builder
    /// writes them into a variant's metadata (it reads the cuda, neuron and xpu tables).
    pub fn kernel_depends_for(&self, backend: Backend) -> Vec<KernelDependency> {
        let own: &[KernelDependency] = match backend {
            Backend::Cuda => &self.cuda.kernel_depends,
            Backend::Neuron => &self.neuron.kernel_depends,
            Backend::Xpu => &self.xpu.kernel_depends,
            _ => &[],
        };
        self.kernel_depends.iter().chain(own).cloned().collect()
    }
}

/// `[general.hub]`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Hub {
    pub repo_id: Option<String>,
    pub branch: Option<String>,
}

/// `[general.cuda]`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CudaGeneral {
    /// The oldest CUDA toolkit the kernel builds with.
    pub minver: Option<Version>,
    /// The newest CUDA toolkit the kernel builds with (inclusive).
    pub maxver: Option<Version>,
    pub python_depends: Vec<String>,
    /// `kernel-depends` (edition 5) that apply to the CUDA backend only.
    pub kernel_depends: Vec<KernelDependency>,
}

/// `[general.neuron]`, `[general.xpu]` or `[general.tpu]`: dependencies of one backend.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BackendGeneral {
    pub python_depends: Vec<String>,
    /// `kernel-depends` (edition 5; `[general.tpu]` has none).
    pub kernel_depends: Vec<KernelDependency>,
}

/// An entry of `kernel-depends`: a Hub kernel pinned by major version or by git revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelDependency {
    pub repo_id: String,
    pub pin: KernelPin,
}

/// How a kernel dependency is pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelPin {
    /// `version = N`: the branch `vN`.
    Version(u64),
    /// `revision = "..."`: a git revision.
    Revision(String),
}

/// `[torch]`, `[torch-noarch]` or `[tvm-ffi]`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Framework {
    Torch(Torch),
    TorchNoarch(TorchNoarch),
    /// Valid build.toml that kbuild does not build (it builds Torch extensions).
    TvmFfi(TvmFfi),
}

impl Framework {
    /// The directory holding the binding and the Python package: `torch-ext` (`tvm-ffi-ext` for
    /// TVM FFI).
    pub fn extension_dir(&self) -> &'static str {
        match self {
            Framework::Torch(_) | Framework::TorchNoarch(_) => "torch-ext",
            Framework::TvmFfi(_) => "tvm-ffi-ext",
        }
    }
}

/// The extensions of `torch-ext/<name>/` files packaged when `pyext` is not written.
pub const DEFAULT_PYEXT: [&str; 2] = ["py", "pyi"];

/// `pyext`, or the default `py` and `pyi` when it is not written.
fn effective_pyext(pyext: &Option<Vec<String>>) -> Vec<&str> {
    match pyext {
        Some(list) => list.iter().map(String::as_str).collect(),
        None => DEFAULT_PYEXT.to_vec(),
    }
}

/// `[torch]`: sources compiled into every backend's extension (the op bindings).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Torch {
    /// Include dirs relative to the root.
    pub include: Vec<PathBuf>,
    /// The oldest Torch the kernel builds with.
    pub minver: Option<Version>,
    /// The newest Torch the kernel builds with (inclusive).
    pub maxver: Option<Version>,
    /// `pyext` as written; `None` means `DEFAULT_PYEXT` (see `python_extensions`).
    pub pyext: Option<Vec<String>>,
    /// Sources relative to the root (headers may be listed; only .cpp/.cc/.cu compile).
    pub src: Vec<PathBuf>,
    pub cxx_flags: Vec<String>,
    /// `stable-abi`: build against the Torch stable ABI of this version.
    pub stable_abi: Option<StableAbi>,
}

impl Torch {
    /// The extensions of the files under `torch-ext/<name>/` that a variant ships.
    pub fn python_extensions(&self) -> Vec<&str> {
        effective_pyext(&self.pyext)
    }
}

/// `torch.stable-abi`: one Torch version for every backend, or one per backend (edition 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum StableAbi {
    All(Version),
    /// Backends missing from the table build with the full ABI.
    PerBackend(BTreeMap<Backend, Version>),
}

impl StableAbi {
    /// The stable-ABI Torch version for `backend`, or `None` to build it with the full ABI.
    pub fn for_backend(&self, backend: Backend) -> Option<&Version> {
        match self {
            StableAbi::All(v) => Some(v),
            StableAbi::PerBackend(map) => map.get(&backend),
        }
    }
}

/// `[torch-noarch]`: pure-Python kernels.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TorchNoarch {
    /// `pyext` as written; `None` means `DEFAULT_PYEXT`.
    pub pyext: Option<Vec<String>>,
    /// Declared (not compiled) capabilities, written to metadata.json.
    pub cuda_capabilities: Vec<Capability>,
    /// Declared ROCm architectures (`gfx942`), written to metadata.json.
    pub rocm_archs: Vec<String>,
}

impl TorchNoarch {
    /// The extensions of the files under `torch-ext/<name>/` that a variant ships.
    pub fn python_extensions(&self) -> Vec<&str> {
        effective_pyext(&self.pyext)
    }
}

/// `[tvm-ffi]`: an Apache TVM FFI extension (read and checked, not built by kbuild).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TvmFfi {
    pub include: Vec<PathBuf>,
    pub pyext: Option<Vec<String>>,
    pub src: Vec<PathBuf>,
    pub cxx_flags: Vec<String>,
}

/// A `[kernel.<name>]` table.
#[derive(Debug, Clone, Serialize)]
pub struct Kernel {
    pub name: String,
    pub backend: Backend,
    /// Sources relative to the root, in the order written (headers may be listed).
    pub src: Vec<PathBuf>,
    /// Include dirs relative to the root.
    pub include: Vec<PathBuf>,
    pub depends: Vec<Dependency>,
    /// Where each entry of `depends` is written (same order).
    #[serde(skip)]
    pub depends_locations: Vec<Location>,
    /// `cuda-capabilities` (real capabilities only; entries no GPU has are dropped with a
    /// warning); `None` means the project's matrix.
    pub cuda_capabilities: Option<Vec<Capability>>,
    pub cuda_flags: Vec<String>,
    pub cxx_flags: Vec<String>,
    /// `cuda-minver`: the oldest CUDA toolkit this kernel builds with (HF skips the kernel on
    /// older toolkits).
    pub cuda_minver: Option<Version>,
    /// `rocm-archs` of a rocm kernel.
    pub rocm_archs: Vec<String>,
    /// `hip-flags` of a rocm kernel.
    pub hip_flags: Vec<String>,
    /// `sycl-flags` of an xpu kernel.
    pub sycl_flags: Vec<String>,
    /// Where `[kernel.<name>]` is written, for messages from later stages.
    #[serde(skip)]
    pub location: Location,
    /// Where each entry of `cuda_capabilities` is written (same order; empty when `None`).
    #[serde(skip)]
    pub capability_locations: Vec<Location>,
}

/// An entry of a kernel's `depends`: a C++ library it compiles against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dependency {
    /// `torch`: Torch's headers (every Torch extension has them).
    Torch,
    /// `cutlass_X_Y`: the CUTLASS headers of release X.Y.
    Cutlass { major: u32, minor: u32 },
    /// `metal-cpp`: Apple's C++ bindings for Metal.
    MetalCpp,
    /// `sycl_tla`: Intel's SYCL templates for linear algebra.
    SyclTla,
}

impl serde::Serialize for Dependency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dependency::Torch => f.write_str("torch"),
            Dependency::Cutlass { major, minor } => write!(f, "cutlass_{major}_{minor}"),
            Dependency::MetalCpp => f.write_str("metal-cpp"),
            Dependency::SyclTla => f.write_str("sycl_tla"),
        }
    }
}

/// A kernel backend named in build.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cann,
    Cpu,
    Cuda,
    Metal,
    Neuron,
    Rocm,
    Tpu,
    Xpu,
}

impl Backend {
    /// The name used in build.toml, variant names and metadata.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cann => "cann",
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Metal => "metal",
            Backend::Neuron => "neuron",
            Backend::Rocm => "rocm",
            Backend::Tpu => "tpu",
            Backend::Xpu => "xpu",
        }
    }

    /// Whether kbuild can build this backend (the others are skipped with a message).
    pub fn is_supported(self) -> bool {
        matches!(self, Backend::Cpu | Backend::Cuda)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A floating-point dtype a kernel may be built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    Float32,
    Float16,
    BFloat16,
}

impl DType {
    pub const ALL: [DType; 3] = [DType::Float32, DType::Float16, DType::BFloat16];

    /// The torch name (`float32`, `float16`, `bfloat16`).
    pub fn as_str(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
        }
    }

    /// The suffix of the generated C macro `KBUILD_HAS_<X>`.
    pub fn macro_suffix(self) -> &'static str {
        match self {
            DType::Float32 => "FP32",
            DType::Float16 => "FP16",
            DType::BFloat16 => "BF16",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// kbuild's `[kbuild]` extension table.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KbuildExt {
    /// `[kbuild.cuda-capabilities]`: the project's CUDA capability matrix with the dtypes each
    /// capability is built for (dtypes in `DType` order, no duplicates). Empty: no matrix declared
    /// (kernel lists or kbuild's default apply, with every dtype).
    pub capabilities: BTreeMap<Capability, Vec<DType>>,
    /// Where each capability key of the matrix is written.
    #[serde(skip)]
    pub locations: BTreeMap<Capability, Location>,
}

/// Something build.toml allows but that is probably a mistake; commands print it as a warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigWarning {
    #[serde(serialize_with = "serialize_display")]
    pub location: Location,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

impl ConfigWarning {
    /// The warning as commands print it: its line, then `  hint: …` when it has one.
    pub fn with_hint(&self) -> String {
        match &self.hint {
            Some(hint) => format!("{self}\n  hint: {hint}"),
            None => self.to_string(),
        }
    }
}

fn serialize_display<T: fmt::Display, S: serde::Serializer>(
    v: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}
