//! What the kernel enforces on every command (DESIGN §5), built once in the parent.
//!
//! Owns the Landlock ruleset, the seccomp program and the rlimits. Everything that allocates,
//! opens paths or can fail with a message happens here, at server start, in the parent. The
//! child only makes syscalls (see `Confinement::apply_in_child`): it runs in the server's
//! own memory until exec (the `spawn` module), where allocating or taking a lock would race the
//! server's other threads. We chose that over re-executing a helper binary because a second
//! `exec` per command would double the spawn cost that the benchmark measures.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use safe_mcp_contract::{
    ConfinementReport, ConfinementSpec, ConfinementSummary, EGRESS_PORT, EgressReport,
    HARMLESS_DEVICES, LandlockReport, NamespaceMode, ProcessLimits, RlimitReport, SandboxMode,
    SeccompReport, ViewReport,
};

use crate::egress::Tier;
use crate::seccomp::{self, Inet};
use crate::step::{Step, errno};
use crate::tmp::{CallTmp, TmpRoot};
use crate::view::View;

/// The Landlock ABI whose rights we request: filesystem (incl. truncate, ioctl on devices),
/// TCP bind/connect (v4) and signal / abstract-socket scoping (v6).
const TARGET_ABI: ABI = ABI::V6;

/// Why confinement could not be prepared. Fatal at startup under `enforce`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    /// The Landlock ruleset could not be built as required.
    #[error("Landlock cannot be enforced on this kernel: {0}")]
    Landlock(String),
    /// The seccomp program could not be compiled.
    #[error("the seccomp filter could not be built: {0}")]
    Seccomp(String),
    /// The root of the commands' temporary directories could not be made.
    #[error("the commands' temporary directories: {0}")]
    Tmp(String),
    /// `namespaces = "required"` and no private view could be made.
    #[error("namespaces = \"required\", but no private view of the machine could be made: {0}")]
    Namespaces(String),
    /// Egress is on, but commands cannot be held to the proxy.
    #[error("egress (mode = \"allowlist\") cannot be enforced: {0}")]
    Egress(String),
}

/// The confinement applied to every command of one server.
pub struct Confinement {
    mode: SandboxMode,
    /// The Landlock rules, opened once; each call's ruleset is built from them.
    landlock: Option<LandlockRules>,
    /// The root of every call's private temporary directory.
    tmp_root: TmpRoot,
    /// Its path, for the init's remount ([`Confinement::hold_tmp_root`]).
    tmp_root_c: CString,
    /// The flags of the writable mounts of the view (nosuid, nodev, and noexec unless
    /// exec_in_jail), which the init's remounts keep.
    tmp_flags: libc::c_ulong,
    /// The seccomp filter; its length fits the kernel's 16-bit field (`seccomp::build`).
    seccomp: Option<seccomp::Program>,
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    /// Which capability sets the child clears; `None` under `off`.
    capabilities: Option<CapabilityDrop>,
    /// The private view every command enters, where one could be made.
    view: Option<View>,
    pids_cgroup: Option<PidsCgroup>,
    /// Under egress: how commands reach the proxy, or why they cannot (then nothing runs).
    egress: Option<Result<Tier, String>>,
    report: ConfinementReport,
    summary: ConfinementSummary,
}

/// A cgroup v1 `pids` group for this server's commands. RLIMIT_NPROC does not bind root, so a
/// root server caps its commands' process count here instead (when the controller exists).
struct PidsCgroup {
    dir: PathBuf,
    /// The group's `tasks` file, opened for writing once; each child writes "0" to join.
    /// `tasks` moves only the writing thread, which for the single-threaded child is the
    /// whole process; unlike `cgroup.procs` it skips the kernel's global threadgroup lock,
    /// whose write side waits for an RCU grace period: 5–24 ms on the first command after
    /// an idle spell, measured on this machine kind, against ~0.05 ms.
    tasks: OwnedFd,
}

impl PidsCgroup {
    const ROOT: &'static str = "/sys/fs/cgroup/pids";

    /// Whether a server run by this user would use one (without making it).
    fn would_be_used() -> bool {
        rustix::process::geteuid().is_root() && Path::new(Self::ROOT).is_dir()
    }

    fn create(max: u64) -> Option<PidsCgroup> {
        if !Self::would_be_used() {
            return None;
        }
        // Groups left by servers that were killed: empty ones can go (rmdir fails otherwise).
        if let Ok(entries) = std::fs::read_dir(Self::ROOT) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("safe-mcp-")
                    && !Path::new("/proc").join(pid).exists()
                {
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
        let dir = Path::new(Self::ROOT).join(format!("safe-mcp-{}", std::process::id()));
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

/// How far a child can shed capabilities, decided once from what the server holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CapabilityDrop {
    /// The server holds CAP_SETPCAP (a root server): the child also empties its bounding set
    /// and locks the securebits, so neither exec nor uid 0 can give any capability back.
    Everything,
    /// Without CAP_SETPCAP the bounding set and securebits cannot change; the child still
    /// clears its effective, permitted, inheritable and ambient sets, and `no_new_privs`
    /// stops exec from granting any (a setuid or file-capability program gains nothing).
    HeldSets,
}

/// `struct __user_cap_header_struct` and `__user_cap_data_struct`, version 3 (two data words).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;
/// Every securebit set and locked except KEEP_CAPS: NOROOT (uid 0 gains nothing at exec),
/// NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, and the lock of KEEP_CAPS (left off).
const SECUREBITS_LOCKED: libc::c_ulong = 0b1110_1111;

impl CapabilityDrop {
    fn for_this_process() -> CapabilityDrop {
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        // SAFETY: capget reads the header and writes two data structs, as version 3 says.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_capget,
                std::ptr::from_mut(&mut header),
                data.as_mut_ptr(),
            )
        };
        if rc == 0 && data[0].effective & (1 << CAP_SETPCAP) != 0 {
            CapabilityDrop::Everything
        } else {
            CapabilityDrop::HeldSets
        }
    }

