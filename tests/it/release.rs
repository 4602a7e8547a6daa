//! What a release ships (release.yml's `Build` and `Check` steps as written): manylinux2014
//! wheels whose binary needs glibc ≤ 2.17, an sdist that builds from source, a binary archive
//! per target with SHA256SUMS; and the crate `cargo install kbuild` gets.

use std::path::Path;
use std::process::Command;

use crate::common::kbuild::{python, repo, run};
use crate::common::release::{release_dist, release_step, release_wheel, run_release_step};

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[test]
fn release_build_makes_a_manylinux2014_wheel_the_sdist_an_archive_and_their_sums() {
    let dist = release_dist();
    let v = version();
    assert_eq!(
        names(dist),
        [
            "SHA256SUMS".to_string(),
            format!("kbuild-{v}-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"),
            format!("kbuild-{v}-x86_64-unknown-linux-gnu.tar.gz"),
            format!("kbuild-{v}.tar.gz"),
        ]
    );
    // The `Check` step: auditwheel's tag, the highest glibc symbol, archive = wheel binary, sums.
    let out = run_release_step(
        &release_step("build", "Check"),
        dist.parent().expect("runner temp"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("platform tag: manylinux_2_17_x86_64"),
        "{stdout}"
    );
    let glibc = stdout
        .lines()
        .find(|l| l.contains("highest glibc symbol"))
        .expect("the glibc line");
    eprintln!("{glibc}");
    assert!(
        glibc.contains("(ok: manylinux2014 allows GLIBC_2.17)"),
        "{glibc}"
    );
    assert!(stdout.contains("same binary"), "{stdout}");
    assert!(stdout.contains(": OK"), "sha256sum --check: {stdout}");
}

#[test]
fn a_tampered_release_file_fails_the_check_step() {
    let tmp = tempfile::tempdir().unwrap();
    let dist = tmp.path().join("dist");
    std::fs::create_dir(&dist).unwrap();
    for name in names(release_dist()) {
        std::fs::copy(release_dist().join(&name), dist.join(&name)).unwrap();
    }
    let sdist = dist.join(format!("kbuild-{}.tar.gz", version()));
    let mut bytes = std::fs::read(&sdist).unwrap();
    bytes.push(0);
    std::fs::write(&sdist, bytes).unwrap();
    let out = run(Command::new("bash")
        .args(["-eo", "pipefail", "-c", &release_step("build", "Check")])
        .current_dir(repo())
        .env("RUNNER_TEMP", tmp.path())
        .env("PYTHON", python()));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(": FAILED"));
}

#[test]
fn the_sdist_ships_what_the_binary_needs_and_nothing_dev_only() {
    let sdist = release_dist().join(format!("kbuild-{}.tar.gz", version()));
    let out = run(Command::new("tar").arg("tzf").arg(&sdist));
    assert!(out.status.success());
    let listing = String::from_utf8_lossy(&out.stdout);
    let top = format!("kbuild-{}/", version());
    for needed in [
        "pyproject.toml",
        "Cargo.toml",
        "Cargo.lock",
        "LICENSE",
        "build.rs",
        "src/main.rs",
        "templates/init/build.toml.j2",
        "templates/registration.h.j2",
        "python/kbuild/__main__.py",
    ] {
        assert!(
            listing.lines().any(|l| l == format!("{top}{needed}")),
            "{needed} missing from the sdist:\n{listing}"
        );
    }
    for dev_only in ["devtools/", "kernels/", "tests/", "bench/", "torch-ext/"] {
        assert!(
            !listing
                .lines()
                .any(|l| l.starts_with(&format!("{top}{dev_only}"))),
            "{dev_only} is in the sdist"
        );
    }
}

/// pip builds the sdist with cargo, as on a machine no wheel fits; the binary it installs runs.
/// `CARGO_TARGET_DIR` is `target/packaged`, shared with the `cargo install` test: not `target/`,
/// where a build of the same package from another directory has the same unit names as
/// `cargo build --release`'s and would replace its `target/release/kbuild` and build script run.
#[test]
fn the_sdist_builds_from_source_with_cargo_and_runs() {
    let sdist = release_dist().join(format!("kbuild-{}.tar.gz", version()));
    let out_dir = tempfile::tempdir().unwrap();
    let out = run(Command::new(python())
        .args([
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
        ])
        .arg(out_dir.path())
        .arg(&sdist)
        .env("CARGO_TARGET_DIR", repo().join("target/packaged"))
        // The build backend runs `maturin` by name: the test Python's.
        .env("PATH", path_with(python().parent().unwrap())));
    assert!(out.status.success(), "pip wheel of the sdist failed");
    let wheel = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("a wheel");
    let venv = tempfile::tempdir().unwrap();
    let bin = crate::common::release::venv_with(venv.path(), &wheel);
    let out = run(Command::new(bin.join("kbuild")).arg("--version"));
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("kbuild {}", version())));
}

#[test]
fn release_wheel_holds_the_binary_as_a_script_and_the_python_module() {
    let wheel = release_wheel();
    let code =
        "import sys, zipfile; print('\\n'.join(sorted(zipfile.ZipFile(sys.argv[1]).namelist())))";
    let out = run(Command::new(python()).args(["-c", code]).arg(&wheel));
    let listing = String::from_utf8_lossy(&out.stdout);
    let v = version();
    for needed in [
        format!("kbuild-{v}.data/scripts/kbuild"),
        "kbuild/__init__.py".to_string(),
        "kbuild/__main__.py".to_string(),
        format!("kbuild-{v}.dist-info/licenses/LICENSE"),
    ] {
        assert!(listing.lines().any(|l| l == needed), "{needed}:\n{listing}");
    }
}
