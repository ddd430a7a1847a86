//! What the kernel enforces on every command (DESIGN §5; the order in docs/CONFINEMENT.md),
//! built once in the parent.
//!
//! Owns the Landlock ruleset, the seccomp program and the rlimits. Everything that allocates,
//! opens paths or can fail with a message happens here, at server start, in the parent. The
//! child only makes syscalls (see `Confinement::apply_in_child`): it runs in the server's
//! own memory until exec (the `spawn` module), where allocating or taking a lock would race the
//! server's other threads. We chose that over re-executing a helper binary because a second
//! `exec` per command would double the spawn cost that the benchmark measures.

use std::ffi::CString;
use std::ffi::c_int;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::AccessFs;
use safe_mcp_contract::{
    ConfinementReport, ConfinementSpec, ConfinementSummary, EGRESS_PORT, LandlockState,
    NamespaceMode, ProcessLimits, SandboxMode,
};

use crate::egress::Tier;
use crate::seccomp;
use crate::step::{Step, errno};
use crate::tmp::{CallTmp, TmpRoot};
use crate::view::{Counters, GroupMounts, View};

mod capabilities;
mod cgroup;
mod error;
mod executables;
mod report;
mod rules;
mod tcp;

use capabilities::CapabilityDrop;
pub(crate) use cgroup::CallMemory;
use cgroup::{MemoryCgroups, PidsCgroup};
use executables::{Resolved, execute_report};
use report::{ViewState, describe, egress_tier};
use rules::{LandlockRules, add_path_rule};
use tcp::TcpAccess;

pub use capabilities::capability_report;
pub use error::{AtPath, ConfineError};
pub use report::planned_report;
pub(crate) use report::{egress_tier_here, namespaces_possible};
pub use rules::landlock_abi;

/// The confinement applied to every command of one server.
pub struct Confinement {
    mode: SandboxMode,
    /// The Landlock rules, opened once; each call's ruleset is built from them.
    landlock: Option<LandlockRules>,
    /// The exec allowlist, resolved: which stages get which helpers.
    executables: Option<Resolved>,
    /// What each group's stages bind executable in their own mount namespace.
    group_mounts: GroupMounts,
    /// A root server's user namespace that bounds the per-user counters of its commands.
    counters: Option<Counters>,
    /// The root of every call's private temporary directory.
    tmp_root: TmpRoot,
    /// Its path, for the init's remount ([`Confinement::hold_tmp_root`]).
    tmp_root_c: CString,
    /// The flags of the writable mounts of the view (nosuid, nodev, and noexec unless
    /// exec_in_jail), which the init's remounts keep.
    tmp_flags: libc::c_ulong,
    /// The seccomp filter; its length fits the kernel's 16-bit field (`seccomp::build`).
    seccomp: Option<seccomp::Program>,
    /// Whether the filter tells the exec log of each exec (`crate::execlog`).
    exec_log: bool,
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    /// Which capability sets the child clears; `None` under `off`.
    capabilities: Option<CapabilityDrop>,
    /// The private view every command enters, where one could be made.
    view: Option<View>,
    pids_cgroup: Option<PidsCgroup>,
    /// Where each call gets a memory group of its own (root, cgroup v1): the memory limit
    /// then counts memory used, and RLIMIT_AS is not set.
    memory: Option<MemoryCgroups>,
    /// Under egress: how commands reach the proxy, or why they cannot (then nothing runs).
    egress: Option<Result<Tier, String>>,
    report: ConfinementReport,
    summary: ConfinementSummary,
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement")
            .field("report", &self.report)
            .finish()
    }
}

