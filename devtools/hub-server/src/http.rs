//! The HTTP vocabulary handlers share: the incoming request, the response type, and the JSON /
//! error response shapes the Hub uses. A leaf: it knows nothing of routes or handlers.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::store::StoreError;

pub type Resp = Response<Full<Bytes>>;

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

/// The Hub's answer to a store failure: status plus `X-Error-Code` where the Hub sends one.
pub fn store_error(e: StoreError) -> Resp {
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

/// Set a header, skipping values that are not valid header text.
pub fn set_header(resp: &mut Resp, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(HeaderName::from_static(name), v);
    }
}

/// What becomes of a request: a response, or (for injected faults) none at all.
#[derive(Debug)]
pub enum Reply {
    /// Send this response.
    Answer(Resp),
    /// Send nothing; hold the connection this long, then close it.
    Hang(Duration),
    /// The work was done with this status, but the connection closes without the response.
    Lost { status: StatusCode },
}