    fn describe(self) -> &'static str {
        match self {
            CapabilityDrop::Everything => {
                "all dropped (effective, permitted, inheritable, ambient, bounding); securebits noroot, no_setuid_fixup and no_cap_ambient_raise set and locked"
            }
            CapabilityDrop::HeldSets => {
                "effective, permitted, inheritable and ambient cleared; the bounding set stays (the server lacks CAP_SETPCAP) and no_new_privs stops exec from granting any"
            }
        }
    }

    /// Sheds the capabilities. Runs in the spawn child: syscalls on stack values only.
    ///
    /// # Safety
    /// Only in the child made by [`crate::spawn::spawn`]; it changes credentials for good.
    unsafe fn apply(self) -> Result<(), libc::c_int> {
        if self == CapabilityDrop::Everything {
            // SAFETY: prctl with integer arguments only; it sets and locks this process's
            // securebits, which needs CAP_SETPCAP (held: see `for_this_process`).
            if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS_LOCKED, 0, 0, 0) } != 0 {
                return Err(errno());
            }
            for cap in 0..64 as libc::c_ulong {
                // SAFETY: prctl with integer arguments only; it shrinks the bounding set.
                if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
                    // EINVAL: past the kernel's last capability.
                    match errno() {
                        libc::EINVAL => break,
                        other => return Err(other),
                    }
                }
            }
        }
        let clear_all = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
        // SAFETY: prctl with integer arguments only; it empties the ambient set (EINVAL on a
        // kernel without ambient capabilities, where there is nothing to clear).
        let ambient = unsafe { libc::prctl(libc::PR_CAP_AMBIENT, clear_all, 0, 0, 0) };
        if ambient != 0 && errno() != libc::EINVAL {
            return Err(errno());
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData::default(); 2];
        // SAFETY: capset reads the header and the two data structs on this stack, as
        // version 3 says; it clears the effective, permitted and inheritable sets.
        let rc =
            unsafe { libc::syscall(libc::SYS_capset, std::ptr::from_ref(&header), none.as_ptr()) };
        if rc != 0 {
            return Err(errno());
        }
        Ok(())
    }
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement")
            .field("report", &self.report)
            .finish()
    }
}

/// What a confined command of a server run by this user is left with, for `doctor`.
pub fn capability_report() -> &'static str {
    CapabilityDrop::for_this_process().describe()
}

/// The kernel's Landlock ABI version, or 0 when Landlock is unavailable.
pub fn landlock_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a NULL attr, size 0 and the VERSION flag only
    // returns the ABI number (or an error); it reads no memory and creates no descriptor.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 { 0 } else { v }
}

