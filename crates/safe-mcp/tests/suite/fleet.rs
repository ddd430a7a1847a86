//! A fleet (issue 38): replicas of one policy, each with its own id and trail, as a team's
//! pods would run. What one replica made (a process handle, a files plan, an approval
//! ticket) names it, and another refuses it naming the owner. Behind a real HAProxy (the
//! Debian package, started here) with one JWKS and two callers: MCP sessions of 2025-11-25
//! kept on their replica by a stick table learnt from `Mcp-Session-Id`, 2026-07-28 requests
//! routed by the caller's `sub`, the official rmcp client through it, one replica killed
//! mid-run, and every replica's chain whole afterwards.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use super::files::Workspace;
use super::http::{Served, port_of, serve_server_env};
use super::oauth::{Issuer, write_auth};
use super::support::{BIN, Sandbox, Session, assert_success, envelope_of, reason_of, safe_mcp_on};

/// Issue 38, item 1: a plan of the files server and an approval ticket of the terminal
/// server, each sent to another replica, are refused with INVALID_REQUEST naming the owner;
/// the owner still honours them.
#[tokio::test(flavor = "multi_thread")]
async fn a_plan_and_a_ticket_sent_to_another_replica_are_refused_naming_the_owner() {
    let (wa, wb) = (Workspace::new(true), Workspace::new(false));
    let files = |ws: &Workspace, id: &'static str| {
        let policy = ws.policy.clone();
        async move {
            Session::start_server(
                "files",
                &policy,
                move |c| {
                    c.env("SAFE_MCP_SERVER_ID", id);
                },
                None,
            )
            .await
        }
    };
    let (a, b) = (files(&wa, "replica-a").await, files(&wb, "replica-b").await);
    let plan = a.call("plan_organize", json!({})).await;
    let id = plan["detail"]["plan_id"].as_str().unwrap().to_owned();
    assert!(id.ends_with("@replica-a"), "{plan}");
    let wrong = b.call("apply_plan", json!({"plan_id": id})).await;
    assert_eq!(wrong["code"], "INVALID_REQUEST", "{wrong}");
    let reason = reason_of(&wrong);
    assert!(
        reason.starts_with("this plan belongs to server replica-a, and this is server replica-b"),
        "{reason}"
    );
    let right = a.call("apply_plan", json!({"plan_id": id})).await;
    assert_eq!(right["code"], "OK", "{right}");

    // A ticket: a client that cannot be asked gets one from replica-a.
    let (ta, tb) = (super::approvals::sandbox(""), super::approvals::sandbox(""));
    let terminal = |sb: &Sandbox, id: &'static str| {
        let policy = sb.policy.clone();
        async move {
            Session::start(&policy, move |c| {
                c.env("SAFE_MCP_SERVER_ID", id);
            })
            .await
        }
    };
    let (a, b) = (
        terminal(&ta, "replica-a").await,
        terminal(&tb, "replica-b").await,
    );
    let r = a.run("touch needs-ok").await;
    let ticket = super::approvals::ticket_of(&r);
    assert!(ticket.ends_with("@replica-a"), "{r}");
    // The person approves it at the wrong replica's desk: refused, naming the owner.
    let out = approvals(&tb, &["approve", &ticket]);
    assert!(!out.status.success(), "approved at the wrong desk");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "ticket {ticket} belongs to server replica-a, and this is server replica-b"
        )),
        "{err}"
    );
    // The model repeats the call at the wrong replica: refused, nothing runs.
    let again = json!({"command": "touch needs-ok", "approval_ticket": ticket});
    let wrong = b.run_with(again.clone()).await;
    assert_eq!(wrong["code"], "INVALID_REQUEST", "{wrong}");
    assert!(
        reason_of(&wrong).contains("belongs to server replica-a"),
        "{wrong}"
    );
    assert!(!tb.jail.join("needs-ok").exists());
    // At its own replica it is approved and runs.
    assert!(approvals(&ta, &["approve", &ticket]).status.success());
    let right = a.run_with(again).await;
    assert_eq!(right["code"], "OK", "{right}");
    assert!(ta.jail.join("needs-ok").exists());
}
fn approvals(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    super::support::approvals_cli(sb, args)
}

