//! Commands as data: the `CommandSpec` that compiles a `CompileJob`, built by a pure function.

use std::ffi::OsString;
use std::path::Path;

use crate::plan::{CompileJob, Lang};
use crate::process::CommandSpec;
use crate::schedule::RunChoice;

/// The command that compiles `job` as `run` says (nvcc's `--threads`, `--jobserver`,
/// `--split-compile`). Pure: no file system access, no environment.
///
/// Defaults added here rather than by the planner: `-O3` (for nvcc that is the host-code level;
/// device code is optimised by default) unless the job's flags already choose an `-O` level, and
/// `-MD -MF <depfile>` so the object cache learns every header. The job's own `flags` come last
/// so they can override what precedes them.
pub fn command_for(job: &CompileJob, run: &RunChoice) -> CommandSpec {
    match job.lang {
        Lang::Cuda => nvcc_command(job, run),
        Lang::Cxx => cxx_command(job),
    }
}

/// Ask the compiler of `job` for coloured diagnostics (its stderr is a pipe to kbuild, which
/// passes them on to a terminal): gcc's flag, given to nvcc's host compiler through
/// `-Xcompiler`. Added to the command run, never to the object cache's key or the command shown.
pub fn color_diagnostics(cmd: &mut CommandSpec, lang: Lang) {
    match lang {
        Lang::Cuda => cmd.args(["-Xcompiler", "-fdiagnostics-color=always"]),
        Lang::Cxx => cmd.arg("-fdiagnostics-color=always"),
    };
}

fn nvcc_command(job: &CompileJob, run: &RunChoice) -> CommandSpec {
    let mut cmd = CommandSpec::new(&job.compiler);
    if let Some(host) = &job.host_compiler {
        cmd.arg("-ccbin").arg(host);
    }
    common_head(&mut cmd, job);
    if !chooses_opt_level(job.flags.iter().chain(&job.host_flags)) {
        cmd.arg("-O3");
    }
    common_preprocessor(&mut cmd, job);
    // One `-gencode` per capability, its PTX in the same one (`code=[sm_90,compute_90]`): as
    // two, nvcc runs the front end (cicc) twice for that capability, and the extra device pass
    // does not fit the `--threads` share sized by capabilities.
    for gencode in &job.gencodes {
        let (sm, compute) = (
            gencode.capability.sm_name(),
            gencode.capability.compute_name(),
        );
        let code = if gencode.ptx {
            format!("code=[{sm},{compute}]")
        } else {
            format!("code={sm}")
        };
        cmd.arg("-gencode").arg(format!("arch={compute},{code}"));
    }
    cmd.arg("--threads").arg(run.nvcc_threads.to_string());
    if let Some(split) = &run.split {
        cmd.arg(super::nvcc::split::cicc_split(split.threads));
    }
    if run.nvcc_jobserver {
        cmd.arg("--jobserver");
    }
    for flag in &job.host_flags {
        cmd.arg("-Xcompiler").arg(flag);
    }
    cmd.args(&job.flags);
    cmd
}

fn cxx_command(job: &CompileJob) -> CommandSpec {
    let mut cmd = CommandSpec::new(&job.compiler);
    common_head(&mut cmd, job);
    cxx_flags(&mut cmd, job);
    cmd
}

/// What the C++ compiler gets after its inputs and outputs: the default `-O3` (it also defines
/// `__OPTIMIZE__`, which headers test), includes and defines, then its own flags: host flags
/// (`-fPIC`) first.
fn cxx_flags(cmd: &mut CommandSpec, job: &CompileJob) {
    if !chooses_opt_level(job.flags.iter().chain(&job.host_flags)) {
        cmd.arg("-O3");
    }
    common_preprocessor(cmd, job);
    cmd.args(&job.host_flags);
    cmd.args(&job.flags);
}

/// The command that preprocesses `job`'s C++ source into `out` (`-E`) with the standard, include
/// directories, defines and flags [`command_for`] gives it: what the compiler will parse, whose
/// size tells the memory gate what a unit never measured needs (`compile::guess`). Pure.
pub fn preprocess_command_for(job: &CompileJob, out: &Path) -> CommandSpec {
    let mut cmd = CommandSpec::new(&job.compiler);
    cmd.arg("-E")
        .arg(&job.source)
        .arg("-o")
        .arg(out)
        .arg(format!("-std={}", job.std));
    cxx_flags(&mut cmd, job);
    cmd
}

/// `-c SRC -o OBJ -MD -MF DEP -std=STD`: the same spelling works for nvcc and g++.
fn common_head(cmd: &mut CommandSpec, job: &CompileJob) {
    cmd.arg("-c")
        .arg(&job.source)
        .arg("-o")
        .arg(&job.object)
        .arg("-MD")
        .arg("-MF")
        .arg(&job.depfile)
        .arg(format!("-std={}", job.std));
}

fn common_preprocessor(cmd: &mut CommandSpec, job: &CompileJob) {
    for dir in &job.include_dirs {
        cmd.arg(prefixed("-I", dir));
    }
    for dir in &job.system_include_dirs {
        cmd.arg("-isystem").arg(dir);
    }
    for (name, value) in &job.defines {
        match value {
            Some(v) => cmd.arg(format!("-D{name}={v}")),
            None => cmd.arg(format!("-D{name}")),
        };
    }
}

fn prefixed(flag: &str, path: &Path) -> OsString {
    let mut s = OsString::from(flag);
    s.push(path.as_os_str());
    s
}

/// Whether the user already picked an optimisation level (`-O2`, `-Os`, nvcc's `--optimize`).
/// nvcc rejects a second `-O`, so our default must step aside.
fn chooses_opt_level<'a>(mut flags: impl Iterator<Item = &'a String>) -> bool {
    flags.any(|f| f.starts_with("-O") || f.starts_with("--optimize"))
}
