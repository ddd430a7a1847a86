//! The cgroups a root server puts commands in: a `pids` group, so that a fork bomb meets a
//! bound and not only the per-user RLIMIT_NPROC, and a `memory` group per call (issue 33,
//! item 4), so that the memory limit counts memory used, not address space reserved: V8,
//! the JVM and wasm runtimes reserve many gigabytes they never touch, and RLIMIT_AS refused
//! them (`node`'s `fetch()` died with "WebAssembly out of memory" under 4 GiB).
//!
//! Both are cgroup v1 controllers (this project's machines run the hybrid layout, whose v2
//! tree has neither); where none is writable (an unprivileged server, a v2-only host) the
//! rlimits stay the bound.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::fault::AtPath;

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
        let dir = executor_dir(Path::new(Self::ROOT));
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

impl PidsCgroup {
    /// Removes the group, once every command has exited (the tree kill ensures it).
    pub(super) fn remove(&self) {
        remove_group(&self.dir);
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes the group `dir` of processes that have all exited. The kernel keeps a group
/// populated until each exited task is released, which trails the reap: under load the
/// last call's processes held it for a while after the server had its exit status (rmdir
/// then fails with EBUSY, and a group was left behind at exit). So EBUSY is tried again,
/// for up to two seconds.
fn remove_group(dir: &Path) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while let Err(e) = std::fs::remove_dir(dir) {
        if e.raw_os_error() != Some(libc::EBUSY) || std::time::Instant::now() >= until {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The parent of every call's memory group of one executor, in the v1 `memory` hierarchy,
/// and the groups no call holds now. A group is made once and reused: making and removing
/// one per call cost more than the rest of the memory limit (mkdir, rmdir and the kernel's
/// teardown of a memory cgroup are a quarter of a millisecond here). What a reused group
/// still holds of the last call is page cache, which the kernel reclaims under the limit.
pub(super) struct MemoryCgroups {
    dir: PathBuf,
    /// The limit of each call's group, in bytes.
    limit: u64,
    made: std::sync::atomic::AtomicU64,
    free: Pool,
}

/// The groups waiting for a call.
type Pool = std::sync::Arc<std::sync::Mutex<Vec<Group>>>;

/// One memory group: its directory, its `tasks` file open for writing, and its kernel OOM
/// kill count when it was last handed out.
struct Group {
    dir: PathBuf,
    tasks: OwnedFd,
    kills: u64,
}

impl Group {
    /// The kernel's count of processes of this group killed for its limit.
    fn oom_kills(dir: &Path) -> u64 {
        std::fs::read_to_string(dir.join("memory.oom_control"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("oom_kill "))
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }
}

impl MemoryCgroups {
    const ROOT: &'static str = "/sys/fs/cgroup/memory";

    /// Whether a server run by this user would use them (without making any).
    pub(super) fn would_be_used() -> bool {
        rustix::process::geteuid().is_root()
            && Path::new(Self::ROOT)
                .join("memory.limit_in_bytes")
                .is_file()
    }

    /// The executor's parent group, or None where memory groups cannot be made (the
    /// rlimit is then the bound). Groups of killed servers that are empty are removed.
    pub(super) fn create(limit: u64) -> Option<MemoryCgroups> {
        if !Self::would_be_used() {
            return None;
        }
        let dir = executor_dir(Path::new(Self::ROOT));
        std::fs::create_dir(&dir).ok()?;
        let cgroups = MemoryCgroups {
            dir,
            limit,
            made: std::sync::atomic::AtomicU64::new(0),
            free: Pool::default(),
        };
        // One call's group made now: a kernel that refuses it refuses at start, and the
        // first call finds it ready.
        drop(cgroups.for_call().ok()?);
        Some(cgroups)
    }

    /// A group for one call, limited to the policy's memory: every stage joins it before it
    /// can allocate, so the whole command tree counts against one limit. Reused when one is
    /// free, made otherwise.
    pub(super) fn for_call(&self) -> Result<CallMemory, AtPath> {
        let reused = self.free.lock().ok().and_then(|mut free| free.pop());
        let group = match reused {
            Some(group) => group,
            None => self.make()?,
        };
        Ok(CallMemory {
            group: Some(group),
            pool: std::sync::Arc::clone(&self.free),
        })
    }

    fn make(&self) -> Result<Group, AtPath> {
        let n = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.dir.join(format!("call-{n}"));
        std::fs::create_dir(&dir).map_err(|e| AtPath::new(&dir, e))?;
        let configured = (|| {
            let limit = self.limit.to_string();
            let write = |name: &str| {
                let file = dir.join(name);
                std::fs::write(&file, &limit).map_err(|e| AtPath::new(file, e))
            };
            write("memory.limit_in_bytes")?;
            // With swap accounting, swap counts too: a command must not page out past it.
            if dir.join("memory.memsw.limit_in_bytes").exists() {
                write("memory.memsw.limit_in_bytes")?;
            }
            let tasks = dir.join("tasks");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&tasks)
                .map_err(|e| AtPath::new(tasks, e))
        })();
        match configured {
            Ok(tasks) => Ok(Group {
                kills: Group::oom_kills(&dir),
                dir,
                tasks: tasks.into(),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }
}

impl MemoryCgroups {
    /// Removes every call's group and the parent, once every call has given its group back.
    pub(super) fn remove(&self) {
        if let Ok(mut free) = self.free.lock() {
            for group in free.drain(..) {
                remove_group(&group.dir);
            }
        }
        remove_group(&self.dir);
    }
}

impl Drop for MemoryCgroups {
    fn drop(&mut self) {
        // Every call has given its group back (the executor outlives its calls).
        self.remove();
    }
}

/// One call's memory group; given back to the pool when dropped (after every process of
/// the call is gone).
pub(crate) struct CallMemory {
    group: Option<Group>,
    pool: Pool,
}

impl CallMemory {
    /// Its `tasks` file: each stage writes "0" to join.
    pub(super) fn tasks(&self) -> Option<&OwnedFd> {
        self.group.as_ref().map(|g| &g.tasks)
    }

    /// Whether the kernel killed a process of the call for the limit; the group goes back
    /// to the pool.
    pub(crate) fn finish(mut self) -> bool {
        let Some(mut group) = self.group.take() else {
            return false;
        };
        let kills = Group::oom_kills(&group.dir);
        let hit = kills > group.kills;
        group.kills = kills;
        if let Ok(mut free) = self.pool.lock() {
            free.push(group);
        }
        hit
    }
}

impl Drop for CallMemory {
    fn drop(&mut self) {
        if let Some(mut group) = self.group.take() {
            group.kills = Group::oom_kills(&group.dir);
            if let Ok(mut free) = self.pool.lock() {
                free.push(group);
            }
        }
    }
}

/// The name of a new group of this executor beneath a controller's `root`, once the groups
/// killed servers left there are removed (empty ones go; rmdir fails otherwise). One group
/// per executor, even when a process makes several (a test binary does): one executor's
/// drop must not take away the group another's commands join.
fn executor_dir(root: &Path) -> PathBuf {
    remove_stale(root);
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    root.join(format!("safe-mcp-{}-{n}", std::process::id()))
}

/// Removes the empty groups beneath `root` that servers which were killed left.
fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("safe-mcp-")
            .map(|rest| rest.split('-').next());
        if let Some(Some(pid)) = pid
            && !Path::new("/proc").join(pid).exists()
        {
            // A memory parent holds its calls' groups: those first (rmdir fails while any
            // process is left in one).
            if let Ok(calls) = std::fs::read_dir(entry.path()) {
                for call in calls.flatten().filter(|c| c.path().is_dir()) {
                    let _ = std::fs::remove_dir(call.path());
                }
            }
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}
