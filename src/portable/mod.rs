//! Portable extensions: a `.so` linked on any current Linux still loads on a manylinux_2_28
//! system (glibc 2.28, libstdc++ of GCC 8), checked by HF's `kernel-abi-check` as `kbuild
//! check` and the Hub check it.
//!
//! After the link, the extension's imports are read; each one newer than the policy allows is
//! pinned to an older alias of the same code in the host library, or replaced by a shim that
//! does what code built on an old system does there (see `compat.rs`). kbuild writes those
//! into one small compat unit, compiles it with the host compiler, and links again with it
//! and `-Wl,--wrap` for each wrapped name. What neither covers is reported, naming the symbol
//! and the objects that reference it.

mod compat;
mod elf;
mod last;

pub use compat::{Fix, Fixes, SHIMS, fix_for, source as compat_source};
pub use elf::{VersionedSymbol, dynamic_symbols, undefined_in_object, version_number};
pub use last::{Imports, remember as remember_compat, reusable as reusable_compat};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use object::Object as _;

use crate::hint::Hint;
use crate::plan::LinkJob;
use crate::process::{CommandFailure, CommandSpec, run};

/// Changes whenever what the compat unit does changes: the link's stamp includes it, so an
/// upgraded kbuild links again.
pub const COMPAT_VERSION: u32 = 1;

/// Why an extension could not be checked or made portable.
#[derive(Debug, thiserror::Error)]
pub enum PortableError {
    #[error("cannot read the symbols of `{}`: {why}", path.display())]
    Read { path: PathBuf, why: String },
    #[error("unknown manylinux policy `{policy}`")]
    Policy { policy: String },
    #[error("cannot write `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Compiling the compat unit failed.
    #[error("{what} failed")]
    Tool {
        what: &'static str,
        #[source]
        failure: Box<CommandFailure>,
    },
}

impl Hint for PortableError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            PortableError::Policy { .. } => {
                "use `manylinux_2_28` (the Hub's), another `manylinux_2_N`, or `none`".into()
            }
            PortableError::Tool { .. } | PortableError::Read { .. } => {
                "build with `--manylinux none` to skip this step for a local-only build, and \
                 report the failure"
                    .into()
            }
            PortableError::Write { .. } => "check that the build directory is writable".into(),
        })
    }
}

/// A reference the policy refuses and no fix covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unportable {
    /// `arc4random@GLIBC_2.36`.
    pub symbol: String,
    /// The link's inputs that reference it (file names).
    pub objects: Vec<String>,
}

/// Whether `path` is an ELF file (what every Linux linker writes; a test's fake linker does not).
pub fn is_elf(path: &Path) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    std::fs::File::open(path).is_ok_and(|mut f| f.read_exact(&mut magic).is_ok())
        && magic == *b"\x7fELF"
}

/// The references of `so` the manylinux `policy` refuses, as `(name, DEP_VERSION)`: HF's
/// `kernel-abi-check`, the rule `kbuild check` and the Hub apply.
pub fn violations(so: &Path, policy: &str) -> Result<Vec<(String, String)>, PortableError> {
    let read = |why: String| PortableError::Read {
        path: so.to_path_buf(),
        why,
    };
    let data = std::fs::read(so).map_err(|e| read(e.to_string()))?;
    let file = object::File::parse(&*data).map_err(|e| read(e.to_string()))?;
    file_violations(&file, policy).map_err(|_| PortableError::Policy {
        policy: policy.to_string(),
    })
}

/// [`violations`] of a parsed file (`kbuild check` has one): `(name, DEP_VERSION)` each, or
/// why kernel-abi-check could not apply the policy.
pub fn file_violations(
    file: &object::File<'_>,
    policy: &str,
) -> Result<Vec<(String, String)>, String> {
    let (arch, endian) = (file.architecture(), file.endianness());
    let found = kernel_abi_check::check_manylinux(policy, arch, endian, file.symbols())
        .map_err(|e| e.to_string())?;
    Ok(found
        .into_iter()
        .map(|v| {
            let kernel_abi_check::ManylinuxViolation::Symbol { name, dep, version } = v;
            (name, format!("{dep}_{version}"))
        })
        .collect())
}

/// The compat unit one link needs: its object (compiled) and the flags to link with it.
#[derive(Debug, Clone)]
pub struct Compat {
    pub fixes: Fixes,
    pub object: PathBuf,
}

impl Compat {
    /// `job` linking the compat object too, with `-Wl,--wrap` for each wrapped name.
    pub fn applied_to(&self, job: &LinkJob) -> LinkJob {
        let mut relinked = job.clone();
        relinked.objects.push(self.object.clone());
        relinked.flags.extend(self.fixes.link_flags());
        relinked
    }
}

