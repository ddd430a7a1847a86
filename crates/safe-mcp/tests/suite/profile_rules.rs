//! Rules combine, never replace (issue 49, item 1): a profile's argument rules for a program
//! stay in force when the operator's policy or the project file adds a rule for the same
//! program; dropping them is a named key that `describe_policy` and `policy check` show.

use super::cli::run;
use serde_json::json;

use super::builders::{in_terminal_table, with_profile};
use super::exec_allowlist::session;
use super::support::{Sandbox, Session, assert_failed_saying, safe_mcp_on};

/// Every profile's deny rules, as `(profile, program, a command each rule refuses)`.
const PROFILE_DENIALS: &[(&str, &str, &str, &[&str])] = &[
    (
        "git",
        "git",
        "tag",
        &[
            "git push --force origin main",
            "git push -f",
            "git push --mirror x",
            "git push --delete origin b",
        ],
    ),
    (
        "node",
        "npm",
        "ls",
        &[
            "npm install --script-shell /bin/sh",
            "npm install --ignore-scripts=false",
        ],
    ),
    (
        "rust",
        "cargo",
        "clean",
        &[
            "cargo build --config x=1",
            "cargo build -Z unstable-options",
        ],
    ),
];

fn sandbox_with(profile: &str, extra_rule: Option<&str>) -> Sandbox {
    let sb = Sandbox::builder()
        .allow(&["echo"])
        .limits("timeout_seconds = 10")
        .extra(extra_rule.unwrap_or(""))
        .build();
    with_profile(&sb, profile);
    // The sandbox's own git rule would mask the git profile's: take it out.
    sb.edit_policy(
        "[[terminal.rules]]\ncommand = \"git\"\ndeny_args = [\"push --force\", \"push -f\"]\nreason = \"force-push rewrites shared history\"\n",
        "",
    );
    sb
}

async fn denied(s: &Session, command: &str) -> bool {
    let r = s.explain(command).await;
    r["code"] == "POLICY_DENIED" && r["detail"]["would_run"] == false
}

/// The operator adds a rule for the profile's program (only a `confirm_args`: the rule that
/// used to replace the profile's, issue 49's `git push --force` that explained OK), the project
/// file adds another (a `deny_args` of its own): every profile denial still holds.
#[tokio::test(flavor = "multi_thread")]
async fn a_profiles_rules_hold_beside_the_operators_and_the_projects() {
    for (profile, program, confirmed, commands) in PROFILE_DENIALS {
        let operator = format!(
            "[[terminal.rules]]\ncommand = \"{program}\"\nconfirm_args = [\"{confirmed}\"]\n"
        );
        let sb = sandbox_with(profile, Some(&operator));
        sb.write_in_jail(".safe-mcp.toml", format!("[[terminal.rules]]\ncommand = \"{program}\"\ndeny_args = [\"another-one\"]\nreason = \"the project's own\"\n"));
        let s = session(&sb).await;
        for c in *commands {
            assert!(denied(&s, c).await, "{profile}: {c} is no longer denied");
        }
        assert!(
            denied(&s, &format!("{program} another-one")).await,
            "{profile}: the project's rule"
        );
        let r = s
            .call(
                "explain_command",
                json!({"command": format!("{program} {confirmed}")}),
            )
            .await;
        assert_eq!(
            r["detail"]["needs_approval"], true,
            "{profile}: the operator's rule: {r}"
        );
    }
}

/// Dropping a profile's rules is a key: named by `describe_policy` and `policy check`, and
/// an unknown name is a load error.
#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_profiles_rules_is_a_named_choice() {
    let sb = sandbox_with(
        "git",
        Some("[[terminal.rules]]\ncommand = \"git\"\nconfirm_args = [\"commit\"]\n"),
    );
    in_terminal_table(&sb, "drop_profile_rules = [\"git\"]");
    let s = session(&sb).await;
    assert!(!denied(&s, "git push --force origin main").await);
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(
        d["detail"]["profile_rules_dropped_by_the_operator"],
        json!(["git"]),
        "{d}"
    );
    let out = safe_mcp_on(&["policy", "check", "--config"], &sb.policy);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("drop_profile_rules removes the profiles' rules for git"),
        "{text}"
    );
    let bad = sandbox_with("git", None);
    in_terminal_table(&bad, "drop_profile_rules = [\"npm\"]");
    let out = safe_mcp_on(&["policy", "check", "--config"], &bad.policy);
    assert_failed_saying(&out, "drop_profile_rules");
}

/// Round 3 (issue 27), item 7: where the exec allowlist does not route them through the server (here it is off),
/// an allowed interpreter voids the argument rules and approvals of every other program;
/// `describe_policy` and `policy check` say so, naming the ruled programs. With the list on
/// (issue 35) the interpreter's nested calls meet the rules, and there is no warning.
#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_interpreter_is_named_as_voiding_the_argument_rules() {
    let rule = "[[terminal.rules]]\ncommand = \"git\"\nconfirm_args = [\"push\"]\n";
    let listed = Sandbox::builder()
        .allow(&["python3", "git"])
        .limits("timeout_seconds = 20")
        .extra(rule)
        .build();
    let s = listed.session().await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(d["detail"]["warnings"], json!([]), "{d}");
    drop(s);
    let sb = Sandbox::builder()
        .allow(&["python3", "git"])
        .limits("timeout_seconds = 20")
        .extra(&format!(
            "{rule}\n[terminal.sandbox]\nexec_allowlist = false\n"
        ))
        .build();
    let s = sb.session().await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    let warnings = d["detail"]["warnings"].to_string();
    assert!(
        warnings.contains("an allowed interpreter (python3) can start any other program itself, since exec_allowlist is off")
            && warnings.contains("of git"),
        "{warnings}"
    );
    let out = run(
        &["policy", "check", "--config", sb.policy.to_str().unwrap()],
        &[],
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("an allowed interpreter (python3)"), "{text}");
    // Without the interpreter, no such warning.
    let sb = Sandbox::allowing(&["git"], "timeout_seconds = 20");
    let s = sb.session().await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(d["detail"]["warnings"], json!([]), "{d}");
}
