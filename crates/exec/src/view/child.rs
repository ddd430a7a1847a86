//! The setup child: the one process that makes the view's namespaces and mounts, step by
//! step (docs/CONFINEMENT.md, step S2), and reports which step failed.

use std::ffi::{CString, c_int, c_ulong};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::step::errno;

use super::consts::{Entries, NAMESPACES, PROC_FLAGS, PTS_FLAGS, PTS_OPTIONS};

/// One bind mount of the setup: `source` at `target`, then remounted with `flags`.
pub(super) struct Bind {
    pub(super) source: CString,
    pub(super) target: CString,
    pub(super) flags: c_ulong,
}

/// Everything the setup child reads, prepared before the fork.
pub(super) struct Setup {
    pub(super) user: bool,
    pub(super) setgroups: CString,
    pub(super) uid_map_path: CString,
    pub(super) gid_map_path: CString,
    pub(super) uid_map: Vec<u8>,
    pub(super) gid_map: Vec<u8>,
    pub(super) root: CString,
    pub(super) binds: Vec<Bind>,
    pub(super) hostname: &'static [u8],
    /// The skeleton's `proc` directory, where the setup child tries a `/proc` of a pid
    /// namespace of its own.
    pub(super) proc_dir: CString,
    /// The skeleton's `dev/pts`, where it tries a `devpts` of its own.
    pub(super) pts_dir: CString,
    /// In a user namespace of the view's own: the per-user kernel counters it bounds, with
    /// the value written (see [`super::consts::USER_LIMITS`]).
    pub(super) user_limits: Vec<(CString, Vec<u8>)>,
}

/// What the setup child was doing when it failed.
pub(super) const SETUP_STEPS: &[&str] = &[
    "",
    "unshare(CLONE_NEWUSER)",
    "writing the uid and gid maps",
    "unshare(mount, ipc, uts, net)",
    "making mounts private",
    "binding the root",
    "a bind mount",
    "remounting a bind mount",
    "remounting the root read-only",
    "bringing up loopback",
    "sethostname",
    "pivot_root",
];

/// The setup child's report: the failed step (0 when the view stands), whether a pid
/// namespace with its `/proc` could be made, whether a devpts could be mounted, the step's
/// errno, and the pid probe's errno.
pub(super) const REPORT_BYTES: usize = 12;

/// Forks the setup child, waits until it stands in the finished view, opens its namespaces,
/// then lets it exit. Also says whether commands can have pid namespaces of their own.
pub(super) fn run_setup(
    setup: &Setup,
) -> Result<(Entries, Result<(), String>, bool, bool), String> {
    let (ready_r, ready_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| format!("pipe: {e}"))?;
    let (go_r, go_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| format!("pipe: {e}"))?;
    // SAFETY: the child only makes raw syscalls on data prepared above (no allocation, no
    // lock), then `_exit`s; it is async-signal-safe as a fork of a threaded process requires.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // The parent's ends are closed here, so that the child sees end-of-file if the parent
        // dies; and the child dies with it.
        // SAFETY: closes a descriptor this forked process holds a copy of.
        unsafe { libc::close(ready_r.as_raw_fd()) };
        // SAFETY: as above.
        unsafe { libc::close(go_w.as_raw_fd()) };
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as c_ulong) };
        // SAFETY: in the forked child, which never returns from here.
        unsafe { setup_child(setup, ready_w.as_raw_fd(), go_r.as_raw_fd()) }
    }
    drop(ready_w);
    drop(go_r);
    let mut report = [0u8; REPORT_BYTES];
    let n = rustix::io::read(&ready_r, &mut report).unwrap_or(0);
    let errno_at = |at: usize| {
        std::io::Error::from_raw_os_error(i32::from_ne_bytes([
            report[at],
            report[at + 1],
            report[at + 2],
            report[at + 3],
        ]))
    };
    let pid_ns = if report[1] == 1 {
        Ok(())
    } else {
        Err(format!(
            "the kernel refused a pid namespace with its own /proc: {}",
            errno_at(8)
        ))
    };
    let result = if n == REPORT_BYTES && report[0] == 0 {
        NAMESPACES
            .iter()
            .filter(|ns| setup.user || ns.flag != libc::CLONE_NEWUSER)
            .map(|ns| {
                std::fs::File::open(format!("/proc/{pid}/ns/{}", ns.proc_name))
                    .map(|f| (OwnedFd::from(f), ns))
                    .map_err(|e| format!("cannot open the view's {} namespace: {e}", ns.proc_name))
            })
            .collect::<Result<Entries, String>>()
            .map(|entries| (entries, pid_ns, report[2] == 1, report[3] == 1))
    } else if n == REPORT_BYTES {
        let step = usize::from(report[0]);
        Err(format!(
            "{}: {}",
            SETUP_STEPS.get(step).unwrap_or(&"setup"),
            errno_at(4)
        ))
    } else {
        Err("the setup child ended without a word".into())
    };
    let _ = rustix::io::write(&go_w, &[1]);
    drop(go_w);
    let mut status = 0;
    // SAFETY: waits for the child forked above; writes only `status`.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
    }
    result
}

