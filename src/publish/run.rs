//! The publish pipeline as stages: verify → compare with the branch → commit in batches (the
//! repository created first when it is new) → card on `main`. Each commit is atomic; a new
//! branch whose commits fail is removed.

use std::collections::BTreeMap;

use super::batch::Message;
use super::card::Card;
use super::commit::{Target, commit_plan, move_marker, restore_moved, sweep_abandoned_staging};
use super::compare::{Changes, CommitPlan, Goal};
use super::error::PublishError;
use super::hub::Remote;
use super::local::{self, LocalBuild, LocalFile};
use super::settings::PublishSettings;
use super::signer;
use super::summary::{CommitSummary, PublishSummary};
use crate::check::VariantCheck;
use crate::report::Reporter;
use crate::sign::RECORD;

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

/// Publish the build described by `s`; with `dry_run`, only compare and report.
pub async fn publish(
    s: &PublishSettings,
    reporter: &dyn Reporter,
) -> Result<PublishSummary, PublishError> {
    check_repo_id(&s.repo_id)?;
    let build = verify(s, reporter)?;
    let branch = s
        .branch
        .clone()
        .unwrap_or_else(|| format!("v{}", build.version));
    check_branch(&branch)?;
    let readme = card(&build, s, &branch)?;
    let hub = Session::connect(s, reporter)?;
    let compared = hub.compare(&build, branch, readme).await?;
    let plan = compared.plan(s.limits);
    let mut summary = hub.summarize(&build, &compared.repo, &plan);
    summary.load = summary.load_line();
    reporter.info(&plan_line(&summary));
    if s.dry_run {
        return Ok(summary);
    }
    if compared.repo.exists {
        sweep_abandoned_staging(&hub.remote, reporter, std::time::SystemTime::now()).await;
    }
    if summary.up_to_date {
        reporter.info(&format!(
            "{:>12} `{}` branch `{}` already holds this build: nothing uploaded, no commit made",
            "Up to date", s.repo_id, summary.branch
        ));
    } else {
        let heads = hub.ensure_repo(&compared.repo).await?;
        summary.commits = hub.commit(&build, &compared, heads, &plan).await?;
        report_commits(reporter, &summary.commits);
    }
    summary.trusted_publisher = hub.remote.trusted_publisher().await.ok();
    summary.load = summary.load_line();
    Ok(summary)
}

/// Verify the build before anything is sent: every variant's digest and namespace, the
/// `kbuild check` rules (unless `--skip-check`), a clean git tree (unless `--allow-dirty`) and
/// the version build.toml configures.
fn verify(s: &PublishSettings, reporter: &dyn Reporter) -> Result<LocalBuild, PublishError> {
    if std::fs::symlink_metadata(&s.build_dir)
        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        return Err(PublishError::NotBuilt {
            path: s.build_dir.clone(),
        });
    }
    reporter.stage("Verifying", &s.build_dir.display().to_string());
    for path in crate::package::restore_moved_aside(&s.build_dir) {
        reporter.warn(&crate::package::restored_note(&path));
    }
    let build = local::collect(
        &s.build_dir,
        &s.variants,
        s.benchmarks_dir.as_deref(),
        &s.local,
    )?;
    for v in &build.variants {
        reporter.verbose(&format!(
            "{}: {} files, op namespace `{}`, digest ok",
            v.name,
            v.files.len(),
            v.id
        ));
    }
    if let Some(opts) = &s.check {
        check_rules(&build, opts)?;
    }
    let names = build.variants.iter().map(|v| v.name.as_str());
    crate::package::check_partial(&s.build_dir, names, s.allow_partial)?;
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
    let mut build = build;
    if let Some(record) = signer::signer_of(&build, &s.trust)? {
        reporter.stage(
            "Recording",
            &format!("signer {} ({})", record.signer(), record.issuer),
        );
        build.files.push(signer::record_file(&record));
        build.files.sort_by(|a, b| a.repo_path.cmp(&b.repo_path));
    }
    Ok(build)
}

/// The `kbuild check` rules over every variant; any finding refuses the publish.
fn check_rules(build: &LocalBuild, opts: &crate::check::CheckOptions) -> Result<(), PublishError> {
    let checks: Vec<VariantCheck> = build
        .variants
        .iter()
        .map(|v| VariantCheck::of(v, opts))
        .filter(|c| !c.findings.is_empty())
        .collect();
    if checks.is_empty() {
        Ok(())
    } else {
        Err(PublishError::Check {
            report: crate::check::human(&checks),
        })
    }
}

