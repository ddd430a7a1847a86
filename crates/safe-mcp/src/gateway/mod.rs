//! The gateway: the `[[gateway.servers]]` a terminal server runs confined, and their tools
//! served under its own name (`<server>__<tool>`, [`safe_mcp_core::gateway::client_name`]).
//!
//! Each server gets a narrowed service (the terminal's policy narrowed to its entry, on the
//! terminal's own trail and holder), an executor made for that policy's confinement, and a
//! supervisor ([`server::Server::supervise`]) that keeps one run of it up. A tool call is
//! decided by the core ([`safe_mcp_core::terminal::gateway`]); this module only builds the
//! parts, routes names and tells the clients when the list changed.

pub mod forward;
mod listing;
pub mod pipe;
pub mod server;

use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use rmcp::service::{Peer, RoleServer};
use safe_mcp_core::config::Policy;
use safe_mcp_core::terminal::TerminalService;
use safe_mcp_exec::LocalExecutor;
pub use server::TICKET_ARGUMENT;
use tokio_util::sync::CancellationToken;

use server::Server;

/// The downstream servers of one terminal server.
pub struct Gateway {
    servers: Vec<Arc<Server>>,
    /// The clients told when the tool list changed.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    stop: CancellationToken,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Gateway {
    /// The gateway of `policy`, or `None` when it names no server. Each server's narrowed
    /// service and executor are made now (before any client), so a server the machine
    /// cannot confine stops the start with its reason. `terminal` must hold its protected
    /// paths already: the servers share its holder.
    pub fn build(
        policy: &Policy,
        terminal: &Arc<TerminalService>,
    ) -> Result<Option<Arc<Gateway>>, String> {
        if policy.gateway.is_empty() {
            return Ok(None);
        }
        let stop = CancellationToken::new();
        let mut servers = Vec::new();
        for entry in &policy.gateway {
            let at = |e: &dyn std::fmt::Display| format!("[[gateway.servers]] {}: {e}", entry.name);
            let narrowed = TerminalService::with_egress_on(
                &entry.policy,
                Some(terminal),
                |network, trail, vault| {
                    let proxy =
                        safe_mcp_proxy::Proxy::with_credentials(network.clone(), trail, vault)?;
                    Ok(Some(Arc::new(proxy)))
                },
            )
            .map_err(|e| at(&e))?;
            let executor = LocalExecutor::new(&narrowed.confinement_spec()).map_err(|e| at(&e))?;
            let view = safe_mcp_core::terminal::Executor::confinement(&executor)
                .view
                .view;
            narrowed.credentials_fit(view).map_err(|e| at(&e))?;
            // Its program as each start will be judged: a refusal stops the start now, with
            // the reason, instead of a server that never comes up.
            let (program, _) = safe_mcp_core::terminal::downstream::program_of(&entry.command);
            let verdict = safe_mcp_core::terminal::Describe::new(&narrowed).explain(
                &safe_mcp_core::terminal::CommandInput::Argv(vec![program]),
                None,
                safe_mcp_core::terminal::Executor::confinement(&executor),
            );
            if !verdict.ok {
                return Err(at(&format!(
                    "{}: {}",
                    verdict.code.as_str(),
                    verdict.reason
                )));
            }
            servers.push(Arc::new(Server::new(
                entry.clone(),
                (Arc::clone(terminal), Arc::new(narrowed)),
                Arc::new(executor),
                stop.child_token(),
            )));
        }
        Ok(Some(Arc::new(Gateway {
            servers,
            peers: Mutex::default(),
            stop,
            tasks: Mutex::default(),
        })))
    }

    /// Runs every server's supervisor until [`Gateway::stop`].
    pub async fn run(self: Arc<Self>) {
        for server in &self.servers {
            let weak = Arc::downgrade(&self);
            let changed: server::OnChange = Arc::new(move |change| {
                if let Some(gateway) = weak.upgrade() {
                    gateway.tell(change);
                }
            });
            let task = tokio::spawn(Arc::clone(server).supervise(changed));
            lock(&self.tasks).push(task);
        }
        self.stop.cancelled().await;
    }

    /// Stops every server and waits (up to 5 s) for their runs' outcome records.
    pub async fn stop(&self) {
        self.stop.cancel();
        let tasks: Vec<_> = lock(&self.tasks).drain(..).collect();
        crate::runtime::join_within(tasks, std::time::Duration::from_secs(5), "a gateway server")
            .await;
        for server in &self.servers {
            safe_mcp_core::terminal::Executor::close(server.executor());
        }
    }

    /// What `describe_policy` says of the servers: for each, whether it runs, the tools the
    /// client may call (by the names it sees) and how, and what confines it; `verbose` adds
    /// the last of its stderr and the whole confinement.
    pub fn describe(&self, verbose: bool) -> serde_json::Value {
        let servers: Vec<serde_json::Value> =
            self.servers.iter().map(|s| s.describe(verbose)).collect();
        serde_json::json!({
            "servers": servers,
            "calling": "call a server's tool by the name tools/list gives (<server>__<tool>); explain_command takes that name and the call's JSON arguments",
        })
    }

    /// The servers.
    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// Every allowed tool of every running server, named as the client sees it.
    pub fn tools(&self) -> Vec<Tool> {
        self.servers
            .iter()
            .flat_map(|server| {
                server
                    .tools()
                    .iter()
                    .map(|l| l.tool.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The server and the tool name (as the server knows it) of a name the client used.
    pub fn route(&self, name: &str) -> Option<(Arc<Server>, String)> {
        self.servers.iter().find_map(|server| {
            let listed = server.tools();
            let found = listed.iter().find(|l| l.tool.name == name)?;
            Some((Arc::clone(server), found.own.clone()))
        })
    }

    /// A server by name (for a name the client used while it was down: the refusal says
    /// why).
    pub fn server_of(&self, name: &str) -> Option<Arc<Server>> {
        let (prefix, _) = name.split_once(safe_mcp_core::gateway::SEPARATOR)?;
        self.servers
            .iter()
            .find(|s| s.entry.name == prefix)
            .map(Arc::clone)
    }

    /// Remembers a client to tell when the list changes.
    pub fn watch(&self, peer: Peer<RoleServer>) {
        let mut peers = lock(&self.peers);
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    /// Tells every client what changed.
    #[allow(deprecated)] // log messages: see `server::Change::Log`
    fn tell(&self, change: server::Change) {
        let peers: Vec<_> = {
            let mut peers = lock(&self.peers);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            let change = change.clone();
            tokio::spawn(async move {
                let _ = match change {
                    server::Change::Tools => peer.notify_tool_list_changed().await,
                    server::Change::Resources => peer.notify_resource_list_changed().await,
                    server::Change::Prompts => peer.notify_prompt_list_changed().await,
                    server::Change::Log(params) => peer.notify_logging_message(params).await,
                    server::Change::Updated(uri) => {
                        peer.notify_resource_updated(
                            rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                        )
                        .await
                    }
                };
            });
        }
    }
}