/// The setup child: leaves the host's namespaces, builds the view, reports, waits, exits.
///
/// # Safety
/// Only in the child forked by [`run_setup`]. Raw syscalls on `setup` only.
pub(super) unsafe fn setup_child(setup: &Setup, ready: c_int, go: c_int) -> ! {
    // Always REPORT_BYTES: see there.
    let mut report = [0u8; REPORT_BYTES];
    // SAFETY: see `build_in_child`; it runs here, in the forked child.
    match unsafe { build_in_child(setup) } {
        Ok((pid, pts, limited)) => {
            report[2] = u8::from(pts);
            report[3] = u8::from(limited);
            match pid {
                Ok(()) => report[1] = 1,
                Err(code) => report[8..].copy_from_slice(&code.to_ne_bytes()),
            }
        }
        Err((step, code)) => {
            report[0] = step;
            report[4..8].copy_from_slice(&code.to_ne_bytes());
        }
    }
    // SAFETY: writes the report, on this stack, to the ready pipe.
    unsafe { libc::write(ready, report.as_ptr().cast(), report.len()) };
    let mut byte = 0u8;
    // SAFETY: blocks until the parent has opened the namespaces (or closed the pipe).
    unsafe { libc::read(go, std::ptr::from_mut(&mut byte).cast(), 1) };
    // SAFETY: ends only this child.
    unsafe { libc::_exit(0) }
}

/// Writes each per-user counter's limit (`/proc/sys/user/…` with its value, prepared by the
/// parent) in this process's user namespace, which must grant it `CAP_SYS_RESOURCE`.
/// Returns 0 when every one was written whole, else the errno of the first that was not
/// (the others are still written).
///
/// # Safety
/// Only in a forked child: raw syscalls on prepared data, no allocation.
pub(super) unsafe fn write_user_limits(limits: &[(CString, Vec<u8>)]) -> c_int {
    let mut failed = 0;
    for (path, value) in limits {
        // SAFETY: opens a NUL-terminated path prepared by the parent.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            if failed == 0 {
                failed = errno();
            }
            continue;
        }
        // SAFETY: writes prepared bytes to the descriptor just opened.
        let n = unsafe { libc::write(fd, value.as_ptr().cast(), value.len()) };
        let write_errno = errno();
        // SAFETY: closes the descriptor just opened.
        unsafe { libc::close(fd) };
        if n != value.len() as isize && failed == 0 {
            failed = if n < 0 { write_errno } else { libc::EIO };
        }
    }
    failed
}

/// What the setup child built: whether commands can have pid namespaces (or the probe's
/// errno), whether devpts works, whether the per-user counters were bounded.
pub(super) type ChildBuilt = (Result<(), c_int>, bool, bool);

