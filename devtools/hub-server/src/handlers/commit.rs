//! Writing: preupload (upload mode per file), NDJSON commits, and commit history.

use base64::Engine as _;
use hyper::StatusCode;
use serde_json::{Value, json};

use crate::context::{Ctx, HandlerResult};
use crate::http::{error, json_resp};
use crate::store::{FileEntry, Op, RepoId, StoreError, Target};
use crate::wire::commit_json;

/// Files at or above this size go through LFS, as on the Hub.
const LFS_THRESHOLD: u64 = 10 * 1024 * 1024;

pub fn preupload(ctx: &Ctx<'_>, repo: &RepoId, rev: &str) -> HandlerResult {
    let commit = ctx.store.resolve(repo, rev)?;
    let body = ctx.body_json()?;
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

pub fn commit(ctx: &Ctx<'_>, repo: &RepoId, rev: &str) -> HandlerResult {
    let text = std::str::from_utf8(&ctx.req.body)
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
                ctx.store.put_blob(&content)?;
                ops.push(Op::Put {
                    path: path()?,
                    entry: FileEntry::regular(&content),
                });
            }
            Some("lfsFile") => {
                let oid = s("oid").unwrap_or_default();
                let size = value["size"].as_u64().unwrap_or(0);
                let stored = std::fs::metadata(ctx.store.blob_path(&oid))
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
    let target = if ctx.req.flag("create_pr") {
        Target::NewPr(rev.to_string())
    } else {
        Target::Ref(rev.to_string())
    };
    let done = ctx.store.commit(
        repo,
        target,
        &ops,
        &summary,
        &description,
        parent.as_deref(),
    )?;
    let url = ctx.repo_url(repo);
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

/// `commits/{rev}`: the history of a revision, newest first, paginated.
pub fn history(ctx: &Ctx<'_>, repo: &RepoId, rev: &str) -> HandlerResult {
    let items: Vec<Value> = ctx
        .store
        .history(repo, rev)?
        .iter()
        .map(commit_json)
        .collect();
    Ok(ctx.paginate(items))
}
