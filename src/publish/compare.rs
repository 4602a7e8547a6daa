//! Comparing the build with a branch (plain data): the [`Changes`] that make the branch hold
//! it (what to add, update, delete and leave alone), and the [`CommitPlan`] that splits them
//! into commits.

use std::collections::BTreeMap;

use super::local::LocalFile;

/// A file as the branch holds it (from the Hub's tree listing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    /// Git blob id: of the content, or of the LFS pointer for LFS/Xet files.
    pub oid: String,
    pub size: u64,
}

/// Changes that make the branch hold exactly the local files under the replaced prefixes.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// Files the branch does not have.
    pub added: Vec<LocalFile>,
    /// Files the branch has with other content.
    pub updated: Vec<LocalFile>,
    /// Remote files under a replaced prefix that the build no longer has.
    pub deleted: Vec<String>,
    /// Files the branch already has with the same content.
    pub unchanged: Vec<String>,
}

impl Changes {
    /// Compare local files with the branch. Deletes only under `prefixes` (e.g.
    /// `build/<variant>/`); remote files elsewhere are never touched.
    pub fn diff(
        local: Vec<LocalFile>,
        remote: &BTreeMap<String, RemoteFile>,
        prefixes: &[String],
    ) -> Changes {
        let mut changes = Changes::default();
        for file in &local {
            match remote.get(&file.repo_path) {
                None => changes.added.push(file.clone()),
                Some(r) if same_content(file, r) => changes.unchanged.push(file.repo_path.clone()),
                Some(_) => changes.updated.push(file.clone()),
            }
        }
        let local_paths: std::collections::BTreeSet<&str> =
            local.iter().map(|f| f.repo_path.as_str()).collect();
        changes.deleted = remote
            .keys()
            .filter(|p| prefixes.iter().any(|pre| p.starts_with(pre.as_str())))
            .filter(|p| !local_paths.contains(p.as_str()))
            .cloned()
            .collect();
        changes
    }

    /// What is left to do once `tree` (a staging branch an interrupted run left behind) holds
    /// part of the changes: uploads it lacks, deletes it still has.
    pub fn remaining(&self, tree: &BTreeMap<String, RemoteFile>) -> Changes {
        let missing = |f: &&LocalFile| !tree.get(&f.repo_path).is_some_and(|r| same_content(f, r));
        Changes {
            added: self.added.iter().filter(missing).cloned().collect(),
            updated: self.updated.iter().filter(missing).cloned().collect(),
            deleted: self
                .deleted
                .iter()
                .filter(|p| tree.contains_key(p.as_str()))
                .cloned()
                .collect(),
            unchanged: Vec::new(),
        }
    }

    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.updated.is_empty() && self.deleted.is_empty()
    }

    /// Bytes to upload.
    pub fn bytes(&self) -> u64 {
        self.uploads().map(|f| f.size).sum()
    }

    /// Added and updated files, in path order.
    pub fn uploads(&self) -> impl Iterator<Item = &LocalFile> {
        let mut all: Vec<&LocalFile> = self.added.iter().chain(&self.updated).collect();
        all.sort_by(|a, b| a.repo_path.cmp(&b.repo_path));
        all.into_iter()
    }

    /// Split into commits of at most `limits` each. Deletes go into the first commit; uploads
    /// follow in path order, so a variant's files stay together when they fit.
    pub fn batches(&self, limits: BatchLimits) -> Vec<Batch<'_>> {
        let mut batches = vec![Batch {
            uploads: Vec::new(),
            deletes: self.deleted.iter().map(String::as_str).collect(),
        }];
        let mut bytes = 0u64;
        for file in self.uploads() {
            let cur = batches.last_mut().expect("batches starts non-empty");
            let ops = cur.uploads.len() + cur.deletes.len();
            let full = ops >= limits.max_files
                || (!cur.uploads.is_empty() && bytes + file.size > limits.max_bytes);
            if full {
                batches.push(Batch::default());
                bytes = 0;
            }
            bytes += file.size;
            batches
                .last_mut()
                .expect("batches is non-empty")
                .uploads
                .push(file);
        }
        batches.retain(|b| !b.uploads.is_empty() || !b.deletes.is_empty());
        batches
    }
}

/// What a branch must hold after a publish: these files, and nothing else under `prefixes`.
#[derive(Debug, Clone, Default)]
pub struct Goal {
    pub files: Vec<LocalFile>,
    pub prefixes: Vec<String>,
}

