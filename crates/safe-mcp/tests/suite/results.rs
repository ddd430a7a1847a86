//! What the model reads (issue 32), over a real MCP session: `NAME=value cmd` prefixes.

use serde_json::json;

use super::support::Sandbox;

/// Item 4: a prefix on the safe list reaches the command (in every stage of a list or
/// pipeline); one that changes what runs or where it reaches is refused naming the rule;
/// any other name is refused with the key that allows it; `explain_command` shows the
/// environment the command would get.
#[tokio::test(flavor = "multi_thread")]
async fn env_prefixes_on_the_safe_list_reach_the_command() {
    let sb = Sandbox::new("[terminal.env]\nprefix_allow = [\"MY_FLAG\"]\n");
    let s = sb.session().await;
    let r = s.run("RUST_BACKTRACE=1 NO_COLOR=1 env").await;
    assert_eq!(r["code"], "OK", "{r}");
    let out = r["detail"]["stdout"].as_str().unwrap();
    assert!(
        out.contains("RUST_BACKTRACE=1\n") && out.contains("NO_COLOR=1\n"),
        "{out}"
    );
    let r = s.run("echo a | MY_FLAG=on env && NODE_ENV=test env").await;
    let out = r["detail"]["stdout"].as_str().unwrap();
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
        let r = s.run(command).await;
        assert_eq!(r["code"], "POLICY_DENIED", "{command}: {r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains(says) && reason.contains("[terminal.env] set"),
            "{command}: {reason}"
        );
    }
    let r = s.run("OTHER_FLAG=1 ls").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(
        r["reason"].as_str().unwrap().contains("prefix_allow"),
        "{r}"
    );
    let r = s.run("FLAG=1").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    // The rest of the stage is judged as any command.
    let r = s.run("RUST_BACKTRACE=1 whoami").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let e = s
        .call("explain_command", json!({"command": "RUST_BACKTRACE=1 ls"}))
        .await;
    assert_eq!(e["code"], "OK", "{e}");
    assert_eq!(
        e["detail"]["stages"][0]["env"][0],
        json!(["RUST_BACKTRACE", "1"]),
        "{e}"
    );
}
