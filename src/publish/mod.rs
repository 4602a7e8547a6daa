//! Hub upload through the hf-hub crate: verify, diff against the branch, commit, card.
//!
//! `local` finds and hashes what is published, `plan` compares it with the branch (plain data),
//! `hub` talks to the Hub, `card` writes `README.md`, `run` puts them together, `auth` keeps
//! the token out of every message.

pub mod auth;
pub mod card;
mod error;
pub mod hub;
pub mod local;
pub mod plan;
mod run;
mod settings;
mod summary;

pub use error::PublishError;
pub use hf_hub::RepoTypeAny;
pub use run::{publish, publish_blocking};
pub use settings::PublishSettings;
pub use summary::{CommitSummary, PublishSummary};
