//! What a handler sees: the server's shared state and the request being answered with the store
//! locked, plus the request-level helpers (JSON body, repo URLs, pagination).

use std::sync::Mutex;

use hyper::StatusCode;
use hyper::header::HeaderValue;
use serde_json::{Value, json};

use crate::http::{Request, Resp, json_resp};
use crate::policy::{Faults, Tokens};
use crate::store::{RepoId, Store, StoreError};

/// Everything a request may touch.
pub struct State {
    pub store: Mutex<Store>,
    pub faults: Mutex<Faults>,
    pub tokens: Tokens,
    /// `http://127.0.0.1:PORT`, for URLs handed to clients.
    pub base_url: String,
    /// Organizations whose overview says `trustedKernelPublisher: true`.
    pub trusted_publishers: Vec<String>,
    /// Entries per page of paginated listings.
    pub page_size: usize,
    /// Request log (method, path, status: never headers, so never tokens).
    pub log: Mutex<Option<std::fs::File>>,
    /// Read request bodies at this many bytes per second (a slow link), when set.
    pub read_rate: Option<u64>,
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
