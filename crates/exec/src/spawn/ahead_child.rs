//! The two processes of a namespace made ahead ([`super::ahead`]), each a list of raw
//! syscalls: the first child (enters the view, makes the stage's pid, mount and ipc
//! namespaces, starts their init) and the init (mounts the namespace's `/proc`, waits for its
//! call, puts the call's descriptors where the command reads them, then goes on as every
//! init does). They run in the server's memory, on the filler's suspended thread's
//! thread-local storage: no allocation, no lock.

use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};

use crate::confine::Confinement;
use crate::step::{Step, close_all_except, errno};

use super::child::{
    Prepared, await_init, exit_after, mount_own, record_failure, record_into, reset_signals,
    start_command,
};

/// What the filler's children tell the server, in the server's memory.
#[derive(Debug, Default)]
pub(super) struct Control {
    /// Set by the init once it waits for its call.
    pub(super) ready: AtomicBool,
    /// The init's pid (the server's child, by `CLONE_PARENT`), set by the first child.
    pub(super) init_pid: AtomicI32,
}

/// The most descriptors a call hands over: stdio, the gate, the pids and memory groups'
/// `tasks`, the stage's ruleset, and room.
pub(super) const MAX_DESCRIPTORS: usize = 8;

/// The call's message: the address of its [`Prepared`] (8 bytes), how many descriptors come
/// with it (4), and the number each must have (4 each).
pub(super) const MESSAGE_BYTES: usize = 12 + 4 * MAX_DESCRIPTORS;

/// Everything the filler's children read, laid out by the filler before its vfork and
/// alive on its frame until the first child has exited.
#[repr(C)]
pub(super) struct AheadPrepared {
    pub(super) confinement: *const Confinement,
    pub(super) init_stack: *mut c_void,
    pub(super) command_stack: *mut c_void,
    /// The init's status slot ([`super::InitMemory`]).
    pub(super) status: *const AtomicU64,
    /// Whether the init mounts a devpts of the command's own.
    pub(super) pts: bool,
    /// The init's end of the socketpair the call comes on.
    pub(super) socket: RawFd,
    /// The write end of the pipe on which the init gives the call its word.
    pub(super) word: RawFd,
    pub(super) control: *const Control,
    /// A failure before any call: `step << 16 | errno`, the first one.
    pub(super) failure: *const AtomicI32,
    /// Written by the first child: the write end of its own report pipe (the same number in
    /// the init's descriptor table), on which the init's word lets it exit.
    pub(super) report: AtomicI32,
}

fn record(a: &AheadPrepared, step: Step, errno: c_int) {
    // SAFETY: `a.failure` points at the filler's slot, alive until the first child exits;
    // the init writes it only before its word.
    record_into(unsafe { &*a.failure }, step, errno);
}

fn control(a: &AheadPrepared) -> &Control {
    // SAFETY: `a.control` points into the filler's `Arc<Control>`, held until the first
    // child has exited; the init reads it only before its word.
    unsafe { &*a.control }
}

/// The first child: runs on the filler's stack copy until the init's word (or its end).
pub(super) extern "C" fn first_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the filler's `AheadPrepared`, alive until this child exits.
    let a = unsafe { &*arg.cast::<AheadPrepared>() };
    // SAFETY: see `first_steps`; only ever called here, in the cloned child.
    let steps = unsafe { first_steps(a) };
    exit_after(steps, |step, errno| record(a, step, errno))
}

