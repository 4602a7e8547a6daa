//! Repositories: create, delete, and info (`repo_info` / `kernel_info`, `?blobs=true`).

use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use crate::context::{Ctx, HandlerResult};
use crate::http::json_resp;
use crate::routes::Route;
use crate::store::{RepoId, RepoKind, StoreError};
use crate::wire::lfs_json;

pub fn create(ctx: &Ctx<'_>) -> HandlerResult {
    let body = ctx.body_json()?;
    let field = |k: &str| body.get(k).and_then(Value::as_str);
    let name = field("name").ok_or_else(|| StoreError::BadRequest("`name` is required".into()))?;
    let kind = match field("type") {
        None => RepoKind::Model,
        Some(t) => RepoKind::from_singular(t)
            .ok_or_else(|| StoreError::BadRequest(format!("Invalid repo type `{t}`")))?,
    };
    let owner = field("organization").unwrap_or("kbuild-user");
    let route = format!("/api/{}/{owner}/{name}", kind.plural());
    let Some(Route::Info { repo, .. }) = Route::parse(&Method::GET, &route) else {
        return Err(StoreError::BadRequest(format!(
            "Invalid repo id `{owner}/{name}`"
        )));
    };
    let url = ctx.repo_url(&repo);
    let private = body
        .get("private")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match ctx.store.create_repo(&repo, private) {
        Ok(()) => Ok(json_resp(
            StatusCode::OK,
            &json!({"url": url, "name": repo.to_string(), "id": repo.to_string()}),
        )),
        Err(StoreError::Exists(_)) => Ok(json_resp(
            StatusCode::CONFLICT,
            &json!({"error": "You already created this repo", "url": url}),
        )),
        Err(e) => Err(e),
    }
}

pub fn delete(ctx: &Ctx<'_>) -> HandlerResult {
    let body = ctx.body_json()?;
    let field = |k: &str| body.get(k).and_then(Value::as_str);
    let kind = RepoKind::from_singular(field("type").unwrap_or("model"))
        .ok_or_else(|| StoreError::BadRequest("Invalid repo type".into()))?;
    let route = format!(
        "/api/{}/{}/{}",
        kind.plural(),
        field("organization").unwrap_or("kbuild-user"),
        field("name").unwrap_or("")
    );
    let Some(Route::Info { repo, .. }) = Route::parse(&Method::GET, &route) else {
        return Err(StoreError::RepoNotFound);
    };
    ctx.store.delete_repo(&repo)?;
    Ok(json_resp(StatusCode::OK, &json!({})))
}

pub fn info(ctx: &Ctx<'_>, repo: &RepoId, rev: Option<&str>) -> HandlerResult {
    let meta = ctx.store.meta(repo)?;
    let commit = ctx.store.resolve(repo, rev.unwrap_or("main"))?;
    let blobs = ctx.req.flag("blobs");
    let siblings: Vec<Value> = commit
        .tree
        .iter()
        .map(|(path, e)| {
            let mut v = json!({"rfilename": path});
            if blobs {
                v["size"] = json!(e.size);
                v["blobId"] = json!(e.oid);
                if e.lfs {
                    v["lfs"] = lfs_json(e);
                }
            }
            v
        })
        .collect();
    let used: u64 = commit.tree.values().map(|e| e.size).sum();
    Ok(json_resp(
        StatusCode::OK,
        &json!({
            "_id": &commit.id[..24],
            "id": repo.to_string(),
            "author": repo.owner,
            "sha": commit.id,
            "private": meta.private,
            "gated": false,
            "disabled": false,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "createdAt": meta.created_at,
            "lastModified": commit.date,
            "siblings": siblings,
            "usedStorage": used,
        }),
    ))
}
