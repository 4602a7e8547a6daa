//! The few Redis commands the remote object cache needs (`GET`, `SET`, `AUTH`, `SELECT`),
//! spoken over RESP on a plain TCP connection, with a small pool so parallel jobs do not
//! reconnect for every request.
//!
//! A server that stops answering (stopped, overloaded, a dead link) costs [`SILENCE`] once, not
//! a wait per request: the time is counted from the last byte that moved, so a large object on
//! a slow link still arrives; and a SIGINT/SIGTERM ends the wait at once. What the server sends
//! is bounded: a reply line longer than [`MAX_LINE`] or a value larger than [`MAX_VALUE`] is a
//! protocol error, and a value's bytes are allocated as they arrive, never from its announced
//! length alone.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long to wait for the server to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the server may send nothing while kbuild waits for its reply (or may take nothing
/// while kbuild sends): a healthy server answers in microseconds.
pub(crate) const SILENCE: Duration = Duration::from_secs(5);
/// How often a wait looks at SIGINT/SIGTERM.
const TICK: Duration = Duration::from_millis(100);
/// The longest reply line kbuild reads (a simple string, an error, a length).
const MAX_LINE: usize = 64 * 1024;
/// The largest value kbuild accepts: well above any object (CUDA objects run to tens of MB).
pub(crate) const MAX_VALUE: u64 = 4 << 30;

/// Where the server is, from `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub host: String,
    pub port: u16,
    /// The ACL user to log in as (`AUTH USER PASSWORD`); `None`: `requirepass`'s (`default`).
    pub user: Option<String>,
    pub password: Option<String>,
    pub db: u32,
}

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let login = (self.user.is_some() || self.password.is_some()).then_some("***@");
        write!(
            f,
            "redis://{}{}:{}/{}",
            login.unwrap_or(""),
            self.host,
            self.port,
            self.db
        )
    }
}

impl Address {
    /// Parse a `redis://` URL; the error says which part is wrong, quoting none (with its `@`
    /// missing, a login would be read as the host or the port).
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("redis://")
            .ok_or("the URL must start with `redis://`")?;
        // The login first: a password may hold `/` or `:`, which must not be read as the
        // database or the port.
        let (login, location) = match rest.rsplit_once('@') {
            Some((login, location)) => (Some(login), location),
            None => (None, rest),
        };
        let (host_port, db) = match location.split_once('/') {
            Some((a, "")) => (a, 0),
            Some((a, db)) => (
                a,
                db.parse()
                    .map_err(|_| "its database (after the `/`) is not a number".to_string())?,
            ),
            None => (location, 0),
        };
        let (host, port) = match host_port.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse()
                    .map_err(|_| "its port is not a number from 1 to 65535".to_string())?,
            ),
            None => (host_port, 6379),
        };
        if host.is_empty() {
            return Err("the URL names no host".into());
        }
        // Not quoted: with the `@` after a login missing, the login is in it.
        let bracketed = host.starts_with('[') && host.ends_with(']');
        let named = (host.chars()).all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        if !named && !bracketed {
            return Err("its host is not a host name or address (a login ends with `@`)".into());
        }
        let (user, password) = match login.map(|l| l.split_once(':').unwrap_or((l, ""))) {
            Some((user, password)) => (decoded(user, "user")?, decoded(password, "password")?),
            None => (None, None),
        };
        Ok(Address {
            host: host.to_string(),
            port,
            user,
            password,
            db,
        })
    }
}

/// A login part of the URL, percent-decoded (`p%40ss` is `p@ss`); `None` when empty.
fn decoded(part: &str, what: &str) -> Result<Option<String>, String> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = (bytes.get(i + 1..i + 3))
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("the {what} holds a `%` that is not `%XX`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let text = String::from_utf8(out).map_err(|_| format!("the {what} is not UTF-8"))?;
    Ok(Some(text).filter(|t| !t.is_empty()))
}

/// What went wrong talking to the server. Never holds the login.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RedisError {
    /// The server cannot be reached, or the connection broke.
    #[error("{0}")]
    Io(std::io::Error),
    /// The server sent (or took) nothing for [`SILENCE`].
    #[error("the server accepted the connection but sent nothing for {} s", SILENCE.as_secs())]
    Silent,
    /// SIGINT/SIGTERM while waiting.
    #[error("interrupted")]
    Interrupted,
    /// The server refused the login (`AUTH`) or the database (`SELECT`).
    #[error("the server refused the login: {0}")]
    Login(String),
    /// The server refused a command: `WRONGTYPE` for one key, `NOPERM`, `OOM`, `READONLY`.
    #[error("the server said: {0}")]
    Refused(String),
    /// A reply kbuild cannot read.
    #[error("the server's reply is not Redis's protocol: {0}")]
    Protocol(String),
}

