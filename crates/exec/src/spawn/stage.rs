//! A stage as [`super::spawn`] and [`super::ahead`] both start it: what it is given
//! ([`StageSpawn`]), what comes back ([`Spawned`], [`SpawnError`]), and the memory its
//! children run on ([`ChildStack`], [`InitMemory`], the prepared strings).

use std::ffi::{CString, OsStr, c_char, c_int, c_void};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::process::Pid;

use crate::confine::{CallConfinement, Confinement};
use crate::step::Step;

use super::child::{ALL_SIGNALS, Exec, STATUS_SET, set_signal_mask};

/// The child's own stack. It needs only a few hundred bytes; the rest is headroom.
pub(super) const STACK_BYTES: usize = 64 * 1024;

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

impl SpawnError {
    /// The failure a child left in its slot (`step << 16 | errno`).
    pub(super) fn from_failure(code: i32) -> SpawnError {
        SpawnError::Child {
            step: Step::from_raw(code >> 16).unwrap_or(Step::Exec),
            errno: code & 0xffff,
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
    /// What the call adds: its Landlock rulesets.
    pub call: &'a CallConfinement,
    /// The stage's exec group ([`Confinement::exec_group`]): which ruleset it takes.
    pub exec_group: usize,
    /// The exec log's channel for this stage ([`crate::execlog::Watch`]), or -1.
    pub exec_log: RawFd,
    /// The exec gate's read end.
    pub gate: BorrowedFd<'a>,
    /// A session's stage: the program keeps the death signal set at the gate, so that it
    /// dies with the server's thread that runs the session, however the server ends.
    pub keep_death_signal: bool,
    /// The gate's write end, as the number the child's copy of it has: the child closes it,
    /// so that a gate the server closes without a ticket (or a server that dies) reads as
    /// closed instead of leaving the child waiting forever on its own copy.
    pub gate_writer: RawFd,
    /// A process session's pseudo-terminal of this size, made by the stage's own init:
    /// the command's 0, 1 and 2 and its controlling terminal instead of `stdio`.
    pub terminal: Option<safe_mcp_contract::TerminalSize>,
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
    /// The master of the stage's terminal, when it has one.
    pub terminal: Option<OwnedFd>,
}

/// What a stage's init uses until it exits: its stack, and the slot where it leaves the
/// command's wait status. Freed only once the init has been reaped ([`InitMemory::free`]);
/// dropped any other way, it is leaked, never unmapped under a process that may still run.
pub(crate) struct InitMemory {
    stack: Option<ChildStack>,
    status: Option<Box<AtomicU64>>,
}

impl InitMemory {
    /// A fresh stack for an init, and an empty status slot.
    pub(super) fn new() -> std::io::Result<InitMemory> {
        Ok(InitMemory {
            stack: Some(ChildStack::new()?),
            status: Some(Box::new(AtomicU64::new(0))),
        })
    }

    /// The top of the init's stack, for its clone.
    pub(super) fn stack_top(&self) -> *mut c_void {
        self.stack
            .as_ref()
            .map_or(std::ptr::null_mut(), ChildStack::top)
    }

    /// The slot where the init stores the command's wait status.
    pub(super) fn status_slot(&self) -> *const AtomicU64 {
        self.status
            .as_deref()
            .map_or(std::ptr::null(), std::ptr::from_ref)
    }

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

pub(super) struct Strings {
    _owned: Vec<CString>,
    pub(super) argv: Vec<*const c_char>,
    pub(super) envp: Vec<*const c_char>,
    pub(super) program: CString,
    pub(super) cwd: CString,
}

impl Strings {
    /// What the command child execs, pointing into these strings (which must outlive it),
    /// with `stdio` as its 0, 1 and 2.
    pub(super) fn exec(&self, stdio: &[BorrowedFd<'_>; 3]) -> Exec {
        Exec {
            program: self.program.as_ptr(),
            argv: self.argv.as_ptr(),
            envp: self.envp.as_ptr(),
            cwd: self.cwd.as_ptr(),
            stdio: stdio.each_ref().map(AsRawFd::as_raw_fd),
        }
    }
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "an argument or variable contains a NUL byte",
        )
    })
}

pub(super) fn prepare_strings(s: &StageSpawn<'_>) -> std::io::Result<Strings> {
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
pub(super) struct ChildStack {
    base: *mut c_void,
    len: usize,
}

// SAFETY: the mapping belongs to the `ChildStack` alone (its address is all it holds), so it
// may be handed to another thread: a namespace made ahead moves from the filler to a call.
unsafe impl Send for ChildStack {}

impl ChildStack {
    pub(super) fn new() -> std::io::Result<ChildStack> {
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

    pub(super) fn top(&self) -> *mut c_void {
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

/// Waits for the exited child behind `pidfd`, so that it leaves no zombie; true once it
/// has been reaped.
pub(super) fn reap(pidfd: &OwnedFd) -> bool {
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

/// A vfork-style child: clones `entry` on `stack` with `arg` (`CLONE_VM | CLONE_VFORK |
/// CLONE_PIDFD`), every signal blocked on this thread across the clone so that no handler
/// runs on the child's stack before it resets them (the child inherits the mask). Returns
/// once the child has exec'd or exited, with its pid and pidfd.
///
/// # Safety
/// `entry` may only make raw syscalls on what `arg` points at (and write its atomic slots),
/// which must stay alive and unmoved until this returns; `stack` is the top of a
/// [`ChildStack`] the caller keeps until then.
pub(super) unsafe fn vfork(
    entry: extern "C" fn(*mut c_void) -> c_int,
    stack: *mut c_void,
    arg: *mut c_void,
) -> std::io::Result<(Pid, OwnedFd)> {
    let mut pidfd: c_int = -1;
    let old = set_signal_mask(ALL_SIGNALS).map_err(std::io::Error::from_raw_os_error)?;
    // SAFETY: as this function's contract says; this thread is suspended until the child
    // has exec'd or exited, so nothing of the caller's moves or is freed meanwhile.
    // CLONE_PIDFD stores a pidfd for the child in `pidfd`.
    let pid = unsafe {
        libc::clone(
            entry,
            stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            arg,
            &mut pidfd as *mut c_int,
            std::ptr::null_mut::<c_void>(),
            std::ptr::null_mut::<c_int>(),
        )
    };
    let clone_error = std::io::Error::last_os_error();
    let _ = set_signal_mask(old);
    if pid < 0 {
        return Err(clone_error);
    }
    // SAFETY: with CLONE_PIDFD the kernel stored a new descriptor that we now own.
    let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd) };
    let pid = Pid::from_raw(pid).ok_or_else(|| std::io::Error::other("clone returned pid 0"))?;
    Ok((pid, pidfd))
}
