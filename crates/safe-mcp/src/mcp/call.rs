//! What every tool call of both servers goes through: the caller, the argument schema and
//! its parse (a bad argument is an INVALID_REQUEST envelope, recorded), the result built
//! from an envelope, the per-caller count of an `--http` server, and the router built once.
//!
//! It must never decide anything about a command or a file: that is `safe_mcp_core`'s.

use std::sync::Arc;

use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::{RequestContext, RoleServer};
use safe_mcp_core::{OperationResult, ResultCode};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// The authenticated caller of an HTTP request (`[http.auth]`), as the middleware left it in
/// the request's extensions; nobody over stdio.
pub(crate) fn caller_of(context: &RequestContext<RoleServer>) -> safe_mcp_core::audit::Caller {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<safe_mcp_core::audit::Caller>())
        .cloned()
        .unwrap_or_default()
}

/// A tool's `inputSchema`: `T`'s, made plain for every client's validator.
pub(crate) fn input<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    // Our argument types always produce an object schema; fall back to an open object.
    let schema = schema_for_input::<T>().unwrap_or_default();
    // schemars marks integers `format: "uint64"`, which no JSON Schema validator knows and
    // the TypeScript SDK warns about for every tool; the type and minimum say enough.
    fn strip_formats(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                if map
                    .get("format")
                    .and_then(|f| f.as_str())
                    .is_some_and(|f| f.starts_with("uint") || f.starts_with("int"))
                {
                    map.remove("format");
                }
                map.values_mut().for_each(strip_formats);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip_formats),
            _ => {}
        }
    }
    // An optional argument comes out as `"type": ["integer", "null"]`: legal, but a client
    // that maps schemas onto a one-type dialect (the OpenAPI subset of some model
    // providers) may drop the tool; MCP Inspector's --strict warns. The same, as `anyOf`.
    fn split_nullable(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                let nullable = map
                    .get("type")
                    .and_then(|t| t.as_array())
                    .and_then(|types| {
                        let kinds: Vec<&str> = types.iter().filter_map(|t| t.as_str()).collect();
                        match kinds.as_slice() {
                            [kind, "null"] | ["null", kind] => Some((*kind).to_owned()),
                            _ => None,
                        }
                    });
                if let Some(kind) = nullable {
                    // What describes the argument stays outside; what constrains the value
                    // goes with its type.
                    let mut branch = serde_json::Map::new();
                    branch.insert("type".into(), kind.into());
                    for (key, value) in std::mem::take(map) {
                        if matches!(key.as_str(), "description" | "title" | "default") {
                            map.insert(key, value);
                        } else if key != "type" {
                            branch.insert(key, value);
                        }
                    }
                    map.insert(
                        "anyOf".into(),
                        serde_json::json!([branch, {"type": "null"}]),
                    );
                }
                map.values_mut().for_each(split_nullable);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(split_nullable),
            _ => {}
        }
    }
    let mut value = serde_json::Value::Object((*schema).clone());
    strip_formats(&mut value);
    split_nullable(&mut value);
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => schema,
    }
}

/// The envelope's `outputSchema`, shaped for the clients that validate every result: flat
/// (no `$ref`, no `$defs`), the verdict typed (`ok`, and `code` as a plain enum), no
/// non-standard `format`, `detail` an open object. The Python SDK 1.x re-checks a schema
/// against the 2020-12 metaschema on every call, so each typed property costs its users
/// time per call (the client-speed issue measured 16 ms for the schemars shape under load);
/// the fields are documented in the tool descriptions instead.
pub(crate) fn envelope_schema() -> Arc<JsonObject> {
    let codes: Vec<&str> = ResultCode::ALL.iter().map(|c| c.as_str()).collect();
    // Draft-07, named: jsonschema checks a draft-07 schema against its metaschema about 3.5×
    // faster than a 2020-12 one (0.60 against 2.14 ms per call in the Python SDK 1.30's
    // validate, measured), and Ajv, under the TypeScript SDK, takes draft-07 by default.
    let schema = serde_json::json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "code": {"enum": codes},
        },
        "required": ["ok", "code", "reason", "detail", "action", "duration_ms"],
    });
    match schema {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The tool result: the envelope as `structuredContent`, and the text block most clients
/// show the model written for a reader ([`safe_mcp_core::reader`]).
pub(crate) fn to_result(envelope: OperationResult) -> CallToolResult {
    let value = envelope.to_value();
    let mut result = if envelope.ok {
        CallToolResult::structured(value)
    } else {
        CallToolResult::structured_error(value)
    };
    result.content = vec![rmcp::model::ContentBlock::text(
        safe_mcp_core::reader::text(&envelope),
    )];
    result
}

/// Runs a tool call through `router`, unless the caller has as many calls running as an
/// `--http` server allows (`calls`): then the answer is a POLICY_DENIED envelope, recorded
/// like any refused call.
pub(crate) async fn call_counted<S: Send + Sync + 'static>(
    server: &S,
    router: &'static rmcp::handler::server::router::tool::ToolRouter<S>,
    calls: Option<&Arc<safe_mcp_http::limits::Calls>>,
    audit: &(dyn RecordRefusal + Sync),
    request: rmcp::model::CallToolRequestParams,
    mut context: RequestContext<RoleServer>,
) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
    let tool = router.get(&request.name);
    // The handler learns its own name from here ([`arguments`]).
    if let Some(tool) = tool {
        let name: &'static str = &tool.name;
        context.extensions.insert(ToolName(name));
    }
    let mut _slot = None;
    // Only a known tool is counted (an unknown one is the router's error to give).
    if let (Some(calls), Some(tool)) = (calls, tool) {
        let caller = caller_of(&context);
        match calls.begin(caller.sub.as_deref().unwrap_or_default()) {
            Ok(slot) => _slot = Some(slot),
            Err(reason) => {
                let name: &'static str = &tool.name;
                let result = OperationResult::new(name, ResultCode::PolicyDenied, reason);
                let args = request.arguments.clone().unwrap_or_default();
                audit.record_refusal(name, &args, &result, &caller);
                return Ok(to_result(result).into());
            }
        }
    }
    let tcc = rmcp::handler::server::tool::ToolCallContext::new(server, request, context);
    router.call(tcc).await
}

