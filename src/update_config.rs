//! `update-config`: rewrite an edition-less (v4) build.toml as edition 5, the way HF's
//! `kernel-builder update-build` upgrades it, but as an edit of the file instead of a re-print.
//!
//! HF's v4 → v5 conversion changes one thing: `[general]` gains `edition = 5` (every v4 key
//! means the same in edition 5; a v4 `torch.stable-abi = "2.10"` is edition 5's one-version
//! form). kernel-builder then prints the whole model with `toml::to_string_pretty`, which drops
//! comments, orders kernels by hash order and writes defaults such as `src = []`. kbuild inserts
//! the key after `version` (where HF's printer puts it) and keeps every other byte, then reads
//! the result back and refuses to write it unless it is the same project in edition 5.

use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;
use toml_edit::{DocumentMut, Item, Key, Value};

use crate::config::{self, ConfigError, Edition, Project};
use crate::hint::Hint;

/// What `update_config` does with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    /// Write the edition-5 file in place.
    Write,
    /// Compute the change; write nothing.
    DryRun,
    /// Report whether an update is needed (an edition-5 file is up to date); write nothing.
    Check,
}

/// Where the manifest stands after `update_config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpdateStatus {
    /// The file was rewritten as edition 5.
    Updated,
    /// The file is v4 and would be rewritten (`--dry-run`, `--check`).
    NeedsUpdate,
    /// The file is already edition 5 (`--check` only).
    UpToDate,
}

/// One changed stretch of lines, numbered as in the old file (`removed`) and the new (`added`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hunk {
    /// 1-based line of the new file where `added` starts.
    pub line: usize,
    pub removed: Vec<String>,
    pub added: Vec<String>,
}

/// The outcome: the manifest, its status, the change and the new text.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigUpdate {
    pub manifest: PathBuf,
    pub status: UpdateStatus,
    /// Empty when the file is up to date.
    pub changes: Vec<Hunk>,
    /// The edition-5 file (the file as it is when up to date).
    #[serde(skip)]
    pub text: String,
}

