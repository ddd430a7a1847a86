//! Kernel confinement seen from outside: what a command cannot do even when the policy's
//! argument checks are bypassed (here by allowlisting `sh`, which opens paths on its own).

use std::io::Read;
use std::time::Duration;

use serde_json::{Value, json};

use super::builders::stderr;
use super::support::{
    SETPRIV_NEEDS_ROOT, Sandbox, Session, eventually, live_processes_with, pids_cgroup_or_skip,
    root_or_skip, stderr_of, stdout_of,
};

/// The fork loop got at least one refusal, and none of its sleepers outlived the call.
async fn assert_fork_loop_stopped(r: &serde_json::Value, sleeper: &str) {
    let stderr = stderr(r).to_lowercase();
    assert!(
        stderr.contains("fork") || stderr.contains("resource temporarily unavailable"),
        "the loop was never refused a process: {r}"
    );
    assert!(eventually(5, || live_processes_with(sleeper).is_empty()).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_cannot_read_or_write_outside_the_jail() {
    let sb = Sandbox::new("");
    // ln must start, for Landlock and the view to be what stop the link's escape.
    sb.add_helpers(&["ln"]);
    let outside = sb.base().join("outside-secret.txt");
    std::fs::write(&outside, "top secret").unwrap();
    let s = sb.session().await;

    let r = s.sh(&format!("cat {}", outside.display())).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_ne!(r["detail"]["exit_code"], 0);
    // In the private view the file is not there at all; in the host view Landlock refuses.
    let described = s.call("describe_policy", json!({"verbose": true})).await;
    let refusal = if described["detail"]["confinement"]["view"]["view"] == "private" {
        "No such file or directory"
    } else {
        "Permission denied"
    };
    assert!(stderr_of(&r).contains(refusal), "{r}");
    assert!(!stdout_of(&r).contains("top secret"));

    // A symlink the command makes inside the jail does not help.
    let r = s
        .sh(&format!("ln -s {} link && cat link", outside.display()))
        .await;
    assert!(!stdout_of(&r).contains("top secret"), "{r}");

    let target = sb.base().join("written-outside");
    let r = s.sh(&format!("echo x > {}", target.display())).await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert!(!target.exists());

    // Inside the jail, reading and writing work.
    let r = s.sh("echo inside > made.txt && cat made.txt").await;
    assert_eq!(r["detail"]["stdout"], "inside\n", "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_cannot_connect_to_tcp_on_loopback() {
    let sb = Sandbox::new("");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let policy = std::fs::read_to_string(&sb.policy)
        .unwrap()
        .replace("\"sh\",", "\"sh\", \"bash\",");
    std::fs::write(&sb.policy, policy).unwrap();
    let s = sb.session().await;
    let args = json!({"command": ["bash", "-c", format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")]});
    let r = s.run_with(args).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(!stdout_of(&r).contains("connected"), "{r}");
    let mut accepted = listener.accept();
    if let Ok((stream, _)) = &mut accepted {
        let mut buf = [0u8; 1];
        let _ = stream.read(&mut buf);
    }
    assert!(
        accepted.is_err(),
        "the listener must never see a connection"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_child_has_no_new_privs_and_a_seccomp_filter() {
    let (_sb, s) = Sandbox::started("").await;
    let call = s.call(
        "run_command",
        json!({"command": "sleep 4.731", "timeout_seconds": 8}),
    );
    let probe = async {
        assert!(eventually(5, || !live_processes_with("sleep 4.731").is_empty()).await);
        let pid = live_processes_with("sleep 4.731")[0];
        std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap()
    };
    let (r, status) = tokio::join!(call, probe);
    assert_eq!(r["code"], "OK");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
}

/// Landlock allows at most 16 stacked domains. A server started inside 16 permissive
/// domains cannot add its own, so every command must be refused with SANDBOX_UNAVAILABLE.
#[tokio::test(flavor = "multi_thread")]
async fn sandbox_unavailable_when_landlock_cannot_be_stacked() {
    use landlock::{
        ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, path_beneath_rules,
    };
    let sb = Sandbox::new("");
    let mut layers = Vec::new();
    for _ in 0..16 {
        let all = AccessFs::from_all(ABI::V1);
        let created = Ruleset::default()
            .handle_access(all)
            .unwrap()
            .create()
            .unwrap()
            .add_rules(path_beneath_rules(["/"], all))
            .unwrap();
        layers.push(Some(created));
    }
    let s = Session::start(&sb.policy, move |c| {
        // SAFETY: the closure only takes prepared rulesets and calls landlock_restrict_self.
        unsafe {
            c.pre_exec(move || {
                for layer in layers.iter_mut() {
                    if let Some(r) = layer.take() {
                        r.restrict_self()
                            .map_err(|_| std::io::Error::from_raw_os_error(libc_eperm()))?;
                    }
                }
                Ok(())
            });
        }
    })
    .await;
    let r = s.run("touch sandbox-marker").await;
    assert_eq!(r["code"], "SANDBOX_UNAVAILABLE", "{r}");
    assert_eq!(r["ok"], false);
    assert!(!sb.jail.join("sandbox-marker").exists());
    tokio::time::sleep(Duration::from_millis(10)).await;
}

fn libc_eperm() -> i32 {
    1
}

/// Calls each syscall an escape wants and prints `name rc errno` lines. Run by the stock
/// Python interpreter inside the jail, so it is a real program opening its own doors.
const PROBE: &str = r#"
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(256)
def sc(name, nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(nr, *args)
    print(name, rc, ctypes.get_errno())
sc("ptrace", 101, 0, 0, 0, 0)
sc("io_uring_setup", 425, 4, buf)
sc("bpf", 321, 0, buf, 48)
sc("unshare", 272, 0x10000000)
sc("keyctl", 250, 0, 0)
sc("perf_event_open", 298, buf, 0, -1, -1, 0)
# Size 0 is invalid, so unconfined this is EINVAL and forks nothing.
sc("clone3", 435, buf, 0)
# TCP is the private view's own loopback's (issue 33); anything else of AF_INET is refused.
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    print("inet_dgram 0 0")
except OSError as e:
    print("inet_dgram -1", e.errno)
# Last, since unconfined it forks: clone(CLONE_NEWUSER | SIGCHLD) with no new stack.
sc("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0)
"#;

fn probe_results(out: &str) -> std::collections::BTreeMap<String, (i64, i64)> {
    out.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((
                it.next()?.to_owned(),
                (it.next()?.parse().ok()?, it.next()?.parse().ok()?),
            ))
        })
        .collect()
}

/// Every probe line failed: EPERM, except clone3, which is answered as if absent (ENOSYS) so
/// that libc falls back to clone, whose flags the filter can read.
fn assert_probe_refused(r: &Value) {
    const EPERM: i64 = 1;
    const ENOSYS: i64 = 38;
    let got = probe_results(stdout_of(r));
    assert_eq!(got.len(), 9, "{r}");
    for (name, (rc, errno)) in &got {
        let want = if name == "clone3" { ENOSYS } else { EPERM };
        assert_eq!((*rc, *errno), (-1, want), "{name} was not refused: {r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn escape_syscalls_are_refused_by_seccomp() {
    let sb = Sandbox::new("");
    let policy = std::fs::read_to_string(&sb.policy)
        .unwrap()
        .replace("\"sh\",", "\"sh\", \"python3\",");
    std::fs::write(&sb.policy, &policy).unwrap();
    let s = sb.session().await;
    let r = s.py(PROBE).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_probe_refused(&r);

    // Control: the same probe with the sandbox off shows the probe can tell the difference.
    let off = Sandbox::new("[terminal.sandbox]\nmode = \"off\"");
    std::fs::write(
        &off.policy,
        std::fs::read_to_string(&off.policy)
            .unwrap()
            .replace("\"sh\",", "\"sh\", \"python3\","),
    )
    .unwrap();
    let s = off.session().await;
    let r = s.py(PROBE).await;
    let got = probe_results(stdout_of(&r));
    assert_eq!(
        got["ptrace"].0, 0,
        "PTRACE_TRACEME succeeds unconfined: {r}"
    );
    assert_eq!(got["inet_dgram"].0, 0, "{r}");
    assert_eq!(
        got["clone3"],
        (-1, 22),
        "unconfined, clone3 validates its size: {r}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_loop_and_a_file_size_bomb_are_stopped_by_limits() {
    let sb = Sandbox::builder().limits("timeout_seconds = 3\nmax_output_bytes = 4096\nprocesses = 40\nfile_size_bytes = 1048576").build();
    let s = sb.session().await;
    let fork_loop = "i=0; while [ $i -lt 400 ]; do sleep 29.71 & i=$((i+1)); done; wait";
    let r = s.sh(fork_loop).await;
    assert_fork_loop_stopped(&r, "sleep 29.71").await;
    assert_eq!(
        s.run("echo still-serving").await["detail"]["stdout"],
        "still-serving\n"
    );

    let r = s.sh("head -c 5000000 /dev/zero > big.bin").await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    let size = std::fs::metadata(sb.jail.join("big.bin"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(size <= 1_048_576, "RLIMIT_FSIZE let {size} bytes through");
}

/// The same confinement holds for an unprivileged server (uid 65534), where Landlock,
/// seccomp and RLIMIT_NPROC are all that stand between a command and the machine.
#[tokio::test(flavor = "multi_thread")]
async fn as_an_unprivileged_user_the_same_confinement_holds() {
    if !root_or_skip(SETPRIV_NEEDS_ROOT) {
        return;
    }
    let sb = Sandbox::builder()
        .allow_more(&["python3"])
        .limits("timeout_seconds = 3\nmax_output_bytes = 4096\nprocesses = 40")
        .build();
    sb.add_helpers(&["id", "setsid"]);
    let outside = sb.base().join("outside.txt");
    std::fs::write(&outside, "root only").unwrap();
    // The sandbox belongs to nobody; the outside file stays readable to nobody by DAC, so
    // only Landlock can refuse it.
    sb.give_to(65534);
    let s = sb.session_as(65534).await;
    let r = s.sh("id -u").await;
    assert_eq!(r["detail"]["stdout"], "65534\n", "{r}");
    let r = s.sh(&format!("cat {}", outside.display())).await;
    assert!(!stdout_of(&r).contains("root only"), "{r}");
    let r = s.sh(&format!("echo x > {}/x", sb.base().display())).await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert!(!sb.base().join("x").exists());
    let r = s.py(PROBE).await;
    assert_probe_refused(&r);
    let r = s
        .sh("i=0; while [ $i -lt 400 ]; do sleep 31 & i=$((i+1)); done; wait")
        .await;
    assert_fork_loop_stopped(&r, "sleep 31").await;
    let r = s.run_with(json!({"command": ["sh", "-c", "setsid sleep 932.1 & sleep 932.2"], "timeout_seconds": 1})).await;
    assert_eq!(r["code"], "TIMEOUT");
    assert!(eventually(5, || live_processes_with("932.").is_empty()).await);
}

/// Landlock does not restrict connecting to a named unix socket (a Docker socket is
/// root-equivalent); `unix_sockets = false` refuses creating one at all.
#[tokio::test(flavor = "multi_thread")]
async fn unix_sockets_can_be_refused() {
    let probe = "import socket\ntry:\n    socket.socket(socket.AF_UNIX)\n    print('unix-socket-created')\nexcept OSError as e:\n    print('refused', e.errno)";
    for (extra, expect) in [
        ("", "unix-socket-created"),
        ("[terminal.sandbox]\nunix_sockets = false", "refused 1"),
    ] {
        let sb = Sandbox::builder()
            .allow_more(&["python3"])
            .limits("timeout_seconds = 10")
            .extra(extra)
            .build();
        let s = sb.session().await;
        let r = s.py(probe).await;
        assert_eq!(stdout_of(&r).trim(), expect, "{extra}: {r}");
    }
}

/// Why the pids cgroup tests skip where there is no pids cgroup to use.
const PIDS_SKIP: &str =
    "skipping: the pids cgroup is used only by a root server with cgroup v1 pids";

/// As root, RLIMIT_NPROC does not bind, so a root server puts its commands in a cgroup v1
/// `pids` group of its own: a command runs inside it, groups left by dead servers are removed
/// at start, and the server removes its own when it exits.
#[tokio::test(flavor = "multi_thread")]
async fn a_root_server_runs_commands_in_its_own_pids_cgroup_and_cleans_up() {
    let Some(root) = pids_cgroup_or_skip(PIDS_SKIP) else {
        return;
    };
    // 999999999 is above every pid_max, so no server of that pid can be alive.
    let stale = root.join("safe-mcp-999999999");
    let _ = std::fs::create_dir(&stale);
    let sb = Sandbox::builder().limits("processes = 40").build();
    let s = sb.session().await;
    assert!(
        !stale.exists(),
        "a dead server's empty group was left behind"
    );

    let call = s.call("run_command", json!({"command": "sleep 3.917"}));
    let probe = async {
        for _ in 0..150 {
            if let Some(pid) = live_processes_with("3.917").first() {
                return std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        String::new()
    };
    let (r, cgroup) = tokio::join!(call, probe);
    assert_eq!(r["code"], "OK", "{r}");
    let group = cgroup
        .lines()
        .find_map(|l| l.split_once(":pids:/").map(|(_, g)| g.to_owned()))
        .unwrap_or_default();
    assert!(
        group.starts_with("safe-mcp-"),
        "the command ran outside the group: {cgroup}"
    );
    let dir = root.join(&group);
    assert_eq!(
        std::fs::read_to_string(dir.join("pids.max"))
            .unwrap()
            .trim(),
        "40"
    );

    drop(s);
    assert!(
        eventually(5, || !dir.exists()).await,
        "the server left {} behind",
        dir.display()
    );
}

/// SIGTERM, which the MCP stdio shutdown sends when closing stdin was not enough (and a
/// supervisor sends to stop a server), ends the server as a closed session does: it exits
/// 0 and removes its cgroup. Its control: the same server given SIGKILL leaves the group.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_stopped_by_sigterm_cleans_up_as_at_a_closed_session() {
    let Some(root) = pids_cgroup_or_skip(PIDS_SKIP) else {
        return;
    };
    let sb = Sandbox::new("");
    let stopped = |signal: rustix::process::Signal| {
        use std::io::{BufRead, Write};
        let mut server = std::process::Command::new(super::support::BIN)
            .args(["terminal", "--config"])
            .arg(&sb.policy)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = server.stdin.take().unwrap();
        let mut stdout = std::io::BufReader::new(server.stdout.take().unwrap());
        let mut ask = |message: Value, answered: bool| {
            writeln!(stdin, "{message}").unwrap();
            let mut line = String::new();
            if answered {
                stdout.read_line(&mut line).unwrap();
            }
            line
        };
        ask(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "sigterm-test", "version": "1"}}}),
            true,
        );
        ask(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            false,
        );
        let ran = ask(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "run_command", "arguments": {"command": "echo ran"}}}),
            true,
        );
        assert!(ran.contains("\"code\":\"OK\""), "{ran}");
        let group = root.join(format!("safe-mcp-{}-0", server.id()));
        assert!(group.is_dir(), "{} was never made", group.display());
        let pid = rustix::process::Pid::from_raw(server.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let status = server.wait().unwrap();
        (status, group)
    };
    let (status, group) = stopped(rustix::process::Signal::TERM);
    assert!(status.success(), "SIGTERM: {status:?}");
    assert!(!group.exists(), "SIGTERM left {}", group.display());

    let (status, group) = stopped(rustix::process::Signal::KILL);
    assert!(!status.success());
    assert!(group.exists(), "control: SIGKILL cannot clean up");
    assert!(eventually(2, || std::fs::remove_dir(&group).is_ok()).await);
}
