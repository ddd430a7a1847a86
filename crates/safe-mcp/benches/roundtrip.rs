//! Round-trip benchmark of the terminal server over one real stdio MCP session.
//!
//! `cargo bench -p safe-mcp --bench roundtrip [-- CALLS]` prints, in one run: the baseline
//! (spawning /bin/echo directly from Rust), `explain_command` and `run_command("echo hi")`
//! round trips with confinement on (enforce) and off, cold start until `initialize` is
//! answered, and the server's peak RSS. Percentiles, never a pass/fail threshold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::call;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::{Value, json};

const BUILT: &str = env!("CARGO_BIN_EXE_safe-mcp");

/// The server under test: this build, or another one named by `SAFE_MCP_BENCH_BIN` (to
/// compare two builds on the same machine in the same hour).
fn bin() -> String {
    std::env::var("SAFE_MCP_BENCH_BIN").unwrap_or_else(|_| BUILT.to_owned())
}

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

/// A policy allowing `echo` (and `profiles`), with `sandbox` lines in `[terminal.sandbox]`.
fn write_policy(dir: &Path, name: &str, profiles: &str, sandbox: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("jail")).unwrap();
    let policy = dir.join(format!("policy-{name}.toml"));
    std::fs::write(
        &policy,
        format!(
            "audit_log = \"audit-{name}.jsonl\"\n[terminal]\njail_root = \"jail\"\nprofiles = [{profiles}]\n[terminal.allowlist]\ncommands = [\"echo\"]\n[terminal.sandbox]\n{sandbox}\n"
        ),
    )
    .unwrap();
    policy
}

async fn connect(policy: &Path) -> (RunningService<RoleClient, ()>, u32) {
    let cmd = tokio::process::Command::new(bin()).configure(|c| {
        c.arg("terminal").arg("--config").arg(policy);
    });
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap();
    (().serve(transport).await.unwrap(), pid)
}

/// One timed call; panics unless the envelope is OK.
async fn timed_call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: &Value,
) -> Duration {
    let t = Instant::now();
    let r = call(client, tool, args.clone()).await;
    let elapsed = t.elapsed();
    assert_eq!(r["code"], "OK", "{r}");
    elapsed
}

/// One spawn of `/bin/echo hi` with its output captured, as a baseline; `fork_path` adds an
/// empty `pre_exec` hook, which makes std fork instead of using posix_spawn.
fn spawn_echo(fork_path: bool) -> Duration {
    use std::os::unix::process::CommandExt;
    let t = Instant::now();
    let mut cmd = std::process::Command::new("/bin/echo");
    cmd.arg("hi");
    if fork_path {
        // SAFETY: an empty hook; it only forces std's fork+exec path instead of posix_spawn.
        unsafe {
            cmd.pre_exec(|| Ok(()));
        }
    }
    let out = cmd.output().unwrap();
    let elapsed = t.elapsed();
    assert!(out.status.success());
    elapsed
}

/// One append of a record-sized line (the size of a run's attempt record) and its
/// `fdatasync`, on the disk the trail is on: what every run must wait for before it execs.
fn durable_append(file: &mut std::fs::File) -> Duration {
    use std::io::Write;
    let line = [b'x'; 480];
    let t = Instant::now();
    file.write_all(&line).unwrap();
    file.write_all(b"\n").unwrap();
    file.sync_data().unwrap();
    t.elapsed()
}

/// CPU seconds `pid` has used, with its reaped children (the commands it ran).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<f64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // After the name: state is not a number, so utime, stime, cutime, cstime are 10..=13.
    let ticks: f64 = fields.iter().skip(10).take(4).sum();
    // /proc counts in USER_HZ, which Linux fixes at 100 for every user-space ABI.
    ticks / 100.0
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

type Client = RunningService<RoleClient, ()>;

/// One stdio session per mode measured.
struct Clients {
    on: Client,
    host: Client,
    off: Client,
    no_list: Client,
    long_list: Client,
    exec_logged: Client,
    big_repo: Client,
}

impl Clients {
    async fn cancel(self) {
        for client in [
            self.on,
            self.host,
            self.off,
            self.no_list,
            self.long_list,
            self.exec_logged,
            self.big_repo,
        ] {
            client.cancel().await.unwrap();
        }
    }
}

