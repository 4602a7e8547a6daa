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

/// A wheel of the cpu test variant, as `kbuild wheel` writes it, in `dir`.
fn wheel(dir: &Path) -> PathBuf {
    let (_project, build) = project_with_variant();
    let variant = kbuild::package::BuiltVariant::read(&build.join(CPU_VARIANT)).unwrap();
    kbuild::package::write_wheel(&variant, dir).unwrap().path
}

/// Copy `wheel` to `to`, every entry through `edit(name, bytes)` (which may change the bytes),
/// then append `extra` entries.
fn rewrite_wheel(
    wheel: &Path,
    to: &Path,
    edit: impl Fn(&str, &mut Vec<u8>),
    extra: &mut [(&str, &mut dyn std::io::Read)],
) {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
    let mut out = zip::ZipWriter::new(std::fs::File::create(to).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let name = entry.name().unwrap().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        edit(&name, &mut bytes);
        out.start_file(name.as_str(), options).unwrap();
        std::io::Write::write_all(&mut out, &bytes).unwrap();
    }
    for (name, data) in extra.iter_mut() {
        out.start_file(*name, options).unwrap();
        std::io::copy(data, &mut out).unwrap();
    }
    out.finish().unwrap();
}

/// `kbuild check`'s one finding on `wheel` (the rule and message), redacted.
fn wheel_finding(wheel: &Path, env: &[(&str, &str)]) -> String {
    let out = check_with(wheel, env);
    assert_eq!(out.status.code(), Some(1), "the wheel passed check");
    Redact::new()
        .path(wheel.parent().unwrap(), "[dist]")
        .stdout(&out)
}

#[test]
fn check_passes_the_wheels_kbuild_writes() {
    let dist = tempfile::tempdir().unwrap();
    let path = wheel(dist.path());
    let out = check_with(&path, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    // The stand-in extension is no ELF: `abi` is the one finding; nothing about RECORD.
    assert!(!text.contains("[archive]"), "{text}");
}

#[test]
fn check_fails_a_wheel_with_an_absolute_entry() {
    let dist = tempfile::tempdir().unwrap();
    let good = wheel(dist.path());
    let evil = dist.path().join("evil-1-py3-none-any.whl");
    let mut payload: &[u8] = b"token";
    rewrite_wheel(
        &good,
        &evil,
        |_, _| {},
        &mut [("/tmp/kbuild-wheel-escaped", &mut payload)],
    );
    insta::assert_snapshot!(
        "check_fails_a_wheel_with_an_absolute_entry",
        wheel_finding(&evil, &[])
    );
    assert!(!Path::new("/tmp/kbuild-wheel-escaped").exists());
}

#[test]
fn check_fails_a_wheel_whose_file_does_not_match_record() {
    let dist = tempfile::tempdir().unwrap();
    let good = wheel(dist.path());
    let evil = dist.path().join("evil-1-py3-none-any.whl");
    // top_level.txt is no file of the variant: its digest cannot tell, only RECORD can.
    rewrite_wheel(
        &good,
        &evil,
        |name, bytes| {
            if name.ends_with(".dist-info/top_level.txt") {
                bytes.extend_from_slice(b"os\n");
            }
        },
        &mut [],
    );
    insta::assert_snapshot!(
        "check_fails_a_wheel_whose_file_does_not_match_record",
        wheel_finding(&evil, &[])
    );
}

#[test]
fn check_refuses_a_wheel_unpacking_past_the_cap() {
    let dist = tempfile::tempdir().unwrap();
    let good = wheel(dist.path());
    let bomb = dist.path().join("bomb-1-py3-none-any.whl");
    let mut zeros = std::io::repeat(0).take(24 << 20);
    rewrite_wheel(
        &good,
        &bomb,
        |_, _| {},
        &mut [("relu/bomb.bin", &mut zeros)],
    );
    assert!(std::fs::metadata(&bomb).unwrap().len() < 1 << 20);
    insta::assert_snapshot!(
        "check_refuses_a_wheel_unpacking_past_the_cap",
        wheel_finding(&bomb, &[("KBUILD_MAX_UNPACKED_SIZE", "8M")])
    );
}
