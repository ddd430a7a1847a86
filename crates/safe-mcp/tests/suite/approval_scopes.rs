//! Issue 53: approvals a person can scope, over real MCP sessions. `git push origin main`
//! needs approval; the person answers once, for the session or as a rule, marking the
//! branch free or not, through a form (rmcp and the Python SDK), the server's page, MRTR
//! (MCP 2026-07-28) or the ticket CLI. Each scope covers its shape and nothing else: another
//! branch only where the branch was marked free, never another remote, `--force`, a force
//! refspec or another directory; it is listed with its uses, revoked, and expires; the
//! approvals file is out of reach of commands and the file tools; the preview shown is what
//! the scope does.

use std::path::Path;

use serde_json::{Value, json};

use super::approvals::{Client, Reply};
use super::support::*;

/// `git push` needs a person's approval.
const PUSH_RULE: &str = "[[terminal.rules]]\ncommand = \"git\"\nconfirm_args = [\"push\"]\nreason = \"a push leaves the machine\"\n";

/// A sandbox with a repository `repo` (branches `main` and `feature`) and two bare remotes
/// in the jail, `origin` and `upstream`; `approvals` goes into `[terminal.approvals]`.
fn push_sandbox(approvals: &str) -> Sandbox {
    let sb = Sandbox::builder()
        .extra(PUSH_RULE)
        .extra(&format!("[terminal.approvals]\n{approvals}"))
        .build();
    let jail = &sb.jail;
    for bare in ["origin.git", "upstream.git"] {
        host_git(jail, &["init", "-q", "--bare", bare]);
    }
    let repo = jail.join("repo");
    std::fs::create_dir(&repo).unwrap();
    host_git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    host_git(&repo, &["add", "a.txt"]);
    host_git(&repo, &["commit", "-qm", "one"]);
    for branch in ["feature", "other"] {
        host_git(&repo, &["branch", branch]);
    }
    host_git(&repo, &["remote", "add", "origin", "../origin.git"]);
    host_git(&repo, &["remote", "add", "upstream", "../upstream.git"]);
    sb
}

/// `git push` with `args`, from `repo` (or `cwd`).
async fn push(c: &Client, args: &str, cwd: &str) -> Value {
    c.run_with(json!({"command": format!("git push {args}"), "cwd": cwd}))
        .await
}

/// The `approval` of the newest `run_command` attempt.
fn last_approval(sb: &Sandbox) -> Value {
    super::approvals::approval_of(sb)
}

/// The message of the `n`th form the client was shown.
fn message(c: &Client, n: usize) -> String {
    match &c.asked()[n] {
        rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
        other => panic!("not a form: {other:?}"),
    }
}