impl RedisError {
    /// Whether the error is about one key only (its value has another type), not the server.
    pub(crate) fn about_one_key(&self) -> bool {
        matches!(self, RedisError::Refused(said) if said.starts_with("WRONGTYPE"))
    }

    fn from_io(e: std::io::Error) -> Self {
        match e.get_ref().and_then(|inner| inner.downcast_ref::<Stop>()) {
            Some(Stop::Silent) => RedisError::Silent,
            Some(Stop::Signal) => RedisError::Interrupted,
            None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                RedisError::Protocol("the server closed the connection mid-reply".into())
            }
            None => RedisError::Io(e),
        }
    }
}

/// Why a patient read or write gave up (carried inside an `io::Error`).
#[derive(Debug, thiserror::Error)]
enum Stop {
    #[error("silent")]
    Silent,
    #[error("interrupted")]
    Signal,
}

/// A pool of connections to one server.
pub(crate) struct Client {
    address: Address,
    idle: Mutex<Vec<Connection>>,
}

impl Client {
    pub(crate) fn new(address: Address) -> Self {
        Client {
            address,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The value stored under `key`, `None` when there is none.
    pub(crate) fn get(&self, key: &str) -> Result<Option<Vec<u8>>, RedisError> {
        self.with_connection(|c| c.request(&[b"GET", key.as_bytes()]))
    }

    /// The values stored under `keys`, in order, asked in one round trip (pipelined `GET`s);
    /// a key the server refuses to read (another type) has none.
    pub(crate) fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, RedisError> {
        self.with_connection(|c| {
            let requests: Vec<Vec<&[u8]>> = (keys.iter())
                .map(|k| vec![b"GET".as_slice(), k.as_bytes()])
                .collect();
            let replies = c.pipeline(&requests)?;
            Ok(replies.into_iter().map(|r| r.ok().flatten()).collect())
        })
    }

    /// Store each value under its key, in one round trip (pipelined `SET`s).
    pub(crate) fn set_many(&self, pairs: &[(String, Vec<u8>)]) -> Result<(), RedisError> {
        self.with_connection(|c| {
            let requests: Vec<Vec<&[u8]>> = (pairs.iter())
                .map(|(k, v)| vec![b"SET".as_slice(), k.as_bytes(), v])
                .collect();
            c.pipeline(&requests)?
                .into_iter()
                .try_for_each(|r| r.map(drop))
        })
    }

    /// Store `value` under `key`.
    pub(crate) fn set(&self, key: &str, value: &[u8]) -> Result<(), RedisError> {
        self.with_connection(|c| c.request(&[b"SET", key.as_bytes(), value]).map(drop))
    }

    /// Run `f` on a pooled connection (or a new one). A connection whose request failed is
    /// dropped, unless the server only refused that command (its reply was read whole).
    fn with_connection<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, RedisError>,
    ) -> Result<T, RedisError> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut connection = match pooled {
            Some(c) => c,
            None => Connection::open(&self.address)?,
        };
        let result = f(&mut connection);
        if matches!(result, Ok(_) | Err(RedisError::Refused(_))) {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.push(connection);
        }
        result
    }
}

/// A socket whose reads and writes wait while bytes move, give up after [`SILENCE`] without
/// any, and stop at SIGINT/SIGTERM.
struct Patient(TcpStream);

impl Patient {
    fn wait<T>(
        &mut self,
        mut op: impl FnMut(&mut TcpStream) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let since = Instant::now();
        loop {
            match op(&mut self.0) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if crate::process::interrupted().is_some() {
                        return Err(std::io::Error::other(Stop::Signal));
                    }
                    if since.elapsed() >= SILENCE {
                        return Err(std::io::Error::other(Stop::Silent));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                done => return done,
            }
        }
    }
}

impl Read for Patient {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.wait(|s| s.read(buf))
    }
}

