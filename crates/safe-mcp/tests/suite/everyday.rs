//! Everyday commands that must keep working under the whole confinement, and the bounds
//! that keep a runaway command from costing a client its turn (issues 49 and 50): tar's
//! compressors under the exec allowlist, and a flood of output stopped by its total.

use serde_json::{Value, json};

use super::builders::stdout;
use super::support::{Sandbox, Session, detail_str, installed, reason_of, sh_call, stdout_of};

fn sandbox(limits: &str) -> Sandbox {
    Sandbox::builder()
        .allow(&["tar", "yes", "cat", "echo", "head"])
        .limits(limits)
        .namespaces("auto")
        .build()
}

/// Issue 49, item 3: `tar czf` failed with `gzip: Cannot exec: Permission denied` once the
/// exec allowlist was on. The catalog says what tar starts (its compressors), and its stages
/// alone may run them: every compressor round-trips an archive, and the compressor is still
/// refused to any other program (`cat` cannot become gzip through a nested exec).
#[tokio::test(flavor = "multi_thread")]
async fn tar_runs_its_compressors_and_nothing_else_gets_them() {
    let sb = sandbox("timeout_seconds = 60\nmax_output_bytes = 65536");
    std::fs::create_dir_all(sb.jail.join("src")).unwrap();
    sb.write_in_jail("src/a.txt", "alpha\n");
    let s = sb.session().await;
    let mut tried = 0;
    for (flag, program, suffix) in [
        ("z", "gzip", "tgz"),
        ("j", "bzip2", "tbz"),
        ("J", "xz", "txz"),
    ] {
        if !installed(program) {
            continue;
        }
        tried += 1;
        let archive = format!("a.{suffix}");
        let r = s.run(&format!("tar c{flag}f {archive} src")).await;
        assert_eq!(
            (r["code"].as_str(), r["detail"]["exit_code"].as_i64()),
            (Some("OK"), Some(0)),
            "tar c{flag}f: {r}"
        );
        let r = s.run(&format!("tar t{flag}f {archive}")).await;
        assert!(stdout(&r).contains("src/a.txt"), "tar t{flag}f: {r}");
        std::fs::create_dir_all(sb.jail.join(format!("out-{suffix}"))).unwrap();
        let r = s
            .run(&format!("tar x{flag}f {archive} -C out-{suffix}"))
            .await;
        assert_eq!(r["detail"]["exit_code"], 0, "tar x{flag}f: {r}");
        assert_eq!(
            std::fs::read_to_string(sb.jail.join(format!("out-{suffix}/src/a.txt"))).unwrap(),
            "alpha\n"
        );
    }
    assert!(tried > 0, "gzip is part of every Debian system");
    // `-a` chooses the compressor by the archive's suffix.
    let r = s.run("tar caf b.tar.gz src").await;
    assert_eq!(r["detail"]["exit_code"], 0, "tar caf: {r}");
    // A compressor named by the caller (`-I`, `--use-compress-program`) is still an escape.
    let r = s.run("tar -I gzip -cf c.tgz src").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
}

/// Issue 50, item 2: a command that prints without end is stopped once its output passes
/// `max_output_total_bytes`: `OUTPUT_TRUNCATED`, `ok: true`, the limit named, head and tail
/// kept; not a `TIMEOUT` at a deadline far away.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_output_is_stopped_by_its_total_not_its_timeout() {
    let sb =
        sandbox("timeout_seconds = 600\nmax_output_bytes = 4096\nmax_output_total_bytes = 4194304");
    let s: Session = sb.session().await;
    let r = s
        .run_with(json!({"command": "yes", "timeout_seconds": 600}))
        .await;
    assert_eq!(r["code"], "OUTPUT_TRUNCATED", "{r}");
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["detail"]["limit"], "max_output_total_bytes", "{r}");
    assert!(reason_of(&r).contains("max_output_total_bytes"), "{r}");
    assert!(stdout_of(&r).starts_with("y\ny\n"), "{r}");
    let outcome = sb
        .audit_records()
        .into_iter()
        .rev()
        .find(|a| a["kind"] == "outcome")
        .unwrap();
    assert_eq!(outcome["code"], "OUTPUT_TRUNCATED", "{outcome}");
    // A long but finite output is not a flood: it ends on its own with its head and tail.
    let r = s.run("yes | head -n 200000").await;
    assert_eq!(r["code"], "OUTPUT_TRUNCATED", "{r}");
    assert!(r["detail"].get("limit").is_none(), "{r}");
}

