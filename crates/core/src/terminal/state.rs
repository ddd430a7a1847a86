//! The terminal service's parts: the policy, the jail, the redactor, the trail, HOME, the
//! sessions, egress, the tickets, nested calls and the credentials. Only the type: its
//! making and its entry points are `service.rs`, its process tools `process.rs`, and the
//! steps of a call read it through the facets beside them (`call`, `result`, `approval`,
//! `describe`).

use super::nested_calls::Nested;
use crate::audit::{CallId, Gate};
use crate::config::TerminalPolicy;
use crate::home::PrivateHome;
use crate::jail::JailRoot;
use crate::redact::Redactor;
use crate::sessions::SessionTable;

/// The terminal server's core: every rule, no transport.
#[derive(Debug)]
pub struct TerminalService {
    pub(super) policy: TerminalPolicy,
    pub(super) jail: JailRoot,
    pub(super) redactor: Redactor,
    pub(super) gate: std::sync::Arc<Gate>,
    pub(super) env: Vec<(String, String)>,
    /// Every command's HOME: empty, outside the jail, read-only to commands.
    pub(super) home: PrivateHome,
    /// The process sessions (see [`super::process`]).
    pub(super) sessions: SessionTable,
    /// Ports exposed at once ([`TerminalService::reserve_exposure`]).
    pub(super) exposed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// `jail_bytes`: what the jail and the write paths hold, measured after calls.
    pub(super) usage: crate::usage::JailUsage,
    /// How the protected paths and every git directory's trust surface are held, once the
    /// server holds them ([`Self::hold_protected`]).
    /// Shared with the narrowed services of the gateway's servers, which run in the same
    /// jail ([`Self::with_egress_on`]).
    pub(super) held: std::sync::Arc<std::sync::OnceLock<crate::held::Holder>>,
    /// Egress: the proxy that serves each call's connections ([`Self::with_egress`]).
    pub(super) egress: Option<std::sync::Arc<dyn EgressProvider>>,
    /// Approval tickets for clients that cannot be asked ([`crate::tickets`]).
    pub(super) tickets: std::sync::Arc<crate::tickets::Tickets>,
    /// Where commands reach the server's SSH agent, when the policy holds an ssh key
    /// ([`crate::agent_dir`]).
    pub(super) agent: Option<crate::agent_dir::AgentDir>,
    /// What persons granted beyond one call ([`crate::scopes`]).
    pub(super) scopes: std::sync::Arc<crate::scopes::Scopes>,
    /// Nested calls: the shims, and the tokens of the running calls whose commands may
    /// make them ([`super::nested_calls`]).
    pub(super) nested: Nested,
    /// The credentials' placeholders and real values, which the proxy adds.
    pub(super) vault: std::sync::Arc<crate::credentials::Vault>,
    /// The CA bundle commands trust (the system's roots and the proxy's CA), when the proxy
    /// terminates TLS for credential hosts.
    pub(super) ca_bundle: Option<std::path::PathBuf>,
}

/// Makes the proxy of one call (egress, DESIGN §9): the proxy of `safe_mcp_proxy`, which
/// knows the network policy and writes the call's `network` records.
pub trait EgressProvider: Send + Sync + std::fmt::Debug {
    /// The proxy for the call `call`.
    fn for_call(&self, call: &CallId) -> safe_mcp_contract::Egress;

    /// The certificate bundle commands must trust for the hosts whose TLS the proxy
    /// terminates (the system's roots and the proxy's own CA), if it terminates any.
    fn ca_bundle(&self) -> Option<&std::path::Path> {
        None
    }
}
