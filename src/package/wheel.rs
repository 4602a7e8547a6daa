//! One wheel per built variant (PEP 427, tags of PEP 425, RECORD of PEP 376): the variant's files
//! as the importable package `<python_name>/`, and a `.dist-info` whose METADATA pins torch to
//! the major.minor the variant was built for.
//!
//! Versions keep variants apart in the local segment: `<version>+<variant without platform>`
//! with `-` as `.` (`relu-1+torch215.cxx11.cpu-cp39-abi3-linux_x86_64.whl`); the platform is in
//! the tag: `manylinux_2_28_<arch>` when every extension meets that policy (HF's
//! `kernel-abi-check`, as `kbuild check` applies it; kbuild builds them so by default), else
//! `linux_<arch>`.
//!
//! Byte-for-byte reproducible: entries in a fixed order, every timestamp 1980-01-01 (the oldest a
//! zip can hold), fixed permissions, one compression level.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use base64::prelude::{BASE64_URL_SAFE_NO_PAD, Engine as _};
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use zip::write::SimpleFileOptions;

use super::digest::open_regular;
use super::error::PackageError;
use super::name::VariantName;
use super::variant::BuiltVariant;

/// A wheel written for a variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wheel {
    pub path: PathBuf,
    /// Distribution name as in the file name (`ltx_kernels`).
    pub distribution: String,
    /// `1+torch215.cxx11.cu132`.
    pub version: String,
    /// `cp39-abi3-linux_x86_64`.
    pub tag: String,
}

/// What a variant's name and files say about its wheel.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WheelSpec {
    distribution: String,
    version: String,
    tag: String,
    pure: bool,
    torch: Option<(u32, u32)>,
}

impl WheelSpec {
    fn for_variant(variant: &BuiltVariant) -> Result<WheelSpec, PackageError> {
        let unsupported = |reason: &str| PackageError::WheelUnsupported {
            variant: variant.name.clone(),
            reason: reason.to_string(),
        };
        let distribution = distribution_name(&variant.kernel_name);
        let has_extension = variant.files.iter().any(|f| f.ends_with(".so"));
        let (local, tag, torch) = match VariantName::parse(&variant.name) {
            Some(VariantName::Noarch { backend }) => {
                if has_extension {
                    return Err(unsupported("a noarch variant holds a compiled extension"));
                }
                (format!("torch.{backend}"), "py3-none-any".to_string(), None)
            }
            Some(VariantName::Compiled {
                torch,
                abi,
                compute,
                arch,
                os,
            }) => {
                if os != "linux" {
                    return Err(unsupported("kbuild writes wheels for Linux variants only"));
                }
                let abi3 = variant
                    .files
                    .iter()
                    .all(|f| !f.ends_with(".so") || f.ends_with(".abi3.so"));
                if !abi3 {
                    return Err(unsupported(
                        "its extension is not built for the stable Python ABI (`.abi3.so`)",
                    ));
                }
                let (major, minor) = torch;
                let python = if has_extension {
                    "cp39-abi3"
                } else {
                    "py3-none"
                };
                let platform = platform_tag(variant, &arch);
                (
                    format!("torch{major}{minor}.{abi}.{compute}"),
                    format!("{python}-{platform}"),
                    Some(torch),
                )
            }
            Some(VariantName::StableAbi { .. }) => {
                return Err(unsupported(
                    "kbuild writes no wheel for a stable-ABI variant yet (publish it, or pack it)",
                ));
            }
            None => return Err(unsupported("its name is not a variant name kernels loads")),
        };
        Ok(WheelSpec {
            distribution,
            version: format!("{}+{}", variant.version, local.to_ascii_lowercase()),
            tag,
            pure: !has_extension,
            torch,
        })
    }

    fn file_name(&self) -> String {
        format!("{}-{}-{}.whl", self.distribution, self.version, self.tag)
    }

    fn dist_info(&self) -> String {
        format!("{}-{}.dist-info", self.distribution, self.version)
    }
}

/// The policy every wheel is checked against, and the tag it earns.
const MANYLINUX: &str = "manylinux_2_28";

/// `manylinux_2_28_<arch>` when every extension of `variant` meets the policy, else
/// `linux_<arch>` (what pip installs anywhere, and package indexes refuse).
fn platform_tag(variant: &BuiltVariant, arch: &str) -> String {
    let compliant = variant
        .files
        .iter()
        .filter(|f| f.ends_with(".so"))
        .all(|f| {
            crate::portable::violations(&variant.dir.join(f), MANYLINUX).is_ok_and(|v| v.is_empty())
        });
    if compliant {
        format!("{MANYLINUX}_{arch}")
    } else {
        format!("linux_{arch}")
    }
}

