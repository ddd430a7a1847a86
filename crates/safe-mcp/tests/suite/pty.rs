//! Issue 55: process sessions on a terminal, over real MCP sessions. Each program runs on a
//! pty made in its own view, and the model reads the screen a person would see and types
//! text and named keys: python's REPL, `git add -p`, `less`, node's REPL, a resize; the
//! refusals (a pipeline, a shell, keys on a pipe, a size out of range); the trail (keys
//! redacted, screens by size); and all of it under an unprivileged server too.

use std::path::Path;

use serde_json::{Value, json};

use super::support::*;

/// Whether a server run as `uid` (`None`: this process's user) gives each command a pid
/// namespace of its own, and so a devpts and a terminal; if not, the skip and its reason.
fn terminals_for(uid: Option<u32>) -> bool {
    let here = super::view::namespaces_available(uid, true);
    if !here {
        skip(format!(
            "a server run as {uid:?} gets no pid namespace on this machine, so no terminal of its own (the start is SANDBOX_UNAVAILABLE)"
        ));
    }
    here
}

/// A sandbox whose commands are the REPLs, git, less and cat, and no shell.
fn terminal_sandbox() -> Sandbox {
    Sandbox::with(
        r#""python3", "git", "less", "node", "cat""#,
        "timeout_seconds = 20\nmax_output_bytes = 65536",
        "closed",
        &interpreter_rules(&["python3", "node"]),
    )
}

