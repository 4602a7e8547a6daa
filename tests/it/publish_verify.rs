//! Variant verification before publishing (`package::BuiltVariant::read`).

use crate::common::variant::{CPU_VARIANT, VariantSpec, redigest, write_variant};
use kbuild::package::{BuiltVariant, PackageError};
use serde_json::json;

fn variant(spec: VariantSpec<'_>) -> (tempfile::TempDir, std::path::PathBuf) {
    let project = tempfile::tempdir().unwrap();
    let dir = write_variant(&project.path().join("build"), &spec);
    (project, dir)
}

/// An error's message with the project directory as `[project]`, for a snapshot.
fn message(err: &PackageError, project: &tempfile::TempDir) -> String {
    err.to_string()
        .replace(&project.path().display().to_string(), "[project]")
}

#[test]
fn a_clean_variant_verifies_and_lists_its_files() {
    let (_p, dir) = variant(VariantSpec::default());
    std::fs::create_dir_all(dir.join("__pycache__")).unwrap();
    std::fs::write(dir.join("__pycache__/_ops.cpython-311.pyc"), "cache").unwrap();
    let v = BuiltVariant::read(&dir).unwrap();
    assert_eq!(v.name, CPU_VARIANT);
    assert_eq!(v.id, "_relu_cpu_abc1234");
    assert_eq!(
        (v.version, v.backend.as_str(), v.dirty()),
        (1, "cpu", false)
    );
    assert_eq!(
        v.files,
        [
            "__init__.py",
            "_capabilities.py",
            "_ops.py",
            "_relu_cpu_abc1234.abi3.so",
            "metadata.json"
        ]
    );
}

#[test]
fn extension_named_after_another_namespace_is_refused() {
    let (_p, dir) = variant(VariantSpec::default());
    std::fs::rename(
        dir.join("_relu_cpu_abc1234.abi3.so"),
        dir.join("_relu_cpu_0000000.abi3.so"),
    )
    .unwrap();
    redigest(&dir);
    match BuiltVariant::read(&dir) {
        Err(PackageError::Namespace {
            expected, found, ..
        }) => {
            assert_eq!(
                (expected.as_str(), found.as_str()),
                ("_relu_cpu_abc1234", "_relu_cpu_0000000")
            );
        }
        other => panic!("expected a namespace error, got {other:?}"),
    }
}

#[test]
fn ops_py_using_another_namespace_is_refused() {
    let (p, dir) = variant(VariantSpec::default());
    std::fs::write(
        dir.join("_ops.py"),
        "import torch\nops = torch.ops._something_else\n",
    )
    .unwrap();
    redigest(&dir);
    let err = BuiltVariant::read(&dir).unwrap_err();
    // `_ops.py` uses op namespace `_something_else`.
    insta::assert_snapshot!(message(&err, &p));
}

#[test]
fn metadata_without_digest_or_with_bad_json_names_the_file() {
    let (p, dir) = variant(VariantSpec::default());
    std::fs::write(dir.join("metadata.json"), "{\"name\": \"relu\",").unwrap();
    let err = BuiltVariant::read(&dir).unwrap_err();
    // Names `metadata.json` and the line.
    insta::assert_snapshot!("metadata_with_bad_json", message(&err, &p));

    let m = json!({"name": "relu", "id": "_relu_cpu_abc1234", "version": 1, "license": "mit",
                   "python-depends": [], "backend": {"type": "cpu"}});
    std::fs::write(dir.join("metadata.json"), m.to_string()).unwrap();
    let err = BuiltVariant::read(&dir).unwrap_err();
    // Names `metadata.json`: it has no `digest`.
    insta::assert_snapshot!("metadata_without_digest", message(&err, &p));
}

#[test]
fn an_added_file_breaks_the_digest() {
    let (p, dir) = variant(VariantSpec::default());
    std::fs::write(dir.join("extra.py"), "x = 1\n").unwrap();
    let err = BuiltVariant::read(&dir).unwrap_err();
    // Unknown file: extra.py.
    insta::assert_snapshot!(message(&err, &p));
}

#[test]
fn provenance_marks_dirty_builds() {
    let (_p, dir) = variant(VariantSpec {
        extra_metadata: json!({"provenance": {
            "kernel-builder": {"version": "0.1.0"},
            "kernel": {"commit": "abc", "dirty": true}
        }}),
        ..VariantSpec::default()
    });
    assert!(BuiltVariant::read(&dir).unwrap().dirty());
}

#[test]
fn a_link_in_a_variant_fails_verification_even_when_the_digest_covers_it() {
    let (_p, dir) = variant(VariantSpec::default());
    std::os::unix::fs::symlink("__init__.py", dir.join("alias.py")).unwrap();
    redigest(&dir);
    match BuiltVariant::read(&dir) {
        Err(PackageError::Tree(kbuild::package::tree::TreeError::Link { path })) => {
            assert_eq!(path, dir.join("alias.py"));
        }
        other => panic!("expected a link error, got {other:?}"),
    }
}
