//! Hub variant writer: generated files, metadata.json with digest, staged and renamed into place.

pub mod verify;

use std::path::PathBuf;

use crate::error::Hint;

/// A packaging failure.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("placeholder")]
    Placeholder,
    /// A file of a built variant could not be read.
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `metadata.json` of a variant is not what kernels expects.
    #[error("invalid `{}`: {message}", path.display())]
    Metadata { path: PathBuf, message: String },
    /// The files of a variant do not match the digest in its metadata.
    #[error("`{}` does not match the digest in its metadata.json:\n{}", dir.display(), violations.join("\n"))]
    Digest {
        dir: PathBuf,
        violations: Vec<String>,
    },
    /// The extension or `_ops.py` uses another op namespace than metadata `id`.
    #[error("`{}` uses op namespace `{found}`, but metadata.json says `{expected}`", path.display())]
    Namespace {
        path: PathBuf,
        expected: String,
        found: String,
    },
}

impl Hint for PackageError {
    fn hint(&self) -> Option<String> {
        match self {
            PackageError::Placeholder => None,
            PackageError::Read { .. } => Some("check the build directory's permissions, or rebuild it with `kbuild build`".into()),
            PackageError::Metadata { .. } | PackageError::Namespace { .. } => {
                Some("rebuild the variant with `kbuild build`; do not edit build outputs by hand".into())
            }
            PackageError::Digest { .. } => Some(
                "the variant changed after it was built (or a build was interrupted): rebuild it with `kbuild build`".into(),
            ),
        }
    }
}
