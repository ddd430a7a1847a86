//! The three processes of a stage, each a list of raw syscalls in the order
//! docs/CONFINEMENT.md writes down: the first child (steps 5-10), the init of a stage's pid
//! namespace (11-14) and the command (15-25). They run in the server's memory until exec: no
//! allocation, no lock.

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use super::terminal::{TerminalStage, open_terminal, take_terminal};
use crate::confine::{CallConfinement, Confinement};
use crate::step::{Step, close_all_except, errno};

/// The status slot's value once the init has stored the command's: this bit, and the raw
/// wait status in the low 32 bits.
pub(super) const STATUS_SET: u64 = 1 << 32;

/// errno a child reports when its gate closed without a ticket: the attempt record never
/// became durable, so the program must not run.
pub(crate) const GATE_CLOSED: c_int = libc::ECANCELED;

/// What the command child execs (NUL-terminated strings and arrays the parent keeps alive),
/// where, and the descriptors it gets as 0, 1 and 2.
#[derive(Debug)]
pub(super) struct Exec {
    pub(super) program: *const c_char,
    pub(super) argv: *const *const c_char,
    pub(super) envp: *const *const c_char,
    pub(super) cwd: *const c_char,
    pub(super) stdio: [RawFd; 3],
}

/// Everything the child reads, laid out before the clone. The pointers point into `Strings`
/// and into the caller's [`Confinement`], both of which outlive the child's use of them
/// (the parent thread sleeps until the child has exec'd or exited).
#[repr(C)]
pub(super) struct Prepared {
    pub(super) exec: Exec,
    pub(super) pgid: libc::pid_t,
    pub(super) new_session: bool,
    pub(super) gate: RawFd,
    pub(super) gate_writer: RawFd,
    /// What the command child's `getppid()` must be at the gate: the server, or 1 (its
    /// init) in a pid namespace of its own.
    pub(super) parent: libc::pid_t,
    pub(super) confinement: *const Confinement,
    pub(super) call: *const CallConfinement,
    /// Which of the call's rulesets the stage takes.
    pub(super) exec_group: usize,
    /// The exec log's channel, where the command child sends its filter's listener; -1
    /// without the exec log.
    pub(super) exec_log: RawFd,
    pub(super) keep_death_signal: bool,
    /// Egress's namespace tier: the channel on which the first child sends the listener of
    /// its own network namespace; -1 otherwise.
    pub(super) egress_channel: RawFd,
    /// Written by a child only, before it exits: `step << 16 | errno`, or 0. The first
    /// failure wins.
    pub(super) failure: AtomicI32,
    /// With a pid namespace: the init's and the command's stacks, the status slot, and what
    /// the first child tells the others.
    pub(super) pid_ns: Option<PidNamespaceStage>,
}

/// The parts of [`Prepared`] only a stage with a pid namespace of its own uses.
#[repr(C)]
pub(super) struct PidNamespaceStage {
    pub(super) init_stack: *mut c_void,
    pub(super) command_stack: *mut c_void,
    pub(super) status: *const AtomicU64,
    /// Whether the init mounts a devpts of the command's own on `/dev/pts`.
    pub(super) pts: bool,
    /// Written by the first child: the init's pid.
    pub(super) init_pid: AtomicI32,
    /// Written by the first child: the write end of the pipe on which the init says that
    /// the command has exec'd or failed (the same number in the init's descriptor table).
    pub(super) report: AtomicI32,
    /// A process session's pseudo-terminal, which the init makes ([`super::terminal`]).
    pub(super) terminal: TerminalStage,
}

/// A failure as the failure slot holds it: `step << 16 | errno`.
pub(super) fn failure_code(step: Step, errno: c_int) -> i32 {
    ((step as i32) << 16) | (errno & 0xffff)
}

/// Records the first failure of any child of the stage.
pub(super) fn record_failure(p: &Prepared, step: Step, errno: c_int) {
    record_into(&p.failure, step, errno);
}

