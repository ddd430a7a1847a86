//! The private view of the machine (DESIGN §5, step 1): namespaces of the server's own, made
//! once at startup, that every command enters.
//!
//! A command confined only by Landlock still sees the host's filesystem: `/etc/passwd`, the
//! audit log's directory, files it may not open but may `chmod` or `touch` through a symlink
//! (Landlock does not mediate metadata). Here, at startup, a short-lived child makes new
//! mount, ipc, uts and network namespaces (and a user namespace when the server is not
//! root), builds a fresh root in them and keeps nothing else: the jail read-write
//! (`nosuid,nodev`, `noexec` unless `exec_in_jail`), the read paths and the commands' HOME
//! read-only, five harmless device files, and a synthetic `/etc/passwd`, `/etc/group` and
//! `/etc/hosts`. Everything else of the host is absent. The network namespace has loopback
//! only. The server keeps a descriptor to each namespace; each command's child enters them
//! with `setns` before anything else ([`View::enter`]), which costs microseconds where making
//! a network namespace per command would cost milliseconds. Landlock, seccomp, the capability
//! drop and the rlimits still apply inside, as a second wall.
//!
//! Every path keeps its host name inside the view, so the cwd and the resolved programs need
//! no translation. The root is a skeleton directory beneath the server's temporary
//! directory (empty directories, empty files and symlinks that mirror the host's, as mount
//! points), removed when the server ends and, for servers that were killed, at the next start.
//!
//! This module must never mount anything in the server's own namespace: every mount happens
//! in the setup child, after it has left the host's mount namespace.

use std::ffi::{CString, c_int, c_ulong};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use safe_mcp_contract::{ConfinementSpec, HARMLESS_DEVICES};

use crate::rundir;
use crate::step::errno;

/// The namespaces every command enters, made once.
pub(crate) struct View {
    /// Each namespace's descriptor, in [`NAMESPACES`] order (the user namespace first, when
    /// there is one).
    entries: Vec<(OwnedFd, &'static Namespace)>,
    /// Whether the view has a user namespace of its own (an unprivileged server).
    pub(crate) user: bool,
    /// Whether each command gets a pid namespace (and a mount namespace for its `/proc`) of
    /// its own, or why not: the setup child tried one.
    pub(crate) pid: Result<(), String>,
    /// Whether the kernel mounts a private `devpts` here (each command then gets its own).
    pts: bool,
    /// Whether the per-user kernel counters ([`USER_LIMITS`]) are bounded for commands.
    user_limits: bool,
    /// What network commands have, for the reports.
    network: &'static str,
    /// The runtime directory holding the skeleton root; removed on drop.
    dir: PathBuf,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("namespaces", &self.names())
            .finish()
    }
}

/// What a command can see in the view, for the reports.
const VISIBLE: &str = "the jail (read-write, nosuid, nodev), the read paths and HOME (read-only), /dev/{null,zero,full,random,urandom} (read-only binds), a synthetic /etc/passwd, /etc/group and /etc/hosts; nothing else of the host's filesystem";

const PREFIX: &str = "safe-mcp-view-";

/// One namespace of the view: its name under `/proc/<pid>/ns/`, its `CLONE_NEW*` flag, and
/// its name in the reports.
struct Namespace {
    proc_name: &'static str,
    flag: c_int,
    report: &'static str,
}

/// The view's namespaces, in the order a child enters them: the user namespace first, since
/// it is what grants the right to enter the others.
const NAMESPACES: &[Namespace] = &[
    Namespace {
        proc_name: "user",
        flag: libc::CLONE_NEWUSER,
        report: "user",
    },
    Namespace {
        proc_name: "mnt",
        flag: libc::CLONE_NEWNS,
        report: "mount",
    },
    Namespace {
        proc_name: "ipc",
        flag: libc::CLONE_NEWIPC,
        report: "ipc",
    },
    Namespace {
        proc_name: "uts",
        flag: libc::CLONE_NEWUTS,
        report: "uts",
    },
    Namespace {
        proc_name: "net",
        flag: libc::CLONE_NEWNET,
        report: "net",
    },
];

/// What each command makes for itself after entering the view: a pid namespace, with a
/// mount namespace of its own to hold that namespace's `/proc`, and an ipc namespace of its
/// own, so that System V shared memory, semaphores and message queues neither pass between
/// two commands nor outlive the command (the kernel removes them with the namespace).
pub(crate) const PER_COMMAND: c_int = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;

