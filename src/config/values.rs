//! Parsing of the enumerated values of build.toml: dtypes, backends and kernel `depends`
//! (CUDA capabilities: `capability.rs`).

use std::fmt;
use std::str::FromStr;

use super::model::{Backend, DType, Dependency};
use super::suggest;
use crate::hint::Hint;

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
