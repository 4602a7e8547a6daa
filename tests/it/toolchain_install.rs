//! `kbuild toolchain install|list|remove` against a fake `python3`/`pip` and a fake `uv` that
//! record their argv: nothing is downloaded.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::fake_cc::make_executable;
use crate::common::kbuild::{bin, fixture, run};
use crate::common::redact::Redact;

const FREEZE: &str = "filelock==3.20.0\nkernels==0.17.2\nnvidia-cuda-nvcc==13.0.88\n\
                      numpy==2.3.5\ntorch==2.14.0\ncuda-toolkit==13.0.3\n";

/// A directory with a fake `python3` (and `uv` when `with_uv`) that log `<name> <argv>` to
/// `log`; `python3 -m venv DIR` makes `DIR/bin/python` (the same fake), `pip freeze` prints
/// FREEZE, and `pip install` fails when `$FAIL_INSTALL` is set; with `$SLOW_DOWNLOAD` it says
/// it downloads torch and waits (20 s at most) for that file to exist, as a download takes.
struct FakeInstaller {
    bin_dir: PathBuf,
    log: PathBuf,
    cache: PathBuf,
}

impl FakeInstaller {
    fn new(dir: &Path, with_uv: bool) -> Self {
        let bin_dir = dir.join("fakebin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        let log = dir.join("installer.log");
        let python = format!(
            r#"#!/bin/sh
echo "$0 $*" >> '{log}'
case "$*" in
  "-m venv "*) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
  "-m pip install --disable-pip-version-check --help") echo '  --progress-bar <progress_bar>  [auto, on, off, raw]' ;;
  "-m pip install"*) [ -z "$FAIL_INSTALL" ] || {{ echo "ERROR: no matching distribution" >&2; exit 1; }}
    [ -z "$SLOW_DOWNLOAD" ] || {{
      printf 'Collecting torch==2.14.*\n  Downloading torch-2.14.0.whl.metadata (30 kB)\n'
      printf 'Downloading torch-2.14.0-cp312-cp312-manylinux_2_28_x86_64.whl (915.2 MB)\n'
      i=0; while [ ! -e "$SLOW_DOWNLOAD" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
    }} ;;
  "-m pip freeze"*) printf '{FREEZE}' ;;
esac
"#,
            log = log.display(),
        );
        write_script(&bin_dir.join("python3"), &python);
        if with_uv {
            let uv = format!(
                r#"#!/bin/sh
echo "uv $*" >> '{log}'
case "$*" in
  "venv --quiet "*) mkdir -p "$3/bin" ;;
  "pip freeze"*) printf '{FREEZE}' ;;
esac
"#,
                log = log.display(),
            );
            write_script(&bin_dir.join("uv"), &uv);
        }
        std::fs::write(&log, "").unwrap();
        FakeInstaller {
            bin_dir,
            log,
            cache: dir.join("cache"),
        }
    }

    /// `kbuild -C project <args>` that finds only the fakes (and the shell's basics).
    fn kbuild(&self, project: &Path, args: &[&str]) -> Command {
        let mut cmd = bin();
        cmd.arg("-C").arg(project).args(args);
        cmd.env("PATH", format!("{}:/usr/bin:/bin", self.bin_dir.display()));
        cmd.env("KBUILD_CACHE_DIR", &self.cache);
        cmd
    }

    /// The logged commands since the last call, with the temp dir written as `T`.
    fn take(&self, tmp: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap();
        std::fs::write(&self.log, "").unwrap();
        text.lines()
            .map(|l| l.replace(&tmp.display().to_string(), "T"))
            .collect()
    }
}

fn write_script(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    make_executable(path);
}