/// The flags of every `/proc` in the view: read-only (its writable files, such as
/// `/proc/sysrq-trigger` or `/proc/sys`, stay unwritable even for uid 0), nothing to execute.
pub(crate) const PROC_FLAGS: c_ulong =
    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// The flags and options of every `devpts` in the view: a new instance (its own ptys only),
/// `/dev/ptmx` usable by anyone in it.
pub(crate) const PTS_FLAGS: c_ulong = libc::MS_NOSUID | libc::MS_NOEXEC;
pub(crate) const PTS_OPTIONS: &std::ffi::CStr = c"newinstance,ptmxmode=0666,mode=0620";

/// The `/etc` files the view makes up instead of showing the host's.
const SYNTHETIC: &[&str] = &["passwd", "group", "hosts"];

/// One bind mount of the setup: `source` at `target`, then remounted with `flags`.
struct Bind {
    source: CString,
    target: CString,
    flags: c_ulong,
}

/// Everything the setup child reads, prepared before the fork.
struct Setup {
    user: bool,
    setgroups: CString,
    uid_map_path: CString,
    gid_map_path: CString,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    root: CString,
    binds: Vec<Bind>,
    hostname: &'static [u8],
    /// The skeleton's `proc` directory, where the setup child tries a `/proc` of a pid
    /// namespace of its own.
    proc_dir: CString,
    /// The skeleton's `dev/pts`, where it tries a `devpts` of its own.
    pts_dir: CString,
    /// In a user namespace of the view's own: the per-user kernel counters it bounds, with
    /// the value written (see [`USER_LIMITS`]).
    user_limits: Vec<(CString, Vec<u8>)>,
}

/// Per-user kernel counters that any process of a uid charges host-wide (128 inotify
/// instances by default: a command holding them all gives every host process of the
/// server's user EMFILE). In the view's own user namespace each is set to half the host's
/// value, so the server's commands together can take at most half, and the rest stays for
/// the host. The kernel charges a user namespace's counts to its parent too. A root server
/// has no user namespace of its own, so there these stay host-wide (THREAT_MODEL).
const USER_LIMITS: &[&str] = &[
    "max_inotify_instances",
    "max_inotify_watches",
    "max_fanotify_groups",
    "max_fanotify_marks",
];

impl View {
    /// Makes the namespaces and the fresh root for `spec`, with the root of the calls'
    /// temporary directories bound read-write at its host path, or says why it cannot.
    pub(crate) fn create(spec: &ConfinementSpec, tmp_root: &Path) -> Result<View, String> {
        let parent = std::env::temp_dir();
        let parent = std::fs::canonicalize(&parent)
            .map_err(|e| format!("the temporary directory {}: {e}", parent.display()))?;
        if parent.starts_with(&spec.jail_root) {
            return Err("the server's temporary directory lies inside the jail".into());
        }
        rundir::remove_stale(&parent, PREFIX);
        let dir = rundir::make(&parent, PREFIX, 0o700)?;
        let view = match build(spec, &dir, tmp_root) {
            Ok((mut entries, user, pid, pts, limited)) => View {
                user_limits: limited,
                entries: {
                    // Under egress each command makes a network namespace of its own
                    // instead of entering the view's.
                    if spec.egress {
                        entries.retain(|(_, ns)| ns.flag != libc::CLONE_NEWNET);
                    }
                    entries
                },
                network: if spec.egress {
                    "a network namespace of its own per command, whose only way out is the server's proxy"
                } else {
                    "loopback-only network (the view's own namespace, also in network mode open)"
                },
                user,
                pid,
                pts,
                dir,
            },
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        Ok(view)
    }

    /// The files of the view that are not the host's (its synthetic `/etc`), which the
    /// Landlock ruleset must let commands read.
    pub(crate) fn own_files(&self) -> Vec<PathBuf> {
        SYNTHETIC
            .iter()
            .map(|name| self.dir.join("etc").join(name))
            .collect()
    }

    /// Whether each command gets a devpts of its own (a pid namespace, and a kernel that
    /// mounts devpts here).
    pub(crate) fn own_pts(&self) -> bool {
        self.pid.is_ok() && self.pts
    }

    /// Whether commands may open `/dev/tty`: only where each is in a session of its own
    /// (its init calls setsid), so that it has no controlling terminal and the open fails,
    /// instead of reaching the terminal the server was started from.
    pub(crate) fn tty(&self) -> bool {
        self.pid.is_ok()
    }

    /// The namespaces a command is in, for the reports: the view's, and its own pid (and
    /// mount) namespace where it gets one.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.entries.iter().map(|(_, ns)| ns.report).collect();
        if self.pid.is_ok() {
            names.push("pid");
        }
        if self.network.starts_with("a network namespace of its own") {
            names.push("net (its own)");
        }
        names
    }

