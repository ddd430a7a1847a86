//! Approval tickets (issue 34, item 2), over real MCP sessions: a client that cannot be
//! asked gets a ticket; the person approves it with `safe-mcp approvals` (the CLI, talking to
//! the running server over its owner-only socket with a key no command can read); the model
//! repeats the exact call with `approval_ticket` and it runs once.

use serde_json::json;

use super::approvals::{Client, Reply, approval_of, sandbox, ticket_of};
use super::support::{Sandbox, reason_of, stdout_of};

/// `safe-mcp approvals ARGS --config POLICY`: exit code, stdout and stderr.
fn approvals(sb: &Sandbox, args: &[&str]) -> (i32, String, String) {
    let out = super::support::approvals_cli(sb, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_cannot_ask_gets_a_ticket_a_person_approves_and_it_runs_once() {
    let (sb, c) = Client::fresh(Reply::Accept(true), false).await;
    let r = c.run("touch needs-ok").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let ticket = ticket_of(&r);
    let reason = reason_of(&r);
    assert!(
        reason.contains(&format!("safe-mcp approvals approve {ticket}")),
        "{r}"
    );
    assert!(
        reason.contains("did not declare"),
        "why it could not ask: {r}"
    );
    assert!(
        r["detail"]["approval"]["expires_at"].as_u64().unwrap() > 0,
        "{r}"
    );
    assert!(!sb.jail.join("needs-ok").exists());
    assert_eq!(approval_of(&sb)["decision"], "ticket-issued");

    // The person sees exactly what would run.
    let (code, out, err) = approvals(&sb, &["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&ticket) && out.contains("touch needs-ok"),
        "{out}"
    );
    assert!(out.contains("pending"), "{out}");

    // Not approved yet: the repeat is refused, and nothing runs.
    let again = json!({"command": "touch needs-ok", "approval_ticket": ticket});
    let r = c.run_with(again.clone()).await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("not been approved"), "{r}");

    let (code, out, err) = approvals(&sb, &["approve", &ticket]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("approved: ticket"), "{out}");
    let (code, _, err) = approvals(&sb, &["approve", &ticket]);
    assert_eq!(code, 1, "a second decision is refused");
    assert!(err.contains("already decided"), "{err}");

    // Another command with the ticket is refused (and leaves the ticket for its own call).
    let other = json!({"command": "touch needs-ok other", "approval_ticket": ticket});
    let r = c.run_with(other).await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("another command"), "{r}");
    assert!(!sb.jail.join("other").exists());

    // The exact call runs, once.
    let r = c.run_with(again.clone()).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(sb.jail.join("needs-ok").exists());
    let approval = approval_of(&sb);
    assert_eq!(approval["via"], "ticket-cli", "{approval}");
    assert_eq!(
        approval["approver_uid"],
        rustix::process::geteuid().as_raw(),
        "{approval}"
    );
    std::fs::remove_file(sb.jail.join("needs-ok")).unwrap();
    let r = c.run_with(again).await;
    assert_eq!(r["code"], "POLICY_DENIED", "a ticket runs once: {r}");
    assert!(!sb.jail.join("needs-ok").exists());
    let decided = sb
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "approval" && r["event"] == "ticket-approved")
        .count();
    assert_eq!(decided, 1, "the approval is in the trail");
}

/// A denied ticket runs nothing; a ticket is bound to the MCP session that asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_ticket_or_one_from_another_session_runs_nothing() {
    let sb = sandbox("mode = \"ticket\"");
    let c = Client::start(&sb, Reply::Accept(true), true, false).await;
    let r = c.run("touch needs-ok").await;
    assert!(c.asked().is_empty(), "mode ticket never asks the client");
    let ticket = ticket_of(&r);
    let (code, _, err) = approvals(&sb, &["approve", &ticket]);
    assert_eq!(code, 0, "{err}");
    let again = json!({"command": "touch needs-ok", "approval_ticket": ticket});
    let other = Client::start(&sb, Reply::Accept(true), true, false).await;
    let r = other.run_with(again.clone()).await;
    assert_eq!(r["code"], "POLICY_DENIED", "another session: {r}");
    assert!(!sb.jail.join("needs-ok").exists());

    let r = c.run("touch needs-ok").await;
    let denied = ticket_of(&r);
    let (code, out, err) = approvals(&sb, &["deny", &denied]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("denied: ticket"), "{out}");
    let r = c
        .run_with(json!({"command": "touch needs-ok", "approval_ticket": denied}))
        .await;
    assert!(reason_of(&r).contains("was denied"), "{r}");
    assert!(!sb.jail.join("needs-ok").exists());
}

