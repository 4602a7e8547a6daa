//! kbuild as a kernel author installs it: the release wheel into a fresh venv of the machine's
//! Python (`pip install`, `uv tool install`, `pipx install`), run from a PATH without cargo or
//! this repository's `target/`; and `cargo install` from the packaged crate.

use std::path::Path;
use std::process::Command;

use crate::common::hub::{Hub, TOKEN};
use crate::common::kbuild::{python, repo, run};
use crate::common::release::{plain_path, release_wheel, system_python, venv_with};

fn version_line() -> String {
    format!("kbuild {}", env!("CARGO_PKG_VERSION"))
}

/// `kbuild ARGS` found on `path` (no absolute path: what is on PATH is what runs).
fn on_path(path: &str, cwd: &Path, args: &[&str]) -> std::process::Output {
    run(Command::new("kbuild")
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", cwd))
}

#[test]
fn pip_installed_kbuild_inits_builds_checks_and_publishes_without_cargo() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = venv_with(&tmp.path().join("venv"), &release_wheel());
    let path = plain_path(&[&bin]);
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();

    let out = on_path(&path, &work, &["--version"]);
    assert!(out.status.success());
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.starts_with(&version_line()), "{printed}");
    // `python -m kbuild` runs the same binary.
    let out = run(Command::new(bin.join("python"))
        .args(["-m", "kbuild", "--version"])
        .env("PATH", &path));
    assert_eq!(String::from_utf8_lossy(&out.stdout), printed);

    let out = on_path(&path, &work, &["init", "kern", "--backends", "cpu"]);
    assert!(out.status.success(), "init");
    let project = work.join("kern");
    // The author's own venv with torch: the project's `.venv`, which kbuild discovers.
    let torch_venv = python().parent().unwrap().parent().unwrap().to_path_buf();
    std::os::unix::fs::symlink(&torch_venv, project.join(".venv")).unwrap();
    let out = on_path(&path, &project, &["build", "--backend", "cpu"]);
    assert!(out.status.success(), "build");
    let out = on_path(&path, &project, &["check"]);
    assert!(out.status.success(), "check");

    let hub = Hub::start(&[]);
    let out = run(Command::new("kbuild")
        .args(["publish", "--repo", "kbuild-test/kern", "--json"])
        .current_dir(&project)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &work)
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_TOKEN", TOKEN));
    assert!(out.status.success(), "publish");
    assert!(!String::from_utf8_lossy(&out.stderr).contains(TOKEN));
    // What the Hub now holds loads through `kernels` in another Python and computes.
    assert_eq!(
        hub.published_init_scale("kbuild-test/kern", "torch.arange(4.0)", 2.5),
        "[0.0, 2.5, 5.0, 7.5]"
    );
}

#[test]
fn uv_tool_install_and_pipx_install_put_kbuild_on_path() {
    let tools = python().parent().unwrap().to_path_buf();
    let wheel = release_wheel();
    let tmp = tempfile::tempdir().unwrap();
    let t = |p: &str| tmp.path().join(p);

    // uv: offline, the wheel has no dependencies to fetch.
    let out = run(Command::new(tools.join("uv"))
        .args(["tool", "install", "--offline", "--python"])
        .arg(system_python())
        .arg(&wheel)
        .env("UV_TOOL_DIR", t("uv-tools"))
        .env("UV_TOOL_BIN_DIR", t("uv-bin"))
        .env("UV_CACHE_DIR", t("uv-cache"))
        .env("UV_PYTHON_DOWNLOADS", "never"));
    assert!(out.status.success(), "uv tool install");
    let out = on_path(&plain_path(&[&t("uv-bin")]), tmp.path(), &["--version"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&version_line()));

    let out = run(Command::new(tools.join("pipx"))
        .args(["install", "--python"])
        .arg(system_python())
        .arg(&wheel)
        .env("PIPX_HOME", t("pipx-home"))
        .env("PIPX_BIN_DIR", t("pipx-bin"))
        .env("PIPX_MAN_DIR", t("pipx-man")));
    assert!(out.status.success(), "pipx install");
    let out = on_path(&plain_path(&[&t("pipx-bin")]), tmp.path(), &["--version"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&version_line()));
}

