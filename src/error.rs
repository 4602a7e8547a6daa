//! The error a kbuild command ends with: a stage's error, or a failure of the command's own
//! output. Only `commands/` and `main.rs` use it; stages return their own error types.

use thiserror::Error;

use crate::check::CheckError;
use crate::clean::CleanError;
use crate::compile::CompileError;
use crate::config::ConfigError;
use crate::develop::DevelopError;
use crate::hint::Hint;
use crate::init::InitError;
use crate::managed::InstallError;
use crate::orchestrator::BuildError;
use crate::package::PackageError;
use crate::publish::PublishError;
use crate::pyproject::PyprojectError;
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
    #[error(transparent)]
    Toolchains(Box<InstallError>),
    #[error(transparent)]
    Scaffold(Box<InitError>),
    #[error(transparent)]
    Clean(Box<CleanError>),
    #[error(transparent)]
    Pep517(Box<PyprojectError>),
    #[error(transparent)]
    UpdateConfig(Box<UpdateError>),
    /// `kbuild update-config --check` found a v4 build.toml.
    #[error("`{}` is v4 (no `edition`) and needs updating to edition 5", path.display())]
    ConfigOutdated { path: std::path::PathBuf },
    /// A command that reads a build ran before any build wrote one.
    #[error("`{}` does not exist: nothing has been built yet", path.display())]
    NotBuilt {
        path: std::path::PathBuf,
        /// How the command names another place to read (`--build-dir`, `PATH`).
        other: &'static str,
    },
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
            Error::Toolchains(e) => e.hint(),
            Error::Scaffold(e) => e.hint(),
            Error::Clean(e) => e.hint(),
            Error::Pep517(e) => e.hint(),
            Error::UpdateConfig(e) => e.hint(),
            Error::ConfigOutdated { .. } => {
                Some("run `kbuild update-config` and commit the new build.toml".into())
            }
            Error::NotBuilt { other, .. } => Some(format!(
                "build first (`kbuild build`), or {other}"
            )),
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
    Scaffold => InitError,
    Clean => CleanError,
    Pep517 => PyprojectError,
    UpdateConfig => UpdateError,
    Verify => VerifyError,
    Sign => SignError,
}

/// What a failed command reports: on stderr as text, under `--json` as
/// `{"error": {"message", "hint", "causes", "compiler"}}` on stdout.
#[derive(Debug, serde::Serialize)]
pub struct ErrorReport {
    pub message: String,
    pub hint: Option<String>,
    /// The chain of causes, outermost first.
    pub causes: Vec<String>,
    /// A compiler's failure, reported as cargo reports one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiler: Option<CompilerFailure>,
}

/// A compile unit whose compiler failed: its diagnostics come first, then `could not compile`;
/// the command line only with `-v` (it is long, and `-v` showed it before it ran).
#[derive(Debug, serde::Serialize)]
pub struct CompilerFailure {
    /// The source, as the progress names it (`relu_cpu/relu_cpu.cpp`).
    pub unit: String,
    /// The variant it was compiled for (`cpu`, `cuda`, or `torch215-cpu` with several torches).
    pub variant: String,
    /// The command line that reproduces the failure.
    pub command: String,
    /// `exited with status 1`.
    pub status: String,
    /// The diagnostics with a place, parsed from what the compiler printed.
    pub diagnostics: Vec<crate::report::Diagnostic>,
    /// What the compiler printed, as printed (colour kept).
    #[serde(skip)]
    pub output: String,
}

impl Error {
    /// The message, every cause once, and the hint; a compiler's failure in cargo's shape.
    pub fn report(&self) -> ErrorReport {
        if let Some(report) = self.compiler_report() {
            return report;
        }
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
            compiler: None,
        }
    }

    /// The report of a compiler that ran and failed (not one killed: the OOM hint stays).
    fn compiler_report(&self) -> Option<ErrorReport> {
        let Error::Build(build) = self else {
            return None;
        };
        let BuildError::Compile(compile) = build.as_ref() else {
            return None;
        };
        let CompileError::CommandFailed {
            label,
            command,
            status,
            stderr,
        } = compile.as_ref()
        else {
            return None;
        };
        status.code()?;
        let (unit, variant) = match label.rsplit_once(" [") {
            Some((unit, variant)) => (unit, variant.trim_end_matches(']')),
            None => (label.as_str(), ""),
        };
        let plain = crate::report::strip_ansi(stderr);
        let hint = crate::compile::compiler_hint(&plain).unwrap_or_else(|| {
            "fix the errors above; `-v` shows the compiler's command line, which reproduces them"
                .to_string()
        });
        let failure = CompilerFailure {
            unit: unit.to_string(),
            variant: variant.to_string(),
            command: command.clone(),
            status: crate::process::describe_status(*status),
            diagnostics: crate::report::parse_diagnostics(stderr),
            output: stderr.clone(),
        };
        Some(ErrorReport {
            message: format!("could not compile `{unit}` ({variant})"),
            hint: Some(hint),
            causes: vec![format!("`{command}` {}", failure.status)],
            compiler: Some(failure),
        })
    }
}

impl ErrorReport {
    /// The text for stderr: a compiler's output first, then `error:`, one `caused by:` per
    /// cause (a compiler's command only when `verbose`), then `hint:`; `error:` in bold red
    /// when `color`.
    pub fn text(&self, verbose: bool, color: bool) -> String {
        let mut text = String::new();
        if let Some(compiler) = &self.compiler
            && !compiler.output.trim().is_empty()
        {
            text.push_str(compiler.output.trim_end());
            text.push_str("\n\n");
        }
        let error = if color {
            "\x1b[1;31merror\x1b[0m"
        } else {
            "error"
        };
        text.push_str(&format!("{error}: {}\n", self.message));
        let causes_shown = self.compiler.is_none() || verbose;
        for cause in self.causes.iter().filter(|_| causes_shown) {
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

/// [`Error::NotBuilt`] unless `path` exists (as anything: what it is, the command tells).
pub fn built(path: &std::path::Path, other: &'static str) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NotBuilt {
            path: path.to_path_buf(),
            other,
        }),
        _ => Ok(()),
    }
}

/// Result with the crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