/// The first child's steps: the same as a stage's first child (docs/CONFINEMENT.md, steps 5
/// to 10), but for the call's descriptors, which come later, to its init; and it keeps
/// nothing of the server's open, since its init may wait long.
///
/// # Safety
/// Only in the `CLONE_VM` child the filler makes, with every signal blocked.
unsafe fn first_steps(a: &AheadPrepared) -> Result<(), (Step, c_int)> {
    reset_signals()?;
    // The filler thread is our parent and the init's: it outlives both.
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
        return Err((Step::Signals, errno()));
    }
    // SAFETY: integer arguments only; this child leads a group of its own.
    if unsafe { libc::setpgid(0, 0) } != 0 {
        return Err((Step::ProcessGroup, errno()));
    }
    // SAFETY: `a.confinement` is the filler's Confinement, alive for the slot.
    let confinement = unsafe { &*a.confinement };
    // SAFETY: this is the first child, before anything else of the view, as required.
    unsafe { confinement.enter_view() }?;
    // SAFETY: integer argument only; the next child is pid 1 of the new pid namespace.
    if unsafe { libc::unshare(crate::view::PER_COMMAND) } != 0 {
        return Err((Step::PidNamespace, errno()));
    }
    // Every descriptor of the server's (its pipes, its trail, its stdio) goes, but the
    // init's two and the namespace a root server's commands enter: a copy held while the
    // init waits would keep other calls' pipes open.
    close_all_except([a.socket, a.word, confinement.counters_fd()]);
    let mut report: [c_int; 2] = [-1, -1];
    // SAFETY: writes two descriptors into `report`, on this stack.
    if unsafe { libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err((Step::PidNamespace, errno()));
    }
    a.report.store(report[1], Ordering::Release);
    // CLONE_PARENT_SETTID: the kernel stores the init's pid before the init runs, so it is
    // there by the time the init says it is ready.
    let init_pid = control(a).init_pid.as_ptr();
    // SAFETY: CLONE_VM|CLONE_PARENT: the init runs `init_main` on its own stack, which the
    // server keeps until it has reaped the init, and reads `a`, alive until this child
    // exits, which it does only after the init's word (or its end). The kernel writes the
    // pid to `init_pid`, an `AtomicI32` of the filler's `Control`.
    let init = unsafe {
        libc::clone(
            init_main,
            a.init_stack,
            libc::CLONE_VM | libc::CLONE_PARENT | libc::CLONE_PARENT_SETTID | libc::SIGCHLD,
            std::ptr::from_ref(a).cast_mut().cast::<c_void>(),
            init_pid,
        )
    };
    let clone_errno = errno();
    close_all_except([report[0], -1]);
    await_init(init, clone_errno, &control(a).init_pid, report[0])
}

/// The call as the init received it: its [`Prepared`], and the init's two word pipes at
/// their new numbers.
struct Call {
    prepared: *const Prepared,
    report: c_int,
    word: c_int,
}

/// The init: pid 1 of the namespace made ahead.
extern "C" fn init_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the filler's `AheadPrepared`, alive until the init's word.
    let a = unsafe { &*arg.cast::<AheadPrepared>() };
    let (command_stack, status) = (a.command_stack, a.status);
    // SAFETY: see `wait_for_call`; only ever called here, in the init.
    match unsafe { wait_for_call(a) } {
        // The server closed its end: no call will come.
        // SAFETY: ends only the init (and its empty namespace).
        Ok(None) => unsafe { libc::_exit(0) },
        Err((step, errno)) => {
            record(a, step, errno);
            // SAFETY: as above.
            unsafe { libc::_exit(127) }
        }
        Ok(Some(call)) => {
            // SAFETY: the call's `Prepared`, which the server keeps until our word.
            let p = unsafe { &*call.prepared };
            // SAFETY: `p.confinement` points at the server's confinement, which outlives the
            // stage.
            let confinement = unsafe { &*p.confinement };
            // SAFETY: we are the init, in the mount namespace of its own, before the command
            // starts.
            if let Err(errno) = unsafe { confinement.mount_group(p.exec_group) } {
                record_failure(p, Step::View, errno);
                // SAFETY: ends only the init (and its namespace).
                unsafe { libc::_exit(127) }
            }
            // SAFETY: we are the init, after its mounts, with `p` alive until the word and
            // the slot's command stack and status slot.
            let started =
                unsafe { start_command(p, command_stack, status, [call.report, call.word]) };
            let Err((step, errno)) = started;
            record_failure(p, step, errno);
            // SAFETY: as above.
            unsafe { libc::_exit(127) }
        }
    }
}

