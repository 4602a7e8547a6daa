//! The Hub side: metadata calls through `api`, commits through the hf-hub crate, every call
//! retried by `retry`, and every failure turned into a `PublishError` that names the action
//! and the endpoint, never the token.
//!
//! A commit whose answer was lost (a timeout, a broken connection, a gateway error) may have
//! landed: before it is sent again, the branch (or, for `--create-pr`, the pull requests
//! opened since) is checked for exactly these changes, so a lost answer is neither a false
//! conflict nor a second pull request.
//!
//! Uploads: hf-hub asks `preupload` which files are LFS. It uploads LFS files only through Xet;
//! when the server's LFS batch answer does not choose `xet` (a server without Xet, like
//! kbuild-hub-server), hf-hub sends those files inline (base64) in the commit instead.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hf_hub::progress::{Progress, ProgressEvent, ProgressHandler, UploadEvent};
use hf_hub::repository::{AddSource, CommitOperation};
use hf_hub::{HFClient, HFError, HFRepository, RepoType as _, RepoTypeAny};

use super::api::{Api, Refs, transport_failure};
use super::auth::{Redactor, Token};
use super::compare::{RemoteFile, same_content};
use super::error::PublishError;
use super::retry::{Failure, FailureKind, GaveUp, RetryPolicy, retry};
use crate::report::Reporter;

/// A connection to one repository.
pub struct Remote<'r> {
    api: Api,
    repo: HFRepository<RepoTypeAny>,
    kind: RepoTypeAny,
    repo_id: String,
    endpoint: String,
    has_token: bool,
    redactor: Redactor,
    policy: RetryPolicy,
    reporter: &'r dyn Reporter,
}

/// One change of a commit.
pub enum Change<'a> {
    Upload(&'a super::local::LocalFile),
    Delete(&'a str),
}

/// What one commit carries.
pub struct CommitRequest<'a> {
    pub revision: &'a str,
    pub changes: Vec<Change<'a>>,
    pub message: String,
    pub description: String,
    /// The head the commit goes on top of (of `revision`, or of the branch a PR is opened
    /// against); tells a landed commit from an unchanged branch after a lost answer.
    pub parent: Option<&'a str>,
    /// Ask the server to refuse the commit when `revision` is no longer at `parent`.
    pub check_parent: bool,
    pub create_pr: bool,
}

/// A commit the Hub holds.
#[derive(Debug, Clone)]
pub struct Landed {
    pub oid: Option<String>,
    pub pr_num: Option<u64>,
    pub pr_url: Option<String>,
}

