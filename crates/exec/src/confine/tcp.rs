//! What TCP a command may use (issue 33, item 1), decided once from the spec and the view
//! and read by the seccomp filter, the Landlock ruleset and the reports alike.
//!
//! In the private view without egress, commands share the view's own network namespace,
//! which has loopback and nothing else: no route out, and the host's loopback is another
//! namespace's. There a dev server and its tests may bind and connect freely: nothing can
//! leave. Under egress each command has a namespace of its own whose one way out is the
//! proxy; on the host's network (no view) a bind would listen beside the host's own
//! services and a connect could reach them, so both stay refused but for the ports the
//! operator names (`[terminal.network] listen_ports`).

use safe_mcp_contract::ConfinementSpec;

use crate::seccomp::Inet;

/// What TCP commands get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TcpAccess {
    /// Network mode open (or no sandbox): anything the namespace has.
    Open,
    /// The private view's own loopback-only namespace: bind and connect to any port there.
    ViewLoopback,
    /// Egress: connect to the proxy's port only.
    Egress,
    /// The host's network: bind and connect to these ports only (none: no TCP).
    Ports(Vec<u16>),
}

impl TcpAccess {
    /// For `spec`, where commands share the view's network namespace or not.
    pub(crate) fn of(spec: &ConfinementSpec, view_network: bool) -> TcpAccess {
        match (spec.network, spec.egress, view_network) {
            (true, _, _) => TcpAccess::Open,
            (false, true, _) => TcpAccess::Egress,
            (false, false, true) => TcpAccess::ViewLoopback,
            (false, false, false) => TcpAccess::Ports(spec.listen_ports.clone()),
        }
    }

    /// Which sockets seccomp lets through besides AF_UNIX.
    pub(crate) fn inet(&self) -> Inet {
        match self {
            TcpAccess::Open => Inet::Any,
            TcpAccess::ViewLoopback | TcpAccess::Egress => Inet::Tcp,
            TcpAccess::Ports(ports) if !ports.is_empty() => Inet::Tcp,
            TcpAccess::Ports(_) => Inet::None,
        }
    }

    /// Whether Landlock handles TCP (and so refuses what no rule allows).
    pub(crate) fn landlock_handles(&self) -> bool {
        matches!(self, TcpAccess::Egress | TcpAccess::Ports(_))
    }

    /// The ports Landlock lets commands bind and connect to.
    pub(crate) fn ports(&self) -> &[u16] {
        match self {
            TcpAccess::Ports(ports) => ports,
            _ => &[],
        }
    }

    /// One word for the summary every run records.
    pub(crate) fn short(&self) -> safe_mcp_contract::TcpReach {
        use safe_mcp_contract::TcpReach;
        match self {
            TcpAccess::Open => TcpReach::Any,
            TcpAccess::ViewLoopback => TcpReach::Loopback,
            TcpAccess::Egress => TcpReach::Proxy,
            TcpAccess::Ports(ports) if ports.is_empty() => TcpReach::None,
            TcpAccess::Ports(_) => TcpReach::Ports,
        }
    }

    /// For the reports: what Landlock's TCP rules leave commands.
    pub(crate) fn describe(&self) -> String {
        match self {
            TcpAccess::Open => "allowed".into(),
            TcpAccess::ViewLoopback => "bind and connect on the private view's own loopback (its network namespace has no route out, and the host's loopback is not in it)".into(),
            TcpAccess::Egress => "connect to the proxy's port only; no bind".into(),
            TcpAccess::Ports(ports) if ports.is_empty() => "denied (no private view here: a server would listen on the host's network; [terminal.network] listen_ports opts ports in)".into(),
            TcpAccess::Ports(ports) => format!(
                "bind and connect to ports {} only, on the host's network ([terminal.network] listen_ports)",
                ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}
