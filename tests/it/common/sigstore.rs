//! The Sigstore stand-in (`devtools/sigstore-standin/standin.py`) for the signing tests: a
//! GitHub-Actions-shaped OIDC issuer, a Fulcio CA and a Rekor log on loopback, with the trust
//! config and trusted root it writes. Stopped on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::kbuild::{python, repo};

pub struct StandIn {
    pub url: String,
    /// The bearer GitHub Actions gives a job (`ACTIONS_ID_TOKEN_REQUEST_TOKEN`).
    pub bearer: String,
    pub dir: tempfile::TempDir,
    child: Child,
}

impl StandIn {
    pub fn start() -> StandIn {
        let dir = tempfile::tempdir().expect("stand-in dir");
        let mut child = Command::new(python())
            .arg(repo().join("devtools/sigstore-standin/standin.py"))
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Sigstore stand-in");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the ready line");
        let words: Vec<&str> = line.split_whitespace().collect();
        let [ready, url, bearer] = words.as_slice() else {
            panic!("unexpected first line from the stand-in: {line:?}");
        };
        assert_eq!(*ready, "ready");
        StandIn {
            url: url.to_string(),
            bearer: bearer.to_string(),
            dir,
            child,
        }
    }

    /// The `ClientTrustConfig` kbuild is given (`--trust-config`).
    pub fn trust_config(&self) -> PathBuf {
        self.dir.path().join("trust_config.json")
    }

    /// The trusted root the independent verifier is given.
    pub fn trusted_root(&self) -> PathBuf {
        self.dir.path().join("trusted_root.json")
    }

    /// The environment of a GitHub Actions job with `id-token: write` in `repository`, whose
    /// workflow file is `workflow` (on `refs/heads/main`).
    pub fn actions_env(&self, repository: &str, workflow: &str) -> Vec<(String, String)> {
        vec![
            ("GITHUB_ACTIONS".into(), "true".into()),
            (
                "ACTIONS_ID_TOKEN_REQUEST_URL".into(),
                format!(
                    "{}/token?repository={repository}&workflow={workflow}",
                    self.url
                ),
            ),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN".into(), self.bearer.clone()),
        ]
    }

    /// An identity token for `repository`'s `workflow`, fetched as a job would (for
    /// `--identity-token`).
    pub fn token(&self, repository: &str, workflow: &str) -> String {
        let host = self.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(host).expect("connect to the stand-in");
        let request = format!(
            "GET /token?repository={repository}&workflow={workflow}&audience=sigstore HTTP/1.0\r\n\
             Host: {host}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.bearer
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let body = answer.split("\r\n\r\n").nth(1).expect("an HTTP body");
        let value: serde_json::Value = serde_json::from_str(body).expect("JSON");
        value["value"].as_str().expect("a token").to_string()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
