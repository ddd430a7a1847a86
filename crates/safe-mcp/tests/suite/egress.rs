//! Egress by domain (issue 18): commands reach the network only through the server's
//! proxy, over a real MCP session, with real curl and python, against an HTTP server on
//! loopback that this test runs (and which records every request that reaches it).
//!
//! Both tiers are exercised: `namespaces = "auto"` (each command in a network namespace of
//! its own) and `namespaces = "off"` (the landlock tier: Landlock allows TCP connect to the
//! call's proxy port only). Bypasses go through `sh -c`, past the argument checks, so that
//! only the kernel stands in their way.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::sh_call;
use super::support::{
    SETPRIV_NEEDS_ROOT, Sandbox, Session, interpreter_rules, policy_head, reason_of, root_or_skip,
};

/// Whether this user can make the private view here (root, or user namespaces).
fn namespaces_here() -> bool {
    super::view::namespaces_available(None, false)
}

/// An HTTP/1.1 server on 127.0.0.1 that answers every request with `hello from upstream`
/// and remembers the Host header of each.
pub(super) struct Upstream {
    pub(super) port: u16,
    hosts: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    pub(super) async fn start() -> Upstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hosts = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&hosts);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let seen = Arc::clone(&seen);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).to_string();
                    let host = text
                        .lines()
                        .find_map(|l| l.strip_prefix("Host: ").or(l.strip_prefix("host: ")))
                        .unwrap_or("")
                        .to_owned();
                    seen.lock().unwrap().push(host);
                    let body = "hello from upstream\n";
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        Upstream { port, hosts }
    }

    fn seen(&self) -> Vec<String> {
        self.hosts.lock().unwrap().clone()
    }
}

/// A sandbox whose policy allows curl, sh and python3 with egress on.
fn sandbox(namespaces: &str, network: &str) -> Sandbox {
    let sb = Sandbox::new("");
    let policy = format!(
        r#"{head}
[terminal.allowlist]
commands = ["curl", "sh", "python3", "echo"]

{interpreters}
[terminal.sandbox]
namespaces = "{namespaces}"

[terminal.network]
{network}
"#,
        head = policy_head("timeout_seconds = 20"),
        interpreters = interpreter_rules(&["sh", "python3"]),
    );
    std::fs::write(&sb.policy, policy).unwrap();
    sb
}

const LISTS: &str = r#"mode = "allowlist"
allow_domains = ["localhost", "*.pinned.test"]
deny_domains = ["denied.pinned.test"]
allow_private = true
hosts = { "api.pinned.test" = ["127.0.0.1"], "denied.pinned.test" = ["127.0.0.1"], "pinned.test" = ["127.0.0.1"] }"#;

