//! Commands as data: a `CommandSpec` is what will run, built from a `CompileJob` by a pure
//! function, printable as a copy-pasteable shell line.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::plan::{CompileJob, Lang};

/// One external command: program, arguments, extra environment and working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Added to (not replacing) the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// `None`: the current directory.
    pub cwd: Option<PathBuf>,
}

impl CommandSpec {
    /// A command with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        CommandSpec {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
        }
    }

    /// Append one argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Append several arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The `std::process::Command` that runs this spec (stdio left to the caller).
    pub fn to_command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        cmd
    }
}

impl fmt::Display for CommandSpec {
    /// `cd DIR && KEY=VALUE program 'arg with space' …`, quoted for a POSIX shell.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(dir) = &self.cwd {
            write!(f, "cd {} && ", shell_quote(dir.as_os_str()))?;
        }
        for (k, v) in &self.env {
            write!(f, "{}={} ", k.to_string_lossy(), shell_quote(v))?;
        }
        write!(f, "{}", shell_quote(self.program.as_os_str()))?;
        for arg in &self.args {
            write!(f, " {}", shell_quote(arg))?;
        }
        Ok(())
    }
}

/// Quote one word for a POSIX shell; words made only of safe characters stay bare.
/// Non-UTF-8 bytes are shown lossily: the line is for humans and copy-paste, not for `exec`.
pub fn shell_quote(word: &OsStr) -> String {
    let s = word.to_string_lossy();
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%^".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The command that compiles `job`. Pure: no file system access, no environment.
///
/// Defaults added here rather than by the planner: `-O3` (for nvcc that is the host-code level;
/// device code is optimised by default) unless the job's flags already choose an `-O` level, and
/// `-MD -MF <depfile>` so the object cache learns every header. The job's own `flags` come last
/// so they can override what precedes them.
pub fn command_for(job: &CompileJob) -> CommandSpec {
    match job.lang {
        Lang::Cuda => nvcc_command(job),
        Lang::Cxx => cxx_command(job),
    }
}

fn nvcc_command(job: &CompileJob) -> CommandSpec {
    let mut cmd = CommandSpec::new(&job.compiler);
    if let Some(host) = &job.host_compiler {
        cmd.arg("-ccbin").arg(host);
    }
    common_head(&mut cmd, job);
    if !chooses_opt_level(job.flags.iter().chain(&job.host_flags)) {
        cmd.arg("-O3");
    }
    common_preprocessor(&mut cmd, job);
    for gencode in &job.gencodes {
        let sm = gencode.capability.sm();
        cmd.arg("-gencode")
            .arg(format!("arch=compute_{sm},code=sm_{sm}"));
        if gencode.ptx {
            cmd.arg("-gencode")
                .arg(format!("arch=compute_{sm},code=compute_{sm}"));
        }
    }
    cmd.arg("--threads").arg(job.nvcc_threads.to_string());
    for flag in &job.host_flags {
        cmd.arg("-Xcompiler").arg(flag);
    }
    cmd.args(&job.flags);
    cmd
}

fn cxx_command(job: &CompileJob) -> CommandSpec {
    let mut cmd = CommandSpec::new(&job.compiler);
    common_head(&mut cmd, job);
    if !chooses_opt_level(job.flags.iter().chain(&job.host_flags)) {
        cmd.arg("-O3");
    }
    common_preprocessor(&mut cmd, job);
    // For the host compiler both lists are its own flags: host flags (`-fPIC`) first.
    cmd.args(&job.host_flags);
    cmd.args(&job.flags);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_plain_words_bare_and_quotes_the_rest() {
        let q = |s: &str| shell_quote(OsStr::new(s));
        assert_eq!(q("-DNAME=1"), "-DNAME=1");
        assert_eq!(q("/a/b.cu"), "/a/b.cu");
        assert_eq!(q("a b"), "'a b'");
        assert_eq!(q("it's"), r"'it'\''s'");
        assert_eq!(q(""), "''");
        assert_eq!(q("$HOME"), "'$HOME'");
    }

    #[test]
    fn display_renders_cwd_env_and_args() {
        let mut spec = CommandSpec::new("/usr/bin/g++");
        spec.args(["-c", "my file.cpp"]);
        spec.env.push(("LC_ALL".into(), "C".into()));
        spec.cwd = Some("/tmp/x y".into());
        assert_eq!(
            spec.to_string(),
            "cd '/tmp/x y' && LC_ALL=C /usr/bin/g++ -c 'my file.cpp'"
        );
    }
}