/// Why `update-config` stopped.
#[derive(Debug, Error)]
pub enum UpdateError {
    #[error(transparent)]
    Config(#[from] Box<ConfigError>),
    /// The file already says `edition = 5`.
    #[error("`{}` is already edition 5: nothing to update", path.display())]
    AlreadyCurrent { path: PathBuf },
    /// toml_edit rejects text that kbuild's reader accepted.
    #[error("cannot edit `{}`: {message}", path.display())]
    Edit { path: PathBuf, message: String },
    /// The edited file is not the same project in edition 5 (a kbuild bug; nothing written).
    #[error("the edition-5 `{}` would not be the same project: {why}", path.display())]
    NotEquivalent { path: PathBuf, why: String },
    /// Writing the new file failed (the old one is left as it was).
    #[error("cannot write `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Hint for UpdateError {
    fn hint(&self) -> Option<String> {
        match self {
            UpdateError::Config(e) => e.hint(),
            UpdateError::AlreadyCurrent { .. } => Some(
                "`kbuild check-config` validates it; `kbuild update-config --check` exits 0 for \
                 an edition-5 file in CI"
                    .into(),
            ),
            UpdateError::Edit { .. } | UpdateError::NotEquivalent { .. } => Some(
                "this is a kbuild bug: please report it with the build.toml; add `edition = 5` \
                 under `[general]` by hand meanwhile"
                    .into(),
            ),
            UpdateError::Write { .. } => {
                Some("check the permissions of the project directory and the free space".into())
            }
        }
    }
}

impl From<ConfigError> for UpdateError {
    fn from(e: ConfigError) -> Self {
        UpdateError::Config(Box::new(e))
    }
}

/// Upgrade `<project_dir>/build.toml` from v4 to edition 5 as `mode` says.
pub fn update_config(project_dir: &Path, mode: UpdateMode) -> Result<ConfigUpdate, UpdateError> {
    let project = config::load(project_dir)?;
    let path = project.manifest.clone();
    let old = read(&path)?;
    if project.edition == Edition::V5 {
        return match mode {
            UpdateMode::Check => Ok(ConfigUpdate {
                manifest: path,
                status: UpdateStatus::UpToDate,
                changes: Vec::new(),
                text: old,
            }),
            UpdateMode::Write | UpdateMode::DryRun => Err(UpdateError::AlreadyCurrent { path }),
        };
    }
    let new = add_edition(&old).map_err(|message| UpdateError::Edit {
        path: path.clone(),
        message,
    })?;
    same_project(&project, &new, project_dir)?;
    let status = if mode == UpdateMode::Write {
        crate::files::write_atomic(&path, new.as_bytes()).map_err(|source| UpdateError::Write {
            path: path.clone(),
            source,
        })?;
        UpdateStatus::Updated
    } else {
        UpdateStatus::NeedsUpdate
    };
    Ok(ConfigUpdate {
        manifest: path,
        status,
        changes: diff_lines(&old, &new),
        text: new,
    })
}

fn read(path: &Path) -> Result<String, UpdateError> {
    let bytes = crate::files::read_regular(path, config::MAX_MANIFEST_BYTES).map_err(|source| {
        ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    // `config::load` has just read the same file as UTF-8.
    String::from_utf8(bytes).map_err(|e| {
        UpdateError::from(ConfigError::Read {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })
    })
}

/// `text` with `edition = 5` in `[general]`, right after `version` (at the end of `[general]`
/// when it has no `version`; at the end of an inline `general = { ... }`).
pub fn add_edition(text: &str) -> Result<String, String> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    match doc.get_mut("general") {
        Some(Item::Table(general)) => {
            let keys: Vec<String> = general.iter().map(|(k, _)| k.to_string()).collect();
            let mut entries = Vec::with_capacity(keys.len() + 1);
            for key in &keys {
                entries.extend(general.remove_entry(key));
            }
            let at = entries
                .iter()
                .position(|(k, _)| k.get() == "version")
                .map_or(entries.len(), |i| i + 1);
            entries.insert(at, (Key::new("edition"), Item::Value(Value::from(5))));
            for (key, item) in entries {
                general.insert_formatted(&key, item);
            }
        }
        Some(Item::Value(Value::InlineTable(general))) => {
            general.insert("edition", Value::from(5));
        }
        _ => return Err("no `[general]` table".into()),
    }
    Ok(doc.to_string())
}

/// Refuse `new` unless kbuild reads it as edition 5 of the same project as `old`.
fn same_project(old: &Project, new: &str, root: &Path) -> Result<(), UpdateError> {
    let path = old.manifest.clone();
    let not_same = |why: String| UpdateError::NotEquivalent {
        path: path.clone(),
        why,
    };
    let upgraded = config::parse_str(new, &path, root).map_err(|e| not_same(e.to_string()))?;
    if upgraded.edition != Edition::V5 {
        return Err(not_same("it does not read as edition 5".into()));
    }
    // Warnings point at lines, which moved; the model around them must not change.
    let model = |p: &Project| {
        let mut v = serde_json::to_value(p).unwrap_or_default();
        if let Some(map) = v.as_object_mut() {
            map.remove("edition");
            map.remove("warnings");
        }
        v
    };
    if model(old) != model(&upgraded) || old.warnings.len() != upgraded.warnings.len() {
        return Err(not_same("its model differs from the v4 file's".into()));
    }
    Ok(())
}

/// The changed lines between `old` and `new` as one hunk (the edit touches one place).
fn diff_lines(old: &str, new: &str) -> Vec<Hunk> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let rest = a.len().min(b.len()) - prefix;
    let suffix = (0..rest)
        .take_while(|&i| a[a.len() - 1 - i] == b[b.len() - 1 - i])
        .count();
    let removed = &a[prefix..a.len() - suffix];
    let added = &b[prefix..b.len() - suffix];
    if removed.is_empty() && added.is_empty() {
        return Vec::new();
    }
    let owned = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect();
    vec![Hunk {
        line: prefix + 1,
        removed: owned(removed),
        added: owned(added),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edition_goes_after_version_and_comments_stay() {
        let old = "# top\n[general]\nname = \"x\" # the name\nversion = 1 # major\n\
                   license = \"mit\"\nbackends = [\"cpu\"] # only cpu\n\n[general.hub]\n\
                   repo-id = \"a/b\"\n\n# kernels\n[kernel.b]\nbackend = \"cpu\"\n";
        let new = add_edition(old).unwrap();
        assert_eq!(
            new,
            old.replace(
                "version = 1 # major\n",
                "version = 1 # major\nedition = 5\n"
            )
        );
        assert_eq!(
            diff_lines(old, &new),
            vec![Hunk {
                line: 5,
                removed: vec![],
                added: vec!["edition = 5".into()],
            }]
        );
    }

    #[test]
    fn inline_general_gets_edition_at_its_end() {
        let new = add_edition("general = { name = \"x\", version = 1 }\n").unwrap();
        assert_eq!(
            new,
            "general = { name = \"x\", version = 1 , edition = 5 }\n"
        );
    }
}
