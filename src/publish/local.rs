//! What is about to be published: verified variants, benchmarks, and every file's hashes in the
//! forms the Hub reports (git blob oid, and the oid of the LFS pointer for LFS-stored files).

use std::io::Read;
use std::path::{Path, PathBuf};

use sha1::Digest as _;

use super::error::PublishError;
use crate::package::tree::{self, TreeError};
use crate::package::{self, BuiltVariant, UnpackLimits, open_regular};

/// A file to publish, with its hashes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LocalFile {
    /// Path in the repository (`build/<variant>/__init__.py`).
    pub repo_path: String,
    /// Where the content comes from (absent for generated content such as the card).
    #[serde(skip)]
    pub source: Source,
    pub size: u64,
    /// sha256 of the content, hex.
    #[serde(skip)]
    pub sha256: String,
    /// Git blob id of the content: what the Hub reports for a regular file.
    #[serde(skip)]
    pub git_oid: String,
    /// Git blob id of the content's LFS pointer: what the Hub reports for an LFS/Xet file.
    #[serde(skip)]
    pub lfs_oid: String,
}

/// Where a file's bytes are.
#[derive(Debug, Clone)]
pub enum Source {
    Path(PathBuf),
    Bytes(Vec<u8>),
}

impl LocalFile {
    /// Hash a regular file on disk (one streaming pass); a link or special file in its place
    /// is an error, not followed.
    pub fn read(repo_path: String, path: &Path) -> Result<LocalFile, PublishError> {
        let read_err = |source| PublishError::ReadBuild {
            path: path.to_path_buf(),
            source,
        };
        let mut file = open_regular(path)?;
        let size = file.metadata().map_err(read_err)?.len();
        let mut sha256 = sha2::Sha256::new();
        let mut git = sha1::Sha1::new();
        git.update(format!("blob {size}\0").as_bytes());
        let mut buf = vec![0u8; 1 << 16];
        let mut seen = 0u64;
        loop {
            let n = file.read(&mut buf).map_err(read_err)?;
            if n == 0 {
                break;
            }
            sha256.update(&buf[..n]);
            git.update(&buf[..n]);
            seen += n as u64;
        }
        if seen != size {
            return Err(read_err(std::io::Error::other(
                "the file changed size while it was being read",
            )));
        }
        Ok(Self::finish(
            repo_path,
            Source::Path(path.to_path_buf()),
            size,
            sha256,
            git,
        ))
    }

    /// Hash generated content.
    pub fn from_bytes(repo_path: String, bytes: Vec<u8>) -> LocalFile {
        let size = bytes.len() as u64;
        let mut sha256 = sha2::Sha256::new();
        sha256.update(&bytes);
        let mut git = sha1::Sha1::new();
        git.update(format!("blob {size}\0").as_bytes());
        git.update(&bytes);
        Self::finish(repo_path, Source::Bytes(bytes), size, sha256, git)
    }

    fn finish(
        repo_path: String,
        source: Source,
        size: u64,
        sha256: sha2::Sha256,
        git: sha1::Sha1,
    ) -> LocalFile {
        let sha256 = hex::encode(sha256.finalize());
        let pointer = format!(
            "version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
        );
        LocalFile {
            repo_path,
            source,
            size,
            lfs_oid: git_blob_oid(pointer.as_bytes()),
            sha256,
            git_oid: hex::encode(git.finalize()),
        }
    }
}

/// Git's blob id: sha1 of `blob <len>\0<content>`.
pub fn git_blob_oid(content: &[u8]) -> String {
    let mut h = sha1::Sha1::new();
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(content);
    hex::encode(h.finalize())
}

/// The verified build being published.
#[derive(Debug)]
pub struct LocalBuild {
    pub variants: Vec<BuiltVariant>,
    /// The version every variant agrees on.
    pub version: u32,
    /// Files in repository order.
    pub files: Vec<LocalFile>,
    /// Repository prefixes this publish replaces (`build/<variant>/`, `benchmarks/`): remote
    /// files under them that are not in `files` are deleted; nothing outside them is.
    pub prefixes: Vec<String>,
    /// Where artifacts were unpacked; the variants' files are read from it until publish ends.
    pub staging: Option<tempfile::TempDir>,
}

