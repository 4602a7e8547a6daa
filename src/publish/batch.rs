//! One commit of a batch, shared by staging, landing and pull requests: the request it
//! sends, its progress, its summary, and undoing a new branch whose commit failed.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::compare::Batch;
use super::error::PublishError;
use super::hub::{Change, CommitRequest, Landed, Remote};
use super::summary::CommitSummary;
use crate::report::Reporter;

/// Title and description of the commits.
pub(super) struct Message<'a> {
    pub title: &'a str,
    pub description: &'a str,
}

pub(super) fn request<'a>(
    revision: &'a str,
    batch: &Batch<'a>,
    message: &Message<'_>,
    (i, total): (usize, usize),
    parent: Option<&'a str>,
    check_parent: bool,
) -> CommitRequest<'a> {
    let mut changes: Vec<Change> = batch.deletes.iter().map(|p| Change::Delete(p)).collect();
    changes.extend(batch.uploads.iter().map(|f| Change::Upload(f)));
    CommitRequest {
        revision,
        changes,
        message: if total > 1 {
            format!("{} [{}/{total}]", message.title, i + 1)
        } else {
            message.title.to_string()
        },
        description: message.description.to_string(),
        parent,
        check_parent,
        create_pr: false,
    }
}

pub(super) async fn commit_batch(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    request: &CommitRequest<'_>,
    batch: &Batch<'_>,
) -> Result<Landed, PublishError> {
    let counter = Arc::new(AtomicU64::new(0));
    let commit = remote.commit(request, Arc::clone(&counter));
    with_progress(commit, &counter, reporter, batch.bytes()).await
}

pub(super) fn summary(revision: &str, batch: &Batch<'_>, landed: Landed) -> CommitSummary {
    CommitSummary {
        revision: revision.to_string(),
        oid: landed.oid,
        files: batch.uploads.len() + batch.deletes.len(),
        bytes: batch.bytes(),
        pr_url: landed.pr_url,
        pr_num: landed.pr_num,
    }
}

/// After a failed commit: remove a branch this run created (so nothing half-published stays
/// visible), or report how far an existing branch got.
pub(super) async fn undo(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    branch: &str,
    is_new: bool,
    committed: usize,
    total: usize,
    error: PublishError,
) -> PublishError {
    if is_new {
        match remote.delete_branch(branch).await {
            Ok(()) => {
                return PublishError::RolledBack {
                    action: "publishing".into(),
                    branch: branch.to_string(),
                    source: Box::new(error),
                };
            }
            Err(e) => reporter.warn(&format!("could not remove the new branch `{branch}`: {e}")),
        }
    }
    if committed > 0 {
        return PublishError::Partial {
            committed,
            total,
            branch: branch.to_string(),
            source: Box::new(error),
        };
    }
    error
}

/// Drive a commit while forwarding hf-hub's byte count to the progress bar.
async fn with_progress<T>(
    commit: impl Future<Output = Result<T, PublishError>>,
    counter: &AtomicU64,
    reporter: &dyn Reporter,
    bytes: u64,
) -> Result<T, PublishError> {
    tokio::pin!(commit);
    let mut reported = 0u64;
    loop {
        tokio::select! {
            out = &mut commit => {
                if out.is_ok() {
                    reporter.add_bytes(bytes.saturating_sub(reported));
                }
                return out;
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                let now = counter.load(Ordering::Relaxed).min(bytes);
                if now > reported {
                    reporter.add_bytes(now - reported);
                    reported = now;
                }
            }
        }
    }
}
