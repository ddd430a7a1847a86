//! `safe-mcp demo`: a temporary sandbox, the real server as a child process, a real MCP
//! client, and the envelopes it gets back.
//!
//! Owns nothing but a showcase. Each step states the result code it expects, so the demo
//! doubles as a smoke test: it exits non-zero if any envelope differs.

use std::error::Error;
use std::path::Path;

use std::process::ExitCode;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::exit::{fatal, say};

const FILES: &[(&str, &str)] = &[
    (
        "notes.txt",
        "safe-mcp keeps the model inside the jail.\nThe kernel enforces the jail too.\n",
    ),
    (
        "config.env",
        "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nDB_PASSWORD=correct-horse-battery\nREGION=eu-west-1\n",
    ),
    ("src/main.rs", "fn main() { println!(\"hi\"); }\n"),
];

struct Step {
    title: &'static str,
    tool: &'static str,
    args: Value,
    expect: &'static str,
}

fn steps() -> Vec<Step> {
    vec![
        Step {
            title: "an allowed command",
            tool: "run_command",
            args: json!({"command": "ls -a"}),
            expect: "OK",
        },
        Step {
            title: "secrets in output are redacted before they leave the server",
            tool: "run_command",
            args: json!({"command": "cat config.env"}),
            expect: "OK",
        },
        Step {
            title: "the denylist always wins",
            tool: "run_command",
            args: json!({"command": "rm -rf notes.txt"}),
            expect: "POLICY_DENIED",
        },
        Step {
            title: "a cwd that climbs out of the jail",
            tool: "run_command",
            args: json!({"command": "ls", "cwd": "../"}),
            expect: "PATH_ESCAPE",
        },
        Step {
            title: "a path argument outside the jail",
            tool: "run_command",
            args: json!({"command": "cat /etc/passwd"}),
            expect: "PATH_ESCAPE",
        },
        Step {
            title: "explain: the verdict without running anything",
            tool: "explain_command",
            args: json!({"command": "git push --force origin main"}),
            expect: "POLICY_DENIED",
        },
        Step {
            title: "a pipeline the server wires itself (no shell)",
            tool: "run_command",
            args: json!({"command": "cat notes.txt | grep -c jail"}),
            expect: "OK",
        },
        Step {
            title: "a quoted metacharacter is one literal argument",
            tool: "run_command",
            args: json!({"command": "echo \"a;b && c | d\""}),
            expect: "OK",
        },
        Step {
            title: "shell expansion is refused, not interpreted",
            tool: "run_command",
            args: json!({"command": "echo $HOME"}),
            expect: "POLICY_DENIED",
        },
    ]
}

/// Runs the showcase; exit 0 when every envelope had the expected code. Compact by
/// default (the command, the verdict, the output); `json` prints every envelope in full.
pub fn run(json: bool) -> ExitCode {
    let runtime = match crate::runtime::build(2) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match runtime.block_on(showcase(json)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("demo: some envelopes differed from what was expected");
            ExitCode::from(1)
        }
        Err(e) => fatal(format!("demo failed: {e}")),
    }
}

fn seed(dir: &Path) -> Result<std::path::PathBuf, Box<dyn Error>> {
    let sandbox = dir.join("sandbox");
    for (name, text) in FILES {
        let path = sandbox.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    let mode = if safe_mcp_exec::landlock_abi() >= 6 {
        "enforce"
    } else {
        "best-effort"
    };
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            r#"audit_log = "audit.jsonl"
audit_fail_mode = "closed"

[terminal]
jail_root = "sandbox"

[terminal.limits]
timeout_seconds = 10
max_output_bytes = 65536

[terminal.allowlist]
commands = ["ls", "cat", "echo", "grep", "wc", "head", "git"]

[terminal.denylist]
commands = ["rm", "curl"]

[[terminal.rules]]
command = "git"
deny_args = ["push --force", "push -f"]
reason = "force-push rewrites shared history"

[terminal.sandbox]
mode = "{mode}"
network = false

[files]
workspace_root = "inbox"
journal = "organizer-journal.jsonl"
"#
        ),
    )?;
    Ok(policy)
}

