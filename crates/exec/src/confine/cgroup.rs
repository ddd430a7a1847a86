//! The pids cgroup a root server puts each command in, so that a fork bomb meets a
//! per-command bound and not only the per-user RLIMIT_NPROC.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// A cgroup v1 `pids` group for this server's commands. RLIMIT_NPROC does not bind root, so a
/// root server caps its commands' process count here instead (when the controller exists).
pub(super) struct PidsCgroup {
    pub(super) dir: PathBuf,
    /// The group's `tasks` file, opened for writing once; each child writes "0" to join.
    /// `tasks` moves only the writing thread, which for the single-threaded child is the
    /// whole process; unlike `cgroup.procs` it skips the kernel's global threadgroup lock,
    /// whose write side waits for an RCU grace period: 5–24 ms on the first command after
    /// an idle spell, measured on this machine kind, against ~0.05 ms.
    pub(super) tasks: OwnedFd,
}

impl PidsCgroup {
    const ROOT: &'static str = "/sys/fs/cgroup/pids";

    /// Whether a server run by this user would use one (without making it).
    pub(super) fn would_be_used() -> bool {
        rustix::process::geteuid().is_root() && Path::new(Self::ROOT).is_dir()
    }

    pub(super) fn create(max: u64) -> Option<PidsCgroup> {
        if !Self::would_be_used() {
            return None;
        }
        // Groups left by servers that were killed: empty ones can go (rmdir fails otherwise).
        if let Ok(entries) = std::fs::read_dir(Self::ROOT) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let pid = name
                    .strip_prefix("safe-mcp-")
                    .map(|rest| rest.split('-').next());
                if let Some(Some(pid)) = pid
                    && !Path::new("/proc").join(pid).exists()
                {
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
        // One group per executor, even when a process makes several (a test binary does):
        // one executor's drop must not take away the group another's commands join.
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Path::new(Self::ROOT).join(format!("safe-mcp-{}-{n}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir)
            && e.kind() != std::io::ErrorKind::AlreadyExists
        {
            return None;
        }
        std::fs::write(dir.join("pids.max"), max.to_string()).ok()?;
        let tasks = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("tasks"))
            .ok()?
            .into();
        Some(PidsCgroup { dir, tasks })
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // Succeeds only once every command has exited, which the tree kill ensures.
        let _ = std::fs::remove_dir(&self.dir);
    }
}
