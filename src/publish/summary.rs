//! What a publish did, as `--json` prints it, as the `--dry-run` report, and the lines a publish
//! ends with (where the build is, and how to load it).

use crate::report::Reporter;

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
    /// Whether the owner is a trusted kernel publisher on the Hub (`kernels` then loads without
    /// `trust_remote_code=True`); `None` when the Hub was not asked (a dry run) or did not say.
    pub trusted_publisher: Option<bool>,
    /// Every published variant is cpu: the load line names the backend, which `kernels` would
    /// otherwise take from torch (cuda for PyPI's Linux torch).
    #[serde(skip)]
    pub cpu_only: bool,
    /// The Python line that loads what was published.
    pub load: String,
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
    /// `kernels.get_kernel("org/name", version=1)`: the published branch (`revision=` when it
    /// is not `v<version>`), `backend="cpu"` when nothing else was published, and
    /// `trust_remote_code=True` unless the Hub said the owner is a trusted publisher.
    pub fn load_line(&self) -> String {
        let mut args = vec![format!("\"{}\"", self.repo)];
        if self.branch == format!("v{}", self.version) {
            args.push(format!("version={}", self.version));
        } else {
            args.push(format!("revision=\"{}\"", self.branch));
        }
        if self.cpu_only {
            args.push("backend=\"cpu\"".into());
        }
        if self.trusted_publisher != Some(true) {
            args.push("trust_remote_code=True".into());
        }
        format!("kernels.get_kernel({})", args.join(", "))
    }

    /// The lines a publish ends with: why the load line trusts remote code (when it does),
    /// where the build is on the Hub, and the line that loads it.
    pub fn report_closing(&self, reporter: &dyn Reporter) {
        if let Some(note) = self.trust_note() {
            reporter.info(&note);
        }
        match self.commits.iter().find_map(|c| c.pr_url.as_deref()) {
            Some(url) => reporter.stage("Review", &format!("{url} (load it once merged)")),
            None => reporter.stage("Published", &format!("{}/tree/{}", self.url, self.branch)),
        }
        reporter.stage("Load", &self.load);
    }

    /// Why the load line needs `trust_remote_code=True`, when it does.
    fn trust_note(&self) -> Option<String> {
        let owner = self.repo.split('/').next().unwrap_or_default();
        match self.trusted_publisher {
            Some(true) => None,
            Some(false) => Some(format!(
                "note: `{owner}` is not a trusted kernel publisher on the Hub: `kernels` loads its \
                 kernels only with `trust_remote_code=True`"
            )),
            None => Some(format!(
                "note: the Hub did not say whether `{owner}` is a trusted kernel publisher: \
                 `trust_remote_code=True` loads its kernels either way"
            )),
        }
    }

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
