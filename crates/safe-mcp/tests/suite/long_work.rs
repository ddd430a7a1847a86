//! Long work (issue 16): progress notifications while a call runs, and cancellation that
//! the audit trail records, over real MCP sessions with the rmcp client.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::support::{BIN, Sandbox};

/// A client that keeps every progress notification it gets, with when it came.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<(Instant, ProgressNotificationParam)>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen.lock().unwrap().push((Instant::now(), params));
    }
}

async fn connect(
    server: &str,
    policy: &std::path::Path,
    recorder: Recorder,
) -> RunningService<RoleClient, Recorder> {
    let command = tokio::process::Command::new(BIN).configure(|c| {
        c.arg(server).arg("--config").arg(policy).env_clear();
    });
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    recorder.serve(transport).await.unwrap()
}

/// Calls `tool` with `args`. The rmcp client gives every request a progress token of its
/// own; the Python SDK test covers a request without one.
async fn call(
    client: &RunningService<RoleClient, Recorder>,
    tool: &'static str,
    args: Value,
) -> Value {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let params = CallToolRequestParams::new(tool).with_arguments(args);
    let result = client.call_tool(params).await.unwrap();
    result.structured_content.unwrap()
}

fn sandbox() -> Sandbox {
    Sandbox::with(
        "\"sh\", \"echo\", \"sleep\"",
        "timeout_seconds = 30\nmax_output_bytes = 65536",
        "closed",
        "",
    )
}

/// A command that prints for a while sends progress: strictly rising, at most four a
/// second, the latest line as the message, redacted (the token never shows, not even in
/// part), and nothing once the result is in.
#[tokio::test(flavor = "multi_thread")]
async fn a_running_command_reports_progress() {
    let sb = sandbox();
    let recorder = Recorder::default();
    let client = connect("terminal", &sb.policy, recorder.clone()).await;
    let script = "for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.3; done; \
                  echo ghp_0123456789abcdefghijklmnopqrstuvwxyz; sleep 0.6; echo done";
    let started = Instant::now();
    let r = call(
        &client,
        "run_command",
        json!({"command": ["sh", "-c", script]}),
    )
    .await;
    let elapsed = started.elapsed();
    assert_eq!(r["code"], "OK", "{r}");
    let seen = recorder.seen.lock().unwrap().clone();
    assert!(
        seen.len() >= 4,
        "too few progress notifications: {}",
        seen.len()
    );
    assert!(
        seen.len() as f64 <= elapsed.as_secs_f64() * 4.0 + 1.0,
        "{} notifications in {elapsed:?}",
        seen.len()
    );
    let mut last = f64::NEG_INFINITY;
    for (_, p) in &seen {
        assert_eq!(
            p.progress_token, seen[0].1.progress_token,
            "one request, one token"
        );
        assert!(p.progress > last, "progress did not rise: {seen:?}");
        last = p.progress;
        let m = p.message.clone().unwrap_or_default();
        assert!(
            !m.contains("ghp_0123") && !m.contains("456789abcdef"),
            "{m}"
        );
    }
    assert!(
        seen.iter()
            .any(|(_, p)| p.message.as_deref().is_some_and(|m| m.starts_with("line "))),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|(_, p)| p.message.as_deref().is_some_and(|m| m.contains("REDACTED"))),
        "the redacted line was never the latest: {seen:?}"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        recorder.seen.lock().unwrap().len(),
        seen.len(),
        "progress after the result"
    );
}

/// A run_command the client cancels: the tree dies, and the audit outcome says
/// `"cancelled": true` instead of leaving a bare exit 137 to explain.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_command_is_recorded_as_cancelled() {
    let sb = sandbox();
    let client = connect("terminal", &sb.policy, Recorder::default()).await;
    let Value::Object(args) = json!({"command": ["sh", "-c", "echo started; sleep 30"]}) else {
        unreachable!()
    };
    let mut pending =
        Box::pin(client.call_tool(CallToolRequestParams::new("run_command").with_arguments(args)));
    let started = async {
        for _ in 0..100 {
            if sb
                .audit_records()
                .iter()
                .any(|r| r["kind"] == "attempt" && r["tool"] == "run_command")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    tokio::select! {
        r = &mut pending => panic!("the call ended early: {r:?}"),
        () = started => {}
    }
    drop(pending); // the client sends notifications/cancelled
    let mut outcome = None;
    for _ in 0..100 {
        outcome = sb
            .audit_records()
            .into_iter()
            .find(|r| r["kind"] == "outcome" && r["tool"] == "run_command");
        if outcome.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outcome = outcome.expect("no outcome recorded");
    assert_eq!(outcome["cancelled"], true, "{outcome}");
}

/// apply_plan cancelled as soon as it is sent, over MCP: whatever point it reached (nothing,
/// some moves, all of them), every file is in exactly one place, the audit outcome is
/// honest about it, and undo restores the tree whenever something moved.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_apply_plan_leaves_every_file_once_and_undoable() {
    let ws = super::files::Workspace::new(false);
    for i in 0..400 {
        let f = ws.root.join(format!("scan{i:03}.pdf"));
        std::fs::write(&f, format!("scan {i}")).unwrap();
        super::files::backdate(&f);
    }
    let before = ws.tree();
    let client = connect("files", &ws.policy, Recorder::default()).await;
    let plan = call(&client, "plan_organize", json!({})).await;
    let id = plan["detail"]["plan_id"].as_str().unwrap().to_owned();
    let Value::Object(args) = json!({"plan_id": id}) else {
        unreachable!()
    };
    let pending = client.call_tool(CallToolRequestParams::new("apply_plan").with_arguments(args));
    let _ = tokio::time::timeout(Duration::from_millis(2), pending).await;
    let mut outcome = None;
    for _ in 0..100 {
        let trail = std::fs::read_to_string(&ws.audit).unwrap_or_default();
        outcome = trail
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|r| r["kind"] == "outcome" && r["tool"] == "apply_plan");
        if outcome.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outcome = outcome.expect("no apply_plan outcome");
    let after = ws.tree();
    let files = |t: &std::collections::BTreeMap<String, String>| {
        t.iter()
            .filter(|(_, v)| v.starts_with("file:"))
            .map(|(k, v)| (k.rsplit('/').next().unwrap().to_owned(), v.clone()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    assert_eq!(files(&after), files(&before), "a file was lost or doubled");
    let moved = after.keys().filter(|k| k.starts_with("Documents/")).count();
    let reason = outcome["reason"].as_str().unwrap_or_default();
    if outcome["cancelled"] == true {
        assert!(moved < 400, "{outcome}");
        assert!(
            reason.contains(&format!("after {moved} of 400"))
                || (moved == 0 && reason.contains("nothing moved")),
            "{outcome}"
        );
    } else {
        assert_eq!(
            (outcome["code"].as_str(), moved),
            (Some("OK"), 400),
            "{outcome}"
        );
    }
    if moved > 0 {
        let u = call(&client, "undo_last_action", json!({})).await;
        assert_eq!(u["code"], "OK", "{u}");
        assert_eq!(ws.tree(), before);
    }
}
