//! Committing a [`CommitPlan`]. One commit goes straight to its branch (each commit is atomic).
//! Several commits are staged on a branch of their own, `kbuild-staging-<branch>-<base>`, and the
//! branch is then moved to the staged head in one step: `kernels` never sees half a build.
//!
//! The staging branch is named after the commit it starts from, so a re-run on the same base
//! continues from what an interrupted run staged, and one on another base (the branch moved
//! meanwhile) starts over and removes the stale staging branch.
//!
//! Moving an existing branch: the Hub has no "set branch to commit", so the branch is deleted
//! and created again at the staged head; between the two requests it is absent (never mixed).
//! A `kbuild-moving-<branch>` marker at the staged head is set before the delete, so a re-run
//! after a move that lost the branch recreates it there, with everything it held. With
//! `--create-pr` the pull request is the staging area.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::compare::{Batch, CommitPlan};
use super::error::PublishError;
use super::hub::{Change, CommitRequest, Landed, Remote};
use super::settings::PublishSettings;
use super::summary::CommitSummary;
use crate::report::Reporter;

/// Where a commit plan's commits go.
pub(super) struct Target<'a> {
    pub branch: &'a str,
    /// Current head of the branch (or of `main`, which a new branch starts from).
    pub head: Option<String>,
    /// The branch does not exist yet.
    pub is_new: bool,
}

/// Title and description of the commits.
pub(super) struct Message<'a> {
    pub title: &'a str,
    pub description: &'a str,
}

/// Commit `plan` to `target`: directly when it fits one commit (or goes to a pull request, or
/// to `main`, which the Hub never lets go), staged and moved in one step otherwise.
pub(super) async fn commit_plan(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    s: &PublishSettings,
    plan: &CommitPlan<'_>,
    target: Target<'_>,
    message: &Message<'_>,
) -> Result<Vec<CommitSummary>, PublishError> {
    let several = plan.batches.len() > 1;
    match &target.head {
        Some(base) if several && !s.create_pr && target.branch != "main" => {
            let base = base.clone();
            staged(remote, reporter, s, plan, &target, &base, message).await
        }
        _ => direct(remote, reporter, s, plan, target, message).await,
    }
}

/// `kbuild-staging-v1-0123456789ab`.
fn staging_name(branch: &str, base: &str) -> String {
    format!("{}{}", staging_prefix(branch), &base[..base.len().min(12)])
}

/// What every staging branch of `branch` starts with, whatever its base.
fn staging_prefix(branch: &str) -> String {
    format!("kbuild-staging-{branch}-")
}

/// `kbuild-moving-v1`: set to the complete staged head before an existing branch is deleted
/// for its move, so that a re-run after a move that lost the branch recreates it from there
/// ([`restore_moved`]) instead of starting it over from `main` (which would drop whatever the
/// branch held that this build does not, e.g. variants published from other machines).
pub(super) fn move_marker(branch: &str) -> String {
    format!("kbuild-moving-{branch}")
}

/// Finish a move that lost `branch`: recreate it at its move marker's commit and remove the
/// marker. Returns the branch's head, or `None` when there is no marker (nothing to restore).
pub(super) async fn restore_moved(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    branch: &str,
    dry_run: bool,
) -> Result<Option<String>, PublishError> {
    let marker = move_marker(branch);
    let refs = remote.refs().await?;
    let Some(head) = refs.branches.get(&marker).cloned() else {
        return Ok(None);
    };
    if dry_run {
        reporter.info(&format!(
            "{:>12} branch `{branch}` from `{marker}` (an earlier move lost it)",
            "Would restore"
        ));
        return Ok(Some(head));
    }
    reporter.stage(
        "Restoring",
        &format!("branch `{branch}` from `{marker}` (an earlier move lost it)"),
    );
    remote.create_branch(branch, Some(&head)).await?;
    // The move is done: its staging branch and the marker have served.
    let prefix = staging_prefix(branch);
    let staged = refs.branches.keys().filter(|n| n.starts_with(&prefix));
    remove_branches(remote, reporter, staged.chain([&marker])).await;
    Ok(Some(head))
}

/// Delete branches kbuild no longer needs; a failure only warns (they are bookkeeping, and a
/// later publish removes what is left).
async fn remove_branches(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    names: impl IntoIterator<Item = &String>,
) {
    for name in names {
        if let Err(e) = remote.delete_branch(name).await {
            reporter.warn(&format!("could not remove branch `{name}`: {e}"));
        }
    }
}

