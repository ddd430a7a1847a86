//! Dev servers and long builds (issue 33), over real MCP sessions: a server listening on
//! the private view's own loopback, reached by later commands and never able to reach the
//! host's; a read that waits for the end and returns the whole run; a session that died
//! saying so at once; the host-network tier refusing to listen unless the policy names the
//! port, and saying why.

use std::io::Read;

use serde_json::{Value, json};

use super::support::{Sandbox, Session, reason_of, root_or_skip, stderr_of, stdout_of};

/// A policy with python3 (the dev server and its client) and the sessions' defaults.
fn sandbox(extra: &str) -> Sandbox {
    Sandbox::builder()
        .allow(&["python3", "sh"])
        .limits("timeout_seconds = 30\nmax_output_bytes = 4096")
        .extra(extra)
        .build()
}

/// A python3 program that fetches `url` and prints the body, or `failed <errno>`.
fn fetch(url: &str) -> Value {
    let program = format!(
        "import urllib.request\ntry:\n    print(urllib.request.urlopen('{url}', timeout=5).read().decode(), end='')\nexcept OSError as e:\n    print('failed', getattr(e, 'errno', None) or getattr(e.reason, 'errno', None))"
    );
    json!({"command": ["python3", "-c", program]})
}

/// Starts `python3 -m http.server` on `port` of loopback and waits until it serves.
async fn serve(s: &Session, port: u16) -> String {
    let handle = s.start_process(json!({"command": ["python3", "-u", "-m", "http.server", port.to_string(), "--bind", "127.0.0.1"]})).await;
    let r = s
        .read_process(&handle, json!({"wait_seconds": 20, "until": "quiet"}))
        .await;
    assert_eq!(r["detail"]["running"], true, "the server died: {r}");
    assert!(stdout_of(&r).contains("Serving HTTP"), "{r}");
    handle
}

/// Item 1: in the private view, a session's server listens on the view's own loopback and
/// a later run_command of the same server fetches from it; the host's loopback stays out
/// of reach (a listener there never sees a connection).
#[tokio::test(flavor = "multi_thread")]
async fn a_dev_server_in_a_session_serves_later_commands_but_never_reaches_the_host() {
    let sb = sandbox("");
    let s = sb.session().await;
    let described = s.call("describe_policy", json!({"verbose": true})).await;
    let view = &described["detail"]["confinement"]["view"]["view"];
    assert_eq!(
        view, "private",
        "this machine kind makes the view: {described}"
    );
    let handle = serve(&s, 8000).await;
    let r = s.run_with(fetch("http://127.0.0.1:8000/notes.txt")).await;
    assert_eq!(r["detail"]["stdout"], "alpha\nbeta\ngamma\n", "{r}");
    let r = s.run_with(fetch("http://localhost:8000/notes.txt")).await;
    assert_eq!(r["detail"]["stdout"], "alpha\nbeta\ngamma\n", "{r}");

    // The host's loopback is another namespace's: nothing listens on it in the view.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let port = host.local_addr().unwrap().port();
    let r = s
        .run_with(fetch(&format!("http://127.0.0.1:{port}/")))
        .await;
    assert!(stdout_of(&r).starts_with("failed"), "{r}");
    let mut accepted = host.accept();
    if let Ok((stream, _)) = &mut accepted {
        let _ = stream.read(&mut [0u8; 1]);
    }
    assert!(accepted.is_err(), "the host's listener saw a connection");
    // Still only TCP: a UDP socket is refused (nothing could route it anyway).
    let udp = "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('made')\nexcept OSError as e:\n    print('refused', e.errno)";
    let r = s.py(udp).await;
    assert_eq!(r["detail"]["stdout"], "refused 1\n", "{r}");
    let stopped = s.call("stop_process", json!({"handle": handle})).await;
    assert_eq!(stopped["detail"]["running"], false, "{stopped}");
}

