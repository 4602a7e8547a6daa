//! The Hub side: metadata calls through `api`, commits through `upload`, every call
//! retried by `retry`, and every failure turned into a `PublishError` that names the action
//! and the endpoint, never the token.
//!
//! A commit whose answer was lost (a timeout, a broken connection, a gateway error) may have
//! landed: before it is sent again, the branch (or, for `--create-pr`, the pull requests
//! opened since) is checked for exactly these changes, so a lost answer is neither a false
//! conflict nor a second pull request.
//!
//! Uploads (`upload`): `preupload` says which files are LFS; those go by the Git LFS `basic`
//! transfer, streamed from disk, and the commit names them by sha256. hf-hub's commit is not
//! used: it drops `Retry-After` on 502/503, and without Xet it sends LFS files inline (base64)
//! in the commit, holding each whole in memory several times over.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hf_hub::{RepoType as _, RepoTypeAny};

use super::api::{Api, OpenPr, Refs};
use super::auth::{Redactor, Token};
use super::compare::{RemoteFile, same_content};
use super::error::PublishError;
use super::retry::{Failure, FailureKind, GaveUp, RetryPolicy, retry};
use super::upload;
pub use super::upload::{Change, CommitRequest, Landed};
use crate::report::Reporter;

/// `endpoint` without the user and password it may carry (`http://user:pass@host` →
/// `http://host`; an HTTP client would send them as `Authorization: Basic`, in place of the
/// token), and whether it carried any.
fn without_login(endpoint: &str) -> (String, bool) {
    let Ok(mut url) = reqwest::Url::parse(endpoint) else {
        return (endpoint.to_string(), false);
    };
    if url.username().is_empty() && url.password().is_none() {
        return (endpoint.to_string(), false);
    }
    let cleared = url.set_username("").is_ok() && url.set_password(None).is_ok();
    let text = url.to_string();
    (text.trim_end_matches('/').to_string(), cleared)
}

/// A connection to one repository.
pub struct Remote<'r> {
    api: Api,
    kind: RepoTypeAny,
    repo_id: String,
    endpoint: String,
    has_token: bool,
    redactor: Redactor,
    policy: RetryPolicy,
    reporter: &'r dyn Reporter,
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
        let (without, had_login) = without_login(endpoint);
        if had_login {
            reporter.warn(&format!(
                "`HF_ENDPOINT={}` holds a user and password, which kbuild does not send: they \
                 would replace the Hub token in the `Authorization` header\nhint: remove them \
                 from `HF_ENDPOINT`; the token (`HF_TOKEN`) authenticates",
                crate::redact::url(endpoint)
            ));
        }
        let endpoint = without.as_str();
        let http = reqwest::Client::builder()
            .user_agent(format!("kbuild/{}; hf-hub/1", env!("CARGO_PKG_VERSION")))
            // No read timeout: it would cap a slow upload's whole time. Metadata calls have a
            // timeout each; uploads one on silence (`upload::within_idle`).
            .connect_timeout(policy.request_timeout)
            .build()
            .map_err(|e| PublishError::Network {
                action: "setting up the HTTP client".into(),
                message: redactor.redact(&e.to_string()),
            })?;
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

    /// Whether `kernels` loads this repository's kernels without `trust_remote_code=True`.
    pub async fn trusted_publisher(&self) -> Result<bool, PublishError> {
        self.metadata("asking whether the publisher is trusted", || {
            self.api.trusted_publisher()
        })
        .await
    }

    pub async fn refs(&self) -> Result<Refs, PublishError> {
        self.metadata("listing branches", || self.api.refs()).await
    }

    /// The open pull requests against `branch` that runs with this commit `title` opened, the
    /// oldest first: more than one when runs of the same build raced to open one.
    pub async fn pull_requests_of(
        &self,
        branch: &str,
        title: &str,
    ) -> Result<Vec<OpenPr>, PublishError> {
        let prs = self
            .metadata("listing open pull requests", || {
                self.api.open_pull_requests()
            })
            .await?;
        let target = format!("refs/heads/{branch}");
        let first_of_many = format!("{title} [1/");
        let mut ours: Vec<OpenPr> = (prs.into_iter())
            .filter(|pr| {
                (pr.title == title || pr.title.starts_with(&first_of_many))
                    && pr.target_branch.as_ref().is_none_or(|t| *t == target)
            })
            .collect();
        ours.sort_by_key(|pr| pr.num);
        Ok(ours)
    }

    /// When the commit `rev` was made, when the Hub says.
    pub async fn commit_date(
        &self,
        rev: &str,
    ) -> Result<Option<std::time::SystemTime>, PublishError> {
        let action = format!("reading the date of commit `{rev}`");
        self.metadata(&action, || self.api.commit_date(rev)).await
    }

    /// Close pull request `num`, saying why in a comment.
    pub async fn close_pull_request(&self, num: u64, why: &str) -> Result<(), PublishError> {
        let action = format!("closing pull request #{num}");
        self.metadata(&action, || self.api.close_pull_request(num, why))
            .await
    }

    /// The open pull request against `branch` that a run with this commit `title` opened
    /// (a PR of several commits is titled after its first, `TITLE [1/N]`), with its head.
    pub async fn open_pull_request(
        &self,
        branch: &str,
        title: &str,
    ) -> Result<Option<(OpenPr, String)>, PublishError> {
        let Some(pr) = self
            .pull_requests_of(branch, title)
            .await?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let head = self
            .refs()
            .await?
            .pull_requests
            .get(&format!("refs/pr/{}", pr.num))
            .cloned();
        Ok(head.map(|h| (pr, h)))
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

    /// One attempt at the commit, cut off after `upload_timeout` without a byte moving.
    async fn send_commit(
        &self,
        request: &CommitRequest<'_>,
        uploaded: Arc<AtomicU64>,
    ) -> Result<Landed, Failure> {
        let activity = upload::Activity::new(uploaded);
        let attempt = upload::commit(&self.api, request, &activity);
        upload::within_idle(attempt, &activity, self.policy.upload_timeout).await
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

#[cfg(test)]
mod tests {
    use super::without_login;

    #[test]
    fn the_endpoints_login_is_taken_off_and_nothing_else() {
        let (url, had) = without_login("http://robot:p%40ss@127.0.0.1:8080/mirror");
        assert_eq!((url.as_str(), had), ("http://127.0.0.1:8080/mirror", true));
        let (url, had) = without_login("https://huggingface.co");
        assert_eq!((url.as_str(), had), ("https://huggingface.co", false));
        assert_eq!(without_login("https://u@h").0, "https://h");
    }
}