/// The kernel card, `README.md`, describing the build as published on `branch`: the project's
/// `CARD.md` when it has one.
fn card(build: &LocalBuild, s: &PublishSettings, branch: &str) -> Result<LocalFile, PublishError> {
    let mut card = Card::from_variants(&build.variants, &s.repo_id, branch)?;
    card.has_benchmark =
        (s.benchmarks_dir.as_ref()).is_some_and(|d| d.join("benchmark.py").is_file());
    let card = card.render(s.card.as_ref())?;
    Ok(LocalFile::from_bytes("README.md".into(), card.into_bytes()))
}

/// Heads of `main` and of the branch published to, when they exist.
#[derive(Debug, Clone, Default)]
struct Heads {
    main: Option<String>,
    branch: Option<String>,
}

/// The repository before the publish.
struct RepoState {
    /// The branch published to.
    branch: String,
    exists: bool,
    heads: Heads,
    /// Where the branch's files are read: the move marker when a dry run only plans to restore.
    files_ref: String,
}

/// What the build changes: on the branch, and the card on `main`.
struct Compared {
    repo: RepoState,
    /// The build's files on the branch (with the card when the branch is `main`).
    build: Changes,
    /// The card on `main`, when the branch is another.
    card: Changes,
    /// What the branch must hold (what `build` was computed from).
    build_goal: Goal,
    /// What `main` must hold for the card.
    card_goal: Goal,
}

impl Compared {
    /// Split both into commits: the one value the summary reports and the commit stage commits.
    fn plan(&self, limits: super::compare::BatchLimits) -> PublishPlan<'_> {
        PublishPlan {
            build: CommitPlan::new(&self.build, limits),
            card: CommitPlan::new(&self.card, limits),
        }
    }
}

/// The commits a publish makes, computed once.
struct PublishPlan<'a> {
    build: CommitPlan<'a>,
    card: CommitPlan<'a>,
}

impl PublishPlan<'_> {
    fn is_empty(&self) -> bool {
        self.build.is_empty() && self.card.is_empty()
    }

    fn bytes(&self) -> u64 {
        self.build.bytes() + self.card.bytes()
    }

    /// What happens to `README.md`: `added`, `updated` or `unchanged`.
    fn card_status(&self) -> &'static str {
        let (build, card) = (self.build.changes, self.card.changes);
        let is_readme = |f: &LocalFile| f.repo_path == "README.md";
        if build.added.iter().chain(&card.added).any(is_readme) {
            "added"
        } else if build.updated.iter().chain(&card.updated).any(is_readme) {
            "updated"
        } else {
            "unchanged"
        }
    }
}

/// What the stages that talk to the Hub share.
struct Session<'a> {
    s: &'a PublishSettings,
    reporter: &'a dyn Reporter,
    remote: Remote<'a>,
}

impl<'a> Session<'a> {
    /// Connect to the repository; without a token only a dry run goes on.
    fn connect(s: &'a PublishSettings, reporter: &'a dyn Reporter) -> Result<Self, PublishError> {
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
        Ok(Session {
            s,
            reporter,
            remote,
        })
    }

    /// Compare the build with `branch` and the card with `main`.
    async fn compare(
        &self,
        build: &LocalBuild,
        branch: String,
        readme: LocalFile,
    ) -> Result<Compared, PublishError> {
        let url = self.remote.url();
        self.reporter
            .stage("Comparing", &format!("{url} branch `{branch}`"));
        let repo = self.repo_state(branch).await?;
        // The files at the heads the refs named, not at the branches' names: another run may
        // move a branch between the two requests, and the head is what a commit goes on.
        let main_files = match &repo.heads.main {
            Some(main) => self.remote.files(main).await?,
            None => BTreeMap::new(),
        };
        // A new branch starts from `main`, so that is what it will hold before our commit.
        let base_files = match &repo.heads.branch {
            Some(head) if repo.branch != "main" => {
                let at = match repo.files_ref == repo.branch {
                    true => head,
                    false => &repo.files_ref,
                };
                self.remote.files(at).await?
            }
            _ => main_files.clone(),
        };
        let signed = build.files.iter().any(|f| f.repo_path == RECORD);
        if !signed && base_files.contains_key(RECORD) {
            self.reporter.warn(&format!(
                "`{}` records a signer in `{RECORD}`, but these variants are not signed: \
                 `kbuild verify` will report their signature MISSING (publish with `--sign`)",
                repo.branch
            ));
        }
        let mut build_goal = Goal {
            files: build.files.clone(),
            prefixes: build.prefixes.clone(),
        };
        let card_goal = if repo.branch == "main" {
            build_goal.files.push(readme);
            Goal::default()
        } else {
            Goal {
                files: vec![readme],
                prefixes: Vec::new(),
            }
        };
        let card = card_goal.diff(&main_files);
        let build = build_goal.diff(&base_files);
        Ok(Compared {
            repo,
            build,
            card,
            build_goal,
            card_goal,
        })
    }

