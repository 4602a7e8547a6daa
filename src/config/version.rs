//! Dotted versions as build.toml writes them (`2.10`, `12.8`, `13`): Torch and CUDA bounds,
//! `cuda-minver`, the stable-ABI target.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use super::location::Location;

/// A version such as `12.8`. Compares like CMake's `VERSION_LESS`/`VERSION_GREATER`, which HF's
/// generated preamble uses for the bounds: a missing component is 0 (`13` == `13.0`, and CUDA
/// `13.2` is above `maxver = "13.0"`).
#[derive(Debug, Clone)]
pub struct Version {
    /// The numbers as written (`13.0` → `[13, 0]`).
    written: Vec<u64>,
    /// The text as written (trimmed), for messages.
    text: String,
    /// Where build.toml writes it (`None` for versions not read from build.toml); not part of
    /// comparisons.
    location: Option<Box<Location>>,
}

impl Version {
    /// The numbers as written, trailing zeros included (`13.0` → `[13, 0]`).
    pub fn components(&self) -> &[u64] {
        &self.written
    }

    /// The numbers without trailing zeros, as compared.
    fn normalized(&self) -> &[u64] {
        let keep = self
            .written
            .iter()
            .rposition(|&p| p != 0)
            .map_or(1, |i| i + 1);
        &self.written[..keep]
    }

    /// This version, as written at `location` in build.toml.
    pub fn at(mut self, location: Location) -> Self {
        self.location = Some(Box::new(location));
        self
    }

    /// Where build.toml writes this version, when it was read from there.
    pub fn location(&self) -> Option<&Location> {
        self.location.as_deref()
    }

    /// `major.minor` of the version (`12.8.1` → `(12, 8)`; a missing minor is 0). `written` is
    /// never empty: parsing rejects an empty string.
    pub fn major_minor(&self) -> (u64, u64) {
        let c = &self.written;
        (c[0], c.get(1).copied().unwrap_or(0))
    }
}

/// Why a string is not a version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version `{input}`")]
pub struct ParseVersionError {
    pub input: String,
}

impl FromStr for Version {
    type Err = ParseVersionError;

    /// Numbers separated by dots, surrounding whitespace ignored (as kernels-data reads them).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let err = || ParseVersionError {
            input: s.to_string(),
        };
        if text.is_empty() {
            return Err(err());
        }
        let mut written = Vec::new();
        for p in text.split('.') {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            written.push(p.parse::<u64>().map_err(|_| err())?);
        }
        Ok(Version {
            written,
            text: text.to_string(),
            location: None,
        })
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.normalized() == other.normalized()
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.normalized().cmp(other.normalized())
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn versions_compare_numerically_ignoring_trailing_zeros() {
        assert!(v("2.9") < v("2.10"));
        assert!(v("12.8") < v("13"));
        assert_eq!(v("13.0"), v("13"));
        assert_eq!(v(" 2.10 ").to_string(), "2.10");
        assert_eq!(v("12.8.1").major_minor(), (12, 8));
        assert_eq!(v("13").major_minor(), (13, 0));
        assert!(
            v("13.2") > v("13.0"),
            "CUDA 13.2 is above `maxver = \"13.0\"`"
        );
        assert!(v("13.0.1") > v("13.0"));
    }

    #[test]
    fn non_numeric_versions_are_rejected() {
        for bad in ["", "v2", "2.", "2..1", "2.x", "-1", "2.10+cu130"] {
            assert!(bad.parse::<Version>().is_err(), "{bad}");
        }
    }
}
