//! What can go wrong publishing; no message ever holds the token.

use std::path::PathBuf;

use crate::hint::Hint;
use crate::package::PackageError;
use crate::package::tree::TreeError;

/// A publish failure. Never contains the token.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("cannot start the async runtime for publishing")]
    Runtime {
        #[source]
        source: std::io::Error,
    },
    #[error("no repository to publish to")]
    NoRepo,
    #[error("`{repo}` is not a repository id")]
    InvalidRepoId { repo: String },
    #[error("`{branch}` is not a branch name the Hub accepts: {why}")]
    InvalidBranch { branch: String, why: &'static str },
    #[error("no build variants in `{}`", dir.display())]
    NoVariants { dir: PathBuf },
    #[error("no variant `{name}` in the build directory")]
    UnknownVariant {
        name: String,
        available: Vec<String>,
    },
    #[error("cannot read `{}`", path.display())]
    ReadBuild {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A link or special file among what would be published (or the directory itself a link).
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("the build violates the Hub's rules (`kbuild check`):\n{}", report.trim_end())]
    Check { report: String },
    #[error("variant `{name}` is both a directory and an artifact in the build directory")]
    DuplicateVariant { name: String },
    #[error("variant `{variant}` failed verification")]
    Verify {
        variant: String,
        #[source]
        source: PackageError,
    },
    #[error("the variants disagree on the version: {}", versions.iter().map(|(v, n)| format!("`{v}` is {n}")).collect::<Vec<_>>().join(", "))]
    VersionMismatch { versions: Vec<(String, u32)> },
    #[error("the build is version {built}, but build.toml says version {configured}")]
    StaleBuild { built: u32, configured: u32 },
    /// Variants whose metadata does not say kbuild built them.
    #[error("refusing to publish variants kbuild did not build: {} (in `{}`)", variants.join(", "), build_dir.display())]
    Foreign {
        variants: Vec<String>,
        build_dir: PathBuf,
    },
    /// The variants were built from different commits of the kernel's sources.
    #[error(
        "refusing to publish variants built from different commits: {}",
        crate::package::describe_commits(commits)
    )]
    MixedCommits { commits: Vec<(String, Vec<String>)> },
    #[error("refusing to publish a build from a dirty git tree: {}", variants.join(", "))]
    Dirty { variants: Vec<String> },
    /// Variants built with `--cuda-capabilities`, without `--allow-partial`.
    #[error(transparent)]
    Narrow(#[from] crate::package::NarrowVariants),
    #[error(
        "no Hub token found (looked at `HF_TOKEN`, `HF_TOKEN_PATH` and the token file under `HF_HOME`)"
    )]
    NoToken,
    #[error("the Hub refused {action}: authentication failed (401): {message}")]
    Unauthorized {
        action: String,
        token_sent: bool,
        message: String,
    },
    #[error("the Hub refused {action}: permission denied (403): {message}")]
    Forbidden {
        action: String,
        repo: String,
        message: String,
    },
    #[error("{action} failed after {attempts} attempts: {message}")]
    Unavailable {
        action: String,
        attempts: usize,
        message: String,
    },
    #[error("{action} failed: {message}")]
    Network { action: String, message: String },
    /// The server took the request and never answered.
    #[error("{action} timed out after {} ({attempts} attempts)", super::retry::seconds(*after))]
    TimedOut {
        action: String,
        after: std::time::Duration,
        attempts: usize,
    },
    #[error("{action} conflicted with another change: {message}")]
    Conflict { action: String, message: String },
    #[error("{action} failed: {message}")]
    Hub { action: String, message: String },
    #[error("cannot render the kernel card")]
    Card {
        #[source]
        source: minijinja::Error,
    },
    /// The project's own `CARD.md` is not a template minijinja renders.
    #[error("cannot render the project's card `{}`", path.display())]
    ProjectCard {
        path: std::path::PathBuf,
        #[source]
        source: minijinja::Error,
    },
    /// The build directory does not exist: nothing has been built yet.
    #[error("`{}` does not exist: nothing has been built yet", path.display())]
    NotBuilt { path: std::path::PathBuf },
    #[error("cannot write the card to `{}`", path.display())]
    WriteCard {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the project's card `{}`", path.display())]
    ReadCard {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("published {committed} of {total} commits to `{branch}`, then failed")]
    Partial {
        committed: usize,
        total: usize,
        branch: String,
        #[source]
        source: Box<PublishError>,
    },
    /// A multi-commit publish stopped before `branch` moved: it still holds what it held.
    #[error(
        "nothing changed on `{branch}`: {committed} of {total} commits are staged on `{staging}`, then publishing failed"
    )]
    Staged {
        branch: String,
        staging: String,
        committed: usize,
        total: usize,
        #[source]
        source: Box<PublishError>,
    },
    /// Every commit is staged, but landing the build on the branch failed (it is unchanged).
    #[error(
        "the build is complete on `{staging}`, but landing it on `{branch}` failed: `{branch}` is unchanged"
    )]
    Landing {
        branch: String,
        staging: String,
        #[source]
        source: Box<PublishError>,
    },
    /// Other publishes moved the branch every time this one tried to land.
    #[error("`{branch}` moved {rebases} times while this build was being published: gave up")]
    Raced {
        branch: String,
        rebases: usize,
        #[source]
        source: Box<PublishError>,
    },
    #[error("the Hub token from {source_name} cannot be sent: {problem}")]
    BadToken {
        source_name: super::auth::TokenSource,
        problem: super::auth::TokenProblem,
    },
    /// Some variants carry a signature and some do not.
    #[error("only some variants are signed: {} signed; {} not", signed.join(", "), unsigned.join(", "))]
    PartlySigned {
        signed: Vec<String>,
        unsigned: Vec<String>,
    },
    /// A variant's bundle does not verify (stale after a rebuild, or for another instance).
    #[error("the signature of variant `{variant}` does not verify against `{}`: {problem}", trust.display())]
    BadSignature {
        variant: String,
        problem: String,
        trust: PathBuf,
    },
    /// The variants' certificates name different signers.
    #[error("the variants are signed by different signers: {}", signers.iter().map(|(v, s)| format!("`{v}` by {s}")).collect::<Vec<_>>().join(", "))]
    SignersDiffer { signers: Vec<(String, String)> },
    #[error(transparent)]
    Sign(#[from] crate::sign::SignError),
    #[error("{action} failed and the new branch `{branch}` was removed again")]
    RolledBack {
        action: String,
        branch: String,
        #[source]
        source: Box<PublishError>,
    },
}

