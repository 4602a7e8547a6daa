//! Reading archives (artifacts, wheels) without trusting them: entries are streamed and hashed
//! in blocks, never held whole, and the total unpacked size is capped, so that a small archive
//! cannot expand to fill memory or the disk (a 1 MiB gzip stream can hold 1 GiB of zeros).

use std::io::Read;
use std::path::Path;

use sha2::Digest as _;

use super::error::PackageError;

pub use super::error::MAX_UNPACKED_VAR;

/// The cap when the variable is not set: above any variant the Hub holds today (the largest
/// CUDA extensions are under 2 GiB), far below what a bomb expands to.
pub const DEFAULT_MAX_UNPACKED: u64 = 4 << 30;

/// How much one archive may unpack to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Bytes of all entries together, as their headers declare them and as they are read.
    pub max_total: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_total: DEFAULT_MAX_UNPACKED,
        }
    }
}

impl UnpackLimits {
    /// The cap from [`MAX_UNPACKED_VAR`] (`8G`, `512M`, `100000`: binary units), else the default.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<UnpackLimits, PackageError> {
        let Some(value) = env(MAX_UNPACKED_VAR).filter(|v| !v.trim().is_empty()) else {
            return Ok(UnpackLimits::default());
        };
        let max_total = parse_size(&value).ok_or_else(|| PackageError::Setting {
            name: MAX_UNPACKED_VAR,
            value: value.clone(),
            expected: "a size in bytes, or with a K, M or G suffix (`8G`)",
        })?;
        Ok(UnpackLimits { max_total })
    }
}

/// `123`, `64K`, `512M`, `8G` (binary units; a trailing `iB` or `B` is accepted).
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'K' | 'k') => (&t[..i], 10),
        (i, 'M' | 'm') => (&t[..i], 20),
        (i, 'G' | 'g') => (&t[..i], 30),
        (i, 'T' | 't') => (&t[..i], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift).filter(|n| *n > 0)
}

/// What one archive has unpacked so far, against its cap.
#[derive(Debug)]
pub struct Budget<'a> {
    archive: &'a Path,
    limits: UnpackLimits,
    used: u64,
}

impl<'a> Budget<'a> {
    pub fn new(archive: &'a Path, limits: UnpackLimits) -> Self {
        Budget {
            archive,
            limits,
            used: 0,
        }
    }

    /// Refuse `entry` when the size its header declares would pass the cap: a bomb is refused
    /// before a byte of it is inflated (what is read is still counted, headers can lie).
    pub fn declare(&self, entry: &str, bytes: u64) -> Result<(), PackageError> {
        if self.used.saturating_add(bytes) > self.limits.max_total {
            return Err(self.too_large(entry));
        }
        Ok(())
    }

    /// Take `bytes` for `entry`; past the cap the archive is refused.
    pub fn take(&mut self, entry: &str, bytes: u64) -> Result<(), PackageError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.limits.max_total {
            return Err(self.too_large(entry));
        }
        Ok(())
    }

    fn too_large(&self, entry: &str) -> PackageError {
        PackageError::TooLarge {
            archive: self.archive.to_path_buf(),
            entry: entry.to_string(),
            cap: self.limits.max_total,
        }
    }
}

/// The SHA-256 and SHA-512 of an entry, and its first bytes when asked to keep them.
pub struct Hashed {
    pub sha256: Vec<u8>,
    pub sha512: Vec<u8>,
    pub size: u64,
    /// The content, when it was no longer than the `keep` asked for.
    pub kept: Option<Vec<u8>>,
}

/// Where an entry being hashed is also written.
pub struct Sink<'a> {
    pub file: &'a mut std::fs::File,
    pub path: &'a Path,
}

/// Read `entry` to its end in blocks, hashing it, charging every block to `budget` and writing
/// it to `sink` if given; its content is kept only when it is at most `keep` bytes
/// (metadata.json, RECORD).
pub fn hash_entry(
    mut entry: impl Read,
    name: &str,
    budget: &mut Budget<'_>,
    keep: usize,
    mut sink: Option<Sink<'_>>,
) -> Result<Hashed, PackageError> {
    let mut sha256 = sha2::Sha256::new();
    let mut sha512 = sha2::Sha512::new();
    let mut kept = Some(Vec::new());
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = match entry.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(damaged(budget.archive, name, source)),
        };
        budget.take(name, n as u64)?;
        if let Some(sink) = &mut sink {
            std::io::Write::write_all(sink.file, &buf[..n]).map_err(|source| PackageError::Io {
                path: sink.path.to_path_buf(),
                source,
            })?;
        }
        size += n as u64;
        sha256.update(&buf[..n]);
        sha512.update(&buf[..n]);
        if let Some(k) = &mut kept {
            if k.len() + n <= keep {
                k.extend_from_slice(&buf[..n]);
            } else {
                kept = None;
            }
        }
    }
    Ok(Hashed {
        sha256: sha256.finalize().to_vec(),
        sha512: sha512.finalize().to_vec(),
        size,
        kept,
    })
}

/// An archive that cannot be read to its end (truncated, corrupt), with the cause kept.
pub fn damaged(archive: &Path, entry: &str, source: std::io::Error) -> PackageError {
    PackageError::Damaged {
        archive: archive.to_path_buf(),
        entry: entry.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_size("100000"), Some(100_000));
        assert_eq!(parse_size("8G"), Some(8 << 30));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size(" 64k "), Some(64 << 10));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn an_unparsable_cap_is_an_error_naming_the_variable() {
        let err = UnpackLimits::from_env(|_| Some("big".into())).unwrap_err();
        assert!(err.to_string().contains(MAX_UNPACKED_VAR), "{err}");
        assert_eq!(
            UnpackLimits::from_env(|_| None).unwrap(),
            UnpackLimits::default()
        );
    }

    #[test]
    fn hashing_stops_at_the_cap_and_keeps_only_small_entries() {
        let archive = Path::new("a.tar.gz");
        let limits = UnpackLimits { max_total: 1000 };
        let mut budget = Budget::new(archive, limits);
        let small = hash_entry(&b"hello"[..], "x/a", &mut budget, 16, None).unwrap();
        assert_eq!(small.kept.as_deref(), Some(&b"hello"[..]));
        let err = hash_entry(std::io::repeat(0).take(5000), "x/b", &mut budget, 16, None)
            .err()
            .unwrap();
        assert!(
            matches!(err, PackageError::TooLarge { cap: 1000, ref entry, .. } if entry == "x/b"),
            "{err:?}"
        );
    }
}
