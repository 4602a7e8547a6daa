//! `build`, `list-variants` and `develop` select variants through one preparation path: the
//! toolchains of kbuild.lock (managed environments, not the default Python), then `--backend`
//! and `--variant`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::kbuild::{
    fixture, kbuild, path_with_gpu, python, run, stdout_json, venv_seeing_toolchain,
};

/// A managed toolchain's record and the lock entry that pins it.
const ENTRY: &str = "name = \"torch2.15-cpu\"\ntorch = \"2.15\"\ncompute = \"cpu\"\n\
                     requested = [\"torch==2.15.*\"]\npackages = [\"torch==2.15.0\"]\n";

/// The relu fixture with a kbuild.lock pinning torch 2.15, installed as a managed toolchain
/// (a venv seeing the test Python's torch: what `toolchain install` leaves, without the
/// download) in its own cache directory.
struct Locked {
    project: tempfile::TempDir,
    cache: tempfile::TempDir,
    /// The managed toolchain's interpreter and site-packages.
    python: PathBuf,
    site: PathBuf,
}

impl Locked {
    fn new() -> Self {
        let project = fixture("relu-v5");
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().join("toolchains/torch2.15-cpu");
        let (python, site) = venv_seeing_toolchain(&dir);
        std::fs::write(dir.join("kbuild-toolchain.toml"), ENTRY).unwrap();
        let lock = format!("version = 1\n\n[[toolchain]]\n{ENTRY}");
        std::fs::write(project.path().join("kbuild.lock"), lock).unwrap();
        Locked {
            project,
            cache,
            python,
            site,
        }
    }

    /// kbuild in the project, whose default Python (`default`) is not the locked one.
    fn kbuild(&self, default: &Path) -> Command {
        let mut cmd = kbuild(self.project.path());
        cmd.env("KBUILD_CACHE_DIR", self.cache.path())
            .env("KBUILD_PYTHON", default)
            .env_remove("VIRTUAL_ENV");
        cmd
    }
}

fn names(json: &serde_json::Value) -> Vec<String> {
    let variants = json["variants"].as_array().expect("variants");
    variants
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn list_variants_and_build_select_the_locked_toolchain_and_the_variants_asked_for() {
    let locked = Locked::new();
    let missing = Path::new("/nonexistent/python");
    let out = run(locked
        .kbuild(missing)
        .args(["list-variants", "--backend", "cpu", "--json"]));
    assert!(out.status.success(), "list-variants ignored kbuild.lock");
    let listed = stdout_json(&out);
    assert_eq!(names(&listed), ["torch215-cxx11-cpu-x86_64-linux"]);
    let toolchain = &listed["toolchains"][0];
    assert_eq!(toolchain["python"], locked.python.display().to_string());
    let torch = toolchain["torch"].as_str().unwrap();
    assert!(torch.starts_with("2.15."), "{toolchain}");

    let out =
        run(locked
            .kbuild(missing)
            .args(["build", "--backend", "cpu", "--dry-run", "--json"]));
    assert!(out.status.success());
    assert_eq!(names(&stdout_json(&out)), names(&listed));

    let out = run(locked.kbuild(missing).args([
        "list-variants",
        "--backend",
        "cpu",
        "--variant",
        "torch1-nope",
    ]));
    assert!(!out.status.success(), "list-variants ignored --variant");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "`--variant torch1-nope` is not built here (variants: torch215-cxx11-cpu-x86_64-linux)"
        ),
        "{stderr}"
    );
}

#[test]
fn develop_installs_the_locked_variant_into_the_locked_toolchains_environment() {
    let locked = Locked::new();
    let out =
        run(locked
            .kbuild(Path::new("/nonexistent/python"))
            .args(["develop", "--backend", "cpu"]));
    assert!(out.status.success(), "develop ignored kbuild.lock");
    assert!(locked.site.join("kbuild_develop_relu.pth").is_file());
    let check = run(Command::new(&locked.python)
        .args([
            "-c",
            "import relu, os; print(os.path.basename(os.path.dirname(relu.__file__)))",
        ])
        .current_dir(locked.cache.path()));
    assert!(check.status.success(), "relu does not import");
    // The develop link names the package, in the directory of the locked toolchain's
    // environment; the variant it points at is the locked torch's.
    let links = locked.project.path().join("build/.kbuild/develop");
    let [env] = std::fs::read_dir(&links)
        .unwrap()
        .flatten()
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    let link = env.path().join("relu");
    let target = std::fs::read_link(&link).unwrap();
    assert!(
        target.ends_with("torch215-cxx11-cpu-x86_64-linux"),
        "{}",
        target.display()
    );
}

