//! What confinement a server asks for ([`ConfinementSpec`], built by the core from the
//! policy) and what the executor says it enforces ([`ConfinementReport`], shown by
//! `describe_policy`, `explain_command` and `doctor`; [`ConfinementSummary`] with every run
//! and attempt record). A report is a statement of fact about this kernel and this user; it
//! must never claim more than the executor applies.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Device files every command may name and open, with whether it may write them: they hold
/// nothing and lead nowhere (`git diff --no-index /dev/null new.txt`, `head -c 16
/// /dev/urandom`). The path checks allow exactly these names; Landlock grants exactly these
/// files (and no device ioctl).
pub const HARMLESS_DEVICES: &[(&str, bool)] = &[
    ("/dev/null", true),
    ("/dev/zero", true),
    ("/dev/full", true),
    ("/dev/random", false),
    ("/dev/urandom", false),
];

/// How strictly kernel confinement is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// A ruleset that is not fully enforced means nothing runs. The default.
    Enforce,
    /// Run with what the kernel gives, and say so.
    BestEffort,
    /// Path checks only.
    Off,
}

impl SandboxMode {
    /// The policy-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Enforce => "enforce",
            SandboxMode::BestEffort => "best-effort",
            SandboxMode::Off => "off",
        }
    }
}

/// Whether each command gets a private view of the machine (its own mount, ipc, uts and
/// network namespaces, with a fresh root holding only what the policy grants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamespaceMode {
    /// Where the server can make namespaces (root, or unprivileged user namespaces); the
    /// host's view otherwise, and every report says which. The default.
    Auto,
    /// The server refuses to start where it cannot make them.
    Required,
    /// The host's view, confined by Landlock, seccomp and the rest.
    Off,
}

impl NamespaceMode {
    /// The policy-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NamespaceMode::Auto => "auto",
            NamespaceMode::Required => "required",
            NamespaceMode::Off => "off",
        }
    }
}

/// The rlimits (and pids cap) of every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLimits {
    /// RLIMIT_CPU.
    pub cpu_seconds: u64,
    /// RLIMIT_AS.
    pub memory_bytes: u64,
    /// RLIMIT_FSIZE.
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// RLIMIT_NPROC, or the pids cgroup's `pids.max` for a root server.
    pub processes: u64,
}

/// The confinement a server's commands get, as the policy asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinementSpec {
    /// The jail: read+write for commands.
    pub jail_root: PathBuf,
    /// Enforce, best-effort or off.
    pub mode: SandboxMode,
    /// Whether commands may open non-unix sockets and TCP.
    pub network: bool,
    /// `[terminal.network] mode = "allowlist"`: commands reach the network only through
    /// the server's proxy ([`crate::ExecPlan::egress`]), never directly.
    pub egress: bool,
    /// Whether commands may create unix sockets.
    pub unix_sockets: bool,
    /// TCP ports commands may bind and connect to where they share the host's network (no
    /// private view): `[terminal.network] listen_ports`.
    pub listen_ports: Vec<u16>,
    /// Readable paths outside the jail (and executable beneath, without [`Self::executables`]).
    pub read_paths: Vec<PathBuf>,
    /// What commands may execute, where the exec allowlist is on (the default): `None`
    /// leaves every read path executable, as before the allowlist.
    pub executables: Option<Executables>,
    /// Read+write paths outside the jail (caches), checked at load.
    pub write_paths: Vec<PathBuf>,
    /// Files and directories beneath the write paths or the jail that commands may read but
    /// never write, replace or remove: bound read-only over themselves in the private view.
    pub read_only_files: Vec<PathBuf>,
    /// Directories in the jail bound read-write onto themselves in the private view, so that
    /// they cannot be renamed away (the parents of the read-only ones, such as `.git`).
    pub pinned_dirs: Vec<PathBuf>,
    /// Whether files inside the jail may be executed.
    pub exec_in_jail: bool,
    /// `[terminal.audit] exec_log`: every program a command's tree executes is noted for
    /// the call's outcome record.
    pub exec_log: bool,
    /// Whether commands get a private view of the machine.
    pub namespaces: NamespaceMode,
    /// The commands' HOME (read-only), when the server made one.
    pub home: Option<PathBuf>,
    /// Limits of each command.
    pub limits: ProcessLimits,
}