/// Records a call the wiring refused before the core saw it (its arguments do not parse).
pub(crate) trait RecordRefusal {
    fn record_refusal(
        &self,
        tool: &'static str,
        args: &JsonObject,
        result: &OperationResult,
        caller: &safe_mcp_core::audit::Caller,
    );
}

/// Runs a tool's blocking work (file I/O, the organizer) off the runtime's threads; a
/// panic in it is logged and answered as `tool`'s internal error.
pub(crate) async fn blocking(
    tool: &'static str,
    work: impl FnOnce() -> OperationResult + Send + 'static,
) -> OperationResult {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        eprintln!("safe-mcp: {tool} task failed: {e}");
        OperationResult::internal(tool)
    })
}

/// The tool a call names, as the router knows it: put in the request's extensions by
/// [`call_counted`] before the handler runs, so that no handler spells its own name again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolName(pub(crate) &'static str);

/// The name of the tool `context` calls.
pub(crate) fn tool_of(context: &RequestContext<RoleServer>) -> &'static str {
    context
        .extensions
        .get::<ToolName>()
        .map_or("unknown_tool", |t| t.0)
}

/// The start of every tool handler: its caller and its arguments as `T`, or the
/// INVALID_REQUEST result (recorded by `audit`) that the handler returns as it is.
pub(crate) fn start_call<T: DeserializeOwned>(
    args: JsonObject,
    context: &RequestContext<RoleServer>,
    audit: &dyn RecordRefusal,
) -> Result<(safe_mcp_core::audit::Caller, T), CallToolResult> {
    let caller = caller_of(context);
    let parsed = parse_args(tool_of(context), args, audit, &caller)?;
    Ok((caller, parsed))
}

/// `let (caller, args): (_, T) = arguments!(args, context, audit);` in a handler: the
/// caller and the parsed arguments, or the handler returns the INVALID_REQUEST result.
macro_rules! arguments {
    ($args:expr, $context:expr, $audit:expr) => {
        match $crate::mcp::call::start_call($args, &$context, $audit) {
            Ok(parsed) => parsed,
            Err(result) => return result,
        }
    };
}
pub(crate) use arguments;

/// The arguments of `action` as `T`, or an INVALID_REQUEST envelope, recorded by `audit`.
fn parse_args<T: DeserializeOwned>(
    action: &'static str,
    args: JsonObject,
    audit: &dyn RecordRefusal,
    caller: &safe_mcp_core::audit::Caller,
) -> Result<T, CallToolResult> {
    serde_json::from_value(serde_json::Value::Object(args.clone())).map_err(|e| {
        let result = OperationResult::new(
            action,
            ResultCode::InvalidRequest,
            format!("invalid arguments: {e}"),
        );
        audit.record_refusal(action, &args, &result, caller);
        to_result(result)
    })
}

/// `fn router()`: the tools of `$server`, built once. rmcp's default handler calls
/// `tool_router()` for every request, which made every tool's schemas again per call (a
/// tenth of the server's CPU per `run_command`, profiled).
macro_rules! built_once_router {
    ($server:ty) => {
        fn router() -> &'static rmcp::handler::server::router::tool::ToolRouter<$server> {
            static ROUTER: std::sync::OnceLock<
                rmcp::handler::server::router::tool::ToolRouter<$server>,
            > = std::sync::OnceLock::new();
            ROUTER.get_or_init(<$server>::tool_router)
        }
    };
}
pub(crate) use built_once_router;

/// An optional whole number, also when sent as a float with no fraction (`2.0`): JSON Schema
/// counts 2.0 as an integer, and models send it. A fraction or a negative number stays a
/// clear INVALID_REQUEST.
pub(crate) fn integral<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && (0.0..=9.0e15).contains(&f) => Ok(Some(f as u64)),
        _ => Err(D::Error::custom(format!(
            "invalid value {n}: expected a whole number (such as 2)"
        ))),
    }
}
