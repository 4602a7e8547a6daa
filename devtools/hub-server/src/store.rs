//! On-disk repositories: content-addressed blobs and per-ref commit chains, written atomically.
//!
//! Layout under the root:
//! ```text
//! blobs/<sha256>                               file contents
//! repos/<kind>/<owner>/<name>/repo.json        visibility, refs (name -> commit id), PR counter
//! repos/<kind>/<owner>/<name>/commits/<id>.json  parents, message, date, tree (path -> blob)
//! ```
//! A commit is visible only once `repo.json` (renamed into place last) points at it, so a failed
//! or interrupted commit changes nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha1::Digest as _;

/// Repository kinds the Hub knows, with their API segment and URL prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoKind {
    Model,
    Dataset,
    Space,
    Kernel,
}

impl RepoKind {
    /// From the plural API segment (`models`, `kernels`, ...).
    pub fn from_plural(s: &str) -> Option<Self> {
        match s {
            "models" => Some(RepoKind::Model),
            "datasets" => Some(RepoKind::Dataset),
            "spaces" => Some(RepoKind::Space),
            "kernels" => Some(RepoKind::Kernel),
            _ => None,
        }
    }

    /// From the singular `type` field of repo create bodies (absent means model).
    pub fn from_singular(s: &str) -> Option<Self> {
        match s {
            "model" => Some(RepoKind::Model),
            "dataset" => Some(RepoKind::Dataset),
            "space" => Some(RepoKind::Space),
            "kernel" => Some(RepoKind::Kernel),
            _ => None,
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            RepoKind::Model => "models",
            RepoKind::Dataset => "datasets",
            RepoKind::Space => "spaces",
            RepoKind::Kernel => "kernels",
        }
    }

    /// Prefix of web URLs (`resolve`, LFS): empty for models.
    pub fn url_prefix(self) -> &'static str {
        match self {
            RepoKind::Model => "",
            RepoKind::Dataset => "datasets/",
            RepoKind::Space => "spaces/",
            RepoKind::Kernel => "kernels/",
        }
    }
}

/// A repository's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoId {
    pub kind: RepoKind,
    pub owner: String,
    pub name: String,
}

impl fmt::Display for RepoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// One file in a commit's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// sha256 of the content (the blob's name).
    pub sha256: String,
    pub size: u64,
    /// Git object id the Hub reports: of the content, or of the LFS pointer for LFS files.
    pub oid: String,
    /// Stored through LFS (committed as `lfsFile`).
    pub lfs: bool,
}

impl FileEntry {
    /// An entry for content committed inline (a regular git blob).
    pub fn regular(content: &[u8]) -> Self {
        FileEntry {
            sha256: hex::encode(sha2::Sha256::digest(content)),
            size: content.len() as u64,
            oid: git_blob_oid(content),
            lfs: false,
        }
    }

    /// An entry for an LFS object already in the blob store.
    pub fn lfs(sha256: &str, size: u64) -> Self {
        FileEntry {
            sha256: sha256.to_string(),
            size,
            oid: git_blob_oid(lfs_pointer(sha256, size).as_bytes()),
            lfs: true,
        }
    }
}

/// The git LFS pointer file for an object.
pub fn lfs_pointer(sha256: &str, size: u64) -> String {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n")
}

/// Git's blob object id: sha1 of `blob <len>\0<content>`.
pub fn git_blob_oid(content: &[u8]) -> String {
    let mut h = sha1::Sha1::new();
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(content);
    hex::encode(h.finalize())
}

/// A commit: a full snapshot of the tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Commit {
    pub id: String,
    pub parents: Vec<String>,
    pub title: String,
    pub message: String,
    /// RFC 3339.
    pub date: String,
    pub tree: BTreeMap<String, FileEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoMeta {
    pub private: bool,
    pub created_at: String,
    pub next_pr: u64,
    /// Full ref name (`refs/heads/main`, `refs/pr/1`) -> commit id.
    pub refs: BTreeMap<String, String>,
    /// Pull requests by number: title, target branch, `open` or `closed`.
    #[serde(default)]
    pub pull_requests: BTreeMap<u64, PullRequest>,
}

