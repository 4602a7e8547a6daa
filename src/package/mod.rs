//! Hub variant writer: generated files, metadata.json with digest, staged and renamed into place.

mod generate;
mod metadata;
mod stage;
pub mod verify;

pub use generate::{capabilities_py, dtypes_h, ops_py, registration_h};
pub use metadata::{BackendInfo, BuilderVersion, GitStatus, Metadata, Provenance};
pub use stage::{Stage, write_if_changed};

use std::path::PathBuf;

use crate::config::{Backend, Project};
use crate::hint::Hint;
use crate::plan::VariantPlan;

/// A packaging failure.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("cannot write `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("template `{name}` failed to render: {reason}")]
    Template { name: String, reason: String },
    #[error("cannot hash variant `{dir}`: {reason}")]
    Hash { dir: PathBuf, reason: String },
    /// A file of a built variant could not be read.
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `metadata.json` of a variant is not what kernels expects.
    #[error("invalid `{}`: {message}", path.display())]
    Metadata { path: PathBuf, message: String },
    /// The files of a variant do not match the digest in its metadata.
    #[error("`{}` does not match the digest in its metadata.json:\n{}", dir.display(), violations.join("\n"))]
    Digest {
        dir: PathBuf,
        violations: Vec<String>,
    },
    /// The extension or `_ops.py` uses another op namespace than metadata `id`.
    #[error("`{}` uses op namespace `{found}`, but metadata.json says `{expected}`", path.display())]
    Namespace {
        path: PathBuf,
        expected: String,
        found: String,
    },
}

impl Hint for PackageError {
    fn hint(&self) -> Option<String> {
        match self {
            PackageError::Io { .. } => {
                Some("check permissions and free space of the output directory".into())
            }
            PackageError::Template { .. } => Some("this is a kbuild bug: please report it".into()),
            PackageError::Hash { .. } => None,
            PackageError::Read { .. } => Some(
                "check the build directory's permissions, or rebuild it with `kbuild build`".into(),
            ),
            PackageError::Metadata { .. } | PackageError::Namespace { .. } => Some(
                "rebuild the variant with `kbuild build`; do not edit build outputs by hand".into(),
            ),
            PackageError::Digest { .. } => Some(
                "the variant changed after it was built (or a build was interrupted): \
                 rebuild it with `kbuild build`"
                    .into(),
            ),
        }
    }
}

/// Write the generated headers a variant's sources include (before compiling).
pub fn write_headers(variant: &VariantPlan) -> Result<(), PackageError> {
    let dir = &variant.generated_include;
    write_if_changed(
        &dir.join("registration.h"),
        registration_h(variant)?.as_bytes(),
    )?;
    write_if_changed(&dir.join("kbuild_dtypes.h"), dtypes_h(variant)?.as_bytes())?;
    Ok(())
}

/// How installing a variant ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// The variant directory was (re)written.
    Written,
    /// The staged variant was identical to the one in place, which was left untouched.
    Unchanged,
}

/// Metadata for one variant of a project (digest filled in by [`install_variant`]).
pub fn metadata_for(
    project: &Project,
    variant: &VariantPlan,
    kernel_git: Option<GitStatus>,
) -> Metadata {
    let mut python_depends = project.general.python_depends.clone();
    if variant.backend == Backend::Cuda {
        python_depends.extend(project.general.cuda.python_depends.iter().cloned());
    }
    let archs = (variant.backend == Backend::Cuda && !variant.capabilities.is_empty()).then(|| {
        let last = variant.capabilities.len() - 1;
        variant
            .capabilities
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last && variant.link.is_some() {
                    format!("{c}+PTX")
                } else {
                    c.to_string()
                }
            })
            .collect()
    });
    Metadata {
        name: project.general.name.clone(),
        id: variant.id.clone(),
        version: project.general.version,
        license: project.general.license.clone(),
        upstream: project.general.upstream.clone(),
        source: project.general.source.clone(),
        python_depends,
        backend: BackendInfo {
            backend_type: variant.backend.as_str().to_string(),
            archs,
        },
        digest: None,
        provenance: Some(Provenance {
            builder: BuilderVersion {
                version: format!("kbuild {}", env!("CARGO_PKG_VERSION")),
                dirty: None,
            },
            kernel: kernel_git,
        }),
    }
}

/// Stage `build/<variant>/` (Python files, generated glue, the extension, metadata.json with
/// its digest) and rename it into place.
pub fn install_variant(
    variant: &VariantPlan,
    out_dir: &std::path::Path,
    mut metadata: Metadata,
) -> Result<Installed, PackageError> {
    let target = out_dir.join(&variant.name);
    let stage = Stage::new(&target)?;
    let root = stage.path().to_path_buf();
    let io = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| PackageError::Io { path, source }
    };
    for (src, rel) in &variant.python_files {
        let dest = root.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::copy(src, &dest).map_err(io(src))?;
    }
    std::fs::write(root.join("_ops.py"), ops_py(variant)?).map_err(io(&root))?;
    std::fs::write(root.join("_capabilities.py"), capabilities_py(variant)?).map_err(io(&root))?;
    if let Some(link) = &variant.link {
        let so_name = link.output.file_name().unwrap_or_default();
        std::fs::copy(&link.output, root.join(so_name)).map_err(io(&link.output))?;
    }
    metadata.set_digest(&root)?;
    let json = metadata.to_json();
    std::fs::write(root.join("metadata.json"), &json).map_err(io(&root))?;

    // An identical variant already in place stays untouched (same digest, same metadata).
    if std::fs::read_to_string(target.join("metadata.json")).is_ok_and(|old| old == json)
        && Metadata::from_dir(&target).is_some_and(|m| m.digest_matches(&target))
    {
        return Ok(Installed::Unchanged);
    }
    stage.commit()?;
    Ok(Installed::Written)
}

impl Metadata {
    /// Read `<dir>/metadata.json`, if it parses.
    pub fn from_dir(dir: &std::path::Path) -> Option<Metadata> {
        let text = std::fs::read_to_string(dir.join("metadata.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Whether the files in `dir` still match this metadata's digest.
    pub fn digest_matches(&self, dir: &std::path::Path) -> bool {
        let Some(expected) = &self.digest else {
            return false;
        };
        kernels_data::digest::Digest::hash_variant(expected.algorithm(), dir)
            .is_ok_and(|actual| expected.validate(&actual).is_ok())
    }
}