impl Confinement {
    /// Builds the confinement for `spec`. Under `enforce`, anything the kernel cannot fully
    /// enforce is an error; under `best-effort`, it is reported; under `off`, only rlimits apply.
    /// As root this makes the server's pids cgroup: only a server that runs commands calls it.
    pub fn new(spec: &ConfinementSpec) -> Result<Self, ConfineError> {
        let rlimits = rlimits(&spec.limits);
        let tmp_root = TmpRoot::create(&spec.jail_root).map_err(ConfineError::Tmp)?;
        let pids_cgroup = PidsCgroup::create(spec.limits.processes);
        let capabilities = (spec.mode != SandboxMode::Off).then(CapabilityDrop::for_this_process);
        // Under enforce the ruleset is built with HardRequirement: it is complete, or building
        // it fails and the server does not start. Each child restricts itself with its
        // descriptor; a kernel refusal there refuses the command (SANDBOX_UNAVAILABLE).
        let (view, view_state) = match (spec.mode, spec.namespaces) {
            (SandboxMode::Off, _) => (None, ViewState::Host("sandbox mode off".into())),
            (_, NamespaceMode::Off) => (None, ViewState::Host("namespaces = \"off\"".into())),
            (_, setting) => match View::create(spec, tmp_root.path()) {
                Ok(view) => match (&view.pid, setting) {
                    (Err(why), NamespaceMode::Required) => {
                        return Err(ConfineError::Namespaces(why.clone()));
                    }
                    _ => {
                        let state =
                            ViewState::Private(view.names(), view.visible(), view.own_pts());
                        (Some(view), state)
                    }
                },
                Err(why) if setting == NamespaceMode::Required => {
                    return Err(ConfineError::Namespaces(why));
                }
                Err(why) => {
                    eprintln!(
                        "safe-mcp: warning: namespaces = \"auto\": no private view of the machine could be made ({why}); commands see the host's filesystem, confined by Landlock and seccomp"
                    );
                    (
                        None,
                        ViewState::Host(format!("no private view could be made: {why}")),
                    )
                }
            },
        };
        let egress = spec.egress.then(|| egress_tier(spec, view.is_some()));
        if let Some(Err(why)) = &egress {
            eprintln!(
                "safe-mcp: warning: [terminal.network] mode = \"allowlist\", but no tier can hold commands to the proxy ({why}); every command is refused (SANDBOX_UNAVAILABLE)"
            );
        }
        // Each command of the private view makes an ipc namespace of its own with its pid
        // namespace; anywhere else commands would share one (the host's, or the view's).
        let own_ipc = view.as_ref().is_some_and(|v| v.pid.is_ok());
        let (landlock, seccomp) = match spec.mode {
            SandboxMode::Off => (None, None),
            mode => {
                let rules = LandlockRules::open(spec, mode == SandboxMode::Enforce, view.as_ref())?;
                // Built once here, so that a kernel refusal stops the start, not a call.
                rules.validate(tmp_root.path())?;
                rules.ruleset(tmp_root.path(), None)?;
                let inet = match (spec.network, spec.egress) {
                    (true, _) => Inet::Any,
                    (false, true) => Inet::Tcp,
                    (false, false) => Inet::None,
                };
                let switches = seccomp::Switches {
                    inet,
                    unix_sockets: spec.unix_sockets,
                    sysv_ipc: own_ipc,
                    memfd_exec: spec.exec_in_jail,
                };
                (
                    Some(rules),
                    Some(seccomp::build(switches).map_err(ConfineError::Seccomp)?),
                )
            }
        };
        // In a user namespace of its own the child holds every capability of it, so it can
        // and must drop them all, bounding set included.
        let capabilities = match (capabilities, &view) {
            (Some(_), Some(v)) if v.user => Some(CapabilityDrop::Everything),
            (c, _) => c,
        };
        let (report, summary) = describe(
            spec,
            pids_cgroup.is_some(),
            &view_state,
            capabilities,
            Some(tmp_root.path()),
            egress.as_ref(),
        );
        if spec.mode == SandboxMode::BestEffort && report.landlock.enforced != "full" {
            eprintln!(
                "safe-mcp: warning: sandbox mode best-effort: Landlock is {} on this kernel (ABI {}); commands run less confined",
                report.landlock.enforced, report.landlock.kernel_abi
            );
        }
        Ok(Confinement {
            mode: spec.mode,
            landlock,
            tmp_root_c: CString::new(tmp_root.path().as_os_str().as_bytes()).map_err(|_| {
                ConfineError::Tmp("the temporary directory's path holds a NUL byte".into())
            })?,
            tmp_flags: libc::MS_NOSUID
                | libc::MS_NODEV
                | if spec.exec_in_jail {
                    0
                } else {
                    libc::MS_NOEXEC
                },
            tmp_root,
            seccomp,
            rlimits,
            capabilities,
            view,
            pids_cgroup,
            egress,
            report,
            summary,
        })
    }

    /// What applies, as reported by explain, describe, doctor and the audit trail.
    pub fn report(&self) -> &ConfinementReport {
        &self.report
    }

    /// The compact form recorded with every run: mode, Landlock state, seccomp, network.
    pub fn summary(&self) -> &ConfinementSummary {
        &self.summary
    }

    /// What one call needs beyond the server's confinement: its temporary directory, the
    /// Landlock ruleset that lets it (and no other call) write there, and under egress the
    /// proxy port it may connect to (with the landlock tier, the call's own listener).
    pub(crate) fn for_call(&self) -> Result<CallConfinement, ConfineError> {
        let tmp = self.tmp_root.for_call().map_err(ConfineError::Tmp)?;
        let (listener, port) = match &self.egress {
            None => (None, None),
            Some(Err(why)) => return Err(ConfineError::Egress(why.clone())),
            Some(Ok(Tier::Namespace)) => (None, Some(EGRESS_PORT)),
            Some(Ok(Tier::Landlock)) => {
                let (listener, port) = crate::egress::loopback_listener()
                    .map_err(|e| ConfineError::Egress(format!("the proxy's listener: {e}")))?;
                (Some(listener), Some(port))
            }
        };
        let ruleset = match &self.landlock {
            Some(rules) => Some(rules.ruleset(tmp.path(), port)?),
            None => None,
        };
        let tmp_c = CString::new(tmp.path().as_os_str().as_bytes()).map_err(|_| {
            ConfineError::Tmp("a call's temporary directory holds a NUL byte".into())
        })?;
        Ok(CallConfinement {
            ruleset,
            tmp_c,
            tmp,
            listener,
            proxy_port: port,
        })
    }

    /// Under egress with the namespace tier: each stage makes a network namespace of its
    /// own and sends its listener back.
    pub(crate) fn own_network(&self) -> bool {
        matches!(self.egress, Some(Ok(Tier::Namespace)))
    }

    /// Whether each command gets a pid namespace (and an init) of its own in the view.
    pub(crate) fn pid_namespace(&self) -> bool {
        self.view.as_ref().is_some_and(|v| v.pid.is_ok())
    }