    /// Whether the repository exists and where its branches are; a branch an earlier move lost
    /// is restored first (or, in a dry run, read from its move marker).
    async fn repo_state(&self, branch: String) -> Result<RepoState, PublishError> {
        let exists = self.remote.exists().await?;
        let mut heads = if exists {
            self.heads(&branch).await?
        } else {
            Heads::default()
        };
        let mut files_ref = branch.clone();
        let dry_run = self.s.dry_run;
        if exists && heads.branch.is_none() && branch != "main" {
            heads.branch = restore_moved(&self.remote, self.reporter, &branch, dry_run).await?;
            if heads.branch.is_some() && dry_run {
                files_ref = move_marker(&branch);
            }
        }
        Ok(RepoState {
            branch,
            exists,
            heads,
            files_ref,
        })
    }

    /// Current heads of `main` and of `branch`, when they exist.
    async fn heads(&self, branch: &str) -> Result<Heads, PublishError> {
        let refs = self.remote.refs().await?;
        let head = |name: &str| refs.branches.get(name).cloned();
        Ok(Heads {
            main: head("main"),
            branch: head(branch),
        })
    }

    /// What the publish does (or, in a dry run, would do), from the plan it commits.
    fn summarize(
        &self,
        build: &LocalBuild,
        repo: &RepoState,
        plan: &PublishPlan<'_>,
    ) -> PublishSummary {
        let (s, changes) = (self.s, plan.build.changes);
        let paths = |files: &[LocalFile]| files.iter().map(|f| f.repo_path.clone()).collect();
        let branch_exists = repo.heads.branch.is_some() || repo.branch == "main";
        PublishSummary {
            repo: s.repo_id.clone(),
            repo_type: hf_hub::RepoType::singular(&s.repo_type).to_string(),
            url: self.remote.url(),
            branch: repo.branch.clone(),
            version: build.version,
            variants: build.variants.iter().map(|v| v.name.clone()).collect(),
            dry_run: s.dry_run,
            create_pr: s.create_pr,
            // A dry run creates nothing: what it would create is in `*_exists`.
            repo_created: !repo.exists && !s.dry_run,
            branch_created: !branch_exists && !s.dry_run,
            repo_exists: repo.exists,
            branch_exists,
            added: paths(&changes.added),
            updated: paths(&changes.updated),
            deleted: changes.deleted.clone(),
            unchanged: changes.unchanged.len(),
            bytes: plan.bytes(),
            card: plan.card_status().to_string(),
            commits: Vec::new(),
            up_to_date: plan.is_empty(),
            trusted_publisher: None,
            cpu_only: build.variants.iter().all(|v| v.backend == "cpu"),
            load: String::new(),
        }
    }

    /// Create the repository when it does not exist yet; the heads the commits go on.
    async fn ensure_repo(&self, repo: &RepoState) -> Result<Heads, PublishError> {
        if repo.exists {
            return Ok(repo.heads.clone());
        }
        self.reporter.stage("Creating", &self.remote.url());
        self.remote.create(self.s.private).await?;
        self.heads(&repo.branch).await
    }

