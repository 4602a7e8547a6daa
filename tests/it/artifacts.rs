//! Artifacts (`kbuild pack`, `build --artifact`): reproducible, published from the archive, and
//! refused before anything is written when an entry could escape or does not match the digest.

use std::path::{Path, PathBuf};

use kbuild::package::{PackageError, UnpackLimits, unpack_artifact};

use crate::common::hub::Hub;
use crate::common::kbuild::{fixture, kbuild, run};
use crate::common::redact::Redact;
use crate::common::variant::{CPU_VARIANT, project_with_variant};

/// One entry of a hand-crafted archive: its raw name, type, content and link target.
struct Entry<'a> {
    name: &'a str,
    kind: tar::EntryType,
    data: &'a [u8],
    link: Option<&'a str>,
}

fn file<'a>(name: &'a str, data: &'a [u8]) -> Entry<'a> {
    Entry {
        name,
        kind: tar::EntryType::Regular,
        data,
        link: None,
    }
}

/// Write the entries as-is (the name goes into the header raw, so `/abs` and `..` survive).
fn craft(path: &Path, entries: &[Entry<'_>]) {
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::default(),
    );
    let mut tar = tar::Builder::new(gz);
    for e in entries {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..e.name.len()].copy_from_slice(e.name.as_bytes());
        header.set_entry_type(e.kind);
        header.set_size(e.data.len() as u64);
        header.set_mode(0o644);
        if let Some(link) = e.link {
            header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_cksum();
        tar.append(&header, e.data).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

/// The files of a valid hand-made variant, as `(name in archive, bytes)`.
fn valid_entries() -> Vec<(String, Vec<u8>)> {
    let (_project, build) = project_with_variant();
    let dir = build.join(CPU_VARIANT);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (
                format!("{CPU_VARIANT}/{name}"),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Unpack `entries` (a valid variant plus `evil`) and return the error; nothing may be written.
fn refused(evil: Entry<'_>) -> (PackageError, String) {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("evil.tar.gz");
    let valid = valid_entries();
    let mut entries: Vec<Entry<'_>> = valid.iter().map(|(n, d)| file(n, d)).collect();
    entries.insert(1, evil);
    craft(&archive, &entries);
    let into = tmp.path().join("staging");
    let err = unpack_artifact(&archive, &into, UnpackLimits::default())
        .expect_err("the archive is refused");
    assert!(!into.exists(), "something was written before refusing");
    assert!(!tmp.path().join("escaped").exists());
    assert!(!Path::new("/tmp/kbuild-artifact-escaped").exists());
    let message = err.to_string();
    (err, message)
}

#[test]
fn unpacking_refuses_an_absolute_path_before_writing() {
    let (_, message) = refused(file("/tmp/kbuild-artifact-escaped", b"x"));
    assert!(
        message.contains("entry `/tmp/kbuild-artifact-escaped`: its path is absolute"),
        "{message}"
    );
}

#[test]
fn unpacking_refuses_a_parent_directory_component_before_writing() {
    let name = format!("{CPU_VARIANT}/../escaped");
    let (_, message) = refused(file(&name, b"x"));
    assert!(
        message.contains(&format!("entry `{name}`: its path contains `..`")),
        "{message}"
    );
}

#[test]
fn unpacking_refuses_a_symbolic_link_before_writing() {
    let name = format!("{CPU_VARIANT}/link.py");
    let (_, message) = refused(Entry {
        name: &name,
        kind: tar::EntryType::Symlink,
        data: b"",
        link: Some("/etc/passwd"),
    });
    assert!(
        message.contains(&format!("entry `{name}`: it is a symbolic link")),
        "{message}"
    );
}

#[test]
fn unpacking_refuses_a_hard_link_before_writing() {
    let name = format!("{CPU_VARIANT}/hard.py");
    let (_, message) = refused(Entry {
        name: &name,
        kind: tar::EntryType::Link,
        data: b"",
        link: Some("/etc/passwd"),
    });
    assert!(
        message.contains(&format!("entry `{name}`: it is a hard link")),
        "{message}"
    );
}

#[test]
fn unpacking_refuses_a_device_file_before_writing() {
    let name = format!("{CPU_VARIANT}/null");
    let (_, message) = refused(Entry {
        name: &name,
        kind: tar::EntryType::Char,
        data: b"",
        link: None,
    });
    assert!(
        message.contains(&format!("entry `{name}`: it is a device file")),
        "{message}"
    );
}

#[test]
fn unpacking_refuses_a_fifo_before_writing() {
    let name = format!("{CPU_VARIANT}/pipe");
    let (_, message) = refused(Entry {
        name: &name,
        kind: tar::EntryType::Fifo,
        data: b"",
        link: None,
    });
    assert!(
        message.contains(&format!("entry `{name}`: it is a FIFO")),
        "{message}"
    );
}

#[test]
fn unpacking_refuses_a_file_that_does_not_match_the_digest_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("tampered.tar.gz");
    let mut valid = valid_entries();
    let init = valid
        .iter_mut()
        .find(|(n, _)| n.ends_with("/__init__.py"))
        .unwrap();
    init.1
        .extend_from_slice(b"\nimport os; os.system('echo pwned')\n");
    let entries: Vec<Entry<'_>> = valid.iter().map(|(n, d)| file(n, d)).collect();
    craft(&archive, &entries);
    let into = tmp.path().join("staging");
    let err = unpack_artifact(&archive, &into, UnpackLimits::default())
        .expect_err("the archive is refused");
    assert!(!into.exists(), "something was written before refusing");
    assert!(matches!(err, PackageError::Digest { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("File hash mismatch for __init__.py"),
        "{err}"
    );
}

fn sha256(path: &Path) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

fn pack(project: &Path, dist: &Path) -> PathBuf {
    let out = run(kbuild(project)
        .args(["pack", "--json", "--dist-dir"])
        .arg(dist));
    assert!(out.status.success());
    insta::assert_json_snapshot!(
        "pack_json_lists_each_artifact",
        Redact::new().path(dist, "[dist]").stdout_json(&out, &[])
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    PathBuf::from(json[0]["path"].as_str().unwrap())
}

#[test]
fn pack_is_byte_for_byte_reproducible_and_unpacks_to_the_same_variant() {
    let (project, build) = project_with_variant();
    let first = pack(project.path(), &project.path().join("dist1"));
    // Other mtimes on the variant's files must not change the archive.
    let init = build.join(CPU_VARIANT).join("__init__.py");
    std::fs::File::options()
        .write(true)
        .open(&init)
        .unwrap()
        .set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
        .unwrap();
    let second = pack(project.path(), &project.path().join("dist2"));
    assert_eq!(
        first.file_name().unwrap(),
        format!("relu-{CPU_VARIANT}.tar.gz").as_str()
    );
    assert_eq!(sha256(&first), sha256(&second));

    let staging = tempfile::tempdir().unwrap();
    let unpacked = unpack_artifact(&first, staging.path(), UnpackLimits::default()).unwrap();
    let original = kbuild::package::BuiltVariant::read(&build.join(CPU_VARIANT)).unwrap();
    assert_eq!(unpacked.name, original.name);
    assert_eq!(unpacked.files, original.files);
    assert_eq!(unpacked.digest, original.digest);
}

/// The fixture's cpu variant packed into `dist` (built with `extra` flags); the archive.
fn packed(project: &Path, dist: &Path, extra: &[&str]) -> PathBuf {
    let out = run(kbuild(project)
        .args(["build", "--backend", "cpu", "--artifact", "--dist-dir"])
        .arg(dist)
        .args(extra));
    assert!(out.status.success(), "kbuild build --artifact failed");
    let archives: Vec<PathBuf> = std::fs::read_dir(dist)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(archives.len(), 1, "{archives:?}");
    assert!(
        archives[0]
            .to_string_lossy()
            .ends_with("-cpu-x86_64-linux.tar.gz")
    );
    archives[0].clone()
}

/// The CI path: build the fixture, pack it, publish from the archive alone, load it. An archive
/// linked as is on this Debian machine (`--manylinux none`) needs glibc 2.32: publish runs
/// `check` and refuses it; the default build publishes with no flag.
#[test]
fn fixture_artifact_publishes_from_the_archive_and_loads_with_kernels() {
    let project = fixture("relu-v5");
    let raw = tempfile::tempdir().unwrap();
    let raw = packed(project.path(), raw.path(), &["--manylinux", "none"]);
    let dist = tempfile::tempdir().unwrap();
    let archive = packed(project.path(), dist.path(), &[]);
    // Only the archive travels: the build directory is gone.
    std::fs::remove_dir_all(project.path().join("build")).unwrap();

    let hub = Hub::start(&[]);
    let refused = hub.publish(&raw, &["--repo", "org/relu"]);
    assert!(!refused.ok);
    assert!(
        refused
            .stderr
            .contains("[manylinux] `__libc_single_threaded@GLIBC_2.32`"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("--skip-check"),
        "{}",
        refused.stderr
    );
    assert_eq!(hub.commits_made(), 0);
    hub.publish(&archive, &["--repo", "org/relu"]).success();
    let loaded = hub.python(
        r#"
import torch, kernels
relu = kernels.get_kernel("org/relu", version=1, backend="cpu", trust_remote_code=True)
x = torch.tensor([-2.0, 0.5, 3.0])
assert torch.equal(relu.relu(x), torch.relu(x))
print("loaded", relu.__name__)
"#,
    );
    assert!(String::from_utf8_lossy(&loaded.stdout).contains("loaded"));
}

/// The permission bits of every file under `dir`, by name.
fn modes_in(dir: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut modes: Vec<(String, u32)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let mode = e.metadata().unwrap().permissions().mode() & 0o777;
            (e.file_name().to_string_lossy().into_owned(), mode)
        })
        .collect();
    modes.sort();
    modes
}

#[test]
fn wheels_and_artifacts_are_written_with_the_umask_like_any_file() {
    use std::os::unix::process::CommandExt as _;
    let project = fixture("silu-noarch");
    let root = project.path();
    for (umask, mode) in [(0o022, 0o644), (0o027, 0o640)] {
        let dist = root.join(format!("dist-{umask:o}"));
        for verb in ["wheel", "pack"] {
            let mut cmd = kbuild(root);
            cmd.args([verb, "--dist-dir"]).arg(&dist);
            // SAFETY: umask is async-signal-safe and touches only the child.
            unsafe {
                cmd.pre_exec(move || {
                    libc::umask(umask);
                    Ok(())
                });
            }
            assert!(run(&mut cmd).status.success());
        }
        let modes = modes_in(&dist);
        assert_eq!(modes.len(), 4, "two wheels, two artifacts: {modes:?}");
        for (name, got) in modes {
            assert_eq!(
                format!("{got:o}"),
                format!("{mode:o}"),
                "{name} under umask {umask:o}"
            );
        }
    }
}