/// A session scope with the branch (place 3) free, granted in the form: other branches
/// of the same remote from the same tree run without asking; another remote, an option, a
/// force refspec or another directory are asked again. The preview
/// the person read names exactly that; explain and describe tell the model.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_scope_with_a_free_branch_covers_that_shape_only() {
    let sb = push_sandbox("");
    let c = Client::start(&sb, Reply::Scope("session", &["3"]), true, false).await;
    let r = push(&c, "origin main", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(c.asked().len(), 1);
    let shown = message(&c, 0);
    for needle in [
        "once: this call only (the default)",
        "run_command `git push origin <any name>` in repo or beneath",
        "covers `git push origin main`, `git push origin other`",
        "`git push origin --force`",
        "`git push origin +main`",
        "`git push other main`",
        "`git push origin main (in .)`",
    ] {
        assert!(
            shown.contains(needle),
            "{needle:?} in the preview:\n{shown}"
        );
    }
    let granted = last_approval(&sb);
    assert_eq!(granted["via"], "form", "{granted}");
    let id = granted["scope"].as_str().unwrap().to_owned();
    // The model learns it before its next call.
    let e = c.explain("git push origin feature").await;
    assert_eq!(e["detail"]["needs_approval"], true, "{e}");
    let d = c.call("describe_policy", json!({})).await;
    assert_eq!(d["detail"]["pre_approved"][0]["scope"], json!(id), "{d}");
    // Covered: another branch, from the tree or beneath.
    let r = push(&c, "origin feature", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(c.asked().len(), 1, "not asked again");
    assert_eq!(last_approval(&sb)["via"], "scope");
    assert_eq!(last_approval(&sb)["scope"], json!(id));
    // Not covered: each asks again.
    for (args, cwd) in [
        ("upstream main", "repo"),
        ("origin main --dry-run", "repo"),
        ("origin main", "."),
    ] {
        let before = c.asked().len();
        let r = push(&c, args, cwd).await;
        assert_eq!(
            c.asked().len(),
            before + 1,
            "{args} in {cwd} was asked: {r}"
        );
    }
    // A scope never loosens a refusal: the policy's deny_args still answer first (a force
    // refspec is a force push to them).
    for args in ["--force origin main", "origin +feature"] {
        let before = c.asked().len();
        let r = push(&c, args, "repo").await;
        assert_eq!(r["code"], "POLICY_DENIED", "{r}");
        assert_eq!(c.asked().len(), before, "refused without asking: {r}");
    }
}

/// The explain of a covered call names the scope, without asking.
#[tokio::test(flavor = "multi_thread")]
async fn explain_names_the_scope_that_approves_a_call() {
    let sb = push_sandbox("");
    let c = Client::start(&sb, Reply::Scope("session", &[]), true, false).await;
    let r = push(&c, "origin main", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    let id = last_approval(&sb)["scope"].as_str().unwrap().to_owned();
    let e = c
        .call(
            "explain_command",
            json!({"command": "git push origin main", "cwd": "repo"}),
        )
        .await;
    let said = e["detail"]["approved"].as_str().unwrap_or_default();
    assert!(said.starts_with(&format!("approved by scope {id}")), "{e}");
    // Not marked free: another branch is asked.
    let e = c
        .call(
            "explain_command",
            json!({"command": "git push origin feature", "cwd": "repo"}),
        )
        .await;
    assert!(
        !e["detail"]["approved"]
            .as_str()
            .unwrap_or_default()
            .contains("by scope"),
        "{e}"
    );
    let before = c.asked().len();
    push(&c, "origin feature", "repo").await;
    assert_eq!(c.asked().len(), before + 1);
}

/// A client without elicitation gets a ticket; the person reads the preview with `approvals
/// show`, approves it as a rule with the branch free; the repeat runs with the ticket, the
/// next branch by the rule, which a fresh server still has (the approvals file); `list`
/// shows its uses; `revoke` ends it; expiry ends another.
#[tokio::test(flavor = "multi_thread")]
async fn a_rule_granted_with_a_ticket_is_kept_listed_used_and_revoked() {
    let sb = push_sandbox("");
    let c = Client::start(&sb, Reply::Decline, false, false).await;
    let r = push(&c, "origin main", "repo").await;
    let ticket = super::approvals::ticket_of(&r);
    let cli = |args: &[&str]| approvals_cli(&sb, args);
    let shown = cli(&["show", &ticket]);
    assert_success(&shown);
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        text.contains("`git push origin <any name>`") && text.contains("--scope session|rule"),
        "{text}"
    );
    let bad = cli(&["approve", &ticket, "--scope", "rule", "--free", "1"]);
    assert_failed_saying(&bad, "cannot be free");
    assert_success(&cli(&[
        "approve", &ticket, "--scope", "rule", "--free", "3",
    ]));
    let r = c
        .run_with(
            json!({"command": "git push origin main", "cwd": "repo", "approval_ticket": ticket}),
        )
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    let r = push(&c, "origin feature", "repo").await;
    assert_eq!(r["code"], "OK", "the rule covers another branch: {r}");
    let listed = String::from_utf8_lossy(&cli(&["list"]).stdout).into_owned();
    assert!(
        listed.contains("(rule, via ticket-cli)") && listed.contains("used 1 times"),
        "{listed}"
    );
    let id = last_approval(&sb)["scope"].as_str().unwrap().to_owned();
    // The approvals file: beside the policy, 0600, out of the commands' and the file
    // tools' reach (the control: the test itself can write it).
    let file = Path::new(&format!("{}.scopes.json", sb.policy.display())).to_path_buf();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let target = file.display().to_string();
    let r = c
        .run_with(json!({"command": ["sh", "-c", format!("echo '[]' > {target}")]}))
        .await;
    assert!(r["code"] != "OK" || r["detail"]["exit_code"] != 0, "{r}");
    let r = c
        .call("write_file", json!({"path": target, "content": "[]"}))
        .await;
    assert_ne!(r["code"], "OK", "{r}");
    assert!(
        std::fs::read_to_string(&file).unwrap().contains(&id),
        "the rule is still there"
    );
    // A fresh server reads the rule back.
    c.stop().await;
    let c = Client::start(&sb, Reply::Decline, false, false).await;
    let r = push(&c, "origin other", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    let revoked = cli(&["revoke", &id]);
    assert_success(&revoked);
    let r = push(&c, "origin feature", "repo").await;
    assert_eq!(r["code"], "POLICY_DENIED", "revoked: a ticket again: {r}");
    assert!(r["detail"]["approval"]["ticket"].is_string(), "{r}");
    assert!(sb.has_record(|r| r["event"] == "scope-revoked" && r["scope"] == json!(id)));
    assert!(sb.has_record(|r| r["event"] == "scope-granted"
        && r["scope"] == json!(id)
        && r["via"] == "ticket-cli"));
    // The report shows the scope, its uses (two: the calls after the ticket's) and its end.
    let html = report_html(&sb);
    let table = report_section(&html, "Approval scopes");
    let row = table
        .split("<tr>")
        .find(|row| row.contains(&id))
        .unwrap_or_else(|| panic!("no row for {id}:\n{table}"));
    assert!(
        row.contains("<td>2</td>") && row.contains("ticket-cli"),
        "{row}"
    );
}

/// A session scope expires server-side: after `session_scope_seconds` the same call asks.
#[tokio::test(flavor = "multi_thread")]
async fn a_scope_expires_on_the_server() {
    let sb = push_sandbox("session_scope_seconds = 1");
    let c = Client::start(&sb, Reply::Scope("session", &[]), true, false).await;
    push(&c, "origin main", "repo").await;
    assert_eq!(c.asked().len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    push(&c, "origin main", "repo").await;
    assert_eq!(c.asked().len(), 2, "expired: asked again");
}

/// MCP 2026-07-28: the form comes back in the call's rounds (MRTR); a scope chosen there
/// is bound to the caller and spares the next round; a session scope of one client is not
/// another's.
#[tokio::test(flavor = "multi_thread")]
async fn a_scope_chosen_in_the_mrtr_form_spares_the_next_round() {
    let sb = push_sandbox("");
    let c = Client::start_newer(&sb, Reply::Scope("session", &["3"]), true).await;
    let r = push(&c, "origin main", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(last_approval(&sb)["via"], "mrtr");
    let r = push(&c, "origin feature", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(last_approval(&sb)["via"], "scope");
    assert_eq!(c.asked().len(), 1);
    // Another connection of an older protocol (a session of its own) is asked.
    let other = Client::start(&sb, Reply::Decline, true, false).await;
    let r = push(&other, "origin feature", "repo").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert_eq!(other.asked().len(), 1);
}

/// The page: the person chooses the scope there; the client only shows the link.
#[tokio::test(flavor = "multi_thread")]
async fn a_scope_chosen_on_the_page_is_granted() {
    let port = free_port();
    let sb = push_sandbox(&format!("url_base = \"http://127.0.0.1:{port}\""));
    let c = Client::start(&sb, Reply::VisitScope("session", &["3"]), true, true).await;
    let r = push(&c, "origin main", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(last_approval(&sb)["via"], "url");
    let r = push(&c, "origin feature", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(last_approval(&sb)["via"], "scope");
}

/// The model cannot make or widen a scope with its arguments: an unknown argument is
/// refused before anything runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_model_cannot_ask_for_a_scope_itself() {
    let sb = push_sandbox("");
    let c = Client::start(&sb, Reply::Decline, true, false).await;
    let r = c
        .run_with(
            json!({"command": "git push origin main", "cwd": "repo", "approval_scope": "rule"}),
        )
        .await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    assert!(c.asked().is_empty());
}

/// A write approval's scope is a glob the person sees: with the name marked free, the
/// files of that directory with that extension; another directory or extension asks.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_scope_covers_its_glob_only() {
    let sb = push_sandbox("");
    sb.append_policy("[terminal.files]\nconfirm_paths = [\"docs/**\"]");
    std::fs::create_dir_all(sb.jail.join("docs/sub")).unwrap();
    let c = Client::start(&sb, Reply::Scope("session", &["1"]), true, false).await;
    let r = c.write_file("docs/a.md", "# a\n").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(c.asked().len(), 1);
    let shown = message(&c, 0);
    assert!(shown.contains("write_file of docs/*.md"), "{shown}");
    let r = c.write_file("docs/b.md", "# b\n").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(c.asked().len(), 1, "docs/*.md is covered");
    for outside in ["docs/run.sh", "docs/sub/c.md"] {
        let before = c.asked().len();
        c.write_file(outside, "x\n").await;
        assert_eq!(c.asked().len(), before + 1, "{outside} is outside the glob");
    }
}

/// A fleet's replica neither applies nor revokes another's scope: a rule made on replica
/// a (the approvals file is shared) is named by replica b's explain, and b asks.
#[tokio::test(flavor = "multi_thread")]
async fn a_scope_of_another_replica_is_named_and_not_applied() {
    let sb = push_sandbox("");
    let a = Client::start_replica(&sb, Reply::Scope("rule", &[]), "replica-a").await;
    let r = push(&a, "origin main", "repo").await;
    assert_eq!(r["code"], "OK", "{r}");
    let file = format!("{}.scopes.json", sb.policy.display());
    let rules: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let id = rules[0]["id"].as_str().unwrap().to_owned();
    assert!(id.ends_with("@replica-a"), "{id}");
    a.stop().await;
    let b = Client::start_replica(&sb, Reply::Decline, "replica-b").await;
    let e = b
        .call(
            "explain_command",
            json!({"command": "git push origin main", "cwd": "repo"}),
        )
        .await;
    let elsewhere = e["detail"]["scope_elsewhere"].as_str().unwrap_or_default();
    assert!(elsewhere.contains(&id), "{e}");
    let r = push(&b, "origin main", "repo").await;
    assert_eq!(
        r["code"], "POLICY_DENIED",
        "b asks, and the person declines: {r}"
    );
    assert_eq!(b.asked().len(), 1);
}

/// The Python SDK's elicitation callback chooses a session scope with the branch free: the
/// second push is not asked about.
#[test]
fn the_python_sdk_form_grants_a_scope() {
    let sb = push_sandbox("");
    let out = super::python_sdk::run_script(
        "scopes_client.py",
        &[BIN.to_owned(), sb.policy.to_string_lossy().into_owned()],
    );
    let line = out.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["first"], "OK", "{out}");
    assert_eq!(v["second"], "OK", "{out}");
    assert_eq!(v["asked"], 1, "{out}");
    assert!(
        v["scope_field"].as_bool().unwrap_or(false),
        "the form offered a scope: {out}"
    );
    assert_eq!(last_approval(&sb)["via"], "scope");
}
