//! A GNU make jobserver owned by one build: a pipe holding one token per job slot but one.
//! kbuild's runner takes a token for every unit it runs beside the first, and each nvcc it
//! shares the pipe with (`--jobserver`) takes one for every device pass it runs beside its
//! first, so the compiler processes of the whole build never outnumber the slots, while idle
//! slots go to the device passes (one per capability) of whichever units are running. (A split
//! device pass's extra threads take no slot: they run at low priority, `compile::split`.)
//!
//! Our own, not the `jobserver` crate: its pipe client cannot wait for a token without
//! blocking (`try_acquire` is unsupported there), and a blocked wait cannot see the runner's
//! cancel. Tokens held by an nvcc that a failure or a signal killed never come back, so a
//! worker waiting without looking at the cancel could wait forever.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::process::{Cancel, CommandSpec};

/// How long a wait for a token sleeps between looks at the cancel.
const POLL: Duration = Duration::from_millis(10);

/// The byte a token is written as (make writes `+`; nvcc returns what it read).
const TOKEN: u8 = b'+';

/// The build's jobserver: `slots` job slots, one implicit (held by the runner) and the rest
/// as tokens in a pipe.
#[derive(Debug)]
pub struct Jobserver {
    slots: usize,
    /// The pipe as children see it (close-on-exec here; only the processes it is shared
    /// with inherit it).
    read: OwnedFd,
    write: File,
    /// A second, non-blocking open of the read end for kbuild's own waits: setting
    /// `O_NONBLOCK` on `read` would change it for the children too.
    own_read: File,
    /// The implicit slot is free: the runner's first unit takes it instead of a token.
    implicit_free: AtomicBool,
    /// Units of the current run not finished yet (queued or running).
    pending: AtomicUsize,
    /// Units of the current run not started yet.
    queued: AtomicUsize,
}

/// A job slot held by this process: the implicit one or a token from the pipe, given back
/// when dropped.
#[derive(Debug)]
pub struct Slot<'a> {
    server: &'a Jobserver,
    token: Option<u8>,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        match self.token {
            Some(byte) => self.server.put(byte),
            None => self.server.implicit_free.store(true, Ordering::SeqCst),
        }
    }
}

impl Jobserver {
    /// A jobserver for `slots` concurrent compiler processes (at least 1).
    pub fn new(slots: usize) -> io::Result<Self> {
        let slots = slots.max(1);
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given; both are owned
        // below and closed on drop.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptors from pipe2 that nothing else owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        // Opening the pipe through /proc makes a new open file description, so its
        // non-blocking mode is ours alone.
        let own_read = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(format!("/proc/self/fd/{}", read.as_raw_fd()))?;
        let server = Jobserver {
            slots,
            read,
            write,
            own_read,
            implicit_free: AtomicBool::new(true),
            pending: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
        };
        (&server.write).write_all(&vec![TOKEN; slots - 1])?;
        Ok(server)
    }

