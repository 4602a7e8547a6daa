//! `kbuild develop`: the relu fixture's own `tests/` (which `import relu`) pass under pytest in
//! a fresh venv, and a later plain `kbuild build` is picked up without another develop.

use std::process::Command;

use crate::common::kbuild::{fixture, kbuild, path_with_gpu, run, venv_seeing_toolchain};

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

#[test]
fn develop_with_a_cuda_torch_and_a_gpu_picks_the_cuda_variant_and_plans_nothing_else() {
    let project = fixture("relu-v5");
    let root = project.path();
    let venv = tempfile::tempdir().unwrap();
    let gpu = path_with_gpu(venv.path(), "9.0");
    let (py, _) = venv_seeing_toolchain(&venv.path().join("venv"));
    let listed = run(kbuild(root)
        .args(["list-variants", "--json", "--python"])
        .arg(&py));
    let listed = crate::common::kbuild::stdout_json(&listed);
    let name_of = |backend: &str| -> String {
        let variants = listed["variants"].as_array().unwrap();
        let variant = variants.iter().find(|v| v["backend"] == backend);
        variant.unwrap_or_else(|| panic!("no {backend} variant: {listed}"))["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (cuda, cpu) = (name_of("cuda"), name_of("cpu"));

    let out = run(kbuild(root)
        .env("PATH", &gpu)
        .args(["develop", "--dry-run", "--python"])
        .arg(&py));
    assert!(out.status.success(), "develop did not pick a variant");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stderr.contains(&format!("Selected {cuda} for ")),
        "{stderr}"
    );
    assert!(stdout.contains(&cuda), "{stdout}");
    assert!(
        !stdout.contains(&cpu),
        "the cpu variant is planned too:\n{stdout}"
    );
    assert!(
        !stdout.contains("relu_cpu.cpp"),
        "the cpu kernel is planned too:\n{stdout}"
    );
    assert!(!root.join("build").join(&cuda).exists());
    assert!(!root.join("build").join(&cpu).exists());

    // `--backend` still overrides what the torch says.
    let out = run(kbuild(root)
        .args(["develop", "--dry-run", "--backend", "cpu", "--python"])
        .arg(&py));
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&cpu), "{stdout}");
    assert!(!stdout.contains(&cuda), "{stdout}");
}

#[test]
fn a_develop_link_belongs_to_one_venv_and_never_redirects_another_venvs_import() {
    let project = fixture("relu-v5");
    let root = project.path();
    let venvs = tempfile::tempdir().unwrap();
    let (py_a, _) = venv_seeing_toolchain(&venvs.path().join("a"));
    let (py_b, _) = venv_seeing_toolchain(&venvs.path().join("b"));
    let out = run(kbuild(root)
        .args(["develop", "--backend", "cpu", "--python"])
        .arg(&py_a));
    assert!(out.status.success());

    // A second variant of the same build (as another torch would write), developed into venv b.
    let build = root.join("build");
    let developed = std::fs::read_dir(&build).unwrap().flatten();
    let ours = developed
        .map(|e| e.path())
        .find(|p| p.join("metadata.json").is_file());
    let other = build.join("torch299-cxx11-cpu-x86_64-linux");
    crate::common::kbuild::copy_dir(&ours.unwrap(), &other);
    let init = other.join("__init__.py");
    let text = std::fs::read_to_string(&init).unwrap();
    std::fs::write(&init, format!("{text}\nOTHER = True\n")).unwrap();
    assert!(
        run(kbuild(root).args(["hash", "--write"]).arg(&other))
            .status
            .success()
    );
    let variant = kbuild::package::BuiltVariant::read(&other).unwrap();
    kbuild::develop::develop(&variant, &py_b).unwrap();

    let imported = |py: &std::path::Path| {
        let out = run(Command::new(py)
            .args([
                "-c",
                "import relu; print(hasattr(relu, 'OTHER'), relu.__file__)",
            ])
            .current_dir(venvs.path()));
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let a = imported(&py_a);
    assert!(
        a.starts_with("False "),
        "venv a now imports venv b's variant: {a}"
    );
    assert!(!a.contains("torch299"), "{a}");
    let b = imported(&py_b);
    assert!(
        b.starts_with("True "),
        "venv b does not import its variant: {b}"
    );
}
