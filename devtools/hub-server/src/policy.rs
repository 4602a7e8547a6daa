//! Who may do what (tokens) and which requests fail on purpose (fault injection for tests).

use std::str::FromStr;
use std::time::Duration;

/// Route classes faults and logs are keyed on.
pub const CLASSES: &[&str] = &[
    "create",
    "delete",
    "info",
    "refs",
    "branch",
    "tree",
    "paths-info",
    "preupload",
    "commit",
    "commits",
    "discussions",
    "lfs",
    "resolve",
    "any",
];

/// How long a `hang` holds the connection when the spec gives no `for=`: longer than any
/// client timeout a test would wait out.
pub const DEFAULT_HANG: Duration = Duration::from_secs(3600);

/// `CLASS:ACTION[:COUNT[:SKIP]]`: after letting SKIP (default 0) requests of CLASS through, the
/// next COUNT (default 1) get ACTION.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub class: String,
    pub action: Action,
    pub remaining: u32,
    pub skip: u32,
}

/// How a `Retry-After` header says when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// Delta-seconds: `Retry-After: 3`.
    Seconds(u32),
    /// An HTTP date this many seconds from when the answer is made.
    DateIn(u32),
}

/// What an armed fault does to the request it fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `STATUS[,retry-after=SECS]`: answer STATUS without doing the work, with a `Retry-After`
    /// header when given (`retry-after-date=SECS`: as the HTTP date SECS from now).
    Status {
        status: u16,
        retry_after: Option<RetryAfter>,
    },
    /// `hang[,for=DURATION]`: read the request, do nothing, answer nothing; close the connection
    /// after DURATION.
    Hang(Duration),
    /// `lose-response`: do the work (a commit lands), then close the connection unanswered.
    LoseResponse,
}

impl FromStr for Action {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.split(',');
        let kind = parts.next().unwrap_or_default();
        let mut options = Vec::new();
        for option in parts {
            let (key, value) = option
                .split_once('=')
                .ok_or_else(|| format!("`{option}`: expected KEY=VALUE after `,`"))?;
            options.push((key, value));
        }
        let unknown = |key: &str, allowed: &str| {
            format!("`{key}`: not an option of `{kind}`; expected {allowed}")
        };
        match kind {
            "hang" => {
                let mut hold = DEFAULT_HANG;
                for (key, value) in options {
                    if key != "for" {
                        return Err(unknown(key, "`for=DURATION`"));
                    }
                    hold = humantime::parse_duration(value).map_err(|_| {
                        format!("`{value}`: expected a duration such as `30s` or `500ms`")
                    })?;
                }
                Ok(Action::Hang(hold))
            }
            "lose-response" => match options.first() {
                Some((key, _)) => Err(unknown(key, "no options")),
                None => Ok(Action::LoseResponse),
            },
            status => {
                let status: u16 = status
                    .parse()
                    .ok()
                    .filter(|s| (400..600).contains(s))
                    .ok_or_else(|| {
                        format!(
                            "`{status}`: expected an HTTP status 400..599, `hang` or `lose-response`"
                        )
                    })?;
                let mut retry_after = None;
                for (key, value) in options {
                    let seconds = || {
                        value
                            .parse()
                            .map_err(|_| format!("`{value}`: expected whole seconds for `{key}`"))
                    };
                    retry_after = Some(match key {
                        "retry-after" => RetryAfter::Seconds(seconds()?),
                        "retry-after-date" => RetryAfter::DateIn(seconds()?),
                        _ => {
                            return Err(unknown(
                                key,
                                "`retry-after=SECONDS` or `retry-after-date=SECONDS`",
                            ));
                        }
                    });
                }
                Ok(Action::Status {
                    status,
                    retry_after,
                })
            }
        }
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split(':').collect();
        let (class, action, count, skip) = match parts.as_slice() {
            [c, a] => (*c, *a, "1", "0"),
            [c, a, n] => (*c, *a, *n, "0"),
            [c, a, n, k] => (*c, *a, *n, *k),
            _ => return Err(format!("`{s}`: expected CLASS:ACTION[:COUNT[:SKIP]]")),
        };
        if !CLASSES.contains(&class) {
            return Err(format!(
                "`{class}`: unknown route class; expected one of {}",
                CLASSES.join(", ")
            ));
        }
        let number = |n: &str| n.parse().map_err(|_| format!("`{n}`: expected a count"));
        Ok(Fault {
            class: class.to_string(),
            action: action.parse()?,
            remaining: number(count)?,
            skip: number(skip)?,
        })
    }
}

/// Pending faults, consumed in order.
#[derive(Debug, Default)]
pub struct Faults {
    pending: Vec<Fault>,
}

impl Faults {
    pub fn new(pending: Vec<Fault>) -> Self {
        Faults { pending }
    }

    pub fn add(&mut self, fault: Fault) {
        self.pending.push(fault);
    }

    /// What to do to this request instead of (or besides) answering it, if a fault is armed for
    /// its class.
    pub fn take(&mut self, class: &str) -> Option<Action> {
        let fault = self
            .pending
            .iter_mut()
            .find(|f| f.remaining > 0 && (f.class == class || f.class == "any"))?;
        if fault.skip > 0 {
            fault.skip -= 1;
            return None;
        }
        fault.remaining -= 1;
        Some(fault.action)
    }
}