/// Issue 49, item 3: a `#!` script the allowlist lets run, whose interpreter it does not, is
/// refused by the kernel on the script's path; the note names the interpreter, which is
/// what the operator would have to allow (before: a python traceback and no line).
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_scripts_note_names_its_interpreter() {
    let sb = Sandbox::builder()
        .allow(&["python3", "echo"])
        .limits("timeout_seconds = 30")
        .extra("[terminal.sandbox]\nexec_in_jail = true\n")
        .build();
    let script = sb.jail.join("x.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = sb.session().await;
    let r = s.py("import subprocess; subprocess.run(['./x.sh'])").await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    let reason = reason_of(&r);
    assert!(
        reason.contains("`./x.sh` is a #! script run by `/bin/sh`"),
        "{r}"
    );
    assert!(
        r["detail"]["not_executable"]
            .to_string()
            .contains("/bin/sh"),
        "{r}"
    );
}

/// Issue 50, item 7: with the network off, a name that does not resolve gets a note saying
/// the policy has no network and which key would allow a domain.
#[tokio::test(flavor = "multi_thread")]
async fn a_name_that_does_not_resolve_says_the_policy_has_no_network() {
    let sb = Sandbox::allowing(&["python3"], "timeout_seconds = 30");
    let s = sb.session().await;
    let r = s
        .py("import socket; socket.getaddrinfo('example.com', 443)")
        .await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    let reason = reason_of(&r);
    assert!(
        reason.contains("no network") && reason.contains("allow_domains"),
        "{r}"
    );
}

/// Issue 50, item 7: `explain_command` of a command with a `NAME=value` prefix names the
/// program (it said `` `RUST_BACKTRACE=1` is allowlisted ``) and shows the environment the
/// command would get.
#[tokio::test(flavor = "multi_thread")]
async fn explaining_a_prefixed_command_names_the_program_and_its_environment() {
    let sb = Sandbox::allowing(&["printenv"], "timeout_seconds = 10");
    let s = sb.session().await;
    let r = s.explain("RUST_BACKTRACE=1 printenv RUST_BACKTRACE").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["reason"], "`printenv` is allowlisted", "{r}");
    assert!(
        r["detail"]["stages"]
            .to_string()
            .contains("RUST_BACKTRACE=1"),
        "{r}"
    );
}

/// Issue 50, item 7: under the python profile a session's output arrives as it is printed
/// (a dev server's banner), not when the process exits: Python buffers a pipe otherwise.
#[tokio::test(flavor = "multi_thread")]
async fn a_python_sessions_output_arrives_as_it_is_printed() {
    let sb = Sandbox::allowing(&["echo"], "timeout_seconds = 30");
    super::builders::with_profile(&sb, "python");
    let s = super::exec_allowlist::session(&sb).await;
    let handle = s.start_process(json!({"command": ["python3", "-c", "print('serving on 8000'); import time; time.sleep(30)"]})).await;
    let read = s.read_process(&handle, json!({"wait_seconds": 10})).await;
    assert!(stdout(&read).contains("serving on 8000"), "{read}");
    let _ = s.call("stop_process", json!({"handle": handle})).await;
}

/// Issue 50, item 7: in the host view a socket Landlock refuses (EACCES: a bare Python
/// PermissionError) gets the note that says why and which key allows a port.
#[tokio::test(flavor = "multi_thread")]
async fn a_socket_refused_in_the_host_view_says_so() {
    let sb = Sandbox::builder()
        .allow(&["python3"])
        .limits("timeout_seconds = 30")
        .extra("[terminal.sandbox]\nnamespaces = \"off\"\n")
        .build();
    let s = sb.session().await;
    let r = s
        .py("import socket; s = socket.socket(); s.connect(('127.0.0.1', 9))")
        .await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert!(reason_of(&r).contains("listen_ports"), "{r}");
}

/// Issue 50, item 7: what a person is asked says the rule's own `reason`, not
/// `(rules[0] confirm_args)`.
#[tokio::test(flavor = "multi_thread")]
async fn the_approval_text_gives_the_rules_own_reason() {
    let sb = Sandbox::new(
        "[[terminal.rules]]\ncommand = \"touch\"\nconfirm_args = [\"deploy\"]\nreason = \"a deploy reaches production\"\n",
    );
    let s = sb.session().await;
    let r = s.explain("touch deploy").await;
    assert_eq!(r["detail"]["needs_approval"], true, "{r}");
    let text = r.to_string();
    assert!(text.contains("a deploy reaches production"), "{r}");
    assert!(!text.contains("confirm_args)"), "{r}");
}

/// The files server's text block lists a folder's entries and a plan's moves a line each
/// (issue 50.7): 19 entries were one line of JSON of 4,147 characters.
#[tokio::test(flavor = "multi_thread")]
async fn the_files_servers_lists_read_as_lines() {
    let ws = super::files::Workspace::new(false);
    for i in 0..19 {
        let name = ws.root.join(format!("scan-{i:02}.pdf"));
        std::fs::write(&name, "%PDF").unwrap();
        super::files::backdate(&name);
    }
    let s = ws.session().await;
    for (tool, header, lines) in [
        ("list_files", "--- entries (19) ---", 19),
        ("plan_organize", "--- moves (19) ---", 19),
    ] {
        let result = s.raw_call(tool, json!({})).await;
        let text = result
            .content
            .iter()
            .find_map(|c| c.as_text().map(|t| t.text.clone()))
            .unwrap();
        let after: Vec<&str> = text
            .split_once(header)
            .unwrap_or_else(|| panic!("{tool}: no {header}:\n{text}"))
            .1
            .lines()
            .skip(1)
            .take(lines)
            .collect();
        assert_eq!(after.len(), lines, "{tool}:\n{text}");
        for line in after {
            assert!(
                line.starts_with("scan-") && line.contains("Documents/") && line.len() < 120,
                "{tool}: {line:?} in\n{text}"
            );
        }
        assert!(!text.contains("[{"), "{tool}: JSON in the text:\n{text}");
    }
}

