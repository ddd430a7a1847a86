//! A root server's bound on the kernel's per-user counters (issue 49).
//!
//! inotify and fanotify instances and watches are counted per user and per user namespace,
//! and every level's limit applies. An unprivileged server's view has a user namespace of its
//! own whose limits are half the host's ([`super::consts::USER_LIMITS`]). A root server's
//! commands ran as root in no user namespace of their own, so one command holding 128
//! inotify instances gave every root process of the host EMFILE (the server's own watch of
//! the jail among them). So a root server makes one user namespace, uid and gid 0 mapped to
//! themselves, whose counters are half the host's, and each command enters it after its
//! mounts, cgroups and rlimits and before it drops its capabilities: what the commands hold
//! together is then at most half of what root may hold. Files keep their owners (0 is 0);
//! those of other users show as the overflow id, as the commands' capabilities are dropped
//! anyway.

use std::ffi::c_int;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::step::errno;

use super::helpers::halved_user_limits;

/// The user namespace a root server's commands enter, with the counters bounded.
#[derive(Debug)]
pub(crate) struct Counters {
    fd: OwnedFd,
}

impl Counters {
    /// The namespace for a root server's commands; `None` for any other server (its view's
    /// user namespace bounds its commands' counters), or, with a warning, where it cannot
    /// be made.
    pub(crate) fn for_root_commands() -> Option<Counters> {
        if !rustix::process::geteuid().is_root() {
            return None;
        }
        match Counters::create() {
            Ok(counters) => Some(counters),
            Err(why) => {
                tracing::warn!(
                    "the per-user kernel counters (inotify, fanotify) stay root's for commands: {why}"
                );
                None
            }
        }
    }

    /// Makes the namespace: a child unshares it, this process writes its maps, the child
    /// writes its limits (holding every capability of its namespace), and this process
    /// keeps a descriptor to it. Only for root.
    fn create() -> Result<Counters, String> {
        let limits = halved_user_limits()?;
        if limits.is_empty() {
            return Err("this kernel has no per-user counters".into());
        }
        let pipe = || {
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                .map_err(|e| format!("pipe: {e}"))
        };
        let ((ready_r, ready_w), (go_r, go_w)) = (pipe()?, pipe()?);
        // SAFETY: the child makes raw syscalls on data prepared above only (no allocation, no
        // lock), then `_exit`s: async-signal-safe, as a fork of a threaded process requires.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: in the forked child, which never returns from here.
            unsafe { child(&limits, ready_w.as_raw_fd(), go_r.as_raw_fd()) }
        }
        drop(ready_w);
        drop(go_r);
        let made = (|| {
            let word = read_word(&ready_r)?;
            if word != 0 {
                return Err(format!(
                    "unshare(CLONE_NEWUSER): {}",
                    std::io::Error::from_raw_os_error(word)
                ));
            }
            for map in ["uid_map", "gid_map"] {
                std::fs::write(format!("/proc/{pid}/{map}"), "0 0 1\n")
                    .map_err(|e| format!("the {map}: {e}"))?;
            }
            rustix::io::write(&go_w, &[1]).map_err(|e| format!("pipe: {e}"))?;
            let word = read_word(&ready_r)?;
            if word != 0 {
                return Err(format!(
                    "writing the counters' limits: {}",
                    std::io::Error::from_raw_os_error(word)
                ));
            }
            std::fs::File::open(format!("/proc/{pid}/ns/user"))
                .map(|f| Counters { fd: f.into() })
                .map_err(|e| format!("the namespace: {e}"))
        })();
        let _ = rustix::io::write(&go_w, &[1]);
        drop(go_w);
        let mut status = 0;
        // SAFETY: waits for the child forked above; writes only `status`.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        made
    }

    /// Its descriptor's number.
    pub(crate) fn raw_fd(&self) -> c_int {
        self.fd.as_raw_fd()
    }

    /// Enters the namespace.
    ///
    /// # Safety
    /// Only in a spawn child (one thread, its own file system information), after its
    /// mounts, cgroups and rlimits and before it drops its capabilities.
    pub(crate) unsafe fn enter(&self) -> Result<(), c_int> {
        // SAFETY: setns on a namespace descriptor this server owns and keeps open.
        if unsafe { libc::syscall(libc::SYS_setns, self.fd.as_raw_fd(), libc::CLONE_NEWUSER) } != 0
        {
            return Err(errno());
        }
        Ok(())
    }
}

/// The child's word: 0, or the errno of what failed.
fn read_word(from: &OwnedFd) -> Result<i32, String> {
    let mut word = [0u8; 4];
    match rustix::io::read(from, &mut word) {
        Ok(4) => Ok(i32::from_ne_bytes(word)),
        _ => Err("the child that makes the counters' namespace ended without a word".into()),
    }
}

/// The child: unshares its user namespace, waits for its maps, writes the limits, waits
/// until the namespace is opened, exits.
///
/// # Safety
/// Only in the child forked by [`Counters::create`]. Raw syscalls on prepared data only.
unsafe fn child(limits: &[(std::ffi::CString, Vec<u8>)], ready: c_int, go: c_int) -> ! {
    let say = |word: c_int| {
        let bytes = word.to_ne_bytes();
        // SAFETY: writes four bytes from this stack to the ready pipe.
        unsafe { libc::write(ready, bytes.as_ptr().cast(), bytes.len()) };
    };
    let wait = || {
        let mut byte = 0u8;
        // SAFETY: reads one byte into `byte`, on this stack.
        unsafe { libc::read(go, std::ptr::from_mut(&mut byte).cast(), 1) };
    };
    // SAFETY: prctl with integer arguments only: the child dies with the server.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    // SAFETY: integer argument only.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
        say(errno());
        // SAFETY: ends only this child.
        unsafe { libc::_exit(1) }
    }
    say(0);
    wait();
    // SAFETY: in this forked child, holding every capability of its new namespace.
    let failed = unsafe { super::child::write_user_limits(limits) };
    say(failed);
    wait();
    // SAFETY: ends only this child.
    unsafe { libc::_exit(0) }
}
