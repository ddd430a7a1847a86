//! The gateway (`[[gateway.servers]]`) with a hostile downstream server of our own
//! (`tests/gateway/hostile.py`): each of its probes tries something a server must not get
//! away with, through the terminal server over a real MCP session, as root and as an
//! unprivileged user; each probe's control runs the same server unconfined, where it works.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::support::{Sandbox, Session, eventually, host_git, server_uids};

/// The hostile server's script, copied outside the jail.
fn hostile_script(sb: &Sandbox) -> PathBuf {
    let dir = sb.base().join("srv");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("hostile.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/hostile.py"),
        &script,
    )
    .unwrap();
    script
}

/// A sandbox whose policy serves the hostile server's tools (every one but `hidden`).
fn hostile_sandbox(extra: &str) -> (Sandbox, PathBuf) {
    let sb = Sandbox::new("");
    let script = hostile_script(&sb);
    let dir = script.parent().unwrap().display().to_string();
    sb.append_policy(&format!(
        r#"[[gateway.servers]]
name = "hostile"
command = ["python3", "{script}"]
read_paths = ["{dir}"]
call_timeout_seconds = 3
max_result_bytes = 20000
{extra}

[gateway.servers.tools]
allow = ["*"]
deny = ["hidden"]
"#,
        script = script.display()
    ));
    (sb, script)
}

