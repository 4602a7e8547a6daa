//! Committing a [`CommitPlan`]. Every publish ends in one compare-and-swap step on its branch
//! ([`land`](super::land)): a commit that the Hub refuses if the branch moved since it was read,
//! after which the build is compared with the new head and tried again. A plan of several
//! commits is first staged on a branch of its own, `kbuild-staging-<branch>-<build>-<base>`
//! (named after the build and the commit it starts from, so concurrent runs of different builds
//! never share one, and a re-run of the same build on the same base continues from what an
//! interrupted run staged); `main` is staged like any other branch.
//!
//! Branches are never deleted to move them, so an interrupted publish (Ctrl-C, a kill, a lost
//! connection) leaves the branch at the old build or the new one. Older kbuild versions moved
//! a branch by deleting and recreating it behind a `kbuild-moving-<branch>` marker;
//! [`restore_moved`] still finishes such a move. With `--create-pr` the pull request is the
//! staging area.

use super::batch::{Message, commit_batch, request, summary, undo};
use super::compare::{Changes, CommitPlan, Goal};
use super::error::PublishError;
use super::hub::Remote;
use super::land::{Landing, Outcome, land};
use super::settings::PublishSettings;
use super::summary::CommitSummary;
use crate::report::Reporter;

/// Where a commit plan's commits go.
pub(super) struct Target<'a> {
    pub branch: &'a str,
    /// Current head of the branch; `None` when it does not exist yet.
    pub head: Option<String>,
    /// Current head of `main`, which a new branch starts from.
    pub main: Option<String>,
}

/// Commit `plan` (the build `goal` compared with `target`): to one pull request with
/// `--create-pr`, otherwise staged when it needs several commits and landed in one step.
pub(super) async fn commit_plan(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    s: &PublishSettings,
    plan: &CommitPlan<'_>,
    goal: &Goal,
    target: Target<'_>,
    message: &Message<'_>,
) -> Result<Vec<CommitSummary>, PublishError> {
    if s.create_pr {
        let reused = reuse_pull_request(remote, reporter, s, goal, target.branch, message);
        if let Some(done) = reused.await? {
            return Ok(done);
        }
        let branch = target.branch;
        let done = pull_request(remote, reporter, plan, target, message).await?;
        return keep_oldest_pull_request(remote, reporter, branch, message.title, done).await;
    }
    let base = target.head.clone().or_else(|| target.main.clone());
    let landing = Landing {
        branch: target.branch,
        goal,
        head: target.head,
        main: target.main,
        staged: None,
    };
    match base {
        Some(base) if plan.batches.len() > 1 => {
            staged(remote, reporter, s, plan, landing, &base, message).await
        }
        _ => {
            let outcome = land(remote, reporter, landing, plan.changes, message).await?;
            Ok(outcome.commit.into_iter().collect())
        }
    }
}

/// `kbuild-staging-v1-<build>-<base>`, each 12 hex digits.
fn staging_name(branch: &str, build: &str, base: &str) -> String {
    format!(
        "{}{}",
        staging_prefix(branch, build),
        &base[..base.len().min(12)]
    )
}

/// What every staging branch of this build for `branch` starts with, whatever its base.
fn staging_prefix(branch: &str, build: &str) -> String {
    format!("kbuild-staging-{branch}-{}-", &build[..build.len().min(12)])
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
    // The move is done: its staging branch (named `kbuild-staging-<branch>-<base>` then) and
    // the marker have served.
    let prefix = format!("kbuild-staging-{branch}-");
    let staged = refs
        .branches
        .iter()
        .filter(|(n, h)| n.starts_with(&prefix) && **h == head);
    let staged: Vec<&String> = staged.map(|(n, _)| n).collect();
    remove_branches(remote, reporter, staged.into_iter().chain([&marker])).await;
    Ok(Some(head))
}

