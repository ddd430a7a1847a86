//! What the model reads (issue 32), over a real MCP session: the text block of each kind
//! of result, output past the cap (its start and its end), and `NAME=value cmd` prefixes.

use serde_json::json;

use super::support::{Sandbox, live_processes_with, reason_of, stdout_of};

/// Item 1: the text block of each kind of result, as a client hands it to the model.
#[tokio::test(flavor = "multi_thread")]
async fn each_kind_of_result_reads_as_a_verdict_then_its_output() {
    let sb = Sandbox::new("");
    sb.write_in_jail(
        "many.txt",
        (1..=3000)
            .map(|n| format!("line {n}\n"))
            .collect::<String>(),
    );
    let s = sb.session().await;
    // The text block of a run_command with `args`.
    let text = async |args: serde_json::Value| {
        let r = s.raw_call("run_command", args).await;
        r.content[0]
            .as_text()
            .map(|t| t.text.clone())
            .unwrap_or_default()
    };
    let ran = text(json!({"command": "echo hi"})).await;
    assert!(
        ran.starts_with("exit 0 · ") && ran.ends_with(" ms\nhi\n"),
        "{ran}"
    );
    assert_eq!(ran.lines().count(), 2, "{ran}");
    let failed = text(json!({"command": "ls no-such-file"})).await;
    assert!(failed.starts_with("exit 2 · "), "{failed}");
    assert!(
        failed.contains("\n--- stderr ---\nls: cannot access 'no-such-file'"),
        "{failed}"
    );
    let denied = text(json!({"command": "whoami"})).await;
    assert!(denied.starts_with("POLICY_DENIED: `whoami`"), "{denied}");
    let cut = text(json!({"command": "cat many.txt"})).await;
    assert!(
        cut.starts_with("exit 0 · ") && cut.contains("\nline 1\nline 2\n"),
        "{cut}"
    );
    assert!(cut.contains("line 3000\ntruncated: stdout, "), "{cut}");
    let timed_out = text(json!({"command": "sleep 5", "timeout_seconds": 1})).await;
    assert!(
        timed_out.starts_with("TIMEOUT: the command exceeded 1s"),
        "{timed_out}"
    );
    let prefix = text(json!({"command": "LD_PRELOAD=x.so ls"})).await;
    assert!(
        prefix.starts_with("POLICY_DENIED: ") && prefix.contains("LD_PRELOAD"),
        "{prefix}"
    );
    // Every one of them is also the typed envelope in structuredContent (support::envelope_of
    // checks that the text is that envelope written for a reader).
    let r = s.run("echo hi").await;
    assert_eq!(r["detail"]["stdout"], "hi\n");
}

/// Item 2: 50 MB of output runs to its end; the result keeps the start and the end (where
/// a test summary is) with one marker line between, and the server's memory stays bounded.
#[tokio::test(flavor = "multi_thread")]
async fn fifty_megabytes_of_output_run_to_the_end_and_keep_the_tail() {
    let sb = Sandbox::builder()
        .limits("timeout_seconds = 60\nmax_output_bytes = 4096")
        .build();
    let s = sb.session().await;
    let bytes = 50u64 << 20;
    let r = s
        .run(&format!("yes 0123456789abcdef | head -c {bytes}"))
        .await;
    assert_eq!(r["code"], "OUTPUT_TRUNCATED", "{r}");
    assert_eq!(r["detail"]["exit_code"], 0, "it ran to its end: {r}");
    assert_eq!(r["detail"]["stdout_bytes"], bytes);
    let out = stdout_of(&r);
    assert!(out.starts_with("0123456789abcdef\n"), "{}", &out[..40]);
    // The last line of the stream is a part line (50 MiB is not a multiple of 17 bytes).
    let last = (bytes % 17) as usize;
    assert!(
        out.ends_with(&format!("\n{}", &"0123456789abcdef\n"[..last])),
        "{}",
        &out[out.len() - 60..]
    );
    let marker = out.lines().find(|l| l.starts_with("[… ")).unwrap();
    assert!(
        marker.contains(&format!("left out of {bytes} bytes")),
        "{marker}"
    );
    // The count of lines left out is exact: every line of the stream is shown (the head's
    // last one in part) or counted in the marker.
    let (head, rest) = out.split_once("\n[… ").unwrap();
    let tail = rest.split_once('\n').unwrap().1;
    let shown = head.matches('\n').count() as u64 + u64::from(!head.ends_with('\n'));
    let left = bytes / 17 - shown - tail.matches('\n').count() as u64;
    assert!(
        marker.starts_with(&format!("[… {left} lines (")),
        "{left}: {marker}"
    );
    assert!(out.len() < 4096 + 200, "{}", out.len());
    // The server kept two bounded windows, not the stream.
    let peak = live_processes_with(sb.policy.to_str().unwrap())
        .into_iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .max()
        .unwrap();
    assert!(peak < 64 * 1024, "the server's peak RSS was {peak} KiB");
}

