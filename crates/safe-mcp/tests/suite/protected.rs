//! Protected paths (issue 29; round 3, item 2): what configures programs outside the
//! sandbox stays out of the model's reach, over real MCP sessions, as root and as uid 65534,
//! in the private view and the host view.

use serde_json::json;

use super::builders::{git_env, in_terminal_table, python, python_sandbox, session_with, stdout};
use super::support::{OPERATOR_GIT, Sandbox, Session, reason_of, server_uids};

/// A jail that is a git repository with one commit, made by the operator on the host.
fn git_jail(sb: &Sandbox) {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&sb.jail)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", sb.base())
            .envs(OPERATOR_GIT)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "first"]);
}

/// What a python program (an interpreter: only the kernel stands in its way) manages to do
/// to each protected path, a line each.
const PLANT_CONFIG: &str = r##"
import os
def tryit(label, f):
    try:
        f(); print(label, "wrote")
    except OSError as e:
        print(label, "refused")
def write(path, text="x\n", mode="a"):
    d = os.path.dirname(path)
    if d: os.makedirs(d, exist_ok=True)
    open(path, mode).write(text)
tryit("hook", lambda: write(".git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/pwned\n", "w"))
tryit("config", lambda: write(".git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n"))
tryit("mcp", lambda: write(".mcp.json", '{"mcpServers": {"x": {"command": "sh"}}}', "w"))
tryit("tasks", lambda: write(".vscode/tasks.json", "{}", "w"))
tryit("gemini", lambda: write(".gemini/settings.json", "{}", "w"))
tryit("attributes", lambda: write(".git/info/attributes", "* filter=x\n", "w"))
tryit("rename", lambda: (os.rename(".vscode", "vscode-away"), os.mkdir(".vscode"), write(".vscode/tasks.json", "{}", "w")))
tryit("regit", lambda: (os.rename(".git", "git-away"), os.mkdir(".git")))
"##;