/// A staging branch whose last commit is this old was left by a publish that was interrupted:
/// a live one commits a batch every few minutes at most.
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Remove the staging branches (of any build, for any branch) whose last commit is older than
/// [`ABANDONED_AFTER`] at `now`: interrupted publishes leave them, and only a re-run of the same
/// build on the same base would have gone on from one. Best effort: a failure only warns.
pub(super) async fn sweep_abandoned_staging(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    now: std::time::SystemTime,
) {
    let Ok(refs) = remote.refs().await else {
        return;
    };
    let staging = (refs.branches.iter()).filter(|(n, _)| n.starts_with("kbuild-staging-"));
    for (name, head) in staging {
        let Ok(Some(date)) = remote.commit_date(head).await else {
            continue;
        };
        let Some(age) = now
            .duration_since(date)
            .ok()
            .filter(|a| *a >= ABANDONED_AFTER)
        else {
            continue;
        };
        match remote.delete_branch(name).await {
            Ok(()) => reporter.info(&format!(
                "{:>12} branch `{name}`, left by a publish interrupted {} days ago",
                "Removed",
                age.as_secs() / (24 * 3600)
            )),
            Err(e) => reporter.warn(&format!("could not remove branch `{name}`: {e}")),
        }
    }
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
            // Another run of the same build removed it first.
            let gone = remote
                .refs()
                .await
                .is_ok_and(|r| !r.branches.contains_key(name));
            if !gone {
                reporter.warn(&format!("could not remove branch `{name}`: {e}"));
            }
        }
    }
}

/// Restagings after the shared staging branch vanished under a run (see [`staged`]).
const MAX_RESTAGES: usize = 5;

/// How one staging attempt ended.
enum Staging {
    /// The build is on the branch; the commits made.
    Landed(Vec<CommitSummary>),
    /// The staging branch vanished under this run (a run of the same build landed and removed
    /// it, and the branch moved on since): the commits made, and the error that showed it.
    Vanished {
        done: Vec<CommitSummary>,
        error: PublishError,
    },
}

/// Commit `plan` on a staging branch started at `base` (or continue the one an interrupted run
/// of this build left, or that a run of the same build going on now shares), then land the
/// build on the branch. When the staging branch vanishes under it, the build is compared with
/// the branch as it is now and staged again.
async fn staged(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    s: &PublishSettings,
    plan: &CommitPlan<'_>,
    landing: Landing<'_>,
    base: &str,
    message: &Message<'_>,
) -> Result<Vec<CommitSummary>, PublishError> {
    let (branch, goal) = (landing.branch, landing.goal);
    let mut all = Vec::new();
    let mut attempt = stage_once(remote, reporter, s, plan.changes, landing, base, message).await?;
    for _ in 0..MAX_RESTAGES {
        let Staging::Vanished { done, .. } = &mut attempt else {
            break;
        };
        all.append(done);
        let refs = remote.refs().await?;
        let (head, main) = (refs.branches.get(branch), refs.branches.get("main"));
        let Some(base) = head.or(main).cloned() else {
            break;
        };
        reporter.warn(&format!(
            "the staging branch of this build was removed by another run of it, and `{branch}` \
             moved since: comparing with its head {} and staging again",
            &base[..base.len().min(7)]
        ));
        let changes = goal.diff(&remote.files(&base).await?);
        let landing = Landing {
            branch,
            goal,
            head: head.cloned(),
            main: main.cloned(),
            staged: None,
        };
        attempt = stage_once(remote, reporter, s, &changes, landing, &base, message).await?;
    }
    match attempt {
        Staging::Landed(done) => {
            all.extend(done);
            Ok(all)
        }
        Staging::Vanished { error, .. } => Err(PublishError::Raced {
            branch: branch.to_string(),
            rebases: MAX_RESTAGES,
            source: Box::new(error),
        }),
    }
}

