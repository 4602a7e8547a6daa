//! The `digest` of metadata.json: a hash of every file of a variant, in the format of HF's
//! `kernels-data` (`{"algorithm": "sha256", "files": {"<path>": "<base64>"}}`) that `kernels`
//! verifies on load. Hashed here rather than with `Digest::hash_variant`, which follows links:
//! our walk refuses them (see `tree`), so what is hashed is exactly what is published.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use base64::prelude::{BASE64_STANDARD, Engine as _};
use kernels_data::digest::DigestAlgorithm;
use serde::{Deserialize, Serialize};

use super::tree::{self, TreeError, TreeFile};

/// File hashes of one variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantDigest {
    pub algorithm: DigestAlgorithm,
    /// Path relative to the variant (`/`-separated) → base64 of its hash.
    pub files: BTreeMap<String, String>,
}

/// The files of a variant directory: all regular files (anything else is an error), without
/// Python caches; metadata.json and its signature are listed apart because the digest, which
/// they hold or sign, cannot cover them.
#[derive(Debug)]
pub struct VariantFiles {
    /// What the digest covers, sorted.
    pub hashed: Vec<TreeFile>,
    /// `metadata.json` and `metadata.json.sigstore`, those present.
    pub metadata: Vec<TreeFile>,
}

/// List a variant's files, refusing links and special files anywhere in it.
pub fn variant_files(dir: &Path) -> Result<VariantFiles, TreeError> {
    let mut files = VariantFiles {
        hashed: Vec::new(),
        metadata: Vec::new(),
    };
    for file in tree::regular_files(dir, |_, _| true)? {
        let rel = file.rel.as_str();
        if rel == "metadata.json" || rel == "metadata.json.sigstore" {
            files.metadata.push(file);
        } else if !(rel.split('/').any(|p| p == "__pycache__")
            || Path::new(rel).extension().is_some_and(|e| e == "pyc"))
        {
            // Bytecode is written by the interpreter after download; kernels skips it too.
            files.hashed.push(file);
        }
    }
    Ok(files)
}

impl VariantDigest {
    /// Hash `files` (relative paths as given) with `algorithm`.
    pub fn hash(algorithm: DigestAlgorithm, files: &[TreeFile]) -> Result<Self, TreeError> {
        let mut out = BTreeMap::new();
        for file in files {
            let hash = match algorithm {
                DigestAlgorithm::SHA256 => hash_file::<sha2::Sha256>(&file.path)?,
                DigestAlgorithm::SHA512 => hash_file::<sha2::Sha512>(&file.path)?,
            };
            out.insert(file.rel.clone(), BASE64_STANDARD.encode(hash));
        }
        Ok(VariantDigest {
            algorithm,
            files: out,
        })
    }

    /// How `actual` differs from this (expected) digest, one line per difference in the words
    /// of `kernels`; empty when they match.
    pub fn violations(&self, actual: &VariantDigest) -> Vec<String> {
        let mut out = Vec::new();
        if self.algorithm != actual.algorithm {
            out.push(format!(
                "Algorithm mismatch: expected: {:?}, got: {:?}",
                self.algorithm, actual.algorithm
            ));
            return out;
        }
        for (path, expected) in &self.files {
            match actual.files.get(path) {
                None => out.push(format!("Missing file: {path}")),
                Some(got) if got != expected => out.push(format!(
                    "File hash mismatch for {path}: expected: {expected}, got: {got}"
                )),
                Some(_) => {}
            }
        }
        for path in actual.files.keys() {
            if !self.files.contains_key(path) {
                out.push(format!("Unknown file: {path}"));
            }
        }
        out
    }
}

fn hash_file<H: sha2::Digest>(path: &Path) -> Result<Vec<u8>, TreeError> {
    let read_err = |source| TreeError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = open_regular(path)?;
    let mut hasher = H::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            return Ok(hasher.finalize().to_vec());
        }
        hasher.update(&buf[..n]);
    }
}

/// Open `path` for reading only if it is a regular file: a link in its place is not followed
/// and a FIFO does not block (the tree may have changed since it was listed).
pub fn open_regular(path: &Path) -> Result<std::fs::File, TreeError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ELOOP) => TreeError::Link {
                path: path.to_path_buf(),
            },
            _ => TreeError::Read {
                path: path.to_path_buf(),
                source,
            },
        })?;
    let meta = file.metadata().map_err(|source| TreeError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    tree::check_type(path, meta.file_type())?;
    if meta.is_dir() {
        return Err(TreeError::Special {
            path: path.to_path_buf(),
            kind: "directory",
        });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_equals_the_one_kernels_data_computes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("layers/__pycache__")).unwrap();
        std::fs::write(dir.path().join("__init__.py"), "import torch\n").unwrap();
        std::fs::write(dir.path().join("layers/relu.py"), "x = 1\n").unwrap();
        std::fs::write(dir.path().join("layers/__pycache__/relu.pyc"), "b").unwrap();
        std::fs::write(dir.path().join("_x.abi3.so"), [0u8, 1, 2, 255]).unwrap();
        std::fs::write(dir.path().join("metadata.json"), "{}").unwrap();
        for algorithm in [DigestAlgorithm::SHA256, DigestAlgorithm::SHA512] {
            let ours =
                VariantDigest::hash(algorithm, &variant_files(dir.path()).unwrap().hashed).unwrap();
            let theirs = kernels_data::digest::Digest::hash_variant(algorithm, dir.path()).unwrap();
            assert_eq!(
                serde_json::to_value(&ours).unwrap(),
                serde_json::to_value(&theirs).unwrap()
            );
        }
    }

    #[test]
    fn violations_name_missing_changed_and_unknown_files() {
        let digest = |files: &[(&str, &str)]| VariantDigest {
            algorithm: DigestAlgorithm::SHA256,
            files: files
                .iter()
                .map(|(p, h)| (p.to_string(), h.to_string()))
                .collect(),
        };
        let expected = digest(&[("a.py", "1"), ("b.py", "2")]);
        let actual = digest(&[("b.py", "3"), ("c.py", "4")]);
        assert_eq!(
            expected.violations(&actual),
            [
                "Missing file: a.py",
                "File hash mismatch for b.py: expected: 2, got: 3",
                "Unknown file: c.py"
            ]
        );
        assert!(expected.violations(&expected).is_empty());
    }

    #[test]
    fn opening_a_fifo_fails_at_once_instead_of_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            open_regular(&fifo),
            Err(TreeError::Special { kind: "FIFO", .. })
        ));
    }
}
