//! What a spawned child was doing when it failed, and how it reads its errno.
//!
//! Shared by the confinement (which fails at its own steps) and the spawn code (which
//! reports them), so that neither depends on the other for it. Nothing here may allocate:
//! it runs in the `CLONE_VM` child.

use std::ffi::c_int;

/// What the child was doing when it failed, for the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum Step {
    Signals = 1,
    ProcessGroup,
    Stdio,
    /// Entering the private view's namespaces.
    View,
    /// The command's own pid and mount namespaces, its `/proc`, or its init.
    PidNamespace,
    Chdir,
    Descriptors,
    /// The pids cgroup or an rlimit.
    Limits,
    /// Dropping capabilities or locking the securebits.
    Capabilities,
    /// no_new_privs, Landlock or seccomp.
    Sandbox,
    Gate,
    Exec,
    /// Egress: the command's own network namespace and the proxy's listener in it.
    Network,
    /// A process session's pseudo-terminal: made in the command's own devpts, handed to the
    /// server, and made the command's controlling terminal.
    Terminal,
}

impl Step {
    pub(crate) fn from_raw(raw: i32) -> Option<Step> {
        [
            Step::Signals,
            Step::ProcessGroup,
            Step::Stdio,
            Step::View,
            Step::PidNamespace,
            Step::Chdir,
            Step::Descriptors,
            Step::Limits,
            Step::Capabilities,
            Step::Sandbox,
            Step::Gate,
            Step::Exec,
            Step::Network,
            Step::Terminal,
        ]
        .into_iter()
        .find(|s| *s as i32 == raw)
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Step::Signals => "signal reset",
            Step::ProcessGroup => "setpgid",
            Step::Stdio => "dup2",
            Step::View => "entering the private view (setns)",
            Step::PidNamespace => "the command's pid namespace (unshare, /proc, init)",
            Step::Chdir => "chdir",
            Step::Descriptors => "close_range",
            Step::Limits => "process limits",
            Step::Capabilities => "capability drop",
            Step::Sandbox => "kernel confinement",
            Step::Gate => "exec gate",
            Step::Exec => "execve",
            Step::Network => {
                "the command's network namespace (unshare, loopback, the proxy's listener)"
            }
            Step::Terminal => {
                "the session's terminal (its devpts's ptmx, the master sent to the server, the controlling terminal)"
            }
        }
    }
}

/// This thread's errno, read without a libc call that could take a lock.
pub(crate) fn errno() -> c_int {
    // SAFETY: returns the address of this thread's errno slot; no arguments.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: the slot is valid for the thread's life (shared with the sleeping parent thread,
    // whose errno it may overwrite: the parent reads errno only right after its own calls).
    unsafe { *slot }
}

/// Sends `data` with `fd` attached (`SCM_RIGHTS`) on `channel`: one `sendmsg` of rustix's
/// raw backend, its control buffer on this stack (no allocation, no lock), so a spawn child
/// may call it. The errno when it failed.
pub(crate) fn send_fd(
    channel: std::os::fd::BorrowedFd<'_>,
    fd: std::os::fd::BorrowedFd<'_>,
    data: &[u8],
    flags: rustix::net::SendFlags,
) -> Result<(), c_int> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage};
    let fds = [fd];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(libc::ENOBUFS);
    }
    let iov = [std::io::IoSlice::new(data)];
    rustix::net::sendmsg(channel, &iov, &mut control, flags)
        .map(|_| ())
        .map_err(|e| e.raw_os_error())
}

/// The two ends of a stage's channel, on which one of its children sends the server a
/// descriptor it made in the stage's own namespaces (the listener of its network namespace,
/// the master of its terminal): the server keeps `server`, the child sends on `child` with
/// [`send_fd`]. Both close on exec.
pub(crate) struct Channel {
    pub(crate) server: std::os::fd::OwnedFd,
    pub(crate) child: std::os::fd::OwnedFd,
}

impl Channel {
    pub(crate) fn new() -> std::io::Result<Channel> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        let (server, child) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            None,
        )?;
        Ok(Channel { server, child })
    }

    /// The descriptor the child sent, if it got that far, or an error that says `missing`.
    /// Call once the child has given its word (the message waits in the socket until then).
    pub(crate) fn receive_fd(&self, missing: &str) -> std::io::Result<std::os::fd::OwnedFd> {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        let mut iov = [std::io::IoSliceMut::new(&mut byte)];
        rustix::net::recvmsg(&self.server, &mut iov, &mut control, RecvFlags::DONTWAIT)?;
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(mut fds) = message
                && let Some(fd) = fds.next()
            {
                return Ok(fd);
            }
        }
        Err(std::io::Error::other(missing.to_owned()))
    }
}

/// Closes every descriptor of this process but `keep` (-1 for none): the raw syscall, on
/// the gaps between them. For children that must keep nothing of the server's open.
pub(crate) fn close_all_except<const N: usize>(mut keep: [c_int; N]) {
    // On the stack: this runs in children that may not allocate.
    keep.sort_unstable();
    let mut from: u32 = 0;
    for k in keep.into_iter().filter(|k| *k >= 0) {
        let k = k as u32;
        if from < k {
            // SAFETY: integer arguments only; closes descriptors of this process.
            unsafe { libc::syscall(libc::SYS_close_range, from, k - 1, 0u32) };
        }
        from = k + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, c_int::MAX as u32, 0u32) };
}

#[cfg(test)]
mod tests {
    use super::Step;

    #[test]
    fn every_step_survives_the_round_trip_through_its_raw_code() {
        // A step the child reports as `step << 16 | errno` must read back as itself, or the
        // message names the wrong step.
        for raw in 1..=14 {
            let step = Step::from_raw(raw).unwrap_or_else(|| panic!("no step {raw}"));
            assert_eq!(step as i32, raw);
            assert!(!step.as_str().is_empty());
        }
        assert_eq!(Step::from_raw(0), None);
        assert_eq!(Step::from_raw(15), None);
    }
}
