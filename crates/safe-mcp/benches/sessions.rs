//! Process-session benchmark: `cargo bench -p safe-mcp --bench sessions [-- N]`.
//!
//! Over one real stdio MCP session with the rmcp client, enforce mode, private view:
//! - start_process of `echo hi` until its output is read (start, then a waiting read);
//! - read_process_output with nothing new (`wait_seconds` 0) of a quiet session;
//! - 8 sessions streaming lines at once, read round-robin for 3 seconds: bytes per second
//!   that reached the reader, and how many were dropped;
//! - memory per idle session (30 of `sleep`): what the anonymous memory of the server and
//!   the sessions' processes grows by, and what the machine's `MemAvailable` drops by, for
//!   docs/FLEET.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::call;
use rmcp::ServiceExt;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_safe-mcp");

fn p50_p99(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at =
        |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

fn policy(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("jail")).unwrap();
    let p = dir.join("policy.toml");
    std::fs::write(
        &p,
        "audit_log = \"audit.jsonl\"\n[terminal]\njail_root = \"jail\"\n[terminal.allowlist]\ncommands = [\"echo\", \"sleep\", \"sh\"]\n[[terminal.rules]]\ncommand = \"sh\"\nallow_interpreter = true\n[terminal.sessions]\nmax_sessions = 40\n",
    )
    .unwrap();
    p
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = common::count_arg(200);
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path());
    let cmd = tokio::process::Command::new(BIN).configure(|c| {
        c.arg("terminal").arg("--config").arg(&policy);
    });
    let transport = TokioChildProcess::new(cmd).unwrap();
    let server = transport.id().unwrap();
    let client = ().serve(transport).await.unwrap();
    println!("safe-mcp process-session benchmark: {n} samples per row\n");

    let mut first = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = call(&client, "start_process", json!({"command": "echo hi"})).await;
        let handle = r["detail"]["handle"].as_str().unwrap().to_owned();
        loop {
            let r = call(
                &client,
                "read_process_output",
                json!({"handle": handle, "wait_seconds": 5}),
            )
            .await;
            if r["detail"]["stdout"] == "hi\n" || r["detail"]["running"] == false {
                break;
            }
        }
        first.push(t.elapsed());
        let _ = call(&client, "read_process_output", json!({"handle": handle})).await;
    }
    let (a, b) = p50_p99(first);
    println!(
        "{:<52} p50 {a:>8.3} ms   p99 {b:>8.3} ms",
        "start_process(echo hi) until its output is read"
    );

    let quiet = call(&client, "start_process", json!({"command": "sleep 600"})).await;
    let handle = quiet["detail"]["handle"].as_str().unwrap().to_owned();
    let mut reads = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let _ = call(&client, "read_process_output", json!({"handle": handle})).await;
        reads.push(t.elapsed());
    }
    let (a, b) = p50_p99(reads);
    println!(
        "{:<52} p50 {a:>8.3} ms   p99 {b:>8.3} ms",
        "read_process_output, nothing new"
    );
    let _ = call(&client, "stop_process", json!({"handle": handle})).await;

    // Memory per idle session: anonymous memory (the server's and its descendants', which
    // share pages copied on write, so summed), and what the machine gives up.
    const IDLE: usize = 30;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (anon_before, free_before) = (anon_kib(server) + tree_anon_kib(server), available_kib());
    let mut idle = Vec::new();
    for _ in 0..IDLE {
        let r = call(&client, "start_process", json!({"command": "sleep 600"})).await;
        idle.push(r["detail"]["handle"].as_str().unwrap().to_owned());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (anon_after, free_after) = (anon_kib(server) + tree_anon_kib(server), available_kib());
    let per = |before: u64, after: u64| (after as f64 - before as f64) / IDLE as f64;
    println!(
        "memory per idle session ({IDLE} of sleep): anonymous (server and session processes) {:+.0} KiB; MemAvailable {:+.0} KiB",
        per(anon_before, anon_after),
        -per(free_after, free_before)
    );
    for h in &idle {
        let _ = call(&client, "stop_process", json!({"handle": h})).await;
    }

    let mut handles = Vec::new();
    for i in 0..8 {
        let script =
            format!("while :; do echo stream {i} 0123456789012345678901234567890123456789; done");
        let r = call(
            &client,
            "start_process",
            json!({"command": ["sh", "-c", script]}),
        )
        .await;
        handles.push(r["detail"]["handle"].as_str().unwrap().to_owned());
    }
    let (mut bytes, mut dropped, mut calls) = (0usize, 0u64, 0usize);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        for h in &handles {
            let r = call(&client, "read_process_output", json!({"handle": h})).await;
            bytes += r["detail"]["stdout"].as_str().unwrap().len();
            dropped = dropped.max(r["detail"]["dropped_bytes"].as_u64().unwrap_or(0));
            calls += 1;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "8 sessions streaming, read round-robin for {secs:.1} s: {:.1} MB/s read, {:.0} reads/s, largest drop count {dropped} bytes",
        bytes as f64 / secs / 1e6,
        calls as f64 / secs
    );
    for h in &handles {
        let _ = call(&client, "stop_process", json!({"handle": h})).await;
    }

    client.cancel().await.unwrap();
}

/// The KiB of the first line of `file` that starts with `field` (0 when there is none).
fn kib_in(file: &str, field: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The machine's `MemAvailable`, in KiB.
fn available_kib() -> u64 {
    kib_in("/proc/meminfo", "MemAvailable:")
}

/// The anonymous memory of `pid` (`Pss_Anon`: its heap and stacks, shared pages divided
/// among their sharers), in KiB; 0 once it is gone. The binary's text is left out: it is
/// the page cache's, one copy for every process that maps it, whatever smaps attributes.
fn anon_kib(pid: u32) -> u64 {
    kib_in(&format!("/proc/{pid}/smaps_rollup"), "Pss_Anon:")
}

/// The anonymous memory of every descendant of `root` (not `root` itself), in KiB.
fn tree_anon_kib(root: u32) -> u64 {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = stat.rsplit_once(')')?.1;
        after.split_whitespace().nth(1)?.parse().ok()
    };
    let pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.into_iter()
        .filter(|&pid| {
            let mut at = pid;
            while let Some(p) = parent_of(at) {
                if p == root {
                    return true;
                }
                if p <= 1 {
                    return false;
                }
                at = p;
            }
            false
        })
        .map(anon_kib)
        .sum()
}