/// Item 1, the host-network tier: without a private view, listening is refused and the
/// result says why and which key opts a port in; with `listen_ports` it works.
#[tokio::test(flavor = "multi_thread")]
async fn without_a_view_listening_is_refused_with_the_reason_unless_the_port_is_named() {
    let listen = "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 18080))\ns.listen()\nprint('listening')";
    let sb = sandbox("[terminal.sandbox]\nnamespaces = \"off\"");
    let s = sb.session().await;
    let r = s.py(listen).await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    let reason = reason_of(&r);
    assert!(reason.contains("refused a network socket"), "{r}");
    assert!(reason.contains("listen_ports"), "{r}");

    let sb = sandbox(
        "[terminal.sandbox]\nnamespaces = \"off\"\n[terminal.network]\nlisten_ports = [18080]",
    );
    let s = sb.session().await;
    let r = s.py(listen).await;
    assert_eq!(r["detail"]["stdout"], "listening\n", "{r}");
    // Another port stays refused.
    let other = listen.replace("18080", "18081");
    let r = s.py(other).await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
}

/// Item 3: `until = "exit"` returns a long run in one read, its start and its end kept
/// around a line saying how much was left out.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_until_exit_returns_a_long_run_whole_with_its_start_and_end() {
    let sb = sandbox("");
    let s = sb.session().await;
    let program = "for i in range(5000):\n    print('line', i)\n";
    let (handle, r) = s.py_until_exit(program, 60).await;
    assert_eq!(r["detail"]["running"], false, "{r}");
    assert_eq!(r["reason"], "ended: exit code 0", "{r}");
    let out = stdout_of(&r);
    assert!(out.starts_with("line 0\nline 1\n"), "{out}");
    assert!(out.ends_with("line 4998\nline 4999\n"), "{out}");
    assert!(out.contains("lines (") && out.contains("left out"), "{out}");
    assert!(out.len() < 4096 + 200, "{}", out.len());
    assert_eq!(r["detail"]["more"], false, "{r}");
    // The handle is spent: everything was read.
    let again = s.read_process(&handle, json!({})).await;
    assert_eq!(again["code"], "INVALID_REQUEST", "{again}");
}

/// Item 5: a session whose process died says `ended: exit code 1` in the read that brings
/// its last words, not `running`.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_that_died_says_so_in_the_read_that_shows_why() {
    let sb = sandbox("");
    let s = sb.session().await;
    for _ in 0..5 {
        let program = "import sys\nprint('Traceback (most recent call last):', file=sys.stderr, flush=True)\nsys.exit(1)";
        let handle = s
            .start_process(json!({"command": ["python3", "-c", program]}))
            .await;
        let r = s.read_process(&handle, json!({"wait_seconds": 10})).await;
        assert!(stderr_of(&r).starts_with("Traceback"), "{r}");
        assert_eq!(r["reason"], "ended: exit code 1", "{r}");
        assert_eq!(r["detail"]["running"], false, "{r}");
    }
}

/// A node program that serves on the view's loopback and fetches from itself with Node's
/// built-in `fetch()` (undici, whose HTTP parser is wasm).
const NODE_FETCH: &str = "const http = require('http');\nconst s = http.createServer((q, r) => r.end('served by node')).listen(8001, '127.0.0.1', async () => {\n  const body = await (await fetch('http://127.0.0.1:8001/')).text();\n  console.log(body);\n  s.close();\n});\n";

/// A sandbox with the node profile, its cache beneath the sandbox.
fn node_sandbox() -> Sandbox {
    Sandbox::builder()
        .allow(&["sh"])
        .roomy(60)
        .profiles(&["node"], "cache")
        .build()
}