/// The screen of a read, its rows joined by newlines.
fn screen_of(r: &Value) -> String {
    r["detail"]["screen"]
        .as_array()
        .unwrap_or_else(|| panic!("no screen: {r}"))
        .iter()
        .map(|l| l.as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads `handle` until its screen shows `wanted` (a read waits for the screen to settle,
/// up to ten reads): the last read.
async fn screen_showing(s: &Session, handle: &str, wanted: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..10 {
        last = s
            .read_process(handle, json!({"wait_seconds": 3, "until": "quiet"}))
            .await;
        assert_eq!(last["code"], "OK", "{last}");
        if screen_of(&last).contains(wanted) {
            return last;
        }
    }
    panic!("the screen never showed {wanted:?}: {last}");
}

/// Types `data`, then presses `keys`.
async fn type_in(s: &Session, handle: &str, data: &str, keys: &[&str]) -> Value {
    let r = s
        .call(
            "write_process_input",
            json!({"handle": handle, "data": data, "keys": keys}),
        )
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    r
}

/// Starts `command` (an argv) on a terminal of 24 by 80.
async fn start_on_terminal(s: &Session, command: &[&str]) -> String {
    let started = s
        .call(
            "start_process",
            json!({"command": command, "pty": {"rows": 24, "cols": 80}}),
        )
        .await;
    assert_eq!(started["code"], "OK", "{started}");
    assert_eq!(
        started["detail"]["terminal"],
        json!({"rows": 24, "cols": 80})
    );
    started["detail"]["handle"].as_str().unwrap().to_owned()
}

/// Reads until the session has ended: the read that saw it.
async fn until_ended(s: &Session, handle: &str) -> Value {
    let r = s
        .read_process(handle, json!({"wait_seconds": 20, "until": "exit"}))
        .await;
    assert_eq!(r["detail"]["running"], false, "{r}");
    r
}

/// Python's REPL: its prompt, with the cursor after it; an expression evaluated; the
/// terminal ioctl that types into a terminal refused inside it (EPERM, seccomp); Ctrl-D
/// ends it with exit code 0.
async fn python_repl(s: &Session) {
    let handle = start_on_terminal(s, &["python3", "-q"]).await;
    let r = screen_showing(s, &handle, ">>> ").await;
    let (screen, cursor) = (screen_of(&r), &r["detail"]["cursor"]);
    let prompt_row = screen.lines().count() - 1;
    assert_eq!(cursor, &json!({"row": prompt_row, "col": 4}), "{r}");
    type_in(s, &handle, "6 * 7", &["Enter"]).await;
    let r = screen_showing(s, &handle, "42").await;
    assert!(screen_of(&r).contains(">>> 6 * 7\n42\n>>> "), "{r}");
    // The text block, all most clients hand the model: the screen a row a line.
    let raw = s
        .raw_call("read_process_output", json!({"handle": handle}))
        .await;
    let block = raw.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default();
    assert!(
        block.contains("rows) ---\n>>> 6 * 7\n42\n>>> \n"),
        "{block}"
    );
    // The program's own terminal, from inside: TIOCSTI would type into it.
    let inject = "import fcntl, termios; fcntl.ioctl(0, termios.TIOCSTI, b'x')";
    type_in(s, &handle, inject, &["Enter"]).await;
    let r = screen_showing(s, &handle, "Error").await;
    assert!(
        screen_of(&r).contains("PermissionError: [Errno 1] Operation not permitted"),
        "{r}"
    );
    type_in(s, &handle, "", &["Ctrl-D"]).await;
    let r = until_ended(s, &handle).await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn pythons_repl_runs_on_a_terminal_as_root_and_unprivileged() {
    if !terminals_for(None) {
        return;
    }
    let sb = terminal_sandbox();
    let s = sb.session().await;
    python_repl(&s).await;
    if rustix::process::geteuid().is_root() && terminals_for(Some(65534)) {
        let sb = terminal_sandbox();
        sb.give_to(65534);
        let s = sb.session_as(65534).await;
        python_repl(&s).await;
    }
}

/// The control for the ioctl above: the same line in the same REPL, run unconfined on a
/// terminal of the test's own, is not refused with EPERM (it types, or, where
/// `dev.tty.legacy_tiocsti` is 0, the kernel answers EIO).
#[test]
fn unconfined_the_same_ioctl_reaches_the_terminal() {
    let probe = "import fcntl, os, termios\nm, t = os.openpty()\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    fd = os.open(os.ttyname(t), os.O_RDWR)\n    try:\n        fcntl.ioctl(fd, termios.TIOCSTI, b'x'); print('typed')\n    except OSError as e:\n        print('errno', e.errno)\n    os._exit(0)\nos.waitpid(pid, 0)\n";
    let out = std::process::Command::new("python3")
        .args(["-c", probe])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.trim() == "typed" || said.trim() == "errno 5",
        "{out:?}"
    );
}

/// `git add -p`, answered hunk by hunk: yes to the first, no to the second; what is staged
/// afterwards is exactly the first.
#[tokio::test(flavor = "multi_thread")]
async fn git_add_p_takes_an_answer_per_hunk() {
    if !terminals_for(None) {
        return;
    }
    let sb = terminal_sandbox();
    let lines: Vec<String> = (1..=30).map(|i| format!("line {i}")).collect();
    sb.write_in_jail("f.txt", lines.join("\n") + "\n");
    let jail = sb.base().join("jail");
    host_git(&jail, &["init", "-q"]);
    host_git(&jail, &["add", "f.txt"]);
    host_git(&jail, &["commit", "-qm", "one"]);
    let mut changed = lines.clone();
    changed[1] = "line 2 changed".into();
    changed[27] = "line 28 changed".into();
    sb.write_in_jail("f.txt", changed.join("\n") + "\n");
    let s = sb.session().await;
    let handle = start_on_terminal(&s, &["git", "add", "-p"]).await;
    screen_showing(&s, &handle, "(1/2) Stage this hunk").await;
    type_in(&s, &handle, "y", &["Enter"]).await;
    screen_showing(&s, &handle, "(2/2) Stage this hunk").await;
    type_in(&s, &handle, "n", &["Enter"]).await;
    let r = until_ended(&s, &handle).await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    let staged = s.run("git diff --cached").await;
    let out = stdout_of(&staged);
    assert!(
        out.contains("+line 2 changed") && !out.contains("line 28 changed"),
        "{staged}"
    );
    let unstaged = s.run("git diff").await;
    assert!(
        stdout_of(&unstaged).contains("+line 28 changed"),
        "{unstaged}"
    );
}

/// `less` on a long file: the first page, the next page, a search, and `q`; as root and
/// under an unprivileged server.
#[tokio::test(flavor = "multi_thread")]
async fn less_pages_searches_and_quits() {
    for uid in server_uids().iter().filter(|uid| terminals_for(**uid)) {
        let sb = terminal_sandbox();
        let lines: Vec<String> = (1..=300).map(|i| format!("entry {i}")).collect();
        sb.write_in_jail("long.txt", lines.join("\n") + "\n");
        let s = match uid {
            Some(uid) => {
                sb.give_to(*uid);
                sb.session_as(*uid).await
            }
            None => sb.session().await,
        };
        page_through(&s).await;
    }
}

/// The pager's part of the test above, on the server `s`.
async fn page_through(s: &Session) {
    let handle = start_on_terminal(s, &["less", "long.txt"]).await;
    let r = screen_showing(s, &handle, "entry 23").await;
    let screen = screen_of(&r);
    assert!(
        screen.starts_with("entry 1\n") && !screen.contains("entry 24"),
        "{r}"
    );
    assert_eq!(
        r["detail"]["alternate_screen"], true,
        "a pager's own screen: {r}"
    );
    type_in(s, &handle, "", &["Space"]).await;
    let r = screen_showing(s, &handle, "entry 46").await;
    assert!(
        screen_of(&r).starts_with("entry 24\n"),
        "the next page: {r}"
    );
    type_in(s, &handle, "/entry 250", &["Enter"]).await;
    let r = screen_showing(s, &handle, "entry 260").await;
    assert!(
        screen_of(&r).starts_with("entry 250\n"),
        "the search's line on top: {r}"
    );
    type_in(s, &handle, "q", &[]).await;
    let r = until_ended(s, &handle).await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
}

/// Node's REPL: a prompt, an expression, `.exit`.
#[tokio::test(flavor = "multi_thread")]
async fn nodes_repl_evaluates_on_a_terminal() {
    if !terminals_for(None) {
        return;
    }
    if !Path::new("/usr/bin/node").exists() {
        skip("node is not installed at /usr/bin/node: .ci/run installs Debian's nodejs");
        return;
    }
    let sb = terminal_sandbox();
    let s = sb.session().await;
    let handle = start_on_terminal(&s, &["node"]).await;
    screen_showing(&s, &handle, "> ").await;
    type_in(
        &s,
        &handle,
        "[1, 2, 3].map(x => x * 7).join('-')",
        &["Enter"],
    )
    .await;
    screen_showing(&s, &handle, "'7-14-21'").await;
    type_in(&s, &handle, ".exit", &["Enter"]).await;
    let r = until_ended(&s, &handle).await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
}

/// A resize mid-run: the program gets SIGWINCH and reads the new size from its terminal;
/// the screen it is read from takes the size too.
#[tokio::test(flavor = "multi_thread")]
async fn a_program_sees_its_terminal_resized() {
    if !terminals_for(None) {
        return;
    }
    let sb = terminal_sandbox();
    let s = sb.session().await;
    let program = "import os, signal, time\nsignal.signal(signal.SIGWINCH, lambda *a: print('now', *os.get_terminal_size(), flush=True))\nprint('was', *os.get_terminal_size(), flush=True)\ntime.sleep(20)\n";
    let handle = start_on_terminal(&s, &["python3", "-c", program]).await;
    screen_showing(&s, &handle, "was 80 24").await;
    let r = s
        .call(
            "write_process_input",
            json!({"handle": handle, "resize": {"rows": 40, "cols": 120}}),
        )
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    let r = screen_showing(&s, &handle, "now 120 40").await;
    assert_eq!(
        r["detail"]["terminal"],
        json!({"rows": 40, "cols": 120}),
        "{r}"
    );
    s.call("stop_process", json!({"handle": handle})).await;
}

/// What a terminal does not change: a shell is still refused (it is not allowlisted), a
/// pipeline is refused on a terminal, keys and resizes need a terminal, an unknown key and a
/// size out of range are refused, and a terminal has no stdin to close.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_loosens_nothing_and_bad_input_is_refused() {
    if !terminals_for(None) {
        return;
    }
    let sb = terminal_sandbox();
    let s = sb.session().await;
    let start = |args: Value| s.call("start_process", args);
    let pty = json!({"rows": 24, "cols": 80});
    let r = start(json!({"command": ["bash"], "pty": pty})).await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let r = start(json!({"command": "cat notes.txt | cat", "pty": pty})).await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    assert!(reason_of(&r).contains("one program"), "{r}");
    let r = start(json!({"command": ["cat"], "pty": {"rows": 0, "cols": 80}})).await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    let r = start(json!({"command": ["cat"], "pty": {"rows": 24}})).await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    // A pipe session takes no keys.
    let piped = s.start_process(json!({"command": ["cat"]})).await;
    let r = s
        .call(
            "write_process_input",
            json!({"handle": piped, "keys": ["Enter"]}),
        )
        .await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    assert!(reason_of(&r).contains("pty"), "{r}");
    s.call("stop_process", json!({"handle": piped})).await;
    let handle = start_on_terminal(&s, &["cat"]).await;
    for args in [
        json!({"handle": handle, "keys": ["Hyper-Q"]}),
        json!({"handle": handle, "data": "x", "close_stdin": true}),
        json!({"handle": handle, "resize": {"rows": 9000, "cols": 80}}),
        json!({"handle": handle}),
    ] {
        let r = s.call("write_process_input", args.clone()).await;
        assert_eq!(r["code"], "INVALID_REQUEST", "{args}: {r}");
    }
    // Nothing of the refused writes reached it.
    type_in(&s, &handle, "hello", &["Enter"]).await;
    let r = screen_showing(&s, &handle, "hello\nhello").await;
    assert!(!screen_of(&r).contains('x'), "{r}");
    s.call("stop_process", json!({"handle": handle})).await;
}

/// The trail keeps the keys sent, redacted, and each screen by its size, never its text;
/// a secret on the screen is redacted in the result.
#[tokio::test(flavor = "multi_thread")]
async fn the_trail_keeps_keys_redacted_and_screens_by_size() {
    if !terminals_for(None) {
        return;
    }
    let sb = terminal_sandbox();
    let s = sb.session().await;
    let handle = start_on_terminal(&s, &["cat"]).await;
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    type_in(
        &s,
        &handle,
        &format!("token {secret}"),
        &["Enter", "Ctrl-D"],
    )
    .await;
    let r = until_ended(&s, &handle).await;
    let all = r.to_string();
    assert!(
        all.contains("token ") && !all.contains(&secret[4..20]),
        "{r}"
    );
    let records = sb.audit_records();
    let write = records
        .iter()
        .find(|rec| rec["tool"] == "write_process_input" && rec["args"]["keys"].is_array())
        .unwrap_or_else(|| panic!("no write record: {records:?}"));
    assert_eq!(write["args"]["keys"], json!(["Enter", "Ctrl-D"]), "{write}");
    assert!(!write.to_string().contains(&secret[4..20]), "{write}");
    let read = records
        .iter()
        .find(|rec| rec["tool"] == "read_process_output" && rec["args"]["screen_rows"].is_number())
        .unwrap_or_else(|| panic!("no read record: {records:?}"));
    assert!(read["args"]["screen_bytes"].as_u64().unwrap() > 0, "{read}");
    let reads: String = records
        .iter()
        .filter(|rec| rec["tool"] == "read_process_output")
        .map(Value::to_string)
        .collect();
    assert!(
        !reads.contains("token"),
        "no screen text in the trail: {reads}"
    );
}

/// Held like every session: one nobody reads or writes is killed as idle, its whole tree
/// (the program on the terminal and what it started), and the read says so.
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_session_on_a_terminal_is_killed_whole() {
    if !terminals_for(None) {
        return;
    }
    let sb = Sandbox::with(
        r#""python3""#,
        "timeout_seconds = 20",
        "closed",
        &format!(
            "{}\n[terminal.sessions]\nidle_timeout_seconds = 1\n",
            interpreter_rules(&["python3"])
        ),
    );
    let s = sb.session().await;
    let marker = "pty-idle-child-7f3a";
    let program = format!(
        "import subprocess, time\nsubprocess.Popen(['python3', '-c', 'import time; time.sleep(60)', '{}' + '{}'])\nprint('up', flush=True)\ntime.sleep(60)\n",
        &marker[..8],
        &marker[8..]
    );
    let handle = start_on_terminal(&s, &["python3", "-c", &program]).await;
    screen_showing(&s, &handle, "up").await;
    assert_eq!(live_processes_with(marker).len(), 1, "the child runs");
    let mut listed = Value::Null;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        listed = s.call("list_processes", json!({})).await;
        if listed["detail"]["processes"][0]["running"] == false {
            break;
        }
    }
    assert_eq!(
        listed["detail"]["processes"][0]["ended"], "idle",
        "{listed}"
    );
    assert!(
        eventually(5, || live_processes_with(marker).is_empty()).await,
        "the whole tree is gone"
    );
}
