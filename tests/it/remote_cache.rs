//! The remote object cache against a real `redis-server` on loopback, started by each test:
//! another checkout of the same sources compiles nothing, a different compiler never shares,
//! a corrupt entry is recompiled, and a server that dies mid-build costs one warning.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::fake_cc::{FakeCompiler, job, write};
use crate::common::kbuild::{copy_dir, git, kbuild, repo, run, stdout_json};
use kbuild::compile::{CompileError, CompileSettings, CompileSummary, RemoteSettings, compile_all};
use kbuild::hint::Hint;
use kbuild::plan::CompileJob;
use kbuild::report::Recorder;
use kbuild::schedule::NvccMode;

/// A `redis-server` of its own on a free loopback port, stopped on drop.
pub(crate) struct Redis {
    pub(crate) child: Child,
    pub(crate) port: u16,
}

impl Redis {
    pub(crate) fn start() -> Self {
        Redis::start_with(&[])
    }

    /// With more of redis-server's settings (`--requirepass`, `--user`).
    pub(crate) fn start_with(settings: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(settings)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server runs (CI installs it: `apt-get install -y redis-server`)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, port }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One checkout of a small project: `a.cpp`, `b.cpp`, `c.cpp`, each including its header.
pub(crate) struct Checkout {
    dir: tempfile::TempDir,
    pub(crate) cc: FakeCompiler,
    jobs: Vec<CompileJob>,
    /// `KBUILD_REMOTE_CACHE_SECRET`, when the checkout has one.
    pub(crate) secret: Option<String>,
}

impl Checkout {
    pub(crate) fn new(b_source: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (name, body) in [("a", "int a();\n"), ("b", b_source), ("c", "int c();\n")] {
            write(root, &format!("include/{name}.h"), "#pragma once\n");
            let source = format!("#include \"{name}.h\"\n{body}");
            write(root, &format!("{name}.cpp"), &source);
        }
        let cc = FakeCompiler::new(root);
        let jobs = ["a.cpp", "b.cpp", "c.cpp"]
            .iter()
            .map(|s| job(root, &cc.path, s))
            .collect();
        Checkout {
            dir,
            cc,
            jobs,
            secret: None,
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn build(
        &self,
        url: &str,
        recorder: &Recorder,
    ) -> Result<CompileSummary, CompileError> {
        let settings = CompileSettings {
            remote: Some(RemoteSettings {
                url: url.to_string(),
                roots: vec![("project".into(), self.root().to_path_buf())],
                secret: self.secret.clone(),
            }),
            ..CompileSettings::local(self.root().join("cache"), 1, NvccMode::Threads)
        };
        compile_all(&self.jobs, &settings, recorder)
    }
}

fn warnings_about_the_remote(recorder: &Recorder) -> Vec<String> {
    recorder
        .take()
        .into_iter()
        .filter_map(|e| e.strip_prefix("warn ").map(str::to_string))
        .filter(|w| w.contains("remote cache"))
        .collect()
}

#[test]
fn second_checkout_compiles_nothing_with_a_warm_remote_cache() {
    let redis = Redis::start();
    let first = Checkout::new("int b();\n");
    first.build(&redis.url(), &Recorder::default()).unwrap();
    assert_eq!(first.cc.take_compiled(), ["a.cpp", "b.cpp", "c.cpp"]);

    let second = Checkout::new("int b();\n");
    let summary = second.build(&redis.url(), &Recorder::default()).unwrap();
    assert_eq!(second.cc.take_compiled(), Vec::<String>::new());
    assert_eq!(summary.remote, ["a.cpp", "b.cpp", "c.cpp"]);
    for name in ["a", "b", "c"] {
        let object = |c: &Checkout| std::fs::read(c.root().join(format!("obj/{name}.o"))).unwrap();
        assert_eq!(object(&first), object(&second));
    }
    // The objects now count as the second checkout's own: a rebuild is a local no-op.
    let again = second.build(&redis.url(), &Recorder::default()).unwrap();
    assert!(again.remote.is_empty() && again.compiled.is_empty());
}

#[test]
fn a_header_that_differs_in_the_second_checkout_misses_the_remote() {
    let redis = Redis::start();
    Checkout::new("int b();\n")
        .build(&redis.url(), &Recorder::default())
        .unwrap();
    let second = Checkout::new("int b();\n");
    write(
        second.root(),
        "include/b.h",
        "#pragma once\nint changed();\n",
    );
    second.build(&redis.url(), &Recorder::default()).unwrap();
    assert_eq!(second.cc.take_compiled(), ["b.cpp"]);
}

#[test]
fn a_different_compiler_never_shares_objects() {
    let redis = Redis::start();
    Checkout::new("int b();\n")
        .build(&redis.url(), &Recorder::default())
        .unwrap();
    let mut other = Checkout::new("int b();\n");
    for job in &mut other.jobs {
        job.compiler_id = "g++ (another build) 99.1".into();
    }
    other.build(&redis.url(), &Recorder::default()).unwrap();
    assert_eq!(other.cc.take_compiled(), ["a.cpp", "b.cpp", "c.cpp"]);
}

#[test]
fn corrupt_remote_object_is_recompiled_never_used() {
    let redis = Redis::start();
    let first = Checkout::new("int b();\n");
    first.build(&redis.url(), &Recorder::default()).unwrap();
    let objects = redis.cli(&["--scan", "--pattern", "kbuild:v2:object:*"]);
    let objects: Vec<&str> = objects.lines().collect();
    assert_eq!(objects.len(), 3, "one object per unit: {objects:?}");
    for key in &objects {
        redis.cli(&["SET", key, "not an object"]);
    }

    let second = Checkout::new("int b();\n");
    let recorder = Recorder::default();
    let summary = second.build(&redis.url(), &recorder).unwrap();
    assert_eq!(second.cc.take_compiled(), ["a.cpp", "b.cpp", "c.cpp"]);
    assert!(summary.remote.is_empty());
    let a = std::fs::read_to_string(second.root().join("obj/a.o")).unwrap();
    assert!(
        a.starts_with("#include \"a.h\""),
        "the object was compiled: {a}"
    );
    let warned = warnings_about_the_remote(&recorder);
    assert_eq!(
        warned.len(),
        3,
        "one warning per corrupt entry: {warned:#?}"
    );
    assert!(
        warned[0].contains("does not match its SHA-256"),
        "{}",
        warned[0]
    );

    // The recompiled objects replaced the corrupt ones: a third checkout compiles nothing.
    let third = Checkout::new("int b();\n");
    third.build(&redis.url(), &Recorder::default()).unwrap();
    assert_eq!(third.cc.take_compiled(), Vec::<String>::new());
}

#[test]
fn remote_killed_mid_build_finishes_locally_and_says_so_once() {
    let mut redis = Redis::start();
    let checkout = Checkout::new("// SLEEP 2\nint b();\n");
    let started_b = checkout.root().join("b.cpp.pid");
    let url = redis.url();
    let recorder = Recorder::default();
    let summary = std::thread::scope(|s| {
        let build = s.spawn(|| checkout.build(&url, &recorder));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !started_b.exists() {
            assert!(Instant::now() < deadline, "b.cpp never started compiling");
            std::thread::sleep(Duration::from_millis(10));
        }
        // a.cpp was compiled and shared; the server dies while b.cpp compiles.
        redis.kill();
        build.join().unwrap()
    })
    .unwrap();
    assert_eq!(summary.compiled, ["a.cpp", "b.cpp", "c.cpp"]);
    assert!(checkout.root().join("obj/c.o").is_file());
    let warned = warnings_about_the_remote(&recorder);
    assert_eq!(warned.len(), 1, "said once: {warned:#?}");
    assert!(
        warned[0].contains("building with the local cache only"),
        "{}",
        warned[0]
    );
    assert!(warned[0].contains(&url), "{}", warned[0]);
}

#[test]
fn remote_cache_url_that_is_not_redis_is_refused_with_a_hint() {
    let checkout = Checkout::new("int b();\n");
    let err = checkout
        .build("http://127.0.0.1:9", &Recorder::default())
        .unwrap_err();
    let hint = err.hint().expect("a hint");
    insta::assert_snapshot!(format!("error: {err}\nhint: {hint}"));
}

/// Copy `tests/fixtures/relu-v5` to `<dir>/<name>`: checkouts at different absolute paths.
fn checkout_of_relu(dir: &Path, name: &str) -> PathBuf {
    let root = dir.join(name);
    copy_dir(&repo().join("tests/fixtures/relu-v5"), &root);
    root
}

fn build_backend(root: &Path, backend: &str, url: &str) -> serde_json::Value {
    let out = run(kbuild(root)
        .args(["build", "--backend", backend, "--json", "-j", "2"])
        .env("KBUILD_REMOTE_CACHE", url));
    assert!(out.status.success());
    stdout_json(&out)
}

/// Every file of the built variants, relative path → bytes.
fn variant_files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let build = root.join("build");
    let mut files: Vec<_> = walkdir::WalkDir::new(&build)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            !e.path()
                .strip_prefix(&build)
                .unwrap()
                .starts_with(".kbuild")
        })
        .map(|e| {
            let rel = e.path().strip_prefix(&build).unwrap().to_path_buf();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn second_checkout_of_a_cpu_project_compiles_nothing_and_writes_identical_variants() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let first = checkout_of_relu(dir.path(), "alice");
    let second = checkout_of_relu(dir.path(), "bob-ci-shard");
    let cold = build_backend(&first, "cpu", &redis.url());
    assert!(!cold["compiled"].as_array().unwrap().is_empty());

    let warm = build_backend(&second, "cpu", &redis.url());
    assert_eq!(warm["compiled"], serde_json::json!([]), "{warm:#}");
    let (a, b) = (variant_files(&first), variant_files(&second));
    assert!(
        a.iter()
            .any(|(p, _)| p.extension().is_some_and(|e| e == "so"))
    );
    let names = |v: &[(PathBuf, Vec<u8>)]| v.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
    assert_eq!(names(&a), names(&b));
    for ((path, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "`{}` differs between the checkouts", path.display());
    }
}

/// The op namespace one checkout re-applied is shared under the new id: a clone at that
/// commit fetches an object that carries it (and nothing of the old one), with the places the
/// first checkout's probe found, so its own next commit compiles nothing, not even a probe; the
/// kernel, which never spells the name, comes from the entry alice's first commit stored.
#[test]
fn an_object_whose_namespace_was_reapplied_is_shared_under_the_new_one() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let alice = checkout_of_relu(dir.path(), "alice");
    git(&alice, &["init", "-q"]);
    git(&alice, &["add", "."]);
    git(&alice, &["commit", "-q", "-m", "v1"]);
    let first = build_backend(&alice, "cpu", &redis.url());
    assert_eq!(first["compiled"].as_array().unwrap().len(), 2, "{first:#}");
    git(&alice, &["commit", "-q", "--allow-empty", "-m", "next"]);
    let probed = build_backend(&alice, "cpu", &redis.url());
    let binding = serde_json::json!(["torch-ext/torch_binding.cpp [cpu]"]);
    assert_eq!(probed["compiled"], binding, "the probe: {probed:#}");
    assert_eq!(probed["reapplied"], binding, "{probed:#}");
    git(&alice, &["commit", "-q", "--allow-empty", "-m", "next"]);
    let next = build_backend(&alice, "cpu", &redis.url());
    assert_eq!(next["compiled"], serde_json::json!([]), "{next:#}");
    assert_eq!(next["reapplied"], binding, "{next:#}");

    let bob = dir.path().join("bob");
    git(dir.path(), &["clone", "-q", "alice", "bob"]);
    let fetched = build_backend(&bob, "cpu", &redis.url());
    // The kernel, compiled by alice under her first commit's id, comes from the remote too: none
    // of its files spells the name, so its entry serves any op namespace.
    assert_eq!(fetched["compiled"], serde_json::json!([]), "{fetched:#}");
    let mut cached: Vec<String> = serde_json::from_value(fetched["cached"].clone()).unwrap();
    cached.sort();
    assert_eq!(
        cached,
        [
            "relu_cpu/relu_cpu.cpp [cpu]",
            "torch-ext/torch_binding.cpp [cpu]"
        ],
        "from the remote: {fetched:#}"
    );
    assert_eq!(fetched["variants"][0]["id"], next["variants"][0]["id"]);
    let (a, b) = (variant_files(&alice), variant_files(&bob));
    assert_eq!(a.len(), b.len());
    for ((path, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "`{}` differs between the checkouts", path.display());
    }
    for old in [&first, &probed].map(|b| b["variants"][0]["id"].as_str().unwrap().as_bytes()) {
        for (path, bytes) in b
            .iter()
            .filter(|(p, _)| p.extension().is_some_and(|e| e == "so"))
        {
            let found = bytes.windows(old.len()).any(|w| w == old);
            assert!(!found, "an old op namespace is in `{}`", path.display());
        }
    }
    git(&bob, &["commit", "-q", "--allow-empty", "-m", "bob's"]);
    let after = build_backend(&bob, "cpu", &redis.url());
    assert_eq!(after["compiled"], serde_json::json!([]), "{after:#}");
    assert_eq!(after["reapplied"], binding, "{after:#}");
}

/// With one capability (one device pass per unit) so that the first build fits in a minute.
#[test]
fn second_checkout_of_a_cuda_project_compiles_nothing_and_writes_identical_variants() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let checkouts = ["alice", "bob-ci-shard"].map(|name| {
        let root = checkout_of_relu(dir.path(), name);
        let toml = std::fs::read_to_string(root.join("build.toml")).unwrap();
        let one = toml.replace(r#"["7.5", "8.0", "9.0"]"#, r#"["8.0"]"#);
        assert_ne!(toml, one, "the fixture's capabilities changed");
        std::fs::write(root.join("build.toml"), one).unwrap();
        root
    });
    let cold = build_backend(&checkouts[0], "cuda", &redis.url());
    assert_eq!(cold["compiled"].as_array().unwrap().len(), 2, "{cold:#}");

    let warm = build_backend(&checkouts[1], "cuda", &redis.url());
    assert_eq!(warm["compiled"], serde_json::json!([]), "{warm:#}");
    let (a, b) = (variant_files(&checkouts[0]), variant_files(&checkouts[1]));
    assert!(
        a.iter()
            .any(|(p, _)| p.extension().is_some_and(|e| e == "so"))
    );
    assert_eq!(a.len(), b.len());
    for ((path, x), (other, y)) in a.iter().zip(&b) {
        assert_eq!(path, other);
        assert!(x == y, "`{}` differs between the checkouts", path.display());
    }
}

/// The compile times one build shares through the remote cache are what another machine's
/// first build (its own empty kbuild cache) starts and splits its units by; a build without
/// the remote, or with a team secret the times were not signed with, predicts them.
#[test]
fn a_first_build_elsewhere_knows_the_unit_costs_another_build_shared() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let build = |name: &str, env: &[(&str, &str)]| -> String {
        let root = checkout_of_relu(dir.path(), name);
        let mut cmd = kbuild(&root);
        cmd.args(["build", "--backend", "cpu", "-v", "-j", "2"])
            .env("KBUILD_CACHE_DIR", dir.path().join(format!("{name}-cache")))
            .envs(env.iter().copied());
        let out = run(&mut cmd);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{said}");
        said
    };
    let url = redis.url();
    let first = build("alice", &[("KBUILD_REMOTE_CACHE", &url)]);
    let stored = redis.cli(&["--scan", "--pattern", "kbuild:v2:cost:*"]);
    let units = stored.lines().count();
    assert!(units >= 2, "{stored}");
    assert!(
        first.contains(&format!("costs: {units} predicted from their sources"))
            && first.contains(&format!(
                "remote cache: shared the compile times of {units} units"
            )),
        "{first}"
    );
    for key in stored.lines() {
        let seconds = redis.cli(&["GET", key]);
        assert!(
            seconds.trim().parse::<f64>().is_ok_and(|s| s > 0.0),
            "{key}: {seconds}"
        );
    }

