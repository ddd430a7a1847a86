//! The audit trail seen from outside: `audit verify` and `audit tail` on trails written by a
//! real server, fault injection under fail-closed, a crash with 16 callers in flight, HMAC
//! keys and rotation.

use super::builders::in_terminal_table;
use super::cli::{assert_fatal, run};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;

use super::support::{BIN, Sandbox, Session, assert_success, eventually, live_processes_with};

fn safe_mcp(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn verify(file: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["audit", "verify"];
    args.extend_from_slice(extra);
    let file = file.to_string_lossy().into_owned();
    args.push(&file);
    let out = safe_mcp(&args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Points the sandbox's policy at another audit log path.
fn audit_at(sb: &Sandbox, path: &Path) {
    sb.edit_policy(
        "audit_log = \"audit.jsonl\"",
        &format!("audit_log = \"{}\"", path.display()),
    );
}

/// `audit tail` in a terminal colours the code (green ran, red refused), plain when piped or
/// under NO_COLOR; `--json` prints the records as they are. The terminal is a real pty
/// (util-linux `script`).
#[tokio::test(flavor = "multi_thread")]
async fn tail_is_coloured_on_a_terminal_plain_when_piped_and_json_on_request() {
    let (sb, s) = Sandbox::started("").await;
    s.run("echo one").await;
    s.run("whoami").await;
    drop(s);
    let file = sb.audit.to_str().unwrap();
    let piped = safe_mcp(&["audit", "tail", file]);
    let plain = String::from_utf8_lossy(&piped.stdout);
    assert!(!plain.contains('\x1b'), "{plain:?}");
    assert!(
        plain
            .lines()
            .all(|l| l.split_whitespace().nth(2) == Some("-")),
        "the caller over stdio: {plain}"
    );
    let on_a_terminal = |no_color: bool| {
        let mut c = Command::new("script");
        c.args([
            "-q",
            "-e",
            "-c",
            &format!("{BIN} audit tail {file}"),
            "/dev/null",
        ]);
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR");
        }
        String::from_utf8_lossy(&c.output().unwrap().stdout).into_owned()
    };
    let tty = on_a_terminal(false);
    assert!(tty.contains("\x1b[32mOK"), "{tty:?}");
    assert!(tty.contains("\x1b[31mPOLICY_DENIED"), "{tty:?}");
    assert!(!on_a_terminal(true).contains('\x1b'));
    let json = safe_mcp(&["audit", "tail", "--json", file]);
    assert_eq!(
        String::from_utf8_lossy(&json.stdout),
        std::fs::read_to_string(&sb.audit).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_and_tail_read_a_real_trail() {
    let (sb, s) = Sandbox::started("").await;
    s.run("echo one").await;
    s.run("whoami").await;
    s.run("cat notes.txt | wc -l").await;
    drop(s);
    let (code, out) = verify(&sb.audit, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("OK: 6 records"), "{out}");

    let tail = safe_mcp(&["audit", "tail", sb.audit.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&tail.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].contains("OK") && lines[0].contains("echo one"),
        "{text}"
    );
    assert!(
        lines[1].contains("POLICY_DENIED") && lines[1].contains("not-allowlisted"),
        "{text}"
    );

    let original = std::fs::read_to_string(&sb.audit).unwrap();
    std::fs::write(&sb.audit, original.replace("echo one", "echo 0ne")).unwrap();
    let (code, out) = verify(&sb.audit, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(":1: edited"), "{out}");
    let mut lines: Vec<&str> = original.lines().collect();
    lines.remove(2);
    std::fs::write(&sb.audit, lines.join("\n") + "\n").unwrap();
    let (code, out) = verify(&sb.audit, &[]);
    assert_eq!(code, 1);
    assert!(out.contains(":3: deleted"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_keyed_trail_needs_its_key() {
    let sb = Sandbox::new("");
    let key = sb.base().join("audit.key");
    std::fs::write(&key, b"0123456789abcdef0123456789abcdef").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    sb.prepend_policy("audit_hmac_key_file = \"audit.key\"");
    let out = safe_mcp(&["terminal", "--config", sb.policy.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mode 0600"),
        "a readable key is fatal"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();

    let s = sb.session().await;
    s.run("echo keyed").await;
    drop(s);
    let records = sb.audit_records();
    assert!(records.iter().all(|r| r["alg"] == "hmac-sha256"));
    let (code, out) = verify(&sb.audit, &["--config", sb.policy.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = verify(&sb.audit, &["--key-file", key.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = verify(&sb.audit, &[]);
    assert_eq!(code, 1);
    assert!(out.contains("wrong key"), "{out}");

    // A key inside the jail is fatal: a command could read it.
    std::fs::rename(&key, sb.jail.join("audit.key")).unwrap();
    sb.edit_policy("\"audit.key\"", "\"jail/audit.key\"");
    let out = safe_mcp(&["terminal", "--config", sb.policy.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lies inside"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rotation_continues_the_chain() {
    let sb = Sandbox::new("");
    sb.prepend_policy("audit_max_bytes = 4096\naudit_keep = 50");
    let s = sb.session().await;
    for i in 0..30 {
        s.run(&format!("echo rotation-{i}")).await;
    }
    drop(s);
    let rotated = sb.base().join("audit.jsonl.1");
    assert!(rotated.exists(), "30 calls exceed 4 KiB");
    let (code, out) = verify(&sb.audit, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("OK: 60 records"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn fault_injection_under_fail_closed() {
    // Disk full: a 16 KiB tmpfs fills after a few records (beside the trail the server keeps
    // its approvals key and, in `<audit_log>.held/`, what it saw of the jail: a page each).
    if !is_root() {
        super::support::skip("skipping: mounting a tiny tmpfs and switching users need root");
        return;
    }
    let sb = Sandbox::new("");
    let mnt = sb.base().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16k", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount tmpfs");
    audit_at(&sb, &mnt.join("audit.jsonl"));
    let s = sb.session().await;
    let mut refused = None;
    for i in 0..200 {
        let r = s.run(&format!("touch disk-full-{i}")).await;
        if r["code"] == "AUDIT_UNAVAILABLE" {
            refused = Some(i);
            break;
        }
        assert_eq!(r["code"], "OK", "{r}");
    }
    let i = refused.expect("a full disk must refuse the command");
    assert!(
        !sb.jail.join(format!("disk-full-{i}")).exists(),
        "the refused command ran"
    );
    drop(s);
    // A refused command's forked child was sent away at its gate: no copy of the server (or
    // the server itself) lingers once the session ends.
    let policy = sb.policy.to_string_lossy().into_owned();
    assert!(
        eventually(10, || live_processes_with(&policy).is_empty()).await,
        "processes left behind: {:?}",
        live_processes_with(&policy)
    );
    let _ = Command::new("umount").arg("-l").arg(&mnt).status();

    // Read-only: the trail's directory is a read-only filesystem.
    let sb = Sandbox::new("");
    let mnt = sb.base().join("ro");
    std::fs::create_dir(&mnt).unwrap();
    assert!(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro", "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap()
            .success()
    );
    audit_at(&sb, &mnt.join("audit.jsonl"));
    let s = sb.session().await;
    let r = s.run("touch read-only-marker").await;
    assert_eq!(r["code"], "AUDIT_UNAVAILABLE", "{r}");
    assert!(!sb.jail.join("read-only-marker").exists());
    drop(s);
    let _ = Command::new("umount").arg("-l").arg(&mnt).status();

    // Permission denied: an unprivileged server and a trail directory it may not write.
    let sb = Sandbox::builder().limits("timeout_seconds = 5").build();
    let logs = sb.base().join("root-only");
    std::fs::create_dir(&logs).unwrap();
    audit_at(&sb, &logs.join("audit.jsonl"));
    for p in [sb.base().to_path_buf(), sb.jail.clone(), sb.policy.clone()] {
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    }
    let s = Session::start(&sb.policy, |c| {
        let program = std::mem::replace(c, tokio::process::Command::new("setpriv"));
        let args: Vec<_> = program.as_std().get_args().map(|a| a.to_owned()).collect();
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(BIN)
            .args(args)
            .env_clear();
    })
    .await;
    let r = s.run("touch denied-marker").await;
    assert_eq!(r["code"], "AUDIT_UNAVAILABLE", "{r}");
    assert!(!sb.jail.join("denied-marker").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_with_16_callers_in_flight_leaves_a_verifiable_trail() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};

    let sb = Sandbox::new("");
    let policy = sb.policy.clone();
    let command = tokio::process::Command::new(BIN).configure(|c| {
        c.arg("terminal").arg("--config").arg(&policy);
    });
    let transport = TokioChildProcess::new(command).unwrap();
    let pid = transport.id().unwrap();
    let client = ().serve(transport).await.unwrap();
    let mut calls = Vec::new();
    for i in 0..16 {
        let peer = client.peer().clone();
        let script = format!("touch crash-{i}; sleep 941.{i}");
        let serde_json::Value::Object(args) = json!({"command": ["sh", "-c", script]}) else {
            unreachable!()
        };
        calls.push(tokio::spawn(async move {
            let _ = peer
                .call_tool(CallToolRequestParams::new("run_command").with_arguments(args))
                .await;
        }));
    }
    // Kill the server once some commands are running and others are still arriving.
    assert!(eventually(10, || live_processes_with("sleep 941.").len() >= 4).await);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    for c in calls {
        let _ = c.await;
    }
    drop(client);
    // The orphans were re-parented to init when the server died; end them for tidiness.
    let _ = Command::new("pkill")
        .args(["-KILL", "-f", "sleep 941."])
        .status();

    let trail = std::fs::read_to_string(&sb.audit).unwrap();
    for i in 0..16 {
        if sb.jail.join(format!("crash-{i}")).exists() {
            let needle = format!("touch crash-{i};");
            assert!(
                trail
                    .lines()
                    .any(|l| l.contains("\"kind\":\"attempt\"") && l.contains(&needle)),
                "command {i} ran without an attempt record"
            );
        }
    }
    let (code, out) = verify(&sb.audit, &[]);
    assert!(code == 0 || out.contains("torn last line"), "{out}");

    // Restart: the trail is sealed and continues; verify says the chain is intact.
    let s = sb.session().await;
    assert_eq!(s.run("echo after-crash").await["code"], "OK");
    drop(s);
    let (code, out) = verify(&sb.audit, &[]);
    assert_eq!(code, 0, "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn records_are_safe_to_print_and_tail_follows() {
    let (sb, s) = Sandbox::started("").await;
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[31mred\u{202E}txt.exe\nforged line";
    s.run_with(json!({"command": ["echo", hostile]})).await;
    let raw = std::fs::read(&sb.audit).unwrap();
    assert!(!raw.contains(&0x1b), "no raw ESC byte in the trail");
    let text = String::from_utf8(raw).unwrap();
    assert!(!text.contains('\u{202E}'), "bidi overrides are neutralised");
    assert_eq!(
        text.lines().count(),
        2,
        "a newline in a command cannot forge a line"
    );

    let mut follower = Command::new(BIN)
        .args(["audit", "tail", "-f"])
        .arg(&sb.audit)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    s.run("echo followed-call").await;
    let stdout = follower.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("followed-call"))
    });
    let found = eventually(5, || reader.is_finished()).await;
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(
        found && reader.join().unwrap().is_some(),
        "tail -f printed the new call"
    );
}

async fn echo_many(s: &Session, tag: &str) {
    for i in 0..15 {
        let r = s.run(&format!("echo {tag}-{i}")).await;
        assert_eq!(r["code"], "OK", "{r}");
    }
}

/// Adds a `[files]` section to the sandbox's policy, so one policy serves both servers as
/// the README's quick start shows.
fn with_files_section(sb: &Sandbox) {
    std::fs::create_dir_all(sb.base().join("inbox")).unwrap();
    for i in 0..8 {
        std::fs::write(sb.base().join(format!("inbox/f{i}.txt")), "x").unwrap();
    }
    sb.append_policy("[files]\nworkspace_root = \"inbox\"\njournal = \"journal.jsonl\"");
}

/// Both servers from one policy, and a second terminal server beside them, append to one
/// trail at once (rotating it too): the trail stays one chain, every seq once, nothing
/// reported as a discontinuity.
#[tokio::test(flavor = "multi_thread")]
async fn servers_sharing_one_trail_keep_one_chain() {
    let sb = Sandbox::new("");
    sb.prepend_policy("audit_max_bytes = 8192\naudit_keep = 100");
    with_files_section(&sb);
    let t1 = sb.session().await;
    let t2 = sb.session().await;
    let files = Session::start_server("files", &sb.policy, |_| {}, None).await;
    let moves = async {
        for i in 0..8 {
            let r = files
                .call(
                    "move_file",
                    json!({"src": format!("f{i}.txt"), "dest": format!("moved/f{i}.txt")}),
                )
                .await;
            assert_eq!(r["code"], "OK", "{r}");
        }
    };
    tokio::join!(echo_many(&t1, "one"), echo_many(&t2, "two"), moves);
    drop((t1, t2, files));

    let (code, out) = verify(&sb.audit, &[]);
    assert_eq!(code, 0, "{out}");
    let mut records = Vec::new();
    let mut n = 1;
    loop {
        let mut name = sb.audit.clone().into_os_string();
        name.push(format!(".{n}"));
        let path = std::path::PathBuf::from(name);
        if !path.exists() {
            break;
        }
        records.extend(
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(str::to_owned),
        );
        n += 1;
    }
    assert!(n > 2, "the trail was meant to rotate");
    records.extend(
        std::fs::read_to_string(&sb.audit)
            .unwrap()
            .lines()
            .map(str::to_owned),
    );
    let mut seqs: Vec<u64> = records
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    seqs.sort_unstable();
    let want: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, want, "every seq exactly once");
    assert!(!records.iter().any(|l| l.contains("discontinuity")));
    let tools = |t: &str| records.iter().filter(|l| l.contains(t)).count();
    assert_eq!(tools("\"tool\":\"run_command\""), 60);
    assert_eq!(tools("\"tool\":\"move_file\""), 16);
}

/// Two files servers on one journal would hand out the same action ids: the second one
/// refuses to start and says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_files_server_on_one_journal_refuses_to_start() {
    let sb = Sandbox::new("");
    with_files_section(&sb);
    let first = Session::start_server("files", &sb.policy, |_| {}, None).await;
    let out = safe_mcp(&["files", "--config", sb.policy.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("fatal: ") && stderr.contains("another files server is using it"),
        "{stderr}"
    );
    let r = first.call("list_files", json!({})).await;
    assert_eq!(r["code"], "OK", "the first server still serves: {r}");
}

/// Round 3 (issue 27), item 13: the shipping spool is the trail too: inside a write path or a profile's cache
/// (where a command could edit what waits to be shipped) the server does not start.
#[test]
fn a_spool_inside_a_write_path_or_a_cache_does_not_start() {
    let sb = Sandbox::new("");
    let cache = sb.base().join("cache");
    std::fs::create_dir_all(cache.join("pip")).unwrap();
    let ship = |spool: &str| {
        format!("\n[audit.ship]\nsyslog_tcp = \"127.0.0.1:9\"\nspool_dir = \"{spool}\"\n")
    };
    let original = std::fs::read_to_string(&sb.policy).unwrap();
    let cases = [
        (
            format!("write_paths = [\"{}\"]", cache.display()),
            format!("{}/spool", cache.display()),
        ),
        (
            format!("write_paths = [\"{}/pip\"]", cache.display()),
            format!("{}", cache.display()),
        ),
        (
            "profiles = [\"python\"]\ncache_dir = \"cache\"\nshared_cache = true".to_owned(),
            format!("{}/pip/spool", cache.display()),
        ),
    ];
    for (terminal, spool) in cases {
        std::fs::write(&sb.policy, format!("{original}{}", ship(&spool))).unwrap();
        in_terminal_table(&sb, &terminal);
        let out = run(&["terminal", "--config", sb.policy.to_str().unwrap()], &[]);
        assert_fatal(&out, "audit.ship.spool_dir");
    }
    // The control: the same spool beside the cache starts (and is refused by nothing).
    std::fs::write(
        &sb.policy,
        format!(
            "{original}{}",
            ship(&format!("{}/spool", sb.base().display()))
        ),
    )
    .unwrap();
    let out = run(
        &["policy", "check", "--config", sb.policy.to_str().unwrap()],
        &[],
    );
    assert_success(&out);
}
