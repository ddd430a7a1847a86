//! The exec log (`[terminal.audit] exec_log`, issue 35 item 4): every program a command's
//! tree executes, for the call's outcome record. Visibility, not enforcement: what may be
//! executed is the exec allowlist's (Landlock) and is decided by the kernel; this only
//! watches.
//!
//! Through seccomp user notification, because it sees every `execve` and `execveat` of the
//! tree, whatever started it, without ptrace, root or an audit daemon, and costs nothing
//! where it is off (the filter is the usual one): with it on, the filter answers those two
//! with `SECCOMP_RET_USER_NOTIF`, the command child installs it with
//! `SECCOMP_FILTER_FLAG_NEW_LISTENER` and sends the listener to the server over a
//! socketpair made for the stage ([`Watch`]), and a thread of the server reads each
//! notification, notes the path and `argv[0]` from the process's memory
//! (`/proc/<pid>/mem`) and its pid in its own namespace, and lets the call go on
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). A path that does not exist in the process's view
//! (one step of a PATH search) is not noted; one the allowlist refuses is. The kernel re-reads the arguments when the call
//! continues, so what a racing thread writes there after the read can differ from what
//! runs (seccomp_unotify(2)): a log, not a decision. Each call keeps at most
//! [`MAX_RECORDS`]; past them it counts.
//!
//! The thread exists before the stage is cloned: without it the command's own exec, which
//! waits for the answer, would wait forever on a spawning thread that waits for it.

use std::io::Read;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendFlags, SocketFlags,
    SocketType,
};
use safe_mcp_contract::ExecutedProgram;

/// The records one call keeps.
pub(crate) const MAX_RECORDS: usize = 256;

/// How often the watching thread looks whether the stage has ended.
const TICK: Duration = Duration::from_millis(100);

/// The longest path or `argv[0]` read from a process.
const MAX_STRING: usize = 4096;

/// How long a call waits for its stages' watching threads once they have ended.
const FINISH: Duration = Duration::from_secs(2);

/// One stage's watch: the socketpair's child end (until the stage is spawned) and the
/// thread that serves the listener the command child sends.
#[derive(Debug)]
pub(crate) struct Watch {
    child: Option<OwnedFd>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Vec<ExecutedProgram>, u64)>>,
}

impl Watch {
    /// The socketpair and its thread, before the stage is cloned.
    pub(crate) fn start() -> std::io::Result<Watch> {
        let (server, child) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("exec-log".into())
            .spawn(move || serve(&server, &flag))?;
        Ok(Watch {
            child: Some(child),
            stop,
            thread: Some(thread),
        })
    }

    /// The descriptor the command child sends its listener on.
    pub(crate) fn child_fd(&self) -> RawFd {
        self.child.as_ref().map_or(-1, |c| c.as_raw_fd())
    }

    /// The stage has been cloned: our copy of its end closes, so that a child that never
    /// sends (it failed first) ends the thread's wait.
    pub(crate) fn spawned(&mut self) {
        self.child = None;
    }

