//! TCP sockets in the commands' network namespace (issue 33, item 2), so that the server can
//! relay a connection from the host to a dev server a session started in the private view.
//!
//! A socket belongs for good to the network namespace it was made in: one made there and
//! connected from here reaches the view's loopback, while everything else of the server
//! stays on the host's network. The server cannot make one itself: entering the view's user
//! namespace (an unprivileged server's) needs a single-threaded process. So a small helper
//! is forked once, on first use, and lives as long as the server: it exits when its end of
//! the channel reads end-of-file, which the server's death gives it (no `PR_SET_PDEATHSIG`:
//! that follows the forking *thread*, which may end first). The reaper knows it
//! ([`crate::reap::fork_kept`]), so no sweep takes it for an escapee. It enters the view's user and network namespaces, closes every other
//! descriptor it inherited (a copy would keep the server's sockets open), and then answers
//! each one-byte request (`4` or `6`) on a `SOCK_SEQPACKET` socketpair with a fresh,
//! unconnected TCP socket of that family, passed back with `SCM_RIGHTS`. It never connects,
//! listens or reads anything else: what the socket reaches is the server's business.

use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Mutex;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The helper: the server's end of its socketpair, used by one request at a time.
pub(crate) struct SocketFactory {
    channel: Mutex<OwnedFd>,
}

impl std::fmt::Debug for SocketFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SocketFactory")
    }
}

impl SocketFactory {
    /// Forks the helper into the namespaces `namespaces` names (descriptor, `CLONE_NEW*`
    /// flag; the user namespace first).
    pub(crate) fn start(namespaces: &[(RawFd, c_int)]) -> Result<SocketFactory, String> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| format!("socketpair: {e}"))?;
        // Registered with the reaper, whose sweeps kill every other child that is no stage.
        let pid = crate::reap::fork_kept(|| {
            // SAFETY: the child runs only `helper`, which makes raw syscalls (rustix's, and
            // libc's setns and _exit) on values prepared here: no allocation, no lock,
            // nothing another thread of the server may have held. It never returns.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                helper(theirs.as_fd(), namespaces);
            }
            pid
        });
        match pid {
            -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
            _ => {
                drop(theirs);
                let factory = SocketFactory {
                    channel: Mutex::new(ours),
                };
                // The first answer says whether the helper made it into the namespaces.
                factory.socket(false).map(drop)?;
                Ok(factory)
            }
        }
    }

    /// A fresh, unconnected TCP socket (IPv6 when `v6`) in the commands' namespace.
    pub(crate) fn socket(&self, v6: bool) -> Result<OwnedFd, String> {
        let channel = self
            .channel
            .lock()
            .map_err(|_| "the socket helper's lock is poisoned".to_owned())?;
        let ask = [if v6 { b'6' } else { b'4' }];
        rustix::net::send(&*channel, &ask, SendFlags::NOSIGNAL)
            .map_err(|e| format!("the socket helper is gone: {e}"))?;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut errno = [0u8; 4];
        let mut iov = [std::io::IoSliceMut::new(&mut errno)];
        let got = rustix::net::recvmsg(&*channel, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC)
            .map_err(|e| format!("the socket helper: {e}"))?;
        let passed = control.drain().find_map(|message| match message {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        });
        match (got.bytes, passed) {
            (4, Some(fd)) => Ok(fd),
            (4, None) => Err(format!(
                "the view's network namespace refused a socket: {}",
                std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno))
            )),
            _ => Err("the socket helper answered nothing".into()),
        }
    }
}

/// The helper's whole life, in the forked child.
fn helper(channel: BorrowedFd<'_>, namespaces: &[(RawFd, c_int)]) -> ! {
    let exit = |code: c_int| -> ! {
        // SAFETY: _exit ends this process at once, running nothing of the server's.
        unsafe { libc::_exit(code) }
    };
    for &(fd, flag) in namespaces {
        // SAFETY: setns on a namespace descriptor the view keeps open; it moves only this
        // single-threaded child.
        if unsafe { libc::syscall(libc::SYS_setns, fd, flag) } != 0 {
            exit(1);
        }
    }
    // Everything else the server had open goes: a copy here would keep its sockets, its
    // trail and its pipes open behind its back.
    crate::step::close_all_except([channel.as_raw_fd(), -1]);
    loop {
        let mut ask = [0u8; 1];
        match rustix::net::recv(channel, &mut ask, RecvFlags::empty()) {
            Ok((n, _)) if n > 0 => {}
            _ => exit(0),
        }
        let family = if ask[0] == b'6' {
            AddressFamily::INET6
        } else {
            AddressFamily::INET
        };
        let made = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None);
        let (errno, fd) = match &made {
            Ok(fd) => (0, Some(fd.as_fd())),
            Err(e) => (e.raw_os_error(), None),
        };
        let fds: [BorrowedFd<'_>; 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if let Some(fd) = fd {
            fds = [fd];
            if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
                exit(1);
            }
        }
        let data = errno.to_ne_bytes();
        let iov = [std::io::IoSlice::new(&data)];
        if rustix::net::sendmsg(channel, &iov, &mut control, SendFlags::NOSIGNAL).is_err() {
            exit(0);
        }
    }
}

/// An unconnected TCP socket on the host's network (no private view: commands share it).
pub(crate) fn host_socket(v6: bool) -> Result<OwnedFd, String> {
    let family = if v6 {
        AddressFamily::INET6
    } else {
        AddressFamily::INET
    };
    rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)
        .map_err(|e| format!("socket: {e}"))
}
