//! Link the extension `_<name>_<backend>_<hash>.abi3.so` against torch (and cudart for CUDA).
//!
//! The link is skipped when its command line and the objects are unchanged since the last
//! link (a stamp beside the output records their hash), so a no-op rebuild runs no tool at all.

use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::hint::Hint;
use crate::plan::LinkJob;
use crate::portable::{self, PortableError};
use crate::process::{CommandFailure, CommandSpec, on_new_line, run};
use crate::report::{Reporter, UnitOutcome};

/// A linker failure.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The linker could not start or failed; its output is in the message, the command and
    /// its status (or why it could not start) in the source.
    #[error("linking `{}` failed{}", output.display(), on_new_line(diagnostics))]
    Failed {
        output: PathBuf,
        #[source]
        failure: Box<CommandFailure>,
        diagnostics: String,
    },
    #[error(
        "`{}` carries its own copy of the C++ runtime (it defines `__cxa_throw`): `{}` linked \
         libstdc++ statically",
        output.display(),
        linker.display()
    )]
    PrivateCxxRuntime { output: PathBuf, linker: PathBuf },
    /// Making the extension portable (manylinux) failed.
    #[error("cannot make `{}` portable", output.display())]
    Portable {
        output: PathBuf,
        #[source]
        source: Box<PortableError>,
    },
    #[error("cannot {action} `{}`", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Hint for LinkError {
    fn hint(&self) -> Option<String> {
        match self {
            LinkError::Failed { diagnostics, .. }
                if diagnostics.contains("undefined reference") =>
            {
                Some(
                    "a function is declared but not defined in any source of this backend: \
                      check `src` of the `[kernel.*]` tables and the `#if defined(CPU_KERNEL)` / \
                      `CUDA_KERNEL` guards of the bindings"
                        .into(),
                )
            }
            LinkError::Failed { diagnostics, .. } if diagnostics.contains("cannot find -l") => {
                Some(
                    "a library is missing: check the torch install (and the CUDA runtime from \
                      `cuda-toolkit` for the cuda backend)"
                        .into(),
                )
            }
            LinkError::Failed { failure, .. }
                if matches!(
                    **failure,
                    CommandFailure::Interrupted { .. } | CommandFailure::Cancelled { .. }
                ) =>
            {
                Some(
                    "a signal stopped the linker, not an error: run the build again to finish \
                     it (the compiled objects are kept)"
                        .into(),
                )
            }
            LinkError::Failed { .. } => Some("the linker's output above says what failed".into()),
            LinkError::PrivateCxxRuntime { .. } => Some(
                "torch's exceptions would cross two C++ runtimes and crash: set `CXX` to a \
                 compiler that links the shared libstdc++ (e.g. `/usr/bin/g++`)"
                    .into(),
            ),
            LinkError::Portable { source, .. } => source.hint(),
            LinkError::Io { .. } => None,
        }
    }
}

/// The link command as data: `<linker> <flags> -o <tmp> <objects> -L… -l…`.
pub fn link_command(job: &LinkJob, output: &Path) -> CommandSpec {
    let mut cmd = CommandSpec::new(&job.linker);
    cmd.args(&job.flags);
    cmd.arg("-o").arg(output);
    cmd.args(&job.objects);
    for dir in &job.lib_dirs {
        cmd.arg(format!("-L{}", dir.display()));
    }
    for lib in &job.libs {
        cmd.arg(format!("-l{lib}"));
    }
    cmd
}

fn stamp_path(job: &LinkJob) -> PathBuf {
    let mut name = job.output.file_name().unwrap_or_default().to_os_string();
    name.push(".stamp");
    job.output.with_file_name(name)
}

/// What the link reads, as the stamp and the compat record know it.
struct Inputs {
    /// Hash of the command line and every object's content.
    key: String,
    /// With a manylinux policy, what identifies the fixes the link needs
    /// ([`portable::Imports::signature`]).
    signature: Option<String>,
}

