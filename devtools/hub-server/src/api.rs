//! Request dispatch: auth, faults, logging, and the repository-level handlers (create, info,
//! refs, branches, commit history). File-level handlers live in `files`.

use std::io::Write as _;
use std::sync::Mutex;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{AUTHORIZATION, HeaderValue};
use hyper::{HeaderMap, Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::files;
use crate::policy::{Access, Denied, Fault, Faults, Tokens};
use crate::routes::Route;
use crate::store::{Commit, RepoId, RepoKind, Store, StoreError};

pub type Resp = Response<Full<Bytes>>;

/// Everything a request may touch.
pub struct State {
    pub store: Mutex<Store>,
    pub faults: Mutex<Faults>,
    pub tokens: Tokens,
    /// `http://127.0.0.1:PORT`, for URLs handed to clients.
    pub base_url: String,
    /// Entries per page of paginated listings.
    pub page_size: usize,
    /// Request log (method, path, status: never headers, so never tokens).
    pub log: Mutex<Option<std::fs::File>>,
}

/// One incoming request, already read.
pub struct Request<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub query: Vec<(String, String)>,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
}

impl Request<'_> {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean query flag (`1`, `true`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.param(key), Some("1" | "true" | "True"))
    }
}

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
        Route::CreateRepo => ctx.create_repo(),
        Route::DeleteRepo => ctx.delete_repo(),
        Route::Info { repo, rev } => ctx.info(repo, rev.as_deref()),
        Route::Refs { repo } => ctx.refs(repo),
        Route::Branch { repo, branch } => ctx.branch(repo, branch),
        Route::Commits { repo, rev } => ctx.commits(repo, rev),
        Route::Tree { repo, rev, path } => ctx.tree(repo, rev, path),
        Route::PathsInfo { repo, rev } => ctx.paths_info(repo, rev),
        Route::Preupload { repo, rev } => ctx.preupload(repo, rev),
        Route::Commit { repo, rev } => ctx.commit(repo, rev),
        Route::LfsBatch { repo } => ctx.lfs_batch(repo),
        Route::LfsUpload { oid } => ctx.lfs_upload(oid),
        Route::LfsVerify => ctx.lfs_verify(),
        Route::Resolve { repo, rev, path } => ctx.resolve(repo, rev, path),
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

/// A request being answered, with the store locked.
pub struct Ctx<'a> {
    pub state: &'a State,
    pub store: &'a Store,
    pub req: &'a Request<'a>,
}

pub type HandlerResult = Result<Resp, StoreError>;

