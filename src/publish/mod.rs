//! Hub upload: verify, diff against the branch, commit, card.
//!
//! `local` finds and hashes what is published, `compare` diffs it with the branch and splits the
//! changes into commits (plain data), `hub` talks to the Hub (`api` for metadata, `upload` for
//! commits: preupload, LFS streamed from disk, NDJSON, `retry` for timeouts and retries), `commit` makes a commit plan's commits (staged
//! when there are several, `land` for the last compare-and-swap step, `batch` for one commit), `card` writes `README.md`, `run` puts them together as stages,
//! `auth` checks the token and keeps it out of every message.

mod api;
pub mod auth;
mod batch;
pub mod card;
mod commit;
pub mod compare;
mod error;
pub mod hub;
mod land;
pub mod local;
pub mod retry;
mod run;
mod settings;
mod signer;
mod summary;
mod upload;

pub use error::PublishError;
pub use hf_hub::RepoTypeAny;
pub use run::{publish, publish_blocking};
pub use settings::PublishSettings;
pub use summary::{CommitSummary, PublishSummary};
