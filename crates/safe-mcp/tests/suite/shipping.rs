//! Audit shipped off the host (issue 21): real servers over MCP, and OTLP/HTTP and syslog
//! receivers written here on loopback, which keep exactly what arrived, in arrival order.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::support::{Sandbox, Session, eventually, reason_of, safe_mcp_on};

/// What a receiver does with a connection.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// OTLP/HTTP JSON logs: keeps each log body, answers 200.
    Otlp,
    /// RFC 5424 over TCP, octet-counted: keeps each message's JSON.
    Syslog,
    /// Accepts and never reads.
    Stuck,
}

/// A receiver on a fixed port that can be stopped and started again.
struct Receiver {
    port: u16,
    kind: Kind,
    lines: Arc<Mutex<Vec<String>>>,
    task: Option<JoinHandle<()>>,
    /// The tasks reading each connection: stopped with the receiver, as a receiver that
    /// dies closes them.
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Receiver {
    async fn start(kind: Kind) -> Receiver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut r = Receiver {
            port,
            kind,
            lines: Arc::default(),
            task: None,
            connections: Arc::default(),
        };
        r.resume().await;
        r
    }

    async fn resume(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
        let (kind, lines) = (self.kind, Arc::clone(&self.lines));
        let connections = Arc::clone(&self.connections);
        self.task = Some(tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                let lines = Arc::clone(&lines);
                let task = match kind {
                    Kind::Stuck => {
                        held.push(stream);
                        continue;
                    }
                    Kind::Otlp => tokio::spawn(async move { otlp(&mut stream, &lines).await }),
                    Kind::Syslog => tokio::spawn(async move { syslog(&mut stream, &lines).await }),
                };
                connections.lock().unwrap().push(task);
            }
        }));
    }

    /// Stops listening (connections are refused from now on).
    fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        for t in self.connections.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn otlp(stream: &mut tokio::net::TcpStream, lines: &Mutex<Vec<String>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let (head, length) = loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            break (end + 4, length);
        }
    };
    while buf.len() < head + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body: Value = serde_json::from_slice(&buf[head..head + length]).unwrap();
    let resource = &body["resourceLogs"][0]["resource"]["attributes"];
    assert!(
        resource
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["key"] == "service.name" && a["value"]["stringValue"] == "safe-mcp"),
        "{resource}"
    );
    for record in body["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
        .as_array()
        .unwrap()
    {
        let line = record["body"]["stringValue"].as_str().unwrap().to_owned();
        lines.lock().unwrap().push(line);
    }
    let _ = stream
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        .await;
}

