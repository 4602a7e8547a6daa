//! What a variant's directory name says: the torch it was built for, the C++ ABI, the compute
//! backend and the platform (`torch215-cxx11-cu132-x86_64-linux`), or a noarch backend
//! (`torch-cuda`). The name is the contract with `kernels`, which picks a variant by it; wheels
//! take their version and tags from it.

/// A parsed variant name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VariantName {
    /// A compiled variant: `torch<major><minor>-<abi>-<compute>-<arch>-<os>`.
    Compiled {
        /// Torch major and minor (`torch215` is 2.15: torch majors are single digits).
        torch: (u32, u32),
        /// `cxx11` or `cxx98`.
        abi: String,
        /// `cpu`, `cu132`, `rocm63`, `xpu`, `metal`, ...
        compute: String,
        /// `x86_64`, `aarch64`.
        arch: String,
        /// `linux`, `darwin`.
        os: String,
    },
    /// A variant built against torch's stable ABI, loaded with any torch at least as new as
    /// its target: `torch-stable-abi<major><minor>-<compute>-<arch>-<os>` (kernel-builder's
    /// `generate_build_name`).
    StableAbi {
        /// The stable-ABI target (`abi210` is torch 2.10).
        target: (u32, u32),
        compute: String,
        arch: String,
        os: String,
    },
    /// A pure-Python variant: `torch-<backend>` (`torch-universal` included).
    Noarch { backend: String },
}

impl VariantName {
    /// Parse a variant directory name; `None` when it follows neither form.
    pub fn parse(name: &str) -> Option<VariantName> {
        if let Some(rest) = name.strip_prefix("torch-stable-abi") {
            let (digits, rest) = rest.split_once('-')?;
            let torch = torch_digits(digits)?;
            let (compute, rest) = rest.split_once('-')?;
            let (arch, os) = rest.rsplit_once('-')?;
            if !is_word(compute) || !is_word(arch) || !is_word(os) {
                return None;
            }
            return Some(VariantName::StableAbi {
                target: torch,
                compute: compute.to_string(),
                arch: arch.to_string(),
                os: os.to_string(),
            });
        }
        if let Some(backend) = name.strip_prefix("torch-") {
            return is_word(backend).then(|| VariantName::Noarch {
                backend: backend.to_string(),
            });
        }
        let rest = name.strip_prefix("torch")?;
        let (digits, rest) = rest.split_once('-')?;
        let (major, minor) = torch_digits(digits)?;
        let (abi, rest) = rest.split_once('-')?;
        let (compute, rest) = rest.split_once('-')?;
        // The architecture may itself hold `_` (x86_64) but never `-`.
        let (arch, os) = rest.rsplit_once('-')?;
        let known_abi = abi == "cxx11" || abi == "cxx98";
        if !known_abi || !is_word(compute) || !is_word(arch) || !is_word(os) {
            return None;
        }
        Some(VariantName::Compiled {
            torch: (major, minor),
            abi: abi.to_string(),
            compute: compute.to_string(),
            arch: arch.to_string(),
            os: os.to_string(),
        })
    }
}

/// `215` → 2.15 (torch majors are single digits).
fn torch_digits(digits: &str) -> Option<(u32, u32)> {
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits[..1].parse().ok()?, digits[1..].parse().ok()?))
}

fn is_word(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_abi_names_give_the_target_compute_and_platform() {
        assert_eq!(
            VariantName::parse("torch-stable-abi210-cu132-x86_64-linux"),
            Some(VariantName::StableAbi {
                target: (2, 10),
                compute: "cu132".into(),
                arch: "x86_64".into(),
                os: "linux".into(),
            })
        );
        assert_eq!(
            VariantName::parse("torch-stable-abi2-cpu-x86_64-linux"),
            None
        );
    }

    #[test]
    fn compiled_names_give_torch_abi_compute_and_platform() {
        assert_eq!(
            VariantName::parse("torch215-cxx11-cu132-x86_64-linux"),
            Some(VariantName::Compiled {
                torch: (2, 15),
                abi: "cxx11".into(),
                compute: "cu132".into(),
                arch: "x86_64".into(),
                os: "linux".into(),
            })
        );
        assert!(matches!(
            VariantName::parse("torch27-cxx98-cpu-aarch64-linux"),
            Some(VariantName::Compiled { torch: (2, 7), .. })
        ));
    }

    #[test]
    fn noarch_names_give_their_backend() {
        assert_eq!(
            VariantName::parse("torch-universal"),
            Some(VariantName::Noarch {
                backend: "universal".into()
            })
        );
    }

    #[test]
    fn malformed_names_are_refused() {
        for name in [
            "",
            "relu",
            "torch-",
            "torch2-cxx11-cpu-x86_64-linux",
            "torch215-cxx14-cpu-x86_64-linux",
            "torch215-cxx11-cpu-x86_64",
            "torch215-cxx11-cpu-x86_64-linux/..",
            "torchab-cxx11-cpu-x86_64-linux",
        ] {
            assert_eq!(VariantName::parse(name), None, "{name}");
        }
    }
}
