//! The rules on a variant's extension (`.so`): HF's `kernel-abi-check` for manylinux symbol
//! versions and the Python abi3, plus what it does not enforce: DT_NEEDED, RPATH/RUNPATH, and
//! the CUDA capabilities of the cubins against `backend.archs`.

use std::collections::BTreeSet;
use std::path::Path;

use kernel_abi_check::{PythonAbiViolation, Version};
use object::read::elf::{Dyn as _, FileHeader as _, SectionHeader as _};
use object::{Object as _, elf};

use super::rules::{CheckOptions, Finding};
use crate::config::Capability;
use crate::package::BuiltVariant;

/// Libraries an extension may need: glibc's, the C++ runtime, torch's, and the CUDA libraries
/// torch's wheels ship (prefixes of the soname).
const ALLOWED_NEEDED: &[&str] = &[
    "libc.so",
    "libm.so",
    "libdl.so",
    "libpthread.so",
    "librt.so",
    "libstdc++.so",
    "libgcc_s.so",
    "ld-linux",
    "libc10",
    "libtorch",
    "libcuda.so",
    "libcudart.so",
    "libcublas",
    "libcudnn",
    "libcufft",
    "libcurand",
    "libcusparse",
    "libcusolver",
    "libnccl",
    "libnvrtc",
    "libnvJitLink",
    "libnvToolsExt",
    "libcupti",
];

/// Check one extension of `variant`; `rel` is its path in the variant.
pub fn check_extension(variant: &BuiltVariant, rel: &str, opts: &CheckOptions) -> Vec<Finding> {
    let path = variant.dir.join(rel);
    let finding = |rule: &'static str, message: String, fix: &str| Finding {
        rule,
        file: rel.to_string(),
        message,
        fix: fix.to_string(),
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            return vec![finding(
                "layout",
                format!("cannot read it: {e}"),
                "rebuild the variant",
            )];
        }
    };
    let file = match object::File::parse(&*data) {
        Ok(f) => f,
        Err(_) if opts.lenient => return Vec::new(),
        Err(e) => {
            return vec![finding(
                "abi",
                format!("not a shared object kbuild can read: {e}"),
                "rebuild the variant with `kbuild build`",
            )];
        }
    };
    let mut out = Vec::new();
    if let Some(policy) = &opts.manylinux {
        out.extend(manylinux_findings(policy, &file, &finding));
    }
    out.extend(abi3_findings(&file, &finding));
    out.extend(dynamic_findings(&data, &finding));
    if variant.backend == "cuda" {
        out.extend(check_archs(variant, rel, &path, opts));
    }
    out
}