impl Hint for PublishError {
    fn hint(&self) -> Option<String> {
        use PublishError::*;
        Some(match self {
            Runtime { .. } => "the system refused kbuild threads or file descriptors: check `ulimit -u` and `ulimit -n`".into(),
            NoRepo => "pass `--repo org/name`, or set `repo-id` under `[general.hub]` in build.toml".into(),
            InvalidRepoId { .. } => "a repository id is `org/name` (letters, digits, `-`, `_`, `.`)".into(),
            InvalidBranch { .. } => "pass `--branch` a git branch name such as `v1` or `release/v1` (or set `branch` under `[general.hub]` in build.toml)".into(),
            NoVariants { .. } => "run `kbuild build` first, or point `--build-dir` at a build directory".into(),
            UnknownVariant { available, .. } => format!("variants here: {}", available.join(", ")),
            ReadBuild { .. } => "check that the build directory exists and is readable".into(),
            Tree(source) => source.hint()?,
            Check { .. } => "fix what each line says and rebuild, or pass `--skip-check` to publish anyway".into(),
            DuplicateVariant { .. } => "keep either the directory or the artifact of that variant in the build directory".into(),
            Verify { source, .. } => source.hint()?,
            VersionMismatch { .. } => "rebuild every variant from the same build.toml with `kbuild build`".into(),
            StaleBuild { .. } => "rebuild with `kbuild build`, or pass `--branch` to publish this build elsewhere".into(),
            Narrow(source) => source.hint()?,
            Foreign { .. } => "build them with `kbuild build` (or remove them from the build directory), or pass `--allow-foreign` to publish variants another tool built".into(),
            MixedCommits { .. } => "rebuild every variant from one commit (`kbuild build` builds them all), or pass `--allow-mixed` to publish them together".into(),
            Dirty { .. } => "commit your changes and rebuild, or pass `--allow-dirty` to publish anyway".into(),
            NoToken => "set `HF_TOKEN` to a token with write access (https://huggingface.co/settings/tokens), or run `hf auth login`".into(),
            Unauthorized { token_sent: true, .. } => "the token was rejected (expired or revoked?): set `HF_TOKEN` to a valid token with write access".into(),
            Unauthorized { token_sent: false, .. } => "set `HF_TOKEN` to a token with write access, or run `hf auth login`".into(),
            Forbidden { repo, .. } => {
                let org = repo.split('/').next().unwrap_or(repo);
                format!("the token can read but not write `{repo}`: use a token with the `write` role, or a fine-grained token with write access to repositories of `{org}`")
            }
            TimedOut { .. } => "the Hub accepted the connection but did not answer in time: check `HF_ENDPOINT` and the network, or raise the limit with `KBUILD_HUB_TIMEOUT` (seconds per request) or `KBUILD_HUB_UPLOAD_TIMEOUT` (seconds of silence during a commit); nothing was half-published".into(),
            Unavailable { .. } | Network { .. } => "nothing was half-published (each commit is atomic); re-run `kbuild publish` later, unchanged files are skipped".into(),
            Conflict { .. } => "someone changed the branch while publishing: re-run `kbuild publish` to publish on top of it".into(),
            Hub { .. } => "re-run with `-v` for details; `--dry-run` shows what would be uploaded".into(),
            Card { .. } => "this is a kbuild bug: please report it with the variant's metadata.json".into(),
            ProjectCard { .. } => "fix the template at the line named (Jinja syntax, as HF's kernel-builder renders it; its values: `repo_id`, `functions`, `layers`, `has_benchmark`, `upstream`, `license`), and check it with `kbuild fill-card`".into(),
            NotBuilt { .. } => "build first (`kbuild build`), or pass `--build-dir`: a build directory, an artifact (`.tar.gz`) or a directory of them".into(),
            WriteCard { .. } => "check that the directory exists and can be written".into(),
            ReadCard { .. } => "check the file's permissions, or remove it to publish kbuild's own card".into(),
            Partial { .. } => "each commit is atomic; re-run `kbuild publish` to upload the rest (unchanged files are skipped)".into(),
            RolledBack { source, .. } => source.hint()?,
            Staged { branch, .. } => format!("re-run `kbuild publish`: it continues from the staged commits, then moves `{branch}` in one step"),
            Landing { .. } => "re-run `kbuild publish` to land the build (the staged commits are reused)".into(),
            Raced { branch, .. } => format!("other publishes to `{branch}` are going on: re-run `kbuild publish` once they are done (it compares with whatever they left)"),
            PartlySigned { .. } => "sign every variant (`kbuild sign`, or `kbuild publish --sign`): `kbuild verify` requires the signer the branch records of each one".into(),
            BadSignature { .. } => "a rebuild after signing makes the bundle stale: sign again (`kbuild sign`, or `kbuild publish --sign`); a private Sigstore instance needs `--trust-config`".into(),
            SignersDiffer { .. } => "sign every variant in one run (`kbuild sign` or `kbuild publish --sign`) so one signer is recorded".into(),
            Sign(source) => source.hint()?,
            BadToken { .. } => "copy the token again from https://huggingface.co/settings/tokens (it is `hf_` followed by letters and digits), or run `hf auth login`".into(),
        })
    }
}
