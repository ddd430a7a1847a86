//! Long work (issue 16): progress notifications while a call runs, and cancellation that
//! the audit trail records, over real MCP sessions with the rmcp client.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::support::{
    BIN, Sandbox, Session, eventually, live_processes_with, reason_of, sh_call, stdout_of,
};

type Client = RunningService<RoleClient, Recorder>;

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

async fn connect(server: &str, policy: &std::path::Path, recorder: Recorder) -> Client {
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
async fn call(client: &Client, tool: &'static str, args: Value) -> Value {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let params = CallToolRequestParams::new(tool).with_arguments(args);
    let result = client.call_tool(params).await.unwrap();
    result.structured_content.unwrap()
}

fn sandbox() -> Sandbox {
    Sandbox::builder()
        .allow(&["sh", "echo", "sleep"])
        .roomy(30)
        .build()
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
    let Value::Object(args) = json!({"command": ["sh", "-c", "echo started; sleep 931.25"]}) else {
        unreachable!()
    };
    let mut pending =
        Box::pin(client.call_tool(CallToolRequestParams::new("run_command").with_arguments(args)));
    let started = async {
        for _ in 0..100 {
            if sb.has_record(|r| r["kind"] == "attempt" && r["tool"] == "run_command") {
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
        outcome = sb.find_record(|r| r["kind"] == "outcome" && r["tool"] == "run_command");
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

/// A sandbox for sessions (`setsid` a helper) with `sessions` in `[terminal.sessions]`.
fn session_sandbox(sessions: &str) -> Sandbox {
    let sb = Sandbox::builder()
        .allow(&["sh", "echo", "sleep", "cat"])
        .roomy(30)
        .extra(&format!("[terminal.sessions]\n{sessions}"))
        .build();
    sb.add_helpers(&["setsid"]);
    sb
}

/// A [`session_sandbox`] with `sessions`, and a client of its terminal server.
async fn sessions(sessions: &str) -> (Sandbox, Client) {
    let sb = session_sandbox(sessions);
    let client = connect("terminal", &sb.policy, Recorder::default()).await;
    (sb, client)
}

/// `tool` (`read_process_output`, `stop_process`) of `handle` alone.
async fn on_handle(client: &Client, tool: &'static str, handle: &str) -> Value {
    call(client, tool, json!({"handle": handle})).await
}

/// [`started_with`] two sessions at most.
async fn started(script: &str) -> (Sandbox, Client, String) {
    started_with("max_sessions = 2", script).await
}

/// A [`sessions`] sandbox and client, with `script` started in it; and its handle.
async fn started_with(sessions_toml: &str, script: &str) -> (Sandbox, Client, String) {
    let (sb, client) = sessions(sessions_toml).await;
    let handle = start(&client, script).await;
    (sb, client, handle)
}

/// Starts `script` under `sh -c` as a session; returns its handle.
async fn start(client: &Client, script: &str) -> String {
    let r = call(client, "start_process", sh_call(script)).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(r["detail"]["pid"].as_u64().unwrap() > 0, "{r}");
    r["detail"]["handle"].as_str().unwrap().to_owned()
}

/// Reads until `want` appears in stdout (or the session ends); returns all it read.
async fn read_until(client: &Client, handle: &str, want: &str) -> String {
    let mut all = String::new();
    for _ in 0..20 {
        let r = call(
            client,
            "read_process_output",
            json!({"handle": handle, "wait_seconds": 2}),
        )
        .await;
        assert_eq!(r["code"], "OK", "{r}");
        all.push_str(stdout_of(&r));
        if all.contains(want) || r["detail"]["running"] == false {
            break;
        }
    }
    all
}

/// A REPL-like session: what is written to its stdin comes back; a secret it prints comes
/// back redacted; a run_command meanwhile does not touch it (the escapee sweep spares it);
/// stop kills it, setsid grandchild included, and the trail says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_takes_input_redacts_output_and_dies_whole_at_stop() {
    let repl = "setsid sleep 94$((7)).7 </dev/null >/dev/null 2>&1 & echo ready; while read l; do echo got $l; done";
    let (sb, client, handle) = started(repl).await;
    assert!(
        read_until(&client, &handle, "ready")
            .await
            .contains("ready")
    );
    let w = call(
        &client,
        "write_process_input",
        json!({"handle": handle, "data": "hello\nghp_0123456789abcdefghijklmnopqrstuvwxyz\n"}),
    )
    .await;
    assert_eq!(w["code"], "OK", "{w}");
    let out = read_until(&client, &handle, "REDACTED").await;
    assert!(out.contains("got hello"), "{out}");
    assert!(!out.contains("ghp_0123"), "a secret came back: {out}");
    // A call that ends sweeps escapees, but never a live session's processes.
    let r = call(&client, "run_command", json!({"command": "echo between"})).await;
    assert_eq!(r["detail"]["stdout"], "between\n", "{r}");
    let l = call(&client, "list_processes", json!({})).await;
    assert_eq!(l["detail"]["processes"][0]["running"], true, "{l}");
    // Its setsid grandchild left the session's process session: in a pid namespace it
    // stays with its init; in the host view the sweep takes it (see docs/THREAT_MODEL.md).
    if super::view::namespaces_available(None, true) {
        assert!(
            !live_processes_with("947.7").is_empty(),
            "the session's grandchild died early"
        );
    }

    let s = on_handle(&client, "stop_process", &handle).await;
    assert_eq!(s["code"], "OK", "{s}");
    assert_eq!(s["detail"]["running"], false, "{s}");
    assert_eq!(s["detail"]["ended"], "stop", "{s}");
    let gone = eventually(2, || live_processes_with("947.7").is_empty()).await;
    assert!(gone, "the setsid grandchild outlived stop_process");
    let again = on_handle(&client, "read_process_output", &handle).await;
    assert_eq!(
        again["code"], "INVALID_REQUEST",
        "a collected handle: {again}"
    );

    let records = sb.audit_records();
    let write = records
        .iter()
        .find(|r| r["kind"] == "attempt" && r["tool"] == "write_process_input")
        .unwrap();
    assert_eq!(write["args"]["bytes"], 47, "{write}");
    assert!(!write.to_string().contains("ghp_0123"), "{write}");
    let ended = records
        .iter()
        .find(|r| r["kind"] == "outcome" && r["tool"] == "start_process")
        .unwrap();
    assert_eq!(ended["session_end"], "stop", "{ended}");
}

/// max_sessions is enforced, an idle session is killed, a handle is worthless on another
/// connection.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_limited_idle_ones_die_and_handles_stay_on_their_connection() {
    let (sb, client, handle) =
        started_with("max_sessions = 1\nidle_timeout_seconds = 2", "sleep 600").await;
    let second = call(&client, "start_process", json!({"command": "sleep 1"})).await;
    assert_eq!(second["code"], "POLICY_DENIED", "{second}");
    let other = connect("terminal", &sb.policy, Recorder::default()).await;
    let foreign = on_handle(&other, "read_process_output", &handle).await;
    assert_eq!(foreign["code"], "INVALID_REQUEST", "{foreign}");
    let stop = on_handle(&other, "stop_process", &handle).await;
    assert_eq!(stop["code"], "INVALID_REQUEST", "{stop}");
    // Nobody touches it: it idles out (listing does not touch it).
    let mut l = call(&client, "list_processes", json!({})).await;
    for _ in 0..100 {
        if l["detail"]["processes"][0]["running"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        l = call(&client, "list_processes", json!({})).await;
    }
    let p = &l["detail"]["processes"][0];
    assert_eq!(
        (p["running"].as_bool(), p["ended"].as_str()),
        (Some(false), Some("idle")),
        "{l}"
    );
    let started = call(&client, "start_process", json!({"command": "sleep 1"})).await;
    assert_eq!(started["code"], "OK", "a slot is free again: {started}");
}

/// The server killed with SIGKILL leaves no process of a session alive.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_leaves_no_session_process() {
    // Only the session's first process has the death signal; its setsid grandchild dies
    // with the server only through the pid namespace's init.
    if !super::view::namespaces_available(None, true) {
        return;
    }
    let (sb, client, handle) =
        started("setsid sleep 952.4 </dev/null >/dev/null 2>&1 & echo up; sleep 952.5").await;
    assert!(read_until(&client, &handle, "up").await.contains("up"));
    assert!(!live_processes_with("952.4").is_empty() && !live_processes_with("952.5").is_empty());
    let policy = sb.policy.to_string_lossy().into_owned();
    let servers: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            // The server is our child; a session's init shares its memory, and so its
            // command line, but is the server's child.
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid: u32 = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            (cmdline.contains(&policy) && ppid == std::process::id()).then_some(pid)
        })
        .collect();
    assert_eq!(servers.len(), 1, "{servers:?}");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(servers[0]).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let gone = eventually(3, || live_processes_with("952.").is_empty()).await;
    assert!(gone, "a session process outlived the server");
}

/// A session past its timeout is killed and says so; when the client goes away (stdin
/// closed), the server stops every session before it exits, and the trail says
/// `server-exit`.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_end_at_their_timeout_and_with_the_server() {
    let (sb, client) = sessions("max_sessions = 2").await;
    let r = call(
        &client,
        "start_process",
        json!({"command": "sleep 963.1", "timeout_seconds": 1}),
    )
    .await;
    let handle = r["detail"]["handle"].as_str().unwrap().to_owned();
    let read = call(
        &client,
        "read_process_output",
        json!({"handle": handle, "wait_seconds": 5}),
    )
    .await;
    assert_eq!(
        (
            read["detail"]["running"].as_bool(),
            read["detail"]["ended"].as_str()
        ),
        (Some(false), Some("timeout")),
        "{read}"
    );
    let _ = start(&client, "sleep 963.2").await;
    assert!(!live_processes_with("963.2").is_empty());
    client.cancel().await.unwrap(); // closes the server's stdin
    let mut ended = None;
    for _ in 0..100 {
        ended = sb.find_record(|r| r["kind"] == "outcome" && r["session_end"] == "server-exit");
        if ended.is_some() && live_processes_with("963.2").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        ended.is_some(),
        "no server-exit outcome: {:?}",
        sb.audit_records()
    );
    assert!(
        live_processes_with("963.2").is_empty(),
        "a session outlived the server"
    );
}

