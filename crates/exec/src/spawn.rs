//! Starting one stage: a vfork-style `clone` whose child only makes syscalls.
//!
//! Owns the step from "a prepared stage" to "a confined program is running, with a pidfd".
//! `fork` would copy the server's page tables and `exec` would tear the copy down again, which
//! costs more than the command `echo hi` itself; so, like glibc's `posix_spawn`, we clone with
//! `CLONE_VM | CLONE_VFORK`: the child borrows the server's memory on a stack of its own, and
//! the calling thread sleeps until the child has exec'd or exited. Unlike `posix_spawn` the
//! child also confines itself (pids cgroup, rlimits, `no_new_privs`, Landlock, seccomp) and
//! then waits at the exec gate until the attempt record is durable.
//!
//! Because the child shares the server's memory while other server threads keep running, it
//! must not allocate, take a lock or write anything of the parent's except the slots it is
//! given: every string, pointer array and descriptor is prepared here, in the parent
//! ([`Prepared`]), and the child ([`child_main`]) only reads them and makes syscalls, through
//! libc wrappers that take no lock (raw ones for read, write and the signal mask). All
//! signals are blocked across the clone and the child resets every caught signal to its
//! default before unblocking, so no server signal handler can run on the child's stack.
//!
//! In a private view with pid namespaces, one stage is three processes, all on stacks of
//! their own in the server's memory:
//! 1. the **first child** enters the view, unshares a pid and a mount namespace and starts
//! 2. the namespace's **init** (pid 1; `CLONE_PARENT`, so the server is its parent and the
//!    stage's pid is the init's), which mounts the namespace's `/proc` and vforks
//! 3. the **command**, which confines itself, waits at the gate and execs.
//!
//! The first child waits for the init's word that the command has exec'd (or failed), then
//! exits, and the server's thread resumes as with one process. The init then closes every
//! descriptor, reaps until the command exits, stores the command's wait status in a slot of
//! the server's ([`InitMemory`]) and exits; the kernel kills whatever else is left in the
//! namespace. From its word on, the init runs beside the server's threads, so it makes only
//! raw syscalls that never write the shared `errno` (rustix's, not libc's) and touches
//! nothing but its own stack and that slot, both of which the server keeps until it has
//! reaped the init.

use std::ffi::{CString, OsStr, c_char, c_int, c_void};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use rustix::process::Pid;

use crate::confine::{CallConfinement, Confinement};
use crate::step::{Step, errno};

/// errno a child reports when its gate closed without a ticket: the attempt record never
/// became durable, so the program must not run.
pub(crate) const GATE_CLOSED: c_int = libc::ECANCELED;

/// The child's own stack. It needs only a few hundred bytes; the rest is headroom.
const STACK_BYTES: usize = 64 * 1024;

/// Why a stage did not start.
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// The child failed at `step` with `errno`; it has exited and been reaped.
    Child { step: Step, errno: c_int },
    /// The parent could not prepare or clone.
    Parent(std::io::Error),
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::Child { step, errno } => write!(
                f,
                "{}: {}",
                step.as_str(),
                std::io::Error::from_raw_os_error(*errno)
            ),
            SpawnError::Parent(e) => write!(f, "{e}"),
        }
    }
}

impl From<std::io::Error> for SpawnError {
    fn from(e: std::io::Error) -> Self {
        SpawnError::Parent(e)
    }
}

/// One stage to start: where it reads, where it writes, which group it joins.
pub(crate) struct StageSpawn<'a> {
    pub program: &'a Path,
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: &'a Path,
    /// Descriptors that become the child's 0, 1 and 2. All must be >= 3.
    pub stdio: [BorrowedFd<'a>; 3],
    /// The group to join; 0 makes the child the leader of a new one.
    pub pgid: i32,
    /// Lead a session of its own instead (a process session in the host view), so that what
    /// it leaves behind can be told apart from other orphans (see `reap`).
    pub new_session: bool,
    pub confinement: &'a Confinement,
    /// What the call adds: its Landlock ruleset.
    pub call: &'a CallConfinement,
    /// The exec gate's read end.
    pub gate: BorrowedFd<'a>,
    /// A session's stage: the program keeps the death signal set at the gate, so that it
    /// dies with the server's thread that runs the session, however the server ends.
    pub keep_death_signal: bool,
    /// The gate's write end, as the number the child's copy of it has: the child closes it,
    /// so that a gate the server closes without a ticket (or a server that dies) reads as
    /// closed instead of leaving the child waiting forever on its own copy.
    pub gate_writer: RawFd,
}

