//! The error a kbuild command ends with: a stage's error, or a failure of the command's own
//! output. Only `commands/` and `main.rs` use it; stages return their own error types.

use thiserror::Error;

use crate::check::CheckError;
use crate::clean::CleanError;
use crate::config::ConfigError;
use crate::develop::DevelopError;
use crate::hint::Hint;
use crate::managed::InstallError;
use crate::orchestrator::BuildError;
use crate::package::PackageError;
use crate::pep517::Pep517Error;
use crate::publish::PublishError;
use crate::scaffold::ScaffoldError;
use crate::sign::SignError;
use crate::update_config::UpdateError;
use crate::verify::VerifyError;

/// Any failure of a kbuild command.
#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Config(Box<ConfigError>),
    #[error(transparent)]
    Build(Box<BuildError>),
    #[error(transparent)]
    Publish(Box<PublishError>),
    #[error(transparent)]
    Develop(Box<DevelopError>),
    #[error(transparent)]
    Package(Box<PackageError>),
    #[error(transparent)]
    Check(Box<CheckError>),
    /// `develop` installs exactly one variant; the selection holds another number.
    #[error("`kbuild develop` installs one variant, but {} are selected: [{}]", variants.len(), variants.join(", "))]
    NotOneVariant { variants: Vec<String> },
    #[error(transparent)]
    Toolchains(Box<InstallError>),
    #[error(transparent)]
    Scaffold(Box<ScaffoldError>),
    #[error(transparent)]
    Clean(Box<CleanError>),
    #[error(transparent)]
    Pep517(Box<Pep517Error>),
    #[error(transparent)]
    UpdateConfig(Box<UpdateError>),
    /// `kbuild update-config --check` found a v4 build.toml.
    #[error("`{}` is v4 (no `edition`) and needs updating to edition 5", path.display())]
    ConfigOutdated { path: std::path::PathBuf },
    /// `kbuild hash` found variants whose files do not match their digest.
    #[error("{count} variant(s) do not match the digest in their metadata.json")]
    DigestMismatch { count: usize },
    #[error(transparent)]
    Verify(Box<VerifyError>),
    #[error(transparent)]
    Sign(Box<SignError>),
    /// `kbuild verify` found variants that fail a check.
    #[error("{failed} of {total} variant(s) failed verification")]
    VerifyFailed { failed: usize, total: usize },
    /// A command's result could not be encoded for `--json`.
    #[error("cannot encode {what} as JSON")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// Printing the result failed (other than a closed pipe).
    #[error("cannot write to stdout")]
    Stdout {
        #[source]
        source: std::io::Error,
    },
    /// The async runtime publishing runs on could not start.
    #[error("cannot start the async runtime")]
    Runtime {
        #[source]
        source: std::io::Error,
    },
}

impl Hint for Error {
    fn hint(&self) -> Option<String> {
        match self {
            Error::Config(e) => e.hint(),
            Error::Build(e) => e.hint(),
            Error::Publish(e) => e.hint(),
            Error::Develop(e) => e.hint(),
            Error::Package(e) => e.hint(),
            Error::Check(e) => e.hint(),
            Error::NotOneVariant { .. } => {
                Some("choose one with `--variant` (`kbuild list-variants` names them) or `--backend`".into())
            }
            Error::Toolchains(e) => e.hint(),
            Error::Scaffold(e) => e.hint(),
            Error::Clean(e) => e.hint(),
            Error::Pep517(e) => e.hint(),
            Error::UpdateConfig(e) => e.hint(),
            Error::ConfigOutdated { .. } => {
                Some("run `kbuild update-config` and commit the new build.toml".into())
            }
            Error::DigestMismatch { .. } => Some(
                "rebuild, or run `kbuild hash --write` if the files changed on purpose".into(),
            ),
            Error::Verify(e) => e.hint(),
            Error::Sign(e) => e.hint(),
            Error::VerifyFailed { .. } => Some(
                "the lines above name each failed check: do not load these files unless you know why they differ".into(),
            ),
            Error::Json { .. } => Some("this is a kbuild bug: please report it".into()),
            Error::Stdout { .. } => Some(
                "stdout goes to a full disk or a file that cannot take more: redirect it elsewhere, or free space".into(),
            ),
            Error::Runtime { .. } => None,
        }
    }
}

// Boxed to keep `Result<T, Error>` small; `?` converts through these.
macro_rules! from_boxed {
    ($($variant:ident => $ty:ty),* $(,)?) => {$(
        impl From<$ty> for Error {
            fn from(e: $ty) -> Self {
                Error::$variant(Box::new(e))
            }
        }
    )*};
}

from_boxed! {
    Config => ConfigError,
    Build => BuildError,
    Publish => PublishError,
    Develop => DevelopError,
    Package => PackageError,
    Check => CheckError,
    Toolchains => InstallError,
    Scaffold => ScaffoldError,
    Clean => CleanError,
    Pep517 => Pep517Error,
    UpdateConfig => UpdateError,
    Verify => VerifyError,
    Sign => SignError,
}

/// What a failed command reports: on stderr as text, under `--json` as
/// `{"error": {"message", "hint", "causes"}}` on stdout.
#[derive(Debug, serde::Serialize)]
pub struct ErrorReport {
    pub message: String,
    pub hint: Option<String>,
    /// The chain of causes, outermost first.
    pub causes: Vec<String>,
}

impl Error {
    /// The message, every cause once, and the hint.
    pub fn report(&self) -> ErrorReport {
        let mut causes = Vec::new();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            causes.push(cause.to_string());
            source = cause.source();
        }
        ErrorReport {
            message: self.to_string(),
            hint: self.hint(),
            causes,
        }
    }
}

impl ErrorReport {
    /// The text for stderr: `error:`, one `caused by:` per cause, then `hint:`.
    pub fn text(&self) -> String {
        let mut text = format!("error: {}\n", self.message);
        for cause in &self.causes {
            text.push_str(&format!("  caused by: {cause}\n"));
        }
        if let Some(hint) = &self.hint {
            text.push_str(&format!("  hint: {hint}\n"));
        }
        text
    }

    /// The JSON for stdout under `--json`.
    pub fn json(&self) -> String {
        #[derive(serde::Serialize)]
        struct Failed<'a> {
            error: &'a ErrorReport,
        }
        // Strings only: serializing cannot fail.
        serde_json::to_string_pretty(&Failed { error: self }).unwrap_or_default() + "\n"
    }
}

/// Result with the crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
