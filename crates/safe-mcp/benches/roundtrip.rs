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
    let (host, _) = connect(&host_view).await;
    let (off, _) = connect(&off_policy).await;
    let (no_list, _) = connect(&exec_off).await;
    let (long_list, _) = connect(&many).await;
    let (exec_logged, _) = connect(&logged).await;
    let (big_repo, _) = connect(&big_policy).await;
    let explain = json!({"command": "echo hi"});
    let run = json!({"command": "echo hi"});
    // The file tools beside run_command: an edit that flips one line back and forth (a
    // durable attempt record, a read, an atomic write), and a read.
    let lines: String = (0..40).map(|i| format!("line {i}\n")).collect();
    let made = call(
        &on,
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
    let mut flipped = 0usize;
    for _ in 0..20 {
        timed_call(&on, "explain_command", &explain).await; // warm-up
        timed_call(&on, "run_command", &run).await;
        timed_call(&host, "run_command", &run).await;
        timed_call(&off, "run_command", &run).await;
        timed_call(&no_list, "run_command", &run).await;
        timed_call(&long_list, "run_command", &run).await;
        timed_call(&exec_logged, "run_command", &run).await;
        timed_call(&big_repo, "run_command", &run).await;
    }
    // Ten rounds of back-to-back blocks, one block per row per round: every row sees the
    // same stretches of this noisy machine, so the ratios compare like with like, and each
    // call still follows one of its own kind, as in a session that is in use.
    let mut rows: [Vec<Duration>; 13] = Default::default();
    let mut trail = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("floor.jsonl"))
        .unwrap();
    let rounds = 10;
    for round in 0..rounds {
        let block = n / rounds + usize::from(round < n % rounds);
        for _ in 0..block {
            rows[0].push(spawn_echo(false));
        }
        for _ in 0..block {
            rows[1].push(spawn_echo(true));
        }
        for _ in 0..block {
            rows[2].push(timed_call(&on, "explain_command", &explain).await);
        }
        for _ in 0..block {
            rows[3].push(timed_call(&on, "run_command", &run).await);
        }
        for _ in 0..block {
            rows[4].push(timed_call(&off, "run_command", &run).await);
        }
        for _ in 0..block {
            rows[5].push(timed_call(&host, "run_command", &run).await);
        }
        for _ in 0..block {
            rows[6].push(durable_append(&mut trail));
        }
        for _ in 0..block {
            rows[7].push(timed_call(&on, "edit_file", &flips[flipped % 2]).await);
            flipped += 1;
        }
        for _ in 0..block {
            rows[8].push(timed_call(&on, "read_file", &read).await);
        }
        for _ in 0..block {
            rows[9].push(timed_call(&no_list, "run_command", &run).await);
        }
        for _ in 0..block {
            rows[10].push(timed_call(&long_list, "run_command", &run).await);
        }
        for _ in 0..block {
            rows[11].push(timed_call(&exec_logged, "run_command", &run).await);
        }
        for _ in 0..block {
            rows[12].push(timed_call(&big_repo, "run_command", &run).await);
        }
    }
    // An agent's calls come with pauses between them: the first call after an idle spell
    // is what a user waits for most often.
    // The machine itself is slower after a pause (caches, idle vCPUs), so the bare spawn is
    // measured the same way beside it.
    let (mut idle, mut idle_base) = (Vec::new(), Vec::new());
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        idle.push(timed_call(&on, "run_command", &run).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
        idle_base.push(spawn_echo(false));
    }
    // 16 calls in flight on one session: calls per second, and what one call costs in CPU
    // (server and command), which with this machine's cores bounds any client's throughput.
    let burst = n.max(160);
    let cpu_before = cpu_seconds(pid);
    let t = Instant::now();
    {
        use futures_util::StreamExt;
        let results: Vec<Value> = futures_util::stream::iter(0..burst)
            .map(|_| call(&on, "run_command", run.clone()))
            .buffer_unordered(16)
            .collect()
            .await;
        assert!(results.iter().all(|r| r["code"] == "OK"));
    }
    let wall = t.elapsed().as_secs_f64();
    let cpu_per_call = (cpu_seconds(pid) - cpu_before) / burst as f64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let rss = peak_rss_kib(pid);
    on.cancel().await.unwrap();
    host.cancel().await.unwrap();
    off.cancel().await.unwrap();
    no_list.cancel().await.unwrap();
    long_list.cancel().await.unwrap();
    exec_logged.cancel().await.unwrap();
    big_repo.cancel().await.unwrap();
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
    let base_p50 = row("baseline: spawn /bin/echo from Rust", base);
    row("baseline: same, with a pre_exec hook (fork)", forked);
    let explain_p50 = row("explain_command(\"echo hi\")", explained);
    let fsync_p50 = row("baseline: append a record-sized line + fdatasync", fsynced);
    let on_p50 = row("run_command(\"echo hi\"), enforce, private view", run_on);
    let host_p50 = row("run_command(\"echo hi\"), enforce, host view", run_host);
    let off_p50 = row("run_command(\"echo hi\"), sandbox off", run_off);
    let no_list_p50 = row(
        "run_command(\"echo hi\"), enforce, exec allowlist off",
        run_no_list,
    );
    row(
        "run_command(\"echo hi\"), enforce, jail a 10,000-file git repo",
        run_big_repo,
    );
    let long_list_p50 = row(
        "run_command(\"echo hi\"), enforce, 17 programs allowlisted",
        run_long_list,
    );
    let logged_p50 = row("run_command(\"echo hi\"), enforce, exec log on", run_logged);
    let edit_p50 = row(
        "edit_file (one line of 41, attempt durable, atomic write)",
        edited,
    );
    row("read_file (41 lines)", read_rows);
    row("baseline: spawn after 100 ms idle", idle_base);
    row("run_command, enforce, after 100 ms idle", idle);

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
        "edit_file p50 / run_command (enforce) p50: {:.2}x",
        edit_p50 / on_p50
    );
    println!(
        "run (enforce) p50 / bare spawn p50: {:.2}x",
        on_p50 / base_p50
    );
    // The floor a durable attempt record allows: a bare spawn, the record made durable, and
    // one MCP round trip (explain is one without a spawn or a record).
    let floor = base_p50 + fsync_p50 + explain_p50;
    println!(
        "floor (bare spawn + fdatasync'd append + explain round trip, p50): {floor:.3} ms; run (enforce) p50 / floor: {:.2}x",
        on_p50 / floor
    );
    println!(
        "confinement adds (enforce - off, p50): {:.3} ms",
        on_p50 - off_p50
    );
    println!("private view / host view (p50): {:.2}x", on_p50 / host_p50);
    println!(
        "exec allowlist adds (p50, 1 program / 17 programs, against the list off): {:.3} ms / {:.3} ms",
        on_p50 - no_list_p50,
        long_list_p50 - no_list_p50
    );
    println!(
        "exec log adds (p50, against the same policy without it): {:.3} ms",
        logged_p50 - on_p50
    );
    println!(
        "16 in flight, enforce: {:.0} calls/s; CPU per call (server + command) {:.2} ms, so {cores} cores allow at most {:.0} calls/s",
        burst as f64 / wall,
        cpu_per_call * 1e3,
        cores / cpu_per_call
    );
    println!(
        "server peak RSS (VmHWM) after {} calls: {:.1} MiB",
        2 * n + 80 + burst,
        rss as f64 / 1024.0
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
