//! The Hub side, through the hf-hub crate: repository, refs, tree, branches and commits, with
//! every failure turned into a `PublishError` that names the action and never the token.
//!
//! Retries: hf-hub retries 408/429/5xx, timeouts and connection errors itself (exponential
//! backoff with jitter); kbuild sets the bounds (`RETRIES`, `RETRY_BASE`) and the timeouts.
//!
//! Uploads: hf-hub asks `preupload` which files are LFS. It uploads LFS files only through Xet;
//! when the server's LFS batch answer does not choose `xet` (a server without Xet, like
//! kbuild-hub-server), hf-hub sends those files inline (base64) in the commit instead.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt as _;
use hf_hub::progress::{Progress, ProgressEvent, ProgressHandler, UploadEvent};
use hf_hub::repository::{AddSource, CommitInfo, CommitOperation, GitRefs, RepoTreeEntry};
use hf_hub::{HFClient, HFError, HFRepository, RepoTypeAny};

use super::auth::{Redactor, Token};
use super::error::PublishError;
use super::plan::RemoteFile;

/// Retries after the first attempt for transient failures.
pub const RETRIES: usize = 4;
const RETRY_BASE: Duration = Duration::from_millis(200);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest silence from the server before a request counts as timed out (and is retried).
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A connection to one repository.
pub struct Remote {
    client: HFClient,
    repo: HFRepository<RepoTypeAny>,
    kind: RepoTypeAny,
    repo_id: String,
    endpoint: String,
    has_token: bool,
    redactor: Redactor,
}

