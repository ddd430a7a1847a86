//! The view's fixed parts: which namespaces, in which order, the per-command ones, the
//! mount options of `/proc` and devpts, the synthetic `/etc` files and the user limits halved.

use std::ffi::{c_int, c_ulong};
use std::os::fd::OwnedFd;

/// What a command can see in the view, for the reports.
pub(super) const VISIBLE: &str = "the jail (read-write, nosuid, nodev), the read paths and HOME (read-only), /dev/{null,zero,full,random,urandom} (read-only binds), a synthetic /etc/passwd, /etc/group and /etc/hosts; nothing else of the host's filesystem";

pub(super) const PREFIX: &str = "safe-mcp-view-";

/// One namespace of the view: its name under `/proc/<pid>/ns/`, its `CLONE_NEW*` flag, and
/// its name in the reports.
pub(super) struct Namespace {
    pub(super) proc_name: &'static str,
    pub(super) flag: c_int,
    pub(super) report: &'static str,
}

/// The view's namespaces, in the order a child enters them: the user namespace first, since
/// it is what grants the right to enter the others.
pub(super) const NAMESPACES: &[Namespace] = &[
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
pub(super) const SYNTHETIC: &[&str] = &["passwd", "group", "hosts"];

/// Per-user kernel counters that any process of a uid charges host-wide (128 inotify
/// instances by default: a command holding them all gives every host process of the
/// server's user EMFILE). In the view's own user namespace each is set to half the host's
/// value, so the server's commands together can take at most half, and the rest stays for
/// the host. The kernel charges a user namespace's counts to its parent too. A root server
/// has no user namespace of its own, so there these stay host-wide (THREAT_MODEL).
pub(super) const USER_LIMITS: &[&str] = &[
    "max_inotify_instances",
    "max_inotify_watches",
    "max_fanotify_groups",
    "max_fanotify_marks",
];

/// Lays out the skeleton and the bind list, then makes the namespaces in a child.
pub(super) type Entries = Vec<(OwnedFd, &'static Namespace)>;

/// The controlling terminal's device, bound into the view (see [`super::View::tty`]).
pub(crate) const TTY: &str = "/dev/tty";