/// A session printing as fast as it can still stops at once when asked, and a read takes
/// at most max_output_bytes of it and says there is more.
#[tokio::test(flavor = "multi_thread")]
async fn a_flooding_session_still_stops() {
    let (_sb, client, handle) = started_with(
        "max_sessions = 2\nbuffer_bytes = 65536",
        "while :; do echo flood flood flood flood flood flood; done",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = on_handle(&client, "read_process_output", &handle).await;
    assert!(stdout_of(&r).len() <= 65536, "more than one read's worth");
    let s = on_handle(&client, "stop_process", &handle).await;
    assert_eq!(s["code"], "OK", "{s}");
    assert_eq!(s["detail"]["ended"], "stop", "{s}");
    // Output the stop could not hand out keeps the handle; once read to the end, it is spent.
    let after = on_handle(&client, "read_process_output", &handle).await;
    if s["detail"]["more"] == true {
        assert_eq!(after["code"], "OK", "{after}");
        assert!(!stdout_of(&after).is_empty(), "{after}");
    } else {
        assert_eq!(after["code"], "INVALID_REQUEST", "{after}");
    }
}

/// In the host view (no pid namespace) a session's orphan, re-parented to the server, is
/// spared by other calls' sweeps while the session runs, and killed once it ends.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_view_session_keeps_its_orphans_while_it_runs() {
    let sb = session_sandbox("max_sessions = 2");
    sb.append_policy("[terminal.sandbox]\nnamespaces = \"off\"");
    let client = connect("terminal", &sb.policy, Recorder::default()).await;
    let handle = start(
        &client,
        // The marker is spelled so that only the orphan's command line holds it, not sh's.
        "(sleep 97$((8)).3 </dev/null >/dev/null 2>&1 &); echo up; sleep 600",
    )
    .await;
    assert!(read_until(&client, &handle, "up").await.contains("up"));
    // Another call ends and sweeps: the session's orphan stays.
    let r = call(&client, "run_command", json!({"command": "echo swept"})).await;
    assert_eq!(r["detail"]["stdout"], "swept\n", "{r}");
    assert!(
        !live_processes_with("978.3").is_empty(),
        "a live session's orphan was swept"
    );
    let s = on_handle(&client, "stop_process", &handle).await;
    assert_eq!(s["detail"]["ended"], "stop", "{s}");
    let gone = eventually(3, || live_processes_with("978.3").is_empty()).await;
    assert!(gone, "the orphan outlived its session");
}

