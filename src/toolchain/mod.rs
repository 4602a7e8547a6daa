//! Toolchain discovery: Python + torch facts, nvcc, the host C++ compiler, and preflight.
//!
//! Python is found from `--python`, `KBUILD_PYTHON`, the active venv, the project's `.venv`, then
//! `python3`; one Python call reads every torch fact the build needs. nvcc comes from `--nvcc`,
//! `CUDA_HOME`, `PATH`, then the pip CUDA (`site-packages/nvidia/cu*/bin/nvcc`) next to torch.

mod facts;
mod nvcc;
mod python;
mod torch;

pub use facts::{FactCache, FileStamp, kbuild_stamp};
pub use nvcc::{Nvcc, find_nvcc};
pub use python::{
    PROBE_IMPORT_ENV, Python, TORCH_PROBE, TorchCmakeDefines, TorchInfo, find_python,
};
pub use torch::{ExtensionFlags, TorchEnv, find_torch, target_version_define};

use std::path::{Path, PathBuf};

use crate::depends::{DependencyHeaders, DepsSettings};
use crate::hint::Hint;
use crate::process::{self, CommandFailure, CommandSpec, on_new_line};

/// The exact pip command that installs a matching toolchain into the project's `.venv`.
pub const INSTALL_HINT: &str = "python3 -m venv .venv && .venv/bin/pip install \"torch==2.15.0\" \
     \"cuda-toolkit[nvcc,cccl,cuobjdump]==13.2.2\" \"kernels==0.17.2\" numpy";

/// A missing or unusable tool, with the command that fixes it.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error("no Python interpreter found (tried {tried})")]
    NoPython { tried: String },
    #[error("`{}` does not exist (from {origin})", python.display())]
    NoSuchPython { python: PathBuf, origin: String },
    #[error("`{}` could not run the torch probe{}", python.display(), on_new_line(output))]
    PythonFailed {
        python: PathBuf,
        /// What the interpreter printed (stderr, then stdout).
        output: String,
        #[source]
        failure: Box<CommandFailure>,
    },
    #[error("the torch probe of `{}` printed something unexpected: `{line}`", python.display())]
    ProbeOutput {
        python: PathBuf,
        line: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("torch is not installed for `{python}`")]
    NoTorch { python: PathBuf },
    #[error("no nvcc found (tried {tried})")]
    NoNvcc { tried: String },
    #[error("`{nvcc}` is CUDA {nvcc_version} but torch {torch} was built for CUDA {torch_cuda}")]
    NvccMajorMismatch {
        nvcc: PathBuf,
        nvcc_version: String,
        torch: String,
        torch_cuda: String,
    },
    #[error("`{}` does not exist (from {origin})", tool.display())]
    NoSuchTool { tool: PathBuf, origin: String },
    #[error("`{}` failed{}", tool.display(), on_new_line(output))]
    ToolFailed {
        tool: PathBuf,
        /// What the tool printed (stderr, then stdout).
        output: String,
        #[source]
        failure: Box<CommandFailure>,
    },
    #[error("cannot read {what} from the output of `{}`: `{output}`", tool.display())]
    ToolOutput {
        tool: PathBuf,
        what: &'static str,
        output: String,
    },
    #[error("no C++ compiler found: {reason}")]
    NoCxx { reason: String },
    #[error(
        "`{cxx}` cannot link the shared libstdc++ (`-print-file-name=libstdc++.so` finds none), \
         and no `c++`/`g++` on PATH can either"
    )]
    NoSharedLibstdcxx { cxx: PathBuf },
}