    /// Commit the plan: the build to `branch`, then the card to `main`.
    async fn commit(
        &self,
        build: &LocalBuild,
        compared: &Compared,
        heads: Heads,
        plan: &PublishPlan<'_>,
    ) -> Result<Vec<CommitSummary>, PublishError> {
        let branch = compared.repo.branch.as_str();
        let (remote, reporter, s) = (&self.remote, self.reporter, self.s);
        reporter.begin_bytes("Uploading", &format!("to {}", remote.url()), plan.bytes());
        let kernel = &build.variants[0].kernel_name;
        let title = format!(
            "Publish {kernel} v{} ({} variant{})",
            build.version,
            build.variants.len(),
            if build.variants.len() == 1 { "" } else { "s" }
        );
        let description = description(build);
        let mut commits = Vec::new();
        if !plan.build.is_empty() {
            let target = Target {
                branch,
                head: heads.branch.clone(),
                main: heads.main.clone(),
            };
            let message = Message {
                title: &title,
                description: &description,
            };
            let goal = &compared.build_goal;
            let made = commit_plan(remote, reporter, s, &plan.build, goal, target, &message);
            commits.extend(made.await?);
        }
        if !plan.card.is_empty() {
            let target = Target {
                branch: "main",
                head: heads.main.clone(),
                main: heads.main,
            };
            let title = format!("Update kernel card for {kernel}");
            let message = Message {
                title: &title,
                description: &description,
            };
            let goal = &compared.card_goal;
            let made = commit_plan(remote, reporter, s, &plan.card, goal, target, &message);
            commits.extend(made.await?);
        }
        Ok(commits)
    }
}

/// The description of every commit: kbuild's version and the variants.
fn description(build: &LocalBuild) -> String {
    let variants: Vec<String> = build
        .variants
        .iter()
        .map(|v| format!("- {}", v.name))
        .collect();
    format!(
        "Published with kbuild {}.\n\nVariants:\n{}",
        env!("CARGO_PKG_VERSION"),
        variants.join("\n")
    )
}

/// `        Plan 5 added, 0 updated, … (1.2 KiB to upload); README.md added`.
fn plan_line(summary: &PublishSummary) -> String {
    format!(
        "{:>12} {} added, {} updated, {} deleted, {} unchanged ({} to upload); README.md {}",
        "Plan",
        summary.added.len(),
        summary.updated.len(),
        summary.deleted.len(),
        summary.unchanged,
        human_bytes(summary.bytes),
        summary.card
    )
}

/// One `Committed` line per commit made (a pull request that already held the build made none,
/// and said so).
fn report_commits(reporter: &dyn Reporter, commits: &[CommitSummary]) {
    for c in commits.iter().filter(|c| c.files > 0) {
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

/// A branch name git and the Hub accept (`git check-ref-format --branch` rules, and not a
/// full ref): checked before anything is created, so that a typo leaves no empty repository.
fn check_branch(branch: &str) -> Result<(), PublishError> {
    let segments = || branch.split('/');
    let why = if branch.is_empty() {
        Some("it is empty")
    } else if branch.starts_with("refs/") {
        Some("it is a full ref; give the branch name alone")
    } else if branch.starts_with('-') {
        Some("it starts with `-`")
    } else if branch == "@" || branch.contains("@{") {
        Some("it is `@` or holds `@{`")
    } else if branch.contains("..") {
        Some("it holds `..`")
    } else if let Some(c) = branch
        .chars()
        .find(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(*c))
    {
        Some(match c {
            ' ' => "it holds a space",
            c if c.is_control() || c.is_whitespace() => "it holds a control or space character",
            _ => "it holds one of `~ ^ : ? * [ \\`",
        })
    } else if segments().any(str::is_empty) {
        Some("it starts or ends with `/` or holds `//`")
    } else if segments().any(|p| p.starts_with('.') || p.ends_with(".lock")) {
        Some("a part of it starts with `.` or ends with `.lock`")
    } else if branch.ends_with('.') {
        Some("it ends with `.`")
    } else if branch.len() > 255 {
        Some("it is longer than 255 bytes")
    } else {
        None
    };
    match why {
        Some(why) => Err(PublishError::InvalidBranch {
            branch: branch.to_string(),
            why,
        }),
        None => Ok(()),
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
    fn branch_names_follow_git_and_the_hub() {
        for good in [
            "v1",
            "main",
            "release/v1.2",
            "kbuild-staging-v1-abc",
            "pr_1",
        ] {
            assert!(check_branch(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "bad name",
            "refs/heads/v1",
            "a..b",
            "v1.lock",
            "-v1",
            "x/",
            "/x",
            "a//b",
            "v1~1",
            "a:b",
            "a\tb",
            ".hidden",
            "v1.",
            "@",
            "a@{1}",
        ] {
            assert!(check_branch(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn byte_counts_are_human_readable() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
