//! Artifacts: one variant as `<name>-<variant>.tar.gz`, holding `<variant>/…` with its
//! metadata.json (and so its digest), for CI jobs that each build one variant and hand them to
//! one publish job.
//!
//! Reproducible: entries sorted, every mtime 0, uid/gid 0, mode 0644, no name or time in the gzip
//! header. Unpacking never trusts the archive: a first pass reads every header and streams and
//! hashes every file (memory stays flat whatever the entries' size), refusing absolute paths,
//! `..`, links, devices, FIFOs, an archive that unpacks past the cap ([`UnpackLimits`]) and files
//! that do not match metadata.json's digest; only then does a second pass write anything.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::path::{Component, Path, PathBuf};

use base64::prelude::{BASE64_STANDARD, Engine as _};
use flate2::Compression;
use kernels_data::digest::DigestAlgorithm;

use super::digest::{VariantDigest, open_regular};
use super::error::PackageError;
use super::metadata::Metadata;
use super::unpack::{Budget, UnpackLimits, damaged, hash_entry};
use super::variant::BuiltVariant;

/// The file name of a variant's artifact.
pub fn artifact_name(variant: &BuiltVariant) -> String {
    format!("{}-{}.tar.gz", variant.kernel_name, variant.name)
}

/// Write `<out_dir>/<name>-<variant>.tar.gz`, staged beside it and renamed into place.
pub fn write_artifact(variant: &BuiltVariant, out_dir: &Path) -> Result<PathBuf, PackageError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PackageError::Io { path, source }
    };
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    let target = out_dir.join(artifact_name(variant));
    let staged = crate::files::temp_file_in(out_dir, "tmp").map_err(io(out_dir))?;
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(staged.as_file(), Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mut files = variant.files.clone();
    files.sort();
    for rel in &files {
        let path = variant.dir.join(rel);
        let mut bytes = Vec::new();
        open_regular(&path)?
            .read_to_end(&mut bytes)
            .map_err(|source| PackageError::Read { path, source })?;
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        tar.append_data(
            &mut header,
            format!("{}/{rel}", variant.name),
            bytes.as_slice(),
        )
        .map_err(io(&target))?;
    }
    let mut gz = tar.into_inner().map_err(io(&target))?;
    gz.flush().map_err(io(&target))?;
    gz.finish().map_err(io(&target))?;
    staged.persist(&target).map_err(|e| PackageError::Io {
        path: target.clone(),
        source: e.error,
    })?;
    Ok(target)
}

/// What the first pass learnt about one archive.
struct Checked {
    variant: String,
    /// Entry name in the archive → path relative to the variant and size, for every file checked.
    files: BTreeMap<String, (String, u64)>,
}

/// The most a metadata.json may hold (kbuild's are a few KiB): it is the one entry kept in memory.
const MAX_METADATA: usize = 1 << 20;

/// Unpack `archive` into `into/<variant>/` (which must not exist) and read it back verified.
/// Nothing is written unless every entry is a regular file or directory below one top-level
/// directory, the entries together stay under `limits`, and the files match metadata.json's
/// digest.
pub fn unpack_artifact(
    archive: &Path,
    into: &Path,
    limits: UnpackLimits,
) -> Result<BuiltVariant, PackageError> {
    let checked = check_archive(archive, limits)?;
    let dir = into.join(&checked.variant);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PackageError::Io { path, source }
    };
    std::fs::create_dir_all(into).map_err(io(into))?;
    std::fs::create_dir(&dir).map_err(io(&dir))?;
    let mut entries = open(archive)?;
    for entry in entries.entries().map_err(|e| damaged(archive, "", e))? {
        let mut entry = entry.map_err(|e| damaged(archive, "", e))?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        // Only what the first pass checked is written, and at the size it had, should the
        // archive have changed since.
        let name = entry_name(archive, &entry)?;
        let Some((rel, size)) = checked.files.get(&name) else {
            continue;
        };
        if entry.size() != *size {
            return Err(PackageError::Artifact {
                archive: archive.to_path_buf(),
                entry: name,
                reason: "it changed while it was being unpacked".into(),
            });
        }
        let dest = dir.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&dest)
            .map_err(io(&dest))?;
        copy_entry(&mut entry, &mut file).map_err(|e| match e {
            CopyError::Read(e) => damaged(archive, &name, e),
            CopyError::Write(e) => io(&dest)(e),
        })?;
    }
    // `read` hashes what was written, should the archive have changed between the passes.
    BuiltVariant::read(&dir)
}

