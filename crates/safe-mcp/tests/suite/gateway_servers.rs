//! The gateway with real servers from the registries, installed by the tests into the target
//! directory at pinned versions (never fetched by the gateway): the reference "everything"
//! and filesystem servers (npm). The official conformance suite runs against the everything
//! server directly and through the gateway, side by side.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::gateway::{text_of, wait_for_tool};
use super::http::{conformance, node_home, serve};
use super::support::{Sandbox, host_git, server_uids};

/// The reference servers, pinned.
const SERVERS: &[&str] = &[
    "@modelcontextprotocol/server-everything@2026.8.31",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
];

/// Where the servers are installed (once; the tests that need them wait for one another).
pub fn npm_servers() -> PathBuf {
    static MADE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gateway-servers");
    let ready = dir.join(".installed");
    if !ready.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("npm")
            .args([
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "--save-exact",
            ])
            .args(SERVERS)
            .current_dir(&dir)
            .output()
            .expect("npm is needed for the gateway's server tests (.ci/run installs it)");
        assert!(out.status.success(), "npm install: {out:?}");
        std::fs::write(&ready, "").unwrap();
    }
    dir
}

/// A server's entry script.
fn entry(server: &str) -> PathBuf {
    npm_servers().join(format!(
        "node_modules/@modelcontextprotocol/server-{server}/dist/index.js"
    ))
}

/// The `[[gateway.servers]]` entry of a reference server run by Debian's node.
fn npm_entry(name: &str, server: &str, args: &[&str], extra: &str) -> String {
    let modules = npm_servers().join("node_modules");
    let args: String = args.iter().map(|a| format!(", \"{a}\"")).collect();
    format!(
        r#"[[gateway.servers]]
name = "{name}"
command = ["node", "{script}"{args}]
read_paths = ["{modules}"]
{extra}

[gateway.servers.tools]
allow = ["*"]
"#,
        script = entry(server).display(),
        modules = modules.display(),
    )
}

/// The everything server's tools, image, structured content, resources and prompts,
/// through the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_everything_server_works_through_the_gateway() {
    let sb = Sandbox::new("");
    sb.append_policy(&npm_entry(
        "everything",
        "everything",
        &[],
        "resources = true",
    ));
    let s = sb.session().await;
    let names = wait_for_tool(&s, "everything__echo").await;
    assert!(
        names.iter().any(|n| n == "everything__get-sum"),
        "{names:?}"
    );
    let tools = s.client.list_all_tools().await.unwrap();
    let echo = tools.iter().find(|t| t.name == "everything__echo").unwrap();
    assert!(echo.description.as_deref().unwrap_or_default().len() > 3);
    assert!(echo.input_schema.get("properties").is_some());

    let r = s
        .raw_call("everything__echo", json!({"message": "hello"}))
        .await;
    assert!(text_of(&r).contains("hello"), "{r:?}");
    let r = s
        .raw_call("everything__get-sum", json!({"a": 2, "b": 40}))
        .await;
    assert!(text_of(&r).contains("42"), "{r:?}");
    let r = s.raw_call("everything__get-tiny-image", json!({})).await;
    assert!(r.content.iter().any(|c| c.as_image().is_some()), "{r:?}");
    let r = s
        .raw_call(
            "everything__get-structured-content",
            json!({"location": "New York"}),
        )
        .await;
    assert!(r.structured_content.is_some(), "{r:?}");

    let resources = s.client.list_all_resources().await.unwrap();
    let first = resources
        .first()
        .expect("the everything server lists resources");
    let read = s
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            first.uri.clone(),
        ))
        .await
        .unwrap();
    assert!(!read.contents.is_empty());
    let prompts = s.client.list_all_prompts().await.unwrap();
    let simple = prompts
        .iter()
        .find(|p| p.name == "everything__simple-prompt")
        .unwrap_or_else(|| panic!("{prompts:?}"));
    let got = s
        .client
        .get_prompt(rmcp::model::GetPromptRequestParams::new(
            simple.name.clone(),
        ))
        .await
        .unwrap();
    assert!(!got.messages.is_empty());
    drop(s);
    assert!(sb.has_record(
        |r| r["kind"] == "outcome" && r["gateway"]["resources/read"] == first.uri.as_str()
    ));
    assert!(
        sb.has_record(|r| r["kind"] == "attempt"
            && r["gateway"]["prompts/get"] == "everything__simple-prompt")
    );
}

