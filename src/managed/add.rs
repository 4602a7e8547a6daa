//! `kbuild toolchain add --python PATH`: an environment the user made (the active venv) becomes a
//! managed toolchain without a download. Its torch and CUDA packages are pinned in kbuild.lock
//! exactly as `toolchain install` pins them (so another machine installs the same versions), and
//! the toolchains directory gets a marker naming the interpreter, so builds here use it.

use std::path::{Path, PathBuf};

use super::install::pinned_subset;
use super::lock::write_toml;
use super::spec::{ToolchainSpec, major_minor};
use super::{InstallError, LockedToolchain, MARKER, Managed};
use crate::process::{self, CommandSpec};

/// Asks the interpreter for torch's version, its CUDA and every installed distribution.
const PROBE: &str = "import importlib.metadata as m, torch\n\
print(torch.__version__)\n\
print(torch.version.cuda or '')\n\
for d in m.distributions():\n    print(f\"{d.metadata['Name']}=={d.version}\")";

/// Register the environment of `python` as a managed toolchain under `root`; returns it with
/// its record (the lock entry, which names no interpreter).
pub fn add(root: &Path, python: &Path) -> Result<Managed, InstallError> {
    let python = std::path::absolute(python).map_err(|source| InstallError::Io {
        action: "find",
        path: python.to_path_buf(),
        source,
    })?;
    let mut spec = CommandSpec::new(&python);
    spec.args(["-c", PROBE]);
    let out = process::run(&spec).map_err(|failure| InstallError::Step {
        name: python.display().to_string(),
        step: "asking the interpreter for torch",
        output: failure.diagnostics(),
        failure: Box::new(failure),
    })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let version = lines.next().unwrap_or_default().trim().to_string();
    let cuda = lines.next().unwrap_or_default().trim().to_string();
    let freeze: String = lines.map(|l| format!("{l}\n")).collect();
    let record = record(&version, &cuda, &freeze)?;
    let dir = root.join(&record.name);
    if dir.join("bin").exists() {
        return Err(InstallError::AlreadyInstalled {
            name: record.name,
            dir,
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
    std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let marker = LockedToolchain {
        python: Some(python.clone()),
        ..record.clone()
    };
    write_toml(&dir.join(MARKER), &marker)?;
    Ok(Managed {
        dir,
        python,
        record,
    })
}

/// The lock entry of an environment with torch `version` (`2.15.0+cu132`), `torch.version.cuda`
/// `cuda` (empty for a CPU torch) and `freeze` (`name==version` lines).
fn record(version: &str, cuda: &str, freeze: &str) -> Result<LockedToolchain, InstallError> {
    let public = version.split('+').next().unwrap_or(version);
    let spec = ToolchainSpec::new(public, (!cuda.is_empty()).then_some(cuda), cuda.is_empty())?;
    // What `toolchain install` would ask for; a torch kbuild has no CUDA pin for is asked for
    // alone (its CUDA packages are pinned below all the same).
    let torch_only = vec![format!("torch=={public}")];
    let requested = spec.requirements(None).unwrap_or(torch_only);
    let mut packages = pinned_subset(freeze, &requested);
    // The CUDA runtime packages torch depends on (`nvidia-*`), which pip freeze names too.
    let nvidia = freeze
        .lines()
        .filter(|l| l.to_lowercase().starts_with("nvidia-"));
    packages.extend(nvidia.map(|l| l.trim().to_string()));
    packages.sort();
    packages.dedup();
    Ok(LockedToolchain {
        name: spec.name(),
        torch: major_minor(public),
        compute: spec.compute.tag(),
        index_url: None,
        requested,
        packages,
        python: None,
    })
}

/// The interpreter of a toolchain directory: the one `add` recorded, else its own venv's.
pub(super) fn python_of(dir: &Path, record: &LockedToolchain) -> PathBuf {
    record
        .python
        .clone()
        .unwrap_or_else(|| dir.join("bin/python"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_added_cuda_torch_is_locked_with_its_exact_versions_and_no_interpreter() {
        let freeze = "numpy==2.3.0\ntorch==2.15.0+cu132\nnvidia-cublas==13.1.0.3\n\
                      cuda-toolkit==13.2.2\ntriton==3.7.0\n";
        let entry = record("2.15.0+cu132", "13.2", freeze).unwrap();
        assert_eq!(entry.name, "torch2.15-cu132");
        assert_eq!(entry.torch, "2.15");
        assert_eq!(entry.compute, "cu132");
        assert_eq!(entry.python, None);
        assert!(entry.requested.contains(&"torch==2.15.0".to_string()));
        assert!(
            entry
                .packages
                .contains(&"nvidia-cublas==13.1.0.3".to_string())
        );
        assert!(entry.packages.contains(&"torch==2.15.0+cu132".to_string()));
        assert!(!entry.packages.iter().any(|p| p.starts_with("numpy")));
    }

    #[test]
    fn an_added_cpu_torch_is_a_cpu_toolchain() {
        let entry = record("2.15.0+cpu", "", "torch==2.15.0+cpu\n").unwrap();
        assert_eq!(entry.name, "torch2.15-cpu");
        assert_eq!(entry.compute, "cpu");
        assert_eq!(entry.requested, ["torch==2.15.0"]);
    }
}
