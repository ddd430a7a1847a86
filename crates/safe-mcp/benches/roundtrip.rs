//! Round-trip benchmark of the terminal server over one real stdio MCP session.
//!
//! `cargo bench -p safe-mcp --bench roundtrip [-- CALLS]` prints, in one run: the baseline
//! (spawning /bin/echo directly from Rust), `explain_command` and `run_command("echo hi")`
//! round trips with confinement on (enforce) and off, cold start until `initialize` is
//! answered, and the server's peak RSS. Percentiles, never a pass/fail threshold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_safe-mcp");

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let at =
        |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e3;
    (at(0.50), at(0.99), at(1.0))
}

fn row(name: &str, samples: Vec<Duration>) -> f64 {
    let n = samples.len();
    let (p50, p99, max) = percentiles(samples);
    println!("{name:<44} n={n:<5} p50 {p50:>8.3} ms   p99 {p99:>8.3} ms   max {max:>8.3} ms");
    p50
}

fn write_policy(dir: &Path, mode: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("jail")).unwrap();
    let policy = dir.join(format!("policy-{mode}.toml"));
    std::fs::write(
        &policy,
        format!(
            "audit_log = \"audit-{mode}.jsonl\"\n[terminal]\njail_root = \"jail\"\n[terminal.allowlist]\ncommands = [\"echo\"]\n[terminal.sandbox]\nmode = \"{mode}\"\n"
        ),
    )
    .unwrap();
    policy
}

async fn connect(policy: &Path) -> (RunningService<RoleClient, ()>, u32) {
    let cmd = tokio::process::Command::new(BIN).configure(|c| {
        c.arg("terminal").arg("--config").arg(policy);
    });
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap();
    (().serve(transport).await.unwrap(), pid)
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &'static str, args: Value) -> Value {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let r = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap();
    r.structured_content.unwrap()
}

async fn timed(
    client: &RunningService<RoleClient, ()>,
    n: usize,
    tool: &'static str,
    args: Value,
) -> Vec<Duration> {
    for _ in 0..20 {
        call(client, tool, args.clone()).await; // warm-up
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = call(client, tool, args.clone()).await;
        samples.push(t.elapsed());
        assert_eq!(r["code"], "OK", "{r}");
    }
    samples
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir().unwrap();
    let enforce = write_policy(dir.path(), "enforce");
    let off = write_policy(dir.path(), "off");
    println!("safe-mcp round-trip benchmark: {n} calls per row, one stdio session per mode\n");

    let mut base = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let out = std::process::Command::new("/bin/echo")
            .arg("hi")
            .output()
            .unwrap();
        base.push(t.elapsed());
        assert!(out.status.success());
    }
    let base_p50 = row("baseline: spawn /bin/echo from Rust", base);
    let mut forked = Vec::with_capacity(n);
    for _ in 0..n {
        use std::os::unix::process::CommandExt;
        let t = Instant::now();
        let mut cmd = std::process::Command::new("/bin/echo");
        cmd.arg("hi");
        // SAFETY: an empty hook; it only forces std's fork+exec path instead of posix_spawn.
        unsafe {
            cmd.pre_exec(|| Ok(()));
        }
        let out = cmd.output().unwrap();
        forked.push(t.elapsed());
        assert!(out.status.success());
    }
    row("baseline: same, with a pre_exec hook (fork)", forked);

    let (client, pid) = connect(&enforce).await;
    row(
        "explain_command(\"echo hi\")",
        timed(&client, n, "explain_command", json!({"command": "echo hi"})).await,
    );
    let on_p50 = row(
        "run_command(\"echo hi\"), sandbox enforce",
        timed(&client, n, "run_command", json!({"command": "echo hi"})).await,
    );
    let rss = peak_rss_kib(pid);
    client.cancel().await.unwrap();

    let (client, _) = connect(&off).await;
    let off_p50 = row(
        "run_command(\"echo hi\"), sandbox off",
        timed(&client, n, "run_command", json!({"command": "echo hi"})).await,
    );
    client.cancel().await.unwrap();

    let mut cold = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let (client, _) = connect(&enforce).await;
        cold.push(t.elapsed());
        client.cancel().await.unwrap();
    }
    row("cold start: spawn until initialize answered", cold);

    println!();
    println!(
        "run (enforce) p50 / bare spawn p50: {:.2}x",
        on_p50 / base_p50
    );
    println!(
        "confinement adds (enforce - off, p50): {:.3} ms",
        on_p50 - off_p50
    );
    println!(
        "server peak RSS (VmHWM) after {} calls: {:.1} MiB",
        2 * n + 40,
        rss as f64 / 1024.0
    );
}
