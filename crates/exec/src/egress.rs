//! The executor's half of egress (DESIGN §9): where a call's commands can reach the proxy,
//! and nowhere else.
//!
//! Two tiers, chosen once at start:
//! - **namespace**, in the private view: each stage's first child unshares a network
//!   namespace of its own, brings its `lo` up, and listens on `127.0.0.1:3128` there
//!   ([`EGRESS_PORT`]) before anything of the command runs. It hands the listening socket to
//!   the server over a socketpair (`SCM_RIGHTS`); the server's proxy accepts on it from the
//!   host's namespace, so the only way out of the command's namespace is that socket: no
//!   route, no other interface, no resolver. No bridge process is needed: a socket belongs
//!   to the namespace it was made in, wherever its descriptor goes. The namespace lives as
//!   long as the listener, which the proxy drops once the call's processes are gone.
//! - **landlock**, where there is no view: the server listens on a fresh loopback port per
//!   call, and the call's Landlock ruleset allows TCP connect to that port alone (and no
//!   bind); seccomp refuses every socket but AF_UNIX and TCP streams. Landlock matches ports,
//!   not addresses, so a command could reach another host on that same port number: the
//!   threat model (docs/THREAT_MODEL.md) names this ceiling.
//!
//! Either way seccomp allows TCP streams only ([`crate::seccomp::Inet::Tcp`]), and every
//! connection a command makes to the proxy arrives on a listener that belongs to its call.

use std::ffi::c_int;
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd, RawFd};

use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType};
use safe_mcp_contract::EGRESS_PORT;

use crate::step::errno;

/// How a server's commands reach the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    /// A network namespace per stage, holding only the proxy's listener.
    Namespace,
    /// Landlock TCP connect to the call's proxy port only.
    Landlock,
}

impl Tier {
    /// The tier as the reports name it.
    pub(crate) fn kind(self) -> safe_mcp_contract::EgressTier {
        match self {
            Tier::Namespace => safe_mcp_contract::EgressTier::Namespace,
            Tier::Landlock => safe_mcp_contract::EgressTier::Landlock,
        }
    }

    pub(crate) fn describe(self) -> String {
        match self {
            Tier::Namespace => format!(
                "each command runs in a network namespace of its own with loopback only; its one way out is the server's proxy at 127.0.0.1:{EGRESS_PORT}, named by HTTP_PROXY, HTTPS_PROXY and ALL_PROXY; Landlock allows TCP connect to that port alone and seccomp allows TCP streams only (no UDP, no raw sockets, no resolver)"
            ),
            Tier::Landlock => "no network namespace can be made here: commands share the host's network, Landlock allows TCP connect to the call's proxy port alone (on any address: Landlock matches ports, not addresses) and no bind, and seccomp allows TCP streams only (no UDP, no raw sockets)".to_owned(),
        }
    }
}

/// The first child's part of the namespace tier: a network namespace of its own, `lo` up,
/// the proxy's listener on `127.0.0.1:EGRESS_PORT`, sent to the server over `channel`.
/// rustix's raw syscalls (no allocation, no lock) and the view's loopback helper.
///
/// # Safety
/// Only in a spawn child, after it has entered the view (whose user namespace, for an
/// unprivileged server, grants the right to make the namespace).
pub(crate) unsafe fn own_network(channel: RawFd) -> Result<(), c_int> {
    // SAFETY: integer argument only; moves this child (and what it starts) to a new,
    // empty network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(errno());
    }
    // SAFETY: we are in the fresh namespace, as `loopback_up` requires.
    unsafe { crate::view::loopback_up() }?;
    let code = |e: rustix::io::Errno| e.raw_os_error();
    let listener = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(code)?;
    let address = std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, EGRESS_PORT);
    rustix::net::bind(&listener, &address).map_err(code)?;
    rustix::net::listen(&listener, 128).map_err(code)?;
    // SAFETY: the descriptor is the child's own copy of the channel, open until exec.
    let channel = unsafe { BorrowedFd::borrow_raw(channel) };
    crate::step::send_fd(channel, listener.as_fd(), b"L", SendFlags::empty())
}

/// A fresh loopback listener for a call of the landlock tier, and its port.
pub(crate) fn loopback_listener() -> std::io::Result<(TcpListener, u16)> {
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let port = listener.local_addr()?.port();
    Ok((listener, port))
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// LANDLOCK_RULE_NET_PORT.
const RULE_NET_PORT: c_int = 2;
/// LANDLOCK_ACCESS_NET_BIND_TCP.
pub(crate) const BIND_TCP: u64 = 1 << 0;
/// LANDLOCK_ACCESS_NET_CONNECT_TCP.
pub(crate) const CONNECT_TCP: u64 = 1 << 1;

/// Allows `access` (TCP connect, bind) to `port` in `ruleset` (raw: the crate checked the
/// same rule at start).
pub(crate) fn allow_port(ruleset: BorrowedFd<'_>, port: u16, access: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let attr = NetPortAttr {
        allowed_access: access,
        port: u64::from(port),
    };
    // SAFETY: the kernel reads the attr struct on this stack for a net-port rule.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_NET_PORT,
            std::ptr::from_ref(&attr),
            0u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