    let second = build("bob-ci-runner", &[("KBUILD_REMOTE_CACHE", &url)]);
    assert!(
        second.contains(&format!(
            "costs: {units} timed by a build sharing the remote cache"
        )),
        "{second}"
    );
    let offline = build("carol-offline", &[]);
    assert!(
        offline.contains(&format!("costs: {units} predicted from their sources")),
        "{offline}"
    );
    // A time stored as another type (`WRONGTYPE`) is that unit's prediction, the rest still come.
    let first_key = stored.lines().next().unwrap();
    redis.cli(&["DEL", first_key]);
    redis.cli(&["LPUSH", first_key, "not a time"]);
    let one_wrong = build("erin", &[("KBUILD_REMOTE_CACHE", &url)]);
    assert!(
        one_wrong.contains(&format!(
            "costs: {} timed by a build sharing the remote cache, 1 predicted from its source",
            units - 1
        )),
        "{one_wrong}"
    );
    // Times shared without the team's secret are not read by a build that has one.
    let signed_only = build(
        "dave-signed",
        &[
            ("KBUILD_REMOTE_CACHE", &url),
            ("KBUILD_REMOTE_CACHE_SECRET", "team"),
        ],
    );
    assert!(
        signed_only.contains(&format!("costs: {units} predicted from their sources")),
        "{signed_only}"
    );
}