impl<'r> Remote<'r> {
    pub fn connect(
        endpoint: &str,
        token: Option<&Token>,
        kind: RepoTypeAny,
        repo_id: &str,
        policy: RetryPolicy,
        reporter: &'r dyn Reporter,
    ) -> Result<Remote<'r>, PublishError> {
        let redactor = Redactor::new(token).with_endpoint(endpoint);
        let http = reqwest::Client::builder()
            .user_agent(format!("kbuild/{}; hf-hub/1", env!("CARGO_PKG_VERSION")))
            .connect_timeout(policy.request_timeout)
            .read_timeout(policy.upload_timeout)
            .build()
            .map_err(|e| PublishError::Network {
                action: "setting up the HTTP client".into(),
                message: redactor.redact(&e.to_string()),
            })?;
        // Retries are kbuild's (see `retry`): hf-hub would resend a commit whose answer was lost.
        let mut builder = HFClient::builder()
            .endpoint(endpoint)
            .client(http.clone())
            .cache_enabled(false)
            .retry_max_attempts(0);
        if let Some(t) = token {
            builder = builder.token(t.expose());
        }
        let client = builder.build().map_err(|e| PublishError::Hub {
            action: redactor.redact(&format!("connecting to `{endpoint}`")),
            message: redactor.redact(&e.to_string()),
        })?;
        let (owner, name) = hf_hub::split_id(repo_id);
        let repo = client.repository(kind, owner, name);
        let api = Api::new(
            http,
            endpoint,
            (kind.plural(), kind.singular()),
            repo_id,
            token,
            policy.request_timeout,
        );
        Ok(Remote {
            api,
            repo,
            kind,
            repo_id: repo_id.to_string(),
            endpoint: endpoint.to_string(),
            has_token: token.is_some(),
            redactor,
            policy,
            reporter,
        })
    }

    /// The repository's web URL, without the endpoint's password.
    pub fn url(&self) -> String {
        self.redactor.redact(&format!(
            "{}/{}{}",
            self.endpoint,
            hf_hub::RepoType::url_prefix(&self.kind),
            self.repo_id
        ))
    }

    /// One metadata call with retries; failures name `action` and the repository URL.
    async fn metadata<'a, T, F, Fut>(&'a self, action: &str, call: F) -> Result<T, PublishError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Failure>> + 'a,
    {
        let action = format!("{action} on `{}`", self.url());
        retry(&self.policy, self.reporter, &action, None, call)
            .await
            .map_err(|g| self.fail(action, g))
    }

    pub async fn exists(&self) -> Result<bool, PublishError> {
        self.metadata("looking up the repository", || self.api.exists())
            .await
    }

    pub async fn create(&self, private: bool) -> Result<(), PublishError> {
        self.metadata("creating the repository", || self.api.create_repo(private))
            .await
    }

    pub async fn refs(&self) -> Result<Refs, PublishError> {
        self.metadata("listing branches", || self.api.refs()).await
    }

    /// Every file at `rev` with its git oid and size.
    pub async fn files(&self, rev: &str) -> Result<BTreeMap<String, RemoteFile>, PublishError> {
        self.metadata(&format!("listing the files of `{rev}`"), || {
            self.api.tree(rev)
        })
        .await
    }

    /// Create `branch` at `start` (`main` when `None`). An answer that went missing is settled
    /// by the refs: a branch that now exists at `start` was created.
    pub async fn create_branch(
        &self,
        branch: &str,
        start: Option<&str>,
    ) -> Result<(), PublishError> {
        let action = format!("creating branch `{branch}`");
        let created = |refs: &Refs| {
            // `start` names a branch or a commit.
            let wanted = match start {
                Some(s) => refs.branches.get(s).map_or(s, String::as_str),
                None => refs.branches.get("main").map_or("", String::as_str),
            };
            refs.branches.get(branch).map(String::as_str) == Some(wanted)
        };
        self.settled(&action, || self.api.create_branch(branch, start), created)
            .await
    }

    /// Delete `branch`; after a lost answer, a branch that is gone was deleted.
    pub async fn delete_branch(&self, branch: &str) -> Result<(), PublishError> {
        let action = format!("deleting branch `{branch}`");
        let gone = |refs: &Refs| !refs.branches.contains_key(branch);
        self.settled(&action, || self.api.delete_branch(branch), gone)
            .await
    }

    /// A branch change with retries; once an attempt may have taken effect (its answer was
    /// lost), the refs are read before the next attempt and after the last, and `done` says
    /// whether the change is there: a change that took effect is not a failure.
    async fn settled<F, Fut>(
        &self,
        action: &str,
        call: F,
        done: impl Fn(&Refs) -> bool,
    ) -> Result<(), PublishError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<(), Failure>>,
    {
        let action = format!("{action} on `{}`", self.url());
        let unsure = AtomicBool::new(false);
        let (unsure_ref, call, done) = (&unsure, &call, &done);
        let result = retry(
            &self.policy,
            self.reporter,
            &action,
            None,
            move || async move {
                if unsure_ref.load(Ordering::Relaxed) && done(&self.api.refs().await?) {
                    return Ok(());
                }
                call().await.inspect_err(|f| {
                    if f.maybe_done() {
                        unsure_ref.store(true, Ordering::Relaxed);
                    }
                })
            },
        )
        .await;
        match result {
            Ok(()) => Ok(()),
            Err(_)
                if unsure.load(Ordering::Relaxed)
                    && self.api.refs().await.is_ok_and(|r| done(&r)) =>
            {
                Ok(())
            }
            Err(gave_up) => Err(self.fail(action, gave_up)),
        }
    }

    /// One atomic commit to `revision` (or a new pull request against it), retried; after an
    /// answer that went missing, the Hub is asked whether the commit landed before it is sent
    /// again. `uploaded` follows the bytes hf-hub reports as sent.
    pub async fn commit(
        &self,
        request: &CommitRequest<'_>,
        uploaded: Arc<AtomicU64>,
    ) -> Result<Landed, PublishError> {
        let action = if request.create_pr {
            format!("opening a pull request against `{}`", request.revision)
        } else {
            format!("committing to `{}`", request.revision)
        };
        let action = format!("{action} on `{}`", self.url());
        let prs_before = if request.create_pr {
            Some(self.refs().await?.pull_requests)
        } else {
            None
        };
        let unsure = AtomicBool::new(false);
        let (unsure_ref, prs, uploaded_ref) = (&unsure, &prs_before, &uploaded);
        let result = retry(&self.policy, self.reporter, &action, None, move || {
            let uploaded = Arc::clone(uploaded_ref);
            async move {
                if unsure_ref.load(Ordering::Relaxed)
                    && let Some(landed) = self.landed(request, prs.as_ref()).await?
                {
                    return Ok(landed);
                }
                self.send_commit(request, uploaded).await.inspect_err(|f| {
                    if f.maybe_done() {
                        unsure_ref.store(true, Ordering::Relaxed);
                    }
                })
            }
        })
        .await;
        match result {
            Ok(landed) => Ok(landed),
            Err(gave_up) => {
                if unsure.load(Ordering::Relaxed)
                    && let Ok(Some(landed)) = self.landed(request, prs_before.as_ref()).await
                {
                    return Ok(landed);
                }
                Err(self.fail(action, gave_up))
            }
        }
    }

    async fn send_commit(
        &self,
        request: &CommitRequest<'_>,
        uploaded: Arc<AtomicU64>,
    ) -> Result<Landed, Failure> {
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
        let parent = request.parent.filter(|_| request.check_parent);
        let info = self
            .repo
            .create_commit()
            .operations(operations)
            .commit_message(request.message.clone())
            .commit_description(request.description.clone())
            .revision(request.revision.to_string())
            .create_pr(request.create_pr)
            .maybe_parent_commit(parent.map(String::from))
            .progress(Progress::new(ByteCounter(uploaded)))
            .send()
            .await
            .map_err(|e| self.hf_failure(e))?;
        let pr_num = info.pr_num.or_else(|| {
            info.pr_url
                .as_deref()
                .and_then(|u| u.rsplit('/').next())
                .and_then(|n| n.parse().ok())
        });
        Ok(Landed {
            oid: info.commit_oid,
            pr_num,
            pr_url: info.pr_url,
        })
    }

    /// Whether the Hub already holds `request`: its revision moved past the parent to a tree
    /// with exactly these changes (for a new pull request: a pull request opened since).
    async fn landed(
        &self,
        request: &CommitRequest<'_>,
        prs_before: Option<&BTreeMap<String, String>>,
    ) -> Result<Option<Landed>, Failure> {
        let refs = self.api.refs().await?;
        let found = if request.create_pr {
            let mut found = None;
            for (name, head) in &refs.pull_requests {
                if prs_before.is_some_and(|b| b.contains_key(name))
                    || !holds(&self.api.tree(head).await?, &request.changes)
                {
                    continue;
                }
                let num: Option<u64> = name.rsplit('/').next().and_then(|n| n.parse().ok());
                found = Some(Landed {
                    oid: Some(head.clone()),
                    pr_num: num,
                    pr_url: num.map(|n| format!("{}/discussions/{n}", self.url())),
                });
                break;
            }
            found
        } else {
            let head = match request.revision.strip_prefix("refs/heads/") {
                _ if request.revision.starts_with("refs/pr/") => {
                    refs.pull_requests.get(request.revision)
                }
                Some(b) => refs.branches.get(b),
                None => refs.branches.get(request.revision),
            };
            match head {
                Some(h)
                    if Some(h.as_str()) != request.parent
                        && holds(&self.api.tree(h).await?, &request.changes) =>
                {
                    Some(Landed {
                        oid: Some(h.clone()),
                        pr_num: None,
                        pr_url: None,
                    })
                }
                _ => None,
            }
        };
        if found.is_some() {
            self.reporter.warn(&format!(
                "the Hub's answer to a commit to `{}` was lost, but the commit landed: carrying on",
                request.revision
            ));
        }
        Ok(found)
    }

    fn hf_failure(&self, e: HFError) -> Failure {
        let message = self.redactor.redact(&e.to_string());
        match &e {
            HFError::Request { source, .. } => {
                transport_failure(source, self.policy.upload_timeout, &self.redactor)
            }
            HFError::RateLimited { retry_after, .. } => Failure {
                kind: FailureKind::Status(429),
                message,
                retry_after: *retry_after,
            },
            _ => Failure {
                kind: http_status(&e).map_or(FailureKind::Other, FailureKind::Status),
                message,
                retry_after: None,
            },
        }
    }

    /// Turn the last failure of a step into a publish error, without the token.
    fn fail(&self, action: String, gave_up: GaveUp) -> PublishError {
        let GaveUp { last, attempts } = gave_up;
        let message = last.message.clone();
        match last.kind {
            FailureKind::Status(401) => PublishError::Unauthorized {
                action,
                token_sent: self.has_token,
                message,
            },
            FailureKind::Status(403) => PublishError::Forbidden {
                action,
                repo: self.repo_id.clone(),
                message,
            },
            FailureKind::Status(409 | 412) => PublishError::Conflict { action, message },
            FailureKind::TimedOut(after) => PublishError::TimedOut {
                action,
                after,
                attempts,
            },
            _ if last.transient() => match last.kind {
                FailureKind::Status(_) => PublishError::Unavailable {
                    action,
                    attempts,
                    message,
                },
                _ => PublishError::Network {
                    action,
                    message: format!("{message} (after {attempts} attempts)"),
                },
            },
            _ => PublishError::Hub { action, message },
        }
    }
}

/// Whether `tree` reflects every change: uploads with this content, deletes gone.
fn holds(tree: &BTreeMap<String, RemoteFile>, changes: &[Change<'_>]) -> bool {
    !changes.is_empty()
        && changes.iter().all(|c| match c {
            Change::Upload(f) => tree.get(&f.repo_path).is_some_and(|r| same_content(f, r)),
            Change::Delete(p) => !tree.contains_key(*p),
        })
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
