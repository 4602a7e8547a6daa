//! The CUDA capabilities one build is asked for (`--cuda-capabilities LIST|native`,
//! `KBUILD_CUDA_CAPABILITIES`): parsing the request, finding this machine's GPUs for
//! `native`, and narrowing each kernel's capabilities to the request as kernel-builder's loose
//! intersection does; and what of a project can run on this machine (the dev loop).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use super::PlanError;
use crate::config::{
    Backend, Capability, CapabilityProblem, Framework, KNOWN_CAPABILITIES, ParseCapabilityError,
    Project,
};
use crate::process::{CommandSpec, run};

/// Which CUDA capabilities a build compiles, before `native` is looked up.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CudaCapabilities {
    /// The project's whole matrix (build.toml, else kernel-builder's default set).
    #[default]
    All,
    /// The capabilities of the GPUs of this machine.
    Native,
    /// These capabilities (kept sorted, no duplicates).
    List(Vec<Capability>),
}

impl FromStr for CudaCapabilities {
    type Err = CapabilityArgError;

    /// `native`, `all`, or a comma-separated list such as `8.0,9.0a`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "native" => return Ok(CudaCapabilities::Native),
            "all" | "" => return Ok(CudaCapabilities::All),
            _ => {}
        }
        let mut caps = BTreeSet::new();
        for item in s.split([',', ';', ' ']).filter(|i| !i.is_empty()) {
            let cap = item.parse::<Capability>().map_err(CapabilityArgError::of)?;
            caps.insert(cap);
        }
        Ok(CudaCapabilities::List(caps.into_iter().collect()))
    }
}

/// An entry of `--cuda-capabilities` that is not a capability, with what to write instead:
/// clap prints only the message, so the fix is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityArgError {
    pub input: String,
    /// The capability meant, when the entry is another spelling of a real one (`sm_80`, `80`,
    /// `8.0+PTX`).
    pub meant: Option<String>,
}

impl CapabilityArgError {
    fn of(e: ParseCapabilityError) -> Self {
        let meant = match &e.reason {
            CapabilityProblem::NvccName(c) | CapabilityProblem::Ptx(c) => Some(c.clone()),
            // `80`, `90a`, `100`: nvcc's digits without `sm_`.
            CapabilityProblem::Syntax => {
                Capability::from_digits(e.input.trim()).map(|c| c.to_string())
            }
            CapabilityProblem::Unknown | CapabilityProblem::Suffix => None,
        };
        let meant = meant.filter(|c| c.parse::<Capability>().is_ok());
        CapabilityArgError {
            input: e.input,
            meant,
        }
    }
}

impl fmt::Display for CapabilityArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not a CUDA capability: ", self.input)?;
        match &self.meant {
            Some(meant) => write!(f, "did you mean `{meant}`?"),
            None => {
                let known: Vec<String> = KNOWN_CAPABILITIES
                    .iter()
                    .map(|(a, b)| format!("{a}.{b}"))
                    .collect();
                write!(
                    f,
                    "write `major.minor` (with `a` or `f` for 9.0a, 10.0f…), one of {}, or \
                     `native`",
                    known.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for CapabilityArgError {}

impl fmt::Display for CudaCapabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaCapabilities::All => f.write_str("all"),
            CudaCapabilities::Native => f.write_str("native"),
            CudaCapabilities::List(caps) => f.write_str(&join(caps)),
        }
    }
}

impl CudaCapabilities {
    /// The capabilities to build, `None` for the whole matrix; `native` asks `nvidia-smi` (no
    /// torch import, no CUDA context) for the GPUs of this machine.
    pub fn resolve(&self) -> Result<Option<Vec<Capability>>, PlanError> {
        match self {
            CudaCapabilities::All => Ok(None),
            CudaCapabilities::List(caps) => Ok(Some(caps.clone())),
            CudaCapabilities::Native => native_capabilities().map(Some),
        }
    }
}