fn stdout(r: &Value) -> String {
    r["detail"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The `network` records of the trail.
fn network_records(sb: &Sandbox) -> Vec<Value> {
    sb.audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "network")
        .collect()
}

/// The refusal records for `host`.
fn refusals_for(sb: &Sandbox, host: &str) -> Vec<Value> {
    network_records(sb)
        .into_iter()
        .filter(|r| r["event"] == "refused" && r["host"] == host)
        .collect()
}

/// curl prints the HTTP status it got (with `-p`, the proxy's answer to its CONNECT);
/// 000 means no HTTP answer at all.
fn curl(args: &str) -> Value {
    let status = if args.starts_with("-p ") {
        "%{http_connect}"
    } else {
        "%{http_code}"
    };
    sh_call(&format!(
        "curl -sS --max-time 10 -o /dev/null -w '{status}' {args} 2>/dev/null; echo"
    ))
}

/// The status curl got for `args`, run in the sandbox; and the whole result.
async fn status(s: &Session, args: &str) -> (String, Value) {
    let r = s.run_with(curl(args)).await;
    assert_eq!(r["code"], "OK", "{r}");
    (stdout(&r).trim().to_owned(), r)
}

/// Checks that curl got `want` for `args` in the sandbox (under `namespaces`).
async fn assert_status(s: &Session, args: &str, want: &str, namespaces: &str) {
    let (got, r) = status(s, args).await;
    assert_eq!(got, want, "{namespaces}: {r}");
}

/// A sandbox with [`LISTS`] under `namespaces`, and a session with its server.
async fn with_lists(namespaces: &str) -> (Sandbox, Session) {
    let sb = sandbox(namespaces, LISTS);
    let s = sb.session().await;
    (sb, s)
}

#[tokio::test(flavor = "multi_thread")]
async fn allowed_names_pass_through_the_proxy_and_are_audited() {
    let up = Upstream::start().await;
    for namespaces in ["auto", "off"] {
        let (sb, s) = with_lists(namespaces).await;
        let describe = s.call("describe_policy", json!({"verbose": true})).await;
        let tier = describe["detail"]["confinement"]["egress"]["tier"].clone();
        // The namespace tier wherever the server made its private view; "auto" falls
        // back to the host's view (and so the landlock tier) where namespaces cannot be
        // made, as on a machine without user namespaces for an unprivileged user.
        let private = describe["detail"]["confinement"]["view"]["view"] == "private";
        assert_eq!(
            private,
            namespaces == "auto" && namespaces_here(),
            "{describe}"
        );
        let expected = if private { "namespace" } else { "landlock" };
        assert_eq!(tier, expected, "{namespaces}: {describe}");
        let explain = s.explain("curl http://localhost/").await;
        assert_eq!(
            explain["detail"]["confinement"]["egress"]["tier"], expected,
            "{namespaces}: {explain}"
        );

        // Plain HTTP, and the same through a CONNECT tunnel (-p).
        for (how, flag) in [("plain", ""), ("connect", "-p")] {
            let url = format!("http://localhost:{}/x", up.port);
            let argv: Vec<&str> = ["curl", "-sS", "--max-time", "10", flag, &url]
                .into_iter()
                .filter(|a| !a.is_empty())
                .collect();
            let r = s.run_with(json!({ "command": argv })).await;
            assert_eq!(r["code"], "OK", "{namespaces} {how}: {r}");
            assert_eq!(
                stdout(&r),
                "hello from upstream\n",
                "{namespaces} {how}: {r}"
            );
        }
        // The proxy variables are set, and NO_PROXY is empty.
        let env = s
            .sh("echo $HTTP_PROXY $https_proxy $ALL_PROXY [$NO_PROXY]")
            .await;
        let out = stdout(&env);
        assert!(
            out.starts_with("http://127.0.0.1:") && out.contains("[]"),
            "{out}"
        );

        let records = network_records(&sb);
        let opens: Vec<&Value> = records.iter().filter(|r| r["event"] == "open").collect();
        let closes: Vec<&Value> = records.iter().filter(|r| r["event"] == "close").collect();
        assert_eq!(opens.len(), 2, "{namespaces}: {records:?}");
        assert_eq!(closes.len(), 2, "{namespaces}: {records:?}");
        let methods: Vec<&str> = opens
            .iter()
            .map(|r| r["method"].as_str().unwrap())
            .collect();
        assert_eq!(methods, ["GET", "CONNECT"], "{namespaces}");
        for r in &opens {
            assert_eq!(r["host"], "localhost");
            assert_eq!(r["port"], up.port);
            assert_eq!(r["rule"], "localhost");
            assert!(
                r["address"].as_str().unwrap().starts_with("127.0.0.1:"),
                "{r}"
            );
            // The call id pairs the record with the run's attempt.
            let call = r["call"].as_str().unwrap();
            assert!(
                sb.has_record(|a| a["kind"] == "attempt" && a["call"] == call),
                "{r}"
            );
        }
        // Every run's attempt record names the tier in its confinement summary.
        let attempt = sb
            .find_record(|a| a["kind"] == "attempt" && a["tool"] == "run_command")
            .unwrap();
        assert_eq!(attempt["confinement"]["egress"], expected, "{attempt}");
        for r in &closes {
            assert!(r["bytes_down"].as_u64().unwrap() > 0, "{r}");
            assert!(r["bytes_up"].as_u64().unwrap() > 0, "{r}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn names_outside_the_lists_are_refused_and_audited() {
    let up = Upstream::start().await;
    let port = up.port;
    for namespaces in ["auto", "off"] {
        let (sb, s) = with_lists(namespaces).await;
        // A subdomain rule: beneath pinned.test yes, pinned.test itself no.
        let api = format!("http://api.pinned.test:{port}/");
        assert_status(&s, &api, "200", namespaces).await;
        let cases = [
            (
                "pinned.test",
                format!("http://pinned.test:{port}/"),
                "not-allowed",
            ),
            (
                "denied.pinned.test",
                format!("http://denied.pinned.test:{port}/"),
                "denied.pinned.test",
            ),
            // A CONNECT tunnel to a denied host.
            (
                "denied.pinned.test",
                format!("-p http://denied.pinned.test:{port}/"),
                "denied.pinned.test",
            ),
            (
                "127.0.0.1",
                format!("http://127.0.0.1:{port}/"),
                "ip-literal",
            ),
            (
                "example.org",
                "http://example.org/".to_owned(),
                "not-allowed",
            ),
        ];
        // Each refused by the proxy, with the rule that refused it.
        for (host, args, rule) in cases {
            let before = refusals_for(&sb, host).len();
            let r = s.run_with(curl(&args)).await;
            assert_eq!(r["code"], "OK", "{r}");
            assert_eq!(stdout(&r).trim(), "403", "{namespaces} {args}: {r}");
            let after = refusals_for(&sb, host);
            assert_eq!(after.len(), before + 1, "{namespaces} {args}: {after:?}");
            assert_eq!(after.last().unwrap()["rule"], rule, "{namespaces} {args}");
        }
        let connects: Vec<Value> = refusals_for(&sb, "denied.pinned.test")
            .into_iter()
            .filter(|r| r["method"] == "CONNECT")
            .collect();
        assert_eq!(connects.len(), 1, "{namespaces}");

        // A forged Host header: the request line says localhost, the header another name.
        assert_status(
            &s,
            &format!("-H 'Host: evil.test' http://localhost:{port}/"),
            "403",
            namespaces,
        )
        .await;
        assert!(
            network_records(&sb).iter().any(|r| r["event"] == "refused"
                && r["reason"].as_str().unwrap_or("").contains("Host header")),
            "{namespaces}"
        );

        // Round 3, item 12: a second Host header after the one that matches (and a second
        // Content-Length) is refused, never forwarded.
        let before = up.seen().len();
        for extra in [
            "Host: evil.test",
            "Content-Length: 0\\r\\nContent-Length: 5",
        ] {
            let script = format!(
                "import os, socket\n\
                 proxy = os.environ['HTTP_PROXY'].split('//')[1].rstrip('/')\n\
                 host, port = proxy.rsplit(':', 1)\n\
                 s = socket.create_connection((host, int(port)))\n\
                 s.sendall(b'GET http://localhost:{port}/ HTTP/1.1\\r\\nHost: localhost:{port}\\r\\n{extra}\\r\\n\\r\\n')\n\
                 print(s.recv(4096).split(b'\\r\\n')[0].decode())\n"
            );
            let r = s.py(script).await;
            assert_eq!(r["code"], "OK", "{r}");
            assert!(
                stdout(&r).starts_with("HTTP/1.1 400"),
                "{namespaces} {extra}: {r}"
            );
            assert!(
                network_records(&sb).iter().any(|n| n["event"] == "refused"
                    && n["reason"]
                        .as_str()
                        .unwrap_or("")
                        .contains("headers; send one")),
                "{namespaces}"
            );
        }
        assert_eq!(
            up.seen().len(),
            before,
            "{namespaces}: a duplicated header reached the server"
        );
    }
    // Only the allowed requests ever reached the server, never the forged Host.
    let seen = up.seen();
    assert!(!seen.iter().any(|h| h.contains("evil")), "{seen:?}");
    assert!(
        seen.iter().all(|h| h.starts_with("api.pinned.test")),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn there_is_no_way_around_the_proxy() {
    let up = Upstream::start().await;
    let port = up.port;
    for namespaces in ["auto", "off"] {
        let (_sb, s) = with_lists(namespaces).await;
        // curl told to ignore the proxy: no route (own namespace) or Landlock's refusal.
        for host in ["localhost", "127.0.0.1"] {
            let args = format!("--noproxy '*' http://{host}:{port}/");
            assert_status(&s, &args, "000", namespaces).await;
        }
        // An allowlisted interpreter: a direct TCP connect, UDP, a raw socket.
        let script = format!(
            r#"
import socket
def attempt(name, make):
    try:
        make()
        print(name, "open")
    except OSError as e:
        print(name, "refused", e.errno)
def tcp():
    s = socket.create_connection(("127.0.0.1", {port}), timeout=5)
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("127.0.0.1", 53))
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
for n, f in [("tcp", tcp), ("udp", udp), ("raw", raw), ("packet", packet)]:
    attempt(n, f)
"#
        );
        let r = s.py(script).await;
        assert_eq!(r["code"], "OK", "{namespaces}: {r}");
        let out = stdout(&r);
        for name in ["tcp", "udp", "raw", "packet"] {
            assert!(
                out.lines()
                    .any(|l| l.starts_with(&format!("{name} refused"))),
                "{namespaces}: {name} was not refused: {out}"
            );
        }
    }
    assert!(up.seen().is_empty(), "{:?}", up.seen());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_resolving_to_loopback_is_refused_without_allow_private() {
    let up = Upstream::start().await;
    let sb = sandbox(
        "auto",
        r#"mode = "allowlist"
allow_domains = ["localhost"]"#,
    );
    let s = sb.session().await;
    let r = s
        .run_with(curl(&format!("http://localhost:{}/", up.port)))
        .await;
    assert_eq!(stdout(&r).trim(), "403", "{r}");
    // The result says why, which curl's own message does not.
    let why = r["detail"]["network_refused"][0]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.starts_with("GET localhost:") && why.contains("127.0.0.1") && why.contains("loopback"),
        "{r}"
    );
    let refused = refusals_for(&sb, "localhost");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["rule"], "private-address");
    assert!(up.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_tier_nothing_runs() {
    // Sandbox mode off can hold no command to the proxy: every command is refused, never
    // run with an open network.
    let sb = sandbox("auto", LISTS);
    sb.edit_policy(
        "[terminal.sandbox]\n",
        "[terminal.sandbox]\nmode = \"off\"\n",
    );
    let s = sb.session().await;
    let describe = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(
        describe["detail"]["confinement"]["egress"]["tier"], "unavailable",
        "{describe}"
    );
    let r = s.run_with(json!({"command": ["echo", "hi"]})).await;
    assert_eq!(r["code"], "SANDBOX_UNAVAILABLE", "{r}");
    assert!(reason_of(&r).contains("egress"), "{r}");
}

/// A tunnel whose far end never answers nor closes outlives the command that opened it:
/// it ends with the call, and its `close` record (with the bytes that went up) is written
/// before the call's outcome record.
#[tokio::test(flavor = "multi_thread")]
async fn a_tunnel_still_open_when_the_call_ends_is_closed_on_the_record() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((stream, _)) = silent.accept().await {
            keep.lock().unwrap().push(stream);
        }
    });
    let script = format!(
        "import os, socket\n\
         host, port = os.environ['HTTP_PROXY'].rsplit('/', 1)[1].split(':')\n\
         s = socket.create_connection((host, int(port)))\n\
         s.sendall(b'CONNECT localhost:{port} HTTP/1.1\\r\\nHost: localhost:{port}\\r\\n\\r\\n')\n\
         head = b''\n\
         while b'\\r\\n\\r\\n' not in head:\n\
         \x20   head += s.recv(1)\n\
         s.sendall(b'hello')\n\
         print(head.split(b' ')[1].decode())\n"
    );
    for namespaces in ["auto", "off"] {
        let (sb, s) = with_lists(namespaces).await;
        let r = s.py(&script).await;
        assert_eq!(r["code"], "OK", "{namespaces}: {r}");
        assert_eq!(stdout(&r), "200\n", "{namespaces}: {r}");
        let records = sb.audit_records();
        let close = records
            .iter()
            .position(|r| r["kind"] == "network" && r["event"] == "close")
            .unwrap_or_else(|| panic!("{namespaces}: no close record: {records:?}"));
        assert_eq!(records[close]["bytes_up"], 5, "{namespaces}: {records:?}");
        assert_eq!(records[close]["bytes_down"], 0, "{namespaces}: {records:?}");
        let outcome = records
            .iter()
            .rposition(|r| r["kind"] == "outcome" && r["tool"] == "run_command")
            .unwrap_or_else(|| panic!("{namespaces}: no outcome: {records:?}"));
        assert!(close < outcome, "{namespaces}: {records:?}");
        drop(s);
    }
    assert_eq!(
        held.lock().unwrap().len(),
        2,
        "each run reached the far end"
    );
}

/// A server run as an unprivileged user (65534) has egress too: in the namespace tier where
/// that user can make namespaces (user namespaces), else the landlock tier; `doctor` run as
/// that user names the same tier; the allowed name passes and a direct connection does not.
#[tokio::test(flavor = "multi_thread")]
async fn an_unprivileged_server_has_egress_through_its_proxy() {
    if !root_or_skip(SETPRIV_NEEDS_ROOT) {
        return;
    }
    let up = Upstream::start().await;
    let sb = sandbox("auto", LISTS);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(sb.base(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for p in [sb.base().to_path_buf(), sb.jail.clone(), sb.policy.clone()] {
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    }
    let as_nobody = |c: &mut tokio::process::Command| {
        let program = std::mem::replace(c, tokio::process::Command::new("setpriv"));
        let args: Vec<_> = program.as_std().get_args().map(|a| a.to_owned()).collect();
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(super::support::BIN)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
    };
    let expected = if super::view::namespaces_available(Some(65534), true) {
        "namespace"
    } else {
        "landlock"
    };
    let doctor = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(super::support::BIN)
        .args(["doctor", "--json"])
        .env_clear()
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let tier = report["kernel"]["egress_tier"]
        .as_str()
        .or_else(|| report["egress_tier"].as_str())
        .unwrap_or_else(|| panic!("doctor names no egress tier: {report}"));
    assert!(tier.starts_with(expected), "{tier}");

    let s = Session::start(&sb.policy, as_nobody).await;
    let describe = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(
        describe["detail"]["confinement"]["egress"]["tier"], expected,
        "{describe}"
    );
    let (got, r) = status(&s, &format!("http://localhost:{}/x", up.port)).await;
    assert_eq!(got, "200", "{r}");
    let (got, r) = status(&s, &format!("--noproxy '*' http://127.0.0.1:{}/", up.port)).await;
    assert_eq!(got, "000", "{r}");
    assert_eq!(
        up.seen().len(),
        1,
        "only the proxied request arrived: {:?}",
        up.seen()
    );
    assert!(
        network_records(&sb)
            .iter()
            .any(|r| r["event"] == "open" && r["host"] == "localhost"),
        "the connection is on the record"
    );
}

/// Round 3, item 10: code in the sandbox decides how many requests it makes, but not how
/// much of the trail they take: one call writes at most 256 network records, each of bounded
/// size, then one summary record counts the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_cannot_flood_the_trail_through_the_proxy() {
    for namespaces in ["auto", "off"] {
        let (sb, s) = with_lists(namespaces).await;
        let script = "import os, socket\n\
            proxy = os.environ['HTTP_PROXY'].split('//')[1].rstrip('/')\n\
            host, port = proxy.rsplit(':', 1)\n\
            for i in range(400):\n\
            \x20   s = socket.create_connection((host, int(port)))\n\
            \x20   s.sendall(b'CONNECT ' + b'a' * 6000 + b'.example:443 HTTP/1.1\\r\\n\\r\\n')\n\
            \x20   s.recv(100)\n\
            \x20   s.close()\n\
            print('sent')\n";
        let r = s.py(script).await;
        assert_eq!(stdout(&r), "sent\n", "{namespaces}: {r}");
        let records = network_records(&sb);
        assert!(records.len() <= 257, "{namespaces}: {}", records.len());
        let summary: Vec<&Value> = records
            .iter()
            .filter(|n| n["rule"] == "record-limit")
            .collect();
        assert_eq!(summary.len(), 1, "{namespaces}");
        let reason = reason_of(summary[0]);
        assert!(
            reason.starts_with("144 more refusals"),
            "{namespaces}: {reason}"
        );
        for n in &records {
            assert!(n.to_string().len() < 1200, "{namespaces}: {n}");
        }
        // The bound is per call: the next call's requests are recorded again.
        let (got, _) = status(&s, &format!("http://api.pinned.test:{}/", 9)).await;
        let _ = got;
        assert!(network_records(&sb).len() > records.len(), "{namespaces}");
    }
}