/// Waits until the server lists `tool` (its server is up), up to 30 s.
pub async fn wait_for_tool(s: &Session, tool: &str) -> Vec<String> {
    for _ in 0..300 {
        let names: Vec<String> = s
            .client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        if names.iter().any(|n| n == tool) {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{tool} was never listed; the server's stderr:\n{}",
        s.stderr()
    );
}

/// The text of a result's blocks.
pub fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The control: `tool` of the hostile server run unconfined, as this test's own child.
fn unconfined(script: &Path, tool: &str, args: Value) -> String {
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": args}});
    writeln!(stdin, "{call}").unwrap();
    drop(stdin);
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.wait();
    let v: Value = serde_json::from_str(&line).unwrap();
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Each probe held, with its control; the token redacted; the tool the policy denies
/// neither listed nor callable; the server's environment its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_server_is_held_by_its_confinement() {
    for uid in server_uids() {
        let (sb, _script) = hostile_sandbox("");
        // A repository in the jail: its hooks are held read-only for every writer.
        host_git(&sb.base().join("jail"), &["init", "-q"]);
        if let Some(uid) = uid {
            let st = std::process::Command::new("chown")
                .args(["-R", &format!("{uid}:{uid}")])
                .arg(sb.base().join("jail/.git"))
                .status()
                .unwrap();
            assert!(st.success());
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let trail = sb.base().join("audit.jsonl");
        let s = match uid {
            Some(uid) => {
                sb.give_to(*uid);
                sb.session_as(*uid).await
            }
            None => sb.session().await,
        };
        let names = wait_for_tool(&s, "hostile__echo").await;
        assert!(!names.iter().any(|n| n.contains("hidden")), "{names:?}");
        let echo = s.raw_call("hostile__echo", json!({"text": "hi"})).await;
        assert_eq!(text_of(&echo), "hi");

        let hooks = sb.base().join("jail/.git/hooks/pre-commit");
        let probes: Vec<(&str, Value)> = vec![
            ("read", json!({"path": "/etc/shadow"})),
            ("read", json!({"path": trail.display().to_string()})),
            ("run", json!({"argv": ["sh", "-c", "id"]})),
            ("run", json!({"argv": ["curl", "--version"]})),
            ("connect", json!({"port": port})),
            (
                "write",
                json!({"path": hooks.display().to_string(), "text": "#!/bin/sh\necho pwned\n"}),
            ),
        ];
        for (tool, args) in &probes {
            let r = s.raw_call(&format!("hostile__{tool}"), args.clone()).await;
            let said = text_of(&r);
            assert!(said.starts_with("FAILED"), "{uid:?} {tool} {args}: {said}");
        }
        assert!(!hooks.exists(), "the hook was written");
        // Inside the jail, a server may write.
        let inside = sb.base().join("jail/made-by-server.txt");
        let r = s
            .raw_call(
                "hostile__write",
                json!({"path": inside.display().to_string()}),
            )
            .await;
        assert!(text_of(&r).starts_with("OK"), "{}", text_of(&r));
        // The token, in text and structured content, redacted; its bytes nowhere.
        let r = s.raw_call("hostile__token", json!({})).await;
        let shown = serde_json::to_string(&r).unwrap();
        assert!(shown.contains("[REDACTED"), "{shown}");
        assert!(!shown.contains("a1B2c3D4e5"), "{shown}");
        // Its environment is its own: nothing of the server's.
        let env = text_of(&s.raw_call("hostile__environ", json!({})).await);
        assert!(!env.contains("leak-me"), "{env}");
        // The denied tool: refused, recorded with why.
        let r = s.raw_call("hostile__hidden", json!({})).await;
        assert_eq!(r.is_error, Some(true));
        drop(s);
        let trail_text = std::fs::read_to_string(&trail).unwrap();
        assert!(
            !trail_text.contains("a1B2c3D4e5"),
            "the token reached the trail"
        );
        assert!(sb.has_record(|r| r["kind"] == "attempt"
            && r["tool"] == "gateway"
            && r["gateway"]["tool"] == "read"
            && r["rule"] == "tools.allow *"));
        assert!(sb.has_record(|r| r["kind"] == "outcome"
            && r["tool"] == "gateway"
            && r["gateway"]["server"] == "hostile"
            && r["gateway"]["pid"].is_u64()
            && r["gateway"]["result_bytes"].is_u64()));
        assert!(sb.has_record(|r| r["kind"] == "attempt" && r["tool"] == "gateway_serve"));
    }
    // The controls: the same probes, unconfined, work (as root, which CI is).
    if rustix::process::geteuid().is_root() {
        let (sb, script) = hostile_sandbox("");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let elsewhere = sb.base().join("control-hooks/pre-commit");
        for (tool, args) in [
            ("read", json!({"path": "/etc/shadow"})),
            (
                "read",
                json!({"path": sb.base().join("policy.toml").display().to_string()}),
            ),
            ("run", json!({"argv": ["sh", "-c", "id"]})),
            ("run", json!({"argv": ["curl", "--version"]})),
            ("connect", json!({"port": port})),
            ("write", json!({"path": elsewhere.display().to_string()})),
        ] {
            let said = unconfined(&script, tool, args.clone());
            assert!(said.starts_with("OK"), "control {tool} {args}: {said}");
        }
    }
}

/// A server that exits mid-call, never answers, or floods: the call ends with a clear
/// refusal, the gateway keeps answering, and the server is started again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_hangs_or_floods_is_bounded_and_restarted() {
    let (sb, _script) = hostile_sandbox("");
    let s = sb.session().await;
    wait_for_tool(&s, "hostile__echo").await;
    let pid_of = |sb: &Sandbox| {
        sb.audit_records()
            .iter()
            .rev()
            .find(|r| r["kind"] == "outcome" && r["gateway"]["pid"].is_u64())
            .map(|r| r["gateway"]["pid"].as_u64().unwrap())
    };
    s.raw_call("hostile__echo", json!({"text": "1"})).await;
    let first = pid_of(&sb).unwrap();

    // Exits mid-call.
    let r = s.raw_call("hostile__exit", json!({})).await;
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("OPERATION_FAILED"), "{}", text_of(&r));
    let exited = eventually(10, || {
        sb.has_record(|r| {
            r["kind"] == "outcome" && r["tool"] == "gateway_serve" && r["exit_code"] == 3
        })
    })
    .await;
    assert!(
        exited,
        "no record of the exit: {:?}",
        sb.audit_records().last()
    );
    // Restarted: it answers again, as another process.
    let mut again = String::new();
    for _ in 0..100 {
        let r = s.raw_call("hostile__echo", json!({"text": "back"})).await;
        again = text_of(&r);
        if again == "back" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(again, "back");
    assert_ne!(pid_of(&sb).unwrap(), first);

    // Never answers: TIMEOUT after call_timeout_seconds; the server, hung (it answers no
    // ping), is started again, and the gateway answers throughout.
    let r = s.raw_call("hostile__hang", json!({})).await;
    assert!(text_of(&r).contains("TIMEOUT"), "{}", text_of(&r));
    let mut answered = String::new();
    for _ in 0..100 {
        answered = text_of(&s.raw_call("hostile__echo", json!({"text": "x"})).await);
        if answered == "x" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answered, "x");

    // A result past max_result_bytes is cut, and says so.
    let r = s
        .raw_call("hostile__flood", json!({"bytes": 100_000}))
        .await;
    let text = text_of(&r);
    assert!(text.len() < 21_000, "{}", text.len());
    assert!(
        text.contains("max_result_bytes"),
        "{}",
        &text[text.len() - 200..]
    );
    assert!(sb.has_record(|r| r["kind"] == "outcome"
        && r["code"] == "OUTPUT_TRUNCATED"
        && r["gateway"]["cut_bytes"].as_u64().unwrap_or(0) > 0));

    // A raw flood (no message, no newline): stopped as a flood, then started again.
    let r = s.raw_call("hostile__flood", json!({"raw": true})).await;
    assert_eq!(r.is_error, Some(true));
    let flooded = eventually(20, || {
        sb.has_record(|r| {
            r["kind"] == "outcome"
                && r["tool"] == "gateway_serve"
                && r["reason"].as_str().is_some_and(|t| t.contains("flood"))
        })
    })
    .await;
    assert!(flooded, "no flood record; stderr:\n{}", s.stderr());
    wait_for_tool(&s, "hostile__echo").await;
    let mut back = String::new();
    for _ in 0..100 {
        back = text_of(&s.raw_call("hostile__echo", json!({"text": "up"})).await);
        if back == "up" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(back, "up");
}

/// A server that adds a tool tells the gateway, which tells the client; arguments are
/// judged before anything is forwarded; explain_command and describe_policy answer for the
/// gateway's tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_change_and_arguments_are_judged_before_forwarding() {
    let (sb, _script) = hostile_sandbox(
        r#"[[gateway.servers.tools.args]]
tool = "read"
pointer = "/path"
kind = "path"

[[gateway.servers.tools.args]]
tool = "echo"
pointer = "/text"
kind = "refuse"
pattern = "(?i)drop table""#,
    );
    let s = sb.session().await;
    wait_for_tool(&s, "hostile__echo").await;
    s.raw_call("hostile__grow", json!({})).await;
    wait_for_tool(&s, "hostile__grown").await;

    let r = s
        .raw_call("hostile__read", json!({"path": "/etc/passwd"}))
        .await;
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["code"], "PATH_ESCAPE", "{v}");
    // Relative to the jail, which is the server's cwd.
    let r = s
        .raw_call("hostile__read", json!({"path": "notes.txt"}))
        .await;
    assert!(text_of(&r).starts_with("OK alpha"), "{}", text_of(&r));
    let r = s
        .raw_call("hostile__echo", json!({"text": "x; DROP TABLE users"}))
        .await;
    assert_eq!(r.structured_content.unwrap()["code"], "POLICY_DENIED");
    // Refused before forwarding: the trail has the refusal and its rule, no outcome pid.
    assert!(sb.has_record(|r| r["kind"] == "attempt"
        && r["verdict"] == "PATH_ESCAPE"
        && r["rule"] == "tools.args read /path path"));

    let e = s
        .call(
            "explain_command",
            json!({"command": "hostile__read {\"path\": \"/etc/shadow\"}"}),
        )
        .await;
    assert_eq!(e["code"], "PATH_ESCAPE", "{e}");
    assert_eq!(e["detail"]["would_run"], false);
    let e = s
        .call(
            "explain_command",
            json!({"command": "hostile__echo {\"text\": \"hi\"}"}),
        )
        .await;
    assert_eq!(e["code"], "OK", "{e}");
    assert_eq!(e["detail"]["rule"], "tools.allow *");

    let d = s.call("describe_policy", json!({})).await;
    let server = &d["detail"]["gateway"]["servers"][0];
    assert_eq!(server["name"], "hostile");
    assert_eq!(server["running"], true);
    assert!(
        server["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "hostile__echo")
    );
    assert_eq!(server["policy"]["deny"][0], "hidden");
    assert_eq!(server["confined"]["network"], "off");
}

/// A `confirm` tool climbs the approval ladder commands climb: a client that cannot be
/// asked gets a ticket, a person approves it with the CLI, and the repeated call (with the
/// ticket the tool's schema now offers) is forwarded once; the ticket never reaches the
/// server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_tool_is_forwarded_once_a_person_approves() {
    let (sb, _script) = hostile_sandbox("");
    sb.edit_policy(
        "deny = [\"hidden\"]",
        "deny = [\"hidden\"]\nconfirm = [\"environ\"]",
    );
    let s = sb.session().await;
    wait_for_tool(&s, "hostile__environ").await;
    let tools = s.client.list_all_tools().await.unwrap();
    let environ = tools.iter().find(|t| t.name == "hostile__environ").unwrap();
    assert!(
        environ.input_schema["properties"]["approval_ticket"].is_object(),
        "{:?}",
        environ.input_schema
    );
    let r = s.raw_call("hostile__environ", json!({})).await;
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["code"], "POLICY_DENIED", "{v}");
    let ticket = v["detail"]["approval"]["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    // Not approved yet: refused again, nothing forwarded.
    let r = s
        .raw_call("hostile__environ", json!({"approval_ticket": ticket}))
        .await;
    assert_eq!(r.structured_content.unwrap()["code"], "POLICY_DENIED");
    let out = super::host_tools::approvals_cli(&sb, &["approve", &ticket]);
    assert!(out.status.success(), "{out:?}");
    let r = s
        .raw_call("hostile__environ", json!({"approval_ticket": ticket}))
        .await;
    let env = text_of(&r);
    assert!(env.contains("PATH"), "{env}");
    assert!(
        !env.contains(&ticket),
        "the ticket reached the server: {env}"
    );
    // Once: the same ticket again is refused.
    let r = s
        .raw_call("hostile__environ", json!({"approval_ticket": ticket}))
        .await;
    assert_eq!(r.is_error, Some(true));
    drop(s);
    assert!(sb.has_record(|r| r["kind"] == "attempt"
        && r["tool"] == "gateway"
        && r["rule"] == "tools.confirm environ"
        && r["approval"]["via"] == "ticket"));
}

