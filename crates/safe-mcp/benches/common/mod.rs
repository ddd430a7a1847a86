//! What the benches share: one tool call over a live rmcp client session.

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::Value;

/// Calls `tool` with the object `args`; returns the envelope (`structuredContent`).
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Value {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let r = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap();
    r.structured_content.unwrap()
}