/// A started stage: its pid (the init's, in a pid namespace of its own), a pidfd, its
/// process group, and the memory its init still uses.
pub(crate) struct Spawned {
    pub pid: Pid,
    pub pidfd: OwnedFd,
    pub pgid: i32,
    pub init: Option<InitMemory>,
    /// Egress's namespace tier: the proxy's listener in the stage's own network namespace.
    pub listener: Option<std::net::TcpListener>,
}

/// What a stage's init uses until it exits: its stack, and the slot where it leaves the
/// command's wait status. Freed only once the init has been reaped ([`InitMemory::free`]);
/// dropped any other way, it is leaked, never unmapped under a process that may still run.
pub(crate) struct InitMemory {
    stack: Option<ChildStack>,
    status: Option<Box<AtomicU64>>,
}

/// The status slot's value once the init has stored the command's: this bit, and the raw
/// wait status in the low 32 bits.
const STATUS_SET: u64 = 1 << 32;

impl InitMemory {
    /// The command's raw wait status, if its init lived to store it. Call after reaping.
    pub(crate) fn command_status(&self) -> Option<i32> {
        let raw = self.status.as_ref()?.load(Ordering::Acquire);
        (raw & STATUS_SET != 0).then_some(raw as u32 as i32)
    }

    /// Frees the memory. Only once the init has been reaped.
    pub(crate) fn free(mut self) {
        drop(self.stack.take());
        drop(self.status.take());
    }
}

impl Drop for InitMemory {
    fn drop(&mut self) {
        std::mem::forget(self.stack.take());
        std::mem::forget(self.status.take());
    }
}

/// Everything the child reads, laid out before the clone. The pointers point into `Strings`
/// and into the caller's [`Confinement`], both of which outlive the child's use of them
/// (the parent thread sleeps until the child has exec'd or exited).
#[repr(C)]
struct Prepared {
    program: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    stdio: [RawFd; 3],
    pgid: libc::pid_t,
    new_session: bool,
    gate: RawFd,
    gate_writer: RawFd,
    /// What the command child's `getppid()` must be at the gate: the server, or 1 (its
    /// init) in a pid namespace of its own.
    parent: libc::pid_t,
    confinement: *const Confinement,
    call: *const CallConfinement,
    keep_death_signal: bool,
    /// Egress's namespace tier: the channel on which the first child sends the listener of
    /// its own network namespace; -1 otherwise.
    egress_channel: RawFd,
    /// Written by a child only, before it exits: `step << 16 | errno`, or 0. The first
    /// failure wins.
    failure: AtomicI32,
    /// With a pid namespace: the init's and the command's stacks, the status slot, and what
    /// the first child tells the others.
    pid_ns: Option<PidNamespaceStage>,
}

/// The parts of [`Prepared`] only a stage with a pid namespace of its own uses.
#[repr(C)]
struct PidNamespaceStage {
    init_stack: *mut c_void,
    command_stack: *mut c_void,
    status: *const AtomicU64,
    /// Whether the init mounts a devpts of the command's own on `/dev/pts`.
    pts: bool,
    /// Written by the first child: the init's pid.
    init_pid: AtomicI32,
    /// Written by the first child: the write end of the pipe on which the init says that
    /// the command has exec'd or failed (the same number in the init's descriptor table).
    report: AtomicI32,
}

struct Strings {
    _owned: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    program: CString,
    cwd: CString,
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "an argument or variable contains a NUL byte",
        )
    })
}