impl Confinement {
    /// Builds the confinement for `spec`. Under `enforce`, anything the kernel cannot fully
    /// enforce is an error; under `best-effort`, it is reported; under `off`, only rlimits apply.
    /// As root this makes the server's pids and memory cgroups: only a server that runs
    /// commands calls it.
    pub fn new(spec: &ConfinementSpec) -> Result<Self, ConfineError> {
        let tmp_root = TmpRoot::create(&spec.jail_root)?;
        let pids_cgroup = PidsCgroup::create(spec.limits.processes);
        let memory = match spec.mode {
            SandboxMode::Off => None,
            _ => MemoryCgroups::create(spec.limits.memory_bytes),
        };
        // With a memory group per call the limit counts memory used; RLIMIT_AS, which counts
        // address space reserved, would refuse runtimes that reserve far more than they use.
        let rlimits = rlimits(&spec.limits, memory.is_none());
        let capabilities = (spec.mode != SandboxMode::Off).then(CapabilityDrop::for_this_process);
        // Under enforce the ruleset is built with HardRequirement: it is complete, or building
        // it fails and the server does not start. Each child restricts itself with its
        // descriptor; a kernel refusal there refuses the command (SANDBOX_UNAVAILABLE).
        let executables = match spec.mode {
            SandboxMode::Off => None,
            _ => spec.executables.as_ref().map(Resolved::of),
        };
        // As root, commands count inotify and fanotify against root's own limits: bounded
        // to half of them in a user namespace of the commands' own.
        let counters = match spec.mode {
            SandboxMode::Off => None,
            _ => Counters::for_root_commands(),
        };
        let (view, view_state, group_mounts) = view_of(
            spec,
            tmp_root.path(),
            executables.as_ref(),
            counters.is_some(),
        )?;
        let egress = spec.egress.then(|| egress_tier(spec, view.is_some()));
        if let Some(Err(why)) = &egress {
            tracing::warn!(
                "[terminal.network] mode = \"allowlist\", but no tier can hold commands to the proxy ({why}); every command is refused (SANDBOX_UNAVAILABLE)"
            );
        }
        // Each command of the private view makes an ipc namespace of its own with its pid
        // namespace; anywhere else commands would share one (the host's, or the view's).
        let own_ipc = view.as_ref().is_some_and(|v| v.pid.is_ok());
        let tcp = TcpAccess::of(spec, view.as_ref().is_some_and(View::shares_network));
        let (landlock, seccomp) = match spec.mode {
            SandboxMode::Off => (None, None),
            mode => {
                let rules = LandlockRules::open(
                    spec,
                    mode == SandboxMode::Enforce,
                    view.as_ref(),
                    &tcp,
                    executables.as_ref(),
                )?;
                // Built once here, so that a kernel refusal stops the start, not a call.
                rules.validate(tmp_root.path())?;
                rules.ruleset(tmp_root.path(), None, 0)?;
                let switches = seccomp::Switches {
                    inet: tcp.inet(),
                    unix_sockets: spec.unix_sockets,
                    sysv_ipc: own_ipc,
                    memfd_exec: spec.exec_in_jail,
                    exec_log: spec.exec_log,
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
            report::Cgroups {
                pids: pids_cgroup.is_some(),
                memory: memory.is_some(),
            },
            &view_state,
            capabilities,
            Some(tmp_root.path()),
            egress.as_ref(),
            execute_report(spec, executables.as_ref()),
        );
        if spec.mode == SandboxMode::BestEffort && report.landlock.enforced != LandlockState::Full {
            tracing::warn!(
                "sandbox mode best-effort: Landlock is {} on this kernel (ABI {}); commands run less confined",
                report.landlock.enforced,
                report.landlock.kernel_abi
            );
        }
        Ok(Confinement {
            mode: spec.mode,
            landlock,
            executables,
            group_mounts,
            counters,
            tmp_root_c: c_path(tmp_root.path())?,
            tmp_flags: libc::MS_NOSUID
                | libc::MS_NODEV
                | if spec.exec_in_jail {
                    0
                } else {
                    libc::MS_NOEXEC
                },
            tmp_root,
            exec_log: seccomp.is_some() && spec.exec_log,
            seccomp,
            rlimits,
            capabilities,
            view,
            pids_cgroup,
            memory,
            egress,
            report,
            summary,
        })
    }

    /// What applies, as reported by explain, describe, doctor and the audit trail.
    pub fn report(&self) -> &ConfinementReport {
        &self.report
    }

    /// The root of every call's private temporary directory.
    pub(crate) fn tmp_root(&self) -> &Path {
        self.tmp_root.path()
    }

    /// Removes the server's cgroups (root only), once every call has ended.
    pub(crate) fn remove_cgroups(&self) {
        if let Some(pids) = &self.pids_cgroup {
            pids.remove();
        }
        if let Some(memory) = &self.memory {
            memory.remove();
        }
    }

    /// The compact form recorded with every run: mode, Landlock state, seccomp, network.
    pub fn summary(&self) -> &ConfinementSummary {
        &self.summary
    }

    /// What one call needs beyond the server's confinement: its temporary directory, the
    /// Landlock rulesets that let it (and no other call) write there, one for each exec
    /// group among the `programs` its stages run, and under egress the proxy port it may
    /// connect to (with the landlock tier, the call's own listener).
    pub(crate) fn for_call<'p>(
        &self,
        programs: impl IntoIterator<Item = &'p Path>,
    ) -> Result<CallConfinement, ConfineError> {
        let tmp = self.tmp_root.for_call().map_err(ConfineError::Tmp)?;
        let (listener, port) = match &self.egress {
            None => (None, None),
            Some(Err(why)) => return Err(ConfineError::Egress(why.clone())),
            Some(Ok(Tier::Namespace)) => (None, Some(EGRESS_PORT)),
            Some(Ok(Tier::Landlock)) => {
                let (listener, port) =
                    crate::egress::loopback_listener().map_err(ConfineError::EgressListener)?;
                (Some(listener), Some(port))
            }
        };
        let mut rulesets: Vec<(usize, OwnedFd)> = Vec::new();
        if let Some(rules) = &self.landlock {
            for program in programs {
                let group = self.exec_group(program);
                if !rulesets.iter().any(|(g, _)| *g == group) {
                    rulesets.push((group, rules.ruleset(tmp.path(), port, group)?));
                }
            }
        }
        let tmp_c = c_path(tmp.path())?;
        let memory = match &self.memory {
            Some(groups) => Some(groups.for_call().map_err(ConfineError::Memory)?),
            None => None,
        };
        Ok(CallConfinement {
            memory,
            rulesets,
            tmp_c,
            tmp,
            listener,
            proxy_port: port,
        })
    }

    /// The network commands share, for a socket that relays a connection from the host into
    /// it (`expose_port`): the private view's own namespace (its user and network
    /// namespaces, for [`crate::inner::SocketFactory`]), or `None` for the host's network
    /// where there is no view. Under egress each command has a namespace of its own, which
    /// no later connection can name.
    pub(crate) fn shared_network(&self) -> Result<Option<Vec<(RawFd, c_int)>>, String> {
        if self.egress.is_some() {
            return Err("under [terminal.network] mode = \"allowlist\" each command has a network namespace of its own, which nothing outside can reach; expose_port needs mode = \"off\" or \"open\"".into());
        }
        Ok(self
            .view
            .as_ref()
            .filter(|v| v.shares_network())
            .map(View::network_entries))
    }

    /// Under egress with the namespace tier: each stage makes a network namespace of its
    /// own and sends its listener back.
    pub(crate) fn own_network(&self) -> bool {
        matches!(self.egress, Some(Ok(Tier::Namespace)))
    }

    /// Whether each stage's tree reports what it executes (`[terminal.audit] exec_log`).
    pub(crate) fn exec_log(&self) -> bool {
        self.exec_log
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

    /// The exec group of a stage that runs `program`: 0 for what every stage may execute,
    /// else the program's helpers too.
    pub(crate) fn exec_group(&self, program: &Path) -> usize {
        self.executables.as_ref().map_or(0, |e| e.group_of(program))
    }

    /// Adds to the ruleset of the stage's exec `group` read access beneath the freshly
    /// mounted `/proc`, and, with a devpts of the command's own, read-write and terminal
    /// ioctls beneath `/dev/pts`. The ruleset is the call's; another stage's command
    /// restricted itself already or gets a rule for a file system it cannot reach.
    ///
    /// # Safety
    /// Only in a stage's init, after its mounts and before it starts the command.
    pub(crate) unsafe fn add_own_mounts(
        &self,
        call: &CallConfinement,
        group: usize,
    ) -> Result<(), libc::c_int> {
        let (Some(ruleset), Some(rules)) = (call.ruleset(group), &self.landlock) else {
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

    /// Binds what the stages of exec `group` alone may execute executable, in the stage's
    /// own mount namespace ([`GroupMounts`]).
    ///
    /// # Safety
    /// Only in a stage's init, in its own mount namespace, before the command starts.
    pub(crate) unsafe fn mount_group(&self, group: usize) -> Result<(), libc::c_int> {
        // SAFETY: as this function's own contract.
        unsafe { self.group_mounts.mount(group) }
    }

    /// The descriptor of the user namespace a root server's commands enter, or -1: kept
    /// open by an init made ahead of its call.
    pub(crate) fn counters_fd(&self) -> libc::c_int {
        self.counters.as_ref().map_or(-1, Counters::raw_fd)
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

    /// Every descriptor of the confinement and of the call that a stage's init and command
    /// read ([`Confinement::hold_tmp_root`], [`Confinement::add_own_mounts`] and
    /// [`Confinement::apply_in_child`]): the pids and memory groups' `tasks` and the stage's
    /// ruleset. A namespace made ahead of its call gets these at the same numbers
    /// (`crate::spawn::ahead`); one missing there fails the stage with `EBADF`, never
    /// silently unconfined.
    pub(crate) fn child_descriptors(&self, call: &CallConfinement, group: usize) -> Vec<RawFd> {
        let pids = self.pids_cgroup.as_ref().map(|c| c.tasks.as_raw_fd());
        let memory = call
            .memory
            .as_ref()
            .and_then(CallMemory::tasks)
            .map(AsRawFd::as_raw_fd);
        let ruleset = call.ruleset(group).map(AsRawFd::as_raw_fd);
        [pids, memory, ruleset].into_iter().flatten().collect()
    }

    /// Runs in the `CLONE_VM` child before exec (see [`crate::spawn`]): syscalls on state
    /// prepared at startup, no allocation, no locks. Its body is docs/CONFINEMENT.md's steps
    /// 17 to 22 in order: the pids cgroup (root only), rlimits (still privileged, so a root
    /// server may set them; `mode = "off"` stops here), every capability dropped and the
    /// securebits locked, no_new_privs, Landlock, then seccomp last (so the filter need not
    /// allow the calls before it). Returns the step that failed and its errno.
    ///
    /// # Safety
    /// Only for the child made by [`crate::spawn::spawn`], before exec: it changes the
    /// calling process's limits and credentials for good.
    pub(crate) unsafe fn apply_in_child(
        &self,
        call: &CallConfinement,
        group: usize,
        exec_log: RawFd,
    ) -> Result<(), (Step, libc::c_int)> {
        let fail = |step: Step| (step, errno());
        // 17. The pids cgroup.
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
        // 17b. The call's memory group, the same way.
        if let Some(tasks) = call.memory.as_ref().and_then(CallMemory::tasks) {
            // SAFETY: as the pids cgroup's write above, to a descriptor the call owns.
            let n =
                unsafe { libc::syscall(libc::SYS_write, tasks.as_raw_fd(), b"0".as_ptr(), 1usize) };
            if n != 1 {
                return Err(fail(Step::Limits));
            }
        }
        // 18. rlimits.
        for (resource, limit) in &self.rlimits {
            // SAFETY: setrlimit reads the limit, which lives in this confinement.
            if unsafe { libc::setrlimit(*resource, limit) } != 0 {
                return Err(fail(Step::Limits));
            }
        }
        if self.mode == SandboxMode::Off {
            return Ok(());
        }
        // 18b. A root server's commands: the user namespace that bounds their counters,
        // entered after every mount of the stage (which stay the host's root's) and while
        // root may (before the capabilities go).
        if let Some(counters) = &self.counters {
            // SAFETY: we are the spawn child, one thread, after the cgroups and rlimits, as
            // `enter` requires.
            unsafe { counters.enter() }.map_err(|errno| (Step::Limits, errno))?;
        }
        // 19. Capabilities.
        if let Some(drop) = self.capabilities {
            // SAFETY: we are the spawn child, before exec, as `apply` requires.
            unsafe { drop.apply() }.map_err(|errno| (Step::Capabilities, errno))?;
        }
        // 20. no_new_privs.
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(fail(Step::Sandbox));
        }
        // 21. Landlock. Without the stage's ruleset (a call made for other programs) the
        // command does not run.
        if self.landlock.is_some() {
            let Some(ruleset) = call.ruleset(group) else {
                return Err((Step::Sandbox, libc::EINVAL));
            };
            // SAFETY: restricts this process with a ruleset descriptor the call owns.
            let rc = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            if rc != 0 {
                return Err(fail(Step::Sandbox));
            }
        }
        // 22. seccomp.
        if let Some(program) = &self.seccomp {
            let fprog = libc::sock_fprog {
                len: program.len() as libc::c_ushort,
                filter: program.as_ptr().cast_mut(),
            };
            // With the exec log the kernel hands back the filter's listener, which goes to
            // the server's thread before anything is executed.
            let flags = if self.exec_log && exec_log >= 0 {
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
            } else {
                0
            };
            // SAFETY: the kernel copies the program that `fprog` points at (kept alive by
            // this confinement; its length was checked against BPF_MAXINSNS when built).
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    flags,
                    std::ptr::from_ref(&fprog),
                )
            };
            if rc < 0 || (flags == 0 && rc != 0) {
                return Err(fail(Step::Sandbox));
            }
            if flags != 0 {
                let listener = rc as RawFd;
                // SAFETY: the listener the kernel just made for this child, and the
                // stage's channel, both open here.
                let sent = unsafe { crate::execlog::send_listener(exec_log, listener) };
                // SAFETY: closes the child's copy of the listener, which is the child's
                // own; the server holds the copy that was sent, if the send succeeded.
                unsafe { libc::close(listener) };
                if let Err(send_errno) = sent {
                    return Err((Step::Sandbox, send_errno));
                }
            }
        }
        Ok(())
    }
}

fn rlimits(
    limits: &ProcessLimits,
    address_space: bool,
) -> Vec<(libc::__rlimit_resource_t, libc::rlimit)> {
    let wanted = [
        (libc::RLIMIT_CPU, limits.cpu_seconds),
        (
            libc::RLIMIT_AS,
            if address_space {
                limits.memory_bytes
            } else {
                libc::RLIM_INFINITY
            },
        ),
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
            // CPU: the soft limit first, so that the kernel's SIGXCPU names the limit (the
            // result says which one stopped the command); SIGKILL a second later.
            let hard = if resource == libc::RLIMIT_CPU {
                value.saturating_add(1).min(own.rlim_max)
            } else {
                value
            };
            (
                resource,
                libc::rlimit {
                    rlim_cur: value,
                    rlim_max: hard,
                },
            )
        })
        .collect()
}

/// One call's confinement beyond the server's: see [`Confinement::for_call`].
pub(crate) struct CallConfinement {
    /// A Landlock ruleset per exec group among the call's stages.
    rulesets: Vec<(usize, OwnedFd)>,
    tmp: CallTmp,
    /// The temporary directory's path, for the init's bind ([`Confinement::hold_tmp_root`]).
    tmp_c: CString,
    /// The landlock tier's listener for this call, until the executor hands it to the proxy.
    pub(crate) listener: Option<std::net::TcpListener>,
    /// Under egress, the port the proxy listens on, as commands see it.
    pub(crate) proxy_port: Option<u16>,
    /// The call's memory group, where calls get one.
    memory: Option<CallMemory>,
}

impl CallConfinement {
    /// The ruleset of the stages of exec `group`. A scan, no allocation: the spawn child
    /// calls it.
    fn ruleset(&self, group: usize) -> Option<&OwnedFd> {
        self.rulesets
            .iter()
            .find(|(g, _)| *g == group)
            .map(|(_, fd)| fd)
    }