/// What can run on this machine, for the dev loop: with a GPU (`nvidia-smi` answers) every
/// backend, CUDA for this machine's capabilities (`native`); without one, cpu alone when the
/// project has it. `None` when that is what the project builds anyway (no cuda backend, or
/// nothing compiled).
pub fn runnable_here(project: &Project) -> Option<RunnableHere> {
    let has = |b: Backend| project.general.backends.contains(&b);
    if !matches!(project.framework, Framework::Torch(_)) || !has(Backend::Cuda) {
        return None;
    }
    Some(match native_capabilities() {
        Ok(caps) => RunnableHere {
            backends: None,
            note: format!(
                "note: building cuda for this machine's GPU ({}) only; pass \
                 `--cuda-capabilities all` for the whole CUDA matrix",
                join(&caps)
            ),
            capabilities: Some(caps),
        },
        Err(_) if has(Backend::Cpu) => RunnableHere {
            backends: Some(vec![Backend::Cpu]),
            capabilities: None,
            note: "note: building cpu only (no GPU found); pass `--backend cuda` for the CUDA \
                   matrix"
                .into(),
        },
        Err(_) => RunnableHere {
            backends: None,
            capabilities: None,
            note: "note: no GPU found, and build.toml lists no cpu backend: building the whole \
                   CUDA matrix, which cannot run here"
                .into(),
        },
    })
}

/// What [`runnable_here`] keeps, and the line that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnableHere {
    /// Only these backends (`None`: as selected).
    pub backends: Option<Vec<Backend>>,
    /// CUDA for these capabilities only: this machine's GPUs' (asked once, here).
    pub capabilities: Option<Vec<Capability>>,
    pub note: String,
}

/// The compute capabilities of this machine's GPUs, oldest first, from
/// `nvidia-smi --query-gpu=compute_cap --format=csv,noheader` (the driver's tool: it needs no
/// torch and no CUDA toolkit).
pub fn native_capabilities() -> Result<Vec<Capability>, PlanError> {
    let mut spec = CommandSpec::new("nvidia-smi");
    spec.args(["--query-gpu=compute_cap", "--format=csv,noheader"]);
    let out = run(&spec).map_err(|e| PlanError::NoGpu {
        why: e.to_string().lines().next().unwrap_or_default().to_string(),
    })?;
    parse_compute_caps(&String::from_utf8_lossy(&out.stdout))
}

/// One `major.minor` per line, one line per GPU.
fn parse_compute_caps(text: &str) -> Result<Vec<Capability>, PlanError> {
    let mut caps = BTreeSet::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let cap = Capability::parse_shape(line).map_err(|_| PlanError::NoGpu {
            why: format!("`nvidia-smi` printed `{line}`, not a compute capability"),
        })?;
        caps.insert(cap);
    }
    if caps.is_empty() {
        return Err(PlanError::NoGpu {
            why: "`nvidia-smi` lists no GPU".into(),
        });
    }
    Ok(caps.into_iter().collect())
}

/// `8.0, 9.0`.
pub(super) fn join(caps: &[Capability]) -> String {
    caps.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(s: &str) -> Capability {
        s.parse().unwrap()
    }

    #[test]
    fn cuda_capabilities_parse_native_all_and_lists() {
        assert_eq!("native".parse(), Ok(CudaCapabilities::Native));
        assert_eq!("all".parse(), Ok(CudaCapabilities::All));
        assert_eq!(
            "9.0,8.0 8.0".parse(),
            Ok(CudaCapabilities::List(vec![cap("8.0"), cap("9.0")]))
        );
        assert!("sm_90".parse::<CudaCapabilities>().is_err());
    }

    #[test]
    fn other_spellings_of_a_capability_say_which_one_was_meant() {
        let meant = |s: &str| s.parse::<CudaCapabilities>().unwrap_err().meant;
        assert_eq!(meant("sm_80"), Some("8.0".into()));
        assert_eq!(meant("80"), Some("8.0".into()));
        assert_eq!(meant("8.0+PTX"), Some("8.0".into()));
        assert_eq!(meant("9.0,sm_90a"), Some("9.0a".into()));
        assert_eq!(meant("100"), Some("10.0".into()));
        assert_eq!(meant("8.1"), None);
        let err = "8.1".parse::<CudaCapabilities>().unwrap_err();
        assert!(err.to_string().contains("one of 3.5, 3.7"), "{err}");
        assert_eq!(
            "80".parse::<CudaCapabilities>().unwrap_err().to_string(),
            "`80` is not a CUDA capability: did you mean `8.0`?"
        );
    }

    #[test]
    fn nvidia_smi_output_gives_each_gpus_capability_once() {
        let got = parse_compute_caps("9.0\n8.6\n9.0\n").unwrap();
        assert_eq!(join(&got), "8.6, 9.0");
        assert!(matches!(
            parse_compute_caps(""),
            Err(PlanError::NoGpu { .. })
        ));
        assert!(matches!(
            parse_compute_caps("[N/A]\n"),
            Err(PlanError::NoGpu { .. })
        ));
    }
}
