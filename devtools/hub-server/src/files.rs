//! File-level handlers: tree listing, paths-info, preupload, NDJSON commits, LFS basic transfer
//! and `resolve` downloads with the headers `huggingface_hub` and hf-hub read.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Response, StatusCode};
use serde_json::{Value, json};
use sha1::Digest as _;

use crate::api::{Ctx, HandlerResult, Resp, error, json_resp};
use crate::store::{Commit, FileEntry, Op, RepoId, StoreError, Target, lfs_pointer};

/// Files at or above this size go through LFS, as on the Hub.
const LFS_THRESHOLD: u64 = 10 * 1024 * 1024;

/// The `lfs` object of tree entries (`oid` is the sha256, as the Hub sends it).
pub fn lfs_json(e: &FileEntry) -> Value {
    json!({
        "oid": e.sha256,
        "size": e.size,
        "pointerSize": lfs_pointer(&e.sha256, e.size).len(),
    })
}

fn file_json(path: &str, e: &FileEntry) -> Value {
    let mut v = json!({"type": "file", "oid": e.oid, "size": e.size, "path": path});
    if e.lfs {
        v["lfs"] = lfs_json(e);
    }
    v
}

/// A directory's object id: a hash over the entries below it.
fn dir_oid(tree: &BTreeMap<String, FileEntry>, dir: &str) -> String {
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
fn dirs_of(tree: &BTreeMap<String, FileEntry>) -> BTreeSet<String> {
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
fn last_commit(
    history: &[Commit],
    changed: impl Fn(&Commit, Option<&Commit>) -> bool,
) -> Option<&Commit> {
    (0..history.len())
        .find(|&i| changed(&history[i], history.get(i + 1)))
        .map(|i| &history[i])
}

fn last_commit_json(c: Option<&Commit>) -> Value {
    c.map(|c| json!({"id": c.id, "title": c.title, "date": c.date}))
        .unwrap_or(Value::Null)
}

impl Ctx<'_> {
    /// Tree entries for `paths` (files and directories that exist), optionally with last commits.
    fn entries(
        &self,
        repo: &RepoId,
        commit: &Commit,
        paths: &[String],
        expand: bool,
    ) -> Result<Vec<Value>, StoreError> {
        let dirs = dirs_of(&commit.tree);
        let history = if expand {
            self.store.history(repo, &commit.id)?
        } else {
            Vec::new()
        };
        let mut out = Vec::new();
        for path in paths {
            let mut v = if let Some(e) = commit.tree.get(path) {
                let mut v = file_json(path, e);
                if expand {
                    let lc = last_commit(&history, |c, older| {
                        c.tree.get(path) != older.and_then(|o| o.tree.get(path))
                    });
                    v["lastCommit"] = last_commit_json(lc);
                    v["securityFileStatus"] =
                        json!({"status": "safe", "avScan": null, "pickleImportScan": null});
                }
                v
            } else if dirs.contains(path) {
                let mut v = json!({"type": "directory", "oid": dir_oid(&commit.tree, path), "size": 0, "path": path});
                if expand {
                    let lc = last_commit(&history, |c, older| {
                        older.is_none_or(|o| dir_oid(&c.tree, path) != dir_oid(&o.tree, path))
                    });
                    v["lastCommit"] = last_commit_json(lc);
                }
                v
            } else {
                continue;
            };
            if let Some(obj) = v.as_object_mut() {
                obj.retain(|_, val| !val.is_null());
            }
            out.push(v);
        }
        Ok(out)
    }

    pub fn tree(&self, repo: &RepoId, rev: &str, path: &str) -> HandlerResult {
        let commit = self.store.resolve(repo, rev)?;
        let recursive = self.req.flag("recursive");
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        };
        let dirs = dirs_of(&commit.tree);
        if !path.is_empty() && !dirs.contains(path) {
            return Err(StoreError::EntryNotFound(path.to_string()));
        }
        let below =
            |p: &str| p.starts_with(&prefix) && (recursive || !p[prefix.len()..].contains('/'));
        let mut paths: Vec<String> = dirs.iter().filter(|d| below(d)).cloned().collect();
        paths.extend(commit.tree.keys().filter(|p| below(p)).cloned());
        paths.sort();
        let entries = self.entries(repo, &commit, &paths, self.req.flag("expand"))?;
        Ok(self.paginate(entries))
    }

    pub fn paths_info(&self, repo: &RepoId, rev: &str) -> HandlerResult {
        // hf-hub sends JSON, huggingface_hub sends a form (`paths=a&paths=b&expand=False`).
        let (paths, expand): (Vec<String>, bool) = if self.req.body.first() == Some(&b'{') {
            let body = self.body_json()?;
            let paths = body["paths"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| p.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            (paths, body["expand"].as_bool().unwrap_or(false))
        } else {
            let form: Vec<(String, String)> = url::form_urlencoded::parse(&self.req.body)
                .into_owned()
                .collect();
            let paths = form
                .iter()
                .filter(|(k, _)| k == "paths")
                .map(|(_, v)| v.clone())
                .collect();
            let expand = form
                .iter()
                .any(|(k, v)| k == "expand" && matches!(v.as_str(), "True" | "true" | "1"));
            (paths, expand)
        };
        let commit = self.store.resolve(repo, rev)?;
        let paths: Vec<String> = paths
            .into_iter()
            .map(|p: String| p.trim_matches('/').to_string())
            .collect();
        Ok(json_resp(
            StatusCode::OK,
            &json!(self.entries(repo, &commit, &paths, expand)?),
        ))
    }

    pub fn preupload(&self, repo: &RepoId, rev: &str) -> HandlerResult {
        let commit = self.store.resolve(repo, rev)?;
        let body = self.body_json()?;
        let files = body["files"].as_array().cloned().unwrap_or_default();
        let mut out = Vec::new();
        for f in files {
            let path = f["path"].as_str().unwrap_or_default().to_string();
            let size = f["size"].as_u64().unwrap_or(0);
            let sample = base64::engine::general_purpose::STANDARD
                .decode(f["sample"].as_str().unwrap_or_default())
                .unwrap_or_default();
            // The Hub's rule: large or binary files go through LFS.
            let lfs = size >= LFS_THRESHOLD || sample.contains(&0);
            let mut v = json!({"path": path, "uploadMode": if lfs { "lfs" } else { "regular" }, "shouldIgnore": false});
            if let Some(e) = commit.tree.get(&path) {
                v["oid"] = json!(e.oid);
            }
            out.push(v);
        }
        Ok(json_resp(
            StatusCode::OK,
            &json!({"files": out, "commitOid": commit.id}),
        ))
    }

    pub fn commit(&self, repo: &RepoId, rev: &str) -> HandlerResult {
        let text = std::str::from_utf8(&self.req.body)
            .map_err(|_| StoreError::BadRequest("Commit body is not UTF-8".into()))?;
        let (mut summary, mut description, mut parent) = (String::new(), String::new(), None);
        let mut ops = Vec::new();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Value = serde_json::from_str(line)
                .map_err(|e| StoreError::BadRequest(format!("NDJSON line {}: {e}", n + 1)))?;
            let value = &v["value"];
            let s = |k: &str| value[k].as_str().map(String::from);
            let path = || {
                s("path").ok_or_else(|| {
                    StoreError::BadRequest(format!("NDJSON line {}: `path` missing", n + 1))
                })
            };
            match v["key"].as_str() {
                Some("header") => {
                    summary = s("summary").unwrap_or_default();
                    description = s("description").unwrap_or_default();
                    parent = s("parentCommit");
                }
                Some("file") => {
                    let content = match s("encoding").as_deref() {
                        Some("base64") => base64::engine::general_purpose::STANDARD
                            .decode(s("content").unwrap_or_default())
                            .map_err(|e| {
                                StoreError::BadRequest(format!("NDJSON line {}: {e}", n + 1))
                            })?,
                        _ => s("content").unwrap_or_default().into_bytes(),
                    };
                    self.store.put_blob(&content)?;
                    ops.push(Op::Put {
                        path: path()?,
                        entry: FileEntry::regular(&content),
                    });
                }
                Some("lfsFile") => {
                    let oid = s("oid").unwrap_or_default();
                    let size = value["size"].as_u64().unwrap_or(0);
                    let stored = std::fs::metadata(self.store.blob_path(&oid))
                        .map(|m| m.len())
                        .ok();
                    if stored != Some(size) {
                        return Ok(error(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            None,
                            &format!(
                                "LFS object {oid} ({size} bytes) was not uploaded before the commit"
                            ),
                        ));
                    }
                    ops.push(Op::Put {
                        path: path()?,
                        entry: FileEntry::lfs(&oid, size),
                    });
                }
                Some("deletedFile") => ops.push(Op::Delete { path: path()? }),
                Some("deletedFolder") => ops.push(Op::DeleteFolder { path: path()? }),
                other => {
                    return Err(StoreError::BadRequest(format!(
                        "NDJSON line {}: unsupported key {other:?}",
                        n + 1
                    )));
                }
            }
        }
        if summary.is_empty() {
            return Err(StoreError::BadRequest(
                "Commit summary (header line) is required".into(),
            ));
        }
        let target = if self.req.flag("create_pr") {
            Target::NewPr(rev.to_string())
        } else {
            Target::Ref(rev.to_string())
        };
        let done = self.store.commit(
            repo,
            target,
            &ops,
            &summary,
            &description,
            parent.as_deref(),
        )?;
        let url = self.repo_url(repo);
        let mut body = json!({
            "success": true,
            "commitOid": done.id,
            "commitUrl": format!("{url}/commit/{}", done.id),
            "commitMessage": summary,
            "commitDescription": description,
        });
        if let Some(num) = done.pr_num {
            let pr_url = format!("{url}/discussions/{num}");
            body["pullRequestUrl"] = json!(pr_url);
            body["prUrl"] = json!(pr_url);
            body["prNum"] = json!(num);
        }
        Ok(json_resp(StatusCode::OK, &body))
    }

    /// Git LFS batch API, `basic` transfer only: there is no Xet CAS here.
    pub fn lfs_batch(&self, repo: &RepoId) -> HandlerResult {
        self.store.meta(repo)?;
        let body = self.body_json()?;
        let upload = body["operation"].as_str() == Some("upload");
        let objects: Vec<Value> = body["objects"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|o| {
                let oid = o["oid"].as_str().unwrap_or_default();
                let size = o["size"].as_u64().unwrap_or(0);
                let mut v = json!({"oid": oid, "size": size, "authenticated": true});
                let href = format!("{}/_lfs/{oid}", self.state.base_url);
                if upload && !self.store.has_blob(oid) {
                    v["actions"] = json!({
                        "upload": {"href": href},
                        "verify": {"href": format!("{}/_lfs/verify", self.state.base_url)},
                    });
                } else if !upload && self.store.has_blob(oid) {
                    v["actions"] = json!({"download": {"href": href}});
                } else if !upload {
                    v["error"] = json!({"code": 404, "message": "Object does not exist"});
                }
                v
            })
            .collect();
        let mut resp = json_resp(
            StatusCode::OK,
            &json!({"transfer": "basic", "objects": objects, "hash_algo": "sha256"}),
        );
        resp.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static("application/vnd.git-lfs+json"),
        );
        Ok(resp)
    }

    pub fn lfs_upload(&self, oid: &str) -> HandlerResult {
        let sha = self.store.put_blob(&self.req.body)?;
        if sha != oid {
            let _ = std::fs::remove_file(self.store.blob_path(&sha));
            return Err(StoreError::BadRequest(format!(
                "Uploaded content hashes to {sha}, not {oid}"
            )));
        }
        Ok(json_resp(StatusCode::OK, &json!({})))
    }

    pub fn lfs_verify(&self) -> HandlerResult {
        let body = self.body_json()?;
        let oid = body["oid"].as_str().unwrap_or_default();
        let size = body["size"].as_u64().unwrap_or(0);
        match std::fs::metadata(self.store.blob_path(oid)) {
            Ok(m) if m.len() == size => Ok(json_resp(StatusCode::OK, &json!({}))),
            _ => Ok(error(
                StatusCode::NOT_FOUND,
                None,
                &format!("LFS object {oid} not found"),
            )),
        }
    }

    /// `resolve`: the file with `X-Repo-Commit`, `ETag` (and `X-Linked-*` for LFS files).
    pub fn resolve(&self, repo: &RepoId, rev: &str, path: &str) -> HandlerResult {
        let commit = self.store.resolve(repo, rev)?;
        let Some(entry) = commit.tree.get(path) else {
            let mut resp = error(
                StatusCode::NOT_FOUND,
                Some("EntryNotFound"),
                &format!("Entry not found: {path}"),
            );
            set(&mut resp, "x-repo-commit", &commit.id);
            return Ok(resp);
        };
        let content = if self.req.method == Method::HEAD {
            Vec::new()
        } else {
            self.store.read_blob(&entry.sha256)?
        };
        let range = self
            .req
            .headers
            .get(hyper::header::RANGE)
            .and_then(|r| r.to_str().ok())
            .and_then(|r| parse_range(r, entry.size));
        let (status, body, len) = match range {
            Some((start, end)) if self.req.method == Method::GET => (
                StatusCode::PARTIAL_CONTENT,
                content[start as usize..=end as usize].to_vec(),
                end + 1 - start,
            ),
            Some((start, end)) => (StatusCode::PARTIAL_CONTENT, Vec::new(), end + 1 - start),
            None => (StatusCode::OK, content, entry.size),
        };
        let mut resp = Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = status;
        let etag = format!("\"{}\"", if entry.lfs { &entry.sha256 } else { &entry.oid });
        set(&mut resp, "x-repo-commit", &commit.id);
        set(&mut resp, "etag", &etag);
        set(&mut resp, "content-length", &len.to_string());
        set(&mut resp, "accept-ranges", "bytes");
        set(&mut resp, "content-type", "application/octet-stream");
        if entry.lfs {
            set(&mut resp, "x-linked-etag", &etag);
            set(&mut resp, "x-linked-size", &entry.size.to_string());
        }
        if let Some((start, end)) = range {
            set(
                &mut resp,
                "content-range",
                &format!("bytes {start}-{end}/{}", entry.size),
            );
        }
        Ok(resp)
    }
}