    /// Whether the kernel killed a process of the call for its memory limit. Call once,
    /// when every process of the call is gone: its memory group goes back to the pool.
    pub(crate) fn memory_limit_hit(&mut self) -> bool {
        self.memory.take().is_some_and(CallMemory::finish)
    }

    /// The call's temporary directory, for `TMPDIR`.
    pub(crate) fn tmp(&self) -> &Path {
        self.tmp.path()
    }
}

/// The view commands get (none for the host's), what the reports say of it, and what each
/// exec group's stages bind executable in it; `counters_bounded`: a root server's commands
/// enter the counters' user namespace. Fails only where `namespaces = "required"` and no
/// private view with pid namespaces could be made.
fn view_of(
    spec: &ConfinementSpec,
    tmp_root: &Path,
    executables: Option<&Resolved>,
    counters_bounded: bool,
) -> Result<(Option<View>, ViewState, GroupMounts), ConfineError> {
    let setting = match (spec.mode, spec.namespaces) {
        (SandboxMode::Off, _) => {
            let state = ViewState::Host("sandbox mode off".into());
            return Ok((None, state, GroupMounts::default()));
        }
        (_, NamespaceMode::Off) => {
            let state = ViewState::Host("namespaces = \"off\"".into());
            return Ok((None, state, GroupMounts::default()));
        }
        (_, setting) => setting,
    };
    let (made, group_mounts) = match executables {
        Some(r) => {
            let groups: Vec<Vec<PathBuf>> = r.helpers.iter().map(|(_, own)| own.clone()).collect();
            View::create_with_groups(spec, tmp_root, &r.every, &groups)
        }
        None => (
            View::create(spec, tmp_root, &[], &[]),
            GroupMounts::default(),
        ),
    };
    match made {
        Ok(mut view) => {
            if let (Err(why), NamespaceMode::Required) = (&view.pid, setting) {
                return Err(ConfineError::Namespaces(why.clone()));
            }
            if counters_bounded {
                view.counters_bounded();
            }
            let state = ViewState::Private(view.names(), view.visible(), view.own_pts());
            Ok((Some(view), state, group_mounts))
        }
        Err(why) if setting == NamespaceMode::Required => Err(ConfineError::Namespaces(why)),
        Err(why) => {
            tracing::warn!(
                "namespaces = \"auto\": no private view of the machine could be made ({why}); commands see the host's filesystem, confined by Landlock and seccomp"
            );
            let state = ViewState::Host(format!("no private view could be made: {why}"));
            Ok((None, state, group_mounts))
        }
    }
}

/// `path` as a C string for the children; a NUL byte in it makes it no path they can use.
fn c_path(path: &Path) -> Result<CString, ConfineError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        let nul = std::io::Error::new(std::io::ErrorKind::InvalidInput, "holds a NUL byte");
        ConfineError::Tmp(AtPath::new(path, nul))
    })
}

