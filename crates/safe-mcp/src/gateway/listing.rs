//! The servers' resources and prompts, passed through for those whose entry says
//! `resources = true`: listed together (a prompt's name prefixed as a tool's is, a resource
//! keeping its URI), and a read or a get routed back to the server that listed it; and the
//! client's log level, passed to every server.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{Prompt, Resource, ResourceTemplate};

use super::Gateway;
use super::server::Server;

/// `asked` of `server`, given up after its `call_timeout_seconds`: one hung server does not
/// hold a listing of all of them.
async fn bounded<T, E>(server: &Server, asked: impl Future<Output = Result<T, E>>) -> Option<T> {
    let wait = Duration::from_secs(server.entry.call_timeout_seconds);
    tokio::time::timeout(wait, asked).await.ok()?.ok()
}

impl Gateway {
    /// The servers that pass their resources and prompts through, while they run.
    fn sharing(&self) -> impl Iterator<Item = &Arc<Server>> {
        self.servers.iter().filter(|s| s.entry.resources)
    }

    /// Whether any server passes resources and prompts through (the capabilities say so).
    pub fn shares(&self) -> bool {
        self.servers.iter().any(|s| s.entry.resources)
    }

    /// Every passing server's resources.
    pub async fn resources(&self) -> Vec<Resource> {
        let mut out = Vec::new();
        for server in self.sharing() {
            if let Some(peer) = server.peer()
                && let Some(list) = bounded(server, peer.list_all_resources()).await
            {
                out.extend(list.iter().filter_map(|r| server.scrub(r)));
            }
        }
        out
    }

    /// Every passing server's resource templates.
    pub async fn templates(&self) -> Vec<ResourceTemplate> {
        let mut out = Vec::new();
        for server in self.sharing() {
            if let Some(peer) = server.peer()
                && let Some(list) = bounded(server, peer.list_all_resource_templates()).await
            {
                out.extend(list.iter().filter_map(|t| server.scrub(t)));
            }
        }
        out
    }

    /// The server a resource URI belongs to: the one that lists it, or whose template's
    /// fixed start it has; with one passing server, that one.
    pub async fn resource_server(&self, uri: &str) -> Option<Arc<Server>> {
        let sharing: Vec<&Arc<Server>> = self.sharing().collect();
        if let [only] = sharing.as_slice() {
            return Some(Arc::clone(only));
        }
        for server in &sharing {
            let Some(peer) = server.peer() else { continue };
            if let Some(list) = bounded(server, peer.list_all_resources()).await
                && list.iter().any(|r| r.uri == uri)
            {
                return Some(Arc::clone(server));
            }
            if let Some(list) = bounded(server, peer.list_all_resource_templates()).await
                && list.iter().any(|t| {
                    let fixed = t.uri_template.split('{').next().unwrap_or_default();
                    !fixed.is_empty() && uri.starts_with(fixed)
                })
            {
                return Some(Arc::clone(server));
            }
        }
        None
    }

    /// Every passing server's prompts, named `<server>__<prompt>`.
    pub async fn prompts(&self) -> Vec<Prompt> {
        let mut out = Vec::new();
        for server in self.sharing() {
            if let Some(peer) = server.peer()
                && let Some(list) = bounded(server, peer.list_all_prompts()).await
            {
                for mut prompt in list.iter().filter_map(|p| server.scrub(p)) {
                    prompt.name =
                        safe_mcp_core::gateway::client_name(&server.entry.name, &prompt.name);
                    out.push(prompt);
                }
            }
        }
        out
    }

    /// The server and the prompt's own name of a prompt name the client used.
    pub async fn prompt_route(&self, name: &str) -> Option<(Arc<Server>, String)> {
        for server in self.sharing() {
            let Some(peer) = server.peer() else { continue };
            if let Some(list) = bounded(server, peer.list_all_prompts()).await
                && let Some(p) = list.into_iter().find(|p| {
                    safe_mcp_core::gateway::client_name(&server.entry.name, &p.name) == name
                })
            {
                return Some((Arc::clone(server), p.name));
            }
        }
        None
    }

    /// The client's `logging/setLevel`, passed to every running server that logs (one
    /// that does not declare logging is not asked).
    #[allow(deprecated)] // logging: deprecated on 2026-07-28 (SEP-2577), spoken on 2025-11-25
    pub async fn set_level(&self, request: rmcp::model::SetLevelRequestParams) {
        for server in &self.servers {
            let Some(peer) = server.peer() else { continue };
            let logs = peer
                .peer_info()
                .is_some_and(|info| info.capabilities.logging.is_some());
            if logs {
                let _ = bounded(server, peer.set_level(request.clone())).await;
            }
        }
    }
}