/// Item 4: node's `fetch()` of a loopback URL, `node --version` and `npm test` work under
/// the node profile, for a root server (a memory cgroup per call, no RLIMIT_AS) and for an
/// unprivileged one (RLIMIT_AS, with the profile's NODE_OPTIONS keeping wasm within it).
#[tokio::test(flavor = "multi_thread")]
async fn node_fetch_and_npm_test_work_under_the_node_profile_root_and_unprivileged() {
    if which("node").is_none() || which("npm").is_none() {
        super::support::skip("skipping: node and npm are not installed on this machine");
        return;
    }
    let path = std::env::var("PATH").unwrap_or_default();
    for uid in [None, Some(65534)] {
        let sb = node_sandbox();
        sb.write_in_jail("serve.js", NODE_FETCH);
        std::fs::write(
            sb.jail.join("package.json"),
            r#"{"name": "t", "version": "1.0.0", "scripts": {"test": "node serve.js"}}"#,
        )
        .unwrap();
        let s = match uid {
            None => {
                let home = std::env::var("HOME").unwrap_or_default();
                let path = path.clone();
                Session::start(&sb.policy, |c| {
                    c.env("PATH", path).env("HOME", home);
                })
                .await
            }
            Some(uid) => {
                for f in ["serve.js", "package.json"] {
                    std::os::unix::fs::chown(sb.jail.join(f), Some(uid), Some(uid)).unwrap();
                }
                sb.give_to(uid);
                sb.session_as_with_path(uid, Some(&path)).await
            }
        };
        let r = s.run("node --version").await;
        assert_eq!(r["detail"]["exit_code"], 0, "{uid:?}: {r}");
        // npm's retries are bounded, so an offline install fails in seconds.
        let env = "console.log(process.env.npm_config_fetch_retries, process.env.npm_config_fetch_timeout)";
        let r = s.run_with(json!({"command": ["node", "-e", env]})).await;
        assert_eq!(r["detail"]["stdout"], "1 15000\n", "{uid:?}: {r}");
        let r = s.run("npm install is-number").await;
        assert_ne!(r["detail"]["exit_code"], 0, "offline: {r}");
        let r = s.run("node serve.js").await;
        assert_eq!(r["detail"]["stdout"], "served by node\n", "{uid:?}: {r}");
        let r = s.run("npm test").await;
        assert_eq!(r["detail"]["exit_code"], 0, "{uid:?}: {r}");
        assert!(stdout_of(&r).contains("served by node"), "{uid:?}: {r}");
        let described = s.call("describe_policy", json!({"verbose": true})).await;
        let by = described["detail"]["confinement"]["rlimits"]["memory_enforced_by"]
            .as_str()
            .unwrap()
            .to_owned();
        let cgroup = uid.is_none()
            && std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists();
        assert_eq!(by.starts_with("cgroup v1 memory"), cgroup, "{uid:?}: {by}");
    }
}

/// Where `program` is on PATH.
fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|f| f.is_file())
    })
}

/// Item 4, the memory cgroup (a root server): address space reserved and never touched is
/// not memory used, so an 8 GiB reservation works under a 256 MiB limit; memory used past
/// the limit gets the process killed, and the result names the key.
#[tokio::test(flavor = "multi_thread")]
async fn the_memory_limit_counts_memory_used_where_a_memory_cgroup_is_available() {
    if !rustix::process::geteuid().is_root()
        || !std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
    {
        super::support::skip(
            "skipping: memory cgroups need a root server and cgroup v1's memory controller",
        );
        return;
    }
    let sb = Sandbox::allowing(
        &["python3"],
        "timeout_seconds = 60\nmemory_bytes = 268435456",
    );
    let s = sb.session().await;
    let reserve = "import mmap\nm = mmap.mmap(-1, 8 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)\nm[0] = 1\nprint('reserved')";
    let r = s.py(reserve).await;
    assert_eq!(r["detail"]["stdout"], "reserved\n", "{r}");
    let touch = "b = bytearray(512 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('survived')";
    let r = s.py(touch).await;
    assert_ne!(r["detail"]["stdout"], "survived\n", "{r}");
    assert_eq!(r["detail"]["limit"], "memory_bytes", "{r}");
    assert!(reason_of(&r).contains("the kernel killed it"), "{r}");
    // The calls, one after another, reused one group (other tests' servers run beside it),
    // and no process of theirs is left in it.
    // The server, not the namespace made ahead for its next call (its first child and init
    // run in the server's memory, so they show its command line).
    let matches = super::support::live_processes_with(&sb.policy.display().to_string());
    let parent = |pid: &u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat.rsplit(") ").next().and_then(|r| r.split(' ').nth(1));
        ppid.and_then(|p| p.parse::<u32>().ok()).unwrap_or(0)
    };
    let server: Vec<u32> = matches
        .iter()
        .copied()
        .filter(|p| !matches.contains(&parent(p)))
        .collect();
    assert_eq!(server.len(), 1, "{matches:?}");
    let ours = format!("safe-mcp-{}-", server[0]);
    let groups = std::fs::read_dir("/sys/fs/cgroup/memory")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&ours))
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .filter(|e| e.path().is_dir())
        .map(|e| std::fs::read_to_string(e.path().join("tasks")).unwrap())
        .collect::<Vec<_>>();
    assert_eq!(groups, [""], "one group, reused and empty: {groups:?}");
}

