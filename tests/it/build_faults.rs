//! `kbuild build` on hostile or broken projects (issue #9): FIFOs and devices where files are
//! expected, links in the Python package, non-UTF-8 names, an output directory inside the
//! sources, a full disk. Each must end in an error naming the path, never a hang or a variant
//! silently missing files.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::kbuild::{fixture, kbuild};
use crate::common::redact::Redact;

/// Run `cmd`, failing the test if it is still running after `limit` (a hang).
fn run_within(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    eprintln!(
        "--- {cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn build(root: &Path, args: &[&str]) -> Output {
    run_within(
        kbuild(root).arg("build").args(args),
        Duration::from_secs(120),
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stderr with the project directory written as `[project]`.
fn redacted(root: &Path, out: &Output) -> String {
    Redact::new().path(root, "[project]").stderr(out)
}

fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
}

#[test]
fn a_fifo_listed_in_src_is_an_error_at_its_line_not_a_hang() {
    let project = fixture("relu-v5");
    let root = project.path();
    std::fs::remove_file(root.join("relu_cpu/relu_cpu.cpp")).unwrap();
    mkfifo(&root.join("relu_cpu/relu_cpu.cpp"));
    let out = build(root, &["--backend", "cpu"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(redacted(root, &out));
}

#[test]
fn a_build_toml_that_is_a_fifo_or_links_to_dev_zero_is_refused_at_once() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let manifest = root.join("build.toml");
    std::fs::remove_file(&manifest).unwrap();
    mkfifo(&manifest);
    let out = build(root, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("build_toml_is_a_fifo", redacted(root, &out));

    std::fs::remove_file(&manifest).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &manifest).unwrap();
    let out = build(root, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("build_toml_links_to_dev_zero", redacted(root, &out));
}

#[test]
fn a_build_toml_over_the_size_cap_is_refused() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let mut text = std::fs::read_to_string(root.join("build.toml")).unwrap();
    text.push_str(&"# padding\n".repeat(110_000));
    std::fs::write(root.join("build.toml"), text).unwrap();
    let out = build(root, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(redacted(root, &out));
}

#[test]
fn links_inside_the_project_ship_their_targets_content_in_the_variant() {
    let project = fixture("silu-noarch");
    let root = project.path();
    std::fs::create_dir_all(root.join("shared/layers")).unwrap();
    std::fs::write(root.join("shared/helpers.py"), "HELP = 1\n").unwrap();
    std::fs::write(root.join("shared/layers/act.py"), "ACT = 2\n").unwrap();
    let package = root.join("torch-ext/silu_noarch");
    std::os::unix::fs::symlink("../../shared/helpers.py", package.join("helpers.py")).unwrap();
    std::os::unix::fs::symlink("../../shared/layers", package.join("layers")).unwrap();

    let out = build(root, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let variant = root.join("build/torch-cpu");
    for (rel, content) in [("helpers.py", "HELP = 1\n"), ("layers/act.py", "ACT = 2\n")] {
        let meta = std::fs::symlink_metadata(variant.join(rel)).unwrap();
        assert!(meta.is_file(), "{rel} is not a regular file in the variant");
        assert_eq!(std::fs::read_to_string(variant.join(rel)).unwrap(), content);
    }
    let built = kbuild::package::BuiltVariant::read(&variant).unwrap();
    assert!(built.files.contains(&"layers/act.py".to_string()));
}

#[test]
fn a_link_leaving_the_project_is_an_error_naming_link_and_target() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("token"), "hf_secret").unwrap();
    let link = root.join("torch-ext/silu_noarch/notes.py");
    std::os::unix::fs::symlink(outside.path().join("token"), &link).unwrap();

    let out = build(root, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(
        Redact::new()
            .path(root, "[project]")
            .path(outside.path(), "[outside]")
            .stderr(&out)
    );
    assert!(!root.join("build/torch-cpu").exists());
}

// Permissions do not stop root (these tests run as root in CI), so an unreadable directory is
// made the way root also cannot read it: a link that leads nowhere, and a link loop.
#[test]
fn a_dangling_link_or_a_link_loop_in_the_package_is_an_error_naming_it() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let package = root.join("torch-ext/silu_noarch");
    std::os::unix::fs::symlink("missing.py", package.join("gone.py")).unwrap();
    let out = build(root, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("dangling_link_in_the_package", redacted(root, &out));

    std::fs::remove_file(package.join("gone.py")).unwrap();
    std::os::unix::fs::symlink("..", package.join("loop")).unwrap();
    let out = build(root, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("link_loop_in_the_package", redacted(root, &out));
}

#[test]
fn a_fifo_in_the_package_is_an_error_naming_it() {
    let project = fixture("silu-noarch");
    let root = project.path();
    mkfifo(&root.join("torch-ext/silu_noarch/pipe.py"));
    let out = build(root, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(redacted(root, &out));
}

#[test]
fn a_non_utf8_file_name_in_the_package_is_an_error_naming_it() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let name = OsStr::from_bytes(b"caf\xe9.py");
    std::fs::write(root.join("torch-ext/silu_noarch").join(name), "").unwrap();
    let out = build(root, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = redacted(root, &out);
    assert!(err.contains("caf\u{FFFD}.py"), "{err}");
    insta::assert_snapshot!(err);
    assert!(!root.join("build/torch-cpu").exists());
}

#[test]
fn a_non_utf8_project_path_is_named_instead_of_blaming_the_compiler() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join(OsStr::from_bytes(b"proj\xff"));
    crate::common::kbuild::copy_dir(
        &crate::common::kbuild::repo().join("tests/fixtures/relu-v5"),
        &root,
    );
    let out = build(&root, &["--backend", "cpu", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(Redact::new().path(parent.path(), "[tmp]").stderr(&out));
}

#[test]
fn an_out_dir_inside_the_package_or_a_source_directory_is_refused() {
    let project = fixture("silu-noarch");
    let root = project.path();
    // `--out-dir` is relative to the working directory, not to `-C`: pass it absolute.
    let inside = root.join("torch-ext/silu_noarch/out");
    let out = build(root, &["--out-dir", inside.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("out_dir_inside_the_package", redacted(root, &out));
    assert!(!root.join("torch-ext/silu_noarch/out").exists());

    let project = fixture("relu-v5");
    let root = project.path();
    let inside = root.join("relu_cpu/b");
    let out = build(
        root,
        &[
            "--backend",
            "cpu",
            "--dry-run",
            "--out-dir",
            inside.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("out_dir_inside_a_source_directory", redacted(root, &out));
    // The default `<root>/build` and a directory beside the project are fine.
    let beside = tempfile::tempdir().unwrap();
    let out = build(
        root,
        &[
            "--backend",
            "cpu",
            "--dry-run",
            "--out-dir",
            beside.path().to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A tmpfs of `size` at `dir`; `None` where mounting is not permitted (not root).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_while_packaging_names_the_destination_that_failed() {
    let project = fixture("silu-noarch");
    let root = project.path();
    std::fs::write(
        root.join("torch-ext/silu_noarch/big.py"),
        "#".repeat(256 << 10),
    )
    .unwrap();
    let disk = tempfile::tempdir().unwrap();
    let Some(_tmpfs) = Tmpfs::mount(disk.path(), "192k") else {
        eprintln!("SKIPPED: mounting a tmpfs needs root");
        return;
    };
    let out_dir = disk.path().join("out");
    let out = build(root, &["--out-dir", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cannot write `{}/.stage-", out_dir.display()))
            && err.contains("big.py`"),
        "{err}"
    );
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains("hint: the disk holding the output directory is full"),
        "{err}"
    );
    assert!(!out_dir.join("torch-cpu").exists());
    let leftovers: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != ".kbuild")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_build_sweeps_what_a_killed_build_left_and_puts_back_a_variant_it_moved_aside() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let out = build(root, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let build_dir = root.join("build");
    // A build killed between the two renames of the fallback swap (pid 99999999 is above the
    // kernel's pid_max: gone): `torch-cpu` sits in `.old-*`, its stage and a temporary object
    // are left. pid 1 is alive: its temporary is not ours to remove.
    std::fs::create_dir(build_dir.join(".old-99999999-Ab12Cd")).unwrap();
    std::fs::rename(
        build_dir.join("torch-cpu"),
        build_dir.join(".old-99999999-Ab12Cd/torch-cpu"),
    )
    .unwrap();
    std::fs::create_dir(build_dir.join(".stage-99999999-torch-cpu-Zz9")).unwrap();
    let obj = build_dir.join(".kbuild/torch-cpu/obj");
    std::fs::create_dir_all(&obj).unwrap();
    std::fs::write(obj.join(".tmp-99999999-relu.cpp.o"), "partial").unwrap();
    std::fs::write(obj.join(".tmp-1-relu.cpp.o"), "live").unwrap();
    let steps = obj.join(".tmp-99999999-relu.cu.o.steps");
    std::fs::create_dir_all(&steps).unwrap();
    std::fs::write(steps.join("relu.cpp4.ii"), "partial").unwrap();

    let out = build(root, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("torch-cpu`, which a killed build had moved aside"),
        "{}",
        stderr(&out)
    );
    kbuild::package::BuiltVariant::read(&build_dir.join("torch-cpu")).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&build_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".kbuild", "torch-cpu", "torch-cuda"]);
    assert!(!obj.join(".tmp-99999999-relu.cpp.o").exists());
    assert!(
        !steps.exists(),
        "nvcc's steps of a killed build are removed"
    );
    assert!(obj.join(".tmp-1-relu.cpp.o").exists());
}