/// HAProxy, started on a config this test writes, stopped when dropped.
struct Haproxy {
    child: Child,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The replicas' `server` lines for a backend.
fn servers(ports: &[(String, u16)]) -> String {
    ports
        .iter()
        .map(|(id, port)| {
            format!("  server {id} 127.0.0.1:{port} check inter 200ms fall 1 rise 1\n")
        })
        .collect()
}

/// The stanzas docs/FLEET.md gives, on two unix sockets: `sessions` keeps each MCP
/// session (2025-11-25) on the replica that opened it, learning the id from the reply;
/// `callers` sends each caller (2026-07-28, no sessions) to one replica by its token's
/// `sub`. The front decodes the token only to route; the replicas verify it.
fn haproxy_config(dir: &Path, ports: &[(String, u16)]) -> String {
    let backends = servers(ports);
    format!(
        r#"global
  maxconn 256
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  option redispatch
  retries 2
frontend sessions
  bind {dir}/sessions.sock mode 600
  default_backend by_session
frontend callers
  bind {dir}/callers.sock mode 600
  http-request set-header X-MCP-Caller %[http_auth_bearer,jwt_payload_query('$.sub')]
  default_backend by_caller
backend by_session
  balance roundrobin
  stick-table type string len 128 size 100k expire 30m
  stick on req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
{backends}backend by_caller
  balance hdr(X-MCP-Caller)
  hash-type consistent
{backends}"#,
        dir = dir.display()
    )
}

fn start_haproxy(dir: &Path, ports: &[(String, u16)]) -> Haproxy {
    let config = dir.join("haproxy.cfg");
    std::fs::write(&config, haproxy_config(dir, ports)).unwrap();
    let check = Command::new("haproxy")
        .arg("-c")
        .arg("-f")
        .arg(&config)
        .output()
        .expect("haproxy is installed (.ci/run installs Debian's)");
    assert_success(&check);
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let proxy = Haproxy { child };
    for _ in 0..100 {
        if dir.join("sessions.sock").exists() && dir.join("callers.sock").exists() {
            return proxy;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("haproxy did not open its sockets");
}

type Client = RunningService<RoleClient, ()>;

/// The official rmcp client over HTTP, through one of HAProxy's sockets, as `token`'s
/// caller; on 2026-07-28 without a session.
async fn connect(socket: &Path, token: &str, stateless: bool) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri("http://localhost/mcp")
        .auth_header(token.to_owned());
    let transport = StreamableHttpClientTransport::from_unix_socket_with_config(
        &socket.to_string_lossy(),
        config,
    );
    if stateless {
        use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        };
        ().serve_with_lifecycle(transport, lifecycle).await.unwrap()
    } else {
        ().serve(transport).await.unwrap()
    }
}

async fn call(client: &Client, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else { panic!() };
    let call = client
        .call_tool(rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(args));
    let result = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("call timed out")
        .unwrap();
    envelope_of(&result)
}

/// Starts a session that says `up` and waits; its handle.
async fn start(client: &Client) -> String {
    let r = call(
        client,
        "start_process",
        json!({"command": "sh -c 'echo up; sleep 60'"}),
    )
    .await;
    assert_eq!(r["code"], "OK", "{r}");
    r["detail"]["handle"].as_str().unwrap().to_owned()
}

/// Reads what is new of `handle`, waiting for its `up` when `wait`.
async fn read(client: &Client, handle: &str, wait: bool) -> Value {
    let args = if wait {
        json!({"handle": handle, "wait_seconds": 10, "until": "output"})
    } else {
        json!({"handle": handle})
    };
    call(client, "read_process_output", args).await
}

fn owner(handle: &str) -> &str {
    handle.rsplit_once('@').map_or("", |(_, s)| s)
}

/// A sandbox whose policy the replicas share: sessions allowed, `[http.auth]` for the test
/// issuer made beside it.
fn fleet_sandbox() -> (Sandbox, Issuer) {
    let sb = Sandbox::builder()
        .allow(&["sh", "echo", "sleep", "cat"])
        .roomy(30)
        .build();
    let issuer = Issuer::new(sb.base());
    fleet_policy(&sb, &issuer);
    (sb, issuer)
}

fn fleet_policy(sb: &Sandbox, issuer: &Issuer) {
    sb.add_helpers(&["setsid"]);
    sb.append_policy("[terminal.sessions]\nmax_sessions = 32\nmax_sessions_per_caller = 16");
    write_auth(&sb.policy, "", &issuer.jwks_setting());
}

/// Issue 38, item 3: three replicas of one policy and one JWKS behind HAProxy, two callers.
/// Sessions spread over the replicas and each stays on its own; a caller of 2026-07-28
/// always reaches the same replica; one replica is killed mid-run: its handles get a clear
/// INVALID_REQUEST naming it (through a new session the client opens by itself), the other
/// replicas carry on, and every replica's chain is whole, alone and merged.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_behind_haproxy_spreads_sessions_and_survives_a_killed_replica() {
    if Command::new("haproxy").arg("-v").output().is_err() {
        super::support::skip("haproxy is not installed (.ci/run installs Debian's package)");
        return;
    }
    let (sb, issuer) = fleet_sandbox();
    let trail = |id: &str| sb.base().join(format!("{id}.jsonl"));
    let mut replicas: Vec<(String, Served, u16)> = Vec::new();
    for id in ["r1", "r2", "r3"] {
        let log = trail(id).display().to_string();
        let env = [
            ("SAFE_MCP_SERVER_ID", id),
            ("SAFE_MCP_AUDIT_LOG", log.as_str()),
        ];
        let (served, url) = serve_server_env("terminal", &sb.policy, "127.0.0.1:0", &env);
        replicas.push((id.to_owned(), served, port_of(&url)));
    }
    let ports: Vec<(String, u16)> = replicas.iter().map(|(id, _, p)| (id.clone(), *p)).collect();
    let _haproxy = start_haproxy(sb.base(), &ports);
    let (by_session, by_caller) = (
        sb.base().join("sessions.sock"),
        sb.base().join("callers.sock"),
    );
    let token = |sub: &'static str| issuer.token(move |c| c["sub"] = json!(sub));
    let (alice, bob) = (token("alice"), token("bob"));

