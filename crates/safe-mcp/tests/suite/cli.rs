//! The command line: every startup failure is `fatal: <reason>` and a non-zero exit;
//! `explain` prints the verdict and exits 0 allow, 1 deny, 2 error.

use std::process::{Command, Output, Stdio};

use super::support::{
    BIN, SETPRIV_NEEDS_ROOT, Sandbox, assert_success, pids_cgroup_or_skip, root_or_skip,
    safe_mcp_on,
};

/// Checks that `safe-mcp terminal` refuses to start with the policy `p`, saying `needle`.
fn terminal_fatal(p: &str, needle: &str) {
    assert_fatal(&run(&["terminal", "--config", p], &[]), needle);
}

pub(super) fn run(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args).env_clear().stdin(Stdio::null());
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().unwrap()
}

pub(super) fn assert_fatal(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected a failure, stderr: {stderr}"
    );
    assert!(stderr.starts_with("fatal: "), "{stderr}");
    assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    assert!(
        out.stdout.is_empty(),
        "nothing may reach stdout (the MCP channel)"
    );
}

fn policy_with(sb: &Sandbox, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(&sb.policy)
        .unwrap()
        .replace(from, to);
    let path = sb.base().join("variant.toml");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn every_startup_failure_is_fatal_and_named() {
    let sb = Sandbox::new("");
    assert_fatal(&run(&["terminal"], &[]), "no policy file");
    assert_fatal(
        &run(&["terminal", "--config", "/nonexistent/p.toml"], &[]),
        "cannot read policy file",
    );
    let bad = sb.base().join("bad.toml");
    std::fs::write(&bad, "[terminal\n").unwrap();
    assert_fatal(
        &run(&["terminal", "--config", bad.to_str().unwrap()], &[]),
        "invalid policy file",
    );
    let p = policy_with(
        &sb,
        "[terminal.limits]",
        "[terminal.limits]\ntimeout_secs = 3",
    );
    terminal_fatal(&p, "unknown field `timeout_secs`");
    let p = policy_with(&sb, "jail_root = \"jail\"", "");
    terminal_fatal(&p, "jail_root` is not set");
    let p = policy_with(&sb, "jail_root = \"jail\"", "jail_root = \"policy.toml\"");
    terminal_fatal(&p, "not an existing directory");
    let p = policy_with(
        &sb,
        "audit_log = \"audit.jsonl\"",
        "audit_log = \"jail/audit.jsonl\"",
    );
    terminal_fatal(&p, "lies inside");
    let p = policy_with(
        &sb,
        "[terminal]",
        "[redaction]\nextra_patterns = [{ name = \"x\", regex = \"([\" }]\n[terminal]",
    );
    terminal_fatal(&p, "not a valid regex");
    let p = policy_with(
        &sb,
        "[terminal]",
        "[files]\nworkspace_root = \"jail\"\n[[files.skip]]\nwhen = [\"dotfile\"]\n[terminal]",
    );
    assert_fatal(&run(&["policy", "check", "--config", &p], &[]), "layer");
    let p = policy_with(&sb, "[terminal]", "[nonsense]\n[terminal]");
    terminal_fatal(&p, "unknown field `nonsense`");
    assert_fatal(
        &run(
            &["terminal", "--config", &p],
            &[("SAFE_MCP_POLICY_FILE", sb.policy.to_str().unwrap())],
        ),
        "nonsense",
    );
    assert_fatal(
        &run(
            &["terminal", "--config", sb.policy.to_str().unwrap()],
            &[("SAFE_MCP_AUDIT_FAIL_MODE", "sometimes")],
        ),
        "SAFE_MCP_AUDIT_FAIL_MODE",
    );
    assert_fatal(
        &run(
            &["terminal", "--config", sb.policy.to_str().unwrap()],
            &[("SAFE_MCP_JAIL_ROOT", "/nonexistent-root")],
        ),
        "not an existing directory",
    );
}

#[test]
fn explain_exit_codes() {
    let sb = Sandbox::new("");
    let config = sb.policy.to_str().unwrap();
    let allow = run(
        &["explain", "--config", config, "--", "echo hi | wc -c"],
        &[],
    );
    assert_eq!(allow.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&allow.stdout).unwrap();
    assert_eq!(v["code"], "OK");
    let deny = run(&["explain", "--config", config, "--", "git push -f"], &[]);
    assert_eq!(deny.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&deny.stdout).unwrap();
    assert_eq!(v["code"], "POLICY_DENIED");
    let via_env = run(
        &["explain", "--", "cat /etc/passwd"],
        &[("SAFE_MCP_POLICY_FILE", config)],
    );
    assert_eq!(via_env.status.code(), Some(1));
    let err = run(
        &["explain", "--config", "/nonexistent.toml", "--", "ls"],
        &[],
    );
    assert_eq!(err.status.code(), Some(2));
    assert!(!sb.jail.join("hi").exists());
}

#[test]
fn redact_filters_stdin() {
    let mut child = Command::new(BIN)
        .arg("redact")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"key=AKIAIOSFODNN7EXAMPLE ok\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "key=[REDACTED:aws_access_key_id] ok\n"
    );
}