/// Issue 33, in part: `read_process_output` can wait for the session's end (`until:
/// "exit"`: one read for a whole test run, not one per line) or for output that then pauses
/// (`until: "quiet"`: a prompt, a server that is up).
#[tokio::test(flavor = "multi_thread")]
async fn a_read_can_wait_for_the_end_or_for_a_pause() {
    let sb = Sandbox::allowing(&["python3"], "timeout_seconds = 30");
    let s = sb.session().await;
    let twenty = "import time\nfor i in range(20):\n    print('line', i, flush=True)\n    time.sleep(0.05)\n";
    let (_, r) = s.py_until_exit(twenty, 20).await;
    assert_eq!(r["detail"]["running"], false, "one read saw the end: {r}");
    let out = stdout_of(&r);
    assert_eq!(out.lines().count(), 20, "{out}");
    // A pause after some output ends a "quiet" wait before the process does.
    let prompt =
        "import sys, time\nprint('ready', flush=True)\ntime.sleep(5)\nprint('late', flush=True)\n";
    let handle = s
        .start_process(json!({"command": ["python3", "-c", prompt]}))
        .await;
    let r = s
        .read_process(&handle, json!({"wait_seconds": 20, "until": "quiet"}))
        .await;
    assert_eq!(r["detail"]["running"], true, "{r}");
    assert_eq!(r["detail"]["stdout"], "ready\n", "{r}");
    let r = s.read_process(&handle, json!({"until": "later"})).await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    s.call("stop_process", json!({"handle": handle})).await;
}

