//! What can go wrong verifying variants (a variant that fails a check is a finding, not an error).

use std::path::PathBuf;

use crate::hint::Hint;
use crate::orchestrator::BuildError;
use crate::package::PackageError;

/// A failure to read, download or rebuild what `kbuild verify` was asked to check.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("`{}` does not exist", path.display())]
    Missing { path: PathBuf },
    #[error("no variant in `{}` (a variant directory holds a metadata.json)", path.display())]
    NoVariants { path: PathBuf },
    #[error(transparent)]
    Package(#[from] PackageError),
    #[error(transparent)]
    Sign(#[from] crate::sign::SignError),
    #[error("cannot use the temporary directory `{}`", path.display())]
    Temp {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot download `{repo}` at `{revision}` from {endpoint}: {message}")]
    Download {
        endpoint: String,
        repo: String,
        revision: String,
        message: String,
    },
    #[error("`{repo}` has no `build/<variant>/metadata.json` at `{revision}`")]
    NothingPublished { repo: String, revision: String },
    #[error("cannot rebuild from the sources here")]
    Rebuild(#[source] Box<BuildError>),
    #[error(
        "the rebuild made no variant `{variant}`: this toolchain builds [{}]",
        built.join(", ")
    )]
    NotRebuilt { variant: String, built: Vec<String> },
    #[error("`{}` of `{variant}` names no op namespace of backend `{backend}`: `{id}`", dir.display())]
    UnknownId {
        variant: String,
        dir: PathBuf,
        backend: String,
        id: String,
    },
}

impl Hint for VerifyError {
    fn hint(&self) -> Option<String> {
        match self {
            VerifyError::Missing { .. } | VerifyError::NoVariants { .. } => Some(
                "give a variant directory, a build directory, an artifact (`.tar.gz`) or a wheel, \
                 or `--repo ORG/NAME --version N` for a published kernel"
                    .into(),
            ),
            VerifyError::Package(e) => e.hint(),
            VerifyError::Sign(e) => e.hint(),
            VerifyError::Temp { .. } => Some("set `TMPDIR` to a writable directory".into()),
            VerifyError::Download { .. } => Some(
                "check the repository and version (`kbuild publish` pushes version N to branch \
                 `vN`), `HF_ENDPOINT` and, for a private repository, `HF_TOKEN`"
                    .into(),
            ),
            VerifyError::NothingPublished { .. } => {
                Some("pass the version the kernel was published as (`--version N`) or `--revision`".into())
            }
            VerifyError::Rebuild(e) => e.hint(),
            VerifyError::NotRebuilt { .. } => Some(
                "rebuild with the toolchain the variant names (torch and CUDA versions): \
                 `--python` of an environment with that torch, or `kbuild toolchain install --torch X.Y`"
                    .into(),
            ),
            VerifyError::UnknownId { .. } => Some(
                "the metadata.json was not written by kbuild or HF's kernel-builder; it cannot be rebuilt here"
                    .into(),
            ),
        }
    }
}
