//! Real developer toolchains (issue 17): a private TMPDIR per call, `write_paths`, and the
//! everyday tools that need them, over a real MCP session.

use serde_json::{Value, json};

use super::support::{BIN, DEFAULT_ALLOW, Sandbox};

fn sh(script: &str) -> Value {
    json!({"command": ["sh", "-c", script]})
}

fn sandbox() -> Sandbox {
    Sandbox::with(
        &format!("{DEFAULT_ALLOW}, \"mkdir\", \"dirname\""),
        "timeout_seconds = 20\nmax_output_bytes = 65536",
        "closed",
        "",
    )
}

/// Puts `lines` into the policy's `[terminal]` table (the sandbox appends after the rules).
fn in_terminal_table(sb: &Sandbox, lines: &str) {
    let text = std::fs::read_to_string(&sb.policy).unwrap();
    let text = text.replacen(
        "[terminal]\njail_root = \"jail\"\n",
        &format!("[terminal]\njail_root = \"jail\"\n{lines}\n"),
        1,
    );
    std::fs::write(&sb.policy, text).unwrap();
}

/// Each call gets its own TMPDIR (also TMP and TEMP): writable, outside the jail, unseen by
/// other calls (its parent is not even listable), removed when the call ends; `/tmp`
/// itself stays unwritable.
#[tokio::test(flavor = "multi_thread")]
async fn each_call_gets_a_private_tmpdir_that_is_removed() {
    for namespaces in ["auto", "off"] {
        let sb = sandbox();
        let text = std::fs::read_to_string(&sb.policy).unwrap();
        std::fs::write(
            &sb.policy,
            format!("{text}\n[terminal.sandbox]\nnamespaces = \"{namespaces}\"\n"),
        )
        .unwrap();
        let s = sb.session().await;
        let r = s
            .call(
                "run_command",
                sh("echo $TMPDIR; [ \"$TMP\" = \"$TMPDIR\" ] && [ \"$TEMP\" = \"$TMPDIR\" ] && echo same; \
                    mkdir $TMPDIR/d && echo made > $TMPDIR/d/f && cat $TMPDIR/d/f; \
                    ls \"$(dirname $TMPDIR)\" >/dev/null 2>&1 || echo parent-hidden; \
                    echo x > /tmp/safe-mcp-probe-$$ 2>/dev/null || echo tmp-unwritable"),
            )
            .await;
        assert_eq!(r["code"], "OK", "{namespaces}: {r}");
        let out = r["detail"]["stdout"].as_str().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            &lines[1..],
            ["same", "made", "parent-hidden", "tmp-unwritable"],
            "{namespaces}: {out}"
        );
        let tmp = std::path::Path::new(lines[0]);
        assert!(tmp.is_absolute() && !tmp.starts_with(&sb.jail), "{out}");
        assert!(
            !tmp.exists(),
            "{namespaces}: the call's TMPDIR was left behind"
        );
        let again = s.call("run_command", sh("echo $TMPDIR")).await;
        assert_ne!(
            again["detail"]["stdout"].as_str().unwrap().trim(),
            lines[0],
            "two calls shared a TMPDIR"
        );
    }
}

/// The first thing a new user tried: `git diff` failed with "unable to create temp-file".
#[tokio::test(flavor = "multi_thread")]
async fn git_works_in_the_jail() {
    let sb = sandbox();
    in_terminal_table(
        &sb,
        "[terminal.env]\nset = { GIT_AUTHOR_NAME = \"t\", GIT_AUTHOR_EMAIL = \"t@example.com\", GIT_COMMITTER_NAME = \"t\", GIT_COMMITTER_EMAIL = \"t@example.com\" }",
    );
    let s = sb.session().await;
    for (command, expect) in [
        ("git init -q -b main", ""),
        ("git add notes.txt", ""),
        ("git commit -q -m first", ""),
        ("git status --short", ""),
    ] {
        let r = s.run(command).await;
        assert_eq!(r["code"], "OK", "{command}: {r}");
        assert_eq!(r["detail"]["stdout"], expect, "{command}: {r}");
    }
    std::fs::write(sb.jail.join("notes.txt"), "alpha\nBETA\ngamma\n").unwrap();
    let r = s.run("git diff --stat").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(
        r["detail"]["stdout"]
            .as_str()
            .unwrap()
            .contains("1 file changed"),
        "{r}"
    );
    let r = s.run("git diff").await;
    assert!(
        r["detail"]["stdout"].as_str().unwrap().contains("+BETA"),
        "{r}"
    );
    let r = s.run("git log --oneline").await;
    assert!(
        r["detail"]["stdout"].as_str().unwrap().contains("first"),
        "{r}"
    );
}