fn set(resp: &mut Resp, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(HeaderName::from_static(name), v);
    }
}

/// `bytes=START-[END]` within a file of `size` bytes.
fn parse_range(header: &str, size: u64) -> Option<(u64, u64)> {
    let (start, end) = header.strip_prefix("bytes=")?.split_once('-')?;
    let start: u64 = start.parse().ok()?;
    let end: u64 = if end.is_empty() {
        size.checked_sub(1)?
    } else {
        end.parse::<u64>().ok()?.min(size.checked_sub(1)?)
    };
    (start <= end).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_headers_clamp_to_the_file() {
        assert_eq!(parse_range("bytes=2-", 10), Some((2, 9)));
        assert_eq!(parse_range("bytes=2-100", 10), Some((2, 9)));
        assert_eq!(parse_range("bytes=5-2", 10), None);
        assert_eq!(parse_range("bytes=0-", 0), None);
    }

    #[test]
    fn directories_come_from_file_paths() {
        let mut tree = BTreeMap::new();
        tree.insert("build/v/a.py".to_string(), FileEntry::regular(b"a"));
        tree.insert("README.md".to_string(), FileEntry::regular(b"r"));
        let dirs: Vec<String> = dirs_of(&tree).into_iter().collect();
        assert_eq!(dirs, ["build", "build/v"]);
    }
}
