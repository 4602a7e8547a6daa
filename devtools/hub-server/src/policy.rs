//! Who may do what (tokens) and which requests fail on purpose (fault injection for tests).

use std::str::FromStr;

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
    "lfs",
    "resolve",
    "any",
];

/// `CLASS:STATUS[:COUNT[:SKIP]]`: after letting SKIP (default 0) requests of CLASS through, the
/// next COUNT (default 1) answer STATUS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub class: String,
    pub status: u16,
    pub remaining: u32,
    pub skip: u32,
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split(':').collect();
        let (class, status, count, skip) = match parts.as_slice() {
            [c, s] => (*c, *s, "1", "0"),
            [c, s, n] => (*c, *s, *n, "0"),
            [c, s, n, k] => (*c, *s, *n, *k),
            _ => return Err(format!("`{s}`: expected CLASS:STATUS[:COUNT[:SKIP]]")),
        };
        if !CLASSES.contains(&class) {
            return Err(format!(
                "`{class}`: unknown route class; expected one of {}",
                CLASSES.join(", ")
            ));
        }
        let status: u16 = status
            .parse()
            .ok()
            .filter(|s| (400..600).contains(s))
            .ok_or_else(|| format!("`{status}`: expected an HTTP status 400..599"))?;
        let number = |n: &str| n.parse().map_err(|_| format!("`{n}`: expected a count"));
        Ok(Fault {
            class: class.to_string(),
            status,
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

    /// The status to fail this request with, if a fault is armed for its class.
    pub fn take(&mut self, class: &str) -> Option<u16> {
        let fault = self
            .pending
            .iter_mut()
            .find(|f| f.remaining > 0 && (f.class == class || f.class == "any"))?;
        if fault.skip > 0 {
            fault.skip -= 1;
            return None;
        }
        fault.remaining -= 1;
        Some(fault.status)
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

    #[test]
    fn fault_spec_parses_class_status_and_count() {
        let f: Fault = "commit:500:2".parse().unwrap();
        assert_eq!(
            f,
            Fault {
                class: "commit".into(),
                status: 500,
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
    fn faults_fire_count_times_then_stop() {
        let mut faults = Faults::new(vec!["commit:500:2".parse().unwrap()]);
        assert_eq!(faults.take("refs"), None);
        assert_eq!(faults.take("commit"), Some(500));
        assert_eq!(faults.take("commit"), Some(500));
        assert_eq!(faults.take("commit"), None);
    }

    #[test]
    fn skipped_requests_pass_before_the_fault_fires() {
        let mut faults = Faults::new(vec!["commit:503:1:1".parse().unwrap()]);
        assert_eq!(faults.take("commit"), None);
        assert_eq!(faults.take("commit"), Some(503));
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
