//! Every external program kbuild starts goes through here: a command as data (`CommandSpec`),
//! run to completion with its output captured, optionally cancelled (killing the whole process
//! tree), and a failure (`CommandFailure`) that names the command and how it ended.
//!
//! While a [`InterruptGuard`] lives, SIGINT and SIGTERM do not kill kbuild at once: they cancel
//! every running command (as a failed sibling job does), so the compilers' process trees are
//! killed and their temporary outputs removed before kbuild exits with 128 + the signal.
//!
//! A leaf module: it imports nothing from the crate, so every stage can use it.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread;
use std::time::Duration;

/// How often a running command checks whether it was cancelled.
const POLL: Duration = Duration::from_millis(10);

/// Polls between two samples of a running command's process tree: reading `/proc` costs a
/// little, and a compiler's peak lasts far longer than 0.25 s.
const SAMPLE_EVERY: u64 = 25;

/// Program output kept in error messages: the end is where the first error's cascade stops
/// and where the compiler's summary is.
const DIAGNOSTIC_LINES: usize = 200;

/// One external command: program, arguments, extra environment and working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Added to (not replacing) the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// `None`: the current directory.
    pub cwd: Option<PathBuf>,
    /// Descriptors the program inherits (a jobserver's pipe). Everything kbuild opens is
    /// close-on-exec; these are opened up in this child only.
    pub inherit_fds: Vec<i32>,
    /// Added to the program's niceness (`nice(2)`), 0 to leave it: a device pass splitting
    /// beyond its job slot runs its threads at low priority (`compile::split`).
    pub nice: i32,
}

impl CommandSpec {
    /// A command with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        CommandSpec {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            inherit_fds: Vec::new(),
            nice: 0,
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
    #[allow(
        clippy::disallowed_methods,
        reason = "the runner: every program starts here"
    )]
    pub fn to_command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        join_reaped_group(&mut cmd);
        if self.nice != 0 {
            let nice = self.nice;
            // SAFETY: runs in the forked child before exec and only calls nice(2), a plain
            // system call; a failure (not allowed to lower it) leaves the niceness as it was.
            unsafe {
                use std::os::unix::process::CommandExt;
                cmd.pre_exec(move || {
                    libc::nice(nice);
                    Ok(())
                });
            }
        }
        if !self.inherit_fds.is_empty() {
            let fds = self.inherit_fds.clone();
            // SAFETY: runs in the forked child before exec and only calls fcntl(2), which is
            // async-signal-safe; the descriptors stay open in kbuild, so they are valid here.
            unsafe {
                use std::os::unix::process::CommandExt;
                cmd.pre_exec(move || {
                    for &fd in &fds {
                        let flags = libc::fcntl(fd, libc::F_GETFD);
                        if flags < 0
                            || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0
                        {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        cmd
    }
}

/// Put the child in the watcher's group and give it a parent-death signal (see `reaper`): a
/// `kill -9` of kbuild then leaves no compiler running. Both are best effort: where they fail,
/// the child runs as it would have without them.
fn join_reaped_group(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let group = crate::reaper::group();
    // SAFETY: getpid is async-signal-safe and called before the fork, in kbuild.
    let parent = unsafe { libc::getpid() };
    // SAFETY: runs in the forked child before exec and only calls setpgid(2), prctl(2),
    // getppid(2) and _exit(2), which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(pgid) = group {
                // Fails only when the watcher is gone: the child then stays in kbuild's group.
                libc::setpgid(0, pgid);
            }
            #[cfg(target_os = "linux")]
            {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // kbuild died between the fork and the prctl: the signal will never come.
                if libc::getppid() != parent {
                    libc::_exit(137);
                }
            }
            Ok(())
        });
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

/// Why a command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CommandFailure {
    /// The program could not be started (missing, not executable).
    #[error("cannot run `{}`", program.display())]
    Spawn {
        program: PathBuf,
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The program ran and reported failure.
    #[error("`{command}` {}", describe_status(*status))]
    Exited {
        command: String,
        status: ExitStatus,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    /// Stopped by us because a sibling job failed.
    #[error("`{command}` was stopped because another job failed")]
    Cancelled { command: String },
    /// Stopped by us because kbuild was interrupted.
    #[error("`{command}` was stopped: {interrupted}")]
    Interrupted {
        command: String,
        interrupted: Interrupted,
    },
}

impl CommandFailure {
    /// The command's output for an error message: stderr then stdout, the last lines only.
    pub fn diagnostics(&self) -> String {
        match self {
            CommandFailure::Exited { stdout, stderr, .. } => diagnostics(stdout, stderr),
            _ => String::new(),
        }
    }
}

/// `exited with status 1` or `was killed by signal 9`.
pub fn describe_status(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("was killed by signal {sig}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => format!("ended with {status}"),
    }
}

/// stderr followed by stdout, trimmed to the last `DIAGNOSTIC_LINES` lines.
pub fn diagnostics(stdout: &[u8], stderr: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(stderr).trim_end().to_string();
    let out = String::from_utf8_lossy(stdout);
    if !out.trim().is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(out.trim_end());
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= DIAGNOSTIC_LINES {
        return text;
    }
    let skipped = lines.len() - DIAGNOSTIC_LINES;
    format!(
        "[… {skipped} earlier lines omitted …]\n{}",
        lines[skipped..].join("\n")
    )
}

/// `text` on a line of its own after a message, or nothing when it is empty: how a program's
/// output follows the error that names the program.
pub fn on_new_line(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!("\n{text}")
    }
}

/// A stop signal shared by the jobs of one run.
#[derive(Debug, Default)]
pub struct Cancel(AtomicBool);

impl Cancel {
    pub fn new() -> Self {
        Cancel::default()
    }
    /// Ask every command running under this signal to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Cancelled by a sibling's failure or by SIGINT/SIGTERM (see [`InterruptGuard`]).
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst) || interrupted().is_some()
    }
}

