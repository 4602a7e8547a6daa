//! One commit over plain HTTP, as the Hub's clients make it without Xet: `preupload` says which
//! files go through LFS, those are sent by the Git LFS `basic` transfer streamed from disk,
//! then one NDJSON commit names them (and carries the small regular files inline).
//!
//! Every failure keeps the server's status and `Retry-After` (hf-hub keeps that header only on
//! 429). An upload is cut off after `idle` without a byte moving, however long it has run, and
//! a cut-off attempt is dropped, its connection closed, before the next one starts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Method, Url};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use super::api::Api;
use super::local::{LocalFile, Source};
use super::retry::{Failure, FailureKind};

/// Files per `preupload` request (the Hub's clients send at most this many).
const PREUPLOAD_CHUNK: usize = 256;
/// Bytes read from disk per body chunk: what an upload holds in memory per file.
const READ_CHUNK: usize = 64 << 10;

/// One change of a commit.
pub enum Change<'a> {
    Upload(&'a LocalFile),
    Delete(&'a str),
}

/// What one commit carries.
pub struct CommitRequest<'a> {
    pub revision: &'a str,
    pub changes: Vec<Change<'a>>,
    pub message: String,
    pub description: String,
    /// The head the commit goes on top of (of `revision`, or of the branch a PR is opened
    /// against); tells a landed commit from an unchanged branch after a lost answer.
    pub parent: Option<&'a str>,
    /// Ask the server to refuse the commit when `revision` is no longer at `parent`.
    pub check_parent: bool,
    pub create_pr: bool,
}

/// A commit the Hub holds.
#[derive(Debug, Clone)]
pub struct Landed {
    pub oid: Option<String>,
    pub pr_num: Option<u64>,
    pub pr_url: Option<String>,
}

/// Bytes an attempt sent, and when anything last moved; shared by its bodies and its watchdog.
pub struct Activity {
    sent: AtomicU64,
    /// The progress bar's count: the most any attempt of this commit has sent.
    shown: Arc<AtomicU64>,
    last: Mutex<Instant>,
}

impl Activity {
    pub fn new(shown: Arc<AtomicU64>) -> Arc<Activity> {
        Arc::new(Activity {
            sent: AtomicU64::new(0),
            shown,
            last: Mutex::new(Instant::now()),
        })
    }

    fn moved(&self, bytes: u64) {
        let sent = self.sent.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.shown.fetch_max(sent, Ordering::Relaxed);
        if let Ok(mut last) = self.last.lock() {
            *last = Instant::now();
        }
    }

    fn idle_for(&self) -> Duration {
        self.last.lock().map_or(Duration::ZERO, |l| l.elapsed())
    }
}

/// Run `work` until it ends or `activity` stays still for `idle`; on silence `work` is dropped
/// (its requests cancelled, their connections closed) and the attempt timed out.
pub async fn within_idle<T>(
    work: impl Future<Output = Result<T, Failure>>,
    activity: &Activity,
    idle: Duration,
) -> Result<T, Failure> {
    tokio::pin!(work);
    loop {
        let wait = idle.saturating_sub(activity.idle_for());
        tokio::select! {
            out = &mut work => return out,
            _ = tokio::time::sleep(wait) => {
                if activity.idle_for() >= idle {
                    return Err(Failure {
                        kind: FailureKind::TimedOut(idle),
                        message: String::new(),
                        retry_after: None,
                    });
                }
            }
        }
    }
}

/// Send `request` as one commit; `activity` follows the bytes sent.
pub async fn commit(
    api: &Api,
    request: &CommitRequest<'_>,
    activity: &Arc<Activity>,
) -> Result<Landed, Failure> {
    let files: Vec<&LocalFile> = request
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::Upload(f) => Some(*f),
            Change::Delete(_) => None,
        })
        .collect();
    let lfs = preupload(api, request.revision, &files).await?;
    let large: Vec<&LocalFile> = files
        .iter()
        .copied()
        .filter(|f| lfs.contains(&f.repo_path))
        .collect();
    upload_lfs(api, &large, activity).await?;
    let body = ndjson(request, &lfs)?;
    activity.moved(0);
    let mut url = api.url(&["commit", request.revision])?;
    if request.create_pr {
        url.set_query(Some("create_pr=1"));
    }
    let sent = api
        .request(Method::POST, url)
        .header(CONTENT_TYPE, "application/x-ndjson")
        .body(body);
    let answer = api.answer(sent).await?;
    if !(200..300).contains(&answer.status) {
        return Err(api.refused(&answer));
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Done {
        commit_oid: Option<String>,
        pull_request_url: Option<String>,
        pr_num: Option<u64>,
    }
    let done: Done = api.json(&answer)?;
    let pr_num = done.pr_num.or_else(|| {
        let url = done.pull_request_url.as_deref()?;
        url.rsplit('/').next()?.parse().ok()
    });
    Ok(Landed {
        oid: done.commit_oid,
        pr_num,
        pr_url: done.pull_request_url,
    })
}

