//! The file tools (issue 31): read_file, write_file and edit_file over a real MCP session,
//! on the jail commands use, against what a command can plant there.

use serde_json::{Value, json};

use super::support::{Sandbox, Session, reason_of};

fn sandbox(extra: &str) -> Sandbox {
    Sandbox::builder()
        .allow(&["sh", "cat", "git", "ln", "mkfifo"])
        .roomy(20)
        .extra(extra)
        .build()
}

/// Kills the server of `sb`'s policy at once (SIGKILL), as a crash would.
fn kill_server(sb: &Sandbox) {
    let pattern = format!("terminal --config {}", sb.policy.display());
    let _ = std::process::Command::new("pkill")
        .args(["-KILL", "-f", &pattern])
        .status();
}

#[tokio::test(flavor = "multi_thread")]
async fn read_edit_write_round_trip() {
    let sb = sandbox("");
    let s = sb.session().await;
    // write_file makes parents and reports what it wrote.
    let r = s
        .write_file("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n")
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["created"], true, "{r}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("src/lib.rs")).unwrap(),
        "fn a() {}\nfn b() {}\nfn c() {}\n"
    );
    // read_file's text block numbers the lines, as `cat -n` does.
    let raw = s.raw_call("read_file", json!({"path": "src/lib.rs"})).await;
    let text = raw.content[0].as_text().unwrap().text.clone();
    assert!(
        text.contains("     1\tfn a() {}\n     2\tfn b() {}\n     3\tfn c() {}\n"),
        "{text}"
    );
    // read_file by lines.
    let r = s
        .call(
            "read_file",
            json!({"path": "src/lib.rs", "offset": 2, "limit": 1}),
        )
        .await;
    assert_eq!(r["detail"]["content"], "fn b() {}\n", "{r}");
    assert_eq!(
        (
            r["detail"]["first_line"].as_u64(),
            r["detail"]["lines"].as_u64(),
            r["detail"]["total_lines"].as_u64()
        ),
        (Some(2), Some(1), Some(3)),
        "{r}"
    );
    // edit_file: a dry run changes nothing; the edit returns the diff.
    let edit = json!({"path": "src/lib.rs", "edits": [{"old_text": "fn b() {}", "new_text": "fn b() { a() }"}]});
    let mut dry = edit.clone();
    dry["dry_run"] = json!(true);
    let r = s.call("edit_file", dry).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(
        r["detail"]["diff"]
            .as_str()
            .unwrap()
            .contains("+fn b() { a() }"),
        "{r}"
    );
    assert!(
        std::fs::read_to_string(sb.jail.join("src/lib.rs"))
            .unwrap()
            .contains("fn b() {}\n")
    );
    let r = s.call("edit_file", edit).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(
        std::fs::read_to_string(sb.jail.join("src/lib.rs"))
            .unwrap()
            .contains("fn b() { a() }\n")
    );
    // A miss names the edit and the nearest lines; nothing changes (all or nothing).
    let before = std::fs::read_to_string(sb.jail.join("src/lib.rs")).unwrap();
    let r = s
        .call(
            "edit_file",
            json!({"path": "src/lib.rs", "edits": [
        {"old_text": "fn a() {}", "new_text": "fn a2() {}"},
        {"old_text": "fn cc() {}", "new_text": "x"}]}),
        )
        .await;
    assert_eq!(r["code"], "CONFLICT", "{r}");
    let reason = reason_of(&r);
    assert!(
        reason.starts_with("edit 2:") && reason.contains("3: fn c() {}"),
        "{reason}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("src/lib.rs")).unwrap(),
        before
    );
    replace_all_create_only_and_modes(&sb, &s).await;
    // No temporary file is left beside a target.
    let left: Vec<_> = std::fs::read_dir(&sb.jail)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".safe-mcp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Two occurrences need replace_all; create_only refuses an existing file; a replace keeps