/// A fresh inbox beneath `dir`: four downloads an hour old, and a symlink to /etc/passwd.
fn fill_inbox(dir: &Path) -> Result<std::path::PathBuf, Box<dyn Error>> {
    let inbox = dir.join("inbox");
    std::fs::create_dir_all(&inbox)?;
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for (name, body) in [
        ("report.pdf", "%PDF"),
        ("holiday.jpg", "JPEG"),
        ("budget.xlsx", "XLSX"),
        ("setup.exe", "MZ"),
    ] {
        let path = inbox.join(name);
        std::fs::write(&path, body)?;
        std::fs::File::options()
            .write(true)
            .open(&path)?
            .set_modified(an_hour_ago)?;
    }
    std::os::unix::fs::symlink("/etc/passwd", inbox.join("passwords.txt"))?;
    Ok(inbox)
}

/// What the inbox holds, a folder deep, sorted.
fn inbox_tree(inbox: &Path) -> Result<Vec<String>, Box<dyn Error>> {
    let mut tree: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(inbox)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            for inner in std::fs::read_dir(entry.path())?.flatten() {
                tree.push(format!("{name}/{}", inner.file_name().to_string_lossy()));
            }
        } else {
            tree.push(name);
        }
    }
    tree.sort();
    Ok(tree)
}

/// The files server: plan, apply, move a named installer, a symlink refused, undo, redo.
async fn files_showcase(dir: &Path, policy: &Path, json: bool) -> Result<bool, Box<dyn Error>> {
    let inbox = fill_inbox(dir)?;
    say!(
        "\n=== the files server on {} (temporary) ===\n",
        inbox.display()
    );

    let exe = std::env::current_exe()?;
    let command = tokio::process::Command::new(exe).configure(|c| {
        c.arg("files").arg("--config").arg(policy).env_clear();
    });
    let client = ().serve(TokioChildProcess::new(command)?).await?;
    say_tools(&client).await?;
    let call = |tool: &'static str, args: Value| {
        let client = &client;
        async move {
            let mut params = CallToolRequestParams::new(tool);
            if let Value::Object(args) = args {
                params = params.with_arguments(args);
            }
            let result = client.call_tool(params).await?;
            Ok::<Value, Box<dyn Error>>(result.structured_content.unwrap_or(Value::Null))
        }
    };
    let mut all_ok = true;
    let mut show = |n: usize, title: &str, tool: &str, args: &Value, v: &Value, expect: &str| {
        let code = v["code"].as_str().unwrap_or("?");
        all_ok &= code == expect;
        let mark = if code == expect {
            "as expected"
        } else {
            "UNEXPECTED"
        };
        say!("== F{n}. {title} ({code}, {mark})\n> {tool} {args}");
        if json {
            say!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default());
        } else {
            say!("{}\n", compact(v));
        }
    };

    let plan = call("plan_organize", json!({})).await?;
    show(
        1,
        "plan: what would move, and why the rest would not (nothing changes yet)",
        "plan_organize",
        &json!({}),
        &plan,
        "OK",
    );
    let id = json!({"plan_id": plan["detail"]["plan_id"]});
    let applied = call("apply_plan", id.clone()).await?;
    show(
        2,
        "apply the plan (every file re-checked first)",
        "apply_plan",
        &id,
        &applied,
        "OK",
    );
    let args = json!({"src": "setup.exe", "dest": "Installers/setup.exe"});
    let moved = call("move_file", args.clone()).await?;
    show(
        3,
        "move a named installer (the organizer would not guess)",
        "move_file",
        &args,
        &moved,
        "OK",
    );
    let args = json!({"src": "passwords.txt", "dest": "Documents/passwords.txt"});
    let refused = call("move_file", args.clone()).await?;
    show(
        4,
        "a symlink is refused (deny by default)",
        "move_file",
        &args,
        &refused,
        "POLICY_DENIED",
    );
    let undone = call("undo_last_action", json!({})).await?;
    show(
        5,
        "undo the last action (the installer goes back)",
        "undo_last_action",
        &json!({}),
        &undone,
        "OK",
    );
    let redone = call("redo_last_action", json!({})).await?;
    show(6, "redo it", "redo_last_action", &json!({}), &redone, "OK");
    client.cancel().await?;

    say!("the inbox now: {}", inbox_tree(&inbox)?.join(", "));
    Ok(all_ok)
}

fn shorten(mut v: Value) -> Value {
    // Keep the printout readable: confinement is shown once, at the top.
    if let Some(detail) = v.get_mut("detail").and_then(Value::as_object_mut) {
        detail.remove("confinement");
    }
    v
}

/// Prints the server's tools on one line.
async fn say_tools(client: &RunningService<RoleClient, ()>) -> Result<(), Box<dyn Error>> {
    let names: Vec<String> = client
        .list_all_tools()
        .await?
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    say!("tools: {}\n", names.join(", "));
    Ok(())
}