/// Fetches `path` from `address` over plain HTTP/1.0 from the host; the whole answer.
fn host_get(address: &str, path: &str) -> std::io::Result<String> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

/// Item 2: `expose_port` makes a session's server reachable from the host at the URL the
/// result gives (on loopback, from the policy's range); every connection is in the trail
/// (`expose`, then `ingress` before a byte flows and `close` with the bytes); the port
/// closes with the session; `max_exposed` bounds the ports, and a refused expose starts
/// nothing.
#[tokio::test(flavor = "multi_thread")]
async fn an_exposed_port_reaches_the_session_from_the_host_until_it_ends() {
    let sb = sandbox("[terminal.sessions]\nmax_exposed = 1\nexpose_ports = [18700, 18720]");
    let s = sb.session().await;
    let started = expose(&s, 8000).await;
    let (handle, address) = exposed(&started);
    let url = started["detail"]["exposed"]["url"].as_str().unwrap();
    assert_eq!(url, format!("http://{address}/"), "{started}");
    let at: std::net::SocketAddr = address.parse().unwrap();
    assert!(at.ip().is_loopback(), "{address}");
    assert!((18700..=18720).contains(&at.port()), "{address}");
    let r = s
        .read_process(&handle, json!({"wait_seconds": 20, "until": "quiet"}))
        .await;
    assert_eq!(r["detail"]["running"], true, "{r}");
    let page = tokio::task::spawn_blocking({
        let address = address.clone();
        move || host_get(&address, "/notes.txt")
    })
    .await
    .unwrap()
    .unwrap();
    assert!(page.starts_with("HTTP/1.0 200"), "{page}");
    assert!(page.ends_with("alpha\nbeta\ngamma\n"), "{page}");

    // One port at a time: a second exposing session is refused and nothing starts.
    let refused = expose(&s, 8001).await;
    assert_eq!(refused["code"], "POLICY_DENIED", "{refused}");
    assert!(reason_of(&refused).contains("max_exposed"), "{refused}");
    let listed = s.call("list_processes", json!({})).await;
    assert_eq!(
        listed["detail"]["processes"].as_array().unwrap().len(),
        1,
        "{listed}"
    );

    let stopped = s.call("stop_process", json!({"handle": handle})).await;
    assert_eq!(stopped["detail"]["running"], false, "{stopped}");

    let network: Vec<Value> = sb
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "network")
        .collect();
    let events: Vec<&str> = network
        .iter()
        .filter_map(|r| r["record"]["event"].as_str().or(r["event"].as_str()))
        .collect();
    assert_eq!(events, ["expose", "ingress", "close"], "{network:?}");
    let call = &started_call(&network[0]);
    assert!(
        network.iter().all(|r| &started_call(r) == call),
        "{network:?}"
    );
    let close = network.last().unwrap();
    let field = |r: &Value, k: &str| r["record"][k].clone().as_u64().or(r[k].as_u64());
    assert!(field(close, "bytes_down").unwrap() > 0, "{close}");

    // Closed with the session (a connection that still got in is recorded like any other).
    let closed =
        super::support::eventually(10, || std::net::TcpStream::connect(&address).is_err()).await;
    assert!(closed, "the exposed port outlived its session");

    // Once its slot is free again, another session can expose.
    let again = expose(&s, 8000).await;
    assert_eq!(again["code"], "OK", "{again}");
    s.call("stop_process", json!({"handle": again["detail"]["handle"]}))
        .await;
}