/// Records `step` and `errno` in the failure slot `slot`, unless it holds one already.
pub(super) fn record_into(slot: &AtomicI32, step: Step, errno: c_int) {
    let _ = slot.compare_exchange(
        0,
        failure_code(step, errno),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// The first child: runs on its own stack in the server's memory until exec, or until the
/// init it started has said that the command has exec'd. Raw syscalls only.
pub(super) extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Prepared` the parent passed to clone; it stays alive and unchanged
    // until this child has exec'd or exited.
    let p = unsafe { &*arg.cast::<Prepared>() };
    // SAFETY: see `run_child`; it is only ever called here, in the cloned child.
    let steps = unsafe { run_child(p) };
    exit_after(steps, |step, errno| record_failure(p, step, errno))
}

/// Ends a cloned child: 0 when its steps all succeeded; else 127, once `record` has kept
/// the step that failed and its errno for the parent.
pub(super) fn exit_after(steps: Result<(), (Step, c_int)>, record: impl FnOnce(Step, c_int)) -> ! {
    let code = match steps {
        Ok(()) => 0,
        Err((step, errno)) => {
            record(step, errno);
            127
        }
    };
    // SAFETY: _exit ends only this child; no atexit handler or destructor of the shared
    // memory runs.
    unsafe { libc::_exit(code) }
}

/// The kernel's signal set: one bit per signal, 64 of them on Linux.
pub(super) type KernelSigset = u64;

pub(super) const ALL_SIGNALS: KernelSigset = !0;

/// Replaces the calling thread's signal mask, returning the previous one. The raw syscall,
/// because glibc's `pthread_sigmask` silently keeps its two internal signals unblocked.
pub(super) fn set_signal_mask(mask: KernelSigset) -> Result<KernelSigset, c_int> {
    let mut old: KernelSigset = 0;
    // SAFETY: rt_sigprocmask reads `mask` and writes `old`, both 8 bytes as the size says;
    // the kernel ignores SIGKILL and SIGSTOP in a blocked set.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            std::ptr::from_ref(&mask),
            std::ptr::from_mut(&mut old),
            std::mem::size_of::<KernelSigset>(),
        )
    };
    if rc == 0 { Ok(old) } else { Err(errno()) }
}

/// Closes this child's copy of the gate's write end, so that the gate reads end-of-file
/// should the server drop its own before writing a ticket; but only if `writer` still names
/// that write end. The server drops its writer once the tickets are written, while later
/// stages of the call may still be starting, and the number may by then name another
/// descriptor (a stage's egress channel, a pipe between stages) that this child needs.
/// A pipe's two ends share one inode, and the writer alone is open write-only.
pub(super) fn close_gate_writer(gate: RawFd, writer: RawFd) {
    if writer < 0 {
        return;
    }
    let stat = |fd: RawFd| {
        // SAFETY: stat is plain data, for which all zeroes is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes into `st`, on this stack; a closed number is EBADF.
        (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
    };
    let stated = stat(gate).zip(stat(writer));
    // SAFETY: integer arguments only; reads the descriptor's status flags.
    let flags = unsafe { libc::fcntl(writer, libc::F_GETFL) };
    let same_pipe = stated.is_some_and(|(of_gate, of_writer)| {
        (of_gate.st_mode & libc::S_IFMT) == libc::S_IFIFO
            && of_gate.st_dev == of_writer.st_dev
            && of_gate.st_ino == of_writer.st_ino
    });
    if same_pipe && flags >= 0 && flags & libc::O_ACCMODE == libc::O_WRONLY {
        // SAFETY: closes this child's own copy of the gate's write end, checked just above.
        unsafe { libc::close(writer) };
    }
}

/// Caught signals back to their defaults (exec would do it, but a handler must never run on
/// a child's stack first); SIGPIPE back to default, as std does for children.
pub(super) fn reset_signals() -> Result<(), (Step, c_int)> {
    for sig in 1..=libc::SIGRTMAX() {
        // SAFETY: sigaction is plain data, for which all zeroes is a valid value.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the disposition of `sig` into `current`, on this stack.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut current) } != 0 {
            continue; // signals reserved by libc
        }
        let caught = current.sa_sigaction != libc::SIG_DFL && current.sa_sigaction != libc::SIG_IGN;
        if caught || sig == libc::SIGPIPE {
            // SAFETY: as above, all zeroes is a valid sigaction.
            let mut default: libc::sigaction = unsafe { std::mem::zeroed() };
            default.sa_sigaction = libc::SIG_DFL;
            // SAFETY: sets the default disposition from `default`, on this stack.
            if unsafe { libc::sigaction(sig, &default, std::ptr::null_mut()) } != 0 {
                return Err((Step::Signals, errno()));
            }
        }
    }
    Ok(())
}

/// The first child's steps, in order. Returns only on failure, or (with a pid namespace)
/// once the command has exec'd.
///
/// # Safety
/// Must run in a `CLONE_VM` child made by [`super::spawn`], with every signal blocked.
pub(super) unsafe fn run_child(p: &Prepared) -> Result<(), (Step, c_int)> {
    let fail = |step: Step| (step, errno());
    // Each call below is a plain syscall wrapper on values on this stack or on pointers and
    // descriptors that `spawn` prepared and keeps alive; none allocates or takes a lock.

    reset_signals()?;
    if p.new_session {
        // SAFETY: no arguments; this fresh child leads no group yet, so setsid succeeds.
        if unsafe { libc::setsid() } < 0 {
            return Err(fail(Step::ProcessGroup));
        }
    // SAFETY: integer arguments only; moves this child into its stage's process group.
    } else if unsafe { libc::setpgid(0, p.pgid) } != 0 {
        return Err(fail(Step::ProcessGroup));
    }
    for (target, &fd) in p.exec.stdio.iter().enumerate() {
        // SAFETY: descriptors the parent keeps open for the clone; 0..=2 belong to nobody
        // else in this child.
        if unsafe { libc::dup2(fd, target as c_int) } < 0 {
            return Err(fail(Step::Stdio));
        }
    }
    close_gate_writer(p.gate, p.gate_writer);
    // SAFETY: `p.confinement` points at the caller's Confinement, alive for the clone.
    let confinement = unsafe { &*p.confinement };
    // SAFETY: this is the spawn child, before its chdir, as `enter_view` requires.
    unsafe { confinement.enter_view() }?;
    if p.egress_channel >= 0 {
        // SAFETY: we are the spawn child, in the view, as `own_network` requires.
        unsafe { crate::egress::own_network(p.egress_channel) }.map_err(|e| (Step::Network, e))?;
    }
    match &p.pid_ns {
        // SAFETY: we are the first child, in the view, as `start_init` requires.
        Some(stage) => unsafe { start_init(p, stage) },
        // SAFETY: we are the child that execs, as `run_command` requires.
        None => match unsafe { run_command(p) } {
            Err(failure) => Err(failure),
        },
    }
}

/// Makes the stage's pid and mount namespaces, starts their init, and waits for its word
/// that the command has exec'd (or failed, which the failure slot then says).
///
/// # Safety
/// Only in the first child, after it has entered the view.
pub(super) unsafe fn start_init(
    p: &Prepared,
    stage: &PidNamespaceStage,
) -> Result<(), (Step, c_int)> {
    let fail = || (Step::PidNamespace, errno());
    // SAFETY: integer argument only; the next child is pid 1 of the new pid namespace.
    if unsafe { libc::unshare(crate::view::PER_COMMAND) } != 0 {
        return Err(fail());
    }
    let mut report: [c_int; 2] = [-1, -1];
    // SAFETY: writes two descriptors into `report`, on this stack.
    if unsafe { libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(fail());
    }
    stage.report.store(report[1], Ordering::Release);
    // SAFETY: CLONE_VM|CLONE_PARENT: the init runs `init_main` on its own stack, which the
    // server keeps until it has reaped the init, and reads `p`, alive until this child
    // exits, which it does only after the init's word (see `run_init`).
    let init = unsafe {
        libc::clone(
            init_main,
            stage.init_stack,
            libc::CLONE_VM | libc::CLONE_PARENT | libc::SIGCHLD,
            std::ptr::from_ref(p).cast_mut().cast::<c_void>(),
        )
    };
    let clone_errno = errno();
    // SAFETY: closes this child's copy of the write end; the init holds its own.
    unsafe { libc::close(report[1]) };
    await_init(init, clone_errno, &stage.init_pid, report[0])
}

/// After the init's clone (`init`, or -1 with `clone_errno`): keeps its pid in `init_pid`
/// and waits for its word on `report` (one byte, or end-of-file when it ended first, its
/// failure slot saying why).
pub(super) fn await_init(
    init: c_int,
    clone_errno: c_int,
    init_pid: &AtomicI32,
    report: c_int,
) -> Result<(), (Step, c_int)> {
    if init < 0 {
        return Err((Step::PidNamespace, clone_errno));
    }
    init_pid.store(init, Ordering::Release);
    let mut word = 0u8;
    // SAFETY: reads at most one byte into `word`, on this stack.
    unsafe {
        libc::syscall(
            libc::SYS_read,
            report,
            std::ptr::from_mut(&mut word),
            1usize,
        )
    };
    Ok(())
}

/// The init: pid 1 of the stage's pid namespace.
pub(super) extern "C" fn init_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Prepared` of `spawn`, alive until the init's word (and the init
    // does not touch it after that).
    let p = unsafe { &*arg.cast::<Prepared>() };
    // SAFETY: see `run_init`; it is only ever called here, in the init.
    let Err((step, errno)) = unsafe { run_init(p) };
    record_failure(p, step, errno);
    // SAFETY: ends only the init (and so, by the kernel, its namespace).
    unsafe { libc::_exit(127) }
}

/// The init's steps: die with the server, a session of its own (so that the command has no
/// controlling terminal: `/dev/tty` in the view must not reach the server's), mount the
/// namespace's `/proc` (and a devpts of its own), vfork the command, close every
/// descriptor, give the word, then reap until the command exits.
///
/// # Safety
/// Only in the init made by [`start_init`].
pub(super) unsafe fn run_init(p: &Prepared) -> Result<std::convert::Infallible, (Step, c_int)> {
    let fail = || (Step::PidNamespace, errno());
    let Some(stage) = &p.pid_ns else {
        return Err((Step::PidNamespace, libc::EINVAL));
    };
    // The server's thread that started the stage is our parent (CLONE_PARENT) and outlives
    // the stage: it reaps us. If the server dies, so do we, and with us the namespace.
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
        return Err(fail());
    }
    // SAFETY: no arguments; we are not a group leader (the first child leads the group).
    if unsafe { libc::setsid() } < 0 {
        return Err(fail());
    }
    // SAFETY: we are the init, in its own mount namespace, as `mount_own` requires.
    unsafe { mount_own(stage.pts) }.map_err(|e| (Step::PidNamespace, e))?;
    // SAFETY: `p.confinement` points at the server's confinement, which outlives the stage.
    let confinement = unsafe { &*p.confinement };
    // SAFETY: we are the init, in its own mount namespace, before the command starts.
    unsafe { confinement.mount_group(p.exec_group) }.map_err(|e| (Step::View, e))?;
    if stage.terminal.wanted() {
        // SAFETY: we are the init, after mounting its devpts, before the command starts.
        unsafe { open_terminal(&stage.terminal) }.map_err(|e| (Step::Terminal, e))?;
    }
    let report = stage.report.load(Ordering::Acquire);
    // SAFETY: we are the init, after its mounts, with `p`'s stacks and slot alive.
    unsafe { start_command(p, stage.command_stack, stage.status, [report, -1]) }
}