/// The view's steps, in order. Returns the failed step's index and errno, or whether
/// commands can have pid namespaces of their own (see [`placeholder_proc`]).
///
/// # Safety
/// Only in the forked setup child.
pub(super) unsafe fn build_in_child(s: &Setup) -> Result<ChildBuilt, (u8, c_int)> {
    let fail = |step: u8| (step, errno());
    // SAFETY: in the forked setup child, as `own_user_namespace` requires.
    let limited = s.user && unsafe { own_user_namespace(s) }?;
    // The user namespace was made above, on its own: its maps must be written before the
    // others are made in it.
    let flags = NAMESPACES
        .iter()
        .filter(|ns| ns.flag != libc::CLONE_NEWUSER)
        .fold(0, |all, ns| all | ns.flag);
    // SAFETY: integer argument only.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(fail(3));
    }
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: "/" is a static NUL-terminated string; no data argument.
    let rc = unsafe {
        libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(fail(4));
    }
    // SAFETY: binds the prepared skeleton onto itself, making it a mount point.
    let rc = unsafe {
        libc::mount(
            s.root.as_ptr(),
            s.root.as_ptr(),
            none,
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(fail(5));
    }
    for b in &s.binds {
        // SAFETY: prepared NUL-terminated source and target.
        let rc = unsafe {
            libc::mount(
                b.source.as_ptr(),
                b.target.as_ptr(),
                none,
                libc::MS_BIND,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(fail(6));
        }
        // SAFETY: see `remount`.
        unsafe { remount(&b.target, b.flags) }.map_err(|e| (7, e))?;
    }
    let ro = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    // SAFETY: see `remount`.
    unsafe { remount(&s.root, ro) }.map_err(|e| (8, e))?;
    // SAFETY: see `loopback_up`.
    unsafe { loopback_up() }.map_err(|e| (9, e))?;
    // SAFETY: a static name and its length.
    if unsafe { libc::sethostname(s.hostname.as_ptr().cast(), s.hostname.len()) } != 0 {
        return Err(fail(10));
    }
    // SAFETY: we are the setup child, before pivot_root, as `placeholder_proc` requires.
    let pid = unsafe { placeholder_proc(s) };
    // A devpts of the view's own under each command's: the same probe as for /proc.
    // SAFETY: a prepared mount point and static strings.
    let pts = unsafe {
        libc::mount(
            c"devpts".as_ptr(),
            s.pts_dir.as_ptr(),
            c"devpts".as_ptr(),
            PTS_FLAGS,
            PTS_OPTIONS.as_ptr().cast(),
        )
    } == 0;
    // SAFETY: in the forked setup child, its mounts done, as `pivot` requires.
    unsafe { pivot(s) }.map_err(|e| (11, e))?;
    Ok((pid, pts, limited))
}

/// Steps 1 and 2: a user namespace of the setup's own, its maps written; then the per-user
/// counters bounded, as the holder of every capability of that namespace. Whether they were.
///
/// # Safety
/// Only in the forked setup child.
unsafe fn own_user_namespace(s: &Setup) -> Result<bool, (u8, c_int)> {
    let fail = |step: u8| (step, errno());
    // SAFETY: integer argument only.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
        return Err(fail(1));
    }
    for (path, data) in [
        (&s.setgroups, b"deny".as_slice()),
        (&s.uid_map_path, s.uid_map.as_slice()),
        (&s.gid_map_path, s.gid_map.as_slice()),
    ] {
        // SAFETY: opens a NUL-terminated path prepared by the parent.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(fail(2));
        }
        // SAFETY: writes prepared bytes to the descriptor just opened.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        // SAFETY: closes the descriptor just opened.
        unsafe { libc::close(fd) };
        if n < 0 {
            return Err(fail(2));
        }
    }
    // Now holding every capability of the new user namespace, whose counters these are.
    // SAFETY: in the forked setup child, on limits prepared by the parent.
    Ok(!s.user_limits.is_empty() && unsafe { write_user_limits(&s.user_limits) } == 0)
}

