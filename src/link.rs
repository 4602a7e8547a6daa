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

/// Hash of the command line and every object's content.
fn link_key(job: &LinkJob) -> Result<String, LinkError> {
    let mut hasher = Sha256::new();
    for arg in &link_command(job, &job.output).args {
        hasher.update(arg.as_encoded_bytes());
        hasher.update([0]);
    }
    if let Some(policy) = &job.manylinux {
        hasher.update(format!("{policy} {}", portable::COMPAT_VERSION).as_bytes());
    }
    for object in &job.objects {
        let bytes = std::fs::read(object).map_err(|source| LinkError::Io {
            action: "read object",
            path: object.clone(),
            source,
        })?;
        hasher.update(Sha256::digest(&bytes));
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Link `job.output` unless it is up to date; returns whether the linker ran.
pub fn link(job: &LinkJob, label: &str, reporter: &dyn Reporter) -> Result<bool, LinkError> {
    let key = link_key(job)?;
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
    let cmd = link_command(job, &tmp);
    reporter.verbose(&cmd.to_string());
    let started = Instant::now();
    reporter.unit_started(label);
    let portable = || match &job.manylinux {
        Some(policy) => make_portable(job, &tmp, policy, reporter),
        None => Ok(()),
    };
    if let Err(e) = run(&cmd)
        .map_err(|f| failed(job, f))
        .and_then(|_| portable())
    {
        reporter.unit_finished(label, UnitOutcome::Failed, started.elapsed());
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
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
    reporter.unit_finished(label, UnitOutcome::Compiled, started.elapsed());
    Ok(true)
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
/// kbuild's compat unit when that fixes something, then warn about what stays too new (the
/// variant builds; `kbuild check` and `publish` refuse it).
fn make_portable(
    job: &LinkJob,
    tmp: &Path,
    policy: &str,
    reporter: &dyn Reporter,
) -> Result<(), LinkError> {
    let portable_error = |source| LinkError::Portable {
        output: job.output.clone(),
        source: Box::new(source),
    };
    if !portable::is_elf(tmp) {
        reporter.verbose(&format!(
            "{}: not an ELF file, left as linked",
            job.output.display()
        ));
        return Ok(());
    }
    let verbose = |c: &str| reporter.verbose(c);
    if let Some(compat) =
        portable::compat_for(job, tmp, policy, &verbose).map_err(portable_error)?
    {
        let cmd = link_command(&compat.applied_to(job), tmp);
        reporter.verbose(&cmd.to_string());
        run(&cmd).map_err(|f| failed(job, f))?;
    }
    for u in portable::unportable(job, tmp, policy).map_err(portable_error)? {
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
/// Checked with binutils' `nm` when it is on PATH; without it the check is skipped.
fn defines_cxx_runtime(so: &Path) -> bool {
    let mut nm = CommandSpec::new("nm");
    nm.args(["-D", "--defined-only"]).arg(so);
    run(&nm).is_ok_and(|out| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.ends_with(" __cxa_throw"))
    })
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
