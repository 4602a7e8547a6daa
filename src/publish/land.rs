//! Landing a build on its branch in one compare-and-swap step, the way the Hub offers it: a
//! commit whose `parentCommit` must still be the branch's head (the Hub answers 412 otherwise),
//! or, for a branch that does not exist yet, creating it (409 when another run created it
//! first). The branch is never deleted, so an interrupted run leaves it at the old build or
//! the new one, never missing and never half of each.
//!
//! A run that loses the race reads the new head, compares its build with it again and tries
//! once more: its variants replace theirs wholesale (every file under the build's prefixes),
//! and whatever it does not publish stays as the winner left it. After [`MAX_REBASES`] lost
//! races in a row it gives up with an error that says so.

use std::collections::BTreeMap;

use super::batch::{Message, commit_batch, request, undo};
use super::compare::{Batch, Changes, Goal, RemoteFile};
use super::error::PublishError;
use super::hub::Remote;
use super::summary::CommitSummary;
use crate::report::Reporter;

/// Lost races after which a run gives up (each one means another run landed meanwhile).
pub(super) const MAX_REBASES: usize = 20;

/// Where a build lands and what the branch looked like when the build was compared with it.
pub(super) struct Landing<'a> {
    pub branch: &'a str,
    /// What the branch must hold once landed (its files, and nothing else under its prefixes).
    pub goal: &'a Goal,
    /// Head of the branch at the comparison; `None` when it did not exist.
    pub head: Option<String>,
    /// Head of `main`, which a new branch starts from.
    pub main: Option<String>,
    /// A commit on top of `head` (or `main`) that holds the whole build: the staged commits.
    /// A new branch is created right there.
    pub staged: Option<String>,
}

/// How a landing went.
pub(super) struct Outcome {
    /// The commit made on the branch, if one was needed.
    pub commit: Option<CommitSummary>,
    /// This run created the branch.
    pub created: bool,
    /// Races lost before landing.
    pub rebases: usize,
}

/// Land `changes` (the build compared with `landing.head`) on the branch, rebasing onto a
/// head that moved meanwhile.
pub(super) async fn land(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    landing: Landing<'_>,
    changes: &Changes,
    message: &Message<'_>,
) -> Result<Outcome, PublishError> {
    let branch = landing.branch;
    let mut head = landing.head.clone();
    let mut staged = landing.staged.clone();
    let mut rebased: Option<Changes> = None;
    let mut outcome = Outcome {
        commit: None,
        created: false,
        rebases: 0,
    };
    loop {
        let changes = rebased.as_ref().unwrap_or(changes);
        let step = match head.clone() {
            None => {
                let start = staged.take().or_else(|| landing.main.clone());
                match create(remote, reporter, branch, start.as_deref()).await {
                    Ok(()) if landing.staged.is_some() && outcome.rebases == 0 => {
                        outcome.created = true;
                        return Ok(outcome);
                    }
                    Ok(()) => {
                        outcome.created = true;
                        head = start;
                        continue;
                    }
                    Err(e) => Err(e),
                }
            }
            // Another run landed exactly this build meanwhile.
            Some(_) if changes.is_empty() => return Ok(outcome),
            Some(parent) => commit_all(remote, reporter, branch, changes, &parent, message).await,
        };
        let lost = match step {
            Ok(summary) => {
                outcome.commit = Some(summary);
                return Ok(outcome);
            }
            Err(e @ PublishError::Conflict { .. }) => e,
            // A branch this run created for a commit that failed is removed again.
            Err(e) if outcome.created && landing.staged.is_none() => {
                return Err(undo(remote, reporter, branch, true, 0, 1, e).await);
            }
            Err(e) => return Err(e),
        };
        outcome.rebases += 1;
        if outcome.rebases > MAX_REBASES {
            return Err(PublishError::Raced {
                branch: branch.to_string(),
                rebases: MAX_REBASES,
                source: Box::new(lost),
            });
        }
        staged = None;
        let (now, tree) = current(remote, branch).await?;
        reporter.warn(&format!(
            "`{branch}` moved while this build was being published: comparing with its new head \
             {} and trying again (attempt {} of {})",
            now.as_deref().map_or("(none)", short),
            outcome.rebases + 1,
            MAX_REBASES + 1
        ));
        rebased = Some(landing.goal.diff(&tree));
        head = now;
    }
}

/// The branch's head now and its files there (none when the branch is gone).
async fn current(
    remote: &Remote<'_>,
    branch: &str,
) -> Result<(Option<String>, BTreeMap<String, RemoteFile>), PublishError> {
    let refs = remote.refs().await?;
    match refs.branches.get(branch) {
        // The tree of that very commit: the branch may move again before the next attempt.
        Some(head) => Ok((Some(head.clone()), remote.files(head).await?)),
        None => {
            let main = refs.branches.get("main").cloned().unwrap_or_default();
            Ok((None, remote.files(&main).await?))
        }
    }
}

async fn create(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    branch: &str,
    start: Option<&str>,
) -> Result<(), PublishError> {
    reporter.stage("Creating", &format!("branch `{branch}`"));
    remote.create_branch(branch, start).await
}

/// Every change in one commit on top of `parent`, refused by the Hub if `branch` moved.
async fn commit_all(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    branch: &str,
    changes: &Changes,
    parent: &str,
    message: &Message<'_>,
) -> Result<CommitSummary, PublishError> {
    let batch = Batch {
        uploads: changes.uploads().collect(),
        deletes: changes.deleted.iter().map(String::as_str).collect(),
    };
    let req = request(branch, &batch, message, (0, 1), Some(parent), true);
    let landed = commit_batch(remote, reporter, &req, &batch).await?;
    Ok(CommitSummary {
        revision: branch.to_string(),
        oid: landed.oid,
        files: batch.uploads.len() + batch.deletes.len(),
        bytes: batch.bytes(),
        pr_url: None,
        pr_num: None,
    })
}

/// The first 7 characters of a commit id.
fn short(oid: &str) -> &str {
    &oid[..oid.len().min(7)]
}