/// The filesystem server given a root wider than the jail: the kernel refuses what lies
/// outside the jail, inside works, and git's hooks stay unwritable; the same reads run
/// unconfined succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filesystem_server_is_held_to_the_jail_by_the_kernel() {
    for uid in server_uids() {
        let sb = Sandbox::new("");
        let base = sb.base().to_path_buf();
        host_git(&base.join("jail"), &["init", "-q"]);
        std::fs::write(base.join("outside.txt"), "not for the server").unwrap();
        let root = base.display().to_string();
        sb.append_policy(&npm_entry("fs", "filesystem", &[&root], ""));
        let s = match uid {
            Some(uid) => {
                let st = Command::new("chown")
                    .args(["-R", &format!("{uid}:{uid}")])
                    .arg(&base)
                    .status()
                    .unwrap();
                assert!(st.success());
                sb.session_as(*uid).await
            }
            None => sb.session().await,
        };
        wait_for_tool(&s, "fs__read_text_file").await;
        let inside = base.join("jail/notes.txt").display().to_string();
        let r = s
            .raw_call("fs__read_text_file", json!({"path": inside}))
            .await;
        assert!(text_of(&r).contains("alpha"), "{uid:?} {r:?}");
        // An existing file: a new one makes this server list each directory from its root
        // down (its Unicode check), and above the jail the kernel lets it list nothing.
        let written = base.join("jail/notes.txt");
        let r = s
            .raw_call(
                "fs__write_file",
                json!({"path": written.display().to_string(), "content": "hi"}),
            )
            .await;
        assert_ne!(r.is_error, Some(true), "{uid:?} {r:?}");
        assert_eq!(std::fs::read_to_string(&written).unwrap(), "hi");
        for (tool, args) in [
            (
                "fs__read_text_file",
                json!({"path": base.join("outside.txt").display().to_string()}),
            ),
            (
                "fs__read_text_file",
                json!({"path": base.join("audit.jsonl").display().to_string()}),
            ),
            (
                "fs__write_file",
                json!({"path": base.join("planted.txt").display().to_string(), "content": "x"}),
            ),
            (
                "fs__write_file",
                json!({"path": base.join("jail/.git/hooks/pre-commit").display().to_string(), "content": "#!/bin/sh\n"}),
            ),
        ] {
            let r = s.raw_call(tool, args.clone()).await;
            assert_eq!(r.is_error, Some(true), "{uid:?} {tool} {args}: {r:?}");
        }
        assert!(!base.join("planted.txt").exists());
        assert!(!base.join("jail/.git/hooks/pre-commit").exists());
    }
    // The control: the same server, unconfined, reads outside the jail.
    let sb = Sandbox::new("");
    std::fs::write(sb.base().join("outside.txt"), "not for the server").unwrap();
    let said = unconfined_read(
        &entry("filesystem"),
        sb.base(),
        &sb.base().join("outside.txt"),
    );
    assert!(said.contains("not for the server"), "control: {said}");
}

/// `read_text_file` of the filesystem server run as this test's own child, unconfined.
fn unconfined_read(script: &Path, root: &Path, file: &Path) -> String {
    let mut child = Command::new("node")
        .arg(script)
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "control", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "read_text_file", "arguments": {"path": file.display().to_string()}}}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("\"id\":2") {
                return line;
            }
        }
        String::new()
    });
    let line = reader.join().unwrap();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    line
}

/// The conformance suite's server scenarios, one by one, against `url`: the ones that pass.
fn passing_scenarios(node: &Path, url: &str) -> Vec<String> {
    let (_, listed, _) = conformance(node, &["list", "--server"], "list");
    let scenarios: Vec<String> = listed
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(scenarios.len() >= 30, "{listed}");
    scenarios
        .into_iter()
        .filter(|scenario| {
            let args = ["server", "--url", url, "--scenario", scenario];
            let (status, out, _) = conformance(node, &args, scenario);
            status.success() && out.contains("0 failed")
        })
        .collect()
}

