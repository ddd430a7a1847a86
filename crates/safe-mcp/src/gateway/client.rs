//! The gateway's MCP client of one downstream server: what the server may tell the gateway
//! (its lists changed, progress, log messages) and ask of it (sampling, elicitation), and a
//! call forwarded for one client ([`Bound`]).
//!
//! Progress reaches the client whose call it belongs to (the server is given a token of the
//! gateway's own, mapped back), only ever increasing. Log messages reach every client, redacted. Sampling and
//! elicitation pass to the client of the call in flight only where the server's entry
//! allows them (`allow_sampling`, `allow_elicitation`), and each request is recorded either
//! way; the server is told of neither capability otherwise.

use std::sync::Weak;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use safe_mcp_core::envelope::ResultCode;
use safe_mcp_core::terminal::gateway::{Downstream, DownstreamError, Forwarder};
use serde_json::Value;

use crate::gateway::server::{Change, OnChange, Server, Upstream};

/// The client side of one run.
pub struct Client {
    server: Weak<Server>,
    changed: OnChange,
}

impl Client {
    /// The client of `server`'s run, telling the gateway through `changed`.
    pub fn new(server: Weak<Server>, changed: OnChange) -> Client {
        Client { server, changed }
    }

    /// Whether its server passes resources and prompts through.
    fn passes(&self) -> bool {
        self.server.upgrade().is_some_and(|s| s.entry.resources)
    }

    /// The client of the call in flight a server's request belongs to, once the entry
    /// allows `what` (`allowed`), recorded either way.
    fn ask_upstream(
        &self,
        what: &str,
        allowed: impl Fn(&Server) -> bool,
        key: &str,
    ) -> Result<Upstream, rmcp::ErrorData> {
        let server = self
            .server
            .upgrade()
            .ok_or_else(|| rmcp::ErrorData::internal_error("the gateway is stopping", None))?;
        let upstream = server.upstream(None);
        let caller = upstream
            .as_ref()
            .map(|u| u.caller.clone())
            .unwrap_or_default();
        let forwarder = Forwarder::of(&server.main);
        let refuse = |why: String| {
            forwarder.asked(&server.entry, what, Err(why.clone()), &caller);
            rmcp::ErrorData::invalid_request(why, None)
        };
        if !allowed(&server) {
            return Err(refuse(format!(
                "the safe-mcp gateway does not pass {what} on for the {} server ([[gateway.servers]] {key} = false)",
                server.entry.name
            )));
        }
        let Some(upstream) = upstream else {
            return Err(refuse(format!(
                "{what} is passed on only during a call of one of the {} server's tools",
                server.entry.name
            )));
        };
        forwarder.asked(&server.entry, what, Ok(()), &caller);
        Ok(upstream)
    }
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            server.relist().await;
            (self.changed)(Change::Tools);
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if self.passes() {
            (self.changed)(Change::Resources);
        }
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if self.passes() {
            (self.changed)(Change::Prompts);
        }
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if self.passes() {
            (self.changed)(Change::Updated(params.uri));
        }
    }

    async fn on_progress(
        &self,
        mut params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        let token = match &params.progress_token.0 {
            rmcp::model::NumberOrString::Number(n) => u64::try_from(*n).ok(),
            rmcp::model::NumberOrString::String(s) => s.parse().ok(),
        };
        let Some((token, upstream)) = token.and_then(|t| Some((t, server.upstream(Some(t))?)))
        else {
            return;
        };
        if !server.progress_advances(token, params.progress) {
            return;
        }
        let Some(theirs) = upstream.progress else {
            return;
        };
        params.progress_token = theirs;
        if let Some(message) = params.message.as_mut() {
            *message = server.narrowed.redactor().redact(message);
        }
        let _ = upstream.peer.notify_progress(params).await;
    }

    #[allow(deprecated)] // logging: deprecated on 2026-07-28 (SEP-2577); stdio servers speak 2025-11-25
    async fn on_logging_message(
        &self,
        mut params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        safe_mcp_core::gateway::result::redact_value(&mut params.data, server.narrowed.redactor());
        params.logger = Some(match params.logger.take() {
            Some(l) => format!("{}/{l}", server.entry.name),
            None => server.entry.name.clone(),
        });
        (self.changed)(Change::Log(params));
    }

    #[allow(deprecated)] // sampling: deprecated on 2026-07-28 (SEP-2577); stdio servers speak 2025-11-25
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let what = "sampling/createMessage";
        let upstream = self.ask_upstream(what, |s| s.entry.allow_sampling, "allow_sampling")?;
        let asked = upstream.peer.create_message(params).await;
        asked.map_err(|e| rmcp::ErrorData::internal_error(format!("the client: {e}"), None))
    }

    async fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let what = "elicitation/create";
        let upstream =
            self.ask_upstream(what, |s| s.entry.allow_elicitation, "allow_elicitation")?;
        let asked = upstream.peer.create_elicitation(params).await;
        asked.map_err(|e| rmcp::ErrorData::internal_error(format!("the client: {e}"), None))
    }

    #[allow(deprecated)] // sampling's capability: see `create_message`
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let entry = self.server.upgrade().map(|s| s.entry.clone());
        let mut capabilities = ClientCapabilities::default();
        if let Some(entry) = entry {
            let allowed = ClientCapabilities::builder()
                .enable_sampling()
                .enable_elicitation()
                .build();
            if entry.allow_sampling {
                capabilities.sampling = allowed.sampling;
            }
            if entry.allow_elicitation {
                capabilities.elicitation = allowed.elicitation;
            }
        }
        rmcp::model::ClientConfig::new(
            capabilities,
            Implementation::new("safe-mcp-gateway", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25)
    }
}

