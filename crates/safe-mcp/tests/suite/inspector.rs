//! MCP Inspector, the official debugging client (`@modelcontextprotocol/inspector` from
//! npm, its CLI, on Node 24 from PyPI), against both servers over stdio, as a developer
//! checking a server meets it: `--strict` finds no portability problem in any tool's
//! schemas, and every result it is handed (a command that ran, a denial, a refusal of bad
//! arguments, a files plan) passes its check against the tool's `outputSchema` (the CLI
//! fails a call whose structured result does not match).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::support::{BIN, Sandbox};

const INSPECTOR: &str = "@modelcontextprotocol/inspector@2.12.0";

/// Runs the Inspector's CLI with `args` against `server --config policy`; returns the exit
/// status, stdout and stderr.
fn inspect(server: &str, policy: &Path, args: &[&str]) -> (bool, String, String) {
    let node = super::http::node_home();
    let path = format!(
        "{}:{}",
        node.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(node.join("bin/node"))
        .arg(node.join("lib/node_modules/npm/bin/npx-cli.js"))
        .args(["-y", INSPECTOR, "--cli"])
        .args(args)
        .arg("--")
        .arg(BIN)
        .args([server, "--config"])
        .arg(policy)
        .env("PATH", &path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `tools/list --strict`: success, every tool listed, and not one finding.
fn strict_list(server: &str, policy: &Path, tools: &[&str]) {
    let (ok, out, err) = inspect(server, policy, &["--strict", "--method", "tools/list"]);
    assert!(ok, "{server}: {out}\n{err}");
    assert!(
        !err.contains("Warning") && !err.contains("Error") && !err.contains("problem"),
        "{server}: the Inspector found something in our schemas:\n{err}"
    );
    let listed: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for tool in tools {
        assert!(names.contains(tool), "{server}: {tool} not in {names:?}");
        let t = &listed["tools"][names.iter().position(|n| n == tool).unwrap()];
        assert!(
            t["outputSchema"].is_object(),
            "{tool} declares its envelope"
        );
    }
}

/// One `tools/call`, validated by the Inspector; returns the structured result.
fn call(server: &str, policy: &Path, tool: &str, args: &[&str]) -> Value {
    let mut argv = vec!["--method", "tools/call", "--tool-name", tool];
    if !args.is_empty() {
        argv.push("--tool-arg");
        argv.extend_from_slice(args);
    }
    let (ok, out, err) = inspect(server, policy, &argv);
    let result: Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{tool} {args:?}: {e}: {out}\n{err}"));
    // The CLI exits 5 with `tool_is_error` for a result with isError (a denial); a result
    // that fails its outputSchema is an error instead, with no result on stdout.
    let envelope = result["structuredContent"].clone();
    assert_eq!(
        result["isError"].as_bool().unwrap_or(false),
        !ok,
        "{out}\n{err}"
    );
    assert_eq!(envelope["ok"].as_bool(), Some(ok), "{out}\n{err}");
    assert!(
        ok || err.contains("tool_is_error"),
        "{tool} {args:?}: the Inspector failed the call for another reason:\n{err}"
    );
    envelope
}

#[test]
fn the_inspector_accepts_every_tool_and_validates_every_result() {
    let sb = Sandbox::new("");
    strict_list(
        "terminal",
        &sb.policy,
        &[
            "run_command",
            "explain_command",
            "describe_policy",
            "start_process",
            "read_process_output",
            "write_process_input",
            "stop_process",
            "list_processes",
        ],
    );
    let terminal = |tool: &str, args: &[&str]| call("terminal", &sb.policy, tool, args);
    let ran = terminal("run_command", &["command=echo hi"]);
    assert_eq!(ran["code"], "OK", "{ran}");
    assert_eq!(ran["detail"]["stdout"], "hi\n", "{ran}");
    let denied = terminal("run_command", &["command=curl http://x"]);
    assert_eq!(denied["code"], "POLICY_DENIED", "{denied}");
    assert_eq!(denied["ok"], false, "{denied}");
    let unknown = terminal("read_process_output", &["handle=nope"]);
    assert_eq!(unknown["code"], "INVALID_REQUEST", "{unknown}");
    let explained = terminal("explain_command", &["command=rm -rf /"]);
    assert_eq!(explained["code"], "POLICY_DENIED", "{explained}");

    let ws = super::files::Workspace::new(true);
    strict_list(
        "files",
        &ws.policy,
        &[
            "list_files",
            "plan_organize",
            "apply_plan",
            "move_file",
            "undo_last_action",
            "redo_last_action",
        ],
    );
    let planned = call("files", &ws.policy, "plan_organize", &[]);
    assert_eq!(planned["code"], "OK", "{planned}");
    let stale = call("files", &ws.policy, "apply_plan", &["plan_id=not-a-plan"]);
    assert_eq!(stale["code"], "INVALID_REQUEST", "{stale}");
}