/// the file's mode.
async fn replace_all_create_only_and_modes(sb: &Sandbox, s: &Session) {
    s.write_file("twice.txt", "x\nx\n").await;
    let r = s
        .call(
            "edit_file",
            json!({"path": "twice.txt", "edits": [{"old_text": "x", "new_text": "y"}]}),
        )
        .await;
    assert_eq!(r["code"], "CONFLICT", "{r}");
    let r = s.call("edit_file", json!({"path": "twice.txt", "edits": [{"old_text": "x", "new_text": "y", "replace_all": true}]})).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("twice.txt")).unwrap(),
        "y\ny\n"
    );
    // create_only refuses an existing file; a replace keeps the mode.
    let r = s
        .call(
            "write_file",
            json!({"path": "twice.txt", "content": "z", "create_only": true}),
        )
        .await;
    assert_eq!(r["code"], "CONFLICT", "{r}");
    sb.write_in_jail("run.sh", "#!/bin/sh\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        sb.jail.join("run.sh"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    let r = s.write_file("run.sh", "#!/bin/sh\necho hi\n").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(
        std::fs::metadata(sb.jail.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o750
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_command_plants_is_never_followed_or_waited_on() {
    let sb = sandbox("");
    let outside = sb.base().join("outside.txt");
    std::fs::write(&outside, "outside\n").unwrap();
    let s = sb.session().await;
    // A symlink to a file outside, and a symlinked folder, planted by a command.
    let r = s
        .sh(&format!(
            "ln -s {} link.txt; ln -s {} dir; mkfifo fifo; ln notes.txt hard.txt",
            outside.display(),
            sb.base().display()
        ))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    for (tool, args) in [
        ("read_file", json!({"path": "link.txt"})),
        (
            "write_file",
            json!({"path": "link.txt", "content": "pwned"}),
        ),
        (
            "write_file",
            json!({"path": "dir/outside.txt", "content": "pwned"}),
        ),
        (
            "edit_file",
            json!({"path": "link.txt", "edits": [{"old_text": "outside", "new_text": "pwned"}]}),
        ),
    ] {
        let r = s.call(tool, args.clone()).await;
        assert_eq!(r["code"], "PATH_ESCAPE", "{tool} {args}: {r}");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
    // A FIFO answers at once, refused; so does a write to it.
    for (tool, args) in [
        ("read_file", json!({"path": "fifo"})),
        ("write_file", json!({"path": "fifo", "content": "x"})),
    ] {
        let r = s.call(tool, args).await;
        assert_eq!(r["code"], "POLICY_DENIED", "{tool}: {r}");
        assert!(reason_of(&r).contains("FIFO"), "{r}");
    }
    // A file with a second hard link is read, never written.
    let r = s.call("read_file", json!({"path": "hard.txt"})).await;
    assert_eq!(r["code"], "OK", "{r}");
    let r = s.write_file("hard.txt", "x").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("hard links"), "{r}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("notes.txt")).unwrap(),
        "alpha\nbeta\ngamma\n"
    );
    // Outside the jail, by path.
    for path in ["../outside.txt", "/etc/hostname", outside.to_str().unwrap()] {
        let r = s.call("read_file", json!({"path": path})).await;
        assert_eq!(r["code"], "PATH_ESCAPE", "{path}: {r}");
    }
    // A device (made by the operator: commands cannot), as root.
    if rustix::process::geteuid().is_root() {
        let dev = sb.jail.join("null-dev");
        let made = std::process::Command::new("mknod")
            .arg(&dev)
            .args(["c", "1", "3"])
            .status()
            .unwrap();
        assert!(made.success());
        let r = s.call("read_file", json!({"path": "null-dev"})).await;
        assert_eq!(r["code"], "POLICY_DENIED", "{r}");
        assert!(reason_of(&r).contains("device"), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_sizes_protected_paths_and_the_switches() {
    let sb = sandbox("[terminal.files]\nmax_file_bytes = 4096\n");
    sb.write_in_jail(
        ".env",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nDEBUG=1\n",
    );
    sb.write_in_jail("big.txt", "x".repeat(5000));
    let s = sb.session().await;
    // Read redacted; replace refused; an edit that carries a marker refused; one around it works.
    let r = s.call("read_file", json!({"path": ".env"})).await;
    let content = r["detail"]["content"].as_str().unwrap();
    assert!(
        !content.contains("wJalrXUtn") && content.contains("[REDACTED:"),
        "{r}"
    );
    let r = s.write_file(".env", "DEBUG=0\n").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let r = s.call("edit_file", json!({"path": ".env", "edits": [{"old_text": content.lines().next().unwrap(), "new_text": "X=1"}]})).await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("edit around it"), "{r}");
    let r = s
        .call(
            "edit_file",
            json!({"path": ".env", "edits": [{"old_text": "DEBUG=1", "new_text": "DEBUG=0"}]}),
        )
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    let env = std::fs::read_to_string(sb.jail.join(".env")).unwrap();
    assert!(
        env.contains("wJalrXUtnFEMI") && env.contains("DEBUG=0"),
        "{env}"
    );
    // Sizes.
    let r = s.call("read_file", json!({"path": "big.txt"})).await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("max_file_bytes"), "{r}");
    let r = s
        .call(
            "write_file",
            json!({"path": "new.txt", "content": "y".repeat(5000)}),
        )
        .await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(!sb.jail.join("new.txt").exists());
    // Protected paths, with the terminal's reason.
    let r = s.write_file(".vscode/tasks.json", "{}").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("protected path"), "{r}");
    // Binary files are reported by their size.
    sb.write_in_jail("blob.bin", [0u8, 1, 2, 3]);
    let r = s.call("read_file", json!({"path": "blob.bin"})).await;
    assert_eq!(
        (
            r["detail"]["binary"].as_bool(),
            r["detail"]["bytes"].as_u64()
        ),
        (Some(true), Some(4)),
        "{r}"
    );
    drop(s);
    // The switches.
    for (switch, read, write) in [
        ("enabled = false", "POLICY_DENIED", "POLICY_DENIED"),
        ("read_only = true", "OK", "POLICY_DENIED"),
    ] {
        let sb = sandbox(&format!("[terminal.files]\n{switch}\n"));
        let s = sb.session().await;
        assert_eq!(
            s.call("read_file", json!({"path": "notes.txt"})).await["code"],
            read,
            "{switch}"
        );
        assert_eq!(s.write_file("n.txt", "x").await["code"], write, "{switch}");
        assert!(!sb.jail.join("n.txt").exists());
        // describe_policy and explain_command say which answer.
        let e = s
            .call("explain_command", json!({"command": "cat notes.txt"}))
            .await;
        let d = s.call("describe_policy", json!({"verbose": true})).await;
        for tools in [&e["detail"]["file_tools"], &d["detail"]["file_tools"]] {
            assert_eq!(tools["read_file"], read == "OK", "{switch}: {tools}");
            assert_eq!(tools["write_file"], false, "{switch}: {tools}");
        }
    }
}

/// The attempt record, with the old content's hash, is durable before the write; the
/// outcome names the new one's. Under fail-closed an unwritable trail writes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn every_write_is_audited_before_it_happens() {
    let sb = sandbox("");
    let s = sb.session().await;
    let r = s.write_file("notes.txt", "new\n").await;
    assert_eq!(r["code"], "OK", "{r}");
    let records = sb.audit_records();
    let attempt = records
        .iter()
        .rfind(|r| r["kind"] == "attempt" && r["tool"] == "write_file")
        .unwrap();
    let outcome = records
        .iter()
        .rfind(|r| r["kind"] == "outcome" && r["tool"] == "write_file")
        .unwrap();
    assert!(attempt["seq"].as_u64() < outcome["seq"].as_u64());
    use sha2::Digest;
    let old = hex::encode(sha2::Sha256::digest(b"alpha\nbeta\ngamma\n"));
    let new = hex::encode(sha2::Sha256::digest(b"new\n"));
    assert_eq!(attempt["args"]["sha256_before"], old, "{attempt}");
    assert_eq!(outcome["file"]["sha256_after"], new, "{outcome}");
    assert_eq!(
        (
            outcome["file"]["lines_added"].as_u64(),
            outcome["file"]["lines_removed"].as_u64()
        ),
        (Some(1), Some(3)),
        "{outcome}"
    );
    // A read is recorded as a read-only call.
    s.call("read_file", json!({"path": "notes.txt"})).await;
    assert!(sb.has_record(|r| r["kind"] == "outcome" && r["tool"] == "read_file"));
    // The trail goes away: nothing is written.
    drop(s);
    let s = sb.session().await;
    std::fs::remove_file(&sb.audit).unwrap();
    std::fs::create_dir(&sb.audit).unwrap();
    let r = s.write_file("notes.txt", "unaudited\n").await;
    assert_eq!(r["code"], "AUDIT_UNAVAILABLE", "{r}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("notes.txt")).unwrap(),
        "new\n"
    );
}

/// A server killed at any moment of a write leaves the old file or the new one, never a
/// mix, and the next server works on it.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_killed_midway_leaves_old_or_new() {
    let sb = sandbox("[terminal.files]\nmax_file_bytes = 16777216\n");
    let old = "o".repeat(3 << 20);
    let new = "n".repeat(3 << 20);
    sb.write_in_jail("big.txt", &old);
    for round in 0..8u64 {
        let s = sb.session().await;
        let Value::Object(args) = json!({"path": "big.txt", "content": new}) else {
            unreachable!()
        };
        // The raw call: its answer may never come (the server dies), which is the point.
        let write = s
            .client
            .call_tool(rmcp::model::CallToolRequestParams::new("write_file").with_arguments(args));
        let kill = async {
            tokio::time::sleep(std::time::Duration::from_millis(round * 7)).await;
            kill_server(&sb);
        };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            tokio::select! {
                _ = write => {},
                _ = kill => {},
            }
        })
        .await;
        kill_server(&sb);
        drop(s);
        let now = std::fs::read_to_string(sb.jail.join("big.txt")).unwrap();
        assert!(
            now == old || now == new,
            "round {round}: a mix of {} bytes",
            now.len()
        );
        sb.write_in_jail("big.txt", &old);
    }
    // What a killed write left beside the file goes with the next write of it.
    let s = sb.session().await;
    let r = s.write_file("big.txt", "done\n").await;
    assert_eq!(r["code"], "OK", "{r}");
    let left: Vec<_> = std::fs::read_dir(&sb.jail)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".safe-mcp"))
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The official TypeScript SDK (what Claude Code, Cursor and Inspector build on) drives the
/// file tools, checking every result against its outputSchema. Its package is installed
/// from npm into `target/` on first use.
#[test]
fn the_typescript_sdk_drives_the_file_tools() {
    let sdk = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ts-sdk");
    if !sdk.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        std::fs::create_dir_all(&sdk).unwrap();
        let out = std::process::Command::new("npm")
            .args([
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "@modelcontextprotocol/sdk@1",
            ])
            .current_dir(&sdk)
            .output()
            .expect("npm is needed for the TypeScript SDK test (.ci/run installs it)");
        assert!(out.status.success(), "npm install: {out:?}");
    }
    let sb = sandbox("");
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ts/file_tools_client.mjs");
    let out = std::process::Command::new("node")
        .arg(&script)
        .arg(&sdk)
        .arg(super::support::BIN)
        .arg(&sb.policy)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("file-tool results validated"), "{text}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("src/index.js")).unwrap(),
        "export const answer = 42;\n"
    );
}
