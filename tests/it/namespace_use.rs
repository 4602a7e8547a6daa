//! A unit that reaches the op namespace without spelling `TORCH_EXTENSION_NAME` in its files
//! (through its command line, `-DKERNEL_NS=TORCH_EXTENSION_NAME`, or by pasting the name
//! together) still gets every new one: whether an object depends on the id is decided from
//! what its compiler saw, not from the spelling of its files. The cpu op registered by such a
//! kernel runs through torch after each commit, alone and from a remote cache another commit
//! filled.

use std::path::Path;

use crate::common::kbuild::{fixture, git, kbuild, run, stdout_json};
use crate::namespace_cache::{assert_carries_only, assert_loads_under};
use crate::remote_cache::Redis;

const KERNEL: &str = "relu_cpu/relu_cpu.cpp [cpu]";
const BINDING: &str = "torch-ext/torch_binding.cpp [cpu]";

/// The kernel of `relu-kernel-ns` registering itself under a name it pastes together from
/// `TORCH_EXTENSION` and `_NAME`, with no flag naming it.
const PASTED: &str = "#define KBUILD_CAT_(a, b) a##b\n\
                      #define KBUILD_CAT(a, b) KBUILD_CAT_(a, b)\n\
                      #define KERNEL_NS KBUILD_CAT(TORCH_EXTENSION, _NAME)\n";

/// `relu-kernel-ns` committed in a git repository of its own; `pasted`: its kernel pastes the
/// name together instead of taking it from its command line.
fn committed(pasted: bool) -> tempfile::TempDir {
    let project = fixture("relu-kernel-ns");
    let root = project.path();
    if pasted {
        let toml = root.join("build.toml");
        let text = std::fs::read_to_string(&toml).unwrap();
        let flagless = text.replace("cxx-flags = [\"-DKERNEL_NS=TORCH_EXTENSION_NAME\"]\n", "");
        assert_ne!(text, flagless, "the fixture's flag changed");
        std::fs::write(&toml, flagless).unwrap();
        let kernel = root.join("relu_cpu/relu_cpu.cpp");
        let source = std::fs::read_to_string(&kernel).unwrap();
        std::fs::write(&kernel, format!("{PASTED}{source}")).unwrap();
    }
    std::fs::write(root.join("README.md"), "# relu\n").unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "v1"]);
    project
}

/// `kbuild build --backend cpu --json` (with the remote cache `url`): the report.
fn build(root: &Path, url: Option<&str>) -> serde_json::Value {
    let mut cmd = kbuild(root);
    cmd.args(["build", "--backend", "cpu", "--json"]);
    if let Some(url) = url {
        cmd.env("KBUILD_REMOTE_CACHE", url);
    }
    let out = run(&mut cmd);
    assert!(out.status.success());
    stdout_json(&out)
}

fn id_of(report: &serde_json::Value) -> String {
    report["variants"][0]["id"].as_str().unwrap().to_string()
}

fn labels(report: &serde_json::Value, key: &str) -> Vec<String> {
    let mut labels: Vec<String> = serde_json::from_value(report[key].clone()).unwrap_or_default();
    labels.sort();
    labels
}

/// Three commits: each build's extension carries only its own id and its op runs on the CPU.
/// The first new id compiles the kernel (a probe, as for the bindings); the next is written
/// over its object like the bindings'.
fn each_commit_gets_its_own_namespace(pasted: bool) {
    let project = committed(pasted);
    let root = project.path();
    let first = build(root, None);
    assert_loads_under(root, &id_of(&first));

    git(root, &["commit", "-q", "--allow-empty", "-m", "next"]);
    let second = build(root, None);
    assert_eq!(labels(&second, "compiled"), [KERNEL, BINDING], "{second:#}");
    assert_carries_only(root, &id_of(&second), &id_of(&first));
    assert_loads_under(root, &id_of(&second));

    git(root, &["commit", "-q", "--allow-empty", "-m", "again"]);
    let third = build(root, None);
    assert_eq!(
        labels(&third, "compiled"),
        Vec::<String>::new(),
        "{third:#}"
    );
    assert_eq!(labels(&third, "reapplied"), [KERNEL, BINDING], "{third:#}");
    assert_carries_only(root, &id_of(&third), &id_of(&second));
    assert_loads_under(root, &id_of(&third));
}

#[test]
fn a_kernel_given_the_namespace_by_its_command_line_runs_after_a_commit() {
    each_commit_gets_its_own_namespace(false);
}

#[test]
fn a_kernel_that_pastes_the_namespace_together_runs_after_a_commit() {
    each_commit_gets_its_own_namespace(true);
}

/// Alice's commit fills the remote cache; Bob, one commit later, must not get her kernel's
/// object (which holds her id) through the entry for any op namespace, while the plain
/// `relu-v5` kernel, which never sees the id, still serves every commit from there.
#[test]
fn the_remote_cache_serves_another_commit_only_objects_that_never_saw_the_namespace() {
    let redis = Redis::start();
    for pasted in [false, true] {
        let alice = committed(pasted);
        build(alice.path(), Some(&redis.url()));
        let bob = tempfile::tempdir().unwrap();
        git(
            alice.path(),
            &["clone", "-q", ".", bob.path().to_str().unwrap()],
        );
        git(
            bob.path(),
            &["commit", "-q", "--allow-empty", "-m", "bob's"],
        );
        let fetched = build(bob.path(), Some(&redis.url()));
        assert!(
            labels(&fetched, "compiled").contains(&KERNEL.to_string()),
            "{fetched:#}"
        );
        assert_loads_under(bob.path(), &id_of(&fetched));
    }
    let plain = fixture("relu-v5");
    git(plain.path(), &["init", "-q"]);
    git(plain.path(), &["add", "."]);
    git(plain.path(), &["commit", "-q", "-m", "v1"]);
    build(plain.path(), Some(&redis.url()));
    git(
        plain.path(),
        &["commit", "-q", "--allow-empty", "-m", "next"],
    );
    std::fs::remove_dir_all(plain.path().join("build")).unwrap();
    let next = build(plain.path(), Some(&redis.url()));
    assert_eq!(
        labels(&next, "compiled"),
        [BINDING],
        "the kernel from the remote: {next:#}"
    );
    assert_loads_under(plain.path(), &id_of(&next));
}
