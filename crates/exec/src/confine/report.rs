//! What confinement a command gets, or would get, in the report (`describe_policy`,
//! `explain`, `doctor`) and its one-line summary; and which egress tier holds commands to the
//! proxy here.

use std::path::{Path, PathBuf};

use safe_mcp_contract::{
    Capabilities, ConfinementReport, ConfinementSpec, ConfinementSummary, EgressReport, EgressTier,
    HARMLESS_DEVICES, LandlockReport, LandlockState, NamespaceMode, RlimitReport, SandboxMode,
    SeccompReport, TcpReach, ViewKind, ViewReport,
};

use crate::egress::Tier;
use crate::seccomp::{self, Inet};

use super::tcp::TcpAccess;

use super::capabilities::CapabilityDrop;
use super::cgroup::{MemoryCgroups, PidsCgroup};
use super::rules::{TARGET_ABI, landlock_abi};

/// Which view of the machine commands get.
pub(super) enum ViewState {
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
        Cgroups {
            pids: PidsCgroup::would_be_used(),
            memory: MemoryCgroups::would_be_used() && spec.mode != SandboxMode::Off,
        },
        &view,
        capabilities,
        None,
        egress.as_ref(),
        super::executables::execute_report(
            spec,
            spec.executables
                .as_ref()
                .map(super::executables::Resolved::of)
                .as_ref(),
        ),
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

/// Which cgroups bound commands: the pids group (a root server), and a memory group per call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cgroups {
    pub(super) pids: bool,
    pub(super) memory: bool,
}