/// `start_process` of python's web server on 127.0.0.1:8000, exposing `port`.
async fn expose(s: &Session, port: u16) -> Value {
    let command = [
        "python3",
        "-u",
        "-m",
        "http.server",
        "8000",
        "--bind",
        "127.0.0.1",
    ];
    s.call(
        "start_process",
        json!({"command": command, "expose_port": port}),
    )
    .await
}

/// The handle and the exposed address of a `start_process` that must have started.
fn exposed(started: &Value) -> (String, String) {
    assert_eq!(started["code"], "OK", "{started}");
    let handle = started["detail"]["handle"].as_str().unwrap().to_owned();
    let address = started["detail"]["exposed"]["address"].as_str().unwrap();
    (handle, address.to_owned())
}

/// The call a network record names, wherever the trail's framing keeps it.
fn started_call(record: &Value) -> String {
    record["record"]["call"]
        .as_str()
        .or(record["call"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Item 2 under egress: each command has a network namespace of its own, which nothing
/// outside can reach, so expose_port is refused with the reason and nothing starts.
#[tokio::test(flavor = "multi_thread")]
async fn expose_port_is_refused_under_egress_and_starts_nothing() {
    let sb = sandbox("[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"example.com\"]");
    let s = sb.session().await;
    let r = expose(&s, 8000).await;
    assert_eq!(r["code"], "OPERATION_FAILED", "{r}");
    assert!(reason_of(&r).contains("allowlist"), "{r}");
    let listed = s.call("list_processes", json!({})).await;
    assert_eq!(listed["detail"]["processes"], json!([]), "{listed}");
    let r = expose(&s, 0).await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
}

/// Item 2 for an unprivileged server: its view has a user namespace of its own, which the
/// socket helper enters too; the exposed port reaches the session the same way.
#[tokio::test(flavor = "multi_thread")]
async fn an_unprivileged_server_exposes_a_port_the_same_way() {
    if !root_or_skip("skipping: needs root to run the server as another user") {
        return;
    }
    let uid = 65534;
    let sb = sandbox("");
    sb.give_to(uid);
    let path = std::env::var("PATH").unwrap_or_default();
    let s = sb.session_as_with_path(uid, Some(&path)).await;
    let (handle, address) = exposed(&expose(&s, 8000).await);
    s.read_process(&handle, json!({"wait_seconds": 20, "until": "quiet"}))
        .await;
    let page = tokio::task::spawn_blocking(move || host_get(&address, "/notes.txt"))
        .await
        .unwrap()
        .unwrap();
    assert!(page.ends_with("alpha\nbeta\ngamma\n"), "{page}");
    s.call("stop_process", json!({"handle": handle})).await;
}

/// Item 5: a session killed by a limit says which, with its key, as a run does.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_killed_by_a_limit_says_which() {
    let sb = Sandbox::allowing(&["python3"], "cpu_seconds = 1");
    let s = sb.session().await;
    let (_, r) = s.py_until_exit("while True: pass", 60).await;
    assert_eq!(r["detail"]["running"], false, "{r}");
    assert_eq!(r["detail"]["limit"], "cpu_seconds", "{r}");
    let reason = reason_of(&r);
    assert!(reason.starts_with("ended: "), "{r}");
    assert!(reason.contains("cpu_seconds = 1"), "{r}");
}
