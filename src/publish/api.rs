//! The Hub's metadata calls (repository, refs, tree, branches) over plain HTTP: each request
//! with its own timeout, and every failure as a [`Failure`] that keeps the status and the
//! server's `Retry-After` (hf-hub drops that header except on 429).

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, LINK, RETRY_AFTER};
use reqwest::{Method, Url};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{Redactor, Token};
use super::compare::RemoteFile;
use super::retry::{Failure, FailureKind};

/// Branch and pull-request heads of a repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refs {
    /// Branch name → head commit.
    pub branches: BTreeMap<String, String>,
    /// `refs/pr/N` → head commit.
    pub pull_requests: BTreeMap<String, String>,
}

/// An open pull request as the discussions API lists it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenPr {
    pub num: u64,
    pub title: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub is_pull_request: bool,
    #[serde(default)]
    pub target_branch: Option<String>,
}

/// Metadata requests for one repository.
pub struct Api {
    http: reqwest::Client,
    endpoint: String,
    /// `kernels`, `models`.
    plural: &'static str,
    singular: &'static str,
    repo_id: String,
    auth: Option<HeaderValue>,
    timeout: Duration,
    redactor: Redactor,
}

/// What the Hub answered: status, headers and body.
pub(super) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Api {
    pub fn new(
        http: reqwest::Client,
        endpoint: &str,
        kind: (&'static str, &'static str),
        repo_id: &str,
        token: Option<&Token>,
        timeout: Duration,
    ) -> Api {
        Api {
            http,
            endpoint: endpoint.to_string(),
            plural: kind.0,
            singular: kind.1,
            repo_id: repo_id.to_string(),
            // `auth::check_token` has refused anything a header cannot carry.
            auth: token.and_then(|t| HeaderValue::from_str(&format!("Bearer {}", t.expose())).ok()),
            timeout,
            redactor: Redactor::new(token).with_endpoint(endpoint),
        }
    }

    /// `{endpoint}/api/{kinds}/{owner}/{name}/{segments…}`, each segment percent-encoded (a
    /// revision like `refs/pr/1` is one segment).
    pub(super) fn url(&self, segments: &[&str]) -> Result<Url, Failure> {
        let repo = std::iter::once(self.plural).chain(self.repo_id.split('/'));
        self.api_url(repo.chain(segments.iter().copied()))
    }

    /// `{endpoint}/api/{segments…}`, each segment percent-encoded; an endpoint that is not a URL
    /// is an error naming it (redacted).
    fn api_url<'s>(&self, segments: impl IntoIterator<Item = &'s str>) -> Result<Url, Failure> {
        let mut url = Url::parse(&format!("{}/api", self.endpoint)).map_err(|e| Failure {
            kind: FailureKind::Other,
            message: self
                .redactor
                .redact(&format!("`{}` is not a URL: {e}", self.endpoint)),
            retry_after: None,
        })?;
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        Ok(url)
    }

    /// `{endpoint}/{prefix}{owner}/{name}.git/info/lfs/objects/batch`: the Git LFS batch API
    /// (no prefix for models, `kernels/` for kernels).
    pub(super) fn lfs_batch_url(&self) -> Result<Url, Failure> {
        let prefix = match self.plural {
            "models" => String::new(),
            other => format!("{other}/"),
        };
        let url = format!(
            "{}/{prefix}{}.git/info/lfs/objects/batch",
            self.endpoint, self.repo_id
        );
        Url::parse(&url).map_err(|e| Failure {
            kind: FailureKind::Other,
            message: self.redactor.redact(&format!("`{url}` is not a URL: {e}")),
            retry_after: None,
        })
    }

    /// A request with the token (when there is one) and no time limit of its own: for uploads,
    /// whose limit is the silence around them.
    pub(super) fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        let request = self.http.request(method, url);
        match &self.auth {
            Some(auth) => request.header(AUTHORIZATION, auth.clone()),
            None => request,
        }
    }

    /// Send `request` and read the whole answer.
    pub(super) async fn answer(&self, request: reqwest::RequestBuilder) -> Result<Answer, Failure> {
        let response = request.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(|e| self.transport(&e))?;
        Ok(Answer {
            status,
            headers,
            body: body.to_vec(),
        })
    }

    /// A metadata request (JSON body, if any) cut off after the request timeout.
    pub(super) async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
    ) -> Result<Answer, Failure> {
        let mut request = self.request(method, url).timeout(self.timeout);
        if let Some(body) = body {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        self.answer(request).await
    }

    /// An answer that is not a success, as a failure with the server's message.
    pub(super) fn refused(&self, answer: &Answer) -> Failure {
        let header = |name: &str| {
            answer
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(String::from)
        };
        let from_body = || {
            serde_json::from_slice::<Value>(&answer.body)
                .ok()
                .and_then(|v| v.get("error")?.as_str().map(String::from))
        };
        let message = header("x-error-message")
            .or_else(from_body)
            .unwrap_or_else(|| format!("HTTP {}", answer.status));
        Failure {
            kind: FailureKind::Status(answer.status),
            message: self.redactor.redact(&message),
            retry_after: header(RETRY_AFTER.as_str())
                .and_then(|v| retry_after(&v, std::time::SystemTime::now())),
        }
    }

    fn transport(&self, e: &reqwest::Error) -> Failure {
        transport_failure(e, self.timeout, &self.redactor)
    }

    pub(super) fn json<T: serde::de::DeserializeOwned>(
        &self,
        answer: &Answer,
    ) -> Result<T, Failure> {
        serde_json::from_slice(&answer.body).map_err(|e| Failure {
            kind: FailureKind::Other,
            message: format!("the Hub's answer is not the expected JSON: {e}"),
            retry_after: None,
        })
    }

    /// Whether the repository exists (404 means no).
    pub async fn exists(&self) -> Result<bool, Failure> {
        let answer = self.send(Method::GET, self.url(&[])?, None).await?;
        match answer.status {
            200..=299 => Ok(true),
            404 => Ok(false),
            _ => Err(self.refused(&answer)),
        }
    }

    /// Create the repository; one that exists already is fine.
    pub async fn create_repo(&self, private: bool) -> Result<(), Failure> {
        let (org, name) = self.repo_id.split_once('/').unwrap_or(("", &self.repo_id));
        let url = self.api_url(["repos", "create"])?;
        let body =
            json!({"name": name, "organization": org, "type": self.singular, "private": private});
        let answer = self.send(Method::POST, url, Some(body)).await?;
        match answer.status {
            200..=299 | 409 => Ok(()),
            _ => Err(self.refused(&answer)),
        }
    }

    /// Whether the repository's owner is a trusted kernel publisher: its organization overview
    /// (`/api/organizations/<org>/overview`) says `trustedKernelPublisher`, which Python's
    /// `kernels` asks before loading without `trust_remote_code=True`. No overview (a user, or
    /// an unknown organization: 404) is not trusted, as `kernels` decides.
    pub async fn trusted_publisher(&self) -> Result<bool, Failure> {
        let org = self.repo_id.split('/').next().unwrap_or_default();
        let url = self.api_url(["organizations", org, "overview"])?;
        let answer = self.send(Method::GET, url, None).await?;
        match answer.status {
            200..=299 => {
                let overview: Value = self.json(&answer)?;
                Ok(overview["trustedKernelPublisher"]
                    .as_bool()
                    .unwrap_or(false))
            }
            404 => Ok(false),
            _ => Err(self.refused(&answer)),
        }
    }

    pub async fn refs(&self) -> Result<Refs, Failure> {
        #[derive(Deserialize)]
        struct Ref {
            name: String,
            #[serde(rename = "ref", default)]
            full: Option<String>,
            #[serde(rename = "targetCommit")]
            target: String,
        }
        #[derive(Deserialize)]
        struct Listing {
            #[serde(default)]
            branches: Vec<Ref>,
            #[serde(default, rename = "pullRequests")]
            pull_requests: Vec<Ref>,
        }
        let mut url = self.url(&["refs"])?;
        url.set_query(Some("include_prs=1"));
        let answer = self.send(Method::GET, url, None).await?;
        if !(200..300).contains(&answer.status) {
            return Err(self.refused(&answer));
        }
        let listing: Listing = self.json(&answer)?;
        Ok(Refs {
            branches: listing
                .branches
                .into_iter()
                .map(|r| (r.name, r.target))
                .collect(),
            pull_requests: listing
                .pull_requests
                .into_iter()
                .map(|r| (r.full.unwrap_or(r.name), r.target))
                .collect(),
        })
    }

    /// Every file at `rev` with its git oid and size, following the listing's pages.
    pub async fn tree(&self, rev: &str) -> Result<BTreeMap<String, RemoteFile>, Failure> {
        #[derive(Deserialize)]
        struct Entry {
            #[serde(rename = "type")]
            kind: String,
            path: String,
            #[serde(default)]
            oid: String,
            #[serde(default)]
            size: u64,
        }
        let mut url = self.url(&["tree", rev])?;
        url.set_query(Some("recursive=true"));
        let mut next = Some(url);
        let mut out = BTreeMap::new();
        while let Some(url) = next.take() {
            let answer = self.send(Method::GET, url, None).await?;
            if !(200..300).contains(&answer.status) {
                return Err(self.refused(&answer));
            }
            let entries: Vec<Entry> = self.json(&answer)?;
            for e in entries.into_iter().filter(|e| e.kind == "file") {
                out.insert(
                    e.path,
                    RemoteFile {
                        oid: e.oid,
                        size: e.size,
                    },
                );
            }
            next = next_page(&answer.headers);
        }
        Ok(out)
    }

    /// Open pull requests: number, title and, where the Hub says it, the target ref
    /// (`refs/heads/v1`). The first page only: the newest 50 are where a re-run's PR is.
    pub async fn open_pull_requests(&self) -> Result<Vec<OpenPr>, Failure> {
        #[derive(Deserialize)]
        struct Listing {
            #[serde(default)]
            discussions: Vec<OpenPr>,
        }
        let mut url = self.url(&["discussions"])?;
        url.set_query(Some("type=pull_request&status=open"));
        let answer = self.send(Method::GET, url, None).await?;
        if !(200..300).contains(&answer.status) {
            return Err(self.refused(&answer));
        }
        let listing: Listing = self.json(&answer)?;
        Ok(listing
            .discussions
            .into_iter()
            .filter(|d| d.is_pull_request && d.status == "open")
            .collect())
    }

    /// Create `branch` at `start` (a branch or a commit; `main` when `None`).
    pub async fn create_branch(&self, branch: &str, start: Option<&str>) -> Result<(), Failure> {
        let body = match start {
            Some(s) => json!({"startingPoint": s}),
            None => json!({}),
        };
        let answer = self
            .send(Method::POST, self.url(&["branch", branch])?, Some(body))
            .await?;
        match answer.status {
            200..=299 => Ok(()),
            _ => Err(self.refused(&answer)),
        }
    }

    /// When the commit `rev` was made (the first entry of its history); `None` when the Hub
    /// gives no date kbuild can read.
    pub async fn commit_date(&self, rev: &str) -> Result<Option<std::time::SystemTime>, Failure> {
        #[derive(Deserialize)]
        struct Entry {
            date: Option<String>,
        }
        let answer = self
            .send(Method::GET, self.url(&["commits", rev])?, None)
            .await?;
        if !(200..300).contains(&answer.status) {
            return Err(self.refused(&answer));
        }
        let history: Vec<Entry> = self.json(&answer)?;
        let date = history.into_iter().next().and_then(|e| e.date);
        Ok(date.and_then(|d| humantime::parse_rfc3339_weak(&d).ok()))
    }

    /// Close the pull request `num` (a duplicate a concurrent run opened), saying why.
    pub async fn close_pull_request(&self, num: u64, comment: &str) -> Result<(), Failure> {
        let url = self.url(&["discussions", &num.to_string(), "status"])?;
        let body = json!({"status": "closed", "comment": comment});
        let answer = self.send(Method::POST, url, Some(body)).await?;
        match answer.status {
            200..=299 => Ok(()),
            _ => Err(self.refused(&answer)),
        }
    }

    pub async fn delete_branch(&self, branch: &str) -> Result<(), Failure> {
        let answer = self
            .send(Method::DELETE, self.url(&["branch", branch])?, None)
            .await?;
        match answer.status {
            200..=299 => Ok(()),
            _ => Err(self.refused(&answer)),
        }
    }
}

