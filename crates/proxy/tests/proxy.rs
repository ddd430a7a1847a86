//! The proxy as a library: a real listener per call, a real loopback origin, and a recorder
//! that keeps the records in memory, so what it allows, refuses and writes down is checked
//! without a terminal server around it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use safe_mcp_core::audit::{AuditError, CallId, NetworkEvent, NetworkRecord};
use safe_mcp_core::egress::{DomainRule, NetworkMode, NetworkPolicy};
use safe_mcp_core::terminal::EgressProvider;
use safe_mcp_proxy::{Proxy, Recorder};

#[derive(Debug, Default)]
struct Kept(Mutex<Vec<(NetworkRecord, bool)>>);

impl Recorder for Kept {
    fn record(&self, record: &NetworkRecord, durable: bool) -> Result<(), AuditError> {
        self.0.lock().unwrap().push((record.clone(), durable));
        Ok(())
    }
}

/// A policy allowing `origin.test` (pinned to loopback, private addresses allowed) and
/// denying `*.denied.test`.
fn policy() -> NetworkPolicy {
    NetworkPolicy {
        mode: NetworkMode::Allowlist,
        allow: vec![DomainRule::parse("origin.test").unwrap()],
        deny: vec![DomainRule::parse("*.denied.test").unwrap()],
        allow_private: true,
        hosts: BTreeMap::from([(
            "origin.test".to_owned(),
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        )]),
        listen_ports: Vec::new(),
    }
}

/// An origin that answers one plain-HTTP request with `hello`.
fn origin() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    port
}

/// Sends `request` through the call's proxy and returns the answer; then the records.
fn through(request: String) -> (String, Vec<(NetworkRecord, bool)>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let kept = Arc::new(Kept::default());
    let proxy = Proxy::new(policy(), kept.clone());
    let egress = proxy.for_call(&CallId::new("call-1"));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let answer = runtime.block_on(async {
        let guard = egress.0.serve(listener);
        let answer = tokio::task::spawn_blocking(move || {
            let mut client = TcpStream::connect(address).unwrap();
            client.write_all(request.as_bytes()).unwrap();
            let mut answer = String::new();
            let _ = client.read_to_string(&mut answer);
            answer
        })
        .await
        .unwrap();
        drop(guard);
        egress.0.finish().await;
        answer
    });
    let records = kept.0.lock().unwrap().clone();
    (answer, records)
}

#[test]
fn an_allowed_request_is_opened_on_the_record_before_it_flows_and_closed_with_its_bytes() {
    let port = origin();
    let (answer, records) = through(format!(
        "GET http://origin.test:{port}/x HTTP/1.1\r\nHost: origin.test:{port}\r\n\r\n"
    ));
    assert!(answer.ends_with("hello"), "{answer}");
    let events: Vec<_> = records.iter().map(|(r, d)| (r.event, *d)).collect();
    assert_eq!(
        events,
        [(NetworkEvent::Open, true), (NetworkEvent::Close, false)],
        "{records:?}"
    );
    let open = &records[0].0;
    assert_eq!((open.host.as_str(), open.port), ("origin.test", port));
    assert_eq!(open.rule, "origin.test");
    assert_eq!(open.address.as_deref(), Some(&*format!("127.0.0.1:{port}")));
    assert!(records[1].0.bytes_down.unwrap() >= 5);
}

#[test]
fn a_denied_or_unlisted_host_is_refused_and_recorded_with_its_rule() {
    for (host, rule) in [
        ("a.denied.test", "*.denied.test"),
        ("elsewhere.test", "not-allowed"),
    ] {
        let (answer, records) = through(format!("CONNECT {host}:443 HTTP/1.1\r\n\r\n"));
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(
            answer.contains(&format!("X-Safe-Mcp-Refusal: {rule}")),
            "{answer}"
        );
        assert_eq!(records.len(), 1, "{records:?}");
        let (record, durable) = &records[0];
        assert_eq!(
            (record.event, record.rule.as_str()),
            (NetworkEvent::Refused, rule)
        );
        assert_eq!((record.host.as_str(), record.port), (host, 443));
        assert!(!durable);
    }
}

#[test]
fn a_host_header_naming_another_host_than_the_request_line_is_refused() {
    let port = origin();
    let (answer, records) = through(format!(
        "GET http://origin.test:{port}/ HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n"
    ));
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].0.rule, "bad-request");
}