/// PEP 427's escaped distribution name: runs of `-_.` become one `_`, lower case.
fn distribution_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('_') {
                out.push('_');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The pip package a `python-depends` entry stands for (kernels-data's
/// python_dependencies.json renames these two; every other entry is its own package name).
fn pip_requirement(depend: &str) -> &str {
    match depend {
        "tvm-ffi" => "apache-tvm-ffi",
        "onednn" => "onednn-devel",
        other => other,
    }
}

fn metadata_file(variant: &BuiltVariant, spec: &WheelSpec) -> String {
    let mut lines = vec![
        "Metadata-Version: 2.1".to_string(),
        format!("Name: {}", variant.kernel_name),
        format!("Version: {}", spec.version),
        format!(
            "Summary: {} kernel, variant {}, built by kbuild for the Hugging Face Kernel Hub",
            variant.kernel_name, variant.name
        ),
        format!("License: {}", variant.license),
    ];
    if let Some(upstream) = &variant.upstream {
        lines.push(format!("Project-URL: Upstream, {upstream}"));
    }
    if let Some(source) = &variant.source {
        lines.push(format!("Project-URL: Source, {source}"));
    }
    lines.push("Requires-Python: >=3.9".to_string());
    lines.push(match spec.torch {
        Some((major, minor)) => format!(
            "Requires-Dist: torch>={major}.{minor},<{major}.{}",
            minor + 1
        ),
        None => "Requires-Dist: torch".to_string(),
    });
    for depend in &variant.python_depends {
        lines.push(format!("Requires-Dist: {}", pip_requirement(depend)));
    }
    lines.join("\n") + "\n"
}

fn wheel_file(spec: &WheelSpec) -> String {
    format!(
        "Wheel-Version: 1.0\nGenerator: kbuild {}\nRoot-Is-Purelib: {}\nTag: {}\n",
        env!("CARGO_PKG_VERSION"),
        spec.pure,
        spec.tag
    )
}

/// Write `<out_dir>/<wheel>.whl` for `variant`, staged beside it and renamed into place.
pub fn write_wheel(variant: &BuiltVariant, out_dir: &Path) -> Result<Wheel, PackageError> {
    let spec = WheelSpec::for_variant(variant)?;
    let package = variant.kernel_name.replace('-', "_");
    let dist_info = spec.dist_info();
    let mut entries: Vec<(String, Vec<u8>, u32)> = Vec::new();
    for rel in &variant.files {
        let path = variant.dir.join(rel);
        let mut bytes = Vec::new();
        open_regular(&path)?
            .read_to_end(&mut bytes)
            .map_err(|source| PackageError::Read { path, source })?;
        let mode = if rel.ends_with(".so") { 0o755 } else { 0o644 };
        entries.push((format!("{package}/{rel}"), bytes, mode));
    }
    entries.push((
        format!("{dist_info}/METADATA"),
        metadata_file(variant, &spec).into_bytes(),
        0o644,
    ));
    entries.push((
        format!("{dist_info}/WHEEL"),
        wheel_file(&spec).into_bytes(),
        0o644,
    ));
    entries.push((
        format!("{dist_info}/top_level.txt"),
        format!("{package}\n").into_bytes(),
        0o644,
    ));
    let mut record = String::new();
    for (name, bytes, _) in &entries {
        let hash = BASE64_URL_SAFE_NO_PAD.encode(Sha256::digest(bytes));
        record.push_str(&format!("{name},sha256={hash},{}\n", bytes.len()));
    }
    let record_name = format!("{dist_info}/RECORD");
    record.push_str(&format!("{record_name},,\n"));
    entries.push((record_name, record.into_bytes(), 0o644));

    let path = out_dir.join(spec.file_name());
    write_zip(&path, &entries)?;
    Ok(Wheel {
        path,
        distribution: spec.distribution,
        version: spec.version,
        tag: spec.tag,
    })
}

/// Write `entries` in order as a zip at `path` (through a temp file beside it).
fn write_zip(path: &Path, entries: &[(String, Vec<u8>, u32)]) -> Result<(), PackageError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let io = |source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|source| PackageError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let tmp = crate::files::temp_file_in(dir, "tmp").map_err(io)?;
    let zip_err = |source| PackageError::Zip {
        path: path.to_path_buf(),
        source,
    };
    let mut zip = zip::ZipWriter::new(tmp);
    for (name, bytes, mode) in entries {
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(6))
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(*mode)
            .large_file(bytes.len() as u64 >= u32::MAX as u64);
        zip.start_file(name.as_str(), options).map_err(zip_err)?;
        zip.write_all(bytes).map_err(io)?;
    }
    let tmp = zip.finish().map_err(zip_err)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_names_are_escaped_as_pep_427_says() {
        assert_eq!(distribution_name("ltx-kernels"), "ltx_kernels");
        assert_eq!(distribution_name("Flash.-Attn"), "flash_attn");
    }

    #[test]
    fn python_depends_become_pip_requirements() {
        assert_eq!(pip_requirement("tvm-ffi"), "apache-tvm-ffi");
        assert_eq!(pip_requirement("einops"), "einops");
    }
}
