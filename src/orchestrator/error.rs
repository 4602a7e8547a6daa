//! Why a build failed, at the stage that failed; each stage's error keeps its own `hint:`.

use std::path::PathBuf;

use crate::compile::CompileError;
use crate::config::ConfigError;
use crate::depends::DepsError;
use crate::hint::Hint;
use crate::link::LinkError;
use crate::managed::InstallError;
use crate::package::PackageError;
use crate::plan::PlanError;
use crate::process::Interrupted;
use crate::toolchain::ToolchainError;

/// A build that failed, at the stage that failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Config(Box<ConfigError>),
    #[error(transparent)]
    Toolchain(Box<ToolchainError>),
    #[error(transparent)]
    Deps(Box<DepsError>),
    #[error(transparent)]
    Plan(Box<PlanError>),
    #[error(transparent)]
    Compile(Box<CompileError>),
    #[error(transparent)]
    Link(Box<LinkError>),
    #[error(transparent)]
    Package(Box<PackageError>),
    #[error(transparent)]
    Managed(Box<InstallError>),
    /// No managed toolchain for a requested torch, and the default Python has another.
    #[error("no toolchain for torch {wanted}: none is installed and `{}` has torch {found}", python.display())]
    TorchNotFound {
        wanted: String,
        python: PathBuf,
        found: String,
        /// The torch comes from kbuild.lock (not `--torch`).
        locked: bool,
    },
    /// `--variant` names a variant this build does not make.
    #[error("`--variant {name}` is not built here (variants: {valid})")]
    UnknownVariant { name: String, valid: String },
    /// Two toolchains would write the same variant.
    #[error("two toolchains both build variant `{name}`")]
    DuplicateVariant { name: String },
    /// `--out-dir` inside a directory the build reads.
    #[error(
        "the output directory `{}` is inside `{}`, {what}",
        out_dir.display(),
        dir.display()
    )]
    OutDirInSources {
        out_dir: PathBuf,
        /// Relative to the project root.
        dir: PathBuf,
        what: &'static str,
    },
    /// A path compilers write into dependency files, which kbuild reads as UTF-8 text.
    #[error("the {what} path `{}` is not valid UTF-8", path.display())]
    NonUtf8Path { what: &'static str, path: PathBuf },
    /// SIGINT/SIGTERM stopped the build between two steps.
    #[error("the build stopped: {0}")]
    Interrupted(Interrupted),
    /// The output directory's lock could not be taken.
    #[error("cannot {action} `{}`", path.display())]
    Lock {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The record of the last build (the no-op fast path) could not be removed.
    #[error("cannot remove `{}`", path.display())]
    Record {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Hint for BuildError {
    fn hint(&self) -> Option<String> {
        match self {
            BuildError::Config(e) => e.hint(),
            BuildError::Toolchain(e) => e.hint(),
            BuildError::Deps(e) => e.hint(),
            BuildError::Plan(e) => e.hint(),
            BuildError::Compile(e) => e.hint(),
            BuildError::Link(e) => e.hint(),
            BuildError::Package(e) => e.hint(),
            BuildError::Managed(e) => e.hint(),
            BuildError::TorchNotFound {
                wanted,
                locked: true,
                ..
            } => Some(format!(
                "install kbuild.lock's toolchains: `kbuild toolchain install`, or pass `--python` \
                 with a torch {wanted} interpreter"
            )),
            BuildError::TorchNotFound { wanted, .. } => Some(format!(
                "install it: `kbuild toolchain install --torch {wanted}`, or pass `--python` with \
                 a torch {wanted} interpreter"
            )),
            BuildError::UnknownVariant { .. } => Some(
                "use one of the variants listed; `--torch` and `--backend` decide which are built"
                    .into(),
            ),
            BuildError::DuplicateVariant { .. } => Some(
                "ask for one toolchain per torch version (`--torch`, kbuild.lock), or build the \
                 clashing backend with `--backend`"
                    .into(),
            ),
            BuildError::OutDirInSources { .. } => Some(
                "pass an `--out-dir` outside the project's sources and Python package (or leave \
                 it out for `build/`): builds there would be copied into every new variant"
                    .into(),
            ),
            BuildError::NonUtf8Path { .. } => Some(
                "rename the directory (or move the project) to a UTF-8 path: kbuild reads the \
                 compilers' dependency files, which hold these paths, as UTF-8 text"
                    .into(),
            ),
            BuildError::Interrupted(_) => Some(
                "run the build again to finish it: variants in place are whole, old or new".into(),
            ),
            BuildError::Lock { .. } | BuildError::Record { .. } => Some(
                "check that the output directory (`--out-dir`) can be created and written".into(),
            ),
        }
    }
}

// Stage errors are boxed to keep `Result<T, BuildError>` small; `?` converts through these.
macro_rules! from_stage {
    ($($variant:ident => $ty:ty),* $(,)?) => {$(
        impl From<$ty> for BuildError {
            fn from(e: $ty) -> Self {
                BuildError::$variant(Box::new(e))
            }
        }
    )*};
}

from_stage! {
    Config => ConfigError,
    Toolchain => ToolchainError,
    Deps => DepsError,
    Plan => PlanError,
    Compile => CompileError,
    Link => LinkError,
    Package => PackageError,
    Managed => InstallError,
}

// Not `#[from]`: that would also make the signal the error's source, said twice.
impl From<Interrupted> for BuildError {
    fn from(signal: Interrupted) -> Self {
        BuildError::Interrupted(signal)
    }
}