    // 2025-11-25: six MCP sessions, three per caller, spread round robin; each session's
    // calls stay on the replica that opened it (a read of its own handle always works).
    let mut sessions: Vec<(&str, Client, String)> = Vec::new();
    for n in 0..6 {
        let (who, t) = if n % 2 == 0 {
            ("alice", &alice)
        } else {
            ("bob", &bob)
        };
        let client = connect(&by_session, t, false).await;
        let handle = start(&client).await;
        let r = read(&client, &handle, true).await;
        assert_eq!(
            r["code"], "OK",
            "a session's calls stay on its replica: {r}"
        );
        assert_eq!(r["detail"]["stdout"], "up\n", "{r}");
        sessions.push((who, client, handle));
    }
    let used: std::collections::BTreeSet<&str> =
        sessions.iter().map(|(_, _, h)| owner(h)).collect();
    assert_eq!(
        used.len(),
        3,
        "sessions spread over every replica: {used:?}"
    );

    // 2026-07-28: no sessions; each request is routed by the caller. Every request of one
    // caller reaches one replica, so its handles are its own there.
    let stateless = connect(&by_caller, &alice, true).await;
    let handle = start(&stateless).await;
    for n in 0..4 {
        let r = read(&stateless, &handle, n == 0).await;
        assert_eq!(
            r["code"], "OK",
            "routed by caller to the handle's replica: {r}"
        );
    }
    let listed = call(&stateless, "list_processes", json!({})).await;
    assert!(listed.to_string().contains(&handle), "{listed}");
    let alice_at = owner(&handle).to_owned();

    // One replica dies mid-run (SIGKILL, as a crashed or evicted pod).
    let victim = owner(&sessions[0].2).to_owned();
    let at = replicas
        .iter()
        .position(|(id, _, _)| *id == victim)
        .unwrap();
    replicas[at].1.kill();
    std::thread::sleep(Duration::from_millis(800));
    for (who, client, handle) in &sessions {
        let r = read(client, handle, false).await;
        if owner(handle) == victim {
            // The balancer sends the session elsewhere; the client opens a new one there by
            // itself and repeats the call, which names the dead owner.
            assert_eq!(r["code"], "INVALID_REQUEST", "{who}: {r}");
            let reason = reason_of(&r);
            assert!(
                reason.contains(&format!("belongs to server {victim}")),
                "{reason}"
            );
        } else {
            assert_eq!(
                r["code"], "OK",
                "{who}'s session on a live replica carries on: {r}"
            );
            let stopped = call(client, "stop_process", json!({"handle": handle})).await;
            assert_eq!(stopped["code"], "OK", "{stopped}");
        }
        let fresh = call(client, "run_command", json!({"command": "echo still"})).await;
        assert_eq!(fresh["code"], "OK", "{who} can go on working: {fresh}");
    }
    let r = read(&stateless, &handle, false).await;
    if alice_at == victim {
        assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    } else {
        assert_eq!(r["code"], "OK", "{r}");
    }
    drop(sessions);
    drop(stateless);
    drop(_haproxy);
    replicas.clear();

