//! The connection loop: read each request, answer it through `dispatch`, and carry out the
//! faults that are not a response at all (a hang, a lost response) by withholding it.

use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::context::State;
use crate::dispatch;
use crate::http::{Reply, Request, Resp};

/// Accept connections on `listener` forever, one task per connection.
pub async fn serve(listener: TcpListener, state: Arc<State>) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let slow = state.read_rate.is_some();
            let service = service_fn(move |req| answer(Arc::clone(&state), req));
            let mut builder = http1::Builder::new();
            if slow {
                // A slow link holds little in flight: hyper's own read-ahead (up to ~400 KB)
                // would take a body's last bytes off the sender at once, and the sender would
                // wait in silence while they are "read" here.
                builder.max_buf_size(8192);
            }
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                // A withheld response is already in the request log; anything else is news.
                match std::error::Error::source(&e).and_then(|s| s.downcast_ref::<Unanswered>()) {
                    Some(Unanswered::Withheld) => {}
                    Some(cause @ Unanswered::Body(_)) => eprintln!("connection error: {cause}"),
                    None => eprintln!("connection error: {e}"),
                }
            }
        });
    }
}

/// Why a request got no response. Returning it from the service makes hyper close the
/// connection without writing anything, which is what a client sees of a lost response.
#[derive(Debug, thiserror::Error)]
enum Unanswered {
    #[error("cannot read the request body")]
    Body(#[source] hyper::Error),
    #[error("response withheld by an injected fault")]
    Withheld,
}

async fn answer(state: Arc<State>, req: hyper::Request<Incoming>) -> Result<Resp, Unanswered> {
    let (parts, body) = req.into_parts();
    let body = match state.read_rate {
        Some(rate) => read_slowly(body, rate).await?,
        None => body.collect().await.map_err(Unanswered::Body)?.to_bytes(),
    };
    let query = parts
        .uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let request = Request {
        method: &parts.method,
        path: parts.uri.path(),
        query,
        headers: &parts.headers,
        body,
    };
    // Handlers do blocking file I/O under the store lock.
    let reply = tokio::task::block_in_place(|| dispatch::handle(&state, request));
    match reply {
        Reply::Answer(resp) => Ok(resp),
        // Sleeping here holds only this connection: other requests go on being answered.
        Reply::Hang(hold) => {
            tokio::time::sleep(hold).await;
            Err(Unanswered::Withheld)
        }
        Reply::Lost { .. } => Err(Unanswered::Withheld),
    }
}

/// The whole body, read no faster than `rate` bytes per second: the sender sees a slow link
/// (its writes wait) but never a silent one.
async fn read_slowly(mut body: Incoming, rate: u64) -> Result<hyper::body::Bytes, Unanswered> {
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(Unanswered::Body)?.into_data() {
            out.extend_from_slice(&data);
        }
        let due = std::time::Duration::from_secs_f64(out.len() as f64 / rate as f64);
        tokio::time::sleep(due.saturating_sub(started.elapsed())).await;
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    //! The transport-level faults, seen by a real TCP client on loopback.

    use std::io::{ErrorKind, Read as _, Write as _};
    use std::net::{SocketAddr, TcpStream};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::policy::{Faults, Tokens};
    use crate::store::Store;

    const COMMIT: &str = "/api/kernels/org/k/commit/main";
    const PATIENT: Duration = Duration::from_secs(10);

    /// A server on a free loopback port, running on its own runtime thread until the test
    /// process ends.
    struct TestHub {
        addr: SocketAddr,
        _root: tempfile::TempDir,
    }

    struct Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Answer {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    impl TestHub {
        /// A server with the kernel repo `org/k`.
        fn start() -> TestHub {
            let root = tempfile::tempdir().unwrap();
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
            let addr = listener.local_addr().unwrap();
            let state = Arc::new(State {
                store: Mutex::new(Store::open(root.path()).unwrap()),
                faults: Mutex::new(Faults::default()),
                tokens: Tokens::default(),
                base_url: format!("http://{addr}"),
                trusted_publishers: Vec::new(),
                page_size: 1000,
                log: Mutex::new(None),
                read_rate: None,
            });
            std::thread::spawn(move || runtime.block_on(serve(listener, state)));
            let hub = TestHub { addr, _root: root };
            let created = hub.ok(
                "POST",
                "/api/repos/create",
                br#"{"name": "k", "type": "kernel", "organization": "org"}"#,
            );
            assert_eq!(created.status, 200, "{}", created.body);
            hub
        }

        /// Send one request and read until the server closes the connection: `Ok(None)` when it
        /// closed without a byte of response, `Err` when `timeout` passed first.
        fn send(
            &self,
            method: &str,
            path: &str,
            body: &[u8],
            timeout: Duration,
        ) -> std::io::Result<Option<Answer>> {
            let mut stream = TcpStream::connect(self.addr)?;
            stream.set_read_timeout(Some(timeout))?;
            write!(
                stream,
                "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                self.addr,
                body.len()
            )?;
            stream.write_all(body)?;
            let mut raw = Vec::new();
            match stream.read_to_end(&mut raw) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset && raw.is_empty() => {}
                Err(e) => return Err(e),
            }
            if raw.is_empty() {
                return Ok(None);
            }
            let text = String::from_utf8_lossy(&raw);
            let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
            let mut lines = head.lines();
            let status = lines
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let headers = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                .collect();
            Ok(Some(Answer {
                status,
                headers,
                body: body.to_string(),
            }))
        }

        /// A request that must be answered.
        fn ok(&self, method: &str, path: &str, body: &[u8]) -> Answer {
            self.send(method, path, body, PATIENT)
                .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
                .unwrap_or_else(|| panic!("{method} {path}: closed without an answer"))
        }

        fn arm(&self, spec: &str) {
            let armed = self.ok("POST", "/_admin/fault", spec.as_bytes());
            assert_eq!(armed.status, 200, "arming {spec}: {}", armed.body);
        }

        /// The content of `path` on `main`, or `None` when the file is not there.
        fn file_on_main(&self, path: &str) -> Option<String> {
            let got = self.ok("GET", &format!("/kernels/org/k/resolve/main/{path}"), b"");
            (got.status == 200).then_some(got.body)
        }
    }

    /// NDJSON for a commit adding `path` with `content`.
    fn add_file(path: &str, content: &str) -> Vec<u8> {
        format!(
            "{{\"key\": \"header\", \"value\": {{\"summary\": \"add {path}\"}}}}\n\
             {{\"key\": \"file\", \"value\": {{\"path\": \"{path}\", \"content\": \"{content}\"}}}}\n"
        )
        .into_bytes()
    }

    fn timed_out(result: &std::io::Result<Option<Answer>>) -> bool {
        matches!(result, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
    }

    #[test]
    fn hang_leaves_the_client_waiting_while_other_requests_are_answered() {
        let hub = TestHub::start();
        hub.arm("commit:hang");
        let started = Instant::now();
        let result = hub.send(
            "POST",
            COMMIT,
            &add_file("a.txt", "a"),
            Duration::from_millis(500),
        );
        assert!(timed_out(&result), "the hung commit was answered");
        assert!(started.elapsed() >= Duration::from_millis(500));
        // The hang holds neither the store nor the server: the next requests are answered.
        assert_eq!(hub.ok("GET", "/api/kernels/org/k/refs", b"").status, 200);
        assert_eq!(
            hub.file_on_main("a.txt"),
            None,
            "a hung commit must not land"
        );
        assert_eq!(hub.ok("POST", COMMIT, &add_file("b.txt", "b")).status, 200);
    }

    #[test]
    fn hang_closes_the_connection_unanswered_after_its_duration() {
        let hub = TestHub::start();
        hub.arm("commit:hang,for=300ms");
        let started = Instant::now();
        let result = hub.send("POST", COMMIT, &add_file("a.txt", "a"), PATIENT);
        assert!(matches!(result, Ok(None)), "expected a silent close");
        let held = started.elapsed();
        assert!(held >= Duration::from_millis(300), "held only {held:?}");
        assert!(held < PATIENT);
    }

    #[test]
    fn lost_response_lands_the_commit_but_answers_nothing() {
        let hub = TestHub::start();
        hub.arm("commit:lose-response");
        let result = hub.send("POST", COMMIT, &add_file("a.txt", "landed"), PATIENT);
        assert!(matches!(result, Ok(None)), "the response was not lost");
        assert_eq!(hub.file_on_main("a.txt").as_deref(), Some("landed"));
        // One response lost, then the fault is spent.
        assert_eq!(hub.ok("POST", COMMIT, &add_file("b.txt", "b")).status, 200);
    }

    #[test]
    fn injected_status_carries_the_configured_retry_after() {
        let hub = TestHub::start();
        hub.arm("refs:503,retry-after=7");
        hub.arm("refs:429");
        let refused = hub.ok("GET", "/api/kernels/org/k/refs", b"");
        assert_eq!(refused.status, 503);
        assert_eq!(refused.header("retry-after"), Some("7"));
        let plain = hub.ok("GET", "/api/kernels/org/k/refs", b"");
        assert_eq!(plain.status, 429);
        assert_eq!(plain.header("retry-after"), None);
        assert_eq!(hub.ok("GET", "/api/kernels/org/k/refs", b"").status, 200);
    }

    #[test]
    fn skip_lets_the_first_commits_land_before_the_fault_fires() {
        let hub = TestHub::start();
        hub.arm("commit:500:100:1");
        assert_eq!(hub.ok("POST", COMMIT, &add_file("a.txt", "a")).status, 200);
        assert_eq!(hub.ok("POST", COMMIT, &add_file("b.txt", "b")).status, 500);
        assert_eq!(hub.file_on_main("a.txt").as_deref(), Some("a"));
        assert_eq!(hub.file_on_main("b.txt"), None);
    }
}