    /// Leaves the command only its own temporary directory writable beneath the root of
    /// every call's: the call's directory is bound onto itself, then the root is remounted
    /// read-only. So no command can `chmod` the root (which would make every later call
    /// SANDBOX_UNAVAILABLE) or another call's directory, or make anything there. The mounts
    /// are in the command's own mount namespace, which no other command shares.
    ///
    /// # Safety
    /// Only in a stage's init, in its own mount namespace, before it starts the command.
    pub(crate) unsafe fn hold_tmp_root(&self, call: &CallConfinement) -> Result<(), libc::c_int> {
        if self.view.is_none() {
            return Ok(());
        }
        let none = std::ptr::null::<libc::c_char>();
        let flags = self.tmp_flags;
        let own = call.tmp_c.as_ptr();
        let steps = [
            (own, own, libc::MS_BIND),
            (none, own, libc::MS_REMOUNT | libc::MS_BIND | flags),
            (
                none,
                self.tmp_root_c.as_ptr(),
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags,
            ),
        ];
        for (source, target, mount_flags) in steps {
            // SAFETY: NUL-terminated paths prepared before the clone (or NULL); no data.
            if unsafe { libc::mount(source, target, none, mount_flags, std::ptr::null()) } != 0 {
                return Err(errno());
            }
        }
        Ok(())
    }

    /// Adds to the call's ruleset read access beneath the freshly mounted `/proc`, and, with
    /// a devpts of the command's own, read-write and terminal ioctls beneath `/dev/pts`.
    /// The ruleset is the call's; another stage's command restricted itself already or
    /// gets a rule for a file system it cannot reach.
    ///
    /// # Safety
    /// Only in a stage's init, after its mounts and before it starts the command.
    pub(crate) unsafe fn add_own_mounts(&self, call: &CallConfinement) -> Result<(), libc::c_int> {
        let (Some(ruleset), Some(rules)) = (&call.ruleset, &self.landlock) else {
            return Ok(());
        };
        // Only the rights this kernel handles (an older one has no IOCTL_DEV, say).
        let handled = rules.attr.handled_access_fs;
        let read = (AccessFs::ReadFile | AccessFs::ReadDir).bits() & handled;
        let pts =
            (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir | AccessFs::IoctlDev)
                .bits()
                & handled;
        let mut mounts = [(c"/proc", read), (c"/dev/pts", pts)].into_iter();
        let wanted = if self.private_pts() { 2 } else { 1 };
        for (path, access) in mounts.by_ref().take(wanted) {
            // SAFETY: opens a static NUL-terminated path as an O_PATH descriptor.
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(errno());
            }
            let rc = add_path_rule(ruleset.as_raw_fd(), fd, access);
            let add_errno = errno();
            // SAFETY: closes the descriptor opened above.
            unsafe { libc::close(fd) };
            if rc != 0 {
                return Err(add_errno);
            }
        }
        Ok(())
    }

    /// Whether each command's init mounts a devpts of the command's own.
    pub(crate) fn private_pts(&self) -> bool {
        self.view.as_ref().is_some_and(View::own_pts)
    }

    /// Enters the private view, when there is one. Runs in the `CLONE_VM` child before its
    /// chdir (the view's root becomes its root and cwd).
    ///
    /// # Safety
    /// Only for the child made by [`crate::spawn::spawn`], before exec.
    pub(crate) unsafe fn enter_view(&self) -> Result<(), (Step, libc::c_int)> {
        match &self.view {
            // SAFETY: we are the spawn child, as `enter` requires.
            Some(view) => unsafe { view.enter() }.map_err(|e| (Step::View, e)),
            None => Ok(()),
        }
    }

    /// Runs in the `CLONE_VM` child before exec (see [`crate::spawn`]): syscalls on state
    /// prepared at startup, no allocation, no locks. Order (written down as Firecracker's
    /// jailer does): the pids cgroup (root only), rlimits, every capability dropped and the
    /// securebits locked, no_new_privs + Landlock, then seccomp last. Returns the step that
    /// failed and its errno.
    ///
    /// # Safety
    /// Only for the child made by [`crate::spawn::spawn`], before exec: it changes the
    /// calling process's limits and credentials for good.
    pub(crate) unsafe fn apply_in_child(
        &self,
        call: &CallConfinement,
    ) -> Result<(), (Step, libc::c_int)> {
        let fail = |step: Step| (step, errno());
        if let Some(cgroup) = &self.pids_cgroup {
            // "0" is the writing thread, here the whole child; joined before it can fork.
            // The raw syscall: glibc's write() is a cancellation point and would touch the
            // parent thread's control block, which this child shares.
            // SAFETY: writes one byte from a static string to a descriptor this
            // confinement owns and keeps open.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_write,
                    cgroup.tasks.as_raw_fd(),
                    b"0".as_ptr(),
                    1usize,
                )
            };
            if n != 1 {
                return Err(fail(Step::Limits));
            }
        }
        for (resource, limit) in &self.rlimits {
            // SAFETY: setrlimit reads the limit, which lives in this confinement.
            if unsafe { libc::setrlimit(*resource, limit) } != 0 {
                return Err(fail(Step::Limits));
            }
        }
        if self.mode == SandboxMode::Off {
            return Ok(());
        }
        if let Some(drop) = self.capabilities {
            // SAFETY: we are the spawn child, before exec, as `apply` requires.
            unsafe { drop.apply() }.map_err(|errno| (Step::Capabilities, errno))?;
        }
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(fail(Step::Sandbox));
        }
        if let Some(ruleset) = &call.ruleset {
            // SAFETY: restricts this process with a ruleset descriptor the call owns.
            let rc = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            if rc != 0 {
                return Err(fail(Step::Sandbox));
            }
        }
        if let Some(program) = &self.seccomp {
            let fprog = libc::sock_fprog {
                len: program.len() as libc::c_ushort,
                filter: program.as_ptr().cast_mut(),
            };
            // SAFETY: the kernel copies the program that `fprog` points at (kept alive by
            // this confinement; its length was checked against BPF_MAXINSNS when built).
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    std::ptr::from_ref(&fprog),
                )
            };
            if rc != 0 {
                return Err(fail(Step::Sandbox));
            }
        }
        Ok(())
    }
}

