//! How long kbuild waits for the Hub and how it retries: per-request timeouts, a deadline per
//! step, backoff or the server's `Retry-After`, and one line on stderr per retry.
//!
//! hf-hub's own retries are off: its retry loop cannot report, cannot see `Retry-After` on a
//! 503, and would blindly resend a commit whose response was lost.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::report::Reporter;

/// Timeouts and retry bounds for Hub requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Whole-request limit for metadata calls (refs, tree, branches, repository).
    pub request_timeout: Duration,
    /// Longest silence from the server during a commit (uploads may take long, silence not).
    pub upload_timeout: Duration,
    /// No new attempt of one step starts later than this after its first attempt.
    pub deadline: Duration,
    /// Retries after the first attempt.
    pub retries: usize,
    /// First backoff delay; it doubles per retry (with jitter) unless the server says otherwise.
    pub base_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            request_timeout: Duration::from_secs(30),
            upload_timeout: Duration::from_secs(120),
            deadline: Duration::from_secs(300),
            retries: 4,
            base_delay: Duration::from_millis(500),
        }
    }
}

impl RetryPolicy {
    /// The defaults, with `KBUILD_HUB_TIMEOUT`, `KBUILD_HUB_UPLOAD_TIMEOUT` and
    /// `KBUILD_HUB_DEADLINE` (seconds) where set: for slow links, and for tests.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> RetryPolicy {
        let d = RetryPolicy::default();
        let secs = |k: &str| {
            env(k)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
        };
        RetryPolicy {
            request_timeout: secs("KBUILD_HUB_TIMEOUT").unwrap_or(d.request_timeout),
            upload_timeout: secs("KBUILD_HUB_UPLOAD_TIMEOUT").unwrap_or(d.upload_timeout),
            deadline: secs("KBUILD_HUB_DEADLINE").unwrap_or(d.deadline),
            ..d
        }
    }

    /// Backoff before retry `n` (1-based): `base * 2^n`, halved at random (equal jitter) so
    /// that many clients do not retry in step.
    fn backoff(&self, n: usize) -> Duration {
        let full = self.base_delay * 2u32.saturating_pow(n.min(16) as u32);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.subsec_nanos());
        full / 2 + full.mul_f64(f64::from(nanos % 1000) / 2000.0)
    }
}

/// Why one attempt failed.
#[derive(Debug, Clone)]
pub enum FailureKind {
    /// The server answered with this status.
    Status(u16),
    /// No answer within this time.
    TimedOut(Duration),
    /// No connection: the request was never sent.
    Connect,
    /// The connection broke after the request was sent: it may have been carried out.
    Transport,
    /// Anything else (a file that cannot be read, an answer that does not parse).
    Other,
}

/// One failed attempt, with what the server said (never the token).
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
}

impl Failure {
    /// Worth another attempt: timeouts, broken connections, 408, 429 and 5xx.
    pub fn transient(&self) -> bool {
        match self.kind {
            FailureKind::Status(s) => matches!(s, 408 | 429 | 500 | 502 | 503 | 504),
            FailureKind::TimedOut(_) | FailureKind::Connect | FailureKind::Transport => true,
            FailureKind::Other => false,
        }
    }

    /// The server may have done the work although the client saw a failure (a lost or late
    /// answer, or a gateway error in front of a server that finished).
    pub fn maybe_done(&self) -> bool {
        match self.kind {
            FailureKind::Status(s) => s >= 500,
            FailureKind::TimedOut(_) | FailureKind::Transport => true,
            FailureKind::Connect | FailureKind::Other => false,
        }
    }

    /// The reason as the retry line shows it.
    fn reason(&self) -> String {
        match self.kind {
            FailureKind::TimedOut(after) => format!("timed out after {}", seconds(after)),
            FailureKind::Status(s) if self.message.is_empty() => format!("HTTP {s}"),
            _ => self.message.clone(),
        }
    }
}

/// How a step ended after its attempts.
#[derive(Debug)]
pub struct GaveUp {
    pub last: Failure,
    pub attempts: usize,
}