/// `cargo package --locked` makes the crate (templates inside, the dev-only Hub server out),
/// and `cargo install` from it gives a kbuild that scaffolds and validates a project.
#[test]
fn cargo_install_from_the_packaged_crate_gives_a_working_kbuild() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let tmp = tempfile::tempdir().unwrap();
    let pkg_target = tmp.path().join("target");
    // --allow-dirty: a developer's uncommitted edits are what they test; CI's clone is clean.
    // --no-verify: the install below compiles the packaged sources, which is the verification.
    let out = run(Command::new(&cargo)
        .args([
            "package",
            "--locked",
            "--allow-dirty",
            "--no-verify",
            "-p",
            "kbuild",
        ])
        .arg("--target-dir")
        .arg(&pkg_target)
        .current_dir(repo()));
    assert!(out.status.success(), "cargo package");
    let name = format!("kbuild-{}", env!("CARGO_PKG_VERSION"));
    let unpacked = tmp.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let out = run(Command::new("tar")
        .arg("xzf")
        .arg(pkg_target.join(format!("package/{name}.crate")))
        .arg("-C")
        .arg(&unpacked));
    assert!(out.status.success(), "the .crate is a tar.gz");
    let crate_dir = unpacked.join(&name);
    let listing = run(Command::new(&cargo)
        .args(["package", "--list", "--allow-dirty", "-p", "kbuild"])
        .current_dir(repo()));
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.lines().any(|l| l == "templates/init/build.toml.j2"));
    assert!(listing.lines().any(|l| l == "LICENSE"));
    assert!(
        !listing.lines().any(|l| l.starts_with("devtools/")),
        "{listing}"
    );
    assert!(
        !listing.lines().any(|l| l.starts_with("kernels/")),
        "{listing}"
    );

    // `target/packaged`, shared with the sdist test, never `target/`: the packaged crate's units
    // have the same names as `cargo build --release`'s and would replace its binary.
    let root = tmp.path().join("root");
    let out = run(Command::new(&cargo)
        .args(["install", "--locked", "--path"])
        .arg(&crate_dir)
        .arg("--root")
        .arg(&root)
        .arg("--target-dir")
        .arg(repo().join("target/packaged")));
    assert!(
        out.status.success(),
        "cargo install --path <packaged crate>"
    );
    let path = plain_path(&[&root.join("bin")]);
    let out = on_path(&path, tmp.path(), &["--version"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&version_line()));
    let out = on_path(&path, tmp.path(), &["init", "proj", "--backends", "cpu"]);
    assert!(out.status.success());
    let out = on_path(&path, &tmp.path().join("proj"), &["check-config"]);
    assert!(
        out.status.success(),
        "check-config of the scaffolded project"
    );
}

/// The workflow `kbuild init` writes: its `Build`, `Test` and `Check` steps as written, with
/// kbuild from the release wheel and a project `.venv` seeing the test toolchain's torch (the
/// install step itself downloads torch from PyTorch's index, which this machine cannot reach).
#[test]
fn the_init_workflow_builds_tests_and_checks_with_the_pip_installed_kbuild() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = venv_with(&tmp.path().join("kbuild-venv"), &release_wheel());
    let path = plain_path(&[&bin]);
    let out = on_path(&path, tmp.path(), &["init", "kern", "--backends", "cpu"]);
    assert!(out.status.success());
    let project = tmp.path().join("kern");
    let workflow_file = project.join(".github/workflows/build.yml");
    let workflow = crate::common::release::yaml(&workflow_file);
    let text = std::fs::read_to_string(&workflow_file).unwrap();
    assert!(
        text.contains(&format!("\"kbuild=={}\"", env!("CARGO_PKG_VERSION"))),
        "the workflow installs this kbuild's wheel:\n{text}"
    );
    assert!(!text.contains("cargo install"), "{text}");
    let (venv_python, _) = crate::common::kbuild::venv_seeing_toolchain(&project.join(".venv"));
    let venv_bin = venv_python.parent().unwrap();
    let path = plain_path(&[venv_bin, &bin]);
    for name in ["Build", "Test", "Check"] {
        let steps = workflow["jobs"]["build"]["steps"].as_array().unwrap();
        let step = steps.iter().find(|s| s["name"] == name).expect(name);
        let out = run(Command::new("bash")
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
            .arg(step["run"].as_str().unwrap())
            .current_dir(&project)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", tmp.path())
            .env("HF_HUB_OFFLINE", "1"));
        assert!(
            out.status.success(),
            "step {name} of the generated workflow"
        );
    }
}