/// Item 4: a prefix on the safe list reaches the command (in every stage of a list or
/// pipeline); one that changes what runs or where it reaches is refused naming the rule;
/// any other name is refused with the key that allows it; `explain_command` shows the
/// environment the command would get.
#[tokio::test(flavor = "multi_thread")]
async fn env_prefixes_on_the_safe_list_reach_the_command() {
    let (_sb, s) = Sandbox::started("[terminal.env]\nprefix_allow = [\"MY_FLAG\"]\n").await;
    let r = s.run("RUST_BACKTRACE=1 NO_COLOR=1 env").await;
    assert_eq!(r["code"], "OK", "{r}");
    let out = stdout_of(&r);
    assert!(
        out.contains("RUST_BACKTRACE=1\n") && out.contains("NO_COLOR=1\n"),
        "{out}"
    );
    let r = s.run("echo a | MY_FLAG=on env && NODE_ENV=test env").await;
    let out = stdout_of(&r);
    assert!(
        out.contains("MY_FLAG=on\n") && out.contains("NODE_ENV=test\n"),
        "{r}"
    );
    for (command, says) in [
        ("LD_PRELOAD=/tmp/x.so ls", "dynamic loader"),
        ("PATH=/tmp ls", "chooses the programs that run"),
        ("GIT_SSH_COMMAND=sh git fetch", "git's programs"),
        ("https_proxy=http://evil:1 ls", "where the network goes"),
        ("RUSTC_WRAPPER=sh ls", "wraps the programs"),
        ("PYTHONSTARTUP=x.py ls", "python runs first"),
    ] {
        let r = s.run_expecting(command, "POLICY_DENIED").await;
        let reason = reason_of(&r);
        assert!(
            reason.contains(says) && reason.contains("[terminal.env] set"),
            "{command}: {reason}"
        );
    }
    let r = s.run("OTHER_FLAG=1 ls").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("prefix_allow"), "{r}");
    let r = s.run("FLAG=1").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    // The rest of the stage is judged as any command.
    let r = s.run("RUST_BACKTRACE=1 whoami").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let e = s.explain("RUST_BACKTRACE=1 ls").await;
    assert_eq!(e["code"], "OK", "{e}");
    assert_eq!(
        e["detail"]["stages"][0]["env"][0],
        json!(["RUST_BACKTRACE", "1"]),
        "{e}"
    );
}

/// Item 5: a command stopped by the CPU, file-size or wall-clock limit says which one, with
/// the policy key that sets it, in `detail.limit`, the reason and the text block.
#[tokio::test(flavor = "multi_thread")]
async fn a_limit_that_stops_a_command_is_named_with_its_key() {
    let sb = Sandbox::builder()
        .limits("timeout_seconds = 20\ncpu_seconds = 1\nfile_size_bytes = 1048576")
        .build();
    let s = sb.session().await;
    for (args, key, says) in [
        (
            json!({"command": ["sh", "-c", "while :; do :; done"]}),
            "cpu_seconds",
            "cpu_seconds = 1",
        ),
        (
            json!({"command": ["sh", "-c", "yes > big.txt"]}),
            "file_size_bytes",
            "file_size_bytes = 1048576",
        ),
        (
            json!({"command": "sleep 5", "timeout_seconds": 1}),
            "timeout_seconds",
            "start_process",
        ),
    ] {
        let raw = s.raw_call("run_command", args.clone()).await;
        let text = raw.content[0]
            .as_text()
            .map(|t| t.text.clone())
            .unwrap_or_default();
        let r = raw.structured_content.unwrap();
        assert_eq!(r["detail"]["limit"], key, "{args}: {r}");
        let reason = reason_of(&r);
        assert!(reason.contains(says), "{args}: {reason}");
        assert!(
            text.contains(&format!("limit: {key}")) || text.contains(says),
            "{text}"
        );
    }
    // A command that ends on its own names no limit.
    let r = s.run("echo fine").await;
    assert!(r["detail"].get("limit").is_none(), "{r}");
}

