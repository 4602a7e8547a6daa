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
    /// For every unit: the Python limited API, the C++ ABI torch was built with and the
    /// definitions torch's CMake package gives every target that links it.
    pub defines: Vec<(String, Option<String>)>,
    /// For every unit of a CUDA variant: what torch's CMake package adds for `torch_cuda` (HF
    /// builds other backends against a torch without it).
    pub cuda_variant_defines: Vec<(String, Option<String>)>,
    /// For `.cu` units only: the defines torch's CMake config gives CUDA code.
    pub cuda_defines: Vec<(String, Option<String>)>,
    /// nvcc flags torch's CMake config gives CUDA code (device lambdas, relaxed constexpr).
    pub cuda_flags: Vec<String>,
    /// `-isystem` directories: torch's headers and Python's.
    pub include_dirs: Vec<PathBuf>,
    /// `-std=` of host C++ units (`gnu++NN`, see [`TorchInfo::cxx_standard`]).
    pub std: String,
    /// `-std=` of CUDA units: the same standard, as nvcc spells it (`c++NN`).
    pub cuda_std: String,
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
        let mut defines = vec![
            // HF's `Python3_add_library(... USE_SABI 3)`: CMake defines `Py_LIMITED_API=3`,
            // the Python 3.2 limited API (what `kbuild check` then holds to 3.9's stable ABI).
            define("Py_LIMITED_API", Some("3")),
            define(
                "_GLIBCXX_USE_CXX11_ABI",
                Some(if torch.cxx11_abi { "1" } else { "0" }),
            ),
        ];
        let cmake = |defines: &[String]| -> Vec<(String, Option<String>)> {
            let split = |d: &String| match d.split_once('=') {
                Some((name, value)) => define(name, Some(value)),
                None => define(d, None),
            };
            defines.iter().map(split).collect()
        };
        defines.extend(cmake(&torch.cmake_defines.torch_cpu));
        let std = torch.cxx_standard();
        ExtensionFlags {
            defines,
            // What torch's CMake config (`Caffe2/public/cuda.cmake`) puts into
            // `CMAKE_CUDA_FLAGS`, which HF's CMake build compiles every `.cu` with. Unlike
            // `torch.utils.cpp_extension`, it sets none of the `__CUDA_NO_HALF*` defines.
            cuda_defines: vec![define("ONNX_NAMESPACE", Some("onnx_c2"))],
            cuda_variant_defines: cmake(&torch.cmake_defines.torch_cuda),
            cuda_flags: vec![
                "-Xcudafe".into(),
                // nvcc splits `-Xcudafe` values at commas: one option per warning.
                [
                    "cc_clobber_ignored",
                    "field_without_dll_interface",
                    "base_class_has_different_dll_interface",
                    "dll_interface_conflict_none_assumed",
                    "dll_interface_conflict_dllexport_assumed",
                    "bad_friend_decl",
                ]
                .map(|d| format!("--diag_suppress={d}"))
                .join(","),
                "--expt-relaxed-constexpr".into(),
                "--expt-extended-lambda".into(),
            ],
            include_dirs,
            // CMake asks g++ for the GNU dialect (`CXX_EXTENSIONS` is on by default) and nvcc,
            // which has none, for the plain one; CUDA takes the standard of CXX.
            std: format!("gnu++{std}"),
            cuda_std: format!("c++{std}"),
            lib_dirs: vec![torch.lib_dir.clone()],
            libs: vec!["c10".into(), "torch".into(), "torch_cpu".into()],
            cuda_libs: vec!["c10_cuda".into(), "torch_cuda".into()],
        }
    }
}

/// `TORCH_TARGET_VERSION` for a stable-ABI build targeting torch `major.minor`: the encoding
/// torch's `stable/version.h` documents, written in hex as HF's preamble writes it.
pub fn target_version_define(major: u64, minor: u64) -> (String, Option<String>) {
    let value = (major << 56) | (minor << 48);
    ("TORCH_TARGET_VERSION".into(), Some(format!("{value:#x}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_version_is_major_and_minor_in_the_top_bytes() {
        let (name, value) = target_version_define(2, 10);
        assert_eq!(name, "TORCH_TARGET_VERSION");
        assert_eq!(value.as_deref(), Some("0x20a000000000000"));
        assert_eq!(
            target_version_define(2, 9).1.as_deref(),
            Some("0x209000000000000")
        );
    }
}