    /// Once every process of the stage is gone: what its tree executed, and how many more.
    /// A thread still busy after [`FINISH`] (a path lookup the command made slow) is left
    /// to end on its own; the call does not wait for it, and its list is lost.
    pub(crate) fn finish(mut self) -> (Vec<ExecutedProgram>, u64) {
        self.child = None;
        self.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return (Vec::new(), 0);
        };
        let until = std::time::Instant::now() + FINISH;
        while !thread.is_finished() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !thread.is_finished() {
            return (Vec::new(), 0);
        }
        thread.join().unwrap_or_default()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Sends `listener` on `channel`: the command child's part, after it installed the filter.
/// rustix's raw syscall on this stack (no allocation, no lock). The errno when it failed.
///
/// # Safety
/// Only in a spawn child, with `channel` and `listener` its own open descriptors.
pub(crate) unsafe fn send_listener(channel: RawFd, listener: RawFd) -> Result<(), i32> {
    // SAFETY: the child's own copy of the stage's channel, open until exec.
    let channel = unsafe { BorrowedFd::borrow_raw(channel) };
    // SAFETY: the listener the kernel just made for this child, open until it closes it.
    let listener = unsafe { BorrowedFd::borrow_raw(listener) };
    crate::step::send_fd(channel, listener, &[1u8], SendFlags::NOSIGNAL)
}

/// The thread: the listener, then each notification until the stage has ended.
fn serve(channel: &OwnedFd, stop: &AtomicBool) -> (Vec<ExecutedProgram>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let Some(listener) = receive(channel, stop) else {
        return (kept, dropped);
    };
    loop {
        let mut fds = [rustix::event::PollFd::new(
            &listener,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: i64::from(TICK.subsec_nanos()),
        };
        let ready = rustix::event::poll(&mut fds, Some(&timeout)).unwrap_or(0);
        let revents = fds[0].revents();
        if ready > 0 && revents.contains(rustix::event::PollFlags::IN) {
            if let Some(record) = answer_one(&listener) {
                if kept.len() < MAX_RECORDS {
                    kept.push(record);
                } else {
                    dropped += 1;
                }
            }
            continue;
        }
        // No process uses the filter any more, or the call is over.
        if revents.contains(rustix::event::PollFlags::HUP) || stop.load(Ordering::Acquire) {
            return (kept, dropped);
        }
    }
}

/// The listener the command child sends, or `None` once the stage ended without one.
fn receive(channel: &OwnedFd, stop: &AtomicBool) -> Option<OwnedFd> {
    loop {
        let mut fds = [rustix::event::PollFd::new(
            channel,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: i64::from(TICK.subsec_nanos()),
        };
        if rustix::event::poll(&mut fds, Some(&timeout)).unwrap_or(0) == 0 {
            if stop.load(Ordering::Acquire) {
                return None;
            }
            continue;
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        let mut iov = [std::io::IoSliceMut::new(&mut byte)];
        let got = rustix::net::recvmsg(channel, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC);
        let mut listener = None;
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(mut fds) = message {
                listener = listener.or(fds.next());
            }
        }
        // A message with the listener, or the end of the stream (no child will send).
        match (got, listener) {
            (_, Some(listener)) => return Some(listener),
            (Ok(msg), None) if msg.bytes == 0 => return None,
            (Err(rustix::io::Errno::INTR), None) => continue,
            _ => return None,
        }
    }
}

/// Receives one notification, notes it, and lets the exec go on.
fn answer_one(listener: &OwnedFd) -> Option<ExecutedProgram> {
    // SAFETY: an all-zero `seccomp_notif` is valid (plain integers), and the kernel
    // requires it zeroed before it fills it.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: SECCOMP_IOCTL_NOTIF_RECV writes one `seccomp_notif` into `notif`, which is
    // exactly that type, on this stack.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            std::ptr::from_mut(&mut notif),
        )
    };
    if rc != 0 {
        // The target died first (ENOENT), or a signal: nothing to answer.
        return None;
    }
    // What was read belongs to the process that asked only if it still waits on this
    // notification (its pid could have been reused meanwhile).
    let record = read_exec(&notif).filter(|_| {
        let id = notif.id;
        // SAFETY: SECCOMP_IOCTL_NOTIF_ID_VALID reads one u64, `id`, on this stack.
        unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                std::ptr::from_ref(&id),
            ) == 0
        }
    });
    let response = libc::seccomp_notif_resp {
        id: notif.id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: SECCOMP_IOCTL_NOTIF_SEND reads one `seccomp_notif_resp` from `response`.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            std::ptr::from_ref(&response),
        );
    }
    record
}

/// The program and `argv[0]` of an `execve` or `execveat`, read from the caller's memory,
/// with its pid in its own namespace.
fn read_exec(notif: &libc::seccomp_notif) -> Option<ExecutedProgram> {
    let args = notif.data.args;
    let (path_at, argv_at) = if i64::from(notif.data.nr) == libc::SYS_execveat {
        (args[1], args[2])
    } else {
        (args[0], args[1])
    };
    let pid = notif.pid;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let path = read_string(&mem, path_at).unwrap_or_default();
    // A PATH search tries each directory: the names that are not there are not programs
    // the tree started. Seen from the process's own root and cwd (its view).
    let seen = if path.starts_with('/') {
        format!("/proc/{pid}/root{path}")
    } else {
        format!("/proc/{pid}/cwd/{path}")
    };
    if std::fs::symlink_metadata(&seen).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return None;
    }
    let mut pointer = [0u8; 8];
    let argv0 = mem
        .read_exact_at(&mut pointer, argv_at)
        .ok()
        .map(|()| u64::from_ne_bytes(pointer))
        .filter(|p| *p != 0)
        .and_then(|p| read_string(&mem, p))
        .unwrap_or_default();
    Some(ExecutedProgram {
        pid: namespace_pid(pid).unwrap_or(i64::from(pid)),
        path,
        argv0,
    })
}

/// A NUL-terminated string at `at` in the process's memory, read in pieces (the next page
/// may be unmapped), at most [`MAX_STRING`] bytes.
fn read_string(mem: &std::fs::File, at: u64) -> Option<String> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    while out.len() < MAX_STRING {
        let offset = at.checked_add(out.len() as u64)?;
        let n = mem.read_at(&mut chunk, offset).ok().filter(|n| *n > 0)?;
        match chunk[..n].iter().position(|b| *b == 0) {
            Some(end) => {
                out.extend_from_slice(&chunk[..end]);
                return Some(String::from_utf8_lossy(&out).into_owned());
            }
            None => out.extend_from_slice(&chunk[..n]),
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The pid a process has in its own (innermost) pid namespace: `NSpid`'s last field.
fn namespace_pid(pid: u32) -> Option<i64> {
    let mut status = String::new();
    std::fs::File::open(format!("/proc/{pid}/status"))
        .ok()?
        .read_to_string(&mut status)
        .ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}