impl Ctx<'_> {
    pub fn body_json(&self) -> Result<Value, StoreError> {
        if self.req.body.is_empty() {
            return Ok(json!({}));
        }
        serde_json::from_slice(&self.req.body)
            .map_err(|e| StoreError::BadRequest(format!("Invalid JSON body: {e}")))
    }

    pub fn repo_url(&self, repo: &RepoId) -> String {
        format!("{}/{}{repo}", self.state.base_url, repo.kind.url_prefix())
    }

    fn create_repo(&self) -> HandlerResult {
        let body = self.body_json()?;
        let field = |k: &str| body.get(k).and_then(Value::as_str);
        let name =
            field("name").ok_or_else(|| StoreError::BadRequest("`name` is required".into()))?;
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
        let url = self.repo_url(&repo);
        let private = body
            .get("private")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        match self.store.create_repo(&repo, private) {
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

    fn delete_repo(&self) -> HandlerResult {
        let body = self.body_json()?;
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
        self.store.delete_repo(&repo)?;
        Ok(json_resp(StatusCode::OK, &json!({})))
    }

    fn info(&self, repo: &RepoId, rev: Option<&str>) -> HandlerResult {
        let meta = self.store.meta(repo)?;
        let commit = self.store.resolve(repo, rev.unwrap_or("main"))?;
        let blobs = self.req.flag("blobs");
        let siblings: Vec<Value> = commit
            .tree
            .iter()
            .map(|(path, e)| {
                let mut v = json!({"rfilename": path});
                if blobs {
                    v["size"] = json!(e.size);
                    v["blobId"] = json!(e.oid);
                    if e.lfs {
                        v["lfs"] = files::lfs_json(e);
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

    fn refs(&self, repo: &RepoId) -> HandlerResult {
        let meta = self.store.meta(repo)?;
        let entry = |name: &str, full: &str, id: &str| json!({"name": name, "ref": full, "targetCommit": id});
        let branches: Vec<Value> = meta
            .refs
            .iter()
            .filter_map(|(full, id)| {
                full.strip_prefix("refs/heads/")
                    .map(|name| entry(name, full, id))
            })
            .collect();
        let mut body = json!({"branches": branches, "tags": [], "converts": []});
        if self.req.flag("include_prs") {
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

    fn branch(&self, repo: &RepoId, branch: &str) -> HandlerResult {
        if self.req.method == Method::DELETE {
            self.store.delete_branch(repo, branch)?;
            return Ok(json_resp(StatusCode::OK, &json!({})));
        }
        let body = self.body_json()?;
        let start = body.get("startingPoint").and_then(Value::as_str);
        match self.store.create_branch(repo, branch, start) {
            Ok(()) => Ok(json_resp(StatusCode::OK, &json!({}))),
            Err(StoreError::Exists(what)) => Ok(error(
                StatusCode::CONFLICT,
                None,
                &format!("{what} already exists"),
            )),
            Err(e) => Err(e),
        }
    }

    fn commits(&self, repo: &RepoId, rev: &str) -> HandlerResult {
        let items: Vec<Value> = self
            .store
            .history(repo, rev)?
            .iter()
            .map(commit_json)
            .collect();
        Ok(self.paginate(items))
    }

    /// A page of `items` from `?cursor=`, with a `Link: <next>; rel="next"` header when more remain.
    pub fn paginate(&self, items: Vec<Value>) -> Resp {
        let start: usize = self
            .req
            .param("cursor")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let end = (start + self.state.page_size).min(items.len());
        let page: Vec<Value> = items.get(start..end).unwrap_or(&[]).to_vec();
        let mut resp = json_resp(StatusCode::OK, &json!(page));
        if end < items.len() {
            let mut query: Vec<String> = self
                .req
                .query
                .iter()
                .filter(|(k, _)| k != "cursor")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            query.push(format!("cursor={end}"));
            let next = format!(
                "<{}{}?{}>; rel=\"next\"",
                self.state.base_url,
                self.req.path,
                query.join("&")
            );
            if let Ok(v) = HeaderValue::from_str(&next) {
                resp.headers_mut().insert("link", v);
            }
        }
        resp
    }
}

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

pub fn json_resp(status: StatusCode, body: &Value) -> Resp {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    resp
}

/// An error as the Hub sends it: JSON `{"error": ...}` plus `X-Error-Code` / `X-Error-Message`.
pub fn error(status: StatusCode, code: Option<&str>, message: &str) -> Resp {
    let mut resp = json_resp(status, &json!({"error": message}));
    let headers = resp.headers_mut();
    if let Some(code) = code {
        headers.insert(
            "x-error-code",
            HeaderValue::from_str(code).unwrap_or(HeaderValue::from_static("Error")),
        );
    }
    if let Ok(v) = HeaderValue::from_str(message) {
        headers.insert("x-error-message", v);
    }
    resp
}

fn store_error(e: StoreError) -> Resp {
    let (status, code) = match &e {
        StoreError::RepoNotFound => (StatusCode::NOT_FOUND, Some("RepoNotFound")),
        StoreError::RevisionNotFound(_) => (StatusCode::NOT_FOUND, Some("RevisionNotFound")),
        StoreError::EntryNotFound(_) => (StatusCode::NOT_FOUND, Some("EntryNotFound")),
        StoreError::Exists(_) => (StatusCode::CONFLICT, None),
        StoreError::ParentMismatch { .. } => (StatusCode::PRECONDITION_FAILED, None),
        StoreError::BadRequest(_) => (StatusCode::BAD_REQUEST, None),
        StoreError::Io(_) | StoreError::Json(_) => (StatusCode::INTERNAL_SERVER_ERROR, None),
    };
    error(status, code, &e.to_string())
}
