//! MCP wiring of the gateway's tools in the terminal server: listed beside the terminal's
//! own, and a call of one handed to the core's pipeline ([`safe_mcp_core::terminal::gateway`])
//! with the request's caller, session and approver. It must never decide anything.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::{RequestContext, RoleServer};
use safe_mcp_core::terminal::TerminalService;
use safe_mcp_core::terminal::gateway::{
    Answer, DownstreamError, Forwarder, GATEWAY, Relay, ToolCall,
};
use safe_mcp_core::{OperationResult, ResultCode};

use crate::gateway::Gateway;
use crate::gateway::server::Server;
use crate::mcp::call::{caller_of, to_result};

/// What a gateway call takes of the terminal server's connection: its service, this
/// request's session (for tickets) and approver, and the count of running calls.
pub(crate) struct Asking<'a> {
    pub(crate) service: &'a Arc<TerminalService>,
    pub(crate) session: String,
    pub(crate) approver: safe_mcp_core::approval::AskPerson,
    pub(crate) calls: Option<&'a Arc<safe_mcp_http::limits::Calls>>,
}

/// A call of a gateway tool, or `None` when `request` names no tool of `gateway`'s servers.
pub(crate) async fn call(
    terminal: Asking<'_>,
    gateway: &Arc<Gateway>,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<CallToolResponse> {
    let name = request.name.as_ref();
    let (server, tool, listed) = routed(gateway, name)?;
    let mut args = request.arguments.clone().unwrap_or_default();
    // A confirm tool's approved ticket is the gateway's, never the server's.
    let ticket = if listed && server.entry.tools.needs_approval(&tool) {
        match args.remove(crate::gateway::TICKET_ARGUMENT) {
            Some(serde_json::Value::String(t)) => Some(t),
            _ => None,
        }
    } else {
        None
    };
    let call = ToolCall {
        server: &server.entry,
        narrowed: &server.narrowed,
        tool: &tool,
        args: serde_json::Value::Object(args),
        caller: caller_of(context),
        session: terminal.session,
        approver: Some(terminal.approver),
        ticket,
    };
    let forwarder = Forwarder::of(terminal.service);
    if let Some(unlisted) = unlisted(&server, name, listed) {
        return Some(to_result(forwarder.refuse_unlisted(&call, unlisted)).into());
    }
    // Counted like the terminal's own calls on an `--http` server.
    let _slot = match terminal.calls {
        Some(calls) => match calls.begin(call.caller.sub.as_deref().unwrap_or_default()) {
            Ok(slot) => Some(slot),
            Err(reason) => {
                let result = OperationResult::new(GATEWAY, ResultCode::PolicyDenied, reason);
                return Some(to_result(forwarder.refused_before(&call, None, result)).into());
            }
        },
        None => None,
    };
    // The client's cancellation reaches the forwarded request (the server is told), and the
    // call still ends with its outcome record.
    let cancel = Box::pin(context.ct.clone().cancelled_owned());
    let bound = crate::gateway::forward::Bound {
        server: server.as_ref(),
        upstream: crate::gateway::server::Upstream {
            peer: context.peer.clone(),
            progress: context
                .meta
                .get_progress_token()
                .or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token())),
            caller: call.caller.clone(),
        },
    };
    let answer = forwarder.call(call, &bound, cancel).await;
    Some(match answer {
        Answer::Result(value) => match serde_json::from_value::<CallToolResult>(value) {
            Ok(result) => result.into(),
            Err(e) => to_result(OperationResult::new(
                GATEWAY,
                ResultCode::OperationFailed,
                format!(
                    "the {} server's result is not a tool result: {e}",
                    server.entry.name
                ),
            ))
            .into(),
        },
        Answer::Refused(result) => to_result(result).into(),
    })
}

/// `explain_command` of `line` when it names a gateway tool (its name, then its arguments as
/// one JSON object): the verdict a call would get; `None` when it names none.
pub(crate) fn explain(
    terminal: Asking<'_>,
    gateway: &Gateway,
    line: &str,
    context: &RequestContext<RoleServer>,
) -> Option<OperationResult> {
    let line = line.trim_start();
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let (server, tool, listed) = routed(gateway, name)?;
    let args = match rest.trim() {
        "" => serde_json::Value::Object(serde_json::Map::new()),
        text => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v @ serde_json::Value::Object(_)) => v,
            _ => {
                return Some(OperationResult::new(
                    "explain_command",
                    ResultCode::InvalidRequest,
                    format!(
                        "give {name}'s arguments after its name as one JSON object, such as {name} {{\"path\": \"notes.txt\"}}"
                    ),
                ));
            }
        },
    };
    let call = ToolCall {
        server: &server.entry,
        narrowed: &server.narrowed,
        tool: &tool,
        args,
        caller: caller_of(context),
        session: terminal.session,
        approver: None,
        ticket: None,
    };
    Some(Forwarder::of(terminal.service).explain(&call, unlisted(&server, name, listed)))
}

/// The server `name` is of, the tool as the server knows it, and whether the server lists
/// it to the client now; `None` when `name` is no server's. A name of a server's with no
/// tool it lists (not allowed, not its own, or the server down) is refused by the caller,
/// and recorded as that server's call.
fn routed(gateway: &Gateway, name: &str) -> Option<(Arc<Server>, String, bool)> {
    if let Some((server, tool)) = gateway.route(name) {
        return Some((server, tool, true));
    }
    let server = gateway.server_of(name)?;
    let asked = name
        .split_once(safe_mcp_core::gateway::SEPARATOR)
        .map_or(name, |(_, tool)| tool)
        .to_owned();
    Some((server, asked, false))
}

