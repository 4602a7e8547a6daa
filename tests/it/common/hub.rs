//! The local Hub server (`kbuild-hub-server`) for the publish tests, and a finished run's output.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The token tests publish with; every test checks it never shows up in output.
pub const TOKEN: &str = "hf_kbuildTestSecretToken0123456789";

/// `target/<profile>/` of this test binary.
fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/debug/deps/<test>-<hash>
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The `kbuild-hub-server` binary, built on first use (it is another workspace member, so
/// `cargo test` of this package does not build it by itself).
pub fn server_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(path) = std::env::var("KBUILD_HUB_SERVER") {
            return PathBuf::from(path);
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let profile_dir = target_profile_dir();
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "hub-server"])
            .args(["--bin", "kbuild-hub-server"])
            .args(release.then_some("--release"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build for kbuild-hub-server");
        assert!(status.success(), "building kbuild-hub-server failed");
        let bin = profile_dir.join("kbuild-hub-server");
        assert!(bin.is_file(), "{} missing after build", bin.display());
        bin
    })
}

/// A running kbuild-hub-server on a fresh root; killed on drop.
pub struct Hub {
    pub url: String,
    pub root: tempfile::TempDir,
    child: Child,
}

impl Hub {
    pub fn start(args: &[&str]) -> Hub {
        let root = tempfile::tempdir().expect("server root");
        let mut child = Command::new(server_bin())
            .arg("--root")
            .arg(root.path())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kbuild-hub-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the listening line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from the server: {line:?}"))
            .to_string();
        Hub { url, root, child }
    }

    /// Every request the server answered: `METHOD /path?query -> STATUS`.
    pub fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.path().join("requests.log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    /// Log lines of successful commits (`POST .../commit/...` answered 200).
    pub fn commits_made(&self) -> usize {
        self.log()
            .iter()
            .filter(|l| {
                l.starts_with("POST /api/") && l.contains("/commit/") && l.ends_with("-> 200")
            })
            .count()
    }

    /// Arm a fault (`CLASS:STATUS[:COUNT]`) while the server runs.
    pub fn arm(&self, spec: &str) {
        let (status, body) = self.request("POST", "/_admin/fault", spec.as_bytes());
        assert_eq!(status, 200, "arming {spec}: {body}");
    }

    /// A raw HTTP/1.1 request; returns status and body.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let addr = self.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).expect("connect to the server");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .unwrap();
        stream.write_all(body).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
        (status, body)
    }

    /// Run Python against this server with an empty `HF_HOME`; returns the output.
    pub fn python(&self, script: &str) -> Output {
        self.python_with(script, &[])
    }

    /// What `scale(x, factor)` returns (`x` a Python expression), as Python prints its list, of
    /// the `kbuild init` kernel published here as `repo` (version 1), loaded back through
    /// `kernels` on the cpu backend.
    pub fn published_init_scale(&self, repo: &str, x: &str, factor: f64) -> String {
        let loaded = self.python(&format!(
            "import kernels, torch\n\
             k = kernels.get_kernel({repo:?}, version=1, backend='cpu', trust_remote_code=True)\n\
             print(k.scale({x}, {factor:?}).tolist())"
        ));
        String::from_utf8_lossy(&loaded.stdout).trim().to_string()
    }

    pub fn python_with(&self, script: &str, env: &[(&str, &str)]) -> Output {
        let home = tempfile::tempdir().expect("HF_HOME");
        let out = Command::new(super::kbuild::python())
            .arg("-c")
            .arg(script)
            .envs(env.iter().copied())
            .env("HF_ENDPOINT", &self.url)
            .env("HF_HOME", home.path())
            .env("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            .env_remove("HF_TOKEN")
            .env_remove("HF_HUB_OFFLINE")
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "python failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `kbuild publish` against this server with `TOKEN`.
    pub fn publish(&self, build_dir: &Path, args: &[&str]) -> Run {
        self.publish_with(build_dir, args, &[("HF_TOKEN", TOKEN)])
    }

    pub fn publish_with(&self, build_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
        let project = build_dir.parent().expect("build dir has a parent");
        let mut cmd = super::kbuild::bin();
        cmd.arg("-C")
            .arg(project)
            .arg("publish")
            .arg("--build-dir")
            .arg(build_dir)
            .args(args)
            .env("HF_ENDPOINT", &self.url)
            .env("HF_HOME", project.join(".hf-home-empty"))
            .env_remove("HF_TOKEN")
            .env_remove("HF_TOKEN_PATH");
        for (k, v) in env {
            cmd.env(k, v);
        }
        Run::of(cmd.output().expect("run kbuild"))
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A finished command's status and output.
pub struct Run {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn of(out: Output) -> Run {
        Run {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Stdout parsed as the `--json` summary.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Panic with both streams unless the command succeeded; and never leak the token.
    pub fn success(self) -> Run {
        assert!(
            self.ok,
            "kbuild failed:\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self.assert_no_token();
        self
    }

    pub fn assert_no_token(&self) {
        assert!(
            !self.stdout.contains(TOKEN) && !self.stderr.contains(TOKEN),
            "the token leaked into the output"
        );
    }
}