impl Goal {
    /// The changes that make `remote` hold the goal.
    pub fn diff(&self, remote: &BTreeMap<String, RemoteFile>) -> Changes {
        Changes::diff(self.files.clone(), remote, &self.prefixes)
    }

    /// 16 hex digits naming the goal: the same for the same files under the same prefixes,
    /// whatever the branch holds.
    pub fn id(&self) -> String {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        for f in &self.files {
            h.update(format!("{}\0{}\0", f.repo_path, f.sha256));
        }
        for p in &self.prefixes {
            h.update(format!("{p}\0"));
        }
        hex::encode(&h.finalize()[..8])
    }
}

/// Changes split into commits, once: what `--dry-run` reports is what the commit stage makes.
#[derive(Debug)]
pub struct CommitPlan<'a> {
    pub changes: &'a Changes,
    /// One commit each, in order; none when there is nothing to change.
    pub batches: Vec<Batch<'a>>,
}

impl<'a> CommitPlan<'a> {
    pub fn new(changes: &'a Changes, limits: BatchLimits) -> CommitPlan<'a> {
        CommitPlan {
            changes,
            batches: changes.batches(limits),
        }
    }

    /// Nothing to commit.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Bytes to upload.
    pub fn bytes(&self) -> u64 {
        self.changes.bytes()
    }
}

/// Whether a local file has the content of a remote entry, whether the Hub stores it as a
/// regular git blob or behind an LFS pointer.
pub(super) fn same_content(local: &LocalFile, remote: &RemoteFile) -> bool {
    local.size == remote.size && (local.git_oid == remote.oid || local.lfs_oid == remote.oid)
}

/// Upper bounds for one commit.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Operations per commit.
    pub max_files: usize,
    /// Upload bytes per commit (a single larger file still gets a commit of its own). Servers
    /// without Xet receive the content inline in the commit body, so this bounds its size.
    pub max_bytes: u64,
}

impl BatchLimits {
    /// The defaults, unless `KBUILD_PUBLISH_BATCH_FILES` / `KBUILD_PUBLISH_BATCH_BYTES` say
    /// otherwise (for servers with smaller request limits, and for tests).
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> BatchLimits {
        let default = BatchLimits::default();
        let num = |k: &str| {
            env(k)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|n| *n > 0)
        };
        BatchLimits {
            max_files: num("KBUILD_PUBLISH_BATCH_FILES").map_or(default.max_files, |n| n as usize),
            max_bytes: num("KBUILD_PUBLISH_BATCH_BYTES").unwrap_or(default.max_bytes),
        }
    }
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_files: 500,
            max_bytes: 1 << 30,
        }
    }
}

/// One commit's worth of changes.
#[derive(Debug, Default)]
pub struct Batch<'a> {
    pub uploads: Vec<&'a LocalFile>,
    pub deletes: Vec<&'a str>,
}

