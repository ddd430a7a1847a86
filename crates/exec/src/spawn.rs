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
//! must not allocate, take a lock or write anything of the parent's except the one error slot
//! it is given: every string, pointer array and descriptor is prepared here, in the parent
//! ([`Prepared`]), and the child ([`child_main`]) only reads them and makes syscalls, through
//! libc wrappers that take no lock (raw ones for read, write and the signal mask). All
//! signals are blocked across the clone and the child resets every caught signal to its
//! default before unblocking, so no server signal handler can run on the child's stack.

use std::ffi::{CString, OsStr, c_char, c_int, c_void};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::process::Pid;

use crate::confine::Confinement;
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
    pub confinement: &'a Confinement,
    /// The exec gate's read end.
    pub gate: BorrowedFd<'a>,
}

/// A started stage: its pid and a pidfd opened atomically by `clone`.
pub(crate) struct Spawned {
    pub pid: Pid,
    pub pidfd: OwnedFd,
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
    gate: RawFd,
    server: libc::pid_t,
    confinement: *const Confinement,
    /// Written by the child only, before it exits: `step << 16 | errno`, or 0.
    failure: AtomicI32,
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
        pgid: s.pgid,
        gate: s.gate.as_raw_fd(),
        server: rustix::process::getpid().as_raw_nonzero().get(),
        confinement: std::ptr::from_ref(s.confinement),
        failure: AtomicI32::new(0),
    };

    let mut pidfd: c_int = -1;
    // Every signal blocked on this thread, so no handler runs on the child's stack before it
    // resets them; the child inherits this mask.
    let old = set_signal_mask(ALL_SIGNALS).map_err(std::io::Error::from_raw_os_error)?;
    // SAFETY: CLONE_VM|CLONE_VFORK: the child runs `child_main` on `stack`, which is ours and
    // large enough, and reads `prepared` (alive on our frame: this thread is suspended until
    // the child has exec'd or exited, so nothing here moves or is freed meanwhile). The child
    // makes only raw syscalls and writes only `prepared.failure` (see `child_main`).
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
    drop(strings);
    if pid < 0 {
        return Err(SpawnError::Parent(clone_error));
    }
    // SAFETY: with CLONE_PIDFD the kernel stored a new descriptor that we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let pid = Pid::from_raw(pid).ok_or_else(|| std::io::Error::other("clone returned pid 0"))?;
    let failure = prepared.failure.load(Ordering::Acquire);
    if failure != 0 {
        // The child has exited: reap it so it leaves no zombie.
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(pidfd.as_fd()),
            rustix::process::WaitIdOptions::EXITED,
        );
        let step = Step::from_raw(failure >> 16).unwrap_or(Step::Exec);
        return Err(SpawnError::Child {
            step,
            errno: failure & 0xffff,
        });
    }
    Ok(Spawned { pid, pidfd })
}

/// The child: runs on its own stack in the server's memory until exec. Raw syscalls only.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Prepared` the parent passed to clone; it stays alive and unchanged
    // until this child has exec'd or exited.
    let p = unsafe { &*arg.cast::<Prepared>() };
    // SAFETY: see `run_child`; it is only ever called here, in the cloned child.
    let Err((step, errno)) = unsafe { run_child(p) };
    p.failure
        .store(((step as i32) << 16) | (errno & 0xffff), Ordering::Release);
    // SAFETY: _exit ends only this child; no atexit handler or destructor of the shared
    // memory runs.
    unsafe { libc::_exit(127) }
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

/// The child's steps, in order. Returns only on failure.
///
/// # Safety
/// Must run in a `CLONE_VM` child made by [`spawn`], with every signal blocked.
unsafe fn run_child(p: &Prepared) -> Result<std::convert::Infallible, (Step, c_int)> {
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
    // SAFETY: integer arguments only; moves this child into its stage's process group.
    if unsafe { libc::setpgid(0, p.pgid) } != 0 {
        return Err(fail(Step::ProcessGroup));
    }
    for (target, &fd) in p.stdio.iter().enumerate() {
        // SAFETY: descriptors the parent keeps open for the clone; 0..=2 belong to nobody
        // else in this child.
        if unsafe { libc::dup2(fd, target as c_int) } < 0 {
            return Err(fail(Step::Stdio));
        }
    }
    // SAFETY: `p.confinement` points at the caller's Confinement, alive for the clone.
    let confinement = unsafe { &*p.confinement };
    // SAFETY: this is the spawn child, before its chdir, as `enter_view` requires.
    unsafe { confinement.enter_view() }?;
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
    // SAFETY: this is the spawn child, before exec, as `apply_in_child` requires.
    unsafe { confinement.apply_in_child() }?;
    // The gate: die with the server while waiting; exec only with a ticket of 1.
    let kill = libc::SIGKILL as libc::c_ulong;
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, kill) } != 0 {
        return Err(fail(Step::Gate));
    }
    // SAFETY: no arguments.
    if unsafe { libc::getppid() } != p.server {
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
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0 as libc::c_ulong) } != 0 {
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
