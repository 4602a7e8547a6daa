//! Parsing of the enumerated values of build.toml: CUDA capabilities, dtypes, backends and
//! kernel `depends`.
//!
//! These are pure: whether *this* nvcc can target a capability is the planner's question
//! (`nvcc --list-gpu-arch`), not config's.

use std::fmt;
use std::str::FromStr;

use super::model::{Backend, Capability, DType, Dependency};
use super::suggest;
use crate::hint::Hint;

/// Every real CUDA compute capability (Kepler's 3.5 and newer), as `(major, minor)`. Whether the
/// installed nvcc still targets one is the planner's question.
pub const KNOWN_CAPABILITIES: [(u32, u32); 23] = [
    (3, 5),
    (3, 7),
    (5, 0),
    (5, 2),
    (5, 3),
    (6, 0),
    (6, 1),
    (6, 2),
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 8),
    (8, 9),
    (9, 0),
    (10, 0),
    (10, 1),
    (10, 3),
    (11, 0),
    (12, 0),
    (12, 1),
];

/// Why a string is not a CUDA capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseCapabilityError {
    pub input: String,
    pub reason: CapabilityProblem,
}

/// The ways a capability string can be wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapabilityProblem {
    /// Not `major.minor[a|f]`.
    Syntax,
    /// nvcc's spelling (`sm_90a`) instead of build.toml's (`9.0a`).
    NvccName(String),
    /// `9.0+PTX` (TORCH_CUDA_ARCH_LIST style).
    Ptx(String),
    /// Well-formed but no GPU has it.
    Unknown,
    /// A suffix the capability does not have (`8.0a`).
    Suffix,
}

impl fmt::Display for ParseCapabilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            CapabilityProblem::Unknown | CapabilityProblem::Suffix => {
                write!(f, "unknown CUDA capability `{}`", self.input)
            }
            _ => write!(f, "invalid CUDA capability `{}`", self.input),
        }
    }
}

impl std::error::Error for ParseCapabilityError {}

impl Hint for ParseCapabilityError {
    fn hint(&self) -> Option<String> {
        Some(match &self.reason {
            CapabilityProblem::Syntax => {
                let guess = self
                    .input
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|m| KNOWN_CAPABILITIES.iter().any(|(major, _)| major == m))
                    .map(|m| format!("did you mean `{m}.0`? "))
                    .unwrap_or_default();
                format!(
                    "{guess}write `major.minor` with an optional `a` or `f` suffix, e.g. `9.0` or `9.0a`"
                )
            }
            CapabilityProblem::NvccName(c) => {
                format!("write `{c}`: build.toml uses `major.minor`, not nvcc's `sm_XY` names")
            }
            CapabilityProblem::Ptx(c) => format!(
                "write `{c}`: kbuild embeds PTX for the newest capability of the matrix by itself"
            ),
            CapabilityProblem::Unknown => format!("known capabilities: {}", known_list()),
            CapabilityProblem::Suffix => "the `a` suffix exists for 9.0 and newer, `f` for 10.0 \
                                          and newer"
                .to_string(),
        })
    }
}

fn known_list() -> String {
    KNOWN_CAPABILITIES
        .iter()
        .map(|(a, b)| format!("{a}.{b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Capability {
    /// Whether `major.minor` is in `KNOWN_CAPABILITIES` (ignoring the suffix).
    pub fn is_known(&self) -> bool {
        KNOWN_CAPABILITIES.contains(&(self.major, self.minor))
    }
}

/// `9` and `0` of `9.0`, `Some('a')` of `9.0a`; `None` when the text is not of that shape.
fn split_capability(s: &str) -> Option<(u32, u32, Option<char>)> {
    let (major, rest) = s.split_once('.')?;
    let (minor, suffix) = match rest.strip_suffix(['a', 'f']) {
        Some(m) => (m, rest.chars().last()),
        None => (rest, None),
    };
    let digits = |t: &str| !t.is_empty() && t.len() <= 9 && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return None;
    }
    Some((major.parse().ok()?, minor.parse().ok()?, suffix))
}

/// `sm_90a` / `compute_90` / `sm90` → `9.0a` / `9.0` (the last digit is the minor).
fn from_nvcc_name(s: &str) -> Option<String> {
    let lower = s.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("sm_")
        .or_else(|| lower.strip_prefix("compute_"))
        .or_else(|| lower.strip_prefix("sm"))?;
    let (digits, suffix) = match rest.strip_suffix(['a', 'f']) {
        Some(d) => (d, &rest[d.len()..]),
        None => (rest, ""),
    };
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some(format!("{}.{minor}{suffix}", major.trim_start_matches('0')))
}

impl Capability {
    /// Parse the shape `major.minor[a|f]` only: `11.8` passes, `sm_90` does not. HF's builder
    /// keeps such entries and drops them when it intersects the list with nvcc's, so a kernel
    /// list may hold them; `exists` tells them apart.
    pub fn parse_shape(s: &str) -> Result<Capability, ParseCapabilityError> {
        let err = |reason| ParseCapabilityError {
            input: s.to_string(),
            reason,
        };
        if let Some(base) = s
            .strip_suffix("+PTX")
            .or_else(|| s.strip_suffix("+ptx"))
            .filter(|b| split_capability(b).is_some())
        {
            return Err(err(CapabilityProblem::Ptx(base.to_string())));
        }
        let Some((major, minor, suffix)) = split_capability(s) else {
            return Err(err(match from_nvcc_name(s) {
                Some(c) => CapabilityProblem::NvccName(c),
                None => CapabilityProblem::Syntax,
            }));
        };
        Ok(Capability {
            major,
            minor,
            suffix,
        })
    }

    /// Whether some GPU has this capability: known `major.minor`, and a suffix it can carry.
    pub fn exists(&self) -> Result<(), ParseCapabilityError> {
        let err = |reason| ParseCapabilityError {
            input: self.to_string(),
            reason,
        };
        if !self.is_known() {
            return Err(err(CapabilityProblem::Unknown));
        }
        match self.suffix {
            Some('a') if self.major < 9 => Err(err(CapabilityProblem::Suffix)),
            Some('f') if self.major < 10 => Err(err(CapabilityProblem::Suffix)),
            _ => Ok(()),
        }
    }
}

impl FromStr for Capability {
    type Err = ParseCapabilityError;

    /// Parse `9.0`, `9.0a` or `10.0f`; only real capabilities (`KNOWN_CAPABILITIES`) pass.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let cap = Capability::parse_shape(s)?;
        cap.exists().map_err(|e| ParseCapabilityError {
            input: s.to_string(),
            ..e
        })?;
        Ok(cap)
    }
}