/// The paths of `files` the Hub wants through LFS.
async fn preupload(
    api: &Api,
    revision: &str,
    files: &[&LocalFile],
) -> Result<Vec<String>, Failure> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Mode {
        path: String,
        upload_mode: String,
    }
    #[derive(Deserialize)]
    struct Modes {
        files: Vec<Mode>,
    }
    let mut lfs = Vec::new();
    for chunk in files.chunks(PREUPLOAD_CHUNK) {
        let mut entries = Vec::new();
        for f in chunk {
            let sample = base64::engine::general_purpose::STANDARD.encode(sample(f)?);
            entries.push(json!({"path": f.repo_path, "size": f.size, "sample": sample}));
        }
        let url = api.url(&["preupload", revision])?;
        let answer = api
            .send(Method::POST, url, Some(json!({"files": entries})))
            .await?;
        if !(200..300).contains(&answer.status) {
            return Err(api.refused(&answer));
        }
        let modes: Modes = api.json(&answer)?;
        lfs.extend(
            modes
                .files
                .into_iter()
                .filter(|m| m.upload_mode == "lfs")
                .map(|m| m.path),
        );
    }
    Ok(lfs)
}

/// The first 512 bytes: what the Hub looks at to tell text from binary.
fn sample(file: &LocalFile) -> Result<Vec<u8>, Failure> {
    match &file.source {
        Source::Bytes(b) => Ok(b[..b.len().min(512)].to_vec()),
        Source::Path(p) => {
            use std::io::Read as _;
            let mut head = Vec::with_capacity(512);
            std::fs::File::open(p)
                .and_then(|f| f.take(512).read_to_end(&mut head))
                .map_err(|e| unreadable(p, &e))?;
            Ok(head)
        }
    }
}

fn unreadable(path: &std::path::Path, e: &std::io::Error) -> Failure {
    Failure {
        kind: FailureKind::Other,
        message: format!("cannot read `{}`: {e}", path.display()),
        retry_after: None,
    }
}

