//! The JSON shapes of Hub objects (commits, tree entries, LFS pointers) and the tree facts they
//! are computed from. A leaf over `store`: handlers of several resources render through it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use sha1::Digest as _;

use crate::store::{Commit, FileEntry, lfs_pointer};

pub fn commit_json(c: &Commit) -> Value {
    json!({
        "id": c.id,
        "title": c.title,
        "message": c.message,
        "date": c.date,
        "authors": [{"user": "kbuild-user"}],
        "parents": c.parents,
    })
}

/// The `lfs` object of tree entries (`oid` is the sha256, as the Hub sends it).
pub fn lfs_json(e: &FileEntry) -> Value {
    json!({
        "oid": e.sha256,
        "size": e.size,
        "pointerSize": lfs_pointer(&e.sha256, e.size).len(),
    })
}

pub fn file_json(path: &str, e: &FileEntry) -> Value {
    let mut v = json!({"type": "file", "oid": e.oid, "size": e.size, "path": path});
    if e.lfs {
        v["lfs"] = lfs_json(e);
    }
    v
}

/// A directory's object id: a hash over the entries below it.
pub fn dir_oid(tree: &BTreeMap<String, FileEntry>, dir: &str) -> String {
    let prefix = format!("{dir}/");
    let mut h = sha1::Sha1::new();
    for (path, e) in tree
        .range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
    {
        h.update(path.as_bytes());
        h.update(e.oid.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Directories implied by the files of a tree.
pub fn dirs_of(tree: &BTreeMap<String, FileEntry>) -> BTreeSet<String> {
    let mut dirs = BTreeSet::new();
    for path in tree.keys() {
        let mut cur = path.as_str();
        while let Some((parent, _)) = cur.rsplit_once('/') {
            dirs.insert(parent.to_string());
            cur = parent;
        }
    }
    dirs
}

/// The newest commit in `history` (newest first) where `changed(newer, older)` holds.
pub fn last_commit(
    history: &[Commit],
    changed: impl Fn(&Commit, Option<&Commit>) -> bool,
) -> Option<&Commit> {
    (0..history.len())
        .find(|&i| changed(&history[i], history.get(i + 1)))
        .map(|i| &history[i])
}

pub fn last_commit_json(c: Option<&Commit>) -> Value {
    c.map(|c| json!({"id": c.id, "title": c.title, "date": c.date}))
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_come_from_file_paths() {
        let mut tree = BTreeMap::new();
        tree.insert("build/v/a.py".to_string(), FileEntry::regular(b"a"));
        tree.insert("README.md".to_string(), FileEntry::regular(b"r"));
        let dirs: Vec<String> = dirs_of(&tree).into_iter().collect();
        assert_eq!(dirs, ["build", "build/v"]);
    }
}