/// A dtype name that is not `float32`, `float16` or `bfloat16`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseDTypeError {
    pub input: String,
}

impl fmt::Display for ParseDTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown dtype `{}`", self.input)
    }
}

impl std::error::Error for ParseDTypeError {}

impl Hint for ParseDTypeError {
    fn hint(&self) -> Option<String> {
        let names: Vec<&str> = DType::ALL.iter().map(|d| d.as_str()).collect();
        let alias = match self.input.to_ascii_lowercase().as_str() {
            "fp32" | "f32" | "float" | "torch.float32" => Some("float32"),
            "fp16" | "f16" | "half" | "torch.float16" => Some("float16"),
            "bf16" | "bfloat" | "torch.bfloat16" => Some("bfloat16"),
            _ => None,
        };
        Some(match alias {
            Some(a) => format!(
                "did you mean `{a}`? valid dtypes: {}",
                suggest::list(&names)
            ),
            None => suggest::did_you_mean(&self.input, &names, "dtypes"),
        })
    }
}

impl FromStr for DType {
    type Err = ParseDTypeError;

    /// Parse a torch dtype name: `float32`, `float16` or `bfloat16`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| ParseDTypeError {
                input: s.to_string(),
            })
    }
}

impl Backend {
    /// Every backend name build.toml knows, in `Backend` order.
    pub const ALL: [Backend; 8] = [
        Backend::Cann,
        Backend::Cpu,
        Backend::Cuda,
        Backend::Metal,
        Backend::Neuron,
        Backend::Rocm,
        Backend::Tpu,
        Backend::Xpu,
    ];
}

/// A backend name that is not one of `Backend::ALL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseBackendError {
    pub input: String,
}

impl fmt::Display for ParseBackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown backend `{}`", self.input)
    }
}

impl std::error::Error for ParseBackendError {}

impl Hint for ParseBackendError {
    fn hint(&self) -> Option<String> {
        let names: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
        Some(suggest::did_you_mean(&self.input, &names, "backends"))
    }
}

impl FromStr for Backend {
    type Err = ParseBackendError;

    /// Parse a backend name as build.toml writes it (`cuda`, `cpu`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| ParseBackendError {
                input: s.to_string(),
            })
    }
}

/// Every `depends` name kernel-builder knows (kernels-data at HEAD).
pub const DEPENDENCY_NAMES: [&str; 11] = [
    "cutlass_2_10",
    "cutlass_3_5",
    "cutlass_3_6",
    "cutlass_3_8",
    "cutlass_3_9",
    "cutlass_4_0",
    "cutlass_4_4",
    "cutlass_4_5",
    "metal-cpp",
    "sycl_tla",
    "torch",
];

/// A `depends` entry that is not in `DEPENDENCY_NAMES`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dependency `{input}`")]
pub struct ParseDependencyError {
    pub input: String,
}

impl Hint for ParseDependencyError {
    fn hint(&self) -> Option<String> {
        Some(suggest::did_you_mean(
            &self.input,
            &DEPENDENCY_NAMES,
            "dependencies",
        ))
    }
}

impl FromStr for Dependency {
    type Err = ParseDependencyError;

