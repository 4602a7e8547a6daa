//! Which toolchain to provision: a torch version and a compute (CUDA version or cpu), the
//! packages that make it, and the name its directory and lock entry carry.

use super::InstallError;

/// The `cuda-toolkit` release each torch minor's PyPI wheels were built with (torch's
/// `nvidia-*` dependencies pin these). Keep in step with PyPI when a torch is released.
const CUDA_TOOLKIT: &[(&str, &str)] = &[
    ("2.12", "13.0.2"),
    ("2.13", "13.0.3"),
    ("2.14", "13.0.3"),
    ("2.15", "13.2.2"),
];

/// The extras that bring nvcc, the CCCL headers and cuobjdump (`check` reads SASS with it).
const CUDA_TOOLKIT_EXTRAS: &str = "nvcc,cccl,cuobjdump";

/// What a toolchain compiles for besides the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compute {
    Cpu,
    Cuda { major: u32, minor: u32 },
}

impl Compute {
    /// `cpu` or `cu130`, as in variant names.
    pub fn tag(self) -> String {
        match self {
            Compute::Cpu => "cpu".into(),
            Compute::Cuda { major, minor } => format!("cu{major}{minor}"),
        }
    }
}

/// A toolchain asked for: `--torch 2.14 [--cuda 13.0 | --cpu]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolchainSpec {
    /// As given: `2.14` (newest patch) or `2.14.1` (exact).
    pub torch: String,
    pub compute: Compute,
}

impl ToolchainSpec {
    /// Parse `--torch` and `--cuda`/`--cpu`; without either, the CUDA PyPI's torch is built for.
    pub fn new(torch: &str, cuda: Option<&str>, cpu: bool) -> Result<Self, InstallError> {
        let torch = torch.trim();
        let parts: Vec<&str> = torch.split('.').collect();
        if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.parse::<u32>().is_err()) {
            return Err(InstallError::BadVersion {
                option: "--torch",
                value: torch.to_string(),
            });
        }
        let compute = match (cuda, cpu) {
            (_, true) => Compute::Cpu,
            (Some(cuda), false) => parse_cuda(cuda)?,
            (None, false) => {
                let pin = toolkit_pin(&major_minor(torch))?;
                parse_cuda(pin)?
            }
        };
        Ok(ToolchainSpec {
            torch: torch.to_string(),
            compute,
        })
    }

    /// `2.14` for `2.14.1`.
    pub fn torch_minor(&self) -> String {
        major_minor(&self.torch)
    }

    /// `torch2.14-cu130`: the directory under the toolchains dir and the lock entry's name.
    pub fn name(&self) -> String {
        format!("torch{}-{}", self.torch_minor(), self.compute.tag())
    }

    /// The requirements to install: torch, and the CUDA toolkit that matches it. CUDA 12 has no
    /// nvcc on PyPI, so it is allowed only with another index (the user brings nvcc).
    pub fn requirements(&self, index_url: Option<&str>) -> Result<Vec<String>, InstallError> {
        let torch = if self.torch.split('.').count() == 3 {
            format!("torch=={}", self.torch)
        } else {
            format!("torch=={}.*", self.torch)
        };
        let mut reqs = vec![torch];
        if let Compute::Cuda { major, minor } = self.compute {
            let asked = format!("{major}.{minor}");
            if major < 13 {
                if index_url.is_none() {
                    return Err(InstallError::NoPypiNvcc { cuda: asked });
                }
            } else {
                let pin = toolkit_pin(&self.torch_minor())?;
                if major_minor(pin) != asked {
                    return Err(InstallError::CudaMismatch {
                        torch: self.torch.clone(),
                        needs: major_minor(pin),
                        asked,
                    });
                }
                reqs.push(format!("cuda-toolkit[{CUDA_TOOLKIT_EXTRAS}]=={pin}"));
            }
        }
        Ok(reqs)
    }
}

