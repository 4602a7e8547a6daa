//! One commit over plain HTTP, as the Hub's clients make it without Xet: `preupload` says which
//! files go through LFS, those are sent by the Git LFS `basic` transfer streamed from disk,
//! then one NDJSON commit names them (and carries the small regular files inline).
//!
//! Every failure keeps the server's status and `Retry-After` (hf-hub keeps that header only on
//! 429). An upload is cut off after `idle` without a byte moving, however long it has run, and
//! a cut-off attempt is dropped, its connection closed, before the next one starts.
//!
//! Every request body of a commit (the LFS objects, the commit itself with its inline files,
//! the batch and verify calls) is sent a chunk at a time, and a chunk counts as moving when the
//! connection takes it. That alone is not when bytes leave: the kernel's send buffer (megabytes
//! on loopback) takes the last chunks at once and then drains at the link's pace. So the
//! watchdog also looks at what the process's TCP sockets hold unacknowledged
//! ([`send_queue`]): bytes that left since its last look count as moving too, and the progress
//! shown is what was taken less what still waits.

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

/// How often the watchdog looks at the send queue.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Bytes an attempt sent, and when anything last moved; shared by its bodies and its watchdog.
pub struct Activity {
    /// Bytes the connection took from the bodies.
    sent: AtomicU64,
    /// The progress bar's count: the most any attempt of this commit has seen leave.
    shown: Arc<AtomicU64>,
    last: Mutex<Instant>,
    /// What the send queue held at the last look ([`Activity::look`]).
    queued: Mutex<Option<u64>>,
}

impl Activity {
    pub fn new(shown: Arc<AtomicU64>) -> Arc<Activity> {
        Arc::new(Activity {
            sent: AtomicU64::new(0),
            shown,
            last: Mutex::new(Instant::now()),
            queued: Mutex::new(None),
        })
    }

    /// The connection took `bytes` of a body.
    fn moved(&self, bytes: u64) {
        self.sent.fetch_add(bytes, Ordering::Relaxed);
        self.touch();
    }

    fn touch(&self) {
        if let Ok(mut last) = self.last.lock() {
            *last = Instant::now();
        }
    }

    /// What the send queue holds now (`queued`, `None` where it cannot be read): less than at
    /// the last look means bytes left; the progress shown is what was taken less what waits.
    fn look(&self, queued: Option<u64>) {
        let sent = self.sent.load(Ordering::Relaxed);
        let Some(now) = queued else {
            self.shown.fetch_max(sent, Ordering::Relaxed);
            return;
        };
        let before = self.queued.lock().ok().and_then(|mut q| q.replace(now));
        if before.is_some_and(|before| now < before) {
            self.touch();
        }
        self.shown
            .fetch_max(sent.saturating_sub(now), Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        self.last.lock().map_or(Duration::ZERO, |l| l.elapsed())
    }
}

/// Bytes this process's TCP sockets hold that their peers have not acknowledged: the
/// `tx_queue` of `/proc/net/tcp` and `tcp6` for the sockets among `/proc/self/fd`. `None`
/// where that cannot be read (not Linux, no `/proc`).
pub fn send_queue() -> Option<u64> {
    let mut sockets = std::collections::HashSet::new();
    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        // A descriptor closed since the listing is skipped.
        let Ok(link) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let inode = (link.to_str())
            .and_then(|l| l.strip_prefix("socket:["))
            .and_then(|l| l.strip_suffix(']'));
        sockets.extend(inode.map(str::to_string));
    }
    let mut total = 0;
    let mut read_any = false;
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        read_any = true;
        total += queued_in(&text, &sockets);
    }
    read_any.then_some(total)
}