/// Commit `plan` on a staging branch started at `base` (or continue the one an interrupted run
/// left), then move `target`'s branch to it.
async fn staged(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    s: &PublishSettings,
    plan: &CommitPlan<'_>,
    target: &Target<'_>,
    base: &str,
    message: &Message<'_>,
) -> Result<Vec<CommitSummary>, PublishError> {
    let branch = target.branch;
    let staging = staging_name(branch, base);
    let refs = remote.refs().await?;
    let prefix = staging_prefix(branch);
    // A marker beside an existing branch is left from a move that finished without removing it.
    let marker = move_marker(branch);
    let stale_marker = refs.branches.contains_key(&marker).then_some(&marker);
    let stale = refs
        .branches
        .keys()
        .filter(|n| n.starts_with(&prefix) && **n != staging);
    remove_branches(remote, reporter, stale.chain(stale_marker)).await;
    // Resuming commits only what the staging branch lacks: its batches are made here.
    let rest;
    let resumed;
    let (mut head, batches) = match refs.branches.get(&staging) {
        Some(staged_head) => {
            reporter.stage("Resuming", &format!("from branch `{staging}`"));
            rest = plan.changes.remaining(&remote.files(&staging).await?);
            resumed = rest.batches(s.limits);
            (staged_head.clone(), &resumed)
        }
        None => {
            reporter.stage("Staging", &format!("on branch `{staging}`"));
            remote.create_branch(&staging, Some(base)).await?;
            (base.to_string(), &plan.batches)
        }
    };
    let mut done = Vec::new();
    for (i, batch) in batches.iter().enumerate() {
        let request = request(
            &staging,
            batch,
            message,
            (i, batches.len()),
            Some(&head),
            false,
        );
        let landed = match commit_batch(remote, reporter, &request, batch).await {
            Ok(landed) => landed,
            Err(e) => {
                return Err(PublishError::Staged {
                    branch: branch.to_string(),
                    staging,
                    committed: i,
                    total: batches.len(),
                    source: Box::new(e),
                });
            }
        };
        head = landed.oid.clone().unwrap_or(head);
        done.push(summary(branch, batch, landed));
    }
    move_branch(remote, reporter, target, base, staging, &head).await?;
    Ok(done)
}

/// Move `target`'s branch from `base` to `head`, the staged commits, and remove the staging
/// branch. An existing branch is deleted and created again, with the move marker set first.
async fn move_branch(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    target: &Target<'_>,
    base: &str,
    staging: String,
    head: &str,
) -> Result<(), PublishError> {
    let branch = target.branch;
    let marker = move_marker(branch);
    reporter.stage(
        "Moving",
        &format!("branch `{branch}` to the staged commits"),
    );
    let moving = |branch_gone, e| PublishError::Moving {
        branch: branch.to_string(),
        staging: staging.clone(),
        branch_gone,
        source: Box::new(e),
    };
    if !target.is_new {
        let now = remote.refs().await?.branches.get(branch).cloned();
        if now.as_deref() != Some(base) {
            let e = PublishError::Conflict {
                action: format!("moving `{branch}` on `{}`", remote.url()),
                message: format!("`{branch}` changed while the build was staged"),
            };
            return Err(moving(false, e));
        }
        remote
            .create_branch(&marker, Some(head))
            .await
            .map_err(|e| moving(false, e))?;
        remote
            .delete_branch(branch)
            .await
            .map_err(|e| moving(false, e))?;
    }
    remote
        .create_branch(branch, Some(head))
        .await
        .map_err(|e| moving(!target.is_new, e))?;
    let leftovers = [Some(&staging), (!target.is_new).then_some(&marker)];
    remove_branches(remote, reporter, leftovers.into_iter().flatten()).await;
    Ok(())
}

/// Commit `plan` straight to `target`'s branch (or to one pull request with `--create-pr`).
async fn direct(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    s: &PublishSettings,
    plan: &CommitPlan<'_>,
    target: Target<'_>,
    message: &Message<'_>,
) -> Result<Vec<CommitSummary>, PublishError> {
    let batches = &plan.batches;
    if target.is_new {
        reporter.stage("Creating", &format!("branch `{}`", target.branch));
        remote.create_branch(target.branch, None).await?;
    }
    let mut head = target.head;
    let mut revision = target.branch.to_string();
    let mut pr_opened = false;
    let mut done = Vec::new();
    for (i, batch) in batches.iter().enumerate() {
        let open_pr = s.create_pr && !pr_opened;
        let mut request = request(
            &revision,
            batch,
            message,
            (i, batches.len()),
            head.as_deref(),
            !s.create_pr,
        );
        request.create_pr = open_pr;
        let landed = match commit_batch(remote, reporter, &request, batch).await {
            Ok(landed) => landed,
            Err(e) => {
                let (branch, is_new, total) = (target.branch, target.is_new, batches.len());
                return Err(undo(remote, reporter, branch, is_new, i, total, e).await);
            }
        };
        if open_pr && let Some(n) = landed.pr_num {
            pr_opened = true;
            revision = format!("refs/pr/{n}");
        }
        head = landed.oid.clone();
        let mut c = summary(&revision, batch, landed);
        if open_pr {
            c.revision = target.branch.to_string();
        } else {
            c.pr_url = None;
            c.pr_num = None;
        }
        done.push(c);
    }
    Ok(done)
}

fn request<'a>(
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

async fn commit_batch(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    request: &CommitRequest<'_>,
    batch: &Batch<'_>,
) -> Result<Landed, PublishError> {
    let counter = Arc::new(AtomicU64::new(0));
    let commit = remote.commit(request, Arc::clone(&counter));
    with_progress(commit, &counter, reporter, batch.bytes()).await
}

fn summary(revision: &str, batch: &Batch<'_>, landed: Landed) -> CommitSummary {
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
async fn undo(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_branches_are_named_after_the_branch_and_the_base_commit() {
        assert_eq!(
            staging_name("v2", "0123456789abcdef0123"),
            "kbuild-staging-v2-0123456789ab"
        );
    }
}
