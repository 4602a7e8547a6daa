//! Git LFS `basic` transfer: the batch API, uploads and verify (there is no Xet CAS here).

use hyper::StatusCode;
use hyper::header::HeaderValue;
use serde_json::{Value, json};

use crate::context::{Ctx, HandlerResult};
use crate::http::{error, json_resp};
use crate::store::{RepoId, StoreError};

/// Git LFS batch API, `basic` transfer only: there is no Xet CAS here.
pub fn batch(ctx: &Ctx<'_>, repo: &RepoId) -> HandlerResult {
    ctx.store.meta(repo)?;
    let body = ctx.body_json()?;
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
            let href = format!("{}/_lfs/{oid}", ctx.state.base_url);
            if upload && !ctx.store.has_blob(oid) {
                v["actions"] = json!({
                    "upload": {"href": href},
                    "verify": {"href": format!("{}/_lfs/verify", ctx.state.base_url)},
                });
            } else if !upload && ctx.store.has_blob(oid) {
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

pub fn upload(ctx: &Ctx<'_>, oid: &str) -> HandlerResult {
    let sha = ctx.store.put_blob(&ctx.req.body)?;
    if sha != oid {
        let _ = std::fs::remove_file(ctx.store.blob_path(&sha));
        return Err(StoreError::BadRequest(format!(
            "Uploaded content hashes to {sha}, not {oid}"
        )));
    }
    Ok(json_resp(StatusCode::OK, &json!({})))
}

pub fn verify(ctx: &Ctx<'_>) -> HandlerResult {
    let body = ctx.body_json()?;
    let oid = body["oid"].as_str().unwrap_or_default();
    let size = body["size"].as_u64().unwrap_or(0);
    match std::fs::metadata(ctx.store.blob_path(oid)) {
        Ok(m) if m.len() == size => Ok(json_resp(StatusCode::OK, &json!({}))),
        _ => Ok(error(
            StatusCode::NOT_FOUND,
            None,
            &format!("LFS object {oid} not found"),
        )),
    }
}