/// How long `Retry-After` asks to wait: delta-seconds, or an HTTP date (a date past is no
/// wait); `None` for anything else.
fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A transport error as a failure: a timeout, no connection, or a connection that broke after
/// the request went out.
pub fn transport_failure(e: &reqwest::Error, limit: Duration, redactor: &Redactor) -> Failure {
    let kind = if e.is_timeout() {
        FailureKind::TimedOut(limit)
    } else if e.is_connect() {
        FailureKind::Connect
    } else {
        FailureKind::Transport
    };
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    Failure {
        kind,
        message: redactor.redact(&message),
        retry_after: None,
    }
}

/// The `rel="next"` target of a `Link` header.
fn next_page(headers: &HeaderMap) -> Option<Url> {
    let link = headers.get(LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params
            .contains("rel=\"next\"")
            .then(|| target.trim().trim_start_matches('<').trim_end_matches('>'))
            .and_then(|u| Url::parse(u).ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_comes_from_the_link_header() {
        let mut h = HeaderMap::new();
        h.insert(
            LINK,
            HeaderValue::from_static("<http://h/api/x?cursor=2>; rel=\"next\""),
        );
        assert_eq!(next_page(&h).unwrap().as_str(), "http://h/api/x?cursor=2");
        assert!(next_page(&HeaderMap::new()).is_none());
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        let date = "Sun, 06 Nov 1994 08:49:47 GMT";
        assert_eq!(retry_after(date, now), Some(Duration::from_secs(10)));
        let past = "Sun, 06 Nov 1994 08:49:27 GMT";
        assert_eq!(retry_after(past, now), Some(Duration::ZERO));
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn revisions_are_one_url_segment() {
        let api = Api::new(
            reqwest::Client::new(),
            "http://127.0.0.1:9",
            ("kernels", "kernel"),
            "org/relu",
            None,
            Duration::from_secs(1),
        );
        let url = api.url(&["tree", "refs/pr/1"]).unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9/api/kernels/org/relu/tree/refs%2Fpr%2F1"
        );
        let overview = api.api_url(["organizations", "org", "overview"]).unwrap();
        assert_eq!(
            overview.as_str(),
            "http://127.0.0.1:9/api/organizations/org/overview"
        );
    }

    #[test]
    fn an_endpoint_that_is_not_a_url_is_named_alike_by_every_api_url() {
        let api = Api::new(
            reqwest::Client::new(),
            "hub.example",
            ("kernels", "kernel"),
            "org/relu",
            None,
            Duration::from_secs(1),
        );
        let repo = api.url(&["tree", "main"]).unwrap_err().message;
        let org = api.api_url(["organizations", "org"]).unwrap_err().message;
        assert!(repo.starts_with("`hub.example` is not a URL: "), "{repo}");
        assert_eq!(repo, org);
    }
}