    /// Parse a name of `DEPENDENCY_NAMES` (`cutlass_4_5`, `torch`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseDependencyError {
            input: s.to_string(),
        };
        if !DEPENDENCY_NAMES.contains(&s) {
            return Err(err());
        }
        Ok(match s {
            "torch" => Dependency::Torch,
            "metal-cpp" => Dependency::MetalCpp,
            "sycl_tla" => Dependency::SyclTla,
            cutlass => {
                let version = cutlass.strip_prefix("cutlass_").ok_or_else(err)?;
                let (major, minor) = version.split_once('_').ok_or_else(err)?;
                Dependency::Cutlass {
                    major: major.parse().map_err(|_| err())?,
                    minor: minor.parse().map_err(|_| err())?,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(s: &str) -> Capability {
        s.parse().unwrap()
    }

    fn problem(s: &str) -> CapabilityProblem {
        s.parse::<Capability>().unwrap_err().reason
    }

    #[test]
    fn capability_parses_major_minor_and_suffix() {
        assert_eq!(
            cap("9.0a"),
            Capability {
                major: 9,
                minor: 0,
                suffix: Some('a')
            }
        );
        assert_eq!(cap("12.1").to_string(), "12.1");
        assert_eq!(cap("10.0f").sm(), "100f");
        assert!(cap("8.0") < cap("9.0"));
        assert!(cap("9.0") < cap("10.0"));
    }

    #[test]
    fn every_known_capability_round_trips() {
        for (major, minor) in KNOWN_CAPABILITIES {
            let text = format!("{major}.{minor}");
            assert_eq!(cap(&text).to_string(), text);
        }
    }

    #[test]
    fn capability_rejects_bad_syntax_with_a_hint() {
        assert_eq!(problem("9"), CapabilityProblem::Syntax);
        assert_eq!(problem("abc"), CapabilityProblem::Syntax);
        assert_eq!(problem(""), CapabilityProblem::Syntax);
        assert_eq!(problem("9.0b"), CapabilityProblem::Syntax);
        assert_eq!(problem(" 9.0"), CapabilityProblem::Syntax);
        let err = "9".parse::<Capability>().unwrap_err();
        assert!(err.hint().unwrap().starts_with("did you mean `9.0`?"));
    }

    #[test]
    fn capability_translates_nvcc_names() {
        assert_eq!(problem("sm_90"), CapabilityProblem::NvccName("9.0".into()));
        assert_eq!(
            problem("sm_100a"),
            CapabilityProblem::NvccName("10.0a".into())
        );
        assert_eq!(
            problem("compute_75"),
            CapabilityProblem::NvccName("7.5".into())
        );
        assert_eq!(problem("9.0+PTX"), CapabilityProblem::Ptx("9.0".into()));
    }

    #[test]
    fn capability_rejects_capabilities_no_gpu_has() {
        assert_eq!(problem("11.8"), CapabilityProblem::Unknown);
        assert_eq!(problem("99999.0"), CapabilityProblem::Unknown);
        assert_eq!(problem("9.5"), CapabilityProblem::Unknown);
        assert_eq!(problem("8.0a"), CapabilityProblem::Suffix);
        assert_eq!(problem("9.0f"), CapabilityProblem::Suffix);
        assert!(cap("10.0f").is_known());
    }

    #[test]
    fn parse_shape_accepts_capabilities_no_gpu_has() {
        let c = Capability::parse_shape("11.8").unwrap();
        assert_eq!(c.exists().unwrap_err().reason, CapabilityProblem::Unknown);
        assert!(Capability::parse_shape("5.0").unwrap().exists().is_ok());
        assert!(Capability::parse_shape("sm_90").is_err());
    }

    #[test]
    fn dependency_names_round_trip_and_cutlass_carries_its_release() {
        for name in DEPENDENCY_NAMES {
            assert_eq!(name.parse::<Dependency>().unwrap().to_string(), name);
        }
        assert_eq!(
            "cutlass_4_5".parse::<Dependency>(),
            Ok(Dependency::Cutlass { major: 4, minor: 5 })
        );
        let err = "cutlass_4.5".parse::<Dependency>().unwrap_err();
        assert!(
            err.hint()
                .unwrap()
                .starts_with("did you mean `cutlass_4_5`?")
        );
    }

    #[test]
    fn dtype_parses_torch_names_and_suggests_for_aliases() {
        assert_eq!("bfloat16".parse::<DType>(), Ok(DType::BFloat16));
        let err = "fp16".parse::<DType>().unwrap_err();
        assert!(err.hint().unwrap().starts_with("did you mean `float16`?"));
        let err = "bfloat61".parse::<DType>().unwrap_err();
        assert!(err.hint().unwrap().starts_with("did you mean `bfloat16`?"));
        assert!("int8".parse::<DType>().is_err());
    }

    #[test]
    fn backend_parses_and_suggests() {
        assert_eq!("cuda".parse::<Backend>(), Ok(Backend::Cuda));
        let err = "cuda2".parse::<Backend>().unwrap_err();
        assert!(err.hint().unwrap().starts_with("did you mean `cuda`?"));
    }
}