fn prepare_strings(s: &StageSpawn<'_>) -> std::io::Result<Strings> {
    let mut owned = Vec::with_capacity(s.argv.len() + s.env.len());
    for a in s.argv {
        owned.push(cstring(a.as_bytes())?);
    }
    for (k, v) in s.env {
        owned.push(cstring(format!("{k}={v}").as_bytes())?);
    }
    // The CStrings' heap buffers do not move when `owned` is moved into `Strings`.
    let mut argv: Vec<*const c_char> = owned[..s.argv.len()].iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const c_char> = owned[s.argv.len()..].iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    Ok(Strings {
        _owned: owned,
        argv,
        envp,
        program: cstring(s.program.as_os_str().as_bytes())?,
        cwd: cstring(OsStr::as_bytes(s.cwd.as_os_str()))?,
    })
}

/// An anonymous mapping used as the child's stack, with a guard page at its low end.
struct ChildStack {
    base: *mut c_void,
    len: usize,
}

impl ChildStack {
    fn new() -> std::io::Result<ChildStack> {
        // SAFETY: sysconf only reads a constant of this system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| std::io::Error::other("no page size"))?;
        let len = STACK_BYTES + page;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stack = ChildStack { base, len };
        // SAFETY: the first page of the mapping we own; the stack grows down towards it.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stack)
    }

