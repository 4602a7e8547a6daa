//! `kbuild develop`: the relu fixture's own `tests/` (which `import relu`) pass under pytest in
//! a fresh venv, and a later plain `kbuild build` is picked up without another develop.

use std::process::Command;

use crate::common::kbuild::{fixture, kbuild, run, venv_seeing_toolchain};

#[test]
fn develop_makes_the_package_importable_for_the_kernels_own_pytest_and_rebuilds_show_up() {
    let project = fixture("relu-v5");
    let root = project.path();
    let venv = tempfile::tempdir().unwrap();
    let (py, site) = venv_seeing_toolchain(&venv.path().join("venv"));

    let out = run(kbuild(root)
        .args(["develop", "--backend", "cpu", "--python"])
        .arg(&py));
    assert!(out.status.success());
    assert!(site.join("kbuild_develop_relu.pth").is_file());

    let tests = run(Command::new(&py)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(root));
    assert!(tests.status.success(), "the fixture's own tests failed");
    assert!(String::from_utf8_lossy(&tests.stdout).contains("1 passed"));

    let init = root.join("torch-ext/relu/__init__.py");
    let text = std::fs::read_to_string(&init).unwrap();
    std::fs::write(&init, format!("{text}\nREBUILT = True\n")).unwrap();
    let out = run(kbuild(root).args(["build", "--backend", "cpu"]));
    assert!(out.status.success());
    let check = run(Command::new(&py)
        .args(["-c", "import relu; print(relu.REBUILT, relu.__file__)"])
        .current_dir(venv.path()));
    assert!(check.status.success(), "the rebuild is not what imports");
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(stdout.starts_with("True "), "{stdout}");
}

#[test]
fn develop_refuses_an_environment_where_the_package_is_installed_already() {
    let project = fixture("relu-v5");
    let root = project.path();
    let venv = tempfile::tempdir().unwrap();
    let (py, site) = venv_seeing_toolchain(&venv.path().join("venv"));
    std::fs::create_dir(site.join("relu")).unwrap();
    let out = run(kbuild(root)
        .args(["develop", "--backend", "cpu", "--python"])
        .arg(&py));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("would be imported instead of the build")
            && stderr.contains("hint: uninstall it first: `pip uninstall relu`"),
        "{stderr}"
    );
    assert!(!site.join("kbuild_develop_relu.pth").exists());
}
