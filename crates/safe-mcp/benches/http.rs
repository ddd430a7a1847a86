//! HTTP transport benchmark: `cargo bench -p safe-mcp --bench http [-- CALLS]`.
//!
//! `run_command(echo hi)` through three transports of the same policy, alternating blocks
//! in one run: stdio (rmcp client), `--http` on loopback without auth, and `--http` with
//! `[http.auth] mode = "oauth"` and a valid bearer token (RS256, keys made with openssl).
//! The HTTP client here is raw HTTP/1.1, one connection per request (`Connection: close`),
//! reading the Server-Sent Events answer; so the HTTP rows include a TCP connect each.
//! Then 16 HTTP clients at once, each a caller of its own (its own token and MCP session):
//! calls per second in total.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_safe-mcp");

/// One JSON-RPC message to /mcp; returns the answer's body and the session id it named.
async fn post(port: u16, headers: &str, body: &str) -> (String, Option<String>) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.set_nodelay(true).unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 2"), "{reply}");
    let session = reply.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .starts_with("mcp-session-id:")
            .then(|| l.split_once(':').unwrap().1.trim().to_owned())
    });
    (reply, session)
}

/// An MCP session over raw HTTP: initialized, ready for calls.
struct HttpSession {
    port: u16,
    headers: String,
    id: u64,
}

impl HttpSession {
    async fn open(port: u16, auth: &str) -> HttpSession {
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
        let (_, session) = post(port, auth, init).await;
        let mut headers = auth.to_owned();
        if let Some(s) = session {
            headers.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        let _ = post(
            port,
            &headers,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .await;
        HttpSession {
            port,
            headers,
            id: 0,
        }
    }

    async fn run(&mut self) {
        self.id += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.id, "method": "tools/call",
                          "params": {"name": "run_command", "arguments": {"command": "echo hi"}}});
        let (reply, _) = post(self.port, &self.headers, &body.to_string()).await;
        assert!(
            reply.contains(r#"\"code\":\"OK\""#) || reply.contains(r#""code":"OK""#),
            "{reply}"
        );
    }
}

/// A JWKS file and a valid token for it.
/// The issuer's JWKS, and a token for each of `callers` people (`sub` = `person-N`).
fn issuer(dir: &Path, callers: usize) -> (std::path::PathBuf, Vec<String>) {
    let (pem, n) = common::issuer::rsa_key(dir, "issuer.pem");
    let jwks = common::issuer::write_jwks(dir, &n);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let tokens = (0..callers)
        .map(|i| {
            let claims = json!({"iss": "https://issuer.test", "aud": "https://mcp.test/mcp",
                                "sub": format!("person-{i}"), "scope": "mcp:terminal", "exp": now + 3600});
            common::issuer::sign(&claims, &pem)
        })
        .collect();
    (jwks, tokens)
}

/// Starts `--http 127.0.0.1:0`; returns the child and its port.
async fn serve(policy: &Path) -> (tokio::process::Child, u16) {
    let mut child = tokio::process::Command::new(BIN)
        .args(["terminal", "--config"])
        .arg(policy)
        .args(["--http", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let port = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the server stopped");
        if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
            break rest.trim_end_matches("/mcp").parse().unwrap();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls = common::count_arg(100);
    let dir = tempfile::tempdir().unwrap();
    let (jwks, tokens) = issuer(dir.path(), 16);
    let oauth = format!(
        "[http.auth]\nmode = \"oauth\"\nissuer = \"https://issuer.test\"\naudience = \"https://mcp.test/mcp\"\njwks_file = \"{}\"\nrequired_scopes = [\"mcp:terminal\"]\n",
        jwks.display()
    );
    let limits = "[terminal.limits]\ntimeout_seconds = 30\n";
    let policy = |name: &str, extra: &str| {
        common::echo_policy(dir.path(), name, &format!("{limits}{extra}"))
    };
    let stdio_policy = policy("stdio", "");
    let stdio = common::start_terminal(&stdio_policy).await;
    let (_plain_child, plain_port) = serve(&policy("plain", "")).await;
    let (_oauth_child, oauth_port) = serve(&policy("oauth", &oauth)).await;
    let bearer = |i: usize| format!("Authorization: Bearer {}\r\n", tokens[i]);
    let mut plain = HttpSession::open(plain_port, "").await;
    let mut authed = HttpSession::open(oauth_port, &bearer(0)).await;

    println!("safe-mcp HTTP benchmark: {calls} calls per block, 4 rounds, alternating\n");
    let mut rows: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..4 {
        for _ in 0..calls {
            let t = Instant::now();
            let r = common::call(&stdio, "run_command", json!({"command": "echo hi"})).await;
            assert_eq!(r["code"], "OK");
            rows[0].push(t.elapsed().as_secs_f64() * 1e3);
        }
        for _ in 0..calls {
            let t = Instant::now();
            plain.run().await;
            rows[1].push(t.elapsed().as_secs_f64() * 1e3);
        }
        for _ in 0..calls {
            let t = Instant::now();
            authed.run().await;
            rows[2].push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    for (name, row) in [
        "stdio (rmcp client)",
        "HTTP, loopback, no auth",
        "HTTP, OAuth bearer token",
    ]
    .iter()
    .zip(rows)
    {
        let (a, b) = common::p50_p99(row);
        println!("{name:<28} run_command(echo hi) p50 {a:>7.3} ms   p99 {b:>7.3} ms");
    }

    // 16 people at once, each with a token of their own and an MCP session (a team's
    // shared server; one caller's own limits are [http] max_*_per_caller).
    let mut clients = Vec::new();
    for i in 0..16 {
        clients.push(HttpSession::open(oauth_port, &bearer(i)).await);
    }
    let per_client = calls.max(16) / 4;
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for mut c in clients {
        set.spawn(async move {
            for _ in 0..per_client {
                c.run().await;
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    let total = 16 * per_client;
    println!(
        "16 HTTP clients, a caller each, {per_client} calls each: {:.0} calls/s",
        total as f64 / t.elapsed().as_secs_f64()
    );
    stdio.cancel().await.unwrap();
}
