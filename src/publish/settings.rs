//! What a publish needs, resolved by the command (CLI > build.toml > environment).

use std::path::PathBuf;

use hf_hub::RepoTypeAny;

use super::auth::{Token, TokenSource};
use super::compare::BatchLimits;
use super::retry::RetryPolicy;

/// Everything a publish needs, resolved (CLI > build.toml > defaults).
#[derive(Debug)]
pub struct PublishSettings {
    /// Hub base URL (`HF_ENDPOINT` or `https://huggingface.co`).
    pub endpoint: String,
    pub token: Option<(Token, TokenSource)>,
    /// `org/name`.
    pub repo_id: String,
    pub repo_type: RepoTypeAny,
    /// Create the repository private if it does not exist.
    pub private: bool,
    /// Branch to publish to; `v<version>` when `None`.
    pub branch: Option<String>,
    pub build_dir: PathBuf,
    /// `<project>/benchmarks`, when it exists.
    pub benchmarks_dir: Option<PathBuf>,
    /// The project's own `CARD.md`, published as `README.md` in place of kbuild's card.
    pub card: Option<super::card::ProjectCard>,
    /// Only these variants (all when empty).
    pub variants: Vec<String>,
    /// `[general] version` of build.toml, when the project has one.
    pub project_version: Option<u32>,
    pub create_pr: bool,
    pub dry_run: bool,
    pub allow_dirty: bool,
    /// Publish variants built for part of the CUDA matrix (`--cuda-capabilities`).
    pub allow_partial: bool,
    /// The `kbuild check` rules run before anything is uploaded; `None` (`--skip-check`) runs
    /// none beyond the verification every publish does.
    pub check: Option<crate::check::CheckOptions>,
    /// How the build is read from disk (the unpack cap for artifacts).
    pub local: super::local::LocalOptions,
    pub limits: BatchLimits,
    /// Timeouts and retries of Hub requests.
    pub retry: RetryPolicy,
    /// The Sigstore instance the variants' signatures are checked against (`--trust-config`).
    pub trust: crate::sign::Trust,
}