impl Hint for ToolchainError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            ToolchainError::NoPython { .. } | ToolchainError::NoTorch { .. } => format!(
                "install torch (and a matching CUDA compiler) into the project venv: \
                 `{INSTALL_HINT}`, or pass `--python <path>` / set `KBUILD_PYTHON`"
            ),
            ToolchainError::NoSuchPython { .. }
            | ToolchainError::PythonFailed { .. }
            | ToolchainError::ProbeOutput { .. } => {
                "pass a working interpreter with `--python <path>` or `KBUILD_PYTHON`".into()
            }
            ToolchainError::NoNvcc { .. } => format!(
                "install the CUDA compiler that matches torch: `.venv/bin/pip install \
                 \"cuda-toolkit[nvcc,cccl,cuobjdump]==13.2.2\"` (full setup: `{INSTALL_HINT}`), \
                 or pass `--nvcc <path>` / set `CUDA_HOME`; to skip CUDA use `--backend cpu`"
            ),
            ToolchainError::NvccMajorMismatch { torch_cuda, .. } => format!(
                "install a CUDA {torch_cuda} compiler (pip: `cuda-toolkit[nvcc,cccl]=={torch_cuda}.*`) \
                 or a torch built for your nvcc, or pass `--nvcc <path>`"
            ),
            ToolchainError::NoSuchTool { .. } => "check the path you passed".into(),
            ToolchainError::ToolFailed { .. } | ToolchainError::ToolOutput { .. } => {
                "check that the tool runs on its own".into()
            }
            ToolchainError::NoCxx { .. } => {
                "install g++ (`apt install g++`) or set `CXX` to a C++ compiler".into()
            }
            ToolchainError::NoSharedLibstdcxx { .. } => {
                "a torch extension must share the process's C++ runtime: install g++ with its \
                 libstdc++ development files (`apt install g++`) or set `CXX` to such a compiler"
                    .into()
            }
        })
    }
}

/// Where to look for the tools: paths given on the command line (`None`: search).
#[derive(Debug, Clone, Default)]
pub struct ToolchainSettings {
    pub python: Option<PathBuf>,
    pub nvcc: Option<PathBuf>,
    /// Where the libraries of `depends` (CUTLASS) are looked for.
    pub deps: DepsSettings,
}

/// The tools one build runs with. A build for several torch versions has one per torch.
#[derive(Debug, Clone, Default)]
pub struct Toolchain {
    /// `None` for noarch (pure Python) projects, which need no toolchain.
    pub torch: Option<TorchEnv>,
    /// Needed for every compiled backend (it links the extension).
    pub cxx: Option<Cxx>,
    /// Needed for the `cuda` backend of a compiled project.
    pub nvcc: Option<Nvcc>,
    /// The headers of the libraries the built kernels list in `depends` (besides torch).
    pub deps: Vec<DependencyHeaders>,
}

impl Toolchain {
    /// torch's own facts, when there is a torch.
    pub fn torch_info(&self) -> Option<&TorchInfo> {
        self.torch.as_ref().map(|t| &t.info)
    }
}

/// The host C++ compiler.
#[derive(Debug, Clone)]
pub struct Cxx {
    pub path: PathBuf,
    /// First line of `--version`: part of every cache key.
    pub version: String,
    /// Non-fatal findings (a `CXX` that was passed over).
    pub warnings: Vec<String>,
}

impl Cxx {
    /// Whether the compiler takes `-fno-gnu-unique` (GCC's flag; clang has no GNU-unique
    /// symbols to turn off and rejects it). HF's CMake asks with `check_cxx_compiler_flag`.
    pub fn has_gnu_unique(&self) -> bool {
        !self.version.to_ascii_lowercase().contains("clang")
    }
}

/// Locate the host C++ compiler (honours `CXX`) through the `cc` crate, insisting on one that
/// links libstdc++ dynamically. The choice and the compiler's answers are remembered in
/// `facts` while the variables that steer the choice, the `PATH` directories and the compiler
/// are unchanged (the `cc` crate starts the compiler to detect its family).
pub fn find_cxx(facts: &FactCache) -> Result<Cxx, ToolchainError> {
    let target = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let underscored = target.replace('-', "_");
    let steering = [
        "CXX".to_string(),
        "HOST_CXX".into(),
        "TARGET_CXX".into(),
        format!("CXX_{target}"),
        format!("CXX_{underscored}"),
        "PATH".into(),
    ];
    let steering: Vec<&str> = steering.iter().map(String::as_str).collect();
    let question = format!(
        "cc crate C++ compiler for {target} {}",
        facts::env_part(&steering)
    );
    let chosen = facts.answer(&question, || {
        let compiler = cc::Build::new()
            .cpp(true)
            .cargo_metadata(false)
            .cargo_warnings(false)
            .target(&target)
            .host(&target)
            .opt_level(3)
            .try_get_compiler()
            .map_err(|e| ToolchainError::NoCxx {
                reason: e.to_string(),
            })?;
        let path = compiler.path().to_path_buf();
        let mut watch = facts::path_dirs();
        watch.extend(resolve_program(&path));
        Ok((path.to_string_lossy().into_owned(), watch))
    })?;
    choose_cxx(Path::new(&chosen), &["c++", "g++"], facts)
}

