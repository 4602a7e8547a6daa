//! Checks that span tables and the project tree: paths on disk, kernels against the matrix and the
//! framework, the Python package directory. Produces the final `Project`.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::capability::Capability;
use super::error::{ConfigError, ErrorKind, Source};
use super::kernels::{RawKernel, RawMatrix};
use super::model::{Backend, ConfigWarning, Framework, KbuildExt, Kernel, Project};
use super::paths::{PathKind, PathRef};
use super::schema::{Raw, RawFramework};
use super::suggest;

/// Run the cross-checks and assemble the project.
pub(crate) fn finish(
    src: &Source<'_>,
    raw: Raw,
    root: &Path,
    manifest: PathBuf,
) -> Result<Project, ConfigError> {
    let canonical_root = root.canonicalize().map_err(|e| ConfigError::Read {
        path: root.to_path_buf(),
        source: e,
    })?;
    let (framework, noarch) = match raw.framework {
        RawFramework::Torch(t) => (Framework::Torch(t), false),
        RawFramework::Noarch(n) => (Framework::TorchNoarch(n), true),
        RawFramework::TvmFfi(f) => (Framework::TvmFfi(f), false),
    };
    if noarch && let Some(first) = raw.kernels.iter().min_by_key(|k| k.span.start) {
        return Err(src.error(
            &first.span,
            ErrorKind::Conflict,
            format!(
                "`[kernel.{}]` needs `[torch]`: `[torch-noarch]` kernels are not compiled",
                first.kernel.name
            ),
            "replace `[torch-noarch]` with `[torch]`, or remove the kernel tables".to_string(),
        ));
    }
    check_kernels_in_matrix(src, &raw.kernels, &raw.matrix)?;
    for p in &raw.paths {
        check_path(src, p, root, &canonical_root)?;
    }
    check_python_package(
        src,
        framework.extension_dir(),
        &raw.general.python_name(),
        &raw.general.name,
        &raw.name_span,
        root,
        &canonical_root,
    )?;
    let mut warnings = src.take_warnings();
    warnings.extend(unbuilt_kernels(src, &raw.kernels, &raw.general.backends));
    let mut kbuild = KbuildExt::default();
    for (cap, dtypes) in raw.matrix {
        kbuild.locations.insert(cap.v, src.location(cap.span.start));
        kbuild.capabilities.insert(cap.v, dtypes);
    }
    let kernels: Vec<Kernel> = raw.kernels.into_iter().map(|k| k.kernel).collect();
    Ok(Project {
        root: canonical_root,
        manifest,
        edition: raw.edition,
        general: raw.general,
        framework,
        kernels,
        kbuild,
        warnings,
    })
}