    every_chain_is_whole(sb.base(), &trail);
}

/// Nothing is lost from any chain: each replica's trail verifies, the killed one too, and
/// merged into one stream each verifies as its own chain with no gap; the report of the
/// merged stream says so, and names the server whose chain a lost record breaks.
fn every_chain_is_whole(base: &std::path::Path, trail: &dyn Fn(&str) -> std::path::PathBuf) {
    let mut merged = String::new();
    for id in ["r1", "r2", "r3"] {
        let out = Command::new(BIN)
            .args(["audit", "verify"])
            .arg(trail(id))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{id}: {said}");
        let text = std::fs::read_to_string(trail(id)).unwrap();
        assert!(
            text.lines()
                .all(|l| l.contains(&format!("\"server\":\"{id}\""))),
            "{id}: every record names its replica"
        );
        merged.push_str(&text);
    }
    let stream = base.join("received.jsonl");
    std::fs::write(&stream, &merged).unwrap();
    let out = safe_mcp_on(&["audit", "verify", "--received"], &stream);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.starts_with("OK: 3 servers") && said.contains("no gaps"),
        "{said}"
    );
    // The report reads the merged stream: every chain verified, calls by server.
    let page_at = base.join("fleet.html");
    let out = Command::new(BIN)
        .args(["audit", "report", "--received"])
        .arg(&stream)
        .arg("--out")
        .arg(&page_at)
        .output()
        .unwrap();
    assert_success(&out);
    let page = std::fs::read_to_string(&page_at).unwrap();
    assert!(
        page.contains("Chain intact: every record of 3 server(s)"),
        "{page}"
    );
    assert!(page.contains("Calls by server"), "{page}");
    for id in ["r1", "r2", "r3"] {
        assert!(page.contains(&format!("<td>{id}</td>")), "{id}");
    }
    assert!(page.contains("alice") && page.contains("bob"));
    // A record lost on the way: the page says which server's chain has the gap.
    let lost: Vec<&str> = merged.lines().collect();
    let cut = [&lost[..4], &lost[5..]].concat().join("\n");
    std::fs::write(&stream, cut).unwrap();
    let out = safe_mcp_on(&["audit", "report", "--received"], &stream);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.contains("Chain BROKEN: records are missing (gaps)")
            && page.contains("r1: ")
            && page.contains("missing seq 5"),
        "{page}"
    );
}

/// Issue 38 (review): on MCP 2026-07-28 each request gets a server instance of its own, and
/// a process session belongs to the caller that started it. One replica, two callers: the
/// other caller can neither read, write to, stop nor list it; its own next requests can.
#[tokio::test(flavor = "multi_thread")]
async fn on_2026_07_28_a_callers_process_sessions_are_its_own() {
    let (sb, issuer) = fleet_sandbox();
    let socket = sb.base().join("mcp.sock");
    let addr = format!("unix:{}", socket.display());
    let (_served, _) = serve_server_env("terminal", &sb.policy, &addr, &[]);
    let token = |sub: &'static str| issuer.token(move |c| c["sub"] = json!(sub));
    let (alice, bob) = (
        connect(&socket, &token("alice"), true).await,
        connect(&socket, &token("bob"), true).await,
    );
    let handle = start(&alice).await;
    for (tool, args) in [
        ("read_process_output", json!({"handle": handle})),
        (
            "write_process_input",
            json!({"handle": handle, "data": "x\n"}),
        ),
        ("stop_process", json!({"handle": handle})),
    ] {
        let r = call(&bob, tool, args).await;
        assert_eq!(r["code"], "INVALID_REQUEST", "{tool}: {r}");
        assert!(reason_of(&r).starts_with("unknown handle"), "{tool}: {r}");
    }
    let listed = call(&bob, "list_processes", json!({})).await;
    assert!(!listed.to_string().contains(&handle), "{listed}");
    let r = read(&alice, &handle, true).await;
    assert_eq!(r["detail"]["stdout"], "up\n", "{r}");
    let listed = call(&alice, "list_processes", json!({})).await;
    assert!(listed.to_string().contains(&handle), "{listed}");
    let stopped = call(&alice, "stop_process", json!({"handle": handle})).await;
    assert_eq!(stopped["code"], "OK", "{stopped}");
}