#[test]
fn doctor_reports_the_kernel() {
    // Issue 28, item 10: a one-line verdict first, for a person.
    let out = run(&["doctor"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().next().unwrap().starts_with(
            "enforce: full (Landlock 7, seccomp, private view, egress namespace tier)"
        ),
        "this machine kind enforces all of it: {text}"
    );
    assert!(text.contains("--json"), "{text}");
    let out = run(&["doctor", "--json"], &[]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["verdict"].as_str().unwrap().starts_with("enforce: full"),
        "{v}"
    );
    assert!(
        v["kernel"]["landlock_abi"].as_i64().unwrap() >= 1,
        "this machine kind has Landlock: {v}"
    );
    assert_eq!(v["kernel"]["openat2_resolve_beneath"], true);
    // x32 syscall numbers alias the x86_64 ones; the filter answers them ENOSYS anyway, and
    // doctor says whether the kernel would take them (this machine kind: it would not).
    assert_eq!(v["kernel"]["x32_abi"], "disabled", "{v}");
}

#[test]
fn policy_check_runs_examples_and_lints() {
    let sb = Sandbox::builder().allow(&["ls", "zsh", "find", "python3", "frobnicate"]).limits("timeout_seconds = 5").extra("[[terminal.rules]]\ncommand = \"find\"\nallow_escapes = [\"-delete\"]\nshould_allow = [\"find . -delete\"]\nshould_deny = [\"find . -exec id \\\\;\"]\n[[terminal.rules]]\ncommand = \"python3\"\nallow_interpreter = true\n").build();
    let out = run(
        &["policy", "check", "--config", sb.policy.to_str().unwrap()],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("2 examples passed"), "{stdout}");
    assert!(
        stdout.contains("warning: `zsh` is allowlisted but is an interpreter"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: `python3` is allowlisted with allow_interpreter = true"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: `find` opts in the escape `-delete`"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: `frobnicate` has no built-in knowledge"),
        "{stdout}"
    );
    // zsh and frobnicate are not installed here: every call to them would fail.
    assert!(
        stdout.contains("warning: `frobnicate` is allowlisted but is not on the server's PATH"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("warning: `ls` is allowlisted but is not on"),
        "{stdout}"
    );
    assert!(stdout.contains(", 7 rules |"), "{stdout}");

    // A failing example is fatal and names the rule and the example; the server never starts.
    sb.edit_policy(
        "should_allow = [\"find . -delete\"]",
        "should_allow = [\"find . -exec id \\\\;\"]",
    );
    for cmd in [
        &["policy", "check", "--config"][..],
        &["terminal", "--config"][..],
    ] {
        let mut args = cmd.to_vec();
        args.push(sb.policy.to_str().unwrap());
        let out = run(&args, &[]);
        assert_fatal(&out, "(find): should_allow example `find . -exec id \\;`");
    }
}

#[test]
fn the_demo_runs_and_every_envelope_is_as_expected() {
    let out = Command::new(BIN)
        .arg("demo")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("UNEXPECTED"), "{stdout}");
    assert!(
        stdout.contains("== F6. redo it (OK, as expected)"),
        "{stdout}"
    );
    // Compact by default: the command, the verdict, the output; --json gives envelopes.
    assert!(
        stdout.contains("> ls -a\n→ OK: the command ran (exit code 0)"),
        "{stdout}"
    );
    assert!(!stdout.contains("\"detail\""), "{stdout}");
    // Issue 50, item 8: the policy excerpt shows the policy, not `null` for every field,
    // and the last line is the next step, `init`.
    let excerpt: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("== describe_policy"))
        .take(4)
        .collect();
    assert!(
        excerpt.len() == 4 && !excerpt.join("\n").contains("null"),
        "{excerpt:?}"
    );
    assert!(
        stdout
            .trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .contains("safe-mcp init --profile"),
        "{stdout}"
    );
    let out = Command::new(BIN)
        .args(["demo", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("\"detail\""), "{stdout}");
}

/// With pipes (every other test) the server reads and writes stdio through epoll; anything
/// else, here a regular file as stdin and a socket pair as stdout, takes tokio's stdio. The
/// session works the same: initialize, tools/list and a run are answered, and end of input
/// ends the server.
#[test]
fn a_session_over_non_pipe_stdio_works() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixStream;
    let sb = Sandbox::new("");
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo over-a-file"}}}"#,
    ];
    let input = sb.base().join("requests.jsonl");
    std::fs::write(&input, requests.join("\n") + "\n").unwrap();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = Command::new(BIN)
        .args(["terminal", "--config"])
        .arg(&sb.policy)
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(std::os::fd::OwnedFd::from(theirs))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut answers = std::collections::BTreeMap::new();
    for line in BufReader::new(ours).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        answers.insert(v["id"].as_i64().unwrap(), v);
    }
    assert!(child.wait().unwrap().success());
    assert_eq!(answers[&1]["result"]["serverInfo"]["name"], "safe-mcp");
    assert_eq!(answers[&2]["result"]["tools"].as_array().unwrap().len(), 11);
    let run = &answers[&3]["result"]["structuredContent"];
    assert_eq!(run["detail"]["stdout"], "over-a-file\n", "{run}");
}