/// With a `[kbuild.cuda-capabilities]` matrix, every capability a kernel lists must be in it.
fn check_kernels_in_matrix(
    src: &Source<'_>,
    kernels: &[RawKernel],
    matrix: &RawMatrix,
) -> Result<(), ConfigError> {
    let matrix: Vec<Capability> = matrix.iter().map(|(c, _)| c.v).collect();
    if matrix.is_empty() {
        return Ok(());
    }
    for k in kernels {
        for cap in &k.capabilities {
            if !matrix.contains(&cap.v) {
                return Err(src.error(
                    &cap.span,
                    ErrorKind::Conflict,
                    format!(
                        "capability `{}` of `[kernel.{}]` is not in `[kbuild.cuda-capabilities]`",
                        cap.v, k.kernel.name
                    ),
                    format!(
                        "add `\"{}\" = [...]` to `[kbuild.cuda-capabilities]` or remove it \
                         from the kernel (the matrix has {})",
                        cap.v,
                        matrix
                            .iter()
                            .map(|c| format!("`{c}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A warning for each kernel whose backend `[general] backends` does not list: it is kept in
/// the model but not built.
fn unbuilt_kernels(
    src: &Source<'_>,
    kernels: &[RawKernel],
    backends: &[Backend],
) -> Vec<ConfigWarning> {
    kernels
        .iter()
        .filter(|k| !backends.contains(&k.kernel.backend))
        .map(|k| {
            let b = k.kernel.backend;
            ConfigWarning {
                location: src.location(k.backend_span.start),
                message: format!(
                    "kernel `{}` is for backend `{b}`, which `[general] backends` does not list: \
                     it is not built",
                    k.kernel.name
                ),
                hint: Some(format!("add `{b}` to `backends`, or remove the kernel")),
            }
        })
        .collect()
}

fn check_path(
    src: &Source<'_>,
    p: &PathRef,
    root: &Path,
    canonical_root: &Path,
) -> Result<(), ConfigError> {
    let what = match p.kind {
        PathKind::Source => "source",
        PathKind::IncludeDir => "include directory",
    };
    let full = root.join(&p.path);
    let span = &p.written.span;
    let meta = match full.metadata() {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(src.error(
                span,
                ErrorKind::Path,
                format!("{what} `{}` does not exist", p.written.v),
                missing_hint(root, &p.path),
            ));
        }
        Err(e) => {
            return Err(src.error(
                span,
                ErrorKind::Path,
                format!("cannot read {what} `{}`: {e}", p.written.v),
                "check the file's permissions".to_string(),
            ));
        }
    };
    match p.kind {
        PathKind::Source if !meta.is_dir() && !meta.is_file() => {
            let kind = crate::files::kind_of(meta.file_type()).unwrap_or("special file");
            return Err(src.error(
                span,
                ErrorKind::Path,
                format!("source `{}` is a {kind}, not a regular file", p.written.v),
                "kbuild compiles and hashes regular files only: replace it with the file itself"
                    .to_string(),
            ));
        }
        PathKind::Source if meta.is_dir() => {
            return Err(src.error(
                span,
                ErrorKind::Path,
                format!("source `{}` is a directory", p.written.v),
                "list the files themselves; directories belong in `include`".to_string(),
            ));
        }
        PathKind::IncludeDir if !meta.is_dir() => {
            return Err(src.error(
                span,
                ErrorKind::Path,
                format!("include directory `{}` is not a directory", p.written.v),
                "list the directory that holds the header, or move the file to `src`".to_string(),
            ));
        }
        _ => {}
    }
    inside_root(src, span, what, &p.written.v, &full, canonical_root)
}

/// Symlinks may point anywhere; what kbuild compiles and hashes must live under the root.
fn inside_root(
    src: &Source<'_>,
    span: &Range<usize>,
    what: &str,
    written: &str,
    full: &Path,
    canonical_root: &Path,
) -> Result<(), ConfigError> {
    let real = full.canonicalize().map_err(|e| {
        src.error(
            span,
            ErrorKind::Path,
            format!("cannot resolve {what} `{written}`: {e}"),
            "check the symlinks on the way to it".to_string(),
        )
    })?;
    if !real.starts_with(canonical_root) {
        return Err(src.error(
            span,
            ErrorKind::Path,
            format!(
                "{what} `{written}` resolves to `{}`, outside the project",
                real.display()
            ),
            "a symlink leads out of the project root: copy the file into the project instead"
                .to_string(),
        ));
    }
    Ok(())
}

/// Suggest a near-miss sibling, or say which directory is missing.
fn missing_hint(root: &Path, path: &Path) -> String {
    let base = format!(
        "paths are relative to the project root `{}`",
        root.display()
    );
    let parent = path.parent().unwrap_or(Path::new(""));
    let Ok(dir) = root.join(parent).read_dir() else {
        return format!(
            "the directory `{}` does not exist either; {base}",
            parent.display()
        );
    };
    let names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let file = path
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    match suggest::closest(file, &refs) {
        Some(c) => format!("did you mean `{}`? {base}", parent.join(c).display()),
        None => base,
    }
}

/// `torch-ext/<python_name>/__init__.py` (`tvm-ffi-ext/` for TVM FFI) holds the kernel's Python
/// API; every variant copies it.
fn check_python_package(
    src: &Source<'_>,
    ext_dir: &str,
    python_name: &str,
    name: &str,
    name_span: &Range<usize>,
    root: &Path,
    canonical_root: &Path,
) -> Result<(), ConfigError> {
    let rel = Path::new(ext_dir).join(python_name).join("__init__.py");
    let full = root.join(&rel);
    if !full.is_file() {
        return Err(src.error(
            name_span,
            ErrorKind::Path,
            format!(
                "the Python package of `{name}` is missing: `{}` does not exist",
                rel.display()
            ),
            format!(
                "create `{}` (it may start empty): the kernel's Python API lives in `{ext_dir}/{python_name}/`",
                rel.display()
            ),
        ));
    }
    inside_root(
        src,
        name_span,
        "Python package",
        &rel.display().to_string(),
        &full,
        canonical_root,
    )
}
