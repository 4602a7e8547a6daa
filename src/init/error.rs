//! What can stop `kbuild init`.

use std::path::PathBuf;

use crate::hint::Hint;

/// A failure of `kbuild init`; nothing is written for the argument errors.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("invalid kernel name `{name}`: use lowercase letters, digits and `-`")]
    InvalidName {
        name: String,
        suggestion: Option<String>,
    },
    #[error("`{repo}` is not a Hub repository id")]
    InvalidRepo { repo: String },
    #[error("cannot tell the kernel's name from `{}`", dir.display())]
    NoName { dir: PathBuf },
    #[error("kbuild init cannot scaffold the backend `{backend}`")]
    UnsupportedBackend { backend: String },
    #[error("no backend given")]
    NoBackends,
    #[error("invalid license `{license}`")]
    InvalidLicense { license: String },
    #[error("`{}` exists already", path.display())]
    Exists { path: PathBuf },
    #[error("cannot write `{}`", path.display())]
    Write {
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
}

impl Hint for InitError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            InitError::InvalidName { suggestion, .. } => format!(
                "start with a letter, end with a letter or digit{}; the Python package is the name \
                 with `-` replaced by `_`",
                suggestion
                    .as_ref()
                    .map(|s| format!(", e.g. `--name {s}`"))
                    .unwrap_or_default()
            ),
            InitError::NoName { .. } => "pass `--name my-kernel`".into(),
            InitError::InvalidRepo { .. } => {
                "pass `--repo owner/name` (letters, digits, `-`, `_`, `.`), e.g. \
                 `--repo my-org/my-kernel`"
                    .into()
            }
            InitError::UnsupportedBackend { .. } | InitError::NoBackends => {
                "kbuild builds `cuda` and `cpu`: pass `--backends cuda,cpu` or one of them".into()
            }
            InitError::InvalidLicense { .. } => {
                "pass a Hub license identifier, e.g. `--license apache-2.0`".into()
            }
            InitError::Exists { .. } => {
                "choose an empty directory, or pass `--overwrite` to replace the skeleton's files"
                    .into()
            }
            InitError::Write { .. } => "check the directory's permissions and free space".into(),
            InitError::Template { .. } => "this is a kbuild bug: please report it".into(),
        })
    }
}