/// How a rule reports a problem of the extension: rule, message, fix.
type Report<'a> = &'a dyn Fn(&'static str, String, &str) -> Finding;

/// Symbols versioned newer than the manylinux `policy` allows.
fn manylinux_findings(policy: &str, file: &object::File<'_>, finding: Report<'_>) -> Vec<Finding> {
    match crate::portable::file_violations(file, policy) {
        Ok(violations) => violations
            .into_iter()
            .map(|(name, version)| {
                finding(
                    "manylinux",
                    format!("`{name}@{version}` is newer than {policy} allows"),
                    "rebuild with `kbuild build` (its default binds imports to manylinux_2_28: \
                     README \"Portable builds\"; a warning then names what it cannot), or pass \
                     `--manylinux none` to skip this rule",
                )
            })
            .collect(),
        Err(e) => vec![finding(
            "manylinux",
            format!("cannot check symbol versions: {e}"),
            "pass `--manylinux none` to skip this rule",
        )],
    }
}

/// Python symbols outside the stable ABI of Python 3.9.
fn abi3_findings(file: &object::File<'_>, finding: Report<'_>) -> Vec<Finding> {
    let abi3 = Version::from(vec![3, 9]);
    match kernel_abi_check::check_python_abi(&abi3, file.format(), file.symbols()) {
        Ok(violations) => violations
            .into_iter()
            .map(|v| match v {
                PythonAbiViolation::IncompatibleAbi3Symbol { name, added } => finding(
                    "python-abi3",
                    format!("`{name}` is in the stable ABI only since Python {added}, not 3.9"),
                    "build with `Py_LIMITED_API=0x03090000` and do not call newer Python APIs",
                ),
                PythonAbiViolation::NonAbi3Symbol { name } => finding(
                    "python-abi3",
                    format!("`{name}` is not part of Python's stable ABI"),
                    "build with `Py_LIMITED_API=0x03090000`",
                ),
            })
            .collect(),
        Err(e) => vec![finding(
            "python-abi3",
            format!("cannot check Python symbols: {e}"),
            "rebuild the variant",
        )],
    }
}

/// Needed libraries the Hub's users lack, and RPATH/RUNPATH entries into the build machine.
fn dynamic_findings(data: &[u8], finding: Report<'_>) -> Vec<Finding> {
    let (needed, paths) = match dynamic_strings(data) {
        Ok(found) => found,
        Err(e) => {
            return vec![finding(
                "needed",
                format!("cannot read the dynamic section: {e}"),
                "rebuild the variant",
            )];
        }
    };
    let mut out = Vec::new();
    for lib in needed {
        if !ALLOWED_NEEDED.iter().any(|a| lib.starts_with(a)) {
            out.push(finding(
                "needed",
                format!("links `{lib}`, which the Hub's users do not have"),
                "link it statically or drop the dependency; only libc, libstdc++, torch's and \
                 torch's CUDA libraries may be needed",
            ));
        }
    }
    for p in paths.iter().flat_map(|p| p.split(':')) {
        if !(p.is_empty() || p.starts_with("$ORIGIN") || p.starts_with("${ORIGIN}")) {
            out.push(finding(
                "rpath",
                format!("RPATH/RUNPATH `{p}` points into the build machine"),
                "link without `-Wl,-rpath` (or use `$ORIGIN`-relative paths)",
            ));
        }
    }
    out
}

/// DT_NEEDED entries, and RPATH/RUNPATH values, of a 64-bit ELF.
fn dynamic_strings(data: &[u8]) -> Result<(Vec<String>, Vec<String>), object::Error> {
    let header = elf::FileHeader64::<object::Endianness>::parse(data)?;
    let endian = header.endian()?;
    let sections = header.sections(endian, data)?;
    let (mut needed, mut paths) = (Vec::new(), Vec::new());
    for section in sections.iter() {
        let Some((entries, link)) = section.dynamic(endian, data)? else {
            continue;
        };
        let strings = sections.strings(endian, data, link)?;
        for entry in entries {
            let tag = entry.tag32(endian);
            if !matches!(tag, Some(elf::DT_NEEDED | elf::DT_RPATH | elf::DT_RUNPATH)) {
                continue;
            }
            let value = String::from_utf8_lossy(entry.string(endian, strings)?).into_owned();
            if tag == Some(elf::DT_NEEDED) {
                needed.push(value);
            } else {
                paths.push(value);
            }
        }
    }
    Ok((needed, paths))
}

/// `backend.archs` against the cubins `cuobjdump --list-elf` finds in the extension.
fn check_archs(
    variant: &BuiltVariant,
    rel: &str,
    path: &Path,
    opts: &CheckOptions,
) -> Vec<Finding> {
    let finding = |message: String, fix: &str| Finding {
        rule: "archs",
        file: rel.to_string(),
        message,
        fix: fix.to_string(),
    };
    let Some(cuobjdump) = &opts.cuobjdump else {
        return Vec::new();
    };
    let mut spec = crate::process::CommandSpec::new(cuobjdump);
    spec.arg("--list-elf").arg(path);
    let out = match crate::process::run(&spec) {
        Ok(out) => out,
        Err(e) => {
            let output = e.diagnostics();
            let why = if output.is_empty() {
                e.to_string()
            } else {
                format!("{e}: {}", output.trim())
            };
            let fix = match e {
                crate::process::CommandFailure::Exited { .. } => {
                    "rebuild the variant with `kbuild build`"
                }
                _ => "check the CUDA toolkit",
            };
            return vec![finding(why, fix)];
        }
    };
    // Cubins are named `<ext>.<n>.sm_90a.cubin`: the capability with its suffix.
    let found: BTreeSet<Capability> = String::from_utf8_lossy(&out.stdout)
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("sm_"))
        .filter_map(Capability::from_nvcc_name)
        .collect();
    let mut declared = BTreeSet::new();
    for arch in &variant.archs {
        match Capability::parse_arch(arch) {
            Some((cap, _)) => declared.insert(cap),
            None => {
                return vec![finding(
                    format!("metadata.json's archs entry `{arch}` is not a CUDA capability"),
                    "rebuild the variant with `kbuild build`; do not edit metadata.json by hand",
                )];
            }
        };
    }
    if found == declared {
        return Vec::new();
    }
    let list = |s: &BTreeSet<Capability>| {
        s.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![finding(
        format!(
            "metadata.json says archs [{}], but the extension holds cubins for [{}]",
            list(&declared),
            list(&found)
        ),
        "rebuild the variant with `kbuild build`; do not edit metadata.json by hand",
    )]
}