/// `audit report` has the gateway's servers with their calls, and `audit tail` names the
/// server of each gateway call: the refused ones too, a name the server does not list among
/// them (refused before the pipeline, and recorded as the server's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_and_the_tail_show_gateway_calls_by_server() {
    let (sb, _script) = hostile_sandbox("");
    let s = sb.session().await;
    wait_for_tool(&s, "hostile__echo").await;
    s.raw_call("hostile__echo", json!({"text": "a"})).await;
    let r = s.raw_call("hostile__hidden", json!({})).await;
    let v = r.structured_content.unwrap();
    assert_eq!(v["code"], "POLICY_DENIED", "{v}");
    assert!(v["reason"].as_str().unwrap().contains("tools.deny"), "{v}");
    let r = s.raw_call("hostile__nosuch", json!({})).await;
    let v = r.structured_content.unwrap();
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("not a tool the hostile server lists"),
        "{v}"
    );
    // explain_command answers for both as the calls were answered.
    let explain = |command: &str| s.call("explain_command", json!({"command": command}));
    let e = explain("hostile__hidden").await;
    assert_eq!(e["detail"]["rule"], "tools.deny hidden", "{e}");
    let e = explain("hostile__nosuch {}").await;
    assert_eq!(e["detail"]["rule"], "not listed", "{e}");
    assert_eq!(e["detail"]["would_run"], false, "{e}");
    drop(s);
    assert!(sb.has_record(|r| r["kind"] == "attempt"
        && r["tool"] == "gateway"
        && r["gateway"]["server"] == "hostile"
        && r["gateway"]["tool"] == "hidden"
        && r["rule"] == "tools.deny hidden"));
    // Not the server's at all: allowed by `*`, refused as not listed.
    assert!(sb.has_record(|r| r["kind"] == "attempt"
        && r["gateway"]["server"] == "hostile"
        && r["gateway"]["tool"] == "nosuch"
        && r["rule"] == "not listed"));
    let html = super::host_tools::report_html(&sb);
    let section = super::host_tools::report_section(&html, "Gateway servers");
    // server, calls, forwarded, refused, failed: the refusals count as the server's.
    assert!(
        section.contains("<td>hostile</td><td>3</td><td>1</td><td>2</td><td>0</td>"),
        "{section}"
    );
    let tail = std::process::Command::new(super::support::BIN)
        .args(["audit", "tail"])
        .arg(sb.base().join("audit.jsonl"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&tail.stdout);
    assert_eq!(text.matches("gateway:hostile").count(), 3, "{text}");
}