/// Nothing a command can reach approves a ticket: in the private view the desk's socket and
/// key do not exist; without a view the key cannot be read, and the socket refuses a request
/// without it.
#[tokio::test(flavor = "multi_thread")]
async fn no_command_can_approve_a_ticket() {
    for namespaces in ["auto", "off"] {
        let sb = sandbox("");
        let text = std::fs::read_to_string(&sb.policy)
            .unwrap()
            .replace("\"sh\",", "\"sh\", \"python3\",");
        std::fs::write(
            &sb.policy,
            format!("{text}\n[terminal.sandbox]\nnamespaces = \"{namespaces}\"\n"),
        )
        .unwrap();
        let c = Client::start(&sb, Reply::Accept(true), false, false).await;
        let r = c.run("touch needs-ok").await;
        let ticket = ticket_of(&r);
        let sock = format!("{}.approvals.sock", sb.audit.display());
        let key = format!("{}.approvals.key", sb.audit.display());
        assert!(std::path::Path::new(&sock).exists() && std::path::Path::new(&key).exists());
        let probe = format!(
            "import socket, json\ntry:\n    k = open('{key}').read()\nexcept OSError as e:\n    k = ''\n    print('key', e.errno)\ntry:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect('{sock}')\n    s.sendall((json.dumps({{'key': k, 'op': 'approve', 'ticket': '{ticket}'}}) + '\\n').encode())\n    print(s.recv(4096).decode())\nexcept OSError as e:\n    print('socket', e.errno)\n"
        );
        let r = c.py(probe).await;
        let out = stdout_of(&r).to_owned();
        assert!(
            out.starts_with("key "),
            "{namespaces}: the key was read: {r}"
        );
        assert!(
            !out.contains("\"ok\":true"),
            "{namespaces}: a command approved: {r}"
        );
        let (_, listed, _) = approvals(&sb, &["show", &ticket]);
        assert!(listed.contains("pending"), "{namespaces}: {listed}");
    }
}

/// Item 3: describe_policy and explain_command say how this client would be asked.
#[tokio::test(flavor = "multi_thread")]
async fn describe_and_explain_say_how_this_client_would_be_asked() {
    for (elicitation, words) in [(true, "a form in this client"), (false, "with a ticket")] {
        // A sandbox each: the desk is one per audit trail, and the last server may still
        // hold it while it exits.
        let (_sb, c) = Client::fresh(Reply::Accept(true), elicitation).await;
        let d = c.call("describe_policy", json!({})).await;
        let approvals = d["detail"]["approvals"].as_str().unwrap();
        assert!(approvals.contains(words), "{elicitation}: {approvals}");
        let e = c.explain("touch needs-ok").await;
        let approved = e["detail"]["approved"].as_str().unwrap();
        assert!(approved.contains(words), "{elicitation}: {e}");
        let plain = c.explain("touch fine").await;
        assert!(plain["detail"].get("approved").is_none(), "{plain}");
    }
    let denied = sandbox("mode = \"deny\"");
    let c = Client::start(&denied, Reply::Accept(true), true, false).await;
    let d = c.call("describe_policy", json!({})).await;
    assert!(
        d["detail"]["approvals"].as_str().unwrap().contains("never"),
        "{d}"
    );
}