    /// What a command can see, for the reports.
    pub(crate) fn visible(&self) -> String {
        let counters = if self.user_limits {
            "; per-user kernel counters (inotify and fanotify instances and watches) bounded to half the host's for all commands together"
        } else {
            "; per-user kernel counters (inotify, fanotify) are the host's (no user namespace of the view's own)"
        };
        let view = self.visible_view();
        format!("{view}{counters}")
    }

    fn visible_view(&self) -> String {
        match &self.pid {
            Ok(()) => format!(
                "{VISIBLE}; {}; a pid namespace of its own with its /proc (read-only): it is the child of that namespace's init, sees no other process, and every process it leaves behind dies with it; a session of its own (no controlling terminal, so /dev/tty opens nothing){}",
                self.network,
                if self.pts {
                    "; a devpts of its own (/dev/pts, /dev/ptmx) for pseudo-terminals"
                } else {
                    ""
                }
            ),
            Err(why) => format!(
                "{VISIBLE}; {}; the host's pid namespace and no /proc ({why}); Landlock's scoping refuses signals to other processes",
                self.network
            ),
        }
    }

    /// Enters every namespace of the view. Runs in the spawn child, before its chdir: the
    /// mount namespace's root becomes its root and cwd.
    ///
    /// # Safety
    /// Only in the child made by [`crate::spawn::spawn`]: it changes its namespaces for good.
    pub(crate) unsafe fn enter(&self) -> Result<(), c_int> {
        for (fd, ns) in &self.entries {
            // SAFETY: setns on a namespace descriptor this view owns and keeps open.
            if unsafe { libc::syscall(libc::SYS_setns, fd.as_raw_fd(), ns.flag) } != 0 {
                return Err(errno());
            }
        }
        Ok(())
    }
}