/// The init's steps up to its call: die with the filler, a session of its own, the
/// namespace's `/proc` (and devpts), then wait for the call and put each descriptor it
/// sends at the number the server gave it.
///
/// # Safety
/// Only in the init made by [`first_steps`].
unsafe fn wait_for_call(a: &AheadPrepared) -> Result<Option<Call>, (Step, c_int)> {
    let fail = || (Step::PidNamespace, errno());
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
        return Err(fail());
    }
    // SAFETY: no arguments; we are not a group leader (the first child leads the group).
    if unsafe { libc::setsid() } < 0 {
        return Err(fail());
    }
    // SAFETY: we are the init, in its own mount namespace, as `mount_own` requires.
    unsafe { mount_own(a.pts) }.map_err(|e| (Step::PidNamespace, e))?;
    let report = a.report.load(Ordering::Acquire);
    control(a).ready.store(true, Ordering::Release);

    // SAFETY: the init's end of the socketpair, open in this process until it closes it.
    let socket = unsafe { BorrowedFd::borrow_raw(a.socket) };
    let mut data = [0u8; MESSAGE_BYTES];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_DESCRIPTORS))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        let mut iov = [std::io::IoSliceMut::new(&mut data)];
        match rustix::net::recvmsg(socket, &mut iov, &mut ancillary, RecvFlags::CMSG_CLOEXEC) {
            Err(rustix::io::Errno::INTR) => continue,
            Ok(got) => break got,
            Err(e) => return Err((Step::PidNamespace, e.raw_os_error())),
        }
    };
    if got.bytes == 0 {
        return Ok(None);
    }
    let mut received: [RawFd; MAX_DESCRIPTORS] = [-1; MAX_DESCRIPTORS];
    let mut n = 0;
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for fd in fds {
                match received.get_mut(n) {
                    Some(slot) => *slot = fd.into_raw_fd(),
                    None => drop(fd),
                }
                n += 1;
            }
        }
    }
    let word_at = |k: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&data[k..k + 4]);
        b
    };
    let mut address = [0u8; 8];
    address.copy_from_slice(&data[..8]);
    let address = u64::from_ne_bytes(address) as usize;
    let count = u32::from_ne_bytes(word_at(8)) as usize;
    if got.bytes != MESSAGE_BYTES
        || got.flags.contains(ReturnFlags::CTRUNC)
        || count != n
        || count > MAX_DESCRIPTORS
        || address == 0
    {
        return Err((Step::PidNamespace, libc::EINVAL));
    }
    let mut targets: [RawFd; MAX_DESCRIPTORS] = [-1; MAX_DESCRIPTORS];
    for (k, target) in targets.iter_mut().enumerate().take(count) {
        *target = i32::from_ne_bytes(word_at(12 + 4 * k));
    }
    let highest = targets[..count].iter().copied().max().unwrap_or(2).max(2);
    // First every descriptor of ours above every target, so that none is in the way.
    let lift = |fd: RawFd| -> Result<RawFd, (Step, c_int)> {
        // SAFETY: integer arguments only; duplicates a descriptor of this process.
        let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, highest + 1) };
        if moved < 0 {
            return Err((Step::Stdio, errno()));
        }
        // SAFETY: closes the descriptor just duplicated.
        unsafe { libc::close(fd) };
        Ok(moved)
    };
    let report = lift(report)?;
    let word = lift(a.word)?;
    // SAFETY: closes the socket, which the init needs no more.
    unsafe { libc::close(a.socket) };
    for fd in received.iter_mut().take(count) {
        *fd = lift(*fd)?;
    }
    // Then each at its number: 0 to 2 for stdio (kept across exec), the others as the
    // server has them, where the command's confinement reads them.
    for (fd, target) in received.iter().zip(targets.iter()).take(count) {
        // SAFETY: integer arguments only; `target` is free or a stray copy this init holds.
        if unsafe { libc::dup2(*fd, *target) } < 0 {
            return Err((Step::Stdio, errno()));
        }
        // SAFETY: closes the duplicate above the targets.
        unsafe { libc::close(*fd) };
    }
    Ok(Some(Call {
        prepared: address as *const Prepared,
        report,
        word,
    }))
}