/// Issue 33, item 3: a read waiting for the end sends progress about once a second while it
/// waits (the rmcp client's requests carry a token), so that a client does not time out.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_wait_for_the_end_sends_progress() {
    let sb = session_sandbox("max_sessions = 2");
    let recorder = Recorder::default();
    let client = connect("terminal", &sb.policy, recorder.clone()).await;
    let handle = start(&client, "sleep 3; echo done").await;
    let r = call(
        &client,
        "read_process_output",
        json!({"handle": handle, "wait_seconds": 60, "until": "exit"}),
    )
    .await;
    let answered = Instant::now();
    assert_eq!(r["detail"]["stdout"], "done\n", "{r}");
    assert_eq!(r["reason"], "ended: exit code 0", "{r}");
    let seen = recorder.seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "{} notifications", seen.len());
    assert!(
        seen.iter().all(|(at, _)| *at <= answered),
        "progress after the result"
    );
    let progress: Vec<f64> = seen.iter().map(|(_, p)| p.progress).collect();
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    assert_eq!(seen[0].1.total, Some(60.0), "{:?}", seen[0].1);
}

/// Issue 38, item 1: a fleet's replicas (each its own trail, `SAFE_MCP_SERVER_ID` per
/// replica). A session's handle names the replica that started it; the same handle sent to
/// another replica is refused with INVALID_REQUEST naming the owner, and that replica shows
/// nothing of it; the owner still serves it.
#[tokio::test(flavor = "multi_thread")]
async fn a_handle_sent_to_another_replica_is_refused_naming_its_owner() {
    let replica = |id: &'static str| {
        let policy = session_sandbox("max_sessions = 2");
        async move {
            let s = Session::start(&policy.policy, move |c| {
                c.env("SAFE_MCP_SERVER_ID", id);
            })
            .await;
            (policy, s)
        }
    };
    let ((_a_sb, a), (_b_sb, b)) = (replica("replica-a").await, replica("replica-b").await);
    let handle = a
        .start_process(json!({"command": "sh -c 'echo up; sleep 30'"}))
        .await;
    assert!(handle.ends_with("@replica-a"), "{handle}");
    let wrong = b.read_process(&handle, json!({})).await;
    assert_eq!(wrong["code"], "INVALID_REQUEST", "{wrong}");
    let reason = reason_of(&wrong);
    assert!(
        reason.contains("belongs to server replica-a")
            && reason.contains("this is server replica-b"),
        "{reason}"
    );
    let listed = b.call("list_processes", json!({})).await;
    assert_eq!(listed["detail"]["processes"], json!([]), "{listed}");
    let right = a.read_process(&handle, json!({"wait_seconds": 5})).await;
    assert_eq!(right["code"], "OK", "{right}");
    let stopped = a.call("stop_process", json!({"handle": handle})).await;
    assert_eq!(stopped["code"], "OK", "{stopped}");
}
