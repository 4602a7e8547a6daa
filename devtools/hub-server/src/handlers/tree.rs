//! Listing files: `tree` (paginated) and `paths-info`, with last commits when expanded.

use hyper::StatusCode;
use serde_json::{Value, json};

use crate::context::{Ctx, HandlerResult};
use crate::http::json_resp;
use crate::store::{Commit, RepoId, StoreError};
use crate::wire::{dir_oid, dirs_of, file_json, last_commit, last_commit_json};

/// Tree entries for `paths` (files and directories that exist), optionally with last commits.
fn entries(
    ctx: &Ctx<'_>,
    repo: &RepoId,
    commit: &Commit,
    paths: &[String],
    expand: bool,
) -> Result<Vec<Value>, StoreError> {
    let dirs = dirs_of(&commit.tree);
    let history = if expand {
        ctx.store.history(repo, &commit.id)?
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

pub fn list(ctx: &Ctx<'_>, repo: &RepoId, rev: &str, path: &str) -> HandlerResult {
    let commit = ctx.store.resolve(repo, rev)?;
    let recursive = ctx.req.flag("recursive");
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{path}/")
    };
    let dirs = dirs_of(&commit.tree);
    if !path.is_empty() && !dirs.contains(path) {
        return Err(StoreError::EntryNotFound(path.to_string()));
    }
    let below = |p: &str| p.starts_with(&prefix) && (recursive || !p[prefix.len()..].contains('/'));
    let mut paths: Vec<String> = dirs.iter().filter(|d| below(d)).cloned().collect();
    paths.extend(commit.tree.keys().filter(|p| below(p)).cloned());
    paths.sort();
    let entries = entries(ctx, repo, &commit, &paths, ctx.req.flag("expand"))?;
    Ok(ctx.paginate(entries))
}

pub fn paths_info(ctx: &Ctx<'_>, repo: &RepoId, rev: &str) -> HandlerResult {
    // hf-hub sends JSON, huggingface_hub sends a form (`paths=a&paths=b&expand=False`).
    let (paths, expand): (Vec<String>, bool) = if ctx.req.body.first() == Some(&b'{') {
        let body = ctx.body_json()?;
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
        let form: Vec<(String, String)> = url::form_urlencoded::parse(&ctx.req.body)
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
    let commit = ctx.store.resolve(repo, rev)?;
    let paths: Vec<String> = paths
        .into_iter()
        .map(|p: String| p.trim_matches('/').to_string())
        .collect();
    Ok(json_resp(
        StatusCode::OK,
        &json!(entries(ctx, repo, &commit, &paths, expand)?),
    ))
}
