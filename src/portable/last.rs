//! The compat unit of the last link, kept for the next one (`last-link.compat.json` beside the
//! extension; the extension's name changes with every edit, its directory does not). Which
//! fixes a link needs follows from what its first, unfixed link imports, and that follows from
//! the names its objects leave undefined (and define nowhere else) and from its command line. An edit inside a kernel rarely changes those names, so a relink whose
//! objects import exactly what the last link's did gets the same fixes: it links once, with
//! the last compat unit, instead of linking, reading the imports, compiling the compat unit and
//! linking again. The extension is the same bytes either way: the same fixes make the same
//! compat unit, linked by the same command. Any other change (a new call into glibc, another
//! flag, a damaged compat object) takes the two links, which record the new fixes.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::compat::{Fixes, SHIMS};
use super::{COMPAT_VERSION, Compat};
use crate::plan::LinkJob;
use crate::process::CommandSpec;

/// Bump when the record's meaning changes: old records are then ignored.
const RECORD_VERSION: u32 = 1;

/// The names a link's objects import, gathered object by object as the link reads them.
#[derive(Debug, Default)]
pub struct Imports {
    undefined: BTreeSet<String>,
    defined: BTreeSet<String>,
    /// An input kbuild could not read as an object (its imports are unknown).
    unreadable: bool,
}

impl Imports {
    /// Add the symbols of one object file (its bytes).
    pub fn add_object(&mut self, data: &[u8]) {
        use object::{Object as _, ObjectSymbol as _};
        let Ok(file) = object::File::parse(data) else {
            self.unreadable = true;
            return;
        };
        for symbol in file.symbols() {
            let Ok(name) = symbol.name() else { continue };
            if name.is_empty() || symbol.is_local() {
                continue;
            }
            if symbol.is_undefined() {
                self.undefined.insert(name.to_string());
            } else {
                self.defined.insert(name.to_string());
            }
        }
    }

    /// What identifies the fixes of a link under `policy`: its `command` (written to a fixed
    /// name, not the output's, which carries the op namespace every edit changes) and the names
    /// its objects leave undefined and define in none of them. `None` when an input could not
    /// be read as an object: then every link takes the two links.
    pub fn signature(&self, command: &CommandSpec, policy: &str) -> Option<String> {
        if self.unreadable {
            return None;
        }
        let mut hasher = Sha256::new();
        hasher.update(format!("{RECORD_VERSION} {COMPAT_VERSION} {policy}\n").as_bytes());
        hasher.update(command.program.as_os_str().as_encoded_bytes());
        for arg in &command.args {
            hasher.update([0]);
            hasher.update(arg.as_encoded_bytes());
        }
        hasher.update([1]);
        for name in self.undefined.difference(&self.defined) {
            hasher.update(name.as_bytes());
            hasher.update([0]);
        }
        Some(hex::encode(hasher.finalize()))
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    signature: String,
    pins: Vec<(String, String)>,
    shims: Vec<String>,
    /// The compat object the fixes were compiled into, and its SHA-256.
    object: PathBuf,
    object_sha256: String,
}

fn record_path(job: &LinkJob) -> PathBuf {
    job.output.with_file_name("last-link.compat.json")
}

/// The compat unit the last link of `job.output` used, when that link's `signature` is
/// `signature` and its object is still the one it compiled; `None` otherwise.
pub fn reusable(job: &LinkJob, signature: &str) -> Option<Compat> {
    let text = std::fs::read(record_path(job)).ok()?;
    let record: Record = serde_json::from_slice(&text).ok()?;
    if record.signature != signature {
        return None;
    }
    let object = record.object;
    if hex::encode(Sha256::digest(std::fs::read(&object).ok()?)) != record.object_sha256 {
        return None;
    }
    let shims = record.shims.iter().map(|name| {
        let shim = SHIMS.iter().find(|s| s.name == name)?;
        Some(shim.name)
    });
    let fixes = Fixes {
        pins: record.pins,
        shims: shims.collect::<Option<_>>()?,
    };
    (!fixes.is_empty()).then_some(Compat { fixes, object })
}

/// Keep what the link of `job` with `signature` used (`compat`) for the next one; with none,
/// forget the last one's. Best effort: without a record the next link only links twice.
pub fn remember(job: &LinkJob, signature: &str, compat: Option<&Compat>) {
    let path = record_path(job);
    let Some(compat) = compat else {
        let _ = std::fs::remove_file(&path);
        return;
    };
    let Ok(object) = std::fs::read(&compat.object) else {
        let _ = std::fs::remove_file(&path);
        return;
    };
    let record = Record {
        signature: signature.to_string(),
        pins: compat.fixes.pins.clone(),
        shims: compat.fixes.shims.iter().map(|s| s.to_string()).collect(),
        object: compat.object.clone(),
        object_sha256: hex::encode(Sha256::digest(object)),
    };
    let written = serde_json::to_vec_pretty(&record)
        .map_err(std::io::Error::other)
        .and_then(|text| crate::files::write_atomic(&path, &text));
    if written.is_err() {
        let _ = std::fs::remove_file(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_that_is_not_an_object_leaves_the_link_without_a_signature() {
        let command = CommandSpec::new("c++");
        assert!(
            Imports::default()
                .signature(&command, "manylinux_2_28")
                .is_some()
        );
        let mut imports = Imports::default();
        imports.add_object(b"not an object");
        assert_eq!(imports.signature(&command, "manylinux_2_28"), None);
    }
}
