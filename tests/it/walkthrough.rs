//! A new user's road, end to end: `kbuild init --repo`, `kbuild test` (the generated tests pass
//! on this machine without a GPU), `kbuild publish` to the local Hub, and the kernel loaded back
//! with the exact line publish printed, through Python's `kernels` unchanged: with its defaults
//! for a trusted publisher, with `trust_remote_code=True` for any other owner.

use std::path::Path;

use crate::common::hub::{Hub, TOKEN};
use crate::common::kbuild::{bin, kbuild, path_without_gpu, run, venv_seeing_toolchain};

/// The `Load` line publish ended with: the Python expression that loads the kernel.
fn load_line(stderr: &str) -> String {
    let last = stderr.lines().last().unwrap_or_default().trim();
    let load = last.strip_prefix("Load ").unwrap_or_else(|| {
        panic!("publish does not end with the load line:\n{stderr}");
    });
    load.to_string()
}

/// `kbuild publish` of `root` (its build.toml names the repository unless `args` do).
fn publish(hub: &Hub, root: &Path, args: &[&str]) -> String {
    let out = run(kbuild(root)
        .arg("publish")
        .args(args)
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", root.join(".hf-home-empty"))
        .env("HF_TOKEN", TOKEN));
    assert!(out.status.success(), "publish failed");
    String::from_utf8(out.stderr).unwrap()
}

/// Load with `line` (as printed) and run the kernel's op; prints the result.
fn load_and_scale(hub: &Hub, line: &str) -> String {
    let script =
        format!("import torch, kernels\nk = {line}\nprint(k.scale(torch.ones(3), 2.0).tolist())\n");
    let out = hub.python(&script);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn init_test_publish_and_load_back_with_the_printed_line() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("my-kernel");
    let out = run(bin()
        .arg("init")
        .arg(&root)
        .args(["--repo", "kernels-test/my-kernel"]));
    assert!(out.status.success());
    let toml = std::fs::read_to_string(root.join("build.toml")).unwrap();
    assert!(toml.contains("[general.hub]\nrepo-id = \"kernels-test/my-kernel\"\n"));

    // The generated tests, unchanged, on what runs here (cpu: no GPU on this machine).
    let (py, _) = venv_seeing_toolchain(&tmp.path().join("venv"));
    let tested = run(kbuild(&root)
        .env("PATH", path_without_gpu(tmp.path()))
        .env("HF_HUB_OFFLINE", "1")
        .args(["test", "--python"])
        .arg(&py)
        .args(["--", "-q", "-p", "no:cacheprovider"]));
    let stdout = String::from_utf8_lossy(&tested.stdout);
    assert!(tested.status.success(), "the generated tests failed");
    assert!(stdout.contains("4 passed"), "{stdout}");

    let hub = Hub::start(&["--trusted-publisher", "kernels-test"]);
    let stderr = publish(&hub, &root, &[]);
    let line = load_line(&stderr);
    assert_eq!(
        line,
        r#"kernels.get_kernel("kernels-test/my-kernel", version=1, backend="cpu")"#
    );
    let url = format!("{}/kernels/kernels-test/my-kernel/tree/v1", hub.url);
    assert!(
        stderr.contains(&format!("Published {url}\n")),
        "no URL:\n{stderr}"
    );
    assert_eq!(load_and_scale(&hub, &line), "[2.0, 2.0, 2.0]");

    // Another owner is no trusted publisher: the line says so, and loads.
    let stderr = publish(&hub, &root, &["--repo", "someone/my-kernel"]);
    let line = load_line(&stderr);
    assert_eq!(
        line,
        r#"kernels.get_kernel("someone/my-kernel", version=1, backend="cpu", trust_remote_code=True)"#
    );
    assert!(
        stderr.contains("note: `someone` is not a trusted kernel publisher on the Hub"),
        "{stderr}"
    );
    assert_eq!(load_and_scale(&hub, &line), "[2.0, 2.0, 2.0]");
    let untrusted = line.replace(", trust_remote_code=True", "");
    let script = format!(
        "import kernels\ntry:\n    {untrusted}\nexcept ValueError as e:\n    print('refused:', e)\n"
    );
    let refused = String::from_utf8_lossy(&hub.python(&script).stdout).into_owned();
    assert!(
        refused.contains("is not from a trusted publisher"),
        "{refused}"
    );
}
