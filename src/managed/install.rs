//! Provisioning one toolchain: a virtual environment with torch (and the CUDA toolkit that
//! matches it) made by uv when it is on PATH, else by `python3 -m venv` and pip; then the exact
//! versions installed, read back with `freeze`, recorded in the environment and the lock.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::lock::{LockedToolchain, write_toml};
use super::spec::requirement_name;
use super::{InstallError, MARKER, Managed, ToolchainSpec};
use crate::process::{self, CommandSpec};
use crate::report::Reporter;
use crate::toolchain::resolve_program;

/// One toolchain to provision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallRequest {
    /// `torch2.14-cu130`: its directory and lock entry.
    pub name: String,
    pub torch: String,
    pub compute: String,
    pub index_url: Option<String>,
    /// torch, the CUDA toolkit and `--with` requirements.
    pub requested: Vec<String>,
    /// Exact `name==version` pins from a lock entry, installed instead of `requested`.
    pub pinned: Option<Vec<String>>,
    /// The interpreter the environment is made from [default: `python3`, or uv's choice].
    pub python: Option<PathBuf>,
}

impl InstallRequest {
    /// From `--torch`/`--cuda`/`--cpu`, `--index-url` and `--with`.
    pub fn new(
        spec: &ToolchainSpec,
        index_url: Option<String>,
        with: &[String],
        python: Option<PathBuf>,
    ) -> Result<Self, InstallError> {
        let mut requested = spec.requirements(index_url.as_deref())?;
        requested.extend(with.iter().cloned());
        Ok(InstallRequest {
            name: spec.name(),
            torch: spec.torch_minor(),
            compute: spec.compute.tag(),
            index_url,
            requested,
            pinned: None,
            python,
        })
    }

    /// Reinstall exactly what a lock entry records.
    pub fn from_lock(entry: &LockedToolchain, python: Option<PathBuf>) -> Self {
        InstallRequest {
            name: entry.name.clone(),
            torch: entry.torch.clone(),
            compute: entry.compute.clone(),
            index_url: entry.index_url.clone(),
            requested: entry.requested.clone(),
            pinned: Some(entry.packages.clone()),
            python,
        }
    }

    /// Whether an installed toolchain already is what this request asks for.
    fn satisfied_by(&self, record: &LockedToolchain) -> bool {
        record.requested == self.requested
            && record.index_url == self.index_url
            && self.pinned.as_ref().is_none_or(|p| *p == record.packages)
    }
}

/// A toolchain ready to use, and whether this call installed it.
#[derive(Debug, Clone)]
pub struct Installed {
    pub managed: Managed,
    /// `false` when a matching installation was already there and left alone.
    pub installed_now: bool,
}

/// Provision `request` under `root` (the toolchains directory), unless a complete matching
/// installation is there. An incomplete or different one is replaced.
pub fn install(
    root: &Path,
    request: &InstallRequest,
    reporter: &dyn Reporter,
) -> Result<Installed, InstallError> {
    let dir = root.join(&request.name);
    if let Some(Ok(existing)) = Managed::at(&dir)
        && request.satisfied_by(&existing.record)
    {
        return Ok(Installed {
            managed: existing,
            installed_now: false,
        });
    }
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| InstallError::Io {
            action,
            path,
            source,
        }
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io("remove", &dir))?;
    }
    std::fs::create_dir_all(root).map_err(io("create", root))?;

    let installer = Installer::detect(request.python.clone());
    let packages = request.pinned.as_ref().unwrap_or(&request.requested);
    reporter.stage(
        "Installing",
        &format!(
            "{} with {} ({})",
            request.name,
            installer.name(),
            packages.join(" ")
        ),
    );
    let downloads = Downloads::new(reporter);
    let step = |step: &'static str, spec: CommandSpec| {
        reporter.verbose(&spec.to_string());
        process::run_watching(&spec, &|line| downloads.line(line)).map_err(|failure| {
            InstallError::Step {
                name: request.name.clone(),
                step,
                output: failure.diagnostics(),
                failure: Box::new(failure),
            }
        })
    };
    step("creating the environment", installer.venv(&dir))?;
    let python = dir.join("bin/python");
    let raw = installer.takes_raw_progress(&python);
    step(
        "installing the packages",
        installer.install(&python, packages, request.index_url.as_deref(), raw),
    )?;
    let freeze = step("listing the installed packages", installer.freeze(&python))?;
    let record = LockedToolchain {
        name: request.name.clone(),
        torch: request.torch.clone(),
        compute: request.compute.clone(),
        index_url: request.index_url.clone(),
        requested: request.requested.clone(),
        packages: pinned_subset(&String::from_utf8_lossy(&freeze.stdout), &request.requested),
        python: None,
    };
    write_toml(&dir.join(MARKER), &record)?;
    Ok(Installed {
        managed: Managed {
            dir,
            python,
            record,
        },
        installed_now: true,
    })
}