/// Upload the LFS objects the Hub does not hold yet, each streamed from disk.
async fn upload_lfs(
    api: &Api,
    files: &[&LocalFile],
    activity: &Arc<Activity>,
) -> Result<(), Failure> {
    if files.is_empty() {
        return Ok(());
    }
    let objects: Vec<Value> = files
        .iter()
        .map(|f| json!({"oid": f.sha256, "size": f.size}))
        .collect();
    let body = json!({"operation": "upload", "transfers": ["basic"], "objects": objects, "hash_algo": "sha256"});
    let batch = api
        .request(Method::POST, api.lfs_batch_url()?)
        .header(ACCEPT, "application/vnd.git-lfs+json")
        .header(CONTENT_TYPE, "application/vnd.git-lfs+json")
        .body(body.to_string());
    let answer = api.answer(batch).await?;
    if !(200..300).contains(&answer.status) {
        return Err(api.refused(&answer));
    }
    let batch: Batch = api.json(&answer)?;
    for object in batch.objects {
        if let Some(error) = object.error {
            return Err(Failure {
                kind: FailureKind::Other,
                message: format!("LFS object {}: {}", object.oid, error.message),
                retry_after: None,
            });
        }
        let Some(actions) = object.actions else {
            continue; // the Hub holds it already
        };
        let Some(file) = files.iter().find(|f| f.sha256 == object.oid) else {
            continue;
        };
        put_object(api, file, &actions.upload, activity).await?;
        if let Some(verify) = actions.verify {
            let url = href(&verify.href)?;
            let check = json!({"oid": file.sha256, "size": file.size}).to_string();
            let answer = api
                .answer(with_headers(api.request(Method::POST, url), &verify).body(check))
                .await?;
            if !(200..300).contains(&answer.status) {
                return Err(api.refused(&answer));
            }
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct Batch {
    objects: Vec<Object>,
}

#[derive(Deserialize)]
struct Object {
    oid: String,
    actions: Option<Actions>,
    error: Option<ObjectError>,
}

#[derive(Deserialize)]
struct ObjectError {
    message: String,
}

#[derive(Deserialize)]
struct Actions {
    upload: Action,
    verify: Option<Action>,
}

#[derive(Deserialize)]
struct Action {
    href: String,
    #[serde(default)]
    header: std::collections::BTreeMap<String, String>,
}

fn href(href: &str) -> Result<Url, Failure> {
    Url::parse(href).map_err(|e| Failure {
        kind: FailureKind::Other,
        message: format!("the Hub's LFS answer holds `{href}`, not a URL: {e}"),
        retry_after: None,
    })
}

fn with_headers(request: reqwest::RequestBuilder, action: &Action) -> reqwest::RequestBuilder {
    action
        .header
        .iter()
        .fold(request, |r, (k, v)| r.header(k.as_str(), v.as_str()))
}

/// PUT one object: the file read in chunks as the connection takes them.
async fn put_object(
    api: &Api,
    file: &LocalFile,
    upload: &Action,
    activity: &Arc<Activity>,
) -> Result<(), Failure> {
    let body = match &file.source {
        Source::Path(p) => file_body(p.clone(), activity),
        Source::Bytes(b) => {
            activity.moved(b.len() as u64);
            reqwest::Body::from(b.clone())
        }
    };
    let put = with_headers(api.request(Method::PUT, href(&upload.href)?), upload)
        .header(CONTENT_TYPE, "application/octet-stream")
        .header(reqwest::header::CONTENT_LENGTH, file.size)
        .body(body);
    let answer = api.answer(put).await?;
    if (200..300).contains(&answer.status) {
        Ok(())
    } else {
        Err(api.refused(&answer))
    }
}

/// A request body that reads `path` a chunk at a time, marking `activity` as each goes out.
fn file_body(path: PathBuf, activity: &Arc<Activity>) -> reqwest::Body {
    let activity = Arc::clone(activity);
    let stream = futures_util::stream::try_unfold(
        (None::<tokio::fs::File>, path, activity),
        |(file, path, activity)| async move {
            let mut file = match file {
                Some(f) => f,
                None => tokio::fs::File::open(&path).await?,
            };
            let mut chunk = vec![0u8; READ_CHUNK];
            let n = file.read(&mut chunk).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(None);
            }
            chunk.truncate(n);
            activity.moved(n as u64);
            Ok(Some((chunk, (Some(file), path, activity))))
        },
    );
    reqwest::Body::wrap_stream(stream)
}

/// The commit body: a header line, then one line per change, small regular files inline.
fn ndjson(request: &CommitRequest<'_>, lfs: &[String]) -> Result<Vec<u8>, Failure> {
    let mut header = json!({"summary": request.message, "description": request.description});
    if let Some(parent) = request.parent.filter(|_| request.check_parent) {
        header["parentCommit"] = json!(parent);
    }
    let mut body = json!({"key": "header", "value": header}).to_string();
    for change in &request.changes {
        let line = match change {
            Change::Upload(f) if lfs.contains(&f.repo_path) => json!({"key": "lfsFile", "value": {
                "path": f.repo_path, "algo": "sha256", "oid": f.sha256, "size": f.size}}),
            Change::Upload(f) => {
                let content = match &f.source {
                    Source::Bytes(b) => b.clone(),
                    Source::Path(p) => std::fs::read(p).map_err(|e| unreadable(p, &e))?,
                };
                let content = base64::engine::general_purpose::STANDARD.encode(content);
                json!({"key": "file", "value": {
                    "path": f.repo_path, "encoding": "base64", "content": content}})
            }
            Change::Delete(p) => json!({"key": "deletedFile", "value": {"path": p}}),
        };
        body.push('\n');
        body.push_str(&line.to_string());
    }
    Ok(body.into_bytes())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    fn block_on<T>(f: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Sets its flag when dropped: shows that an attempt was cancelled.
    struct Dropped<'a>(&'a AtomicBool);

    impl Drop for Dropped<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn steady_progress_outlasts_the_idle_limit() {
        let activity = Activity::new(Arc::new(AtomicU64::new(0)));
        let idle = Duration::from_millis(100);
        let work = async {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(40)).await;
                activity.moved(1);
            }
            Ok(())
        };
        let started = Instant::now();
        block_on(within_idle(work, &activity, idle)).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(400));
    }

    #[test]
    fn a_silent_attempt_is_dropped_before_the_timeout_is_reported() {
        let activity = Activity::new(Arc::new(AtomicU64::new(0)));
        let dropped = AtomicBool::new(false);
        let work = async {
            let _guard = Dropped(&dropped);
            activity.moved(5);
            std::future::pending::<Result<(), Failure>>().await
        };
        let out = block_on(within_idle(work, &activity, Duration::from_millis(50)));
        assert!(matches!(
            out,
            Err(Failure {
                kind: FailureKind::TimedOut(_),
                ..
            })
        ));
        assert!(dropped.load(Ordering::SeqCst), "the attempt still runs");
        assert_eq!(activity.shown.load(Ordering::SeqCst), 5);
    }
}