/// The rows measured in rounds, in this order.
const ROWS: usize = 13;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = common::count_arg(1000);
    let dir = tempfile::tempdir().unwrap();
    let enforce = write_policy(dir.path(), "enforce", "", "");
    let host_view = write_policy(dir.path(), "host", "", "namespaces = \"off\"");
    let off_policy = write_policy(dir.path(), "off", "", "mode = \"off\"");
    // The exec allowlist's cost: the read paths executable instead (before issue 35), and a
    // list of 17 programs (the readonly profile), each a Landlock rule of its own per call.
    let exec_off = write_policy(dir.path(), "exec-off", "", "exec_allowlist = false");
    let many = write_policy(dir.path(), "many", "\"readonly\"", "");
    // The exec log: each exec told to a thread of the server.
    let logged = write_policy(
        dir.path(),
        "logged",
        "",
        "[terminal.audit]\nexec_log = true",
    );
    // Issue 48: the jail is a git repository of 10,000 files (500 directories, a nested
    // repository and a bare one among them): every call sweeps it for git directories.
    let big = tempfile::tempdir().unwrap();
    let big_policy = write_policy(big.path(), "big-repo", "", "");
    big_repository(&big.path().join("jail"), 10_000);
    println!("safe-mcp round-trip benchmark: {n} calls per row, one stdio session per mode\n");

    let (on, pid) = connect(&enforce).await;
    let clients = Clients {
        on,
        host: connect(&host_view).await.0,
        off: connect(&off_policy).await.0,
        no_list: connect(&exec_off).await.0,
        long_list: connect(&many).await.0,
        exec_logged: connect(&logged).await.0,
        big_repo: connect(&big_policy).await.0,
    };
    let rows = measure_rows(&clients, n, dir.path()).await;
    // An agent's calls come with pauses between them: the first call after an idle spell
    // is what a user waits for most often.
    // The machine itself is slower after a pause (caches, idle vCPUs), so the bare spawn is
    // measured the same way beside it.
    let run = json!({"command": "echo hi"});
    let (mut idle, mut idle_base) = (Vec::new(), Vec::new());
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        idle.push(timed_call(&clients.on, "run_command", &run).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
        idle_base.push(spawn_echo(false));
    }
    let burst = burst(&clients.on, pid, n).await;
    clients.cancel().await;
    let p50 = print_rows(rows, idle_base, idle);

    let mut cold = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let (client, _) = connect(&enforce).await;
        cold.push(t.elapsed());
        client.cancel().await.unwrap();
    }
    row("cold start: spawn until initialize answered", cold);
    print_ratios(&p50, &burst, n);
}

/// Each row's samples: ten rounds of back-to-back blocks, one block per row per round, so
/// that every row sees the same stretches of this noisy machine and the ratios compare
/// like with like, and each call still follows one of its own kind, as in a session that
/// is in use.
async fn measure_rows(c: &Clients, n: usize, dir: &Path) -> [Vec<Duration>; ROWS] {
    let explain = json!({"command": "echo hi"});
    let run = json!({"command": "echo hi"});
    // The file tools beside run_command: an edit that flips one line back and forth (a
    // durable attempt record, a read, an atomic write), and a read.
    let lines: String = (0..40).map(|i| format!("line {i}\n")).collect();
    let made = call(
        &c.on,
        "write_file",
        json!({"path": "bench.txt", "content": format!("{lines}flag = a\n")}),
    )
    .await;
    assert_eq!(made["code"], "OK", "{made}");
    let flips = [
        json!({"path": "bench.txt", "edits": [{"old_text": "flag = a", "new_text": "flag = b"}]}),
        json!({"path": "bench.txt", "edits": [{"old_text": "flag = b", "new_text": "flag = a"}]}),
    ];
    let read = json!({"path": "bench.txt"});
    let runs = [
        (3, &c.on),
        (4, &c.off),
        (5, &c.host),
        (9, &c.no_list),
        (10, &c.long_list),
        (11, &c.exec_logged),
        (12, &c.big_repo),
    ];
    for _ in 0..20 {
        timed_call(&c.on, "explain_command", &explain).await; // warm-up
        for (_, client) in runs {
            timed_call(client, "run_command", &run).await;
        }
    }
    let mut rows: [Vec<Duration>; ROWS] = Default::default();
    let mut trail = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("floor.jsonl"))
        .unwrap();
    let mut flipped = 0usize;
    let rounds = 10;
    for round in 0..rounds {
        let block = n / rounds + usize::from(round < n % rounds);
        for (at, row) in rows.iter_mut().enumerate() {
            for _ in 0..block {
                let took = match at {
                    0 => spawn_echo(false),
                    1 => spawn_echo(true),
                    2 => timed_call(&c.on, "explain_command", &explain).await,
                    6 => durable_append(&mut trail),
                    7 => {
                        let flip = &flips[flipped % 2];
                        flipped += 1;
                        timed_call(&c.on, "edit_file", flip).await
                    }
                    8 => timed_call(&c.on, "read_file", &read).await,
                    _ => {
                        let client = runs.iter().find(|(k, _)| *k == at).map(|(_, c)| *c);
                        timed_call(client.unwrap_or(&c.on), "run_command", &run).await
                    }
                };
                row.push(took);
            }
        }
    }
    rows
}

/// What 16 calls in flight on one session do: calls per second, and what one call costs in
/// CPU (server and command), which with this machine's cores bounds any client's
/// throughput; and the server's peak RSS after.
struct Burst {
    calls: usize,
    wall: f64,
    cpu_per_call: f64,
    rss_kib: u64,
}