/// The report and summary for `spec` on this kernel, for this user.
pub(super) fn describe(
    spec: &ConfinementSpec,
    cgroups: Cgroups,
    view: &ViewState,
    capabilities: Option<CapabilityDrop>,
    tmp_root: Option<&Path>,
    egress: Option<&Result<Tier, String>>,
    execute: safe_mcp_contract::ExecuteReport,
) -> (ConfinementReport, ConfinementSummary) {
    let abi = landlock_abi();
    let off = spec.mode == SandboxMode::Off;
    let landlock_state = match (spec.mode, abi) {
        (SandboxMode::Off, _) => LandlockState::Off,
        (_, a) if a >= TARGET_ABI as i64 => LandlockState::Full,
        (_, 0) => LandlockState::None,
        _ => LandlockState::Partial,
    };
    // A planned view is reported as the private one the server would try first.
    let view_network =
        !spec.egress && matches!(view, ViewState::Private(..) | ViewState::Planned(_));
    let tcp = TcpAccess::of(spec, view_network);
    let view_report = view_report(spec, view);
    let report = ConfinementReport {
        mode: spec.mode.as_str(),
        view: view_report,
        landlock: landlock_report(
            spec,
            (abi, landlock_state),
            view,
            (&tcp, off),
            tmp_root,
            execute,
        ),
        seccomp: seccomp_report(spec, off, tcp.inet(), view),
        no_new_privs: !off,
        capabilities: capabilities.map_or("kept (sandbox mode off)", CapabilityDrop::describe),
        rlimits: rlimit_report(spec, cgroups),
        process_group: "own; the whole tree is killed on timeout or cancel",
        egress: egress.map(|tier| match tier {
            Ok(tier) => EgressReport {
                tier: tier.kind(),
                detail: tier.describe(),
            },
            Err(why) => EgressReport {
                tier: EgressTier::Unavailable,
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
            Some(CapabilityDrop::Everything) => Capabilities::AllDropped,
            Some(CapabilityDrop::HeldSets) => Capabilities::NoneHeld,
            None => Capabilities::Kept,
        },
        view: if matches!(view, ViewState::Private(..)) {
            ViewKind::Private
        } else {
            ViewKind::Host
        },
        network: spec.network,
        tcp: if off { TcpReach::Any } else { tcp.short() },
        egress: egress.map(|tier| tier.as_ref().map_or(EgressTier::Unavailable, |t| t.kind())),
    };
    (report, summary)
}

/// Which view commands get, as the report says it.
fn view_report(spec: &ConfinementSpec, view: &ViewState) -> ViewReport {
    match view {
        ViewState::Private(names, visible, pts) => ViewReport {
            setting: spec.namespaces.as_str(),
            view: ViewKind::Private,
            namespaces: names.clone(),
            detail: visible.clone(),
            terminals: *pts,
        },
        ViewState::Host(why) => ViewReport {
            setting: spec.namespaces.as_str(),
            view: ViewKind::Host,
            namespaces: Vec::new(),
            detail: why.clone(),
            terminals: false,
        },
        ViewState::Planned(what) => ViewReport {
            setting: spec.namespaces.as_str(),
            view: ViewKind::Planned,
            namespaces: Vec::new(),
            detail: (*what).to_owned(),
            terminals: false,
        },
    }
}

/// What Landlock holds commands to.
fn landlock_report(
    spec: &ConfinementSpec,
    (abi, enforced): (i64, LandlockState),
    view: &ViewState,
    (tcp, off): (&TcpAccess, bool),
    tmp_root: Option<&Path>,
    execute: safe_mcp_contract::ExecuteReport,
) -> LandlockReport {
    let strings = |names: &[&'static str]| if off { Vec::new() } else { names.to_vec() };
    LandlockReport {
        kernel_abi: abi,
        requested_abi: TARGET_ABI as i64,
        enforced,
        read_paths: spec.read_paths.clone(),
        execute,
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
        tcp: if off {
            "allowed".to_owned()
        } else {
            tcp.describe()
        },
        scoped: strings(&["signal", "abstract-unix-socket"]),
        tmpdir: format!(
            "a directory of its own for each call beneath {}, named by TMPDIR, TMP and TEMP, writable by that call only, removed when it ends",
            tmp_root.map_or_else(
                || "the server's temporary directory".to_owned(),
                |p| p.display().to_string()
            )
        ),
    }
}

/// What the seccomp filter refuses.
fn seccomp_report(
    spec: &ConfinementSpec,
    off: bool,
    inet: Inet,
    view: &ViewState,
) -> SeccompReport {
    SeccompReport {
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
        refused_terminal_ioctls: if off {
            Vec::new()
        } else {
            seccomp::TERMINAL_IOCTLS.iter().map(|(n, _)| *n).collect()
        },
        sockets: match (off, inet, spec.unix_sockets) {
            (true, ..) | (false, Inet::Any, true) => "any",
            (false, Inet::Any, false) => "any but AF_UNIX (socketpair allowed)",
            (false, Inet::Tcp, true) => "AF_UNIX, and TCP streams over IPv4 and IPv6",
            (false, Inet::Tcp, false) => "TCP streams over IPv4 and IPv6 (socketpair allowed)",
            (false, Inet::None, true) => "AF_UNIX only",
            (false, Inet::None, false) => "none (socketpair only)",
        },
        sysv_ipc: match (off, view) {
            (true, _) => "allowed (sandbox mode off): commands share the server's ipc namespace",
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
        exec_log: !off && spec.exec_log,
    }
}

/// The process limits, and what enforces the two that need it.
fn rlimit_report(spec: &ConfinementSpec, cgroups: Cgroups) -> RlimitReport {
    RlimitReport {
        cpu_seconds: spec.limits.cpu_seconds,
        memory_bytes: spec.limits.memory_bytes,
        file_size_bytes: spec.limits.file_size_bytes,
        open_files: spec.limits.open_files,
        processes: spec.limits.processes,
        processes_enforced_by: if cgroups.pids {
            "cgroup v1 pids.max (shared by all commands of this server)"
        } else {
            "RLIMIT_NPROC (per user; does not bind root)"
        },
        memory_enforced_by: if cgroups.memory {
            "cgroup v1 memory.limit_in_bytes: memory used by the whole command, a group of its own per call (RLIMIT_AS is not set)"
        } else {
            "RLIMIT_AS: address space of each process (runtimes that reserve much, like V8 and wasm, need more than they use)"
        },
        core_bytes: 0,
    }
}

/// How commands of `spec` can be held to the proxy here: their own network namespace in
/// the private view, else Landlock's TCP rules (ABI 4), else not at all.
pub(super) fn egress_tier(spec: &ConfinementSpec, view: bool) -> Result<Tier, String> {
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use safe_mcp_contract::{
        ConfinementSpec, LandlockState, NamespaceMode, ProcessLimits, SandboxMode, ViewKind,
    };

    use super::{egress_tier, planned_report};
    use crate::egress::Tier;

    fn spec(mode: SandboxMode, namespaces: NamespaceMode) -> ConfinementSpec {
        ConfinementSpec {
            jail_root: PathBuf::from("/nonexistent-jail"),
            mode,
            network: false,
            egress: true,
            unix_sockets: false,
            listen_ports: Vec::new(),
            read_paths: Vec::new(),
            executables: None,
            write_paths: Vec::new(),
            read_only_files: Vec::new(),
            pinned_dirs: Vec::new(),
            exec_in_jail: false,
            exec_log: false,
            namespaces,
            home: None,
            limits: ProcessLimits {
                cpu_seconds: 1,
                memory_bytes: 1 << 30,
                file_size_bytes: 1 << 20,
                open_files: 64,
                processes: 16,
            },
        }
    }

    #[test]
    fn egress_needs_a_sandbox_and_prefers_the_namespace_tier() {
        let on = spec(SandboxMode::Enforce, NamespaceMode::Auto);
        assert!(matches!(egress_tier(&on, true), Ok(Tier::Namespace)));
        let off = spec(SandboxMode::Off, NamespaceMode::Auto);
        let e = egress_tier(&off, true).unwrap_err();
        assert!(e.contains("sandbox mode is off"), "{e}");
        // Without a view: Landlock's TCP rules where the kernel has them, else nothing.
        match egress_tier(&on, false) {
            Ok(tier) => assert!(matches!(tier, Tier::Landlock)),
            Err(e) => assert!(e.contains("no TCP rules"), "{e}"),
        }
    }

    #[test]
    fn a_planned_report_builds_nothing_and_says_what_off_drops() {
        let off = planned_report(&spec(SandboxMode::Off, NamespaceMode::Auto));
        assert_eq!(off.landlock.enforced, LandlockState::Off);
        assert_eq!(off.view.view, ViewKind::Host);
        let report = planned_report(&spec(SandboxMode::Enforce, NamespaceMode::Off));
        assert_eq!(report.view.view, ViewKind::Host);
        assert!(report.seccomp.enabled);
        // Nothing was made for it: the jail named does not exist and was not created.
        assert!(!std::path::Path::new("/nonexistent-jail").exists());
    }
}