/// How publish reads the build from disk.
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    /// The cap on what one artifact may unpack to.
    pub unpack: UnpackLimits,
    /// Publish variants built from different commits together (`--allow-mixed`).
    pub allow_mixed: bool,
    /// Publish variants kbuild did not build (`--allow-foreign`).
    pub allow_foreign: bool,
}

/// Find, verify and hash the variants under `build_dir` (all, or only `only`) and the files of
/// `benchmarks`, if given. `build_dir` may also be an artifact (`kbuild pack`), or hold
/// artifacts beside variant directories: each is unpacked, verified, into a staging directory.
pub fn collect(
    build_dir: &Path,
    only: &[String],
    benchmarks: Option<&Path>,
    opts: &LocalOptions,
) -> Result<LocalBuild, PublishError> {
    let Found { available, staging } = find_variants(build_dir, opts)?;
    let variants = verify_variants(available, only)?;
    let foreign: Vec<String> = variants
        .iter()
        .filter(|v| !v.built_by_kbuild())
        .map(|v| v.name.clone())
        .collect();
    if !foreign.is_empty() && !opts.allow_foreign {
        return Err(PublishError::Foreign {
            variants: foreign,
            build_dir: build_dir.to_path_buf(),
        });
    }
    let commits = package::by_commit(&variants);
    if commits.len() > 1 && !opts.allow_mixed {
        return Err(PublishError::MixedCommits { commits });
    }
    let version = variants[0].version;
    if variants.iter().any(|v| v.version != version) {
        return Err(PublishError::VersionMismatch {
            versions: variants
                .iter()
                .map(|v| (v.name.clone(), v.version))
                .collect(),
        });
    }

    let mut files = Vec::new();
    let mut prefixes = Vec::new();
    for v in &variants {
        let prefix = format!("build/{}/", v.name);
        for rel in &v.files {
            let path = v.dir.join(rel);
            // Whoever built it: the provenance and the digest are the variant's own words
            // (`kbuild hash --write`, an edited metadata.json), not a proof.
            tree::check_single_link(&path)?;
            files.push(LocalFile::read(format!("{prefix}{rel}"), &path)?);
        }
        prefixes.push(prefix);
    }
    if let Some(dir) = benchmarks {
        for rel in files_below(dir)? {
            tree::check_single_link(&dir.join(&rel))?;
            files.push(LocalFile::read(
                format!("benchmarks/{rel}"),
                &dir.join(&rel),
            )?);
        }
        prefixes.push("benchmarks/".to_string());
    }
    files.sort_by(|a, b| a.repo_path.cmp(&b.repo_path));
    Ok(LocalBuild {
        variants,
        version,
        files,
        prefixes,
        staging,
    })
}

/// The variants a build directory holds, not yet verified.
struct Found {
    /// Name and directory of each variant, sorted by name.
    available: Vec<(String, PathBuf)>,
    /// Where artifacts were unpacked.
    staging: Option<tempfile::TempDir>,
}

/// The variants in `build_dir`: its variant directories, and its artifacts unpacked into a
/// staging directory.
fn find_variants(build_dir: &Path, opts: &LocalOptions) -> Result<Found, PublishError> {
    let (mut available, archives) = if build_dir.is_file() {
        (Vec::new(), vec![build_dir.to_path_buf()])
    } else {
        (variant_dirs(build_dir)?, artifacts(build_dir)?)
    };
    let staging = if archives.is_empty() {
        None
    } else {
        Some(
            tempfile::tempdir().map_err(|source| PublishError::ReadBuild {
                path: std::env::temp_dir(),
                source,
            })?,
        )
    };
    for archive in &archives {
        let into = staging.as_ref().map_or(build_dir, |s| s.path());
        let unpacked = package::unpack_artifact(archive, into, opts.unpack).map_err(|source| {
            PublishError::Verify {
                variant: archive.display().to_string(),
                source,
            }
        })?;
        if available.iter().any(|(n, _)| *n == unpacked.name) {
            return Err(PublishError::DuplicateVariant {
                name: unpacked.name,
            });
        }
        available.push((unpacked.name, unpacked.dir));
    }
    available.sort();
    if available.is_empty() {
        return Err(PublishError::NoVariants {
            dir: build_dir.to_path_buf(),
        });
    }
    Ok(Found { available, staging })
}