/// Step 11: `pivot_root(".", ".")` into the skeleton: the old root is stacked under the new
/// one, then detached.
///
/// # Safety
/// Only in the forked setup child, once its mounts are done.
unsafe fn pivot(s: &Setup) -> Result<(), c_int> {
    // SAFETY: a prepared NUL-terminated path.
    if unsafe { libc::chdir(s.root.as_ptr()) } != 0 {
        return Err(errno());
    }
    let dot = c".".as_ptr();
    // SAFETY: static NUL-terminated strings.
    if unsafe { libc::syscall(libc::SYS_pivot_root, dot, dot) } != 0 {
        return Err(errno());
    }
    // SAFETY: a static NUL-terminated string.
    if unsafe { libc::umount2(dot, libc::MNT_DETACH) } != 0 {
        return Err(errno());
    }
    // SAFETY: a static NUL-terminated string.
    if unsafe { libc::chdir(c"/".as_ptr()) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// Tries what every command will do: make a pid namespace and mount its `/proc`. A child
/// of the setup, pid 1 of a namespace of its own that dies with it, mounts that namespace's
/// `/proc` on the skeleton's `proc` directory, where it stays: a `/proc` of an empty
/// namespace, which each command covers with its own. It is also what lets an unprivileged
/// command mount one at all: in a user namespace the kernel mounts a new `/proc` only where
/// one is already fully visible in the mount namespace, and the view hides the host's.
///
/// # Safety
/// Only in the forked (single-threaded) setup child, before pivot_root.
pub(super) unsafe fn placeholder_proc(s: &Setup) -> Result<(), c_int> {
    // SAFETY: integer argument only; it affects the children made from here on.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
        return Err(errno());
    }
    // A plain fork, as the raw syscall: the child runs on its own copy of this stack.
    // SAFETY: integer arguments only; x86_64's order is flags, stack, ptid, ctid, tls.
    let child = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if child < 0 {
        return Err(errno());
    }
    if child == 0 {
        // SAFETY: static and prepared NUL-terminated strings; no data argument.
        let rc = unsafe {
            libc::mount(
                c"proc".as_ptr(),
                s.proc_dir.as_ptr(),
                c"proc".as_ptr(),
                PROC_FLAGS,
                std::ptr::null(),
            )
        };
        let code = if rc == 0 { 0 } else { errno() & 0xff };
        // SAFETY: ends only this child.
        unsafe { libc::_exit(code) }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above; writes only `status`.
    if unsafe { libc::waitpid(child as libc::pid_t, &mut status, 0) } < 0 {
        return Err(errno());
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, code) => Err(code),
        (false, _) => Err(libc::ECHILD),
    }
}

/// Remounts the bind mount at `target` with `flags` added to the ones it already has: in a
/// user namespace the kernel refuses to drop a flag the host's mount carries (it is locked).
///
/// # Safety
/// Only in the setup child; `target` is a prepared NUL-terminated path.
pub(super) unsafe fn remount(target: &CString, flags: c_ulong) -> Result<(), c_int> {
    // SAFETY: as this function's own contract.
    unsafe { remount_without(target, flags, 0) }
}

/// [`remount`], with the flags of `cleared` dropped from the ones kept (`MS_NOEXEC`, for a
/// bind of this server's own `noexec` tree: the kernel refuses only to drop a locked flag).
///
/// # Safety
/// In the setup child or a stage's init; `target` is a prepared NUL-terminated path.
pub(super) unsafe fn remount_without(
    target: &CString,
    flags: c_ulong,
    cleared: c_ulong,
) -> Result<(), c_int> {
    // SAFETY: statvfs is plain data, for which all zeroes is valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fills `st`, on this stack, for a prepared path.
    if unsafe { libc::statvfs(target.as_ptr(), &mut st) } != 0 {
        return Err(errno());
    }
    let have = st.f_flag;
    let mut keep: c_ulong = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
        // ST_NOSYMFOLLOW (statfs(2); not in the libc crate).
        (0x2000, libc::MS_NOSYMFOLLOW),
    ] {
        if have & st_flag != 0 {
            keep |= ms_flag;
        }
    }
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: a prepared NUL-terminated target; no data argument.
    let rc = unsafe {
        libc::mount(
            none,
            target.as_ptr(),
            none,
            libc::MS_BIND | libc::MS_REMOUNT | flags | (keep & !cleared),
            std::ptr::null(),
        )
    };
    if rc != 0 { Err(errno()) } else { Ok(()) }
}

/// Brings `lo` up in a fresh network namespace (the view's, or a command's own under
/// egress): the only interface it has.
///
/// # Safety
/// Only in the setup child or a spawn child, in the namespace to change.
pub(crate) unsafe fn loopback_up() -> Result<(), c_int> {
    // SAFETY: integer arguments only.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(errno());
    }
    // SAFETY: the descriptor just made is ours alone.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    // SAFETY: ifreq is plain data, for which all zeroes is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in req.ifr_name.iter_mut().zip(b"lo") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: reads the flags of `lo` into `req`, on this stack.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } != 0 {
        return Err(errno());
    }
    // SAFETY: the union's flags member was just filled by SIOCGIFFLAGS.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: sets the flags of `lo` from `req`, on this stack.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } != 0 {
        return Err(errno());
    }
    Ok(())
}
