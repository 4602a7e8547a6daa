//! What can go wrong writing or reading a variant.

use std::path::PathBuf;

use super::tree::TreeError;
use crate::hint::Hint;

/// The variable that raises (or lowers) the cap on what one archive may unpack to.
pub const MAX_UNPACKED_VAR: &str = "KBUILD_MAX_UNPACKED_SIZE";

/// `4 GiB`, `512 MiB`, `100 bytes`.
fn human_cap(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else {
        crate::files::human_size(bytes)
    }
}

/// A packaging or variant-verification failure.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("cannot write `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("template `{name}` failed to render")]
    Template {
        name: String,
        #[source]
        source: minijinja::Error,
    },
    /// A file of a built variant could not be read.
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A link, FIFO or device where a variant may hold regular files only.
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// `metadata.json` of a variant is not what kernels expects.
    #[error("invalid `{}`: {message}", path.display())]
    Metadata { path: PathBuf, message: String },
    /// The files of a variant do not match the digest in its metadata.json.
    #[error("`{}` does not match the digest in its metadata.json:\n{}", dir.display(), violations.join("\n"))]
    Digest {
        dir: PathBuf,
        violations: Vec<String>,
    },
    /// A wheel cannot be made for this variant.
    #[error("cannot make a wheel of variant `{variant}`: {reason}")]
    WheelUnsupported { variant: String, reason: String },
    /// Writing a zip archive (a wheel) failed.
    #[error("cannot write the zip archive `{}`", path.display())]
    Zip {
        path: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    /// No (or not every asked-for) variant directory in a build directory.
    #[error("no variant{} in `{}`", if missing.is_empty() { String::new() } else { format!(" `{}`", missing.join("`, `")) }, dir.display())]
    NoVariants { dir: PathBuf, missing: Vec<String> },
    /// An artifact holds an entry that unpacking refuses; nothing was written.
    #[error("refusing artifact `{}`: entry `{entry}`: {reason}", archive.display())]
    Artifact {
        archive: PathBuf,
        entry: String,
        reason: String,
    },
    /// An archive unpacks to more than the cap; nothing was written.
    #[error("refusing `{}`: it unpacks to more than {} (the cap is passed at entry `{entry}`)", archive.display(), human_cap(*cap))]
    TooLarge {
        archive: PathBuf,
        entry: String,
        cap: u64,
    },
    /// An archive cannot be read to its end: truncated or corrupt.
    #[error("cannot unpack `{}`: it is damaged or truncated{}", archive.display(), if entry.is_empty() { String::new() } else { format!(" (at entry `{entry}`)") })]
    Damaged {
        archive: PathBuf,
        entry: String,
        #[source]
        source: std::io::Error,
    },
    /// A wheel breaks a rule of its format (PEP 427 / PEP 376); nothing was written.
    #[error("refusing wheel `{}`: entry `{entry}`: {reason}", wheel.display())]
    Wheel {
        wheel: PathBuf,
        entry: String,
        reason: String,
    },
    /// A setting from the environment that cannot be used.
    #[error("`{name}` is `{value}`, but must be {expected}")]
    Setting {
        name: &'static str,
        value: String,
        expected: &'static str,
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
            PackageError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
                Some(
                    "the disk holding the output directory is full: free space on it, or build \
                     into another disk with `--out-dir`"
                        .into(),
                )
            }
            PackageError::Io { .. } => {
                Some("check permissions and free space of the output directory".into())
            }
            PackageError::WheelUnsupported { .. } => Some(
                "publish this variant to the Hub instead (`kbuild publish`), or load it with \
                 `kernels.get_local_kernel`"
                    .into(),
            ),
            PackageError::Zip { .. } => {
                Some("check permissions and free space of the wheel directory".into())
            }
            PackageError::Template { .. } => Some("this is a kbuild bug: please report it".into()),
            PackageError::Read { .. } => Some(
                "check the file's permissions; a file under `build/` is rebuilt by `kbuild build`"
                    .into(),
            ),
            PackageError::Tree(e) => e.hint(),
            PackageError::NoVariants { .. } => Some(
                "build first (`kbuild build`), or name the directory holding build/<variant>/ \
                 with `--build-dir`"
                    .into(),
            ),
            PackageError::Artifact { .. } => Some(
                "only unpack artifacts written by `kbuild pack`: they hold one variant \
                 directory of regular files"
                    .into(),
            ),
            PackageError::TooLarge { .. } => Some(format!(
                "unpack only archives you trust; if this one is, raise the cap with \
                 `{}` (e.g. `{}=16G`)",
                MAX_UNPACKED_VAR, MAX_UNPACKED_VAR
            )),
            PackageError::Damaged { .. } => Some(
                "the archive was cut short or corrupted (an interrupted download or copy): \
                 fetch it again, or write it again with `kbuild pack`"
                    .into(),
            ),
            PackageError::Wheel { .. } => Some(
                "only check wheels written by `kbuild wheel` or another PEP 427 tool; \
                 rebuild it with `kbuild wheel`"
                    .into(),
            ),
            PackageError::Setting { name, .. } => Some(format!(
                "set `{name}` to a size such as `8G`, or unset it for the default"
            )),
            PackageError::Metadata { .. } | PackageError::Namespace { .. } => Some(
                "rebuild the variant with `kbuild build`; do not edit build outputs by hand".into(),
            ),
            PackageError::Digest { .. } => Some(
                "the variant changed after it was built (or a build was interrupted): \
                 rebuild it with `kbuild build`"
                    .into(),
            ),
        }
    }
}
