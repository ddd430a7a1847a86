//! Per-caller limits behind OAuth: MCP sessions, requests at once and process sessions,
//! counted per authenticated caller and in all.

use super::*;

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

/// A terminal server for the test issuer's callers, with `http` in `[http]`.
fn limited(http: &str) -> (Sandbox, Issuer, super::super::http::Served, u16) {
    let sb = Sandbox::new("");
    let issuer = Issuer::new(sb.base());
    let (served, port) = serve_with("terminal", &sb.policy, &issuer, http);
    (sb, issuer, served, port)
}

#[test]
fn mcp_sessions_are_limited_per_caller_and_in_all() {
    let (sb, issuer, _server, port) =
        limited("max_mcp_sessions = 3\nmax_mcp_sessions_per_caller = 2");
    let alice = issuer.token(|_| {});
    let bob = issuer.token(|c| c["sub"] = json!("bob@example.com"));
    let carol = issuer.token(|c| c["sub"] = json!("carol@example.com"));
    let first = open_session(port, &alice);
    open_session(port, &alice);
    let (status, reply) = initialize(port, &alice);
    assert_eq!(status, 429, "{reply}");
    assert!(
        reply.contains("max_mcp_sessions_per_caller")
            && reply.to_lowercase().contains("retry-after: 1"),
        "{reply}"
    );
    // Another caller still has room, up to the total.
    open_session(port, &bob);
    let (status, reply) = initialize(port, &carol);
    assert_eq!(status, 429, "{reply}");
    assert!(reply.contains("max_mcp_sessions)"), "{reply}");
    // A closed session no longer counts.
    let (status, reply) = request(port, "DELETE", "/mcp", &first, "");
    assert!(status < 300, "{reply}");
    open_session(port, &carol);
    let (status, _) = initialize(port, &alice);
    assert_eq!(status, 429, "the total is reached again");
    // Each refusal is in the trail, with the caller it refused.
    let refused: Vec<Value> = sb
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "http")
        .collect();
    let subs: Vec<&str> = refused.iter().map(|r| r["sub"].as_str().unwrap()).collect();
    assert_eq!(
        subs,
        [
            "alice@example.com",
            "carol@example.com",
            "alice@example.com"
        ],
        "{refused:?}"
    );
    assert!(
        refused.iter().all(|r| r["status"] == 429
            && r["event"] == "limit"
            && r["client_id"] == "claude-desktop"),
        "{refused:?}"
    );
}

#[test]
fn requests_at_once_are_limited_per_caller() {
    let (sb, issuer, _server, port) = limited("max_requests_per_caller = 1");
    let alice = open_session(port, &issuer.token(|_| {}));
    let bob = open_session(port, &issuer.token(|c| c["sub"] = json!("bob@example.com")));
    let ping = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
    let long = {
        let alice = alice.clone();
        std::thread::spawn(move || {
            call_tool(
                port,
                &alice,
                2,
                "run_command",
                json!({"command": "sleep 2"}),
            )
        })
    };
    // Once her call is running (its attempt record is written before the command starts),
    // Alice's next request is refused and Bob's is answered.
    while !sb.has_record(|r| r["tool"] == "run_command" && r["kind"] == "attempt") {
        assert!(
            !long.is_finished(),
            "the call ended before it was seen running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, refused) = request(port, "POST", "/mcp", &alice, ping);
    assert_eq!(status, 429, "{refused}");
    assert!(refused.contains("max_requests_per_caller"), "{refused}");
    let (status, reply) = request(port, "POST", "/mcp", &bob, ping);
    assert_eq!(status, 200, "{reply}");
    let done = long.join().unwrap();
    assert!(done.contains("\"code\":\"OK\""), "{done}");
    // Her call over, she may ask again.
    let (status, reply) = request(port, "POST", "/mcp", &alice, ping);
    assert_eq!(status, 200, "{reply}");
}

#[test]
fn process_sessions_are_limited_per_caller() {
    let sb = Sandbox::new("[terminal.sessions]\nmax_sessions = 3\nmax_sessions_per_caller = 1");
    let issuer = Issuer::new(sb.base());
    let (_server, port) = serve(&sb, &issuer);
    let alice = open_session(port, &issuer.token(|_| {}));
    let bob = open_session(port, &issuer.token(|c| c["sub"] = json!("bob@example.com")));
    let start = |headers: &str, id: u64| {
        call_tool(
            port,
            headers,
            id,
            "start_process",
            json!({"command": "sleep 30"}),
        )
    };
    let first = start(&alice, 2);
    assert!(first.contains("\"code\":\"OK\""), "{first}");
    // A second MCP session of Alice's is still Alice.
    let alice_again = open_session(port, &issuer.token(|_| {}));
    let second = start(&alice_again, 3);
    assert!(
        second.contains("POLICY_DENIED") && second.contains("max_sessions_per_caller"),
        "{second}"
    );
    let bobs = start(&bob, 4);
    assert!(bobs.contains("\"code\":\"OK\""), "{bobs}");
    // Alice's handle is nothing to Bob: he can neither stop nor read her session.
    let handle = first
        .split("\"handle\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no handle: {first}"))
        .to_owned();
    for (id, tool) in [(5, "stop_process"), (6, "read_process_output")] {
        let stolen = call_tool(port, &bob, id, tool, json!({"handle": handle}));
        assert!(stolen.contains("INVALID_REQUEST"), "{tool}: {stolen}");
    }
    let listed = call_tool(port, &alice, 7, "list_processes", json!({}));
    assert!(
        listed.contains(&handle) && listed.contains("\"running\":true"),
        "{listed}"
    );
    let refused = sb
        .find_record(|r| r["tool"] == "start_process" && r["code"] == "POLICY_DENIED")
        .expect("the refusal is in the trail");
    assert_eq!(refused["sub"], "alice@example.com", "{refused}");
}

/// A caller who hangs up on a long call does not get its slot back: the call runs on (rmcp
/// finishes it), so it still counts, where it runs, until it ends.
#[test]
fn a_call_whose_reply_was_dropped_still_counts_until_it_ends() {
    let (sb, issuer, _server, port) = limited("max_requests_per_caller = 1");
    let alice = open_session(port, &issuer.token(|_| {}));
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "run_command", "arguments": {"command": "sleep 3"}}})
    .to_string();
    let mut hung_up = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        hung_up,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n{alice}\r\n{body}",
        body.len()
    )
    .unwrap();
    while !sb.has_record(|r| r["tool"] == "run_command" && r["kind"] == "attempt") {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(hung_up);
    std::thread::sleep(Duration::from_millis(200));
    let second = call_tool(
        port,
        &alice,
        3,
        "run_command",
        json!({"command": "echo again"}),
    );
    assert!(
        second.contains("POLICY_DENIED") && second.contains("max_requests_per_caller"),
        "{second}"
    );
    let refused = sb
        .find_record(|r| r["kind"] == "outcome" && r["code"] == "POLICY_DENIED")
        .expect("the refused call is in the trail");
    assert_eq!(refused["sub"], "alice@example.com", "{refused}");
    // Once the first call has ended, the slot is free.
    let started = std::time::Instant::now();
    loop {
        let third = call_tool(
            port,
            &alice,
            4,
            "run_command",
            json!({"command": "echo again"}),
        );
        if third.contains("\"code\":\"OK\"") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{third}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