fn open(
    archive: &Path,
) -> Result<tar::Archive<flate2::read::GzDecoder<std::fs::File>>, PackageError> {
    let file = open_regular(archive)?;
    Ok(tar::Archive::new(flate2::read::GzDecoder::new(file)))
}

/// Which side of a copy failed.
enum CopyError {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copy in blocks, so that a read error (a truncated archive) is told from a write error.
fn copy_entry(
    from: &mut impl std::io::Read,
    to: &mut impl std::io::Write,
) -> Result<(), CopyError> {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        to.write_all(&buf[..n]).map_err(CopyError::Write)?;
    }
}

fn entry_name<R: std::io::Read>(
    archive: &Path,
    entry: &tar::Entry<'_, R>,
) -> Result<String, PackageError> {
    let raw = entry.path_bytes();
    String::from_utf8(raw.to_vec()).map_err(|_| PackageError::Artifact {
        archive: archive.to_path_buf(),
        entry: String::from_utf8_lossy(&raw).into_owned(),
        reason: "its name is not UTF-8".into(),
    })
}

/// The first pass: every header checked, every file streamed and hashed against the cap, the
/// digest compared.
fn check_archive(archive: &Path, limits: UnpackLimits) -> Result<Checked, PackageError> {
    let refuse = |entry: &str, reason: &str| PackageError::Artifact {
        archive: archive.to_path_buf(),
        entry: entry.to_string(),
        reason: reason.to_string(),
    };
    let mut budget = Budget::new(archive, limits);
    let mut top: Option<String> = None;
    let mut files = BTreeMap::new();
    let mut names = BTreeMap::new();
    let mut metadata = None;
    let mut entries = open(archive)?;
    for entry in entries.entries().map_err(|e| damaged(archive, "", e))? {
        let entry = entry.map_err(|e| damaged(archive, "", e))?;
        let name = entry_name(archive, &entry)?;
        let kind = entry.header().entry_type();
        let parts = entry_parts(kind, &name).map_err(|reason| refuse(&name, reason))?;
        let Some(first) = parts.first() else {
            continue;
        };
        match &top {
            None => top = Some(first.clone()),
            Some(t) if t != first => {
                return Err(refuse(
                    &name,
                    &format!("it is outside the variant directory `{t}/`"),
                ));
            }
            Some(_) => {}
        }
        if kind == tar::EntryType::Directory {
            continue;
        }
        let rel = parts[1..].join("/");
        if rel.is_empty() {
            return Err(refuse(
                &name,
                "a file where the variant directory should be",
            ));
        }
        // The declared size refuses a bomb before a byte of it is inflated.
        budget.declare(&name, entry.size())?;
        let keep = if rel == "metadata.json" {
            MAX_METADATA
        } else {
            0
        };
        let hashed = hash_entry(entry, &name, &mut budget, keep, None)?;
        if rel == "metadata.json" {
            metadata = Some(hashed.kept.clone().ok_or_else(|| {
                refuse(
                    &name,
                    &format!(
                        "it is larger than {}",
                        crate::files::human_size(MAX_METADATA as u64)
                    ),
                )
            })?);
        }
        if files
            .insert(rel.clone(), (hashed.sha256, hashed.sha512))
            .is_some()
        {
            return Err(refuse(&name, "it appears twice"));
        }
        names.insert(name, (rel, hashed.size));
    }
    let variant = top.ok_or_else(|| refuse("", "the archive is empty"))?;
    let metadata_name = format!("{variant}/metadata.json");
    let metadata = metadata.ok_or_else(|| refuse(&metadata_name, "it is missing"))?;
    check_digest(archive, &metadata_name, &metadata, &files)?;
    Ok(Checked {
        variant,
        files: names,
    })
}

