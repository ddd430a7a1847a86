//! Egress benchmark: `cargo bench -p safe-mcp --bench egress [-- ROUNDS]`.
//!
//! An HTTP server in this process on 127.0.0.1 serves 100 MB (and a 2-byte body); curl
//! fetches it through a CONNECT tunnel (`-p`, what HTTPS uses), alternating in one run:
//! - **unconfined**: curl started by this bench, no sandbox, no proxy;
//! - **direct**: curl run by `safe-mcp terminal` over a real MCP session with network mode
//!   open in the host view (the same sandbox, no proxy);
//! - **proxy**: curl run by a server with `[terminal.network] mode = "allowlist"` (enforce
//!   mode, private view), through the server's proxy.
//!
//! It prints the throughput of each (curl's own `speed_download`) and their ratio, and the
//! per-connection setup latency (curl's `time_starttransfer` for the 2-byte body: connect,
//! the proxy's judgement, resolution, its durable `open` record and the upstream connect)
//! as p50/p99 of 50 fetches each way; and what egress adds to every call: `run_command(echo)`
//! on a server with egress beside one without (the same policy otherwise), alternating
//! blocks of 50 calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::call;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// The three servers: egress on (private view), network open in the host view (curl
/// reaches loopback directly, in the same sandbox otherwise), and network off.
fn policy(dir: &Path, name: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("jail")).unwrap();
    let p = dir.join(format!("{name}.toml"));
    let network = match name {
        "egress" => {
            "[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"localhost\"]\nallow_private = true\n"
        }
        "open" => "[terminal.network]\nmode = \"open\"\n[terminal.sandbox]\nnamespaces = \"off\"\n",
        _ => "",
    };
    std::fs::write(
        &p,
        format!("audit_log = \"audit.jsonl\"\n[terminal]\njail_root = \"jail\"\npath = [\"/usr/bin\", \"/bin\"]\n[terminal.limits]\ntimeout_seconds = 120\n[terminal.allowlist]\ncommands = [\"curl\", \"sh\", \"echo\", \"seq\"]\n[[terminal.rules]]\ncommand = \"sh\"\nallow_interpreter = true\n{network}"),
    )
    .unwrap();
    p
}

fn curl_script(url: &str, format: &str, times: usize) -> String {
    format!("for i in $(seq {times}); do curl -s -p -o /dev/null -w '{format}\\n' {url}; done")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = common::count_arg(3);
    let port = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let start = |policy: std::path::PathBuf| async move { common::start_terminal(&policy).await };
    let egress = start(policy(dir.path(), "egress")).await;
    let open = start(policy(dir.path(), "open")).await;
    let plain = start(policy(dir.path(), "off")).await;
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
    let sandboxed = |client: &'static str, script: String| {
        let session = if client == "open" { &open } else { &egress };
        async move {
            let r = call(
                session,
                "run_command",
                json!({"command": ["sh", "-c", script]}),
            )
            .await;
            assert_eq!(r["code"], "OK", "{r}");
            r["detail"]["stdout"].as_str().unwrap().to_owned()
        }
    };

    println!("safe-mcp egress benchmark: {rounds} rounds of 100 MB each way, alternating\n");
    let (mut bare, mut same_sandbox, mut proxied) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let script = curl_script(&big, "%{speed_download}", 1);
        bare.extend(common::numbers(&direct(script.clone()).await));
        same_sandbox.extend(common::numbers(&sandboxed("open", script.clone()).await));
        proxied.extend(common::numbers(&sandboxed("egress", script).await));
    }
    let mb = common::median_mb;
    let (b, d, p) = (mb(&bare), mb(&same_sandbox), mb(&proxied));
    println!(
        "100 MB download, median MB/s   curl unconfined {b:.0}   confined, direct (mode open, host view) {d:.0}   confined, through the proxy {p:.0}"
    );
    println!(
        "proxy / direct in the same sandbox {:.2}   proxy / unconfined curl {:.2}",
        p / d,
        p / b
    );

    let script = curl_script(&small, "%{time_starttransfer}", SETUP_SAMPLES);
    let d_setup = common::numbers(&sandboxed("open", script.clone()).await);
    let p_setup = common::numbers(&sandboxed("egress", script).await);
    let (d50, d99) = common::p50_p99(d_setup.iter().map(|s| s * 1e3).collect());
    let (p50, p99) = common::p50_p99(p_setup.iter().map(|s| s * 1e3).collect());
    println!(
        "connection setup to first byte ({SETUP_SAMPLES} each, confined)   direct p50 {d50:.3} ms p99 {d99:.3} ms   proxy p50 {p50:.3} ms p99 {p99:.3} ms"
    );

    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        for (c, samples) in [(&egress, &mut with), (&plain, &mut without)] {
            for _ in 0..50 {
                let t = std::time::Instant::now();
                let r = call(c, "run_command", json!({"command": "echo hi"})).await;
                assert_eq!(r["code"], "OK");
                samples.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let (w50, w99) = common::p50_p99(with);
    let (o50, o99) = common::p50_p99(without);
    println!(
        "run_command(echo hi), 200 each   egress on p50 {w50:.3} ms p99 {w99:.3} ms   off p50 {o50:.3} ms p99 {o99:.3} ms   ratio {:.2}",
        w50 / o50
    );
    egress.cancel().await.unwrap();
    open.cancel().await.unwrap();
    plain.cancel().await.unwrap();
}
