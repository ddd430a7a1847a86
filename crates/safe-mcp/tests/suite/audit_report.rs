//! `safe-mcp audit report` (issue 37, item 3): the HTML page of a real session's trail (a
//! run, a refusal, network through the proxy, an approval, a process session), rendered in
//! a real headless browser (Debian's chromium), with an assertion on the rendered text and
//! a screenshot.

use serde_json::json;

use super::approvals::{Client, Reply};
use super::egress::Upstream;
use super::support::{Sandbox, assert_success, report_html, report_section, safe_mcp_on};

/// The sandbox's policy, replaced: egress to localhost, `touch needs-ok` confirmed.
fn policy(sb: &Sandbox) {
    std::fs::write(
        &sb.policy,
        r#"audit_log = "audit.jsonl"

[terminal]
jail_root = "jail"
path = ["/usr/bin", "/bin"]

[terminal.allowlist]
commands = ["curl", "echo", "touch", "sleep"]

[[terminal.rules]]
command = "touch"
confirm_args = ["needs-ok"]
reason = "touching needs-ok needs a person"

[terminal.network]
mode = "allowlist"
allow_domains = ["localhost"]
allow_private = true
"#,
    )
    .unwrap();
}

/// Runs chromium headless on `page` with `args`; its stdout.
fn chromium(page: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            page.parent().unwrap().join("chromium").display()
        ))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_report_of_a_real_session_renders_in_a_browser() {
    if !super::support::installed("chromium") {
        return;
    }
    let up = Upstream::start().await;
    let sb = Sandbox::new("");
    policy(&sb);
    let c = Client::start(&sb, Reply::Accept(true), true, false).await;
    let ran = c.run("echo one").await;
    assert_eq!(ran["code"], "OK", "{ran}");
    let refused = c.run("whoami").await;
    assert_eq!(refused["code"], "POLICY_DENIED", "{refused}");
    let fetched = c
        .run_with(json!({"command": format!("curl -s http://localhost:{}/", up.port)}))
        .await;
    assert_eq!(fetched["detail"]["exit_code"], 0, "{fetched}");
    c.run("curl -s -o /dev/null https://blocked.example.org/")
        .await;
    let approved = c.run("touch needs-ok").await;
    assert_eq!(approved["code"], "OK", "{approved}");
    let started = c
        .call("start_process", json!({"command": "sleep 30"}))
        .await;
    let handle = started["detail"]["handle"].as_str().unwrap().to_owned();
    c.call("stop_process", json!({"handle": handle})).await;
    let refused_start = c
        .call(
            "start_process",
            json!({"command": "whoami --refused-start"}),
        )
        .await;
    assert_eq!(refused_start["code"], "POLICY_DENIED", "{refused_start}");
    drop(c);

    let html = report_html(&sb);
    // Where report_html wrote the page, for the browser below.
    let out = sb.base().join("report.html");
    // Issue 50.8: a refused start_process started no session; it is a call, not a session.
    let sessions = report_section(&html, "Process sessions");
    assert!(sessions.contains("sleep 30"), "{sessions}");
    assert!(!sessions.contains("--refused-start"), "{sessions}");
    assert!(
        html.contains("--refused-start"),
        "the refused call is on the page"
    );
    // --since keeps what came at or after it.
    let later = safe_mcp_on(
        &["audit", "report", "--since", "2999-01-01", "--config"],
        &sb.policy,
    );
    assert!(String::from_utf8_lossy(&later.stdout).contains(" · 0 records · "));
    assert!(!html.contains("<script"), "a page without scripts");
    assert!(
        !html.contains("http://") || !html.contains("<link"),
        "nothing fetched"
    );

    let dom = chromium(&out, &["--dump-dom"]);
    for want in [
        "Chain intact",
        "echo one",
        "whoami",
        "not-allowlisted",
        &format!("localhost:{}", up.port),
        "blocked.example.org:443",
        "touch needs-ok",
        "approved",
        "sleep 30",
        "stop",
    ] {
        assert!(
            dom.contains(want),
            "the rendered page lacks {want:?}:\n{dom}"
        );
    }
    let shot = sb.base().join("report.png");
    chromium(
        &out,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1500",
            "--hide-scrollbars",
        ],
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    // Where the documentation's screenshot comes from: SAFE_MCP_REPORT_SHOT=docs/x.png.
    if let Some(keep) = std::env::var_os("SAFE_MCP_REPORT_SHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