/// What the exec allowlist grants (`[terminal.sandbox] exec_allowlist`): the only files a
/// command, and anything it starts, may execute, besides the jail's under `exec_in_jail`.
/// Landlock checks execute on every `execve` of the tree, on the file, a script's `#!`
/// interpreter and an ELF's loader alike.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Executables {
    /// Files (or directories, executable beneath) every stage may execute: the allowlisted
    /// programs as resolved on the policy's PATH and `[terminal.allowlist] helpers`.
    pub every: Vec<PathBuf>,
    /// More for the stages of one program, by the path [`crate::ExecStage::program`] holds:
    /// the helpers a profile declares for it (cargo's linker, git's exec-path).
    pub helpers: Vec<(PathBuf, Vec<PathBuf>)>,
    /// The policy's PATH, where a script's `#!/usr/bin/env NAME` finds its interpreter.
    pub path: Vec<PathBuf>,
}

/// What commands may execute, as the executor opened it: every path canonical, with the
/// interpreters and loaders those files need to start.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExecuteReport {
    /// `allowlist` (only these), `read-paths` (anything beneath a read path: the allowlist
    /// is off) or `off` (no Landlock).
    pub mode: &'static str,
    /// What every stage may execute.
    pub every: Vec<PathBuf>,
    /// What the stages of one program may execute beyond `every`, by program path.
    pub helpers: std::collections::BTreeMap<String, Vec<PathBuf>>,
    /// What was named but could not be opened (not installed), which nothing may execute.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<PathBuf>,
}

/// How much of the requested Landlock rights the kernel enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LandlockState {
    /// Every right requested.
    Full,
    /// Some: the kernel's ABI is older than the one requested.
    Partial,
    /// None: no Landlock on this kernel.
    None,
    /// Sandbox mode off.
    Off,
}

impl LandlockState {
    /// The name the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            LandlockState::Full => "full",
            LandlockState::Partial => "partial",
            LandlockState::None => "none",
            LandlockState::Off => "off",
        }
    }
}

impl std::fmt::Display for LandlockState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which view of the machine commands get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewKind {
    /// Namespaces of the server's own and a fresh root.
    Private,
    /// The host's filesystem, confined by Landlock and seccomp.
    Host,
    /// Not made (a report of what a server would try: the private view first).
    Planned,
}

impl ViewKind {
    /// The name the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            ViewKind::Private => "private",
            ViewKind::Host => "host",
            ViewKind::Planned => "planned",
        }
    }
}

impl std::fmt::Display for ViewKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What Landlock enforces.
#[derive(Debug, Clone, Serialize)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI (0: none).
    pub kernel_abi: i64,
    /// The ABI whose rights are requested.
    pub requested_abi: i64,
    /// How much of it the kernel enforces.
    pub enforced: LandlockState,
    /// Read beneath these (and execute, when `execute.mode` is `read-paths`).
    pub read_paths: Vec<PathBuf>,
    /// What may be executed.
    pub execute: ExecuteReport,
    /// Read+write beneath these.
    pub read_write: Vec<PathBuf>,
    /// Rights granted nowhere.
    pub never_granted: Vec<&'static str>,
    /// Whether files in the jail may be executed.
    pub exec_in_jail: bool,
    /// `allowed` or `denied`.
    pub tcp: String,
    /// IPC scopes (signals, abstract unix sockets).
    pub scoped: Vec<&'static str>,
    /// Each call's private temporary directory (read+write for that call only).
    pub tmpdir: String,
}

/// The variables the executor sets for every call, naming its private temporary directory.
pub const CALL_TMP_VARIABLES: &[&str] = &["TMPDIR", "TMP", "TEMP"];

