//! The crate's top-level error: one variant per pipeline stage, each with a `hint:`.

use thiserror::Error;

use crate::hint::Hint;

/// Any failure of a kbuild command.
#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Config(Box<crate::config::ConfigError>),
    #[error(transparent)]
    Toolchain(Box<crate::toolchain::ToolchainError>),
    #[error(transparent)]
    Plan(Box<crate::plan::PlanError>),
    #[error(transparent)]
    Compile(Box<crate::compile::CompileError>),
    #[error(transparent)]
    Link(Box<crate::link::LinkError>),
    #[error(transparent)]
    Package(Box<crate::package::PackageError>),
    #[error(transparent)]
    Publish(Box<crate::publish::PublishError>),
    /// A failure outside the stages (the build lock, the output directory).
    #[error("{message}")]
    Other {
        message: String,
        hint: Option<String>,
    },
}

impl Error {
    /// An error with a message and a hint.
    pub fn other(message: impl Into<String>, hint: impl Into<Option<String>>) -> Self {
        Error::Other {
            message: message.into(),
            hint: hint.into(),
        }
    }
}

impl Hint for Error {
    fn hint(&self) -> Option<String> {
        match self {
            Error::Config(e) => e.hint(),
            Error::Toolchain(e) => e.hint(),
            Error::Plan(e) => e.hint(),
            Error::Compile(e) => e.hint(),
            Error::Link(e) => e.hint(),
            Error::Package(e) => e.hint(),
            Error::Publish(e) => e.hint(),
            Error::Other { hint, .. } => hint.clone(),
        }
    }
}

// Stage errors are boxed to keep `Result<T, Error>` small; `?` converts through these.
macro_rules! from_stage {
    ($($variant:ident => $ty:ty),* $(,)?) => {$(
        impl From<$ty> for Error {
            fn from(e: $ty) -> Self {
                Error::$variant(Box::new(e))
            }
        }
    )*};
}

from_stage! {
    Config => crate::config::ConfigError,
    Toolchain => crate::toolchain::ToolchainError,
    Plan => crate::plan::PlanError,
    Compile => crate::compile::CompileError,
    Link => crate::link::LinkError,
    Package => crate::package::PackageError,
    Publish => crate::publish::PublishError,
}

/// Result with the crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
