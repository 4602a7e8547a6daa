//! What a release ships, made once per test run by release.yml's own `Build` step, and the
//! environments the install tests use: a fresh venv of the machine's Python, and a PATH that
//! has neither cargo nor this repository's `target/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::kbuild::{python, repo, run};

/// release.yml (or action.yml) read as JSON, through the test Python's PyYAML.
pub fn yaml(path: &Path) -> serde_json::Value {
    let code = "import sys, json, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))";
    let out = run(Command::new(python()).args(["-c", code]).arg(path));
    assert!(out.status.success(), "{} does not parse", path.display());
    serde_json::from_slice(&out.stdout).expect("json")
}

/// The `run:` script of the step named `name` of job `job` in release.yml.
pub fn release_step(job: &str, name: &str) -> String {
    let workflow = yaml(&repo().join(".github/workflows/release.yml"));
    let steps = workflow["jobs"][job]["steps"].as_array().expect("steps");
    let step = steps
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step `{name}` in job `{job}` of release.yml"));
    step["run"].as_str().expect("a run step").to_string()
}

/// `bash -eo pipefail -c SCRIPT` in the repository root with `RUNNER_TEMP` = `runner_temp`, as
/// GitHub runs a step; the test Python's maturin, ziglang and auditwheel serve as the `Tools`
/// step's. Only this machine's own target is built (`KBUILD_RELEASE_TARGETS`): its wheel is the
/// one the tests can install and run, and another target's build would double the time on 2
/// cores (the aarch64 wheel is built by release.yml, and by `scripts/release/build` wherever its
/// Rust standard library is installed).
pub fn run_release_step(script: &str, runner_temp: &Path) -> std::process::Output {
    let out = run(Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(repo())
        .env("RUNNER_TEMP", runner_temp)
        .env("PYTHON", python())
        .env("KBUILD_RELEASE_TARGETS", "x86_64-unknown-linux-gnu"));
    assert!(out.status.success(), "the release step failed:\n{script}");
    out
}

/// `$RUNNER_TEMP/dist` after release.yml's `Build` step, built once for every test.
pub fn release_dist() -> &'static Path {
    static DIST: OnceLock<PathBuf> = OnceLock::new();
    DIST.get_or_init(|| {
        let runner_temp = tempfile::tempdir().expect("runner temp").keep();
        run_release_step(&release_step("build", "Build"), &runner_temp);
        runner_temp.join("dist")
    })
}

/// The x86_64 wheel of the release.
pub fn release_wheel() -> PathBuf {
    let wheels: Vec<PathBuf> = std::fs::read_dir(release_dist())
        .expect("dist")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".whl") && name.contains("x86_64")
        })
        .collect();
    assert_eq!(wheels.len(), 1, "one x86_64 wheel: {wheels:?}");
    wheels[0].clone()
}

/// The machine's own Python, as a new user has it (not the repository's venv).
pub fn system_python() -> PathBuf {
    for candidate in ["/usr/bin/python3", "/usr/local/bin/python3"] {
        if Path::new(candidate).is_file() {
            return PathBuf::from(candidate);
        }
    }
    panic!("no /usr/bin/python3: the install tests need the machine's own Python")
}

/// A PATH of `first` then the system directories: no cargo (`~/.cargo/bin`), no `target/`.
pub fn plain_path(first: &[&Path]) -> String {
    let mut dirs: Vec<String> = first.iter().map(|p| p.display().to_string()).collect();
    dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
    let path = dirs.join(":");
    for dir in std::env::split_paths(&path) {
        assert!(
            !dir.join("cargo").exists(),
            "{} has cargo: the PATH must not",
            dir.display()
        );
        assert!(!dir.starts_with(repo().join("target")));
    }
    path
}

/// A fresh venv of the machine's Python with `spec` pip-installed (no index: the wheel alone).
pub fn venv_with(dir: &Path, spec: &Path) -> PathBuf {
    let out = run(Command::new(system_python()).args(["-m", "venv"]).arg(dir));
    assert!(out.status.success(), "python3 -m venv failed");
    let out = run(Command::new(dir.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--no-index",
            "--disable-pip-version-check",
        ])
        .arg(spec));
    assert!(
        out.status.success(),
        "pip install {} failed",
        spec.display()
    );
    dir.join("bin")
}
