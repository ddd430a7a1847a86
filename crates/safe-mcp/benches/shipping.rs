//! Audit shipping benchmark: `cargo bench -p safe-mcp --bench shipping [-- CALLS]`.
//!
//! Two servers over real MCP sessions (rmcp client), the same policy but for `[audit.ship]`:
//! one ships every record to an OTLP/HTTP receiver and a syslog receiver in this process
//! (on loopback), the other ships nothing. Alternating blocks of `run_command(echo hi)`, one
//! at a time and 16 at once, give p50 and calls per second for each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::call;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Accepts connections; answers each HTTP request 200 (OTLP) or just reads (syslog).
async fn receiver(http: bool) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1 << 16];
                let mut seen = Vec::new();
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if !http {
                        continue;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&seen[..end]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    if seen.len() >= end + 4 + len {
                        let _ = s
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                            .await;
                        return;
                    }
                }
            });
        }
    });
    port
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls = common::count_arg(100);
    let (otlp, syslog) = (receiver(true).await, receiver(false).await);
    let dir = tempfile::tempdir().unwrap();
    let shipping = format!(
        "[audit.ship]\notlp_http = \"http://127.0.0.1:{otlp}/v1/logs\"\nsyslog_tcp = \"127.0.0.1:{syslog}\"\nspool_dir = \"{}/spool\"\n",
        dir.path().display()
    );
    let start = |policy: std::path::PathBuf| async move { common::start_terminal(&policy).await };
    let on = start(common::echo_policy(dir.path(), "on", &shipping)).await;
    let off = start(common::echo_policy(dir.path(), "off", "")).await;
    println!("safe-mcp audit shipping benchmark: {calls} calls per block, 4 rounds, alternating\n");
    let (mut serial, mut parallel) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..4 {
        for (i, client) in [&on, &off].into_iter().enumerate() {
            for _ in 0..calls {
                let t = Instant::now();
                let r = call(client, "run_command", json!({"command": "echo hi"})).await;
                assert_eq!(r["code"], "OK");
                serial[i].push(t.elapsed().as_secs_f64() * 1e3);
            }
            let t = Instant::now();
            let mut done = 0;
            while done < calls {
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..16 {
                    let peer = client.peer().clone();
                    set.spawn(async move {
                        let args = json!({"command": "echo hi"});
                        let serde_json::Value::Object(args) = args else {
                            unreachable!()
                        };
                        peer.call_tool(
                            rmcp::model::CallToolRequestParams::new("run_command")
                                .with_arguments(args),
                        )
                        .await
                        .unwrap()
                    });
                }
                while let Some(r) = set.join_next().await {
                    assert_eq!(r.unwrap().is_error, Some(false));
                }
                done += 16;
            }
            parallel[i].push(done as f64 / t.elapsed().as_secs_f64());
        }
    }
    for (i, name) in ["shipping on (OTLP + syslog)", "shipping off"]
        .iter()
        .enumerate()
    {
        let one: f64 = 1e3 / common::p50_p99(serial[i].clone()).0;
        println!(
            "{name:<30} p50 {:.3} ms ({one:.0} calls/s one at a time)   16 at once {:.0} calls/s",
            common::p50_p99(serial[i].clone()).0,
            common::p50_p99(parallel[i].clone()).0
        );
    }
    on.cancel().await.unwrap();
    off.cancel().await.unwrap();
}
