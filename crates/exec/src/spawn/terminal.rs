//! A process session's pseudo-terminal, made inside the stage: the init opens a fresh pty
//! in the devpts it mounted for the command (a new instance: no other terminal is in it),
//! sends the master to the server over the stage's channel, and makes the other end its own
//! standard input, output and error, which the command inherits; the command then leads a
//! session of its own with that end as its controlling terminal. The server's terminal is
//! never reachable: the init and the command were never in the server's session, and this
//! devpts holds only the one pty.
//!
//! Both run in a `CLONE_VM` child before the init's word: raw syscalls on the stack, no
//! allocation, no lock.

use std::ffi::c_int;
use std::os::fd::BorrowedFd;

use crate::step::{errno, send_fd};

/// Where the init finds its terminal's channel and size; `channel` is -1 for none.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(super) struct TerminalStage {
    pub(super) channel: c_int,
    pub(super) rows: u16,
    pub(super) cols: u16,
}

impl TerminalStage {
    /// No terminal: the command keeps the stage's pipes.
    pub(super) const NONE: TerminalStage = TerminalStage {
        channel: -1,
        rows: 0,
        cols: 0,
    };

    pub(super) fn wanted(&self) -> bool {
        self.channel >= 0
    }
}

/// The init's part: opens the pty (`/dev/pts/ptmx` of the devpts it mounted), unlocks it,
/// sets its size, sends the master on the channel, and puts the other end on 0, 1 and 2
/// without making it the init's controlling terminal.
///
/// # Safety
/// Only in a stage's init, after it mounted its devpts and before it starts the command.
pub(super) unsafe fn open_terminal(t: &TerminalStage) -> Result<(), c_int> {
    // SAFETY: a static NUL-terminated path; O_NOCTTY, so the init (a session leader with no
    // terminal) does not take it.
    let master = unsafe {
        libc::open(
            c"/dev/pts/ptmx".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if master < 0 {
        return Err(errno());
    }
    // SAFETY: `master` is ours, open until the close below.
    let made = unsafe { hand_over(master, t) };
    // SAFETY: closes the init's own master; the server holds the copy it was sent.
    unsafe { libc::close(master) };
    made
}

/// The steps between the init's open and close of `master`.
///
/// # Safety
/// As [`open_terminal`], with `master` the pty's master, open.
unsafe fn hand_over(master: c_int, t: &TerminalStage) -> Result<(), c_int> {
    let unlock: c_int = 0;
    // SAFETY: TIOCSPTLCK reads one int on this stack.
    if unsafe { libc::ioctl(master, libc::TIOCSPTLCK, &unlock) } != 0 {
        return Err(errno());
    }
    let size = libc::winsize {
        ws_row: t.rows,
        ws_col: t.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize on this stack.
    if unsafe { libc::ioctl(master, libc::TIOCSWINSZ, &size) } != 0 {
        return Err(errno());
    }
    // SAFETY: the init's copy of the stage's channel, open until it closes every
    // descriptor after starting the command.
    let channel = unsafe { BorrowedFd::borrow_raw(t.channel) };
    // SAFETY: `master` is open until our caller closes it.
    let fd = unsafe { BorrowedFd::borrow_raw(master) };
    send_fd(channel, fd, b"T", rustix::net::SendFlags::empty())?;
    // The other end, opened through the master (never by a name a command could swap).
    // SAFETY: TIOCGPTPEER takes open flags as its integer argument and returns a descriptor.
    let other = unsafe {
        libc::ioctl(
            master,
            libc::TIOCGPTPEER,
            (libc::O_RDWR | libc::O_NOCTTY) as libc::c_ulong,
        )
    };
    if other < 0 {
        return Err(errno());
    }
    for target in 0..3 {
        // SAFETY: integer arguments only; the init's 0, 1 and 2 become the terminal, which
        // the command inherits at its clone.
        if unsafe { libc::dup2(other, target) } < 0 {
            return Err(errno());
        }
    }
    if other > 2 {
        // SAFETY: the init's extra copy, duplicated above.
        unsafe { libc::close(other) };
    }
    Ok(())
}

/// The command's part: a session of its own, led by itself, whose controlling terminal is
/// the pty on its standard input (and whose foreground group it then is).
///
/// # Safety
/// Only in the command child of a stage with a terminal, before it confines itself.
pub(super) unsafe fn take_terminal() -> Result<(), c_int> {
    // SAFETY: no arguments; the command was cloned by the init and leads no group.
    if unsafe { libc::setsid() } < 0 {
        return Err(errno());
    }
    // SAFETY: integer arguments only; 0 is the pty the init left there.
    if unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } != 0 {
        return Err(errno());
    }
    Ok(())
}
