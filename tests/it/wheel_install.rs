//! `kbuild wheel`: the relu fixture's cpu variant as a wheel that pip installs into a fresh venv,
//! imports, runs, passes `pip check` and uninstalls without a trace; the same build gives the
//! same bytes.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::kbuild::{fixture, kbuild, run, venv_seeing_toolchain};
use crate::common::redact::Redact;
use sha2::Digest as _;

fn wheels_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    out.sort();
    out
}

fn sha256(path: &Path) -> String {
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

fn pip(venv_python: &Path, args: &[&str]) -> String {
    let out = run(Command::new(venv_python)
        .args(["-m", "pip", "--disable-pip-version-check"])
        .args(args));
    assert!(out.status.success(), "pip {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cpu_wheel_installs_imports_runs_an_op_and_uninstalls_cleanly() {
    let project = fixture("relu-v5");
    let root = project.path();
    let out = run(kbuild(root).args(["wheel", "--backend", "cpu", "--json"]));
    assert!(out.status.success());
    let wheels = wheels_in(&root.join("dist"));
    let names: Vec<String> = wheels
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["relu-1+torch215.cxx11.cpu-cp39-abi3-manylinux_2_28_x86_64.whl"]
    );
    insta::assert_json_snapshot!(
        "cpu_wheel_json_summary",
        Redact::new()
            .path(root, "[project]")
            .stdout_json(&out, &["id", "jobs", "memory", "seconds"])
    );
    let report = crate::common::kbuild::stdout_json(&out);
    assert_eq!(
        report["variants"][0]["wheel"].as_str().map(PathBuf::from),
        Some(wheels[0].clone())
    );

    let mut metadata = String::new();
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&wheels[0]).unwrap()).unwrap();
    zip.by_name("relu-1+torch215.cxx11.cpu.dist-info/METADATA")
        .unwrap()
        .read_to_string(&mut metadata)
        .unwrap();
    assert!(
        metadata.contains("\nRequires-Dist: torch>=2.15,<2.16\n"),
        "{metadata}"
    );

    let venv = tempfile::tempdir().unwrap();
    let (py, site) = venv_seeing_toolchain(&venv.path().join("venv"));
    pip(&py, &["install", "--no-deps", wheels[0].to_str().unwrap()]);
    let ran = run(Command::new(&py).args([
        "-c",
        "import torch, relu\n\
         x = torch.tensor([-1.0, 0.5, 2.0])\n\
         print(relu.relu(x).tolist())\n\
         print(relu.__file__)",
    ]));
    assert!(ran.status.success());
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(stdout.starts_with("[0.0, 0.5, 2.0]\n"), "{stdout}");
    assert!(
        stdout.contains(&venv.path().display().to_string()),
        "imported from the venv: {stdout}"
    );
    pip(&py, &["check"]);
    pip(&py, &["uninstall", "--yes", "relu"]);
    let left: Vec<String> = std::fs::read_dir(&site)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        ["_kbuild_toolchain.pth"],
        "left in {}",
        site.display()
    );
}

#[test]
fn the_same_variant_gives_the_same_wheel_bytes_whatever_the_file_times() {
    let project = fixture("relu-v5");
    let root = project.path();
    let first = root.join("first");
    let out = run(kbuild(root)
        .args(["build", "--backend", "cpu", "--wheel", "--dist-dir"])
        .arg(&first));
    assert!(out.status.success());
    // Fresh timestamps on every file of the variant: a wheel that recorded them would differ.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    for entry in walkdir::WalkDir::new(root.join("build")) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() && !entry.path().to_string_lossy().contains(".kbuild") {
            let file = std::fs::File::options()
                .append(true)
                .open(entry.path())
                .unwrap();
            file.set_modified(later).unwrap();
        }
    }
    let second = root.join("second");
    let out = run(kbuild(root)
        .args(["wheel", "--backend", "cpu", "--dist-dir"])
        .arg(&second));
    assert!(out.status.success());
    let (a, b) = (wheels_in(&first), wheels_in(&second));
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].file_name(), b[0].file_name());
    assert_eq!(sha256(&a[0]), sha256(&b[0]));
}
