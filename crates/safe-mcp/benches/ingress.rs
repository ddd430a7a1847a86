//! Ingress benchmark (issue 33): `cargo bench -p safe-mcp --bench ingress [-- ROUNDS]`.
//!
//! One small Python server (`/big`: 100 MB of zeroes; anything else: a 2-byte body) runs two
//! ways, side by side in one run:
//! - **unconfined**: started by this bench on the host's loopback, curl fetching it directly;
//! - **exposed**: started by `safe-mcp terminal` over a real MCP session as a process
//!   session in the private view (`start_process` with `expose_port`), curl fetching it from
//!   the host through the exposed port (the server's relay, a durable `ingress` record per
//!   connection).
//!
//! It prints the 100 MB throughput of each (curl's `speed_download`), connection setup to
//! first byte for the 2-byte body (curl's `time_starttransfer`, p50/p99 of 50), and start to
//! first byte: from asking for the server until a first answer arrives through its port
//! (p50/p99 of 10 starts each way). The egress bench (`--bench egress`) gives the proxy's
//! figures for the other direction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::call;
use serde_json::json;

const SERVER: &str = r#"
import socket, sys, threading
port = int(sys.argv[1])
chunk = bytes(1 << 20)
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        got = c.recv(4096)
        if not got:
            c.close(); return
        head += got
    if head.startswith(b"GET /big"):
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (100 << 20))
        for _ in range(100):
            c.sendall(chunk)
    else:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(128)
print("up", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

const STARTS: usize = 10;
const SETUP_SAMPLES: usize = 50;

fn curl(url: &str, format: &str, times: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for _ in 0..times {
        let o = std::process::Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", format, url])
            .output()
            .unwrap();
        out.extend(
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|w| w.parse::<f64>().ok()),
        );
    }
    out
}

/// Waits until `address` answers the 2-byte request; true when it did within 20 s.
fn first_byte(address: &str) -> bool {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut s) = std::net::TcpStream::connect(address) {
            let _ = s.write_all(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n");
            let mut b = [0u8; 1];
            if matches!(s.read(&mut b), Ok(1)) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// Start to first byte, alternating: an unconfined server on the host, an exposed one in
/// a session; in milliseconds.
async fn starts(
    session: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    script: &std::path::Path,
) -> (Vec<f64>, Vec<f64>) {
    let (mut bare_start, mut exposed_start) = (Vec::new(), Vec::new());
    for i in 0..STARTS {
        let port = 18900 + i as u16;
        let t = Instant::now();
        let mut child = std::process::Command::new("/usr/bin/python3")
            .arg(script)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let address = format!("127.0.0.1:{port}");
        assert!(
            tokio::task::spawn_blocking(move || first_byte(&address))
                .await
                .unwrap()
        );
        bare_start.push(t.elapsed().as_secs_f64() * 1e3);
        child.kill().unwrap();
        child.wait().unwrap();

        let t = Instant::now();
        let r = call(
            session,
            "start_process",
            json!({"command": ["python3", "server.py", "8000"], "expose_port": 8000}),
        )
        .await;
        assert_eq!(r["code"], "OK", "{r}");
        let address = r["detail"]["exposed"]["address"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            tokio::task::spawn_blocking(move || first_byte(&address))
                .await
                .unwrap()
        );
        exposed_start.push(t.elapsed().as_secs_f64() * 1e3);
        call(
            session,
            "stop_process",
            json!({"handle": r["detail"]["handle"]}),
        )
        .await;
    }
    (bare_start, exposed_start)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = common::count_arg(3);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("jail")).unwrap();
    std::fs::write(dir.path().join("jail/server.py"), SERVER).unwrap();
    let policy = dir.path().join("ingress.toml");
    std::fs::write(
        &policy,
        "audit_log = \"audit.jsonl\"\n[terminal]\njail_root = \"jail\"\npath = [\"/usr/bin\", \"/bin\"]\n[terminal.allowlist]\ncommands = [\"python3\"]\n[[terminal.rules]]\ncommand = \"python3\"\nallow_interpreter = true\n[terminal.sessions]\nmax_sessions = 4\n",
    )
    .unwrap();
    let session = common::start_terminal(&policy).await;
    let script = dir.path().join("jail/server.py");

    let (bare_start, exposed_start) = starts(&session, &script).await;

    // Throughput and per-connection setup, against one long-lived server each way.
    let mut bare = std::process::Command::new("/usr/bin/python3")
        .arg(&script)
        .arg("18999")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        tokio::task::spawn_blocking(|| first_byte("127.0.0.1:18999"))
            .await
            .unwrap()
    );
    let r = call(
        &session,
        "start_process",
        json!({"command": ["python3", "server.py", "8000"], "expose_port": 8000}),
    )
    .await;
    let exposed = r["detail"]["exposed"]["address"]
        .as_str()
        .unwrap()
        .to_owned();
    let probe = exposed.clone();
    assert!(
        tokio::task::spawn_blocking(move || first_byte(&probe))
            .await
            .unwrap()
    );

    println!("safe-mcp ingress benchmark: {rounds} rounds of 100 MB each way, alternating\n");
    let (mut direct, mut relayed) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        direct.extend(curl("http://127.0.0.1:18999/big", "%{speed_download}", 1));
        relayed.extend(curl(
            &format!("http://{exposed}/big"),
            "%{speed_download}",
            1,
        ));
    }
    let (d, e) = (common::median_mb(&direct), common::median_mb(&relayed));
    println!(
        "100 MB download, median MB/s   unconfined server, direct {d:.0}   session in the view, through the exposed port {e:.0}   ratio {:.2}",
        e / d
    );
    let ms = |v: Vec<f64>| common::p50_p99(v.into_iter().map(|s| s * 1e3).collect());
    let (d50, d99) = ms(curl(
        "http://127.0.0.1:18999/small",
        "%{time_starttransfer}\n",
        SETUP_SAMPLES,
    ));
    let (e50, e99) = ms(curl(
        &format!("http://{exposed}/small"),
        "%{time_starttransfer}\n",
        SETUP_SAMPLES,
    ));
    println!(
        "connection setup to first byte ({SETUP_SAMPLES} each)   direct p50 {d50:.3} ms p99 {d99:.3} ms   exposed p50 {e50:.3} ms p99 {e99:.3} ms"
    );
    let (b50, b99) = common::p50_p99(bare_start);
    let (x50, x99) = common::p50_p99(exposed_start);
    println!(
        "start to first byte ({STARTS} each)   unconfined python3 p50 {b50:.1} ms p99 {b99:.1} ms   start_process + expose_port p50 {x50:.1} ms p99 {x99:.1} ms"
    );
    bare.kill().unwrap();
    let _ = bare.wait();
    call(
        &session,
        "stop_process",
        json!({"handle": r["detail"]["handle"]}),
    )
    .await;
    session.cancel().await.unwrap();
}