/// Which view of the machine commands get.
enum ViewState {
    /// Their own namespaces, these ones, what they see, and whether each has a devpts of
    /// its own (where terminal ioctls are granted).
    Private(Vec<&'static str>, String, bool),
    /// The host's, for this reason.
    Host(String),
    /// Not built (explain, doctor): what a server would try.
    Planned(&'static str),
}

/// The confinement `spec` would get here, described without building any of it: no
/// cgroup, no ruleset, no namespace. What `explain` and `doctor` show; a read-only call has
/// no side effect.
pub fn planned_report(spec: &ConfinementSpec) -> ConfinementReport {
    let view = match (spec.mode, spec.namespaces) {
        (SandboxMode::Off, _) => ViewState::Host("sandbox mode off".into()),
        (_, NamespaceMode::Off) => ViewState::Host("namespaces = \"off\"".into()),
        _ if namespaces_possible() => ViewState::Planned(
            "private where the server can make its namespaces at start (it tries, and says so)",
        ),
        _ => ViewState::Host("this user cannot make namespaces here".into()),
    };
    let capabilities = (spec.mode != SandboxMode::Off).then(CapabilityDrop::for_this_process);
    let egress = spec.egress.then(|| match view {
        ViewState::Planned(_) => Ok(Tier::Namespace),
        _ => egress_tier(spec, false),
    });
    describe(
        spec,
        PidsCgroup::would_be_used(),
        &view,
        capabilities,
        None,
        egress.as_ref(),
    )
    .0
}

/// The egress tier a server run by this user would use, for `doctor`.
pub(crate) fn egress_tier_here() -> String {
    if namespaces_possible() {
        "namespace (each command in a network namespace of its own whose only way out is the proxy), where the server can make its private view at start".into()
    } else if landlock_abi() >= 4 {
        "landlock (no namespaces for this user: Landlock allows TCP connect to the proxy's port only)".into()
    } else {
        format!(
            "unavailable (no namespaces for this user and Landlock ABI {} has no TCP rules): under allowlist, no command runs",
            landlock_abi()
        )
    }
}

/// Whether this user could make the view's namespaces: root, or user namespaces allowed.
pub(crate) fn namespaces_possible() -> bool {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    rustix::process::geteuid().is_root()
        || (read("/proc/sys/user/max_user_namespaces").is_some_and(|n| n != "0")
            && read("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|v| v != "0"))
}

/// The report and summary for `spec` on this kernel, for this user.
fn describe(
    spec: &ConfinementSpec,
    pids_cgroup: bool,
    view: &ViewState,
    capabilities: Option<CapabilityDrop>,
    tmp_root: Option<&Path>,
    egress: Option<&Result<Tier, String>>,
) -> (ConfinementReport, ConfinementSummary) {
    let abi = landlock_abi();
    let off = spec.mode == SandboxMode::Off;
    let landlock_state = match (spec.mode, abi) {
        (SandboxMode::Off, _) => "off",
        (_, a) if a >= TARGET_ABI as i64 => "full",
        (_, 0) => "none",
        _ => "partial",
    };
    let strings = |names: &[&'static str]| if off { Vec::new() } else { names.to_vec() };
    let view_report = match view {
        ViewState::Private(names, visible, _) => ViewReport {
            setting: spec.namespaces.as_str(),
            view: "private",
            namespaces: names.clone(),
            detail: visible.clone(),
        },
        ViewState::Host(why) => ViewReport {
            setting: spec.namespaces.as_str(),
            view: "host",
            namespaces: Vec::new(),
            detail: why.clone(),
        },
        ViewState::Planned(what) => ViewReport {
            setting: spec.namespaces.as_str(),
            view: "planned",
            namespaces: Vec::new(),
            detail: (*what).to_owned(),
        },
    };
    let report = ConfinementReport {
        mode: spec.mode.as_str(),
        view: view_report,
        landlock: LandlockReport {
            kernel_abi: abi,
            requested_abi: TARGET_ABI as i64,
            enforced: landlock_state,
            read_paths: spec.read_paths.clone(),
            read_write: std::iter::once(spec.jail_root.clone())
                .chain(spec.write_paths.iter().cloned())
                .chain(
                    HARMLESS_DEVICES
                        .iter()
                        .filter(|(_, w)| *w)
                        .map(|(n, _)| PathBuf::from(n)),
                )
                .collect(),
            never_granted: strings(if matches!(view, ViewState::Private(_, _, true)) {
                &[
                    "make_char",
                    "make_block",
                    "ioctl_dev (but on the command's own /dev/pts)",
                ]
            } else {
                &["make_char", "make_block", "ioctl_dev"]
            }),
            exec_in_jail: spec.exec_in_jail,
            tcp: match (
                spec.network || off,
                spec.egress,
                matches!(view, ViewState::Private(..)),
            ) {
                (true, _, true) => "loopback only (the private view's own network namespace)",
                (true, _, false) => "allowed",
                (false, true, _) => "connect to the proxy's port only; no bind",
                (false, false, _) => "denied",
            },
            scoped: strings(&["signal", "abstract-unix-socket"]),
            tmpdir: format!(
                "a directory of its own for each call beneath {}, named by TMPDIR, TMP and TEMP, writable by that call only, removed when it ends",
                tmp_root.map_or_else(
                    || "the server's temporary directory".to_owned(),
                    |p| p.display().to_string()
                )
            ),
        },
        seccomp: SeccompReport {
            enabled: !off,
            denied: if off {
                Vec::new()
            } else {
                seccomp::denied().map(|(n, _)| *n).collect()
            },
            refused_setid_modes: if off {
                Vec::new()
            } else {
                seccomp::refused_by_argument().collect()
            },
            refused_device_nodes: if off {
                Vec::new()
            } else {
                seccomp::device_node_calls().collect()
            },
            sockets: match (off, spec.network, spec.egress, spec.unix_sockets) {
                (true, ..) | (false, true, _, true) => "any",
                (false, true, _, false) => "any but AF_UNIX (socketpair allowed)",
                (false, false, true, true) => "AF_UNIX, and TCP streams over IPv4 and IPv6",
                (false, false, true, false) => {
                    "TCP streams over IPv4 and IPv6 (socketpair allowed)"
                }
                (false, false, false, true) => "AF_UNIX only",
                (false, false, false, false) => "none (socketpair only)",
            },
            sysv_ipc: match (off, view) {
                (true, _) => {
                    "allowed (sandbox mode off): commands share the server's ipc namespace"
                }
                (false, ViewState::Private(names, ..)) if names.contains(&"pid") => {
                    "allowed: each command has an ipc namespace of its own, removed with it"
                }
                (false, ViewState::Planned(_)) => {
                    "allowed where each command gets an ipc namespace of its own (the private view), refused (shmget, shmat, msgget, semget, ...) where commands would share one"
                }
                (false, _) => {
                    "refused (shmget, shmat, msgget, semget, ...): commands would share one ipc namespace"
                }
            },
            memfd: match (off, spec.exec_in_jail) {
                (true, _) | (false, true) => {
                    "any memfd (exec_in_jail: programs the command writes may run anyway)"
                }
                (false, false) => {
                    "memfd_create only with MFD_NOEXEC_SEAL: nothing the command writes can run"
                }
            },
        },
        no_new_privs: !off,
        capabilities: capabilities.map_or("kept (sandbox mode off)", CapabilityDrop::describe),
        rlimits: RlimitReport {
            cpu_seconds: spec.limits.cpu_seconds,
            memory_bytes: spec.limits.memory_bytes,
            file_size_bytes: spec.limits.file_size_bytes,
            open_files: spec.limits.open_files,
            processes: spec.limits.processes,
            processes_enforced_by: if pids_cgroup {
                "cgroup v1 pids.max (shared by all commands of this server)"
            } else {
                "RLIMIT_NPROC (per user; does not bind root)"
            },
            core_bytes: 0,
        },
        process_group: "own; the whole tree is killed on timeout, cancel or flood",
        egress: egress.map(|tier| match tier {
            Ok(tier) => EgressReport {
                tier: tier.as_str(),
                detail: tier.describe(),
            },
            Err(why) => EgressReport {
                tier: "unavailable",
                detail: format!("{why}; no command runs (SANDBOX_UNAVAILABLE)"),
            },
        }),
    };
    let summary = ConfinementSummary {
        mode: spec.mode.as_str(),
        landlock: landlock_state,
        landlock_abi: abi,
        seccomp: !off,
        capabilities: match capabilities {
            Some(CapabilityDrop::Everything) => "all dropped",
            Some(CapabilityDrop::HeldSets) => "none held",
            None => "kept",
        },
        view: if matches!(view, ViewState::Private(..)) {
            "private"
        } else {
            "host"
        },
        network: spec.network,
        egress: egress.map(|tier| tier.as_ref().map_or("unavailable", |t| t.as_str())),
    };
    (report, summary)
}

fn rlimits(limits: &ProcessLimits) -> Vec<(libc::__rlimit_resource_t, libc::rlimit)> {
    let wanted = [
        (libc::RLIMIT_CPU, limits.cpu_seconds),
        (libc::RLIMIT_AS, limits.memory_bytes),
        (libc::RLIMIT_FSIZE, limits.file_size_bytes),
        (libc::RLIMIT_NOFILE, limits.open_files),
        (libc::RLIMIT_NPROC, limits.processes),
        (libc::RLIMIT_CORE, 0),
        // POSIX message queue bytes are charged to the real uid host-wide (819,200 by
        // default): a command that filled them would leave every host process of the
        // server's user without. No build or test tool needs one.
        (libc::RLIMIT_MSGQUEUE, 0),
    ];
    wanted
        .into_iter()
        .map(|(resource, value)| {
            // Never ask for more than our own hard limit: raising it needs CAP_SYS_RESOURCE,
            // and a failed setrlimit in the child would refuse every command.
            let mut own = libc::rlimit {
                rlim_cur: libc::RLIM_INFINITY,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: getrlimit writes only the rlimit passed; on failure `own` stays infinite.
            unsafe {
                libc::getrlimit(resource, &mut own);
            }
            let value = value.min(own.rlim_max);
            (
                resource,
                libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                },
            )
        })
        .collect()
}

/// `LANDLOCK_RULE_PATH_BENEATH` of `landlock_add_rule(2)`.
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, {access, parent_fd}, 0)`: 0, or
/// -1 with errno set. One raw syscall (no allocation, no lock), so a stage's init may call it.
fn add_path_rule(ruleset: libc::c_int, parent_fd: libc::c_int, access: u64) -> libc::c_long {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd,
    };
    // SAFETY: the kernel reads `attr`, a packed struct on this stack laid out as
    // `struct landlock_path_beneath_attr`; bad descriptors are errors, not undefined.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            std::ptr::from_ref(&attr),
            0u32,
        )
    }
}

/// One call's confinement beyond the server's: see [`Confinement::for_call`].
pub(crate) struct CallConfinement {
    ruleset: Option<OwnedFd>,
    tmp: CallTmp,
    /// The temporary directory's path, for the init's bind ([`Confinement::hold_tmp_root`]).
    tmp_c: CString,
    /// The landlock tier's listener for this call, until the executor hands it to the proxy.
    pub(crate) listener: Option<std::net::TcpListener>,
    /// Under egress, the port the proxy listens on, as commands see it.
    pub(crate) proxy_port: Option<u16>,
}

impl CallConfinement {
    /// The call's temporary directory, for `TMPDIR`.
    pub(crate) fn tmp(&self) -> &Path {
        self.tmp.path()
    }
}

/// How commands of `spec` can be held to the proxy here: their own network namespace in
/// the private view, else Landlock's TCP rules (ABI 4), else not at all.
fn egress_tier(spec: &ConfinementSpec, view: bool) -> Result<Tier, String> {
    let abi = landlock_abi();
    match (spec.mode, view) {
        (SandboxMode::Off, _) => {
            Err("sandbox mode is off, so nothing holds a command to the proxy".into())
        }
        (_, true) => Ok(Tier::Namespace),
        (_, false) if abi >= 4 => Ok(Tier::Landlock),
        (_, false) => Err(format!(
            "no network namespace can be made here and Landlock ABI {abi} has no TCP rules (ABI 4 does)"
        )),
    }
}

/// The Landlock rules of a server: every path opened once at start, with the rights it
/// grants. Each call's ruleset is these plus the call's temporary directory.
struct LandlockRules {
    level: CompatLevel,
    network: bool,
    /// Whether calls may connect to the proxy's port (egress).
    egress: bool,
    rules: Vec<(PathFd, BitFlags<AccessFs>)>,
    /// What the jail grants, and so also the write paths and a call's temporary directory.
    writable: BitFlags<AccessFs>,
    /// What each call's ruleset handles on this kernel, and the size of the attr struct
    /// this kernel knows: asked once, at start.
    attr: RawRulesetAttr,
    attr_size: usize,
}

impl LandlockRules {
    /// With a private `view`, commands may also read its synthetic `/etc` files (other
    /// inodes than the host's) and use `/dev/tty` (which, with no controlling terminal,
    /// opens nothing). Each command's own `/proc` and `/dev/pts` are fresh file systems the
    /// server cannot name beforehand (Landlock ignores the covered mount point), so their
    /// rules are added by the command's init ([`Confinement::add_own_mounts`]).
    fn open(
        spec: &ConfinementSpec,
        hard: bool,
        view: Option<&View>,
    ) -> Result<LandlockRules, ConfineError> {
        let extra_read = view.map_or(Vec::new(), View::own_files);
        let tty = view
            .filter(|v| v.tty())
            .map(|_| PathBuf::from(crate::view::TTY));
        let all = AccessFs::from_all(TARGET_ABI);
        let read_exec = AccessFs::from_read(TARGET_ABI);
        // A jail never needs device nodes: with MAKE_CHAR / MAKE_BLOCK a root command could
        // extract one (`tar xf`) and read or write the raw disk through it; IOCTL_DEV is for
        // devices only. Neither is granted beneath the jail (nor anywhere else).
        let mut writable = all & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev);
        if !spec.exec_in_jail {
            writable &= !AccessFs::Execute;
        }
        let device = |writable: bool| {
            HARMLESS_DEVICES
                .iter()
                .filter(move |(_, w)| *w == writable)
                .map(|(name, _)| PathBuf::from(name))
        };
        let wanted: Vec<(PathBuf, BitFlags<AccessFs>)> = spec
            .read_paths
            .iter()
            .chain(spec.home.iter())
            .chain(&extra_read)
            .cloned()
            .map(|p| (p, read_exec))
            .chain(device(true).map(|p| (p, AccessFs::ReadFile | AccessFs::WriteFile)))
            .chain(device(false).map(|p| (p, AccessFs::ReadFile.into())))
            // The command's own /proc is mounted on this directory of the view's skeleton;
            // Landlock matches the mount point on the way up from any file beneath it.
            .chain(tty.map(|p| (p, AccessFs::ReadFile | AccessFs::WriteFile)))
            .chain(spec.write_paths.iter().cloned().map(|p| (p, writable)))
            .chain(std::iter::once((spec.jail_root.clone(), writable)))
            .collect();
        let mut rules = Vec::with_capacity(wanted.len());
        for (path, access) in wanted.into_iter().filter(|(p, _)| p.exists()) {
            let fd = PathFd::new(&path)
                .map_err(|e| ConfineError::Landlock(format!("{}: {e}", path.display())))?;
            rules.push((fd, access_for(&path, access)));
        }
        // The ABI whose rights a ruleset handles here: the kernel's, at most TARGET_ABI.
        let abi = i32::try_from(landlock_abi())
            .unwrap_or(0)
            .min(TARGET_ABI as i32);
        let handled = ABI::from(abi);
        let attr = RawRulesetAttr {
            handled_access_fs: AccessFs::from_all(handled).bits(),
            handled_access_net: if spec.network {
                0
            } else {
                AccessNet::from_all(handled).bits()
            },
            scoped: Scope::from_all(handled).bits(),
        };
        // `struct landlock_ruleset_attr` grew with the ABI: pass the size this kernel knows.
        let attr_size = match abi {
            6.. => 24usize,
            4 | 5 => 16,
            _ => 8,
        };
        Ok(LandlockRules {
            level: if hard {
                CompatLevel::HardRequirement
            } else {
                CompatLevel::BestEffort
            },
            network: spec.network,
            egress: spec.egress,
            rules,
            writable,
            attr,
            attr_size,
        })
    }

    /// A ruleset of these rules and read+write beneath `tmp`, built by the landlock crate,
    /// which checks every right against the kernel as the compatibility level says. Done
    /// once at start, so that a refusal stops the start rather than a call.
    fn validate(&self, tmp: &Path) -> Result<(), ConfineError> {
        let err = |e: landlock::RulesetError| ConfineError::Landlock(e.to_string());
        let mut ruleset = Ruleset::default()
            .set_compatibility(self.level)
            .handle_access(AccessFs::from_all(TARGET_ABI))
            .map_err(err)?;
        if !self.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(TARGET_ABI))
                .map_err(err)?;
        }
        // Egress's one rule: TCP connect to the proxy's port (checked here once; each call
        // adds it in a raw syscall, for its own port).
        let proxy = self
            .egress
            .then(|| NetPort::new(EGRESS_PORT, AccessNet::ConnectTcp));
        let tmp_fd = PathFd::new(tmp)
            .map_err(|e| ConfineError::Landlock(format!("{}: {e}", tmp.display())))?;
        let rules = self
            .rules
            .iter()
            .map(|(fd, access)| Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, *access)));
        ruleset
            .scope(Scope::from_all(TARGET_ABI))
            .map_err(err)?
            .create()
            .map_err(err)?
            .add_rules(rules)
            .map_err(err)?
            .add_rule(PathBeneath::new(tmp_fd, self.writable))
            .map_err(err)?
            .add_rules(proxy.into_iter().map(Ok::<_, landlock::RulesetError>))
            .map_err(err)?;
        Ok(())
    }

    /// The same ruleset for one call, in raw syscalls: one to create it, one per rule, with
    /// the rights this kernel handles (what [`LandlockRules::validate`] accepted). The crate's
    /// checks cost a `fstat` per rule on every call; they were made once at start.
    fn ruleset(&self, tmp: &Path, proxy_port: Option<u16>) -> Result<OwnedFd, ConfineError> {
        let (attr, size, fs) = (&self.attr, self.attr_size, self.attr.handled_access_fs);
        let failed = |what: &str| {
            ConfineError::Landlock(format!("{what}: {}", std::io::Error::last_os_error()))
        };
        // SAFETY: the kernel reads `size` bytes of `attr`, a repr(C) struct on this stack
        // at least that large, and returns a new descriptor (or -1).
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::from_ref(attr),
                size,
                0u32,
            )
        };
        let fd = i32::try_from(fd)
            .ok()
            .filter(|fd| *fd >= 0)
            .ok_or_else(|| failed("landlock_create_ruleset"))?;
        // SAFETY: the kernel made this descriptor for us alone.
        let ruleset = unsafe { OwnedFd::from_raw_fd(fd) };
        let tmp_fd = rustix::fs::open(
            tmp,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| ConfineError::Landlock(format!("{}: {e}", tmp.display())))?;
        let every = self
            .rules
            .iter()
            .map(|(fd, access)| (fd.as_fd().as_raw_fd(), access.bits()))
            .chain([(tmp_fd.as_raw_fd(), self.writable.bits())]);
        for (parent_fd, access) in every {
            if add_path_rule(ruleset.as_raw_fd(), parent_fd, access & fs) != 0 {
                return Err(failed("landlock_add_rule"));
            }
        }
        if let Some(port) = proxy_port
            && self.attr.handled_access_net & crate::egress::CONNECT_TCP != 0
        {
            crate::egress::allow_connect(ruleset.as_fd(), port)
                .map_err(|e| ConfineError::Landlock(format!("the proxy's port rule: {e}")))?;
        }
        Ok(ruleset)
    }
}

/// `struct landlock_ruleset_attr` as of ABI 6.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct RawRulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// The rights of `access` that apply to `path`: a file takes only the rights of files.
fn access_for(path: &Path, access: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(TARGET_ABI)
    }
}