/// The `tx_queue` summed over the rows of a `/proc/net/tcp` table whose inode is in `sockets`.
fn queued_in(table: &str, sockets: &std::collections::HashSet<String>) -> u64 {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
    (table.lines().skip(1))
        .filter_map(|row| {
            let fields: Vec<&str> = row.split_whitespace().collect();
            let inode = fields.get(9)?;
            sockets.contains(*inode).then_some(())?;
            let tx = fields.get(4)?.split(':').next()?;
            u64::from_str_radix(tx, 16).ok()
        })
        .sum()
}

/// `bytes` as a request body sent a chunk at a time, each marked on `activity` as the
/// connection takes it.
fn counted(bytes: Vec<u8>, activity: &Arc<Activity>) -> reqwest::Body {
    let activity = Arc::clone(activity);
    let chunks: Vec<Vec<u8>> = bytes.chunks(READ_CHUNK).map(<[u8]>::to_vec).collect();
    let stream = futures_util::stream::iter(chunks.into_iter().map(move |chunk| {
        activity.moved(chunk.len() as u64);
        Ok::<_, std::io::Error>(chunk)
    }));
    reqwest::Body::wrap_stream(stream)
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
        let wait = idle.saturating_sub(activity.idle_for()).min(LOOK_EVERY);
        tokio::select! {
            out = &mut work => return out,
            _ = tokio::time::sleep(wait) => {
                activity.look(send_queue());
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
    let mut url = api.url(&["commit", request.revision])?;
    if request.create_pr {
        url.set_query(Some("create_pr=1"));
    }
    let sent = api
        .request(Method::POST, url)
        .header(CONTENT_TYPE, "application/x-ndjson")
        .header(reqwest::header::CONTENT_LENGTH, body.len())
        .body(counted(body, activity));
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
    let body = body.to_string().into_bytes();
    let batch = api
        .request(Method::POST, api.lfs_batch_url()?)
        .header(ACCEPT, "application/vnd.git-lfs+json")
        .header(CONTENT_TYPE, "application/vnd.git-lfs+json")
        .header(reqwest::header::CONTENT_LENGTH, body.len())
        .body(counted(body, activity));
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
            let check = check.into_bytes();
            let request = with_headers(api.request(Method::POST, url), &verify)
                .header(reqwest::header::CONTENT_LENGTH, check.len())
                .body(counted(check, activity));
            let answer = api.answer(request).await?;
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
        Source::Bytes(b) => counted(b.clone(), activity),
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
        assert!(activity.shown.load(Ordering::SeqCst) <= 5);
    }

    #[test]
    fn bytes_count_as_sent_once_they_leave_the_send_queue() {
        let activity = Activity::new(Arc::new(AtomicU64::new(0)));
        activity.moved(1000);
        activity.look(Some(1000));
        assert_eq!(activity.shown.load(Ordering::SeqCst), 0, "all still queued");
        std::thread::sleep(Duration::from_millis(30));
        let idle = activity.idle_for();
        activity.look(Some(1000));
        assert!(activity.idle_for() >= idle, "nothing left: no movement");
        activity.look(Some(400));
        assert_eq!(activity.shown.load(Ordering::SeqCst), 600);
        assert!(activity.idle_for() < idle, "bytes that left are movement");
        activity.look(None);
        assert_eq!(activity.shown.load(Ordering::SeqCst), 1000);
    }

    #[test]
    fn the_send_queue_sums_the_unacknowledged_bytes_of_this_processs_sockets() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:A1B2 0100007F:1F90 01 00010000:00000000 01:00000014 00000000     0        0 4242 1\n   1: 0100007F:A1B3 0100007F:1F90 01 000000FF:00000000 00:00000000 00000000     0        0 9999 1\n   2: 0100007F:A1B4 0100007F:1F90 01 00000001:00000000 00:00000000 00000000     0        0 77 1\n";
        let ours = ["4242", "77"].map(String::from).into_iter().collect();
        assert_eq!(queued_in(table, &ours), 0x10000 + 1);
        // Readable here (Linux), with this process's own sockets among the rows.
        let _listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(send_queue().is_some());
    }
}