fn toolkit_pin(torch_minor: &str) -> Result<&'static str, InstallError> {
    CUDA_TOOLKIT
        .iter()
        .find(|(t, _)| *t == torch_minor)
        .map(|(_, pin)| *pin)
        .ok_or_else(|| InstallError::UnknownTorch {
            torch: torch_minor.to_string(),
            known: CUDA_TOOLKIT
                .iter()
                .map(|(t, _)| *t)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

fn parse_cuda(value: &str) -> Result<Compute, InstallError> {
    let bad = || InstallError::BadVersion {
        option: "--cuda",
        value: value.to_string(),
    };
    let mut parts = value.trim().split('.');
    let major = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let minor = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    Ok(Compute::Cuda { major, minor })
}

/// `2.14` for `2.14`, `2.14.1` or `2.14.1+cu130`.
pub fn major_minor(version: &str) -> String {
    version
        .split(['+', '.'])
        .take(2)
        .collect::<Vec<_>>()
        .join(".")
}

/// A requirement's normalized project name: `cuda-toolkit` for `cuda_toolkit[nvcc]==13.0.3`.
pub fn requirement_name(requirement: &str) -> String {
    let end = requirement
        .find(|c: char| "[=<>!~;@ ".contains(c))
        .unwrap_or(requirement.len());
    requirement[..end]
        .trim()
        .to_lowercase()
        .replace(['_', '.'], "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_without_cuda_gets_the_toolkit_its_wheels_need() {
        let spec = ToolchainSpec::new("2.14", None, false).unwrap();
        assert_eq!(spec.name(), "torch2.14-cu130");
        assert_eq!(
            spec.requirements(None).unwrap(),
            ["torch==2.14.*", "cuda-toolkit[nvcc,cccl,cuobjdump]==13.0.3"]
        );
        let exact = ToolchainSpec::new("2.15.0", None, false).unwrap();
        assert_eq!(exact.name(), "torch2.15-cu132");
        assert_eq!(exact.requirements(None).unwrap()[0], "torch==2.15.0");
    }

    #[test]
    fn a_cuda_other_than_the_wheels_is_refused_naming_the_right_one() {
        let spec = ToolchainSpec::new("2.15", Some("13.0"), false).unwrap();
        let err = spec.requirements(None).unwrap_err();
        assert!(err.to_string().contains("CUDA 13.2"), "{err}");
    }

    #[test]
    fn cuda_12_needs_another_index_and_then_installs_no_toolkit() {
        let spec = ToolchainSpec::new("2.13", Some("12.6"), false).unwrap();
        let err = spec.requirements(None).unwrap_err();
        let hint = crate::hint::Hint::hint(&err).unwrap();
        assert!(
            hint.contains("--index-url") && hint.contains("--nvcc"),
            "{hint}"
        );
        let url = "https://download.pytorch.org/whl/cu126";
        assert_eq!(spec.requirements(Some(url)).unwrap(), ["torch==2.13.*"]);
        assert_eq!(spec.name(), "torch2.13-cu126");
    }

    #[test]
    fn cpu_toolchains_install_torch_only() {
        let spec = ToolchainSpec::new("2.14", None, true).unwrap();
        assert_eq!(spec.name(), "torch2.14-cpu");
        assert_eq!(spec.requirements(None).unwrap(), ["torch==2.14.*"]);
    }

    #[test]
    fn malformed_and_unknown_versions_are_errors() {
        assert!(ToolchainSpec::new("two", None, false).is_err());
        assert!(ToolchainSpec::new("2.14", Some("13"), false).is_err());
        let err = ToolchainSpec::new("2.99", None, false).unwrap_err();
        assert!(err.to_string().contains("2.12, 2.13, 2.14, 2.15"), "{err}");
    }

    #[test]
    fn requirement_names_are_normalized() {
        assert_eq!(
            requirement_name("cuda_toolkit[nvcc]==13.0.3"),
            "cuda-toolkit"
        );
        assert_eq!(requirement_name("Kernels==0.17.2"), "kernels");
        assert_eq!(requirement_name("numpy"), "numpy");
    }
}
