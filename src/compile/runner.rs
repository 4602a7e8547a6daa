//! The one runner for external commands: capture output, run units in parallel under a jobs
//! limit, and on the first failure kill the running siblings (with their child processes) and
//! start nothing new.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::CompileError;
use super::command::CommandSpec;
use crate::plan::CompileJob;
use crate::report::{Reporter, UnitOutcome};

/// Peak memory of one nvcc job with torch headers (cicc measured at 2.9 GB).
const MEMORY_PER_JOB: u64 = 3 << 30;

/// How often a running command checks whether it was cancelled.
const POLL: Duration = Duration::from_millis(10);

/// Compiler output kept in error messages: the end is where the first error's cascade stops
/// and where the compiler's summary is.
const DIAGNOSTIC_LINES: usize = 200;

/// Why a command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CommandFailure {
    /// The program could not be started (missing, not executable).
    #[error("cannot run `{}`: {source}", program.display())]
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
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Run a command to completion, capturing stdout and stderr. Non-zero exit is an error.
pub fn run_one(spec: &CommandSpec) -> Result<Output, CommandFailure> {
    run_cancellable(spec, &Cancel::new())
}

/// Like `run_one`, but kills the command and everything it started once `cancel` fires.
pub fn run_cancellable(spec: &CommandSpec, cancel: &Cancel) -> Result<Output, CommandFailure> {
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
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait_or_kill(&mut child, cancel);
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    match status {
        Some(status) if status.success() => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        Some(status) => Err(CommandFailure::Exited {
            command: spec.to_string(),
            status,
            stdout,
            stderr,
        }),
        None => Err(CommandFailure::Cancelled {
            command: spec.to_string(),
        }),
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error only truncates diagnostics; the exit status still decides.
            let _ = pipe.read_to_end(&mut buf);
        }
        buf
    })
}

/// Wait for `child`; `None` when it was killed because `cancel` fired.
fn wait_or_kill(child: &mut Child, cancel: &Cancel) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            // The child is ours and unreaped, so this does not happen; treat it as gone.
            Err(_) => return child.wait().ok(),
        }
        if cancel.is_cancelled() {
            kill_tree(child);
            let _ = child.wait();
            return None;
        }
        thread::sleep(POLL);
    }
}

/// Kill `child` and all its descendants. nvcc runs cudafe++, cicc, ptxas and the host compiler
/// as children, and they survive their parent's death; they also hold our output pipes open.
/// The tree is frozen with SIGSTOP before it is killed so nothing forks in between. Children
/// stay in our process group so that Ctrl-C in a terminal still reaches every compiler.
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

/// Parallel jobs for this machine: one per core, but no more than memory allows at ~3 GiB per
/// job (a cicc with torch headers peaks near that). At least 1.
pub fn default_jobs() -> usize {
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    jobs_for(cores, mem_available())
}

/// `default_jobs` from its inputs: `mem_available` in bytes, `None` when unknown.
pub fn jobs_for(cores: usize, mem_available: Option<u64>) -> usize {
    let by_memory = mem_available.map_or(cores, |b| (b / MEMORY_PER_JOB) as usize);
    cores.min(by_memory).max(1)
}

fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Something the runner can schedule: it only needs a label for progress and errors.
pub trait Unit: Sync {
    fn label(&self) -> &str;
}

impl Unit for CompileJob {
    fn label(&self) -> &str {
        &self.label
    }
}

/// How one unit of work did not finish.
#[derive(Debug)]
pub enum JobError {
    /// Stopped because another unit failed; not itself an error.
    Cancelled,
    Failed(CompileError),
}

/// Run `work` for every unit, at most `jobs` at a time, reporting each unit's start and end.
///
/// On the first failure the shared `Cancel` fires: running commands are killed, no new unit
/// starts, and that first error is returned. Outcomes come back in the order of `units`.
pub fn run_jobs<T, F>(
    units: &[T],
    jobs: usize,
    reporter: &dyn Reporter,
    work: F,
) -> Result<Vec<UnitOutcome>, CompileError>
where
    T: Unit,
    F: Fn(&T, &Cancel) -> Result<UnitOutcome, JobError> + Sync,
{
    reporter.begin_units(units.len());
    let cancel = Cancel::new();
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<UnitOutcome>>> = Mutex::new(vec![None; units.len()]);
    let first_error: Mutex<Option<CompileError>> = Mutex::new(None);
    let workers = jobs.max(1).min(units.len());
    thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !cancel.is_cancelled() {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(unit) = units.get(i) else { break };
                    let label = unit.label();
                    reporter.unit_started(label);
                    let started = Instant::now();
                    match work(unit, &cancel) {
                        Ok(outcome) => {
                            reporter.unit_finished(label, outcome, started.elapsed());
                            lock(&outcomes)[i] = Some(outcome);
                        }
                        Err(JobError::Cancelled) => {
                            reporter.verbose(&format!("stopped `{label}`: another unit failed"));
                        }
                        Err(JobError::Failed(err)) => {
                            reporter.unit_finished(label, UnitOutcome::Failed, started.elapsed());
                            lock(&first_error).get_or_insert(err);
                            cancel.cancel();
                        }
                    }
                }
            });
        }
    });
    if let Some(err) = lock(&first_error).take() {
        return Err(err);
    }
    // Without an error every unit ran to an outcome.
    Ok(lock(&outcomes)
        .iter()
        .map(|o| o.unwrap_or(UnitOutcome::Failed))
        .collect())
}

/// A poisoned lock only means another worker panicked; the panic propagates from the scope.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_limited_by_memory_and_at_least_one() {
        assert_eq!(jobs_for(16, Some(128 << 30)), 16);
        assert_eq!(jobs_for(16, Some(20 << 30)), 6);
        assert_eq!(jobs_for(2, Some(1 << 30)), 1);
        assert_eq!(jobs_for(4, None), 4);
    }

    #[test]
    fn diagnostics_keep_the_last_lines() {
        let stderr: String = (1..=250).map(|i| format!("line {i}\n")).collect();
        let d = diagnostics(b"", stderr.as_bytes());
        assert!(d.starts_with("[… 50 earlier lines omitted …]\nline 51\n"));
        assert!(d.ends_with("line 250"));
        assert_eq!(diagnostics(b"out\n", b"err\n"), "err\nout");
    }

    #[test]
    fn run_one_reports_status_and_output_of_a_failing_command() {
        let mut spec = CommandSpec::new("sh");
        spec.args(["-c", "echo oops >&2; exit 3"]);
        let err = run_one(&spec).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`sh -c 'echo oops >&2; exit 3'` exited with status 3"
        );
        assert_eq!(err.diagnostics(), "oops");
    }
}