impl Write for Patient {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.wait(|s| s.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// One reply: a value (`None` for nil), or the server's refusal of the command.
type Reply = Result<Option<Vec<u8>>, RedisError>;

struct Connection {
    reader: BufReader<Patient>,
}

impl Connection {
    fn open(address: &Address) -> Result<Self, RedisError> {
        let addrs = (address.host.as_str(), address.port)
            .to_socket_addrs()
            .map_err(RedisError::Io)?;
        let mut last = std::io::Error::other("the host resolves to no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => return Connection::login(stream, address),
                Err(e) => last = e,
            }
        }
        Err(RedisError::Io(last))
    }

    fn login(stream: TcpStream, address: &Address) -> Result<Self, RedisError> {
        stream
            .set_read_timeout(Some(TICK))
            .map_err(RedisError::Io)?;
        stream
            .set_write_timeout(Some(TICK))
            .map_err(RedisError::Io)?;
        let mut c = Connection {
            reader: BufReader::new(Patient(stream)),
        };
        let refused = |e| match e {
            RedisError::Refused(said) => RedisError::Login(said),
            other => other,
        };
        if let Some(password) = &address.password {
            let mut auth: Vec<&[u8]> = vec![b"AUTH"];
            auth.extend(address.user.as_deref().map(str::as_bytes));
            auth.push(password.as_bytes());
            c.request(&auth).map_err(refused)?;
        }
        if address.db != 0 {
            c.request(&[b"SELECT", address.db.to_string().as_bytes()])
                .map_err(refused)?;
        }
        Ok(c)
    }

    /// Send one command and read its reply: a bulk string's bytes, `None` for nil, the text
    /// of a simple reply; a server error is [`RedisError::Refused`] with its message.
    fn request(&mut self, parts: &[&[u8]]) -> Reply {
        let mut replies = self.pipeline(&[parts.to_vec()])?;
        replies.pop().unwrap_or(Ok(None))
    }

    /// Send every command, then read their replies in order (one round trip): each reply, or
    /// the server's refusal of that command (the rest are still read, so the connection stays
    /// usable); `Err` when the connection failed.
    fn pipeline(&mut self, commands: &[Vec<&[u8]>]) -> Result<Vec<Reply>, RedisError> {
        let mut out = Vec::new();
        for parts in commands {
            out.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
            for part in parts {
                out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
                out.extend_from_slice(part);
                out.extend_from_slice(b"\r\n");
            }
        }
        let stream = self.reader.get_mut();
        stream.write_all(&out).map_err(RedisError::from_io)?;
        let mut replies = Vec::with_capacity(commands.len());
        for _ in commands {
            match read_reply(&mut self.reader) {
                Err(RedisError::Refused(said)) => replies.push(Err(RedisError::Refused(said))),
                Err(e) => return Err(e),
                Ok(value) => replies.push(Ok(value)),
            }
        }
        Ok(replies)
    }
}

/// The first reply in `bytes`, read as a server's reply is read: its value, or why it is
/// refused. Public for the fuzz suite (`tests/it/input_fuzz.rs`); requests go through `Client`.
pub fn parse_reply(bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    read_reply(&mut std::io::Cursor::new(bytes)).map_err(|e| e.to_string())
}

/// Whether `url` is a remote cache URL kbuild can use (`Err`: why not). Public for the fuzz
/// suite.
pub fn check_url(url: &str) -> Result<(), String> {
    Address::parse(url).map(drop)
}

/// One reply from `reader`: a bulk string's bytes, `None` for nil, the text of a simple reply
/// or an integer; an error reply is [`RedisError::Refused`]. Reads no more than the reply.
pub(crate) fn read_reply(reader: &mut impl BufRead) -> Result<Option<Vec<u8>>, RedisError> {
    let line = read_line(reader)?;
    let protocol = |what: &str| {
        let shown: String = String::from_utf8_lossy(&line).chars().take(80).collect();
        RedisError::Protocol(format!("{what}: `{shown}`"))
    };
    let Some((&kind, rest)) = line.split_first() else {
        return Err(protocol("empty reply"));
    };
    let text = || String::from_utf8_lossy(rest).into_owned();
    match kind {
        b'+' | b':' => Ok(Some(rest.to_vec())),
        b'-' => Err(RedisError::Refused(text())),
        b'$' if rest == b"-1" => Ok(None),
        b'$' => {
            let len: u64 = (std::str::from_utf8(rest).ok())
                .and_then(|r| r.parse().ok())
                .ok_or_else(|| protocol("bad bulk length"))?;
            if len > MAX_VALUE {
                return Err(protocol("a value larger than kbuild accepts"));
            }
            let mut value = Vec::new();
            let read = (reader.by_ref().take(len + 2))
                .read_to_end(&mut value)
                .map_err(RedisError::from_io)?;
            if read as u64 != len + 2 || !value.ends_with(b"\r\n") {
                return Err(protocol(
                    "a value shorter than its length or not ended by CRLF",
                ));
            }
            value.truncate(len as usize);
            Ok(Some(value))
        }
        _ => Err(protocol("unexpected reply")),
    }
}

/// One line of a reply without its CRLF, at most [`MAX_LINE`] bytes.
fn read_line(reader: &mut impl BufRead) -> Result<Vec<u8>, RedisError> {
    let mut line = Vec::new();
    let limit = (MAX_LINE + 2) as u64;
    let read = (reader.by_ref().take(limit))
        .read_until(b'\n', &mut line)
        .map_err(RedisError::from_io)?;
    if read == 0 {
        return Err(RedisError::Protocol(
            "the server closed the connection".into(),
        ));
    }
    if !line.ends_with(b"\r\n") {
        return Err(RedisError::Protocol(match line.len() as u64 >= limit {
            true => format!("a reply line longer than {MAX_LINE} bytes"),
            false => "a reply line not ended by CRLF".into(),
        }));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_urls_parse_host_port_login_and_database() {
        let a = Address::parse("redis://:s3cret@cache.local:6380/2").unwrap();
        assert_eq!(
            a,
            Address {
                host: "cache.local".into(),
                port: 6380,
                user: None,
                password: Some("s3cret".into()),
                db: 2
            }
        );
        let acl = Address::parse("redis://alice:p%40ss/w@h").unwrap();
        assert_eq!(acl.user.as_deref(), Some("alice"));
        assert_eq!(acl.password.as_deref(), Some("p@ss/w"));
        assert_eq!((acl.host.as_str(), acl.port, acl.db), ("h", 6379, 0));
        assert_eq!(format!("{acl:?}"), "redis://***@h:6379/0");
        assert_eq!(Address::parse("redis://127.0.0.1").unwrap().port, 6379);
        assert!(Address::parse("http://x").unwrap_err().contains("redis://"));
        let no_at = Address::parse("redis://:hunter2PW127.0.0.1:1").unwrap_err();
        assert!(
            no_at.contains("not a host name") && !no_at.contains("hunter2PW"),
            "{no_at}"
        );
        assert_eq!(Address::parse("redis://[::1]:7000").unwrap().host, "[::1]");
        let port = Address::parse("redis://:hunter2PW@h:x").unwrap_err();
        assert!(
            port.contains("its port is not a number") && !port.contains("hunter2PW"),
            "{port}"
        );
        let pct = Address::parse("redis://:hunter2%zz@h").unwrap_err();
        assert!(pct.contains("`%`") && !pct.contains("hunter2"), "{pct}");
    }

    fn reply(bytes: &[u8]) -> Result<Option<Vec<u8>>, RedisError> {
        read_reply(&mut std::io::Cursor::new(bytes))
    }

    #[test]
    fn replies_are_read_within_their_bounds() {
        assert_eq!(reply(b"$3\r\nabc\r\n").unwrap(), Some(b"abc".to_vec()));
        assert_eq!(reply(b"$-1\r\n").unwrap(), None);
        assert_eq!(reply(b"+OK\r\n").unwrap(), Some(b"OK".to_vec()));
        assert!(matches!(reply(b"-WRONGTYPE x\r\n"), Err(e) if e.about_one_key()));
        // A length of 2^40 with nothing behind it: an error, not an allocation.
        let huge = reply(b"$1099511627776\r\nabc");
        assert!(matches!(huge, Err(RedisError::Protocol(_))), "{huge:?}");
        let short = reply(b"$10\r\nabc");
        assert!(matches!(short, Err(RedisError::Protocol(_))), "{short:?}");
        let endless = vec![b'+'; MAX_LINE * 2];
        assert!(matches!(reply(&endless), Err(RedisError::Protocol(_))));
        assert!(matches!(reply(b"$-2\r\n"), Err(RedisError::Protocol(_))));
        assert!(matches!(reply(b""), Err(RedisError::Protocol(_))));
    }
}
