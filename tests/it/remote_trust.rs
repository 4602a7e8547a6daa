//! Whoever can write to the remote cache's server can put objects into the builds that use it:
//! an entry is checked against this checkout's headers and its object against its digest, which
//! finds corruption, not malice. With `KBUILD_REMOTE_CACHE_SECRET` every entry is signed
//! (HMAC-SHA256 over its key and content) and only signed entries are used: a forged one is
//! compiled over, and writers without the secret cannot feed the team's builds.

use serde_json::Value;

use crate::remote_cache::{Checkout, Redis};
use kbuild::report::Recorder;

const SECRET: &str = "team-secret-0f3c";

/// The entries on `redis`: key and JSON.
fn entries(redis: &Redis) -> Vec<(String, Value)> {
    let keys = redis.cli(&["--scan", "--pattern", "kbuild:v2:entry:*"]);
    (keys.lines())
        .map(|key| {
            let json = redis.cli(&["GET", key]);
            (key.to_string(), serde_json::from_str(json.trim()).unwrap())
        })
        .collect()
}

/// Point `a.cpp`'s entry at `b.cpp`'s object (a valid object, under a key that matches): what
/// a writer to the server can do without the secret.
fn forge(redis: &Redis) {
    let all = entries(redis);
    let object_of = |label: &str| {
        let (_, entry) = all.iter().find(|(_, e)| e["label"] == label).unwrap();
        entry["object_sha256"].clone()
    };
    let b = object_of("b.cpp");
    let (key, mut a) = all
        .iter()
        .find(|(_, e)| e["label"] == "a.cpp")
        .cloned()
        .unwrap();
    a["object_sha256"] = b;
    redis.cli(&["SET", &key, &a.to_string()]);
}

fn with_secret(mut checkout: Checkout, secret: Option<&str>) -> Checkout {
    checkout.secret = secret.map(str::to_string);
    checkout
}

fn object(checkout: &Checkout, name: &str) -> String {
    std::fs::read_to_string(checkout.root().join(format!("obj/{name}.o"))).unwrap()
}

#[test]
fn without_a_secret_a_forged_entry_is_linked_and_with_one_it_is_compiled_over() {
    // No secret: the forged entry serves b.cpp's object as a.cpp's (the documented trust model).
    let redis = Redis::start();
    Checkout::new("int b();\n")
        .build(&redis.url(), &Recorder::default())
        .unwrap();
    forge(&redis);
    let trusting = Checkout::new("int b();\n");
    trusting.build(&redis.url(), &Recorder::default()).unwrap();
    assert!(trusting.cc.take_compiled().is_empty());
    assert!(
        object(&trusting, "a").contains("int b();"),
        "the forged object was linked"
    );

    // With the secret: entries are signed; the forged one is refused and compiled over.
    let redis = Redis::start();
    with_secret(Checkout::new("int b();\n"), Some(SECRET))
        .build(&redis.url(), &Recorder::default())
        .unwrap();
    assert!(entries(&redis).iter().all(|(_, e)| e["hmac"].is_string()));
    forge(&redis);
    let guarded = with_secret(Checkout::new("int b();\n"), Some(SECRET));
    let recorder = Recorder::default();
    let summary = guarded.build(&redis.url(), &recorder).unwrap();
    assert_eq!(guarded.cc.take_compiled(), ["a.cpp"]);
    assert_eq!(summary.remote, ["b.cpp", "c.cpp"], "signed entries serve");
    assert!(object(&guarded, "a").contains("int a();"));
    let said = recorder.take().join("\n");
    assert!(
        said.contains("not signed with `KBUILD_REMOTE_CACHE_SECRET`"),
        "{said}"
    );
    assert!(!said.contains(SECRET), "{said}");
}

#[test]
fn with_a_secret_entries_written_without_it_or_with_another_are_not_used() {
    for writer in [None, Some("another-secret")] {
        let redis = Redis::start();
        with_secret(Checkout::new("int b();\n"), writer)
            .build(&redis.url(), &Recorder::default())
            .unwrap();
        let reader = with_secret(Checkout::new("int b();\n"), Some(SECRET));
        let summary = reader.build(&redis.url(), &Recorder::default()).unwrap();
        assert!(summary.remote.is_empty(), "{writer:?}");
        assert_eq!(reader.cc.take_compiled(), ["a.cpp", "b.cpp", "c.cpp"]);
        // Its own signed entries replaced them: a third checkout with the secret compiles none.
        let third = with_secret(Checkout::new("int b();\n"), Some(SECRET));
        third.build(&redis.url(), &Recorder::default()).unwrap();
        assert!(third.cc.take_compiled().is_empty(), "{writer:?}");
    }
}
