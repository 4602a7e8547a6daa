//! build.toml: the HF kernel-builder format (edition 5 and edition-less v4) plus kbuild's
//! `[kbuild]` extension, parsed strictly with spans and validated against the project tree.
//!
//! # Editions
//! - **v4** (no `edition` key): the format most huggingface/kernels-community projects use:
//!   `[general]` (`name`, `version`, `license`, `backends`, ...), `[general.hub]`,
//!   `[general.cuda]`, `[torch]` or `[torch-noarch]`, and `[kernel.<name>]` tables.
//! - **edition 5** (`[general] edition = 5`): v4 plus `general.kernel-depends`, `general.tpu`,
//!   `general.{cuda,neuron,xpu}.kernel-depends` and a per-backend `[torch.stable-abi]` table.
//!   Any other `edition` is an error.
//!
//! Keys follow kernels-data's serde schema (at HEAD), including its spelling of `[torch-noarch]`
//! `cuda_capabilities` / `rocm_archs` with underscores. `[tvm-ffi]` and backends other than cpu
//! and cuda are valid config that kbuild does not build. Where kbuild is stricter than HF, and
//! where it warns instead: `docs/config-strictness.md`.
//!
//! # kbuild's extension
//! `[kbuild.cuda-capabilities]` maps each CUDA capability of the project's matrix to the dtypes
//! built for it (`"7.5" = ["float32", "float16"]`). A kernel's own `cuda-capabilities` must be a
//! subset of it. The `[kbuild]` table is accepted in both editions, but HF's kernel-builder
//! rejects unknown top-level tables: a project that must build with both tools leaves `[kbuild]`
//! out (kbuild then uses its default matrix with every dtype).
//!
//! # Decisions
//! - A kernel whose backend is not in `general.backends` is a warning (`Project::warnings`),
//!   not an error: kernel-builder ignores such kernels, and its docs recommend commenting a
//!   backend out of `backends` for testing. Such kernels stay in `Project::kernels`; consumers
//!   build only the backends listed in `general.backends`.
//! - A kernel's capabilities are kept when some GPU has them (`capability::KNOWN_CAPABILITIES`,
//!   suffixes `a` from 9.0 and `f` from 10.0), dropped with a warning otherwise (HF drops them
//!   when intersecting with nvcc); a list with none left is an error. Whether the installed nvcc
//!   supports them is the planner's question. `[kbuild.cuda-capabilities]` takes real ones only.
//! - A list entry written twice is used once, with a warning (HF accepts duplicates).
//! - Every path must exist, stay under the project root (after resolving symlinks), and be
//!   relative (`.` is a valid include directory); `torch-ext/<python_name>/__init__.py`
//!   (`tvm-ffi-ext/` for `[tvm-ffi]`) must exist.
//!
//! Errors stop at the first problem and point at it as `build.toml:line:column`.

mod capability;
mod discover;
mod error;
mod general;
mod kernels;
mod location;
mod model;
mod paths;
mod reader;
mod schema;
mod suggest;
mod validate;
mod values;
mod version;

pub use capability::{
    Capability, CapabilityProblem, KNOWN_CAPABILITIES, ParseCapabilityError, Spelling,
};
pub use discover::find_project_root;
pub use error::{ConfigError, ErrorKind};
pub use location::Location;
pub use model::*;
pub use suggest::{closest, edit_distance};
pub use values::{DEPENDENCY_NAMES, ParseBackendError, ParseDTypeError, ParseDependencyError};
pub use version::{ParseVersionError, Version};

use std::path::{Path, PathBuf};

use error::Source;

/// The largest build.toml kbuild reads: HF's biggest are a few KiB, and the cap keeps a link to
/// `/dev/zero` or a runaway generated file from filling memory.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Read and validate `<project_dir>/build.toml` (a regular file of at most 1 MiB).
pub fn load(project_dir: &Path) -> Result<Project, ConfigError> {
    let manifest = project_dir.join("build.toml");
    let bytes = match crate::files::read_regular(&manifest, MAX_MANIFEST_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError::NotFound {
                dir: project_dir.to_path_buf(),
            });
        }
        Err(e) => {
            return Err(ConfigError::Read {
                path: manifest,
                source: e,
            });
        }
    };
    let text = String::from_utf8(bytes).map_err(|e| ConfigError::Read {
        path: manifest.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })?;
    parse_with(&text, &manifest, project_dir)
}

/// Parse build.toml text as if it were `manifest` (the name shown in messages) in the project
/// `root`; paths are checked against `root`.
pub fn parse_str(src: &str, manifest: &Path, root: &Path) -> Result<Project, ConfigError> {
    parse_with(src, manifest, root)
}

fn parse_with(text: &str, shown_as: &Path, root: &Path) -> Result<Project, ConfigError> {
    let src = Source::new(text, shown_as);
    let doc = toml::de::DeTable::parse(text).map_err(|e| src.syntax_error(&e))?;
    let raw = schema::read(&src, doc.get_ref())?;
    let manifest = absolute(root)?.join(
        shown_as
            .file_name()
            .map_or_else(|| PathBuf::from("build.toml"), PathBuf::from),
    );
    validate::finish(&src, raw, root, manifest)
}

fn absolute(root: &Path) -> Result<PathBuf, ConfigError> {
    root.canonicalize().map_err(|e| ConfigError::Read {
        path: root.to_path_buf(),
        source: e,
    })
}