/// `preferred` if it links the shared libstdc++, else the first of `fallbacks` (on PATH) that
/// does, with a warning. An extension that carries its own static copy of the C++ runtime
/// crashes when a C++ exception (every `TORCH_CHECK`) crosses into torch: seen with a
/// `CXX=/opt/gcc/bin/g++` that had only `libstdc++.a`.
pub fn choose_cxx(
    preferred: &Path,
    fallbacks: &[&str],
    facts: &FactCache,
) -> Result<Cxx, ToolchainError> {
    let path = resolve_program(preferred).ok_or_else(|| ToolchainError::NoCxx {
        reason: format!("`{}` is not on PATH", preferred.display()),
    })?;
    let mut warnings = Vec::new();
    let chosen = if links_shared_libstdcxx(&path, facts) {
        path
    } else {
        let alternative = fallbacks
            .iter()
            .filter_map(|name| resolve_program(Path::new(name)))
            .find(|alt| links_shared_libstdcxx(alt, facts))
            .ok_or_else(|| ToolchainError::NoSharedLibstdcxx { cxx: path.clone() })?;
        warnings.push(format!(
            "`{}` has no shared libstdc++ (an extension linked with it would carry its own C++ \
             runtime and crash when torch catches its exceptions); using `{}` instead",
            path.display(),
            alternative.display()
        ));
        alternative
    };
    let version = capture_known(facts, &chosen, &["--version"])?
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    Ok(Cxx {
        path: chosen,
        version,
        warnings,
    })
}

/// Whether `cxx -print-file-name=libstdc++.so` names an existing file (it echoes the bare name
/// when the compiler has none).
fn links_shared_libstdcxx(cxx: &Path, facts: &FactCache) -> bool {
    capture_known(facts, cxx, &["-print-file-name=libstdc++.so"])
        .map(|out| Path::new(out.trim()).is_absolute() && Path::new(out.trim()).exists())
        .unwrap_or(false)
}

/// [`capture`], remembered in `facts` while `tool` is unchanged.
pub(crate) fn capture_known(
    facts: &FactCache,
    tool: &Path,
    args: &[&str],
) -> Result<String, ToolchainError> {
    let question = format!("{} {}", tool.display(), args.join(" "));
    facts.answer(&question, || {
        Ok((capture(tool, args)?, vec![tool.to_path_buf()]))
    })
}

/// Run `tool args…` and return its stdout; a failure names the tool and what it printed.
pub(crate) fn capture(tool: &Path, args: &[&str]) -> Result<String, ToolchainError> {
    let mut spec = CommandSpec::new(tool);
    spec.args(args);
    let out = process::run(&spec).map_err(|failure| ToolchainError::ToolFailed {
        tool: tool.to_path_buf(),
        output: failure.diagnostics(),
        failure: Box::new(failure),
    })?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A program name or path → an absolute executable path, searching `PATH` for bare names.
pub(crate) fn resolve_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = crate::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_compiler(dir: &Path, name: &str, libstdcxx: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        let script = format!(
            "#!/bin/sh\ncase \"$1\" in\n  -print-file-name=*) echo '{libstdcxx}' ;;\n  --version) echo '{name} 1.0' ;;\nesac\n"
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn a_cxx_without_shared_libstdcxx_is_passed_over_for_one_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let real_so = dir.path().join("libstdc++.so");
        std::fs::write(&real_so, "").unwrap();
        let static_only = fake_compiler(dir.path(), "static-g++", "libstdc++.so");
        let good = fake_compiler(dir.path(), "good-g++", &real_so.display().to_string());
        let cxx = choose_cxx(
            &static_only,
            &[good.to_str().unwrap()],
            &FactCache::in_memory(),
        )
        .unwrap();
        assert_eq!(cxx.path, good);
        assert_eq!(cxx.version, "good-g++ 1.0");
        assert!(cxx.warnings[0].contains("static-g++"), "{:?}", cxx.warnings);
    }

    #[test]
    fn no_compiler_with_shared_libstdcxx_is_an_error_with_a_hint() {
        let dir = tempfile::tempdir().unwrap();
        let static_only = fake_compiler(dir.path(), "static-g++", "libstdc++.so");
        let err = choose_cxx(
            &static_only,
            &[static_only.to_str().unwrap()],
            &FactCache::in_memory(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("shared libstdc++"), "{err}");
        assert!(err.hint().unwrap().contains("CXX"));
    }
}
