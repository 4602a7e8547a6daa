//! Where the variants `kbuild verify` checks come from: a variant or build directory, an
//! artifact or a wheel (unpacked into a temporary directory), or a version published on the Hub
//! (downloaded through hf-hub).

use std::path::{Path, PathBuf};

use super::error::VerifyError;
use crate::package::{UnpackLimits, unpack_artifact, unpack_wheel};
use crate::sign::{RECORD, SignerRecord};

/// A variant to verify: its name (`torch215-cxx11-cu132-x86_64-linux`) and its files.
#[derive(Debug, Clone)]
pub struct Located {
    pub name: String,
    pub dir: PathBuf,
}

/// The variants found, and the temporary directory holding them (if they were unpacked or
/// downloaded), removed when this is dropped.
pub struct Found {
    pub variants: Vec<Located>,
    /// The signer the published snapshot records (`signing.json`), and where it was read.
    pub record: Option<(SignerRecord, String)>,
    _staging: Option<tempfile::TempDir>,
}

/// A published version to download.
#[derive(Debug, Clone)]
pub struct HubSource {
    /// `HF_ENDPOINT` or `https://huggingface.co`.
    pub endpoint: String,
    pub token: Option<String>,
    /// `org/name`.
    pub repo: String,
    /// A kernel repository, or a model one (legacy kernel repositories).
    pub repo_type: hf_hub::RepoTypeAny,
    /// `v<N>` for `--version N`, or `--revision`.
    pub revision: String,
}

fn staging() -> Result<tempfile::TempDir, VerifyError> {
    tempfile::tempdir().map_err(|source| VerifyError::Temp {
        path: std::env::temp_dir(),
        source,
    })
}

/// The variants at `path`: a variant directory, a directory of variants (`build/`), an
/// artifact or a wheel.
pub fn at_path(path: &Path, limits: UnpackLimits) -> Result<Found, VerifyError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Err(VerifyError::Missing {
            path: path.to_path_buf(),
        });
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if file_name.ends_with(".tar.gz") {
        let staged = staging()?;
        let variant = unpack_artifact(path, staged.path(), limits)?;
        let located = Located {
            name: variant.name.clone(),
            dir: variant.dir.clone(),
        };
        return Ok(found(vec![located], Some(staged)));
    }
    if file_name.ends_with(".whl") {
        let staged = staging()?;
        unpack_wheel(path, staged.path(), limits)?;
        let mut variants = variants_below(staged.path())?;
        if let Some(name) = wheel_variant_name(&file_name) {
            variants.iter_mut().for_each(|v| v.name = name.clone());
        }
        return Ok(found(variants, Some(staged)));
    }
    if path.join("metadata.json").is_file() {
        let dir = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(Found {
            record: recorded(&dir)?,
            ..found(vec![Located { name, dir }], None)
        });
    }
    let variants = variants_below(path)?;
    if variants.is_empty() {
        return Err(VerifyError::NoVariants {
            path: path.to_path_buf(),
        });
    }
    let dir = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(Found {
        record: recorded(&dir)?,
        ..found(variants, None)
    })
}

/// The signer record of the published snapshot `dir` lies in (a download of a repository:
/// `signing.json` beside `build/`), and where it is.
fn recorded(dir: &Path) -> Result<Option<(SignerRecord, String)>, VerifyError> {
    let found = SignerRecord::find(dir)?;
    Ok(found.map(|(record, file)| (record, format!("`{}`", file.display()))))
}

fn found(variants: Vec<Located>, staging: Option<tempfile::TempDir>) -> Found {
    Found {
        variants,
        record: None,
        _staging: staging,
    }
}

/// The directories of `dir` holding a metadata.json, sorted; hidden ones (`.kbuild`) are
/// kbuild's own.
fn variants_below(dir: &Path) -> Result<Vec<Located>, VerifyError> {
    let entries = std::fs::read_dir(dir).map_err(|source| {
        VerifyError::Package(crate::package::PackageError::Read {
            path: dir.to_path_buf(),
            source,
        })
    })?;
    let mut out: Vec<Located> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.join("metadata.json").is_file())
        .map(|dir| Located {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The variant a kbuild wheel holds, from its file name: the local version names torch, the
/// C++ ABI and the compute backend, the platform tag the architecture
/// (`relu-1+torch215.cxx11.cu132-cp39-abi3-manylinux_2_28_x86_64.whl` holds
/// `torch215-cxx11-cu132-x86_64-linux`, `…+torch.cpu-py3-none-any.whl` `torch-cpu`).
pub fn wheel_variant_name(file_name: &str) -> Option<String> {
    let stem = file_name.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    let [_, version, _, _, platform] = parts.as_slice() else {
        return None;
    };
    let local = version.split_once('+')?.1;
    if let Some(backend) = local.strip_prefix("torch.") {
        return Some(format!("torch-{backend}"));
    }
    let arch = platform
        .strip_prefix("linux_")
        .or_else(|| platform.strip_prefix("manylinux_")?.splitn(3, '_').nth(2))?;
    Some(format!("{}-{arch}-linux", local.replace('.', "-")))
}

/// Download `build/` (and the signer record) of the published version into a temporary
/// directory; its variants.
pub async fn from_hub(hub: &HubSource) -> Result<Found, VerifyError> {
    let failed = |message: String| VerifyError::Download {
        endpoint: hub.endpoint.clone(),
        repo: hub.repo.clone(),
        revision: hub.revision.clone(),
        message,
    };
    let staged = staging()?;
    let mut client = hf_hub::HFClient::builder()
        .endpoint(hub.endpoint.clone())
        .cache_dir(staged.path().join("cache"))
        .retry_max_attempts(3);
    if let Some(token) = &hub.token {
        client = client.token(token.clone());
    }
    let client = client.build().map_err(|e| failed(e.to_string()))?;
    let (owner, name) = hf_hub::split_id(&hub.repo);
    let local = staged.path().join("published");
    client
        .repository(hub.repo_type, owner, name)
        .snapshot_download()
        .revision(hub.revision.clone())
        .allow_patterns(vec!["build/**".to_string(), RECORD.to_string()])
        .local_dir(local.clone())
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let build = local.join("build");
    let variants = if build.is_dir() {
        variants_below(&build)?
    } else {
        Vec::new()
    };
    if variants.is_empty() {
        return Err(VerifyError::NothingPublished {
            repo: hub.repo.clone(),
            revision: hub.revision.clone(),
        });
    }
    let record = match local.join(RECORD) {
        file if file.is_file() => Some((
            SignerRecord::read(&file)?,
            format!("`{RECORD}` of {} at `{}`", hub.repo, hub.revision),
        )),
        _ => None,
    };
    Ok(Found {
        record,
        ..found(variants, Some(staged))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wheel_names_its_variant() {
        assert_eq!(
            wheel_variant_name("relu-1+torch215.cxx11.cu132-cp39-abi3-manylinux_2_28_x86_64.whl")
                .as_deref(),
            Some("torch215-cxx11-cu132-x86_64-linux")
        );
        assert_eq!(
            wheel_variant_name("relu-1+torch29.cxx11.cpu-cp39-abi3-linux_aarch64.whl").as_deref(),
            Some("torch29-cxx11-cpu-aarch64-linux")
        );
        assert_eq!(
            wheel_variant_name("silu-1+torch.cpu-py3-none-any.whl").as_deref(),
            Some("torch-cpu")
        );
        assert_eq!(wheel_variant_name("relu-1-py3-none-any.whl"), None);
    }
}