impl Drop for View {
    fn drop(&mut self) {
        // The skeleton holds only empty directories, empty files and symlinks (removed, not
        // followed); the mounts on it lived in the view's namespace, never the host's.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn cstring(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))
}

/// `root` joined with the absolute `path`.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Lays out the skeleton and the bind list, then makes the namespaces in a child.
type Entries = Vec<(OwnedFd, &'static Namespace)>;

/// What the setup found: the namespaces, whether there is a user namespace, whether pid
/// namespaces work (or why not), whether devpts does, and whether the per-user counters
/// were bounded.
type Built = (Entries, bool, Result<(), String>, bool, bool);

fn build(spec: &ConfinementSpec, dir: &Path, tmp_root: &Path) -> Result<Built, String> {
    let root = dir.join("root");
    let etc = dir.join("etc");
    let proc_dir = root.join("proc");
    let pts_dir = root.join("dev/pts");
    for d in [&root, &etc, &proc_dir, &root.join("dev"), &pts_dir] {
        std::fs::create_dir(d).map_err(|e| format!("cannot make {}: {e}", d.display()))?;
    }
    std::os::unix::fs::symlink("pts/ptmx", root.join("dev/ptmx"))
        .map_err(|e| format!("cannot make the view's /dev/ptmx: {e}"))?;
    let user = !rustix::process::geteuid().is_root();
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();

    let synthetic = synthetic_etc(uid, gid);
    let mut binds: Vec<(PathBuf, PathBuf, c_ulong)> = Vec::new();
    let ro = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    for (name, body) in &synthetic {
        let source = etc.join(name);
        std::fs::write(&source, body).map_err(|e| format!("cannot write {name}: {e}"))?;
        binds.push((source, Path::new("/etc").join(name), ro));
    }
    let devices: Vec<&Path> = HARMLESS_DEVICES
        .iter()
        .map(|(d, _)| Path::new(*d))
        .chain([Path::new(TTY)])
        .filter(|d| d.exists())
        .collect();
    for d in &devices {
        // Read-only: writes to a device file ignore it, but chmod and chown of the host's
        // inode (uid 0 owns /dev/null) are refused.
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC;
        binds.push((d.to_path_buf(), d.to_path_buf(), flags));
    }
    let mut jail_flags = libc::MS_NOSUID | libc::MS_NODEV;
    if !spec.exec_in_jail {
        jail_flags |= libc::MS_NOEXEC;
    }
    for writable in std::iter::once(&spec.jail_root)
        .chain(&spec.write_paths)
        .map(PathBuf::as_path)
        .chain([tmp_root])
    {
        // Canonical paths (the load canonicalizes them): no symlink to mirror.
        binds.push((writable.to_path_buf(), writable.to_path_buf(), jail_flags));
    }
    if let Some(home) = &spec.home {
        binds.push((home.clone(), home.clone(), ro));
    }
    // Each on itself, read-only, on top of the write path that holds it: a mount point
    // cannot be written, removed or renamed, and its directory (a mount point too) cannot be
    // moved away.
    for file in &spec.read_only_files {
        binds.push((file.clone(), file.clone(), ro | jail_flags));
    }
    for dir in &spec.pinned_dirs {
        binds.push((dir.clone(), dir.clone(), jail_flags));
    }
    for p in &spec.read_paths {
        let synthetic_file = synthetic
            .iter()
            .any(|(name, _)| p == &Path::new("/etc").join(name));
        if !p.exists() || synthetic_file || devices.contains(&p.as_path()) {
            continue;
        }
        mirror_symlinks(&root, p)?;
        let real = std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?;
        binds.push((real.clone(), real, ro));
    }
    // Parents before children, so that a bind inside another lands on top of it.
    binds.sort_by_key(|(_, target, _)| target.components().count());
    binds.dedup_by(|a, b| a.1 == b.1);
    let mut prepared = Vec::with_capacity(binds.len());
    for (source, target, flags) in &binds {
        let at = under(&root, target);
        let is_dir = std::fs::metadata(source)
            .map_err(|e| format!("{}: {e}", source.display()))?
            .is_dir();
        make_mount_point(&root, &at, is_dir)?;
        prepared.push(Bind {
            source: cstring(source)?,
            target: cstring(&at)?,
            flags: *flags,
        });
    }
    let setup = Setup {
        user,
        setgroups: cstring(Path::new("/proc/self/setgroups"))?,
        uid_map_path: cstring(Path::new("/proc/self/uid_map"))?,
        gid_map_path: cstring(Path::new("/proc/self/gid_map"))?,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        root: cstring(&root)?,
        binds: prepared,
        hostname: b"safe-mcp",
        proc_dir: cstring(&proc_dir)?,
        pts_dir: cstring(&pts_dir)?,
        user_limits: if user {
            halved_user_limits()?
        } else {
            Vec::new()
        },
    };
    let (entries, pid, pts, limited) = run_setup(&setup)?;
    Ok((entries, user, pid, pts, limited))
}

/// Each of [`USER_LIMITS`] that this kernel has, with half the host's value.
fn halved_user_limits() -> Result<Vec<(CString, Vec<u8>)>, String> {
    let mut out = Vec::new();
    for name in USER_LIMITS {
        let path = Path::new("/proc/sys/user").join(name);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // an older kernel without this counter
        };
        let Ok(host) = text.trim().parse::<u64>() else {
            continue;
        };
        out.push((cstring(&path)?, (host / 2).max(1).to_string().into_bytes()));
    }
    Ok(out)
}

/// The controlling terminal's device, bound into the view (see [`View::tty`]).
pub(crate) const TTY: &str = "/dev/tty";

/// passwd and group with root, nobody and the server's own user; hosts with localhost.
fn synthetic_etc(uid: u32, gid: u32) -> Vec<(&'static str, String)> {
    let mut passwd = String::from(
        "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    );
    let mut group = String::from("root:x:0:\nnogroup:x:65534:\n");
    if uid != 0 && uid != 65534 {
        passwd.push_str(&format!(
            "safe-mcp:x:{uid}:{gid}:safe-mcp server:/nonexistent:/usr/sbin/nologin\n"
        ));
    }
    if gid != 0 && gid != 65534 {
        group.push_str(&format!("safe-mcp:x:{gid}:\n"));
    }
    vec![
        ("passwd", passwd),
        ("group", group),
        ("hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n".to_owned()),
    ]
}

/// Where a read path is, or passes through, a symlink on the host, the skeleton gets the
/// same symlink (`/bin -> usr/bin`), so the path resolves in the view as on the host.
fn mirror_symlinks(root: &Path, path: &Path) -> Result<(), String> {
    let mut prefix = PathBuf::from("/");
    for component in path.components().skip(1) {
        prefix.push(component);
        let Ok(meta) = std::fs::symlink_metadata(&prefix) else {
            return Ok(());
        };
        if meta.file_type().is_symlink() {
            let target =
                std::fs::read_link(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
            let at = under(root, &prefix);
            if std::fs::symlink_metadata(&at).is_err() {
                make_mount_point(root, at.parent().unwrap_or(root), true)?;
                std::os::unix::fs::symlink(&target, &at)
                    .map_err(|e| format!("cannot mirror {}: {e}", prefix.display()))?;
            }
            // The rest resolves through the link, to a canonical path bound on its own.
            return Ok(());
        }
    }
    Ok(())
}

/// Makes `at` (a directory or an empty file) and its parents inside the skeleton, never
/// through a symlink: every mount target is a canonical host path, whose prefixes are real
/// directories, while the skeleton's symlinks sit only where the host has symlinks.
fn make_mount_point(root: &Path, at: &Path, dir: bool) -> Result<(), String> {
    let parent = if dir { at } else { at.parent().unwrap_or(root) };
    let mut built = root.to_path_buf();
    for component in parent
        .strip_prefix(root)
        .unwrap_or(Path::new(""))
        .components()
    {
        built.push(component);
        match std::fs::symlink_metadata(&built) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "{} is not a directory in the view's skeleton",
                    built.display()
                ));
            }
            Err(_) => std::fs::create_dir(&built)
                .map_err(|e| format!("cannot make {}: {e}", built.display()))?,
        }
    }
    if !dir && std::fs::symlink_metadata(at).is_err() {
        std::fs::File::create(at).map_err(|e| format!("cannot make {}: {e}", at.display()))?;
    }
    Ok(())
}

