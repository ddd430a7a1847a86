//! What the connections of one terminal server share (the sessions' runs, the approval
//! pages, the exposed ports, the MRTR key, the gateway), and a connection's hold on its
//! session scopes.

use std::sync::Arc;

/// What every connection of one terminal server shares.
#[derive(Clone)]
pub struct Shared {
    /// The sessions' runs, awaited at shutdown.
    pub runs: Runs,
    /// The out-of-band approval pages (`[terminal.approvals] url_base`).
    pub pages: Option<Arc<safe_mcp_http::page::Pages>>,
    /// Ports exposed at once.
    pub exposed: crate::mcp::expose::Exposed,
    /// The sealing key and spent nonces of approvals on MCP 2026-07-28.
    pub mrtr: Arc<crate::mcp::mrtr::Mrtr>,
    /// The downstream servers (`[[gateway.servers]]`).
    pub gateway: Option<Arc<crate::gateway::Gateway>>,
}

/// A connection's hold on its session scopes ([`safe_mcp_core::scopes`]): when the MCP
/// session ends (rmcp drops its server), so do they.
pub(crate) struct SessionScopes {
    pub(crate) scopes: Arc<safe_mcp_core::scopes::Scopes>,
    pub(crate) owner: String,
}

impl Drop for SessionScopes {
    fn drop(&mut self) {
        self.scopes.end_session(&self.owner);
    }
}

/// The tasks that run the sessions.
pub type Runs = Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>;