/// The signal that interrupted kbuild; 0 while none has.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// kbuild was asked to stop by a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by {}", signal_name(*signal))]
pub struct Interrupted {
    pub signal: i32,
}

impl Interrupted {
    /// What a shell reports for a process killed by this signal: 128 + its number.
    pub fn exit_code(&self) -> u8 {
        (128 + self.signal).clamp(0, 255) as u8
    }
}

fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// The signal caught while an [`InterruptGuard`] was in place, if any.
pub fn interrupted() -> Option<Interrupted> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(Interrupted { signal }),
    }
}

/// `Err` once a signal was caught: where a stage checks between steps.
pub fn check_interrupted() -> Result<(), Interrupted> {
    interrupted().map_or(Ok(()), Err)
}

extern "C" fn on_signal(signal: libc::c_int) {
    // Only async-signal-safe work here: an atomic store, and for a second signal (the user
    // insisting) the default action, which kills kbuild at once.
    if INTERRUPTED.swap(signal, Ordering::SeqCst) != 0 {
        // SAFETY: signal(2) and raise(3) are async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
}

const CAUGHT: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// SIGINT and SIGTERM handled by cancelling (see the module docs) while this lives; the
/// previous handlers come back on drop.
pub struct InterruptGuard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

/// Catch SIGINT and SIGTERM until the guard is dropped.
pub fn catch_interrupts() -> InterruptGuard {
    let mut previous = Vec::new();
    for signal in CAUGHT {
        // SAFETY: sigaction structs are plain data, zeroed is a valid start; the handler only
        // touches an atomic. No SA_RESTART: a blocking call returns EINTR and the caller sees
        // the cancel sooner.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, &action, &mut old) == 0 {
                // A signal ignored on entry (`nohup`, a background job of a script) stays
                // ignored: whoever started kbuild chose that.
                if old.sa_sigaction == libc::SIG_IGN {
                    libc::sigaction(signal, &old, std::ptr::null_mut());
                } else {
                    previous.push((signal, old));
                }
            }
        }
    }
    InterruptGuard { previous }
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        for (signal, old) in &self.previous {
            // SAFETY: restores an action sigaction returned earlier.
            unsafe {
                libc::sigaction(*signal, old, std::ptr::null_mut());
            }
        }
    }
}

