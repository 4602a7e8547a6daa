//! Refs: listing branches (and PR refs), creating and deleting branches; pull requests as the
//! discussions API lists them.

use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use crate::context::{Ctx, HandlerResult};
use crate::http::{error, json_resp};
use crate::store::{RepoId, StoreError};

pub fn list(ctx: &Ctx<'_>, repo: &RepoId) -> HandlerResult {
    let meta = ctx.store.meta(repo)?;
    let entry =
        |name: &str, full: &str, id: &str| json!({"name": name, "ref": full, "targetCommit": id});
    let branches: Vec<Value> = meta
        .refs
        .iter()
        .filter_map(|(full, id)| {
            full.strip_prefix("refs/heads/")
                .map(|name| entry(name, full, id))
        })
        .collect();
    let mut body = json!({"branches": branches, "tags": [], "converts": []});
    if ctx.req.flag("include_prs") {
        let prs: Vec<Value> = meta
            .refs
            .iter()
            .filter(|(full, _)| full.starts_with("refs/pr/"))
            .map(|(full, id)| entry(full, full, id))
            .collect();
        body["pullRequests"] = json!(prs);
    }
    Ok(json_resp(StatusCode::OK, &body))
}

/// `POST` creates the branch (409 if it exists), `DELETE` removes it.
pub fn branch(ctx: &Ctx<'_>, repo: &RepoId, branch: &str) -> HandlerResult {
    if ctx.req.method == Method::DELETE {
        ctx.store.delete_branch(repo, branch)?;
        return Ok(json_resp(StatusCode::OK, &json!({})));
    }
    let body = ctx.body_json()?;
    let start = body.get("startingPoint").and_then(Value::as_str);
    match ctx.store.create_branch(repo, branch, start) {
        Ok(()) => Ok(json_resp(StatusCode::OK, &json!({}))),
        Err(StoreError::Exists(what)) => Ok(error(
            StatusCode::CONFLICT,
            None,
            &format!("{what} already exists"),
        )),
        Err(e) => Err(e),
    }
}

/// Pull requests, newest first, filtered by `status` (`open`, `closed`, `all`) as the Hub does.
pub fn discussions(ctx: &Ctx<'_>, repo: &RepoId) -> HandlerResult {
    let meta = ctx.store.meta(repo)?;
    let wanted = ctx.req.param("status").unwrap_or("all");
    let list: Vec<Value> = meta
        .pull_requests
        .iter()
        .rev()
        .filter(|(_, pr)| wanted == "all" || pr.status == wanted)
        .map(|(num, pr)| {
            json!({"num": num, "title": pr.title, "status": pr.status, "isPullRequest": true,
                   "targetBranch": format!("refs/heads/{}", pr.target)})
        })
        .collect();
    let closed = meta
        .pull_requests
        .values()
        .filter(|pr| pr.status != "open")
        .count();
    let body = json!({"discussions": list, "count": list.len(), "start": 0,
                      "numClosedDiscussions": closed});
    Ok(json_resp(StatusCode::OK, &body))
}

/// `{"status": "open" | "closed"}`.
pub fn discussion_status(ctx: &Ctx<'_>, repo: &RepoId, num: u64) -> HandlerResult {
    let body = ctx.body_json()?;
    let status = body["status"].as_str().unwrap_or_default();
    if !matches!(status, "open" | "closed") {
        return Err(StoreError::BadRequest(format!(
            "`status` must be `open` or `closed`, not `{status}`"
        )));
    }
    ctx.store.set_pr_status(repo, num, status)?;
    Ok(json_resp(StatusCode::OK, &json!({})))
}
