//! `BuiltVariant`: one `build/<variant>/` directory, in both directions. `install_variant`
//! writes it from a plan; `BuiltVariant::read` reads it back and verifies it (metadata.json as
//! kernels accepts it, the digest, the op namespace, regular files only). Everything after the
//! build (publish, the card) works from a `BuiltVariant` and never opens variant files itself.

use std::path::{Path, PathBuf};

use kernels_data::digest::DigestAlgorithm;

use super::digest::{VariantDigest, VariantFiles, open_regular, variant_files};
use super::error::PackageError;
use super::generate::{capabilities_py, capability_table, ops_py};
use super::inspect::{check_namespace, is_identifier, public_functions};
use super::metadata::{
    BackendInfo, BuilderVersion, CapabilityDtypes, GitStatus, KbuildSection, KernelDependencyEntry,
    Metadata, Provenance,
};
use super::stage::Stage;
use crate::config::{Backend, KernelPin, Project};
use crate::plan::VariantPlan;

/// A built variant: its metadata.json, and what its files say.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BuiltVariant {
    /// Directory name, e.g. `torch215-cxx11-cpu-x86_64-linux`.
    pub name: String,
    pub dir: PathBuf,
    /// Kernel name as in metadata (`ltx-kernels`).
    pub kernel_name: String,
    /// Op namespace (= extension module name).
    pub id: String,
    pub version: u32,
    pub license: String,
    pub upstream: Option<String>,
    pub source: Option<String>,
    pub python_depends: Vec<String>,
    /// `kernel-depends` as metadata.json records them.
    pub kernel_depends: Vec<KernelDependencyEntry>,
    /// `cuda`, `cpu`, ...
    pub backend: String,
    /// As in metadata.json (`9.0+PTX` marks the capability with PTX); empty when not recorded.
    pub archs: Vec<String>,
    /// The dtypes each compiled capability carries, oldest capability first; empty for
    /// non-CUDA builds and for variants not built by kbuild.
    pub capabilities: Vec<CapabilityDtypes>,
    /// The capability whose PTX is embedded.
    pub ptx: Option<String>,
    /// Public functions (`__all__` of `__init__.py`).
    pub ops: Vec<String>,
    pub provenance: Option<Provenance>,
    /// Files relative to `dir`, `/`-separated, sorted: those of the digest plus metadata.json
    /// (and its sigstore bundle when present). Caches (`__pycache__`, `.pyc`) are not part of a
    /// variant.
    pub files: Vec<String>,
    pub digest: VariantDigest,
}

