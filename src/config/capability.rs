//! The one codec of CUDA capabilities: every spelling kbuild reads or writes goes through
//! `Capability::decode` (in) and the `*_name` methods (out).
//!
//! | spelling | where | in | out |
//! |---|---|---|---|
//! | `9.0a` | build.toml, `--cuda-capabilities`, `nvidia-smi`, metadata.json | `parse_shape`, `FromStr` | `Display` |
//! | `9.0+PTX` | metadata.json `backend.archs`, `TORCH_CUDA_ARCH_LIST` | `parse_arch` | `arch_name` |
//! | `sm_90a`, `compute_90a` | nvcc's `-gencode`, `--list-gpu-arch`, cuobjdump's cubin names | `from_nvcc_name` | `sm_name`, `compute_name` |
//! | `90a` | nvcc's digits | `from_digits` | `sm` |
//! | `900` | `__CUDA_ARCH__` (nvcc's device preprocessing) | `from_cuda_arch` | |
//!
//! These are pure: whether *this* nvcc can target a capability is the planner's question
//! (`nvcc --list-gpu-arch`), not config's.

use std::fmt;
use std::str::FromStr;

use crate::hint::Hint;

/// A CUDA compute capability such as `9.0` or `9.0a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Capability {
    pub major: u32,
    pub minor: u32,
    /// Architecture-specific suffix (`a` or `f`), as in `9.0a`.
    pub suffix: Option<char>,
}

/// How a capability was spelled, as `Capability::decode` found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// `9.0a`: build.toml's.
    Dotted,
    /// `9.0a+PTX`: kernel-builder's `archs` with the PTX embedded.
    DottedPtx,
    /// `sm_90a`, `compute_90a` or `sm90a`: nvcc's names.
    Nvcc,
    /// `90a`: nvcc's digits without a prefix (the last digit is the minor).
    Digits,
}

impl Capability {
    /// The one parser: any spelling of the table above, and which one it was; `None` when the
    /// text is none of them. Whether a GPU has the capability is `exists`'s question.
    pub fn decode(text: &str) -> Option<(Capability, Spelling)> {
        if let Some(base) = text
            .strip_suffix("+PTX")
            .or_else(|| text.strip_suffix("+ptx"))
        {
            let (cap, spelling) = Capability::decode(base)?;
            return (spelling == Spelling::Dotted).then_some((cap, Spelling::DottedPtx));
        }
        let (body, suffix) = match text.strip_suffix(['a', 'f']) {
            Some(body) => (body, text.chars().last()),
            None => (text, None),
        };
        let number = |t: &str| {
            let digits = !t.is_empty() && t.len() <= 9 && t.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| t.parse::<u32>().ok()).flatten()
        };
        let cap = |major, minor| Capability {
            major,
            minor,
            suffix,
        };
        if let Some((major, minor)) = body.split_once('.') {
            return Some((cap(number(major)?, number(minor)?), Spelling::Dotted));
        }
        let lower = body.to_ascii_lowercase();
        let (digits, spelling) = match ["sm_", "compute_", "sm"]
            .iter()
            .find_map(|p| lower.strip_prefix(p))
        {
            Some(rest) => (rest, Spelling::Nvcc),
            None => (lower.as_str(), Spelling::Digits),
        };
        if digits.len() < 2 || (spelling == Spelling::Digits && digits.len() > 3) {
            return None;
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        Some((cap(number(major)?, number(minor)?), spelling))
    }

    /// `sm_90a` / `compute_90` / `sm90` → `9.0a` / `9.0`.
    pub fn from_nvcc_name(text: &str) -> Option<Capability> {
        Capability::decode(text)
            .filter(|(_, s)| *s == Spelling::Nvcc)
            .map(|(c, _)| c)
    }

    /// `80` → `8.0`, `90a` → `9.0a`, `100` → `10.0` (the last digit is the minor, as in `sm_80`).
    pub fn from_digits(text: &str) -> Option<Capability> {
        Capability::decode(text)
            .filter(|(_, s)| *s == Spelling::Digits)
            .map(|(c, _)| c)
    }

    /// `__CUDA_ARCH__`'s value: `900` → `9.0`, `1000` → `10.0` (nvcc's digits and a `0`).
    pub fn from_cuda_arch(text: &str) -> Option<Capability> {
        Capability::from_digits(text.strip_suffix('0')?).filter(|c| c.suffix.is_none())
    }

    /// An entry of metadata.json's `backend.archs`: `9.0a` or `12.1+PTX` (with PTX: `true`).
    pub fn parse_arch(text: &str) -> Option<(Capability, bool)> {
        match Capability::decode(text)? {
            (c, Spelling::Dotted) => Some((c, false)),
            (c, Spelling::DottedPtx) => Some((c, true)),
            _ => None,
        }
    }

    /// `sm_90a`-style digits: `90a`.
    pub fn sm(&self) -> String {
        match self.suffix {
            Some(s) => format!("{}{}{}", self.major, self.minor, s),
            None => format!("{}{}", self.major, self.minor),
        }
    }

    /// nvcc's real architecture: `sm_90a`.
    pub fn sm_name(&self) -> String {
        format!("sm_{}", self.sm())
    }

    /// nvcc's virtual architecture: `compute_90a`.
    pub fn compute_name(&self) -> String {
        format!("compute_{}", self.sm())
    }

    /// kernel-builder's `archs` entry: `9.0`, or `12.1+PTX` when the PTX is embedded too.
    pub fn arch_name(&self, ptx: bool) -> String {
        if ptx {
            format!("{self}+PTX")
        } else {
            self.to_string()
        }
    }

