//! The few Redis commands the remote object cache needs (`GET`, `SET`, `AUTH`, `SELECT`),
//! spoken over RESP on a plain TCP connection, with a small pool so parallel jobs do not
//! reconnect for every request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::Duration;

/// How long to wait for the server to accept or answer: a dead server must cost the build
/// seconds, not minutes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the server is, from `redis://[:PASSWORD@]HOST[:PORT][/DB]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub host: String,
    pub port: u16,
    pub password: Option<String>,
    pub db: u32,
}

impl Address {
    /// Parse a `redis://` URL; the error says which part is wrong.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("redis://")
            .ok_or("the URL must start with `redis://`")?;
        let (authority, db) = match rest.split_once('/') {
            Some((a, "")) => (a, 0),
            Some((a, db)) => (
                a,
                db.parse()
                    .map_err(|_| format!("database `{db}` is not a number"))?,
            ),
            None => (rest, 0),
        };
        let (password, host_port) = match authority.rsplit_once('@') {
            Some((user_pass, hp)) => {
                let pass = user_pass.split_once(':').map_or(user_pass, |(_, p)| p);
                (Some(pass.to_string()).filter(|p| !p.is_empty()), hp)
            }
            None => (None, authority),
        };
        let (host, port) = match host_port.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse()
                    .map_err(|_| format!("port `{p}` is not a number"))?,
            ),
            None => (host_port, 6379),
        };
        if host.is_empty() {
            return Err("the URL names no host".into());
        }
        Ok(Address {
            host: host.to_string(),
            port,
            password,
            db,
        })
    }
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
    pub(crate) fn get(&self, key: &str) -> std::io::Result<Option<Vec<u8>>> {
        self.with_connection(|c| c.request(&[b"GET", key.as_bytes()]))
    }

    /// Store `value` under `key`.
    pub(crate) fn set(&self, key: &str, value: &[u8]) -> std::io::Result<()> {
        self.with_connection(|c| c.request(&[b"SET", key.as_bytes(), value]).map(drop))
    }

    /// Run `f` on a pooled connection (or a new one); a connection that failed is dropped.
    fn with_connection<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut connection = match pooled {
            Some(c) => c,
            None => Connection::open(&self.address)?,
        };
        let result = f(&mut connection)?;
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(connection);
        Ok(result)
    }
}

struct Connection {
    reader: BufReader<TcpStream>,
}

impl Connection {
    fn open(address: &Address) -> std::io::Result<Self> {
        let addrs = (address.host.as_str(), address.port).to_socket_addrs()?;
        let mut last = std::io::Error::other("the host resolves to no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    stream.set_read_timeout(Some(IO_TIMEOUT))?;
                    stream.set_write_timeout(Some(IO_TIMEOUT))?;
                    let mut c = Connection {
                        reader: BufReader::new(stream),
                    };
                    if let Some(password) = &address.password {
                        c.request(&[b"AUTH", password.as_bytes()])?;
                    }
                    if address.db != 0 {
                        c.request(&[b"SELECT", address.db.to_string().as_bytes()])?;
                    }
                    return Ok(c);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Send one command and read its reply: a bulk string's bytes, `None` for nil, the text
    /// of a simple reply; a server error becomes an `io::Error` with its message.
    fn request(&mut self, parts: &[&[u8]]) -> std::io::Result<Option<Vec<u8>>> {
        let mut out = format!("*{}\r\n", parts.len()).into_bytes();
        for part in parts {
            out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
            out.extend_from_slice(part);
            out.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&out)?;
        self.reply()
    }

    fn reply(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches("\r\n");
        let protocol = |what: &str| std::io::Error::other(format!("{what}: `{line}`"));
        let (kind, rest) = line
            .split_at_checked(1)
            .ok_or_else(|| protocol("empty reply"))?;
        match kind {
            "+" | ":" => Ok(Some(rest.as_bytes().to_vec())),
            "-" => Err(std::io::Error::other(format!("the server said: {rest}"))),
            "$" if rest == "-1" => Ok(None),
            "$" => {
                let len: usize = rest.parse().map_err(|_| protocol("bad bulk length"))?;
                let mut value = vec![0; len + 2];
                self.reader.read_exact(&mut value)?;
                value.truncate(len);
                Ok(Some(value))
            }
            _ => Err(protocol("unexpected reply")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Address;

    #[test]
    fn redis_urls_parse_host_port_password_and_database() {
        let a = Address::parse("redis://:s3cret@cache.local:6380/2").unwrap();
        assert_eq!(
            a,
            Address {
                host: "cache.local".into(),
                port: 6380,
                password: Some("s3cret".into()),
                db: 2
            }
        );
        assert_eq!(Address::parse("redis://127.0.0.1").unwrap().port, 6379);
        assert!(Address::parse("http://x").unwrap_err().contains("redis://"));
        assert!(
            Address::parse("redis://h:x")
                .unwrap_err()
                .contains("port `x`")
        );
    }
}
