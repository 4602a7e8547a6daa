//! What a publish did, as `--json` prints it and as the `--dry-run` report.

/// What a publish did (or, with `--dry-run`, would do). Printed by `--json`.
#[derive(Debug, Default, serde::Serialize)]
pub struct PublishSummary {
    pub repo: String,
    pub repo_type: String,
    pub url: String,
    pub branch: String,
    pub version: u32,
    pub variants: Vec<String>,
    pub dry_run: bool,
    pub create_pr: bool,
    /// This publish created the repository (never in a dry run).
    pub repo_created: bool,
    /// This publish created the branch (never in a dry run).
    pub branch_created: bool,
    /// The repository existed before this publish.
    pub repo_exists: bool,
    /// The branch existed before this publish.
    pub branch_exists: bool,
    /// Files new to the branch.
    pub added: Vec<String>,
    /// Files whose content changed.
    pub updated: Vec<String>,
    /// Stale files removed from the replaced variant prefixes.
    pub deleted: Vec<String>,
    /// Files already on the branch with the same content.
    pub unchanged: usize,
    /// Bytes uploaded (or to upload).
    pub bytes: u64,
    /// `README.md` on `main`: `added`, `updated` or `unchanged`.
    pub card: String,
    pub commits: Vec<CommitSummary>,
    /// The branch and the card already held this build: nothing was uploaded, no commit made.
    pub up_to_date: bool,
}

/// One commit made.
#[derive(Debug, serde::Serialize)]
pub struct CommitSummary {
    pub revision: String,
    pub oid: Option<String>,
    pub files: usize,
    pub bytes: u64,
    pub pr_url: Option<String>,
    pub pr_num: Option<u64>,
}

impl PublishSummary {
    /// The `--json` output.
    pub fn to_json(&self) -> String {
        // Strings, numbers and lists only: serializing cannot fail.
        serde_json::to_string_pretty(self).expect("the summary always serializes")
    }

    /// The plan of a `--dry-run`, one line per file.
    pub fn dry_run_report(&self) -> String {
        let s = self;
        let mut out = format!("Dry run: {} branch `{}`", s.url, s.branch);
        if !s.repo_exists {
            out.push_str(" (the repository would be created)");
        } else if !s.branch_exists {
            out.push_str(" (the branch would be created from `main`)");
        }
        out.push('\n');
        for p in &s.added {
            out.push_str(&format!("  add     {p}\n"));
        }
        for p in &s.updated {
            out.push_str(&format!("  update  {p}\n"));
        }
        for p in &s.deleted {
            out.push_str(&format!("  delete  {p}\n"));
        }
        out.push_str(&format!(
            "{} added, {} updated, {} deleted, {} unchanged, {} bytes to upload; README.md on main: {}\nNothing was written.\n",
            s.added.len(),
            s.updated.len(),
            s.deleted.len(),
            s.unchanged,
            s.bytes,
            s.card
        ));
        out
    }
}