#[test]
fn develop_with_several_variants_selected_names_them_before_building_anything() {
    let locked = Locked::new();
    // The default Python is another interpreter than the locked one: neither variant is its own.
    let listed = run(locked.kbuild(&python()).args(["list-variants", "--json"]));
    assert!(listed.status.success());
    let all = names(&stdout_json(&listed));
    assert_eq!(all.len(), 2, "cpu and cuda expected: {all:?}");
    // On a GPU machine both can run here (without one, develop builds cpu alone).
    let gpu = path_with_gpu(locked.cache.path(), "9.0");
    let out = run(locked.kbuild(&python()).env("PATH", gpu).args(["develop"]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "`kbuild develop` installs one variant, but 2 are selected: [{}]",
            all.join(", ")
        )) && stderr.contains("hint: choose one with `--variant`"),
        "{stderr}"
    );
    assert!(!locked.project.path().join("build").join(&all[0]).exists());
    assert!(!locked.site.join("kbuild_develop_relu.pth").exists());
}

#[test]
fn with_a_lock_build_list_variants_and_develop_print_and_select_the_same_toolchain() {
    let locked = Locked::new();
    let missing = Path::new("/nonexistent/python");
    let python = locked.python.display().to_string();
    let variant = "torch215-cxx11-cpu-x86_64-linux";
    for args in [
        &["list-variants", "--backend", "cpu"][..],
        &["build", "--backend", "cpu", "--dry-run"],
        &[
            "develop",
            "--backend",
            "cpu",
            "--dry-run",
            "--python",
            &python,
        ],
    ] {
        let out = run(locked.kbuild(missing).args(args));
        assert!(out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = stderr.lines().find(|l| l.contains("Locked torch 2.15"));
        let said = said.unwrap_or_else(|| panic!("{args:?} does not say: {stderr}"));
        assert!(
            said.ends_with(&format!("(kbuild.lock): {python}")),
            "{said}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(variant),
            "{args:?} selects another variant:\n{stdout}"
        );
    }
}

#[test]
fn toolchain_add_locks_the_active_venvs_torch_without_a_download_and_builds_use_it() {
    let project = fixture("relu-v5");
    let cache = tempfile::tempdir().unwrap();
    let (venv_python, _) = venv_seeing_toolchain(&cache.path().join("myvenv"));
    let out = run(kbuild(project.path())
        .env("KBUILD_CACHE_DIR", cache.path())
        .env("PIP_NO_INDEX", "1")
        .env("UV_OFFLINE", "1")
        .args(["toolchain", "add", "--python"])
        .arg(&venv_python));
    assert!(out.status.success(), "toolchain add failed");
    let lock = std::fs::read_to_string(project.path().join("kbuild.lock")).unwrap();
    let torch = run(Command::new(python()).args([
        "-c",
        "import importlib.metadata as m, torch; print(m.version('torch'), torch.version.cuda)",
    ]));
    let torch = String::from_utf8_lossy(&torch.stdout);
    let (version, cuda) = torch.trim().split_once(' ').unwrap();
    let name = format!("torch2.15-cu{}", cuda.replace('.', ""));
    assert!(lock.contains(&format!("name = \"{name}\"")), "{lock}");
    assert!(lock.contains(&format!("\"torch=={version}\"")), "{lock}");
    assert!(
        !lock.contains("python"),
        "the lock names this machine's venv: {lock}"
    );
    assert!(
        !cache
            .path()
            .join("toolchains")
            .join(&name)
            .join("bin")
            .exists()
    );

    // A plain list-variants now selects the added venv, whatever the default Python is.
    let out = run(kbuild(project.path())
        .env("KBUILD_CACHE_DIR", cache.path())
        .env("KBUILD_PYTHON", "/nonexistent/python")
        .args(["list-variants", "--backend", "cpu", "--json"]));
    assert!(out.status.success(), "the added toolchain is not used");
    let listed = stdout_json(&out);
    let python = std::path::absolute(&venv_python).unwrap();
    assert_eq!(
        listed["toolchains"][0]["python"],
        python.display().to_string()
    );

    // `toolchain install` from the lock finds it installed: nothing to download.
    let out = run(kbuild(project.path())
        .env("KBUILD_CACHE_DIR", cache.path())
        .env("PIP_NO_INDEX", "1")
        .args(["toolchain", "install"]));
    assert!(
        out.status.success(),
        "install from the lock wanted a download"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Fresh"));
}