/// Why `name` cannot be called now when `server` does not list it (`listed` false): the
/// rule the refusal is recorded under, and the reason.
fn unlisted(server: &Server, name: &str, listed: bool) -> Option<(&'static str, String)> {
    if listed {
        return None;
    }
    Some(if server.status().ready {
        (
            "not listed",
            format!(
                "{name} is not a tool the {} server lists to you: its policy does not allow it, or the server does not have it (tools/list shows what you may call)",
                server.entry.name
            ),
        )
    } else {
        ("not running", server.not_running())
    })
}

/// A refusal of a passed-through request, as the JSON-RPC error the client gets.
fn refused(result: &OperationResult) -> rmcp::ErrorData {
    rmcp::ErrorData::invalid_request(
        format!("{}: {}", result.code.as_str(), result.reason),
        Some(result.to_value()),
    )
}

/// `what` of `subject` (with `args`, recorded) asked of `server` by `ask`, passed through
/// [`Forwarder::relay`]: recorded before it is forwarded, redacted, bounded; its answer read
/// back as `T`.
async fn relayed<T, R, Fut>(
    terminal: &Asking<'_>,
    server: &Arc<crate::gateway::server::Server>,
    (what, subject, args): (&'static str, &str, Option<serde_json::Value>),
    context: &RequestContext<RoleServer>,
    ask: impl FnOnce(rmcp::service::Peer<rmcp::service::RoleClient>) -> Fut + Send,
) -> Result<T, rmcp::ErrorData>
where
    T: serde::de::DeserializeOwned,
    R: serde::Serialize,
    Fut: std::future::Future<Output = Result<R, rmcp::service::ServiceError>> + Send,
{
    let caller = caller_of(context);
    let relay = Relay {
        server: &server.entry,
        narrowed: &server.narrowed,
        what,
        subject,
        caller: &caller,
        args,
    };
    let (name, reaching) = (server.entry.name.clone(), Arc::clone(server));
    let answer = Box::pin(async move {
        let peer = reaching.peer().ok_or_else(|| DownstreamError {
            code: ResultCode::OperationFailed,
            reason: reaching.not_running(),
        })?;
        let got = ask(peer).await.map_err(|e| failed(&name, &e))?;
        serde_json::to_value(got).map_err(|e| failed(&name, &e))
    });
    let value = Forwarder::of(terminal.service)
        .relay(relay, answer)
        .await
        .map_err(|r| refused(&r))?;
    serde_json::from_value(value).map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
}

/// `resources/read` of a server that passes its resources through.
pub(crate) async fn read_resource(
    terminal: Asking<'_>,
    gateway: &Gateway,
    request: rmcp::model::ReadResourceRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<rmcp::model::ReadResourceResult, rmcp::ErrorData> {
    let uri = request.uri.clone();
    let Some(server) = gateway.resource_server(&uri).await else {
        return Err(rmcp::ErrorData::resource_not_found(
            format!("no server of this gateway lists {uri}; resources/list shows what may be read"),
            None,
        ));
    };
    let asked = ("resources/read", uri.as_str(), None);
    relayed(&terminal, &server, asked, context, |peer| async move {
        peer.read_resource(request).await
    })
    .await
}

/// `prompts/get` of a server's prompt, by the name the client saw.
pub(crate) async fn get_prompt(
    terminal: Asking<'_>,
    gateway: &Gateway,
    mut request: rmcp::model::GetPromptRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<rmcp::model::GetPromptResult, rmcp::ErrorData> {
    let name = request.name.clone();
    let Some((server, own)) = gateway.prompt_route(&name).await else {
        return Err(rmcp::ErrorData::invalid_params(
            format!("no prompt {name}; prompts/list shows them"),
            None,
        ));
    };
    request.name = own;
    let args = request
        .arguments
        .clone()
        .map(|a| serde_json::to_value(a).unwrap_or_default());
    let asked = ("prompts/get", name.as_str(), args);
    relayed(&terminal, &server, asked, context, |peer| async move {
        peer.get_prompt(request).await
    })
    .await
}

/// `resources/subscribe` and `unsubscribe`, forwarded to the server of the URI.
pub(crate) async fn subscription(
    terminal: Asking<'_>,
    gateway: &Gateway,
    uri: String,
    subscribe: bool,
    context: &RequestContext<RoleServer>,
) -> Result<(), rmcp::ErrorData> {
    let Some(server) = gateway.resource_server(&uri).await else {
        return Err(rmcp::ErrorData::resource_not_found(
            format!("no running server of this gateway lists {uri}"),
            None,
        ));
    };
    let what = if subscribe {
        "resources/subscribe"
    } else {
        "resources/unsubscribe"
    };
    let asked = uri.clone();
    relayed(
        &terminal,
        &server,
        (what, uri.as_str(), None),
        context,
        |peer| async move {
            #[allow(deprecated)] // the 2025-11-25 form, which the stdio servers speak
            if subscribe {
                peer.subscribe(rmcp::model::SubscribeRequestParams::new(asked))
                    .await
            } else {
                peer.unsubscribe(rmcp::model::UnsubscribeRequestParams::new(asked))
                    .await
            }
        },
    )
    .await
}

fn failed(server: &str, e: &dyn std::fmt::Display) -> DownstreamError {
    DownstreamError {
        code: ResultCode::OperationFailed,
        reason: format!("the {server} server gave no answer: {e}"),
    }
}

/// The answer to a resource or prompt request of a server with no gateway.
pub(crate) fn no_resources() -> rmcp::ErrorData {
    rmcp::ErrorData::method_not_found::<rmcp::model::ReadResourceRequestMethod>()
}
