//! Request dispatch: route, auth, faults, private repos, then the resource's handler; every
//! request is logged (method, path, status or what was done instead; never headers).

use std::io::Write as _;

use hyper::StatusCode;
use hyper::header::AUTHORIZATION;
use serde_json::json;

use crate::context::{Ctx, State};
use crate::handlers::{commit, lfs, orgs, refs, repos, resolve, tree};
use crate::http::{Reply, Request, Resp, error, json_resp, set_header, store_error};
use crate::policy::{Access, Action, Denied, Fault, RetryAfter};
use crate::routes::Route;

/// Answer one request and log it.
pub fn handle(state: &State, req: Request<'_>) -> Reply {
    let reply = dispatch(state, &req);
    let query = if req.query.is_empty() {
        String::new()
    } else {
        let q: Vec<String> = req.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("?{}", q.join("&"))
    };
    // Lines keep ending in `-> STATUS` whenever the work was done, lost responses included.
    let (note, outcome) = match &reply {
        Reply::Answer(resp) => ("", resp.status().as_u16().to_string()),
        Reply::Hang(hold) => ("", format!("hang {}", humantime::format_duration(*hold))),
        Reply::Lost { status } => (" [response lost]", status.as_u16().to_string()),
    };
    let line = format!("{} {}{}{note} -> {outcome}", req.method, req.path, query);
    eprintln!("{line}");
    if let Ok(mut log) = state.log.lock()
        && let Some(file) = log.as_mut()
    {
        let _ = writeln!(file, "{line}");
    }
    reply
}

fn dispatch(state: &State, req: &Request<'_>) -> Reply {
    let Some(route) = Route::parse(req.method, req.path) else {
        return Reply::Answer(error(
            StatusCode::NOT_FOUND,
            None,
            "Route not implemented by kbuild-hub-server",
        ));
    };
    if route == Route::AdminFault {
        return Reply::Answer(arm_fault(state, req));
    }
    let authorization = req.headers.get(AUTHORIZATION).and_then(|h| h.to_str().ok());
    let access = match state.tokens.check(authorization, route.writes()) {
        Ok(access) => access,
        Err(Denied::Unauthenticated) => {
            return Reply::Answer(error(
                StatusCode::UNAUTHORIZED,
                None,
                "Invalid credentials in Authorization header",
            ));
        }
        Err(Denied::ReadOnly) => {
            return Reply::Answer(error(
                StatusCode::FORBIDDEN,
                None,
                "This action requires a token with write access to the repository",
            ));
        }
    };
    let fault = state
        .faults
        .lock()
        .ok()
        .and_then(|mut f| f.take(route.class()));
    match fault {
        None => Reply::Answer(answer(state, req, &route, access)),
        Some(Action::Status {
            status,
            retry_after,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = error(status, None, "Injected fault (kbuild-hub-server --fail)");
            let value = match retry_after {
                Some(RetryAfter::Seconds(seconds)) => Some(seconds.to_string()),
                Some(RetryAfter::DateIn(seconds)) => {
                    let at = std::time::SystemTime::now()
                        + std::time::Duration::from_secs(seconds.into());
                    Some(httpdate::fmt_http_date(at))
                }
                None => None,
            };
            if let Some(value) = value {
                set_header(&mut resp, "retry-after", &value);
            }
            Reply::Answer(resp)
        }
        Some(Action::Hang(hold)) => Reply::Hang(hold),
        Some(Action::LoseResponse) => Reply::Lost {
            status: answer(state, req, &route, access).status(),
        },
    }
}

/// The handler's response for an authorised request that no fault stopped.
fn answer(state: &State, req: &Request<'_>, route: &Route, access: Access) -> Resp {
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
    let result = match route {
        Route::CreateRepo => repos::create(&ctx),
        Route::DeleteRepo => repos::delete(&ctx),
        Route::Info { repo, rev } => repos::info(&ctx, repo, rev.as_deref()),
        Route::Refs { repo } => refs::list(&ctx, repo),
        Route::Branch { repo, branch } => refs::branch(&ctx, repo, branch),
        Route::Commits { repo, rev } => commit::history(&ctx, repo, rev),
        Route::Discussions { repo } => refs::discussions(&ctx, repo),
        Route::DiscussionStatus { repo, num } => refs::discussion_status(&ctx, repo, *num),
        Route::Tree { repo, rev, path } => tree::list(&ctx, repo, rev, path),
        Route::PathsInfo { repo, rev } => tree::paths_info(&ctx, repo, rev),
        Route::Preupload { repo, rev } => commit::preupload(&ctx, repo, rev),
        Route::Commit { repo, rev } => commit::commit(&ctx, repo, rev),
        Route::LfsBatch { repo } => lfs::batch(&ctx, repo),
        Route::LfsUpload { oid } => lfs::upload(&ctx, oid),
        Route::LfsVerify => lfs::verify(&ctx),
        Route::Resolve { repo, rev, path } => resolve::download(&ctx, repo, rev, path),
        Route::OrgOverview { org } => orgs::overview(&ctx, org),
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