/// Item 3: `describe_policy` is short by default (what runs, where it writes, the network,
/// the limits, the syntax, how to change a file, the confinement in a line) and has every
/// detail with `verbose`.
#[tokio::test(flavor = "multi_thread")]
async fn describe_policy_is_short_and_verbose_has_every_detail() {
    let (_sb, s) = Sandbox::started("").await;
    let raw = s.raw_call("describe_policy", json!({})).await;
    let text = raw.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default();
    assert!(text.len() < 2048, "{} bytes:\n{text}", text.len());
    let d = raw.structured_content.unwrap();
    for key in [
        "commands",
        "writes",
        "files",
        "network",
        "limits",
        "syntax",
        "confinement",
        "more",
    ] {
        assert!(d["detail"][key].is_string(), "{key}: {d}");
    }
    assert!(
        d["detail"]["commands"].as_str().unwrap().contains("git"),
        "{d}"
    );
    assert!(
        d["detail"]["rules"][0]
            .as_str()
            .unwrap()
            .starts_with("git: refuses push --force"),
        "{d}"
    );
    assert!(
        d["detail"]["files"].as_str().unwrap().contains("edit_file"),
        "{d}"
    );
    assert!(
        d["detail"]["network"].as_str().unwrap().starts_with("off"),
        "{d}"
    );
    assert!(
        d["detail"]["syntax"]
            .as_str()
            .unwrap()
            .contains("RUST_BACKTRACE"),
        "{d}"
    );
    let full = s.call("describe_policy", json!({"verbose": true})).await;
    assert!(
        full["detail"]["confinement"]["seccomp"]["denied"].is_array(),
        "{full}"
    );
    assert!(
        full.to_string().len() > 2 * text.len(),
        "{} against {}",
        full.to_string().len(),
        text.len()
    );
}

/// Item 6: a refusal's first sentence says what was refused, the next what to do instead.
#[tokio::test(flavor = "multi_thread")]
async fn every_refusal_says_what_was_refused_and_what_to_do_instead() {
    let (_sb, s) = Sandbox::started("").await;
    for (command, names, instead) in [
        (
            "whoami",
            "`whoami` is not on the allowlist",
            "[terminal.allowlist]",
        ),
        ("rm -rf x", "`rm` is on the denylist", "ask the operator"),
        (
            "cat /etc/passwd",
            "\"/etc/passwd\" is an absolute path outside the jail",
            "inside the jail",
        ),
        ("cat ../x", "climbs out of the jail", "inside the jail"),
        (
            "echo $(whoami)",
            "command substitution",
            "Run the inner command on its own",
        ),
        ("sleep 1 &", "background execution", "start_process"),
        ("(ls)", "subshells", "Chain commands"),
        ("ls |& wc", "`|&` is refused", "Use `|`"),
        ("echo hi > out.txt", "redirections", "write_file"),
        ("cd src", "`cd` is a shell builtin", "`cwd`"),
        ("ls *.txt", "are not expanded here", "quote the pattern"),
        ("echo $HOME", "expands variables", "quote it"),
        ("LD_PRELOAD=x.so ls", "LD_PRELOAD", "[terminal.env]"),
        (
            "git push --force",
            "`git` with `push --force` is denied",
            "ask the operator",
        ),
        ("touch .mcp.json", "is a protected path", "ask the operator"),
    ] {
        let r = s.explain(command).await;
        let reason = r["reason"].as_str().unwrap_or_default();
        assert_ne!(r["code"], "OK", "{command}: {r}");
        assert!(
            reason.contains(names),
            "{command}: the reason does not name it: {reason}"
        );
        let at = reason.find(names).unwrap_or(0);
        assert!(
            reason[at..].contains(instead),
            "{command}: no way forward after what was refused: {reason}"
        );
    }
}