/// The namespace's `/proc` (read-only), and a devpts of the command's own where `pts`.
///
/// # Safety
/// Only in a stage's init, in the mount namespace of its own.
pub(super) unsafe fn mount_own(pts: bool) -> Result<(), c_int> {
    // SAFETY: static NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            crate::view::PROC_FLAGS,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(errno());
    }
    if pts {
        // SAFETY: static NUL-terminated strings and options.
        let rc = unsafe {
            libc::mount(
                c"devpts".as_ptr(),
                c"/dev/pts".as_ptr(),
                c"devpts".as_ptr(),
                crate::view::PTS_FLAGS,
                crate::view::PTS_OPTIONS.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// The init's steps once it knows the call: hold the call's temporary directory, let the
/// stage's ruleset read the fresh `/proc` (and `/dev/pts`), vfork the command on
/// `command_stack`, close every descriptor but the `words` (-1 for none), write the word on
/// each, then reap until the command exits and store its status in `status`.
///
/// # Safety
/// Only in a stage's init, after [`mount_own`], with `p` and what it points at alive until
/// the word, and `command_stack` and `status` as [`PidNamespaceStage`] describes them.
pub(super) unsafe fn start_command(
    p: &Prepared,
    command_stack: *mut c_void,
    status: *const AtomicU64,
    words: [c_int; 2],
) -> Result<std::convert::Infallible, (Step, c_int)> {
    let fail = || (Step::PidNamespace, errno());
    // SAFETY: `p.confinement` is the caller's Confinement, alive until our word.
    let confinement = unsafe { &*p.confinement };
    // SAFETY: `p.call` is the caller's CallConfinement, alive until our word.
    let call = unsafe { &*p.call };
    // SAFETY: we are the init, in its own mount namespace, as `hold_tmp_root` requires.
    unsafe { confinement.hold_tmp_root(call) }.map_err(|e| (Step::PidNamespace, e))?;
    // SAFETY: we are the init, after its mounts, as `add_own_mounts` requires.
    unsafe { confinement.add_own_mounts(call, p.exec_group) }
        .map_err(|e| (Step::PidNamespace, e))?;
    // SAFETY: CLONE_VM|CLONE_VFORK, as in `spawn`: the command runs `command_main` on its
    // own stack and reads `p`; we sleep until it has exec'd or exited.
    let command = unsafe {
        libc::clone(
            command_main,
            command_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_ref(p).cast_mut().cast::<c_void>(),
        )
    };
    if command < 0 {
        return Err(fail());
    }
    // Nothing of the server's stays open here: its pipes must see end-of-file when the
    // command's tree is done, whatever this init does.
    close_all_except(words);
    // The word: from here on `p` may be gone, and the server's threads run beside us.
    for word in words.into_iter().filter(|w| *w >= 0) {
        // SAFETY: writes one byte from a static to a word pipe.
        unsafe { libc::syscall(libc::SYS_write, word, b"1".as_ptr(), 1usize) };
    }
    // SAFETY: `status` is the server's slot, kept until it has reaped us.
    unsafe { reap_until(command, status) }
}

/// The init's life after its word: reap every child until the command itself exits, store
/// its wait status, and exit (the kernel then kills the rest of the namespace). rustix's raw
/// syscalls only: libc's would write the `errno` of the server thread whose memory we share.
///
/// Never inlined, and given plain values only: nothing of the caller's `Prepared`, which may
/// be gone by now, stays reachable from here.
///
/// # Safety
/// Only in the init, with `status` the slot of its [`super::InitMemory`].
#[inline(never)]
pub(super) unsafe fn reap_until(command: libc::pid_t, status: *const AtomicU64) -> ! {
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some((pid, st))) if pid.as_raw_nonzero().get() == command => {
                // SAFETY: the slot outlives us (see `InitMemory`).
                let slot = unsafe { &*status };
                slot.store(
                    STATUS_SET | u64::from(st.as_raw() as u32),
                    Ordering::Release,
                );
                break;
            }
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    // SAFETY: ends only the init; the exit_group syscall cannot fail.
    unsafe { libc::_exit(0) }
}

/// The command: confines itself and execs, in its init's pid namespace.
pub(super) extern "C" fn command_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Prepared` of `spawn`, alive until this child has exec'd or exited.
    let p = unsafe { &*arg.cast::<Prepared>() };
    let terminal = p.pid_ns.as_ref().is_some_and(|s| s.terminal.wanted());
    let taken = if terminal {
        // SAFETY: we are the command child of a stage with a terminal, before it confines
        // itself.
        unsafe { take_terminal() }
    } else {
        Ok(())
    };
    let steps = match taken {
        Err(e) => Err((Step::Terminal, e)),
        // SAFETY: see `run_command`; it is only ever called here and in `run_child`.
        Ok(()) => unsafe { run_command(p) },
    };
    let Err((step, errno)) = steps;
    record_failure(p, step, errno);
    // SAFETY: ends only this child.
    unsafe { libc::_exit(127) }
}

/// The child that execs: docs/CONFINEMENT.md's steps 15 to 25, one call each, in that
/// order. Returns only on failure.
///
/// # Safety
/// Only in the `CLONE_VM` child that execs (the first child, or the command under an init),
/// after it has entered the view, with every signal blocked.
pub(super) unsafe fn run_command(p: &Prepared) -> Result<std::convert::Infallible, (Step, c_int)> {
    // Each step's safety: we are that child, before exec; `p` and what it points at are
    // kept alive by the parent until this child has exec'd or exited.
    // 15. The working directory.
    // SAFETY: as above.
    unsafe { change_directory(p) }?;
    // 16. Every inherited descriptor >= 3 closes at exec.
    close_inherited()?;
    // 17-22. pids cgroup, rlimits, capabilities, no_new_privs, Landlock, seccomp.
    // SAFETY: as above; `apply_in_child` changes this process's limits for good.
    unsafe { confine(p) }?;
    // 23. The gate: exec only with the server's ticket.
    // SAFETY: as above.
    unsafe { pass_gate(p) }?;
    // 24. The signal mask execve would pass on, emptied.
    set_signal_mask(0).map_err(|errno| (Step::Signals, errno))?;
    // 25.
    // SAFETY: as above.
    Err(unsafe { exec(p) })
}

/// Step 15: `chdir(cwd)`.
///
/// # Safety
/// In the child that execs, with `p.exec.cwd` alive.
unsafe fn change_directory(p: &Prepared) -> Result<(), (Step, c_int)> {
    // SAFETY: `p.exec.cwd` is a NUL-terminated string the parent keeps alive.
    if unsafe { libc::chdir(p.exec.cwd) } != 0 {
        return Err((Step::Chdir, errno()));
    }
    Ok(())
}

/// Step 16: every descriptor >= 3 marked close-on-exec (the gate and the confinement's
/// descriptors stay usable until then).
fn close_inherited() -> Result<(), (Step, c_int)> {
    // SAFETY: integer arguments only; it marks descriptors close-on-exec.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc != 0 {
        return Err((Step::Descriptors, errno()));
    }
    Ok(())
}

/// Steps 17 to 22 ([`crate::confine::Confinement::apply_in_child`]).
///
/// # Safety
/// In the child that execs, before exec, with `p.confinement` and `p.call` alive.
unsafe fn confine(p: &Prepared) -> Result<(), (Step, c_int)> {
    // SAFETY: `p.confinement` points at the caller's Confinement, alive for the clone.
    let confinement = unsafe { &*p.confinement };
    // SAFETY: `p.call` points at the caller's CallConfinement, alive for the clone.
    let call = unsafe { &*p.call };
    // SAFETY: this is the spawn child, before exec, as `apply_in_child` requires.
    unsafe { confinement.apply_in_child(call, p.exec_group, p.exec_log) }
}

/// Step 23: die with the server while waiting; go on only if the parent is still the one
/// that cloned us and it sends a ticket of 1 (the attempt record is durable); then drop the
/// death signal unless this is a session stage.
///
/// # Safety
/// In the child that execs, with `p.gate` open.
unsafe fn pass_gate(p: &Prepared) -> Result<(), (Step, c_int)> {
    let kill = libc::SIGKILL as libc::c_ulong;
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, kill) } != 0 {
        return Err((Step::Gate, errno()));
    }
    // SAFETY: no arguments.
    if unsafe { libc::getppid() } != p.parent {
        return Err((Step::Gate, GATE_CLOSED));
    }
    let mut ticket = 0u8;
    // The raw syscall: glibc's read() is a cancellation point and would touch the parent
    // thread's control block, which this child shares.
    // SAFETY: reads at most one byte into `ticket`, on this stack, from the gate descriptor.
    let n = unsafe {
        libc::syscall(
            libc::SYS_read,
            p.gate,
            std::ptr::from_mut(&mut ticket),
            1usize,
        )
    };
    if n != 1 || ticket != 1 {
        return Err((Step::Gate, GATE_CLOSED));
    }
    if !p.keep_death_signal
        // SAFETY: prctl with integer arguments only.
        && unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0 as libc::c_ulong) } != 0
    {
        return Err((Step::Gate, errno()));
    }
    Ok(())
}

/// Step 25: `execve`; returns only on failure, with its errno.
///
/// # Safety
/// In the child that execs, last, with `p`'s strings alive.
unsafe fn exec(p: &Prepared) -> (Step, c_int) {
    // SAFETY: NUL-terminated program, and NULL-terminated argv and envp arrays of
    // NUL-terminated strings, all prepared and kept alive by the parent.
    unsafe { libc::execve(p.exec.program, p.exec.argv, p.exec.envp) };
    (Step::Exec, errno())
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, OwnedFd};

    use rustix::pipe::{PipeFlags, pipe_with};

    use super::{close_gate_writer, failure_code};
    use crate::step::Step;

    #[test]
    fn a_failure_code_holds_the_step_and_the_errno() {
        let code = failure_code(Step::Sandbox, libc::EPERM);
        assert_eq!(Step::from_raw(code >> 16), Some(Step::Sandbox));
        assert_eq!(code & 0xffff, libc::EPERM);
        // An errno never spills into the step.
        let code = failure_code(Step::Gate, 0x1_0005);
        assert_eq!(Step::from_raw(code >> 16), Some(Step::Gate));
    }

    fn is_open(fd: i32) -> bool {
        // SAFETY: integer arguments only; reads the descriptor's flags.
        unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
    }

    /// The number the writer had, now naming `other` (dup2 replaces it in one step, so no
    /// other thread of the test binary can take the number in between).
    fn reuse(writer: OwnedFd, other: &OwnedFd) -> i32 {
        let number = writer.as_raw_fd();
        std::mem::forget(writer);
        // SAFETY: integer arguments only; `number` was the writer's, which dup2 closes.
        assert!(unsafe { libc::dup2(other.as_raw_fd(), number) } == number);
        number
    }

    #[test]
    fn the_gates_writer_is_closed_and_a_reused_number_is_not() {
        let (gate, writer) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        let number = writer.as_raw_fd();
        std::mem::forget(writer);
        close_gate_writer(gate.as_raw_fd(), number);
        assert!(!is_open(number), "the gate's own writer is closed");

        // Control for the check: each stands where the dropped writer stood.
        let (socket, _peer) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::DGRAM,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let (other_r, other_w) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        for other in [&socket, &other_w, &other_r] {
            let (gate, writer) = pipe_with(PipeFlags::CLOEXEC).unwrap();
            let number = reuse(writer, other);
            close_gate_writer(gate.as_raw_fd(), number);
            assert!(
                is_open(number),
                "a number reused by another descriptor stays open"
            );
            // SAFETY: the duplicate this test made at `number`.
            unsafe { libc::close(number) };
        }
        // The gate's read end under the writer's number is not the writer either.
        let (gate, writer) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        let number = reuse(writer, &gate);
        close_gate_writer(gate.as_raw_fd(), number);
        assert!(is_open(number));
        // SAFETY: as above.
        unsafe { libc::close(number) };
        drop(other_r);
    }
}