    fn top(&self) -> *mut c_void {
        // The mapping is page aligned, so its end is 16-byte aligned as the ABI wants.
        self.base.wrapping_byte_add(self.len)
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; the child that used it has
        // exec'd or exited by the time the parent can drop it.
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

/// Starts one stage. Returns once the program is running (or the child failed and was reaped).
pub(crate) fn spawn(s: &StageSpawn<'_>) -> Result<Spawned, SpawnError> {
    if s.stdio.iter().any(|fd| fd.as_raw_fd() < 3) || s.gate.as_raw_fd() < 3 {
        return Err(SpawnError::Parent(std::io::Error::other(
            "a descriptor to hand the child is below 3",
        )));
    }
    let strings = prepare_strings(s)?;
    let stack = ChildStack::new()?;
    let channel = if s.confinement.own_network() {
        Some(crate::egress::Channel::new()?)
    } else {
        None
    };
    let server = rustix::process::getpid().as_raw_nonzero().get();
    let mut init = None;
    let mut command_stack = None;
    let pid_ns = if s.confinement.pid_namespace() {
        let memory = InitMemory {
            stack: Some(ChildStack::new()?),
            status: Some(Box::new(AtomicU64::new(0))),
        };
        let command = ChildStack::new()?;
        let stage = PidNamespaceStage {
            init_stack: memory
                .stack
                .as_ref()
                .map_or(std::ptr::null_mut(), ChildStack::top),
            command_stack: command.top(),
            status: memory
                .status
                .as_deref()
                .map_or(std::ptr::null(), std::ptr::from_ref),
            pts: s.confinement.private_pts(),
            init_pid: AtomicI32::new(0),
            report: AtomicI32::new(-1),
        };
        init = Some(memory);
        command_stack = Some(command);
        Some(stage)
    } else {
        None
    };
    let prepared = Prepared {
        program: strings.program.as_ptr(),
        argv: strings.argv.as_ptr(),
        envp: strings.envp.as_ptr(),
        cwd: strings.cwd.as_ptr(),
        stdio: [
            s.stdio[0].as_raw_fd(),
            s.stdio[1].as_raw_fd(),
            s.stdio[2].as_raw_fd(),
        ],
        // With a pid namespace the init leaves the group for a session of its own, so each
        // stage starts a group of its own: its init, killed through its pidfd, takes the
        // namespace down with it.
        pgid: if pid_ns.is_some() || s.new_session {
            0
        } else {
            s.pgid
        },
        new_session: s.new_session && pid_ns.is_none(),
        gate: s.gate.as_raw_fd(),
        gate_writer: s.gate_writer,
        parent: if pid_ns.is_some() { 1 } else { server },
        confinement: std::ptr::from_ref(s.confinement),
        call: std::ptr::from_ref(s.call),
        keep_death_signal: s.keep_death_signal,
        egress_channel: channel.as_ref().map_or(-1, |c| c.child.as_raw_fd()),
        failure: AtomicI32::new(0),
        pid_ns,
    };

    let mut pidfd: c_int = -1;
    // Every signal blocked on this thread, so no handler runs on the child's stack before it
    // resets them; the child inherits this mask.
    let old = set_signal_mask(ALL_SIGNALS).map_err(std::io::Error::from_raw_os_error)?;
    // SAFETY: CLONE_VM|CLONE_VFORK: the child runs `child_main` on `stack`, which is ours and
    // large enough, and reads `prepared` (alive on our frame: this thread is suspended until
    // the child has exec'd or exited, so nothing here moves or is freed meanwhile). The child
    // makes only raw syscalls and writes only `prepared`'s atomic slots (see `child_main`).
    // CLONE_PIDFD stores a pidfd for the child in `pidfd`.
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            std::ptr::from_ref(&prepared).cast_mut().cast::<c_void>(),
            &mut pidfd as *mut c_int,
            std::ptr::null_mut::<c_void>(),
            std::ptr::null_mut::<c_int>(),
        )
    };
    let clone_error = std::io::Error::last_os_error();
    let _ = set_signal_mask(old);
    drop(stack);
    drop(command_stack);
    drop(strings);
    if pid < 0 {
        return Err(SpawnError::Parent(clone_error));
    }
    // SAFETY: with CLONE_PIDFD the kernel stored a new descriptor that we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let pid = Pid::from_raw(pid).ok_or_else(|| std::io::Error::other("clone returned pid 0"))?;
    let pgid = if prepared.pgid == 0 {
        pid.as_raw_nonzero().get()
    } else {
        prepared.pgid
    };
    let failure = prepared.failure.load(Ordering::Acquire);
    let child_failed = |failure: i32| SpawnError::Child {
        step: Step::from_raw(failure >> 16).unwrap_or(Step::Exec),
        errno: failure & 0xffff,
    };
    // The first child has sent its listener, or failed (which the failure slot says); a
    // listener that did not arrive is a failure of the network step.
    let (failure, listener) = match (&channel, failure) {
        (Some(channel), 0) => match channel.receive() {
            Ok(listener) => (0, Some(listener)),
            Err(e) => (
                failure_code(Step::Network, e.raw_os_error().unwrap_or(libc::EIO)),
                None,
            ),
        },
        (_, failure) => (failure, None),
    };
    let Some(stage) = &prepared.pid_ns else {
        if failure != 0 {
            // The child has exited (or, its listener lost, runs): end it and reap it, so
            // that it leaves no zombie.
            let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
            let _ = reap(&pidfd);
            return Err(child_failed(failure));
        }
        return Ok(Spawned {
            pid,
            pidfd,
            pgid,
            init: None,
            listener,
        });
    };
    // The first child has exited either way; the init, if there is one, is our child.
    let _ = reap(&pidfd);
    let init_pid = Pid::from_raw(stage.init_pid.load(Ordering::Acquire));
    let init_fd =
        init_pid.map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()));
    match (failure, init_pid, init_fd, init) {
        // The init left the first child's group for a session of its own, so its group
        // is the init's pid, pinned by the init itself until we reap it: never a stranger's.
        (0, Some(init_pid), Some(Ok(init_fd)), Some(memory)) => Ok(Spawned {
            pid: init_pid,
            pidfd: init_fd,
            pgid: init_pid.as_raw_nonzero().get(),
            init: Some(memory),
            listener,
        }),
        (failure, _, init_fd, memory) => {
            if let Some(Ok(fd)) = &init_fd {
                let _ = rustix::process::pidfd_send_signal(fd, rustix::process::Signal::KILL);
                // Its stack is unmapped only once it is certainly gone; otherwise leaked.
                if reap(fd)
                    && let Some(memory) = memory
                {
                    memory.free();
                }
            }
            Err(match failure {
                0 => SpawnError::Child {
                    step: Step::PidNamespace,
                    errno: libc::ECHILD,
                },
                f => child_failed(f),
            })
        }
    }
}

