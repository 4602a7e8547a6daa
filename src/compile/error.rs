//! What a compile error says: the unit, the command, its status and the compiler's
//! diagnostics, with a `hint:` (compile's children build theirs here, not in `mod.rs`).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::config::Capability;
use crate::hint::Hint;
use crate::plan::{CompileJob, Lang};
use crate::process::{CommandFailure, Interrupted, describe_status, diagnostics, on_new_line};
use crate::schedule::JobError;

/// The remote's address is not a URL kbuild can use. The URL is not shown: where its login
/// ends is not known in a URL kbuild cannot read, and the reason names the part that is wrong.
#[derive(Debug, thiserror::Error)]
#[error("`KBUILD_REMOTE_CACHE` is not a usable remote cache: {why}")]
pub struct RemoteUrlError {
    pub why: String,
}

/// A compile that failed: the command, its status and the compiler's diagnostics.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The compiler ran and failed.
    #[error("compiling `{label}` failed: `{command}` {}{}", describe_status(*status), on_new_line(stderr))]
    CommandFailed {
        label: String,
        command: String,
        status: ExitStatus,
        /// stderr then stdout, trimmed to the last lines.
        stderr: String,
    },
    /// The compiler could not be started.
    #[error("compiling `{label}` failed: cannot run `{}`", program.display())]
    Spawn {
        label: String,
        program: PathBuf,
        lang: Lang,
        #[source]
        source: std::io::Error,
    },
    /// The compiler succeeded but its dependency file is missing or unreadable.
    #[error("compiling `{label}`: cannot read the dependency file `{}` the compiler wrote: {message}", path.display())]
    Depfile {
        label: String,
        path: PathBuf,
        message: String,
    },
    /// A file the unit depends on has a path that is not UTF-8 (shown lossily).
    #[error("compiling `{label}`: the dependency `{name}` has a path that is not valid UTF-8")]
    NonUtf8Dependency { label: String, name: String },
    /// SIGINT/SIGTERM stopped the compilers.
    #[error("compiling stopped: {0}")]
    Interrupted(Interrupted),
    /// `KBUILD_REMOTE_CACHE` does not name a usable server.
    #[error(transparent)]
    RemoteUrl(#[from] RemoteUrlError),
    /// Writing an object or a cache entry failed.
    #[error("cannot write `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CompileError {
    /// The error for a failed command run for unit `label`; `None` when it was cancelled.
    pub fn from_failure(label: &str, lang: Lang, failure: CommandFailure) -> Option<Self> {
        let label = label.to_string();
        Some(match failure {
            CommandFailure::Spawn {
                program, source, ..
            } => CompileError::Spawn {
                label,
                program,
                lang,
                source,
            },
            CommandFailure::Exited {
                command,
                status,
                ref stdout,
                ref stderr,
            } => CompileError::CommandFailed {
                stderr: diagnostics(stdout, stderr),
                label,
                command,
                status,
            },
            CommandFailure::Cancelled { .. } | CommandFailure::Interrupted { .. } => return None,
        })
    }
}

// Not `#[from]`: that would also make the signal the error's source, said twice.
impl From<Interrupted> for CompileError {
    fn from(signal: Interrupted) -> Self {
        CompileError::Interrupted(signal)
    }
}

impl Hint for CompileError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            CompileError::CommandFailed { status, .. } if status.code().is_none() => {
                "the compiler was killed; if by the out-of-memory killer (see `dmesg`), build with \
                 fewer parallel jobs, e.g. `kbuild build -j 1`"
                    .to_string()
            }
            CompileError::CommandFailed { .. } => {
                "fix the error reported above; the command line shown reproduces it".to_string()
            }
            CompileError::Spawn {
                lang: Lang::Cuda, ..
            } => {
                "install nvcc next to torch (`pip install \"cuda-toolkit[nvcc,cccl]==<torch's CUDA \
                  version>\"`), or pass `--nvcc PATH`"
                    .to_string()
            }
            CompileError::Spawn {
                lang: Lang::Cxx, ..
            } => "install a C++ compiler (`apt install g++`), or set `CXX` to one".to_string(),
            CompileError::Depfile { .. } => {
                "the compiler must support `-MD -MF FILE`; check that the configured compiler is \
                 nvcc or a gcc-compatible C++ compiler"
                    .to_string()
            }
            CompileError::NonUtf8Dependency { .. } => {
                "rename the directory or file to a UTF-8 name: kbuild reads the compiler's \
                 dependency file, which holds every header path, as UTF-8 text"
                    .to_string()
            }
            CompileError::Interrupted(_) => {
                "run the build again to finish it: objects compiled so far are kept".to_string()
            }
            CompileError::RemoteUrl(_) => {
                "set `KBUILD_REMOTE_CACHE` to `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (a `@`, \
                 `:` or `/` in the login written as `%40`, `%3A`, `%2F`), or unset it to build \
                 with the local cache only"
                    .to_string()
            }
            CompileError::Io { .. } => {
                "check free disk space and permissions of the build directory".to_string()
            }
        })
    }
}

/// The unit's error for a failed command, naming `shown` as the command.
pub(crate) fn job_error(
    job: &CompileJob,
    shown: &str,
    failure: CommandFailure,
) -> JobError<CompileError> {
    match CompileError::from_failure(&job.label, job.lang, failure) {
        Some(CompileError::CommandFailed {
            label,
            status,
            stderr,
            ..
        }) => JobError::Failed(CompileError::CommandFailed {
            label,
            command: shown.to_string(),
            status,
            stderr,
        }),
        Some(err) => JobError::Failed(err),
        None => JobError::Cancelled,
    }
}

/// The error for a file that cannot be read or written.
pub(crate) fn io_error(path: &Path, source: std::io::Error) -> CompileError {
    CompileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A `hint:` for a compiler failure, drawn from what the compiler printed: nvcc's
/// `Unsupported gpu architecture 'compute_70'` names the capability (in build.toml's spelling)
/// and the CUDA releases that build it; anything else as [`crate::hint::compiler_hint`] knows.
pub fn compiler_hint(output: &str) -> Option<String> {
    unsupported_arch_hint(output).or_else(|| crate::hint::compiler_hint(output))
}

/// The hint for nvcc's `Unsupported gpu architecture '<arch>'`.
fn unsupported_arch_hint(output: &str) -> Option<String> {
    let (_, rest) = output.split_once("nsupported gpu architecture '")?;
    let (arch, _) = rest.split_once('\'')?;
    let cap = Capability::from_nvcc_name(arch)?;
    let version = |(major, minor): (u32, u32)| format!("{major}.{minor}");
    let which = match cap.nvcc_releases() {
        (_, Some(last)) => format!(
            "CUDA {} is the last release whose nvcc builds it: build it with that CUDA \
             toolkit or an older one",
            version(last)
        ),
        (Some(first), None) => format!(
            "nvcc builds it from CUDA {} on: build it with that CUDA toolkit or a newer one",
            version(first)
        ),
        (None, None) => "build it with a CUDA toolkit whose nvcc lists it in \
                         `nvcc --list-gpu-arch`"
            .to_string(),
    };
    Some(format!(
        "this nvcc cannot build CUDA capability {cap} (`{arch}`); {which}, or drop {cap} from \
         the kernel's `cuda-capabilities` (`kbuild list-variants` shows what this nvcc builds)"
    ))
}