/// Every conformance scenario the everything server passes on its own, it passes through
/// the gateway, in one run.
#[test]
fn the_gateway_passes_every_conformance_scenario_the_server_passes() {
    let node = node_home();
    // Directly: the server over its own Streamable HTTP.
    let port = super::host_tools::free_port();
    let mut direct = Command::new("node")
        .arg(entry("everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(direct.stderr.take().unwrap());
    let mut line = String::new();
    while {
        line.clear();
        std::io::BufRead::read_line(&mut said, &mut line).unwrap() > 0
    } {
        if line.contains("listening") {
            break;
        }
    }
    let alone = passing_scenarios(&node, &format!("http://127.0.0.1:{port}/mcp"));
    let _ = direct.kill();
    let _ = direct.wait();
    // Through the gateway: the same server on stdio, confined, behind `--http`.
    let sb = Sandbox::new("");
    sb.append_policy("[http]\nallowed_origins = [\"http://localhost:*\", \"http://127.0.0.1:*\"]");
    sb.append_policy(&npm_entry(
        "everything",
        "everything",
        &[],
        "resources = true",
    ));
    let (_server, url) = serve(&sb.policy, "127.0.0.1:0");
    // Its tools are listed once the server is up.
    std::thread::sleep(Duration::from_secs(3));
    let through = passing_scenarios(&node, &url);
    // Two scenarios call tools the everything server does not have (`test_simple_text`,
    // `test_error_handling`): they pass against it directly only because its SDK answers
    // an unknown tool with an error result, which those checks accept. Behind the gateway an
    // unknown name is the protocol's error (-32602). They are left out of the comparison
    // only while the server really lacks those tools.
    let listed: Vec<String> = {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let s = sb.session().await;
            wait_for_tool(&s, "everything__echo").await
        })
    };
    let false_passes = [
        ("tools-call-simple-text", "test_simple_text"),
        ("tools-call-error", "test_error_handling"),
    ];
    for (_, tool) in false_passes {
        assert!(
            !listed.iter().any(|n| n.ends_with(tool)),
            "the everything server now has {tool}: compare its scenario too"
        );
    }
    let missing: Vec<&String> = alone
        .iter()
        .filter(|s| !through.contains(s))
        .filter(|s| !false_passes.iter().any(|(f, _)| f == s))
        .collect();
    assert!(
        missing.is_empty(),
        "passed directly but not through the gateway: {missing:?}\n(directly: {alone:?}; through: {through:?})"
    );
    assert!(alone.len() >= 8, "directly: {alone:?}");
}

/// The official fetch server from PyPI: a URL on its network's allowlist is fetched through
/// the gateway's proxy; one the proxy refuses fails and is recorded; and where an argument
/// rule names the URL, one outside the allowlist is refused before anything is forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fetch_server_reaches_only_its_domains_through_the_proxy() {
    let python = super::support::venv_of(
        "/usr/bin/python3",
        "gateway-fetch-venv",
        &["mcp-server-fetch==2026.10.24"],
    );
    let venv = python.parent().unwrap().parent().unwrap().to_path_buf();
    let upstream = super::egress::Upstream::start().await;
    let sb = Sandbox::new("");
    let entry = |name: &str, rule: &str| {
        format!(
            r#"[[gateway.servers]]
name = "{name}"
command = ["{bin}", "--ignore-robots-txt", "--allow-private-ips"]
exec = ["python3"]
read_paths = ["{venv}"]

[gateway.servers.network]
mode = "allowlist"
allow_domains = ["api.pinned.test"]
allow_private = true
hosts = {{ "api.pinned.test" = ["127.0.0.1"], "other.pinned.test" = ["127.0.0.1"] }}

[gateway.servers.tools]
allow = ["fetch"]
{rule}
"#,
            bin = venv.join("bin/mcp-server-fetch").display(),
            venv = venv.display(),
        )
    };
    sb.append_policy(&entry("fetch", ""));
    sb.append_policy(&entry(
        "checked",
        "[[gateway.servers.tools.args]]\ntool = \"fetch\"\npointer = \"/url\"\nkind = \"url\"",
    ));
    let s = sb.session().await;
    wait_for_tool(&s, "fetch__fetch").await;
    wait_for_tool(&s, "checked__fetch").await;
    let port = upstream.port;
    let url = |host: &str| format!("http://{host}:{port}/");
    let r = s
        .raw_call(
            "fetch__fetch",
            json!({"url": url("api.pinned.test"), "raw": true}),
        )
        .await;
    assert!(text_of(&r).contains("hello from upstream"), "{r:?}");
    // Not on its list: the server tries, the proxy refuses and records it.
    let r = s
        .raw_call(
            "fetch__fetch",
            json!({"url": url("other.pinned.test"), "raw": true}),
        )
        .await;
    assert!(!text_of(&r).contains("hello from upstream"), "{r:?}");
    // With the rule: refused on paper, never forwarded.
    let r = s
        .raw_call("checked__fetch", json!({"url": url("other.pinned.test")}))
        .await;
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["code"], "POLICY_DENIED", "{v}");
    drop(s);
    assert!(sb.has_record(|r| r["kind"] == "network"
        && r["host"] == "api.pinned.test"
        && r["event"] != "refused"));
    assert!(sb.has_record(|r| r["kind"] == "network"
        && r["host"] == "other.pinned.test"
        && r["event"] == "refused"));
    assert!(sb.has_record(|r| r["kind"] == "attempt"
        && r["rule"] == "tools.args fetch /url url"
        && r["verdict"] == "POLICY_DENIED"));
}
