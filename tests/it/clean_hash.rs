//! `kbuild hash` recomputes a variant's digest as `kernels` verifies it, and `--write` records
//! it; `kbuild clean` removes what kbuild wrote and nothing else.

use std::path::Path;

use crate::common::kbuild::{fixture, kbuild, python_ok, run, stdout_json};

const KERNELS_VERIFIES: &str = r#"
import pathlib, sys
from kernels._rust import Digest, Metadata
variant = pathlib.Path(sys.argv[1])
meta = Metadata.read_from_file(variant / "metadata.json")
meta.digest.validate(Digest.hash_variant(meta.digest.algorithm, variant))
print("ok")
"#;

fn kernels_verifies(variant: &Path) -> bool {
    let code = KERNELS_VERIFIES.replace(
        "sys.argv[1]",
        &format!("{:?}", variant.display().to_string()),
    );
    python_ok(&format!("{code}\n"), &[]).trim() == "ok"
}

#[test]
fn hash_reports_an_edited_variant_and_write_makes_kernels_accept_it_again() {
    let project = fixture("relu-v5");
    let root = project.path();
    assert!(
        run(kbuild(root).args(["build", "--backend", "cpu"]))
            .status
            .success()
    );
    let variant = std::fs::read_dir(root.join("build"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("metadata.json").is_file())
        .expect("a variant");

    let out = run(kbuild(root).args(["hash", "--json"]));
    assert!(out.status.success());
    assert_eq!(stdout_json(&out)[0]["status"], "match");
    let redact = crate::common::redact::Redact::new().path(root, "[project]");
    insta::assert_json_snapshot!(
        "hash_json",
        redact.stdout_json(&out, &["digest", "recorded", "computed"])
    );

    let init = variant.join("__init__.py");
    let text = std::fs::read_to_string(&init).unwrap();
    std::fs::write(&init, format!("{text}\nPATCHED = True\n")).unwrap();
    let out = run(kbuild(root).arg("hash").arg(&variant));
    assert!(!out.status.success(), "a mismatch exits non-zero");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("MISMATCH") && stdout.contains("File hash mismatch for __init__.py"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("kbuild hash --write"));

    let out = run(kbuild(root).args(["hash", "--write"]));
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(": written"));
    assert!(
        kernels_verifies(&variant),
        "kernels refuses the rewritten digest"
    );
    assert!(run(kbuild(root).arg("hash")).status.success());
}

/// A build directory as kbuild leaves it, plus a file of the user's.
fn fake_build(root: &Path) {
    let variant = root.join("build/torch215-cxx11-cpu-x86_64-linux");
    std::fs::create_dir_all(&variant).unwrap();
    std::fs::write(variant.join("metadata.json"), "{}").unwrap();
    std::fs::create_dir_all(root.join("build/.kbuild/objects")).unwrap();
    std::fs::write(root.join("build/.kbuild/objects/a.o"), "o").unwrap();
    std::fs::write(root.join("build/.kbuild/lock"), "").unwrap();
    std::fs::write(root.join("build/notes.txt"), "mine").unwrap();
    std::fs::create_dir_all(root.join("build/torch-cuda-old")).unwrap();
    std::fs::create_dir_all(root.join("dist")).unwrap();
    for f in [
        "relu-1+torch215.cxx11.cpu-cp39-abi3-linux_x86_64.whl",
        "relu-torch215-cxx11-cpu-x86_64-linux.tar.gz",
        "sources.tar.gz",
    ] {
        std::fs::write(root.join("dist").join(f), "x").unwrap();
    }
}

#[test]
fn clean_removes_only_what_kbuild_wrote_and_names_what_it_keeps() {
    let project = fixture("relu-v5");
    let root = project.path();
    fake_build(root);

    let out = run(kbuild(root).args(["clean", "--dist", "--dry-run"]));
    assert!(out.status.success());
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("torch215-cxx11-cpu-x86_64-linux\n") && listed.contains(".whl"),
        "{listed}"
    );
    assert!(
        root.join("build/.kbuild/objects/a.o").exists(),
        "--dry-run removes nothing"
    );

    let out = run(kbuild(root).args(["clean", "--dist", "--json"]));
    assert!(out.status.success());
    let report = stdout_json(&out);
    let redact = crate::common::redact::Redact::new().path(root, "[project]");
    insta::assert_json_snapshot!("clean_json", redact.stdout_json(&out, &[]));
    assert_eq!(report["removed"].as_array().unwrap().len(), 4, "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kept `") && stderr.contains("notes.txt`: not written by kbuild"),
        "{stderr}"
    );
    let mut left: Vec<String> = walkdir::WalkDir::new(root.join("build"))
        .min_depth(1)
        .into_iter()
        .flatten()
        .map(|e| e.path().strip_prefix(root).unwrap().display().to_string())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "build/.kbuild",
            "build/.kbuild/lock",
            "build/notes.txt",
            "build/torch-cuda-old"
        ]
    );
    assert!(root.join("dist/sources.tar.gz").exists());
    assert!(
        !root
            .join("dist/relu-torch215-cxx11-cpu-x86_64-linux.tar.gz")
            .exists()
    );
}
