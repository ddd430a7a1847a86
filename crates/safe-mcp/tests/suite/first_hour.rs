//! The first hour of a new user: refusals that say what to do instead, and the environment
//! an operator gives commands (`[terminal.env]`), over real MCP sessions.

use serde_json::json;

use super::files::Workspace;
use super::support::{Sandbox, assert_failed_saying, reason_of, safe_mcp_on, stdout_of};

#[tokio::test(flavor = "multi_thread")]
async fn terminal_refusals_teach_the_next_step() {
    let (sb, s) = Sandbox::started("").await;
    for (command, code, teaches) in [
        ("cd sub && ls", "POLICY_DENIED", "`cwd` argument"),
        ("ls *.txt", "POLICY_DENIED", "not expanded"),
        ("cat notes.tx?", "POLICY_DENIED", "find . -name"),
    ] {
        let r = s.run_expecting(command, code).await;
        assert!(reason_of(&r).contains(teaches), "{command}: {r}");
    }
    // A quoted pattern reaches the program as it should.
    let r = s.run("grep -c 'a*' notes.txt").await;
    assert_eq!(r["detail"]["stdout"], "3\n", "{r}");
    // An absolute cwd outside the jail names the jail and the way to say it.
    let r = s.run_in("/etc", "ls").await;
    assert_eq!(r["code"], "PATH_ESCAPE", "{r}");
    let reason = reason_of(&r);
    assert!(
        reason.contains(&sb.jail.display().to_string()) && reason.contains("relative"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn git_without_an_identity_says_how_the_operator_gives_one() {
    let (sb, s) = Sandbox::started("").await;
    let r = s.run("git init -q repo").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    sb.write_in_jail("repo/a.txt", "a\n");
    let r = s.run_in("repo", "git add a.txt").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    let r = s.run_in("repo", "git commit -qm first").await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert!(reason_of(&r).contains("[terminal.env] set"), "{r}");
    drop(s);

    // With the identity in [terminal.env], the same commit works; only named variables of
    // the server's own environment are passed.
    sb.append_policy("[terminal.env]\npass = [\"SAFE_MCP_TEST_PASSED\", \"SAFE_MCP_TEST_UNSET\"]\nset = { GIT_AUTHOR_NAME = \"Ada\", GIT_AUTHOR_EMAIL = \"ada@example.com\", GIT_COMMITTER_NAME = \"Ada\", GIT_COMMITTER_EMAIL = \"ada@example.com\", LANG = \"C\" }");
    let s = super::support::Session::start(&sb.policy, |c| {
        c.env("SAFE_MCP_TEST_PASSED", "visible")
            .env("SAFE_MCP_TEST_NOT_NAMED", "hidden");
    })
    .await;
    let r = s.run_in("repo", "git commit -qm first").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    let r = s.run_in("repo", "git log --format=%an").await;
    assert_eq!(r["detail"]["stdout"], "Ada\n", "{r}");
    let r = s.run("env").await;
    let out = stdout_of(&r);
    assert!(out.contains("SAFE_MCP_TEST_PASSED=visible"), "{out}");
    // The operator's locale is theirs whole: the server's LC_CTYPE gives way to it.
    assert!(
        out.lines().any(|l| l == "LANG=C") && !out.contains("LC_CTYPE="),
        "{out}"
    );
    assert!(
        !out.contains("hidden") && !out.contains("SAFE_MCP_TEST_UNSET"),
        "{out}"
    );
    assert!(!out.contains("leak-me"), "{out}");
}

#[test]
fn a_fixed_variable_cannot_be_set_and_a_secret_like_one_is_linted() {
    let sb = Sandbox::builder().limits("timeout_seconds = 5").build();
    let text = std::fs::read_to_string(&sb.policy).unwrap();
    // `policy check` of the policy with `env` as its `[terminal.env]` table.
    let check = |env: &str| {
        std::fs::write(&sb.policy, format!("{text}\n[terminal.env]\n{env}\n")).unwrap();
        safe_mcp_on(&["policy", "check", "--config"], &sb.policy)
    };
    let out = check("set = { PATH = \"/tmp\" }");
    assert_failed_saying(&out, "PATH is set by the server");
    let out = check("pass = [\"GITHUB_TOKEN\"]");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("`GITHUB_TOKEN`, which looks like a secret"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn files_refusals_teach_the_next_step() {
    let ws = Workspace::new(false);
    std::fs::write(ws.root.join("report.pdf"), "%PDF").unwrap();
    std::fs::create_dir(ws.root.join("Documents")).unwrap();
    let s = ws.session().await;
    // Only a file changed just now: plan again later, says the plan.
    let r = s.call("plan_organize", json!({})).await;
    assert!(reason_of(&r).contains("plan again in 2 minutes"), "{r}");
    // Onto an existing folder: the full destination path is suggested.
    let r = s.move_file("report.pdf", "Documents").await;
    assert_eq!(r["code"], "CONFLICT", "{r}");
    assert_eq!(r["detail"]["suggested_dest"], "Documents/report.pdf", "{r}");
    let r = s.move_file("report.pdf", "Documents/report.pdf").await;
    assert_eq!(r["code"], "OK", "{r}");
    // Undo blocked by a file in the way: the reason says what unblocks it.
    std::fs::write(ws.root.join("report.pdf"), "another").unwrap();
    let r = s.call("undo_last_action", json!({})).await;
    assert_eq!(r["code"], "CONFLICT", "{r}");
    assert!(reason_of(&r).contains("then try again"), "{r}");
}

/// gawk gets `--sandbox` for real, even with the kernel sandbox off: a redirection to a
/// file outside the jail is refused by gawk itself. Every awk present is tried.
#[tokio::test(flavor = "multi_thread")]
async fn each_awk_present_cannot_write_outside_the_jail() {
    let mut tried = 0;
    for name in ["gawk", "mawk", "awk"] {
        if !["/usr/bin", "/bin", "/usr/local/bin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(name).exists())
        {
            super::support::skip(format!("skipping {name}: not installed here"));
            continue;
        }
        tried += 1;
        let sb = Sandbox::builder()
            .allow_more(&[name])
            .limits("timeout_seconds = 10")
            .sandbox("mode = \"off\"")
            .build();
        let outside = sb.base().join(format!("written-by-{name}"));
        let s = sb.session().await;
        let program = format!("BEGIN{{print \"x\" > \"{}\"}}", outside.display());
        let r = s.run_with(json!({"command": [name, program]})).await;
        assert!(
            r["code"] == "POLICY_DENIED" || r["detail"]["exit_code"] != 0,
            "{name}: {r}"
        );
        assert!(!outside.exists(), "{name} wrote outside the jail: {r}");
    }
    assert!(tried > 0, "no awk on this machine");
}