/// Access levels a bearer token grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Anonymous,
    Read,
    Write,
}

/// The configured tokens. With none configured, everyone may write (a plain local test hub),
/// but requests without any token are still anonymous (private repos stay hidden from them).
#[derive(Debug, Default, Clone)]
pub struct Tokens {
    pub write: Vec<String>,
    pub read: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Denied {
    /// 401: no token, or one the server does not know.
    Unauthenticated,
    /// 403: a valid token without write access.
    ReadOnly,
}

impl Tokens {
    fn configured(&self) -> bool {
        !self.write.is_empty() || !self.read.is_empty()
    }

    /// Check a request's `Authorization` header against what the route needs.
    pub fn check(&self, authorization: Option<&str>, writes: bool) -> Result<Access, Denied> {
        if !self.configured() {
            let has_token = authorization.is_some_and(|h| h.starts_with("Bearer "));
            return Ok(if has_token {
                Access::Write
            } else {
                Access::Anonymous
            });
        }
        let token = authorization.and_then(|h| h.strip_prefix("Bearer "));
        let access = match token {
            None => Access::Anonymous,
            Some(t) if self.write.iter().any(|w| w == t) => Access::Write,
            Some(t) if self.read.iter().any(|r| r == t) => Access::Read,
            Some(_) => return Err(Denied::Unauthenticated),
        };
        match (access, writes) {
            (Access::Anonymous, true) => Err(Denied::Unauthenticated),
            (Access::Read, true) => Err(Denied::ReadOnly),
            _ => Ok(access),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16) -> Action {
        Action::Status {
            status,
            retry_after: None,
        }
    }

    #[test]
    fn fault_spec_parses_class_status_and_count() {
        let f: Fault = "commit:500:2".parse().unwrap();
        assert_eq!(
            f,
            Fault {
                class: "commit".into(),
                action: status(500),
                remaining: 2,
                skip: 0
            }
        );
        assert_eq!("commit:500:1:3".parse::<Fault>().unwrap().skip, 3);
        assert_eq!("refs:429".parse::<Fault>().unwrap().remaining, 1);
        assert!("nope:500".parse::<Fault>().is_err());
        assert!("commit:200".parse::<Fault>().is_err());
    }

    #[test]
    fn fault_spec_parses_retry_after_hang_and_lose_response() {
        let action = |s: &str| s.parse::<Fault>().map(|f| f.action);
        assert_eq!(
            action("refs:503,retry-after=5:2"),
            Ok(Action::Status {
                status: 503,
                retry_after: Some(RetryAfter::Seconds(5))
            })
        );
        assert_eq!(action("commit:hang"), Ok(Action::Hang(DEFAULT_HANG)));
        assert_eq!(
            action("commit:hang,for=250ms:3:1"),
            Ok(Action::Hang(Duration::from_millis(250)))
        );
        assert_eq!(action("commit:lose-response"), Ok(Action::LoseResponse));
        assert_eq!(
            action("commit:503,retry-after-date=4"),
            Ok(Action::Status {
                status: 503,
                retry_after: Some(RetryAfter::DateIn(4))
            })
        );
        assert!(action("refs:503,retry-after=soon").is_err());
        assert!(action("refs:503,for=1s").is_err());
        assert!(action("commit:hang,for=forever").is_err());
        assert!(action("commit:hang,retry-after=1").is_err());
        assert!(action("commit:lose-response,for=1s").is_err());
        assert!(action("commit:503,retry-after").is_err());
    }

    #[test]
    fn faults_fire_count_times_then_stop() {
        let mut faults = Faults::new(vec!["commit:500:2".parse().unwrap()]);
        assert_eq!(faults.take("refs"), None);
        assert_eq!(faults.take("commit"), Some(status(500)));
        assert_eq!(faults.take("commit"), Some(status(500)));
        assert_eq!(faults.take("commit"), None);
    }

    #[test]
    fn skipped_requests_pass_before_the_fault_fires() {
        let mut faults = Faults::new(vec!["commit:503:1:1".parse().unwrap()]);
        assert_eq!(faults.take("commit"), None);
        assert_eq!(faults.take("commit"), Some(status(503)));
        assert_eq!(faults.take("commit"), None);
    }

    #[test]
    fn read_token_cannot_write_and_unknown_token_is_unauthenticated() {
        let tokens = Tokens {
            write: vec!["w".into()],
            read: vec!["r".into()],
        };
        assert_eq!(tokens.check(Some("Bearer w"), true), Ok(Access::Write));
        assert_eq!(tokens.check(Some("Bearer r"), true), Err(Denied::ReadOnly));
        assert_eq!(tokens.check(Some("Bearer r"), false), Ok(Access::Read));
        assert_eq!(
            tokens.check(Some("Bearer x"), false),
            Err(Denied::Unauthenticated)
        );
        assert_eq!(tokens.check(None, false), Ok(Access::Anonymous));
        assert_eq!(tokens.check(None, true), Err(Denied::Unauthenticated));
    }

    #[test]
    fn without_configured_tokens_anyone_writes_but_tokenless_requests_stay_anonymous() {
        let open = Tokens::default();
        assert_eq!(open.check(None, true), Ok(Access::Anonymous));
        assert_eq!(open.check(Some("Bearer any"), true), Ok(Access::Write));
    }
}
