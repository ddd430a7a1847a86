//! A call forwarded to a downstream server for one client ([`Bound`]): the server gets a
//! progress token of the gateway's, mapped back to that client while the call runs, and a
//! server that stops answering within `call_timeout_seconds` is pinged and, hung, restarted.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use safe_mcp_core::envelope::ResultCode;
use safe_mcp_core::terminal::gateway::{Downstream, DownstreamError};
use serde_json::Value;

use crate::gateway::server::{Server, Upstream};

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
            let Some((peer, run)) = server.current() else {
                return Err(failed(server.not_running()));
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
                    server.restart_if_hung(&peer, &run).await;
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