    /// Job slots in all: the implicit one and the tokens.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// A slot for one more job: the implicit slot when free, else a token, waiting for one.
    /// `None` once `cancel` fires while waiting.
    pub fn acquire(&self, cancel: &Cancel) -> io::Result<Option<Slot<'_>>> {
        self.acquire_unless(|| cancel.is_cancelled())
    }

    /// A slot as [`Jobserver::acquire`] gives it, or `None` once `stop` says (it is asked
    /// while waiting): a waiter that no longer needs a slot must not keep waiting for one.
    pub fn acquire_unless(&self, stop: impl Fn() -> bool) -> io::Result<Option<Slot<'_>>> {
        if self.implicit_free.swap(false, Ordering::SeqCst) {
            return Ok(Some(Slot {
                server: self,
                token: None,
            }));
        }
        loop {
            if stop() {
                return Ok(None);
            }
            let mut byte = [0u8];
            match (&self.own_read).read(&mut byte) {
                Ok(1) => {
                    return Ok(Some(Slot {
                        server: self,
                        token: Some(byte[0]),
                    }));
                }
                Ok(_) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_readable(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Give the implicit slot to the children for good, as a token in the pipe, when it is
    /// free: the runner has nothing left to start, and the device passes of the units still
    /// running can use it.
    pub fn donate_implicit(&self) {
        if self.implicit_free.swap(false, Ordering::SeqCst) {
            self.put(TOKEN);
        }
    }

    /// A runner starts handing out `units` units.
    pub fn start_run(&self, units: usize) {
        self.pending.store(units, Ordering::SeqCst);
        self.queued.store(units, Ordering::SeqCst);
    }

    /// One unit of the run started.
    pub fn unit_started(&self) {
        let _ = self
            .queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// The units of the run running now when none waits to start (every one left started),
    /// else `None`: only then may a running unit's passes take the slots the others leave.
    pub fn running_with_none_waiting(&self) -> Option<usize> {
        let queued = self.queued.load(Ordering::SeqCst);
        let pending = self.pending.load(Ordering::SeqCst);
        (queued == 0).then(|| pending.max(1))
    }

    /// One unit of the run finished (compiled, fresh or failed).
    pub fn unit_finished(&self) {
        let _ = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Whether the unit asking is the last one of its run: every other one finished, none is
    /// waiting to start, so slots free now would idle unless its own steps use them.
    pub fn last_unit(&self) -> bool {
        self.pending.load(Ordering::SeqCst) <= 1
    }

    /// Tokens in the pipe now (for tests and diagnostics).
    pub fn tokens_available(&self) -> usize {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int into the pointer it is given.
        let ok = unsafe { libc::ioctl(self.read.as_raw_fd(), libc::FIONREAD, &mut n) } == 0;
        if ok { n.max(0) as usize } else { 0 }
    }

    /// Let `spec`'s program use this jobserver: it inherits the pipe and finds it through
    /// `MAKEFLAGS` (the `--jobserver-auth=R,W` form GNU make has used since 4.2). Nothing else
    /// kbuild starts sees the pipe.
    pub fn share_with(&self, spec: &mut CommandSpec) {
        let (r, w) = (self.read.as_raw_fd(), self.write.as_raw_fd());
        spec.env.push((
            "MAKEFLAGS".into(),
            format!("-j{} --jobserver-auth={r},{w}", self.slots).into(),
        ));
        spec.inherit_fds.extend([r, w]);
    }

    fn put(&self, byte: u8) {
        // The pipe holds far more than `slots` bytes, so this write does not block; if it
        // failed the build would only lose one slot of parallelism.
        let _ = (&self.write).write_all(&[byte]);
    }

    fn wait_readable(&self) {
        let mut fd = libc::pollfd {
            fd: self.own_read.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll reads and writes the one pollfd it is given. Errors and timeouts both
        // lead back to the caller's loop, which looks at the cancel and reads again.
        unsafe {
            libc::poll(&mut fd, 1, POLL.as_millis() as libc::c_int);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipe_holds_a_token_per_slot_but_the_implicit_one() {
        let js = Jobserver::new(4).unwrap();
        assert_eq!(js.tokens_available(), 3);
        let cancel = Cancel::new();
        let first = js.acquire(&cancel).unwrap().unwrap();
        assert_eq!(
            js.tokens_available(),
            3,
            "the first slot is the implicit one"
        );
        let second = js.acquire(&cancel).unwrap().unwrap();
        assert_eq!(js.tokens_available(), 2);
        drop(second);
        assert_eq!(js.tokens_available(), 3);
        drop(first);
        js.donate_implicit();
        assert_eq!(js.tokens_available(), 4);
    }

    #[test]
    fn a_unit_is_the_last_once_every_other_of_its_run_finished() {
        let js = Jobserver::new(4).unwrap();
        js.start_run(3);
        assert!(!js.last_unit());
        js.unit_finished();
        assert!(!js.last_unit(), "one finished, two left");
        js.unit_finished();
        assert!(js.last_unit());
        js.unit_finished();
        js.unit_finished();
        assert!(js.last_unit(), "never below zero");
        js.start_run(2);
        assert!(!js.last_unit(), "a new run counts its own units");
    }

    #[test]
    fn the_units_running_are_counted_once_none_waits_to_start() {
        let js = Jobserver::new(4).unwrap();
        js.start_run(3);
        js.unit_started();
        js.unit_started();
        assert_eq!(js.running_with_none_waiting(), None, "one waits");
        js.unit_started();
        assert_eq!(js.running_with_none_waiting(), Some(3));
        js.unit_finished();
        assert_eq!(js.running_with_none_waiting(), Some(2));
        js.unit_finished();
        js.unit_finished();
        js.unit_finished();
        assert_eq!(js.running_with_none_waiting(), Some(1), "never below one");
    }

    #[test]
    fn a_wait_for_a_token_ends_when_cancelled() {
        let js = Jobserver::new(1).unwrap();
        let cancel = Cancel::new();
        let _held = js.acquire(&cancel).unwrap().unwrap();
        cancel.cancel();
        assert!(js.acquire(&cancel).unwrap().is_none());
    }
}