impl BuiltVariant {
    /// Read and verify `build/<variant>`: every file regular (no links, FIFOs or devices, nor
    /// the directory itself a link), metadata.json accepted by kernels, the files matching its
    /// digest, and the extension and `_ops.py` using the op namespace of its `id`.
    pub fn read(dir: &Path) -> Result<BuiltVariant, PackageError> {
        let files = variant_files(dir)?;
        let metadata_path = dir.join("metadata.json");
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut open_regular(&metadata_path)?, &mut bytes).map_err(
            |source| PackageError::Read {
                path: metadata_path.clone(),
                source,
            },
        )?;
        let invalid = |message: String| PackageError::Metadata {
            path: metadata_path.clone(),
            message,
        };
        let metadata = Metadata::parse(&bytes).map_err(invalid)?;
        let Some(expected) = &metadata.digest else {
            return Err(invalid(
                "no `digest`: kernels cannot check this variant's files".into(),
            ));
        };
        if !is_identifier(&metadata.id) {
            return Err(invalid(format!(
                "`id` `{}` is not a valid Python module name",
                metadata.id
            )));
        }
        let actual = VariantDigest::hash(expected.algorithm, &files.hashed)?;
        let violations = expected.violations(&actual);
        if !violations.is_empty() {
            return Err(PackageError::Digest {
                dir: dir.to_path_buf(),
                violations: violations.iter().map(|v| format!("  {v}")).collect(),
            });
        }
        check_namespace(dir, &metadata.id, actual.files.keys().map(String::as_str))?;
        let ops = public_functions(dir)?;
        Ok(BuiltVariant::from_metadata(dir, metadata, &files, ops))
    }

    /// Built from a dirty git tree: the `_dirty` id suffix, or provenance says the kernel
    /// source or the builder was dirty (what kernels 0.17 warns about).
    pub fn dirty(&self) -> bool {
        self.id.ends_with("_dirty")
            || self.provenance.as_ref().is_some_and(|p| {
                p.kernel.as_ref().is_some_and(|k| k.dirty) || p.builder.dirty == Some(true)
            })
    }

    /// Whether kbuild built it: its provenance names kbuild as the builder (kbuild writes that
    /// into every variant it installs, and its digest pins every file beside it).
    pub fn built_by_kbuild(&self) -> bool {
        self.provenance
            .as_ref()
            .is_some_and(|p| p.builder.version.starts_with("kbuild "))
    }

    /// The commit of the kernel's sources that provenance records, if any.
    pub fn commit(&self) -> Option<&str> {
        let kernel = self.provenance.as_ref()?.kernel.as_ref()?;
        Some(kernel.commit.as_str())
    }

    /// `metadata` must hold a digest (both callers checked or wrote it).
    fn from_metadata(
        dir: &Path,
        metadata: Metadata,
        files: &VariantFiles,
        ops: Vec<String>,
    ) -> BuiltVariant {
        let mut listed: Vec<String> = files
            .hashed
            .iter()
            .chain(&files.metadata)
            .map(|f| f.rel.clone())
            .collect();
        listed.sort();
        let kbuild = metadata.kbuild.unwrap_or(KbuildSection {
            capabilities: Vec::new(),
            ptx: None,
            nvcc: None,
        });
        BuiltVariant {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: dir.to_path_buf(),
            kernel_name: metadata.name,
            id: metadata.id,
            version: metadata.version,
            license: metadata.license,
            upstream: metadata.upstream,
            source: metadata.source,
            python_depends: metadata.python_depends,
            kernel_depends: metadata.kernel_depends,
            backend: metadata.backend.backend_type,
            archs: metadata.backend.archs.unwrap_or_default(),
            capabilities: kbuild.capabilities,
            ptx: kbuild.ptx,
            ops,
            provenance: metadata.provenance,
            files: listed,
            digest: metadata.digest.unwrap_or(VariantDigest {
                algorithm: DigestAlgorithm::SHA256,
                files: Default::default(),
            }),
        }
    }
}

/// Metadata for one variant of a project (digest filled in by [`install_variant`]); `nvcc`
/// says who runs the device passes of its CUDA units ([`NVCC_STEPS`] or [`ONE_NVCC`]),
/// recorded when it has any.
///
/// [`NVCC_STEPS`]: super::NVCC_STEPS
/// [`ONE_NVCC`]: super::ONE_NVCC
pub fn metadata_for(
    project: &Project,
    variant: &VariantPlan,
    kernel_git: Option<GitStatus>,
    nvcc: &str,
) -> Metadata {
    let mut python_depends = project.general.python_depends.clone();
    if variant.backend == Backend::Cuda {
        python_depends.extend(project.general.cuda.python_depends.iter().cloned());
    }
    let archs = (variant.backend == Backend::Cuda && !variant.archs.is_empty())
        .then(|| variant.archs.clone());
    Metadata {
        name: project.general.name.clone(),
        id: variant.id.clone(),
        version: project.general.version,
        license: project.general.license.clone(),
        upstream: project.general.upstream.clone(),
        source: project.general.source.clone(),
        python_depends,
        kernel_depends: project
            .general
            .kernel_depends_for(variant.backend)
            .into_iter()
            .map(|dep| {
                let (version, revision) = match dep.pin {
                    KernelPin::Version(v) => (Some(v), None),
                    KernelPin::Revision(r) => (None, Some(r)),
                };
                KernelDependencyEntry {
                    repo_id: dep.repo_id,
                    version,
                    revision,
                }
            })
            .collect(),
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
        kbuild: capability_table(variant).map(|mut table| {
            let cuda = variant
                .compile
                .iter()
                .any(|j| j.lang == crate::plan::Lang::Cuda);
            table.nvcc = cuda.then(|| nvcc.to_string());
            table
        }),
    }
}

/// How installing a variant ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// The variant directory was (re)written.
    Written,
    /// The staged variant was identical to the one in place, which was left untouched.
    Unchanged,
}

/// A variant in place, and whether this install wrote it.
#[derive(Debug)]
pub struct Install {
    pub variant: BuiltVariant,
    pub outcome: Installed,
}