/// What the setup child was doing when it failed.
const SETUP_STEPS: &[&str] = &[
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
const REPORT_BYTES: usize = 12;

/// Forks the setup child, waits until it stands in the finished view, opens its namespaces,
/// then lets it exit. Also says whether commands can have pid namespaces of their own.
fn run_setup(setup: &Setup) -> Result<(Entries, Result<(), String>, bool, bool), String> {
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
unsafe fn setup_child(setup: &Setup, ready: c_int, go: c_int) -> ! {
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

/// What the setup child built: whether commands can have pid namespaces (or the probe's
/// errno), whether devpts works, whether the per-user counters were bounded.
type ChildBuilt = (Result<(), c_int>, bool, bool);

/// The view's steps, in order. Returns the failed step's index and errno, or whether
/// commands can have pid namespaces of their own (see [`placeholder_proc`]).
///
/// # Safety
/// Only in the forked setup child.
unsafe fn build_in_child(s: &Setup) -> Result<ChildBuilt, (u8, c_int)> {
    let fail = |step: u8| (step, errno());
    let mut limited = false;
    if s.user {
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
        limited = !s.user_limits.is_empty();
        for (path, value) in &s.user_limits {
            // SAFETY: opens a NUL-terminated path prepared by the parent.
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                limited = false;
                continue;
            }
            // SAFETY: writes prepared bytes to the descriptor just opened.
            let n = unsafe { libc::write(fd, value.as_ptr().cast(), value.len()) };
            // SAFETY: closes the descriptor just opened.
            unsafe { libc::close(fd) };
            limited &= n == value.len() as isize;
        }
    }
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
    // pivot_root(".", "."): the old root is stacked under the new one, then detached.
    // SAFETY: a prepared NUL-terminated path.
    if unsafe { libc::chdir(s.root.as_ptr()) } != 0 {
        return Err(fail(11));
    }
    let dot = c".".as_ptr();
    // SAFETY: static NUL-terminated strings.
    if unsafe { libc::syscall(libc::SYS_pivot_root, dot, dot) } != 0 {
        return Err(fail(11));
    }
    // SAFETY: a static NUL-terminated string.
    if unsafe { libc::umount2(dot, libc::MNT_DETACH) } != 0 {
        return Err(fail(11));
    }
    // SAFETY: a static NUL-terminated string.
    if unsafe { libc::chdir(c"/".as_ptr()) } != 0 {
        return Err(fail(11));
    }
    Ok((pid, pts, limited))
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
unsafe fn placeholder_proc(s: &Setup) -> Result<(), c_int> {
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
unsafe fn remount(target: &CString, flags: c_ulong) -> Result<(), c_int> {
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
            libc::MS_BIND | libc::MS_REMOUNT | flags | keep,
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