/// What pip and uv say about their downloads, shown as it comes (pip draws no bar when its
/// output is not a terminal): each `Downloading <file> (<size>)` line, and with pip's
/// `--progress-bar raw` (`Progress <bytes> of <total>`) a byte bar for the file. Metadata
/// fetches are left out: they are many and small.
struct Downloads<'a> {
    reporter: &'a dyn Reporter,
    /// The file being downloaded, whether its bar is up, and the bytes the bar shows.
    current: Mutex<(String, bool, u64)>,
}

impl<'a> Downloads<'a> {
    fn new(reporter: &'a dyn Reporter) -> Self {
        Downloads {
            reporter,
            current: Mutex::new((String::new(), false, 0)),
        }
    }

    fn line(&self, line: &str) {
        let Ok(mut current) = self.current.lock() else {
            return;
        };
        let line = line.trim();
        if let Some(what) = line.strip_prefix("Downloading ")
            && !what.contains(".metadata")
        {
            self.reporter.stage("Downloading", what);
            let file = what.split(' ').next().unwrap_or(what);
            *current = (file.to_string(), false, 0);
        } else if let Some((bytes, total)) = raw_progress(line) {
            let (file, bar_up, shown) = &mut *current;
            if !*bar_up {
                self.reporter.begin_bytes("Downloading", file, total);
                (*bar_up, *shown) = (true, 0);
            }
            self.reporter.add_bytes(bytes.saturating_sub(*shown));
            *shown = (*shown).max(bytes);
        }
    }
}

/// `Progress 1024 of 4096`, the line pip's `--progress-bar raw` writes, as (bytes, total).
fn raw_progress(line: &str) -> Option<(u64, u64)> {
    let (bytes, total) = line.strip_prefix("Progress ")?.split_once(" of ")?;
    let total: u64 = total.parse().ok()?;
    (total > 0).then_some((bytes.parse().ok()?, total))
}

/// The program that makes environments and installs into them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Installer {
    Uv {
        uv: PathBuf,
        python: Option<PathBuf>,
    },
    Pip {
        python: PathBuf,
    },
}

impl Installer {
    /// uv when it is on PATH (much faster, and it shares a cache across toolchains), else pip.
    fn detect(python: Option<PathBuf>) -> Self {
        match resolve_program(Path::new("uv")) {
            Some(uv) => Installer::Uv { uv, python },
            None => Installer::Pip {
                python: python.unwrap_or_else(|| PathBuf::from("python3")),
            },
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Installer::Uv { .. } => "uv",
            Installer::Pip { .. } => "pip",
        }
    }

    fn venv(&self, dir: &Path) -> CommandSpec {
        match self {
            Installer::Uv { uv, python } => {
                let mut cmd = CommandSpec::new(uv);
                cmd.args(["venv", "--quiet"]);
                if let Some(python) = python {
                    cmd.arg("--python").arg(python);
                }
                cmd.arg(dir);
                cmd
            }
            Installer::Pip { python } => {
                let mut cmd = CommandSpec::new(python);
                cmd.args(["-m", "venv"]).arg(dir);
                cmd
            }
        }
    }

    /// Whether the environment's pip writes `--progress-bar raw` (recent pips do; the pip
    /// that `venv` bundles can be older). Asked of its `install --help`, not its version.
    fn takes_raw_progress(&self, python: &Path) -> bool {
        match self {
            Installer::Uv { .. } => false,
            Installer::Pip { .. } => {
                let mut help = self.pip(python, "install");
                help.arg("--help");
                process::run(&help)
                    .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("raw]"))
            }
        }
    }

    fn install(
        &self,
        python: &Path,
        packages: &[String],
        index_url: Option<&str>,
        raw_progress: bool,
    ) -> CommandSpec {
        let mut cmd = self.pip(python, "install");
        if raw_progress {
            cmd.args(["--progress-bar", "raw"]);
        }
        if let Some(url) = index_url {
            cmd.arg("--index-url").arg(url);
        }
        cmd.args(packages);
        cmd
    }

    fn freeze(&self, python: &Path) -> CommandSpec {
        self.pip(python, "freeze")
    }

    /// `uv pip VERB --python PY` or `PY -m pip VERB`.
    fn pip(&self, python: &Path, verb: &str) -> CommandSpec {
        match self {
            Installer::Uv { uv, .. } => {
                let mut cmd = CommandSpec::new(uv);
                cmd.args(["pip", verb, "--python"]).arg(python);
                cmd
            }
            Installer::Pip { .. } => {
                let mut cmd = CommandSpec::new(python);
                cmd.args(["-m", "pip", verb, "--disable-pip-version-check"]);
                cmd
            }
        }
    }
}