/// Waits for the exited child behind `pidfd`, so that it leaves no zombie; true once it
/// has been reaped.
fn reap(pidfd: &OwnedFd) -> bool {
    loop {
        match rustix::process::waitid(
            rustix::process::WaitId::PidFd(pidfd.as_fd()),
            rustix::process::WaitIdOptions::EXITED,
        ) {
            Ok(Some(_)) => return true,
            Ok(None) | Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// A failure as the failure slot holds it: `step << 16 | errno`.
fn failure_code(step: Step, errno: c_int) -> i32 {
    ((step as i32) << 16) | (errno & 0xffff)
}

/// Records the first failure of any child of the stage.
fn record_failure(p: &Prepared, step: Step, errno: c_int) {
    let _ = p.failure.compare_exchange(
        0,
        failure_code(step, errno),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// The first child: runs on its own stack in the server's memory until exec, or until the
/// init it started has said that the command has exec'd. Raw syscalls only.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Prepared` the parent passed to clone; it stays alive and unchanged
    // until this child has exec'd or exited.
    let p = unsafe { &*arg.cast::<Prepared>() };
    // SAFETY: see `run_child`; it is only ever called here, in the cloned child.
    let code = match unsafe { run_child(p) } {
        Ok(()) => 0,
        Err((step, errno)) => {
            record_failure(p, step, errno);
            127
        }
    };
    // SAFETY: _exit ends only this child; no atexit handler or destructor of the shared
    // memory runs.
    unsafe { libc::_exit(code) }
}

/// The kernel's signal set: one bit per signal, 64 of them on Linux.
type KernelSigset = u64;
const ALL_SIGNALS: KernelSigset = !0;

/// Replaces the calling thread's signal mask, returning the previous one. The raw syscall,
/// because glibc's `pthread_sigmask` silently keeps its two internal signals unblocked.
fn set_signal_mask(mask: KernelSigset) -> Result<KernelSigset, c_int> {
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

/// The first child's steps, in order. Returns only on failure, or (with a pid namespace)
/// once the command has exec'd.
///
/// # Safety
/// Must run in a `CLONE_VM` child made by [`spawn`], with every signal blocked.
unsafe fn run_child(p: &Prepared) -> Result<(), (Step, c_int)> {
    let fail = |step: Step| (step, errno());
    // Each call below is a plain syscall wrapper on values on this stack or on pointers and
    // descriptors that `spawn` prepared and keeps alive; none allocates or takes a lock.

    // Caught signals back to their defaults (exec would do it, but a handler must never run
    // on this stack first); SIGPIPE back to default, as std does for children.
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
                return Err(fail(Step::Signals));
            }
        }
    }
    if p.new_session {
        // SAFETY: no arguments; this fresh child leads no group yet, so setsid succeeds.
        if unsafe { libc::setsid() } < 0 {
            return Err(fail(Step::ProcessGroup));
        }
    // SAFETY: integer arguments only; moves this child into its stage's process group.
    } else if unsafe { libc::setpgid(0, p.pgid) } != 0 {
        return Err(fail(Step::ProcessGroup));
    }
    for (target, &fd) in p.stdio.iter().enumerate() {
        // SAFETY: descriptors the parent keeps open for the clone; 0..=2 belong to nobody
        // else in this child.
        if unsafe { libc::dup2(fd, target as c_int) } < 0 {
            return Err(fail(Step::Stdio));
        }
    }
    if p.gate_writer >= 0 {
        // SAFETY: closes this child's own copy of the gate's write end (after the dup2s, so
        // that, should the number have been reused, no descriptor the child needs is lost).
        unsafe { libc::close(p.gate_writer) };
    }
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
unsafe fn start_init(p: &Prepared, stage: &PidNamespaceStage) -> Result<(), (Step, c_int)> {
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
    if init < 0 {
        return Err((Step::PidNamespace, clone_errno));
    }
    stage.init_pid.store(init, Ordering::Release);
    let mut word = 0u8;
    // SAFETY: reads at most one byte into `word`, on this stack. End-of-file means the init
    // ended first, and its failure slot says why.
    unsafe {
        libc::syscall(
            libc::SYS_read,
            report[0],
            std::ptr::from_mut(&mut word),
            1usize,
        )
    };
    Ok(())
}

/// The init: pid 1 of the stage's pid namespace.
extern "C" fn init_main(arg: *mut c_void) -> c_int {
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
unsafe fn run_init(p: &Prepared) -> Result<std::convert::Infallible, (Step, c_int)> {
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
        return Err(fail());
    }
    if stage.pts {
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
            return Err(fail());
        }
    }
    // SAFETY: `p.confinement` is the caller's Confinement, alive until our word.
    let confinement = unsafe { &*p.confinement };
    // SAFETY: `p.call` is the caller's CallConfinement, alive until our word.
    let call = unsafe { &*p.call };
    // SAFETY: we are the init, in its own mount namespace, as `hold_tmp_root` requires.
    unsafe { confinement.hold_tmp_root(call) }.map_err(|e| (Step::PidNamespace, e))?;
    // SAFETY: we are the init, after its mounts, as `add_own_mounts` requires.
    unsafe { confinement.add_own_mounts(call) }.map_err(|e| (Step::PidNamespace, e))?;
    let status = stage.status;
    let report = stage.report.load(Ordering::Acquire);
    // SAFETY: CLONE_VM|CLONE_VFORK, as in `spawn`: the command runs `command_main` on its
    // own stack and reads `p`; we sleep until it has exec'd or exited.
    let command = unsafe {
        libc::clone(
            command_main,
            stage.command_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_ref(p).cast_mut().cast::<c_void>(),
        )
    };
    if command < 0 {
        return Err(fail());
    }
    // Nothing of the server's stays open here: its pipes must see end-of-file when the
    // command's tree is done, whatever this init does.
    let last = c_int::MAX as u32;
    for (from, to) in [(0, report as u32 - 1), (report as u32 + 1, last)] {
        if from <= to {
            // SAFETY: integer arguments only; closes descriptors of this process.
            unsafe { libc::syscall(libc::SYS_close_range, from, to, 0u32) };
        }
    }
    // The word: from here on `p` may be gone, and the server's threads run beside us.
    // SAFETY: writes one byte from a static to the report pipe.
    unsafe { libc::syscall(libc::SYS_write, report, b"1".as_ptr(), 1usize) };
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
/// Only in the init, with `status` the slot of its [`InitMemory`].
#[inline(never)]
unsafe fn reap_until(command: libc::pid_t, status: *const AtomicU64) -> ! {
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
extern "C" fn command_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Prepared` of `spawn`, alive until this child has exec'd or exited.
    let p = unsafe { &*arg.cast::<Prepared>() };
    // SAFETY: see `run_command`; it is only ever called here and in `run_child`.
    let Err((step, errno)) = unsafe { run_command(p) };
    record_failure(p, step, errno);
    // SAFETY: ends only this child.
    unsafe { libc::_exit(127) }
}

/// The steps of the child that execs: chdir, descriptors, confinement, the gate, exec.
/// Returns only on failure.
///
/// # Safety
/// Only in the `CLONE_VM` child that execs (the first child, or the command under an init),
/// after it has entered the view, with every signal blocked.
unsafe fn run_command(p: &Prepared) -> Result<std::convert::Infallible, (Step, c_int)> {
    let fail = |step: Step| (step, errno());
    // SAFETY: `p.confinement` points at the caller's Confinement, alive for the clone.
    let confinement = unsafe { &*p.confinement };
    // SAFETY: `p.cwd` is a NUL-terminated string the parent keeps alive.
    if unsafe { libc::chdir(p.cwd) } != 0 {
        return Err(fail(Step::Chdir));
    }
    // Every inherited descriptor >= 3 closes at exec (the gate and the confinement's
    // descriptors stay usable until then).
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
        return Err(fail(Step::Descriptors));
    }
    // SAFETY: `p.call` points at the caller's CallConfinement, alive for the clone.
    let call = unsafe { &*p.call };
    // SAFETY: this is the spawn child, before exec, as `apply_in_child` requires.
    unsafe { confinement.apply_in_child(call) }?;
    // The gate: die with the server while waiting; exec only with a ticket of 1.
    let kill = libc::SIGKILL as libc::c_ulong;
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, kill) } != 0 {
        return Err(fail(Step::Gate));
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
        return Err(fail(Step::Gate));
    }
    if let Err(errno) = set_signal_mask(0) {
        return Err((Step::Signals, errno));
    }
    // SAFETY: NUL-terminated program, and NULL-terminated argv and envp arrays of
    // NUL-terminated strings, all prepared and kept alive by the parent.
    unsafe { libc::execve(p.program, p.argv, p.envp) };
    Err(fail(Step::Exec))
}