/// Verify the variants `only` names (all when it is empty); naming one that is not there is an
/// error listing those that are.
fn verify_variants(
    available: Vec<(String, PathBuf)>,
    only: &[String],
) -> Result<Vec<BuiltVariant>, PublishError> {
    let names: Vec<String> = available.iter().map(|(n, _)| n.clone()).collect();
    for wanted in only {
        if !names.contains(wanted) {
            return Err(PublishError::UnknownVariant {
                name: wanted.clone(),
                available: names.clone(),
            });
        }
    }
    let mut variants = Vec::new();
    for (name, dir) in available {
        if only.is_empty() || only.contains(&name) {
            let verified = BuiltVariant::read(&dir).map_err(|source| PublishError::Verify {
                variant: name.clone(),
                source,
            })?;
            variants.push(verified);
        }
    }
    Ok(variants)
}

/// The `*.tar.gz` files directly in the build directory, sorted.
fn artifacts(build_dir: &Path) -> Result<Vec<PathBuf>, PublishError> {
    let read_err = |source| PublishError::ReadBuild {
        path: build_dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(build_dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.ends_with(".tar.gz") && !name.starts_with('.') && path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Sub-directories of the build directory that hold a `metadata.json`, sorted by name.
fn variant_dirs(build_dir: &Path) -> Result<Vec<(String, PathBuf)>, PublishError> {
    let read_err = |source| PublishError::ReadBuild {
        path: build_dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(build_dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if !name.starts_with('.') && path.is_dir() && path.join("metadata.json").is_file() {
            out.push((name, path));
        }
    }
    out.sort();
    Ok(out)
}

/// Files under `dir`, relative and `/`-separated, sorted; Python caches and hidden entries are
/// left out (and not looked into). A link or special file, or `dir` itself being a link, is an
/// error: publish never follows a link out of the directory it publishes.
fn files_below(dir: &Path) -> Result<Vec<String>, TreeError> {
    let published = |rel: &str, _is_dir: bool| {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        !(name == "__pycache__" || name.starts_with('.') || name.ends_with(".pyc"))
    };
    Ok(tree::regular_files(dir, published)?
        .into_iter()
        .map(|f| f.rel)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_git_and_lfs_conventions() {
        let f = LocalFile::from_bytes("a".into(), b"hello\n".to_vec());
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(f.git_oid, "ce013625030ba8dba906f756967f9e9ca394464a");
        assert_eq!(
            f.sha256,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        let pointer = format!(
            "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 6\n",
            f.sha256
        );
        assert_eq!(f.lfs_oid, git_blob_oid(pointer.as_bytes()));
    }

    #[test]
    fn reading_a_file_gives_the_same_hashes_as_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.so");
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let a = LocalFile::read("x.so".into(), &path).unwrap();
        let b = LocalFile::from_bytes("x.so".into(), content);
        assert_eq!((a.sha256, a.git_oid, a.size), (b.sha256, b.git_oid, b.size));
    }

    #[test]
    fn benchmark_listing_skips_python_caches() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("__pycache__")).unwrap();
        std::fs::write(dir.path().join("__pycache__/b.pyc"), "x").unwrap();
        std::fs::write(dir.path().join("bench.py"), "x").unwrap();
        assert_eq!(files_below(dir.path()).unwrap(), ["bench.py"]);
    }
}