/// Run `attempt` until it succeeds, fails for good, or the retries or the deadline run out.
/// Each attempt is cut off after `limit` (when given). Every retry is announced on the
/// reporter: `{action}: retrying in 2 s: timed out after 30 s (attempt 2 of 5)`.
pub async fn retry<T, F, Fut>(
    policy: &RetryPolicy,
    reporter: &dyn Reporter,
    action: &str,
    limit: Option<Duration>,
    mut attempt: F,
) -> Result<T, GaveUp>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let started = Instant::now();
    let total = policy.retries + 1;
    for n in 1..=total {
        let result = match limit {
            Some(limit) => tokio::time::timeout(limit, attempt())
                .await
                .unwrap_or_else(|_| {
                    Err(Failure {
                        kind: FailureKind::TimedOut(limit),
                        message: String::new(),
                        retry_after: None,
                    })
                }),
            None => attempt().await,
        };
        let failure = match result {
            Ok(value) => return Ok(value),
            Err(f) => f,
        };
        if !failure.transient() || n == total {
            return Err(GaveUp {
                last: failure,
                attempts: n,
            });
        }
        let delay = failure.retry_after.unwrap_or_else(|| policy.backoff(n));
        if started.elapsed() + delay > policy.deadline {
            let mut last = failure;
            if let Some(after) = last.retry_after {
                last.message = format!(
                    "{} (the Hub asked to retry after {}, past the {} deadline)",
                    last.reason(),
                    seconds(after),
                    seconds(policy.deadline)
                );
                last.kind = FailureKind::Other;
            }
            return Err(GaveUp { last, attempts: n });
        }
        reporter.warn(&format!(
            "{action}: retrying in {}: {} (attempt {} of {total})",
            seconds(delay),
            failure.reason(),
            n + 1
        ));
        tokio::time::sleep(delay).await;
    }
    unreachable!("the loop returns on its last attempt")
}

/// `2 s`, `0.5 s`.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if (s - s.round()).abs() < 0.05 {
        format!("{} s", s.round())
    } else {
        format!("{s:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::report::Recorder;

    fn fast() -> RetryPolicy {
        RetryPolicy {
            base_delay: Duration::from_millis(1),
            ..RetryPolicy::default()
        }
    }

    fn status(s: u16) -> Failure {
        Failure {
            kind: FailureKind::Status(s),
            message: format!("status {s}"),
            retry_after: None,
        }
    }

    fn block_on<T>(f: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn transient_failures_are_retried_and_each_retry_is_reported() {
        let calls = AtomicUsize::new(0);
        let rec = Recorder::default();
        let out = block_on(retry(&fast(), &rec, "listing", None, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(status(503)),
                _ => Ok(7),
            }
        }));
        assert_eq!(out.unwrap(), 7);
        let events = rec.take();
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(
            events[0].starts_with("warn listing: retrying in "),
            "{events:?}"
        );
        assert!(
            events[0].ends_with("status 503 (attempt 2 of 5)"),
            "{events:?}"
        );
    }

    #[test]
    fn client_errors_are_not_retried() {
        let rec = Recorder::default();
        let out: Result<(), _> = block_on(retry(&fast(), &rec, "x", None, || async {
            Err(status(403))
        }));
        assert_eq!(out.unwrap_err().attempts, 1);
        assert!(rec.take().is_empty());
    }

    #[test]
    fn a_hanging_attempt_times_out_and_the_error_says_so() {
        let rec = Recorder::default();
        let policy = RetryPolicy {
            retries: 1,
            ..fast()
        };
        let limit = Some(Duration::from_millis(20));
        let out: Result<(), _> = block_on(retry(&policy, &rec, "refs", limit, || {
            std::future::pending()
        }));
        let gave_up = out.unwrap_err();
        assert_eq!(gave_up.attempts, 2);
        assert!(matches!(gave_up.last.kind, FailureKind::TimedOut(_)));
        assert!(rec.take()[0].contains(": timed out after "));
    }

    #[test]
    fn retry_after_past_the_deadline_ends_the_step_and_says_why() {
        let rec = Recorder::default();
        let policy = RetryPolicy {
            deadline: Duration::from_secs(1),
            ..fast()
        };
        let out: Result<(), _> = block_on(retry(&policy, &rec, "x", None, || async {
            Err(Failure {
                retry_after: Some(Duration::from_secs(60)),
                ..status(429)
            })
        }));
        let gave_up = out.unwrap_err();
        assert_eq!(gave_up.attempts, 1);
        assert!(
            gave_up.last.message.contains("asked to retry after 60 s"),
            "{gave_up:?}"
        );
    }

    #[test]
    fn timeouts_come_from_the_environment() {
        let p = RetryPolicy::from_env(|k| (k == "KBUILD_HUB_TIMEOUT").then(|| "1.5".into()));
        assert_eq!(p.request_timeout, Duration::from_millis(1500));
        assert_eq!(p.deadline, RetryPolicy::default().deadline);
        assert_eq!(
            RetryPolicy::from_env(|_| Some("-3".into())),
            RetryPolicy::default()
        );
    }

    #[test]
    fn durations_read_as_seconds() {
        assert_eq!(seconds(Duration::from_secs(2)), "2 s");
        assert_eq!(seconds(Duration::from_millis(500)), "0.5 s");
    }
}
