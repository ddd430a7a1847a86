//! The Landlock rules of a server, opened once at start, and each call's ruleset built from
//! them (raw syscalls where a stage's init adds its own mounts).

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use safe_mcp_contract::{ConfinementSpec, EGRESS_PORT, HARMLESS_DEVICES};

use crate::view::View;

use super::error::ConfineError;

/// The Landlock ABI whose rights we request: filesystem (incl. truncate, ioctl on devices),
/// TCP bind/connect (v4) and signal / abstract-socket scoping (v6).
pub(super) const TARGET_ABI: ABI = ABI::V6;

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

/// `LANDLOCK_RULE_PATH_BENEATH` of `landlock_add_rule(2)`.
pub(super) const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
#[repr(C, packed)]
pub(super) struct PathBeneathAttr {
    pub(super) allowed_access: u64,
    pub(super) parent_fd: i32,
}

/// `landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, {access, parent_fd}, 0)`: 0, or
/// -1 with errno set. One raw syscall (no allocation, no lock), so a stage's init may call it.
pub(super) fn add_path_rule(
    ruleset: libc::c_int,
    parent_fd: libc::c_int,
    access: u64,
) -> libc::c_long {
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

/// The Landlock rules of a server: every path opened once at start, with the rights it
/// grants. Each call's ruleset is these plus the call's temporary directory.
pub(super) struct LandlockRules {
    pub(super) level: CompatLevel,
    /// Whether Landlock leaves TCP alone (network open, or the view's own loopback).
    pub(super) network: bool,
    /// TCP ports commands may bind and connect to (`listen_ports`, on the host's network).
    pub(super) ports: Vec<u16>,
    /// Whether calls may connect to the proxy's port (egress).
    pub(super) egress: bool,
    pub(super) rules: Vec<(PathFd, BitFlags<AccessFs>)>,
    /// The exec allowlist's files for every stage (empty without the allowlist, when the
    /// read paths are executable instead).
    pub(super) exec_every: Vec<(PathFd, BitFlags<AccessFs>)>,
    /// Its further files for the stages of one program: group `k` is `exec_groups[k - 1]`.
    pub(super) exec_groups: Vec<Vec<(PathFd, BitFlags<AccessFs>)>>,
    /// What the jail grants, and so also the write paths and a call's temporary directory.
    pub(super) writable: BitFlags<AccessFs>,
    /// What each call's ruleset handles on this kernel, and the size of the attr struct
    /// this kernel knows: asked once, at start.
    pub(super) attr: RawRulesetAttr,
    pub(super) attr_size: usize,
}

impl LandlockRules {
    /// With a private `view`, commands may also read its synthetic `/etc` files (other
    /// inodes than the host's) and use `/dev/tty` (which, with no controlling terminal,
    /// opens nothing; in a session on a terminal, it opens that terminal). Each command's own `/proc` and `/dev/pts` are fresh file systems the
    /// server cannot name beforehand (Landlock ignores the covered mount point), so their
    /// rules are added by the command's init ([`super::Confinement::add_own_mounts`]).
    pub(super) fn open(
        spec: &ConfinementSpec,
        hard: bool,
        view: Option<&View>,
        tcp: &super::tcp::TcpAccess,
        exec: Option<&super::executables::Resolved>,
    ) -> Result<LandlockRules, ConfineError> {
        let extra_read = view.map_or(Vec::new(), View::own_files);
        let tty = view
            .filter(|v| v.tty())
            .map(|_| PathBuf::from(crate::view::TTY));
        let all = AccessFs::from_all(TARGET_ABI);
        // With the exec allowlist, the read paths are read only; what may be executed is
        // granted file by file.
        let read_exec = if exec.is_some() {
            AccessFs::from_read(TARGET_ABI) & !AccessFs::Execute
        } else {
            AccessFs::from_read(TARGET_ABI)
        };
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
            // /dev/tty opens only the command's controlling terminal, which only a session
            // on a terminal of its own has: `less` and `git add -p` set its modes there.
            .chain(tty.map(|p| {
                (
                    p,
                    AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev,
                )
            }))
            .chain(spec.write_paths.iter().cloned().map(|p| (p, writable)))
            .chain(std::iter::once((spec.jail_root.clone(), writable)))
            .collect();
        let open = |path: &Path, access| {
            PathFd::new(path)
                .map(|fd| (fd, access_for(path, access)))
                .map_err(|e| ConfineError::landlock(path.display(), e))
        };
        let mut rules = Vec::with_capacity(wanted.len());
        for (path, access) in wanted.into_iter().filter(|(p, _)| p.exists()) {
            rules.push(open(&path, access)?);
        }
        let runnable = AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir;
        let open_all = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| open(p, runnable))
                .collect::<Result<Vec<_>, _>>()
        };
        let (exec_every, exec_groups) = match exec {
            Some(resolved) => (
                open_all(&resolved.every)?,
                resolved
                    .helpers
                    .iter()
                    .map(|(_, own)| open_all(own))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            None => (Vec::new(), Vec::new()),
        };
        // The ABI whose rights a ruleset handles here: the kernel's, at most TARGET_ABI.
        let abi = i32::try_from(landlock_abi())
            .unwrap_or(0)
            .min(TARGET_ABI as i32);
        let handled = ABI::from(abi);
        let attr = RawRulesetAttr {
            handled_access_fs: AccessFs::from_all(handled).bits(),
            handled_access_net: if tcp.landlock_handles() {
                AccessNet::from_all(handled).bits()
            } else {
                0
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
            network: !tcp.landlock_handles(),
            ports: tcp.ports().to_vec(),
            egress: spec.egress,
            rules,
            exec_every,
            exec_groups,
            writable,
            attr,
            attr_size,
        })
    }

    /// A ruleset of these rules and read+write beneath `tmp`, built by the landlock crate,
    /// which checks every right against the kernel as the compatibility level says. Done
    /// once at start, so that a refusal stops the start rather than a call.
    pub(super) fn validate(&self, tmp: &Path) -> Result<(), ConfineError> {
        let err = |e: landlock::RulesetError| ConfineError::landlock("the ruleset", e);
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
        let listen = self
            .ports
            .iter()
            .map(|p| Ok(NetPort::new(*p, AccessNet::BindTcp | AccessNet::ConnectTcp)));
        let tmp_fd = PathFd::new(tmp).map_err(|e| ConfineError::landlock(tmp.display(), e))?;
        let rules = self
            .rules
            .iter()
            .chain(&self.exec_every)
            .chain(self.exec_groups.iter().flatten())
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
            .map_err(err)?
            .add_rules(listen)
            .map_err(err)?;
        Ok(())
    }

    /// The same ruleset for one call's stages of exec `group` (0: what every stage may
    /// execute; `k`: and the helpers of the `k`th program that has some), in raw syscalls:
    /// one to create it, one per rule, with the rights this kernel handles (what
    /// [`LandlockRules::validate`] accepted). The crate's checks cost a `fstat` per rule on
    /// every call; they were made once at start.
    pub(super) fn ruleset(
        &self,
        tmp: &Path,
        proxy_port: Option<u16>,
        group: usize,
    ) -> Result<OwnedFd, ConfineError> {
        let (attr, size, fs) = (&self.attr, self.attr_size, self.attr.handled_access_fs);
        let failed = |what: &str| ConfineError::landlock(what, std::io::Error::last_os_error());
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
        .map_err(|e| ConfineError::landlock(tmp.display(), std::io::Error::from(e)))?;
        let helpers = group
            .checked_sub(1)
            .and_then(|k| self.exec_groups.get(k))
            .map_or(&[][..], Vec::as_slice);
        let every = self
            .rules
            .iter()
            .chain(&self.exec_every)
            .chain(helpers)
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
            crate::egress::allow_port(ruleset.as_fd(), port, crate::egress::CONNECT_TCP)
                .map_err(|e| ConfineError::landlock("the proxy's port rule", e))?;
        }
        if self.attr.handled_access_net != 0 {
            for &port in &self.ports {
                let access = crate::egress::CONNECT_TCP | crate::egress::BIND_TCP;
                crate::egress::allow_port(ruleset.as_fd(), port, access)
                    .map_err(|e| ConfineError::landlock(format!("listen_ports {port}"), e))?;
            }
        }
        Ok(ruleset)
    }
}

/// `struct landlock_ruleset_attr` as of ABI 6.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(super) struct RawRulesetAttr {
    pub(super) handled_access_fs: u64,
    pub(super) handled_access_net: u64,
    pub(super) scoped: u64,
}

/// The rights of `access` that apply to `path`: a file takes only the rights of files.
pub(super) fn access_for(path: &Path, access: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(TARGET_ABI)
    }
}