async fn syslog(stream: &mut tokio::net::TcpStream, lines: &Mutex<Vec<String>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        // Frames: LEN SP MSG.
        while let Some(space) = buf.iter().position(|b| *b == b' ') {
            let len: usize = std::str::from_utf8(&buf[..space]).unwrap().parse().unwrap();
            if buf.len() < space + 1 + len {
                break;
            }
            let message = String::from_utf8(buf[space + 1..space + 1 + len].to_vec()).unwrap();
            assert!(message.starts_with("<38>1 "), "{message}");
            assert!(message.contains(" safe-mcp "), "{message}");
            let json = &message[message.find('{').unwrap()..];
            lines.lock().unwrap().push(json.to_owned());
            buf.drain(..space + 1 + len);
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn sandbox(sb_dir_ship: impl Fn(&std::path::Path) -> String) -> Sandbox {
    let sb = Sandbox::new("");
    sb.append_policy(&format!("[audit.ship]\n{}", sb_dir_ship(sb.base())));
    sb
}

/// A sandbox shipping to `sink` (an `[audit.ship]` line), with `extra` lines, its spool in
/// the sandbox's folder.
fn shipping_to(sink: &str, extra: &str) -> Sandbox {
    sandbox(|dir| format!("{sink}\n{extra}spool_dir = \"{}/spool\"", dir.display()))
}

/// The `[audit.ship]` line naming an OTLP collector on `port`.
fn otlp_at(port: u16) -> String {
    format!("otlp_http = \"http://127.0.0.1:{port}\"")
}

const DENY: &str = "on_failure = \"deny\"\n";

/// Whether `touch ran` runs again within five seconds.
async fn runs_again(s: &Session) -> bool {
    for _ in 0..50 {
        if s.run("touch ran").await["code"] == "OK" {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Whether the spool at `spool` holds something within ten seconds.
async fn spooled(spool: &std::path::Path) -> bool {
    eventually(10, || std::fs::metadata(spool).is_ok_and(|m| m.len() > 0)).await
}

/// Checks that the local trail's lines all reach `r` within ten seconds.
async fn all_arrive(r: &Receiver, sb: &Sandbox) {
    assert!(
        eventually(10, || r.lines().len() >= local(sb).len()).await,
        "{} of {} arrived",
        r.lines().len(),
        local(sb).len()
    );
}

/// The local trail's lines.
fn local(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(&sb.audit)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn seq(line: &str) -> u64 {
    serde_json::from_str::<Value>(line).unwrap()["seq"]
        .as_u64()
        .unwrap()
}

/// The seqs of `want` that `got` lacks.
fn missing(got: &[String], want: &[String]) -> Vec<u64> {
    want.iter()
        .filter(|l| !got.contains(l))
        .map(|l| seq(l))
        .collect()
}

/// The same lines in the same order (compared without printing thousands of bytes).
fn same_lines(got: &[String], want: &[String]) {
    let got_seqs: Vec<u64> = got.iter().map(|l| seq(l)).collect();
    let want_seqs: Vec<u64> = want.iter().map(|l| seq(l)).collect();
    assert_eq!(
        got_seqs, want_seqs,
        "the seqs that arrived, in arrival order"
    );
    for (g, w) in got.iter().zip(want) {
        assert!(g == w, "seq {} arrived changed", seq(w));
    }
}

/// `safe-mcp audit verify --received` over `lines`.
fn verify_received(lines: &[String]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("received.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let out = safe_mcp_on(&["audit", "verify", "--received"], &file);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// An OTLP and a syslog receiver, and a sandbox that ships to both (a checkpoint after every
/// call), with `extra` lines in `[audit.ship]`.
async fn both_sinks(extra: &str) -> (Receiver, Receiver, Sandbox) {
    let otlp = Receiver::start(Kind::Otlp).await;
    let syslog = Receiver::start(Kind::Syslog).await;
    let sb = sandbox(|dir| {
        format!(
            "otlp_http = \"http://127.0.0.1:{}/v1/logs\"\nsyslog_tcp = \"127.0.0.1:{}\"\nspool_dir = \"{}/spool\"\ncheckpoint_seconds = 0\n{extra}",
            otlp.port,
            syslog.port,
            dir.display()
        )
    });
    (otlp, syslog, sb)
}

async fn calls(s: &Session, n: usize) {
    for i in 0..n {
        let r = s
            .run_with(json!({"command": ["echo", format!("call {i}")]}))
            .await;
        assert_eq!(r["code"], "OK", "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn thirty_calls_arrive_in_order_at_both_sinks_and_verify() {
    let (otlp, syslog, sb) = both_sinks("").await;
    let s = sb.session().await;
    calls(&s, 30).await;
    let want = local(&sb);
    assert!(want.len() >= 60, "{} records", want.len());
    for r in [&otlp, &syslog] {
        all_arrive(r, &sb).await;
        let got = r.lines();
        // Byte for byte, in seq order, each once.
        same_lines(&got, &local(&sb));
        let (ok, out) = verify_received(&got);
        assert!(
            ok && out.starts_with("OK:") && out.contains("no gaps"),
            "{out}"
        );
        assert!(out.contains("checkpoints matched"), "{out}");
    }
    assert!(
        want.iter().any(|l| l.contains("\"kind\":\"checkpoint\"")),
        "checkpoint records name the head"
    );
    // A receiver missing a record sees the gap.
    let mut cut = otlp.lines();
    cut.remove(10);
    let (ok, out) = verify_received(&cut);
    assert!(
        !ok && out.starts_with("GAPS:") && out.contains(&format!("{}", seq(&otlp.lines()[10]))),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_that_goes_away_gets_everything_when_it_returns_even_across_a_restart() {
    let mut otlp = Receiver::start(Kind::Otlp).await;
    let sb = shipping_to(&otlp_at(otlp.port), "on_failure = \"spool\"\n");
    let spool = sb.base().join("spool/otlp-terminal.spool");
    let s = sb.session().await;
    calls(&s, 5).await;
    assert!(eventually(10, || otlp.lines().len() == local(&sb).len()).await);
    otlp.stop();
    calls(&s, 5).await; // calls go on: shipping is off the hot path
    assert!(
        spooled(&spool).await,
        "the undelivered records wait in the spool"
    );
    otlp.resume().await;
    assert!(
        eventually(15, || otlp.lines().len() == local(&sb).len()).await,
        "{} of {}",
        otlp.lines().len(),
        local(&sb).len()
    );
    same_lines(&otlp.lines(), &local(&sb));

    // Down again, and the server stops before the receiver is back: the next server
    // replays the spool at start.
    otlp.stop();
    calls(&s, 3).await;
    assert!(spooled(&spool).await);
    drop(s);
    tokio::time::sleep(Duration::from_millis(300)).await;
    otlp.resume().await;
    let s = sb.session().await;
    calls(&s, 1).await;
    assert!(
        eventually(15, || otlp.lines().len() == local(&sb).len()).await,
        "{} of {}: missing {:?}",
        otlp.lines().len(),
        local(&sb).len(),
        missing(&otlp.lines(), &local(&sb))
    );
    let got = otlp.lines();
    let mut seqs: Vec<u64> = got.iter().map(|l| seq(l)).collect();
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "no duplicates");
    let (ok, out) = verify_received(&got);
    assert!(ok, "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_mode_refuses_calls_while_a_sink_is_down_and_recovers() {
    let mut otlp = Receiver::start(Kind::Otlp).await;
    let sb = shipping_to(&otlp_at(otlp.port), DENY);
    let s = sb.session().await;
    calls(&s, 2).await;
    otlp.stop();
    // The next delivery fails; from then on nothing runs.
    let marker = sb.jail.join("ran");
    let mut refused = None;
    for _ in 0..40 {
        let r = s.run("touch ran").await;
        if r["code"] == "AUDIT_UNAVAILABLE" {
            refused = Some(r);
            break;
        }
        let _ = std::fs::remove_file(&marker);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = refused.expect("calls were never refused while the sink was down");
    assert!(reason_of(&r).contains("on_failure = \"deny\""), "{r}");
    assert!(!marker.exists(), "a refused call ran");
    otlp.resume().await;
    assert!(
        runs_again(&s).await,
        "calls run again once the sink is back"
    );
    assert!(eventually(15, || otlp.lines().len() == local(&sb).len()).await);
    let (ok, out) = verify_received(&otlp.lines());
    assert!(ok, "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_that_never_reads_does_not_block_calls() {
    let stuck = Receiver::start(Kind::Stuck).await;
    let sb = shipping_to(&otlp_at(stuck.port), "");
    let s = sb.session().await;
    let started = std::time::Instant::now();
    calls(&s, 30).await;
    // The sink's attempt waits out its timeout (5 s) while 30 calls come and go; what it
    // could not deliver waits in the spool.
    let spool = sb.base().join("spool/otlp-terminal.spool");
    assert!(
        spooled(&spool).await,
        "the undelivered records wait in the spool"
    );
    let spooled = std::fs::read_to_string(&spool).unwrap();
    assert!(
        spooled.lines().count() >= 20,
        "{} spooled",
        spooled.lines().count()
    );
    eprintln!(
        "30 calls took {:?} with a stuck receiver",
        started.elapsed()
    );
}

/// Under `on_failure = "deny"`, a receiver that takes the connection and never answers: the
/// attempt record is written, the sink does not acknowledge it, and the call is refused
/// saying so (not as a record that could not be written); nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn deny_mode_names_a_sink_that_never_acknowledges() {
    let stuck = Receiver::start(Kind::Stuck).await;
    let sb = shipping_to(&otlp_at(stuck.port), DENY);
    let s = sb.session().await;
    let r = s.run("touch ran").await;
    assert_eq!(r["code"], "AUDIT_UNAVAILABLE", "{r}");
    let reason = reason_of(&r);
    assert!(
        reason.contains("did not acknowledge record") && reason.contains("on_failure = \"deny\""),
        "{r}"
    );
    assert!(!sb.jail.join("ran").exists(), "a refused call ran");
}

#[test]
fn bad_sink_settings_are_refused_at_start() {
    for (ship, words) in [
        (
            "otlp_http = \"https://collector:4318\"\nspool_dir = \"spool\"",
            "http://",
        ),
        ("syslog_tcp = \"collector\"\nspool_dir = \"spool\"", "port"),
        (
            "syslog_tcp = \"collector:99999\"\nspool_dir = \"spool\"",
            "port",
        ),
        ("syslog_tcp = \"127.0.0.1:514\"", "spool_dir"),
        ("spool_dir = \"spool\"", "names no sink"),
        (
            "syslog_tcp = \"127.0.0.1:514\"\nspool_dir = \"jail/spool\"",
            "spool_dir",
        ),
    ] {
        let sb = sandbox(|_| ship.to_owned());
        let out = safe_mcp_on(&["policy", "check", "--config"], &sb.policy);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{ship}: {text}");
        assert!(text.contains(words), "{ship}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_mode_refuses_the_files_tools_with_the_reason() {
    let ws = super::files::Workspace::new(false);
    let text = std::fs::read_to_string(&ws.policy).unwrap();
    // A sink nobody listens on: the first delivery fails, and from then on nothing acts.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let spool = ws.policy.parent().unwrap().join("spool");
    std::fs::write(
        &ws.policy,
        format!(
            "{text}\n[audit.ship]\notlp_http = \"http://127.0.0.1:{port}\"\non_failure = \"deny\"\nspool_dir = \"{}\"\n",
            spool.display()
        ),
    )
    .unwrap();
    let s = ws.session().await;
    let mut refused = None;
    for _ in 0..40 {
        let r = s.call("undo_last_action", json!({})).await;
        if r["code"] == "AUDIT_UNAVAILABLE" {
            refused = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = refused.expect("the files tools were never refused while the sink was down");
    assert!(reason_of(&r).contains("on_failure = \"deny\""), "{r}");
}

/// Issue 28, item 6: with `on_failure = "deny"`, the first call after the receiver dies is
/// refused, not run unshipped: the server looks at the sink before it admits a call (a
/// closed syslog connection reads as readable with nothing to read; OTLP's collector must
/// still take a connection), and for OTLP the call waits for the collector to acknowledge
/// its attempt record, so a collector that takes connections but never answers refuses it.
#[tokio::test(flavor = "multi_thread")]
async fn deny_mode_refuses_the_first_call_after_the_receiver_dies() {
    for kind in [Kind::Syslog, Kind::Otlp] {
        let mut receiver = Receiver::start(kind).await;
        let sink = match kind {
            Kind::Syslog => format!("syslog_tcp = \"127.0.0.1:{}\"", receiver.port),
            _ => otlp_at(receiver.port),
        };
        let sb = shipping_to(&sink, DENY);
        let s = sb.session().await;
        calls(&s, 2).await;
        receiver.stop();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let r = s.run("touch ran").await;
        assert_eq!(
            r["code"], "AUDIT_UNAVAILABLE",
            "the first call after the receiver died: {r}"
        );
        assert!(!sb.jail.join("ran").exists(), "a refused call ran");
        receiver.resume().await;
        assert!(
            runs_again(&s).await,
            "calls run again once the sink is back"
        );
    }
    // A collector that takes the connection and never answers acknowledges nothing.
    let stuck = Receiver::start(Kind::Stuck).await;
    let sb = shipping_to(&otlp_at(stuck.port), DENY);
    let s = sb.session().await;
    let r = s.run("touch ran").await;
    assert_eq!(r["code"], "AUDIT_UNAVAILABLE", "{r}");
    assert!(
        !sb.jail.join("ran").exists(),
        "a call ran before its record was acknowledged"
    );
}

/// The venv with the OCSF schema package (PyPI `ocsf-json-schema`) and `jsonschema`.
fn ocsf_python() -> std::path::PathBuf {
    super::support::venv("ocsf-venv", &["ocsf-json-schema==1.2.0", "jsonschema"])
}

/// `format = "ocsf"`: each record arrives as an OCSF event (Process Activity for a run,
/// API Activity for another tool's call) that the OCSF schema package validates, holding
/// the record's own line; `audit verify --received` verifies what the receiver stored.
#[tokio::test(flavor = "multi_thread")]
async fn ocsf_events_validate_against_the_schema_and_still_verify() {
    let (otlp, syslog, sb) = both_sinks("format = \"ocsf\"").await;
    let s = sb.session().await;
    calls(&s, 3).await;
    s.run("whoami").await;
    s.call("describe_policy", json!({})).await;
    for r in [&otlp, &syslog] {
        all_arrive(r, &sb).await;
        let got = r.lines();
        let want = local(&sb);
        let events: Vec<Value> = got
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let originals: Vec<String> = events
            .iter()
            .map(|e| e["unmapped"]["original"].as_str().unwrap().to_owned())
            .collect();
        same_lines(&originals, &want);
        let classes: Vec<u64> = events
            .iter()
            .map(|e| e["class_uid"].as_u64().unwrap())
            .collect();
        assert!(
            classes.contains(&1007) && classes.contains(&6003),
            "{classes:?}"
        );
        let denied = events
            .iter()
            .find(|e| e["process"]["cmd_line"] == "whoami" && e["activity_id"] == 1)
            .unwrap();
        assert_eq!(denied["status_id"], 2, "{denied}");
        let (ok, out) = verify_received(&got);
        assert!(ok && out.starts_with("OK:"), "{out}");
    }
    // The schema package's verdict on every event.
    let mut check = std::process::Command::new(ocsf_python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/ocsf_validate.py"
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = check.stdin.take().unwrap();
        for line in otlp.lines() {
            writeln!(stdin, "{line}").unwrap();
        }
        // The proxy's records, as Network Activity: an open and a refusal.
        for record in [
            r#"{"kind":"network","seq":1,"call":"1-1","event":"open","method":"CONNECT","host":"crates.io","port":443,"time":"2026-12-02T06:00:00.000Z"}"#,
            r#"{"kind":"network","seq":2,"call":"1-1","event":"refused","method":"CONNECT","host":"evil.example","port":443,"reason":"not allowed","time":"2026-12-02T06:00:00.001Z"}"#,
        ] {
            let event = safe_mcp_core::audit::ocsf::event(record, "terminal");
            writeln!(stdin, "{event}").unwrap();
        }
    }
    let out = check.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("process_activity 0")
            && report.contains("api_activity 0")
            && report.contains("network_activity 0"),
        "{report}"
    );
    drop(s);
}

/// Issue 38, item 2: two servers (each its own trail, `SAFE_MCP_SERVER_ID` set per replica
/// as a fleet's pods would be, one policy text) ship to one syslog receiver. Every record
/// names its server; the merged stream verifies as two chains; a record lost from one
/// replica's stream is a gap named for that replica, while the other's chain stays whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleets_stream_at_one_receiver_verifies_per_server() {
    let syslog = Receiver::start(Kind::Syslog).await;
    let replica = |id: &'static str| {
        let sink = format!("syslog_tcp = \"127.0.0.1:{}\"", syslog.port);
        let sb = shipping_to(&sink, "checkpoint_seconds = 0\n");
        (sb, id)
    };
    let (a, b) = (replica("replica-a"), replica("replica-b"));
    let start = |(sb, id): &(Sandbox, &'static str)| {
        let (policy, id) = (sb.policy.clone(), *id);
        async move {
            Session::start(&policy, move |c| {
                c.env("SAFE_MCP_SERVER_ID", id);
            })
            .await
        }
    };
    let (sa, sb_) = (start(&a).await, start(&b).await);
    for _ in 0..3 {
        calls(&sa, 2).await;
        calls(&sb_, 1).await;
    }
    let all = || [local(&a.0), local(&b.0)].concat();
    assert!(
        eventually(10, || syslog.lines().len() >= all().len()).await,
        "{} of {} arrived",
        syslog.lines().len(),
        all().len()
    );
    for (sb, id) in [&a, &b] {
        for line in local(sb) {
            let record: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(record["server"], *id, "{line}");
        }
    }
    let got = syslog.lines();
    let (ok, out) = verify_received(&got);
    assert!(
        ok && out.starts_with("OK: 2 servers") && out.contains("every chain intact"),
        "{out}"
    );
    assert!(
        out.contains("\n  replica-a: ") && out.contains("\n  replica-b: "),
        "{out}"
    );
    // One of replica-b's records lost on the way.
    let lost = local(&b.0)[3].clone();
    let cut: Vec<String> = got.into_iter().filter(|l| !l.contains(&lost)).collect();
    let (ok, out) = verify_received(&cut);
    assert!(
        !ok && out.starts_with("GAPS:") && out.contains("missing from replica-b"),
        "{out}"
    );
    let line_of = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("  {id}:")))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line_of("replica-a").contains("no gaps"), "{out}");
    assert!(
        line_of("replica-b").contains(&format!("missing seq {}", seq(&lost))),
        "{out}"
    );
}
