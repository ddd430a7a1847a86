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

use std::ffi::c_int;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use safe_mcp_contract::ConfinementSpec;

use crate::rundir;
use crate::step::errno;

use build::build;
use consts::{Namespace, PREFIX, SYNTHETIC, VISIBLE};

pub(crate) use child::loopback_up;
pub(crate) use consts::{PER_COMMAND, PROC_FLAGS, PTS_FLAGS, PTS_OPTIONS, TTY};

mod build;
mod child;
mod consts;
mod counters;
mod groups;
mod helpers;
mod programs;

pub(crate) use counters::Counters;
pub(crate) use groups::GroupMounts;

/// The namespaces every command enters, made once.
pub(crate) struct View {
    /// Each namespace's descriptor, in [`consts::NAMESPACES`] order (the user namespace first, when
    /// there is one).
    entries: Vec<(OwnedFd, &'static Namespace)>,
    /// Whether the view has a user namespace of its own (an unprivileged server).
    pub(crate) user: bool,
    /// Whether each command gets a pid namespace (and a mount namespace for its `/proc`) of
    /// its own, or why not: the setup child tried one.
    pub(crate) pid: Result<(), String>,
    /// Whether the kernel mounts a private `devpts` here (each command then gets its own).
    pts: bool,
    /// Whether the per-user kernel counters ([`consts::USER_LIMITS`]) are bounded for commands.
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

impl View {
    /// Makes the namespaces and the fresh root for `spec`, with the root of the calls'
    /// temporary directories bound read-write at its host path, or says why it cannot.
    /// `executable`: what the exec allowlist grants every stage, resolved (empty when it is
    /// off): the view's program trees are noexec but for these. `held`: what only some
    /// stages may execute, noexec here too ([`GroupMounts`] makes it executable for them).
    pub(crate) fn create(
        spec: &ConfinementSpec,
        tmp_root: &Path,
        executable: &[PathBuf],
        held: &[PathBuf],
    ) -> Result<View, String> {
        let dir = rundir::create_outside(&spec.jail_root, PREFIX).map_err(|e| e.to_string())?;
        let view = match build(spec, &dir, tmp_root, executable, held) {
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

    /// The private view, with what only some stages may execute (`groups`, each exec
    /// group's own paths) held `noexec` in it and bound executable by their stages
    /// ([`GroupMounts`]); `every`: what every stage may execute. Where commands get no
    /// mount namespace of their own (no pid namespace), nothing could bind a group's files
    /// for its stages: the view is made again with every group's files executable too, as
    /// before (the loader's reach is then theirs too, a ceiling THREAT_MODEL states).
    pub(crate) fn create_with_groups(
        spec: &ConfinementSpec,
        tmp_root: &Path,
        every: &[PathBuf],
        groups: &[Vec<PathBuf>],
    ) -> (Result<View, String>, GroupMounts) {
        let mounts = match GroupMounts::new(groups, &spec.read_paths) {
            Ok(mounts) => mounts,
            Err(e) => return (Err(e), GroupMounts::default()),
        };
        let held: Vec<PathBuf> = groups.iter().flatten().cloned().collect();
        let all: Vec<PathBuf> = every.iter().chain(&held).cloned().collect();
        if mounts.is_empty() {
            return (View::create(spec, tmp_root, &all, &[]), mounts);
        }
        match View::create(spec, tmp_root, every, &held) {
            Ok(view) if view.pid.is_ok() => (Ok(view), mounts),
            Ok(view) => {
                drop(view);
                let again = View::create(spec, tmp_root, &all, &[]);
                (again, GroupMounts::default())
            }
            Err(e) => (Err(e), GroupMounts::default()),
        }
    }

    /// The view's user namespace (if it has one) and network namespace, as descriptor and
    /// `CLONE_NEW*` flag, for a helper that makes sockets in the latter
    /// ([`crate::inner::SocketFactory`]).
    pub(crate) fn network_entries(&self) -> Vec<(std::os::fd::RawFd, c_int)> {
        self.entries
            .iter()
            .filter(|(_, ns)| matches!(ns.flag, libc::CLONE_NEWUSER | libc::CLONE_NEWNET))
            .map(|(fd, ns)| (fd.as_raw_fd(), ns.flag))
            .collect()
    }

    /// Whether commands enter the view's own network namespace (loopback only), which they
    /// then share: everywhere but under egress, where each makes one of its own.
    pub(crate) fn shares_network(&self) -> bool {
        self.entries
            .iter()
            .any(|(_, ns)| ns.flag == libc::CLONE_NEWNET)
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

    /// Says that the per-user counters are bounded for commands (a root server's
    /// [`Counters`]).
    pub(crate) fn counters_bounded(&mut self) {
        self.user_limits = true;
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