/// What the Hub's discussions API says of a pull request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullRequest {
    pub title: String,
    /// The branch it would merge into (short name).
    pub target: String,
    pub status: String,
}

/// A change inside a commit.
#[derive(Debug, Clone)]
pub enum Op {
    Put { path: String, entry: FileEntry },
    Delete { path: String },
    DeleteFolder { path: String },
}

/// Where a commit goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// An existing branch or PR ref (short or full name).
    Ref(String),
    /// A new pull request against this branch.
    NewPr(String),
}

/// What a successful commit produced.
#[derive(Debug, Clone)]
pub struct Committed {
    pub id: String,
    pub pr_num: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("Repository not found")]
    RepoNotFound,
    #[error("Invalid rev id: {0}")]
    RevisionNotFound(String),
    #[error("Entry not found: {0}")]
    EntryNotFound(String),
    #[error("{0} already exists")]
    Exists(String),
    #[error(
        "A commit has happened since. Please refresh and try again (parent {expected}, head {head})"
    )]
    ParentMismatch { expected: String, head: String },
    #[error("{0}")]
    BadRequest(String),
    #[error("storage: {0}")]
    Io(#[from] std::io::Error),
    #[error("storage: {0}")]
    Json(#[from] serde_json::Error),
}

/// The on-disk store. Not thread-safe by itself: callers serialise access.
pub struct Store {
    root: PathBuf,
}

const GITATTRIBUTES: &str = "*.bin filter=lfs diff=lfs merge=lfs -text\n\
*.safetensors filter=lfs diff=lfs merge=lfs -text\n\
*.so filter=lfs diff=lfs merge=lfs -text\n\
*.zip filter=lfs diff=lfs merge=lfs -text\n";

impl Store {
    pub fn open(root: &Path) -> std::io::Result<Store> {
        std::fs::create_dir_all(root.join("blobs"))?;
        std::fs::create_dir_all(root.join("repos"))?;
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    fn repo_dir(&self, repo: &RepoId) -> PathBuf {
        self.root
            .join("repos")
            .join(repo.kind.plural())
            .join(&repo.owner)
            .join(&repo.name)
    }

    pub fn blob_path(&self, sha256: &str) -> PathBuf {
        self.root.join("blobs").join(sha256)
    }

    pub fn has_blob(&self, sha256: &str) -> bool {
        self.blob_path(sha256).is_file()
    }

    /// Store content; returns its sha256.
    pub fn put_blob(&self, content: &[u8]) -> Result<String, StoreError> {
        let sha = hex::encode(sha2::Sha256::digest(content));
        let path = self.blob_path(&sha);
        if !path.is_file() {
            write_atomic(&path, content)?;
        }
        Ok(sha)
    }

    pub fn read_blob(&self, sha256: &str) -> Result<Vec<u8>, StoreError> {
        Ok(std::fs::read(self.blob_path(sha256))?)
    }

    pub fn meta(&self, repo: &RepoId) -> Result<RepoMeta, StoreError> {
        let path = self.repo_dir(repo).join("repo.json");
        match std::fs::read(&path) {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::RepoNotFound),
            Err(e) => Err(e.into()),
        }
    }

    fn write_meta(&self, repo: &RepoId, meta: &RepoMeta) -> Result<(), StoreError> {
        let path = self.repo_dir(repo).join("repo.json");
        write_atomic(&path, &serde_json::to_vec_pretty(meta)?)?;
        Ok(())
    }

    /// Create a repository whose `main` holds an initial commit with `.gitattributes`.
    pub fn create_repo(&self, repo: &RepoId, private: bool) -> Result<(), StoreError> {
        if self.meta(repo).is_ok() {
            return Err(StoreError::Exists(format!("Repository {repo}")));
        }
        let blob = GITATTRIBUTES.as_bytes();
        self.put_blob(blob)?;
        let mut tree = BTreeMap::new();
        tree.insert(".gitattributes".to_string(), FileEntry::regular(blob));
        let commit = self.write_commit(repo, vec![], "initial commit", "", tree)?;
        let mut refs = BTreeMap::new();
        refs.insert("refs/heads/main".to_string(), commit.id);
        self.write_meta(
            repo,
            &RepoMeta {
                private,
                created_at: now(),
                next_pr: 1,
                refs,
                pull_requests: BTreeMap::new(),
            },
        )
    }

    pub fn delete_repo(&self, repo: &RepoId) -> Result<(), StoreError> {
        self.meta(repo)?;
        std::fs::remove_dir_all(self.repo_dir(repo))?;
        Ok(())
    }

    /// How many repositories of `kind` `owner` has (a directory without `repo.json` is not one).
    pub fn count_repos(&self, kind: RepoKind, owner: &str) -> Result<usize, StoreError> {
        let dir = self.root.join("repos").join(kind.plural()).join(owner);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        let mut count = 0;
        for entry in entries {
            if entry?.path().join("repo.json").is_file() {
                count += 1;
            }
        }
        Ok(count)
    }

    pub fn load_commit(&self, repo: &RepoId, id: &str) -> Result<Commit, StoreError> {
        if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::RevisionNotFound(id.to_string()));
        }
        let path = self
            .repo_dir(repo)
            .join("commits")
            .join(format!("{id}.json"));
        match std::fs::read(&path) {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::RevisionNotFound(id.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The full ref name a revision names, if it names a ref.
    fn ref_name(meta: &RepoMeta, rev: &str) -> Option<String> {
        [rev.to_string(), format!("refs/heads/{rev}")]
            .into_iter()
            .find(|name| meta.refs.contains_key(name))
    }

    /// Resolve a branch, full ref, PR ref or commit id to a commit.
    pub fn resolve(&self, repo: &RepoId, rev: &str) -> Result<Commit, StoreError> {
        let meta = self.meta(repo)?;
        if let Some(name) = Self::ref_name(&meta, rev) {
            return self.load_commit(repo, &meta.refs[&name]);
        }
        self.load_commit(repo, rev)
    }

    /// First-parent history from a revision, newest first.
    pub fn history(&self, repo: &RepoId, rev: &str) -> Result<Vec<Commit>, StoreError> {
        let mut out = vec![self.resolve(repo, rev)?];
        while let Some(parent) = out.last().and_then(|c| c.parents.first().cloned()) {
            out.push(self.load_commit(repo, &parent)?);
        }
        Ok(out)
    }

    pub fn create_branch(
        &self,
        repo: &RepoId,
        branch: &str,
        starting_point: Option<&str>,
    ) -> Result<(), StoreError> {
        validate_ref_name(branch)?;
        let mut meta = self.meta(repo)?;
        let full = format!("refs/heads/{branch}");
        if meta.refs.contains_key(&full) {
            return Err(StoreError::Exists(format!("Reference {full}")));
        }
        let start = self.resolve(repo, starting_point.unwrap_or("main"))?;
        meta.refs.insert(full, start.id);
        self.write_meta(repo, &meta)
    }

    pub fn delete_branch(&self, repo: &RepoId, branch: &str) -> Result<(), StoreError> {
        let mut meta = self.meta(repo)?;
        if branch == "main" {
            return Err(StoreError::BadRequest(
                "Cannot delete the main branch".into(),
            ));
        }
        if meta.refs.remove(&format!("refs/heads/{branch}")).is_none() {
            return Err(StoreError::RevisionNotFound(branch.to_string()));
        }
        self.write_meta(repo, &meta)
    }

    /// Open or close pull request `num`.
    pub fn set_pr_status(&self, repo: &RepoId, num: u64, status: &str) -> Result<(), StoreError> {
        let mut meta = self.meta(repo)?;
        let pr = meta
            .pull_requests
            .get_mut(&num)
            .ok_or_else(|| StoreError::RevisionNotFound(format!("refs/pr/{num}")))?;
        pr.status = status.to_string();
        self.write_meta(repo, &meta)
    }

    /// Apply `ops` on top of the target ref's head and move the ref. Nothing changes on error.
    pub fn commit(
        &self,
        repo: &RepoId,
        target: Target,
        ops: &[Op],
        title: &str,
        message: &str,
        parent_commit: Option<&str>,
    ) -> Result<Committed, StoreError> {
        let mut meta = self.meta(repo)?;
        let (ref_name, base_ref, pr_num) = match &target {
            Target::Ref(rev) => {
                let name = Self::ref_name(&meta, rev)
                    .ok_or_else(|| StoreError::RevisionNotFound(rev.clone()))?;
                (name.clone(), name, None)
            }
            Target::NewPr(rev) => {
                let base = Self::ref_name(&meta, rev)
                    .filter(|n| n.starts_with("refs/heads/"))
                    .ok_or_else(|| StoreError::RevisionNotFound(rev.clone()))?;
                let num = meta.next_pr;
                (format!("refs/pr/{num}"), base, Some(num))
            }
        };
        let head = self.load_commit(repo, &meta.refs[&base_ref])?;
        if let Some(expected) = parent_commit
            && expected != head.id
        {
            return Err(StoreError::ParentMismatch {
                expected: expected.to_string(),
                head: head.id,
            });
        }
        let mut tree = head.tree.clone();
        for op in ops {
            apply(&mut tree, op)?;
        }
        let commit = self.write_commit(repo, vec![head.id.clone()], title, message, tree)?;
        meta.refs.insert(ref_name, commit.id.clone());
        if let Some(num) = pr_num {
            meta.next_pr += 1;
            let target = base_ref.trim_start_matches("refs/heads/").to_string();
            meta.pull_requests.insert(
                num,
                PullRequest {
                    title: title.to_string(),
                    target,
                    status: "open".into(),
                },
            );
        }
        self.write_meta(repo, &meta)?;
        Ok(Committed {
            id: commit.id,
            pr_num,
        })
    }

    fn write_commit(
        &self,
        repo: &RepoId,
        parents: Vec<String>,
        title: &str,
        message: &str,
        tree: BTreeMap<String, FileEntry>,
    ) -> Result<Commit, StoreError> {
        let date = now();
        let mut h = sha1::Sha1::new();
        h.update(serde_json::to_vec(&(
            &parents, title, message, &date, &tree,
        ))?);
        let commit = Commit {
            id: hex::encode(h.finalize()),
            parents,
            title: title.to_string(),
            message: message.to_string(),
            date,
            tree,
        };
        let path = self
            .repo_dir(repo)
            .join("commits")
            .join(format!("{}.json", commit.id));
        write_atomic(&path, &serde_json::to_vec(&commit)?)?;
        Ok(commit)
    }
}

fn apply(tree: &mut BTreeMap<String, FileEntry>, op: &Op) -> Result<(), StoreError> {
    match op {
        Op::Put { path, entry } => {
            validate_path(path)?;
            let prefix = format!("{path}/");
            if tree.keys().any(|k| k.starts_with(&prefix)) {
                return Err(StoreError::BadRequest(format!(
                    "`{path}` is a directory in the repository"
                )));
            }
            tree.insert(path.clone(), entry.clone());
        }
        Op::Delete { path } => {
            if tree.remove(path).is_none() {
                return Err(StoreError::EntryNotFound(path.clone()));
            }
        }
        Op::DeleteFolder { path } => {
            let prefix = format!("{}/", path.trim_end_matches('/'));
            let before = tree.len();
            tree.retain(|k, _| !k.starts_with(&prefix));
            if tree.len() == before {
                return Err(StoreError::EntryNotFound(path.clone()));
            }
        }
    }
    Ok(())
}

/// Repository paths: relative, `/`-separated, no empty, `.` or `..` segments.
pub fn validate_path(path: &str) -> Result<(), StoreError> {
    let ok = !path.is_empty()
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains('\\'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadRequest(format!("Invalid path `{path}`")))
    }
}

fn validate_ref_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && !name.starts_with("refs/")
        && name
            .split('/')
            .all(|s| !s.is_empty() && !s.starts_with('.') && !s.contains(".."))
        && !name
            .chars()
            .any(|c| c.is_whitespace() || "~^:?*[\\".contains(c));
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadRequest(format!(
            "Invalid branch name `{name}`"
        )))
    }
}