/// Issue 29 and round 3, item 2: what configures programs outside the sandbox stays out of
/// the model's reach. In the private view, as root and as uid 65534, a python program can
/// write none of the protected paths, rename none of their parents away, and git keeps
/// working (commit, branch, stash, merge); the operator's lists change what is protected.
#[tokio::test(flavor = "multi_thread")]
async fn protected_paths_hold_in_the_private_view_and_git_keeps_working() {
    for &uid in server_uids() {
        let sb = python_sandbox("required", &git_env("Agent", "agent@example.com"));
        sb.write_in_jail("secrets.cfg", "a = 1\n");
        git_jail(&sb);
        // The python profile, as issue 29 asks (python3 is its interpreter).
        in_terminal_table(
            &sb,
            &format!(
                "profiles = [\"python\"]\ncache_dir = \"{}/cache\"\nprotected_paths = [\"secrets.cfg\"]\nunprotected_paths = [\".idea\"]",
                sb.base().display()
            ),
        );
        sb.edit_policy(
            "commands = [\"python3\", \"echo\"]",
            "commands = [\"python3\", \"echo\", \"git\", \"touch\", \"cp\"]",
        );
        if let Some(uid) = uid {
            sb.give_to(uid);
            let out = std::process::Command::new("chown")
                .args(["-R", &uid.to_string()])
                .arg(&sb.jail)
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        let out = python(&s, PLANT_CONFIG).await;
        let what = format!("uid {uid:?}");
        for label in [
            "hook",
            "config",
            "mcp",
            "tasks",
            "gemini",
            "attributes",
            "rename",
            "regit",
        ] {
            assert!(
                out.contains(&format!("{label} refused")),
                "{what}: {label}: {out}"
            );
        }
        let cfg = python(&s, "open('secrets.cfg', 'a').write('b = 2\\n')").await;
        assert!(
            cfg.contains("Read-only file system"),
            "{what}: the operator's own entry: {cfg}"
        );
        // .idea was unprotected by the operator: it is the model's to write.
        let idea = python(&s, "import os; os.makedirs('.idea', exist_ok=True); open('.idea/x.xml', 'w').write('x'); print('wrote')").await;
        assert_eq!(idea, "wrote\n", "{what}");
        // The placeholder .mcp.json configures nothing and git does not see it.
        assert_eq!(
            std::fs::read_to_string(sb.jail.join(".mcp.json")).unwrap(),
            "{\"mcpServers\": {}}\n"
        );
        git_keeps_working(&s, &what).await;
        // By argument too, with the rule named in the refusal and the trail.
        let r = s.run("touch .vscode/x").await;
        assert_eq!(r["code"], "POLICY_DENIED", "{r}");
        assert!(reason_of(&r).contains("protected path"), "{r}");
        let r = s.run("git config user.email x@example.com").await;
        assert_eq!(r["code"], "POLICY_DENIED", "{r}");
        assert!(reason_of(&r).contains("[terminal.env]"), "{r}");
        let denied = sb
            .audit_records()
            .into_iter()
            .filter(|a| a["kind"] == "attempt" && a["verdict"] == "POLICY_DENIED")
            .any(|a| a.to_string().contains("protected-path"));
        assert!(
            denied,
            "{what}: the refusal is a POLICY_DENIED record naming the rule"
        );
        // A file with no harmless placeholder is moved aside once a command makes it.
        let r = s.py("open('.git/commondir', 'w').write('../x')").await;
        assert!(
            r["detail"]["protected_moved"]
                .to_string()
                .contains("commondir"),
            "{what}: {r}"
        );
        assert!(!sb.jail.join(".git/commondir").exists());
        let e = s.explain("cp notes.txt .mcp.json").await;
        assert!(reason_of(&e).contains(".mcp.json"), "{e}");
        let d = s.call("describe_policy", json!({"verbose": true})).await;
        assert_eq!(
            d["detail"]["protected_paths"]["removed_by_the_operator"],
            json!([".idea"]),
            "{d}"
        );
    }
}

/// git keeps working beside the protected paths: branch, commit, merge, stash, status.
async fn git_keeps_working(s: &Session, what: &str) {
    for command in [
        "git checkout -q -b feature",
        "git add secrets.cfg",
        "git commit -q --allow-empty -m second",
        "git checkout -q main",
        "git merge -q --no-edit feature",
        "git branch -q other",
    ] {
        let r = s.run(command).await;
        assert_eq!(
            (r["code"].as_str(), r["detail"]["exit_code"].as_i64()),
            (Some("OK"), Some(0)),
            "{what}: {command}: {r}"
        );
    }
    python(s, "open('notes.txt', 'a').write('more\\n')").await;
    for command in ["git stash -q", "git stash pop -q", "git status --porcelain"] {
        let r = s.run(command).await;
        assert_eq!(r["detail"]["exit_code"], 0, "{what}: {command}: {r}");
        if command.starts_with("git status") {
            assert_eq!(stdout(&r), " M notes.txt\n?? .idea/\n", "{what}: {r}");
        }
    }
}

/// Issue 29: in the host view nothing binds the protected paths, so an interpreter's write
/// gets through (shown here); what holds there is the argument check.
#[tokio::test(flavor = "multi_thread")]
async fn in_the_host_view_only_the_argument_checks_hold() {
    let sb = python_sandbox("off", &git_env("Agent", "agent@example.com"));
    git_jail(&sb);
    sb.edit_policy(
        "commands = [\"python3\", \"echo\"]",
        "commands = [\"python3\", \"echo\", \"touch\"]",
    );
    let s = sb.session().await;
    let out = python(&s, PLANT_CONFIG).await;
    assert!(out.contains("config wrote"), "{out}");
    let r = s.run("touch .mcp.json").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
}

/// Issue 29, item 5: the files server refuses the same paths with the same reason: a move
/// onto a protected path (or away from one) never happens.
#[tokio::test(flavor = "multi_thread")]
async fn the_files_server_refuses_protected_paths_with_the_same_reason() {
    let ws = super::files::Workspace::new(false);
    std::fs::write(ws.root.join("settings.json"), "{}").unwrap();
    std::fs::create_dir_all(ws.root.join(".gemini")).unwrap();
    std::fs::write(ws.root.join(".gemini/settings.json"), "{}").unwrap();
    let s = ws.session().await;
    for (src, dest) in [
        ("settings.json", ".mcp.json"),
        ("settings.json", ".vscode/tasks.json"),
        (".gemini/settings.json", "elsewhere.json"),
    ] {
        let r = s.move_file(src, dest).await;
        assert_eq!(r["code"], "POLICY_DENIED", "{src} -> {dest}: {r}");
        assert!(
            reason_of(&r).contains("is a protected path ([terminal] protected_paths)"),
            "{r}"
        );
    }
    assert!(ws.root.join("settings.json").exists() && !ws.root.join(".mcp.json").exists());
}