/// What the freshly linked `so` (linked by `job`, not yet in place) needs to be portable
/// under `policy`: `None` when nothing it imports is too new or nothing can fix what is;
/// else the compat unit, written beside `job.output` and compiled. `verbose` receives the
/// commands run.
pub fn compat_for(
    job: &LinkJob,
    so: &Path,
    policy: &str,
    verbose: &dyn Fn(&str),
) -> Result<Option<Compat>, PortableError> {
    let mut found = violations(so, policy)?;
    // A shimmed name imported without a version still needs the shim on an old system (GCC
    // 13's `ios_base_library_init` is imported so), though the policy cannot see it.
    let imports = dynamic_symbols(so).map_err(|why| PortableError::Read {
        path: so.to_path_buf(),
        why,
    })?;
    for import in imports.iter().filter(|s| !s.defined && s.version.is_none()) {
        if SHIMS.iter().any(|s| s.name == import.name) {
            found.push((import.name.clone(), String::new()));
        }
    }
    if found.is_empty() {
        return Ok(None);
    }
    let fixes = fixes_for(job, &imports, policy, &found);
    if fixes.is_empty() {
        return Ok(None);
    }
    let object = compile_compat(job, &fixes, verbose)?;
    Ok(Some(Compat { fixes, object }))
}

/// What is still too new in the linked `so`, each with the inputs of `job` that reference it.
pub fn unportable(
    job: &LinkJob,
    so: &Path,
    policy: &str,
) -> Result<Vec<Unportable>, PortableError> {
    let left = violations(so, policy)?;
    Ok(left
        .into_iter()
        .map(|(name, version)| Unportable {
            objects: referencing(&job.objects, &name),
            symbol: format!("{name}@{version}"),
        })
        .collect())
}

/// A fix for each of `found` that has one; `imports` are the extension's dynamic symbols.
fn fixes_for(
    job: &LinkJob,
    imports: &[VersionedSymbol],
    policy: &str,
    found: &[(String, String)],
) -> Fixes {
    // A policy kernel-abi-check accepted is `manylinux_2_N`.
    let glibc_max = glibc_of(policy).unwrap_or((2, 17, 0));
    let allowed = |v: &str| version_number(v, "GLIBC").is_some_and(|n| n <= glibc_max);
    let mut libraries: BTreeMap<String, Vec<VersionedSymbol>> = BTreeMap::new();
    let mut fixes = Fixes::default();
    for (name, _) in found {
        let file = imports
            .iter()
            .find(|s| s.name == *name && !s.defined)
            .and_then(|s| s.file.clone())
            .unwrap_or_default();
        let library = libraries
            .entry(file.clone())
            .or_insert_with(|| host_library(&job.linker, &file));
        match fix_for(name, library, allowed) {
            Some(Fix::Pin(target)) => fixes.pins.push((name.clone(), target)),
            Some(Fix::Shim(shim)) => fixes.shims.push(shim),
            None => {}
        }
    }
    fixes
}

/// `manylinux_2_28` → `(2, 28, 0)`.
fn glibc_of(policy: &str) -> Option<(u32, u32, u32)> {
    let rest = policy.strip_prefix("manylinux_")?;
    let (major, minor) = rest.split_once('_')?;
    Some((major.parse().ok()?, minor.parse().ok()?, 0))
}

/// The dynamic symbols of the host library `file` (`libc.so.6`) as the linker finds it; none
/// when it cannot be found or read (no pin is then offered).
fn host_library(linker: &Path, file: &str) -> Vec<VersionedSymbol> {
    if file.is_empty() {
        return Vec::new();
    }
    let mut ask = CommandSpec::new(linker);
    ask.arg(format!("-print-file-name={file}"));
    let Ok(out) = run(&ask) else {
        return Vec::new();
    };
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !path.is_absolute() {
        return Vec::new();
    }
    dynamic_symbols(&path).unwrap_or_default()
}

/// Write the compat unit for `fixes` beside `job.output` (`compat.cc`) and compile it; returns
/// the object.
fn compile_compat(
    job: &LinkJob,
    fixes: &Fixes,
    verbose: &dyn Fn(&str),
) -> Result<PathBuf, PortableError> {
    // Named after the directory, not the extension (whose name changes with every edit), so
    // that the next link can use it again (`last.rs`).
    let source = job.output.with_file_name("compat.cc");
    let object = job.output.with_file_name("compat.o");
    std::fs::write(&source, compat::source(fixes)).map_err(|e| PortableError::Write {
        path: source.clone(),
        source: e,
    })?;
    let mut compile = CommandSpec::new(&job.linker);
    compile
        .args(["-x", "c++", "-std=c++17", "-O2", "-fPIC", "-c"])
        .arg(&source)
        .arg("-o")
        .arg(&object);
    verbose(&compile.to_string());
    run(&compile).map_err(|f| PortableError::Tool {
        what: "compiling the compat unit",
        failure: Box::new(f),
    })?;
    Ok(object)
}

/// The file names of `objects` that leave `name` undefined.
fn referencing(objects: &[PathBuf], name: &str) -> Vec<String> {
    objects
        .iter()
        .filter(|o| undefined_in_object(o).iter().any(|n| n == name))
        .map(|o| {
            o.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect()
}
