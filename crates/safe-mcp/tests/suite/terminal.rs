//! The terminal server over a real MCP session: one test per result code, the parsing and
//! evaluation examples of the issue, the environment and the audit trail. The process-tree
//! bounds (timeout, flood, cancel) are in `trees.rs`, redaction in `redaction.rs`.

use serde_json::json;

use super::support::{Sandbox, Session, reason_of, stderr_of, stdout_of};

#[tokio::test(flavor = "multi_thread")]
async fn tools_are_listed_with_schemas_annotations_and_our_server_info() {
    let (_sb, s) = Sandbox::started("").await;
    let info = s.client.peer_info().unwrap().server_info.clone().unwrap();
    assert_eq!(info.name, "safe-mcp");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let tools = s.client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "describe_policy",
            "edit_file",
            "explain_command",
            "list_processes",
            "read_file",
            "read_process_output",
            "run_command",
            "start_process",
            "stop_process",
            "write_file",
            "write_process_input"
        ]
    );
    for tool in &tools {
        let schema = tool
            .output_schema
            .as_ref()
            .expect("every tool declares an outputSchema");
        assert!(schema["properties"].get("code").is_some(), "{}", tool.name);
        // Shaped for clients that validate every result: flat, a plain enum, no formats.
        let text = serde_json::to_string(schema).unwrap();
        for shape in ["$ref", "$defs", "\"format\"", "oneOf"] {
            assert!(!text.contains(shape), "{}: {shape} in {text}", tool.name);
        }
        let input = serde_json::to_string(&*tool.input_schema).unwrap();
        assert!(!input.contains("\"format\""), "{}: {input}", tool.name);
        assert_eq!(
            schema["properties"]["code"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(12),
            "{}",
            tool.name
        );
        let a = tool.annotations.as_ref().expect("annotations");
        // The tools that only look: describe, explain, list, reading a session's output,
        // and reading a file.
        let read_only = matches!(
            tool.name.as_ref(),
            "describe_policy"
                | "explain_command"
                | "list_processes"
                | "read_process_output"
                | "read_file"
        );
        assert_eq!(a.read_only_hint, Some(read_only), "{}", tool.name);
        assert_eq!(a.destructive_hint, Some(!read_only), "{}", tool.name);
        assert_eq!(a.open_world_hint, Some(false));
        assert_eq!(
            tool.input_schema["additionalProperties"],
            json!(false),
            "{}",
            tool.name
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ok_and_non_zero_exit_is_still_ok() {
    let (_sb, s) = Sandbox::started("").await;
    let r = s.run("echo hi").await;
    assert_eq!(r["code"], "OK");
    assert_eq!(r["ok"], true);
    assert_eq!(r["detail"]["stdout"], "hi\n");
    assert_eq!(r["detail"]["exit_code"], 0);
    // A single command's result says nothing twice: no per-stage list, no zero byte counts,
    // no confinement (describe_policy has it); explain_command names the program.
    for quiet in [
        "stages",
        "stdout_bytes",
        "stdout_truncated",
        "confinement",
        "joins",
    ] {
        assert!(r["detail"].get(quiet).is_none(), "{quiet}: {r}");
    }
    let e = s.explain("echo hi").await;
    assert_eq!(e["detail"]["stages"][0]["program"], "/usr/bin/echo", "{e}");
    assert!(e["detail"].get("pipeline_lengths").is_none(), "{e}");
    let r = s.run("echo hi | tr h H").await;
    assert_eq!(r["detail"]["stages"][1]["program"], "/usr/bin/tr", "{r}");
    let r = s.run("false").await;
    assert_eq!(
        (r["code"].as_str(), r["ok"].as_bool()),
        (Some("OK"), Some(true))
    );
    assert_eq!(r["detail"]["exit_code"], 1);
    let r = s.run("ls does-not-exist").await;
    assert_eq!(r["code"], "OK");
    assert_eq!(r["detail"]["exit_code"], 2);
    assert!(stderr_of(&r).contains("does-not-exist"));
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_denied_cases() {
    let (sb, s) = Sandbox::started("").await;
    for (command, rule) in [
        ("whoami", "not-allowlisted"),
        ("rm -rf notes.txt", "denylist"), // on both lists: the denylist wins
        ("/bin/ls", "program-path"),
        ("./ls", "program-path"),
        ("LS", "not-allowlisted"), // exact, case-sensitive
        ("git push --force origin main", "rules[0]"),
        ("git push origin main -f", "rules[0]"),
        ("git push -fv origin", "rules[0]"), // bundled short flags
        ("git push --forc origin", "rules[0]"), // unique long prefix
        ("git --no-pager push --force=true", "rules[0]"),
        ("git push origin +main", "rules[0]"), // a +refspec forces too
        ("echo ok | whoami", "not-allowlisted"), // strictest stage wins
        ("echo $HOME", "variable-expansion"),
        ("echo $(id)", "command-substitution"),
        ("echo `id`", "command-substitution"),
        ("echo hi > f", "redirection"),
        ("cat < notes.txt", "redirection"),
        ("sleep 1 &", "background"),
        ("(ls)", "subshell"),
        ("cat <<EOF", "here-doc"),
        // A prefix off the safe list (issue 32: the safe ones pass), and one with no command.
        ("FOO=1 ls", "env-prefix"),
        ("FOO=1", "leading-assignment"),
        ("", "empty-command"),
        ("ls ;; ls", "empty-command"),
    ] {
        let r = s.run_expecting(command, "POLICY_DENIED").await;
        let got = r["detail"]["rule"].as_str().unwrap_or_default();
        assert_eq!(got, rule, "{command}: {r}");
        assert!(!reason_of(&r).is_empty());
    }
    // The touch marker proves nothing ran for a denied list.
    let r = s.run("touch made-it && whoami").await;
    assert_eq!(r["code"], "POLICY_DENIED");
    assert!(!sb.jail.join("made-it").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_requests() {
    let (_sb, s) = Sandbox::started("").await;
    for command in [
        "echo 'unterminated",
        "echo \"open",
        "echo a\\",
        "echo a\u{0}b",
    ] {
        s.run_expecting(command, "INVALID_REQUEST").await;
    }
    for args in [
        json!({"command": 5}),
        json!({}),
        json!({"command": "ls", "extra": 1}),
        json!({"command": "ls", "timeout_seconds": -1}),
    ] {
        let r = s.run_with(args.clone()).await;
        assert_eq!(r["code"], "INVALID_REQUEST", "{args}: {r}");
    }
    let r = s
        .run_with(json!({"command": "ls", "timeout_seconds": 0}))
        .await;
    assert_eq!(r["code"], "INVALID_REQUEST");
    // stdin is bounded like the command: 1 MiB at most, refused whole (and audited) beyond.
    let big = "x".repeat(1024 * 1024 + 1);
    let r = s.run_with(json!({"command": "wc -c", "stdin": big})).await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    assert!(reason_of(&r).contains("stdin is too long"));
    let fits = "x".repeat(1024 * 1024);
    let r = s.run_with(json!({"command": "wc -c", "stdin": fits})).await;
    assert_eq!(r["detail"]["stdout"], "1048576\n", "{r}");
    let r = s.run_in("missing-dir", "ls").await;
    assert_eq!(r["code"], "INVALID_REQUEST");
    let r = s.run_with(json!({"command": ["echo", "a\u{0}"]})).await;
    assert_eq!(r["code"], "INVALID_REQUEST");
    let r = s
        .call("explain_command", json!({"command": "ls", "bogus": true}))
        .await;
    assert_eq!(r["code"], "INVALID_REQUEST");
}

#[tokio::test(flavor = "multi_thread")]
async fn path_escapes() {
    let sb = Sandbox::new("");
    std::os::unix::fs::symlink("/etc", sb.jail.join("etc-link")).unwrap();
    let s = sb.session().await;
    for (command, cwd) in [
        ("ls", Some("..")),
        ("ls", Some("sub/../..")),
        ("ls", Some("/tmp")),
        ("ls", Some("etc-link")),
        ("cat /etc/passwd", None), // no cwd: still an escape
        ("cat ../policy.toml", None),
        ("cat sub/../../policy.toml", None),
        ("cat ~root/.bashrc", None),
        ("cat etc-link/hostname", None),
        ("grep --file=/etc/passwd x", None),
        ("echo ok | cat /etc/hostname", None),
    ] {
        let r = s.run_with(json!({"command": command, "cwd": cwd})).await;
        assert_eq!(r["code"], "PATH_ESCAPE", "{command} in {cwd:?}: {r}");
    }
    let inside = sb.jail.join("notes.txt");
    let r = s.run(&format!("cat {}", inside.display())).await;
    assert_eq!(r["code"], "OK", "{r}");
    let r = s.run_in("sub", "cat ../notes.txt").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["stdout"], "alpha\nbeta\ngamma\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn quoting_is_tokenization_only() {
    let (_sb, s) = Sandbox::started("").await;
    let r = s.run(r#"echo "a;b""#).await;
    assert_eq!(r["code"], "OK");
    assert_eq!(r["detail"]["stdout"], "a;b\n");
    let r = s
        .run(r#"echo 'x && y | z' "$HOME is literal in single quotes? no" "#)
        .await;
    assert_eq!(
        r["code"], "POLICY_DENIED",
        "double quotes still expand $ in a shell: refused"
    );
    let r = s.run("echo '$HOME' \"a|b\"").await;
    assert_eq!(r["detail"]["stdout"], "$HOME a|b\n");
    let r = s
        .run_with(json!({"command": ["echo", "$(id); rm -rf /"]}))
        .await;
    assert_eq!(r["code"], "OK");
    assert_eq!(r["detail"]["stdout"], "$(id); rm -rf /\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn pipelines_and_sequencing() {
    let (_sb, s) = Sandbox::started("").await;
    let r = s.run("cat notes.txt | grep a | wc -l").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(stdout_of(&r).trim(), "3");
    assert_eq!(r["detail"]["stages"].as_array().unwrap().len(), 3);
    let r = s.run("echo hello | tr a-z A-Z").await;
    assert_eq!(r["detail"]["stdout"], "HELLO\n");
    let r = s.run("false && echo skipped; echo after").await;
    assert_eq!(r["detail"]["stdout"], "after\n");
    assert_eq!(r["detail"]["stages"][1]["ran"], false);
    assert_eq!(r["detail"]["exit_code"], 0);
    let r = s.run("false || echo fallback").await;
    assert_eq!(r["detail"]["stdout"], "fallback\n");
    let r = s.run("true && false").await;
    assert_eq!(r["detail"]["exit_code"], 1);
    let r = s
        .run_with(json!({"command": "tr a-z A-Z", "stdin": "from stdin"}))
        .await;
    assert_eq!(r["detail"]["stdout"], "FROM STDIN");
    let big = "x".repeat(300_000);
    let r = s.run_with(json!({"command": "wc -c", "stdin": big})).await;
    assert_eq!(stdout_of(&r).trim(), "300000");
    let r = s.run("cat").await; // stdin is /dev/null, so this returns at once
    assert_eq!(
        (r["code"].as_str(), r["detail"]["stdout"].as_str()),
        (Some("OK"), Some(""))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn environment_is_scrubbed() {
    let sb = Sandbox::new("");
    // mkdir must start, for the read-only HOME to be what refuses it.
    sb.add_helpers(&["mkdir"]);
    let s = sb.session().await;
    let r = s.run("env").await;
    let out = stdout_of(&r);
    let keys: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    assert!(!out.contains("leak-me"), "{out}");
    for k in &keys {
        assert!(
            [
                "PATH",
                "HOME",
                "LC_CTYPE",
                "GIT_CONFIG_NOSYSTEM",
                "GIT_TERMINAL_PROMPT",
                "TMPDIR",
                "TMP",
                "TEMP",
                // Where the shims reach the server (the sandbox's git has argument rules).
                "SAFE_MCP_NESTED"
            ]
            .contains(k),
            "{k} leaked: {out}"
        );
    }
    // UTF-8 text, by the one locale category that decides it.
    assert!(out.lines().any(|l| l == "LC_CTYPE=C.UTF-8"), "{out}");
    // HOME is never the jail: an rc file the model writes there must not configure the
    // next command. It is an empty directory the command can read but not write.
    let home = out
        .lines()
        .find_map(|l| l.strip_prefix("HOME="))
        .unwrap()
        .to_owned();
    assert!(!std::path::Path::new(&home).starts_with(&sb.jail), "{home}");
    assert!(std::path::Path::new(&home).is_dir(), "{home}");
    sb.write_in_jail(".planted-rc", "planted");
    let r = s.run_with(json!({"command": ["sh", "-c", "ls -A \"$HOME\"; cat \"$HOME/.planted-rc\"; touch \"$HOME/.gitconfig\" && echo wrote; mkdir \"$HOME/.config\" && echo made"]})).await;
    assert_eq!(r["detail"]["stdout"], "", "{r}");
    assert!(
        std::fs::read_dir(&home).unwrap().next().is_none(),
        "HOME stays empty"
    );
    drop(s);
    assert!(
        super::support::eventually(5, || !std::path::Path::new(&home).exists()).await,
        "the server removes its HOME when it ends"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn operation_failed_when_an_allowed_program_is_missing() {
    let (_sb, s) = Sandbox::started("").await;
    let r = s.run("nonexistent-tool-xyz --help").await;
    assert_eq!(r["code"], "OPERATION_FAILED", "{r}");
    assert_eq!(r["detail"]["rule"], "path-lookup");
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_never_executes() {
    let (sb, s) = Sandbox::started("").await;
    let r = s.explain("touch explain-marker | wc -c").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["would_run"], true);
    assert_eq!(r["detail"]["stages"][0]["program"], "/usr/bin/touch");
    assert!(r["detail"].get("stdout").is_none() && r["detail"].get("exit_code").is_none());
    assert!(r["detail"]["confinement"]["mode"].is_string());
    assert!(!sb.jail.join("explain-marker").exists());
    let r = s.explain("git push -f").await;
    assert_eq!(r["code"], "POLICY_DENIED");
    assert!(reason_of(&r).contains("force-push"));
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    // Read-only calls are recorded like every other call (attempt and outcome, not waited
    // for on disk), and a call with arguments that do not parse is too.
    let bad = s.run_with(json!({"command": 5})).await;
    assert_eq!(bad["code"], "INVALID_REQUEST");
    let records = sb.audit_records();
    let seen = super::support::record_shapes(&records);
    let pair = super::support::record_pair;
    assert_eq!(
        seen,
        [
            pair("explain_command", "OK"),
            pair("explain_command", "POLICY_DENIED"),
            pair("describe_policy", "OK"),
            pair("run_command", "INVALID_REQUEST"),
        ]
        .concat()
    );
    assert_eq!(records[0]["command"], "touch explain-marker | wc -c");
    assert_eq!(d["code"], "OK");
    assert!(
        d["detail"]["allowlist"]
            .as_array()
            .unwrap()
            .contains(&json!("echo"))
    );
    assert_eq!(d["detail"]["limits"]["max_output_bytes"], 4096);
}

#[tokio::test(flavor = "multi_thread")]
async fn attempt_is_recorded_before_the_outcome_and_without_output() {
    let (sb, s) = Sandbox::started("").await;
    s.run("echo some-output-text").await;
    s.run("whoami").await;
    let recs = sb.audit_records();
    let kinds: Vec<&str> = recs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["attempt", "outcome", "attempt", "outcome"]);
    assert_eq!(recs[0]["verdict"], "OK");
    assert_eq!(recs[0]["call"], recs[1]["call"]);
    assert_eq!(recs[1]["exit_code"], 0);
    assert_eq!(recs[2]["verdict"], "POLICY_DENIED");
    assert!(recs[0]["confinement"]["mode"].is_string());
    assert!(
        !std::fs::read_to_string(&sb.audit)
            .unwrap()
            .contains("some-output-text\\n")
    );
    for pair in recs.windows(2) {
        assert_eq!(
            pair[1]["seq"].as_u64().unwrap(),
            pair[0]["seq"].as_u64().unwrap() + 1
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_unavailable_under_fail_closed_runs_nothing() {
    // The trail's directory vanishes after startup.
    let sb = Sandbox::new("");
    let logs = sb.base().join("logs");
    std::fs::create_dir(&logs).unwrap();
    sb.edit_policy("\"audit.jsonl\"", "\"logs/audit.jsonl\"");
    let s = sb.session().await;
    assert_eq!(s.run("touch first").await["code"], "OK");
    std::fs::remove_dir_all(&logs).unwrap();
    let r = s.run("touch audit-marker").await;
    assert_eq!(r["code"], "AUDIT_UNAVAILABLE", "{r}");
    assert!(!sb.jail.join("audit-marker").exists());

    // A full disk: /dev/full accepts opens and refuses every write.
    let sb = Sandbox::new("");
    sb.edit_policy("\"audit.jsonl\"", "\"/dev/full\"");
    let s = sb.session().await;
    let r = s.run("touch full-marker").await;
    assert_eq!(r["code"], "AUDIT_UNAVAILABLE", "{r}");
    assert!(!sb.jail.join("full-marker").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn fail_open_runs_and_warns() {
    let sb = Sandbox::builder()
        .limits("timeout_seconds = 10")
        .fail_mode("open")
        .build();
    sb.edit_policy("\"audit.jsonl\"", "\"/dev/full\"");
    let stderr_path = sb.base().join("stderr.txt");
    let stderr_file = std::fs::File::create(&stderr_path).unwrap();
    let s = Session::start_with_stderr(&sb.policy, |_| {}, Some(stderr_file.into())).await;
    let r = s.run("touch open-marker").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(sb.jail.join("open-marker").exists());
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(stderr.contains("audit_fail_mode = \"open\""), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_calls_each_get_their_own_result() {
    let (_sb, s) = Sandbox::started("").await;
    let calls = (0..8).map(|i| {
        let s = &s;
        async move { (i, s.run(&format!("echo call-{i}")).await) }
    });
    for (i, r) in futures_join_all(calls).await {
        assert_eq!(r["detail"]["stdout"], format!("call-{i}\n"));
    }
}

async fn futures_join_all<F: std::future::Future>(
    futs: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let mut out = Vec::new();
    let handles: Vec<_> = futs.into_iter().collect();
    // Poll them together: a JoinSet needs 'static futures, these borrow the session.
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = handles.into_iter().map(Box::pin).collect();
    let mut results: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if results[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => results[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.extend(results.into_iter().flatten());
    out
}

/// The harmless device files may be named as paths (`/dev/null` as an empty side of a
/// diff, `/dev/urandom` for random bytes); any other device, or a path through one, may not.
#[tokio::test(flavor = "multi_thread")]
async fn harmless_device_files_can_be_named() {
    let sb = Sandbox::new("");
    sb.write_in_jail("new.txt", "fresh\n");
    let s = sb.session().await;
    let r = s.run("grep -H alpha /dev/null notes.txt").await;
    assert_eq!(r["detail"]["stdout"], "notes.txt:alpha\n", "{r}");
    let r = s.run("git diff --no-index /dev/null new.txt").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(stdout_of(&r).contains("+fresh"), "{r}");
    let r = s.run("head -c 16 /dev/urandom | wc -c").await;
    assert_eq!(r["detail"]["stdout"], "16\n", "{r}");
    let r = s.run("head -c 3 /dev/zero | wc -c").await;
    assert_eq!(r["detail"]["stdout"], "3\n", "{r}");
    for refused in [
        "cat /dev/kmsg",
        "head -c 1 /dev/sda",
        "cat /dev/null/../../etc/shadow",
    ] {
        s.run_expecting(refused, "PATH_ESCAPE").await;
    }
}

/// `git diff`, `show`, `log -p` and `stash show -p` work on real changes: the hardening that
/// keeps a repository's own diff.external or textconv from running no longer breaks them.
#[tokio::test(flavor = "multi_thread")]
async fn git_shows_real_diffs() {
    let sb = Sandbox::new("");
    let repo = sb.jail.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", sb.base())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "first"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
    git(&["commit", "-qam", "second"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\nstashed\n").unwrap();
    git(&["stash", "-q"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    // A planted external diff program must not run.
    std::fs::write(
        repo.join(".git/config"),
        std::fs::read_to_string(repo.join(".git/config")).unwrap()
            + "[diff]\n\texternal = touch planted-marker\n",
    )
    .unwrap();
    let s = sb.session().await;
    for (command, want) in [
        ("git diff", "+three"),
        ("git show", "+two"),
        ("git log -p -1", "+two"),
        ("git stash show -p", "+stashed"),
        ("git diff HEAD~1 --stat", "a.txt"),
    ] {
        let r = s.run_with(json!({"command": command, "cwd": "repo"})).await;
        assert_eq!(r["detail"]["exit_code"], 0, "{command}: {r}");
        assert!(stdout_of(&r).contains(want), "{command}: {r}");
    }
    assert!(!repo.join("planted-marker").exists());
    assert!(!sb.jail.join("planted-marker").exists());
}