/// One result, as a person scanning the demo wants it: `→ CODE: reason`, then the output.
fn compact(v: &Value) -> String {
    let mut text = format!(
        "→ {}: {}",
        v["code"].as_str().unwrap_or("?"),
        v["reason"].as_str().unwrap_or("")
    );
    for stream in ["stdout", "stderr"] {
        if let Some(out) = v["detail"][stream].as_str().filter(|o| !o.is_empty()) {
            text.push('\n');
            text.push_str(out.trim_end_matches('\n'));
        }
    }
    text
}

async fn showcase(json: bool) -> Result<bool, Box<dyn Error>> {
    let dir = tempfile::Builder::new()
        .prefix("safe-mcp-demo-")
        .tempdir()?;
    let policy = seed(dir.path())?;
    say!(
        "safe-mcp demo: sandbox {} (temporary)\n",
        dir.path().join("sandbox").display()
    );

    let exe = std::env::current_exe()?;
    let command = tokio::process::Command::new(exe).configure(|c| {
        c.arg("terminal").arg("--config").arg(&policy).env_clear();
    });
    let client = ().serve(TokioChildProcess::new(command)?).await?;
    if let Some(server) = client.peer_info().and_then(|info| info.server_info.clone()) {
        say!(
            "connected to {} {} over stdio (MCP)",
            server.name,
            server.version
        );
    }
    say_tools(&client).await?;

    // The verbose form has the lists and the confinement report the excerpt reads.
    let mut verbose = serde_json::Map::new();
    verbose.insert("verbose".into(), json!(true));
    let described = client
        .call_tool(CallToolRequestParams::new("describe_policy").with_arguments(verbose))
        .await?;
    if let Some(v) = &described.structured_content {
        say!("== describe_policy (excerpt)");
        say!("allowlist: {}", v["detail"]["allowlist"]);
        say!("denylist:  {}", v["detail"]["denylist"]);
        let c = &v["detail"]["confinement"];
        say!(
            "confinement: sandbox {} | view {} | Landlock {} (kernel ABI {}) | seccomp {} | TCP {} | exec in jail {}\n",
            c["mode"],
            c["view"]["view"],
            c["landlock"]["enforced"],
            c["landlock"]["kernel_abi"],
            c["seccomp"]["enabled"],
            c["landlock"]["tcp"],
            c["landlock"]["exec_in_jail"]
        );
    }

    let mut all_ok = true;
    for (i, step) in steps().into_iter().enumerate() {
        let Value::Object(args) = step.args.clone() else {
            continue;
        };
        let result = client
            .call_tool(CallToolRequestParams::new(step.tool).with_arguments(args))
            .await?;
        let envelope = result.structured_content.clone().unwrap_or(Value::Null);
        let code = envelope["code"].as_str().unwrap_or("?").to_owned();
        let mark = if code == step.expect {
            "as expected"
        } else {
            "UNEXPECTED"
        };
        all_ok &= code == step.expect;
        say!("== {}. {} ({code}, {mark})", i + 1, step.title);
        if json {
            say!("> {} {}", step.tool, step.args);
            say!("{}\n", serde_json::to_string_pretty(&shorten(envelope))?);
        } else {
            let shown = match &step.args["cwd"] {
                Value::String(cwd) => format!(
                    "{} (cwd {cwd})",
                    step.args["command"].as_str().unwrap_or("")
                ),
                _ => step.args["command"].as_str().unwrap_or("").to_owned(),
            };
            let tool = if step.tool == "run_command" {
                ""
            } else {
                "explain "
            };
            say!("> {tool}{shown}\n{}\n", compact(&envelope));
        }
    }
    client.cancel().await?;

    let trail = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap_or_default();
    say!(
        "audit trail: {} records (attempt before every run, then outcome); the last one:",
        trail.lines().count()
    );
    if let Some(last) = trail.lines().last() {
        say!("{last}");
    }
    let files_ok = files_showcase(dir.path(), &policy, json).await?;
    say!(
        "\nFull envelopes: safe-mcp demo --json. Next: install it (cargo install --locked --path\ncrates/safe-mcp); `init` writes the policy for your project and prints the configuration for\nClaude Code, Codex, Gemini CLI, Cursor and VS Code:\n  cd ~/your-project && safe-mcp init --profile rust --profile git   # or python, node"
    );
    Ok(all_ok && files_ok)
}