/// Current time, RFC 3339 with milliseconds.
pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Write to a temp file beside `path`, then rename into place.
fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> RepoId {
        RepoId {
            kind: RepoKind::Kernel,
            owner: "org".into(),
            name: "k".into(),
        }
    }

    fn put(store: &Store, path: &str, content: &[u8]) -> Op {
        store.put_blob(content).unwrap();
        Op::Put {
            path: path.into(),
            entry: FileEntry::regular(content),
        }
    }

    #[test]
    fn git_blob_oid_matches_git() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            git_blob_oid(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }

    #[test]
    fn new_repo_has_main_with_gitattributes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.create_repo(&repo(), false).unwrap();
        let main = store.resolve(&repo(), "main").unwrap();
        assert!(main.tree.contains_key(".gitattributes"));
        assert!(matches!(
            store.create_repo(&repo(), false),
            Err(StoreError::Exists(_))
        ));
    }

    #[test]
    fn commit_to_branch_moves_only_that_branch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.create_repo(&repo(), false).unwrap();
        store.create_branch(&repo(), "v1", None).unwrap();
        let op = put(&store, "build/a.py", b"x");
        let c = store
            .commit(&repo(), Target::Ref("v1".into()), &[op], "t", "", None)
            .unwrap();
        assert_eq!(store.resolve(&repo(), "v1").unwrap().id, c.id);
        assert!(
            !store
                .resolve(&repo(), "main")
                .unwrap()
                .tree
                .contains_key("build/a.py")
        );
        assert_eq!(store.history(&repo(), "v1").unwrap().len(), 2);
    }

    #[test]
    fn failed_commit_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.create_repo(&repo(), false).unwrap();
        let head = store.resolve(&repo(), "main").unwrap().id;
        let ops = [
            put(&store, "a", b"1"),
            Op::Delete {
                path: "missing".into(),
            },
        ];
        let err = store
            .commit(&repo(), Target::Ref("main".into()), &ops, "t", "", None)
            .unwrap_err();
        assert!(matches!(err, StoreError::EntryNotFound(_)));
        assert_eq!(store.resolve(&repo(), "main").unwrap().id, head);
    }

    #[test]
    fn stale_parent_commit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.create_repo(&repo(), false).unwrap();
        let op = put(&store, "a", b"1");
        let stale = "0".repeat(40);
        let err = store
            .commit(
                &repo(),
                Target::Ref("main".into()),
                &[op],
                "t",
                "",
                Some(&stale),
            )
            .unwrap_err();
        assert!(matches!(err, StoreError::ParentMismatch { .. }));
    }

    #[test]
    fn pull_request_gets_its_own_ref() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.create_repo(&repo(), false).unwrap();
        let op = put(&store, "a", b"1");
        let c = store
            .commit(&repo(), Target::NewPr("main".into()), &[op], "t", "", None)
            .unwrap();
        assert_eq!(c.pr_num, Some(1));
        assert_eq!(store.resolve(&repo(), "refs/pr/1").unwrap().id, c.id);
        assert!(
            !store
                .resolve(&repo(), "main")
                .unwrap()
                .tree
                .contains_key("a")
        );
    }

    #[test]
    fn paths_with_dot_segments_are_rejected() {
        for bad in ["", "/a", "a//b", "../x", "a/./b"] {
            assert!(validate_path(bad).is_err(), "{bad}");
        }
        assert!(validate_path("build/v/x.py").is_ok());
    }
}