/// One staging attempt: `changes` committed on `kbuild-staging-…-<base>` in batches, then
/// landed.
async fn stage_once(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    s: &PublishSettings,
    changes: &Changes,
    mut landing: Landing<'_>,
    base: &str,
    message: &Message<'_>,
) -> Result<Staging, PublishError> {
    let branch = landing.branch;
    let staging = staging_name(branch, &landing.goal.id(), base);
    let (staged_head, rest) =
        open_staging(remote, reporter, changes, &landing, &staging, base).await?;
    let batches = rest.batches(s.limits);
    let mut head = staged_head;
    let mut done = Vec::new();
    for (i, batch) in batches.iter().enumerate() {
        let at = (i, batches.len());
        let request = request(&staging, batch, message, at, Some(&head), false);
        let landed = match commit_batch(remote, reporter, &request, batch).await {
            Ok(landed) => landed,
            // A run of this same build landed it and removed the staging branch meanwhile.
            Err(_) if landed_by_another(remote, &landing).await => {
                return Ok(Staging::Landed(done));
            }
            Err(error) if vanished(remote, &staging).await => {
                return Ok(Staging::Vanished { done, error });
            }
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
        done.push(summary(&staging, batch, landed));
    }
    reporter.stage("Landing", &format!("the staged build on branch `{branch}`"));
    landing.staged = Some(head);
    let outcome = land(remote, reporter, landing, changes, message)
        .await
        .map_err(|e| PublishError::Landing {
            branch: branch.to_string(),
            staging: staging.clone(),
            source: Box::new(e),
        })?;
    remove_branches(remote, reporter, [&staging]).await;
    let Outcome { commit, .. } = outcome;
    done.extend(commit);
    Ok(Staging::Landed(done))
}

/// The staging branch `staging` for `changes` on `base`: created, or (left by an interrupted
/// run of this build, or created a moment ago by a run of it going on now) continued. Its head
/// and what it still lacks of `changes`. Staging branches of this build on older bases, and a
/// move marker left by older kbuild versions, are removed first.
async fn open_staging(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    changes: &Changes,
    landing: &Landing<'_>,
    staging: &str,
    base: &str,
) -> Result<(String, Changes), PublishError> {
    let branch = landing.branch;
    let refs = remote.refs().await?;
    // The same build staged on an older base: its commits are of no use on this one. Staging
    // branches of other builds belong to runs that may be going on right now.
    let prefix = staging_prefix(branch, &landing.goal.id());
    let marker = move_marker(branch);
    let stale_marker = refs.branches.contains_key(&marker).then_some(&marker);
    let stale = (refs.branches.keys()).filter(|n| n.starts_with(&prefix) && *n != staging);
    remove_branches(remote, reporter, stale.chain(stale_marker)).await;
    let mut existing = refs.branches.get(staging).cloned();
    if existing.is_none() {
        reporter.stage("Staging", &format!("on branch `{staging}`"));
        match remote.create_branch(staging, Some(base)).await {
            Ok(()) => return Ok((base.to_string(), changes.clone())),
            // A run of this same build created it a moment ago: go on from it together.
            Err(PublishError::Conflict { .. }) => {
                existing = remote.refs().await?.branches.get(staging).cloned();
            }
            Err(e) => return Err(e),
        }
    }
    let Some(head) = existing else {
        // Created and removed again by that run already: start it over.
        remote.create_branch(staging, Some(base)).await?;
        return Ok((base.to_string(), changes.clone()));
    };
    // Resuming commits only what the staging branch lacks.
    reporter.stage("Resuming", &format!("from branch `{staging}`"));
    let rest = changes.remaining(&remote.files(&head).await?);
    Ok((head, rest))
}

/// Whether the branch `staging` is gone.
async fn vanished(remote: &Remote<'_>, staging: &str) -> bool {
    remote
        .refs()
        .await
        .is_ok_and(|r| !r.branches.contains_key(staging))
}

/// Whether `landing`'s branch already holds its build: a run of the same build that shared the
/// staging branch landed it (and removed the branch) while this one was still committing.
async fn landed_by_another(remote: &Remote<'_>, landing: &Landing<'_>) -> bool {
    let Ok(refs) = remote.refs().await else {
        return false;
    };
    let Some(head) = refs.branches.get(landing.branch) else {
        return false;
    };
    match remote.files(head).await {
        Ok(files) => landing.goal.diff(&files).is_empty(),
        Err(_) => false,
    }
}

/// With `--create-pr`, a re-run goes on in the pull request an earlier run opened (open, same
/// title, same branch) instead of opening another: the build is compared with that PR's head and
/// only what differs is committed to it. `None` when there is no such pull request.
async fn reuse_pull_request(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    s: &PublishSettings,
    goal: &Goal,
    branch: &str,
    message: &Message<'_>,
) -> Result<Option<Vec<CommitSummary>>, PublishError> {
    let Some((pr, head)) = remote.open_pull_request(branch, message.title).await? else {
        return Ok(None);
    };
    let revision = format!("refs/pr/{}", pr.num);
    let url = format!("{}/discussions/{}", remote.url(), pr.num);
    let changes = goal.diff(&remote.files(&revision).await?);
    let plan = CommitPlan::new(&changes, s.limits);
    if plan.is_empty() {
        reporter.info(&format!(
            "{:>12} pull request {url} already holds this build: no commit made",
            "Up to date"
        ));
        let unchanged = CommitSummary {
            revision: branch.to_string(),
            oid: Some(head),
            files: 0,
            bytes: 0,
            pr_url: Some(url),
            pr_num: Some(pr.num),
        };
        return Ok(Some(vec![unchanged]));
    }
    reporter.stage("Updating", &format!("pull request {url}"));
    let mut parent = Some(head);
    let mut done = Vec::new();
    for (i, batch) in plan.batches.iter().enumerate() {
        let landed = {
            let at = (i, plan.batches.len());
            let request = request(&revision, batch, message, at, parent.as_deref(), false);
            commit_batch(remote, reporter, &request, batch).await?
        };
        parent = landed.oid.clone();
        let mut c = summary(branch, batch, landed);
        (c.pr_url, c.pr_num) = (Some(url.clone()), Some(pr.num));
        done.push(c);
    }
    Ok(Some(done))
}

/// Runs of one build that started together each found no pull request and opened one: the
/// oldest stays, and a run whose own is not the oldest closes it (with a comment naming the
/// one that stays) and reports its commits against that one, which holds the same build.
async fn keep_oldest_pull_request(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    branch: &str,
    title: &str,
    mut done: Vec<CommitSummary>,
) -> Result<Vec<CommitSummary>, PublishError> {
    let Some(ours) = done.first().and_then(|c| c.pr_num) else {
        return Ok(done);
    };
    let prs = remote.pull_requests_of(branch, title).await?;
    let Some(oldest) = prs.first().filter(|pr| pr.num < ours) else {
        return Ok(done);
    };
    let url = format!("{}/discussions/{}", remote.url(), oldest.num);
    let why = format!(
        "Closed by kbuild: #{} holds the same build, opened by a run that raced this one.",
        oldest.num
    );
    remote.close_pull_request(ours, &why).await?;
    reporter.info(&format!(
        "{:>12} pull request #{ours}: {url}, opened at the same time by a run of this build, \
         holds it",
        "Closed"
    ));
    for c in done.iter_mut().filter(|c| c.pr_num.is_some()) {
        (c.pr_num, c.pr_url) = (Some(oldest.num), Some(url.clone()));
    }
    Ok(done)
}

/// Commit `plan` to one pull request against `target`'s branch (created first when new).
async fn pull_request(
    remote: &Remote<'_>,
    reporter: &dyn Reporter,
    plan: &CommitPlan<'_>,
    target: Target<'_>,
    message: &Message<'_>,
) -> Result<Vec<CommitSummary>, PublishError> {
    let batches = &plan.batches;
    let is_new = target.head.is_none();
    if is_new {
        reporter.stage("Creating", &format!("branch `{}`", target.branch));
        remote.create_branch(target.branch, None).await?;
    }
    let mut head = target.head.or(target.main);
    let mut revision = target.branch.to_string();
    let mut pr_opened = false;
    let mut done = Vec::new();
    for (i, batch) in batches.iter().enumerate() {
        let open_pr = !pr_opened;
        let mut request = request(
            &revision,
            batch,
            message,
            (i, batches.len()),
            head.as_deref(),
            false,
        );
        request.create_pr = open_pr;
        let landed = match commit_batch(remote, reporter, &request, batch).await {
            Ok(landed) => landed,
            Err(e) => {
                let (branch, total) = (target.branch, batches.len());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_branches_are_named_after_the_branch_and_the_base_commit() {
        assert_eq!(
            staging_name("v2", "fedcba9876543210", "0123456789abcdef0123"),
            "kbuild-staging-v2-fedcba987654-0123456789ab"
        );
    }
}