/// The file tools' approvals take the same paths: a client that cannot ask gets a ticket,
/// bound to the path and the content, which the approved repeat spends; other content with
/// the ticket writes nothing. On 2026-07-28 the form comes in the call's rounds.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_write_that_needs_approval_gets_a_ticket_or_mrtr_bound_to_its_content() {
    let sb = sandbox("");
    sb.append_policy("[terminal.files]\nconfirm_paths = [\"Cargo.toml\"]");
    let c = Client::start(&sb, Reply::Accept(true), false, false).await;
    let write = |content: &str, ticket: Option<&str>| json!({"path": "Cargo.toml", "content": content, "approval_ticket": ticket});
    let r = c.call("write_file", write("[package]\n", None)).await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let ticket = ticket_of(&r);
    assert!(reason_of(&r).contains("nothing was written"), "{r}");
    let (code, _, err) = approvals(&sb, &["approve", &ticket]);
    assert_eq!(code, 0, "{err}");
    let r = c.call("write_file", write("[evil]\n", Some(&ticket))).await;
    assert_eq!(r["code"], "POLICY_DENIED", "other content: {r}");
    assert!(!sb.jail.join("Cargo.toml").exists());
    let r = c
        .call("write_file", write("[package]\n", Some(&ticket)))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("Cargo.toml")).unwrap(),
        "[package]\n"
    );

    let newer = Client::start_newer(&sb, Reply::Accept(true), true).await;
    let r = newer
        .call("write_file", write("[package]\nname = \"x\"\n", None))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(newer.asked().len(), 1, "the form came in the rounds");
    assert!(
        std::fs::read_to_string(sb.jail.join("Cargo.toml"))
            .unwrap()
            .contains("name")
    );
}

/// On MCP 2026-07-28 a client without form elicitation gets a ticket too (bound to the
/// caller alone, since that era has no sessions), and the approved repeat runs.
#[tokio::test(flavor = "multi_thread")]
async fn on_the_stateless_protocol_a_client_without_forms_gets_a_ticket() {
    let sb = sandbox("");
    let c = Client::start_newer(&sb, Reply::Accept(true), false).await;
    let r = c.run("touch needs-ok").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("2026-07-28"), "{r}");
    let ticket = ticket_of(&r);
    let (code, _, err) = approvals(&sb, &["approve", &ticket]);
    assert_eq!(code, 0, "{err}");
    let r = c
        .run_with(json!({"command": "touch needs-ok", "approval_ticket": ticket}))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(sb.jail.join("needs-ok").exists());
}

/// Issue 49: the model's command and path reach the operator's terminal through
/// `approvals list`: no control sequence of theirs may (ESC and CSI concealing the rest of
/// the line, OSC retitling the window, BEL, a bidi override reversing the words).
#[tokio::test(flavor = "multi_thread")]
async fn approvals_list_prints_no_control_sequence_of_the_models() {
    let (sb, c) = Client::fresh(Reply::Accept(true), false).await;
    let name = "a\u{1b}]0;title\u{7}b\u{1b}[8mhidden\u{1b}[2Kc\u{202e}gnp.d";
    let r = c
        .run_with(json!({"command": ["touch", "needs-ok", name]}))
        .await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(r["detail"]["approval"]["ticket"].is_string(), "{r}");
    let (code, out, err) = approvals(&sb, &["list"]);
    assert_eq!(code, 0, "{err}");
    for bad in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!out.contains(bad), "{bad:?} reached the terminal: {out:?}");
    }
    assert!(
        out.contains("hidden"),
        "the text itself is still shown: {out:?}"
    );
}

/// Issue 49: one caller cannot fill the desk's 64 waiting tickets for everyone; past 16 of
/// its own it is told to wait for the person, and nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn one_caller_holds_at_most_sixteen_waiting_tickets() {
    let (sb, c) = Client::fresh(Reply::Accept(true), false).await;
    for i in 0..16 {
        let r = c.run(&format!("touch needs-ok wait-{i}")).await;
        assert!(r["detail"]["approval"]["ticket"].is_string(), "{i}: {r}");
    }
    let r = c.run("touch needs-ok wait-16").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(
        reason_of(&r).contains("16 of your tickets are waiting"),
        "{r}"
    );
    assert!(!sb.jail.join("wait-16").exists());
}
