//! Request dispatch: route, auth, faults, private repos, then the resource's handler; every
//! request is logged (method, path, status; never headers).

use std::io::Write as _;

use hyper::StatusCode;
use hyper::header::AUTHORIZATION;
use serde_json::json;

use crate::context::{Ctx, State};
use crate::handlers::{commit, lfs, refs, repos, resolve, tree};
use crate::http::{Request, Resp, error, json_resp, store_error};
use crate::policy::{Access, Denied, Fault};
use crate::routes::Route;

/// Answer one request and log it.
pub fn handle(state: &State, req: Request<'_>) -> Resp {
    let resp = dispatch(state, &req);
    let query = if req.query.is_empty() {
        String::new()
    } else {
        let q: Vec<String> = req.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("?{}", q.join("&"))
    };
    let line = format!(
        "{} {}{} -> {}",
        req.method,
        req.path,
        query,
        resp.status().as_u16()
    );
    eprintln!("{line}");
    if let Ok(mut log) = state.log.lock()
        && let Some(file) = log.as_mut()
    {
        let _ = writeln!(file, "{line}");
    }
    resp
}

fn dispatch(state: &State, req: &Request<'_>) -> Resp {
    let Some(route) = Route::parse(req.method, req.path) else {
        return error(
            StatusCode::NOT_FOUND,
            None,
            "Route not implemented by kbuild-hub-server",
        );
    };
    if route == Route::AdminFault {
        return arm_fault(state, req);
    }
    let authorization = req.headers.get(AUTHORIZATION).and_then(|h| h.to_str().ok());
    let access = match state.tokens.check(authorization, route.writes()) {
        Ok(access) => access,
        Err(Denied::Unauthenticated) => {
            return error(
                StatusCode::UNAUTHORIZED,
                None,
                "Invalid credentials in Authorization header",
            );
        }
        Err(Denied::ReadOnly) => {
            return error(
                StatusCode::FORBIDDEN,
                None,
                "This action requires a token with write access to the repository",
            );
        }
    };
    if let Some(status) = state
        .faults
        .lock()
        .ok()
        .and_then(|mut f| f.take(route.class()))
    {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return error(status, None, "Injected fault (kbuild-hub-server --fail)");
    }
    let Ok(store) = state.store.lock() else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "store lock poisoned",
        );
    };
    if let Some(repo) = route.repo()
        && access == Access::Anonymous
        && store.meta(repo).map(|m| m.private).unwrap_or(false)
    {
        return error(
            StatusCode::UNAUTHORIZED,
            Some("RepoNotFound"),
            "Repository not found",
        );
    }
    let ctx = Ctx {
        state,
        store: &store,
        req,
    };
    let result = match &route {
        Route::CreateRepo => repos::create(&ctx),
        Route::DeleteRepo => repos::delete(&ctx),
        Route::Info { repo, rev } => repos::info(&ctx, repo, rev.as_deref()),
        Route::Refs { repo } => refs::list(&ctx, repo),
        Route::Branch { repo, branch } => refs::branch(&ctx, repo, branch),
        Route::Commits { repo, rev } => commit::history(&ctx, repo, rev),
        Route::Tree { repo, rev, path } => tree::list(&ctx, repo, rev, path),
        Route::PathsInfo { repo, rev } => tree::paths_info(&ctx, repo, rev),
        Route::Preupload { repo, rev } => commit::preupload(&ctx, repo, rev),
        Route::Commit { repo, rev } => commit::commit(&ctx, repo, rev),
        Route::LfsBatch { repo } => lfs::batch(&ctx, repo),
        Route::LfsUpload { oid } => lfs::upload(&ctx, oid),
        Route::LfsVerify => lfs::verify(&ctx),
        Route::Resolve { repo, rev, path } => resolve::download(&ctx, repo, rev, path),
        Route::AgentHarnesses => Ok(json_resp(
            StatusCode::OK,
            &json!({"standardEnvVars": [], "harnesses": {}}),
        )),
        Route::AdminFault => unreachable!("handled above"),
    };
    result.unwrap_or_else(store_error)
}

fn arm_fault(state: &State, req: &Request<'_>) -> Resp {
    let spec = String::from_utf8_lossy(&req.body);
    match spec.trim().parse::<Fault>() {
        Ok(fault) => {
            if let Ok(mut faults) = state.faults.lock() {
                faults.add(fault);
            }
            json_resp(StatusCode::OK, &json!({"armed": spec.trim()}))
        }
        Err(e) => error(StatusCode::BAD_REQUEST, None, &e),
    }
}