#[cfg(test)]
mod tests {
    use safe_mcp_contract::ProcessLimits;

    use super::rlimits;

    #[test]
    fn rlimits_bound_each_resource_and_never_ask_above_the_servers_hard_limit() {
        let limits = ProcessLimits {
            cpu_seconds: 7,
            memory_bytes: u64::MAX,
            file_size_bytes: 1 << 20,
            open_files: 64,
            processes: 32,
        };
        // Where a memory cgroup bounds the call, RLIMIT_AS is left unbounded.
        let unbounded = rlimits(&limits, false);
        assert!(
            unbounded
                .iter()
                .any(|(r, l)| *r == libc::RLIMIT_AS && l.rlim_cur == libc::RLIM_INFINITY)
        );
        let set = rlimits(&limits, true);
        let value = |resource| {
            set.iter()
                .find(|(r, _)| *r == resource)
                .map(|(_, l)| (l.rlim_cur, l.rlim_max))
                .unwrap()
        };
        let (soft, hard) = value(libc::RLIMIT_CPU);
        assert_eq!(
            (soft, hard),
            (7, 8),
            "SIGXCPU at the limit, SIGKILL a second on"
        );
        for (resource, wanted) in [
            (libc::RLIMIT_FSIZE, 1 << 20),
            (libc::RLIMIT_NOFILE, 64),
            (libc::RLIMIT_CORE, 0),
            (libc::RLIMIT_MSGQUEUE, 0),
        ] {
            let mut own = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes only `own`.
            unsafe { libc::getrlimit(resource, &mut own) };
            let expected = wanted.min(own.rlim_max);
            assert_eq!(value(resource), (expected, expected), "resource {resource}");
        }
        // Soft and hard alike but for CPU: a command cannot raise its own soft limit back.
        assert!(
            set.iter()
                .all(|(r, l)| *r == libc::RLIMIT_CPU || l.rlim_cur == l.rlim_max)
        );
    }
}
