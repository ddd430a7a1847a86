//! Egress benchmark: `cargo bench -p safe-mcp --bench egress [-- ROUNDS]`.
//!
//! An HTTP server in this process on 127.0.0.1 serves 100 MB (and a 2-byte body); curl
//! fetches it, alternating in one run:
//! - **direct**: curl started by this bench, no sandbox, no proxy;
//! - **proxy**: curl run by `safe-mcp terminal` over a real MCP session (enforce mode,
//!   private view, `[terminal.network] mode = "allowlist"`), through the server's proxy.
//!
//! It prints the throughput of each (curl's own `speed_download`) and their ratio, and the
//! per-connection setup latency (curl's `time_starttransfer` for the 2-byte body: connect,
//! the proxy's judgement, resolution, its durable `open` record and the upstream connect)
//! as p50/p99 of 50 fetches each way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::call;
use rmcp::ServiceExt;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_safe-mcp");
const BIG: usize = 100 << 20;
const SETUP_SAMPLES: usize = 50;

/// Serves `/big` (100 MB of zeroes) and anything else as a 2-byte body.
async fn upstream() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let chunk = vec![0u8; 1 << 20];
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let big = head.starts_with(b"GET /big");
                let len = if big { BIG } else { 2 };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
                );
                if stream.write_all(reply.as_bytes()).await.is_err() {
                    return;
                }
                if big {
                    for _ in 0..(BIG / chunk.len()) {
                        if stream.write_all(&chunk).await.is_err() {
                            return;
                        }
                    }
                } else {
                    let _ = stream.write_all(b"ok").await;
                }
            });
        }
    });
    port
}

fn policy(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("jail")).unwrap();
    let p = dir.join("policy.toml");
    std::fs::write(
        &p,
        "audit_log = \"audit.jsonl\"\n[terminal]\njail_root = \"jail\"\npath = [\"/usr/bin\", \"/bin\"]\n[terminal.limits]\ntimeout_seconds = 120\n[terminal.allowlist]\ncommands = [\"curl\", \"sh\"]\n[[terminal.rules]]\ncommand = \"sh\"\nallow_interpreter = true\n[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"localhost\"]\nallow_private = true\n",
    )
    .unwrap();
    p
}

fn curl_script(url: &str, format: &str, times: usize) -> String {
    format!("for i in $(seq {times}); do curl -s -o /dev/null -w '{format}\\n' {url}; done")
}

fn numbers(out: &str) -> Vec<f64> {
    out.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

fn p50_p99(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3);
    let port = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path());
    let cmd = tokio::process::Command::new(BIN).configure(|c| {
        c.arg("terminal").arg("--config").arg(&policy);
    });
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let big = format!("http://localhost:{port}/big");
    let small = format!("http://localhost:{port}/small");

    let direct = |script: String| async move {
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .env_remove("http_proxy")
            .env_remove("HTTP_PROXY")
            .output()
            .await
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let proxied = |script: String| {
        let client = &client;
        async move {
            let r = call(
                client,
                "run_command",
                json!({"command": ["sh", "-c", script]}),
            )
            .await;
            assert_eq!(r["code"], "OK", "{r}");
            r["detail"]["stdout"].as_str().unwrap().to_owned()
        }
    };

    println!("safe-mcp egress benchmark: {rounds} rounds of 100 MB each way, alternating\n");
    let (mut d_speed, mut p_speed) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let script = curl_script(&big, "%{speed_download}", 1);
        d_speed.extend(numbers(&direct(script.clone()).await));
        p_speed.extend(numbers(&proxied(script).await));
    }
    let mb = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2] / 1e6
    };
    let (d, p) = (mb(&d_speed), mb(&p_speed));
    println!(
        "100 MB download, median   direct {d:>8.0} MB/s   proxy {p:>8.0} MB/s   proxy/direct {:.2}",
        p / d
    );

    let script = curl_script(&small, "%{time_starttransfer}", SETUP_SAMPLES);
    let d_setup = numbers(&direct(script.clone()).await);
    let p_setup = numbers(&proxied(script).await);
    let (d50, d99) = p50_p99(d_setup.iter().map(|s| s * 1e3).collect());
    let (p50, p99) = p50_p99(p_setup.iter().map(|s| s * 1e3).collect());
    println!(
        "connection setup to first byte ({SETUP_SAMPLES} each)   direct p50 {d50:.3} ms p99 {d99:.3} ms   proxy p50 {p50:.3} ms p99 {p99:.3} ms"
    );
    client.cancel().await.unwrap();
}
