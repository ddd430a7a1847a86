//! A command's whole process tree, over a real MCP session: a timeout, a flood or a
//! cancelled call kills every process of it, the ones that left its group or double-forked
//! included.

use std::time::Duration;

use serde_json::json;

use super::support::{Sandbox, eventually, live_processes_with, stdout_of};

/// A stage can leave the process group the tree kill aims at: the first into the server's own
/// group (`setpgid`, same session), a later one into a session of its own (`setsid`). The
/// deadline still holds: each stage is also killed through its pidfd before it is reaped.
#[tokio::test(flavor = "multi_thread")]
async fn a_stage_that_leaves_its_group_still_dies_at_the_deadline() {
    let sb = Sandbox::builder()
        .allow_more(&["python3"])
        .limits("timeout_seconds = 10")
        .build();
    let s = sb.session().await;
    let rejoin = "import os, time; os.setpgid(0, os.getpgid(os.getppid())); time.sleep(917.1)";
    let leave = "import os, time; os.setsid(); time.sleep(917.2)";
    for args in [
        json!({"command": ["python3", "-c", rejoin], "timeout_seconds": 1}),
        json!({"command": format!("echo x | python3 -c '{leave}'"), "timeout_seconds": 1}),
    ] {
        let call = s.call("run_command", args);
        let r = tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .expect("the call outlived its deadline by far");
        assert_eq!(r["code"], "TIMEOUT", "{r}");
    }
    assert!(
        eventually(5, || live_processes_with("917.").is_empty()).await,
        "survivors: {:?}",
        live_processes_with("917.")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_the_whole_group_and_escapees() {
    let sb = Sandbox::new("");
    sb.add_helpers(&["setsid", "stat"]);
    let s = sb.session().await;
    let script = "sleep 913.25 & sleep 913.25 & setsid sleep 913.26 & sleep 913.27";
    let r = s
        .run_with(json!({"command": ["sh", "-c", script], "timeout_seconds": 1}))
        .await;
    assert_eq!(r["code"], "TIMEOUT", "{r}");
    assert_eq!(r["ok"], false);
    assert_eq!(r["detail"]["timeout_seconds"], 1);
    assert!(
        eventually(5, || live_processes_with("913.2").is_empty()).await,
        "survivors: {:?}",
        live_processes_with("913.2")
    );
    // timeout_seconds may lower the policy's limit, never raise it.
    let r = s
        .run_with(json!({"command": "true", "timeout_seconds": 100000}))
        .await;
    assert_eq!(r["detail"]["timeout_seconds"], 10);
    // The server answers the next call.
    assert_eq!(s.run("echo alive").await["detail"]["stdout"], "alive\n");
}

/// A grandchild that leaves the group and the session (`setsid` after a double fork) dies
/// with its call. The positive control is in the test: the escapee provably ran and led a
/// session of its own before the call ended, so its absence afterwards is the kill's doing.
#[tokio::test(flavor = "multi_thread")]
async fn a_double_forked_escapee_dies_with_its_call() {
    let sb = Sandbox::new("");
    sb.add_helpers(&["setsid", "stat"]);
    let s = sb.session().await;
    // The grandchild writes its pid and its session (field 6 of a child's stat), then would
    // write a marker later; the call waits until it has started.
    let escapee =
        "echo $$ > escapee-pid; cat /proc/self/stat > escapee-stat; sleep 2; touch escaped-marker";
    let script = format!(
        "(setsid sh -c '{escapee}' &) ; while [ ! -s escapee-stat ]; do :; done; echo started"
    );
    let r = s.run_with(json!({"command": ["sh", "-c", script]})).await;
    assert_eq!(r["code"], "OK", "{r}");
    let pid = std::fs::read_to_string(sb.jail.join("escapee-pid")).unwrap();
    let stat = std::fs::read_to_string(sb.jail.join("escapee-stat")).unwrap();
    let session = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(3))
        .unwrap_or_default();
    assert_eq!(
        session,
        pid.trim(),
        "the grandchild did not lead a session: {stat}"
    );
    // It is gone (no process holds its command line), so the marker can never be written.
    assert!(
        eventually(5, || live_processes_with("escaped-marker").is_empty()).await,
        "an escaped grandchild outlived its call: {:?}",
        live_processes_with("escaped-marker")
    );
    assert!(!sb.jail.join("escaped-marker").exists());
}

/// Printing much is no reason to kill a command (issue 32, item 2), but a flood far past
/// what anyone reads is (issue 50, item 2): it is stopped at `max_output_total_bytes`, keeps
/// its start and its end, and its tree dies then.
#[tokio::test(flavor = "multi_thread")]
async fn an_output_flood_is_stopped_by_its_total_and_keeps_its_start_and_end() {
    let sb = Sandbox::builder()
        .limits("timeout_seconds = 10\nmax_output_bytes = 4096\nmax_output_total_bytes = 2097152")
        .build();
    sb.add_helpers(&["setsid", "stat"]);
    let s = sb.session().await;
    let r = s
        .run_with(json!({"command": "yes flood-me-now", "timeout_seconds": 60}))
        .await;
    assert_eq!(r["code"], "OUTPUT_TRUNCATED", "{r}");
    assert_eq!(r["detail"]["limit"], "max_output_total_bytes", "{r}");
    let out = stdout_of(&r);
    assert!(out.len() < 4096 + 200, "{}", out.len());
    assert!(
        out.starts_with("flood-me-now\n") && out.ends_with("flood-me-now\n"),
        "{out}"
    );
    assert!(
        out.contains(" lines ("),
        "one marker line says what was left out: {out}"
    );
    assert!(
        r["detail"]["stdout_bytes"].as_u64().unwrap() > 1 << 20,
        "{r}"
    );
    assert!(eventually(5, || live_processes_with("flood-me-now").is_empty()).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_call_kills_its_whole_tree() {
    use rmcp::model::CallToolRequestParams;
    let sb = Sandbox::new("");
    sb.add_helpers(&["setsid", "stat"]);
    let s = sb.session().await;
    let script = "sleep 917.5 & setsid sleep 917.6 & sleep 917.7";
    let serde_json::Value::Object(args) = json!({"command": ["sh", "-c", script]}) else {
        unreachable!()
    };
    // Dropping the request future makes the client send notifications/cancelled.
    let mut call = Box::pin(
        s.client
            .call_tool(CallToolRequestParams::new("run_command").with_arguments(args)),
    );
    tokio::select! {
        r = &mut call => panic!("the call should still be running: {r:?}"),
        // Both the `sh` (whose command line holds the script) and the setsid sleep.
        started = eventually(5, || live_processes_with("917.6").len() >= 2) => {
            assert!(started, "the command never started");
        }
    }
    drop(call);
    assert!(
        eventually(5, || live_processes_with("917.").is_empty()).await,
        "survivors after cancellation: {:?}",
        live_processes_with("917.")
    );
    assert_eq!(s.run("echo alive").await["detail"]["stdout"], "alive\n");
}