#[test]
fn install_without_uv_makes_a_venv_with_pip_and_locks_the_exact_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let project = fixture("relu-v5");
    let fake = FakeInstaller::new(tmp.path(), false);
    let args = [
        "toolchain",
        "install",
        "--torch",
        "2.14",
        "--with",
        "kernels==0.17.2",
    ];
    let out = run(&mut fake.kbuild(project.path(), &args));
    assert!(out.status.success());
    let dir = "T/cache/toolchains/torch2.14-cu130";
    assert_eq!(
        fake.take(tmp.path()),
        [
            format!("T/fakebin/python3 -m venv {dir}"),
            // Whether this pip writes `--progress-bar raw` (a byte bar for each download).
            format!("{dir}/bin/python -m pip install --disable-pip-version-check --help"),
            format!(
                "{dir}/bin/python -m pip install --disable-pip-version-check --progress-bar raw \
                 torch==2.14.* cuda-toolkit[nvcc,cccl,cuobjdump]==13.0.3 kernels==0.17.2"
            ),
            format!("{dir}/bin/python -m pip freeze --disable-pip-version-check"),
        ]
    );
    let lock = std::fs::read_to_string(project.path().join("kbuild.lock")).unwrap();
    let parsed: toml::Value = toml::from_str(&lock).unwrap();
    let entry = &parsed["toolchain"][0];
    assert_eq!(entry["name"].as_str(), Some("torch2.14-cu130"));
    let packages: Vec<&str> = entry["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        packages,
        [
            "cuda-toolkit==13.0.3",
            "kernels==0.17.2",
            "nvidia-cuda-nvcc==13.0.88",
            "torch==2.14.0"
        ]
    );

    // Installed and matching: nothing runs again.
    assert!(
        run(&mut fake.kbuild(project.path(), &args))
            .status
            .success()
    );
    assert_eq!(fake.take(tmp.path()), Vec::<String>::new());

    let redact = Redact::new().path(tmp.path(), "[tmp]");
    let listed = run(&mut fake.kbuild(project.path(), &["toolchain", "list"]));
    insta::assert_snapshot!("toolchain_list_text", redact.output(&listed));
    let listed = run(&mut fake.kbuild(project.path(), &["toolchain", "list", "--json"]));
    assert!(listed.status.success());
    insta::assert_json_snapshot!("toolchain_list_json", redact.stdout_json(&listed, &[]));

    let removed =
        run(&mut fake.kbuild(project.path(), &["toolchain", "remove", "torch2.14-cu130"]));
    assert!(removed.status.success());
    assert!(!fake.cache.join("toolchains/torch2.14-cu130").exists());

    // The lock remains: installing from it pins every recorded version.
    let again = run(&mut fake.kbuild(project.path(), &["toolchain", "install"]));
    assert!(again.status.success());
    let log = fake.take(tmp.path());
    assert!(
        log[2].ends_with(
            "install --disable-pip-version-check --progress-bar raw cuda-toolkit==13.0.3 \
             kernels==0.17.2 nvidia-cuda-nvcc==13.0.88 torch==2.14.0"
        ),
        "{log:?}"
    );
}

#[test]
fn install_with_uv_on_path_uses_uv_for_the_venv_and_the_packages() {
    let tmp = tempfile::tempdir().unwrap();
    let project = fixture("relu-v5");
    let fake = FakeInstaller::new(tmp.path(), true);
    let out = run(&mut fake.kbuild(
        project.path(),
        &[
            "toolchain",
            "install",
            "--torch",
            "2.15",
            "--cpu",
            "--no-lock",
        ],
    ));
    assert!(out.status.success());
    let dir = "T/cache/toolchains/torch2.15-cpu";
    assert_eq!(
        fake.take(tmp.path()),
        [
            format!("uv venv --quiet {dir}"),
            format!("uv pip install --python {dir}/bin/python torch==2.15.*"),
            format!("uv pip freeze --python {dir}/bin/python"),
        ]
    );
    assert!(!project.path().join("kbuild.lock").exists());
}

#[test]
fn a_failed_install_names_the_step_shows_pip_and_leaves_no_toolchain() {
    let tmp = tempfile::tempdir().unwrap();
    let project = fixture("relu-v5");
    let fake = FakeInstaller::new(tmp.path(), false);
    let mut cmd = fake.kbuild(project.path(), &["toolchain", "install", "--torch", "2.14"]);
    let out = run(cmd.env("FAIL_INSTALL", "1"));
    assert!(!out.status.success());
    // The fake pip's output is fixed, so the whole message is pinned.
    insta::assert_snapshot!(Redact::new().path(tmp.path(), "[tmp]").output(&out));
    assert!(!project.path().join("kbuild.lock").exists());
    let listed = run(&mut fake.kbuild(project.path(), &["toolchain", "list", "--json"]));
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "[]");
}

#[test]
fn cuda_12_is_refused_with_the_ways_to_get_it() {
    let tmp = tempfile::tempdir().unwrap();
    let project = fixture("relu-v5");
    let fake = FakeInstaller::new(tmp.path(), false);
    let args = ["toolchain", "install", "--torch", "2.13", "--cuda", "12.6"];
    let out = run(&mut fake.kbuild(project.path(), &args));
    assert!(!out.status.success());
    insta::assert_snapshot!(Redact::new().path(tmp.path(), "[tmp]").output(&out));
    assert_eq!(fake.take(tmp.path()), Vec::<String>::new());
}

#[test]
fn install_shows_each_download_while_pip_is_still_downloading() {
    let tmp = tempfile::tempdir().unwrap();
    let project = fixture("relu-v5");
    let fake = FakeInstaller::new(tmp.path(), false);
    let done = tmp.path().join("download-done");
    let mut child = fake
        .kbuild(project.path(), &["toolchain", "install", "--torch", "2.14"])
        .env("SLOW_DOWNLOAD", &done)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut lines = std::io::BufRead::lines(stderr).map(Result::unwrap);
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let downloading = line.contains("Downloading");
        seen.push(line);
        if downloading {
            break;
        }
    }
    // pip is still downloading: it waits for this file.
    std::fs::write(&done, "").unwrap();
    let rest: Vec<String> = lines.collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {seen:#?} {rest:#?}");
    insta::assert_snapshot!(seen.join("\n"));
}
