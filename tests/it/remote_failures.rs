//! A remote cache that fails says what failed, once, with the login of its URL hidden, and the
//! build goes on with the local cache (a URL kbuild cannot read stops it before compiling): a
//! server that is down, a wrong password, an ACL user the server does not know, a server that
//! stops answering (bounded, and Ctrl-C ends the wait). An ACL login (`USER:PASSWORD@`) works,
//! and one key of another type is that unit's miss, not the end of the remote. Against a real
//! `redis-server` on loopback.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::kbuild::{fixture, kbuild};
use crate::remote_cache::{Checkout, Redis};
use kbuild::hint::Hint;
use kbuild::report::Recorder;

const USER: &str = "aliceUSR";
const SECRET: &str = "hunter2PW";

/// Everything the recorder got, one event a line; asserts that neither the user nor the
/// password is in it.
fn said_without_login(recorder: &Recorder) -> String {
    let said = recorder.take().join("\n");
    assert!(!said.contains(SECRET), "the password is printed:\n{said}");
    assert!(!said.contains(USER), "the user is printed:\n{said}");
    said
}

/// A build of a fresh checkout against `url`: every unit compiled, and what it said.
fn build_locally(url: &str) -> String {
    let checkout = Checkout::new("int b();\n");
    let recorder = Recorder::default();
    let summary = checkout.build(url, &recorder).unwrap();
    assert_eq!(summary.compiled, ["a.cpp", "b.cpp", "c.cpp"]);
    assert!(summary.remote.is_empty());
    said_without_login(&recorder)
}

fn assert_says(said: &str, line: &str) {
    assert!(said.contains(line), "not said: {line}\n{said}");
}

#[test]
fn a_server_that_is_down_is_named_without_the_login() {
    for url in [
        format!("redis://:{SECRET}@127.0.0.1:1"),
        format!("redis://{USER}:{SECRET}@127.0.0.1:1/3"),
        format!("redis://:{SECRET}/x@127.0.0.1:1"),
    ] {
        let said = build_locally(&url);
        assert_says(&said, "warn remote cache `redis://***@127.0.0.1:1");
        assert_says(&said, "Connection refused");
        assert_says(&said, "hint: check that the server is up and reachable");
        assert_eq!(
            said.matches("remote cache `").count(),
            1,
            "said once:\n{said}"
        );
    }
}

#[test]
fn a_wrong_password_or_an_unknown_acl_user_is_refused_without_the_login() {
    let redis = Redis::start_with(&["--requirepass", "rightPW"]);
    for login in [format!(":{SECRET}"), format!("{USER}:{SECRET}")] {
        let url = format!("redis://{login}@127.0.0.1:{}", redis.port);
        let said = build_locally(&url);
        let shown = format!(
            "warn remote cache `redis://***@127.0.0.1:{}` failed",
            redis.port
        );
        assert_says(&said, &shown);
        assert_says(&said, "the server refused the login: WRONGPASS");
        assert_says(&said, "hint: check the login in `KBUILD_REMOTE_CACHE`");
    }
}

#[test]
fn a_url_kbuild_cannot_read_is_refused_before_compiling_without_the_login() {
    for (url, why) in [
        (
            format!("redis://{USER}:{SECRET}@127.0.0.1:notaport"),
            "its port is not a number",
        ),
        (format!("redis://:{SECRET}@127.0.0.1:1/db"), "its database"),
        (format!("redis://:{SECRET}"), "its port is not a number"),
        (
            format!("redis://:{SECRET}127.0.0.1:1"),
            "not a host name or address",
        ),
        (format!("redis://:{SECRET}%zz@127.0.0.1:1"), "not `%XX`"),
    ] {
        let checkout = Checkout::new("int b();\n");
        let err = checkout.build(&url, &Recorder::default()).unwrap_err();
        let shown = format!("error: {err}\nhint: {}", err.hint().unwrap());
        assert!(shown.contains(why), "{shown}");
        assert!(!shown.contains(SECRET) && !shown.contains(USER), "{shown}");
        assert!(checkout.cc.take_compiled().is_empty(), "nothing compiled");
    }
}

#[test]
fn an_acl_user_logs_in_with_its_name_and_password() {
    let user = format!(">{SECRET}");
    let redis = Redis::start_with(&["--user", USER, "on", &user, "~*", "+@all"]);
    let url = format!("redis://{USER}:{SECRET}@127.0.0.1:{}", redis.port);
    let recorder = Recorder::default();
    Checkout::new("int b();\n").build(&url, &recorder).unwrap();
    said_without_login(&recorder);
    let second = Checkout::new("int b();\n");
    let summary = second.build(&url, &recorder).unwrap();
    assert_eq!(summary.remote, ["a.cpp", "b.cpp", "c.cpp"]);
    assert!(second.cc.take_compiled().is_empty());
}

#[test]
fn a_key_of_another_type_is_one_units_miss_and_is_replaced() {
    let redis = Redis::start();
    Checkout::new("int b();\n")
        .build(&redis.url(), &Recorder::default())
        .unwrap();
    let entries = redis.cli(&["--scan", "--pattern", "kbuild:v2:entry:*"]);
    let entry = entries.lines().next().expect("an entry").to_string();
    redis.cli(&["DEL", &entry]);
    redis.cli(&["RPUSH", &entry, "not a string"]);

    let second = Checkout::new("int b();\n");
    let recorder = Recorder::default();
    let summary = second.build(&redis.url(), &recorder).unwrap();
    assert_eq!(second.cc.take_compiled().len(), 1, "one unit compiled");
    assert_eq!(summary.remote.len(), 2, "the others from the remote");
    let said = recorder.take().join("\n");
    assert_says(&said, "is corrupt (the server said: WRONGTYPE");
    assert!(
        !said.contains("building with the local cache only"),
        "{said}"
    );
    let third = Checkout::new("int b();\n");
    third.build(&redis.url(), &Recorder::default()).unwrap();
    assert!(
        third.cc.take_compiled().is_empty(),
        "the entry was replaced"
    );
}