/// `explain` and `doctor` describe the confinement without building it: as root, building
/// it makes the server's pids cgroup, a side effect a read-only call must not have. The
/// cgroup directory is watched with inotify, since a group made and removed again within
/// the call would leave no trace.
#[test]
fn explain_and_doctor_make_no_cgroup() {
    use rustix::fs::inotify;
    let Some(root) =
        pids_cgroup_or_skip("skipping: only a root server with cgroup v1 pids makes a pids cgroup")
    else {
        return;
    };
    let sb = Sandbox::new("");
    let watch =
        inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&watch, root, inotify::WatchFlags::CREATE).unwrap();
    let config = sb.policy.to_str().unwrap();
    let mut children = Vec::new();
    for args in [
        vec!["explain", "--config", config, "--", "ls"],
        vec!["doctor", "--json", "--config", config],
    ] {
        let child = Command::new(BIN)
            .args(&args)
            .env_clear()
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("\"landlock\""), "{args:?}: {text}");
        children.push(format!("safe-mcp-{pid}"));
    }
    // Control: a server that runs commands does make its group, and the watch sees it.
    Command::new(BIN)
        .args(["terminal", "--config", config])
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let mut buf = vec![std::mem::MaybeUninit::uninit(); 64 * 1024];
    let mut reader = inotify::Reader::new(&watch, &mut buf);
    let mut created = Vec::new();
    while let Ok(event) = reader.next() {
        if let Some(name) = event.file_name() {
            created.push(name.to_string_lossy().into_owned());
        }
    }
    for group in &children {
        assert!(!created.contains(group), "{group} was made: {created:?}");
    }
    assert!(
        created.iter().any(|g| g.starts_with("safe-mcp-")),
        "the watch saw no group at all, so it proves nothing: {created:?}"
    );
}