/// Run a command to completion, capturing stdout and stderr. Non-zero exit is an error.
pub fn run(spec: &CommandSpec) -> Result<Output, CommandFailure> {
    run_cancellable(spec, &Cancel::new())
}

/// Like `run`, but kills the command and everything it started once `cancel` fires.
pub fn run_cancellable(spec: &CommandSpec, cancel: &Cancel) -> Result<Output, CommandFailure> {
    run_measured(spec, cancel).map(|m| m.output)
}

/// Like `run`, and each line the command writes (on stdout or stderr, ended by `\n` or `\r`)
/// is passed to `on_line` as it comes: a long download can say how far it is.
pub fn run_watching(
    spec: &CommandSpec,
    on_line: &(dyn Fn(&str) + Sync),
) -> Result<Output, CommandFailure> {
    run_with(spec, &Cancel::new(), on_line).map(|m| m.output)
}

/// A command that succeeded: what it printed, and the most memory it held.
#[derive(Debug)]
pub struct Measured {
    pub output: Output,
    /// Peak resident memory in bytes: the larger of the biggest single process of its tree
    /// (`wait4`'s `ru_maxrss`, exact) and the tree's summed resident memory, sampled every
    /// [`SAMPLE_EVERY`] polls (processes that run side by side, as nvcc's `--threads`).
    pub peak_bytes: u64,
    /// CPU seconds (user and system) of the process and the descendants it waited for
    /// (`wait4`'s `ru_utime` + `ru_stime`): what a pass split over threads cost in all.
    pub cpu_seconds: f64,
}

/// Like `run_cancellable`, and measures the command's peak memory and CPU time.
pub fn run_measured(spec: &CommandSpec, cancel: &Cancel) -> Result<Measured, CommandFailure> {
    run_with(spec, cancel, &|_| {})
}

fn run_with(
    spec: &CommandSpec,
    cancel: &Cancel,
    on_line: &(dyn Fn(&str) + Sync),
) -> Result<Measured, CommandFailure> {
    let mut cmd = spec.to_command();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| CommandFailure::Spawn {
        program: spec.program.clone(),
        command: spec.to_string(),
        source,
    })?;
    // Both pipes are drained concurrently: a compiler blocked on a full stderr pipe would
    // otherwise never exit.
    let (stdout_pipe, stderr_pipe) = (child.stdout.take(), child.stderr.take());
    let ((status, peak_bytes, cpu_seconds), stdout, stderr) = thread::scope(|scope| {
        let stdout = scope.spawn(|| drain(stdout_pipe, on_line));
        let stderr = scope.spawn(|| drain(stderr_pipe, on_line));
        let status = wait_or_kill(&mut child, cancel);
        let stdout = stdout.join().unwrap_or_default();
        (status, stdout, stderr.join().unwrap_or_default())
    });
    match status {
        Some(status) if status.success() => Ok(Measured {
            output: Output {
                status,
                stdout,
                stderr,
            },
            peak_bytes,
            cpu_seconds,
        }),
        Some(status) => Err(CommandFailure::Exited {
            command: spec.to_string(),
            status,
            stdout,
            stderr,
        }),
        None => Err(match interrupted() {
            Some(interrupted) => CommandFailure::Interrupted {
                command: spec.to_string(),
                interrupted,
            },
            None => CommandFailure::Cancelled {
                command: spec.to_string(),
            },
        }),
    }
}

