//! The publish pipeline: verify → compare with the branch → create repo/branch → commit in
//! batches → card on `main`. Each commit is atomic; a new branch whose commits fail is removed.

use crate::check::VariantCheck;
use std::collections::BTreeMap;

use super::card::Card;
use super::commit::{Message, Target, commit_plan, move_marker, restore_moved};
use super::compare::Plan;
use super::error::PublishError;
use super::hub::Remote;
use super::local::{self, LocalFile};
use super::settings::PublishSettings;
use super::summary::PublishSummary;
use crate::report::Reporter;

/// [`publish`] on a runtime of its own, for callers that are not async.
pub fn publish_blocking(
    s: &PublishSettings,
    reporter: &dyn Reporter,
) -> Result<PublishSummary, PublishError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| PublishError::Runtime { source })?;
    runtime.block_on(publish(s, reporter))
}

/// Publish the build described by `settings`; with `dry_run`, only plan.
pub async fn publish(
    s: &PublishSettings,
    reporter: &dyn Reporter,
) -> Result<PublishSummary, PublishError> {
    check_repo_id(&s.repo_id)?;
    reporter.stage("Verifying", &s.build_dir.display().to_string());
    let build = local::collect(&s.build_dir, &s.variants, s.benchmarks_dir.as_deref())?;
    for v in &build.variants {
        reporter.verbose(&format!(
            "{}: {} files, op namespace `{}`, digest ok",
            v.name,
            v.files.len(),
            v.id
        ));
    }
    if let Some(opts) = &s.check {
        let checks: Vec<VariantCheck> = build
            .variants
            .iter()
            .map(|v| VariantCheck {
                variant: v.name.clone(),
                findings: crate::check::check_variant(v, opts),
            })
            .filter(|c| !c.findings.is_empty())
            .collect();
        if !checks.is_empty() {
            return Err(PublishError::Check {
                report: crate::check::human(&checks),
            });
        }
    }
    let dirty: Vec<String> = build
        .variants
        .iter()
        .filter(|v| v.dirty())
        .map(|v| v.name.clone())
        .collect();
    if !dirty.is_empty() {
        reporter.warn(&format!(
            "built from a dirty git tree: {} (the recorded revision does not identify its sources)",
            dirty.join(", ")
        ));
        if !s.allow_dirty {
            return Err(PublishError::Dirty { variants: dirty });
        }
    }
    if let Some(configured) = s.project_version
        && configured != build.version
    {
        return Err(PublishError::StaleBuild {
            built: build.version,
            configured,
        });
    }
    let branch = s
        .branch
        .clone()
        .unwrap_or_else(|| format!("v{}", build.version));
    let card = Card::from_variants(&build.variants, &s.repo_id, &branch)?.render()?;
    let readme = LocalFile::from_bytes("README.md".into(), card.into_bytes());

    if s.token.is_none() && !s.dry_run {
        return Err(PublishError::NoToken);
    }
    let token = s.token.as_ref().map(|(t, _)| t);
    let remote = Remote::connect(
        &s.endpoint,
        token,
        s.repo_type,
        &s.repo_id,
        s.retry,
        reporter,
    )?;
    reporter.stage("Comparing", &format!("{} branch `{branch}`", remote.url()));

    let exists = remote.exists().await?;
    let (main_head, mut branch_head) = if exists {
        heads(&remote, &branch).await?
    } else {
        (None, None)
    };
    // Where the branch's files are read: the move marker when a dry run only plans to restore.
    let mut files_ref = branch.clone();
    if exists && branch_head.is_none() && branch != "main" {
        branch_head = restore_moved(&remote, reporter, &branch, s.dry_run).await?;
        if branch_head.is_some() && s.dry_run {
            files_ref = move_marker(&branch);
        }
    }
    let main_files = match main_head {
        Some(_) => remote.files("main").await?,
        None => BTreeMap::new(),
    };
    // A new branch starts from `main`, so that is what it will hold before our commit.
    let base_files = match &branch_head {
        Some(_) if branch != "main" => remote.files(&files_ref).await?,
        _ => main_files.clone(),
    };

    let card_on_branch = branch == "main";
    let mut files = build.files.clone();
    if card_on_branch {
        files.push(readme.clone());
    }
    let plan = Plan::diff(files, &base_files, &build.prefixes);
    let card_plan = if card_on_branch {
        Plan::default()
    } else {
        Plan::diff(vec![readme], &main_files, &[])
    };
    let card_status = card_status(&plan, &card_plan);

    let mut summary = PublishSummary {
        repo: s.repo_id.clone(),
        repo_type: hf_hub::RepoType::singular(&s.repo_type).to_string(),
        url: remote.url(),
        branch: branch.clone(),
        version: build.version,
        variants: build.variants.iter().map(|v| v.name.clone()).collect(),
        dry_run: s.dry_run,
        create_pr: s.create_pr,
        repo_created: !exists,
        branch_created: branch_head.is_none() && branch != "main",
        added: paths(&plan.added),
        updated: paths(&plan.updated),
        deleted: plan.deleted.clone(),
        unchanged: plan.unchanged.len(),
        bytes: plan.bytes() + card_plan.bytes(),
        card: card_status.to_string(),
        commits: Vec::new(),
        up_to_date: plan.is_empty() && card_plan.is_empty(),
    };
    reporter.info(&format!(
        "{:>12} {} added, {} updated, {} deleted, {} unchanged ({} to upload); README.md {}",
        "Plan",
        plan.added.len(),
        plan.updated.len(),
        plan.deleted.len(),
        plan.unchanged.len(),
        human_bytes(summary.bytes),
        card_status
    ));
    if s.dry_run {
        return Ok(summary);
    }
    if summary.up_to_date {
        reporter.info(&format!(
            "{:>12} `{}` branch `{branch}` already holds this build: nothing uploaded, no commit made",
            "Up to date", s.repo_id
        ));
        return Ok(summary);
    }

    let (main_head, branch_head) = if exists {
        (main_head, branch_head)
    } else {
        reporter.stage("Creating", &remote.url());
        remote.create(s.private).await?;
        heads(&remote, &branch).await?
    };

    reporter.begin_bytes(&format!("to {}", remote.url()), summary.bytes);
    let title = format!(
        "Publish {} v{} ({} variant{})",
        build.variants[0].kernel_name,
        build.version,
        build.variants.len(),
        if build.variants.len() == 1 { "" } else { "s" }
    );
    let description = format!(
        "Published with kbuild {}.\n\nVariants:\n{}",
        env!("CARGO_PKG_VERSION"),
        summary
            .variants
            .iter()
            .map(|v| format!("- {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let target = Target {
        branch: &branch,
        head: branch_head.clone().or(main_head.clone()),
        is_new: branch_head.is_none(),
    };
    let message = Message {
        title: &title,
        description: &description,
    };
    if !plan.is_empty() {
        let commits = commit_plan(&remote, reporter, s, &plan, target, &message).await?;
        summary.commits.extend(commits);
    }
    if !card_plan.is_empty() {
        let target = Target {
            branch: "main",
            head: main_head,
            is_new: false,
        };
        let title = format!("Update kernel card for {}", build.variants[0].kernel_name);
        let message = Message {
            title: &title,
            description: &description,
        };
        let commits = commit_plan(&remote, reporter, s, &card_plan, target, &message).await?;
        summary.commits.extend(commits);
    }
    for c in &summary.commits {
        let what = match &c.pr_url {
            Some(url) => format!("pull request {url}"),
            None => format!(
                "`{}` at {}",
                c.revision,
                c.oid
                    .as_deref()
                    .map(|o| &o[..o.len().min(7)])
                    .unwrap_or("?")
            ),
        };
        reporter.stage(
            "Committed",
            &format!("{} file(s), {} → {what}", c.files, human_bytes(c.bytes)),
        );
    }
    Ok(summary)
}

/// Current heads of `main` and of `branch`, when they exist.
async fn heads(
    remote: &Remote<'_>,
    branch: &str,
) -> Result<(Option<String>, Option<String>), PublishError> {
    let refs = remote.refs().await?;
    let head = |name: &str| refs.branches.get(name).cloned();
    Ok((head("main"), head(branch)))
}

fn card_status(plan: &Plan, card_plan: &Plan) -> &'static str {
    let is_readme = |f: &LocalFile| f.repo_path == "README.md";
    if plan.added.iter().chain(&card_plan.added).any(is_readme) {
        "added"
    } else if plan.updated.iter().chain(&card_plan.updated).any(is_readme) {
        "updated"
    } else {
        "unchanged"
    }
}

fn paths(files: &[LocalFile]) -> Vec<String> {
    files.iter().map(|f| f.repo_path.clone()).collect()
}

fn check_repo_id(repo: &str) -> Result<(), PublishError> {
    let part_ok = |p: &str| {
        !p.is_empty()
            && !p.starts_with(['.', '-'])
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match repo.split_once('/') {
        Some((org, name)) if part_ok(org) && part_ok(name) => Ok(()),
        _ => Err(PublishError::InvalidRepoId {
            repo: repo.to_string(),
        }),
    }
}

/// `1.5 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_are_org_slash_name() {
        assert!(check_repo_id("org/ltx_kernels").is_ok());
        for bad in ["ltx", "org/", "/x", "a/b/c", "org/na me", "../x"] {
            assert!(check_repo_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn byte_counts_are_human_readable() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