/// Issue 50.3: a 300 KB build log under the built-in limits reads within a client's share of
/// a turn (~8k tokens: under 16,000 characters, as `benches/large_outputs.py` measured with a
/// real tokenizer at ~2.5 characters a token for such a log) and keeps its first line, its
/// last line and the error from its middle with its line number.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_build_log_keeps_its_start_end_and_errors_within_a_clients_share() {
    let sb = Sandbox::builder().limits("timeout_seconds = 20").build();
    let mut log = String::new();
    let mut n = 0;
    while log.len() < 300_000 {
        n += 1;
        log.push_str(&format!(
            "   Compiling crate-{n:04} v0.1.0 (/work/src/crate-{n:04})\n"
        ));
        if n == 1500 {
            log.push_str("error[E0308]: mismatched types --> src/parse.rs:212:17\n");
        }
    }
    log.push_str("error: could not compile `crate-1500` (lib) due to 1 previous error\n");
    sb.write_in_jail("build.log", &log);
    let s = sb.session().await;
    let result = s
        .raw_call("run_command", json!({"command": "cat build.log"}))
        .await;
    let text = result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .unwrap();
    assert!(text.len() < 16_000, "{} characters", text.len());
    for want in [
        "Compiling crate-0001 ",
        "1501: error[E0308]: mismatched types",
        "error: could not compile `crate-1500`",
        "truncated: stdout",
    ] {
        assert!(text.contains(want), "{want:?} is not in:\n{text}");
    }
    // read_file pages the same file by lines, each page within the same share.
    let page = s
        .call(
            "read_file",
            json!({"path": "build.log", "offset": 1490, "limit": 20}),
        )
        .await;
    assert!(
        detail_str(&page, "content").contains("error[E0308]"),
        "{page}"
    );
    let all = s.call("read_file", json!({"path": "build.log"})).await;
    assert!(reason_of(&all).contains("read on with offset"), "{all}");
    assert!(detail_str(&all, "content").len() <= 12 * 1024);
}

/// `echo hi` until its code is `code` (`jail_bytes` is measured in the background, so the
/// verdict changes a moment after the call that changed the usage), at most 50 times 100 ms
/// apart; the last result.
async fn echo_until(s: &Session, code: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..50 {
        last = s.run("echo hi").await;
        if last["code"] == code {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    last
}

/// Issue 49: `jail_bytes` counts the calls' private TMPDIRs too (a session's lives as long
/// as the session): a session that leaves 3 MB there holds the next command off, with the
/// key in the reason, and once it is stopped (its TMPDIR removed) commands run again.
#[tokio::test(flavor = "multi_thread")]
async fn jail_bytes_counts_what_a_session_leaves_in_its_tmpdir() {
    let sb = Sandbox::allowing(
        &["head", "echo", "sh", "sleep"],
        "timeout_seconds = 20\njail_bytes = 1048576",
    );
    let s = sb.session().await;
    let handle = s
        .start_process(sh_call(
            "head -c 3000000 /dev/zero > \"$TMPDIR/big\"; echo written; sleep 60",
        ))
        .await;
    let read = s
        .read_process(&handle, json!({"wait_seconds": 10, "until": "output"}))
        .await;
    assert!(stdout(&read).contains("written"), "{read}");
    // The measurement runs in the background after calls.
    let refused = echo_until(&s, "POLICY_DENIED").await;
    let reason = refused["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("jail_bytes = 1048576"), "{refused}");
    let stopped = s.call("stop_process", json!({"handle": handle})).await;
    assert_eq!(stopped["code"], "OK", "{stopped}");
    let ran = echo_until(&s, "OK").await;
    assert_eq!(ran["detail"]["stdout"], "hi\n", "{ran}");
}

/// Round 3 (issue 27), item 14: `jail_bytes` bounds what the jail and the caches hold: once a call leaves more,
/// the next command is refused with the total and the key, and runs again once space is
/// freed (by the operator here).
#[tokio::test(flavor = "multi_thread")]
async fn jail_bytes_bounds_what_the_jail_holds() {
    let sb = Sandbox::allowing(
        &["head", "echo", "sh"],
        "timeout_seconds = 20\njail_bytes = 1048576",
    );
    let s = sb.session().await;
    let r = s.sh("head -c 3000000 /dev/zero > big").await;
    assert_eq!(r["code"], "OK", "{r}");
    // The measurement runs in the background after the call.
    let refused = echo_until(&s, "POLICY_DENIED").await;
    let reason = refused["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("jail_bytes = 1048576"), "{refused}");
    std::fs::remove_file(sb.jail.join("big")).unwrap();
    let r = s.run("echo hi").await;
    assert_eq!(stdout(&r), "hi\n", "{r}");
}
