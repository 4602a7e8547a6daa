//! Reading a wheel back (what `kbuild check` does with a `.whl`): every entry name checked
//! before anything is written (no absolute path, no `..`, no link), the declared sizes and then
//! the bytes read held under the unpack cap, every file streamed and hashed, and the hashes
//! compared with `RECORD` (PEP 376/427): a file whose hash or size differs, one RECORD lists
//! that is not there, or one that RECORD does not list, refuses the wheel.

use std::collections::BTreeMap;

use std::path::{Component, Path};

use base64::prelude::{BASE64_URL_SAFE_NO_PAD, Engine as _};

use super::error::PackageError;
use super::unpack::{Budget, Sink, UnpackLimits, damaged, hash_entry};

/// The most a RECORD may hold: it is the one entry kept in memory.
const MAX_RECORD: usize = 16 << 20;

/// Unpack `wheel` into the directory `into` (which must exist and be empty), verified against
/// its RECORD.
pub fn unpack_wheel(wheel: &Path, into: &Path, limits: UnpackLimits) -> Result<(), PackageError> {
    let refuse = |entry: &str, reason: String| PackageError::Wheel {
        wheel: wheel.to_path_buf(),
        entry: entry.to_string(),
        reason,
    };
    let file = super::open_regular(wheel)?;
    let mut zip = zip::ZipArchive::new(file).map_err(|source| PackageError::Zip {
        path: wheel.to_path_buf(),
        source,
    })?;
    let names = check_names(wheel, &mut zip, limits)?;
    let mut budget = Budget::new(wheel, limits);
    let mut hashes = BTreeMap::new();
    let mut record = None;
    for (index, name) in names.iter().enumerate() {
        let Some(name) = name else { continue };
        let entry = zip
            .by_index(index)
            .map_err(|e| zip_damaged(wheel, name, e))?;
        let dest = into.join(name);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut out = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&dest)
            .map_err(io(&dest))?;
        let keep = if is_record(name) { MAX_RECORD } else { 0 };
        let sink = Sink {
            file: &mut out,
            path: &dest,
        };
        let hashed = hash_entry(entry, name, &mut budget, keep, Some(sink))?;
        if is_record(name) {
            record = Some(hashed.kept.clone().ok_or_else(|| {
                refuse(
                    name,
                    format!(
                        "it is larger than {}",
                        crate::files::human_size(MAX_RECORD as u64)
                    ),
                )
            })?);
        }
        hashes.insert(name.clone(), (hashed.sha256, hashed.size));
    }
    let (record_name, record) = names
        .iter()
        .flatten()
        .find(|n| is_record(n))
        .zip(record)
        .ok_or_else(|| refuse("*.dist-info/RECORD", "it is missing".into()))?;
    compare_record(&record, &hashes)
        .map_err(|(entry, reason)| refuse(&entry, format!("{reason} (in `{record_name}`)")))
}

/// Every entry's name, checked before a byte is inflated: `None` for a directory.
fn check_names(
    wheel: &Path,
    zip: &mut zip::ZipArchive<std::fs::File>,
    limits: UnpackLimits,
) -> Result<Vec<Option<String>>, PackageError> {
    let mut budget = Budget::new(wheel, limits);
    let mut names = Vec::new();
    for index in 0..zip.len() {
        let entry = zip
            .by_index_raw(index)
            .map_err(|e| zip_damaged(wheel, "", e))?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        let refuse = |reason: &str| PackageError::Wheel {
            wheel: wheel.to_path_buf(),
            entry: name.clone(),
            reason: reason.into(),
        };
        if entry.is_symlink() {
            return Err(refuse("it is a symbolic link"));
        }
        if name.starts_with('/') || name.starts_with('\\') || name.contains(':') {
            return Err(refuse("its path is absolute"));
        }
        for part in Path::new(&name).components() {
            match part {
                Component::Normal(_) | Component::CurDir => {}
                Component::ParentDir => return Err(refuse("its path contains `..`")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(refuse("its path is absolute"));
                }
            }
        }
        if entry.is_dir() {
            names.push(None);
            continue;
        }
        // What the central directory declares, all entries together, before inflating any.
        budget.take(&name, entry.size())?;
        names.push(Some(name));
    }
    Ok(names)
}

fn is_record(name: &str) -> bool {
    name.strip_suffix("/RECORD")
        .is_some_and(|dir| dir.ends_with(".dist-info") && !dir.contains('/'))
}

/// How RECORD's rows differ from what was read (`entry → (sha256, size)`): the first
/// difference, as `(entry, reason)`.
fn compare_record(
    record: &[u8],
    hashes: &BTreeMap<String, (Vec<u8>, u64)>,
) -> Result<(), (String, String)> {
    let text = String::from_utf8_lossy(record);
    let mut listed = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (path, hash, size) = record_row(line);
        listed.insert(path, (hash, size));
    }
    for (path, (hash, size)) in &listed {
        let Some((sha256, actual)) = hashes.get(path) else {
            return Err((
                path.clone(),
                "RECORD lists it, but the wheel does not hold it".into(),
            ));
        };
        if hash.is_empty() {
            // RECORD itself, and signatures of it, carry no hash.
            continue;
        }
        let expected = hash.strip_prefix("sha256=").ok_or_else(|| {
            (
                path.clone(),
                format!("RECORD gives `{hash}`, not a sha256 hash"),
            )
        })?;
        if expected != BASE64_URL_SAFE_NO_PAD.encode(sha256) {
            return Err((path.clone(), "its sha256 does not match RECORD".into()));
        }
        if !size.is_empty() && size.parse::<u64>().ok() != Some(*actual) {
            return Err((
                path.clone(),
                format!("it is {actual} bytes, RECORD says {size}"),
            ));
        }
    }
    match hashes.keys().find(|p| !listed.contains_key(*p)) {
        Some(path) => Err((path.clone(), "RECORD does not list it".into())),
        None => Ok(()),
    }
}

/// `path,hash,size` of one RECORD row; the path may be quoted (CSV) and hold commas.
fn record_row(line: &str) -> (String, String, String) {
    let (path, rest) = match line.strip_prefix('"') {
        Some(quoted) => {
            let end = quoted.find("\",").unwrap_or(quoted.len());
            let rest = quoted.get(end + 2..).unwrap_or("");
            (quoted[..end].replace("\"\"", "\""), rest)
        }
        None => match line.split_once(',') {
            Some((p, r)) => (p.to_string(), r),
            None => (line.to_string(), ""),
        },
    };
    let (hash, size) = rest.split_once(',').unwrap_or((rest, ""));
    (path, hash.trim().to_string(), size.trim().to_string())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PackageError + '_ {
    move |source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn zip_damaged(wheel: &Path, entry: &str, e: zip::result::ZipError) -> PackageError {
    damaged(wheel, entry, std::io::Error::other(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_rows_take_quoted_paths_and_empty_hashes() {
        assert_eq!(
            record_row("a/b.py,sha256=abc,12"),
            ("a/b.py".into(), "sha256=abc".into(), "12".into())
        );
        assert_eq!(
            record_row("\"a,b.py\",sha256=x,1"),
            ("a,b.py".into(), "sha256=x".into(), "1".into())
        );
        assert_eq!(
            record_row("x.dist-info/RECORD,,"),
            ("x.dist-info/RECORD".into(), String::new(), String::new())
        );
    }

    #[test]
    fn only_a_top_level_dist_info_record_is_the_record() {
        assert!(is_record("relu-1.dist-info/RECORD"));
        assert!(!is_record("relu/x.dist-info/RECORD"));
        assert!(!is_record("relu/RECORD"));
    }
}
