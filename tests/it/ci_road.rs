//! The CI road of `.github/workflows/variants.yml`, run on this machine: the `pypi` job's
//! steps after the toolchain (`Report`: list-variants and build), its artifact (build/ without
//! hidden paths), then the `publish` job's `Merge` and `Publish` steps as written — against
//! the local Hub, with no `--manylinux none` — and a fresh Python loads what was published.
//! The step scripts are read from the workflow file itself, so an edit there is what runs here.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::hub::{Hub, TOKEN};
use crate::common::kbuild::{bin, fixture, python, repo, run};

/// The `run:` script of step `name` of job `job` in variants.yml.
fn step(job: &str, name: &str) -> String {
    let code = "import sys, yaml\n\
                jobs = yaml.safe_load(open(sys.argv[1]))['jobs']\n\
                steps = [s for s in jobs[sys.argv[2]]['steps'] if s.get('name') == sys.argv[3]]\n\
                print(steps[0]['run'])";
    let out = run(Command::new(python())
        .args(["-c", code])
        .arg(repo().join(".github/workflows/variants.yml"))
        .args([job, name]));
    assert!(out.status.success(), "no step `{name}` in job `{job}`");
    String::from_utf8(out.stdout).unwrap()
}

/// A checkout: the project as a clean git repository, with `target/release/kbuild` as the
/// `cargo build --release` step leaves it.
fn checkout(dir: &Path) {
    let project = fixture("portable-probe");
    copy_tree(project.path(), dir);
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.name=ci", "-c", "user.email=ci@localhost"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "v1"]);
    let release = dir.join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    std::os::unix::fs::symlink(bin().get_program(), release.join("kbuild")).unwrap();
    // target/ is ignored, as in the repository's .gitignore.
    std::fs::write(dir.join(".git/info/exclude"), "/target\n").unwrap();
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// `bash -eo pipefail -c SCRIPT` in `dir`, as GitHub runs a step.
fn run_step(dir: &Path, script: &str, env: &[(&str, &str)]) -> std::process::Output {
    let out = run(Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("KBUILD_PYTHON", python())
        .envs(env.iter().copied()));
    assert!(
        out.status.success(),
        "the step failed:\n{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_variants_workflow_builds_merges_and_publishes_without_manylinux_none() {
    let runner = tempfile::tempdir().unwrap();
    // Job `pypi`, on its own runner.
    let pypi = runner.path().join("pypi");
    checkout(&pypi);
    run_step(&pypi, &step("pypi", "Report"), &[]);
    // actions/upload-artifact of build/: hidden paths (build/.kbuild) stay behind.
    let artifact = runner.path().join("publish/artifacts/variants-pypi");
    for entry in std::fs::read_dir(pypi.join("build")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            copy_tree(&path, &artifact.join(&name));
        }
    }
    // Job `publish`, on another runner: a fresh checkout with the artifacts beside it.
    let publish = runner.path().join("publish");
    checkout(&publish);
    run_step(
        &publish,
        &step("publish", "Merge every job's variants into build/"),
        &[],
    );
    let hub = Hub::start(&[]);
    let home = runner.path().join("hf-home");
    let out = run_step(
        &publish,
        &step("publish", "Publish"),
        &[
            ("HF_ENDPOINT", &hub.url),
            ("HF_TOKEN", TOKEN),
            ("HF_HOME", home.to_str().unwrap()),
        ],
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let variants: Vec<PathBuf> = std::fs::read_dir(publish.join("build"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(variants.len(), 1, "{variants:?}");
    assert!(
        !summary["commits"].as_array().unwrap().is_empty(),
        "{summary}"
    );

    // What the Hub now holds loads and runs in a fresh Python.
    let loaded = hub.python(
        "import kernels\n\
         probe = kernels.get_kernel('kbuild-test/probe', version=1, backend='cpu', trust_remote_code=True)\n\
         print(probe.probe('/'))",
    );
    let stdout = String::from_utf8_lossy(&loaded.stdout);
    assert!(stdout.trim_end().ends_with(", 1, 1, 42]"), "{stdout}");
}