    /// The capability without its arch-specific suffix: `9.0` of `9.0a`.
    pub fn family(&self) -> Capability {
        Capability {
            suffix: None,
            ..*self
        }
    }

    /// Whether `major.minor` is in `KNOWN_CAPABILITIES` (ignoring the suffix).
    pub fn is_known(&self) -> bool {
        KNOWN_CAPABILITIES.contains(&(self.major, self.minor))
    }

    /// Parse the shape `major.minor[a|f]` only: `11.8` passes, `sm_90` does not. HF's builder
    /// keeps such entries and drops them when it intersects the list with nvcc's, so a kernel
    /// list may hold them; `exists` tells them apart.
    pub fn parse_shape(s: &str) -> Result<Capability, ParseCapabilityError> {
        let err = |reason| ParseCapabilityError {
            input: s.to_string(),
            reason,
        };
        match Capability::decode(s) {
            Some((cap, Spelling::Dotted)) => Ok(cap),
            Some((cap, Spelling::DottedPtx)) => Err(err(CapabilityProblem::Ptx(cap.to_string()))),
            Some((cap, Spelling::Nvcc)) => Err(err(CapabilityProblem::NvccName(cap.to_string()))),
            Some((_, Spelling::Digits)) | None => Err(err(CapabilityProblem::Syntax)),
        }
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

/// A CUDA release, `(major, minor)`.
pub type Release = (u32, u32);

/// A capability's `(major, minor)`, the first CUDA release building it and the last one.
type NvccReleases = ((u32, u32), Option<Release>, Option<Release>);

/// The CUDA releases whose nvcc builds a capability: the first, and the last where a later one
/// dropped it (CUDA 12.0 dropped Kepler, 13.0 Maxwell, Pascal and Volta, and renamed 10.1 to
/// 11.0). `None` where kbuild does not know.
const NVCC_RELEASES: &[NvccReleases] = &[
    ((3, 5), None, Some((11, 8))),
    ((3, 7), None, Some((11, 8))),
    ((5, 0), None, Some((12, 9))),
    ((5, 2), None, Some((12, 9))),
    ((5, 3), None, Some((12, 9))),
    ((6, 0), None, Some((12, 9))),
    ((6, 1), None, Some((12, 9))),
    ((6, 2), None, Some((12, 9))),
    ((7, 0), None, Some((12, 9))),
    ((7, 2), None, Some((12, 9))),
    ((7, 5), Some((10, 0)), None),
    ((8, 0), Some((11, 0)), None),
    ((8, 6), Some((11, 1)), None),
    ((8, 7), Some((11, 4)), None),
    ((8, 9), Some((11, 8)), None),
    ((9, 0), Some((11, 8)), None),
    ((10, 0), Some((12, 8)), None),
    ((10, 1), Some((12, 8)), Some((12, 9))),
    ((10, 3), Some((12, 9)), None),
    ((11, 0), Some((13, 0)), None),
    ((12, 0), Some((12, 8)), None),
    ((12, 1), Some((12, 9)), None),
];

impl Capability {
    /// The CUDA releases whose nvcc builds this capability, as `(first, last)`: the suffix
    /// `a` needs CUDA 12.0, `f` 12.9. `None` for a bound kbuild does not know (or none).
    pub fn nvcc_releases(&self) -> (Option<Release>, Option<Release>) {
        let Some(&(_, first, last)) = NVCC_RELEASES
            .iter()
            .find(|(c, _, _)| *c == (self.major, self.minor))
        else {
            return (None, None);
        };
        let needs = match self.suffix {
            Some('a') => Some((12, 0)),
            Some('f') => Some((12, 9)),
            _ => None,
        };
        (first.max(needs), last)
    }
}

impl serde::Serialize for Capability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.suffix {
            Some(s) => write!(f, "{}.{}{}", self.major, self.minor, s),
            None => write!(f, "{}.{}", self.major, self.minor),
        }
    }
}

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
    fn every_spelling_decodes_to_the_same_capability() {
        let want = cap("9.0a");
        assert_eq!(Capability::from_nvcc_name("sm_90a"), Some(want));
        assert_eq!(Capability::from_nvcc_name("compute_90a"), Some(want));
        assert_eq!(Capability::from_nvcc_name("sm90a"), Some(want));
        assert_eq!(Capability::from_digits("90a"), Some(want));
        assert_eq!(Capability::parse_arch("9.0a"), Some((want, false)));
        assert_eq!(
            Capability::parse_arch("12.1+PTX"),
            Some((cap("12.1"), true))
        );
        assert_eq!(Capability::from_nvcc_name("sm_100f"), Some(cap("10.0f")));
        assert_eq!(Capability::from_digits("100"), Some(cap("10.0")));
        assert_eq!(Capability::from_digits("1000"), None);
        assert_eq!(Capability::from_cuda_arch("900"), Some(cap("9.0")));
        assert_eq!(Capability::from_cuda_arch("1000"), Some(cap("10.0")));
        assert_eq!(Capability::from_nvcc_name("9.0"), None);
        assert_eq!(Capability::parse_arch("sm_90+PTX"), None);
    }

    #[test]
    fn every_spelling_is_written_back_from_one_value() {
        let c = cap("9.0a");
        assert_eq!(
            [c.sm(), c.sm_name(), c.compute_name(), c.to_string()],
            ["90a", "sm_90a", "compute_90a", "9.0a"]
        );
        assert_eq!(cap("12.1").arch_name(true), "12.1+PTX");
        assert_eq!(c.family(), cap("9.0"));
    }
}
