//! `kbuild verify` (issue #38): a variant published from one checkout and downloaded back from
//! the local Hub server rebuilds identical from another checkout of the same sources; a changed
//! file is named by the digest check and by the rebuild; artifacts and wheels verify too. Real
//! g++, torch and kbuild-hub-server on loopback.

use std::path::{Path, PathBuf};

use crate::common::hub::{Hub, TOKEN};
use crate::common::kbuild::{copy_dir, kbuild, repo, run};

const VARIANT: &str = "torch215-cxx11-cpu-x86_64-linux";
/// What `kbuild verify` says of a variant nobody signed when no signer is required.
const UNSIGNED: &str =
    "  signature: none (no signer required: pass --signer-workflow to require one)\n";

/// A copy of the relu fixture (cpu only: the CUDA side's reproducibility is
/// `reproducible.rs`'s) under `dir`.
fn checkout(dir: &Path) -> PathBuf {
    copy_dir(&repo().join("tests/fixtures/relu-v5"), dir);
    dir.to_path_buf()
}

/// `kbuild -C project verify ARGS` against `hub`, with a cache of its own under `cache`.
fn verify(project: &Path, hub: &Hub, cache: &Path, args: &[&str]) -> (bool, String, String) {
    let mut cmd = kbuild(project);
    cmd.arg("verify")
        .args(args)
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_TOKEN", TOKEN)
        .env("HF_HOME", cache.join("hf"))
        .env("KBUILD_CACHE_DIR", cache.join("kbuild"));
    let out = run(&mut cmd);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn build(project: &Path, cache: &Path, args: &[&str]) {
    let out = run(kbuild(project)
        .args(["build", "--backend", "cpu"])
        .args(args)
        .env("KBUILD_CACHE_DIR", cache));
    assert!(out.status.success(), "the build fails");
}

#[test]
fn a_published_variant_rebuilds_identical_from_another_checkout_and_a_changed_file_is_named() {
    let hub = Hub::start(&[]);
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let publisher = checkout(&first.path().join("publisher/relu"));
    build(&publisher, &first.path().join("cache"), &[]);
    let published = hub.publish(&publisher.join("build"), &["--repo", "kbuild-test/relu"]);
    assert!(published.ok, "{}\n{}", published.stdout, published.stderr);

    let verifier = checkout(&second.path().join("somebody/else/relu"));
    let cache = second.path().join("cache");
    let args = ["--repo", "kbuild-test/relu", "--version", "1", "--rebuild"];
    let (ok, stdout, stderr) = verify(&verifier, &hub, &cache, &args);
    assert!(ok, "{stdout}\n{stderr}");
    assert_eq!(
        stdout,
        format!("{VARIANT}:\n  digest: ok\n{UNSIGNED}  rebuild: identical\n"),
        "{stderr}"
    );
    assert!(stderr.contains("Verified 1 variant(s)"), "{stderr}");

    // A file changed after the build: the digest names it, and so does the rebuild.
    let variant = publisher.join("build").join(VARIANT);
    let init = variant.join("__init__.py");
    let mut text = std::fs::read_to_string(&init).unwrap();
    text.push_str("\nimport os  # added later\n");
    std::fs::write(&init, text).unwrap();
    let (ok, stdout, stderr) = verify(
        &verifier,
        &hub,
        &cache,
        &[variant.to_str().unwrap(), "--rebuild"],
    );
    assert!(!ok, "{stdout}");
    assert!(
        stdout.contains("  digest: MISMATCH\n    File hash mismatch for __init__.py"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  rebuild: DIFFERENT (1 file(s))\n    __init__.py: differs\n"),
        "{stdout}"
    );
    assert!(
        stderr.contains("1 of 1 variant(s) failed verification"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");
}

#[test]
fn artifacts_wheels_and_build_directories_verify_and_a_variant_rebuilds_under_the_id_it_carries() {
    let hub = Hub::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let project = checkout(&dir.path().join("relu"));
    let cache = dir.path().join("cache");
    build(&project, &cache.join("kbuild"), &["--wheel", "--artifact"]);
    let dist = project.join("dist");
    let mut archives: Vec<PathBuf> = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    archives.sort();
    assert_eq!(archives.len(), 2, "{archives:?}");
    for archive in &archives {
        let (ok, stdout, stderr) = verify(&project, &hub, &cache, &[archive.to_str().unwrap()]);
        assert!(ok, "{}: {stdout}\n{stderr}", archive.display());
        assert_eq!(stdout, format!("{VARIANT}:\n  digest: ok\n{UNSIGNED}"));
    }
    // The default: every variant of build/.
    let (ok, stdout, _) = verify(&project, &hub, &cache, &[]);
    assert!(ok);
    assert_eq!(stdout, format!("{VARIANT}:\n  digest: ok\n{UNSIGNED}"));

    // Built under another op namespace (`--unique-id`): the rebuild takes the one the variant
    // carries, and matches.
    let other = checkout(&dir.path().join("other/relu"));
    build(&other, &cache.join("kbuild"), &["--unique-id", "feedbee"]);
    let variant = other.join("build").join(VARIANT);
    let (ok, stdout, _) = verify(
        &project,
        &hub,
        &cache,
        &[variant.to_str().unwrap(), "--rebuild"],
    );
    assert!(ok, "the same sources under the id it carries: {stdout}");
    assert!(stdout.contains("rebuild: identical"), "{stdout}");
}