/// Everything `pipe` gives until it closes; each complete line also goes to `on_line`. A read
/// error only truncates diagnostics: the exit status still decides.
fn drain(pipe: Option<impl Read>, on_line: &(dyn Fn(&str) + Sync)) -> Vec<u8> {
    let mut buf = Vec::new();
    let Some(mut pipe) = pipe else { return buf };
    let mut chunk = [0u8; 8192];
    let mut line_start = 0;
    loop {
        let n = match pipe.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf[line_start..]
            .iter()
            .position(|b| matches!(b, b'\n' | b'\r'))
        {
            let line = String::from_utf8_lossy(&buf[line_start..line_start + end]);
            if !line.trim().is_empty() {
                on_line(line.trim_end());
            }
            line_start += end + 1;
        }
    }
    buf
}

/// Wait for `child`; `None` when it was killed because `cancel` fired. With the status, the
/// peak memory of its process tree (see [`Measured::peak_bytes`]) and its CPU seconds.
fn wait_or_kill(child: &mut Child, cancel: &Cancel) -> (Option<ExitStatus>, u64, f64) {
    let pid = child.id() as libc::pid_t;
    let (mut sampled, mut polls) = (0, 0u64);
    loop {
        match reap(pid, libc::WNOHANG) {
            Ok(Some(ended)) => return (Some(ended.status), sampled.max(ended.maxrss), ended.cpu),
            Ok(None) => {}
            // The child is ours and unreaped, so this does not happen; treat it as gone.
            Err(_) => return (child.wait().ok(), sampled, 0.0),
        }
        if cancel.is_cancelled() {
            kill_tree(child);
            let _ = reap(pid, 0);
            return (None, sampled, 0.0);
        }
        if polls % SAMPLE_EVERY == 0 {
            sampled = sampled.max(tree_resident(pid));
        }
        polls += 1;
        thread::sleep(POLL);
    }
}

/// How a child ended, as `wait4` says.
struct Ended {
    status: ExitStatus,
    /// `ru_maxrss` in bytes: the largest of the child and the descendants it waited for.
    maxrss: u64,
    /// `ru_utime` + `ru_stime` in seconds, of the child and the descendants it waited for.
    cpu: f64,
}