impl Batch<'_> {
    pub fn bytes(&self) -> u64 {
        self.uploads.iter().map(|f| f.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(path: &str, content: &[u8]) -> LocalFile {
        LocalFile::from_bytes(path.into(), content.to_vec())
    }

    fn remote_of(f: &LocalFile) -> RemoteFile {
        RemoteFile {
            oid: f.git_oid.clone(),
            size: f.size,
        }
    }

    #[test]
    fn unchanged_build_changes_nothing() {
        let files = vec![local("build/v/a.py", b"a"), local("build/v/b.so", b"b")];
        let remote: BTreeMap<_, _> = files
            .iter()
            .map(|f| (f.repo_path.clone(), remote_of(f)))
            .collect();
        let changes = Changes::diff(files, &remote, &["build/v/".into()]);
        assert!(changes.is_empty());
        assert_eq!(changes.unchanged.len(), 2);
    }

    #[test]
    fn lfs_pointer_oid_counts_as_the_same_content() {
        let f = local("build/v/x.so", b"binary\0");
        let mut remote = BTreeMap::new();
        remote.insert(
            f.repo_path.clone(),
            RemoteFile {
                oid: f.lfs_oid.clone(),
                size: f.size,
            },
        );
        let changes = Changes::diff(vec![f], &remote, &["build/v/".into()]);
        assert!(changes.is_empty());
    }

    #[test]
    fn changed_file_is_an_update_and_stale_files_are_deleted_only_under_prefixes() {
        let old = local("build/v/a.py", b"old");
        let mut remote = BTreeMap::new();
        remote.insert(old.repo_path.clone(), remote_of(&old));
        let stale = local("build/v/gone.py", b"x");
        remote.insert(stale.repo_path.clone(), remote_of(&stale));
        let other = local("build/other/keep.py", b"x");
        remote.insert(other.repo_path.clone(), remote_of(&other));
        remote.insert(
            "README.md".into(),
            RemoteFile {
                oid: "r".into(),
                size: 1,
            },
        );

        let changes = Changes::diff(
            vec![local("build/v/a.py", b"new"), local("build/v/c.py", b"c")],
            &remote,
            &["build/v/".into()],
        );
        let paths = |v: &[LocalFile]| v.iter().map(|f| f.repo_path.clone()).collect::<Vec<_>>();
        assert_eq!(paths(&changes.updated), ["build/v/a.py"]);
        assert_eq!(paths(&changes.added), ["build/v/c.py"]);
        assert_eq!(changes.deleted, ["build/v/gone.py"]);
        assert_eq!(changes.bytes(), 4);
    }

    #[test]
    fn batches_respect_file_and_byte_limits() {
        let files: Vec<LocalFile> = (0..5)
            .map(|i| local(&format!("build/v/f{i}"), &[0u8; 10]))
            .collect();
        let changes = Changes {
            added: files,
            deleted: vec!["build/v/old".into()],
            ..Changes::default()
        };
        let by_files = changes.batches(BatchLimits {
            max_files: 2,
            max_bytes: u64::MAX,
        });
        let shape: Vec<(usize, usize)> = by_files
            .iter()
            .map(|b| (b.deletes.len(), b.uploads.len()))
            .collect();
        assert_eq!(shape, [(1, 1), (0, 2), (0, 2)]);

        let by_bytes = changes.batches(BatchLimits {
            max_files: 100,
            max_bytes: 25,
        });
        let sizes: Vec<u64> = by_bytes.iter().map(Batch::bytes).collect();
        assert_eq!(sizes, [20, 20, 10]);
    }

    #[test]
    fn a_commit_plan_of_no_changes_has_no_commits() {
        let none = Changes::default();
        let plan = CommitPlan::new(&none, BatchLimits::default());
        assert!(plan.is_empty());
        assert!(plan.batches.is_empty());
        let one = Changes {
            deleted: vec!["build/v/old".into()],
            ..Changes::default()
        };
        assert_eq!(
            CommitPlan::new(&one, BatchLimits::default()).batches.len(),
            1
        );
    }

    #[test]
    fn batch_limits_come_from_the_environment_when_set() {
        let limits =
            BatchLimits::from_env(|k| (k == "KBUILD_PUBLISH_BATCH_FILES").then(|| "3".to_string()));
        assert_eq!(limits.max_files, 3);
        assert_eq!(limits.max_bytes, BatchLimits::default().max_bytes);
        assert_eq!(
            BatchLimits::from_env(|_| Some("0".into())).max_files,
            BatchLimits::default().max_files
        );
    }

    #[test]
    fn remaining_leaves_out_what_the_staging_tree_already_holds() {
        let done = local("build/v/a.py", b"a");
        let todo = local("build/v/b.py", b"b");
        let changes = Changes {
            added: vec![done.clone(), todo.clone()],
            deleted: vec!["build/v/gone".into(), "build/v/gone2".into()],
            ..Changes::default()
        };
        let mut staged = BTreeMap::new();
        staged.insert(done.repo_path.clone(), remote_of(&done));
        staged.insert("build/v/gone2".to_string(), remote_of(&todo));
        let rest = changes.remaining(&staged);
        assert_eq!(rest.added.len(), 1);
        assert_eq!(rest.added[0].repo_path, "build/v/b.py");
        assert_eq!(rest.deleted, ["build/v/gone2"]);
    }

    #[test]
    fn a_file_larger_than_the_byte_limit_gets_its_own_commit() {
        let changes = Changes {
            added: vec![local("a", &[0u8; 100]), local("b", &[0u8; 1])],
            ..Changes::default()
        };
        let batches = changes.batches(BatchLimits {
            max_files: 100,
            max_bytes: 10,
        });
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].bytes(), 100);
    }
}
