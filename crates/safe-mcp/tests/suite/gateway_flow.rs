//! What passes between a client and a downstream server through the gateway besides calls:
//! progress (to the client whose call it is), log messages (redacted) and the client's log
//! level, and the server's
//! sampling and elicitation requests (passed on only where its entry allows them, each
//! recorded). The client here is an rmcp client that answers sampling and elicitation.

#![allow(deprecated)] // sampling and logging: deprecated on 2026-07-28, spoken on 2025-11-25

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, Implementation, LoggingMessageNotificationParam, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

use super::gateway::text_of;
use super::support::{BIN, Sandbox, eventually};

/// What the client saw, and how it answers.
#[derive(Clone, Default)]
struct Seen {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    logs: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Seen {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs
            .lock()
            .unwrap()
            .push(serde_json::to_value(params).unwrap());
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        Ok(serde_json::from_value(json!({
            "model": "test-model", "role": "assistant",
            "content": {"type": "text", "text": "sampled"}
        }))
        .unwrap())
    }

    async fn create_elicitation(
        &self,
        _params: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        Ok(
            serde_json::from_value(json!({"action": "accept", "content": {"name": "ada"}}))
                .unwrap(),
        )
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"sampling": {}, "elicitation": {}})).unwrap();
        rmcp::model::ClientConfig::new(capabilities, Implementation::new("flow-test", "1"))
    }
}

/// A hostile-server gateway whose entry adds `extra`, and a client of it that answers.
async fn started(
    extra: &str,
) -> (
    Sandbox,
    Seen,
    rmcp::service::RunningService<RoleClient, Seen>,
) {
    let sb = Sandbox::new("");
    let dir = sb.base().join("srv");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("hostile.py");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/hostile.py"),
        &script,
    )
    .unwrap();
    sb.append_policy(&format!(
        "[[gateway.servers]]\nname = \"hostile\"\ncommand = [\"python3\", \"{}\"]\nread_paths = [\"{}\"]\n{extra}\n\n[gateway.servers.tools]\nallow = [\"*\"]\n",
        script.display(),
        dir.display()
    ));
    let command = tokio::process::Command::new(BIN).configure(|c| {
        c.arg("terminal")
            .arg("--config")
            .arg(&sb.policy)
            .env_clear();
    });
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let seen = Seen::default();
    let client = seen.clone().serve(transport).await.unwrap();
    for _ in 0..300 {
        let tools = client.list_all_tools().await.unwrap();
        if tools.iter().any(|t| t.name == "hostile__sample") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    (sb, seen, client)
}

async fn call(
    client: &rmcp::service::RunningService<RoleClient, Seen>,
    tool: &str,
    meta: Option<Value>,
) -> rmcp::model::CallToolResult {
    let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(serde_json::Map::new());
    if let Some(meta) = meta {
        params.meta = Some(serde_json::from_value(meta).unwrap());
    }
    tokio::time::timeout(std::time::Duration::from_secs(30), client.call_tool(params))
        .await
        .expect("call timed out")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_logs_reach_the_client_and_asks_pass_only_where_allowed() {
    // Allowed: the client's answers reach the server, and each ask is recorded.
    let (sb, seen, client) = started("allow_sampling = true\nallow_elicitation = true").await;
    let r = call(
        &client,
        "hostile__progress",
        Some(json!({"progressToken": "mine-7"})),
    )
    .await;
    assert!(text_of(&r).starts_with("token"), "{r:?}");
    let got = eventually(10, || {
        seen.progress
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.progress == 3.0)
    })
    .await;
    assert!(got, "progress: {:?}", seen.progress.lock().unwrap());
    // rmcp's client gives the request a token of its own: the notices carry that one (not
    // the gateway's own, which the server saw), each step in order.
    let progress = seen.progress.lock().unwrap().clone();
    let tokens: std::collections::BTreeSet<String> = progress
        .iter()
        .map(|p| serde_json::to_string(&p.progress_token).unwrap())
        .collect();
    assert_eq!(tokens.len(), 1, "{progress:?}");
    // The gateway passes progress on only increasing; a client library may still hand
    // notices to its handler in another order, so only what arrived is checked.
    let steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert!(steps.contains(&3.0), "{steps:?}");
    assert!(
        steps.iter().all(|s| [1.0, 2.0, 3.0].contains(s)),
        "{steps:?}"
    );
    // The client's log level reaches the server.
    client
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Debug,
        ))
        .await
        .unwrap();
    let r = call(&client, "hostile__level", None).await;
    assert_eq!(text_of(&r), "level debug");
    call(&client, "hostile__log", None).await;
    let logged = eventually(10, || !seen.logs.lock().unwrap().is_empty()).await;
    assert!(logged);
    let log = seen.logs.lock().unwrap()[0].clone();
    assert_eq!(log["logger"], "hostile/probe", "{log}");
    assert!(!log.to_string().contains("a1B2c3D4e5"), "{log}");
    let r = call(&client, "hostile__sample", None).await;
    assert!(text_of(&r).contains("sampled"), "{}", text_of(&r));
    let r = call(&client, "hostile__elicit", None).await;
    assert!(text_of(&r).contains("ada"), "{}", text_of(&r));
    client.cancel().await.unwrap();
    for asks in ["sampling/createMessage", "elicitation/create"] {
        assert!(sb.has_record(|r| r["kind"] == "attempt"
            && r["gateway"]["asks"] == asks
            && r["verdict"] == "OK"));
    }

    // Not allowed (the default): the server gets an error, the client is never asked.
    let (sb, _seen, client) = started("").await;
    let r = call(&client, "hostile__sample", None).await;
    let said = text_of(&r);
    assert!(said.contains("allow_sampling"), "{said}");
    assert!(!said.contains("sampled"), "{said}");
    let r = call(&client, "hostile__elicit", None).await;
    assert!(text_of(&r).contains("allow_elicitation"), "{}", text_of(&r));
    client.cancel().await.unwrap();
    assert!(sb.has_record(|r| r["kind"] == "attempt"
        && r["gateway"]["asks"] == "sampling/createMessage"
        && r["verdict"] == "POLICY_DENIED"
        && r["rule"] == "allow_sampling"));
}