/// `wait4(pid, flags)`: how the child ended once it has, `None` while it runs (with
/// `WNOHANG`).
fn reap(pid: libc::pid_t, flags: libc::c_int) -> std::io::Result<Option<Ended>> {
    use std::os::unix::process::ExitStatusExt;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data, zeroed is valid; wait4 writes only the two pointers it
    // is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: see above; `pid` is our own unreaped child.
        let got = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        match got {
            0 => return Ok(None),
            p if p == pid => {
                let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
                return Ok(Some(Ended {
                    status: ExitStatus::from_raw(status),
                    maxrss: (usage.ru_maxrss.max(0) as u64) * 1024,
                    cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
                }));
            }
            _ => {
                let err = std::io::Error::last_os_error();
                if err.kind() != std::io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
}

/// The resident memory of `root` and every process below it, summed (pages shared between
/// them count once per process: an estimate on the safe side).
#[cfg(target_os = "linux")]
fn tree_resident(root: i32) -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    std::iter::once(root)
        .chain(descendants(root))
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/statm")).ok())
        .filter_map(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * page)
        .sum()
}

#[cfg(not(target_os = "linux"))]
fn tree_resident(_root: i32) -> u64 {
    0
}

/// Kill `child` and all its descendants. nvcc runs cudafe++, cicc, ptxas and the host compiler
/// as children, and they survive their parent's death; they also hold our output pipes open.
/// The tree is frozen with SIGSTOP before it is killed so nothing forks in between. Children
/// are in the watcher's process group (`reaper`), not kbuild's: a terminal's Ctrl-C reaches
/// kbuild, which cancels and comes here, and a kbuild killed outright leaves them to the watcher.
#[cfg(target_os = "linux")]
fn kill_tree(child: &mut Child) {
    let root = child.id() as i32;
    let mut frozen = vec![root];
    signal(root, libc::SIGSTOP);
    loop {
        let new: Vec<i32> = descendants(root)
            .into_iter()
            .filter(|p| !frozen.contains(p))
            .collect();
        if new.is_empty() {
            break;
        }
        for pid in new {
            signal(pid, libc::SIGSTOP);
            frozen.push(pid);
        }
    }
    for pid in frozen {
        signal(pid, libc::SIGKILL);
    }
}

#[cfg(not(target_os = "linux"))]
fn kill_tree(child: &mut Child) {
    let _ = child.kill();
}

#[cfg(target_os = "linux")]
fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; errors (process already gone) are
    // the expected race and are ignored.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Every process below `root`, read from `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
fn descendants(root: i32) -> Vec<i32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                .and_then(|s| s.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
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

    #[test]
    fn diagnostics_keep_the_last_lines() {
        let stderr: String = (1..=250).map(|i| format!("line {i}\n")).collect();
        let d = diagnostics(b"", stderr.as_bytes());
        assert!(d.starts_with("[… 50 earlier lines omitted …]\nline 51\n"));
        assert!(d.ends_with("line 250"));
        assert_eq!(diagnostics(b"out\n", b"err\n"), "err\nout");
    }

    /// A shell running `python3` that holds `mib` MiB for `secs` seconds, `n` at once.
    fn hold(mib: u32, secs: f32, n: u32) -> CommandSpec {
        let one = format!(
            "python3 -c 'import time; b = bytearray({mib} << 20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep({secs})'"
        );
        let all = vec![format!("{one} &"); n as usize].join(" ");
        let mut spec = CommandSpec::new("sh");
        spec.args(["-c", &format!("{all} wait")]);
        spec
    }

    #[test]
    fn the_peak_memory_of_a_command_covers_its_biggest_process() {
        let measured = run_measured(&hold(200, 0.1, 1), &Cancel::new()).unwrap();
        assert!(
            (200 << 20..400 << 20).contains(&measured.peak_bytes),
            "{} bytes",
            measured.peak_bytes
        );
    }

    #[test]
    fn the_cpu_time_of_a_command_counts_its_busy_processes_and_not_its_sleep() {
        let mut busy = CommandSpec::new("sh");
        let spin = "python3 -c 'import time; t = time.process_time(); exec(\"while time.process_time() - t < 0.6: pass\")'";
        busy.args(["-c", &format!("{spin} & {spin} & wait")]);
        let measured = run_measured(&busy, &Cancel::new()).unwrap();
        assert!(
            (1.1..3.0).contains(&measured.cpu_seconds),
            "two processes of 0.6 s CPU each: {} s",
            measured.cpu_seconds
        );
        let idle = run_measured(&hold(1, 0.5, 1), &Cancel::new()).unwrap();
        assert!(idle.cpu_seconds < 0.4, "{} s", idle.cpu_seconds);
    }

    #[test]
    fn the_peak_memory_of_a_command_sums_processes_running_side_by_side() {
        let measured = run_measured(&hold(150, 1.0, 3), &Cancel::new()).unwrap();
        assert!(
            measured.peak_bytes >= 450 << 20,
            "three 150 MiB processes at once, measured {} bytes",
            measured.peak_bytes
        );
    }

    #[test]
    fn a_command_with_a_niceness_runs_at_that_much_lower_priority() {
        let niceness = |nice: i32| {
            let mut spec = CommandSpec::new("sh");
            // Field 19 of stat: the niceness of the shell kbuild started.
            spec.args(["-c", "cut -d' ' -f19 /proc/$$/stat"]);
            spec.nice = nice;
            let out = run(&spec).unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse::<i32>()
                .unwrap()
        };
        let own = niceness(0);
        assert_eq!(niceness(10), (own + 10).min(19));
    }

    #[test]
    fn run_one_reports_status_and_output_of_a_failing_command() {
        let mut spec = CommandSpec::new("sh");
        spec.args(["-c", "echo oops >&2; exit 3"]);
        let err = run(&spec).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`sh -c 'echo oops >&2; exit 3'` exited with status 3"
        );
        assert_eq!(err.diagnostics(), "oops");
    }
}
