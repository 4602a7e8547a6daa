//! nvcc discovery, version check against torch's CUDA, and the capabilities it can target.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::facts::FactCache;
use super::python::parse_major_minor;
use super::{ToolchainError, TorchInfo, capture_known, resolve_program};
use crate::config::Capability;

/// A usable nvcc and what it can do.
#[derive(Debug, Clone, Serialize)]
pub struct Nvcc {
    pub path: PathBuf,
    /// Where it came from (`--nvcc`, `CUDA_HOME`, `PATH`, `pip`).
    pub origin: String,
    /// `(major, minor)`, e.g. `(13, 2)`.
    pub version: (u32, u32),
    /// The `--version` release line; part of every cache key.
    pub id: String,
    /// Real architectures this nvcc can emit SASS for (`--list-gpu-arch`).
    pub supported: Vec<Capability>,
    /// CUDA headers (`cuda_runtime.h`).
    pub include_dir: PathBuf,
    /// Directory holding `libcudart.so.<major>`.
    pub lib_dir: PathBuf,
    /// Non-fatal findings (minor version mismatch).
    pub warnings: Vec<String>,
}

impl Nvcc {
    /// Whether this nvcc can emit code for `cap` (suffixes `a`/`f` need their base arch).
    pub fn supports(&self, cap: &Capability) -> bool {
        self.supported
            .iter()
            .any(|s| s.major == cap.major && s.minor == cap.minor)
    }

    /// The cudart link argument: the versioned soname, since pip CUDA ships no plain `libcudart.so`.
    pub fn cudart_lib(&self) -> String {
        format!(":libcudart.so.{}", self.version.0)
    }
}

/// Find nvcc: `--nvcc`, `CUDA_HOME`, `PATH`, then the pip CUDA next to torch. What it says
/// about itself is remembered in `facts` while its binary is unchanged.
pub fn find_nvcc(
    explicit: Option<&Path>,
    torch: &TorchInfo,
    facts: &FactCache,
) -> Result<Nvcc, ToolchainError> {
    let mut candidates: Vec<(PathBuf, String)> = Vec::new();
    if let Some(p) = explicit {
        candidates.push((p.to_path_buf(), "--nvcc".into()));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = crate::env::var_os(var) {
            candidates.push((PathBuf::from(home).join("bin/nvcc"), var.into()));
        }
    }
    candidates.push((PathBuf::from("nvcc"), "PATH".into()));
    // The pip wheels put nvcc at site-packages/nvidia/cu<major>/bin/nvcc.
    if let Some((major, _)) = torch.cuda_major_minor() {
        candidates.push((
            torch
                .site_packages
                .join(format!("nvidia/cu{major}/bin/nvcc")),
            "pip".into(),
        ));
    }

    let mut tried = Vec::new();
    // A `CUDA_HOME` that holds no nvcc is a mistake worth saying when another nvcc is used.
    let mut missed_home = None;
    for (path, origin) in &candidates {
        tried.push(format!("`{}` ({origin})", path.display()));
        let Some(resolved) = resolve_program(path) else {
            if origin == "--nvcc" {
                return Err(ToolchainError::NoSuchTool {
                    tool: path.clone(),
                    origin: origin.clone(),
                });
            }
            if origin.starts_with("CUDA_") && missed_home.is_none() {
                missed_home = Some((origin.clone(), path.clone()));
            }
            continue;
        };
        let mut nvcc = probe(resolved, origin.clone(), torch, facts)?;
        if let Some((var, missing)) = missed_home {
            nvcc.warnings.insert(
                0,
                format!(
                    "`{var}` is set but `{}` does not exist: using `{}` ({origin}) instead; set \
                     `{var}` to the toolkit's root (the directory holding `bin/nvcc`), or unset it",
                    missing.display(),
                    nvcc.path.display()
                ),
            );
        }
        return Ok(nvcc);
    }
    Err(ToolchainError::NoNvcc {
        tried: tried.join(", "),
    })
}

fn probe(
    path: PathBuf,
    origin: String,
    torch: &TorchInfo,
    facts: &FactCache,
) -> Result<Nvcc, ToolchainError> {
    let version_text = capture_known(facts, &path, &["--version"])?;
    let (version, id) = parse_version(&version_text).ok_or_else(|| ToolchainError::ToolOutput {
        tool: path.clone(),
        what: "a release number",
        output: version_text.trim().to_string(),
    })?;
    let arch_text = capture_known(facts, &path, &["--list-gpu-arch"])?;
    let supported = parse_gpu_archs(&arch_text);

    let mut warnings = Vec::new();
    if let Some((tmaj, tmin)) = torch.cuda_major_minor() {
        if tmaj != version.0 {
            return Err(ToolchainError::NvccMajorMismatch {
                nvcc: path,
                nvcc_version: format!("{}.{}", version.0, version.1),
                torch: torch.version.clone(),
                torch_cuda: format!("{tmaj}.{tmin}"),
            });
        }
        if tmin != version.1 {
            warnings.push(format!(
                "`{}` is CUDA {}.{} but torch {} was built for CUDA {tmaj}.{tmin}; \
                 the extension should load, but a matching nvcc is safer",
                path.display(),
                version.0,
                version.1,
                torch.version
            ));
        }
    }

    // nvcc lives in <cuda>/bin; headers and libraries beside it (lib64 on system installs).
    let root = path
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let lib_dir = ["lib64", "lib"]
        .iter()
        .map(|d| root.join(d))
        .find(|d| d.join(format!("libcudart.so.{}", version.0)).exists())
        .unwrap_or_else(|| root.join("lib"));
    Ok(Nvcc {
        path,
        origin,
        version,
        id,
        supported,
        include_dir: root.join("include"),
        lib_dir,
        warnings,
    })
}

/// `Cuda compilation tools, release 13.2, V13.2.86` → `((13, 2), that line)`.
fn parse_version(text: &str) -> Option<((u32, u32), String)> {
    let line = text.lines().find(|l| l.contains("release"))?;
    let after = line.split("release").nth(1)?.trim();
    let number = after.split(',').next()?.trim();
    Some((parse_major_minor(number)?, line.trim().to_string()))
}

/// `compute_75\ncompute_80\n…` → capabilities 7.5, 8.0, …
fn parse_gpu_archs(text: &str) -> Vec<Capability> {
    let mut caps: Vec<Capability> = text
        .split_whitespace()
        .filter_map(Capability::from_nvcc_name)
        .map(|c| c.family())
        .collect();
    caps.sort();
    caps.dedup();
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvcc_version_line_is_parsed() {
        let text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.2, V13.2.86\nBuild cuda_13.2.r13.2/compiler.37953736_0\n";
        let (v, id) = parse_version(text).unwrap();
        assert_eq!(v, (13, 2));
        assert_eq!(id, "Cuda compilation tools, release 13.2, V13.2.86");
    }

    #[test]
    fn gpu_arch_list_becomes_sorted_capabilities() {
        let caps =
            parse_gpu_archs("compute_75\ncompute_80\ncompute_90\ncompute_100\ncompute_120\n");
        let shown: Vec<String> = caps.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["7.5", "8.0", "9.0", "10.0", "12.0"]);
    }
}
