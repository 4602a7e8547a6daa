//! Records the commit kbuild is built from, for `kbuild --version` (`kbuild 0.1.0 (1a1fc12
//! 2026-11-27)`, as cargo prints its own). From git when building a checkout; from
//! `.cargo_vcs_info.json` when building a packaged crate (`cargo install kbuild`), which cargo
//! writes with the commit it was packaged from; nothing otherwise (an sdist outside git).
//! `KBUILD_COMMIT` overrides it, for builds that know their commit another way.
#![allow(
    clippy::disallowed_methods,
    reason = "a build script reads cargo's environment and asks git for the commit"
)]

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KBUILD_COMMIT");
    let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    // Asked even when KBUILD_COMMIT overrides it: that prints the files whose change means a
    // new commit, so that a later build without the override does not keep its stamp (cargo
    // saw KBUILD_COMMIT=30f72a0 set once and kept stamping that commit while HEAD moved on).
    let git = from_git(Path::new(&root));
    let commit = std::env::var("KBUILD_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or(git)
        .or_else(|| from_vcs_info(Path::new(&root)));
    if let Some(commit) = commit {
        println!("cargo:rustc-env=KBUILD_COMMIT_INFO={commit}");
    }
}

/// `<short sha> <commit date>` of HEAD, and the files whose change means a new HEAD.
fn from_git(root: &Path) -> Option<String> {
    let git_dir = git(root, &["rev-parse", "--absolute-git-dir"])?;
    let head = Path::new(&git_dir).join("HEAD");
    println!("cargo:rerun-if-changed={}", head.display());
    if let Some(reference) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        let common = git(root, &["rev-parse", "--git-common-dir"]).unwrap_or(git_dir.clone());
        let common = root.join(common);
        println!(
            "cargo:rerun-if-changed={}",
            common.join(&reference).display()
        );
        println!(
            "cargo:rerun-if-changed={}",
            common.join("packed-refs").display()
        );
    }
    let line = git(root, &["log", "-1", "--format=%h %cs", "--abbrev=7"])?;
    (!line.is_empty()).then_some(line)
}

/// The `git.sha1` that `cargo package` recorded, shortened.
fn from_vcs_info(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(root.join(".cargo_vcs_info.json")).ok()?;
    let at = text.find("\"sha1\"")?;
    let sha: String = text[at + 6..]
        .chars()
        .skip_while(|c| !c.is_ascii_hexdigit())
        .take_while(char::is_ascii_hexdigit)
        .take(7)
        .collect();
    (sha.len() == 7).then_some(sha)
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