/// `SIGSTOP`/`SIGCONT` to `pid`.
fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a child this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
}

#[test]
fn a_stopped_server_costs_a_few_seconds_once_and_says_it_does_not_answer() {
    let redis = Redis::start();
    signal(redis.child.id(), libc::SIGSTOP);
    let started = Instant::now();
    let said = build_locally(&format!("redis://:{SECRET}@127.0.0.1:{}", redis.port));
    let took = started.elapsed();
    signal(redis.child.id(), libc::SIGCONT);
    assert!(took < Duration::from_secs(12), "{took:?}");
    assert_says(
        &said,
        "the server accepted the connection but sent nothing for 5 s",
    );
    assert_says(&said, "check that it is not stopped or overloaded");
    assert!(!said.contains("os error"), "{said}");
    assert_eq!(
        said.matches("remote cache `").count(),
        1,
        "said once:\n{said}"
    );
}

/// Whether a TCP connection to `port` on loopback is established (`/proc/net/tcp`).
fn connected_to(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let remote = format!("0100007F:{port:04X} 01");
    table.lines().any(|l| l.contains(&remote))
}

/// The real binary, waiting on a stopped server, stops at Ctrl-C without waiting it out.
#[test]
fn ctrl_c_ends_the_wait_for_a_stopped_server_at_once() {
    let project = fixture("relu-v5");
    let redis = Redis::start();
    signal(redis.child.id(), libc::SIGSTOP);
    let child = kbuild(project.path())
        .args(["build", "--backend", "cpu"])
        .env("KBUILD_REMOTE_CACHE", redis.url())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !connected_to(redis.port) {
        assert!(Instant::now() < deadline, "kbuild never asked the remote");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let interrupted = Instant::now();
    signal(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let took = interrupted.elapsed();
    signal(redis.child.id(), libc::SIGCONT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(took < Duration::from_secs(3), "{took:?}\n{stderr}");
    assert!(!stderr.contains("remote cache `"), "{stderr}");
}

/// The reproducer, through the real binary: the password is nowhere in its output.
#[test]
fn kbuild_build_never_prints_the_remote_caches_password() {
    let project = fixture("relu-v5");
    let out = Command::new(env!("CARGO_BIN_EXE_kbuild"))
        .arg("-C")
        .arg(project.path())
        .args(["build", "--backend", "cpu"])
        .env("KBUILD_PYTHON", crate::common::kbuild::python())
        .env(
            "KBUILD_REMOTE_CACHE",
            format!("redis://:{SECRET}@127.0.0.1:1"),
        )
        .output()
        .unwrap();
    let printed = [out.stdout, out.stderr].concat();
    let printed = String::from_utf8_lossy(&printed);
    assert!(out.status.success(), "{printed}");
    assert!(printed.contains("redis://***@127.0.0.1:1"), "{printed}");
    assert!(!printed.contains(SECRET), "{printed}");
}

/// Every entry on `redis` with `dep` (a path and a hash) put first among its dependencies.
fn add_dependency(redis: &Redis, dep: &str) {
    let entries = redis.cli(&["--scan", "--pattern", "kbuild:v2:entry:*"]);
    for key in entries.lines() {
        let json = redis.cli(&["GET", key]);
        let mut entry: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        let deps = entry["deps"].as_array_mut().unwrap();
        deps.insert(0, serde_json::json!([dep, "0".repeat(64)]));
        redis.cli(&["SET", key, &entry.to_string()]);
    }
}

/// `f` on a thread of its own, which must end within `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("still running after {limit:?}"))
}

#[test]
fn an_entry_naming_a_device_or_a_fifo_as_a_dependency_is_a_miss_at_once() {
    let redis = Redis::start();
    Checkout::new("int b();\n")
        .build(&redis.url(), &Recorder::default())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    for dep in ["/dev/zero".to_string(), fifo.display().to_string()] {
        add_dependency(&redis, &dep);
        let url = redis.url();
        let compiled = within(Duration::from_secs(60), move || {
            let second = Checkout::new("int b();\n");
            let summary = second.build(&url, &Recorder::default()).unwrap();
            assert!(summary.remote.is_empty(), "{dep} served");
            second.cc.take_compiled()
        });
        assert_eq!(compiled, ["a.cpp", "b.cpp", "c.cpp"]);
    }
}

/// A server that answers every request with a bulk length of 2^40 and three bytes.
fn lying_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                use std::io::{Read as _, Write as _};
                let mut request = [0u8; 4096];
                while stream.read(&mut request).is_ok_and(|n| n > 0) {
                    let _ = stream.write_all(b"$1099511627776\r\nabc");
                }
            });
        }
    });
    port
}

#[test]
fn a_server_that_announces_a_terabyte_value_is_a_protocol_error_not_an_abort() {
    let url = format!("redis://127.0.0.1:{}", lying_server());
    let said = build_locally(&url);
    assert_says(&said, "the server's reply is not Redis's protocol");
    assert_says(&said, "a value larger than kbuild accepts");
}
