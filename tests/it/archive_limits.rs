//! Archives that cost more than they should: an artifact that unpacks past the cap is refused
//! (naming the cap and how to raise it) before its data is inflated, and a truncated one keeps
//! the cause in the message, in `check` and in `publish`.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use kbuild::package::{PackageError, UnpackLimits, unpack_artifact};

use crate::common::hub::Hub;
use crate::common::kbuild::{bin, run};
use crate::common::redact::Redact;
use crate::common::variant::{CPU_VARIANT, project_with_variant};

/// The cpu test variant as a `.tar.gz` in `dir` (named as `kbuild pack` names it), with
/// `extra` appended: `(name, declared size, bytes written)`.
fn artifact_with(dir: &Path, extra: Option<(&str, u64, &mut dyn std::io::Read)>) -> PathBuf {
    let (_project, build) = project_with_variant();
    let path = dir.join(format!("relu-{CPU_VARIANT}.tar.gz"));
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    let mut tar = tar::Builder::new(gz);
    let mut names: Vec<PathBuf> = std::fs::read_dir(build.join(CPU_VARIANT))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for file in names {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        tar.append_path_with_name(&file, format!("{CPU_VARIANT}/{name}"))
            .unwrap();
    }
    if let Some((name, size, data)) = extra {
        let mut header = tar::Header::new_gnu();
        header.set_size(size);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, format!("{CPU_VARIANT}/{name}"), data)
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
    path
}

fn check_with(path: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = bin();
    cmd.arg("check").arg(path).args(["--manylinux", "none"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(&mut cmd)
}

#[test]
fn an_artifact_unpacking_past_the_cap_is_refused_naming_the_cap_and_how_to_raise_it() {
    let tmp = tempfile::tempdir().unwrap();
    let build = tmp.path().join("build");
    std::fs::create_dir_all(&build).unwrap();
    // 24 MiB of zeros: a few KiB of gzip.
    let mut zeros = std::io::repeat(0).take(24 << 20);
    let archive = artifact_with(&build, Some(("bomb.bin", 24 << 20, &mut zeros)));
    assert!(std::fs::metadata(&archive).unwrap().len() < 1 << 20);
    let cap = [("KBUILD_MAX_UNPACKED_SIZE", "8M")];

    let out = check_with(&archive, &cap);
    assert_eq!(out.status.code(), Some(1));
    let redact = Redact::new().path(&build, "[build]");
    insta::assert_snapshot!(
        "check_refuses_an_artifact_past_the_unpack_cap",
        redact.stdout(&out)
    );

    let hub = Hub::start(&[]);
    let published = hub.publish_with(
        &build,
        &["--repo", "kbuild-test/bomb", "--dry-run"],
        &[cap[0], ("HF_TOKEN", "hf_test")],
    );
    assert!(!published.ok);
    insta::assert_snapshot!(
        "publish_refuses_an_artifact_past_the_unpack_cap",
        redact.text(&published.stderr)
    );
    // The same archive under the default cap is refused by its digest instead: the bomb's
    // entry is not a file of the variant, and streaming it kept memory flat.
    let out = check_with(&archive, &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("[digest]"));
}

#[test]
fn a_declared_entry_larger_than_the_cap_is_refused_before_it_is_inflated() {
    let tmp = tempfile::tempdir().unwrap();
    // The header says 1 TiB; the data stops after 1 KiB (the archive ends there).
    let mut short = std::io::repeat(0).take(1024);
    let archive = artifact_with(tmp.path(), Some(("huge.bin", 1 << 40, &mut short)));
    let into = tmp.path().join("staging");
    let err = unpack_artifact(&archive, &into, UnpackLimits::default()).unwrap_err();
    match &err {
        PackageError::TooLarge { entry, cap, .. } => {
            assert_eq!(entry, &format!("{CPU_VARIANT}/huge.bin"));
            assert_eq!(*cap, 4 << 30);
        }
        other => panic!("expected the cap to refuse it, got {other:?}"),
    }
    assert!(err.to_string().contains("more than 4 GiB"), "{err}");
    assert!(!into.exists(), "nothing is written before refusing");
}

#[test]
fn a_truncated_artifact_keeps_its_cause_in_check_and_publish() {
    let tmp = tempfile::tempdir().unwrap();
    let build = tmp.path().join("build");
    std::fs::create_dir_all(&build).unwrap();
    let mut noise: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let archive = artifact_with(&build, Some(("noise.bin", 200_000, &mut noise.as_slice())));
    let bytes = std::fs::read(&archive).unwrap();
    std::fs::write(&archive, &bytes[..bytes.len() / 2]).unwrap();
    noise.clear();

    let out = check_with(&archive, &[]);
    assert_eq!(out.status.code(), Some(1));
    let redact = Redact::new().path(&build, "[build]");
    insta::assert_snapshot!(
        "check_keeps_the_cause_of_a_truncated_artifact",
        redact.stdout(&out)
    );

    let hub = Hub::start(&[]);
    let published = hub.publish_with(
        &build,
        &["--repo", "kbuild-test/truncated", "--dry-run"],
        &[("HF_TOKEN", "hf_test")],
    );
    assert!(!published.ok);
    insta::assert_snapshot!(
        "publish_keeps_the_cause_of_a_truncated_artifact",
        redact.text(&published.stderr)
    );
}