/// One change of a commit.
pub enum Change<'a> {
    Upload(&'a super::local::LocalFile),
    Delete(&'a str),
}

impl Remote {
    pub fn connect(
        endpoint: &str,
        token: Option<&Token>,
        kind: RepoTypeAny,
        repo_id: &str,
    ) -> Result<Remote, PublishError> {
        let redactor = Redactor::new(token);
        let http = reqwest::Client::builder()
            .user_agent(format!("kbuild/{}; hf-hub/1", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .build()
            .map_err(|e| PublishError::Network {
                action: "setting up the HTTP client".into(),
                message: redactor.redact(&e.to_string()),
            })?;
        let mut builder = HFClient::builder()
            .endpoint(endpoint)
            .client(http)
            .cache_enabled(false)
            .retry_max_attempts(RETRIES)
            .retry_base_delay(RETRY_BASE);
        if let Some(t) = token {
            builder = builder.token(t.expose());
        }
        let client = builder.build().map_err(|e| PublishError::Hub {
            action: format!("connecting to `{endpoint}`"),
            message: redactor.redact(&e.to_string()),
        })?;
        let (owner, name) = hf_hub::split_id(repo_id);
        let repo = client.repository(kind, owner, name);
        Ok(Remote {
            client,
            repo,
            kind,
            repo_id: repo_id.to_string(),
            endpoint: endpoint.to_string(),
            has_token: token.is_some(),
            redactor,
        })
    }

    /// The repository's web URL.
    pub fn url(&self) -> String {
        format!(
            "{}/{}{}",
            self.endpoint,
            hf_hub::RepoType::url_prefix(&self.kind),
            self.repo_id
        )
    }

    pub async fn exists(&self) -> Result<bool, PublishError> {
        self.repo
            .exists()
            .send()
            .await
            .map_err(|e| self.fail("looking up the repository", e))
    }

    pub async fn create(&self, private: bool) -> Result<(), PublishError> {
        self.client
            .create_repository()
            .repo_id(&self.repo_id)
            .repo_type(self.kind)
            .private(private)
            .exist_ok(true)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.fail("creating the repository", e))
    }

    pub async fn refs(&self) -> Result<GitRefs, PublishError> {
        self.repo
            .list_refs()
            .include_pull_requests(true)
            .send()
            .await
            .map_err(|e| self.fail("listing branches", e))
    }

    /// Every file at `rev` with its git oid and size.
    pub async fn files(&self, rev: &str) -> Result<BTreeMap<String, RemoteFile>, PublishError> {
        let action = format!("listing the files of `{rev}`");
        let stream = self
            .repo
            .list_tree()
            .revision(rev.to_string())
            .recursive(true)
            .send()
            .map_err(|e| self.fail(&action, e))?;
        futures_util::pin_mut!(stream);
        let mut out = BTreeMap::new();
        while let Some(entry) = stream.next().await {
            if let RepoTreeEntry::File {
                oid, size, path, ..
            } = entry.map_err(|e| self.fail(&action, e))?
            {
                out.insert(path, RemoteFile { oid, size });
            }
        }
        Ok(out)
    }

    pub async fn create_branch(&self, branch: &str) -> Result<(), PublishError> {
        self.repo
            .create_branch()
            .branch(branch)
            .send()
            .await
            .map_err(|e| self.fail(&format!("creating branch `{branch}`"), e))
    }

    pub async fn delete_branch(&self, branch: &str) -> Result<(), PublishError> {
        self.repo
            .delete_branch()
            .branch(branch)
            .send()
            .await
            .map_err(|e| self.fail(&format!("deleting branch `{branch}`"), e))
    }

    /// One atomic commit to `rev` (or a new pull request against it). `uploaded` follows the
    /// bytes hf-hub reports as sent (Xet uploads report progress; inline ones do not).
    pub async fn commit(
        &self,
        request: CommitRequest<'_>,
        uploaded: Arc<AtomicU64>,
    ) -> Result<CommitInfo, PublishError> {
        let operations: Vec<CommitOperation> = request
            .changes
            .iter()
            .map(|c| match c {
                Change::Upload(f) => CommitOperation::Add {
                    path_in_repo: f.repo_path.clone(),
                    source: match &f.source {
                        super::local::Source::Path(p) => AddSource::file(p.clone()),
                        super::local::Source::Bytes(b) => AddSource::bytes(b.clone()),
                    },
                },
                Change::Delete(p) => CommitOperation::delete(p.to_string()),
            })
            .collect();
        let action = if request.create_pr {
            format!("opening a pull request against `{}`", request.revision)
        } else {
            format!("committing to `{}`", request.revision)
        };
        self.repo
            .create_commit()
            .operations(operations)
            .commit_message(request.message)
            .commit_description(request.description)
            .revision(request.revision.to_string())
            .create_pr(request.create_pr)
            .maybe_parent_commit(request.parent.map(String::from))
            .progress(Progress::new(ByteCounter(uploaded)))
            .send()
            .await
            .map_err(|e| self.fail(&action, e))
    }

    /// Turn an hf-hub error into a publish error, without the token.
    fn fail(&self, action: &str, e: HFError) -> PublishError {
        let action = format!("{action} on `{}`", self.url());
        let status = http_status(&e);
        let message = self.redactor.redact(&e.to_string());
        match (&e, status) {
            (HFError::AuthRequired { .. }, _) | (_, Some(401)) => PublishError::Unauthorized {
                action,
                token_sent: self.has_token,
                message,
            },
            (HFError::Forbidden { .. }, _) | (_, Some(403)) => PublishError::Forbidden {
                action,
                repo: self.repo_id.clone(),
                message,
            },
            (HFError::Conflict { .. }, _) | (_, Some(409 | 412)) => {
                PublishError::Conflict { action, message }
            }
            (HFError::RateLimited { .. }, _) | (_, Some(408 | 429 | 500..=599)) => {
                PublishError::Unavailable {
                    action,
                    attempts: RETRIES + 1,
                    message,
                }
            }
            (HFError::Request { source, .. }, _) if source.is_timeout() || source.is_connect() => {
                PublishError::Network {
                    action,
                    message: format!("{message} (after {} attempts)", RETRIES + 1),
                }
            }
            _ => PublishError::Hub { action, message },
        }
    }
}

/// What one commit carries.
pub struct CommitRequest<'a> {
    pub revision: &'a str,
    pub changes: Vec<Change<'a>>,
    pub message: String,
    pub description: String,
    pub parent: Option<&'a str>,
    pub create_pr: bool,
}

fn http_status(e: &HFError) -> Option<u16> {
    match e {
        HFError::Http { context }
        | HFError::AuthRequired { context }
        | HFError::Forbidden { context }
        | HFError::Conflict { context }
        | HFError::RateLimited { context, .. } => Some(context.status.as_u16()),
        HFError::RepoNotFound { context, .. }
        | HFError::RevisionNotFound { context, .. }
        | HFError::EntryNotFound { context, .. } => context.as_ref().map(|c| c.status.as_u16()),
        _ => None,
    }
}

/// Forwards hf-hub's upload byte counts to the publish loop.
struct ByteCounter(Arc<AtomicU64>);

impl ProgressHandler for ByteCounter {
    fn on_progress(&self, event: &ProgressEvent) {
        if let ProgressEvent::Upload(UploadEvent::Progress {
            bytes_completed, ..
        }) = event
        {
            self.0.fetch_max(*bytes_completed, Ordering::Relaxed);
        }
    }
}
