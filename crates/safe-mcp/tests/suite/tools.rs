//! Argument-level policy end to end: the payload's marker file never appears, an opted-in
//! escape really runs (so the markers can appear), and hardened tools still work.

use serde_json::json;

use super::support::{Sandbox, stdout_of};

const EXTRA_ALLOW: &[&str] = &["find", "tar", "sed", "awk", "sort", "sqlite3"];

fn sandbox(rules: &str) -> Sandbox {
    Sandbox::builder()
        .allow_more(EXTRA_ALLOW)
        .extra(rules)
        .build()
}

#[tokio::test(flavor = "multi_thread")]
async fn payloads_never_run() {
    let sb = sandbox("");
    let s = sb.session().await;
    let payloads = [
        ("find . -exec touch m-find \\;", "m-find"),
        ("git -c core.fsmonitor='touch m-git' status", "m-git"),
        (
            "tar --checkpoint=1 --checkpoint-action=exec='touch m-tar' -cf a.tar notes.txt",
            "m-tar",
        ),
        ("sed 's/alpha/touch m-sed/e' notes.txt", "m-sed"),
        ("awk 'BEGIN{system(\"touch m-awk\")}'", "m-awk"),
        ("sqlite3 :memory: '.system touch m-sql'", "m-sql"),
        ("sort notes.txt --compress-prog=touch", "m-sort"),
    ];
    for (command, marker) in payloads {
        let r = s.run_expecting(command, "POLICY_DENIED").await;
        assert!(
            r["detail"]["rule"].as_str().unwrap().starts_with("escape:"),
            "{command}: {r}"
        );
        assert!(
            !sb.jail.join(marker).exists(),
            "{command} created its marker"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_opted_in_escape_really_runs() {
    let sb = sandbox("[[terminal.rules]]\ncommand = \"find\"\nallow_escapes = [\"-exec\"]\n");
    let s = sb.session().await;
    let r = s.run("find notes.txt -exec touch m-find \\;").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(
        sb.jail.join("m-find").exists(),
        "the control shows the payload works when allowed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hardened_tools_still_work() {
    let sb = sandbox("");
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(&sb.jail)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(st.success());
    };
    git(&["init", "-q"]);
    git(&[
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "add",
        "notes.txt",
    ]);
    git(&[
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "commit",
        "-qm",
        "first",
    ]);
    // A planted repo-local hook and fsmonitor must not run.
    sb.write_in_jail(
        ".git/config",
        "[core]\n\tfsmonitor = touch m-fsmonitor\n\trepositoryformatversion = 0\n",
    );
    let s = sb.session().await;
    let r = s.run("git status --short").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    assert!(
        !sb.jail.join("m-fsmonitor").exists(),
        "core.fsmonitor from the repo must be overridden"
    );
    let r = s.run("git log --oneline -5").await;
    assert!(stdout_of(&r).contains("first"), "{r}");
    let r = s.run("sed -n 2p notes.txt").await;
    assert_eq!(r["detail"]["stdout"], "beta\n", "{r}");
    let r = s.run("grep -c /api/v1 notes.txt").await;
    assert_eq!(r["code"], "OK", "a pattern is not a path: {r}");
    let e = s.explain("git status").await;
    let run = e["detail"]["stages"][0]["run_argv"].as_array().unwrap();
    assert!(run.contains(&json!("core.hooksPath=/dev/null")), "{e}");
}