/// A write path is writable (and its files land on the host), in either view.
#[tokio::test(flavor = "multi_thread")]
async fn write_paths_are_writable() {
    for namespaces in ["auto", "off"] {
        let sb = sandbox();
        let cache = sb.base().join("cache");
        std::fs::create_dir(&cache).unwrap();
        in_terminal_table(&sb, &format!("write_paths = [\"{}\"]", cache.display()));
        let text = std::fs::read_to_string(&sb.policy).unwrap();
        std::fs::write(
            &sb.policy,
            format!("{text}\n[terminal.sandbox]\nnamespaces = \"{namespaces}\"\n"),
        )
        .unwrap();
        let s = sb.session().await;
        let r = s
            .call(
                "run_command",
                sh(&format!(
                    "echo cached > {}/entry && cat {}/entry",
                    cache.display(),
                    cache.display()
                )),
            )
            .await;
        assert_eq!(r["detail"]["stdout"], "cached\n", "{namespaces}: {r}");
        assert_eq!(
            std::fs::read_to_string(cache.join("entry")).unwrap(),
            "cached\n"
        );
        let d = s.call("describe_policy", json!({})).await;
        let rw = d["detail"]["confinement"]["landlock"]["read_write"].to_string();
        assert!(rw.contains(cache.to_str().unwrap()), "{d}");
    }
}

/// `policy check` of the sandbox's policy with `write_paths = [path]` fails, saying `why`.
fn write_path_is_fatal(sb: &Sandbox, path: &std::path::Path, why: &str) {
    in_terminal_table(sb, &format!("write_paths = [\"{}\"]", path.display()));
    let out = std::process::Command::new(BIN)
        .args(["policy", "check", "--config", sb.policy.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}: {out:?}", path.display());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("terminal.write_paths") && stderr.contains(why),
        "{}: {stderr}",
        path.display()
    );
}

/// A write path that could change what runs next does not load: a system directory, an
/// ancestor of the jail, one holding the audit trail, the policy file or a PATH entry.
#[test]
fn dangerous_write_paths_are_fatal() {
    let sb = sandbox();
    write_path_is_fatal(
        &sb,
        std::path::Path::new("/usr/local"),
        "would let commands write /usr",
    );
    let sb = sandbox();
    write_path_is_fatal(&sb, std::path::Path::new("/"), "would let commands write");
    let sb = sandbox();
    write_path_is_fatal(&sb, sb.base(), "overlaps the jail");
    let sb = sandbox();
    let logs = sb.base().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let text = std::fs::read_to_string(&sb.policy).unwrap();
    std::fs::write(
        &sb.policy,
        text.replace(
            "audit_log = \"audit.jsonl\"",
            "audit_log = \"logs/audit.jsonl\"",
        ),
    )
    .unwrap();
    write_path_is_fatal(&sb, &logs, "lets commands write the audit_log");
    let sb = sandbox();
    let bin = sb.base().join("bin");
    std::fs::create_dir(&bin).unwrap();
    in_terminal_table(
        &sb,
        &format!("path = [\"/usr/bin\", \"/bin\", \"{}\"]", bin.display()),
    );
    write_path_is_fatal(&sb, &bin, "holds the PATH entry");
    // The policy file in a directory of its own, which is then made writable.
    let sb = sandbox();
    let conf = sb.base().join("conf");
    std::fs::create_dir(&conf).unwrap();
    let moved = conf.join("policy.toml");
    let text = std::fs::read_to_string(&sb.policy)
        .unwrap()
        .replace("\"jail\"", &format!("\"{}\"", sb.jail.display()))
        .replace("\"audit.jsonl\"", &format!("\"{}\"", sb.audit.display()));
    let check = |text: &str| {
        std::fs::write(&moved, text).unwrap();
        std::process::Command::new(BIN)
            .args(["policy", "check", "--config", moved.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = check(&text);
    assert!(out.status.success(), "control: {out:?}");
    let out = check(&text.replacen(
        "[terminal]\n",
        &format!("[terminal]\nwrite_paths = [\"{}\"]\n", conf.display()),
        1,
    ));
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("lets commands write the policy file"),
        "{out:?}"
    );
}