/// Exit codes that mean what docs/AUDIT.md says: a file that cannot be read is an error (2),
/// not a tamper alarm (1); a file that is not a trail says so; output into a closed pipe
/// ends quietly.
#[test]
fn audit_and_doctor_exit_codes_match_the_docs() {
    let sb = Sandbox::new("");
    let missing = sb.base().join("no-such-trail.jsonl");
    let out = run(&["audit", "verify", missing.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("fatal: cannot read"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("BROKEN"));

    let not_a_trail = sb.base().join("notes.txt");
    std::fs::write(&not_a_trail, "hello\nworld\n").unwrap();
    let out = run(&["audit", "tail", not_a_trail.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not an audit trail"),
        "{out:?}"
    );

    // `safe-mcp doctor | head -1`: the reader leaves after one line.
    let mut child = Command::new(BIN)
        .arg("doctor")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
}

/// `policy check` run as the user the server will run as says what that user cannot write
/// and what to chown, instead of "valid" and then AUDIT_UNAVAILABLE on every call.
#[test]
fn policy_check_says_what_the_server_user_cannot_write() {
    if !root_or_skip(SETPRIV_NEEDS_ROOT) {
        return;
    }
    let sb = Sandbox::new("");
    // nobody may read the policy and enter the sandbox, but write nothing.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(sb.base(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&sb.policy, std::fs::Permissions::from_mode(0o644)).unwrap();
    let check = |uid: &str| {
        Command::new("setpriv")
            .args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                "--",
            ])
            .arg(BIN)
            .args(["policy", "check", "--config", sb.policy.to_str().unwrap()])
            .env_clear()
            .output()
            .unwrap()
    };
    let out = check("65534");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("error: the audit log needs")
            && stdout.contains(&format!("`chown 65534 {}`", sb.base().display())),
        "{stdout}"
    );
    assert!(
        stdout.contains("error: the jail (commands write there)"),
        "{stdout}"
    );
    // Once the sandbox belongs to that user, the same check passes.
    for entry in [sb.base().to_path_buf(), sb.jail.clone()] {
        std::os::unix::fs::chown(&entry, Some(65534), Some(65534)).unwrap();
    }
    let out = check("65534");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A line that cannot be a message gets the JSON-RPC error the spec names for it, with a
/// bounded message, and the server stays up: not JSON, not UTF-8, a lone surrogate, nesting
/// too deep (parse error, -32700); too long, or JSON but not a message (invalid request,
/// -32600, with its id when it has one). A notification nobody knows gets nothing.
#[test]
fn bad_lines_get_json_rpc_errors_and_the_server_stays_up() {
    use std::io::{BufRead, BufReader, Write};
    let sb = Sandbox::new("");
    let mut child = Command::new(BIN)
        .args(["terminal", "--config"])
        .arg(&sb.policy)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut next = || {
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    let mut send = |bytes: &[u8]| {
        input.write_all(bytes).unwrap();
        input.write_all(b"\n").unwrap();
        input.flush().unwrap();
    };
    send(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    assert_eq!(next()["id"], 1);
    send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let long = format!("{{\"pad\":\"{}\"}}", "x".repeat(17 * 1024 * 1024));
    for (bytes, code) in [
        (b"{not json".to_vec(), -32700),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"x\":\"\xff\xfe\"}".to_vec(),
            -32700,
        ),
        (
            br#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"s":"\ud800"}}"#.to_vec(),
            -32700,
        ),
        (deep.into_bytes(), -32700),
        (long.into_bytes(), -32600),
        (br#"[1, 2, 3]"#.to_vec(), -32600),
    ] {
        send(&bytes);
        let reply = next();
        assert_eq!(reply["error"]["code"], code, "{reply}");
        assert_eq!(reply["id"], serde_json::Value::Null, "{reply}");
        assert!(reply["error"]["message"].as_str().unwrap().chars().count() <= 200);
    }
    // JSON that names an id but is no message: the error carries that id.
    send(br#"{"jsonrpc":"2.0","id":41,"method":5}"#);
    let reply = next();
    assert_eq!(
        (reply["id"].clone(), reply["error"]["code"].clone()),
        (41.into(), (-32600).into()),
        "{reply}"
    );
    // An unknown notification is ignored; the next request is answered as usual.
    send(br#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#);
    send(br#"{"jsonrpc":"2.0","id":42,"method":"tools/list"}"#);
    let reply = next();
    assert_eq!(reply["id"], 42, "{reply}");
    assert!(
        reply["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() == 11),
        "{reply}"
    );
    drop(input);
    assert!(child.wait().unwrap().success());
}

/// Issue 37, item 2: completions for bash, zsh and fish, and man pages generated from the
/// same clap definitions, one per subcommand, that `man` renders.
#[test]
fn completions_and_man_pages_come_from_the_command_definitions() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef safe-mcp"),
        ("fish", "complete -c safe-mcp"),
    ] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("approvals") && script.contains("terminal"),
            "{shell}"
        );
    }
    let out = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );

    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let out = safe_mcp_on(&["man", "--out"], &pages);
    assert_success(&out);
    for page in [
        "safe-mcp.1",
        "safe-mcp-terminal.1",
        "safe-mcp-approvals-approve.1",
    ] {
        let text = std::fs::read_to_string(pages.join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
    let rendered = Command::new("man")
        .arg("-l")
        .arg(pages.join("safe-mcp-terminal.1"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&rendered.stdout);
    assert!(text.contains("Serve the terminal tools over MCP"), "{text}");
    assert!(text.contains("--config"), "{text}");
    // Issue 50, item 8: it says where it wrote and which MANPATH finds them, and with that
    // MANPATH `man -w` finds the page (before: it printed nothing).
    let said = String::from_utf8_lossy(&out.stdout);
    let manpath = said
        .split_whitespace()
        .find_map(|w| w.strip_prefix("MANPATH="))
        .unwrap_or_else(|| panic!("no MANPATH in {said}"));
    let found = Command::new("man")
        .args(["-w", "safe-mcp"])
        .env("MANPATH", manpath)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&found.stdout).contains("safe-mcp.1"),
        "{said}: {found:?}"
    );
}