/// Read the link's objects once for its [`Inputs`].
fn read_inputs(job: &LinkJob) -> Result<Inputs, LinkError> {
    let mut hasher = Sha256::new();
    for arg in &link_command(job, &job.output).args {
        hasher.update(arg.as_encoded_bytes());
        hasher.update([0]);
    }
    if let Some(policy) = &job.manylinux {
        hasher.update(format!("{policy} {}", portable::COMPAT_VERSION).as_bytes());
    }
    let mut imports = portable::Imports::default();
    for object in &job.objects {
        let bytes = std::fs::read(object).map_err(|source| LinkError::Io {
            action: "read object",
            path: object.clone(),
            source,
        })?;
        hasher.update(Sha256::digest(&bytes));
        if job.manylinux.is_some() {
            imports.add_object(&bytes);
        }
    }
    Ok(Inputs {
        key: hex::encode(hasher.finalize()),
        signature: (job.manylinux.as_ref())
            .and_then(|p| imports.signature(&link_command(job, Path::new("-")), p)),
    })
}

/// Link `job.output` unless it is up to date; returns whether the linker ran.
pub fn link(job: &LinkJob, label: &str, reporter: &dyn Reporter) -> Result<bool, LinkError> {
    let Inputs { key, signature } = read_inputs(job)?;
    let stamp = stamp_path(job);
    if job.output.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == key) {
        reporter.verbose(&format!("{label}: link inputs unchanged, not relinking"));
        return Ok(false);
    }
    let parent = job.output.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|source| LinkError::Io {
        action: "create",
        path: parent.to_path_buf(),
        source,
    })?;
    // Link to a temp name and rename: an interrupted link never leaves a truncated .so.
    let tmp = job.output.with_extension("so.tmp");
    let started = Instant::now();
    reporter.unit_started(label);
    let last = signature
        .as_deref()
        .and_then(|s| portable::reusable_compat(job, s));
    let compat = match link_into(job, &tmp, last, label, reporter) {
        Ok(compat) => compat,
        Err(e) => {
            reporter.unit_finished(label, UnitOutcome::Failed, started.elapsed());
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if defines_cxx_runtime(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        reporter.unit_finished(label, UnitOutcome::Failed, started.elapsed());
        return Err(LinkError::PrivateCxxRuntime {
            output: job.output.clone(),
            linker: job.linker.clone(),
        });
    }
    std::fs::rename(&tmp, &job.output).map_err(|source| LinkError::Io {
        action: "rename into",
        path: job.output.clone(),
        source,
    })?;
    std::fs::write(&stamp, &key).map_err(|source| LinkError::Io {
        action: "write",
        path: stamp,
        source,
    })?;
    if let Some(signature) = &signature {
        portable::remember_compat(job, signature, compat.as_ref());
    }
    remove_older_links(job);
    reporter.unit_finished(label, UnitOutcome::Compiled, started.elapsed());
    Ok(true)
}

/// Remove what links of the variant under other names left in its work directory: the
/// extension's name carries the op namespace, which every edit changes, and each would keep a
/// whole extension there (the variant directory has its own copy). Best effort.
fn remove_older_links(job: &LinkJob) {
    let (Some(dir), Some(name)) = (job.output.parent(), job.output.file_name()) else {
        return;
    };
    let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".so")) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    const LEFT: [&str; 5] = [
        ".abi3.so",
        ".abi3.so.stamp",
        ".abi3.so.tmp",
        ".abi3.compat.cc",
        ".abi3.compat.o",
    ];
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        if !file.starts_with(stem) && LEFT.iter().any(|suffix| file.ends_with(suffix)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Link `job` into `tmp` and, with a manylinux policy, make it portable; returns the compat
/// unit linked in. With `last` (the last link's compat unit, for objects that import what
/// they did then) it links once, with that unit; else, or when that link fails, it links,
/// reads what the extension imports and links again with the compat unit that needs.
fn link_into(
    job: &LinkJob,
    tmp: &Path,
    last: Option<portable::Compat>,
    label: &str,
    reporter: &dyn Reporter,
) -> Result<Option<portable::Compat>, LinkError> {
    if let (Some(policy), Some(compat)) = (&job.manylinux, last) {
        let cmd = link_command(&compat.applied_to(job), tmp);
        reporter.verbose(&cmd.to_string());
        if run(&cmd).is_ok() {
            reporter.verbose(&format!(
                "{label}: linked once, with the last link's compat unit (its objects import \
                 what they did then)"
            ));
            warn_unportable(job, tmp, policy, reporter)?;
            return Ok(Some(compat));
        }
    }
    let cmd = link_command(job, tmp);
    reporter.verbose(&cmd.to_string());
    run(&cmd).map_err(|f| failed(job, f))?;
    match &job.manylinux {
        Some(policy) => make_portable(job, tmp, policy, reporter),
        None => Ok(None),
    }
}

fn failed(job: &LinkJob, failure: CommandFailure) -> LinkError {
    let diagnostics = failure.diagnostics();
    LinkError::Failed {
        output: job.output.clone(),
        failure: Box::new(failure),
        diagnostics,
    }
}

/// Bind what the freshly linked `tmp` imports to what `policy` allows: link it again with
/// kbuild's compat unit when that fixes something (returned), then warn about what stays too
/// new (the variant builds; `kbuild check` and `publish` refuse it).
fn make_portable(
    job: &LinkJob,
    tmp: &Path,
    policy: &str,
    reporter: &dyn Reporter,
) -> Result<Option<portable::Compat>, LinkError> {
    if !portable::is_elf(tmp) {
        reporter.verbose(&format!(
            "{}: not an ELF file, left as linked",
            job.output.display()
        ));
        return Ok(None);
    }
    let verbose = |c: &str| reporter.verbose(c);
    let compat = portable::compat_for(job, tmp, policy, &verbose)
        .map_err(|source| portable_error(job, source))?;
    if let Some(compat) = &compat {
        let cmd = link_command(&compat.applied_to(job), tmp);
        reporter.verbose(&cmd.to_string());
        run(&cmd).map_err(|f| failed(job, f))?;
    }
    warn_unportable(job, tmp, policy, reporter)?;
    Ok(compat)
}

fn portable_error(job: &LinkJob, source: PortableError) -> LinkError {
    LinkError::Portable {
        output: job.output.clone(),
        source: Box::new(source),
    }
}

/// Warn about each import of `tmp` that `policy` refuses and nothing fixed.
fn warn_unportable(
    job: &LinkJob,
    tmp: &Path,
    policy: &str,
    reporter: &dyn Reporter,
) -> Result<(), LinkError> {
    let left = portable::unportable(job, tmp, policy).map_err(|e| portable_error(job, e))?;
    for u in left {
        let by = match u.objects.as_slice() {
            [] => String::new(),
            objects => format!(" (referenced by `{}`)", objects.join("`, `")),
        };
        reporter.warn(&format!(
            "`{}` is not {policy}: it imports `{}`{by}, which has no older version kbuild can \
             bind it to\n  hint: `kbuild check` and `kbuild publish` refuse it; avoid that call, \
             or build and publish with `--manylinux none` for machines like this one only",
            job.output.file_name().unwrap_or_default().to_string_lossy(),
            u.symbol,
        ));
    }
    Ok(())
}

/// Whether the shared object exports its own `__cxa_throw` (a statically linked libstdc++).
/// A file kbuild cannot read as ELF (a test's fake linker writes none) is not checked.
fn defines_cxx_runtime(so: &Path) -> bool {
    portable::dynamic_symbols(so)
        .is_ok_and(|symbols| symbols.iter().any(|s| s.defined && s.name == "__cxa_throw"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_command_puts_objects_before_libraries() {
        let job = LinkJob {
            linker: "g++".into(),
            objects: vec!["a.o".into(), "b.o".into()],
            output: "out/_x_cpu_abc.abi3.so".into(),
            lib_dirs: vec!["/torch/lib".into()],
            libs: vec!["c10".into(), ":libcudart.so.13".into()],
            flags: vec!["-shared".into()],
            manylinux: None,
        };
        let shown = link_command(&job, Path::new("out.so")).to_string();
        assert_eq!(
            shown,
            "g++ -shared -o out.so a.o b.o -L/torch/lib -lc10 -l:libcudart.so.13"
        );
    }
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    fn link_shared(dir: &Path, extra: &[&str]) -> PathBuf {
        let src = dir.join("x.cpp");
        std::fs::write(
            &src,
            "#include <stdexcept>\nvoid f() { throw std::runtime_error(\"x\"); }\n",
        )
        .unwrap();
        let out = dir.join("x.so");
        let mut cmd = CommandSpec::new("c++");
        cmd.args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .args(extra);
        run(&cmd).expect("c++ links a test library");
        out
    }

    #[test]
    fn a_statically_linked_cxx_runtime_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let shared = link_shared(dir.path(), &[]);
        assert!(!defines_cxx_runtime(&shared));
        let private = link_shared(dir.path(), &["-static-libstdc++"]);
        assert!(defines_cxx_runtime(&private));
    }
}