async fn burst(on: &Client, pid: u32, n: usize) -> Burst {
    let run = json!({"command": "echo hi"});
    let calls = n.max(160);
    let cpu_before = cpu_seconds(pid);
    let t = Instant::now();
    {
        use futures_util::StreamExt;
        let results: Vec<Value> = futures_util::stream::iter(0..calls)
            .map(|_| call(on, "run_command", run.clone()))
            .buffer_unordered(16)
            .collect()
            .await;
        assert!(results.iter().all(|r| r["code"] == "OK"));
    }
    let wall = t.elapsed().as_secs_f64();
    Burst {
        calls,
        wall,
        cpu_per_call: (cpu_seconds(pid) - cpu_before) / calls as f64,
        rss_kib: peak_rss_kib(pid),
    }
}

/// The p50s the ratios are made of.
struct P50 {
    base: f64,
    explain: f64,
    fsync: f64,
    on: f64,
    host: f64,
    off: f64,
    no_list: f64,
    long_list: f64,
    logged: f64,
    edit: f64,
}

/// Prints every row; the p50s the ratios need.
fn print_rows(rows: [Vec<Duration>; ROWS], idle_base: Vec<Duration>, idle: Vec<Duration>) -> P50 {
    let [
        base,
        forked,
        explained,
        run_on,
        run_off,
        run_host,
        fsynced,
        edited,
        read_rows,
        run_no_list,
        run_long_list,
        run_logged,
        run_big_repo,
    ] = rows;
    let base = row("baseline: spawn /bin/echo from Rust", base);
    row("baseline: same, with a pre_exec hook (fork)", forked);
    let explain = row("explain_command(\"echo hi\")", explained);
    let fsync = row("baseline: append a record-sized line + fdatasync", fsynced);
    let on = row("run_command(\"echo hi\"), enforce, private view", run_on);
    let host = row("run_command(\"echo hi\"), enforce, host view", run_host);
    let off = row("run_command(\"echo hi\"), sandbox off", run_off);
    let no_list = row(
        "run_command(\"echo hi\"), enforce, exec allowlist off",
        run_no_list,
    );
    row(
        "run_command(\"echo hi\"), enforce, jail a 10,000-file git repo",
        run_big_repo,
    );
    let long_list = row(
        "run_command(\"echo hi\"), enforce, 17 programs allowlisted",
        run_long_list,
    );
    let logged = row("run_command(\"echo hi\"), enforce, exec log on", run_logged);
    let edit = row(
        "edit_file (one line of 41, attempt durable, atomic write)",
        edited,
    );
    row("read_file (41 lines)", read_rows);
    row("baseline: spawn after 100 ms idle", idle_base);
    row("run_command, enforce, after 100 ms idle", idle);
    P50 {
        base,
        explain,
        fsync,
        on,
        host,
        off,
        no_list,
        long_list,
        logged,
        edit,
    }
}

/// The ratios, the floor, the burst's throughput and the server's memory.
fn print_ratios(p: &P50, burst: &Burst, n: usize) {
    println!();
    println!(
        "edit_file p50 / run_command (enforce) p50: {:.2}x",
        p.edit / p.on
    );
    println!("run (enforce) p50 / bare spawn p50: {:.2}x", p.on / p.base);
    // The floor a durable attempt record allows: a bare spawn, the record made durable, and
    // one MCP round trip (explain is one without a spawn or a record).
    let floor = p.base + p.fsync + p.explain;
    println!(
        "floor (bare spawn + fdatasync'd append + explain round trip, p50): {floor:.3} ms; run (enforce) p50 / floor: {:.2}x",
        p.on / floor
    );
    println!(
        "confinement adds (enforce - off, p50): {:.3} ms",
        p.on - p.off
    );
    println!("private view / host view (p50): {:.2}x", p.on / p.host);
    println!(
        "exec allowlist adds (p50, 1 program / 17 programs, against the list off): {:.3} ms / {:.3} ms",
        p.on - p.no_list,
        p.long_list - p.no_list
    );
    println!(
        "exec log adds (p50, against the same policy without it): {:.3} ms",
        p.logged - p.on
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    println!(
        "16 in flight, enforce: {:.0} calls/s; CPU per call (server + command) {:.2} ms, so {cores} cores allow at most {:.0} calls/s",
        burst.calls as f64 / burst.wall,
        burst.cpu_per_call * 1e3,
        cores / burst.cpu_per_call
    );
    println!(
        "server peak RSS (VmHWM) after {} calls: {:.1} MiB",
        2 * n + 80 + burst.calls,
        burst.rss_kib as f64 / 1024.0
    );
}

/// Makes `jail` a git repository (the operator's: made before the server starts) of `files`
/// files in 500 directories two deep, with a nested repository and a bare one.
fn big_repository(jail: &Path, files: usize) {
    let git = |args: &[&str], dir: &Path| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"], jail);
    for i in 0..files {
        let dir = jail.join(format!("d{}/e{}", i % 50, i % 500));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), "x\n").unwrap();
    }
    std::fs::create_dir_all(jail.join("vendor/nested")).unwrap();
    git(&["init", "-q"], &jail.join("vendor/nested"));
    git(&["init", "-q", "--bare", "remote.git"], jail);
}
