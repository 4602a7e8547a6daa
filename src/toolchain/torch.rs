//! What compiling a torch extension takes from one torch install: defines, headers, libraries,
//! the C++ ABI and standard. Computed once per toolchain, shared by every variant planned for it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{FactCache, Python, ToolchainError, TorchInfo, find_python};

/// A Python with torch, and the extension flags its torch asks for.
#[derive(Debug, Clone, Serialize)]
pub struct TorchEnv {
    pub python: Python,
    pub info: TorchInfo,
    pub flags: ExtensionFlags,
}

/// Find the interpreter (`explicit` first, see [`find_python`]) and ask its torch about itself
/// (or take the answer `facts` remembers).
pub fn find_torch(
    explicit: Option<&Path>,
    project_root: &Path,
    facts: &FactCache,
) -> Result<TorchEnv, ToolchainError> {
    let python = find_python(explicit, project_root)?;
    let info = python.torch_info(facts)?;
    Ok(TorchEnv {
        flags: ExtensionFlags::for_torch(&info),
        python,
        info,
    })
}

/// The flags every extension built against one torch shares.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtensionFlags {
    /// For every unit: the stable-ABI Python limit and the C++ ABI torch was built with.
    pub defines: Vec<(String, Option<String>)>,
    /// For `.cu` units only: the half/bf16 rules torch's own extensions compile with.
    pub cuda_defines: Vec<(String, Option<String>)>,
    /// nvcc flags torch's headers need.
    pub cuda_flags: Vec<String>,
    /// `-isystem` directories: torch's headers and Python's.
    pub include_dirs: Vec<PathBuf>,
    /// `-std=` for code that includes torch headers: the standard torch was built with.
    pub std: String,
    pub lib_dirs: Vec<PathBuf>,
    /// Libraries every extension links.
    pub libs: Vec<String>,
    /// Libraries a CUDA extension links as well.
    pub cuda_libs: Vec<String>,
}

impl ExtensionFlags {
    pub fn for_torch(torch: &TorchInfo) -> Self {
        let define = |name: &str, value: Option<&str>| (name.to_string(), value.map(String::from));
        let mut include_dirs = torch.include_dirs.clone();
        include_dirs.push(torch.python_include.clone());
        ExtensionFlags {
            defines: vec![
                define("Py_LIMITED_API", Some("0x03090000")),
                define(
                    "_GLIBCXX_USE_CXX11_ABI",
                    Some(if torch.cxx11_abi { "1" } else { "0" }),
                ),
            ],
            cuda_defines: [
                "__CUDA_NO_HALF_OPERATORS__",
                "__CUDA_NO_HALF_CONVERSIONS__",
                "__CUDA_NO_BFLOAT16_CONVERSIONS__",
                "__CUDA_NO_HALF2_OPERATORS__",
            ]
            .into_iter()
            .map(|d| define(d, None))
            .collect(),
            cuda_flags: vec!["--expt-relaxed-constexpr".into()],
            include_dirs,
            std: torch.cxx_std(),
            lib_dirs: vec![torch.lib_dir.clone()],
            libs: vec!["c10".into(), "torch".into(), "torch_cpu".into()],
            cuda_libs: vec!["c10_cuda".into(), "torch_cuda".into()],
        }
    }
}