/// The parts of an entry's path, when it is a regular file or a directory with a relative path
/// that stays inside the archive; else why it is refused.
fn entry_parts(kind: tar::EntryType, name: &str) -> Result<Vec<String>, &'static str> {
    match kind {
        tar::EntryType::Regular | tar::EntryType::Directory => {}
        tar::EntryType::Symlink => return Err("it is a symbolic link"),
        tar::EntryType::Link => return Err("it is a hard link"),
        tar::EntryType::Char | tar::EntryType::Block => return Err("it is a device file"),
        tar::EntryType::Fifo => return Err("it is a FIFO"),
        _ => return Err("it is not a regular file or directory"),
    }
    let path = Path::new(name);
    if path.is_absolute() {
        return Err("its path is absolute");
    }
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => return Err("its path contains `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("its path is absolute"),
        }
    }
    Ok(parts)
}

/// Compare the digest that `metadata` (the archive's `metadata_name`) records with the hashes
/// of its `files` (variant path → SHA-256, SHA-512).
fn check_digest(
    archive: &Path,
    metadata_name: &str,
    metadata: &[u8],
    files: &BTreeMap<String, (Vec<u8>, Vec<u8>)>,
) -> Result<(), PackageError> {
    let invalid = |message: String| PackageError::Metadata {
        path: archive.join(metadata_name),
        message,
    };
    let parsed = Metadata::parse(metadata).map_err(invalid)?;
    let expected = parsed
        .digest
        .ok_or_else(|| invalid("no `digest`: the archive's files cannot be checked".into()))?;
    let hashed: BTreeSet<&String> = files
        .keys()
        .filter(|rel| {
            !(rel.as_str() == "metadata.json"
                || rel.as_str() == "metadata.json.sigstore"
                || rel.split('/').any(|p| p == "__pycache__")
                || rel.ends_with(".pyc"))
        })
        .collect();
    let actual = VariantDigest {
        algorithm: expected.algorithm,
        files: hashed
            .into_iter()
            .map(|rel| {
                let (sha256, sha512) = &files[rel];
                let hash = match expected.algorithm {
                    DigestAlgorithm::SHA256 => sha256,
                    DigestAlgorithm::SHA512 => sha512,
                };
                (rel.clone(), BASE64_STANDARD.encode(hash))
            })
            .collect(),
    };
    let violations = expected.violations(&actual);
    if !violations.is_empty() {
        return Err(PackageError::Digest {
            dir: archive.to_path_buf(),
            violations: violations.iter().map(|v| format!("  {v}")).collect(),
        });
    }
    Ok(())
}

/// An artifact written by [`pack`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct Packed {
    pub variant: String,
    pub path: PathBuf,
}

/// Verify the variants under `build_dir` (all, or only `only`) and write each as an artifact
/// into `dist_dir`.
pub fn pack(
    build_dir: &Path,
    only: &[String],
    dist_dir: &Path,
) -> Result<Vec<Packed>, PackageError> {
    let read = |source| PackageError::Read {
        path: build_dir.to_path_buf(),
        source,
    };
    super::stage::sweep_stale_temps(dist_dir);
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(build_dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let wanted = only.is_empty() || only.contains(&name);
        if wanted && !name.starts_with('.') && path.join("metadata.json").is_file() {
            dirs.push((name, path));
        }
    }
    dirs.sort();
    let missing: Vec<String> = only
        .iter()
        .filter(|w| !dirs.iter().any(|(n, _)| n == *w))
        .cloned()
        .collect();
    if dirs.is_empty() || !missing.is_empty() {
        return Err(PackageError::NoVariants {
            dir: build_dir.to_path_buf(),
            missing,
        });
    }
    let mut out = Vec::new();
    for (name, dir) in dirs {
        let variant = BuiltVariant::read(&dir)?;
        out.push(Packed {
            variant: name,
            path: write_artifact(&variant, dist_dir)?,
        });
    }
    Ok(out)
}
