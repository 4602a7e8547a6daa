//! No compiler outlives a killed kbuild. A signal kbuild can catch cancels its jobs and kills
//! their trees (`process`); `kill -9` cannot be caught, and a compiler driver's children
//! (cc1plus, cicc, ptxas) would run on as orphans. So every command kbuild starts joins one
//! process group, led by a small watcher (kbuild itself, run as `kbuild __kbuild-reaper`) that
//! reads a pipe from kbuild: when the pipe closes without kbuild saying it is done, kbuild died,
//! and the watcher kills the whole group. Each child also gets a parent-death signal, so the
//! direct child dies with kbuild even if the watcher could not start.
//!
//! The group is not kbuild's own, so a terminal's Ctrl-C reaches kbuild only: kbuild catches it
//! while it builds and kills its jobs' trees itself (`process::catch_interrupts`), and if it
//! dies of it instead, the watcher kills them.

use std::io::{Read as _, Write as _};
use std::process::{ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The argument that makes the binary the watcher instead of kbuild.
pub const ARG: &str = "__kbuild-reaper";

/// What kbuild writes before it exits normally: the group is left alone.
const DONE: u8 = b'd';

struct Watcher {
    pgid: i32,
    pipe: Mutex<Option<ChildStdin>>,
}

static WATCHER: OnceLock<Option<Watcher>> = OnceLock::new();

/// Set by the binary: a library user (a test harness) starts no watcher, since its executable
/// is not kbuild.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Let [`group`] start the watcher (the kbuild binary calls this first thing).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// The process group that kbuild's children join, starting the watcher on first use; `None`
/// when it is not enabled or could not start (the children then stay in kbuild's group).
pub fn group() -> Option<i32> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    WATCHER.get_or_init(start).as_ref().map(|w| w.pgid)
}

#[allow(
    clippy::disallowed_methods,
    reason = "the watcher is kbuild itself, outside the process group the runner puts children in"
)]
fn start() -> Option<Watcher> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().ok()?;
    let mut child = Command::new(exe)
        .arg(ARG)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let pipe = child.stdin.take()?;
    // The leader of a new group: its pid is the group's id.
    let pgid = i32::try_from(child.id()).ok()?;
    // The watcher is never waited for: it outlives kbuild by design (after a normal exit it
    // ends on its own and init reaps it).
    drop(child);
    Some(Watcher {
        pgid,
        pipe: Mutex::new(Some(pipe)),
    })
}

/// Tell the watcher that kbuild ends normally: what is left in the group (a compiler server
/// such as sccache's, started on purpose to outlive the build) stays.
pub fn done() {
    if let Some(Some(w)) = WATCHER.get()
        && let Ok(mut pipe) = w.pipe.lock()
        && let Some(mut p) = pipe.take()
    {
        let _ = p.write_all(&[DONE]);
    }
}

/// The watcher's main: wait for the pipe to close; kill the group unless kbuild said done.
pub fn watch() -> ExitCode {
    let mut stdin = std::io::stdin().lock();
    let mut byte = [0u8; 1];
    let said_done = loop {
        match stdin.read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(1) => break byte[0] == DONE,
            _ => break false,
        }
    };
    if !said_done {
        // SAFETY: signal(2) on our own group, of which this process is the leader; SIGKILL
        // ends this process too, after every other member got it.
        unsafe {
            libc::kill(0, libc::SIGKILL);
        }
    }
    ExitCode::SUCCESS
}
