//! Approvals on MCP 2026-07-28 (issue 34, item 1), over real sessions with rmcp's client in
//! that era (no initialize; `server/discover`): the form comes back as the call's
//! `InputRequiredResult`, the client repeats the call with the answer and the sealed
//! `requestState`. A replayed, altered, expired or foreign state approves nothing.

use rmcp::model::{CallToolRequestParams, CallToolResponse, InputResponses};
use serde_json::{Value, json};

use super::approvals::{Client, Reply, approval_of, assert_declined, sandbox};
use super::support::{envelope_of, reason_of, safe_mcp_on};

async fn client(sb: &super::support::Sandbox, reply: Reply) -> Client {
    Client::start_newer(sb, reply, true).await
}

/// One `tools/call` of run_command, without the client driving the rounds.
async fn once(
    c: &Client,
    command: &str,
    state: Option<String>,
    answer: Option<Value>,
) -> CallToolResponse {
    let Value::Object(args) = json!({"command": command}) else {
        unreachable!()
    };
    let mut params = CallToolRequestParams::new("run_command").with_arguments(args);
    params.request_state = state;
    params.input_responses = answer.map(|a| InputResponses::from([("approval".to_owned(), a)]));
    c.service().call_tool_once(params).await.unwrap()
}

fn accept() -> Value {
    json!({"action": "accept", "content": {"approve": true}})
}

/// The first round: the form and the state.
async fn first_round(c: &Client, command: &str) -> String {
    match once(c, command, None, None).await {
        CallToolResponse::InputRequired(input) => {
            let form = &input.input_requests.as_ref().unwrap()["approval"];
            let form = serde_json::to_value(form).unwrap();
            assert!(
                form["params"]["message"]
                    .as_str()
                    .unwrap()
                    .contains(command),
                "{form}"
            );
            input.request_state.unwrap()
        }
        other => panic!("expected input_required, got {other:?}"),
    }
}

fn refused(response: CallToolResponse, words: &str) {
    let CallToolResponse::Complete(result) = response else {
        panic!("expected a result")
    };
    let r = envelope_of(&result);
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains(words), "{words}: {r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_client_is_asked_in_the_calls_rounds_and_its_answer_decides() {
    let sb = sandbox("");
    let c = client(&sb, Reply::Accept(true)).await;
    let r = c.run("touch needs-ok").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(sb.jail.join("needs-ok").exists());
    assert_eq!(c.asked().len(), 1, "the form was shown once");
    let approval = approval_of(&sb);
    assert_eq!(approval["via"], "mrtr", "{approval}");
    assert_eq!(approval["decision"], "approved", "{approval}");

    let sb = sandbox("");
    let c = client(&sb, Reply::Decline).await;
    let r = c.run("touch needs-ok").await;
    assert_declined(&sb, &r);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replayed_altered_foreign_or_expired_state_approves_nothing() {
    let sb = sandbox("timeout_seconds = 2");
    let c = client(&sb, Reply::Accept(true)).await;
    let state = first_round(&c, "touch needs-ok").await;

    // Altered: one character of the state changed.
    let mut altered = state.clone().into_bytes();
    let at = altered.len() / 2;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    refused(
        once(&c, "touch needs-ok", Some(altered), Some(accept())).await,
        "does not open",
    );
    // Another command with this call's state.
    refused(
        once(
            &c,
            "touch needs-ok other",
            Some(state.clone()),
            Some(accept()),
        )
        .await,
        "does not open",
    );
    assert!(!sb.jail.join("other").exists());
    // The right call runs, once; its replay is refused.
    let CallToolResponse::Complete(done) =
        once(&c, "touch needs-ok", Some(state.clone()), Some(accept())).await
    else {
        panic!("expected a result")
    };
    assert_eq!(envelope_of(&done)["code"], "OK");
    std::fs::remove_file(sb.jail.join("needs-ok")).unwrap();
    refused(
        once(&c, "touch needs-ok", Some(state), Some(accept())).await,
        "used already",
    );
    assert!(!sb.jail.join("needs-ok").exists());

    // Expired: the state lives timeout_seconds.
    let state = first_round(&c, "touch needs-ok").await;
    tokio::time::sleep(std::time::Duration::from_millis(3200)).await;
    refused(
        once(&c, "touch needs-ok", Some(state), Some(accept())).await,
        "expired",
    );
    assert!(!sb.jail.join("needs-ok").exists());
    let refusals = sb
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "attempt" && r["approval"]["via"] == "mrtr")
        .count();
    assert!(refusals >= 6, "every round is in the trail: {refusals}");
}

/// describe_policy tells a 2026-07-28 client that it is asked in the call's rounds.
#[tokio::test(flavor = "multi_thread")]
async fn describe_says_a_newer_client_is_asked_in_the_rounds() {
    let sb = sandbox("");
    let c = client(&sb, Reply::Accept(true)).await;
    let d = c.call("describe_policy", json!({})).await;
    let how = d["detail"]["approvals"].as_str().unwrap();
    assert!(how.contains("between the call's rounds"), "{how}");
}

/// A fleet's servers share `state_key_file`: a state one server sealed opens at another,
/// and once spent at one it is spent at all (the spent nonces live beside the key). A key
/// file others can read stops the start.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_shares_the_state_key_and_a_state_is_spent_once_across_it() {
    use std::os::unix::fs::PermissionsExt;
    let sb = sandbox("state_key_file = \"state.key\"");
    let key = sb.base().join("state.key");
    std::fs::write(&key, "a fleet's shared approval sealing key, 32+ bytes").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let a = client(&sb, Reply::Accept(true)).await;
    let b = client(&sb, Reply::Accept(true)).await;
    let state = first_round(&a, "touch needs-ok").await;
    let CallToolResponse::Complete(done) =
        once(&b, "touch needs-ok", Some(state.clone()), Some(accept())).await
    else {
        panic!("expected a result")
    };
    assert_eq!(
        envelope_of(&done)["code"],
        "OK",
        "the other server opened it"
    );
    std::fs::remove_file(sb.jail.join("needs-ok")).unwrap();
    refused(
        once(&a, "touch needs-ok", Some(state), Some(accept())).await,
        "used already",
    );
    assert!(!sb.jail.join("needs-ok").exists());

    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = safe_mcp_on(&["policy", "check", "--config"], &sb.policy);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("state_key_file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