/// The variables the executor sets for a call with egress, naming the proxy
/// (`http://127.0.0.1:PORT`); [`NO_PROXY_VARIABLES`] are set empty.
pub const PROXY_VARIABLES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// Set empty for a call with egress: every name goes through the proxy.
pub const NO_PROXY_VARIABLES: &[&str] = &["NO_PROXY", "no_proxy"];

/// The proxy's port inside a command's own network namespace (the namespace tier).
pub const EGRESS_PORT: u16 = 3128;

/// How commands reach the network under egress, for the reports.
#[derive(Debug, Clone, Serialize)]
pub struct EgressReport {
    /// `namespace` (each command in a network namespace of its own, whose only way out is
    /// the proxy), `landlock` (Landlock allows TCP connect to the proxy's port alone,
    /// seccomp refuses every socket but TCP and unix), or `unavailable` (nothing runs).
    pub tier: EgressTier,
    /// What that means, or why no tier is available.
    pub detail: String,
}

/// What the seccomp filter refuses.
#[derive(Debug, Clone, Serialize)]
pub struct SeccompReport {
    /// Whether a filter is installed.
    pub enabled: bool,
    /// Syscalls refused whatever their arguments.
    pub denied: Vec<&'static str>,
    /// Syscalls refused for a set-id mode.
    pub refused_setid_modes: Vec<&'static str>,
    /// Syscalls refused for a device node.
    pub refused_device_nodes: Vec<&'static str>,
    /// Terminal `ioctl`s refused: those that push input into a terminal or reach another
    /// one (`TIOCSTI`, `TIOCLINUX`, `TIOCCONS`, `TIOCSETD`).
    pub refused_terminal_ioctls: Vec<&'static str>,
    /// Which sockets may be created.
    pub sockets: &'static str,
    /// System V IPC: allowed in an ipc namespace of the command's own, else refused.
    pub sysv_ipc: &'static str,
    /// Executable memfds: allowed with `exec_in_jail`, else `memfd_create` must seal.
    pub memfd: &'static str,
    /// Whether each `execve` and `execveat` is told to the server's exec log
    /// (`[terminal.audit] exec_log`).
    pub exec_log: bool,
}

/// The limits in force.
#[derive(Debug, Clone, Serialize)]
pub struct RlimitReport {
    /// RLIMIT_CPU.
    pub cpu_seconds: u64,
    /// The memory limit (see `memory_enforced_by`).
    pub memory_bytes: u64,
    /// RLIMIT_FSIZE.
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// The process cap.
    pub processes: u64,
    /// What enforces the process cap.
    pub processes_enforced_by: &'static str,
    /// What enforces the memory limit: a memory cgroup per call (memory used), or
    /// RLIMIT_AS per process (address space).
    pub memory_enforced_by: &'static str,
    /// RLIMIT_CORE (always 0).
    pub core_bytes: u64,
}

/// Which view of the machine commands get.
#[derive(Debug, Clone, Serialize)]
pub struct ViewReport {
    /// The policy's `namespaces` setting.
    pub setting: &'static str,
    /// Private (own namespaces, fresh root), host, or planned.
    pub view: ViewKind,
    /// The namespaces each command enters.
    pub namespaces: Vec<&'static str>,
    /// What is visible, for a private view; why the host view, otherwise.
    pub detail: String,
    /// Whether a process session may run on a pseudo-terminal: each command mounts a
    /// devpts of its own (a private view with pid namespaces, on a kernel that allows it).
    pub terminals: bool,
}

/// The confinement in full, for `describe_policy`, `explain_command` and `doctor`.
#[derive(Debug, Clone, Serialize)]
pub struct ConfinementReport {
    /// The policy's sandbox mode.
    pub mode: &'static str,
    /// The view of the machine.
    pub view: ViewReport,
    /// Landlock.
    pub landlock: LandlockReport,
    /// seccomp.
    pub seccomp: SeccompReport,
    /// Whether `no_new_privs` is set.
    pub no_new_privs: bool,
    /// Which capabilities a command keeps.
    pub capabilities: &'static str,
    /// Resource limits.
    pub rlimits: RlimitReport,
    /// How the process tree is handled.
    pub process_group: &'static str,
    /// Egress through the server's proxy, when the policy asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressReport>,
}