/// The variants of `variants` by the commit they were built from (those that record one),
/// commits in sorted order: more than one entry is a build mixed from several commits.
pub fn by_commit(variants: &[BuiltVariant]) -> Vec<(String, Vec<String>)> {
    let mut out: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for v in variants {
        if let Some(commit) = v.commit() {
            out.entry(commit.to_string())
                .or_default()
                .push(v.name.clone());
        }
    }
    out.into_iter().collect()
}

/// `abc1234 (torch214-…, torch215-…)` for each commit: how messages name a mixed build.
pub fn describe_commits(commits: &[(String, Vec<String>)]) -> String {
    commits
        .iter()
        .map(|(c, names)| {
            let short = c.get(..12).unwrap_or(c);
            format!("`{short}` ({})", names.join(", "))
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

/// Stage `build/<variant>/` (Python files, generated glue, the extension, metadata.json with
/// its digest) and rename it into place; an identical variant already there stays untouched.
pub fn install_variant(
    variant: &VariantPlan,
    out_dir: &Path,
    mut metadata: Metadata,
) -> Result<Install, PackageError> {
    let target = out_dir.join(&variant.name);
    let stage = Stage::new(&target)?;
    let root = stage.path().to_path_buf();
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PackageError::Io { path, source }
    };
    for (src, rel) in &variant.python_files {
        let dest = root.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        copy_file(src, &dest)?;
    }
    let ops_path = root.join("_ops.py");
    std::fs::write(&ops_path, ops_py(variant)?).map_err(io(&ops_path))?;
    let caps_path = root.join("_capabilities.py");
    std::fs::write(&caps_path, capabilities_py(variant)?).map_err(io(&caps_path))?;
    if let Some(link) = &variant.link {
        let so = root.join(link.output.file_name().unwrap_or_default());
        copy_file(&link.output, &so)?;
    }
    let mut files = variant_files(&root)?;
    metadata.digest = Some(VariantDigest::hash(DigestAlgorithm::SHA256, &files.hashed)?);
    let metadata_path = root.join("metadata.json");
    std::fs::write(&metadata_path, metadata.to_json()).map_err(io(&metadata_path))?;
    files.metadata = vec![super::tree::TreeFile {
        rel: "metadata.json".into(),
        path: metadata_path,
    }];
    let ops = public_functions(&root)?;
    let built = BuiltVariant::from_metadata(&target, metadata, &files, ops);

    if BuiltVariant::read(&target).is_ok_and(|old| old == built) {
        return Ok(Install {
            variant: built,
            outcome: Installed::Unchanged,
        });
    }
    stage.commit()?;
    Ok(Install {
        variant: built,
        outcome: Installed::Written,
    })
}

/// Copy `from` to the new file `to` (with `from`'s permissions). A failure names the side that
/// failed: reading the source, or writing the destination (a full disk is the usual cause).
fn copy_file(from: &Path, to: &Path) -> Result<(), PackageError> {
    use std::io::{Read as _, Write as _};
    let read_error = |source| PackageError::Read {
        path: from.to_path_buf(),
        source,
    };
    let write_error = |source| PackageError::Io {
        path: to.to_path_buf(),
        source,
    };
    let mut input = crate::files::open_regular(from).map_err(read_error)?;
    let permissions = input.metadata().map_err(read_error)?.permissions();
    let mut output = std::fs::File::create(to).map_err(write_error)?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_error(e)),
        };
        output.write_all(&buf[..n]).map_err(write_error)?;
    }
    // tmpfs and most local filesystems report a full disk at write time; NFS and some others
    // only when the data is flushed.
    output.sync_all().map_err(write_error)?;
    output.set_permissions(permissions).map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_while_copying_names_the_destination_not_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("__init__.py");
        std::fs::write(&from, "x = 1\n").unwrap();
        // Every write to /dev/full fails with ENOSPC, as on a full disk.
        match copy_file(&from, Path::new("/dev/full")) {
            Err(PackageError::Io { path, source }) => {
                assert_eq!(path, Path::new("/dev/full"));
                assert_eq!(source.kind(), std::io::ErrorKind::StorageFull);
            }
            other => panic!("expected a write error naming /dev/full, got {other:?}"),
        }
    }

    #[test]
    fn an_unreadable_source_is_named_as_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone.py");
        match copy_file(&missing, &dir.path().join("out.py")) {
            Err(PackageError::Read { path, .. }) => assert_eq!(path, missing),
            other => panic!("expected a read error naming the source, got {other:?}"),
        }
    }
}