/// `safe-mcp gateway add` writes an entry the terminal runs (read paths inferred, tools
/// denied until listed), refuses one that would not load and leaves the policy as it was;
/// `gateway list` shows it without starting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_add_writes_an_entry_the_terminal_runs() {
    let sb = Sandbox::new("");
    let script = hostile_script(&sb);
    let cli = |args: &[&str]| {
        std::process::Command::new(super::support::BIN)
            .arg("gateway")
            .args(args)
            .arg("--config")
            .arg(&sb.policy)
            .output()
            .unwrap()
    };
    // The operator's own mode is kept (the policy is replaced, not edited in place).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sb.policy, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::read_to_string(&sb.policy).unwrap();
    let bad = std::process::Command::new(super::support::BIN)
        .args(["gateway", "add", "--config"])
        .arg(&sb.policy)
        .args(["Bad_Name", "--", "python3"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("gateway.servers"));
    assert_eq!(std::fs::read_to_string(&sb.policy).unwrap(), before);

    let out = std::process::Command::new(super::support::BIN)
        .args(["gateway", "add", "--config"])
        .arg(&sb.policy)
        .args(["probe", "--allow", "echo", "--", "python3"])
        .arg(&script)
        .arg(sb.base())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mode = std::fs::metadata(&sb.policy).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // Read paths come from the command's files only: the directory operand (here one that
    // holds the jail, the policy and the trail) is data, never made readable.
    let written = std::fs::read_to_string(&sb.policy).unwrap();
    let reads = written
        .lines()
        .find(|l| l.starts_with("read_paths"))
        .unwrap_or_default();
    assert!(reads.contains("/srv"), "{written}");
    assert!(
        !reads.contains(&format!("\"{}\"", sb.base().display())),
        "{written}"
    );
    let listed = cli(&["list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        text.contains("probe: python3") && text.contains("allow [\"echo\"]"),
        "{text}"
    );
    let s = sb.session().await;
    let names = wait_for_tool(&s, "probe__echo").await;
    assert!(!names.iter().any(|n| n == "probe__read"), "{names:?}");
    assert_eq!(
        text_of(&s.raw_call("probe__echo", json!({"text": "ok"})).await),
        "ok"
    );
}

/// A server's credential is in its environment as a placeholder only: the proxy adds the
/// real value for the credential's hosts, and the value itself never reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_credential_is_a_placeholder_in_its_environment() {
    use std::os::unix::fs::PermissionsExt;
    let real = "real-token-value-0123456789";
    let sb = Sandbox::new("");
    let token = sb.base().join("api-token");
    std::fs::write(&token, format!("{real}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = hostile_script(&sb);
    sb.append_policy(&format!(
        r#"[[gateway.servers]]
name = "hostile"
command = ["python3", "{script}"]
read_paths = ["{dir}"]

[gateway.servers.network]
mode = "allowlist"
allow_domains = ["api.cred.test"]

[[gateway.servers.credentials]]
name = "API_TOKEN"
from = "file:{token}"
hosts = ["api.cred.test"]
inject = {{ header = "Authorization", format = "Bearer {{}}" }}

[gateway.servers.tools]
allow = ["environ"]
"#,
        script = script.display(),
        dir = script.parent().unwrap().display(),
        token = token.display(),
    ));
    let s = sb.session().await;
    wait_for_tool(&s, "hostile__environ").await;
    let env: serde_json::Value =
        serde_json::from_str(&text_of(&s.raw_call("hostile__environ", json!({})).await)).unwrap();
    let placeholder = env["API_TOKEN"].as_str().unwrap_or_default();
    assert!(!placeholder.is_empty(), "{env}");
    assert!(!env.to_string().contains(real), "{env}");
    assert!(
        env["HTTPS_PROXY"].is_string() || env["https_proxy"].is_string(),
        "{env}"
    );
}

/// Fail closed: once the trail cannot take the attempt record, a gateway call is refused
/// with AUDIT_UNAVAILABLE and never reaches the server; with the trail writable again, the
/// same call is forwarded (the control).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_cannot_be_recorded_is_not_forwarded() {
    if !rustix::process::geteuid().is_root() {
        super::support::skip("skipping: mounting a small filesystem for the trail needs root");
        return;
    }
    let (sb, _script) = hostile_sandbox("");
    let mnt = sb.base().join("trail");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(mounted.success());
    sb.edit_policy(
        "audit_log = \"audit.jsonl\"",
        &format!("audit_log = \"{}\"", mnt.join("audit.jsonl").display()),
    );
    let s = sb.session().await;
    wait_for_tool(&s, "hostile__write").await;
    // The trail's filesystem full: a record fits only in what its last page has left, and
    // soon nothing does.
    let filler = mnt.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
        while f.write_all(&[0u8]).is_ok() {}
    }
    let marker = |i: usize| sb.base().join(format!("jail/forwarded-{i}.txt"));
    let mut refused = None;
    for i in 0..200 {
        let r = s
            .raw_call(
                "hostile__write",
                json!({"path": marker(i).display().to_string()}),
            )
            .await;
        let v = r.structured_content.clone().unwrap_or_default();
        if v["code"] == "AUDIT_UNAVAILABLE" {
            refused = Some(i);
            break;
        }
        assert!(text_of(&r).starts_with("OK"), "{r:?}");
    }
    let i = refused.expect("a full trail must refuse the call");
    assert!(!marker(i).exists(), "the refused call reached the server");
    // The control: room again, and the same call is forwarded.
    std::fs::remove_file(&filler).unwrap();
    let r = s
        .raw_call(
            "hostile__write",
            json!({"path": marker(i).display().to_string()}),
        )
        .await;
    assert!(text_of(&r).starts_with("OK"), "{r:?}");
    assert!(marker(i).exists());
    drop(s);
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(&mnt)
        .status();
}