/// The compact form recorded with every run: mode, Landlock state, seccomp, capabilities,
/// network.
#[derive(Debug, Clone, Serialize)]
pub struct ConfinementSummary {
    /// The policy's sandbox mode.
    pub mode: &'static str,
    /// How much of Landlock the kernel enforces.
    pub landlock: LandlockState,
    /// The kernel's Landlock ABI.
    pub landlock_abi: i64,
    /// Whether a seccomp filter is installed.
    pub seccomp: bool,
    /// What commands hold of the capabilities.
    pub capabilities: Capabilities,
    /// `private` or `host`.
    pub view: ViewKind,
    /// Whether commands may use the network.
    pub network: bool,
    /// What TCP commands have.
    pub tcp: TcpReach,
    /// Egress's tier, when the policy asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressTier>,
}

/// Names the reports use, for an enum whose `as_str` gives them.
macro_rules! named {
    ($name:ident) => {
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

/// What commands hold of the capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capabilities {
    /// A root server's commands: every capability dropped and the securebits locked.
    AllDropped,
    /// An unprivileged server's commands: none held to begin with.
    NoneHeld,
    /// Sandbox mode off.
    Kept,
}

impl Capabilities {
    /// The name the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Capabilities::AllDropped => "all dropped",
            Capabilities::NoneHeld => "none held",
            Capabilities::Kept => "kept",
        }
    }
}

named!(Capabilities);

/// What TCP commands have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpReach {
    /// Whatever the network namespace has (network open, or no sandbox).
    Any,
    /// The private view's own loopback.
    Loopback,
    /// The egress proxy's port only.
    Proxy,
    /// `listen_ports` on the host's network.
    Ports,
    /// No TCP at all.
    None,
}

impl TcpReach {
    /// The name the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            TcpReach::Any => "any",
            TcpReach::Loopback => "loopback",
            TcpReach::Proxy => "proxy",
            TcpReach::Ports => "ports",
            TcpReach::None => "none",
        }
    }
}

named!(TcpReach);

/// How commands are held to the egress proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressTier {
    /// A network namespace per stage, holding only the proxy's listener.
    Namespace,
    /// Landlock's TCP rules: connect to the call's proxy port only.
    Landlock,
    /// Neither can be had here: every command is refused.
    Unavailable,
}

impl EgressTier {
    /// The name the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            EgressTier::Namespace => "namespace",
            EgressTier::Landlock => "landlock",
            EgressTier::Unavailable => "unavailable",
        }
    }
}

named!(EgressTier);

/// What this kernel and this user can enforce, for `safe-mcp doctor`.
#[derive(Debug, Clone, Serialize)]
pub struct KernelReport {
    /// Whether the kernel takes x32 syscall numbers.
    pub x32_abi: &'static str,
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: i64,
    /// `full`, `partial` or `unavailable`.
    pub landlock: &'static str,
    /// Whether seccomp filters are available.
    pub seccomp_filter: bool,
    /// Whether `openat2(RESOLVE_BENEATH)` works.
    pub openat2_resolve_beneath: bool,
    /// Whether this process can be a child subreaper.
    pub child_subreaper: bool,
    /// Whether `/proc/self/task` exists.
    pub proc_children: bool,
    /// This process's effective uid.
    pub euid: u32,
    /// What a command of a server run by this user keeps.
    pub command_capabilities: &'static str,
    /// Which egress tier a server run by this user would use (`[terminal.network] mode =
    /// "allowlist"`): `namespace`, `landlock` or `unavailable`, and why.
    pub egress_tier: String,
    /// Whether a server run by this user can make the private view (root, or user
    /// namespaces allowed); where it cannot, commands see the host's view.
    pub private_view: bool,
}