/// One call forwarded for one client: its progress and what the server asks during it go
/// back to that client.
pub struct Bound<'a> {
    /// The server.
    pub server: &'a Server,
    /// The client the call came from.
    pub upstream: Upstream,
}

impl Downstream for Bound<'_> {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
        cancel: safe_mcp_contract::Cancel,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Value, DownstreamError>> + Send + 'a>,
    > {
        Box::pin(async move {
            let server = self.server;
            let failed = |reason: String| DownstreamError {
                code: ResultCode::OperationFailed,
                reason,
            };
            let Some(peer) = server.peer() else {
                let why = server
                    .status()
                    .last_end
                    .unwrap_or_else(|| "starting".into());
                return Err(failed(format!(
                    "the {} server is not running now (last: {why}); it is restarted by itself, so try again shortly",
                    server.entry.name
                )));
            };
            let mut params = CallToolRequestParams::new(tool.to_owned());
            if let Value::Object(map) = args {
                params = params.with_arguments(map);
            }
            // The server reports progress on a token of the gateway's, mapped back to this
            // call's client; it is dropped once the call ends.
            let token = server.begin_forward(self.upstream.clone());
            let _ended = Ended(server, token);
            let mut meta = rmcp::model::RequestMetaObject::default();
            meta.set_progress_token(rmcp::model::ProgressToken(
                rmcp::model::NumberOrString::Number(token as i64),
            ));
            params.meta = Some(meta);
            let wait = Duration::from_secs(server.entry.call_timeout_seconds);
            let answer = tokio::select! {
                answer = tokio::time::timeout(wait, peer.call_tool(params)) => answer,
                // Dropping the request tells the server (notifications/cancelled).
                () = cancel => return Err(failed("cancelled by the client".into())),
            };
            match answer {
                Ok(Ok(result)) => serde_json::to_value(result)
                    .map_err(|e| failed(format!("its result could not be read: {e}"))),
                Ok(Err(e)) => Err(failed(format!(
                    "the {} server gave no result: {e}",
                    server.entry.name
                ))),
                Err(_) => {
                    server.restart_if_hung(&peer).await;
                    Err(DownstreamError {
                        code: ResultCode::Timeout,
                        reason: format!(
                            "the {} server did not answer within {} s (call_timeout_seconds); the call was cancelled",
                            server.entry.name,
                            wait.as_secs()
                        ),
                    })
                }
            }
        })
    }

    fn pid(&self) -> Option<u32> {
        self.server.status().pid
    }
}

/// Ends a forwarded call's registration when the call ends, however it ends.
struct Ended<'a>(&'a Server, u64);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.end_forward(self.1);
    }
}