/// From `pip freeze` output: the lines for torch, triton, the CUDA packages and everything
/// requested, sorted. The rest (numpy, filelock, …) follows from these and stays unpinned.
pub(super) fn pinned_subset(freeze: &str, requested: &[String]) -> Vec<String> {
    let wanted: Vec<String> = requested
        .iter()
        .map(|r| requirement_name(r))
        .chain(["torch", "triton", "cuda-toolkit"].map(String::from))
        .collect();
    let mut kept: Vec<String> = freeze
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('-'))
        .filter(|line| {
            let name = requirement_name(line);
            name.starts_with("nvidia-") || wanted.contains(&name)
        })
        .map(String::from)
        .collect();
    kept.sort_by_key(|line| requirement_name(line));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_keeps_torch_cuda_and_requested_packages_only() {
        let freeze = "filelock==3.20.0\nkernels==0.17.2\nnvidia-cuda-nvcc==13.0.88\n\
                      numpy==2.3.5\ntorch==2.14.0\ncuda-toolkit==13.0.3\ntriton==3.6.0\n";
        let kept = pinned_subset(freeze, &["torch==2.14.*".into(), "kernels==0.17.2".into()]);
        assert_eq!(
            kept,
            [
                "cuda-toolkit==13.0.3",
                "kernels==0.17.2",
                "nvidia-cuda-nvcc==13.0.88",
                "torch==2.14.0",
                "triton==3.6.0"
            ]
        );
    }

    #[test]
    fn pip_downloads_show_each_file_and_a_byte_bar_from_its_raw_progress() {
        let recorder = crate::report::Recorder::default();
        let downloads = Downloads::new(&recorder);
        for line in [
            "Collecting torch==2.14.*",
            "  Downloading torch-2.14.0-cp312.whl.metadata (30 kB)",
            "Downloading torch-2.14.0-cp312.whl (915.2 MB)",
            "Progress 0 of 915200000",
            "Progress 400000000 of 915200000",
            "Progress 915200000 of 915200000",
            "Downloading triton-3.6.0.whl (180.0 MB)",
            "Progress 180000000 of 180000000",
            "Installing collected packages: triton, torch",
        ] {
            downloads.line(line);
        }
        assert_eq!(
            recorder.take(),
            [
                "stage Downloading torch-2.14.0-cp312.whl (915.2 MB)",
                "bytes Downloading torch-2.14.0-cp312.whl 915200000",
                "add 0",
                "add 400000000",
                "add 515200000",
                "stage Downloading triton-3.6.0.whl (180.0 MB)",
                "bytes Downloading triton-3.6.0.whl 180000000",
                "add 180000000",
            ]
        );
    }

    #[test]
    fn pip_and_uv_commands_pass_the_index_and_the_packages() {
        let pip = Installer::Pip {
            python: "python3".into(),
        };
        let py = Path::new("/t/bin/python");
        let pkgs = ["torch==2.14.*".to_string()];
        assert_eq!(
            pip.install(py, &pkgs, Some("https://i"), false).to_string(),
            "/t/bin/python -m pip install --disable-pip-version-check --index-url https://i \
             'torch==2.14.*'"
        );
        assert_eq!(
            pip.install(py, &pkgs, None, true).to_string(),
            "/t/bin/python -m pip install --disable-pip-version-check --progress-bar raw \
             'torch==2.14.*'"
        );
        let uv = Installer::Uv {
            uv: "/bin/uv".into(),
            python: None,
        };
        assert_eq!(
            uv.install(py, &pkgs, None, false).to_string(),
            "/bin/uv pip install --python /t/bin/python 'torch==2.14.*'"
        );
        assert_eq!(
            uv.venv(Path::new("/t")).to_string(),
            "/bin/uv venv --quiet /t"
        );
    }
}
